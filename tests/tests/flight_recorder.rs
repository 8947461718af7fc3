//! `culprit record --keep`: a program that makes far more traced calls than the budget
//! holds. While it runs, the trace directory never passes the budget (plus one sub-buffer
//! per traced thread); SIGUSR1 to the recorder freezes a snapshot beside it; at the end, the
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
    eprintln!("the directory reached at most {max} bytes (--keep {BUDGET})");
    // The issue's bound: the budget plus one sub-buffer per traced thread (one here).
    // Before the live copier's polls were held to what they reserved and rotations kept
    // room for what they carry, loaded runs of a debug build passed it (by 1.07 and 2.02
    // sub-buffers in two whole-suite runs; 3 of 18 runs beside busy loops went over the
    // budget itself, 7 of 34 with the second rule alone); with both, 0 of 28
    // (reader/src/keep.rs).
    assert!(
        max <= BUDGET + SUBBUF,
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

/// An event loop: `poll` a socket pair's end, then `recv` what the other end sent,
/// `argv[1]` times.
const LOOPING: &str = r#"
#include <poll.h>
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
        struct pollfd p = {.fd = sv[1], .events = POLLIN};
        if (poll(&p, 1, 1000) != 1) return 4;
        if (recv(sv[1], buf, sizeof buf, 0) != (ssize_t)sizeof buf) return 5;
    }
    return 0;
}
"#;

/// A recording whose beginning the flight recorder rotated away: the first unit of the
/// thread (its beginning is not in the trace) is listed, marked `cut_at_start`, with the
/// verdict `began_before_window` and score 0 — never ranked as an anomaly — and the
/// text says so; every other unit is scored against its model as usual: the socket pair
/// its handlers receive on, created long before the window, is still known (the calls
/// that say what a descriptor is survive rotation).
#[test]
fn units_cut_at_the_windows_start_are_marked_not_scored() {
    if libtrace_or_skip("units_cut_at_the_windows_start").is_none() {
        return;
    }
    let prog = compile_c("looping", LOOPING, &[]);
    let tmp = tempfile::tempdir().unwrap();
    let normal = tmp.path().join("normal");
    let rec = run_with_deadline(
        Command::new(culprit())
            .args(["record", "-o"])
            .arg(&normal)
            .arg("--")
            .arg(&prog.path)
            .arg("3000"),
        Duration::from_secs(120),
    );
    rec.assert_success("culprit record (normal)");
    let model = tmp.path().join("m.cpm");
    run_with_deadline(
        Command::new(culprit())
            .arg("learn")
            .arg(&normal)
            .arg("-o")
            .arg(&model),
        Duration::from_secs(120),
    )
    .assert_success("culprit learn");
    let kept = tmp.path().join("kept");
    run_with_deadline(
        Command::new(culprit())
            .args(["record", "--keep", "2M", "-o"])
            .arg(&kept)
            .arg("--")
            .arg(&prog.path)
            .arg("200000"),
        Duration::from_secs(300),
    )
    .assert_success("culprit record --keep 2M");
    let rotated: serde_json::Value =
        serde_json::from_slice(&std::fs::read(kept.join("rotated.json")).unwrap()).unwrap();
    assert!(rotated["entries"].as_u64().unwrap() > 0, "{rotated}");
    let rank = |extra: &[&str]| {
        let r = run_with_deadline(
            Command::new(culprit())
                .args(["rank", "--model"])
                .arg(&model)
                .args(extra)
                .arg(&kept),
            Duration::from_secs(120),
        );
        r.assert_success("culprit rank");
        r.stdout
    };
    let units: Vec<serde_json::Value> =
        serde_json::from_str(&rank(&["--json", "--top", "1000000"])).unwrap();
    assert!(units.len() > 10, "{} units", units.len());
    let cut: Vec<_> = units.iter().filter(|u| u["cut_at_start"] == true).collect();
    assert_eq!(
        cut.len(),
        1,
        "one thread, one unit cut at its start: {cut:?}"
    );
    let c = cut[0];
    assert_eq!(c["score"], 0.0, "{c}");
    assert_eq!(c["verdict"], "began_before_window", "{c}");
    let first_start = units
        .iter()
        .map(|u| u["t_start_unix_ns"].as_i64().unwrap())
        .min()
        .unwrap();
    assert_eq!(c["t_start_unix_ns"].as_i64().unwrap(), first_start, "{c}");
    let unscored: Vec<_> = units
        .iter()
        .filter(|u| u["cut_at_start"] == false && u["verdict"] != "scored")
        .take(3)
        .collect();
    assert!(
        unscored.is_empty(),
        "units not compared with a model: {unscored:?}"
    );
    let text = rank(&["--top", "1000000"]);
    assert!(
        text.contains("1 units began before the trace's window"),
        "{}",
        &text[..text.len().min(2000)]
    );
}
