//! Fault injection end to end: real C and Python programs on real TCP and UNIX stream
//! sockets, run under `libtrace.so` with `CULPRIT_INJECT`, each effect observed both in
//! what the program saw and in the trace (a `MetaInject` record per injection, and the
//! `inject` option on the affected `LibExit` entry — on that entry only).
//!
//! The programs are one "peer" in C and its Python twin: a server that reads 8 bytes per
//! call and prints every result, and a client that sends numbered 8-byte messages.
//! Tests drive them with `LD_PRELOAD`, `CULPRIT_POOL` (a pool created here) and
//! `CULPRIT_INJECT`, then drain the pool themselves, so they depend on nothing but
//! `libtrace.so` and `bufpool`.

use bufpool::format::{decode_all, Entry, InjectRecord, Kind, LibFn, LibOpts, Meta};
use bufpool::inject::{self, INJECT_ENV};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tests::{compile_c, free_tcp_port, libtrace_or_skip, run_with_deadline, temp_pool, RunOutput};

const PEER_C: &str = r#"/* Test peer for fault injection. Usage:
 *   peer server tcp PORT|unix PATH RECVFN    — accept one connection (retrying after
 *        ECONNABORTED, EINTR, EAGAIN: "A <attempt#> <ret> <errno>"), read 8 bytes per call
 *        with RECVFN until end of stream or a hard error; print one line per call:
 *        "R <call#> <ret> <errno-name|0> <hex of bytes>"; then send the total back
 *        ("E <total> <ret>"), and read (unprinted) whatever is left until end of stream.
 *   peer client tcp PORT|unix PATH SENDFN N MODE  — connect (retrying after ECONNREFUSED or
 *        ENOENT; "C <attempt#> <ret> <errno>" per attempt), send N 8-byte
 *        messages: MODE bulk = one SENDFN call with all of them, each = one call per
 *        message; print "S <call#> <ret> <errno> <microseconds>" per call; then shut down
 *        writing and read the server's 8-byte total with one recv: "T <ret> <errno> <total>".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *ename(int e) {
    switch (e) {
    case 0: return "0";
    case ECONNRESET: return "ECONNRESET";
    case EAGAIN: return "EAGAIN";
    case EINTR: return "EINTR";
    case ECONNREFUSED: return "ECONNREFUSED";
    case EPIPE: return "EPIPE";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EBADF: return "EBADF";
    case ENOTCONN: return "ENOTCONN";
    case ECONNABORTED: return "ECONNABORTED";
    default: { static char b[16]; snprintf(b, sizeof b, "E%d", e); return b; }
    }
}

static socklen_t addr(const char *kind, const char *where, struct sockaddr_storage *ss) {
    memset(ss, 0, sizeof *ss);
    if (strcmp(kind, "tcp") == 0) {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(atoi(where));
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return sizeof *a;
    }
    struct sockaddr_un *u = (struct sockaddr_un *)ss;
    u->sun_family = AF_UNIX;
    strncpy(u->sun_path, where, sizeof u->sun_path - 1);
    return sizeof *u;
}

static ssize_t do_recv(const char *fn, int fd, char *buf, size_t len) {
    if (!strcmp(fn, "recv")) return recv(fd, buf, len, 0);
    if (!strcmp(fn, "read")) return read(fd, buf, len);
    if (!strcmp(fn, "recvfrom")) return recvfrom(fd, buf, len, 0, NULL, NULL);
    struct iovec iov[2] = {{buf, len / 2}, {buf + len / 2, len - len / 2}};
    if (!strcmp(fn, "readv")) return readv(fd, iov, 2);
    struct msghdr m = {0};
    m.msg_iov = iov;
    m.msg_iovlen = 2;
    return recvmsg(fd, &m, 0);
}

static ssize_t do_send(const char *fn, int fd, const char *buf, size_t len) {
    if (!strcmp(fn, "send")) return send(fd, buf, len, 0);
    if (!strcmp(fn, "write")) return write(fd, buf, len);
    if (!strcmp(fn, "sendto")) return sendto(fd, buf, len, 0, NULL, 0);
    struct iovec iov[2] = {{(void *)buf, len / 2}, {(void *)(buf + len / 2), len - len / 2}};
    if (!strcmp(fn, "writev")) return writev(fd, iov, 2);
    struct msghdr m = {0};
    m.msg_iov = iov;
    m.msg_iovlen = 2;
    return sendmsg(fd, &m, 0);
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage\n"); return 2; }
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct sockaddr_storage ss;
    socklen_t sl = addr(argv[2], argv[3], &ss);
    int dom = strcmp(argv[2], "tcp") == 0 ? AF_INET : AF_UNIX;
    if (!strcmp(argv[1], "server")) {
        int l = socket(dom, SOCK_STREAM, 0), one = 1;
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(l, (struct sockaddr *)&ss, sl) || listen(l, 4)) { perror("bind/listen"); return 1; }
        printf("ready\n");
        int c = -1;
        for (int i = 1; i <= 10 && c < 0; i++) {
            errno = 0;
            c = accept(l, NULL, NULL);
            int e = c < 0 ? errno : 0;
            printf("A %d %d %s\n", i, c < 0 ? -1 : 0, ename(e));
            if (c < 0 && e != ECONNABORTED && e != EINTR && e != EAGAIN) return 1;
        }
        if (c < 0) return 1;
        /* RECVFN "epoll": wait for readability with epoll_wait before each recv, printing
         * "P <call#> <ret> <errno>" and waiting again after EINTR. */
        int ep = -1, polls = 0;
        if (!strcmp(argv[4], "epoll")) {
            ep = epoll_create1(0);
            struct epoll_event ev = {.events = EPOLLIN, .data.fd = c};
            epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
        }
        char buf[8];
        unsigned long total = 0;
        for (int i = 1; i <= 100000; i++) {
            while (ep >= 0) {
                struct epoll_event got;
                errno = 0;
                int pr = epoll_wait(ep, &got, 1, 10000);
                int pe = pr < 0 ? errno : 0;
                printf("P %d %d %s\n", ++polls, pr, ename(pe));
                if (!(pr < 0 && pe == EINTR)) break;
            }
            errno = 0;
            ssize_t r = do_recv(ep >= 0 ? "recv" : argv[4], c, buf, sizeof buf);
            int e = r < 0 ? errno : 0;
            printf("R %d %zd %s ", i, r, ename(e));
            for (ssize_t k = 0; k < r; k++) printf("%02x", (unsigned char)buf[k]);
            printf("\n");
            if (r > 0) total += r;
            if (r == 0) break;
            if (r < 0 && e != EINTR && e != EAGAIN) break;
        }
        char t[8];
        memcpy(t, &total, 8);
        ssize_t w = send(c, t, 8, 0);
        printf("E %lu %zd\n", total, w);
        /* Read what is left (unprinted) before closing, so the close never resets the
         * connection under the client. */
        shutdown(c, SHUT_WR);
        while (recv(c, buf, sizeof buf, 0) > 0) {}
        close(c);
        close(l);
        return 0;
    }
    int n = atoi(argv[5]);
    int fd = -1;
    for (int tries = 0; tries < 500; tries++) {
        fd = socket(dom, SOCK_STREAM, 0);
        errno = 0;
        int cr = connect(fd, (struct sockaddr *)&ss, sl);
        int e = cr ? errno : 0;
        printf("C %d %d %s\n", tries + 1, cr, ename(e));
        if (cr == 0) break;
        close(fd);
        fd = -1;
        if (e != ECONNREFUSED && e != ENOENT) { printf("C -1 %s\n", ename(e)); return 1; }
        usleep(10000);
    }
    if (fd < 0) { printf("C -1 timeout\n"); return 1; }
    char *msg = malloc(8 * (size_t)n + 1);
    for (int i = 0; i < n; i++) snprintf(msg + 8 * i, 9, "m%07d", (i + 1) % 10000000);
    int calls = !strcmp(argv[6], "bulk") ? 1 : n;
    size_t chunk = !strcmp(argv[6], "bulk") ? 8 * (size_t)n : 8;
    for (int i = 0; i < calls; i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        errno = 0;
        ssize_t r = do_send(argv[4], fd, msg + chunk * i, chunk);
        int e = r < 0 ? errno : 0;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;
        printf("S %d %zd %s %ld\n", i + 1, r, ename(e), us);
    }
    shutdown(fd, SHUT_WR);
    unsigned long total = 0;
    errno = 0;
    ssize_t r = recv(fd, &total, 8, MSG_WAITALL);
    printf("T %zd %s %lu\n", r, ename(r < 0 ? errno : 0), total);
    close(fd);
    return 0;
}
"#;

