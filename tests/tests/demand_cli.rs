//! `culprit demand` on hand-built traces written as trace directories: an alarm where a
//! server's demand jumps, its HTML page rendered in headless Chromium, and bad input (a
//! trace without sockets, too few intervals) answered with clear messages.

use analyzer::decode::{write_trace_dir, TraceBuilder};
use bufpool::format::{Addr, LibFn, LibOpts};
use std::path::Path;
use std::time::Duration;

fn culprit(args: &[&str]) -> tests::RunOutput {
    tests::run_with_deadline(
        std::process::Command::new(tests::culprit()).args(args),
        Duration::from_secs(60),
    )
}

fn o(fd: i32, ret: i64) -> LibOpts {
    LibOpts {
        fd: Some(fd),
        ret: Some(ret),
        len: Some(8),
        ..Default::default()
    }
}

/// A server on port 8080 answering `per[j]` requests in second `j`, each taking `d(j)` ns.
fn server(dir: &Path, seconds: usize, d: impl Fn(usize) -> u64) {
    let mut t = TraceBuilder::new("h", 100, 100);
    let local = Some(Addr::new(2, 8080, &[127, 0, 0, 1]));
    t.lib(
        0x10,
        LibFn::Socket,
        LibOpts {
            ret: Some(3),
            ..Default::default()
        },
    );
    t.lib(0x20, LibFn::Bind, LibOpts { local, ..o(3, 0) });
    t.lib(0x30, LibFn::Listen, o(3, 0));
    t.lib(0x40, LibFn::Accept, LibOpts { local, ..o(3, 4) });
    for j in 0..seconds {
        let start = t.now();
        let n = 5 + (j * 7) % 11;
        for _ in 0..n {
            t.lib(0x50, LibFn::Recv, o(4, 8));
            t.wait(d(j));
            t.lib(0x60, LibFn::Send, o(4, 8));
            t.wait(1_000_000);
        }
        // On to the next second.
        let used = t.now() - start;
        t.wait(1_000_000_000 - used);
    }
    write_trace_dir(dir, "h", &[t.finish()]).unwrap();
}

