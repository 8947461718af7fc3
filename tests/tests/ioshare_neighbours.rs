//! `culprit ioshare` among neighbours (issue 26): a one-process upload server, one client
//! that sends it everything it writes, and three processes of the same job that write
//! local files (one in bursts, one a log, one short-lived) and never connect to it. The
//! sampler lists every process's descriptors; the estimate takes as candidate clients only
//! the process seen connected to the server and gives the others a share of 0, naming why.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;
use tests::{culprit, run_with_deadline, Guarded};

/// A single-process server: accepts connections and writes what it reads to a file, with
/// `os.write` (its `wchar` is its load), all connections in one process (select).
const SERVER: &str = r#"
import os, select, socket, sys
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(8)
print(l.getsockname()[1], flush=True)
out = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
conns = []
while True:
    r, _, _ = select.select([l] + conns, [], [])
    for s in r:
        if s is l:
            conns.append(l.accept()[0])
            continue
        b = s.recv(65536)
        if not b:
            conns.remove(s); s.close()
        else:
            os.write(out, b)
"#;

/// The job: one client and three neighbours, each a child; prints their pids as JSON.
const JOB: &str = r#"
import json, os, socket, sys, time
port, d = int(sys.argv[1]), sys.argv[2]
buf = os.urandom(65536)
def client():
    s = socket.create_connection(("127.0.0.1", port))
    time.sleep(0.3)
    for k in range(40):
        os.write(s.fileno(), buf[: 20000 + 1000 * (k % 7)])
        time.sleep(0.05 if k % 5 else 0.2)
    s.close()
def burst():
    fd = os.open(os.path.join(d, "burst"), os.O_WRONLY | os.O_CREAT)
    for k in range(6):
        for _ in range(8):
            os.write(fd, buf)
        time.sleep(0.4)
def log():
    fd = os.open(os.path.join(d, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    for k in range(120):
        os.write(fd, b"line %d %s\n" % (k, b"x" * 200))
        time.sleep(0.02)
def short():
    time.sleep(1.0)
    fd = os.open(os.path.join(d, "short"), os.O_WRONLY | os.O_CREAT)
    for _ in range(10):
        os.write(fd, buf)
pids = {}
for name, f in [("client", client), ("burst", burst), ("log", log), ("short", short)]:
    p = os.fork()
    if p == 0:
        f(); os._exit(0)
    pids[name] = p
for p in pids.values():
    os.waitpid(p, 0)
print(json.dumps(pids), flush=True)
"#;

#[test]
fn only_the_process_connected_to_the_server_is_a_client() {
    let tmp = tempfile::tempdir().unwrap();
    let mut srv = Command::new("python3");
    srv.args(["-c", SERVER])
        .arg(tmp.path().join("received"))
        .stdout(Stdio::piped());
    let mut server = Guarded::spawn(&mut srv);
    let port: u16 = {
        let out = server.child.stdout.take().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(out).read_line(&mut line).unwrap();
        line.trim().parse().expect("server port")
    };
    let server_pid = server.child.id().to_string();
    let f = tmp.path().join("io.cios");
    let out = run_with_deadline(
        Command::new(culprit())
            .args([
                "iosample",
                "--interval",
                "50ms",
                "--server",
                &server_pid,
                "-o",
            ])
            .arg(&f)
            .args(["--", "python3", "-c", JOB, &port.to_string()])
            .arg(tmp.path()),
        Duration::from_secs(60),
    );
    out.assert_success("iosample");
    let pids: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("job's pids");
    let pid = |k: &str| pids[k].as_u64().unwrap();

    let ioshare = |extra: &[&str]| -> serde_json::Value {
        let r = run_with_deadline(
            Command::new(culprit())
                .arg("ioshare")
                .arg(&f)
                .args(["--server", &server_pid, "--json"])
                .args(extra),
            Duration::from_secs(60),
        );
        r.assert_success("ioshare");
        serde_json::from_str(&r.stdout).unwrap()
    };
    let j = ioshare(&[]);
    assert_eq!(j["clients"]["by"], "connections", "{}", j["clients"]);
    let cols: Vec<u64> = j["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(cols, vec![pid("client")], "{}", j["clients"]);
    let p = &j["processes"][0];
    assert_eq!(p["candidate"]["kind"], "connected", "{p}");
    // The server writes every byte it reads once: the true share is 1. The model's β lies in
    // [0, 1], but the regression's estimate is not constrained (001's thesis admitted
    // −0.1…1.1): it lands on either side of the truth (1.004 in one run under load).
    let beta = p["overall"].as_f64().unwrap();
    assert!((beta - 1.0).abs() < 0.2, "client's share {beta}, truth 1");
    let others = j["clients"]["others"].as_array().unwrap();
    for k in ["burst", "log", "short"] {
        let o = others
            .iter()
            .find(|o| o["pid"].as_u64() == Some(pid(k)))
            .unwrap_or_else(|| panic!("{k} not among the others: {}", j["clients"]));
        assert!(
            ["no_connection", "never_listed"].contains(&o["why"]["kind"].as_str().unwrap()),
            "{o}"
        );
    }
    assert!(j["clients"]["listen"][0]
        .as_str()
        .unwrap()
        .ends_with(&format!(":{port}")));

    // Every process a candidate: the neighbours are columns again.
    let all = ioshare(&["--clients", "all"]);
    assert_eq!(all["clients"]["by"], "all");
    let cols: Vec<u64> = all["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert!(
        cols.contains(&pid("client")) && cols.contains(&pid("burst")),
        "{cols:?}"
    );
    // Told the pids: exactly those.
    let told = ioshare(&["--clients", &pid("client").to_string()]);
    assert_eq!(told["clients"]["by"], "given");
    assert_eq!(told["processes"].as_array().unwrap().len(), 1);
}
