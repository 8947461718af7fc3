//! Datagrams of unconnected UDP sockets on a recorded Python program (loopback, bounded):
//! three clients, each with an unconnected socket (one using `sendmsg`/`recvmsg`, two
//! `sendto`/`recvfrom`), send equal-sized requests to one server bound to the wildcard
//! address, which replies with `sendto` to the address `recvfrom` gave. All sizes are
//! equal, so only the recorded addresses (each send's destination, each receive's source,
//! the clients' ports the kernel chose) tell the clients apart. Then a burst into a receive
//! buffer too small for it: the kernel drops datagrams for real. Every count is checked
//! against what the programs themselves counted: matched, lost, none reordered or
//! duplicated; `culprit export` (the bounded-memory pass) draws the same flows.

#[path = "../e2e/common.rs"]
mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

const UDP: &str = r#"
import os, socket, sys, select
N = 3; K = 20; REQ = 64; REP = 32; BURST = 200; SIZE = 100

def out(line):
    sys.stdout.write(line + '\n')

# Part 1: N clients, unconnected sockets, one server bound to the wildcard address;
# equal sizes everywhere, so only the addresses tell the clients apart.
srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
srv.bind(('0.0.0.0', 0)); port = srv.getsockname()[1]
kids = []
for i in range(N):
    pid = os.fork()
    if pid == 0:
        srv.close()
        c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        c.settimeout(10)
        got = 0
        for k in range(K):
            if i == 0:
                c.sendmsg([bytes(REQ)], [], 0, ('127.0.0.1', port))
                data, _, _, addr = c.recvmsg(1000)
            else:
                c.sendto(bytes(REQ), ('127.0.0.1', port))
                data, addr = c.recvfrom(1000)
            got += len(data) == REP
        out('client %d port %d replies %d' % (i, c.getsockname()[1], got))
        os._exit(0)
    kids.append(pid)
per = {}
for _ in range(N * K):
    data, addr = srv.recvfrom(1000)
    per[addr[1]] = per.get(addr[1], 0) + 1
    srv.sendto(bytes(REP), addr)
for p in kids: os.waitpid(p, 0)
out('server got %s' % ' '.join('%d:%d' % kv for kv in sorted(per.items())))

# Part 2: a burst into a tiny receive buffer: the kernel drops what does not fit.
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
rx.bind(('127.0.0.1', 0)); rport = rx.getsockname()[1]
pid = os.fork()
if pid == 0:
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sent = sum(tx.sendto(bytes(SIZE), ('127.0.0.1', rport)) == SIZE for _ in range(BURST))
    out('burst sent %d' % sent)
    os._exit(0)
os.waitpid(pid, 0)
rx.setblocking(False)
received = 0
while True:
    try:
        data, _ = rx.recvfrom(1000)
    except BlockingIOError:
        break
    received += 1
out('burst received %d' % received)
"#;

/// The number after `key` in the program's output.
fn count(out: &str, key: &str) -> u64 {
    let line = out
        .lines()
        .find(|l| l.starts_with(key))
        .unwrap_or_else(|| panic!("no `{key}` line in {out}"));
    line[key.len()..].trim().parse().expect("a count")
}

#[test]
fn unconnected_udp_clients_server_and_a_lossy_burst() {
    let mut tmp = tempfile::tempdir().expect("temporary directory");
    let script = tmp.path().join("udp.py");
    std::fs::write(&script, UDP).unwrap();
    let dir = tmp.path().join("trace");
    let r = record(
        &dir,
        &[],
        &["python3", script.to_str().unwrap()],
        Duration::from_secs(120),
    );
    r.assert_success("record the UDP program");
    let out = &r.stdout;
    // What the programs counted: replies per client port, requests per client port at the
    // server, datagrams of the burst sent and received.
    let mut replies: BTreeMap<String, u64> = BTreeMap::new();
    for l in out.lines().filter(|l| l.starts_with("client ")) {
        let w: Vec<&str> = l.split_whitespace().collect();
        replies.insert(w[3].to_string(), w[5].parse().unwrap());
    }
    assert_eq!(replies.len(), 3, "{out}");
    let server_line = out
        .lines()
        .find(|l| l.starts_with("server got "))
        .expect("server line");
    let requests: BTreeMap<String, u64> = server_line["server got ".len()..]
        .split_whitespace()
        .map(|kv| {
            let (k, v) = kv.split_once(':').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect();
    let (sent, received) = (count(out, "burst sent"), count(out, "burst received"));
    assert!(received < sent, "the burst lost nothing: {out}");

    let j = run_culprit(
        &["messages", "--json", dir.to_str().unwrap()],
        Duration::from_secs(120),
    );
    j.assert_success("culprit messages --json");
    let v: Value = serde_json::from_str(&j.stdout).expect("JSON");
    let conns: Vec<&Value> = v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "datagram")
        .collect();
    let port = |e: &Value| -> String {
        let a = e["address"].as_str().unwrap_or("");
        a.rsplit(':').next().unwrap().to_string()
    };
    // Every datagram connection has both ends.
    assert!(conns.iter().all(|c| !c["b"].is_null()), "{v:#}");
    let mut to_server: BTreeMap<String, u64> = BTreeMap::new();
    let mut to_client: BTreeMap<String, u64> = BTreeMap::new();
    let mut burst = None;
    for c in &conns {
        let (a, b) = (port(&c["a"]), port(&c["b"]));
        if c["sends"][0] == 200 {
            burst = Some(*c);
        } else if replies.contains_key(&a) {
            to_server.insert(a, c["messages"].as_u64().unwrap());
        } else {
            to_client.insert(b, c["messages"].as_u64().unwrap());
        }
        if c["sends"][0] != 200 {
            assert_eq!(c["unmatched_bytes"], 0, "{c}");
            assert_eq!(c["lost"], 0, "{c}");
        }
        assert_eq!(c["reordered"], 0, "{c}");
        assert_eq!(c["duplicated"], 0, "{c}");
    }
    assert_eq!(to_server, requests, "requests per client: {v:#}");
    assert_eq!(to_client, replies, "replies per client: {v:#}");
    let b = burst.expect("the burst's connection");
    assert_eq!(b["messages"].as_u64().unwrap(), received, "{b}");
    assert_eq!(b["lost"].as_u64().unwrap(), sent - received, "{b}");
    assert_eq!(b["matched_bytes"].as_u64().unwrap(), received * 100, "{b}");
    assert_eq!(
        b["unmatched"]["datagram_lost"].as_u64().unwrap(),
        (sent - received) * 100,
        "{b}"
    );
    assert_no_violations(&v, &mut tmp);
    // The bounded-memory pass draws the same messages.
    let cj = tmp.path().join("udp.json");
    culprit_writes("export", &dir, &["--format", "chrome", "--no-units"], &cj);
    let e: Value = serde_json::from_str(&std::fs::read_to_string(&cj).unwrap()).expect("JSON");
    let (mut fout, mut fin) = (
        std::collections::BTreeSet::new(),
        std::collections::BTreeSet::new(),
    );
    for ev in e["traceEvents"].as_array().expect("traceEvents") {
        if let Some(id) = ev["bind_id"].as_str() {
            if ev["flow_out"] == true {
                fout.insert(id.to_string());
            }
            if ev["flow_in"] == true {
                fin.insert(id.to_string());
            }
        }
    }
    assert_eq!(fout.len() as u64, v["totals"]["messages"].as_u64().unwrap());
    assert_eq!(fout, fin);
}
