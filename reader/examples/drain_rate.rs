//! Measures how fast a reader drains a pool to disk: writer threads append 20-byte
//! entries as fast as they can while `reader::run` saves them.
//!
//! `cargo run --release -p reader --example drain_rate -- [WRITERS] [ENTRIES_PER_WRITER] [DIR]`

use bufpool::format::{encode_fn, Kind};
use bufpool::{Pool, PoolConfig, WriterState};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

fn main() {
    let mut a = std::env::args().skip(1);
    let writers: u64 = a.next().and_then(|s| s.parse().ok()).unwrap_or(2);
    let count: u64 = a.next().and_then(|s| s.parse().ok()).unwrap_or(5_000_000);
    let base = a
        .next()
        .unwrap_or_else(|| std::env::temp_dir().display().to_string());
    let dir = tempfile::tempdir_in(base).expect("temporary directory");
    let pool = Pool::create(dir.path().join("pool"), &PoolConfig::default()).expect("pool");
    let out = dir.path().join("trace");
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let rep = std::thread::scope(|s| {
        let r = s.spawn(|| reader::run(&pool, &out, &reader::ReaderOptions::default(), &stop));
        let ws: Vec<_> = (0..writers)
            .map(|id| {
                let pool = &pool;
                s.spawn(move || {
                    let me = pool.holder();
                    let mut w = WriterState::new();
                    let st = bufpool::sys::proc_stat(me.pid).map_or(0, |s| s.2);
                    w.attach(pool, me.pid, st, bufpool::sys::gettid());
                    for i in 0..count {
                        w.append(pool, encode_fn(Kind::FnEnter, i, i, id).as_bytes());
                    }
                    w.flush(pool, 0);
                })
            })
            .collect();
        for w in ws {
            w.join().expect("writer");
        }
        let produced = t0.elapsed();
        stop.store(true, Ordering::Release);
        (r.join().expect("reader").expect("reader run"), produced)
    });
    let total = t0.elapsed();
    let t1 = Instant::now();
    let trace = reader::TraceDir::open(&out).expect("open");
    let opened = t1.elapsed();
    reader::summarize(&trace).expect("summarize");
    println!(
        "re-reading the directory: open and check {opened:.2?}, decode every entry {:.2?}",
        t1.elapsed() - opened
    );
    let t = &rep.0.manifest.totals;
    let mb = t.bytes as f64 / 1e6;
    println!(
        "{writers} writers x {count} entries: produced in {:.2?}, all saved and indexed in {:.2?}; \
         {} entries ({mb:.0} MB) saved, {} lost; {:.0} MB/s end to end",
        rep.1,
        total,
        t.entries,
        t.lost,
        mb / total.as_secs_f64()
    );
}
