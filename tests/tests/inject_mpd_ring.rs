//! The case study of Maruyama & Matsuoka (IPDPS'08, §4; SPEC §6), reproduced on purpose:
//! a ring of MPD-like Python daemons whose `recv_dict_msg` assumes an 8-byte header
//! arrives in one `recv`. Injecting `recv:short=3` into one daemon makes
//! `handle_lhs_input` close the ring connection and the whole ring hang — and Culprit,
//! having learned two normal runs, ranks the handler unit that received the short header
//! first, with the injection listed as its ground truth.
//!
//! Runs `culprit record`, `culprit dump`, `culprit learn` and `culprit rank` (build the
//! workspace first); skipped when `libtrace.so` is not built.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tests::{
    culprit, free_tcp_port, libtrace_or_skip, parse_json_lines, run_with_deadline, RunOutput,
};

const RING_PY: &str = r#""""A miniature MPD ring (the case study of Maruyama & Matsuoka, IPDPS'08, §4).

Usage: ring.py ID PORT0,PORT1,... ROUNDS

Daemon ID listens on PORT<ID>, connects to its right-hand neighbour (ID+1) % N and
accepts its left-hand neighbour. Daemon 0 sends ROUNDS ping messages around the ring,
then an exit message; every daemon forwards what it gets from its left to its right.
Messages are an 8-byte decimal length and a JSON body. Like MPD, recv_dict_msg assumes
the 8 header bytes arrive in one recv; when they do not, handle_lhs_input closes the
ring connection, and every daemon then waits for a message that never comes. A
watchdog reports that silent hang after IDLE seconds without a message, and the daemon
exits with status 3 IDLE seconds later.
"""
import json
import select
import socket
import sys
import time

IDLE = 2.0


def log(*a):
    print(*a, flush=True)


def recv_dict_msg(sock):
    hdr = sock.recv(8)  # MPD's assumption: the whole header arrives at once
    if len(hdr) != 8:
        log("recv_dict_msg: expected 8 header bytes, got %d" % len(hdr))
        return None
    n = int(hdr)
    body = b""
    while len(body) < n:
        chunk = sock.recv(n - len(body))
        if not chunk:
            return None
        body += chunk
    return json.loads(body)


def encode_dict_msg(msg):
    body = json.dumps(msg).encode()
    return b"%08d" % len(body) + body


def send_dict_msg(sock, msg):
    sock.sendall(encode_dict_msg(msg))


def handle_lhs_input(me, lhs, rhs, state):
    msg = recv_dict_msg(lhs)
    if msg is None:
        log("handle_lhs_input: closing the ring connection")
        lhs.close()
        return "closed"
    if me == 0:
        if msg["cmd"] == "ping":
            state["back"] += 1
            if state["back"] == state["rounds"]:
                send_dict_msg(rhs, {"cmd": "exit"})
            return "ok"
        return "done"  # the exit message came back
    send_dict_msg(rhs, msg)
    return "done" if msg["cmd"] == "exit" else "ok"


def main():
    me, ports, rounds = int(sys.argv[1]), [int(p) for p in sys.argv[2].split(",")], int(sys.argv[3])
    n = len(ports)
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", ports[me]))
    lsock.listen(4)
    rhs = None
    for _ in range(500):
        rhs = socket.socket()
        if rhs.connect_ex(("127.0.0.1", ports[(me + 1) % n])) == 0:
            break
        rhs.close()
        rhs = None
        time.sleep(0.01)
    if rhs is None:
        log("cannot reach the right-hand daemon")
        sys.exit(2)
    if not select.select([lsock], [], [], 10 * IDLE)[0]:
        log("the left-hand daemon never connected")
        sys.exit(2)
    lhs, _ = lsock.accept()
    log("daemon %d: ring up" % me)
    state = {"back": 0, "rounds": rounds}
    if me == 0:
        # Every ping in one write: they are all in daemon 1's receive buffer before it
        # reads one, so daemon 1 closing the connection early can never reset a send of
        # ours still to come (that would end daemon 0 with a traceback, not a hang).
        rhs.sendall(b"".join(encode_dict_msg({"cmd": "ping", "round": r}) for r in range(rounds)))
    while True:
        watch = [lhs] if lhs is not None else [lsock]
        ready, _, _ = select.select(watch, [], [], IDLE)
        if not ready:
            log("daemon %d: hang (no message for %.0f s)" % (me, IDLE))
            # Stay (silent) a while before exiting, so no daemon sees another one's exit
            # while it still reads: each reports the hang itself.
            time.sleep(IDLE)
            sys.exit(3)
        if lhs is None:
            continue
        r = handle_lhs_input(me, lhs, rhs, state)
        if r == "closed":
            lhs = None
        elif r == "done":
            log("daemon %d: done" % me)
            return


main()
"#;

const ROUNDS: u32 = 10;

/// Three distinct free ports.
fn ports() -> String {
    loop {
        let p = [free_tcp_port(), free_tcp_port(), free_tcp_port()];
        if p[0] != p[1] && p[1] != p[2] && p[0] != p[2] {
            return format!("{},{},{}", p[0], p[1], p[2]);
        }
    }
}

fn python() -> PathBuf {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Records one run of the three-daemon ring into `out`; returns what `culprit record`
/// printed (the daemons' output included).
fn record_ring(lib: &Path, script: &Path, out: &Path, inject: Option<&str>) -> RunOutput {
    let py = python();
    let p = ports();
    let daemons: Vec<String> = (0..3)
        .map(|i| format!("{} {} {i} {p} {ROUNDS}", py.display(), script.display()))
        .collect();
    let sh = format!("{} & {} & {}; wait", daemons[0], daemons[1], daemons[2]);
    let mut cmd = Command::new(culprit());
    cmd.arg("record").arg("-o").arg(out);
    if let Some(spec) = inject {
        cmd.args(["--inject", spec]);
    }
    cmd.args(["--", "sh", "-c", &sh])
        .env(tests::LIBTRACE_ENV, lib);
    let r = run_with_deadline(&mut cmd, Duration::from_secs(120));
    assert!(!r.timed_out, "{r:?}");
    r
}

#[test]
fn a_short_header_recv_breaks_the_ring_and_ranks_first() {
    let Some(lib) = libtrace_or_skip("mpd_ring") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("ring.py");
    std::fs::write(&script, RING_PY).unwrap();

    // Two normal runs: every daemon finishes.
    let mut normal = Vec::new();
    for k in 0..2 {
        let out = dir.path().join(format!("normal{k}"));
        let r = record_ring(&lib, &script, &out, None);
        r.assert_success("normal ring");
        for d in 0..3 {
            assert!(
                r.stdout.contains(&format!("daemon {d}: done")),
                "{}",
                r.stdout
            );
        }
        normal.push(out);
    }

    // The faulty run: daemon 1's fifth recv (the header of the third message) gets 3 bytes.
    let spec = "recv:short=3,nth=5,argv=ring.py 1 ";
    let faulty = dir.path().join("faulty");
    let r = record_ring(&lib, &script, &faulty, Some(spec));
    assert!(
        r.stdout
            .contains("recv_dict_msg: expected 8 header bytes, got 3"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("handle_lhs_input: closing the ring connection"),
        "{}",
        r.stdout
    );
    for d in 0..3 {
        assert!(
            r.stdout.contains(&format!("daemon {d}: hang")),
            "daemon {d}: {}",
            r.stdout
        );
        assert!(
            !r.stdout.contains(&format!("daemon {d}: done")),
            "{}",
            r.stdout
        );
    }
    assert_eq!(
        r.stdout.matches("recv_dict_msg").count(),
        1,
        "one daemon only"
    );

    // The trace holds exactly that injection, in daemon 1.
    let mut dump = Command::new(culprit());
    dump.arg("dump").arg(&faulty).arg("--json");
    let d = run_with_deadline(&mut dump, Duration::from_secs(120));
    d.assert_success("culprit dump");
    let lines = parse_json_lines(&d.stdout);
    let inj: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["kind"] == "meta_inject")
        .collect();
    assert_eq!(inj.len(), 1, "{inj:?}");
    assert_eq!(
        (
            inj[0]["func"].as_str(),
            inj[0]["forced_ret"].as_i64(),
            inj[0]["original_ret"].as_i64()
        ),
        (Some("recv"), Some(3), Some(8))
    );
    assert_eq!(inj[0]["spec"], spec);
    let pid = inj[0]["pid"].clone();
    let argv: Vec<String> = lines
        .iter()
        .filter(|l| l["pid"] == pid && l["kind"] == "meta_proc")
        .filter_map(|l| l["argv"].as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert!(
        argv.iter().any(|a| a.contains("ring.py 1 ")),
        "daemon 1: {argv:?}"
    );

    // Learn the normal runs; the faulty run's top unit is the one with the injection.
    let model = dir.path().join("ring.cpm");
    let mut learn = Command::new(culprit());
    learn.arg("learn").args(&normal).arg("-o").arg(&model);
    run_with_deadline(&mut learn, Duration::from_secs(120)).assert_success("culprit learn");
    let mut rank = Command::new(culprit());
    rank.arg("rank")
        .arg("--model")
        .arg(&model)
        .arg(&faulty)
        .args(["--json", "--mark-injections", "--top", "5"]);
    let rk = run_with_deadline(&mut rank, Duration::from_secs(120));
    rk.assert_success("culprit rank");
    let units: Vec<serde_json::Value> = serde_json::from_str(&rk.stdout).expect("rank --json");
    assert!(!units.is_empty());
    let top = &units[0];
    let injections = top["injections"].as_array().cloned().unwrap_or_default();
    assert_eq!(injections.len(), 1, "top unit: {top}");
    assert_eq!(injections[0]["spec"], spec);
    assert_eq!(top["pid"], pid);
    assert!(top["score"].as_f64().unwrap() > 0.0);
    assert!(units[1..]
        .iter()
        .all(|u| u["injections"].as_array().is_none_or(|a| a.is_empty())));
}
