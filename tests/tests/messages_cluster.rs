//! `culprit messages` on a recorded Python cluster (loopback, bounded): a server that forks
//! a worker per accepted client (the connection shared across the fork), three client
//! processes making requests of random sizes with `sendall` and reading replies in pieces,
//! a socketpair between the server and its workers, and connected-UDP datagrams to a bound
//! receiver. Every TCP and socketpair byte is matched, every datagram matched by size and
//! order, and no matched receive ends before its send began; `culprit export` draws the
//! same messages as flows.

#[path = "../e2e/common.rs"]
mod common;

use common::*;
use serde_json::Value;
use std::time::Duration;

const CLUSTER: &str = r#"
import os, socket, sys, random, time
port = int(sys.argv[1]); N = 3; REQ = 40
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(('127.0.0.1', port)); ls.listen(8)
udp_rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp_rx.bind(('127.0.0.1', 0)); udp_port = udp_rx.getsockname()[1]
report_a, report_b = socket.socketpair()

def recv_exact(s, n):
    b = b''
    while len(b) < n:
        c = s.recv(min(4096, n - len(b)))
        if not c: raise EOFError
        b += c
    return b

kids = []
for i in range(N):
    pid = os.fork()
    if pid == 0:  # a client
        ls.close(); udp_rx.close()
        rnd = random.Random(i)
        s = socket.create_connection(('127.0.0.1', port))
        for k in range(REQ):
            n = rnd.randint(1, 3000)
            s.sendall(n.to_bytes(4, 'big') + bytes(n))
            m = int.from_bytes(recv_exact(s, 4), 'big'); recv_exact(s, m)
        s.close()
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.connect(('127.0.0.1', udp_port))
        for k in range(5): u.send(bytes(10 + 10 * i + k))
        os._exit(0)
    kids.append(pid)
