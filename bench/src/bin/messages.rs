//! Messages benchmark: stream matching + Lamport clocks throughput on top of decoding
//! (trace entries per CPU-second, one thread), and `culprit export` of a large trace
//! (wall time, peak RSS) to Perfetto and Chrome JSON.
//!
//! `cargo run --release -p bench --bin messages [-- --entries 10000000 --processes 8 --runs 5 [--culprit target/release/culprit] [--baseline OTHER/culprit] [--keep DIR]]`
//!
//! Each `culprit` command is run under `/usr/bin/time` (its own peak RSS; with
//! `--baseline`, the other build's run comes just before each of ours).
//!
//! The trace is a ring of event-driven daemons written to a trace directory on disk: per
//! message and process, `select` (ready set), a header `recv`, a body `recv` (split at a
//! random point, so receives and sends do not line up), a forwarding `send`, and four C
//! function calls around them — 16 entries, 40 % of them library calls. Matching is
//! measured as (decode + messages stage) − (decode alone), both single-threaded, the run
//! with the least CPU time of `--runs`.

use analyzer::decode::{write_trace_dir, CallKind, Event, LibEvent, TraceBuilder, TraceSet, Visit};
use bufpool::format::{Addr, LibFn, LibOpts, ReadyItem, ReadySet};
use std::path::Path;
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn cpu_secs() -> f64 {
    // SAFETY: getrusage writes into the struct we pass and nothing else.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn addr(port: u16, last: u8) -> Addr {
    Addr::new(2, port, &[10, 0, 0, last])
}

/// Writes the ring; returns the number of entries.
fn generate(dir: &Path, procs: usize, entries: u64) -> anyhow::Result<u64> {
    let per_msg = 16u64;
    let iters = (entries / per_msg / procs as u64).max(1);
    let mut bs: Vec<TraceBuilder> = (0..procs)
        .map(|i| {
            TraceBuilder::new("bench", 1000 + i as u32, 1000 + i as u32).chunk_size(256 * 1024)
        })
        .collect();
    let o = |fd: i32, len: u64, ret: i64| LibOpts {
        fd: Some(fd),
        len: Some(len),
        ret: Some(ret),
        ..Default::default()
    };
    let at = |b: &mut TraceBuilder, t: u64| {
        let now = b.now();
        if t > now {
            b.wait(t - now);
        }
    };
    // Setup: i connects to i+1 (fd 4), accepts i−1 (fd 5).
    for (i, b) in bs.iter_mut().enumerate() {
        let right = (i + 1) % procs;
        at(b, 2_000_000);
        b.lib(
            0x10,
            LibFn::Connect,
            LibOpts {
                fd: Some(4),
                ret: Some(0),
                local: Some(addr(40000 + i as u16, i as u8 + 1)),
                peer: Some(addr(7000, right as u8 + 1)),
                ..Default::default()
            },
        );
    }
    for (i, b) in bs.iter_mut().enumerate() {
        let left = (i + procs - 1) % procs;
        at(b, 3_000_000);
        b.lib(
            0x20,
            LibFn::Accept,
            LibOpts {
                fd: Some(3),
                ret: Some(5),
                local: Some(addr(7000, i as u8 + 1)),
                peer: Some(addr(40000 + left as u16, left as u8 + 1)),
                ..Default::default()
            },
        );
    }
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut written = 0u64;
    for k in 0..iters {
        let body = 100 + rnd() % 400;
        let split = 1 + rnd() % (body - 1);
        for (i, b) in bs.iter_mut().enumerate() {
            let t = 10_000_000 + k * 40_000 + i as u64 * 2_000;
            at(b, t);
            if i == 0 {
                // Node 0 starts a round with the message it read at the end of the last one.
                b.lib(0x230, LibFn::Send, o(4, 8 + body, 8 + body as i64));
                at(b, t + (procs as u64 + 1) * 2_000);
            }
            b.enter(0x100, 0x1300);
            let mut r = ReadySet::default();
            r.push(ReadyItem { id: 5, events: 1 });
            b.lib(
                0x200,
                LibFn::Select,
                LibOpts {
                    ret: Some(1),
                    ready: Some(r),
                    ..Default::default()
                },
            );
            b.enter(0x110, 0x1400);
            b.lib(0x210, LibFn::Recv, o(5, 8 + split, 8 + split as i64));
            b.lib(
                0x220,
                LibFn::Recv,
                o(5, body - split, (body - split) as i64),
            );
            b.exit(0x1400);
            b.enter(0x120, 0x1500);
            b.exit(0x1500);
            b.enter(0x130, 0x1600);
            if i != 0 {
                b.lib(0x230, LibFn::Send, o(4, 8 + body, 8 + body as i64));
            }
            b.exit(0x1600);
            b.exit(0x1300);
            written += per_msg;
        }
    }
    let ps: Vec<_> = bs.into_iter().map(|b| b.finish()).collect();
    write_trace_dir(dir, "bench", &ps)?;
    Ok(written + 2 * 2 * procs as u64)
}

/// Decodes everything, touching each event (the floor the stage is measured on top of).
struct Count(u64);

impl Visit for Count {
    fn call(&mut self, tsc: u64, _: CallKind, _: u64, _: u64) {
        self.0 = self.0.wrapping_add(tsc);
    }
    fn ret(&mut self, tsc: u64, _: CallKind, _: u64) {
        self.0 = self.0.wrapping_add(tsc);
    }
    fn lib(&mut self, l: &mut LibEvent) {
        self.0 = self.0.wrapping_add(l.tsc ^ l.opts.ret.unwrap_or(0) as u64);
    }
    fn other(&mut self, e: Event) {
        self.0 = self.0.wrapping_add(e.tsc());
    }
}