/// Sends on one end of a socketpair before and after forking, printing every result:
/// `<who> <call#> <ret> <errno>` — checks that call counters are per process.
const FORK_C: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
static void sends(const char *who, int fd, int n) {
    for (int i = 1; i <= n; i++) {
        errno = 0;
        ssize_t r = send(fd, "12345678", 8, 0);
        printf("%s %d %zd %s\n", who, i, r, r < 0 ? strerror(errno) : "0");
        fflush(stdout);
    }
}
int main(void) {
    int s[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, s)) return 1;
    sends("before", s[0], 2);
    pid_t p = fork();
    if (p == 0) { sends("child", s[0], 4); _exit(0); }
    int st;
    waitpid(p, &st, 0);
    sends("parent", s[0], 4);
    return 0;
}
"#;

const PEER_PY: &str = r#""""Python twin of peer.c (same arguments, same output lines)."""
import errno, os, socket, struct, sys, time

def ename(e):
    return errno.errorcode.get(e, "E%d" % e) if e else "0"

def addr(kind, where):
    if kind == "tcp":
        return socket.AF_INET, ("127.0.0.1", int(where))
    return socket.AF_UNIX, where

def main():
    role, kind, where, fn = sys.argv[1:5]
    fam, a = addr(kind, where)
    if role == "server":
        l = socket.socket(fam, socket.SOCK_STREAM)
        l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        l.bind(a)
        l.listen(4)
        print("ready", flush=True)
        c = None
        for i in range(1, 11):
            try:
                c, _ = l.accept()
                print("A %d 0 0" % i, flush=True)
                break
            except OSError as ex:
                print("A %d -1 %s" % (i, ename(ex.errno)), flush=True)
                if ex.errno not in (errno.ECONNABORTED, errno.EAGAIN):
                    return
        if c is None:
            return
        total = 0
        for i in range(1, 100001):
            try:
                data = os.read(c.fileno(), 8) if fn == "read" else c.recv(8)
                r, e = len(data), 0
            except OSError as ex:
                data, r, e = b"", -1, ex.errno
            print("R %d %d %s %s" % (i, r, ename(e), data.hex()), flush=True)
            total += max(r, 0)
            if r == 0 or (r < 0 and e not in (errno.EINTR, errno.EAGAIN)):
                break
        try:
            w = c.send(struct.pack("<Q", total))
        except OSError:
            w = -1
        print("E %d %d" % (total, w), flush=True)
        # Read what is left (unprinted) before closing, as peer.c does.
        try:
            c.shutdown(socket.SHUT_WR)
            while c.recv(4096):
                pass
        except OSError:
            pass
        c.close()
        l.close()
        return
    n, mode = int(sys.argv[5]), sys.argv[6]
    for _ in range(500):  # noqa: the loop variable is the attempt number
        s = socket.socket(fam, socket.SOCK_STREAM)
        e = s.connect_ex(a)
        print("C %d %d %s" % (_ + 1, -1 if e else 0, ename(e)), flush=True)
        if e == 0:
            break
        s.close()
        if e not in (errno.ECONNREFUSED, errno.ENOENT):
            return
        time.sleep(0.01)
    else:
        print("C -1 timeout")
        return
    msg = b"".join(b"m%07d" % ((i + 1) % 10000000) for i in range(n))
    chunks = [msg] if mode == "bulk" else [msg[i:i + 8] for i in range(0, len(msg), 8)]
    for i, ch in enumerate(chunks, 1):
        t0 = time.monotonic()
        try:
            r = os.write(s.fileno(), ch) if fn == "write" else s.send(ch)
            e = 0
        except OSError as ex:
            r, e = -1, ex.errno
        us = int((time.monotonic() - t0) * 1e6)
        print("S %d %d %s %d" % (i, r, ename(e), us), flush=True)
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the server may have reset the connection already (as shutdown() in C)
    try:
        got, e = s.recv(8, socket.MSG_WAITALL), 0
    except OSError as ex:
        got, e = None, ex.errno
    r = -1 if got is None else len(got)
    total = struct.unpack("<Q", got)[0] if got is not None and len(got) == 8 else 0
    print("T %d %s %d" % (r, ename(e), total), flush=True)
    s.close()

main()
"#;

/// Which implementation of the peer to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lang {
    C,
    Py,
}

/// Where the server listens.
#[derive(Clone, Debug)]
enum Net {
    Tcp(u16),
    Unix(PathBuf),
}

/// Built programs and the library, shared by one test.
struct Kit {
    lib: PathBuf,
    c: tests::CProgram,
    py: PathBuf,
    /// The Python interpreter itself (not a wrapper script such as a pyenv shim, which
    /// would add processes of its own to the trace).
    python: PathBuf,
}

