//! A connection whose one end the trace meets mid-stream, for real (loopback, bounded): a
//! traced Python server accepts; its forked child execs a static C program (the preload
//! library does not load into it: an untraced phase) that connects, writes 100 bytes and
//! reads 50, then execs a traced Python client on the connected socket. The tracer meets
//! that descriptor already open and records its addresses and TCP byte offsets once; the
//! analyzer pairs the two ends and aligns them: every byte moved after the exec is
//! matched, the 150 bytes of the untraced phase are `before_trace` — exactly what the
//! programs counted. Then both ends met mid-stream: a static C program (untraced) makes a
//! connection to itself, moves 130 bytes, and execs a traced server on one end and (in a
//! forked child) a traced client on the other: both ends are aligned by the kernel's
//! counts alone, every traced byte matched, none unmatched. The bounded-memory pass draws
//! the same flows.

#[path = "../e2e/common.rs"]
mod common;

use common::*;
use serde_json::Value;
use std::time::Duration;

const PRE: &str = r#"/* Untraced phase (a static binary: LD_PRELOAD does not apply): connects, moves bytes,
 * then execs the traced client with the connected socket. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc < 4) return 2;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(atoi(argv[1]));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) return 3;
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    if (write(s, buf, 100) != 100) return 4;
    size_t got = 0;
    while (got < 50) {
        ssize_t r = read(s, buf, 50 - got);
        if (r <= 0) return 5;
        got += r;
    }
    char fd[16];
    snprintf(fd, sizeof fd, "%d", s);
    execl(argv[2], argv[2], argv[3], fd, (char *)0);
    return 6;
}
"#;

const MAIN: &str = r#"import os, socket, sys
pre, client = sys.argv[1], sys.argv[2]
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(('127.0.0.1', 0)); ls.listen(1); port = ls.getsockname()[1]
pid = os.fork()
if pid == 0:
    ls.close()
    os.execv(pre, [pre, str(port), sys.executable, client])
c, _ = ls.accept()
def exact(n):
    b = b''
    while len(b) < n:
        k = c.recv(n - len(b))
        if not k: raise EOFError
        b += k
    return b
exact(100); c.sendall(bytes(50))          # the untraced phase's exchange
total_in = total_out = 0
while True:
    h = c.recv(4)
    if not h: break
    if len(h) < 4: h += exact(4 - len(h))
    n = int.from_bytes(h, 'big'); exact(n); total_in += 4 + n
    c.sendall(bytes(n // 2)); total_out += n // 2
os.waitpid(pid, 0)
sys.stdout.write('server after %d in %d out\n' % (total_in, total_out))
"#;

const CLIENT: &str = r#"import socket, sys
s = socket.socket(fileno=int(sys.argv[1]))
sent = got = 0
for n in (10, 300, 2000, 7):
    s.sendall(n.to_bytes(4, 'big') + bytes(n)); sent += 4 + n
    want = n // 2
    while want:
        k = s.recv(want); want -= len(k); got += len(k)
s.close()
sys.stdout.write('client sent %d received %d\n' % (sent, got))
"#;

const PRE_BOTH: &str = r#"/* Untraced (static: LD_PRELOAD does not apply): makes a TCP connection to itself, moves
 * 100 bytes one way and 30 the other, then the child execs the traced client on one end
 * and this process execs the traced server on the other. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
static int exact(int fd, char *b, int n) {
    int got = 0;
    while (got < n) {
        int r = read(fd, b + got, n - got);
        if (r <= 0) return -1;
        got += r;
    }
    return 0;
}
int main(int argc, char **argv) {
    if (argc < 4) return 2;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    socklen_t al = sizeof a;
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1)) return 3;
    getsockname(l, (struct sockaddr *)&a, &al);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, (struct sockaddr *)&a, sizeof a)) return 4;
    int s = accept(l, 0, 0);
    close(l);
    char buf[128];
    memset(buf, 'x', sizeof buf);
    if (write(c, buf, 100) != 100 || exact(s, buf, 100)) return 5;
    if (write(s, buf, 30) != 30 || exact(c, buf, 30)) return 6;
    char fd[16];
    if (fork() == 0) {
        close(s);
        snprintf(fd, sizeof fd, "%d", c);
        execl(argv[1], argv[1], argv[2], fd, (char *)0);
        return 7;
    }
    close(c);
    snprintf(fd, sizeof fd, "%d", s);
    execl(argv[1], argv[1], argv[3], fd, (char *)0);
    return 8;
}
"#;

const SERVER: &str = r#"import os, socket, sys
c = socket.socket(fileno=int(sys.argv[1]))
def exact(n):
    b = b''
    while len(b) < n:
        k = c.recv(n - len(b))
        if not k: raise EOFError
        b += k
    return b
