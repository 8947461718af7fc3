//! `culprit watch` on the C ring (LD_PRELOAD only) while it is being recorded with a
//! flight recorder: the `recv(8)` of a job header on node 2 returns 3 bytes, node 2 closes
//! its ring connection, node 1 gets the reset, the ring hangs. The watch, started with the
//! recording, must report a unit of node 2 or 1 first, each report after its unit ended
//! and with the fields of `culprit rank --json`, and freeze a snapshot holding it; on a
//! normal run it reports nothing.

#[path = "../e2e/common.rs"]
mod common;

use common::*;
use std::time::{Duration, Instant};

#[test]
fn watch_reports_the_broken_ring_connection_as_it_happens() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let prog = compile_ring(&[]);
    let normal = c_ring_cmd(&prog.path, "60");
    let normal: Vec<&str> = normal.iter().map(String::as_str).collect();
    let dirs = record_normal_runs(tmp.path(), &normal, "watch");
    let model = tmp.path().join("ring.model");
    learn(&dirs[..3], &model, &[]);
    let m = model.to_str().expect("utf-8");

    // A normal run (finished): nothing to report at the default threshold.
    let calm = run_culprit(
        &[
            "watch",
            "--model",
            m,
            "--json",
            dirs[3].to_str().expect("utf-8"),
        ],
        Duration::from_secs(120),
    );
    calm.assert_success("culprit watch of a normal run");
    assert!(
        calm.stdout.trim().is_empty(),
        "reports on a normal run:\n{}",
        calm.stdout
    );

    // The faulty run, watched while it is recorded.
    let faulty = tmp.path().join("faulty");
    let cmd = c_ring_cmd(&prog.path, "5");
    let mut rec = culprit();
    rec.args(["record", "--keep", "8M", "-o"])
        .arg(&faulty)
        .args(["--inject", "recv:short=3,argv=--id 2 --nodes,nth=11", "--"])
        .args(&cmd);
    let mut rec = tests::Guarded::spawn(&mut rec);
    let mut watch = culprit();
    watch
        .args(["watch", "--model", m, "--json", "--interval", "200ms"])
        .args(["--keep-around", "500ms"])
        .arg(&faulty)
        .stdout(std::process::Stdio::piped());
    let mut watch = tests::Guarded::spawn(&mut watch);
    let mut stdout = watch.child.stdout.take().expect("piped");
    let reading = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).expect("read the watch's output");
        s
    });
    let t0 = Instant::now();
    let mut rec_status = None;
    while rec_status.is_none() {
        rec_status = rec.wait_for(Duration::from_millis(100));
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the recording did not end"
        );
    }
    assert_eq!(
        rec_status.unwrap().code(),
        Some(3),
        "the faulty ring did not hang"
    );
    let status = watch.wait_for(Duration::from_secs(120));
    assert!(
        status.is_some_and(|s| s.success()),
        "culprit watch did not end with the recording: {status:?}"
    );
    let out = reading.join().expect("reader thread");
    let reports = tests::parse_json_lines(&out);
    assert!(!reports.is_empty(), "culprit watch reported nothing");
    let ids = ring_ids(&faulty);
    let first = &reports[0];
    let node = ids.get(&pid(first)).copied();
    assert!(
        node == Some(2) || node == Some(1),
        "the first report is not on node 2 or 1 ({node:?}): {first}"
    );
    for r in &reports {
        for field in [
            "id",
            "score",
            "why",
            "t_start_unix_ns",
            "t_end_unix_ns",
            "pid",
        ] {
            assert!(!r[field].is_null(), "report without {field}: {r}");
        }
        assert!(
            r["reported_unix_ns"].as_i64().unwrap() >= r["t_end_unix_ns"].as_i64().unwrap(),
            "reported before its unit ended: {r}"
        );
    }
    // Every report is a unit `culprit rank` knows (nothing was rotated away here, so unit
    // ids are the same; wall-clock times may move by nanoseconds: the final conversion
    // has the recording's last clock snapshot).
    let ranked = rank_json(&model, &faulty);
    for r in &reports {
        assert!(
            ranked.iter().any(|u| u["id"] == r["id"]),
            "a reported unit culprit rank does not know: {r}"
        );
    }
    // The snapshot around the reports holds the first reported unit's process.
    let snap = std::fs::read_dir(tmp.path())
        .expect("list")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("faulty.watch-"))
        .expect("no snapshot taken");
    assert!(
        ring_ids(&snap).contains_key(&pid(first)),
        "the snapshot lacks the reported process"
    );
    // The ring ended by itself: no stop was asked. Had `culprit record` been asked to stop
    // before the fault (`stop.json`, written when it gets SIGINT/SIGTERM), every unit after
    // would be the programs' shutdown: not reported, counted.
    assert!(reader::stopmark::read(&faulty).is_none());
    let first_start = reports
        .iter()
        .filter_map(|r| r["t_start_unix_ns"].as_i64())
        .min()
        .expect("times");
    reader::stopmark::write(
        &faulty,
        &reader::stopmark::StopMark {
            unix_ns: first_start,
            signal: libc::SIGINT,
        },
    )
    .expect("write stop.json");
    let stopped = run_culprit(
        &[
            "watch",
            "--model",
            m,
            "--json",
            faulty.to_str().expect("utf-8"),
        ],
        Duration::from_secs(120),
    );
    stopped.assert_success("culprit watch of a recording asked to stop");
    let after = tests::parse_json_lines(&stopped.stdout);
    assert!(
        after
            .iter()
            .all(|r| r["t_end_unix_ns"].as_i64() < Some(first_start)),
        "units that ended after the stop reported:\n{}",
        stopped.stdout
    );
    assert!(
        stopped
            .stderr
            .contains("not reported: they ended after their recording was asked to stop"),
        "the units after the stop not counted:\n{}",
        stopped.stderr
    );
}
