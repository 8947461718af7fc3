//! Bounded inputs of `culprit record` / `culprit reader` (issue 18): numeric flags have a
//! range, a bad output directory is refused before a pool exists, and a command that
//! cannot be found is said to be not found.
//!
//! Each test runs the built `culprit` with a deadline; none needs `libtrace.so` to record.

use std::process::Command;
use std::time::Duration;
use tests::*;

const DEADLINE: Duration = Duration::from_secs(30);

fn culprit_run(args: &[&str]) -> RunOutput {
    run_with_deadline(Command::new(culprit()).args(args), DEADLINE)
}

/// `culprit record` of `cmd` into `out` with a pool of `subbufs` × 8 KiB.
fn record_tiny(subbufs: &str, out: &std::path::Path, cmd: &[&str]) -> RunOutput {
    let mut args = vec!["record", "--subbufs", subbufs, "--subbuf-size", "8K", "-o"];
    args.push(out.to_str().unwrap());
    args.push("--");
    args.extend(cmd);
    culprit_run(&args)
}

#[test]
fn readers_flag_is_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = tmp.path().join("p.pool");
    let out = tmp.path().join("t");
    for sub in ["record", "reader"] {
        let mut args = vec![sub, "--readers", "100000", "--pool", pool.to_str().unwrap()];
        args.extend(["-o", out.to_str().unwrap()]);
        if sub == "record" {
            args.extend(["--", "true"]);
        } else {
            args.push("--create");
        }
        let r = culprit_run(&args);
        assert!(
            !r.timed_out,
            "{sub}: --readers 100000 must be refused at once"
        );
        assert_eq!(r.status.code(), Some(2), "{sub}: {}", r.stderr);
        assert!(r.stderr.contains("1 to 64"), "{sub}: {}", r.stderr);
        assert!(
            !pool.exists(),
            "{sub}: no pool is created for a refused flag"
        );
    }
    let r = culprit_run(&["record", "--subbufs", "0", "-o", "x", "--", "true"]);
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
}

#[test]
fn bad_output_dir_leaves_no_pool() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = tmp.path().join("p.pool");
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    for out in ["/proc/culprit-no-such-dir", file.to_str().unwrap()] {
        let r = culprit_run(&[
            "record",
            "--pool",
            pool.to_str().unwrap(),
            "-o",
            out,
            "--",
            "true",
        ]);
        assert_eq!(r.status.code(), Some(2), "{out}: {}", r.stderr);
        assert!(
            r.stderr.contains(out),
            "the error names {out}: {}",
            r.stderr
        );
        assert!(!pool.exists(), "{out}: the pool must not be left behind");
    }
}

#[test]
fn a_missing_command_is_reported_as_not_found() {
    if libtrace_or_skip("a_missing_command_is_reported_as_not_found").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    let r = record_tiny("4", &out, &["culprit-no-such-command"]);
    assert_eq!(r.status.code(), Some(127), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("culprit-no-such-command: command not found"),
        "{}",
        r.stderr
    );
}

#[test]
fn real_cc_pointing_at_culprit_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("a.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    let me = culprit();
    let dir = me.parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for real in [me.to_str().unwrap(), "culprit"] {
        let r = run_with_deadline(
            Command::new(&me)
                .args(["cc", "-c"])
                .arg(&src)
                .arg("-o")
                .arg(tmp.path().join("a.o"))
                .env("CULPRIT_REAL_CC", real)
                .env("PATH", &path),
            DEADLINE,
        );
        assert_eq!(r.status.code(), Some(2), "{real}: {}", r.stderr);
        assert!(
            r.stderr.contains("names culprit itself"),
            "{real}: {}",
            r.stderr
        );
    }
}

