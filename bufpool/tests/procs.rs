//! Multi-process tests of the pool: several writer processes × several threads ×
//! several reader processes on one pool file, with and without SIGKILL.
//!
//! Children are this test binary re-executed with a role in the environment (see
//! `common`); the `child` test is their entry point and does nothing in a normal run.

mod common;

use bufpool::{Pool, PoolConfig};
use common::*;
use std::process::Child;
use std::time::{Duration, Instant};

/// Entry point of the child processes (ignored in normal runs; children run it with
/// `--ignored` and a role in the environment).
#[test]
#[ignore = "entry point of child processes"]
fn child() {
    if !child_main() {
        eprintln!("`child` is the entry point of child processes: nothing to do here");
    }
}

fn kill(c: &mut Child) {
    // SAFETY: kill(2) on the pid of a child we spawned and have not reaped yet.
    unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGKILL) };
}

fn known_from(side: &Side, writers: &[u32], threads: usize) -> Vec<Known> {
    let mut v = Vec::new();
    for (i, &pid) in writers.iter().enumerate() {
        for t in 0..threads {
            let (tid, produced, pending_lost) = side.get(i * threads + t);
            if tid != 0 {
                v.push(Known {
                    pid,
                    tid,
                    produced,
                    pending_lost,
                });
            }
        }
    }
    v
}

/// 3 writer processes × 3 threads × 2 reader processes, a pool small enough that
/// writers run out of sub-buffers at times: every entry is seen exactly once, in order
/// per thread, and recorded + lost = produced exactly.
#[test]
fn writers_and_readers_in_many_processes_account_for_every_entry() {
    let dir = scratch_dir();
    let path = dir.path().join("pool");
    let cfg = PoolConfig {
        n_subbufs: 24,
        subbuf_size: 16384,
        retry_after: 64,
        ..Default::default()
    };
    let pool = Pool::create(&path, &cfg).unwrap();
    let (nw, threads, count) = (3usize, 3usize, 60_000u64);
    let side_path = dir.path().join("side");
    let side = Side::create(&side_path, nw * threads);
    let stop = dir.path().join("stop");
    let outs: Vec<_> = (0..2).map(|i| dir.path().join(format!("out{i}"))).collect();
    let mut readers: Vec<Child> = outs
        .iter()
        .map(|o| spawn("child", "reader", &reader_env(&path, o, &stop)))
        .collect();
    let mut writers: Vec<Child> = (0..nw)
        .map(|i| {
            spawn(
                "child",
                "writer",
                &writer_env(&path, &side_path, i, threads, count),
            )
        })
        .collect();
    let pids: Vec<u32> = writers.iter().map(|c| c.id()).collect();
    for w in &mut writers {
        assert!(w.wait().unwrap().success(), "writer failed");
    }
    std::fs::write(&stop, b"").unwrap();
    for r in &mut readers {
        assert!(r.wait().unwrap().success(), "reader failed");
    }
    let mut saved: Vec<Saved> = outs.iter().flat_map(|o| read_out(o)).collect();
    let rest = drain(&pool);
    assert!(
        rest.is_empty(),
        "readers left {} sub-buffers behind",
        rest.len()
    );
    saved.extend(rest);
    assert_eq!(
        pool.slots().census()[0],
        pool.n_subbufs(),
        "every sub-buffer is free"
    );
    let known = known_from(&side, &pids, threads);
    assert_eq!(known.len(), nw * threads);
    assert!(known.iter().all(|k| k.produced == count));
    let unreported = pool
        .shared()
        .lost_unreported
        .load(std::sync::atomic::Ordering::Relaxed);
    let t = check(&saved, &known, true, unreported);
    assert_eq!(t.duplicates, 0, "nothing dies, nothing is read twice");
    assert_eq!(t.salvaged, 0);
    assert_eq!(
        t.recorded + t.lost + unreported,
        nw as u64 * threads as u64 * count
    );
    eprintln!("stress: {t:?}, unreported {unreported}");
}

/// Small deterministic random numbers (xorshift), seeded from the clock and printed so
/// a failure can be replayed with BUFPOOL_TORTURE_SEED.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Hundreds of rounds of: 2 writer processes (2 threads each, writing without end) and
/// 2 reader processes (which also run repair passes) on a small pool, SIGKILLed one by
/// one at random moments. Afterwards a repair pass and a drain must leave every
/// sub-buffer free, and every committed entry must be found exactly once (dedup by
/// (pid, tid, seq); duplicates byte-identical), in order, with no sub-buffer missing.
#[test]
fn sigkill_torture_loses_no_sub_buffer_and_no_committed_entry() {
    let rounds: usize = std::env::var("BUFPOOL_TORTURE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let seed = std::env::var("BUFPOOL_TORTURE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| bufpool::sys::rdtsc() | 1);
    eprintln!("torture seed {seed} (BUFPOOL_TORTURE_SEED replays it)");
    let mut rng = Rng(seed);
    let budget = Duration::from_secs(50);
    let t0 = Instant::now();
    let (mut salvaged, mut dups, mut recorded, mut done) = (0, 0, 0, 0);
    for round in 0..rounds {
        let dir = scratch_dir();
        let path = dir.path().join("pool");
        let cfg = PoolConfig {
            n_subbufs: 12,
            subbuf_size: 8192,
            retry_after: 32,
            calibration: Duration::from_millis(1),
            ..Default::default()
        };
        let pool = Pool::create(&path, &cfg).unwrap();
        let threads = 2;
        let side_path = dir.path().join("side");
        let side = Side::create(&side_path, 2 * threads);
        let stop = dir.path().join("stop");
        let outs: Vec<_> = (0..2).map(|i| dir.path().join(format!("out{i}"))).collect();
        let mut procs: Vec<Child> = (0..2)
            .map(|i| {
                spawn(
                    "child",
                    "writer",
                    &writer_env(&path, &side_path, i, threads, u64::MAX),
                )
            })
            .collect();
        let pids: Vec<u32> = procs.iter().map(|c| c.id()).collect();
        // One reader of two dawdles between saving and releasing, so kills also land
        // in that window (its sub-buffer must then be re-read, and stored once).
        procs.push(spawn(
            "child",
            "reader",
            &reader_env(&path, &outs[0], &stop),
        ));
        procs.push(spawn(
            "child",
            "reader",
            &slow_reader_env(&path, &outs[1], &stop),
        ));
        // Kill all four in a random order at random moments (0..8 ms apart).
        let mut order: Vec<usize> = (0..procs.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        for &i in &order {
            std::thread::sleep(Duration::from_micros(rng.below(8000)));
            kill(&mut procs[i]);
        }
        for p in &mut procs {
            p.wait().unwrap();
        }
        let mut saved: Vec<Saved> = outs.iter().flat_map(|o| read_out(o)).collect();
        saved.extend(drain(&pool));
        let census = pool.slots().census();
        assert_eq!(
            census,
            [pool.n_subbufs(), 0, 0, 0, 0],
            "round {round}: census after repair and drain"
        );
        let known = known_from(&side, &pids, threads);
        let t = check(&saved, &known, false, 0);
        salvaged += t.salvaged;
        dups += t.duplicates;
        recorded += t.recorded;
        done += 1;
        if t0.elapsed() > budget {
            break;
        }
    }
    eprintln!(
        "torture: {done} rounds, {recorded} entries, {salvaged} sub-buffers salvaged, {dups} re-read after a reader died"
    );
    assert!(
        salvaged > 0,
        "the kills must have hit writers holding entries"
    );
    assert!(
        dups > 0,
        "the kills must have hit a reader between saving and releasing"
    );
}
