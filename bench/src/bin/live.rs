//! The live data path (issue 15): how long after an event is written it is visible in the
//! trace directory, and what the reader's live copies cost it in CPU — with the default
//! pool (256 × 256 KiB) and `culprit reader --live-interval` at its default (100 ms)
//! against `0` (whole sub-buffers only, what a reader did before).
//!
//! A real `culprit reader --create` drains the pool; this process writes into it through
//! `bufpool::WriterState` (as `libtrace.so` does) and watches the chunk files grow (read
//! incrementally every 2 ms, records parsed and decoded as they complete). Phases of
//! `--seconds` each:
//!
//! 1. **idle**: no writer — the reader's CPU per second (its polls find nothing);
//! 2. **slow**: one thread writes a probe entry every 10 ms (2 KB/s: a 256 KiB sub-buffer
//!    would take two minutes to fill) — latency from the write to the watcher seeing it
//!    (p50, p99, max; "never" = not visible before the phase ended);
//! 3. **busy**: the same probes plus a second thread writing 1 M entries/s (20 MB/s) —
//!    latency again, and the reader's CPU per second.
//!
//! The reader's CPU is its own (`/proc/PID/stat` utime + stime, 10 ms ticks), read at the
//! ends of each phase.
//!
//! ```text
//! cargo build --release -p cli -p bench
//! target/release/live [--seconds 10]
//! ```

use anyhow::{bail, Context, Result};
use bufpool::disk::{self, RECORD_FIXED_SIZE};
use bufpool::format::{encode_fn, Decoder, Kind};
use bufpool::{Pool, WriterState};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Callee of probe entries (their caller is the probe number).
const PROBE: u64 = 0xbeef;

fn culprit() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.parent().expect("exe dir").join("culprit")
}

/// utime + stime of process `pid`, in seconds.
fn cpu_s(pid: u32) -> Result<f64> {
    let st = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let rest = &st[st.rfind(')').context("stat")? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f[11].parse::<f64>()? + f[12].parse::<f64>()?;
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(ticks / hz)
}

/// Reads the chunk files of `dir` incrementally; reports each probe the first time it
/// appears.
struct Watcher {
    dir: PathBuf,
    files: HashMap<PathBuf, (Vec<u8>, usize)>,
}

impl Watcher {
    fn poll(&mut self, mut seen: impl FnMut(u64)) -> Result<()> {
        let cdir = self.dir.join(disk::CHUNK_DIR);
        let Ok(rd) = std::fs::read_dir(&cdir) else {
            return Ok(());
        };
        for e in rd {
            let p = e?.path();
            let (buf, parsed) = self.files.entry(p.clone()).or_default();
            let mut f = std::fs::File::open(&p)?;
            use std::io::{Read, Seek};
            f.seek(std::io::SeekFrom::Start(buf.len() as u64))?;
            f.read_to_end(buf)?;
            if *parsed == 0 {
                if buf.len() < disk::CHUNK_HEADER_SIZE {
                    continue;
                }
                *parsed = disk::CHUNK_HEADER_SIZE;
            }
            while buf.len() >= *parsed + RECORD_FIXED_SIZE {
                let left = (buf.len() - *parsed) as u64;
                let fixed = &buf[*parsed..*parsed + RECORD_FIXED_SIZE];
                let (h, _) = match disk::parse_record_fixed(fixed, *parsed as u64, left) {
                    Ok(x) => x,
                    Err(e) if matches!(e.kind, disk::ChunkErrorKind::Truncated { .. }) => break,
                    Err(e) => bail!("{}: {e}", p.display()),
                };
                let data = &buf[*parsed + RECORD_FIXED_SIZE..][..h.data_len as usize];
                for e in Decoder::new(data).map_while(|e| e.ok()) {
                    if e.kind == Kind::FnEnter && e.callee == PROBE {
                        seen(e.caller);
                    }
                }
                *parsed += RECORD_FIXED_SIZE + h.data_len as usize;
            }
        }
        Ok(())
    }
}

/// Percentile of sorted values.
fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

struct Phase {
    cpu_per_s: f64,
    lat_ms: Vec<f64>,
    never: usize,
}

/// One phase: `probes` (every 10 ms) and `filler` (1 M entries/s) writers for `secs`.
fn phase(
    pool: &Pool,
    reader: u32,
    w: &mut Watcher,
    first: u64,
    secs: f64,
    probes: bool,
    filler: bool,
) -> Result<Phase> {
    let stop = AtomicBool::new(false);
    let written: Mutex<Vec<(u64, Instant)>> = Mutex::new(Vec::new());
    let seen: Mutex<HashMap<u64, Instant>> = Mutex::new(HashMap::new());
    let c0 = cpu_s(reader)?;
    let t0 = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        if probes {
            s.spawn(|| {
                let mut wr = WriterState::for_this_thread(pool);
                let mut i = first;
                while !stop.load(Ordering::Relaxed) {
                    let e = encode_fn(Kind::FnEnter, bufpool::sys::rdtsc(), i, PROBE);
                    written.lock().unwrap().push((i, Instant::now()));
                    wr.append(pool, e.as_bytes());
                    i += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                // `wr` is not flushed: the thread ends holding a partly filled
                // sub-buffer (the repair pass salvages it once it sees the thread gone).
            });
        }
        if filler {
            s.spawn(|| {
                let mut wr = WriterState::for_this_thread(pool);
                let t = Instant::now();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // 1 M entries/s in batches of 1000 per ms.
                    for _ in 0..1000 {
                        wr.append_fn(pool, Kind::FnEnter, bufpool::sys::rdtsc(), n, 0x1000);
                        n += 1;
                    }
                    let due = Duration::from_micros(n);
                    if let Some(d) = due.checked_sub(t.elapsed()) {
                        std::thread::sleep(d);
                    }
                }
                wr.flush(pool, 0);
            });
        }
        while t0.elapsed().as_secs_f64() < secs {
            w.poll(|i| {
                seen.lock().unwrap().entry(i).or_insert_with(Instant::now);
            })?;
            std::thread::sleep(Duration::from_millis(2));
        }
        stop.store(true, Ordering::Relaxed);
        Ok(())
    })?;
    let cpu_per_s = (cpu_s(reader)? - c0) / t0.elapsed().as_secs_f64();
    let seen = seen.into_inner().unwrap();
    let mut lat_ms = Vec::new();
    let mut never = 0;
    for (i, at) in written.into_inner().unwrap() {
        match seen.get(&i) {
            Some(s) => lat_ms.push(s.duration_since(at).as_secs_f64() * 1e3),
            None => never += 1,
        }
    }
    lat_ms.sort_by(f64::total_cmp);
    Ok(Phase {
        cpu_per_s,
        lat_ms,
        never,
    })
}

