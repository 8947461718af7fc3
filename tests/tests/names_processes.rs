//! Processes named as they were started (issue 28): Debian's `redis-server` is a symlink to
//! `redis-check-rdb`; a master and its replica, recorded together, are named
//! `redis-server [redis-check-rdb] :MASTER` and `… :REPLICA → :MASTER` in the timeline,
//! the ranking (text and JSON) and the Perfetto/Chrome export alike.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tests::*;

const DEADLINE: Duration = Duration::from_secs(60);

fn ask(port: u16, req: &[u8], until: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(req).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains(until) {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

fn culprit_ok(args: &[&str], what: &str) -> RunOutput {
    let r = run_with_deadline(Command::new(culprit()).args(args), DEADLINE);
    r.assert_success(what);
    r
}

#[test]
fn redis_master_and_replica_are_named_as_started_everywhere() {
    if libtrace_or_skip("names_processes").is_none() {
        return;
    }
    let exe = Path::new("/usr/bin/redis-server");
    if !exe.exists() {
        skip(
            "names_processes",
            "the whole test",
            "redis-server is not installed (scripts/setup.d/daemons.sh)",
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let base = free_port_range(2);
    let (m, r) = (base, base + 1);
    let d = tmp.path().display();
    let server = |port: u16, extra: &str| {
        format!(
            "redis-server --port {port} --bind 127.0.0.1 --save '' --appendonly no \
             --dir {d} --dbfilename {port}.rdb --logfile '' {extra}"
        )
    };
    let script = format!(
        "{} & {} & wait",
        server(m, ""),
        server(r, &format!("--replicaof 127.0.0.1 {m}"))
    );
    let trace = tmp.path().join("t");
    let mut rec = Guarded::spawn(
        Command::new(culprit())
            .args(["record", "-o"])
            .arg(&trace)
            .args(["--", "sh", "-c", &script])
            .stdout(std::process::Stdio::null()),
    );
    for port in [m, r] {
        assert!(
            wait_until(DEADLINE, || TcpStream::connect(("127.0.0.1", port)).is_ok()),
            "redis did not listen on {port}"
        );
    }
    // The replica is in sync once it answers with the master's key.
    assert!(ask(m, b"SET k v\r\n", "\n").contains("OK"));
    assert!(
        wait_until(DEADLINE, || ask(r, b"GET k\r\n", "\n").contains('v')),
        "the replica never had the key"
    );
    ask(r, b"SHUTDOWN NOSAVE\r\n", "\n");
    ask(m, b"SHUTDOWN NOSAVE\r\n", "\n");
    assert!(rec.wait_for(DEADLINE).is_some(), "the servers did not stop");

    let master = format!("redis-server [redis-check-rdb] :{m}");
    let replica = format!("redis-server [redis-check-rdb] :{r} → :{m}");
    let t = trace.to_str().unwrap();
    let dir = tmp.path();

    let page = dir.join("page.html");
    culprit_ok(
        &["timeline", "-o", page.to_str().unwrap(), t],
        "culprit timeline",
    );
    let html = std::fs::read_to_string(&page).unwrap();
    for want in [&master, &replica] {
        // The page holds the labels JSON-escaped: compare without the arrow's escape.
        let plain = html.replace("\\u2192", "→");
        assert!(plain.contains(want.as_str()), "timeline lacks {want:?}");
    }
    assert!(!html.contains("redis-check-rdb:") && !html.contains(" redis-check-rdb\""));

    let json = dir.join("trace.json");
    culprit_ok(
        &[
            "export",
            "--format",
            "chrome",
            "-o",
            json.to_str().unwrap(),
            t,
        ],
        "culprit export",
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let names: Vec<String> = v["traceEvents"]
        .as_array()
        .or(v.as_array())
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap().to_string())
        .collect();
    for want in [&master, &replica] {
        assert!(
            names.iter().any(|n| n.ends_with(want.as_str())),
            "export lacks {want:?}: {names:?}"
        );
    }

    let model = dir.join("model");
    culprit_ok(
        &["learn", "-o", model.to_str().unwrap(), t],
        "culprit learn",
    );
    // Every unit is printed: the names are under test, not the order (in one run 3 009
    // units, and more than 1 000 of the replica's scored above the master's first).
    let text = culprit_ok(
        &[
            "rank",
            "--top",
            "1000000",
            "--model",
            model.to_str().unwrap(),
            t,
        ],
        "culprit rank",
    )
    .stdout;
    assert!(text.contains(&format!("({master})")), "{text}");
    assert!(text.contains(&format!("({replica})")), "{text}");
    let j = culprit_ok(
        &["rank", "--json", "--model", model.to_str().unwrap(), t],
        "culprit rank --json",
    )
    .stdout;
    let j: serde_json::Value = serde_json::from_str(&j).unwrap();
    let procs: Vec<&str> = j
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["process"].as_str())
        .collect();
    assert!(procs.contains(&master.as_str()), "{procs:?}");
    assert!(procs.contains(&replica.as_str()), "{procs:?}");
}