fn kit(test: &str) -> Option<Kit> {
    let lib = libtrace_or_skip(test)?;
    let c = compile_c("peer", PEER_C, &[]);
    let py = c.dir.path().join("peer.py");
    std::fs::write(&py, PEER_PY).expect("write peer.py");
    let exe = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    let python = PathBuf::from(String::from_utf8_lossy(&exe.stdout).trim());
    assert!(python.is_file(), "python3 interpreter not found: {exe:?}");
    Some(Kit { lib, c, py, python })
}

/// One scenario: a server and a client, both traced with the same rules.
struct Scenario<'a> {
    lang: Lang,
    tcp: bool,
    recv_fn: &'a str,
    send_fn: &'a str,
    messages: usize,
    /// `bulk`: the client sends everything in one call (so the server's reads never come
    /// up short by themselves); `each`: one call per 8-byte message.
    mode: &'a str,
    rules: &'a [&'a str],
}

/// What happened: each program's output lines and the drained trace.
struct Outcome {
    server: RunOutput,
    client: RunOutput,
    net: Net,
    /// The rules as passed (placeholders filled in).
    rules: Vec<String>,
    trace: Trace,
}

impl Kit {
    fn command(&self, lang: Lang, args: &[String], pool: &Path, rules: &[String]) -> Command {
        let mut cmd = match lang {
            Lang::C => Command::new(&self.c.path),
            Lang::Py => {
                let mut c = Command::new(&self.python);
                c.arg(&self.py);
                c
            }
        };
        cmd.args(args)
            .env("LD_PRELOAD", &self.lib)
            .env(bufpool::POOL_ENV, pool)
            .env(INJECT_ENV, inject::encode_env(rules).expect("valid rules"));
        cmd
    }

    fn run(&self, s: &Scenario<'_>) -> Outcome {
        let pool = temp_pool(64, 64 * 1024);
        let net = if s.tcp {
            Net::Tcp(free_tcp_port())
        } else {
            Net::Unix(pool.dir.path().join("peer.sock"))
        };
        let (kind, at) = match &net {
            Net::Tcp(p) => ("tcp".to_string(), p.to_string()),
            Net::Unix(p) => ("unix".to_string(), p.display().to_string()),
        };
        let server_args = vec!["server".into(), kind.clone(), at.clone(), s.recv_fn.into()];
        let client_args = vec![
            "client".into(),
            kind,
            at,
            s.send_fn.into(),
            s.messages.to_string(),
            s.mode.into(),
        ];
        // `{port}` in a rule stands for the server's TCP port.
        let port = match &net {
            Net::Tcp(p) => p.to_string(),
            Net::Unix(_) => "0".into(),
        };
        let rules: Vec<String> = s.rules.iter().map(|r| r.replace("{port}", &port)).collect();
        let mut server_cmd = self.command(s.lang, &server_args, &pool.path, &rules);
        let mut client_cmd = self.command(s.lang, &client_args, &pool.path, &rules);
        let server =
            std::thread::spawn(move || run_with_deadline(&mut server_cmd, Duration::from_secs(60)));
        let client = run_with_deadline(&mut client_cmd, Duration::from_secs(60));
        let server = server.join().expect("server thread");
        assert!(
            !server.timed_out && !client.timed_out,
            "server:\n{}\nclient:\n{}\n{}",
            server.stdout,
            client.stdout,
            server.stderr
        );
        let trace = Trace::drain(&pool.pool);
        Outcome {
            server,
            client,
            net,
            rules,
            trace,
        }
    }
}

/// One `R` line of the server: a read call and its result.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Read {
    ret: i64,
    errno: String,
    data: Vec<u8>,
}

/// One `S` line of the client.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Sent {
    ret: i64,
    errno: String,
    micros: u64,
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

impl Outcome {
    fn reads(&self) -> Vec<Read> {
        let mut v = Vec::new();
        for l in self.server.stdout.lines().filter(|l| l.starts_with("R ")) {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f[1].parse::<usize>().unwrap(), v.len() + 1, "{l}");
            v.push(Read {
                ret: f[2].parse().unwrap(),
                errno: f[3].to_string(),
                data: unhex(f.get(4).copied().unwrap_or("")),
            });
        }
        v
    }

    fn sends(&self) -> Vec<Sent> {
        self.client
            .stdout
            .lines()
            .filter(|l| l.starts_with("S "))
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                Sent {
                    ret: f[2].parse().unwrap(),
                    errno: f[3].to_string(),
                    micros: f[4].parse().unwrap(),
                }
            })
            .collect()
    }

    /// The server's last line: `E <total received> <result of sending it back>`.
    fn server_end(&self) -> (u64, i64) {
        let l = self
            .server
            .stdout
            .lines()
            .find(|l| l.starts_with("E "))
            .unwrap_or_else(|| {
                panic!(
                    "server did not finish:\n{}\n{}",
                    self.server.stdout, self.server.stderr
                )
            });
        let f: Vec<&str> = l.split(' ').collect();
        (f[1].parse().unwrap(), f[2].parse().unwrap())
    }

    /// The client's last line: `T <ret> <errno> <total the server reported>`.
    fn client_end(&self) -> (i64, String, u64) {
        let l = self
            .client
            .stdout
            .lines()
            .find(|l| l.starts_with("T "))
            .unwrap_or_else(|| {
                panic!(
                    "client did not finish:\n{}\n{}",
                    self.client.stdout, self.client.stderr
                )
            });
        let f: Vec<&str> = l.split(' ').collect();
        (
            f[1].parse().unwrap(),
            f[2].to_string(),
            f[3].parse().unwrap(),
        )
    }

    fn server_pid(&self) -> u32 {
        self.trace.pid_with_arg("server")
    }

    fn client_pid(&self) -> u32 {
        self.trace.pid_with_arg("client")
    }
}

/// The messages the client sends: `m0000001`, `m0000002`, …
fn messages(n: usize) -> Vec<u8> {
    (1..=n)
        .flat_map(|i| format!("m{:07}", i % 10_000_000).into_bytes())
        .collect()
}

/// Every entry recorded, per process, each thread's entries in order.
struct Trace {
    procs: BTreeMap<u32, Vec<Entry>>,
    /// The pool's TSC calibration (to turn entry timestamps into durations).
    calib: bufpool::Calibration,
}

impl Trace {
    fn drain(pool: &bufpool::Pool) -> Trace {
        // Sub-buffers of writers that died without publishing them are recovered first.
        bufpool::salvage_dead(pool);
        let c = bufpool::Consumer::new(pool);
        let mut bufs: Vec<(u32, u32, u64, Vec<Entry>)> = Vec::new();
        while let Some(t) = c.take() {
            let i = t.info();
            let entries = decode_all(t.data()).expect("trace decodes");
            bufs.push((i.pid, i.tid, i.seq, entries));
            t.release();
        }
        bufs.sort_by_key(|b| (b.0, b.1, b.2));
        let mut procs: BTreeMap<u32, Vec<Entry>> = BTreeMap::new();
        for (pid, _, _, e) in bufs {
            procs.entry(pid).or_default().extend(e);
        }
        Trace {
            procs,
            calib: pool.info().calib,
        }
    }