fn run(live: &str, secs: f64, tmp: &Path) -> Result<()> {
    let pool_path = PathBuf::from(format!(
        "/dev/shm/culprit-bench-live-{}-{live}.pool",
        std::process::id()
    ));
    let dir = tmp.join(format!("trace-{live}"));
    let mut r: Child = Command::new(culprit())
        .args([
            "reader",
            "--create",
            "--keep-running",
            "--live-interval",
            live,
        ])
        .arg("--pool")
        .arg(&pool_path)
        .arg("-o")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("run culprit reader (cargo build --release -p cli)")?;
    let t = Instant::now();
    while !pool_path.exists() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    let pool = Pool::open(&pool_path)?;
    let mut w = Watcher {
        dir: dir.clone(),
        files: HashMap::new(),
    };
    let idle = phase(&pool, r.id(), &mut w, 0, secs, false, false)?;
    let slow = phase(&pool, r.id(), &mut w, 1 << 20, secs, true, false)?;
    let busy = phase(&pool, r.id(), &mut w, 2 << 20, secs, true, true)?;
    // SAFETY: kill has no memory effects; the pid is our child's.
    unsafe { libc::kill(r.id() as i32, libc::SIGINT) };
    r.wait()?;
    let _ = std::fs::remove_file(&pool_path);
    let row = |name: &str, p: &Phase| {
        let lat = if p.lat_ms.is_empty() {
            "never visible".to_string()
        } else {
            format!(
                "{:.0} / {:.0} / {:.0}",
                pct(&p.lat_ms, 0.5),
                pct(&p.lat_ms, 0.99),
                p.lat_ms.last().copied().unwrap_or(f64::NAN)
            )
        };
        println!(
            "| {live} | {name} | {lat} | {} of {} | {:.2} % |",
            p.never,
            p.never + p.lat_ms.len(),
            p.cpu_per_s * 100.0
        );
    };
    row("idle", &idle);
    row("slow (probes every 10 ms)", &slow);
    row("busy (+1 M entries/s)", &busy);
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args
        .iter()
        .position(|a| a == "--seconds")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(10.0);
    let tmp = tempfile::tempdir()?;
    println!("| --live-interval | phase | event → on disk, ms p50 / p99 / max | not visible by the phase's end | reader CPU (share of a core) |");
    println!("|---|---|---|---|---|");
    for live in ["100ms", "0"] {
        run(live, secs, tmp.path())?;
    }
    Ok(())
}
