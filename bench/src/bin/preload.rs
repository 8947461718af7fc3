//! Benchmark of `libtrace.so` (issue 3), side by side with the tools people use instead.
//!
//! 1. **Hot path**: a send/recv loop whose libc `send`/`recv` are replaced by a preloaded
//!    stub that returns at once, run with and without libtrace.so in front of it. The
//!    difference is the tracer's own cost per wrapped call (two entries, call site,
//!    reentrancy guard, errno), free of system-call noise.
//! 2. **Real loop**: the same loop on a UNIX datagram socketpair with the real libc, plain
//!    and under libtrace.so, `strace -f`, `ltrace` and `uftrace record --force` (each with
//!    an iteration count that keeps its run near a second). ns added per call =
//!    (traced − plain) / 2, from the program's own timer around the loop.
//! 3. **redis**: `redis-benchmark` throughput against Debian's `redis-server`, plain and
//!    under libtrace.so (default pool geometry, a reader thread draining it), with the
//!    entries recorded and lost.
//!
//! Every libtrace run has a reader thread in this process taking sub-buffers, counting
//! them and giving them back, so the pool never fills up unless the reader falls behind
//! (then the writer drops and counts, and the table says so). Rounds are interleaved
//! (every configuration once per round) so machine-load drift hits all rows alike.
//!
//! ```text
//! cargo build --release -p tracer-preload
//! cargo run --release -p bench --bin preload [-- --rounds N] [--lib PATH] [--quick] [--only hot|loop|redis]
//! ```

use anyhow::{bail, Context, Result};
use bufpool::format::Decoder;
use bufpool::{Consumer, Pool, PoolConfig};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PINGPONG: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv)) return 1;
    char c = 'x', buf[16];
    for (int i = 0; i < 1000; i++) { send(sv[0], &c, 1, 0); recv(sv[1], buf, sizeof buf, 0); }
    struct timespec a, b, ca, cb;
    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ca);
    for (long i = 0; i < n; i++) {
        if (send(sv[0], &c, 1, 0) != 1) return 2;
        if (recv(sv[1], buf, sizeof buf, 0) != 1) return 3;
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cb);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.3f %.3f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n,
           ((cb.tv_sec - ca.tv_sec) * 1e9 + (cb.tv_nsec - ca.tv_nsec)) / n);
    return 0;
}
"#;

/// libc stand-ins that return at once (the hot-path measurement).
const STUB: &str = r#"
#include <stddef.h>
#include <sys/types.h>
ssize_t send(int fd, const void *b, size_t n, int f) { (void)fd; (void)b; (void)f; __asm__ volatile("" ::: "memory"); return n; }
ssize_t recv(int fd, void *b, size_t n, int f) { (void)fd; (void)n; (void)f; ((char *)b)[0] = 'x'; __asm__ volatile("" ::: "memory"); return 1; }
"#;

struct Opts {
    only: Option<String>,
    rounds: usize,
    lib: PathBuf,
    quick: bool,
    /// The reader also copies live prefixes this often (`--live MS`, see `bench::live`).
    live: Option<Duration>,
}

fn parse_args() -> Result<Opts> {
    let exe = std::env::current_exe()?;
    let mut o = Opts {
        only: None,
        rounds: 5,
        lib: exe.parent().context("exe dir")?.join("libtrace.so"),
        quick: false,
        live: None,
    };
    let mut a = std::env::args().skip(1);
    while let Some(x) = a.next() {
        match x.as_str() {
            "--rounds" => o.rounds = a.next().context("--rounds N")?.parse()?,
            "--lib" => o.lib = a.next().context("--lib PATH")?.into(),
            "--quick" => o.quick = true,
            "--live" => {
                o.live = Some(Duration::from_millis(
                    a.next().context("--live MS")?.parse()?,
                ))
            }
            "--only" => o.only = Some(a.next().context("--only hot|loop|redis")?),
            _ => bail!("unknown argument {x}"),
        }
    }
    if !o.lib.exists() {
        bail!(
            "{} not found: run `cargo build --release -p tracer-preload` or pass --lib",
            o.lib.display()
        );
    }
    Ok(o)
}

