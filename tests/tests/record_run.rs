//! `culprit record` end to end: exit status, daemonizing children followed, LD_PRELOAD
//! kept, an unusable pool path, bad `--inject` specs, and a TCP client/server on
//! 127.0.0.1 whose calls are checked in `culprit dump --json`.
//!
//! Everything runs the built `culprit` and `libtrace.so` (`cargo build --workspace`).
//! Assertions on traced contents run once `libtrace.so` records entries; until then
//! they are skipped with a message (the process-tree parts still run).

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tests::*;

const DEADLINE: Duration = Duration::from_secs(60);

fn record(out: &Path, extra: &[&str], cmd: &[&str]) -> RunOutput {
    run_with_deadline(
        Command::new(culprit())
            .arg("record")
            .arg("-o")
            .arg(out)
            .args(["--subbufs", "16", "--subbuf-size", "64K"])
            .args(extra)
            .arg("--")
            .args(cmd),
        DEADLINE,
    )
}

fn manifest(out: &Path) -> serde_json::Value {
    let text = std::fs::read(out.join("manifest.json"))
        .unwrap_or_else(|e| panic!("{}/manifest.json: {e}", out.display()));
    serde_json::from_slice(&text).unwrap()
}

/// True if `libtrace.so` records something for `/bin/true` (else prints why the
/// caller skips its traced-content checks).
fn libtrace_records(test: &str) -> bool {
    if libtrace_or_skip(test).is_none() {
        return false;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    record(&out, &[], &["/bin/true"]).assert_success("culprit record -- /bin/true");
    let n = manifest(&out)["totals"]["processes"].as_u64().unwrap_or(0);
    if n == 0 {
        skip(
            test,
            "the traced-content checks",
            "libtrace.so records nothing for /bin/true",
        );
    }
    n > 0
}

#[test]
fn record_exits_with_the_commands_status() {
    if libtrace_or_skip("record_exits_with_the_commands_status").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for (cmd, want) in [("exit 0", 0), ("exit 7", 7), ("kill -TERM $$", 128 + 15)] {
        let out = tmp.path().join(format!("t{want}"));
        let r = record(&out, &[], &["sh", "-c", cmd]);
        assert!(!r.timed_out);
        assert_eq!(r.status.code(), Some(want), "{cmd}: {}", r.stderr);
        assert!(r.stderr.contains("culprit: recorded"), "{}", r.stderr);
        assert_eq!(manifest(&out)["complete"], true);
    }
}

#[test]
fn record_follows_children_that_daemonize() {
    if libtrace_or_skip("record_follows_children_that_daemonize").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mark = tmp.path().join("mark");
    let out = tmp.path().join("t");
    // The main process exits at once; a grandchild in a new session (setsid, re-parented
    // to culprit as subreaper) writes the mark 0.5 s later.
    let script = format!(
        "setsid sh -c 'sleep 0.5; echo $$ > {}' & exit 3",
        mark.display()
    );
    let r = record(&out, &[], &["sh", "-c", &script]);
    assert!(!r.timed_out, "{}", r.stderr);
    assert_eq!(r.status.code(), Some(3), "{}", r.stderr);
    let daemon: u64 = std::fs::read_to_string(&mark)
        .expect("culprit record returned before the daemonized child finished")
        .trim()
        .parse()
        .unwrap();
    if libtrace_records("record_follows_children_that_daemonize") {
        let m = manifest(&out);
        let pids: Vec<u64> = m["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pid"].as_u64().unwrap())
            .collect();
        assert!(pids.contains(&daemon), "daemon {daemon} not in {pids:?}");
    }
}

#[test]
fn record_keeps_an_existing_ld_preload_after_libtrace_and_removes_its_pool() {
    let Some(lib) = libtrace_or_skip("record_keeps_an_existing_ld_preload") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    let r = run_with_deadline(
        Command::new(culprit())
            .args(["record", "-o"])
            .arg(&out)
            .args(["--", "sh", "-c", "echo \"$LD_PRELOAD|$CULPRIT_POOL\""])
            .env("LD_PRELOAD", "/nonexistent/libother.so")
            .env_remove(LIBTRACE_ENV),
        DEADLINE,
    );
    r.assert_success("record");
    let line = r.stdout.lines().last().unwrap_or_default().to_string();
    let (preload, pool) = line.split_once('|').unwrap();
    assert_eq!(
        preload,
        format!("{}:/nonexistent/libother.so", lib.display())
    );
    assert!(
        pool.starts_with("/dev/shm/culprit-") && pool.ends_with(".pool"),
        "{pool}"
    );
    assert!(
        !Path::new(pool).exists(),
        "the pool file is deleted at the end"
    );
}

