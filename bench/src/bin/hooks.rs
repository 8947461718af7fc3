//! ns per event of Culprit's gcc `-finstrument-functions` hooks, side by side with the
//! floor of recording (rdtsc + a 20-byte store, in the program), `uftrace record` and
//! LTTng-UST's `liblttng-ust-cyg-profile-fast`, on recursive `fib(N)` — one run, rounds
//! shuffled, each traced row against the plain binary at the same size.
//!
//! ```text
//! cargo build --release -p tracer-preload -p bench
//! target/release/hooks [--rounds 5] [--n 32] [--n-slow 28] [--libtrace PATH] [--no-lttng]
//!                      [--no-uftrace] [--no-reader] [--no-warmup] [--libtrace-b OTHER.so]
//! ```
//!
//! Per event = (traced − median(plain)) / events. "Hot path" is the program's own timers
//! around `fib(N)` — thread CPU time (immune to the other jobs of a shared 2-CPU box
//! taking the CPU away) and monotonic wall time; "process" is the whole traced process
//! tree from fork to exit (start-up, flush, exit included). Every program first runs an
//! untimed warm-up `fib(N)`, so buffers (Culprit's sub-buffers, the floor's array,
//! LTTng's and uftrace's) are faulted in before the timed run, as in a long-running
//! daemon; `--no-warmup` drops it.
//!
//! Culprit rows write into a 192 MiB pool (192 × 1 MiB sub-buffers — less than a run
//! writes) drained by a reader thread while the program runs, as `culprit reader` does;
//! every run is then decoded and must hold all 2·calls events with none lost (else the
//! row says MISMATCH: a loaded box can starve the reader). `--no-reader` sizes the pool
//! for the whole run instead and drains it after (first-touch page faults of every
//! sub-buffer are then inside the timed run). `--libtrace-b` adds rows for a second build
//! of libtrace.so (A/B comparisons).
//! Needs gcc; uftrace and lttng rows are skipped (and say so) when the tools are missing.

use anyhow::{bail, Context, Result};
use bufpool::format::{Decoder, Kind};
use bufpool::{Consumer, Pool, PoolConfig};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The workload. `fib` is `noipa` and built with `-fno-optimize-sibling-calls`, so every
/// call is a real call: fib(N) makes exactly 2·F(N+1) − 1 calls (printed as CALLS).
const FIB_C: &str = r#"
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <x86intrin.h>
#define NOINSTR __attribute__((no_instrument_function))
#define HOOK __attribute__((no_instrument_function, noipa))
__attribute__((noipa)) long fib(int n) { if (n < 2) return n; return fib(n - 1) + fib(n - 2); }
#if defined(FLOOR)
/* The floor of recording: rdtsc + one packed 20-byte record into a pre-faulted
 * per-thread buffer (wraps), through a direct call to the program's own hook. */
