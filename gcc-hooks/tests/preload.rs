//! The whole system: a PIE program and a shared library compiled with
//! `-finstrument-functions` (recursion, function pointers, static functions, threads,
//! fork), run under `LD_PRELOAD=libtrace.so` with a pool in a temporary directory. The
//! recorded call trees, named from the trace's own memory map (`MetaMap` records) and the
//! ELF symbol tables, with file:line from DWARF, must equal the expected ones exactly.
//! Needs the workspace's `libtrace.so` (`cargo build --workspace`, or `$CULPRIT_LIBTRACE`).

mod common;

use bufpool::format::Meta;
use bufpool::{Pool, PoolConfig};
use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const LIB_C: &str = "static int lib_mul(int a, int b) { return a * b; }
int lib_area(int w, int h) { return lib_mul(w, h); }
";

const PROG_C: &str = r#"#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#define NOINSTR __attribute__((no_instrument_function))
int lib_area(int w, int h);
static int twice(int x) { return 2 * x; }
int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }
typedef int (*op_t)(int);
int apply(op_t f, int x) { return f(x); }
int thread_body(int k) { return apply(twice, k) + lib_area(k, 2); }
NOINSTR static void *worker(void *arg) { return (void *)(long)thread_body((int)(long)arg); }
int child_work(void) { return fact(3); }
int run(void) {
	pthread_t t[2];
	for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, (void *)(i + 1));
	for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
	return apply(twice, fact(3)) + lib_area(2, 3);
}
NOINSTR int main(void) {
	int r = run();
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		printf("child %d\n", child_work());
		fflush(stdout);
		_exit(0);
	}
	int st;
	waitpid(p, &st, 0);
	printf("run %d child-status %d\n", r, st);
	return 0;
}
"#;

const MAIN_TREE: &str = "\
run <- main
  fact <- run
    fact <- fact
      fact <- fact
  apply <- run
    twice <- apply
  lib_area <- run
    lib_mul <- lib_area
";

const WORKER_TREE: &str = "\
thread_body <- worker
  apply <- thread_body
    twice <- apply
  lib_area <- thread_body
    lib_mul <- lib_area
";

const CHILD_TREE: &str = "\
child_work <- main
  fact <- child_work
    fact <- fact
      fact <- fact
";

const EXPECTED_OUT: &str = "child 6\nrun 18 child-status 0\n";

struct Built {
    dir: tempfile::TempDir,
    prog: PathBuf,
}

fn build() -> Built {
    let dir = tempdir();
    std::fs::write(dir.path().join("shape.c"), LIB_C).unwrap();
    std::fs::write(dir.path().join("prog.c"), PROG_C).unwrap();
    let flags = [
        "-O1",
        "-g",
        "-fno-inline",
        "-fno-optimize-sibling-calls",
        "-finstrument-functions",
    ];
    let mut a: Vec<&str> = flags.to_vec();
    a.extend(["-fPIC", "-shared", "-o", "libshape.so", "shape.c"]);
    cc(&a, dir.path());
    let mut a: Vec<&str> = flags.to_vec();
    // PIE (gcc's default on Debian, made explicit), no -rdynamic.
    a.extend([
        "-fPIE",
        "-pie",
        "-pthread",
        "-o",
        "prog",
        "prog.c",
        "-L.",
        "-lshape",
        "-Wl,-rpath,$ORIGIN",
    ]);
    cc(&a, dir.path());
    let prog = dir.path().join("prog");
    Built { dir, prog }
}