#[test]
fn an_unwritable_pool_path_runs_the_program_with_one_warning() {
    if libtrace_or_skip("an_unwritable_pool_path").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let r = run_with_deadline(
        Command::new(culprit())
            .args(["record", "--pool", "/proc/culprit-no-such-dir/pool", "-o"])
            .arg(tmp.path().join("t"))
            .args(["--", "sh", "-c", "echo ran; exit 5"]),
        DEADLINE,
    );
    assert!(!r.timed_out);
    assert_eq!(r.status.code(), Some(5));
    assert_eq!(r.stdout, "ran\n");
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line on stderr: {:?}", r.stderr);
    assert!(
        lines[0].contains("warning") && lines[0].contains("/proc/culprit-no-such-dir/pool"),
        "{}",
        lines[0]
    );
}

#[test]
fn a_bad_inject_spec_is_rejected_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let mark = tmp.path().join("ran");
    let r = run_with_deadline(
        Command::new(culprit())
            .args([
                "record",
                "--inject",
                "recv:short=3",
                "--inject",
                "recv:shrt=3",
                "-o",
            ])
            .arg(tmp.path().join("t"))
            .arg("--")
            .arg("touch")
            .arg(&mark),
        DEADLINE,
    );
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("recv:shrt=3") && r.stderr.contains("column 6"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("\n  recv:shrt=3\n       ^"),
        "{}",
        r.stderr
    );
    assert!(!mark.exists(), "the command must not run");
    assert!(!tmp.path().join("t").exists(), "no trace directory is made");
}

const TCP_PAIR: &str = r#"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* A server and a client (forked) on 127.0.0.1: the client sends "hello", the server
   answers "bye"; then the client connects to a closed port (ECONNREFUSED). */
int main(void) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a; memset(&a, 0, sizeof a);
    a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(INADDR_LOOPBACK); a.sin_port = 0;
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 4)) { perror("bind"); return 1; }
    socklen_t al = sizeof a; getsockname(ls, (struct sockaddr *)&a, &al);
    int closed = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in c = a; c.sin_port = 0;
    bind(closed, (struct sockaddr *)&c, sizeof c);      /* a port nobody listens on */
    socklen_t cl = sizeof c; getsockname(closed, (struct sockaddr *)&c, &cl);
    pid_t pid = fork();
    if (pid == 0) {
        close(ls);
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(s, (struct sockaddr *)&a, sizeof a)) { perror("connect"); _exit(2); }
        if (send(s, "hello", 5, 0) != 5) _exit(3);
        char buf[16]; size_t n = 0;
        while (n < 3) { ssize_t r = recv(s, buf + n, sizeof buf - n, 0); if (r <= 0) _exit(4); n += r; }
        close(s);
        int r = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(r, (struct sockaddr *)&c, sizeof c) == 0) _exit(5);
        close(r);
        _exit(0);
    }
    int s = accept(ls, NULL, NULL);
    char buf[16]; size_t got = 0;
    while (got < 5) { ssize_t n = recv(s, buf + got, sizeof buf - got, 0); if (n <= 0) return 6; got += n; }
    if (send(s, "bye", 3, 0) != 3) return 7;
    int st; waitpid(pid, &st, 0);
    close(s); close(ls); close(closed);
    printf("child %d status %d\n", (int)pid, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 9;
}
"#;

