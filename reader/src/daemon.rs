//! The reader daemon: drain threads that save written sub-buffers to chunk files, a
//! periodic repair pass, and the final drain.
//!
//! ```text
//!  main thread: every `salvage_interval`: salvage_dead; check stop conditions;
//!               every `live_interval`: save the new committed prefix of each
//!               sub-buffer writers still fill to chunks/<pid>-<workers+1>-<t>.chunk
//!  worker k:    loop { take → append (the rest of) it to chunks/<pid>-k-<t>.chunk
//!                      → release }
//!  on stop:     workers drain until the pool has nothing written, exit;
//!               main: { salvage_dead; drain } until a pass finds nothing;
//!               save the prefixes of what live writers still hold;
//!               index the directory, write the final manifest
//! ```
//!
//! The live copies ([`crate::live`]) are what make entries reach the directory within
//! about `live_interval` of being written, whatever the sub-buffer size.
//!
//! A sub-buffer is released only after its record was written: a reader killed at any
//! point loses nothing (the repair pass of the next reader requeues what it held), and
//! at worst saves a sub-buffer twice, which [`crate::TraceDir`] deduplicates. When a write
//! fails (disk full, directory removed), the sub-buffer is requeued, the reader stops
//! and says how many sub-buffers it left in the pool.

use crate::chunkfile::{repair, ChunkWriter, Repaired};
use crate::error::{Error, Result};
use crate::keep::{KeepOptions, Keeper};
use crate::live::LiveSaved;
use crate::manifest::Manifest;
use crate::summary::{summarize, Summary};
use crate::tracedir::TraceDir;
use bufpool::{Consumer, Pool, SalvageReport, State};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How a reader runs. Defaults: 2 drain threads, repair pass every 100 ms, 2 ms idle
/// sleep, stop only when asked.
#[derive(Clone, Debug)]
pub struct ReaderOptions {
    /// Drain threads.
    pub workers: usize,
    /// Interval of the repair pass (and of the stop checks).
    pub salvage_interval: Duration,
    /// How long a drain thread sleeps when the pool has nothing written.
    pub idle_sleep: Duration,
    /// The recorded command, for the manifest.
    pub command: Vec<String>,
    /// Also stop once a writer attached and no other process maps the pool any more.
    pub stop_when_unmapped: bool,
    /// Sample the traced processes' CPU time into `cpu.tsv` this often (`None`: never);
    /// see [`crate::cpustat`].
    pub cpu_sample_interval: Option<Duration>,
    /// Save the committed prefix of sub-buffers writers still fill this often (`None`:
    /// only whole sub-buffers, when their writers hand them over); see [`crate::live`].
    pub live_interval: Option<Duration>,
    /// The flight recorder's budgets (`--keep`, `--keep-for`); see [`crate::keep`].
    pub keep: KeepOptions,
    /// Freeze a snapshot of the directory when the reader gets `SIGUSR1` (into
    /// `DIR.snapshot-<unix seconds>`); see [`crate::snapshot::snapshot`].
    pub snapshot_on_usr1: bool,
}

/// The default [`ReaderOptions::live_interval`]: 100 ms.
pub const DEFAULT_LIVE_INTERVAL: Duration = Duration::from_millis(100);

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            workers: 2,
            salvage_interval: Duration::from_millis(100),
            idle_sleep: Duration::from_millis(2),
            command: Vec::new(),
            stop_when_unmapped: false,
            cpu_sample_interval: Some(Duration::from_millis(250)),
            live_interval: Some(DEFAULT_LIVE_INTERVAL),
            keep: KeepOptions::default(),
            snapshot_on_usr1: false,
        }
    }
}

/// What a reader run did.
#[derive(Clone, Debug)]
pub struct ReaderReport {
    /// Sub-buffers saved by this run (whole, or their last piece).
    pub saved: u64,
    /// Pieces of sub-buffers saved while their writers still filled them.
    pub live_pieces: u64,
    /// Sum of the repair passes.
    pub salvage: SalvageReport,
    /// Torn chunk tails cut at start (a previous reader was killed mid-write).
    pub repaired: Vec<Repaired>,
    /// Sub-buffers still held by live writers when the reader stopped.
    pub left_owned: usize,
    /// Contents of the whole directory (what the manifest says).
    pub summary: Summary,
    /// The final manifest.
    pub manifest: Manifest,
}