struct __attribute__((packed)) rec { uint64_t tsc; uint64_t fn; uint32_t kind; };
#define BUF_BYTES (64UL << 20)
#define BUF_RECS (BUF_BYTES / sizeof(struct rec))
static __thread struct rec *tbuf;
static __thread size_t tpos;
NOINSTR __attribute__((always_inline)) static inline void put(void *fn, uint32_t kind) {
	size_t p = tpos; struct rec *r = &tbuf[p];
	r->tsc = __rdtsc(); r->fn = (uint64_t)(uintptr_t)fn; r->kind = kind;
	tpos = (p + 1 == BUF_RECS) ? 0 : p + 1;
}
HOOK void __cyg_profile_func_enter(void *fn, void *site) { (void)site; put(fn, 1); }
HOOK void __cyg_profile_func_exit(void *fn, void *site) { (void)site; put(fn, 2); }
#endif
NOINSTR static uint64_t now_ns(void) {
	struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
NOINSTR static uint64_t cpu_ns(void) {
	struct timespec ts; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
NOINSTR static unsigned long fib_calls(int n) {
	unsigned long a = 0, b = 1;
	for (int i = 0; i < n + 1; i++) { unsigned long t = a + b; a = b; b = t; }
	return 2 * a - 1;
}
NOINSTR int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 30;
	int warm = argc > 2 ? atoi(argv[2]) : -1; /* untimed warm-up run: fib(warm) */
#if defined(FLOOR)
	tbuf = mmap(NULL, BUF_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (tbuf == MAP_FAILED) { perror("mmap"); return 1; }
	memset(tbuf, 0, BUF_BYTES);
#endif
	long w = warm >= 0 ? fib(warm) : 0;
	uint64_t c0 = cpu_ns(), t0 = now_ns();
	long r = fib(n);
	uint64_t t1 = now_ns(), c1 = cpu_ns();
	printf("CALLS=%lu WARM_CALLS=%lu WORK_NS=%llu WORK_CPU_NS=%llu RESULT=%ld\n", fib_calls(n),
	       warm >= 0 ? fib_calls(warm) : 0, (unsigned long long)(t1 - t0),
	       (unsigned long long)(c1 - c0), r + 0 * w);
	return 0;
}
"#;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tool {
    Plain,
    Floor,
    GlibcNoop,
    Culprit,
    Uftrace,
    Lttng,
}

#[derive(Clone, Debug)]
struct Row {
    id: &'static str,
    label: String,
    tool: Tool,
    n: u32,
    bin: &'static str,
    env: Vec<(String, String)>,
    /// The libtrace.so of Culprit rows.
    lib: PathBuf,
}

#[derive(Clone, Debug, Default)]
struct Sample {
    work_ns: f64,
    work_cpu_ns: f64,
    wall_ns: f64,
    cpu_ns: f64,
    calls: u64,
    warm_calls: u64,
    /// Sampled clock: median, p99 and max bound on the timestamp lag (ns).
    lag_ns: Option<[f64; 3]>,
    note: Option<String>,
}

struct Opts {
    rounds: usize,
    n: u32,
    n_slow: u32,
    libtrace: PathBuf,
    libtrace_b: Option<PathBuf>,
    lttng: bool,
    uftrace: bool,
    reader: bool,
    warmup: bool,
    /// The reader also copies live prefixes this often (`--live MS`).
    live: Option<Duration>,
}

fn parse_opts() -> Result<Opts> {
    let exe_dir = std::env::current_exe()?
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut o = Opts {
        rounds: 5,
        n: 32,
        n_slow: 28,
        libtrace: exe_dir.join("libtrace.so"),
        libtrace_b: None,
        lttng: true,
        uftrace: true,
        reader: true,
        warmup: true,
        live: None,
    };
    let mut a = std::env::args().skip(1);
    while let Some(k) = a.next() {
        let mut val = || a.next().with_context(|| format!("{k} needs a value"));
        match k.as_str() {
            "--rounds" => o.rounds = val()?.parse()?,
            "--n" => o.n = val()?.parse()?,
            "--n-slow" => o.n_slow = val()?.parse()?,
            "--libtrace" => o.libtrace = PathBuf::from(val()?),
            "--libtrace-b" => o.libtrace_b = Some(PathBuf::from(val()?)),
            "--no-lttng" => o.lttng = false,
            "--no-uftrace" => o.uftrace = false,
            "--no-reader" => o.reader = false,
            "--no-warmup" => o.warmup = false,
            "--live" => o.live = Some(Duration::from_millis(val()?.parse()?)),
            _ => bail!("unknown argument {k}"),
        }
    }
    Ok(o)
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd} >/dev/null")])
        .status()
        .is_ok_and(|s| s.success())
}

fn sh(args: &[&str]) -> Result<String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .with_context(|| format!("run {args:?}"))?;
    if !out.status.success() {
        bail!(
            "{args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn build(dir: &Path) -> Result<()> {
    std::fs::write(dir.join("fib.c"), FIB_C)?;
    let cf = ["-O2", "-g", "-fno-inline", "-fno-optimize-sibling-calls"];
    let variants: [(&str, &[&str]); 3] = [
        ("fib_plain", &[]),
        ("fib_instr", &["-finstrument-functions"]),
        ("fib_floor", &["-finstrument-functions", "-DFLOOR"]),
    ];
    for (name, extra) in variants {
        let st = Command::new("gcc")
            .args(cf)
            .args(extra)
            .arg("-o")
            .arg(dir.join(name))
            .arg(dir.join("fib.c"))
            .status()
            .context("run gcc")?;
        if !st.success() {
            bail!("building {name} failed");
        }
    }
    Ok(())
}

fn children_cpu_ns() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e9 + t.tv_usec as f64 * 1e3;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn fib_events(n: u32) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..=n {
        let t = a + b;
        a = b;
        b = t;
    }
    2 * (2 * a - 1)
}