#[test]
fn a_tcp_client_and_server_are_recorded_call_by_call() {
    let prog = compile_c("tcp_pair", TCP_PAIR, &[]);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    if libtrace_or_skip("a_tcp_client_and_server").is_none() {
        return;
    }
    let r = record(&out, &[], &[prog.path.to_str().unwrap()]);
    r.assert_success("traced tcp_pair");
    let child: u64 = r
        .stdout
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{}", r.stdout));
    if !libtrace_records("a_tcp_client_and_server") {
        return;
    }
    let d = run_with_deadline(
        Command::new(culprit()).args(["dump", "--json"]).arg(&out),
        DEADLINE,
    );
    d.assert_success("dump");
    let lines = parse_json_lines(&d.stdout);
    let exits = |pid: u64, name: &str| -> Vec<&serde_json::Value> {
        lines
            .iter()
            .filter(|l| l["pid"] == pid && l["kind"] == "lib_exit" && l["name"] == name)
            .collect()
    };
    let server = lines
        .iter()
        .find(|l| l["kind"] == "lib_exit" && l["name"] == "listen")
        .expect("listen recorded")["pid"]
        .as_u64()
        .unwrap();
    assert_ne!(server, child);
    assert_eq!(exits(server, "listen").len(), 1);
    assert_eq!(exits(server, "fork").len(), 1);
    assert_eq!(exits(server, "fork")[0]["ret"], child);
    let acc = exits(server, "accept");
    assert_eq!(acc.len(), 1);
    let conn_fd = acc[0]["ret"].as_i64().unwrap();
    assert!(conn_fd >= 0);
    let got: u64 = exits(server, "recv")
        .iter()
        .filter(|l| l["fd"] == conn_fd)
        .map(|l| l["bytes"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(got, 5, "server received hello");
    let sent = exits(server, "send");
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0]["fd"].as_i64(), sent[0]["bytes"].as_u64()),
        (Some(conn_fd), Some(3))
    );

    let conns = exits(child, "connect");
    assert_eq!(conns.len(), 2, "{conns:?}");
    assert_eq!(conns[0]["ret"], 0);
    assert_eq!(conns[1]["ret"], -1);
    assert_eq!(conns[1]["errno_name"], "ECONNREFUSED");
    // The forked child has no memory map of its own: its call sites are named through
    // its parent's, from the program's DWARF.
    let site = conns[0]["caller_name"].as_str().unwrap_or_default();
    assert!(site.starts_with("main (tcp_pair.c:"), "{site}");
    let csend = exits(child, "send");
    assert_eq!((csend.len(), csend[0]["bytes"].as_u64()), (1, Some(5)));
    let crecv = exits(child, "recv");
    assert_eq!((crecv.len(), crecv[0]["bytes"].as_u64()), (1, Some(3)));
    assert_eq!(r.stdout.trim_end(), format!("child {child} status 0"));

    // --pid keeps exactly that process's lines.
    let only = run_with_deadline(
        Command::new(culprit())
            .args(["dump", "--json", "--pid", &child.to_string()])
            .arg(&out),
        DEADLINE,
    );
    only.assert_success("dump --pid");
    let only = parse_json_lines(&only.stdout);
    let all_child = lines.iter().filter(|l| l["pid"] == child).count();
    assert_eq!(only.len(), all_child);
    assert!(only.iter().all(|l| l["pid"] == child));

    let m = manifest(&out);
    let procs = m["processes"].as_array().unwrap();
    let cp = procs
        .iter()
        .find(|p| p["pid"] == child)
        .expect("child in manifest");
    assert_eq!(cp["ppid"], server);
    assert_eq!(cp["origin"], "fork");
    assert_eq!(m["totals"]["lost"], 0);
}

const KILLED: &str = r#"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Connects to a port nobody listens on, then dies by SIGKILL: no chance to flush. */
int main(void) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a; memset(&a, 0, sizeof a);
    a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(l, (struct sockaddr *)&a, sizeof a);
    socklen_t al = sizeof a; getsockname(l, (struct sockaddr *)&a, &al);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    connect(s, (struct sockaddr *)&a, sizeof a);
    raise(SIGKILL);
    return 0;
}
"#;

#[test]
fn a_traced_program_killed_by_sigkill_keeps_what_it_recorded() {
    let prog = compile_c("killed", KILLED, &[]);
    if libtrace_or_skip("a_traced_program_killed_by_sigkill").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    let r = record(&out, &[], &[prog.path.to_str().unwrap()]);
    assert!(!r.timed_out);
    assert_eq!(r.status.code(), Some(128 + 9), "{}", r.stderr);
    if !libtrace_records("a_traced_program_killed_by_sigkill") {
        return;
    }
    let m = manifest(&out);
    assert!(m["totals"]["salvaged"].as_u64().unwrap() >= 1, "{m}");
    let d = run_with_deadline(
        Command::new(culprit()).args(["dump", "--json"]).arg(&out),
        DEADLINE,
    );
    d.assert_success("dump");
    let lines = parse_json_lines(&d.stdout);
    let refused = lines.iter().any(|l| {
        l["kind"] == "lib_exit" && l["name"] == "connect" && l["errno_name"] == "ECONNREFUSED"
    });
    assert!(refused, "the refused connect before SIGKILL was recovered");
}

