//! The flight recorder (`--keep`): the directory never passes its budget by more than
//! one sub-buffer per writer, what remains is each thread's newest entries without a
//! hole, metadata records survive rotation, everything is counted, and a snapshot
//! freezes a consistent copy while recording goes on.

use bufpool::format::{encode_fn, encode_meta, Kind, Meta, ThreadRecord, META_BUF};
use bufpool::{Pool, PoolConfig, WriterState};
use reader::keep::KeepOptions;
use reader::{OpenOptions, ReaderOptions, TraceDir};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

const SUBBUF: u32 = 64 << 10;
const BUDGET: u64 = 2 << 20;

fn pool(tmp: &Path) -> Pool {
    Pool::create(
        tmp.join("pool"),
        &PoolConfig {
            n_subbufs: 64,
            subbuf_size: SUBBUF,
            calibration: Duration::from_millis(1),
            ..Default::default()
        },
    )
    .unwrap()
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut n = 0;
    for sub in [dir.to_path_buf(), dir.join("chunks")] {
        if let Ok(rd) = std::fs::read_dir(&sub) {
            for e in rd.flatten() {
                if let Ok(m) = e.metadata() {
                    if m.is_file() {
                        n += m.len();
                    }
                }
            }
        }
    }
    n
}

fn thread_meta(pool: &Pool, w: &mut WriterState, name: &str) {
    let mut buf = [0u8; META_BUF];
    let meta = Meta::Thread(ThreadRecord {
        tid: 1,
        pid: 1,
        name: name.as_bytes().to_vec(),
    });
    let n = encode_meta(1, &meta, &mut buf);
    assert!(w.append(pool, &buf[..n]));
}

/// Callers of every non-metadata entry, and the thread names seen, per thread.
fn read_back(dir: &Path) -> (TraceDir, Vec<u64>, Vec<String>) {
    let t = TraceDir::open_with(dir, OpenOptions::default()).unwrap();
    let mut callers = Vec::new();
    let mut names = Vec::new();
    for k in t.threads().collect::<Vec<_>>() {
        t.for_each_entry(k, |_, e| {
            match e.kind {
                Kind::FnEnter => callers.push(e.caller),
                Kind::MetaThread => {
                    if let Ok(Some(Meta::Thread(r))) = e.meta() {
                        names.push(String::from_utf8_lossy(&r.name).into_owned());
                    }
                }
                _ => {}
            }
            Ok(())
        })
        .unwrap();
    }
    (t, callers, names)
}

#[test]
fn the_directory_stays_within_its_budget_and_keeps_the_newest_entries_and_all_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path());
    let out = tmp.path().join("trace");
    let stop = AtomicBool::new(false);
    let opts = ReaderOptions {
        workers: 2,
        cpu_sample_interval: None,
        keep: KeepOptions {
            bytes: Some(BUDGET),
            age: None,
        },
        ..Default::default()
    };
    let n: u64 = 600_000; // 12 MB of entries: six budgets
    let max_seen = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let rep = std::thread::scope(|s| {
        let r = s.spawn(|| reader::run(&pool, &out, &opts, &stop));
        let watcher = s.spawn(|| {
            while !done.load(Ordering::Acquire) {
                max_seen.fetch_max(dir_bytes(&out), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let mut w = WriterState::for_this_thread(&pool);
        thread_meta(&pool, &mut w, "first");
        for i in 0..n {
            // A pool too small for a burst drops entries (counted): pace the writer.
            while !w.append(&pool, encode_fn(Kind::FnEnter, i + 2, i, 0x4000).as_bytes()) {
                std::thread::sleep(Duration::from_micros(50));
            }
            if i == n / 2 {
                thread_meta(&pool, &mut w, "middle");
            }
        }
        w.flush(&pool, bufpool::layout::FLAG_THREAD_EXIT);
        std::thread::sleep(Duration::from_millis(50));
        stop.store(true, Ordering::Release);
        let rep = r.join().unwrap().unwrap();
        done.store(true, Ordering::Release);
        watcher.join().unwrap();
        rep
    });
    let max = max_seen.load(Ordering::Relaxed);
    // Two drain threads and the live copier may each hold one record past the budget.
    assert!(
        max <= BUDGET + 3 * u64::from(SUBBUF),
        "directory reached {max} bytes, budget {BUDGET}"
    );
    assert!(dir_bytes(&out) <= BUDGET + 3 * u64::from(SUBBUF));
    let (t, callers, names) = read_back(&out);
    assert!(t.damage().is_empty(), "{:?}", t.damage());
    let rot = t.rotated().expect("something was rotated").clone();
    // What remains is the newest entries, in order, without a hole.
    let first = *callers.first().unwrap();
    assert!(first > 0, "nothing rotated away");
    assert_eq!(callers, (first..n).collect::<Vec<_>>());
    // Everything is counted: kept + rotated = written (a refused append is retried, so
    // every entry was written once; the refusals are counted as lost).
    assert_eq!(callers.len() as u64 + rot.entries, n);
    assert!(rep.manifest.totals.entries >= callers.len() as u64);
    assert_eq!(rot.threads.len(), 1);
    assert_eq!(rot.threads[0].entries, rot.entries);
    // Both thread records survived though their sub-buffers were rotated away.
    assert_eq!(names, ["first", "middle"]);
    assert!(rot.segments > 0 && rot.freed_bytes > 0);
}

#[test]
fn a_snapshot_freezes_a_consistent_copy_while_recording_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path());
    let out = tmp.path().join("trace");
    let snap = tmp.path().join("snap");
    let stop = AtomicBool::new(false);
    let opts = ReaderOptions {
        workers: 1,
        cpu_sample_interval: None,
        live_interval: Some(Duration::from_millis(10)),
        keep: KeepOptions {
            bytes: Some(BUDGET),
            age: None,
        },
        ..Default::default()
    };
    std::thread::scope(|s| {
        let r = s.spawn(|| reader::run(&pool, &out, &opts, &stop));
        let mut w = WriterState::for_this_thread(&pool);
        thread_meta(&pool, &mut w, "t");
        let mut i = 0u64;
        let mut write = |upto: u64| {
            while i < upto {
                while !w.append(&pool, encode_fn(Kind::FnEnter, i + 2, i, 0x4000).as_bytes()) {
                    std::thread::sleep(Duration::from_micros(50));
                }
                i += 1;
            }
        };
        write(300_000);
        // Let the live copier save what the writer still holds.
        std::thread::sleep(Duration::from_millis(100));
        let rep = reader::snapshot::snapshot(&out, &snap).unwrap();
        assert!(rep.linked + rep.copied > 0);
        write(400_000);
        stop.store(true, Ordering::Release);
        r.join().unwrap().unwrap();
    });
    // The snapshot holds a suffix of what was written before it, ending at the last
    // entry the live copier saw, and reads without damage.
    let (t, callers, names) = read_back(&snap);
    assert!(t.damage().is_empty(), "{:?}", t.damage());
    assert_eq!(names, ["t"]);
    let (a, b) = (callers[0], *callers.last().unwrap());
    assert_eq!(callers, (a..=b).collect::<Vec<_>>());
    // Written before the snapshot; what the pool still held then is not in it.
    assert!(b < 300_000, "snapshot ends at {b}");
    assert!(callers.len() > 10_000, "{} entries", callers.len());
}
