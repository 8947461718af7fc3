//! Time-triggered fault injection end to end (`at=`, `after-s=`): a C program reads from
//! a socket before and after an instant, under `culprit record --inject`; the reads made
//! before the instant are not delayed, those made after it are, and each delayed read is
//! recorded in the trace (a `meta_inject` record and the `inject_rule` of its `lib_exit`).
//!
//! The program times its own reads with `CLOCK_REALTIME`; a read that straddles the instant
//! may go either way, every other read must fall on its side. The program waits past the
//! instant itself, so a slow machine only moves reads to the "after" side.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tests::{compile_c, libtrace_or_skip, run_with_deadline};

const PROBE_C: &str = r#"/* probe FROM_NS N [fork]: over a socketpair, N reads of 8 bytes (each after
 * sending 8), then sleeps until 300 ms past FROM_NS and past 1 s after main started
 * (CLOCK_REALTIME) and makes N more. With
 * "fork", a child is forked after that and makes N reads at once, then N more 1.3 s after
 * its fork. Prints "F <read fd>", "K <fork start ns> <fork end ns>" in the child, and
 * "R <pid> <start ns> <end ns> <ret>" per read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void sleep_until(long long ns) {
    long long d;
    while ((d = ns - now()) > 0) {
        struct timespec t = { d / 1000000000LL, d % 1000000000LL };
        nanosleep(&t, NULL);
    }
}

static void reads(int s[2], int n) {
    char buf[8];
    for (int i = 0; i < n; i++) {
        if (send(s[0], "01234567", 8, 0) != 8) { perror("send"); exit(2); }
        long long a = now();
        ssize_t r = read(s[1], buf, 8);
        long long b = now();
        printf("R %d %lld %lld %zd\n", (int)getpid(), a, b, r);
        fflush(stdout);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    long long t0 = now();
    long long from = atoll(argv[1]);
    if (from < t0 + 1000000000LL) from = t0 + 1000000000LL;
    int n = atoi(argv[2]);
    int s[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, s)) { perror("socketpair"); return 2; }
    printf("F %d\n", s[1]);
    reads(s, n);
    sleep_until(from + 300000000LL);
    reads(s, n);
    if (argc > 3 && !strcmp(argv[3], "fork")) {
        long long a = now();
        pid_t p = fork();
        if (p == 0) {
            long long b = now();
            printf("K %lld %lld\n", a, b);
            reads(s, n);
            sleep_until(b + 1300000000LL);
            reads(s, n);
            return 0;
        }
        int st;
        waitpid(p, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) return 3;
    }
    return 0;
}
"#;

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// One read as the program saw it.
#[derive(Debug)]
struct Read {
    pid: u32,
    start: i64,
    end: i64,
}

/// Runs the probe under `culprit record --inject rule`; returns its stdout and, per pid,
/// whether each of its reads on the socket was marked injected in the trace (in order),
/// and the number of `meta_inject` records.
fn record(
    dir: &Path,
    lib: &Path,
    rule: &str,
    args: &[String],
) -> (String, Vec<(u32, bool)>, usize) {
    let prog = compile_c("time_probe", PROBE_C, &[]);
    let out = dir.join("trace");
    let mut cmd = Command::new(tests::culprit());
    cmd.arg("record")
        .arg("-o")
        .arg(&out)
        .args(["--inject", rule, "--"])
        .arg(&prog.path)
        .args(args);
    cmd.env(tests::LIBTRACE_ENV, lib);
    let r = run_with_deadline(&mut cmd, Duration::from_secs(60));
    r.assert_success("culprit record");
    let stdout = r.stdout.clone();
    let fd: i64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("F "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no fd line: {stdout}"));

    let mut dump = Command::new(tests::culprit());
    dump.arg("dump").arg(&out).arg("--json");
    let d = run_with_deadline(&mut dump, Duration::from_secs(60));
    d.assert_success("culprit dump");
    let lines = tests::parse_json_lines(&d.stdout);
    let mut exits: Vec<(u32, u64, bool)> = lines
        .iter()
        .filter(|l| l["kind"] == "lib_exit" && l["name"] == "read" && l["fd"] == fd)
        .map(|l| {
            (
                l["pid"].as_u64().unwrap() as u32,
                l["seq"].as_u64().unwrap(),
                !l["inject_rule"].is_null(),
            )
        })
        .collect();
    exits.sort();
    let metas: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["kind"] == "meta_inject")
        .collect();
    for m in &metas {
        assert_eq!(
            (&m["func"], &m["spec"], &m["fd"]),
            (&"read".into(), &rule.into(), &fd.into())
        );
    }
    (
        stdout,
        exits.into_iter().map(|(p, _, m)| (p, m)).collect(),
        metas.len(),
    )
}