/// A pool in /dev/shm with a reader thread that takes, counts and releases sub-buffers.
struct Drained {
    path: PathBuf,
    pool: Arc<Pool>,
    stop: Arc<AtomicBool>,
    bytes: Arc<AtomicU64>,
    lost: Arc<AtomicU64>,
    entries: Arc<AtomicU64>,
    reader: Option<std::thread::JoinHandle<f64>>,
}

impl Drained {
    fn new(tag: &str, count_entries: bool, live: Option<Duration>) -> Result<Drained> {
        let path = PathBuf::from(format!(
            "/dev/shm/culprit-bench-{}-{tag}.pool",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        let cfg = PoolConfig {
            calibration: Duration::from_millis(5),
            ..Default::default()
        };
        let pool = Arc::new(Pool::create(&path, &cfg)?);
        let stop = Arc::new(AtomicBool::new(false));
        let (bytes, lost, entries) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
        );
        let (p, s, b, l, e) = (
            pool.clone(),
            stop.clone(),
            bytes.clone(),
            lost.clone(),
            entries.clone(),
        );
        let reader = std::thread::spawn(move || {
            let c = Consumer::new(&p);
            let mut sink = vec![0u8; p.data_size()];
            let mut lv = live.map(bench::live::Live::new);
            let mut take_all = |c: &Consumer, lv: &mut Option<bench::live::Live>| {
                let mut any = false;
                if let Some(l) = lv.as_mut() {
                    l.tick(&p);
                }
                while let Some(t) = c.take() {
                    any = true;
                    let d = t.data();
                    if let Some(l) = lv.as_mut() {
                        // What the live copies did not hold is what is left to save.
                        l.rest_len(t.info(), d);
                    }
                    sink[..d.len()].copy_from_slice(d);
                    b.fetch_add(d.len() as u64, Ordering::Relaxed);
                    l.fetch_add(t.info().lost_before, Ordering::Relaxed);
                    if count_entries {
                        e.fetch_add(Decoder::new(d).count() as u64, Ordering::Relaxed);
                    }
                    t.release();
                }
                any
            };
            loop {
                let any = take_all(&c, &mut lv);
                if s.load(Ordering::Relaxed) {
                    bufpool::salvage_dead(&p);
                    take_all(&c, &mut lv);
                    break;
                }
                if !any {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            thread_cpu_ns()
        });
        Ok(Drained {
            path,
            pool,
            stop,
            bytes,
            lost,
            entries,
            reader: Some(reader),
        })
    }

    /// Stops the reader after the traced processes are gone; (bytes, lost, entries,
    /// reader CPU ns).
    fn finish(mut self) -> (u64, u64, u64, f64) {
        self.stop.store(true, Ordering::Relaxed);
        let cpu = self
            .reader
            .take()
            .and_then(|r| r.join().ok())
            .unwrap_or(0.0);
        let unreported = self.pool.shared().lost_unreported.load(Ordering::Relaxed);
        let _ = std::fs::remove_file(&self.path);
        (
            self.bytes.load(Ordering::Relaxed),
            self.lost.load(Ordering::Relaxed) + unreported,
            self.entries.load(Ordering::Relaxed),
            cpu,
        )
    }
}

fn cc(dir: &Path, name: &str, src: &str, shared: bool) -> Result<PathBuf> {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src)?;
    let out = dir.join(if shared {
        format!("lib{name}.so")
    } else {
        name.to_string()
    });
    let mut cmd = Command::new("cc");
    cmd.arg("-O2");
    if shared {
        cmd.args(["-shared", "-fPIC"]);
    }
    let st = cmd.arg("-o").arg(&out).arg(&c).status()?;
    if !st.success() {
        bail!("cc {name} failed");
    }
    Ok(out)
}

/// One ping-pong run: ns per iteration by the loop's wall clock and by its own thread's
/// CPU clock, and the CPU (user + sys) of the whole process tree per iteration.
#[derive(Clone, Copy)]
struct Run {
    wall: f64,
    cpu: f64,
    tree_cpu: f64,
    /// CPU of the pool reader thread per iteration (libtrace.so runs; included in tree_cpu).
    reader: f64,
}

fn thread_cpu_ns() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

fn children_cpu_ns() -> f64 {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out pointer.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 * 1e9 + tv.tv_usec as f64 * 1e3;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// Runs the ping-pong program.
fn pingpong(prefix: &[&str], prog: &Path, n: u64, env: &[(&str, String)]) -> Result<Run> {
    let mut cmd = if prefix.is_empty() {
        Command::new(prog)
    } else {
        let mut c = Command::new(prefix[0]);
        c.args(&prefix[1..]).arg(prog);
        c
    };
    cmd.arg(n.to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let c0 = children_cpu_ns();
    let out = cmd
        .output()
        .with_context(|| format!("running {prefix:?} {}", prog.display()))?;
    let tree_cpu = (children_cpu_ns() - c0) / n as f64;
    if !out.status.success() {
        bail!(
            "{prefix:?} pingpong failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let s = String::from_utf8_lossy(&out.stdout);
    let v: Vec<f64> = s
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() != 2 {
        bail!("bad pingpong output {s:?}");
    }
    Ok(Run {
        wall: v[0],
        cpu: v[1],
        tree_cpu,
        reader: 0.0,
    })
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool} >/dev/null"))
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn hot_path(o: &Opts, prog: &Path, stub: &Path) -> Result<()> {
    let n: u64 = if o.quick { 200_000 } else { 3_000_000 };
    let (mut plain, mut traced) = (Vec::new(), Vec::new());
    let (mut tot_bytes, mut tot_lost) = (0u64, 0u64);
    for _ in 0..o.rounds {
        plain.push(pingpong(&[], prog, n, &[("LD_PRELOAD", stub.display().to_string())])?.cpu);
        let d = Drained::new("hot", false, o.live)?;
        let env = [
            (
                "LD_PRELOAD",
                format!("{} {}", o.lib.display(), stub.display()),
            ),
            (bufpool::POOL_ENV, d.path.display().to_string()),
        ];
        traced.push(pingpong(&[], prog, n, &env)?.cpu);
        let (b, l, _, _) = d.finish();
        tot_bytes += b;
        tot_lost += l;
    }
    let (p, pmin, pmax) = median(plain);
    let (t, tmin, tmax) = median(traced);
    println!(
        "### Hot path: send/recv loop on stub libc functions ({n} iterations, {} rounds; CPU time of the loop's thread)\n",
        o.rounds
    );
    println!("| run | CPU ns/iteration median | min | max | ns added per wrapped call |");
    println!("|---|---|---|---|---|");
    println!("| stub only | {p:.1} | {pmin:.1} | {pmax:.1} | — |");
    println!(
        "| libtrace.so + stub | {t:.1} | {tmin:.1} | {tmax:.1} | **{:.1}** |",
        (t - p) / 2.0
    );
    println!(
        "\nTrace volume: {:.1} bytes per wrapped call (LibEnter + LibExit); lost entries: {tot_lost}.\n",
        tot_bytes as f64 / (2 * n * o.rounds as u64) as f64
    );
    Ok(())
}

fn real_loop(o: &Opts, prog: &Path) -> Result<()> {
    let q = |n: u64| if o.quick { n / 10 } else { n };
    struct Cfg {
        name: &'static str,
        prefix: Vec<String>,
        n: u64,
        culprit: bool,
    }
    let udir = format!("/dev/shm/culprit-bench-uftrace-{}", std::process::id());
    let mut cfgs = vec![
        Cfg {
            name: "plain",
            prefix: vec![],
            n: q(300_000),
            culprit: false,
        },
        Cfg {
            name: "libtrace.so",
            prefix: vec![],
            n: q(300_000),
            culprit: true,
        },
    ];
    if have("strace") {
        cfgs.push(Cfg {
            name: "strace -f",
            prefix: ["strace", "-f", "-qq", "-o", "/dev/null"]
                .map(String::from)
                .to_vec(),
            n: q(20_000),
            culprit: false,
        });
    }
    if have("ltrace") {
        cfgs.push(Cfg {
            name: "ltrace",
            prefix: ["ltrace", "-o", "/dev/null"].map(String::from).to_vec(),
            n: q(5_000),
            culprit: false,
        });
    }
    if have("uftrace") {
        cfgs.push(Cfg {
            name: "uftrace record --force",
            prefix: vec![
                "uftrace".into(),
                "record".into(),
                "--force".into(),
                "-d".into(),
                udir.clone(),
            ],
            n: q(100_000),
            culprit: false,
        });
    }
    let mut res: BTreeMap<&str, Vec<Run>> = BTreeMap::new();
    let mut lost = 0u64;
    for _ in 0..o.rounds {
        for c in &cfgs {
            let prefix: Vec<&str> = c.prefix.iter().map(|s| s.as_str()).collect();
            let v = if c.culprit {
                let d = Drained::new("loop", false, o.live)?;
                let env = [
                    ("LD_PRELOAD", o.lib.display().to_string()),
                    (bufpool::POOL_ENV, d.path.display().to_string()),
                ];
                let mut v = pingpong(&prefix, prog, c.n, &env)?;
                let (_, l, _, reader_cpu) = d.finish();
                lost += l;
                // The reader's CPU is part of the cost.
                v.reader = reader_cpu / c.n as f64;
                v.tree_cpu += v.reader;
                v
            } else {
                let v = pingpong(&prefix, prog, c.n, &[])?;
                let _ = std::fs::remove_dir_all(&udir);
                v
            };
            res.entry(c.name).or_default().push(v);
        }
    }
    let col = |name: &str, f: fn(&Run) -> f64| median(res[name].iter().map(f).collect());
    let plain = col("plain", |r| r.tree_cpu).0;
    let ours = (col("libtrace.so", |r| r.tree_cpu).0 - plain) / 2.0;
    println!(
        "### send/recv loop on a UNIX datagram socketpair, real libc ({} rounds, interleaved)\n",
        o.rounds
    );
    println!(
        "CPU = user + sys of the whole process tree (tracer processes included; for libtrace.so \
         plus the reader thread), per iteration; wall = the loop's own clock.\n"
    );
    println!("| tool | iterations | CPU ns/iteration median (min–max) | of which pool reader | wall ns/iteration median | ns added per call (CPU) | vs libtrace.so |");
    println!("|---|---|---|---|---|---|---|");
    for c in &cfgs {
        let (m, lo, hi) = col(c.name, |r| r.tree_cpu);
        let wall = col(c.name, |r| r.wall).0;
        let reader = if c.culprit {
            format!("{:.0}", col(c.name, |r| r.reader).0)
        } else {
            "—".to_string()
        };
        let added = (m - plain) / 2.0;
        let (added_s, ratio) = if c.name == "plain" {
            ("—".to_string(), "—".to_string())
        } else if c.culprit {
            (format!("**{added:.0}**"), "1×".to_string())
        } else if ours > 0.0 {
            (format!("{added:.0}"), format!("{:.0}×", added / ours))
        } else {
            (format!("{added:.0}"), "n/a".to_string())
        };
        println!(
            "| {} | {} | {m:.0} ({lo:.0}–{hi:.0}) | {reader} | {wall:.0} | {added_s} | {ratio} |",
            c.name, c.n
        );
    }
    println!("\nlibtrace.so lost entries over all rounds: {lost}.\n");
    Ok(())
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// One redis-server + redis-benchmark run; returns (SET rps, GET rps).
/// One redis run: (SET rps, GET rps, redis-server CPU ns per request).
fn redis_once(o: &Opts, traced: Option<&Drained>, requests: u64) -> Result<(f64, f64, f64)> {
    let port = free_port()?;
    let dir = tempfile::tempdir()?;
    let mut srv = Command::new("redis-server");
    srv.args([
        "--port",
        &port.to_string(),
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
    ])
    .arg(dir.path())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if let Some(d) = traced {
        srv.env("LD_PRELOAD", &o.lib)
            .env(bufpool::POOL_ENV, &d.path);
    }
    let mut srv = srv.spawn().context("redis-server")?;
    let t0 = Instant::now();
    loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = srv.kill();
            bail!("redis-server did not start");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = Command::new("redis-benchmark")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-q",
            "--csv",
            "-t",
            "set,get",
            "-c",
            "50",
        ])
        .args(["-n", &requests.to_string()])
        .stderr(Stdio::null())
        .output()
        .context("redis-benchmark")?;
    // The server's CPU reaches RUSAGE_CHILDREN when it is reaped (redis-cli's few ms
    // are counted too, alike in both configurations).
    let c0 = children_cpu_ns();
    let _ = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "shutdown", "nosave"])
        .output();
    let t1 = Instant::now();
    while srv.try_wait()?.is_none() {
        if t1.elapsed() > Duration::from_secs(10) {
            let _ = srv.kill();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let server_cpu = (children_cpu_ns() - c0) / (2 * requests) as f64;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut rps = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(',').map(|s| s.trim_matches('"')).collect();
        if f.len() >= 2 {
            if let Ok(v) = f[1].parse::<f64>() {
                rps.insert(f[0].to_string(), v);
            }
        }
    }
    match (rps.get("SET"), rps.get("GET")) {
        (Some(s), Some(g)) => Ok((*s, *g, server_cpu)),
        _ => bail!("unexpected redis-benchmark output: {text}"),
    }
}

fn redis(o: &Opts) -> Result<()> {
    if !have("redis-server") || !have("redis-benchmark") {
        println!("(redis-server / redis-benchmark not installed: redis rows skipped)\n");
        return Ok(());
    }
    let requests = if o.quick { 20_000 } else { 200_000 };
    let (mut ps, mut pg, mut ts, mut tg) = (vec![], vec![], vec![], vec![]);
    let (mut pc, mut tc) = (vec![], vec![]);
    let (mut entries, mut lost, mut bytes) = (0u64, 0u64, 0u64);
    for round in 0..o.rounds {
        // Alternate which configuration goes first, so drift in the machine's load does
        // not favour one of them.
        for traced in [round % 2 == 1, round % 2 == 0] {
            if !traced {
                let (s, g, c) = redis_once(o, None, requests)?;
                ps.push(s);
                pg.push(g);
                pc.push(c);
                continue;
            }
            let d = Drained::new("redis", true, o.live)?;
            let (s, g, c) = redis_once(o, Some(&d), requests)?;
            ts.push(s);
            tg.push(g);
            tc.push(c);
            let (b, l, e, _) = d.finish();
            bytes += b;
            lost += l;
            entries += e;
        }
    }
    let rounds = ps.len();
    println!("### redis-benchmark -c 50 -n {requests} -t set,get against redis-server ({rounds} rounds, interleaved, order alternating)\n");
    println!(
        "redis-server serves requests on one thread: its CPU time per request (user + sys, \
         from wait4) is the load-independent measure of the tracer's cost, and for a server \
         its clients saturate, throughput changes by the inverse ratio. Requests/s are shown \
         too but depend on what else the machine runs.\n"
    );
    println!("| measure | plain median (min–max) | libtrace.so median (min–max) | change |");
    println!("|---|---|---|---|");
    let (pm, pl, ph) = median(pc);
    let (tm, tl, th) = median(tc);
    println!(
        "| redis-server CPU ns per request | {pm:.0} ({pl:.0}–{ph:.0}) | {tm:.0} ({tl:.0}–{th:.0}) | **{:+.1} %** (expected throughput change {:+.1} %) |",
        (tm - pm) / pm * 100.0,
        (pm / tm - 1.0) * 100.0
    );
    for (name, p, t) in [("SET", ps, ts), ("GET", pg, tg)] {
        let (pm, pl, ph) = median(p);
        let (tm, tl, th) = median(t);
        println!(
            "| {name} requests/s | {pm:.0} ({pl:.0}–{ph:.0}) | {tm:.0} ({tl:.0}–{th:.0}) | {:+.1} % |",
            (tm - pm) / pm * 100.0
        );
    }
    println!(
        "\nTraced redis-server, default pool (256 × 256 KiB), one reader thread: {entries} entries \
         ({:.1} MB) recorded over {rounds} runs, **{lost} lost**.\n",
        bytes as f64 / 1e6
    );
    Ok(())
}

fn main() -> Result<()> {
    let o = parse_args()?;
    let dir = tempfile::tempdir()?;
    let prog = cc(dir.path(), "pingpong", PINGPONG, false)?;
    let stub = cc(dir.path(), "stub", STUB, true)?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("## libtrace.so benchmark\n");
    println!(
        "Library: `{}`; load average at start: {}",
        o.lib.display(),
        load.trim()
    );
    println!();
    let want = |s: &str| o.only.as_deref().is_none_or(|x| x == s);
    if want("hot") {
        hot_path(&o, &prog, &stub)?;
    }
    if want("loop") {
        real_loop(&o, &prog)?;
    }
    if want("redis") {
        redis(&o)?;
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("Load average at end: {}", load.trim());
    Ok(())
}
