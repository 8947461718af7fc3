//! A worker thread that records a few calls and then stays blocked (issue 13's memcached
//! `-t 2`: the calls of a worker that went idle never reached the trace while the server
//! ran). The thread never hands its last, partly filled sub-buffer over; with the live data
//! path the reader saves its committed prefix within a poll, so `--follow` and any reader of
//! the directory see every call the thread made while the process still runs. The same
//! program recorded with `--live-interval 0` (whole sub-buffers only) shows nothing of the
//! worker until the process dies (then the repair pass salvages it). After the recording
//! ends, every call is in the trace exactly once.

use bufpool::format::{Kind, LibFn};
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tests::*;

/// Thread 2 sends 7 messages of 77 bytes on a socket pair, tells the main thread, and then
/// blocks in `recv` on a socket nobody writes to. The main thread, once told, blocks too,
/// until it is killed.
const IDLE_WORKER: &str = r#"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int ready[2], data[2], never[2];

static void *worker(void *arg) {
    (void)arg;
    char buf[77];
    memset(buf, 'x', sizeof buf);
    for (int i = 0; i < 7; i++)
        if (send(data[0], buf, sizeof buf, 0) != (ssize_t)sizeof buf) abort();
    if (write(ready[1], "r", 1) != 1) abort();
    char c;
    for (;;)
        if (recv(never[0], &c, 1, 0) <= 0) abort();
    return NULL;
}

int main(void) {
    if (pipe(ready) || socketpair(AF_UNIX, SOCK_STREAM, 0, data)
        || socketpair(AF_UNIX, SOCK_STREAM, 0, never))
        return 2;
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL)) return 3;
    char c;
    if (read(ready[0], &c, 1) != 1) return 4;
    for (;;)
        if (recv(never[1], &c, 1, 0) <= 0) return 5;
}
"#;

/// (`send` exits, `recv` enters) seen in a trace directory.
type Calls = Option<(usize, usize)>;

/// `send` exits and `recv` enters in the trace directory `out` (read quietly: it may be
/// still being written), or `None` if it cannot be read yet.
fn calls(out: &Path) -> Calls {
    let t = reader::TraceDir::open_with(
        out,
        reader::OpenOptions {
            quiet: true,
            ..Default::default()
        },
    )
    .ok()?;
    let (mut sends, mut recvs) = (0, 0);
    for k in t.threads().collect::<Vec<_>>() {
        t.for_each_entry(k, |_, e| {
            if e.kind == Kind::LibExit && e.callee == LibFn::Send as u64 {
                sends += 1;
            }
            if e.kind == Kind::LibEnter && e.callee == LibFn::Recv as u64 {
                recvs += 1;
            }
            Ok(())
        })
        .ok()?;
    }
    Some((sends, recvs))
}

/// Records the program with `--live-interval live`; returns what the directory showed
/// while it ran (after `look`) and after the recording ended.
fn record(dir: &Path, prog: &Path, live: &str, look: impl Fn(&Path) -> Calls) -> (Calls, Calls) {
    let out = dir.join(format!("t-{live}"));
    let mut rec = Guarded::spawn(
        Command::new(culprit())
            .arg("record")
            .arg("-o")
            .arg(&out)
            .args(["--subbufs", "16", "--live-interval", live])
            .arg("--")
            .arg(prog)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
    );
    let running = look(&out);
    // SIGTERM to `culprit record` goes on to the program, which dies of it; the reader
    // then drains and finishes the directory.
    // SAFETY: kill(2) on the child's pid; no memory involved.
    unsafe { libc::kill(rec.pid() as i32, libc::SIGTERM) };
    assert!(
        rec.wait_for(Duration::from_secs(30)).is_some(),
        "culprit record did not stop"
    );
    (running, calls(&out))
}

#[test]
fn an_idle_worker_threads_calls_reach_the_trace_while_it_runs() {
    if libtrace_or_skip("an_idle_worker_threads_calls_reach_the_trace_while_it_runs").is_none() {
        return;
    }
    let prog = compile_c("idle_worker", IDLE_WORKER, &[]);
    let tmp = tempfile::tempdir().unwrap();
    // Every send of the worker and both blocked recvs are on disk while the process runs
    // (bounded wait: the reader copies every 100 ms).
    let (running, done) = record(tmp.path(), &prog.path, "100ms", |out| {
        let mut seen = None;
        wait_until(Duration::from_secs(20), || {
            seen = calls(out);
            seen == Some((7, 2))
        });
        seen
    });
    assert_eq!(
        running,
        Some((7, 2)),
        "the idle worker's calls, while it runs"
    );
    assert_eq!(done, Some((7, 2)), "each once after the recording");
    // Whole sub-buffers only: nothing of either thread is on disk while they idle.
    let (running, done) = record(tmp.path(), &prog.path, "0", |out| {
        wait_until(Duration::from_secs(20), || calls(out).is_some());
        std::thread::sleep(Duration::from_millis(500));
        calls(out)
    });
    assert_eq!(
        running,
        Some((0, 0)),
        "without the live path, while it runs"
    );
    assert_eq!(done, Some((7, 2)), "salvaged once the process died");
}