    fn pid_with_arg(&self, arg: &str) -> u32 {
        let found: Vec<u32> = self
            .procs
            .iter()
            .filter(|(_, es)| {
                es.iter().any(|e| {
                    matches!(e, Entry::Meta { meta: Meta::Proc(p), .. }
                        if p.argv.iter().any(|a| a == arg.as_bytes()))
                })
            })
            .map(|(&p, _)| p)
            .collect();
        if found.len() != 1 {
            for (pid, es) in &self.procs {
                for e in es {
                    if let Entry::Meta {
                        meta: Meta::Proc(p),
                        ..
                    } = e
                    {
                        eprintln!("{pid}: {p:?}");
                    }
                }
            }
        }
        assert_eq!(found.len(), 1, "processes with argument {arg}: {found:?}");
        found[0]
    }

    /// The `MetaInject` records of a process.
    fn injections(&self, pid: u32) -> Vec<InjectRecord> {
        self.procs[&pid]
            .iter()
            .filter_map(|e| match e {
                Entry::Meta {
                    meta: Meta::Inject(r),
                    ..
                } => Some(r.clone()),
                _ => None,
            })
            .collect()
    }

    /// Every injection in the whole trace.
    fn all_injections(&self) -> Vec<(u32, InjectRecord)> {
        self.procs
            .keys()
            .flat_map(|&p| self.injections(p).into_iter().map(move |r| (p, r)))
            .collect()
    }

    /// The `LibExit` options of every call of `f` in a process, in call order.
    fn exits(&self, pid: u32, f: LibFn) -> Vec<LibOpts> {
        self.procs[&pid]
            .iter()
            .filter_map(|e| match e {
                Entry::Lib {
                    kind: Kind::LibExit,
                    func,
                    opts,
                    ..
                } if *func == f => Some(**opts),
                _ => None,
            })
            .collect()
    }

    /// For each call of `f` in a single-threaded process: the time from its `LibEnter` to
    /// its `LibExit` entry (ns), and the `LibExit` options.
    fn spans(&self, pid: u32, f: LibFn) -> Vec<(i128, LibOpts)> {
        let mut open = None;
        let mut v = Vec::new();
        for e in &self.procs[&pid] {
            if let Entry::Lib {
                kind,
                tsc,
                func,
                opts,
                ..
            } = e
            {
                if *func != f {
                    continue;
                }
                match kind {
                    Kind::LibEnter => open = Some(*tsc),
                    _ => {
                        let t0 = open.take().expect("LibExit after its LibEnter");
                        let ns = self.calib.tsc_to_unix_ns(*tsc) - self.calib.tsc_to_unix_ns(t0);
                        v.push((ns, **opts));
                    }
                }
            }
        }
        v
    }

    /// `(pid, function, options)` of every `LibExit` entry that carries the inject option.
    fn injected_exits(&self) -> Vec<(u32, LibFn, LibOpts)> {
        let mut v = Vec::new();
        for (&pid, es) in &self.procs {
            for e in es {
                if let Entry::Lib {
                    kind: Kind::LibExit,
                    func,
                    opts,
                    ..
                } = e
                {
                    if opts.inject.is_some() {
                        v.push((pid, *func, **opts));
                    }
                }
            }
        }
        v
    }
}

/// Checks the trace holds exactly one injection, in `pid`, by rule `rule` into the
/// `nth` call of `f` with the forced result, and that only that call's `LibExit` carries
/// the inject option.
#[track_caller]
fn assert_single_injection(
    o: &Outcome,
    pid: u32,
    rule: u32,
    f: LibFn,
    nth: usize,
    (forced_ret, forced_errno): (i64, i32),
    spec: &str,
) -> InjectRecord {
    let all = o.trace.all_injections();
    assert_eq!(all.len(), 1, "injections: {all:?}");
    let (p, r) = &all[0];
    assert_eq!(*p, pid);
    assert_eq!(r.rule, rule);
    assert_eq!(r.func, f.id() as u16);
    assert_eq!(
        (r.forced_ret, r.forced_errno),
        (forced_ret, forced_errno),
        "{r:?}"
    );
    assert_eq!(r.spec, spec.as_bytes());
    let exits = o.trace.exits(pid, f);
    assert!(
        exits.len() >= nth,
        "only {} {} calls traced",
        exits.len(),
        f.name()
    );
    let e = &exits[nth - 1];
    assert_eq!(e.inject, Some(rule), "{e:?}");
    assert_eq!(e.ret, Some(forced_ret), "{e:?}");
    if forced_errno != 0 {
        assert_eq!(e.errno, Some(forced_errno), "{e:?}");
    }
    assert_eq!(e.fd, Some(r.fd));
    let marked = o.trace.injected_exits();
    assert_eq!(
        marked.len(),
        1,
        "LibExit entries marked injected: {marked:?}"
    );
    r.clone()
}

