//! The manifest only describes the chunk files (issue 27): a damaged `manifest.json`
//! (empty, cut short, not JSON, a field missing, deleted) costs no chunk — every command
//! reads the chunks with one warning and `culprit repair` rebuilds it from them — and
//! `culprit repair` run while a recording still writes the directory leaves it alone
//! (it marked it complete with the counts of that moment, which then stayed stale); a
//! complete manifest counting fewer sub-buffers than the chunks hold is reported as stale
//! and recounted by `repair`. Real `culprit record` runs.

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tests::*;

const DEADLINE: Duration = Duration::from_secs(90);

fn culprit_run(args: &[&str]) -> RunOutput {
    run_with_deadline(Command::new(culprit()).args(args), DEADLINE)
}

fn warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("culprit: warning:"))
        .collect()
}

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn a_damaged_manifest_costs_no_chunk_and_repair_rebuilds_it() {
    if libtrace_or_skip("a_damaged_manifest_costs_no_chunk").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good");
    // Three process starts: three clock records, from which a lost calibration is told
    // again.
    culprit_run(&[
        "record",
        "-o",
        good.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "ls / >/dev/null; ls /usr >/dev/null",
    ])
    .assert_success("culprit record");
    let g = good.to_str().unwrap();
    let dump = culprit_run(&["dump", "--json", g]);
    dump.assert_success("dump");
    let lines = dump.stdout.lines().count();
    let first_ns = |out: &str| -> i64 {
        let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
        v["t_unix_ns"].as_i64().unwrap()
    };
    let t0 = first_ns(&dump.stdout);
    let want = manifest(&good);
    let text = std::fs::read_to_string(good.join("manifest.json")).unwrap();
    let without = |k: &str| {
        let mut v = want.clone();
        v.as_object_mut().unwrap().remove(k);
        v.to_string()
    };
    let variants: Vec<(&str, Option<String>)> = vec![
        ("empty", Some(String::new())),
        ("truncated", Some(text[..text.len() / 2].to_string())),
        ("not JSON", Some("\u{1}garbage".into())),
        ("without totals", Some(without("totals"))),
        ("without processes", Some(without("processes"))),
        ("without calibration", Some(without("calibration"))),
        ("deleted", None),
    ];
    for (i, (what, bytes)) in variants.into_iter().enumerate() {
        let dir = tmp.path().join(format!("v{i}"));
        copy_dir(&good, &dir);
        let d = dir.to_str().unwrap();
        match bytes {
            Some(b) => std::fs::write(dir.join("manifest.json"), b).unwrap(),
            None => std::fs::remove_file(dir.join("manifest.json")).unwrap(),
        }
        let r = culprit_run(&["dump", "--json", d]);
        r.assert_success(what);
        let w = warnings(&r.stderr);
        assert!(
            w.len() == 1 && w[0].contains("manifest.json") && w[0].contains("culprit repair"),
            "{what}: {}",
            r.stderr
        );
        assert_eq!(r.stdout.lines().count(), lines, "{what}: every entry");
        // Wall-clock times: the manifest's calibration, or one told again from the
        // clock records (within a millisecond).
        assert!((first_ns(&r.stdout) - t0).abs() < 1_000_000, "{what}");
        let m = tmp.path().join(format!("m{i}"));
        let l = culprit_run(&["learn", d, "-o", m.to_str().unwrap()]);
        l.assert_success(what);
        assert_eq!(warnings(&l.stderr).len(), 1, "{what}: {}", l.stderr);
        let strict = culprit_run(&["dump", "--strict", d]);
        assert_eq!(strict.status.code(), Some(2), "{what}: {}", strict.stderr);

        let rep = culprit_run(&["repair", d]);
        rep.assert_success(what);
        assert!(
            rep.stderr.contains("rewrote the manifest") && rep.stderr.contains("damaged"),
            "{what}: {}",
            rep.stderr
        );
        let m = manifest(&dir);
        assert_eq!(m["complete"], true, "{what}");
        for k in [
            "subbufs",
            "entries",
            "meta_records",
            "bytes",
            "processes",
            "threads",
        ] {
            assert_eq!(m["totals"][k], want["totals"][k], "{what}: {k}");
        }
        assert_eq!(
            m["processes"].as_array().unwrap().len(),
            want["processes"].as_array().unwrap().len(),
            "{what}"
        );
        let r = culprit_run(&["dump", "--strict", "--json", d]);
        r.assert_success(what);
        assert!(warnings(&r.stderr).is_empty(), "{what}: {}", r.stderr);
        assert_eq!(r.stdout.lines().count(), lines, "{what}");
        let again = culprit_run(&["repair", d]);
        again.assert_success(what);
        assert!(
            again.stderr.contains("nothing to repair"),
            "{what}: {}",
            again.stderr
        );
    }
}

#[test]
fn repair_during_a_recording_leaves_it_alone_and_stale_counts_are_found() {
    if libtrace_or_skip("repair_during_a_recording_leaves_it_alone").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let go = tmp.path().join("go");
    let d = dir.to_str().unwrap();
    // The traced command waits for the test: the recording is live for as long as the
    // test needs, whatever the machine's speed.
    let script = format!(
        "ls / >/dev/null; while [ ! -e {} ]; do sleep 0.05; done; ls /usr >/dev/null",
        go.display()
    );
    let mut rec = Guarded::spawn(
        Command::new(culprit())
            .args(["record", "--subbufs", "8", "--subbuf-size", "8K", "-o", d])
            .args(["--", "sh", "-c", &script])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
    );
    assert!(wait_until(DEADLINE, || dir.join("manifest.json").exists()));
    let r = culprit_run(&["repair", d]);
    r.assert_success("repair during the recording");
    assert!(r.stderr.contains("still being written"), "{}", r.stderr);
    assert_eq!(manifest(&dir)["complete"], false, "{}", r.stderr);
    std::fs::write(&go, b"").unwrap();
    let st = rec.wait_for(DEADLINE).expect("the recording ends");
    assert!(st.success());
    let done = manifest(&dir);
    assert_eq!(done["complete"], true);
    let r = culprit_run(&["dump", d]);
    r.assert_success("dump");
    assert!(warnings(&r.stderr).is_empty(), "{}", r.stderr);

    // Counts below what the chunks hold: a manifest written before the recording ended
    // (as a repair during it wrote, before the recorder died).
    let mut stale = done.clone();
    stale["totals"]["subbufs"] = 1.into();
    for p in stale["processes"].as_array_mut().unwrap() {
        p["subbufs"] = 0.into();
    }
    std::fs::write(dir.join("manifest.json"), stale.to_string()).unwrap();
    let r = culprit_run(&["dump", d]);
    r.assert_success("dump with stale counts");
    let w = warnings(&r.stderr);
    assert!(
        w.len() == 1 && w[0].contains("manifest.json") && w[0].contains("stale"),
        "{}",
        r.stderr
    );
    let r = culprit_run(&["repair", d]);
    r.assert_success("repair of stale counts");
    assert!(r.stderr.contains("stale"), "{}", r.stderr);
    let fixed = manifest(&dir);
    assert_eq!(fixed["totals"]["subbufs"], done["totals"]["subbufs"]);
    assert_eq!(fixed["processes"], done["processes"]);
    let r = culprit_run(&["dump", "--strict", d]);
    r.assert_success("dump --strict after repair");
}