#[test]
fn a_demand_jump_raises_alarms_drawn_on_the_page() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("trace");
    // 10 ms per request, 40 ms from second 20 on.
    server(&dir, 30, |j| {
        if j < 20 {
            10_000_000 + (j as u64 % 3) * 200_000
        } else {
            40_000_000
        }
    });
    let html = tmp.path().join("demand.html");
    let r = culprit(&[
        "demand",
        dir.to_str().unwrap(),
        "--json",
        "--html",
        html.to_str().unwrap(),
    ]);
    r.assert_success("culprit demand");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let p = &v["processes"][0];
    assert_eq!(p["pid"], 100);
    assert!(
        p["services"][0]["id"]
            .as_str()
            .unwrap()
            .starts_with("port:8080#"),
        "{p}"
    );
    // The request type is named by what tells it apart (here only its sizes).
    assert_eq!(
        p["services"][0]["name"], "port:8080: request ~8 B, reply ~8 B",
        "{p}"
    );
    assert_eq!(v["services_mode"], "auto");
    let d = p["services"][0]["demand_s"].as_f64().unwrap();
    assert!((d - 0.0102).abs() < 0.0005, "{d}");
    let alarms = p["alarms"].as_array().unwrap();
    assert_eq!(alarms.len(), 1, "{alarms:?}");
    // Raised as the third violating interval (second 22) closes.
    let t0 = v["t0_unix_ns"].as_i64().unwrap();
    let at = (alarms[0]["t_unix_ns"].as_i64().unwrap() - t0) as f64 * 1e-9;
    assert!((22.0..=24.0).contains(&at), "alarm at {at} s");
    assert!(alarms[0]["residual_s"].as_f64().unwrap() > alarms[0]["limit_s"].as_f64().unwrap());
    // The page: both charts, the alarm marked, no script error.
    let Some(page) = tests::browser::render(&html) else {
        return;
    };
    assert!(page.errors.is_empty(), "{:?}", page.errors);
    assert!(page.dom.contains("class=\"demand-chart\""));
    assert!(page.dom.contains("class=\"residual-chart\""));
    assert!(page.dom.contains("class=\"alarm-mark\""));
    assert!(page.dom.contains("1 alarm(s)"));
    // --follow on a finished recording: one round, the alarm printed once, then it stops.
    let r = culprit(&["demand", dir.to_str().unwrap(), "--follow"]);
    r.assert_success("culprit demand --follow");
    assert_eq!(r.stdout.matches("ALARM h:100").count(), 1, "{}", r.stdout);
    let r = culprit(&["demand", dir.to_str().unwrap(), "--follow", "--json"]);
    r.assert_success("culprit demand --follow --json");
    let line: serde_json::Value = serde_json::from_str(r.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(line["pid"], 100);
    assert!(line["residual_s"].as_f64().unwrap() > line["limit_s"].as_f64().unwrap());
    // Text: the table and the alarm.
    let r = culprit(&["demand", dir.to_str().unwrap()]);
    r.assert_success("culprit demand (text)");
    assert!(
        r.stdout.contains("port:8080") && r.stdout.contains("alarms (residual > 3σ̂"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_baseline_run_trains_the_chart() {
    let tmp = tempfile::tempdir().unwrap();
    let normal = tmp.path().join("normal");
    let bad = tmp.path().join("bad");
    server(&normal, 12, |j| 10_000_000 + (j as u64 % 3) * 200_000);
    // Slow from the very start: only a baseline can tell.
    server(&bad, 8, |_| 30_000_000);
    let r = culprit(&[
        "demand",
        bad.to_str().unwrap(),
        "--json",
        "--baseline",
        normal.to_str().unwrap(),
    ]);
    r.assert_success("culprit demand --baseline");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(v["train"].as_str().unwrap().starts_with("baseline run"));
    let p = &v["processes"][0];
    let d = p["services"][0]["demand_s"].as_f64().unwrap();
    assert!((d - 0.0102).abs() < 0.0005, "demand from the baseline: {d}");
    // Every interval is watched: the first alarm closes with the third.
    let alarms = p["alarms"].as_array().unwrap();
    assert_eq!(alarms.len(), 1, "{alarms:?}");
    let t0 = v["t0_unix_ns"].as_i64().unwrap();
    let at = (alarms[0]["t_unix_ns"].as_i64().unwrap() - t0) as f64 * 1e-9;
    assert!((2.0..=4.0).contains(&at), "alarm at {at} s");
    // The baseline itself against itself: no alarm.
    let r = culprit(&[
        "demand",
        normal.to_str().unwrap(),
        "--json",
        "--baseline",
        normal.to_str().unwrap(),
    ]);
    r.assert_success("culprit demand --baseline (same run)");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["processes"][0]["alarms"].as_array().unwrap().len(), 0);
}

#[test]
fn bad_input_gets_clear_messages() {
    let tmp = tempfile::tempdir().unwrap();
    // No sockets at all.
    let dir = tmp.path().join("nosock");
    let mut t = TraceBuilder::new("h", 7, 7);
    t.enter(0x10, 0x20);
    t.exit(0x20);
    write_trace_dir(&dir, "h", &[t.finish()]).unwrap();
    let r = culprit(&["demand", dir.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(2), "{r:?}");
    assert!(r.stderr.contains("no socket calls"), "{}", r.stderr);
    assert!(!r.stderr.contains("panicked"));
    // Too few intervals: demands, a note, no alarm, no NaN.
    let dir = tmp.path().join("short");
    server(&dir, 2, |_| 10_000_000);
    let r = culprit(&["demand", dir.to_str().unwrap(), "--json"]);
    r.assert_success("culprit demand on 2 s");
    assert!(r.stdout.contains("too few intervals"), "{}", r.stdout);
    assert!(!r.stdout.contains("NaN"));
    // Not a trace directory, bad flags.
    let r = culprit(&["demand", tmp.path().join("none").to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(2));
    assert!(r.stderr.contains("none"), "{}", r.stderr);
    let r = culprit(&["demand", dir.to_str().unwrap(), "--train", "2"]);
    assert_eq!(r.status.code(), Some(2));
    assert!(r.stderr.contains("--train"), "{}", r.stderr);
}

/// `--follow`'s alarms freeze a snapshot of the directory, as `culprit watch`'s reports
/// do (`--keep-around`, `--snapshots`): the snapshot reads back with the same alarm.
/// Without --follow the two flags are refused.
#[test]
fn follow_alarms_freeze_a_snapshot_around_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("trace");
    let noisy = |j: usize| 10_000_000 + (j as u64 % 3) * 200_000;
    server(&dir, 30, |j| if j < 20 { noisy(j) } else { 40_000_000 });
    let snaps = tmp.path().join("snaps");
    let r = culprit(&[
        "demand",
        dir.to_str().unwrap(),
        "--follow",
        "--keep-around",
        "0",
        "--snapshots",
        snaps.to_str().unwrap(),
    ]);
    r.assert_success("culprit demand --follow --keep-around 0");
    assert_eq!(r.stdout.matches("ALARM h:100").count(), 1, "{}", r.stdout);
    let taken: Vec<_> = std::fs::read_dir(&snaps)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(taken.len(), 1, "{taken:?}\n{}", r.stderr);
    assert!(
        taken[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("trace.demand-"),
        "{taken:?}"
    );
    assert!(
        r.stderr.contains("culprit: demand: snapshot in"),
        "{}",
        r.stderr
    );
    let again = culprit(&["demand", taken[0].to_str().unwrap(), "--follow"]);
    again.assert_success("culprit demand --follow of the snapshot");
    assert_eq!(
        again.stdout.matches("ALARM h:100").count(),
        1,
        "{}",
        again.stdout
    );
    // No alarm, no snapshot.
    let calm = tmp.path().join("calm");
    server(&calm, 30, noisy);
    let calm_snaps = tmp.path().join("calm-snaps");
    culprit(&[
        "demand",
        calm.to_str().unwrap(),
        "--follow",
        "--keep-around",
        "0",
        "--snapshots",
        calm_snaps.to_str().unwrap(),
    ])
    .assert_success("culprit demand --follow (no alarm)");
    assert_eq!(std::fs::read_dir(&calm_snaps).unwrap().count(), 0);
    let r = culprit(&["demand", dir.to_str().unwrap(), "--keep-around", "1s"]);
    assert!(!r.status.success());
    assert!(r.stderr.contains("go with --follow"), "{}", r.stderr);
}