fn scenario<'a>(lang: Lang, tcp: bool, rules: &'a [&'a str]) -> Scenario<'a> {
    Scenario {
        lang,
        tcp,
        recv_fn: "recv",
        send_fn: "send",
        messages: 30,
        mode: "bulk",
        rules,
    }
}

/// The server's reads, concatenated.
fn received(reads: &[Read]) -> Vec<u8> {
    reads.iter().flat_map(|r| r.data.clone()).collect()
}

/// Reads of a stream that was sent whole: every read returns `min(8, what is left)`
/// except read `short_at` (1-based), which returns `short_len`, and the stream arrives
/// complete and in order.
#[track_caller]
fn assert_stream_with_one_short_read(reads: &[Read], sent: &[u8], short_at: usize, short_len: i64) {
    assert_eq!(received(reads), sent, "no byte lost, duplicated or changed");
    let mut left = sent.len() as i64;
    for (i, r) in reads.iter().enumerate() {
        let want = if i + 1 == short_at {
            short_len
        } else {
            left.min(8)
        };
        assert_eq!(
            (r.ret, r.errno.as_str()),
            (want, "0"),
            "read {}: {reads:?}",
            i + 1
        );
        left -= r.ret;
    }
    assert_eq!(
        reads.last().map(|r| r.ret),
        Some(0),
        "ends with end of stream"
    );
}

fn short_recv_on_the_17th_call(lang: Lang, tcp: bool, recv_fn: &str) {
    let name = format!(
        "short_{recv_fn}_{lang:?}_{}",
        if tcp { "tcp" } else { "unix" }
    );
    let Some(k) = kit(&name) else { return };
    let rule = format!("{recv_fn}:short=3,nth=17,argv=server");
    let rules = [rule.as_str()];
    let o = k.run(&Scenario {
        recv_fn,
        ..scenario(lang, tcp, &rules)
    });
    let sent = messages(30);
    assert_stream_with_one_short_read(&o.reads(), &sent, 17, 3);
    assert_eq!(o.server_end(), (240, 8));
    assert_eq!(o.client_end(), (8, "0".into(), 240));
    let f = LibFn::from_name(recv_fn).unwrap();
    let r = assert_single_injection(&o, o.server_pid(), 0, f, 17, (3, 0), &rule);
    // The real call would have returned 8: 5 bytes were left in the socket.
    assert_eq!(r.original_ret, 8);
    // The client's own recv (of the total) was not touched: its process is not chosen.
    let client_recv = o.trace.exits(o.client_pid(), LibFn::Recv);
    assert_eq!(client_recv.len(), 1);
    assert_eq!((client_recv[0].ret, client_recv[0].inject), (Some(8), None));
}

#[test]
fn short_recv_c_tcp() {
    short_recv_on_the_17th_call(Lang::C, true, "recv");
}

#[test]
fn short_read_c_unix() {
    short_recv_on_the_17th_call(Lang::C, false, "read");
}

#[test]
fn short_recvmsg_c_tcp() {
    short_recv_on_the_17th_call(Lang::C, true, "recvmsg");
}

#[test]
fn short_recv_python_tcp() {
    short_recv_on_the_17th_call(Lang::Py, true, "recv");
}

#[test]
fn short_recv_python_unix() {
    short_recv_on_the_17th_call(Lang::Py, false, "recv");
}

#[test]
fn an_exe_filter_that_matches_nothing_changes_nothing() {
    let Some(k) = kit("exe_filter") else { return };
    let rules = [
        "recv:short=3,nth=17,exe=python3*",
        "recv:eof,exe=/nonexistent/peer",
    ];
    let o = k.run(&scenario(Lang::C, true, &rules));
    assert_stream_with_one_short_read(&o.reads(), &messages(30), 0, 0);
    assert!(o.trace.all_injections().is_empty());
    assert!(o.trace.injected_exits().is_empty());
    // …and the same rule does apply to the Python twin.
    let o = k.run(&scenario(Lang::Py, true, &rules[..1]));
    assert_stream_with_one_short_read(&o.reads(), &messages(30), 17, 3);
}

#[test]
fn errno_by_port_after_n_count_1_on_read_and_send() {
    let Some(k) = kit("errno_ports") else { return };
    for lang in [Lang::C, Lang::Py] {
        let rules = [
            // The server's accepted socket has local port {port}; the client's socket has
            // peer port {port} (also once the connection is fully closed: libtrace.so
            // remembers the ports it had — tests/inject_ports.rs).
            "read:errno=ECONNRESET,local-port={port},after=20,count=1",
            "send:errno=ETIMEDOUT,peer-port={port},nth=30",
            "read|recv|send:errno=EPIPE,peer-port=1",
        ];
        let o = k.run(&Scenario {
            recv_fn: "read",
            messages: 30,
            mode: "each",
            ..scenario(lang, true, &rules)
        });
        let reads = o.reads();
        assert_eq!(reads.len(), 21, "{reads:?}");
        assert_eq!(received(&reads[..20]), messages(20));
        assert_eq!(
            (reads[20].ret, reads[20].errno.as_str()),
            (-1, "ECONNRESET")
        );
        // The server stopped at the error and sent back what it had.
        assert_eq!(o.server_end(), (160, 8));
        // The client's 30th send failed as told; the others went through.
        let sends = o.sends();
        assert_eq!(sends.len(), 30);
        assert!(
            sends[..29].iter().all(|s| s.ret == 8 && s.errno == "0"),
            "{sends:?}"
        );
        assert_eq!((sends[29].ret, sends[29].errno.as_str()), (-1, "ETIMEDOUT"));
        assert_eq!(o.client_end(), (8, "0".into(), 160));

        let (s, c) = (o.server_pid(), o.client_pid());
        let mut inj = o.trace.all_injections();
        inj.sort_by_key(|(_, r)| r.rule);
        assert_eq!(inj.len(), 2, "{inj:?}");
        assert_eq!(inj[0].0, s);
        assert_eq!(inj[0].1.rule, 0);
        assert_eq!(inj[0].1.func, LibFn::Read.id() as u16);
        assert_eq!((inj[0].1.original_ret, inj[0].1.forced_ret), (-1, -1));
        assert_eq!(inj[0].1.forced_errno, libc::ECONNRESET);
        assert_eq!(inj[0].1.spec, o.rules[0].as_bytes());
        assert_eq!(inj[1].0, c);
        assert_eq!(inj[1].1.rule, 1);
        assert_eq!(inj[1].1.func, LibFn::Send.id() as u16);
        assert_eq!(inj[1].1.forced_errno, libc::ETIMEDOUT);
        assert_eq!(inj[1].1.spec, o.rules[1].as_bytes());
        let reads_traced = o.trace.exits(s, LibFn::Read);
        assert_eq!(reads_traced.len(), 21);
        assert!(reads_traced[..20]
            .iter()
            .all(|e| e.inject.is_none() && e.ret == Some(8)));
        assert_eq!(reads_traced[20].inject, Some(0));
        assert_eq!(reads_traced[20].errno, Some(libc::ECONNRESET));
        assert_eq!(injected_send_calls(&o, LibFn::Send), [30]);
        assert_eq!(o.trace.injected_exits().len(), 2);
        assert!(matches!(o.net, Net::Tcp(_)));
    }
}

#[test]
fn errno_eagain_consumes_nothing_and_port_rules_skip_unix_sockets() {
    let Some(k) = kit("errno_unix") else { return };
    for lang in [Lang::C, Lang::Py] {
        let rules = [
            "recv:errno=EPIPE,local-port=1",
            "recv:errno=EAGAIN,nth=5,argv=server",
        ];
        let o = k.run(&scenario(lang, false, &rules));
        let reads = o.reads();
        assert_eq!((reads[4].ret, reads[4].errno.as_str()), (-1, "EAGAIN"));
        let mut rest = reads.clone();
        rest.remove(4);
        // Without the failed call the stream is exactly what was sent.
        assert_stream_with_one_short_read(&rest, &messages(30), 0, 0);
        assert_eq!(o.server_end(), (240, 8));
        assert_single_injection(
            &o,
            o.server_pid(),
            1,
            LibFn::Recv,
            5,
            (-1, libc::EAGAIN),
            rules[1],
        );
    }
}

#[test]
fn errno_econnrefused_on_the_first_connects() {
    let Some(k) = kit("errno_connect") else {
        return;
    };
    for lang in [Lang::C, Lang::Py] {
        let rules = ["connect:errno=ECONNREFUSED,count=3,argv=client"];
        let o = k.run(&scenario(lang, true, &rules));
        let attempts: Vec<&str> = o
            .client
            .stdout
            .lines()
            .filter(|l| l.starts_with("C "))
            .collect();
        assert!(attempts.len() >= 4, "{attempts:?}");
        for (i, a) in attempts[..3].iter().enumerate() {
            assert_eq!(*a, format!("C {} -1 ECONNREFUSED", i + 1));
        }
        assert_eq!(o.server_end(), (240, 8));
        let c = o.client_pid();
        let inj = o.trace.injections(c);
        assert_eq!(inj.len(), 3, "{inj:?}");
        assert!(inj.iter().all(|r| r.func == LibFn::Connect.id() as u16
            && r.forced_errno == libc::ECONNREFUSED
            && r.forced_ret == -1));
        let exits = o.trace.exits(c, LibFn::Connect);
        assert_eq!(exits.iter().filter(|e| e.inject == Some(0)).count(), 3);
        assert!(exits[..3].iter().all(|e| e.inject == Some(0)));
        assert_eq!(o.trace.all_injections().len(), 3);
    }
}

#[test]
fn eof_returns_zero_in_the_chosen_call() {
    let Some(k) = kit("eof") else { return };
    for (lang, tcp) in [(Lang::C, true), (Lang::Py, false), (Lang::C, false)] {
        let rules = ["recv:eof,nth=10,argv=server"];
        let o = k.run(&scenario(lang, tcp, &rules));
        let reads = o.reads();
        assert_eq!(reads.len(), 10, "{reads:?}");
        assert_eq!(received(&reads), messages(9));
        assert_eq!((reads[9].ret, reads[9].errno.as_str()), (0, "0"));
        assert_eq!(o.server_end().0, 72);
        let r = assert_single_injection(&o, o.server_pid(), 0, LibFn::Recv, 10, (0, 0), rules[0]);
        assert_eq!(r.original_ret, -1, "not performed");
    }
}

#[test]
fn corrupt_flips_the_first_bytes_returned() {
    let Some(k) = kit("corrupt") else { return };
    for (lang, tcp, f, n) in [
        (Lang::C, true, "recvfrom", 3usize),
        (Lang::C, false, "readv", 6),
        (Lang::Py, true, "recv", 3),
    ] {
        let rule = format!("{f}:corrupt={n},nth=2");
        let rules = [rule.as_str()];
        let o = k.run(&Scenario {
            recv_fn: f,
            ..scenario(lang, tcp, &rules)
        });
        let reads = o.reads();
        let mut want = messages(30);
        for b in &mut want[8..8 + n] {
            *b ^= 0xff;
        }
        assert_eq!(received(&reads), want);
        assert!(reads[..30].iter().all(|r| r.ret == 8));
        assert_eq!(reads[30].ret, 0);
        let r = assert_single_injection(
            &o,
            o.server_pid(),
            0,
            LibFn::from_name(f).unwrap(),
            2,
            (8, 0),
            &rule,
        );
        assert_eq!(r.original_ret, 8);
    }
}

#[test]
fn short_send_transmits_only_the_first_bytes() {
    let Some(k) = kit("short_send") else { return };
    for (lang, tcp, f, n) in [
        (Lang::C, true, "send", 3usize),
        (Lang::C, false, "writev", 5),
        (Lang::Py, false, "send", 3),
    ] {
        let rule = format!("{f}:short={n},nth=5,argv=client");
        let rules = [rule.as_str()];
        let o = k.run(&Scenario {
            send_fn: f,
            messages: 10,
            mode: "each",
            ..scenario(lang, tcp, &rules)
        });
        let sends = o.sends();
        assert_eq!(sends.len(), 10);
        for (i, s) in sends.iter().enumerate() {
            let want = if i == 4 { n as i64 } else { 8 };
            assert_eq!((s.ret, s.errno.as_str()), (want, "0"), "send {}", i + 1);
        }
        let mut want = messages(10);
        want.drain(32 + n..40);
        assert_eq!(received(&o.reads()), want);
        assert_eq!(o.server_end(), (72 + n as u64, 8));
        let r = assert_single_injection(
            &o,
            o.client_pid(),
            0,
            LibFn::from_name(f).unwrap(),
            5,
            (n as i64, 0),
            &rule,
        );
        assert_eq!(r.original_ret, 8, "the length asked for");
    }
}

/// Numbers of the calls of the client that were injected, from the trace.
fn injected_send_calls(o: &Outcome, f: LibFn) -> Vec<usize> {
    o.trace
        .exits(o.client_pid(), f)
        .iter()
        .enumerate()
        .filter(|(_, e)| e.inject.is_some())
        .map(|(i, _)| i + 1)
        .collect()
}

#[test]
fn delay_with_probability_is_deterministic_across_runs() {
    let Some(k) = kit("delay") else { return };
    let rule = "send|write:delay=20ms,prob=0.05,seed=7,argv=client";
    let spec = inject::parse_spec(rule).unwrap();
    let threshold = spec.prob_threshold.unwrap();
    // The documented decision: the c-th matching call is delayed when the c-th output of
    // splitmix64(seed) is below P·2^64.
    let expected: Vec<usize> = (1..=200u64)
        .filter(|&c| inject::splitmix64_nth(7, c) < threshold)
        .map(|c| c as usize)
        .collect();
    assert!(!expected.is_empty() && expected.len() < 30, "{expected:?}");
    for (lang, f) in [(Lang::C, "send"), (Lang::C, "write"), (Lang::Py, "send")] {
        let mut runs = Vec::new();
        for _ in 0..2 {
            let rules = [rule];
            let o = k.run(&Scenario {
                send_fn: f,
                messages: 200,
                mode: "each",
                ..scenario(lang, true, &rules)
            });
            let sends = o.sends();
            assert_eq!(sends.len(), 200);
            assert!(
                sends.iter().all(|s| s.ret == 8 && s.errno == "0"),
                "a delay changes no result"
            );
            for &c in &expected {
                assert!(
                    sends[c - 1].micros >= 20_000,
                    "call {c} took {} µs",
                    sends[c - 1].micros
                );
            }
            assert_eq!(received(&o.reads()), messages(200));
            let lf = LibFn::from_name(f).unwrap();
            let calls = injected_send_calls(&o, lf);
            // The traced call spans the delay (a generous bound: the TSC calibration of
            // a test pool is short).
            for (ns, e) in o.trace.spans(o.client_pid(), lf) {
                if e.inject.is_some() {
                    assert!(ns >= 18_000_000, "traced delayed call lasted {ns} ns");
                }
            }
            let inj = o.trace.injections(o.client_pid());
            assert_eq!(inj.len(), calls.len());
            assert!(inj
                .iter()
                .all(|r| r.forced_ret == 8 && r.original_ret == 8 && r.forced_errno == 0));
            runs.push(calls);
        }
        assert_eq!(runs[0], expected, "{lang:?} {f}");
        assert_eq!(runs[0], runs[1]);
    }
}

#[test]
fn close_shuts_the_connection_and_fails_the_call() {
    let Some(k) = kit("close") else { return };
    for (lang, tcp) in [(Lang::C, true), (Lang::Py, false)] {
        // On the receiving side.
        let rules = ["recv:close,nth=5,argv=server"];
        let o = k.run(&scenario(lang, tcp, &rules));
        let reads = o.reads();
        assert_eq!(reads.len(), 5);
        assert_eq!(received(&reads), messages(4));
        assert_eq!((reads[4].ret, reads[4].errno.as_str()), (-1, "ECONNRESET"));
        // The server's own send on the shut-down socket fails; the client sees the end of
        // the stream instead of the total.
        assert_eq!(o.server_end(), (32, -1));
        let (r, _, total) = o.client_end();
        assert!(r <= 0 && total == 0, "{}", o.client.stdout);
        let rec = assert_single_injection(
            &o,
            o.server_pid(),
            0,
            LibFn::Recv,
            5,
            (-1, libc::ECONNRESET),
            rules[0],
        );
        assert_eq!(rec.original_ret, -1);

        // On the sending side.
        let rules = ["send:close,nth=3,argv=client"];
        let o = k.run(&Scenario {
            messages: 6,
            mode: "each",
            ..scenario(lang, tcp, &rules)
        });
        let sends = o.sends();
        assert_eq!((sends[2].ret, sends[2].errno.as_str()), (-1, "ECONNRESET"));
        for s in &sends[3..] {
            // EPIPE (sending on a shut-down socket), or ECONNRESET once the kernel reset
            // the connection because the server's reply arrived after SHUT_RD.
            assert_eq!(s.ret, -1);
            assert!(
                ["EPIPE", "ECONNRESET"].contains(&s.errno.as_str()),
                "later sends: {sends:?}"
            );
        }
        assert_eq!(received(&o.reads()), messages(2));
        assert_eq!(o.server_end().0, 16);
        assert_single_injection(
            &o,
            o.client_pid(),
            0,
            LibFn::Send,
            3,
            (-1, libc::ECONNRESET),
            rules[0],
        );
    }
}

#[test]
fn culprit_record_rejects_a_malformed_spec_before_starting_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let out = dir.path().join("trace");
    for (specs, column, expected) in [
        (&["recv:short=3,nht=17"][..], 14, "expected a key"),
        (&["recv:shrt=3"][..], 6, "expected an effect"),
        (
            &["recv:short=3", "send|connect:short=1"][..],
            6,
            "expected a function `short` applies to",
        ),
        (&["read:errno=ECONRESET"][..], 12, "expected an errno name"),
        (&["send:delay=20"][..], 14, "expected a duration unit"),
    ] {
        let mut cmd = Command::new(tests::culprit());
        cmd.arg("record").arg("-o").arg(&out);
        for s in specs {
            cmd.arg("--inject").arg(s);
        }
        cmd.args(["--", "touch"]).arg(&marker);
        let r = run_with_deadline(&mut cmd, Duration::from_secs(30));
        assert!(!r.timed_out && !r.status.success(), "{specs:?}: {r:?}");
        assert!(
            r.stderr.contains(&format!("column {column}: {expected}")),
            "{specs:?}: {}",
            r.stderr
        );
        // The caret sits under the column.
        let caret = r
            .stderr
            .lines()
            .find(|l| l.trim_start() == "^")
            .expect("caret line");
        let rule_line = r
            .stderr
            .lines()
            .find(|l| l.trim() == *specs.last().unwrap())
            .expect("rule line");
        let rule_at = rule_line.len() - rule_line.trim_start().len();
        assert_eq!(caret.len() - 1, rule_at + column - 1, "{}", r.stderr);
        assert!(!marker.exists(), "the program ran");
        assert!(!out.join(bufpool::disk::MANIFEST_FILE).exists());
    }
}

