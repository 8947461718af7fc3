//! A code-level fault ranked end to end (issue 31): a real CPython client and server over
//! TCP loopback, the client a line-protocol client with a retry loop (a failed request is
//! logged, the connection closed and reopened by the next request — the exception is a
//! normal path of the program, as in real clients). Three normal runs are learned; in the
//! faulty run `--inject 'py:kvlib:Client.line:raise=TimeoutError,nth=30'` makes the
//! client's `line` raise on its 30th call. `culprit rank` must put the unit that raised
//! among the first two (the server's reset it caused is as strong or stronger evidence) and
//! must not file it under that reset.
//!
//! What makes this possible is checked too: the injection wrapper is invisible in the
//! trace — every call of `Client.line`, the 29 before the injection and the ones after,
//! is recorded as the program made it (called from its caller, its own calls under it),
//! and the injected call as a call of `Client.line` that raised `TimeoutError`. (A wrapper
//! hidden with everything under it made every unit of the client depart from normal, and
//! the raising unit was one of hundreds of equally abnormal ones.)

#[path = "../e2e/common.rs"]
mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The client's module: the rule names `kvlib:Client.line`.
const KVLIB: &str = r#"
import socket

class Client:
    """A line client on one TCP connection that reconnects after any failure."""

    def __init__(self, port):
        self.port = port
        self.sock = None
        self.buf = b""
        self.errors = 0

    def connect(self):
        self.close()
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=5.0)
        self.buf = b""

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def line(self):
        while b"\n" not in self.buf:
            data = self.sock.recv(4096)
            if not data:
                raise ConnectionError("end of stream")
            self.buf += data
        out, self.buf = self.buf.split(b"\n", 1)
        return out

    def request(self, text):
        try:
            if self.sock is None:
                self.connect()
            self.sock.sendall(text + b"\n")
            return self.line()
        except (OSError, ConnectionError) as e:
            self.errors += 1
            log("request failed: %r" % (e,))
            self.close()
            return None


def log(msg):
    print("client:", msg, flush=True)
"#;

/// `kv.py`: starts the server (a child process: one thread per connection, answering each
/// line with its upper-case), then runs the client's 60 requests and stops the server.
const KV: &str = r#"
import os, socket, subprocess, sys, threading
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

def serve():
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    print(srv.getsockname()[1], flush=True)
    def conn(c):
        buf = b""
        while True:
            data = c.recv(4096)
            if not data:
                break
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line == b"stop":
                    os._exit(0)
                c.sendall(line.upper() + b"\n")
        c.close()
    while True:
        c, _ = srv.accept()
        threading.Thread(target=conn, args=(c,), daemon=True).start()

if sys.argv[1:] == ["server"]:
    serve()
    sys.exit(0)

import kvlib
server = subprocess.Popen([sys.executable, os.path.abspath(__file__), "server"], stdout=subprocess.PIPE)
port = int(server.stdout.readline())
c = kvlib.Client(port)
ok = 0
for i in range(60):
    if c.request(b"key%d" % i) == b"KEY%d" % i:
        ok += 1
failed = c.errors
c.request(b"stop")  # the server exits: this last request sees the end of stream
server.wait(timeout=30)
print("kv: %d/60 ok, %d failed" % (ok, failed), flush=True)
"#;

const RULE: &str = "py:kvlib:Client.line:raise=TimeoutError,nth=30";

fn write_program(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("kvlib.py"), KVLIB).expect("write kvlib.py");
    let kv = dir.join("kv.py");
    std::fs::write(&kv, KV).expect("write kv.py");
    kv
}

fn run(dir: &Path, py: &str, kv: &Path, inject: &[&str]) -> tests::RunOutput {
    let r = record(
        dir,
        inject,
        &[py, kv.to_str().expect("utf-8 path")],
        Duration::from_secs(120),
    );
    r.assert_success("culprit record of kv.py");
    r
}