fn now_ns() -> u64 {
    bufpool::sys::clock_ns(libc::CLOCK_REALTIME)
}

fn add(a: &mut SalvageReport, b: SalvageReport) {
    a.published += b.published;
    a.freed += b.freed;
    a.requeued += b.requeued;
}

/// Prepares `dir` for a reader: creates it, cuts torn chunk tails, and writes the
/// initial manifest (keeping the start time and command of an earlier run).
pub fn prepare_dir(
    pool: &Pool,
    dir: &Path,
    command: &[String],
) -> Result<(Manifest, Vec<Repaired>)> {
    // Created private, or checked that no other user controls it (planted links).
    crate::safefile::private_dir(dir)?;
    let repaired = repair(dir)?;
    let mut m = Manifest::for_pool(pool, command.to_vec(), now_ns());
    if let Ok(old) = Manifest::read(dir) {
        m.start_unix_ns = old.start_unix_ns.min(m.start_unix_ns);
        if m.command.is_empty() {
            m.command = old.command;
        }
        // An earlier reader of this boot read the same TSC: its snapshots still hold.
        if old.boot_id == m.boot_id {
            m.clock_snapshots = old.clock_snapshots;
        }
    }
    m.clock_snapshots.push(crate::clocksnap::take());
    m.write(dir)?;
    Ok((m, repaired))
}

