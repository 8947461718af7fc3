//! TCP, UDP and UNIX-socket programs under libtrace.so: every call recorded exactly.

mod common;
use bufpool::format::{LibFn, ProcReason};
use common::*;

/// A TCP echo server driven by select, poll or epoll, and a forked client.
const ECHO: &str = r#"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#define N 5
#define SZ 100
int main(int argc, char **argv) {
    const char *m = argv[1];
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (void *)&a, sizeof a) || listen(ls, 8)) return 10;
    socklen_t al = sizeof a;
    getsockname(ls, (void *)&a, &al);
    printf("port=%d\nlisten_fd=%d\n", ntohs(a.sin_port), ls);
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        close(ls);
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(s, (void *)&a, sizeof a) != 0) _exit(2);
        char buf[SZ];
        memset(buf, 'x', SZ);
        for (int i = 0; i < N; i++) {
            if (send(s, buf, SZ, 0) != SZ) _exit(3);
            if (recv(s, buf, SZ, MSG_WAITALL) != SZ) _exit(4);
        }
        close(s);
        _exit(0);
    }
    printf("child=%d\n", c);
    int ep = -1;
    struct epoll_event ev;
    if (!strcmp(m, "epoll")) {
        ep = epoll_create1(0);
        ev.events = EPOLLIN;
        ev.data.u64 = ls;
        epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    }
    int conn = -1, done = 0, waits = 0;
    char buf[4096];
    while (!done) {
        int fd = conn < 0 ? ls : conn;
        waits++;
        if (!strcmp(m, "select")) {
            fd_set r;
            FD_ZERO(&r);
            FD_SET(fd, &r);
            if (select(fd + 1, &r, NULL, NULL, NULL) != 1) return 11;
        } else if (!strcmp(m, "poll")) {
            struct pollfd p = {fd, POLLIN, 0};
            if (poll(&p, 1, -1) != 1) return 12;
        } else {
            struct epoll_event out[4];
            if (epoll_wait(ep, out, 4, -1) != 1) return 13;
        }
        if (conn < 0) {
            conn = accept(ls, NULL, NULL);
            printf("conn_fd=%d\n", conn);
            if (ep >= 0) {
                epoll_ctl(ep, EPOLL_CTL_DEL, ls, NULL);
                ev.events = EPOLLIN;
                ev.data.u64 = conn;
                epoll_ctl(ep, EPOLL_CTL_ADD, conn, &ev);
            }
        } else {
            ssize_t n = recv(conn, buf, sizeof buf, 0);
            if (n <= 0) {
                close(conn);
                done = 1;
            } else if (send(conn, buf, n, 0) != n) {
                return 14;
            }
        }
    }
    int st;
    waitpid(c, &st, 0);
    printf("waits=%d\nchild_status=%d\n", waits, st);
    close(ls);
    return 0;
}
"#;

