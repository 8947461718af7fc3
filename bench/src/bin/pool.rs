//! Benchmark of the sub-buffer pool (issue 2): the cost of appending one entry next to
//! the floor measured in the same run (`rdtsc` + a 20-byte store into a pre-faulted
//! buffer), sustained writer → reader throughput into /dev/null and into a tmpfs file,
//! and the drop rate when the reader cannot keep up.
//!
//! `cargo run --release -p bench --bin pool [-- --rounds N]`
//!
//! Prints Markdown tables. Every figure is a median over rounds (min and max shown).

use bufpool::format::{encode_fn, encode_lib, Kind, LibFn, LibOpts};
use bufpool::{sys, Consumer, Pool, PoolConfig, WriterState};
use std::hint::black_box;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Median, min and max of a sample.
#[derive(Clone, Copy)]
struct Stat {
    med: f64,
    min: f64,
    max: f64,
}

fn stat(mut v: Vec<f64>) -> Stat {
    v.sort_by(|a, b| a.total_cmp(b));
    Stat {
        med: v[v.len() / 2],
        min: v[0],
        max: v[v.len() - 1],
    }
}

/// The floor: read the TSC and store a packed 20-byte record {tsc, fn, site} into a
/// pre-faulted buffer that wraps — what the anchors' `rdtsc + 20-byte store` hook does.
fn floor_ns(buf: &mut [u8], n: u64) -> f64 {
    let len = buf.len() - 20;
    let base = buf.as_mut_ptr();
    let mut off = 0usize;
    let t0 = Instant::now();
    for k in 0..n {
        let tsc = sys::rdtsc();
        // SAFETY: off + 20 <= buf.len() (wraps before the end).
        unsafe {
            let p = base.add(off);
            (p as *mut u64).write_unaligned((tsc << 8) | 1);
            (p.add(8) as *mut u64).write_unaligned(black_box(0x40_1000 + k));
            (p.add(16) as *mut u32).write_unaligned(0x40_2000);
        }
        off += 20;
        if off > len {
            off = 0;
        }
    }
    let dt = t0.elapsed().as_nanos() as f64;
    black_box(&buf[..64]);
    dt / n as f64
}

/// Culprit: read the TSC, encode a 20-byte `FnEnter` and append it (what a C hook does).
fn append_ns(pool: &Pool, w: &mut WriterState, n: u64) -> f64 {
    let t0 = Instant::now();
    for k in 0..n {
        let e = encode_fn(
            Kind::FnEnter,
            sys::rdtsc(),
            0x40_1000,
            black_box(0x40_2000 + k),
        );
        w.append(pool, e.as_bytes());
    }
    t0.elapsed().as_nanos() as f64 / n as f64
}

/// Culprit, in-place variant: read the TSC and let the writer encode the 20-byte
/// `FnEnter` straight into the sub-buffer (`WriterState::append_fn`).
fn append_fn_ns(pool: &Pool, w: &mut WriterState, n: u64) -> f64 {
    let t0 = Instant::now();
    for k in 0..n {
        w.append_fn(
            pool,
            Kind::FnEnter,
            sys::rdtsc(),
            0x40_1000,
            black_box(0x40_2000 + k),
        );
    }
    t0.elapsed().as_nanos() as f64 / n as f64
}

/// Takes and releases every written sub-buffer (no copy).
fn discard_all(pool: &Pool) {
    let c = Consumer::new(pool);
    while let Some(t) = c.take() {
        t.release();
    }
}

fn attach(pool: &Pool) -> WriterState {
    let me = pool.holder();
    let mut w = WriterState::new();
    w.attach(
        pool,
        me.pid,
        sys::proc_stat(me.pid).map_or(0, |s| s.2),
        sys::gettid(),
    );
    w
}

struct PipeResult {
    entries_per_s: f64,
    gb_per_s: f64,
    produced: u64,
    lost: u64,
    /// Entries the reader decoded (only when asked to count).
    seen: u64,
    /// Sum of the `Lost` markers the reader decoded, plus the pool's unreported drops.
    seen_lost: u64,
}