/// Runs a reader on `pool`, saving to `dir`, until `stop` is set (or, with
/// [`ReaderOptions::stop_when_unmapped`], until the traced processes are gone); then
/// drains everything, indexes the directory and writes the final manifest.
pub fn run(
    pool: &Pool,
    dir: &Path,
    opts: &ReaderOptions,
    stop: &AtomicBool,
) -> Result<ReaderReport> {
    let (mut manifest, repaired) = prepare_dir(pool, dir, &opts.command)?;
    let mut snapshots = Vec::new();
    // What a previous reader of this directory saved of sub-buffers still being filled.
    let live = LiveSaved::from_dir(dir)?;
    let live = &live;
    let mut live_out: Option<ChunkWriter> = None;
    let mut live_buf = Vec::new();
    let mut live_pieces = 0u64;
    let pid = std::process::id();
    let t0 = now_ns();
    let workers = opts.workers.max(1);
    // Writers: drain threads 0..workers, the final drain `workers`, the live copier
    // `workers + 1`, the flight recorder's carried and kept records the two after.
    let keeper = if opts.keep.active() {
        Some(Keeper::new(dir, opts.keep, pid, workers as u32 + 2)?)
    } else {
        None
    };
    let keeper = keeper.as_ref();
    let finishing = AtomicBool::new(false);
    let failed: Mutex<Option<Error>> = Mutex::new(None);
    let saved = AtomicU64::new(0);
    let mut salvage = SalvageReport::default();
    std::thread::scope(|s| {
        let mut started = 0;
        for k in 0..workers {
            let (finishing, failed, saved) = (&finishing, &failed, &saved);
            // A thread limit (RLIMIT_NPROC, cgroup pids.max) is an error or fewer
            // workers, never a panic: the final drain below saves everything anyway.
            let spawned = std::thread::Builder::new()
                .name(format!("culprit-drain-{k}"))
                .spawn_scoped(s, move || {
                    let r = drain_worker(
                        pool,
                        dir,
                        live,
                        keeper,
                        (pid, k as u32, t0),
                        opts.idle_sleep,
                        finishing,
                        saved,
                    );
                    if let Err(e) = r {
                        let mut f = failed.lock().unwrap_or_else(|p| p.into_inner());
                        f.get_or_insert(e);
                        finishing.store(true, Ordering::Release);
                    }
                });
            match spawned {
                Ok(_) => started += 1,
                Err(e) if started == 0 => {
                    let mut f = failed.lock().unwrap_or_else(|p| p.into_inner());
                    f.get_or_insert(Error::Spawn { source: e });
                    finishing.store(true, Ordering::Release);
                    break;
                }
                Err(_) => break,
            }
        }
        if let Some(every) = opts.cpu_sample_interval {
            let finishing = &finishing;
            s.spawn(move || crate::cpustat::run_sampler(pool.path(), dir, every, finishing));
        }
        let mut last_map_check = Instant::now();
        let mut last_salvage = Instant::now();
        let mut last_live = Instant::now();
        let mut last_snapshot = Instant::now();
        let live_chunk = || new_chunk(dir, keeper, (pid, workers as u32 + 1, t0));
        let live_gate = match crate::keep::Gate::open(dir) {
            Ok(g) => g,
            Err(e) => {
                let mut f = failed.lock().unwrap_or_else(|p| p.into_inner());
                f.get_or_insert(e);
                finishing.store(true, Ordering::Release);
                crate::keep::Gate::none()
            }
        };
        // Stop requests are noticed within 10 ms; repair passes run every interval.
        let tick = opts.salvage_interval.min(Duration::from_millis(10));
        loop {
            std::thread::sleep(tick);
            if stop.load(Ordering::Acquire) || finishing.load(Ordering::Acquire) {
                break;
            }
            if last_snapshot.elapsed() >= crate::clocksnap::SNAPSHOT_INTERVAL {
                last_snapshot = Instant::now();
                snapshots.push(crate::clocksnap::take());
            }
            if last_salvage.elapsed() >= opts.salvage_interval {
                last_salvage = Instant::now();
                add(&mut salvage, bufpool::salvage_dead(pool));
            }
            if let Some(every) = opts.live_interval {
                if last_live.elapsed() >= every {
                    last_live = Instant::now();
                    let room = keeper.map_or(Ok(None), |k| {
                        reserve_live(k, workers as u32 + 1, &live_out, live, pool).map(Some)
                    });
                    let polled = room.and_then(|room| {
                        let _held = live_gate.hold();
                        live.poll(pool, &mut live_out, live_chunk, &mut live_buf, room)
                    });
                    let polled = polled.and_then(|p| {
                        if let Some(k) = keeper {
                            k.appended(workers as u32 + 1, &mut live_out, None)?;
                        }
                        Ok(p)
                    });
                    match polled {
                        Ok(p) => live_pieces += p.pieces,
                        Err(e) => {
                            let mut f = failed.lock().unwrap_or_else(|p| p.into_inner());
                            f.get_or_insert(e);
                            break;
                        }
                    }
                }
            }
            if let Some(k) = keeper {
                if let Err(e) = k.expire() {
                    let mut f = failed.lock().unwrap_or_else(|p| p.into_inner());
                    f.get_or_insert(e);
                    break;
                }
            }
            if opts.snapshot_on_usr1 && crate::signals::take_snapshot_request() {
                let out = crate::snapshot::new_path(dir, "snapshot", None);
                match crate::snapshot::snapshot(dir, &out) {
                    Ok(r) => eprintln!(
                        "culprit: snapshot of {} in {} ({} file(s), {} bytes)",
                        dir.display(),
                        out.display(),
                        r.linked + r.copied,
                        r.bytes
                    ),
                    Err(e) => eprintln!("culprit: warning: snapshot failed: {e}"),
                }
            }
            if opts.stop_when_unmapped
                && last_map_check.elapsed() >= Duration::from_millis(300)
                && pool.shared().writers_attached.load(Ordering::Relaxed) > 0
            {
                last_map_check = Instant::now();
                if !crate::watch::others_map(pool.path()) {
                    break;
                }
            }
        }
        finishing.store(true, Ordering::Release);
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    // Final passes: publish what dead writers held, drain it, until nothing moves.
    let mut last: Option<ChunkWriter> = None;
    loop {
        let rep = bufpool::salvage_dead(pool);
        add(&mut salvage, rep);
        let n = drain_now(
            pool,
            dir,
            live,
            keeper,
            (pid, workers as u32, t0),
            &mut last,
        )?;
        saved.fetch_add(n, Ordering::Relaxed);
        if rep.published == 0 && rep.requeued == 0 && n == 0 {
            break;
        }
    }
    if let Some(w) = &last {
        w.sync()?;
    }
    // What live writers still hold: their committed prefix, so that a thread that went
    // idle is on disk up to its last entry (the rest follows if a later reader drains
    // the pool).
    if opts.live_interval.is_some() {
        let open = || new_chunk(dir, keeper, (pid, workers as u32 + 1, t0));
        let room = match keeper {
            Some(k) => Some(reserve_live(k, workers as u32 + 1, &live_out, live, pool)?),
            None => None,
        };
        let gate = crate::keep::Gate::open(dir)?;
        let held = gate.hold();
        live_pieces += live
            .poll(pool, &mut live_out, open, &mut live_buf, room)?
            .pieces;
        drop(held);
    }
    if let Some(w) = &live_out {
        w.sync()?;
    }
    if let Some(k) = keeper {
        k.settle()?;
    }
    snapshots.push(crate::clocksnap::take());
    manifest.clock_snapshots.extend(snapshots);
    manifest.clock_snapshots.sort_by_key(|s| s.tsc);
    let left_owned = pool.slots().census()[State::Owned as usize];
    let unreported = pool.shared().lost_unreported.load(Ordering::Relaxed);
    let mut rep = finish(
        dir,
        manifest,
        repaired,
        saved.into_inner(),
        salvage,
        left_owned,
        unreported,
    )?;
    rep.live_pieces = live_pieces;
    pool_counters(pool, dir, &mut rep.manifest)?;
    Ok(rep)
}

/// Copies the pool header's loss counters (`acquire_failures`, `meta_dropped`) into the
/// manifest, so that a trace says when the pool was full even if no thread lived to
/// count what it dropped (a writer SIGKILLed while no reader drained).
fn pool_counters(pool: &Pool, dir: &Path, m: &mut Manifest) -> Result<()> {
    let sh = pool.shared();
    let failures = sh.acquire_failures.load(Ordering::Relaxed);
    let meta = sh.meta_dropped.load(Ordering::Relaxed);
    if (failures, meta) != (m.totals.acquire_failures, m.totals.meta_dropped) {
        m.totals.acquire_failures = failures;
        m.totals.meta_dropped = meta;
        m.write(dir)?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn finish(
    dir: &Path,
    mut manifest: Manifest,
    repaired: Vec<Repaired>,
    saved: u64,
    salvage: SalvageReport,
    left_owned: usize,
    lost_unreported: u64,
) -> Result<ReaderReport> {
    let trace = TraceDir::index(dir.to_path_buf(), manifest.clone())?;
    let summary = summarize(&trace)?;
    manifest.processes = summary.processes.clone();
    manifest.totals = summary.totals.clone();
    manifest.totals.lost_unreported = lost_unreported;
    manifest.totals.lost = manifest.totals.lost.saturating_add(lost_unreported);
    manifest.end_unix_ns = Some(now_ns());
    manifest.complete = true;
    manifest.write(dir)?;
    Ok(ReaderReport {
        saved,
        live_pieces: 0,
        salvage,
        repaired,
        left_owned,
        summary,
        manifest,
    })
}

#[allow(clippy::too_many_arguments)]
fn drain_worker(
    pool: &Pool,
    dir: &Path,
    live: &LiveSaved,
    keeper: Option<&Keeper>,
    (pid, k, t0): (u32, u32, u64),
    idle: Duration,
    finishing: &AtomicBool,
    saved: &AtomicU64,
) -> Result<()> {
    let c = Consumer::new(pool);
    let mut w: Option<ChunkWriter> = None;
    let gate = crate::keep::Gate::open(dir)?;
    loop {
        match c.take() {
            Some(t) => {
                if w.is_none() {
                    match new_chunk(dir, keeper, (pid, k, t0)) {
                        Ok(nw) => w = Some(nw),
                        Err(e) => {
                            t.requeue();
                            return Err(e);
                        }
                    }
                }
                if let Some(keeper) = keeper {
                    if let Err(e) = keeper.reserve(k, &w, record_bytes(t.data())) {
                        t.requeue();
                        return Err(e);
                    }
                }
                let wr = w.as_mut().expect("created above");
                let held = gate.hold();
                if let Err(source) = live.save_taken(t.info(), t.data(), wr) {
                    t.requeue();
                    return Err(save_error(pool, wr.path().to_path_buf(), source));
                }
                drop(held);
                let info = *t.info();
                t.release();
                saved.fetch_add(1, Ordering::Relaxed);
                if let Some(keeper) = keeper {
                    keeper.appended(k, &mut w, Some((&info, 0)))?;
                }
            }
            None => {
                if finishing.load(Ordering::Acquire) {
                    break;
                }
                std::thread::sleep(idle);
            }
        }
    }
    if let Some(w) = &w {
        w.sync()?;
    }
    Ok(())
}

fn save_error(pool: &Pool, path: PathBuf, source: std::io::Error) -> Error {
    Error::Save {
        path,
        kept: pool.slots().census()[State::Written as usize],
        source,
    }
}

/// Drains every written sub-buffer now, on the calling thread. Returns how many.
fn drain_now(
    pool: &Pool,
    dir: &Path,
    live: &LiveSaved,
    keeper: Option<&Keeper>,
    (pid, k, t0): (u32, u32, u64),
    w: &mut Option<ChunkWriter>,
) -> Result<u64> {
    let c = Consumer::new(pool);
    let mut n = 0;
    let gate = crate::keep::Gate::open(dir)?;
    while let Some(t) = c.take() {
        if w.is_none() {
            match new_chunk(dir, keeper, (pid, k, t0)) {
                Ok(nw) => *w = Some(nw),
                Err(e) => {
                    t.requeue();
                    return Err(e);
                }
            }
        }
        if let Some(keeper) = keeper {
            if let Err(e) = keeper.reserve(k, w, record_bytes(t.data())) {
                t.requeue();
                return Err(e);
            }
        }
        let wr = w.as_mut().expect("created above");
        let held = gate.hold();
        if let Err(source) = live.save_taken(t.info(), t.data(), wr) {
            t.requeue();
            return Err(save_error(pool, wr.path().to_path_buf(), source));
        }
        drop(held);
        let info = *t.info();
        t.release();
        n += 1;
        if let Some(keeper) = keeper {
            keeper.appended(k, w, Some((&info, 0)))?;
        }
    }
    Ok(n)
}

/// Reserves what the live copier's next poll will write and returns it: the poll writes
/// no more than that (the traced threads go on committing entries meanwhile; what they
/// add waits for the next poll), so the flight recorder's count of the directory holds.
fn reserve_live(
    k: &Keeper,
    who: u32,
    out: &Option<ChunkWriter>,
    live: &LiveSaved,
    pool: &Pool,
) -> Result<u64> {
    let due = live.due(pool);
    k.reserve(who, out, due)?;
    Ok(due)
}

/// Bytes a sub-buffer's record takes on disk at most (the pieces already saved by the
/// live path make it less).
fn record_bytes(data: &[u8]) -> u64 {
    (data.len() + bufpool::disk::RECORD_FIXED_SIZE) as u64
}

/// A new chunk file of writer `k`: named for the reader's start, or, under a flight
/// recorder (which closes and opens segments as it goes), for the current time.
fn new_chunk(
    dir: &Path,
    keeper: Option<&Keeper>,
    (pid, k, t0): (u32, u32, u64),
) -> Result<ChunkWriter> {
    match keeper {
        Some(_) => ChunkWriter::create_segment(dir, pid, k),
        None => ChunkWriter::create(dir, pid, k, t0),
    }
}