/// The calls of `kvlib.Client.line` in a trace: (calls, callers, raised `TimeoutError`).
fn line_calls(dir: &Path) -> (usize, Vec<String>, usize) {
    let dump = run_culprit(
        &["dump", "--json", dir.to_str().expect("utf-8")],
        Duration::from_secs(240),
    );
    dump.assert_success("culprit dump --json");
    let (mut calls, mut callers, mut raised) = (0, Vec::new(), 0);
    for l in dump.stdout.lines() {
        if !l.contains("kvlib.Client.line") {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(l).expect("JSON line");
        if v["name"] != "kvlib.Client.line" {
            continue;
        }
        match v["kind"].as_str() {
            Some("py_call") => {
                calls += 1;
                callers.push(v["caller"].as_str().unwrap_or("").to_string());
            }
            Some("py_exception") if v["exception"] == "builtins.TimeoutError" => raised += 1,
            _ => {}
        }
    }
    callers.sort();
    callers.dedup();
    (calls, callers, raised)
}

#[test]
fn an_exception_injected_in_a_python_client_ranks_at_the_top_score_in_the_unit_that_raised() {
    let py = python();
    let py = py.to_str().expect("utf-8 path");
    let tmp = tempfile::tempdir().expect("temporary directory");
    let kv = write_program(tmp.path());

    let normals: Vec<PathBuf> = (0..3)
        .map(|i| {
            let d = tmp.path().join(format!("normal{i}"));
            let r = run(&d, py, &kv, &[]);
            assert!(r.stdout.contains("kv: 60/60 ok, 0 failed"), "{}", r.stdout);
            d
        })
        .collect();
    let model = tmp.path().join("kv.model");
    learn(&normals, &model, &[]);

    let faulty = tmp.path().join("faulty");
    let r = run(&faulty, py, &kv, &[RULE]);
    assert!(
        r.stdout.contains("client: request failed: TimeoutError")
            && r.stdout.contains("kv: 59/60 ok, 1 failed"),
        "the injected exception did not reach the client's retry path:\n{}\n{}",
        r.stdout,
        r.stderr
    );

    // The wrapper is invisible: the same calls of `line`, from the same caller, as in a
    // normal run; the injected one raised.
    let (n_calls, n_callers, n_raised) = line_calls(&normals[0]);
    let (f_calls, f_callers, f_raised) = line_calls(&faulty);
    assert_eq!(n_raised, 0);
    assert!(n_calls >= 60, "{n_calls} calls of line in a normal run");
    assert_eq!(
        (f_calls, &f_callers, f_raised),
        (n_calls, &n_callers, 1),
        "the faulty run's calls of kvlib.Client.line differ from a normal run's"
    );

    let units = rank_json(&model, &faulty);
    let top = &units[0];
    // The unit that raised, among the first two. The ranking does not read the tracer's
    // injection records (a real fault leaves none): the exception unwound the client's
    // connection, and the server's `recv` that met the reset is stronger evidence ("never
    // seen" failing call, 0.99, against the raise's 0.86) and may come first. What it must
    // not do is file the raise under that reset: the reset came after the raise and was
    // caused by it. (Before `d83e60a` a handler's anomaly was dated from its unit's start,
    // after the raise the unit holds, and the raise was filed under the server's reset —
    // at its score, in the wrong direction.)
    let holds = |u: &serde_json::Value| u["injections"].as_array().is_some_and(|a| !a.is_empty());
    let raised = units.iter().take(2).find(|u| holds(u));
    // The raise itself is checked above (`f_raised`); the first lines of the *why* may
    // name the retry path that follows it (log, close, reconnect: evidence of the same
    // strength, whose order among ties varies from run to run) before the exception.
    if let Some(u) = raised {
        if !why(u).iter().any(|w| w.contains("TimeoutError")) {
            eprintln!(
                "the raising unit's why does not name the TimeoutError: {:?}",
                why(u)
            );
        }
    }
    let listing = || {
        units
            .iter()
            .take(5)
            .map(|u| format!("{} {:.3} {:?}", u["id"], score(u), why(u)))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let Some(raised) = raised else {
        panic!(
            "the unit that raised (holding the injection) is not among the first two: {top}\nnext: {}",
            listing()
        );
    };
    assert!(
        raised["caused_by"].is_null() || holds(top),
        "the raise is filed under a unit it caused ({}): {raised}\nnext: {}",
        raised["caused_by"],
        listing()
    );
    eprintln!(
        "code fault: top unit {} (score {:.3}): {:?}",
        top["id"],
        score(top),
        why(top)
    );
}
