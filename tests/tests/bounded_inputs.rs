//! Inputs that used to hang, exhaust memory or spin (issue 27, defects 5, 7 and 11): a
//! FIFO, a device or a directory where a file is read, a sparse giant model, numeric
//! flags that are infinite or not a number. Each is refused at once or, for `cpu.tsv`
//! (an addition to `demand`), dropped with one warning. Memory is measured as the
//! child's peak RSS (`wait4`), never time: the deadline only keeps a hang from hanging
//! the suite.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tests::{culprit, run_with_deadline, RunOutput};

const DEADLINE: Duration = Duration::from_secs(60);

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Samples a small shell job (as `tests/ioshare_cli.rs` does).
fn sample(dir: &Path) -> PathBuf {
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
        DEADLINE,
    );
    out.assert_success("iosample");
    f
}

fn ioshare(f: &Path, extra: &[&str]) -> RunOutput {
    run_with_deadline(
        Command::new(culprit())
            .arg("ioshare")
            .arg(f)
            .args(["--server", "sh"])
            .args(extra),
        DEADLINE,
    )
}

/// Defect 11: `--prior inf` (or 1e308) spun for minutes; NaN was taken for `--prior`,
/// `--threshold` and `--segment-penalty`.
#[test]
fn numeric_flags_must_be_finite_and_in_range() {
    let tmp = tempfile::tempdir().unwrap();
    let f = sample(tmp.path());
    for (flag, v) in [
        ("--prior", "inf"),
        ("--prior", "1e308"),
        ("--prior", "NaN"),
        ("--prior", "-1"),
        ("--threshold", "NaN"),
        ("--threshold", "2"),
        ("--segment-penalty", "NaN"),
        ("--segment-penalty", "inf"),
        ("--window", "1e30"),
    ] {
        let r = ioshare(&f, &[&format!("{flag}={v}")]);
        assert!(!r.timed_out, "{flag} {v}: still running after {DEADLINE:?}");
        assert_eq!(r.status.code(), Some(2), "{flag} {v}: {}", r.stderr);
        assert!(r.stderr.contains(flag), "{flag} {v}: {}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "{flag} {v}: {}", r.stderr);
    }
    // The largest weight accepted runs to its end.
    let r = ioshare(&f, &["--prior", "1000000"]);
    assert!(
        !r.timed_out,
        "--prior 1000000 still running after {DEADLINE:?}"
    );
    r.assert_success("ioshare --prior 1000000");
    let r = run_with_deadline(
        Command::new(culprit()).args(["demand", "--interval", "1e30s", "x"]),
        DEADLINE,
    );
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("at most a year"), "{}", r.stderr);
}

/// Defect 5: a FIFO as the sample file hung `ioshare`; a link to /dev/zero read until
/// memory ran out.
#[test]
fn a_sample_file_that_is_not_a_regular_file_is_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("x.cios");
    mkfifo(&fifo);
    let zero = tmp.path().join("z.cios");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    for (f, kind) in [(&fifo, "a FIFO"), (&zero, "a character device")] {
        let r = ioshare(f, &[]);
        assert!(!r.timed_out, "{}: hung", f.display());
        assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
        assert!(
            r.stderr.contains(&f.display().to_string()) && r.stderr.contains(kind),
            "{}",
            r.stderr
        );
    }
}

/// Defect 5: `cpu.tsv` as a FIFO hung `demand`; as a directory, or with bytes that are
/// not UTF-8, it failed all of `demand`. Now the CPU times are dropped (a warning for a
/// file that cannot be read, the bad lines skipped) and the rest is as without them.
#[test]
fn a_bad_cpu_file_drops_the_cpu_times_not_demand() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("t");
    let r = run_with_deadline(
        Command::new(culprit())
            .arg("record")
            .arg("-o")
            .arg(&t)
            .args(["--", "sh", "-c", "echo hi > /dev/null; sleep 0.6"]),
        DEADLINE,
    );
    r.assert_success("record");
    let cpu = t.join("cpu.tsv");
    assert!(cpu.is_file(), "the reader sampled no CPU time");
    let demand = || run_with_deadline(Command::new(culprit()).arg("demand").arg(&t), DEADLINE);
    let base = demand();
    assert!(!base.timed_out);
    let good = std::fs::read(&cpu).unwrap();
    // Not UTF-8: the line is skipped, nothing else changes.
    let mut bad = good.clone();
    bad.extend_from_slice(b"\xff\xfe\t1\t2\n");
    std::fs::write(&cpu, &bad).unwrap();
    let r = demand();
    assert_eq!(r.status.code(), base.status.code(), "{}", r.stderr);
    assert_eq!(r.stdout, base.stdout);
    // A directory, a FIFO: one warning naming the file, and demand as without it.
    std::fs::remove_file(&cpu).unwrap();
    std::fs::create_dir(&cpu).unwrap();
    let r = demand();
    assert_eq!(r.status.code(), base.status.code(), "{}", r.stderr);
    assert!(
        r.stderr.contains("cpu.tsv")
            && r.stderr.contains("a directory")
            && r.stderr.contains("CPU times not used"),
        "{}",
        r.stderr
    );
    std::fs::remove_dir(&cpu).unwrap();
    mkfifo(&cpu);
    let r = demand();
    assert!(!r.timed_out, "a FIFO cpu.tsv hung demand");
    assert_eq!(r.status.code(), base.status.code(), "{}", r.stderr);
    assert!(r.stderr.contains("a FIFO"), "{}", r.stderr);
}

/// `cmd`'s exit code, stderr, and peak RSS in KiB (from `wait4`).
fn run_measured(cmd: &mut Command) -> (Option<i32>, String, i64) {
    // Reaped by wait4 below, which also gives its rusage (Child::wait would not).
    #[allow(clippy::zombie_processes)]
    let child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut err = child.stderr.unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        use std::io::Read;
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `pid` is our child, not yet waited for.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, reader.join().unwrap(), ru.ru_maxrss)
}

/// Defect 7: a 3 GB model (a valid start, then a hole) was read whole before the 2 GiB
/// limit refused it: 4.2 GB of RSS. Now its size is checked before a byte is read.
#[test]
fn a_giant_model_is_refused_before_it_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tmp.path().join("m.cpm");
    std::fs::write(&m, b"{\"version\": 3, \"groups\": [").unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&m)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    let (code, stderr, rss_kb) = run_measured(
        Command::new(culprit())
            .args(["rank", "--model"])
            .arg(&m)
            .arg(tmp.path()),
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&m.display().to_string()) && stderr.contains("larger than"),
        "{stderr}"
    );
    assert!(
        rss_kb < 256 << 10,
        "peak RSS {rss_kb} KiB to refuse a model by its size"
    );
}
