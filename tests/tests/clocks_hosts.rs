//! Two hosts whose clocks are off on purpose, without Slurm: a server and a client, each
//! under its own `culprit record`, the server's clock reading 50 ms ahead and running
//! 100 ppm slow, the client's 50 ms behind and 100 ppm fast (`CULPRIT_TEST_CLOCK_SKEW`:
//! calibration and snapshots lie alike). Each recording's manifest is then given its own
//! host name (`ha`, `hb`): the analyses see two clock domains (host and boot) that talk
//! over loopback (one boot and network namespace: one socket scope), as two nodes of a
//! cluster would over the network.
//!
//! Then: `culprit messages --json` estimates `hb`'s offset against `ha` (≈ 100 ms) and drift
//! (≈ −200 ppm) within their reported uncertainties, with no receive before its send once
//! corrected; `culprit export` draws every message as a flow with no receive ending before
//! its send began — uncorrected, the 100 ms between the clocks would put every
//! client-to-server message's receive about 100 ms before its send, so the check can fail.

#[path = "../e2e/common.rs"]
mod common;

use common::*;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

const PROGRAM: &str = r#"
import socket, sys, time
role = sys.argv[1]; N = 400

def recv_exact(s, n):
    b = b''
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c: raise EOFError
        b += c
    return b

if role == 'server':
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(('127.0.0.1', int(sys.argv[2]))); ls.listen(1)
    c, _ = ls.accept(); n = 0
    try:
        while True:
            c.sendall(recv_exact(c, 8)); n += 1
    except EOFError:
        pass
    print('server ok', n)
else:
    for _ in range(3000):
        try:
            s = socket.create_connection(('127.0.0.1', int(sys.argv[2]))); break
        except OSError:
            time.sleep(0.01)
    for k in range(N):
        s.sendall(k.to_bytes(8, 'big'))
        assert int.from_bytes(recv_exact(s, 8), 'big') == k
        time.sleep(0.003)
    s.close(); print('client ok', N)
"#;

/// The skews (`OFFSET_NS,PPM`): the server's host `ha`, the client's `hb`.
const HA_SKEW: (f64, f64) = (50e6, -100.0);
const HB_SKEW: (f64, f64) = (-50e6, 100.0);