fn decode_only(set: &TraceSet) -> anyhow::Result<u64> {
    let mut c = Count(0);
    let mut n = 0;
    for p in &set.processes {
        for t in &p.threads {
            n += t.visit(&mut c)?.entries;
        }
    }
    std::hint::black_box(c.0);
    Ok(n)
}

/// Runs a command under `/usr/bin/time` (so that its peak RSS is its own: a child forked
/// from this process would start with this process's high-water mark, which Linux keeps
/// across `exec`); returns (wall s, CPU s, peak RSS MB, ok).
fn child(cmd: &std::process::Command) -> (f64, f64, f64, bool) {
    let Ok(out) = tempfile::NamedTempFile::new() else {
        return (0.0, 0.0, 0.0, false);
    };
    let mut c = std::process::Command::new("/usr/bin/time");
    c.arg("-f")
        .arg("%e %U %S %M")
        .arg("-o")
        .arg(out.path())
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let ok = c.status().is_ok_and(|s| s.success());
    let text = std::fs::read_to_string(out.path()).unwrap_or_default();
    let v: Vec<f64> = text
        .lines()
        .last()
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    match v[..] {
        [wall, user, sys, kb] => (wall, user + sys, kb / 1024.0, ok),
        _ => (0.0, 0.0, 0.0, false),
    }
}

fn main() -> anyhow::Result<()> {
    let entries: u64 = arg("--entries", 10_000_000);
    let procs: usize = arg("--processes", 8);
    let runs: usize = arg("--runs", 5);
    let culprit: String = arg("--culprit", "target/release/culprit".to_string());
    // Another build of `culprit` to measure the exports with, each run just before ours.
    let baseline: Option<String> = arg("--baseline", String::new()).into();
    let baseline = baseline.filter(|b| !b.is_empty());
    // Keep the generated trace there (for `/usr/bin/time -v culprit export DIR …`).
    let keep: String = arg("--keep", String::new());
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build_global()
        .ok();
    let tmp = tempfile::tempdir()?;
    let dir = if keep.is_empty() {
        tmp.path().join("trace")
    } else {
        std::path::PathBuf::from(&keep)
    };
    let t = Instant::now();
    let n = generate(&dir, procs, entries)?;
    let bytes: u64 = std::fs::read_dir(dir.join("chunks"))?
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    println!(
        "trace: {procs} processes, {n} entries, {:.1} MB on disk (generated in {:.1} s)",
        bytes as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    let dirs = vec![dir.clone()];
    let (mut best_dec, mut best_all) = (f64::MAX, f64::MAX);
    let mut summary = None;
    for _ in 0..runs {
        let set = TraceSet::open(&dirs)?;
        let c0 = cpu_secs();
        let got = decode_only(&set)?;
        let c1 = cpu_secs();
        let set = TraceSet::open(&dirs)?;
        let c2 = cpu_secs();
        let m = analyzer::messages::analyze(&set)?;
        let c3 = cpu_secs();
        best_dec = best_dec.min(c1 - c0);
        best_all = best_all.min(c3 - c2);
        assert_eq!(got, m.entries);
        let s = analyzer::messages::summary::summarize(&m);
        summary = Some((
            s.totals.matched_bytes,
            s.totals.unmatched_bytes,
            s.totals.messages,
            s.violations,
        ));
    }
    let (matched, unmatched, msgs, viol) = summary.unwrap_or_default();
    let extra = (best_all - best_dec).max(1e-9);
    println!("matched {matched} bytes, unmatched {unmatched}, {msgs} messages, {viol} violations");
    println!(
        "decode alone:            {:.3} CPU s  = {:.1} M entries/s",
        best_dec,
        n as f64 / best_dec / 1e6
    );
    println!(
        "decode + messages stage: {:.3} CPU s  = {:.1} M entries/s",
        best_all,
        n as f64 / best_all / 1e6
    );
    println!(
        "matching + Lamport on top of decoding: {:.3} CPU s = {:.1} M entries/s per core",
        extra,
        n as f64 / extra / 1e6
    );
    if Path::new(&culprit).exists() {
        let (wall, cpu, rss, ok) = child(
            std::process::Command::new(&culprit)
                .arg("messages")
                .arg(&dir)
                .arg("--json"),
        );
        println!(
            "culprit messages --json (the stage alone, 2 threads): {wall:.2} s wall, {cpu:.2} CPU s, peak RSS {rss:.0} MB{}",
            if ok { "" } else { " (FAILED)" }
        );
        let mut bins = vec![("", culprit.clone())];
        if let Some(b) = &baseline {
            bins.insert(0, (" [baseline]", b.clone()));
        }
        for (fmt, extra_args) in [
            ("perfetto", vec!["--no-units"]),
            ("perfetto", vec![]),
            ("chrome", vec!["--no-units"]),
        ] {
            for (label, bin) in &bins {
                let out = tmp.path().join(format!("out.{fmt}"));
                let (wall, cpu, rss, ok) = child(
                    std::process::Command::new(bin)
                        .arg("export")
                        .arg(&dir)
                        .args(["--format", fmt, "-o"])
                        .arg(&out)
                        .args(&extra_args),
                );
                let size = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
                println!(
                    "culprit export --format {fmt} {}{label}: {wall:.2} s wall, {cpu:.2} CPU s, peak RSS {rss:.0} MB, {:.0} MB written{}",
                    extra_args.join(" "),
                    size as f64 / 1e6,
                    if ok { "" } else { " (FAILED)" }
                );
                let _ = std::fs::remove_file(&out);
            }
        }
    } else {
        println!("(no {culprit}: export not measured; build with cargo build --release -p cli)");
    }
    Ok(())
}
