//! The MPD-like ring daemon of `tests/ring/` (used by the end-to-end test of the analyzer
//! and by the README's demo): it completes its jobs with both event loops, and it has the
//! MPD bug for real — a peer whose header arrives in two TCP segments makes the receiving
//! daemon close its ring connection, the ring hangs, and the launcher's global timeout
//! ends the run with status 3 and kills every daemon.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn ring_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ring")
}

fn run_ring(args: &[&str], deadline: Duration) -> tests::RunOutput {
    let mut c = Command::new("python3");
    c.arg(ring_dir().join("run_ring.py")).args(args);
    tests::run_with_deadline(&mut c, deadline)
}

/// True when no process listens on any port of the ring any more.
fn ring_ports_released(base: u16, n: u16) -> bool {
    (base..base + n).all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
}

#[test]
fn every_job_goes_round_the_ring_with_select_and_with_poll() {
    for lp in ["select", "poll"] {
        let base = tests::free_port_range(5).to_string();
        let r = run_ring(
            &[
                "--nodes",
                "5",
                "--jobs",
                "20",
                "--loop",
                lp,
                "--base-port",
                &base,
                "--timeout",
                "30",
            ],
            Duration::from_secs(60),
        );
        r.assert_success(&format!("run_ring --loop {lp}"));
        assert!(
            r.stdout.contains("20 jobs went round a ring of 5 nodes"),
            "{lp}: {}",
            r.stdout
        );
        assert!(
            r.stderr.contains("ring node 0: all 20 jobs completed"),
            "{}",
            r.stderr
        );
        assert!(!r.stderr.contains("lost the lhs"), "{lp}: {}", r.stderr);
    }
}

/// Node `id` of the ring played by a relay that forwards every message correctly framed,
/// except that the header of its `split`-th job leaves in two TCP segments (3 bytes, a
/// pause, the rest) — legal TCP that a correct receiver must reassemble.
const RELAY: &str = r#"
import json, socket, sys, time
sys.path.insert(0, sys.argv[1])
import ring_node as rn
me, n, base, split = (int(x) for x in sys.argv[2:6])
lst = socket.socket(); lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lst.bind(("127.0.0.1", base + me)); lst.listen(4)
for _ in range(400):
    rhs = socket.socket()
    try:
        rhs.connect(("127.0.0.1", base + (me + 1) % n)); break
    except OSError:
        rhs.close(); time.sleep(0.025)
rhs.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rn.send_dict_msg(rhs, {"cmd": "hello", "from": me})
lhs, _ = lst.accept()
lhs.settimeout(30)
jobs = 0
while True:
    hdr = rn.recv_exact(lhs, 8)
    if hdr is None:
        break
    msg = json.loads(rn.recv_exact(lhs, int(hdr)))
    if msg["cmd"] == "job":
        msg = rn.do_job(me, msg)
        jobs += 1
    body = json.dumps(msg).encode()
    frame = b"%08d" % len(body) + body
    if msg["cmd"] == "job" and jobs == split:
        print("relay: splitting the header of job", msg["id"], flush=True)
        rhs.sendall(frame[:3]); time.sleep(0.3)
        try:
            rhs.sendall(frame[3:])
        except OSError as e:
            print("relay: rhs gone:", e, flush=True)
    elif msg["cmd"] != "hello":
        rhs.sendall(frame)
    if msg["cmd"] == "shutdown":
        break
print("relay: forwarded", jobs, "jobs", flush=True)
"#;

fn ring_with_relay(split: u32, timeout: &str) -> (tests::RunOutput, tests::RunOutput, u16) {
    let dir = tempfile::tempdir().unwrap();
    let relay = dir.path().join("relay.py");
    std::fs::write(&relay, RELAY).unwrap();
    let base = tests::free_port_range(5);
    let mut rc = Command::new("python3");
    rc.arg(&relay)
        .arg(ring_dir())
        .args(["2", "5", &base.to_string(), &split.to_string()]);
    let relay_thread =
        std::thread::spawn(move || tests::run_with_deadline(&mut rc, Duration::from_secs(40)));
    let r = run_ring(
        &[
            "--nodes",
            "5",
            "--jobs",
            "8",
            "--external",
            "2",
            "--base-port",
            &base.to_string(),
            "--timeout",
            timeout,
        ],
        Duration::from_secs(60),
    );
    let relay_out = relay_thread.join().expect("relay thread");
    (r, relay_out, base)
}