#[test]
fn culprit_record_injects_and_dump_shows_it() {
    let Some(k) = kit("record_dump") else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("trace");
    let port = free_tcp_port();
    let peer = k.c.path.display().to_string();
    let script = format!(
        "{peer} server tcp {port} recv > {d}/server.out & {peer} client tcp {port} send 30 bulk > {d}/client.out; wait",
        d = dir.path().display()
    );
    let rule = "recv:short=3,nth=17,argv=server";
    let mut cmd = Command::new(tests::culprit());
    cmd.arg("record")
        .arg("-o")
        .arg(&out)
        .args(["--inject", rule, "--", "sh", "-c", &script]);
    cmd.env(tests::LIBTRACE_ENV, &k.lib);
    run_with_deadline(&mut cmd, Duration::from_secs(60)).assert_success("culprit record");
    let server = std::fs::read_to_string(dir.path().join("server.out")).unwrap();
    let short: Vec<&str> = server
        .lines()
        .filter(|l| l.starts_with("R ") && l.split(' ').nth(2) != Some("8"))
        .collect();
    assert_eq!(short[0], "R 17 3 0 6d3030", "{server}");

    let mut dump = Command::new(tests::culprit());
    dump.arg("dump").arg(&out).arg("--json");
    let d = run_with_deadline(&mut dump, Duration::from_secs(60));
    d.assert_success("culprit dump");
    let lines = tests::parse_json_lines(&d.stdout);
    let metas: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["kind"] == "meta_inject")
        .collect();
    assert_eq!(metas.len(), 1, "{metas:?}");
    let m = metas[0];
    assert_eq!(m["rule"], 0);
    assert_eq!(m["func"], "recv");
    assert_eq!(m["forced_ret"], 3);
    assert_eq!(m["original_ret"], 8);
    assert_eq!(m["spec"], rule);
    let marked: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| !l["inject_rule"].is_null())
        .collect();
    assert_eq!(marked.len(), 1, "{marked:?}");
    assert_eq!(marked[0]["name"], "recv");
    assert_eq!(marked[0]["ret"], 3);
    assert_eq!(marked[0]["pid"], m["pid"]);
}