workers = []
for i in range(N):
    c, _ = ls.accept()
    pid = os.fork()
    if pid == 0:  # a worker: serves one client on the inherited connection
        ls.close()
        total = 0
        try:
            while True:
                n = int.from_bytes(recv_exact(c, 4), 'big'); recv_exact(c, n)
                c.sendall((n // 2).to_bytes(4, 'big') + bytes(n // 2)); total += n
        except EOFError:
            pass
        report_b.sendall(total.to_bytes(8, 'big'))
        os._exit(0)
    c.close(); workers.append(pid)
got = [int.from_bytes(recv_exact(report_a, 8), 'big') for _ in range(N)]
for _ in range(5 * N): udp_rx.recv(100)
for p in kids + workers: os.waitpid(p, 0)
print('cluster ok', sum(got))
"#;

/// Records the Python program `script` with `args` (it must print `ok`), then runs
/// `culprit messages --json` on the trace and checks it found no one-host causality
/// violation. Returns the temporary directory, the trace in it, and the JSON.
fn record_messages(
    script: &str,
    args: &[&str],
    ok: &str,
) -> (tempfile::TempDir, std::path::PathBuf, Value) {
    let mut tmp = tempfile::tempdir().expect("temporary directory");
    let file = tmp.path().join("program.py");
    std::fs::write(&file, script).unwrap();
    let dir = tmp.path().join("trace");
    let py = python();
    let mut cmd = vec![py.to_str().unwrap(), file.to_str().unwrap()];
    cmd.extend_from_slice(args);
    let r = record(&dir, &[], &cmd, Duration::from_secs(120));
    r.assert_success("record the Python program");
    assert!(r.stdout.contains(ok), "{}", r.stdout);
    let j = run_culprit(
        &["messages", "--json", dir.to_str().unwrap()],
        Duration::from_secs(120),
    );
    j.assert_success("culprit messages --json");
    let v: Value = serde_json::from_str(&j.stdout).expect("JSON");
    assert_no_violations(&v, &mut tmp);
    (tmp, dir, v)
}

#[test]
fn python_cluster_with_forked_workers_socketpair_and_datagrams() {
    let port = tests::free_tcp_port().to_string();
    let (tmp, dir, v) = record_messages(CLUSTER, &[&port], "cluster ok");
    let conns = v["connections"].as_array().unwrap();
    let kind = |k: &'static str| {
        conns
            .iter()
            .filter(move |c| c["kind"] == k && !c["b"].is_null())
    };
    assert_eq!(kind("tcp").count(), 3, "{v:#}");
    assert_eq!(kind("pair").count(), 1, "{v:#}");
    for c in kind("tcp").chain(kind("pair")) {
        let moved = c["bytes_a_to_b"].as_u64().unwrap() + c["bytes_b_to_a"].as_u64().unwrap();
        assert!(moved > 0, "{c}");
        assert_eq!(c["matched_bytes"].as_u64().unwrap(), moved, "{c}");
        assert_eq!(c["unmatched_bytes"], 0, "{c}");
    }
    // One thread writes each direction of a TCP connection: no order is inferred.
    for c in kind("tcp") {
        assert_eq!(c["order_inferred_bytes"], 0, "{c}");
    }
    // The workers (forked after accept) did the serving: the server ends are shared.
    let tcp_lat: Vec<u64> = kind("tcp")
        .map(|c| c["latency"]["count"].as_u64().unwrap())
        .collect();
    assert_eq!(tcp_lat, vec![40, 40, 40], "request/response pairs: {v:#}");
    // Datagrams: 5 per client, each to the one bound receiver, matched by size and order.
    let dg: Vec<&Value> = kind("datagram").collect();
    assert_eq!(dg.len(), 3, "{v:#}");
    for c in dg {
        assert_eq!(c["messages"], 5, "{c}");
        assert_eq!(c["unmatched_bytes"], 0, "{c}");
    }
    assert_eq!(v["totals"]["unmatched_bytes"], 0, "{:#}", v["totals"]);
    assert_eq!(v["broken_edges"], 0);
    // The export's bounded-memory matching (forks, socketpair and datagrams included)
    // draws a flow for every matched message, each bound at both ends.
    let cj = tmp.path().join("cluster.json");
    culprit_writes("export", &dir, &["--format", "chrome", "--no-units"], &cj);
    let e: Value = serde_json::from_str(&std::fs::read_to_string(&cj).unwrap()).expect("JSON");
    let (mut out, mut inn) = (
        std::collections::BTreeSet::new(),
        std::collections::BTreeSet::new(),
    );
    for ev in e["traceEvents"].as_array().expect("traceEvents") {
        if let Some(b) = ev["bind_id"].as_str() {
            if ev["flow_out"] == true {
                out.insert(b.to_string());
            }
            if ev["flow_in"] == true {
                inn.insert(b.to_string());
            }
        }
    }
    assert_eq!(out.len() as u64, v["totals"]["messages"].as_u64().unwrap());
    assert_eq!(out, inn);
}

const SHARED: &str = r#"
import os, socket, sys
W = int(sys.argv[1]); M = int(sys.argv[2]); REC = 8
a, b = socket.socketpair()
kids = []
for w in range(W):
    pid = os.fork()
    if pid == 0:  # a writer on the shared end
        a.close()
        for k in range(M):
            b.sendall(w.to_bytes(4, 'big') + k.to_bytes(4, 'big'))
        os._exit(0)
    kids.append(pid)
b.close()
nxt = [0] * W
for _ in range(W * M):
    buf = b''
    while len(buf) < REC:
        c = a.recv(REC - len(buf))
        if not c: raise EOFError
        buf += c
    w, k = int.from_bytes(buf[:4], 'big'), int.from_bytes(buf[4:], 'big')
    assert k == nxt[w], (w, k, nxt[w]); nxt[w] += 1
for p in kids: os.waitpid(p, 0)
print('shared ok', W * M * REC)
"#;

/// Forked writers racing on one shared end of a socketpair, one reader on the other: the
/// writers' sends overlap in time (one preempted inside its send while another's goes
/// through), so the order in which their bytes entered the stream is known only up to
/// the calls' entries and exits. Every byte is matched, and no receive is matched to a
/// send that began after it ended (`analyzer::messages::stream`: a shared socket's sends
/// in exit order, never placed at bytes a receive read before they began).
#[test]
fn forked_writers_racing_on_one_socketpair_end() {
    let (_tmp, _, v) = record_messages(SHARED, &["4", "300"], "shared ok 9600");
    let pairs: Vec<&Value> = v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "pair" && !c["b"].is_null())
        .collect();
    assert_eq!(pairs.len(), 1, "{v:#}");
    let c = pairs[0];
    assert_eq!(c["matched_bytes"], 9600, "{c}");
    assert_eq!(c["unmatched_bytes"], 0, "{c}");
    // Every send and every receive moved one whole record.
    assert_eq!(c["messages"], 1200, "{c}");
    // What overlapped another writer's send is said to be in an inferred order.
    assert!(c["order_inferred_bytes"].as_u64().unwrap() <= 9600, "{c}");
}