#[test]
fn learn_and_record_count_entries_alike() {
    if libtrace_or_skip("learn_and_record_count_entries_alike").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    let o = out.to_str().unwrap();
    culprit_run(&["record", "-o", o, "--", "sh", "-c", "ls / >/dev/null"]).assert_success("record");
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    let entries = m["totals"]["entries"].as_u64().unwrap();
    assert!(m["totals"]["meta_records"].as_u64().unwrap() > 0);
    let model = tmp.path().join("m.model");
    let r = culprit_run(&["learn", o, "-o", model.to_str().unwrap()]);
    r.assert_success("learn");
    assert!(
        r.stderr.contains(&format!("({entries} entries,")),
        "record counted {entries} entries: {}",
        r.stderr
    );
}

#[test]
fn reader_create_on_a_torn_trace_says_nothing_false() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    // A trace directory whose only chunk file ends in a torn record.
    let chunks = dir.join("chunks");
    std::fs::create_dir_all(&chunks).unwrap();
    let mut bytes = bytemuck_header(4194300);
    bytes.extend_from_slice(b"CREC\x10\x00\x00\x00");
    std::fs::write(chunks.join("4194300-0-1.chunk"), &bytes).unwrap();
    let pool = tmp.path().join("p.pool");
    let child = Command::new(culprit())
        .args([
            "reader",
            "--create",
            "--subbufs",
            "4",
            "--subbuf-size",
            "8K",
        ])
        .arg("--pool")
        .arg(&pool)
        .arg("-o")
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(10), || pool.exists()));
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: kill has no memory effects; the pid is our child's.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("cut a torn record"), "{err}");
    assert!(!err.contains("saved again"), "{err}");
    assert!(err.contains("culprit repair"), "{err}");
    assert!(!pool.exists());
}

/// A chunk file header (`bufpool/FORMAT.md` §7) of reader `pid`.
fn bytemuck_header(pid: u32) -> Vec<u8> {
    let mut h = b"CULPCHK\x01".to_vec();
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(&32u32.to_le_bytes());
    h.extend_from_slice(&1u64.to_le_bytes());
    h.extend_from_slice(&pid.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    h
}

#[test]
fn output_paths_and_thread_counts_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("out.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let f = fifo.to_str().unwrap();
    let t = tmp.path().to_str().unwrap();
    for args in [
        vec!["learn", t, "-o", f],
        vec!["merge", "x.model", "-o", f],
        vec!["learn", t, "-o", t],
    ] {
        let r = culprit_run(&args);
        assert!(!r.timed_out, "{args:?}: a FIFO output must not block");
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("not a file it can write"),
            "{args:?}: {}",
            r.stderr
        );
    }
    let r = culprit_run(&["learn", "--threads", "100000", t, "-o", "m"]);
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("1 to 1024"), "{}", r.stderr);
}

#[test]
fn metadata_survives_a_tiny_pool() {
    if libtrace_or_skip("metadata_survives_a_tiny_pool").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    let script = "dd if=/dev/zero of=/dev/null bs=1 count=300000 2>/dev/null & \
         for i in 1 2 3; do ls /usr/bin >/dev/null; done; wait; exec cat /dev/null";
    let r = record_tiny("2", &out, &["sh", "-c", script]);
    r.assert_success("record with a 2 × 8 KiB pool");
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    let procs = m["processes"].as_array().unwrap();
    let exes: Vec<&str> = procs.iter().map(|p| p["exe"].as_str().unwrap()).collect();
    // The shell and dd each hold one of the two entry sub-buffers for most of the run
    // (dd's file I/O is not recorded, so it never fills its own): the ls children find
    // none. The shell that exec'd cat is recorded as cat, and every ls child has its
    // exe: the process records went to the metadata area, not dropped (before it,
    // 7 of 12 runs of this dropped 2 or 25 records).
    assert!(exes.iter().any(|e| e.ends_with("/cat")), "{exes:?}");
    assert_eq!(
        exes.iter().filter(|e| e.ends_with("/ls")).count(),
        3,
        "{exes:?}"
    );
    assert!(exes.iter().all(|e| !e.is_empty()), "{exes:?}");
    assert_eq!(m["totals"]["meta_dropped"], 0, "{}", m["totals"]);
}
