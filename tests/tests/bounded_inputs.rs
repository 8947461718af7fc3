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

/// `cmd`'s exit code, stderr, and peak RSS in KiB (from `wait4`).
fn run_measured(cmd: &mut Command) -> (Option<i32>, String, i64) {
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
    assert!(rss_kb < 256 << 10, "peak RSS {rss_kb} KiB to refuse a model by its size");
}