#[test]
fn sigint_stops_the_tree_including_daemons_then_the_trace_is_drained() {
    if libtrace_or_skip("sigint_stops_the_tree").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    let ready = tmp.path().join("ready");
    // The main process and a daemon in its own session both sleep 30 s.
    let script = format!(
        "setsid sleep 30 & echo > {}; exec sleep 30",
        ready.display()
    );
    let mut rec = Guarded::spawn(
        Command::new(culprit())
            .args(["record", "-o"])
            .arg(&out)
            .args(["--", "sh", "-c", &script])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped()),
    );
    assert!(wait_until(Duration::from_secs(30), || ready.exists()));
    std::thread::sleep(Duration::from_millis(200));
    // As a terminal's Ctrl-C: SIGINT to the foreground process group (culprit record
    // and the main process, not the daemon, which left the group).
    // SAFETY: kill(2) on the process group of our own child.
    unsafe { libc::kill(-(rec.pid() as i32), libc::SIGINT) };
    let st = rec
        .wait_for(Duration::from_secs(20))
        .expect("culprit record ends well before the 30 s sleeps");
    assert_eq!(st.code(), Some(128 + libc::SIGINT), "{st}");
    let mut err = String::new();
    std::io::Read::read_to_string(rec.child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("culprit: recorded"), "{err}");
    assert_eq!(manifest(&out)["complete"], true);
}

/// A SIGINT sent to `culprit record` alone (`kill PID`, a script's or a supervisor's stop,
/// not a terminal's Ctrl-C to the whole group) stops the traced command too: it used to go
/// only to daemons, so a command in culprit's own group never heard of it and the
/// recording went on (the soak of issue 30 waited 60 s for it, then killed it).
#[test]
fn a_sigint_sent_to_culprit_alone_stops_the_command_in_its_group() {
    if libtrace_or_skip("a_sigint_sent_to_culprit_alone").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    let ready = tmp.path().join("ready");
    let script = format!("echo > {}; exec sleep 60", ready.display());
    let mut rec = Guarded::spawn(
        Command::new(culprit())
            .args(["record", "-o"])
            .arg(&out)
            .args(["--keep", "4M", "--", "sh", "-c", &script])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped()),
    );
    assert!(wait_until(Duration::from_secs(30), || ready.exists()));
    std::thread::sleep(Duration::from_millis(200));
    let before = reader::stopmark::now_unix_ns();
    // SAFETY: kill(2) on our own child, culprit record alone.
    unsafe { libc::kill(rec.pid() as i32, libc::SIGINT) };
    let st = rec
        .wait_for(Duration::from_secs(30))
        .expect("culprit record ends well before the 60 s sleep");
    assert_eq!(st.code(), Some(128 + libc::SIGINT), "{st}");
    let mut err = String::new();
    std::io::Read::read_to_string(rec.child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("culprit: recorded"), "{err}");
    assert_eq!(manifest(&out)["complete"], true);
    // When it was asked to stop, for `culprit watch` (`stop.json`).
    let mark = reader::stopmark::read(&out).expect("stop.json written");
    assert_eq!(mark.signal, libc::SIGINT);
    assert!(
        (before..=reader::stopmark::now_unix_ns()).contains(&mark.unix_ns),
        "{mark:?}"
    );
}