fn reads(stdout: &str) -> Vec<Read> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("R "))
        .map(|l| {
            let v: Vec<i64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
            assert_eq!(v[3], 8, "every read returns its 8 bytes: {l}");
            Read {
                pid: v[0] as u32,
                start: v[1],
                end: v[2],
            }
        })
        .collect()
}

/// Checks each read of `pid` against the trace's marks: a read that ended before `open_lo`
/// is not injected, one that started at or after `open_hi` is, and lasted the delay.
/// Returns (reads not injected, reads injected).
fn check_side(
    rs: &[Read],
    marks: &[(u32, bool)],
    pid: u32,
    open_lo: i64,
    open_hi: i64,
    delay_ns: i64,
) -> (usize, usize) {
    let mine: Vec<&Read> = rs.iter().filter(|r| r.pid == pid).collect();
    let marked: Vec<bool> = marks
        .iter()
        .filter(|(p, _)| *p == pid)
        .map(|&(_, m)| m)
        .collect();
    assert_eq!(
        mine.len(),
        marked.len(),
        "pid {pid}: {mine:?} vs {marked:?}"
    );
    let (mut before, mut after) = (0, 0);
    for (r, &m) in mine.iter().zip(&marked) {
        if r.end < open_lo {
            assert!(
                !m,
                "read before the instant injected: {r:?} (opens {open_lo})"
            );
            before += 1;
        } else if r.start >= open_hi {
            assert!(
                m,
                "read after the instant not injected: {r:?} (opens {open_hi})"
            );
            assert!(
                r.end - r.start >= delay_ns,
                "injected read not delayed: {r:?}"
            );
            after += 1;
        }
    }
    (before, after)
}

#[test]
fn at_delays_only_the_reads_made_after_the_instant() {
    let Some(lib) = libtrace_or_skip("inject_time_at") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let from = now_ns() + 2_500_000_000;
    let secs = format!("{}.{:09}", from / 1_000_000_000, from % 1_000_000_000);
    let rule = format!("read:delay=40ms,at={secs}");
    let (stdout, marks, metas) = record(
        dir.path(),
        &lib,
        &rule,
        &[from.to_string(), "5".to_string()],
    );
    let rs = reads(&stdout);
    assert_eq!(rs.len(), 10, "{stdout}");
    let pid = rs[0].pid;
    let (before, after) = check_side(&rs, &marks, pid, from, from, 40_000_000);
    // The program waits past the instant before its second five reads.
    assert!(after >= 5, "{stdout}");
    let injected = marks.iter().filter(|m| m.1).count();
    assert_eq!(injected, metas, "one meta_inject per marked read");
    assert!(
        injected >= 5 && injected <= 10 - before,
        "{stdout} {marks:?}"
    );
}