#[test]
fn errno_eintr_on_the_third_epoll_wait() {
    let Some(k) = kit("epoll_eintr") else { return };
    let rules = ["epoll_wait:errno=EINTR,nth=3"];
    let o = k.run(&Scenario {
        recv_fn: "epoll",
        ..scenario(Lang::C, true, &rules)
    });
    let polls: Vec<&str> = o
        .server
        .stdout
        .lines()
        .filter(|l| l.starts_with("P "))
        .collect();
    assert_eq!(
        polls[..4],
        ["P 1 1 0", "P 2 1 0", "P 3 -1 EINTR", "P 4 1 0"],
        "{polls:?}"
    );
    assert!(polls[4..].iter().all(|l| l.ends_with(" 1 0")), "{polls:?}");
    // The interrupted wait cost the program nothing but a retry.
    assert_stream_with_one_short_read(&o.reads(), &messages(30), 0, 0);
    let r = assert_single_injection(
        &o,
        o.server_pid(),
        0,
        LibFn::EpollWait,
        3,
        (-1, libc::EINTR),
        rules[0],
    );
    assert!(r.fd > 2, "the epoll fd: {r:?}");
}

#[test]
fn errno_econnaborted_on_the_first_accept() {
    let Some(k) = kit("accept_abort") else { return };
    for (lang, f) in [(Lang::C, LibFn::Accept), (Lang::Py, LibFn::Accept4)] {
        let rules = ["accept|accept4:errno=ECONNABORTED,count=1"];
        let o = k.run(&scenario(lang, lang == Lang::C, &rules));
        let accepts: Vec<&str> = o
            .server
            .stdout
            .lines()
            .filter(|l| l.starts_with("A "))
            .collect();
        assert_eq!(accepts, ["A 1 -1 ECONNABORTED", "A 2 0 0"], "{lang:?}");
        assert_stream_with_one_short_read(&o.reads(), &messages(30), 0, 0);
        assert_single_injection(
            &o,
            o.server_pid(),
            0,
            f,
            1,
            (-1, libc::ECONNABORTED),
            rules[0],
        );
    }
}