fn echo(mode: &str) {
    let tp = pool();
    let prog = cc(tp.dir.path(), "echo", ECHO);
    let mut cmd = traced(&tp.path, &prog);
    cmd.arg(mode);
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{mode}: {}\n{}",
        out.stdout,
        out.stderr
    );
    assert_eq!(out.stderr, "", "no warning expected");
    let kv = kv(&out.stdout);
    let (port, ls, conn, child) = (
        num(&kv, "port"),
        num(&kv, "listen_fd") as i32,
        num(&kv, "conn_fd") as i32,
        num(&kv, "child") as u32,
    );
    assert_eq!(num(&kv, "child_status"), 0);
    let tr = drain(&tp);
    assert_eq!(tr.lost(), 0);
    let pids = tr.pids();
    assert_eq!(pids.len(), 2, "{pids:?}");
    let server = *pids.iter().find(|&&p| p != child).unwrap();

    // Process records and the fork link.
    assert_eq!(tr.proc_reason(server), vec![ProcReason::Start]);
    let cp = tr.procs(child);
    assert_eq!(cp.len(), 1);
    assert_eq!((cp[0].reason, cp[0].ppid), (ProcReason::Fork, server));
    assert_eq!(cp[0].pid, child);
    let f = tr.calls_of(server, LibFn::Fork);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].ret(), child as i64);
    let f = tr.calls_of(child, LibFn::Fork);
    assert_eq!(f.len(), 1, "the child has only the LibExit of fork");
    assert!(f[0].enter.is_none());
    assert_eq!(f[0].ret(), 0);

    // Server: exact calls.
    let s = |f| tr.calls_of(server, f);
    assert_eq!(s(LibFn::Socket).len(), 1);
    assert_eq!(s(LibFn::Socket)[0].ret(), ls as i64);
    let b = s(LibFn::Bind);
    assert_eq!(b.len(), 1);
    let bx = b[0].exit.as_ref().unwrap();
    assert_eq!(bx.local.unwrap().to_display(), format!("127.0.0.1:{port}"));
    assert!(
        b[0].enter.as_ref().unwrap().stack().len() >= 2,
        "bind has a call stack"
    );
    assert_eq!(b[0].enter.as_ref().unwrap().stack()[0], b[0].site);
    assert_eq!(s(LibFn::Listen).len(), 1);
    let acc = s(LibFn::Accept);
    assert_eq!(acc.len(), 1);
    assert_eq!(acc[0].ret(), conn as i64);
    let ax = acc[0].exit.as_ref().unwrap();
    assert_eq!(ax.local.unwrap().to_display(), format!("127.0.0.1:{port}"));
    assert!(ax.peer.unwrap().to_display().starts_with("127.0.0.1:"));
    let recvs = s(LibFn::Recv);
    assert_eq!(
        recvs.iter().map(|c| c.ret()).collect::<Vec<_>>(),
        vec![100, 100, 100, 100, 100, 0]
    );
    assert!(recvs.iter().all(|c| c.fd() == conn));
    let sends = s(LibFn::Send);
    assert_eq!(
        sends.iter().map(|c| c.ret()).collect::<Vec<_>>(),
        vec![100; 5]
    );
    let closes: Vec<i32> = s(LibFn::Close).iter().map(|c| c.fd()).collect();
    assert_eq!(closes, vec![conn, ls]);
    // The multiplexer: one wait for the accept, one per message, one for the EOF.
    let mux = match mode {
        "select" => LibFn::Select,
        "poll" => LibFn::Poll,
        _ => LibFn::EpollWait,
    };
    let waits = s(mux);
    assert_eq!(waits.len() as i64, num(&kv, "waits"));
    assert_eq!(waits.len(), 7);
    let readies: Vec<Vec<u32>> = waits
        .iter()
        .map(|c| {
            let r = c.exit.as_ref().unwrap().ready.unwrap();
            assert!(!r.truncated);
            r.items().iter().map(|i| i.id).collect()
        })
        .collect();
    let mut want = vec![vec![ls as u32]];
    want.extend(std::iter::repeat_n(vec![conn as u32], 6));
    assert_eq!(readies, want);
    if mode == "epoll" {
        let ctl = s(LibFn::EpollCtl);
        assert_eq!(ctl.len(), 3);
        assert_eq!(ctl[2].enter.as_ref().unwrap().fd2, Some(conn));
        assert_eq!(ctl[2].enter.as_ref().unwrap().arg2, Some(conn as u64));
    }
    // Bytes per fd.
    let bytes = |calls: &[Call]| calls.iter().map(|c| c.ret().max(0)).sum::<i64>();
    assert_eq!(bytes(&recvs), 500);
    assert_eq!(bytes(&sends), 500);

    // Client.
    let c = |f| tr.calls_of(child, f);
    let con = c(LibFn::Connect);
    assert_eq!(con.len(), 1);
    assert_eq!(con[0].ret(), 0);
    assert_eq!(
        con[0].enter.as_ref().unwrap().peer.unwrap().to_display(),
        format!("127.0.0.1:{port}")
    );
    assert_eq!(
        con[0].exit.as_ref().unwrap().local.unwrap().to_display(),
        ax.peer.unwrap().to_display(),
        "client local = server's peer"
    );
    assert_eq!(c(LibFn::Send).len(), 5);
    assert_eq!(bytes(&c(LibFn::Recv)), 500);
    assert_eq!(c(LibFn::Close).len(), 2, "close(ls) and close(s)");
    assert_eq!(c(LibFn::UExit).len(), 1);
}

#[test]
fn tcp_echo_with_select() {
    echo("select");
}

#[test]
fn tcp_echo_with_poll() {
    echo("poll");
}

#[test]
fn tcp_echo_with_epoll() {
    echo("epoll");
}