/// Runs `prog` with `env`, killing it after 60 s.
fn run(prog: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(prog);
    cmd.env_remove("LD_PRELOAD");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the test program");
    let pid = child.id() as i32;
    let t0 = Instant::now();
    let waiter = std::thread::spawn(move || child.wait_with_output());
    while !waiter.is_finished() {
        if t0.elapsed() > Duration::from_secs(60) {
            // SAFETY: killing the child this test started, by its pid.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    waiter.join().unwrap().expect("wait for the test program")
}

struct Traced {
    out: Output,
    drained: Drained,
    syms: Symbols,
    metas: Vec<Meta>,
}

fn traced(b: &Built, extra_env: &[(&str, &str)]) -> Traced {
    let lib = artifact("libtrace.so", "CULPRIT_LIBTRACE");
    let pool_path = b.dir.path().join(format!("pool-{}", extra_env.len()));
    let cfg = PoolConfig {
        n_subbufs: 64,
        subbuf_size: 256 * 1024,
        ..Default::default()
    };
    let pool = Pool::create(&pool_path, &cfg).expect("create pool");
    let mut env = vec![("LD_PRELOAD", s(&lib)), (bufpool::POOL_ENV, s(&pool_path))];
    env.extend_from_slice(extra_env);
    let out = run(&b.prog, &env);
    let drained = drain(&pool);
    let metas: Vec<Meta> = drained.metas.values().flatten().cloned().collect();
    // Symbolize from the recorded memory map only.
    let mut syms = Symbols::default();
    let mut seen = std::collections::BTreeSet::new();
    for m in &metas {
        if let Meta::Map(m) = m {
            if m.prot & 1 == 1 && m.path.starts_with(b"/") && seen.insert(m.path.clone()) {
                let p = PathBuf::from(String::from_utf8_lossy(&m.path).into_owned());
                syms.add_mapping(&p, m.start, m.offset);
            }
        }
    }
    Traced {
        out,
        drained,
        syms,
        metas,
    }
}

/// Trees per (pid, tid), and the pid of the traced parent (the one whose threads ran
/// `run`).
fn trees(t: &Traced) -> BTreeMap<(u32, u32), String> {
    t.drained
        .events
        .iter()
        .map(|(&k, evs)| (k, tree(evs, &t.syms)))
        .collect()
}

#[test]
fn not_preloaded_runs_unchanged() {
    let b = build();
    let out = run(&b.prog, &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), EXPECTED_OUT);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The hooks it calls are glibc's no-ops, found with no extra link flag.
    let nm = Command::new("nm").arg("-D").arg(&b.prog).output().unwrap();
    let nm = String::from_utf8_lossy(&nm.stdout);
    assert!(nm.contains("U __cyg_profile_func_enter"), "{nm}");
}

#[test]
fn libtrace_exports_the_hooks() {
    let lib = artifact("libtrace.so", "CULPRIT_LIBTRACE");
    let nm = Command::new("nm")
        .arg("-D")
        .arg("--defined-only")
        .arg(&lib)
        .output()
        .unwrap();
    let nm = String::from_utf8_lossy(&nm.stdout);
    for sym in [
        "T __cyg_profile_func_enter",
        "T __cyg_profile_func_exit",
        "T culprit_thread_state",
    ] {
        assert!(
            nm.contains(sym),
            "{sym} not exported by {}:\n{nm}",
            lib.display()
        );
    }
}

#[test]
fn records_exact_trees_of_threads_shared_library_and_fork() {
    let b = build();
    let t = traced(&b, &[]);
    assert!(t.out.status.success(), "{:?}", t.out);
    assert_eq!(
        String::from_utf8_lossy(&t.out.stdout),
        EXPECTED_OUT,
        "output unchanged"
    );
    let trees = trees(&t);
    let mut by_tree: BTreeMap<&str, Vec<(u32, u32)>> = BTreeMap::new();
    for (k, tr) in &trees {
        by_tree.entry(tr.as_str()).or_default().push(*k);
    }
    let all = format!("{trees:#?}");
    let main = by_tree
        .get(MAIN_TREE)
        .unwrap_or_else(|| panic!("no main tree in {all}"));
    let workers = by_tree
        .get(WORKER_TREE)
        .unwrap_or_else(|| panic!("no worker tree in {all}"));
    let child = by_tree
        .get(CHILD_TREE)
        .unwrap_or_else(|| panic!("no child tree in {all}"));
    assert_eq!(trees.len(), 4, "exactly 4 threads made calls: {all}");
    assert_eq!((main.len(), workers.len(), child.len()), (1, 2, 1), "{all}");
    let parent = main[0].0;
    assert!(
        workers.iter().all(|w| w.0 == parent && w.1 != main[0].1),
        "{all}"
    );
    assert_ne!(
        child[0].0, parent,
        "the fork child records under its own pid"
    );
    for evs in t.drained.events.values() {
        assert!(evs.windows(2).all(|w| w[0].tsc <= w[1].tsc));
    }

    // file:line from DWARF, for a static function of the PIE executable and of the
    // shared library.
    let twice = t.syms.addr_of("twice").expect("twice named");
    assert_eq!(t.syms.locate(twice), Some(("prog.c".into(), 7)));
    let mul = t.syms.addr_of("lib_mul").expect("lib_mul named");
    assert_eq!(t.syms.locate(mul), Some(("shape.c".into(), 1)));
    // The executable is position-independent: its functions are not at link addresses.
    assert!(twice > 0x10_0000, "PIE loaded high: {twice:#x}");
    // Default settings are said in the trace.
    let filters: Vec<_> = t
        .metas
        .iter()
        .filter_map(|m| match m {
            Meta::Filter(f) => Some(f),
            _ => None,
        })
        .collect();
    assert!(
        filters
            .iter()
            .all(|f| f.depth_limit == 0 && f.clock_mode == 0 && f.excluded.is_empty()),
        "{filters:?}"
    );
}

#[test]
fn record_time_filters_and_clock_reach_the_trace() {
    let b = build();
    let t = traced(
        &b,
        &[
            ("CULPRIT_EXCLUDE_TREE", "lib_area"),
            ("CULPRIT_EXCLUDE", "twice"),
            ("CULPRIT_CLOCK", "sampled:8"),
        ],
    );
    assert!(t.out.status.success(), "{:?}", t.out);
    assert_eq!(String::from_utf8_lossy(&t.out.stdout), EXPECTED_OUT);
    let filters: Vec<_> = t
        .metas
        .iter()
        .filter_map(|m| match m {
            Meta::Filter(f) => Some(f.clone()),
            _ => None,
        })
        .collect();
    assert!(!filters.is_empty(), "a MetaFilter record is written");
    for f in &filters {
        assert_eq!(f.clock_mode, 3);
        assert_eq!(f.excluded, b"fn=twice;tree=lib_area;resolved=2");
    }
    let trees = trees(&t);
    let want_main =
        "run <- main\n  fact <- run\n    fact <- fact\n      fact <- fact\n  apply <- run\n";
    let want_worker = "thread_body <- worker\n  apply <- thread_body\n";
    let mut counts = (0, 0, 0);
    for tr in trees.values() {
        match tr.as_str() {
            t if t == want_main => counts.0 += 1,
            t if t == want_worker => counts.1 += 1,
            t if t == CHILD_TREE => counts.2 += 1,
            other => panic!("unexpected tree:\n{other}"),
        }
    }
    assert_eq!(counts, (1, 2, 1), "{trees:#?}");
    for evs in t.drained.events.values() {
        assert!(
            evs.windows(2).all(|w| w[0].tsc < w[1].tsc),
            "sampled: strictly increasing"
        );
    }
}

const SIGNAL_C: &str = r#"#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#define NOINSTR __attribute__((no_instrument_function))
static volatile long ticks;
int tick_leaf(int x) { return x + 1; }
void on_tick(int sig) { (void)sig; ticks = tick_leaf((int)ticks); }
long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
NOINSTR int main(void) {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_tick;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	/* A high-resolution timer: a signal every 20 us of wall time. */
	timer_t tm;
	struct sigevent ev;
	memset(&ev, 0, sizeof ev);
	ev.sigev_notify = SIGEV_SIGNAL;
	ev.sigev_signo = SIGALRM;
	timer_create(CLOCK_MONOTONIC, &ev, &tm);
	struct itimerspec its = { { 0, 20000 }, { 0, 20000 } };
	timer_settime(tm, 0, &its, NULL);
	long s = 0;
	for (int i = 0; i < 8; i++)
		s += fib(20);
	timer_delete(tm);
	tick_leaf(0); /* a last hook event, which reports what the last window missed */
	printf("ticks %ld sum %ld\n", ticks, s);
	return 0;
}
"#;

/// A timer signal whose handler calls instrumented functions interrupts the program
/// every 20 µs — often inside a hook. Every entry must still decode, every thread's calls
/// must nest (each handler run either fully recorded, as a child of whatever ran, or not
/// at all), and the accounting must be exact: handler runs recorded + handler runs
/// reported lost (4 events each: on_tick and tick_leaf, enter and exit) = handler runs.
#[test]
fn signal_handlers_interrupting_hooks_never_tear_the_trace() {
    let d = tempdir();
    std::fs::write(d.path().join("sig.c"), SIGNAL_C).unwrap();
    cc(
        &[
            "-O1",
            "-g",
            "-fno-inline",
            "-finstrument-functions",
            "-o",
            "sig",
            "sig.c",
        ],
        d.path(),
    );
    let b = Built {
        prog: d.path().join("sig"),
        dir: d,
    };
    let t = traced(&b, &[]);
    assert!(t.out.status.success(), "{:?}", t.out);
    let stdout = String::from_utf8_lossy(&t.out.stdout).into_owned();
    let ticks: usize = stdout
        .split_whitespace()
        .nth(1)
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("bad output {stdout:?}"));
    assert!(ticks > 0, "the timer fired");
    let on_tick = t.syms.addr_of("on_tick").expect("on_tick named");
    let fib = t.syms.addr_of("fib").expect("fib named");
    let mut recorded_ticks = 0;
    let mut fibs = 0;
    for evs in t.drained.events.values() {
        // Nesting is checked by `tree`; it panics on any unmatched exit.
        let tr = tree(evs, &t.syms);
        assert!(!tr.is_empty());
        for e in evs
            .iter()
            .filter(|e| e.kind == bufpool::format::Kind::FnEnter)
        {
            recorded_ticks += usize::from(e.callee == on_tick);
            fibs += usize::from(e.callee == fib);
        }
    }
    let lost = t.drained.lost;
    eprintln!("{recorded_ticks} of {ticks} handler runs recorded, {lost} events reported lost");
    assert!(
        recorded_ticks > 0,
        "handler runs outside the hooks' window are recorded"
    );
    assert_eq!(lost % 4, 0, "whole handler runs are lost");
    // The last tick_leaf(0) of main is one more recorded tick_leaf, not an on_tick.
    assert_eq!(recorded_ticks + lost / 4, ticks, "recorded + lost = ran");
    // fib(20) makes 21891 calls, 8 times: none missing.
    assert_eq!(fibs, 8 * 21891, "fib calls recorded");
}