/// How a pipeline run is set up.
struct PipeOpts<'a> {
    /// The encoded entry the writer appends over and over.
    entry: &'a [u8],
    /// Re-stamp the entry with `rdtsc` before each append.
    stamp: bool,
    /// How long the writer runs.
    dur: Duration,
    /// The reader sleeps this long after each sub-buffer (to overload it).
    reader_pause: Duration,
    /// The reader decodes and counts the entries (and `Lost` markers).
    count: bool,
    /// Pace the writer to this many bytes per second (as fast as it can if `None`).
    rate: Option<f64>,
}

/// One writer thread appending `o.entry` for `o.dur` while one reader thread writes
/// every sub-buffer it takes into `sink`.
fn pipeline(pool: &Pool, o: &PipeOpts<'_>, sink: &mut std::fs::File) -> PipeResult {
    let PipeOpts {
        entry,
        stamp,
        dur,
        reader_pause,
        count,
        rate,
    } = *o;
    discard_all(pool);
    let stop = AtomicBool::new(false);
    let saved_bytes = AtomicU64::new(0);
    let seen = AtomicU64::new(0);
    let seen_lost = AtomicU64::new(0);
    let (produced, lost, recorded_bytes, elapsed) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let c = Consumer::new(pool);
            loop {
                match c.take() {
                    Some(t) => {
                        sink.write_all(t.data()).expect("sink write");
                        if count {
                            for e in bufpool::format::Decoder::new(t.data()) {
                                let e = e.expect("valid entries");
                                if e.kind == Kind::Lost {
                                    seen_lost.fetch_add(e.lost, Ordering::Relaxed);
                                } else {
                                    seen.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                        saved_bytes.fetch_add(t.data().len() as u64, Ordering::Relaxed);
                        t.release();
                        if !reader_pause.is_zero() {
                            std::thread::sleep(reader_pause);
                        }
                    }
                    None => {
                        if stop.load(Ordering::Acquire) {
                            return;
                        }
                        std::thread::yield_now();
                    }
                }
            }
        });
        let mut w = attach(pool);
        let mut e = [0u8; 148];
        e[..entry.len()].copy_from_slice(entry);
        let n = entry.len();
        let t0 = Instant::now();
        let mut produced = 0u64;
        while t0.elapsed() < dur {
            for _ in 0..4096 {
                if stamp {
                    let head = (sys::rdtsc() << 8) | e[0] as u64;
                    e[..8].copy_from_slice(&head.to_le_bytes());
                }
                w.append(pool, &e[..n]);
            }
            produced += 4096;
            if let Some(bytes_per_s) = rate {
                // Paced writer: wait until the wall clock catches up with the bytes sent.
                let due = Duration::from_secs_f64((produced * n as u64) as f64 / bytes_per_s);
                while t0.elapsed() < due {
                    std::hint::spin_loop();
                }
            }
        }
        w.flush(pool, 0);
        stop.store(true, Ordering::Release);
        reader.join().expect("reader thread");
        let elapsed = t0.elapsed();
        let lost = w.lost_total;
        (produced, lost, saved_bytes.load(Ordering::Relaxed), elapsed)
    });
    let unreported = pool.shared().lost_unreported.swap(0, Ordering::Relaxed);
    let secs = elapsed.as_secs_f64();
    let recorded = produced - lost;
    PipeResult {
        entries_per_s: recorded as f64 / secs,
        gb_per_s: recorded_bytes as f64 / secs / 1e9,
        produced,
        lost,
        seen: seen.load(Ordering::Relaxed),
        seen_lost: seen_lost.load(Ordering::Relaxed) + unreported,
    }
}

fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(7);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("# pool benchmark\n");
    println!(
        "`cargo run --release -p bench --bin pool -- --rounds {rounds}`; load average at start: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );

    // ---- append cost vs floor -----------------------------------------------------
    let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir())?;
    let n_per = 2_000_000u64;
    let cfg = PoolConfig {
        n_subbufs: 512,
        subbuf_size: 256 * 1024,
        ..Default::default()
    };
    let pool = Pool::create(dir.path().join("append"), &cfg)?;
    let mut floor_buf = vec![1u8; 64 << 20]; // touched: pre-faulted
    let mut floor_buf2 = vec![1u8; 64 << 20];
    let (mut f1, mut a1, mut f2, mut a2) = (vec![], vec![], vec![], vec![]);
    let (mut p1, mut p2) = (vec![], vec![]);
    for _ in 0..rounds {
        f1.push(floor_ns(&mut floor_buf, n_per));
        discard_all(&pool);
        let mut w = attach(&pool);
        a1.push(append_ns(&pool, &mut w, n_per));
        w.flush(&pool, 0);
        discard_all(&pool);
        let mut w = attach(&pool);
        p1.push(append_fn_ns(&pool, &mut w, n_per));
        w.flush(&pool, 0);
        discard_all(&pool);
        // Two threads at once, each measured on its own.
        let (fa, fb) = std::thread::scope(|s| {
            let h = s.spawn(|| floor_ns(&mut floor_buf2, n_per));
            let a = floor_ns(&mut floor_buf, n_per);
            (a, h.join().expect("floor thread"))
        });
        f2.extend([fa, fb]);
        let (xa, xb) = std::thread::scope(|s| {
            let h = s.spawn(|| {
                let mut w = attach(&pool);
                let r = append_ns(&pool, &mut w, n_per);
                w.flush(&pool, 0);
                r
            });
            let mut w = attach(&pool);
            let r = append_ns(&pool, &mut w, n_per);
            w.flush(&pool, 0);
            (r, h.join().expect("append thread"))
        });
        a2.extend([xa, xb]);
        discard_all(&pool);
        let (xa, xb) = std::thread::scope(|s| {
            let h = s.spawn(|| {
                let mut w = attach(&pool);
                let r = append_fn_ns(&pool, &mut w, n_per);
                w.flush(&pool, 0);
                r
            });
            let mut w = attach(&pool);
            let r = append_fn_ns(&pool, &mut w, n_per);
            w.flush(&pool, 0);
            (r, h.join().expect("append thread"))
        });
        p2.extend([xa, xb]);
        discard_all(&pool);
    }
    let (f1, a1, f2, a2) = (stat(f1), stat(a1), stat(f2), stat(a2));
    let (p1, p2) = (stat(p1), stat(p2));
    println!("\n## Append cost (20-byte FnEnter entry incl. rdtsc + encode), {n_per} entries per thread per round, {rounds} rounds\n");
    println!("| case | floor ns/ev med (min–max) | culprit ns/ev med (min–max) | ratio med | ratio min/min |");
    println!("|---|---|---|---|---|");
    for (name, f, a) in [
        ("`append(encode_fn(..))`, 1 thread", f1, a1),
        ("`append(encode_fn(..))`, each of 2 threads", f2, a2),
        ("`append_fn(..)` (in place), 1 thread", f1, p1),
        ("`append_fn(..)` (in place), each of 2 threads", f2, p2),
    ] {
        println!(
            "| {name} | {:.1} ({:.1}–{:.1}) | {:.1} ({:.1}–{:.1}) | {:.2}× | {:.2}× |",
            f.med,
            f.min,
            f.max,
            a.med,
            a.min,
            a.max,
            a.med / f.med,
            a.min / f.min
        );
    }
    drop(pool);

    // ---- sustained pipeline -------------------------------------------------------
    let pool = Pool::create(dir.path().join("pipe"), &PoolConfig::default())?;
    let fn_entry = encode_fn(Kind::FnEnter, 0, 0x40_1000, 0x40_2000);
    let mut o = LibOpts {
        fd: Some(5),
        ret: Some(4096),
        len: Some(4096),
        ..Default::default()
    };
    o.set_str(&[b'p'; 96]);
    let big = encode_lib(Kind::LibExit, 0, 0x40_1000, LibFn::Recv, &o);
    let dur = Duration::from_millis(1500);
    println!("\n## Sustained writer → reader (1 writer thread, 1 reader thread, pool 256 × 256 KiB), {:.1} s per round\n", dur.as_secs_f64());
    println!(
        "| entries | sink | recorded entries/s med | GB/s med (min–max) | drops (all rounds) |"
    );
    println!("|---|---|---|---|---|");
    let tmpfs_path = dir.path().join("sink");
    for (label, e, stamp) in [
        ("20 B FnEnter, rdtsc each", fn_entry.as_bytes(), true),
        (
            "148 B LibExit (largest entry), rdtsc each",
            big.as_bytes(),
            true,
        ),
    ] {
        for sink_name in ["/dev/null", "tmpfs file"] {
            let (mut eps, mut gbs, mut drops, mut prod) = (vec![], vec![], 0u64, 0u64);
            for _ in 0..rounds.min(5) {
                let mut sink = if sink_name == "/dev/null" {
                    std::fs::OpenOptions::new().write(true).open("/dev/null")?
                } else {
                    std::fs::File::create(&tmpfs_path)?
                };
                let o = PipeOpts {
                    entry: e,
                    stamp,
                    dur,
                    reader_pause: Duration::ZERO,
                    count: false,
                    rate: None,
                };
                let r = pipeline(&pool, &o, &mut sink);
                eps.push(r.entries_per_s);
                gbs.push(r.gb_per_s);
                drops += r.lost;
                prod += r.produced;
                drop(sink);
                let _ = std::fs::remove_file(&tmpfs_path);
            }
            let (eps, gbs) = (stat(eps), stat(gbs));
            println!(
                "| {label} ({} B) | {sink_name} | {:.1} M | {:.2} ({:.2}–{:.2}) | {drops} of {prod} ({:.3} %) |",
                e.len(),
                eps.med / 1e6,
                gbs.med,
                gbs.min,
                gbs.max,
                100.0 * drops as f64 / prod as f64
            );
        }
    }

    // The goal: one reader keeps up with one writer producing ≥ 1 GB/s, into tmpfs.
    for gbps in [1.0, 1.25] {
        let (mut got, mut drops, mut prod) = (vec![], 0u64, 0u64);
        for _ in 0..rounds.min(5) {
            let mut sink = std::fs::File::create(&tmpfs_path)?;
            let o = PipeOpts {
                entry: big.as_bytes(),
                stamp: true,
                dur,
                reader_pause: Duration::ZERO,
                count: false,
                rate: Some(gbps * 1e9),
            };
            let r = pipeline(&pool, &o, &mut sink);
            got.push(r.gb_per_s);
            drops += r.lost;
            prod += r.produced;
            drop(sink);
            let _ = std::fs::remove_file(&tmpfs_path);
        }
        let g = stat(got);
        println!(
            "| {} B LibExit, writer paced at {gbps:.2} GB/s | tmpfs file | – | {:.2} ({:.2}–{:.2}) | {drops} of {prod} ({:.3} %) |",
            big.as_bytes().len(),
            g.med,
            g.min,
            g.max,
            100.0 * drops as f64 / prod as f64
        );
    }

    // The sink's own speed, without the pool: write(2) of 256 KiB chunks for as long.
    let chunk = vec![0x5au8; 256 * 1024 - 64];
    for sink_name in ["/dev/null", "tmpfs file"] {
        let mut gbs = vec![];
        for _ in 0..rounds.min(5) {
            let mut sink = if sink_name == "/dev/null" {
                std::fs::OpenOptions::new().write(true).open("/dev/null")?
            } else {
                std::fs::File::create(&tmpfs_path)?
            };
            let t0 = Instant::now();
            let mut bytes = 0u64;
            while t0.elapsed() < dur {
                sink.write_all(&chunk)?;
                bytes += chunk.len() as u64;
            }
            gbs.push(bytes as f64 / t0.elapsed().as_secs_f64() / 1e9);
            drop(sink);
            let _ = std::fs::remove_file(&tmpfs_path);
        }
        let g = stat(gbs);
        println!(
            "| floor: write(2) of 256 KiB chunks, no pool | {sink_name} | – | {:.2} ({:.2}–{:.2}) | – |",
            g.med, g.min, g.max
        );
    }

    // ---- overload -----------------------------------------------------------------
    println!("\n## Overload: the reader sleeps 2 ms per 256 KiB sub-buffer (≤ 0.13 GB/s), 20 B entries\n");
    println!("| produced | recorded | lost | drop rate | recorded + lost = produced |");
    println!("|---|---|---|---|---|");
    let mut sink = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    let o = PipeOpts {
        entry: fn_entry.as_bytes(),
        stamp: true,
        dur,
        reader_pause: Duration::from_millis(2),
        count: true,
        rate: None,
    };
    let r = pipeline(&pool, &o, &mut sink);
    // What reached the reader (decoded) against what the writer produced.
    println!(
        "| {} | {} | {} | {:.1} % | {} |",
        r.produced,
        r.seen,
        r.seen_lost,
        100.0 * r.seen_lost as f64 / r.produced as f64,
        if r.seen + r.seen_lost == r.produced && r.seen_lost == r.lost {
            "yes (decoded by the reader)"
        } else {
            "**NO**"
        }
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "\nload average at end: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    Ok(())
}
