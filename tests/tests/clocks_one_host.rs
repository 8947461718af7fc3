//! Three separately started `culprit record` runs on one host, of processes talking to
//! each other (a client, a relay, a server), two of them with pool calibrations made wrong
//! on purpose by ±500 ppm (`CULPRIT_TEST_CALIBRATION_PPM`, as a 20 ms calibration on a
//! loaded machine can be): the recordings share one boot, so `culprit messages` converts
//! them by one clock built from all their snapshots, and no matched receive ends before
//! its send began. The same traces with their snapshots removed (each converted by its own
//! calibration, as before) do show violations: the test can fail.

#[path = "../e2e/common.rs"]
mod common;

use common::*;
use serde_json::Value;
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

def connect(port):
    for _ in range(3000):
        try:
            return socket.create_connection(('127.0.0.1', port))
        except OSError:
            time.sleep(0.01)
    raise SystemExit('no listener on %d' % port)

def listen(port):
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(('127.0.0.1', port)); ls.listen(1)
    c, _ = ls.accept(); return c

if role == 'server':
    c = listen(int(sys.argv[2])); n = 0
    try:
        while True:
            c.sendall(recv_exact(c, 8)); n += 1
    except EOFError:
        pass
    print('server ok', n)
elif role == 'relay':
    up = connect(int(sys.argv[3])); c = listen(int(sys.argv[2])); n = 0
    try:
        while True:
            up.sendall(recv_exact(c, 8)); c.sendall(recv_exact(up, 8)); n += 1
    except EOFError:
        pass
    up.close(); print('relay ok', n)
else:
    s = connect(int(sys.argv[2]))
    for k in range(N):
        s.sendall(k.to_bytes(8, 'big'))
        assert int.from_bytes(recv_exact(s, 8), 'big') == k
        time.sleep(0.003)
    s.close(); print('client ok', N)
"#;

fn messages_json(dirs: &[PathBuf]) -> Value {
    let mut args = vec!["messages", "--json"];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    let r = run_culprit(&args, Duration::from_secs(120));
    r.assert_success("culprit messages --json");
    assert!(r.stderr.contains("found"), "{}", r.stderr);
    serde_json::from_str(&r.stdout).expect("JSON")
}

/// A copy of trace `dir` whose manifest has no clock snapshots.
fn without_snapshots(dir: &Path, to: &Path) {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }
    copy(dir, to);
    let m = to.join("manifest.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
    assert!(!v["clock_snapshots"].as_array().unwrap().is_empty(), "{v}");
    assert!(!v["boot_id"].as_str().unwrap().is_empty(), "{v}");
    v["clock_snapshots"] = Value::Array(vec![]);
    std::fs::write(&m, serde_json::to_vec(&v).unwrap()).unwrap();
}

#[test]
fn three_recorders_of_one_host_share_one_clock() {
    let mut tmp = tempfile::tempdir().expect("temporary directory");
    let prog = tmp.path().join("chain.py");
    std::fs::write(&prog, PROGRAM).unwrap();
    let py = python();
    let (p_server, p_relay) = (tests::free_tcp_port(), tests::free_tcp_port());
    let roles: [(&str, Vec<String>, &str); 3] = [
        ("server", vec![p_server.to_string()], "0"),
        (
            "relay",
            vec![p_relay.to_string(), p_server.to_string()],
            "500",
        ),
        ("client", vec![p_relay.to_string()], "-500"),
    ];
    let dirs: Vec<PathBuf> = roles.iter().map(|r| tmp.path().join(r.0)).collect();
    let outs: Vec<tests::RunOutput> = std::thread::scope(|s| {
        let hs: Vec<_> = roles
            .iter()
            .zip(&dirs)
            .map(|((role, args, ppm), dir)| {
                let mut c = culprit();
                c.env("CULPRIT_TEST_CALIBRATION_PPM", ppm);
                c.arg("record")
                    .arg("-o")
                    .arg(dir)
                    .arg("--")
                    .arg(&py)
                    .arg(&prog);
                c.arg(role).args(args);
                s.spawn(move || tests::run_with_deadline(&mut c, Duration::from_secs(120)))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (o, r) in outs.iter().zip(&roles) {
        o.assert_success(r.0);
        assert!(o.stdout.contains(&format!("{} ok", r.0)), "{}", o.stdout);
    }
    let v = messages_json(&dirs);
    let tcp: Vec<&Value> = v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "tcp" && !c["b"].is_null())
        .collect();
    assert_eq!(
        tcp.len(),
        2,
        "client–relay and relay–server, both ends traced: {v:#}"
    );
    assert_eq!(v["totals"]["unmatched_bytes"], 0, "{:#}", v["totals"]);
    assert_no_violations(&v, &mut tmp);
    // Each recording converted by its own (wrong) calibration: receives before sends.
    let bare: Vec<PathBuf> = dirs
        .iter()
        .map(|d| {
            let to = tmp.path().join("bare").join(d.file_name().unwrap());
            without_snapshots(d, &to);
            to
        })
        .collect();
    let w = messages_json(&bare);
    assert!(
        w["violations"].as_u64().unwrap() > 0,
        "the wrong calibrations should have put receives before sends: {:#}",
        w["totals"]
    );
}
