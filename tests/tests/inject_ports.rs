//! Port-keyed injection rules (`peer-port=`) on connections the peer has closed: a C
//! program talks to itself over loopback TCP under `libtrace.so` with
//! `CULPRIT_INJECT`, and every receive its client makes *after* the connection was closed
//! in both directions (or reset) — the kernel then answers `getpeername` with `ENOTCONN`
//! — must still match the rule by the peer port the connection had: the receive of the
//! last data and the one that meets end of stream alike. Descriptors that took the closed
//! socket's number (a `dup2` onto it, a new `socket`) and a connect the kernel refused
//! must not match.
//!
//! Each rule only delays by 1 µs, so what the program sees does not depend on the
//! injections; the `inject` option of each `recv`'s `LibExit` entry tells which matched.

use bufpool::format::{decode_all, Entry, Kind, LibFn};
use bufpool::inject::{self, INJECT_ENV};
use std::process::Command;
use std::time::Duration;
use tests::{compile_c, libtrace_or_skip, run_with_deadline, temp_pool};

const PORTS_C: &str = r#"/* ports PORT: one process, a listener on 127.0.0.1:PORT, and client connections to
 * it made one after the other; every client receive is printed "R <case> <ret> <errno>"
 * and is made after waiting until getpeername fails with ENOTCONN (the connection is
 * closed in both directions, or reset):
 *   fin      blocking connect; the client sends "q" and shuts down writing; the server
 *            reads to end of stream, answers "answer" and closes; recv (6), recv (0);
 *   dup2     a UDP socket dup2()ed onto the fin client's number: recv (EAGAIN);
 *   rst      blocking connect; the server resets it (SO_LINGER 0); recv (ECONNRESET),
 *            recv (0); the client closes;
 *   reuse    a new UDP socket that got the rst client's number: recv (EAGAIN);
 *   nb       non-blocking connect (EINPROGRESS), poll for POLLOUT, shutdown (no call in
 *            between that asks the socket's ports), then as fin: recv (6), recv (0);
 *   refused  non-blocking connect to PORT+1, where nobody listens: recv, recv.
 * "FD <case> <fd>" gives the fds of the client, dup2 and reuse sockets.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in at(int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

/* Waits (at most 5 s) until the kernel no longer gives fd's peer. */
static void wait_closed(int fd) {
    for (int i = 0; i < 5000; i++) {
        struct sockaddr_in p;
        socklen_t l = sizeof p;
        if (getpeername(fd, (struct sockaddr *)&p, &l) < 0 && errno == ENOTCONN) return;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    printf("never closed\n");
    exit(1);
}

static void receive(const char *what, int fd, int flags) {
    char buf[64];
    errno = 0;
    ssize_t r = recv(fd, buf, sizeof buf, flags);
    printf("R %s %zd %d\n", what, r, r < 0 ? errno : 0);
}

/* The server side: accept, read to end of stream, answer, close (or reset). */
static void serve(int l, int reset) {
    int c = accept(l, NULL, NULL);
    if (c < 0) { perror("accept"); exit(1); }
    if (reset) {
        struct linger lg = {1, 0};
        setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    } else {
        char buf[64];
        while (read(c, buf, sizeof buf) > 0) {}
        if (write(c, "answer", 6) != 6) { perror("write"); exit(1); }
    }
    close(c);
}

static int client(int port, int nonblock) {
    int s = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
    struct sockaddr_in a = at(port);
    int r = connect(s, (struct sockaddr *)&a, sizeof a);
    printf("C %d %d\n", r, r < 0 ? errno : 0);
    if (nonblock) {
        struct pollfd p = {s, POLLOUT, 0};
        poll(&p, 1, 5000);
        fcntl(s, F_SETFL, 0);
    }
    return s;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    int port = atoi(argv[1]), one = 1;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = at(port);
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4)) { perror("listen"); return 1; }

    int c = client(port, 0);
    printf("FD fin %d\n", c);
    if (send(c, "q", 1, 0) != 1 || shutdown(c, SHUT_WR)) { perror("send"); return 1; }
    serve(l, 0);
    wait_closed(c);
    receive("fin", c, 0);
    receive("fin", c, 0);
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    if (dup2(u, c) != c) { perror("dup2"); return 1; }
    printf("FD dup2 %d\n", c);
    receive("dup2", c, MSG_DONTWAIT);
    close(u);
    close(c);

    c = client(port, 0);
    printf("FD rst %d\n", c);
    serve(l, 1);
    wait_closed(c);
    receive("rst", c, 0);
    receive("rst", c, 0);
    close(c);
    u = socket(AF_INET, SOCK_DGRAM, 0);
    printf("FD reuse %d\n", u);
    receive("reuse", u, MSG_DONTWAIT);
    close(u);

    c = client(port, 1);
    if (shutdown(c, SHUT_WR)) { perror("shutdown"); return 1; }
    serve(l, 0);
    wait_closed(c);
    receive("nb", c, 0);
    receive("nb", c, 0);
    close(c);

    c = client(port + 1, 1);
    receive("refused", c, 0);
    receive("refused", c, 0);
    close(c);
    close(l);
    printf("done\n");
    return 0;
}
"#;

/// Two consecutive ports (the listener's, and one nobody listens on) free on 127.0.0.1, in
/// the range 24900-24999 given to this test.
fn port_pair() -> u16 {
    (24910..24998)
        .step_by(2)
        .find(|&p| {
            std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()
                && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok()
        })
        .expect("two free ports in 24910..24999")
}

#[test]
fn peer_port_rules_match_receives_after_the_peer_closed() {
    let Some(lib) = libtrace_or_skip("inject_ports") else {
        return;
    };
    let prog = compile_c("ports", PORTS_C, &[]);
    let port = port_pair();
    let rules = [
        format!("recv:delay=1us,peer-port={port}"),
        format!("recv:delay=1us,peer-port={}", port + 1),
    ];
    let pool = temp_pool(16, 64 * 1024);
    let out = run_with_deadline(
        Command::new(&prog.path)
            .arg(port.to_string())
            .env("LD_PRELOAD", &lib)
            .env(bufpool::POOL_ENV, &pool.path)
            .env(INJECT_ENV, inject::encode_env(&rules).expect("valid rules")),
        Duration::from_secs(30),
    );
    out.assert_success("ports");
    let lines: Vec<&str> = out.stdout.lines().collect();
    let field = |prefix: &str| -> Vec<String> {
        lines
            .iter()
            .filter_map(|l| l.strip_prefix(prefix))
            .map(String::from)
            .collect()
    };
    // What the program saw: the last data, end of stream, a reset; the replaced and the
    // new descriptor are the closed sockets' numbers.
    let (ea, ecr) = (libc::EAGAIN, libc::ECONNRESET);
    let seen = field("R ");
    assert_eq!(
        seen[..8],
        [
            "fin 6 0".to_string(),
            "fin 0 0".into(),
            format!("dup2 -1 {ea}"),
            format!("rst -1 {ecr}"),
            "rst 0 0".into(),
            format!("reuse -1 {ea}"),
            "nb 6 0".into(),
            "nb 0 0".into(),
        ],
        "{}",
        out.stdout
    );
    assert_eq!(seen.len(), 10, "{}", out.stdout);
    let fds = field("FD ");
    let fd_of = |case: &str| {
        fds.iter()
            .find_map(|f| f.strip_prefix(case)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no FD {case}: {}", out.stdout))
            .to_string()
    };
    assert_eq!(fd_of("dup2"), fd_of("fin"));
    assert_eq!(fd_of("reuse"), fd_of("rst"));
    let connects = field("C ");
    assert_eq!(
        connects[2],
        format!("-1 {}", libc::EINPROGRESS),
        "{}",
        out.stdout
    );

    // Which receives the rules matched, in call order (one thread).
    bufpool::salvage_dead(&pool.pool);
    let consumer = bufpool::Consumer::new(&pool.pool);
    let mut bufs = Vec::new();
    while let Some(t) = consumer.take() {
        let i = t.info();
        bufs.push((
            i.pid,
            i.tid,
            i.seq,
            decode_all(t.data()).expect("trace decodes"),
        ));
        t.release();
    }
    bufs.sort_by_key(|b| (b.0, b.1, b.2));
    let matched: Vec<Option<u32>> = bufs
        .into_iter()
        .flat_map(|b| b.3)
        .filter_map(|e| match e {
            Entry::Lib {
                kind: Kind::LibExit,
                func: LibFn::Recv,
                opts,
                ..
            } => Some(opts.inject),
            _ => None,
        })
        .collect();
    let y = Some(0);
    assert_eq!(
        matched,
        [y, y, None, y, y, None, y, y, None, None],
        "rule 0 on fin, rst and nb only; rule 1 (the refused port) on none\n{}",
        out.stdout
    );
}