#[test]
fn an_injected_short_read_is_recorded_with_its_rule() {
    let prog = compile_c("tcp_pair", TCP_PAIR, &[]);
    if !libtrace_records("an_injected_short_read") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    let rule = "recv:short=2,count=1";
    let r = record(&out, &["--inject", rule], &[prog.path.to_str().unwrap()]);
    // Both sides loop until they have the whole message: the program still succeeds.
    r.assert_success("tcp_pair with a short read injected");
    let d = run_with_deadline(
        Command::new(culprit()).args(["dump", "--json"]).arg(&out),
        DEADLINE,
    );
    d.assert_success("dump");
    let lines = parse_json_lines(&d.stdout);
    let recvs: Vec<_> = lines
        .iter()
        .filter(|l| l["kind"] == "lib_exit" && l["name"] == "recv")
        .collect();
    let injected: Vec<_> = recvs
        .iter()
        .filter(|l| l.get("inject_rule").is_some())
        .collect();
    // One injection per process (count=1): the server's and the client's first recv.
    assert_eq!(injected.len(), 2, "{recvs:?}");
    for l in &injected {
        assert_eq!(l["inject_rule"], 0);
        assert_eq!(l["bytes"], 2, "{l}");
    }
    let total: u64 = recvs.iter().map(|l| l["bytes"].as_u64().unwrap_or(0)).sum();
    assert_eq!(total, 5 + 3, "every byte still arrives");
    let metas: Vec<_> = lines
        .iter()
        .filter(|l| l["kind"] == "meta_inject")
        .collect();
    assert_eq!(metas.len(), 2);
    assert!(metas
        .iter()
        .all(|m| m["spec"] == rule && m["func"] == "recv"));
}

#[test]
fn the_manifest_lists_processes_with_their_fork_and_exec_links() {
    if !libtrace_records("the_manifest_lists_processes") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    // sh forks a child, which execs sh, which execs true.
    record(&out, &[], &["sh", "-c", "sh -c 'exec true'; true"]).assert_success("record");
    let m = manifest(&out);
    let procs = m["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 2, "{procs:?}");
    let by_origin = |o: &str| procs.iter().find(|p| p["origin"] == o).unwrap();
    let (parent, child) = (by_origin("start"), by_origin("fork"));
    assert_eq!(parent["origin"], "start");
    assert_eq!(parent["argv"][0], "sh");
    assert_eq!(child["origin"], "fork");
    assert_eq!(child["ppid"], parent["pid"]);
    assert_eq!(child["execs"], 2);
    assert!(child["exe"].as_str().unwrap().ends_with("/true"), "{child}");
    assert_eq!(child["argv"], serde_json::json!(["true"]));
    assert_eq!(m["totals"]["processes"], 2);
    assert_eq!(m["totals"]["lost"], 0);
}

#[test]
fn a_standalone_reader_records_a_daemon_started_by_hand() {
    if !libtrace_records("a_standalone_reader") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let pool = tmp.path().join("by-hand.pool");
    let out = tmp.path().join("t");
    let mut r = Guarded::spawn(
        Command::new(culprit())
            .args(["reader", "--create", "--pool"])
            .arg(&pool)
            .arg("-o")
            .arg(&out)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null()),
    );
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(r.child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    // Start "the daemon" the way a user would, with the printed variables.
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo started"]);
    for kv in line.split_whitespace() {
        let (k, v) = kv.split_once('=').unwrap();
        cmd.env(k, v);
    }
    let d = run_with_deadline(&mut cmd, DEADLINE);
    d.assert_success("the hand-started program");
    assert_eq!(d.stdout, "started\n");
    let st = r
        .wait_for(Duration::from_secs(30))
        .expect("the reader stops once the traced program is gone");
    assert!(st.success(), "{st}");
    let m = manifest(&out);
    assert_eq!(m["complete"], true);
    assert_eq!(m["totals"]["processes"], 1, "{m}");
    assert_eq!(
        m["processes"][0]["argv"],
        serde_json::json!(["sh", "-c", "echo started"])
    );
    assert!(!pool.exists());
}

#[test]
fn a_pool_larger_than_its_file_system_is_refused_and_the_program_still_runs() {
    if libtrace_or_skip("a_pool_larger_than_its_file_system").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // 1 Mi sub-buffers of 1 GiB: 1 PiB, more than any /dev/shm.
    let r = run_with_deadline(
        Command::new(culprit())
            .args([
                "record",
                "--subbufs",
                "1048576",
                "--subbuf-size",
                "1024M",
                "-o",
            ])
            .arg(tmp.path().join("t"))
            .args(["--", "sh", "-c", "echo ran; exit 4"]),
        DEADLINE,
    );
    assert_eq!(r.status.code(), Some(4));
    assert_eq!(r.stdout, "ran\n");
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{:?}", r.stderr);
    assert!(
        lines[0].contains("warning") && lines[0].contains("MiB free"),
        "{}",
        lines[0]
    );
}