total_in = total_out = 0
while True:
    h = c.recv(4)
    if not h: break
    if len(h) < 4: h += exact(4 - len(h))
    n = int.from_bytes(h, 'big'); exact(n); total_in += 4 + n
    c.sendall(bytes(n // 2)); total_out += n // 2
try: os.wait()
except ChildProcessError: pass
sys.stdout.write('server after %d in %d out\n' % (total_in, total_out))
"#;

/// Flows of `culprit export --format chrome` (the bounded-memory pass).
fn export_flows(dir: &std::path::Path, out: &std::path::Path) -> u64 {
    culprit_writes("export", dir, &["--format", "chrome", "--no-units"], out);
    let e: Value = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).expect("JSON");
    e["traceEvents"]
        .as_array()
        .expect("traceEvents")
        .iter()
        .filter(|ev| ev["flow_out"] == true)
        .count() as u64
}

/// `culprit messages --json` of `dir`, and its one TCP connection.
fn the_tcp_connection(dir: &std::path::Path) -> (Value, Value) {
    let j = run_culprit(
        &["messages", "--json", dir.to_str().unwrap()],
        Duration::from_secs(120),
    );
    j.assert_success("culprit messages --json");
    let v: Value = serde_json::from_str(&j.stdout).expect("JSON");
    let tcp: Vec<&Value> = v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "tcp")
        .collect();
    assert_eq!(tcp.len(), 1, "{v:#}");
    let c = tcp[0].clone();
    (v, c)
}

/// Compiles `src` as a static program (the preload library cannot load into it).
fn static_program(src: &str, dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let c = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&c, src).unwrap();
    let cc = std::process::Command::new("cc")
        .args(["-static", "-O1", "-o"])
        .arg(&exe)
        .arg(&c)
        .output()
        .expect("run cc");
    assert!(
        cc.status.success(),
        "cc -static (libc6-dev's libc.a) failed: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    exe
}

/// The numbers in the program's line starting with `key`.
fn numbers(out: &str, key: &str) -> Vec<u64> {
    out.lines()
        .find(|l| l.starts_with(key))
        .unwrap_or_else(|| panic!("no `{key}` line in {out}"))
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

#[test]
fn an_end_met_mid_stream_is_paired_and_aligned_by_its_tcp_offsets() {
    let mut tmp = tempfile::tempdir().expect("temporary directory");
    let root = tmp.path().to_path_buf();
    let p = |n: &str| root.join(n);
    let pre = static_program(PRE, tmp.path(), "pre");
    std::fs::write(p("main.py"), MAIN).unwrap();
    std::fs::write(p("client.py"), CLIENT).unwrap();
    let dir = p("trace");
    let r = record(
        &dir,
        &[],
        &[
            "python3",
            p("main.py").to_str().unwrap(),
            pre.to_str().unwrap(),
            p("client.py").to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    r.assert_success("record the server and the exec'd client");
    let client = numbers(&r.stdout, "client sent");
    let server = numbers(&r.stdout, "server after");
    assert_eq!(client, server, "{}", r.stdout);
    let (after_up, after_down) = (client[0], client[1]);
    let (v, c) = the_tcp_connection(&dir);
    let c = &c;
    assert!(!c["b"].is_null(), "the two ends are paired: {c:#}");
    let origins = [c["a"]["origin"].as_str(), c["b"]["origin"].as_str()];
    assert!(origins.contains(&Some("adopted")), "{c:#}");
    assert_eq!(
        c["matched_bytes"].as_u64().unwrap(),
        after_up + after_down,
        "{c:#}"
    );
    // The server received 100 bytes the untraced phase wrote and sent 50 it read.
    assert_eq!(c["unmatched"]["before_trace"], 150, "{c:#}");
    assert_eq!(c["unmatched_bytes"], 150, "{c:#}");
    assert_no_violations(&v, &mut tmp);
    let flows = export_flows(&dir, &p("mid.json"));
    assert_eq!(flows, v["totals"]["messages"].as_u64().unwrap());
}

#[test]
fn two_ends_met_mid_stream_are_aligned_by_the_kernels_counts() {
    let mut tmp = tempfile::tempdir().expect("temporary directory");
    let root = tmp.path().to_path_buf();
    let p = |n: &str| root.join(n);
    let pre = static_program(PRE_BOTH, tmp.path(), "pre2");
    std::fs::write(p("server.py"), SERVER).unwrap();
    std::fs::write(p("client.py"), CLIENT).unwrap();
    let dir = p("trace");
    let r = record(
        &dir,
        &[],
        &[
            pre.to_str().unwrap(),
            "/usr/bin/python3",
            p("client.py").to_str().unwrap(),
            p("server.py").to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    r.assert_success("record the two exec'd ends");
    let client = numbers(&r.stdout, "client sent");
    let server = numbers(&r.stdout, "server after");
    assert_eq!(client, server, "{}", r.stdout);
    let (v, c) = the_tcp_connection(&dir);
    let c = &c;
    assert_eq!(c["a"]["origin"], "adopted", "{c:#}");
    assert_eq!(c["b"]["origin"], "adopted", "{c:#}");
    // The 130 bytes of the untraced phase are in neither trace; every traced byte pairs.
    assert_eq!(
        c["matched_bytes"].as_u64().unwrap(),
        client[0] + client[1],
        "{c:#}"
    );
    assert_eq!(c["unmatched_bytes"], 0, "{c:#}");
    assert_no_violations(&v, &mut tmp);
    assert_eq!(
        export_flows(&dir, &p("mid2.json")),
        v["totals"]["messages"].as_u64().unwrap()
    );
}
