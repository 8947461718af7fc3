//! Damage costs only itself, end to end (issue 18): `culprit dump`, `learn`, `rank` and
//! `show` skip a damaged chunk record with one warning line naming the file, and carry on;
//! `--strict` makes the same damage an error; `culprit repair` removes what a full disk
//! left. The trace is a real `culprit record` of a small shell pipeline.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tests::*;

const DEADLINE: Duration = Duration::from_secs(60);

fn culprit_run(args: &[&str]) -> RunOutput {
    run_with_deadline(Command::new(culprit()).args(args), DEADLINE)
}

fn record(out: &Path) {
    let o = out.to_str().unwrap();
    culprit_run(&[
        "record",
        "--subbufs",
        "8",
        "--subbuf-size",
        "8K",
        "-o",
        o,
        "--",
        "sh",
        "-c",
        "ls / >/dev/null; ls /usr >/dev/null; cat /dev/null",
    ])
    .assert_success("culprit record");
}

fn chunks(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("chunks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("culprit: warning:"))
        .collect()
}

#[test]
fn analysis_commands_skip_a_damaged_record_with_one_warning_and_strict_refuses() {
    if libtrace_or_skip("analysis_commands_skip_a_damaged_record").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    record(&dir);
    let d = dir.to_str().unwrap();
    let full = culprit_run(&["dump", "--json", d]);
    full.assert_success("dump of the good trace");
    assert!(warnings(&full.stderr).is_empty(), "{}", full.stderr);
    let model = tmp.path().join("m.model");
    let m = model.to_str().unwrap();
    culprit_run(&["learn", d, "-o", m]).assert_success("learn");

    // Flip a data byte of the first record of the largest chunk file.
    let chunk = chunks(&dir)
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut b = std::fs::read(&chunk).unwrap();
    b[32 + 80 + 3] ^= 0x20;
    std::fs::write(&chunk, &b).unwrap();
    let name = chunk.file_name().unwrap().to_str().unwrap();

    let dump = culprit_run(&["dump", "--json", d]);
    dump.assert_success("dump of the damaged trace");
    let w = warnings(&dump.stderr);
    assert!(
        w.iter()
            .any(|l| l.contains(name) && l.contains("checksum mismatch") && l.contains("1 record")),
        "{}",
        dump.stderr
    );
    assert!(dump.stdout.lines().count() < full.stdout.lines().count());
    assert!(dump.stdout.lines().count() > 0, "the rest is still dumped");

    let model2 = tmp.path().join("m2.model");
    let learn = culprit_run(&["learn", d, "-o", model2.to_str().unwrap()]);
    learn.assert_success("learn from the damaged trace");
    assert!(
        warnings(&learn.stderr).iter().any(|l| l.contains(name)),
        "{}",
        learn.stderr
    );
    culprit_run(&["rank", "--model", m, d]).assert_success("rank of the damaged trace");

    for args in [
        vec!["dump", "--strict", d],
        vec!["learn", "--strict", d, "-o", "/dev/null"],
        vec!["rank", "--strict", "--model", m, d],
    ] {
        let r = culprit_run(&args);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains(name) && r.stderr.contains("checksum mismatch"),
            "{args:?}: {}",
            r.stderr
        );
    }
}

#[test]
fn repair_removes_the_empty_chunk_a_full_disk_left() {
    if libtrace_or_skip("repair_removes_the_empty_chunk_a_full_disk_left").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    record(&dir);
    let d = dir.to_str().unwrap();
    let empty = dir.join("chunks").join("4194303-0-1.chunk");
    std::fs::write(&empty, b"").unwrap();
    let dump = culprit_run(&["dump", d]);
    dump.assert_success("dump with a 0-byte chunk");
    assert!(
        warnings(&dump.stderr)
            .iter()
            .any(|l| l.contains("4194303-0-1.chunk") && l.contains("culprit repair")),
        "{}",
        dump.stderr
    );
    culprit_run(&["repair", d]).assert_success("repair");
    assert!(!empty.exists());
    let again = culprit_run(&["repair", d]);
    again.assert_success("repair again");
    assert!(
        again.stderr.contains("nothing to repair"),
        "{}",
        again.stderr
    );
    let r = culprit_run(&["dump", "--strict", d]);
    r.assert_success("dump --strict after repair");
    assert!(warnings(&r.stderr).is_empty(), "{}", r.stderr);
}
