//! Code-level and signal faults end to end (issue 31): `culprit record --inject` with a
//! `py:` rule makes a chosen Python function of a real CPython process raise on its n-th
//! call, and with `kill=SIGKILL` / `kill=SIGSTOP` makes the tracer kill or stop its own
//! process at the n-th matching libc call. Each is observed in what the program did and in
//! the trace (`culprit dump --json`: one `meta_inject` entry per injection, with the rule's
//! text).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// A module with a method, a static method and a coroutine, and a program that calls each
/// a few times, catching failures like a real client, then forks and calls again in the
/// child (counters are per process).
const TARGET: &str = r#"
import asyncio
class Store:
    def get(self, k):
        return k * 2
    @staticmethod
    def version():
        return 3
async def fetch(i):
    await asyncio.sleep(0)
    return i
"#;

const PROG: &str = r#"
import asyncio, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import target_mod
s = target_mod.Store()
def calls(who):
    for i in range(1, 9):
        try:
            assert s.get(i) == 2 * i
        except TimeoutError as e:
            print(who, "get raised at call", i, "rule" in str(e))
calls("parent")
for i in range(1, 5):
    try:
        target_mod.Store.version()
    except OSError:
        print("version raised at call", i)
async def main():
    for i in range(1, 5):
        try:
            await target_mod.fetch(i)
        except ConnectionResetError:
            print("fetch raised at call", i)
asyncio.run(main())
pid = os.fork()
if pid == 0:
    calls("child")
    os._exit(0)
os.waitpid(pid, 0)
print("done")
"#;

fn record(dir: &Path, out: &Path, inject: &[&str], cmd: &[&str]) -> tests::RunOutput {
    let mut c = Command::new(tests::culprit());
    c.arg("record").arg("-o").arg(out);
    for i in inject {
        c.arg("--inject").arg(i);
    }
    c.arg("--").args(cmd).current_dir(dir);
    tests::run_with_deadline(&mut c, Duration::from_secs(120))
}

/// The injection records of a trace: (pid, rule, func, spec).
fn injections(trace: &Path) -> Vec<(u64, u64, String, String)> {
    let dump = tests::run_with_deadline(
        Command::new(tests::culprit())
            .arg("dump")
            .arg("--json")
            .arg(trace),
        Duration::from_secs(60),
    );
    dump.assert_success("culprit dump");
    tests::parse_json_lines(&dump.stdout)
        .iter()
        .filter(|v| v["kind"] == "meta_inject")
        .map(|v| {
            (
                v["pid"].as_u64().unwrap_or(0),
                v["rule"].as_u64().unwrap_or(99),
                v["func"].as_str().unwrap_or("").to_string(),
                v["spec"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn a_py_rule_raises_from_the_chosen_function_on_its_nth_call_and_is_recorded() {
    if tests::libtrace_or_skip("inject_code_signal (py:)").is_none() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("target_mod.py"), TARGET).unwrap();
    std::fs::write(d.path().join("prog.py"), PROG).unwrap();
    let out = d.path().join("trace");
    let rules = [
        "py:target_mod:Store.get:raise=TimeoutError,nth=5",
        "py:target_mod:Store.version:raise=OSError,after=1,count=1",
        "recv:errno=EAGAIN,nth=1000000",
        "py:target_mod:fetch:raise=ConnectionResetError,nth=2",
    ];
    let r = record(d.path(), &out, &rules, &["python3", "prog.py"]);
    r.assert_success("culprit record");
    let seen: Vec<&str> = r.stdout.lines().filter(|l| l.contains("raised")).collect();
    assert_eq!(
        seen,
        [
            "parent get raised at call 5 True",
            "version raised at call 2",
            "fetch raised at call 2",
            "child get raised at call 5 True",
        ],
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    assert!(r.stdout.contains("done"));
    let inj = injections(&out);
    let got: Vec<(u64, &str, &str)> = inj
        .iter()
        .map(|(_, rule, f, s)| (*rule, f.as_str(), s.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (0, "python", rules[0]),
            (1, "python", rules[1]),
            (3, "python", rules[3]),
            (0, "python", rules[0]),
        ],
        "{inj:?}"
    );
    assert_ne!(inj[0].0, inj[3].0, "the last one is the child's");
}

/// A server thread and a client in one process over TCP loopback: the client sends ten
/// messages, one per `send`, each answered; prints each answer.
const PINGPONG: &str = r#"
import socket, sys, threading
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
def serve():
    c, _ = srv.accept()
    while True:
        b = c.recv(64)
        if not b:
            break
        c.sendall(b)
threading.Thread(target=serve, daemon=True).start()
cl = socket.create_connection(srv.getsockname())
for i in range(10):
    cl.sendall(b"m%d" % i)
    print("answer", cl.recv(64).decode(), flush=True)
print("done", flush=True)
"#;

#[test]
fn kill_sigkill_kills_the_process_at_the_nth_call_after_recording_it() {
    if tests::libtrace_or_skip("inject_code_signal (kill=SIGKILL)").is_none() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("pp.py"), PINGPONG).unwrap();
    let out = d.path().join("trace");
    let rule = "send|sendto:kill=SIGKILL,nth=4,exe=python3*";
    let r = record(d.path(), &out, &[rule], &["python3", "pp.py"]);
    assert!(!r.timed_out, "{}", r.stderr);
    let answers = r.stdout.lines().filter(|l| l.starts_with("answer")).count();
    // Sends: the client's 1st, the server's 1st, the client's 2nd, then the 4th call kills.
    assert!(answers < 10 && !r.stdout.contains("done"), "{}", r.stdout);
    let inj = injections(&out);
    assert_eq!(inj.len(), 1, "{inj:?}");
    assert!(matches!(inj[0].2.as_str(), "send" | "sendto"), "{inj:?}");
    assert_eq!(inj[0].3, rule);
}

/// A parent that runs PINGPONG as a child under the rule, waits (bounded) until the child
/// is stopped (state `T` in /proc), prints it, and kills it.
const STOPWATCH: &str = r#"
import subprocess, sys, time
p = subprocess.Popen([sys.executable, "pp.py"], stdout=subprocess.PIPE)
state = "?"
end = time.monotonic() + 30
while time.monotonic() < end and p.poll() is None:
    with open("/proc/%d/stat" % p.pid) as f:
        state = f.read().rsplit(")", 1)[1].split()[0]
    if state == "T":
        break
    time.sleep(0.05)
print("child state", state, flush=True)
p.kill()
p.wait()
"#;

#[test]
fn kill_sigstop_stops_the_process_at_the_nth_call_with_no_error() {
    if tests::libtrace_or_skip("inject_code_signal (kill=SIGSTOP)").is_none() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("pp.py"), PINGPONG).unwrap();
    std::fs::write(d.path().join("watch.py"), STOPWATCH).unwrap();
    let out = d.path().join("trace");
    let rule = "recv|recvfrom:kill=SIGSTOP,nth=3,argv=pp.py";
    let r = record(d.path(), &out, &[rule], &["python3", "watch.py"]);
    r.assert_success("culprit record");
    assert!(
        r.stdout.contains("child state T"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    let inj = injections(&out);
    assert_eq!(inj.len(), 1, "{inj:?}");
    assert_eq!(inj[0].3, rule);
}
