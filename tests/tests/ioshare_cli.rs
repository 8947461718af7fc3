//! Bad input to `culprit iosample` and `culprit ioshare`: a missing server process, a
//! truncated sample file, a file that is not one, and another user's processes whose
//! counters cannot be read — clear messages naming the file, partial results kept, no
//! panic.

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tests::{culprit, run_with_deadline, Guarded};

/// Samples a small shell job (a parent that writes, a child that writes and exits).
fn sample(dir: &Path) -> std::path::PathBuf {
    let f = dir.join("io.cios");
    let out = run_with_deadline(
        Command::new(culprit())
            .args(["iosample", "--interval", "50ms", "-o"])
            .arg(&f)
            .args(["--", "sh", "-c"])
            .arg(format!(
                "head -c 200000 /dev/zero > {0}/a; sleep 0.3; head -c 100000 /dev/zero > {0}/b; sleep 0.3",
                dir.display()
            )),
        Duration::from_secs(30),
    );
    out.assert_success("iosample");
    assert!(out.stderr.contains("jitter p50"), "{}", out.stderr);
    f
}

#[test]
fn a_missing_server_is_named_with_what_was_seen() {
    let tmp = tempfile::tempdir().unwrap();
    let f = sample(tmp.path());
    let r = run_with_deadline(
        Command::new(culprit())
            .arg("ioshare")
            .arg(&f)
            .args(["--server", "nfsd"]),
        Duration::from_secs(30),
    );
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "{}: no process matches --server nfsd",
            f.display()
        )) && r.stderr.contains("sh"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

#[test]
fn a_truncated_file_keeps_the_samples_before_the_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let f = sample(tmp.path());
    let bytes = std::fs::read(&f).unwrap();
    let cut = tmp.path().join("cut.cios");
    // Two thirds of the file, inside a record: a cut that falls between two records
    // leaves a whole, shorter file (nothing to warn about), so one byte less is then cut
    // into the record before.
    let mut len = bytes.len() * 2 / 3;
    let (_, tail) = reader::iosample::format::parse_records(&cut, &bytes[..len]).unwrap();
    if tail.why.is_none() {
        len -= 1;
    }
    std::fs::write(&cut, &bytes[..len]).unwrap();
    let r = run_with_deadline(
        Command::new(culprit())
            .arg("ioshare")
            .arg(&cut)
            .args(["--server", "head", "--json"]),
        Duration::from_secs(30),
    );
    // `head` is a (short-lived) "server" here: what matters is that the cut file is read.
    assert!(
        r.stderr.contains(&format!("{}: ", cut.display())) && r.stderr.contains("bytes ignored"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    if r.status.success() {
        let j: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        assert!(j["warnings"][0].as_str().unwrap().contains("bytes ignored"));
    } else {
        assert!(r.stderr.contains("culprit: error:"), "{}", r.stderr);
    }
}

#[test]
fn not_a_sample_file_and_a_missing_file_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let txt = tmp.path().join("notes.txt");
    std::fs::write(&txt, "this is not a sample file at all").unwrap();
    let r = run_with_deadline(
        Command::new(culprit())
            .arg("ioshare")
            .arg(&txt)
            .args(["--server", "x"]),
        Duration::from_secs(10),
    );
    assert_eq!(r.status.code(), Some(2));
    assert!(
        r.stderr
            .contains(&format!("{}: not a Culprit IO-sample file", txt.display())),
        "{}",
        r.stderr
    );
    let missing = tmp.path().join("missing.cios");
    let r = run_with_deadline(
        Command::new(culprit())
            .arg("ioshare")
            .arg(&missing)
            .args(["--server", "x"]),
        Duration::from_secs(10),
    );
    assert_eq!(r.status.code(), Some(2));
    assert!(
        r.stderr
            .contains(&format!("{}: cannot read", missing.display())),
        "{}",
        r.stderr
    );
}

#[test]
fn another_users_counters_denied_are_reported_once_and_the_rest_kept() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/usr/bin/setpriv").exists() {
        tests::skip(
            "ioshare_cli",
            "the permission test",
            "needs root and setpriv to become another user",
        );
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    // A root process the unprivileged sampler may list but not read.
    let root_job = Guarded::spawn(Command::new("sleep").arg("30"));
    let f = tmp.path().join("io.cios");
    let out = run_with_deadline(
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(culprit())
            .args(["iosample", "--interval", "50ms", "--server", "sleep", "-o"])
            .arg(&f)
            .args([
                "--",
                "sh",
                "-c",
                "head -c 50000 /dev/zero > /dev/null; sleep 0.3",
            ]),
        Duration::from_secs(30),
    );
    out.assert_success("unprivileged iosample");
    assert_eq!(
        out.stderr
            .matches("taskstats exit notifications unavailable")
            .count(),
        1,
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("CAP_NET_ADMIN"), "{}", out.stderr);
    assert!(
        out.stderr.contains("permission denied on the counters of")
            && out.stderr.contains("another user's processes"),
        "{}",
        out.stderr
    );
    let log = reader::iosample::SampleLog::open(&f).unwrap();
    let denied = log
        .processes
        .iter()
        .find(|p| p.pid == root_job.pid())
        .unwrap();
    assert!(denied.denied && denied.points.is_empty(), "{denied:?}");
    // The job's own processes were sampled all the same (without taskstats, a child that
    // lives less than an interval may be missed: the note in the file says so).
    assert!(log
        .processes
        .iter()
        .any(|p| p.comm == "sh" && !p.denied && !p.points.is_empty()));
    assert!(log
        .notes
        .iter()
        .any(|n| n.contains("taskstats unavailable")));
}