#[test]
fn after_s_counts_from_the_start_and_a_forked_child_starts_again() {
    let Some(lib) = libtrace_or_skip("inject_time_after_s") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let spawned = now_ns();
    let rule = "read:delay=30ms,after-s=1";
    let (stdout, marks, metas) = record(
        dir.path(),
        &lib,
        rule,
        &[
            (spawned + 1_000_000_000).to_string(),
            "4".into(),
            "fork".into(),
        ],
    );
    let rs = reads(&stdout);
    assert_eq!(rs.len(), 16, "{stdout}");
    let parent = rs[0].pid;
    let (fork_start, fork_end) = stdout
        .lines()
        .find_map(|l| l.strip_prefix("K "))
        .map(|l| {
            let v: Vec<i64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
            (v[0], v[1])
        })
        .unwrap_or_else(|| panic!("no fork line: {stdout}"));
    let child = rs.iter().find(|r| r.pid != parent).unwrap().pid;
    // The parent's library started after `spawned` and before main (whose start is before
    // its first read); the program sleeps past 1.3 s after main before its second reads.
    let first = rs[0].start;
    let (_, p_after) = check_side(
        &rs,
        &marks,
        parent,
        spawned + 1_000_000_000,
        first + 1_000_000_000,
        30_000_000,
    );
    assert_eq!(p_after, 4, "{stdout}");
    // The child's clock restarts within its fork.
    let (c_before, c_after) = check_side(
        &rs,
        &marks,
        child,
        fork_start + 1_000_000_000,
        fork_end + 1_000_000_000,
        30_000_000,
    );
    assert_eq!(c_after, 4, "{stdout}");
    assert!(c_before <= 4);
    assert_eq!(marks.iter().filter(|m| m.1).count(), metas);
}

/// A Python function called five times, then five more after the instant `argv[1]`
/// (UNIX seconds) has passed by 300 ms; prints "C <i> <start ns> <end ns> <raised>".
const PY_PROG: &str = r#"
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tmod
at = float(sys.argv[1])
def calls(first):
    for i in range(first, first + 5):
        a = time.time_ns()
        try:
            tmod.work(i)
            raised = 0
        except TimeoutError:
            raised = 1
        print("C", i, a, time.time_ns(), raised, flush=True)
calls(1)
while time.time() < at + 0.3:
    time.sleep(0.05)
calls(6)
"#;

#[test]
fn a_py_rule_with_at_raises_only_from_the_calls_after_the_instant() {
    if libtrace_or_skip("inject_time_py").is_none() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("tmod.py"), "def work(i):\n    return i\n").unwrap();
    std::fs::write(d.path().join("prog.py"), PY_PROG).unwrap();
    let from = now_ns() + 3_000_000_000;
    let secs = format!("{}.{:09}", from / 1_000_000_000, from % 1_000_000_000);
    let rule = format!("py:tmod:work:raise=TimeoutError,at={secs}");
    let out = d.path().join("trace");
    let mut c = Command::new(tests::culprit());
    c.arg("record")
        .arg("-o")
        .arg(&out)
        .args(["--inject", &rule, "--", "python3", "prog.py", &secs])
        .current_dir(d.path());
    let r = run_with_deadline(&mut c, Duration::from_secs(120));
    r.assert_success("culprit record");
    let calls: Vec<Vec<i64>> = r
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("C "))
        .map(|l| l.split(' ').map(|x| x.parse().unwrap()).collect())
        .collect();
    assert_eq!(calls.len(), 10, "{}\n{}", r.stdout, r.stderr);
    let mut raised = 0;
    for c in &calls {
        if c[2] < from {
            assert_eq!(c[3], 0, "raised before the instant: {c:?}");
        } else if c[1] >= from {
            assert_eq!(c[3], 1, "not raised after the instant: {c:?}");
        }
        raised += c[3] as usize;
    }
    assert!(calls[5..].iter().all(|c| c[3] == 1), "{}", r.stdout);
    let mut dump = Command::new(tests::culprit());
    dump.arg("dump").arg("--json").arg(&out);
    let dd = run_with_deadline(&mut dump, Duration::from_secs(60));
    dd.assert_success("culprit dump");
    let metas: Vec<serde_json::Value> = tests::parse_json_lines(&dd.stdout)
        .into_iter()
        .filter(|v| v["kind"] == "meta_inject")
        .collect();
    assert_eq!(metas.len(), raised, "{metas:?}");
    assert!(metas
        .iter()
        .all(|m| m["func"] == "python" && m["spec"] == rule.as_str()));
}
