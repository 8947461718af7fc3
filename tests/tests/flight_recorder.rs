//! `culprit record --keep`: a program that makes far more traced calls than the budget
//! holds. While it runs, the trace directory never passes the budget (plus one sub-buffer
//! per writer); SIGUSR1 to the recorder freezes a snapshot beside it; at the end, the
//! directory and the snapshot read without damage, each analysis says what was rotated
//! away, and the process's metadata (its executable, from a record written at its start
//! and long rotated away) is still there.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use tests::*;

/// Sends and receives 64 bytes on a socket pair, `argv[1]` times.
const CHATTY: &str = r#"
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int sv[2];
    if (argc < 2 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 2;
    long n = atol(argv[1]);
    char buf[64] = {0};
    for (long i = 0; i < n; i++) {
        if (send(sv[0], buf, sizeof buf, 0) != (ssize_t)sizeof buf) return 3;
        if (recv(sv[1], buf, sizeof buf, 0) != (ssize_t)sizeof buf) return 4;
        if (i % 20000 == 0) usleep(20000);
    }
    return 0;
}
"#;

const BUDGET: u64 = 4 << 20;
const SUBBUF: u64 = 256 << 10;

fn dir_bytes(dir: &Path) -> u64 {
    let mut n = 0;
    for sub in [dir.to_path_buf(), dir.join("chunks")] {
        if let Ok(rd) = std::fs::read_dir(&sub) {
            for e in rd.flatten() {
                if let Ok(m) = e.metadata() {
                    if m.is_file() {
                        n += m.len();
                    }
                }
            }
        }
    }
    n
}

#[test]
fn a_flight_recorder_stays_within_its_budget_and_its_window_decodes() {
    if libtrace_or_skip("flight_recorder").is_none() {
        return;
    }
    let prog = compile_c("chatty", CHATTY, &[]);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    let mut child = Guarded::spawn(
        Command::new(culprit())
            .args(["record", "--keep", "4M", "-o"])
            .arg(&out)
            .arg("--")
            .arg(&prog.path)
            .arg("400000"),
    );
    let t0 = Instant::now();
    let mut max = 0;
    let mut snapped = false;
    let status = loop {
        max = max.max(dir_bytes(&out));
        // Half full: rotation starts a segment below the budget, so the directory may
        // never pass it.
        if !snapped && max > BUDGET / 2 && t0.elapsed() > Duration::from_millis(500) {
            // SAFETY: kill(2) on the recorder this test started.
            unsafe { libc::kill(child.pid() as i32, libc::SIGUSR1) };
            snapped = true;
        }
        if let Some(s) = child.wait_for(Duration::from_millis(5)) {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "recording did not end"
        );
    };
    assert!(status.success(), "culprit record: {status:?}");
    assert!(
        snapped,
        "the directory never filled its budget ({max} bytes)"
    );
    assert!(
        max <= BUDGET + 3 * SUBBUF,
        "the directory reached {max} bytes with --keep {BUDGET}"
    );
    // The analyses read it like any other directory and say what was rotated away.
    let dump = run_with_deadline(
        Command::new(culprit()).args(["dump", "--json"]).arg(&out),
        Duration::from_secs(60),
    );
    dump.assert_success("culprit dump");
    let err = &dump.stderr;
    assert!(err.contains("flight recorder"), "{err}");
    assert!(!err.contains("warning"), "{err}");
    let text = &dump.stdout;
    assert!(
        text.contains("chatty"),
        "the process record was rotated away"
    );
    let rotated: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("rotated.json")).unwrap()).unwrap();
    assert!(rotated["entries"].as_u64().unwrap() > 100_000, "{rotated}");
    // The snapshot SIGUSR1 asked for lies beside the directory and reads without damage.
    let snap = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("t.snapshot-"))
        .expect("no snapshot beside the trace directory");
    let dump = run_with_deadline(
        Command::new(culprit()).args(["dump"]).arg(&snap),
        Duration::from_secs(60),
    );
    dump.assert_success("culprit dump of the snapshot");
    let err = &dump.stderr;
    assert!(!err.contains("warning"), "{err}");
    assert!(dump.stdout.contains("send"));
}
