//! `culprit messages` and `culprit export` on recorded real programs (loopback, bounded):
//! the C ring (normal and with a short receive injected), the Python ring. On every
//! connection whose two ends were traced and that was not reset, matched bytes = bytes
//! sent = bytes received; on one host no matched receive ends before its send began. The
//! Perfetto export is decoded with the official schema (`perfetto_trace_pb2` from PyPI):
//! its flows are the matched messages and its library-call slices the recorded calls.
//! Bad input gets a clear error naming the file.

#[path = "../e2e/common.rs"]
mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn messages_json(dirs: &[&Path]) -> Value {
    let mut args = vec!["messages", "--json"];
    args.extend(dirs.iter().map(|d| d.to_str().expect("utf-8")));
    let r = run_culprit(&args, Duration::from_secs(120));
    r.assert_success("culprit messages --json");
    serde_json::from_str(&r.stdout).expect("culprit messages --json prints JSON")
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("no integer `{k}` in {v}"))
}

/// Exactness on a run where every connection closed normally; returns the totals. A
/// causality violation keeps `tmp` (the trace) and names its flows.
fn check_exact(j: &Value, what: &str, want_conns: usize, tmp: &mut tempfile::TempDir) -> Value {
    let conns = j["connections"].as_array().expect("connections");
    let paired: Vec<&Value> = conns.iter().filter(|c| !c["b"].is_null()).collect();
    assert_eq!(paired.len(), want_conns, "{what}: {j:#}");
    for c in &paired {
        for k in ["a", "b"] {
            for f in ["host", "pid", "fd", "address"] {
                assert!(!c[k][f].is_null(), "{what}: endpoint without {f}: {c}");
            }
        }
        if c["reset"] == true {
            continue;
        }
        let moved = u(c, "bytes_a_to_b") + u(c, "bytes_b_to_a");
        assert!(moved > 0, "{what}: {c}");
        assert_eq!(u(c, "matched_bytes"), moved, "{what}: {c}");
        assert_eq!(u(c, "unmatched_bytes"), 0, "{what}: {c}");
        let sends = c["sends"][0].as_u64().unwrap() + c["sends"][1].as_u64().unwrap();
        assert!(u(c, "messages") >= sends.max(1), "{what}: {c}");
    }
    let t = &j["totals"];
    assert_eq!(u(t, "sent_bytes"), u(t, "received_bytes"), "{what}: {t}");
    assert_eq!(u(t, "sent_bytes"), u(t, "matched_bytes"), "{what}: {t}");
    assert_eq!(u(t, "unmatched_bytes"), 0, "{what}: {t}");
    assert_no_violations(j, tmp);
    assert_eq!(u(j, "broken_edges"), 0, "{what}");
    t.clone()
}

fn lib_calls(dir: &Path) -> u64 {
    let d = run_culprit(
        &["dump", "--json", dir.to_str().expect("utf-8")],
        Duration::from_secs(120),
    );
    d.assert_success("culprit dump --json");
    d.stdout
        .lines()
        .filter(|l| l.contains("\"lib_enter\""))
        .count() as u64
}

/// Decodes a Perfetto file with the official schema: (flow ids started, flow ids ended,
/// `lib` slices, `unit` slices, named process tracks, instant events).
fn decode_perfetto(file: &Path) -> Vec<u64> {
    let script = r#"
import sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
t = pb.Trace()
t.ParseFromString(open(sys.argv[1], 'rb').read())
out, inn, lib, unit, procs, inst = set(), set(), 0, 0, 0, 0
for p in t.packet:
    if p.HasField('track_descriptor') and p.track_descriptor.HasField('process'):
        procs += p.track_descriptor.process.process_name != ''
    if p.HasField('track_event'):
        e = p.track_event
        out.update(e.flow_ids); inn.update(e.terminating_flow_ids)
        if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            lib += 'lib' in e.categories
            unit += 'unit' in e.categories
        inst += e.type == pb.TrackEvent.TYPE_INSTANT
print(len(out), len(inn), len(out & inn), lib, unit, procs, inst)
"#;
    let r = tests::run_with_deadline(
        Command::new("python3").args(["-c", script, file.to_str().expect("utf-8")]),
        Duration::from_secs(120),
    );
    r.assert_success(
        "decode the Perfetto trace with perfetto_trace_pb2 (scripts/setup.d/perfetto.sh)",
    );
    r.stdout
        .split_whitespace()
        .map(|x| x.parse().expect("number"))
        .collect()
}