/// The pool of a Culprit run, of 1 MiB sub-buffers. With a concurrent reader: 64 of them
/// (far less than a run writes), so the run completes without loss only if the reader
/// keeps up, as in production. Without: enough for every event of the run (drained
/// after it), so no reader competes for the 2 CPUs while the hot path is timed.
fn make_pool(path: &Path, events: u64, concurrent_reader: bool) -> Result<Pool> {
    let n = if concurrent_reader {
        192
    } else {
        (events * 2 * 18 / (1 << 20) + 16) as u32
    };
    let cfg = PoolConfig {
        n_subbufs: n,
        subbuf_size: 1 << 20,
        calibration: Duration::from_millis(1),
        overwrite: true,
        ..Default::default()
    };
    Ok(Pool::create(path, &cfg)?)
}

/// A reader thread: takes written sub-buffers while the traced program runs, copies them
/// out (as `culprit reader` saves them) and gives them back.
/// With `live`, it also copies the committed prefix of the sub-buffer the program is
/// filling every `live` (see `bench::live`), and stitches it to the rest when it takes it.
fn reader(pool: &Pool, stop: &AtomicBool, live: Option<Duration>) -> Vec<(u64, Vec<u8>)> {
    let c = Consumer::new(pool);
    let mut out = Vec::new();
    let mut lv = live.map(bench::live::Live::new);
    let save = |t: bufpool::Taken<'_, '_>,
                lv: &mut Option<bench::live::Live>,
                out: &mut Vec<(u64, Vec<u8>)>| {
        let d = match lv {
            Some(l) => l.whole(t.info(), t.data()),
            None => t.data().to_vec(),
        };
        out.push((t.info().seq, d));
        t.release();
    };
    loop {
        let mut took = false;
        while let Some(t) = c.take() {
            save(t, &mut lv, &mut out);
            took = true;
        }
        if let Some(l) = &mut lv {
            l.tick(pool);
        }
        if stop.load(Ordering::Acquire) {
            bufpool::salvage_dead(pool);
            while let Some(t) = c.take() {
                save(t, &mut lv, &mut out);
            }
            out.sort_by_key(|b| b.0);
            return out;
        }
        if !took {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// What the saved sub-buffers of a (single-threaded) run hold.
struct Saved {
    /// FnEnter + FnExit entries.
    fn_events: u64,
    /// Entries lost (Lost markers).
    lost: u64,
    /// Per hook event, how far its timestamp may lag the truth, in TSC ticks: the
    /// distance to the next real reading (0 for real readings). A real reading is any
    /// timestamp that is not the previous one + 1 (see `CULPRIT_CLOCK=sampled`).
    lag_bounds: Vec<u64>,
}

fn count_saved(bufs: &[(u64, Vec<u8>)]) -> Result<Saved> {
    let (mut fn_events, mut lost) = (0u64, 0u64);
    let mut tscs = Vec::new();
    for (_, b) in bufs {
        for e in Decoder::new(b) {
            let e = e.map_err(|e| anyhow::anyhow!("decode: {e}"))?;
            match e.kind {
                Kind::FnEnter | Kind::FnExit => {
                    fn_events += 1;
                    tscs.push(e.tsc);
                }
                Kind::Lost => lost += e.lost,
                _ => {}
            }
        }
    }
    let mut lag_bounds = vec![0u64; tscs.len()];
    let mut next_real: Option<u64> = None;
    for i in (0..tscs.len()).rev() {
        let real = i == 0 || tscs[i] != tscs[i - 1].wrapping_add(1);
        if real {
            next_real = Some(tscs[i]);
        } else if let Some(r) = next_real {
            lag_bounds[i] = r.saturating_sub(tscs[i]);
        }
    }
    Ok(Saved {
        fn_events,
        lost,
        lag_bounds,
    })
}

struct Lttng {
    daemon: Option<Child>,
    base: PathBuf,
}

impl Lttng {
    fn start(base: &Path) -> Result<Lttng> {
        let running = Command::new("pgrep")
            .args(["-x", "lttng-sessiond"])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        let daemon = if running {
            None
        } else {
            let c = Command::new("lttng-sessiond")
                .arg("--no-kernel")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("start lttng-sessiond")?;
            // Wait until it answers.
            let t0 = Instant::now();
            loop {
                std::thread::sleep(Duration::from_millis(200));
                if sh(&["lttng", "list"]).is_ok() || t0.elapsed() > Duration::from_secs(10) {
                    break;
                }
            }
            Some(c)
        };
        Ok(Lttng {
            daemon,
            base: base.to_path_buf(),
        })
    }

    fn before(&self, i: usize) -> Result<String> {
        let name = format!("culprit-hooks-bench-{}-{i}", std::process::id());
        let out = self.base.join(&name);
        sh(&[
            "lttng",
            "create",
            &name,
            &format!("--output={}", out.display()),
        ])?;
        sh(&[
            "lttng",
            "enable-event",
            "-u",
            "-s",
            &name,
            "lttng_ust_cyg_profile_fast:*",
        ])?;
        sh(&["lttng", "start", &name])?;
        Ok(name)
    }

    fn after(&self, name: &str) -> Result<Option<String>> {
        sh(&["lttng", "stop", name])?;
        let list = sh(&["lttng", "list", name]).unwrap_or_default();
        sh(&["lttng", "destroy", name])?;
        let _ = std::fs::remove_dir_all(self.base.join(name));
        let discarded = list
            .lines()
            .find(|l| l.contains("Discarded events"))
            .map(|l| l.trim().to_owned());
        Ok(discarded)
    }
}

impl Drop for Lttng {
    fn drop(&mut self) {
        if let Some(c) = &mut self.daemon {
            // SAFETY: signalling the daemon this program started, by its pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }
}

fn run_once(
    row: &Row,
    dir: &Path,
    opts: &Opts,
    lttng: Option<&Lttng>,
    round: usize,
) -> Result<Sample> {
    let bin = dir.join(row.bin);
    let n = row.n.to_string();
    let mut cmd;
    let mut pool = None;
    let pool_path = PathBuf::from(format!(
        "/dev/shm/culprit-bench-hooks-{}.pool",
        std::process::id()
    ));
    let ufdir = dir.join("uftrace.data");
    let mut session = None;
    match row.tool {
        Tool::Uftrace => {
            cmd = Command::new("uftrace");
            cmd.args(["record", "-d"]).arg(&ufdir).arg(&bin).arg(&n);
            if opts.warmup {
                cmd.arg(&n);
            }
        }
        _ => {
            cmd = Command::new(&bin);
            cmd.arg(&n);
            if opts.warmup {
                cmd.arg(&n);
            }
        }
    }
    match row.tool {
        Tool::Culprit => {
            pool = Some(make_pool(&pool_path, fib_events(row.n), opts.reader)?);
            cmd.env("LD_PRELOAD", &row.lib)
                .env(bufpool::POOL_ENV, &pool_path);
        }
        Tool::Lttng => {
            let l = lttng.context("lttng not started")?;
            session = Some(l.before(round)?);
            cmd.env("LD_PRELOAD", "liblttng-ust-cyg-profile-fast.so.1");
        }
        _ => {}
    }
    for (k, v) in &row.env {
        cmd.env(k, v);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let stop = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let (out, wall, cpu, saved) = std::thread::scope(|sc| -> Result<_> {
        let rd = pool.as_ref().map(|p| {
            if !opts.reader {
                stop.store(true, Ordering::Release);
            }
            sc.spawn(|| {
                if !opts.reader {
                    // Drain after the run only: wait for the writer to exit.
                    while !done.load(Ordering::Acquire) {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
                reader(p, &stop, opts.live)
            })
        });
        let cpu0 = children_cpu_ns();
        let t0 = Instant::now();
        let out = cmd.output().with_context(|| format!("run {}", row.id));
        let wall = t0.elapsed().as_nanos() as f64;
        let cpu = children_cpu_ns() - cpu0;
        stop.store(true, Ordering::Release);
        done.store(true, Ordering::Release);
        let saved = rd.map(|h| h.join().expect("reader thread"));
        Ok((out?, wall, cpu, saved))
    })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "{} failed ({}): {stdout}{}",
            row.id,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let field = |k: &str| -> Result<u64> {
        stdout
            .split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .with_context(|| format!("{} printed no {k}: {stdout}", row.id))?
            .parse()
            .map_err(Into::into)
    };
    let mut s = Sample {
        work_ns: field("WORK_NS=")? as f64,
        work_cpu_ns: field("WORK_CPU_NS=")? as f64,
        wall_ns: wall,
        cpu_ns: cpu,
        calls: field("CALLS=")?,
        warm_calls: field("WARM_CALLS=")?,
        lag_ns: None,
        note: None,
    };
    if let Some(saved) = saved {
        let sv = count_saved(&saved)?;
        let (got, lost) = (sv.fn_events, sv.lost);
        if row
            .env
            .iter()
            .any(|(k, v)| k == "CULPRIT_CLOCK" && v.starts_with("sampled"))
        {
            let tpn = pool.as_ref().map_or(0.0, |p| p.info().calib.ticks_per_ns());
            let mut b = sv.lag_bounds;
            b.sort_unstable();
            let q = |f: f64| b[((b.len() - 1) as f64 * f) as usize] as f64 / tpn;
            if !b.is_empty() && tpn > 0.0 {
                s.lag_ns = Some([q(0.5), q(0.99), q(1.0)]);
            }
        }
        drop(pool);
        let _ = std::fs::remove_file(&pool_path);
        let want = 2 * (s.calls + s.warm_calls);
        if got != want || lost != 0 {
            s.note = Some(format!(
                "MISMATCH: recorded {got} of {want} events, lost {lost}"
            ));
        }
    }
    if let Some(name) = session {
        let d = lttng.context("lttng")?.after(&name)?;
        if let Some(d) = d {
            if !d.ends_with(": 0") {
                s.note = Some(d);
            }
        }
    }
    if row.tool == Tool::Uftrace {
        let _ = std::fs::remove_dir_all(&ufdir);
    }
    Ok(s)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn fmt(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn main() -> Result<()> {
    let opts = parse_opts()?;
    // Like the anchors: everything measured (and the reader thread) runs at nice -10, so
    // the other jobs of a shared box disturb it less. Needs root; otherwise unchanged.
    // SAFETY: setpriority only changes this process's scheduling priority.
    let reniced = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -10) } == 0;
    let dir = tempfile::tempdir()?;
    build(dir.path())?;
    let culprit_ok = opts.libtrace.is_file()
        && sh(&["nm", "-D", opts.libtrace.to_str().unwrap_or("")])
            .is_ok_and(|s| s.contains("T __cyg_profile_func_enter"));
    let uftrace = opts.uftrace && have("uftrace");
    let lttng_ok = opts.lttng
        && have("lttng")
        && have("lttng-sessiond")
        && Path::new("/usr/lib/x86_64-linux-gnu/liblttng-ust-cyg-profile-fast.so.1").exists();
    let (n, ns) = (opts.n, opts.n_slow);
    let mut rows = vec![
        Row {
            id: "plain",
            label: "plain (no instrumentation)".into(),
            tool: Tool::Plain,
            n,
            bin: "fib_plain",
            env: vec![],
            lib: opts.libtrace.clone(),
        },
        Row {
            id: "noop",
            label: "-finstrument-functions, glibc no-op hooks (PLT)".into(),
            tool: Tool::GlibcNoop,
            n,
            bin: "fib_instr",
            env: vec![],
            lib: opts.libtrace.clone(),
        },
        Row {
            id: "floor",
            label: "floor: rdtsc + 20-byte store (hook in program)".into(),
            tool: Tool::Floor,
            n,
            bin: "fib_floor",
            env: vec![],
            lib: opts.libtrace.clone(),
        },
    ];
    if culprit_ok {
        for (id, clock, label) in [
            (
                "culprit_tsc",
                "tsc",
                "Culprit hooks, CULPRIT_CLOCK=tsc (default)",
            ),
            (
                "culprit_s16",
                "sampled:16",
                "Culprit hooks, CULPRIT_CLOCK=sampled:16",
            ),
            (
                "culprit_s256",
                "sampled:256",
                "Culprit hooks, CULPRIT_CLOCK=sampled:256",
            ),
        ] {
            rows.push(Row {
                id,
                label: label.into(),
                tool: Tool::Culprit,
                n,
                bin: "fib_instr",
                env: vec![("CULPRIT_CLOCK".into(), clock.into())],
                lib: opts.libtrace.clone(),
            });
        }
        // The cost of having filters on: an exclusion table in use (it names `main`, which
        // is not instrumented, so every fib event is still recorded and probes the table)
        // and a depth limit fib(N) never reaches.
        rows.push(Row {
            id: "culprit_filter",
            label: "Culprit hooks, tsc + CULPRIT_EXCLUDE=main + CULPRIT_DEPTH=1000 (nothing filtered out)".into(),
            tool: Tool::Culprit,
            n,
            bin: "fib_instr",
            env: vec![
                ("CULPRIT_EXCLUDE".into(), "main".into()),
                ("CULPRIT_DEPTH".into(), "1000".into()),
            ],
            lib: opts.libtrace.clone(),
        });
        if let Some(b) = &opts.libtrace_b {
            let name = b.display().to_string();
            for (id, clock) in [("b_tsc", "tsc"), ("b_s16", "sampled:16")] {
                rows.push(Row {
                    id,
                    label: format!("B = {name}, CULPRIT_CLOCK={clock}"),
                    tool: Tool::Culprit,
                    n,
                    bin: "fib_instr",
                    env: vec![("CULPRIT_CLOCK".into(), clock.into())],
                    lib: b.clone(),
                });
            }
        }
    } else {
        eprintln!("hooks: {} has no __cyg_profile_func_enter: Culprit rows skipped (cargo build --release -p tracer-preload)", opts.libtrace.display());
    }
    if uftrace || lttng_ok {
        rows.push(Row {
            id: "plain_slow",
            label: "plain (no instrumentation)".into(),
            tool: Tool::Plain,
            n: ns,
            bin: "fib_plain",
            env: vec![],
            lib: opts.libtrace.clone(),
        });
    }
    if uftrace {
        rows.push(Row {
            id: "uftrace",
            label: "uftrace record (-finstrument-functions build)".into(),
            tool: Tool::Uftrace,
            n: ns,
            bin: "fib_instr",
            env: vec![],
            lib: opts.libtrace.clone(),
        });
    } else {
        eprintln!("hooks: uftrace not found: row skipped");
    }
    if culprit_ok && (uftrace || lttng_ok) {
        rows.push(Row {
            id: "culprit_tsc_slow",
            label: "Culprit hooks, CULPRIT_CLOCK=tsc (default)".into(),
            tool: Tool::Culprit,
            n: ns,
            bin: "fib_instr",
            env: vec![("CULPRIT_CLOCK".into(), "tsc".into())],
            lib: opts.libtrace.clone(),
        });
    }
    let lttng = if lttng_ok {
        rows.push(Row {
            id: "lttng",
            label: "LTTng-UST cyg-profile-fast (default channel)".into(),
            tool: Tool::Lttng,
            n: ns,
            bin: "fib_instr",
            env: vec![],
            lib: opts.libtrace.clone(),
        });
        Some(Lttng::start(dir.path())?)
    } else {
        eprintln!("hooks: lttng not found: row skipped");
        None
    };

    let mut samples: BTreeMap<&'static str, Vec<Sample>> = BTreeMap::new();
    let mut seed = std::process::id() as u64 ^ 0x9E37_79B9_7F4A_7C15;
    let t_start = Instant::now();
    for round in 0..opts.rounds {
        let mut order: Vec<usize> = (0..rows.len()).collect();
        for i in (1..order.len()).rev() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            order.swap(i, (seed % (i as u64 + 1)) as usize);
        }
        for &i in &order {
            let r = &rows[i];
            let s = run_once(r, dir.path(), &opts, lttng.as_ref(), round)?;
            samples.entry(r.id).or_default().push(s);
        }
        eprintln!(
            "hooks: round {}/{} done ({:.0} s)",
            round + 1,
            opts.rounds,
            t_start.elapsed().as_secs_f64()
        );
    }
    drop(lttng);

    // Baselines: median plain time per size.
    let plain_of = |n: u32| if n == opts.n { "plain" } else { "plain_slow" };
    let base = |id: &str, f: fn(&Sample) -> f64| -> f64 {
        median(
            &mut samples
                .get(id)
                .map(|v| v.iter().map(f).collect::<Vec<_>>())
                .unwrap_or_default(),
        )
    };
    // Hot-path figures are per event of the timed fib(N); whole-process figures per
    // event of the whole run (warm-up included).
    // Runs where Culprit's reader fell behind and events were dropped are left out (a
    // drop is cheaper than a record): unless every run of the row is such a run.
    let clean = |id: &str| -> Vec<&Sample> {
        let all: Vec<&Sample> = samples[id].iter().collect();
        let ok: Vec<&Sample> = all
            .iter()
            .copied()
            .filter(|s| !s.note.as_deref().is_some_and(|n| n.starts_with("MISMATCH")))
            .collect();
        if ok.is_empty() {
            all
        } else {
            ok
        }
    };
    let per_ev = |r: &Row, f: fn(&Sample) -> f64| -> Vec<f64> {
        let b = base(plain_of(r.n), f);
        clean(r.id)
            .iter()
            .map(|s| (f(s) - b) / (2 * s.calls) as f64)
            .collect()
    };
    let per_ev_all = |r: &Row, f: fn(&Sample) -> f64| -> Vec<f64> {
        let b = base(plain_of(r.n), f);
        clean(r.id)
            .iter()
            .map(|s| (f(s) - b) / (2 * (s.calls + s.warm_calls)) as f64)
            .collect()
    };
    let floor_cpu = median(&mut per_ev(&rows[2], |s| s.work_cpu_ns));
    let tsc_slow = rows
        .iter()
        .find(|r| r.id == "culprit_tsc_slow")
        .map(|r| median(&mut per_ev(r, |s| s.work_cpu_ns)));
    println!("| fib(N) | tracer | events/run | ns/ev hot-path CPU med | min | max | × floor | ns/ev hot-path wall med | ns/ev process CPU med | ns/ev process wall med | notes |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        if r.tool == Tool::Plain {
            continue;
        }
        let mut c = per_ev(r, |s| s.work_cpu_ns);
        let cm = median(&mut c);
        let (mn, mx) = (c[0], c[c.len() - 1]);
        let ratio = if r.n == opts.n {
            format!("{:.2}", cm / floor_cpu)
        } else {
            "-".into()
        };
        let n_bad = samples[r.id]
            .iter()
            .filter(|s| s.note.as_deref().is_some_and(|n| n.starts_with("MISMATCH")))
            .count();
        let mut notes: Vec<String> = samples[r.id]
            .iter()
            .filter_map(|s| s.note.clone())
            .filter(|n| !n.starts_with("MISMATCH"))
            .collect();
        notes.dedup();
        if n_bad > 0 {
            let worst = samples[r.id]
                .iter()
                .filter_map(|s| s.note.clone())
                .find(|n| n.starts_with("MISMATCH"))
                .unwrap_or_default();
            notes.push(format!(
                "{n_bad} of {} runs left out: the reader fell behind ({worst})",
                samples[r.id].len()
            ));
        }
        if r.n != opts.n && r.id != "culprit_tsc_slow" {
            if let Some(t) = tsc_slow {
                notes.push(format!("{:.1}× Culprit tsc at this size", cm / t));
            }
        }
        let lags: Vec<[f64; 3]> = samples[r.id].iter().filter_map(|s| s.lag_ns).collect();
        if !lags.is_empty() {
            let m = |i: usize| median(&mut lags.iter().map(|l| l[i]).collect::<Vec<_>>());
            notes.push(format!(
                "timestamp lag bound: median {} ns, p99 {} ns, max {} ns",
                fmt(m(0)),
                fmt(m(1)),
                fmt(lags.iter().map(|l| l[2]).fold(0.0, f64::max))
            ));
        }
        if r.tool == Tool::Culprit && n_bad < samples[r.id].len() {
            notes.push("every counted run: all 2·calls events recorded, 0 lost".into());
        }
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.n,
            r.label,
            fib_events(r.n),
            fmt(cm),
            fmt(mn),
            fmt(mx),
            ratio,
            fmt(median(&mut per_ev(r, |s| s.work_ns))),
            fmt(median(&mut per_ev_all(r, |s| s.cpu_ns))),
            fmt(median(&mut per_ev_all(r, |s| s.wall_ns))),
            notes.join("; ")
        );
    }
    let plain_ns = base("plain", |s| s.work_cpu_ns) / fib_events(opts.n) as f64;
    println!(
        "\nHot path = the program's own timers around fib(N) (thread CPU time, and monotonic wall); \
         process = the whole traced process tree from fork to exit (CPU: user+sys; LTTng daemons \
         not included). Every figure is per event, minus the plain binary at the same N. \
         Plain fib({}) itself costs {} ns CPU per event. {} rounds, shuffled; warm-up run: {}; \
         Culprit pool drained {}; nice -10: {}.",
        opts.n,
        fmt(plain_ns),
        opts.rounds,
        if opts.warmup { "yes" } else { "no" },
        if opts.reader {
            "by a concurrent reader thread (192 x 1 MiB)"
        } else {
            "after the run (pool sized for the whole run)"
        },
        if reniced { "yes" } else { "no (not root)" }
    );
    Ok(())
}