#[test]
fn nth_is_counted_per_process_and_restarts_in_a_forked_child() {
    let Some(k) = kit("fork_counts") else { return };
    let prog = compile_c("fork_sends", FORK_C, &[]);
    let pool = temp_pool(16, 64 * 1024);
    let mut cmd = Command::new(&prog.path);
    cmd.env("LD_PRELOAD", &k.lib)
        .env(bufpool::POOL_ENV, &pool.path)
        .env(INJECT_ENV, "send:errno=EPIPE,nth=3");
    let r = run_with_deadline(&mut cmd, Duration::from_secs(60));
    r.assert_success("fork_sends");
    let epipe = std::io::Error::from_raw_os_error(libc::EPIPE).to_string();
    let epipe = epipe.split(" (os error").next().unwrap();
    let fail = |who: &str, i: u32| format!("{who} {i} -1 {epipe}");
    let ok = |who: &str, i: u32| format!("{who} {i} 8 0");
    let want = [
        ok("before", 1),
        ok("before", 2),
        ok("child", 1),
        ok("child", 2),
        fail("child", 3),
        ok("child", 4),
        fail("parent", 1),
        ok("parent", 2),
        ok("parent", 3),
        ok("parent", 4),
    ];
    assert_eq!(r.stdout.lines().collect::<Vec<_>>(), want);
    let trace = Trace::drain(&pool.pool);
    let inj = trace.all_injections();
    assert_eq!(inj.len(), 2, "{inj:?}");
    assert_ne!(inj[0].0, inj[1].0, "one injection in each process");
    for (pid, rec) in &inj {
        assert_eq!(
            (rec.func, rec.forced_errno),
            (LibFn::Send.id() as u16, libc::EPIPE)
        );
        let exits = trace.exits(*pid, LibFn::Send);
        let marked: Vec<usize> = exits
            .iter()
            .enumerate()
            .filter(|(_, e)| e.inject.is_some())
            .map(|(i, _)| i + 1)
            .collect();
        assert_eq!(marked, [3], "the third send of each process");
    }
}

#[test]
fn errno_on_socket_bind_and_listen_stops_the_server() {
    let Some(k) = kit("setup_errno") else { return };
    for (lang, rule, func, errno, message) in [
        (
            Lang::C,
            "bind:errno=EADDRINUSE",
            LibFn::Bind,
            libc::EADDRINUSE,
            "bind/listen: Address already in use",
        ),
        (
            Lang::Py,
            "bind:errno=EADDRINUSE",
            LibFn::Bind,
            libc::EADDRINUSE,
            "OSError: [Errno 98] Address already in use",
        ),
        (
            Lang::C,
            "listen:errno=EACCES",
            LibFn::Listen,
            libc::EACCES,
            "bind/listen: Permission denied",
        ),
        (
            Lang::Py,
            "socket:errno=EMFILE",
            LibFn::Socket,
            libc::EMFILE,
            "OSError: [Errno 24] Too many open files",
        ),
    ] {
        // The server alone: it never gets to accept a client.
        let pool = temp_pool(16, 64 * 1024);
        let args = ["server", "tcp", &free_tcp_port().to_string(), "recv"].map(String::from);
        let mut cmd = k.command(lang, &args, &pool.path, &[rule.to_string()]);
        let r = run_with_deadline(&mut cmd, Duration::from_secs(60));
        assert!(
            !r.timed_out && !r.status.success(),
            "{rule} {lang:?}: {r:?}"
        );
        assert!(r.stderr.contains(message), "{rule} {lang:?}: {}", r.stderr);
        assert!(!r.stdout.contains("ready"), "{}", r.stdout);
        let t = Trace::drain(&pool.pool);
        let inj = t.all_injections();
        assert_eq!(inj.len(), 1, "{inj:?}");
        let (pid, rec) = &inj[0];
        assert_eq!(
            (rec.func, rec.forced_ret, rec.forced_errno),
            (func.id() as u16, -1, errno)
        );
        let exits = t.exits(*pid, func);
        assert_eq!(exits.len(), 1);
        assert_eq!((exits[0].inject, exits[0].errno), (Some(0), Some(errno)));
    }
}

#[test]
fn a_malformed_inject_variable_warns_once_and_injects_nothing() {
    let Some(k) = kit("bad_env") else { return };
    let pool = temp_pool(16, 64 * 1024);
    let prog = compile_c("fork_sends", FORK_C, &[]);
    let mut cmd = Command::new(&prog.path);
    cmd.env("LD_PRELOAD", &k.lib)
        .env(bufpool::POOL_ENV, &pool.path)
        .env(INJECT_ENV, "send:errno=EPIPE,nth=1\nsend:shrt=3");
    let r = run_with_deadline(&mut cmd, Duration::from_secs(60));
    r.assert_success("fork_sends");
    // One line from the process itself (its forked child inherits the parsed state).
    let warnings: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("fault injection"))
        .collect();
    assert_eq!(
        warnings,
        [
            "culprit: fault injection disabled: CULPRIT_INJECT: line 2, column 6: expected an \
          effect: short=N, errno=NAME, eof, corrupt=N, delay=DURATION, close or kill=SIGNAL, \
          found `shrt`"
        ],
        "{}",
        r.stderr
    );
    assert!(
        r.stdout.lines().all(|l| l.ends_with(" 8 0")),
        "{}",
        r.stdout
    );
    assert!(Trace::drain(&pool.pool).all_injections().is_empty());
}