#[test]
fn a_header_split_across_segments_breaks_the_ring_and_the_launcher_reports_the_hang() {
    // Control: the same relay, never splitting: the ring completes.
    let (r, relay, _) = ring_with_relay(0, "30");
    r.assert_success("ring with a relay that never splits");
    assert!(
        relay.stdout.contains("relay: forwarded 8 jobs"),
        "{relay:?}"
    );

    // The 3rd job's header leaves in two segments: node 3 reads 3 bytes with its one
    // recv(8), closes its lhs connection, the job is lost and the ring hangs.
    let (r, relay, base) = ring_with_relay(3, "6");
    assert!(!r.timed_out, "the launcher must end the run itself: {r:?}");
    assert_eq!(r.status.code(), Some(3), "a hang is exit status 3: {r:?}");
    assert!(r.stderr.contains("the ring hung"), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("ring node 3: lost the lhs connection (short or empty header)"),
        "the daemon after the relay must take the short header for a lost connection:\n{}",
        r.stderr
    );
    assert!(!r.stderr.contains("all 8 jobs completed"), "{}", r.stderr);
    assert!(
        relay.stdout.contains("relay: splitting the header of job"),
        "{relay:?}"
    );
    // Every daemon is gone: all the ring's ports can be bound again.
    assert!(
        tests::wait_until(Duration::from_secs(10), || ring_ports_released(base, 5)),
        "daemons outlived the launcher"
    );
}

/// `culprit record` of the ring, normal and with a short `recv` injected from outside:
/// every daemon's handlers are in the trace, named, with the socket calls they make.
/// Needs the built `culprit` and libtrace.so; nothing installed into Python (issue 17).
#[test]
fn the_ring_under_culprit_record_is_traced_in_every_daemon() {
    if tests::libtrace_or_skip("the_ring_under_culprit_record").is_none() {
        return;
    }
    let culprit = tests::culprit();
    for (inject, want_status) in [(None, 0), (Some("recv:short=3,nth=17"), 3)] {
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join("trace");
        let base = tests::free_port_range(5).to_string();
        let mut c = Command::new(&culprit);
        c.arg("record").arg("-o").arg(&dir);
        if let Some(spec) = inject {
            c.args(["--inject", spec]);
        }
        c.arg("--")
            .arg("python3")
            .arg(ring_dir().join("run_ring.py"))
            .args([
                "--nodes",
                "5",
                "--jobs",
                "12",
                "--base-port",
                &base,
                "--timeout",
                "8",
            ]);
        let r = tests::run_with_deadline(&mut c, Duration::from_secs(90));
        assert!(!r.timed_out, "{r:?}");
        assert_eq!(
            r.status.code(),
            Some(want_status),
            "inject {inject:?}: {r:?}"
        );
        let dump = tests::run_with_deadline(
            Command::new(&culprit).arg("dump").arg("--json").arg(&dir),
            Duration::from_secs(60),
        );
        dump.assert_success("culprit dump");
        // Per pid: which handlers ran, and whether recv_dict_msg called _socket.socket.recv.
        let mut handlers: std::collections::BTreeMap<u64, std::collections::BTreeSet<String>> =
            Default::default();
        // Python frames open per thread: a libc recv made in recv_dict_msg counts as well
        // as the builtin call (the default mode records Python frames, not builtins).
        let mut open: std::collections::HashMap<(u64, u64), Vec<String>> = Default::default();
        for v in tests::parse_json_lines(&dump.stdout) {
            let kind = v["kind"].as_str().unwrap_or("");
            let name = v["name"].as_str().unwrap_or("");
            let pid = v["pid"].as_u64().unwrap_or(0);
            let stack = open
                .entry((pid, v["tid"].as_u64().unwrap_or(0)))
                .or_default();
            match kind {
                "py_call" => stack.push(name.to_string()),
                "py_return" => {
                    stack.pop();
                }
                "lib_enter" | "lib"
                    if name == "recv"
                        && stack.last().map(String::as_str) == Some("__main__.recv_dict_msg") =>
                {
                    handlers
                        .entry(pid)
                        .or_default()
                        .insert("recv from recv_dict_msg".into());
                }
                _ => {}
            }
            if kind == "py_call" && name.starts_with("__main__.Node.handle_") {
                handlers.entry(pid).or_default().insert(name.to_string());
            }
            if kind == "py_ccall"
                && name == "_socket.socket.recv"
                && v["caller"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("__main__.recv_dict_msg+")
            {
                handlers
                    .entry(pid)
                    .or_default()
                    .insert("recv from recv_dict_msg".into());
            }
        }
        let daemons: Vec<_> = handlers
            .values()
            .filter(|h| {
                h.contains("__main__.Node.handle_lhs_input")
                    && h.contains("__main__.Node.handle_new_connection")
                    && h.contains("recv from recv_dict_msg")
            })
            .collect();
        assert_eq!(
            daemons.len(),
            5,
            "inject {inject:?}: handlers per pid {handlers:#?}"
        );
        if inject.is_some() {
            assert!(
                r.stderr
                    .contains("lost the lhs connection (short or empty header)"),
                "{}",
                r.stderr
            );
        }
    }
}