#[test]
fn c_ring_every_byte_matched_and_exported_as_flows() {
    let prog = compile_ring(&[]);
    let mut tmp = tempfile::tempdir().expect("temporary directory");
    let dir = tmp.path().join("ring");
    let cmd = c_ring_cmd(&prog.path, "30");
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    record(&dir, &[], &cmd, Duration::from_secs(120)).assert_success("record the C ring");
    let j = messages_json(&[&dir]);
    let totals = check_exact(&j, "C ring", 5, &mut tmp);
    let text = run_culprit(
        &["messages", dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    text.assert_success("culprit messages");
    assert!(text.stdout.contains("matched") && text.stdout.contains("waiting per process"));

    // Perfetto: flows = matched messages; lib slices = recorded calls.
    let pf = tmp.path().join("ring.pftrace");
    culprit_writes("export", &dir, &["--format", "perfetto"], &pf);
    let d = decode_perfetto(&pf);
    let msgs = u(&totals, "messages");
    assert_eq!(d[0], msgs, "flows started: {d:?}");
    assert_eq!(d[1], msgs, "flows ended: {d:?}");
    assert_eq!(d[2], msgs, "flows with both ends: {d:?}");
    assert_eq!(d[3], lib_calls(&dir), "library-call slices: {d:?}");
    assert!(d[4] > 0, "unit slices: {d:?}");
    assert_eq!(d[5], 6, "named process tracks (launcher + 5 nodes): {d:?}");

    // Chrome JSON: every flow bound at both ends (bind_id on complete events).
    let cj = tmp.path().join("ring.json");
    culprit_writes("export", &dir, &["--format", "chrome"], &cj);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&cj).unwrap()).expect("JSON");
    let evs = v["traceEvents"].as_array().expect("traceEvents");
    let mut out = std::collections::BTreeSet::new();
    let mut inn = std::collections::BTreeSet::new();
    for e in evs {
        if let Some(b) = e["bind_id"].as_str() {
            assert_eq!(e["ph"], "X", "{e}");
            if e["flow_out"] == true {
                out.insert(b.to_string());
            }
            if e["flow_in"] == true {
                inn.insert(b.to_string());
            }
        }
    }
    assert_eq!(out.len() as u64, msgs);
    assert_eq!(out, inn);
    let lib = evs.iter().filter(|e| e["cat"] == "lib").count() as u64;
    assert_eq!(lib, lib_calls(&dir));
}

#[test]
fn c_ring_with_a_short_receive_still_attributes_no_byte_wrongly() {
    let prog = compile_ring(&[]);
    let mut tmp = tempfile::tempdir().expect("temporary directory");
    let dir = tmp.path().join("faulty");
    let cmd = c_ring_cmd(&prog.path, "3");
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let r = record(
        &dir,
        &["recv:short=3,argv=--id 2 --nodes,nth=11"],
        &cmd,
        Duration::from_secs(120),
    );
    assert!(!r.timed_out, "{}", r.stderr);
    let j = messages_json(&[&dir]);
    let conns = j["connections"].as_array().expect("connections");
    let mut unmatched_sent = 0;
    for c in conns.iter().filter(|c| !c["b"].is_null()) {
        let moved = u(c, "bytes_a_to_b") + u(c, "bytes_b_to_a");
        assert!(u(c, "matched_bytes") <= moved, "{c}");
        let reasons = c["unmatched"].as_object().expect("unmatched");
        for (k, v) in reasons {
            assert!(
                ["lost_in_flight", "not_received"].contains(&k.as_str()),
                "{k}: {v} in {c}"
            );
            unmatched_sent += v.as_u64().unwrap();
        }
    }
    // The broken connection lost the bytes node 2 never read.
    assert!(unmatched_sent > 0, "{j:#}");
    assert_no_violations(&j, &mut tmp);
    // The injection is an instant event of the export.
    let pf = tmp.path().join("f.pftrace");
    culprit_writes("export", &dir, &["--format", "perfetto", "--no-units"], &pf);
    let d = decode_perfetto(&pf);
    assert!(d[6] >= 1, "no injection instant: {d:?}");
    assert_eq!(d[4], 0, "--no-units: {d:?}");
}

#[test]
fn python_ring_every_byte_matched() {
    let py = python();
    let mut tmp = tempfile::tempdir().expect("temporary directory");
    let dir = tmp.path().join("pyring");
    let run_ring = repo().join("tests/ring/run_ring.py");
    let base = tests::free_port_range(5).to_string();
    let cmd = [
        py.to_str().unwrap(),
        run_ring.to_str().unwrap(),
        "--nodes",
        "5",
        "--jobs",
        "20",
        "--timeout",
        "60",
        "--base-port",
        &base,
    ];
    record(&dir, &[], &cmd, Duration::from_secs(180)).assert_success("record the Python ring");
    check_exact(&messages_json(&[&dir]), "Python ring", 5, &mut tmp);
}

#[test]
fn bad_input_names_the_file() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    // Not a trace directory.
    let r = run_culprit(
        &["messages", tmp.path().to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains(tmp.path().to_str().unwrap()),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    // A trace directory from another format version.
    let prog = compile_ring(&[]);
    let dir = tmp.path().join("old");
    let cmd = c_ring_cmd(&prog.path, "30");
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    record(&dir, &[], &cmd, Duration::from_secs(120)).assert_success("record");
    let mf = dir.join("manifest.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&mf).unwrap()).unwrap();
    m["version"] = Value::from(0);
    std::fs::write(&mf, serde_json::to_string(&m).unwrap()).unwrap();
    for sub in [
        vec!["messages", dir.to_str().unwrap()],
        vec![
            "export",
            dir.to_str().unwrap(),
            "--format",
            "chrome",
            "-o",
            "/dev/null",
        ],
    ] {
        let r = run_culprit(&sub, Duration::from_secs(30));
        assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
        assert!(r.stderr.contains("manifest.json"), "{}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    }
}