/// Gives the recording in `dir` the host name `host`.
fn rename_host(dir: &Path, host: &str) {
    let m = dir.join("manifest.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
    assert!(!v["clock_snapshots"].as_array().unwrap().is_empty(), "{v}");
    v["host"] = Value::String(host.into());
    std::fs::write(&m, serde_json::to_vec(&v).unwrap()).unwrap();
}

/// The true time of the recording's first clock reading (its skew taken off).
fn first_reading(dir: &Path, offset: f64) -> f64 {
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    m["clock_snapshots"][0]["realtime_ns"].as_f64().unwrap() - offset
}

#[test]
fn skewed_hosts_are_aligned_in_messages_and_export() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let prog = tmp.path().join("pingpong.py");
    std::fs::write(&prog, PROGRAM).unwrap();
    let py = python();
    let port = tests::free_tcp_port().to_string();
    let roles = [("server", HA_SKEW, "ha"), ("client", HB_SKEW, "hb")];
    let dirs: Vec<PathBuf> = roles.iter().map(|r| tmp.path().join(r.2)).collect();
    let outs: Vec<tests::RunOutput> = std::thread::scope(|s| {
        let hs: Vec<_> = roles
            .iter()
            .zip(&dirs)
            .map(|((role, (off, ppm), _), dir)| {
                let mut c = culprit();
                c.env("CULPRIT_TEST_CLOCK_SKEW", format!("{off},{ppm}"));
                c.arg("record")
                    .arg("-o")
                    .arg(dir)
                    .arg("--")
                    .arg(&py)
                    .arg(&prog)
                    .arg(role)
                    .arg(&port);
                s.spawn(move || tests::run_with_deadline(&mut c, Duration::from_secs(120)))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (o, r) in outs.iter().zip(&roles) {
        o.assert_success(r.0);
        assert!(o.stdout.contains(&format!("{} ok", r.0)), "{}", o.stdout);
    }
    for (d, r) in dirs.iter().zip(&roles) {
        rename_host(d, r.2);
    }
    let dir_args: Vec<&str> = dirs.iter().map(|d| d.to_str().unwrap()).collect();

    // The offset and drift, within their uncertainty.
    let mut args = vec!["messages", "--json"];
    args.extend(&dir_args);
    let r = run_culprit(&args, Duration::from_secs(120));
    r.assert_success("culprit messages --json");
    let v: Value = serde_json::from_str(&r.stdout).expect("JSON");
    assert_eq!(v["totals"]["unmatched_bytes"], 0, "{:#}", v["totals"]);
    let o = v["clock_offsets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["host"] == "hb")
        .unwrap_or_else(|| panic!("{:#}", v["clock_offsets"]))
        .clone();
    assert_eq!(o["reference"], "ha", "{o}");
    let f = |k: &str| o[k].as_f64().unwrap_or(f64::INFINITY);
    let (t0a, t0b) = (
        first_reading(&dirs[0], HA_SKEW.0),
        first_reading(&dirs[1], HB_SKEW.0),
    );
    // At true time t, ha reads t + offA + ppmA·(t − t0a), hb reads t + offB + ppmB·(t − t0b):
    // the correction from hb to ha at hb's time `at` is their difference at the t where
    // hb reads `at`, drifting by ppmA − ppmB.
    let at = f("at_ns");
    let t = (at - HB_SKEW.0 + HB_SKEW.1 * 1e-6 * t0b) / (1.0 + HB_SKEW.1 * 1e-6);
    let want = HA_SKEW.0 - HB_SKEW.0 + HA_SKEW.1 * 1e-6 * (t - t0a) - HB_SKEW.1 * 1e-6 * (t - t0b);
    let want_drift = HA_SKEW.1 - HB_SKEW.1;
    let (est, unc) = (f("offset_ns"), f("uncertainty_ns"));
    let (d, d_unc) = (f("drift_ppm"), f("drift_uncertainty_ppm"));
    eprintln!("hb: offset {est:.0} ± {unc:.0} ns (want {want:.0}), drift {d:.2} ± {d_unc:.2} ppm (want {want_drift})");
    assert!(unc < 2e6 && d_unc < 100.0, "hb's clock is not bounded: {o}");
    // 5 µs: the knob scales from the recorder's first clock reading, which may come up to
    // ~20 ms before the first snapshot taken here as its origin (100 ppm of it per host).
    assert!(
        (est - want).abs() <= unc + 5e3,
        "offset {est} ± {unc}, want {want}"
    );
    assert!(
        (d - want_drift).abs() <= d_unc,
        "drift {d} ± {d_unc}, want {want_drift}"
    );
    assert_eq!(
        v["aligned_violations"], 0,
        "receives before sends once aligned"
    );

    // The export: on ha's clock, no receive ends before its send began.
    let cj = tmp.path().join("run.json");
    let mut args = vec!["export"];
    args.extend(&dir_args);
    args.extend([
        "--format",
        "chrome",
        "--no-units",
        "-o",
        cj.to_str().unwrap(),
    ]);
    let r = run_culprit(&args, Duration::from_secs(240));
    r.assert_success("culprit export");
    assert!(
        r.stderr.contains("clock of hb: +") && r.stderr.contains("against ha ("),
        "{}",
        r.stderr
    );
    let e: Value = serde_json::from_str(&std::fs::read_to_string(&cj).unwrap()).expect("JSON");
    let evs = e["traceEvents"].as_array().expect("traceEvents");
    // A call's end, by (pid, tid, start): a zero-length part event stands for its call.
    let key = |ev: &Value| {
        (
            ev["pid"].to_string(),
            ev["tid"].to_string(),
            ev["ts"].to_string(),
        )
    };
    let ends: HashMap<_, f64> = evs
        .iter()
        .filter(|ev| ev["ph"] == "X" && ev["cat"] != "lib.part")
        .map(|ev| {
            (
                key(ev),
                ev["ts"].as_f64().unwrap() + ev["dur"].as_f64().unwrap(),
            )
        })
        .collect();
    let (mut sends, mut recvs): (HashMap<String, f64>, HashMap<String, f64>) = Default::default();
    for ev in evs {
        let Some(b) = ev["bind_id"].as_str() else {
            continue;
        };
        if ev["flow_out"] == true {
            sends.insert(b.into(), ev["ts"].as_f64().unwrap());
        }
        if ev["flow_in"] == true {
            recvs.insert(b.into(), ends[&key(ev)]);
        }
    }
    assert_eq!(
        sends.len() as u64,
        v["totals"]["messages"].as_u64().unwrap()
    );
    assert!(sends.len() >= 800, "{} flows", sends.len());
    // Times are µs with ns decimals, read as f64 (a quarter µs apart at today's dates).
    let before: Vec<(&String, f64)> = sends
        .iter()
        .filter_map(|(id, s)| Some((id, recvs.get(id)? - s)))
        .filter(|(_, d)| *d < -1.0)
        .collect();
    assert!(
        before.is_empty(),
        "{} receives end before their send began, e.g. {:?}",
        before.len(),
        before.first()
    );
}
