//! Metadata is never dropped for lack of a free sub-buffer (issue 18, defect 2).
//!
//! While no entry sub-buffer is free, a writer puts process/thread/map/code records into
//! the pool's *metadata area* (sub-buffers entry writers never take, published at once),
//! and only when that area is full too keeps them in its pending store, writing them —
//! in order, after the `Lost` marker — into the next sub-buffer it gets. `Lost` counts
//! only entries. The first two tests reproduce the flooded tiny pool of the issue (every
//! entry sub-buffer held by an idle process), deterministically.

use bufpool::format::{self, encode_meta, Kind, MapRecord, Meta, ThreadRecord, META_BUF};
use bufpool::layout::FLAG_META_AREA;
use bufpool::{Consumer, Pool, PoolConfig, WriterState};
use std::sync::atomic::Ordering;

fn tiny_pool() -> (tempfile::TempDir, Pool) {
    let tmp = tempfile::tempdir().unwrap();
    let pool = Pool::create(
        tmp.path().join("pool"),
        &PoolConfig {
            n_subbufs: 2,
            subbuf_size: 8192,
            retry_after: 4,
            calibration: std::time::Duration::from_millis(1),
            ..Default::default()
        },
    )
    .unwrap();
    (tmp, pool)
}

/// A writer of this process posing as thread `tid`.
fn writer(pool: &Pool, tid: u32) -> WriterState {
    let me = pool.holder();
    let mut w = WriterState::new();
    w.attach(
        pool,
        me.pid,
        bufpool::sys::proc_stat(me.pid).unwrap().2,
        tid,
    );
    w
}

fn thread_record(tid: u32) -> ([u8; META_BUF], usize) {
    let mut buf = [0u8; META_BUF];
    let m = Meta::Thread(ThreadRecord {
        tid,
        pid: 1,
        name: b"worker".to_vec(),
    });
    let n = encode_meta(7, &m, &mut buf);
    (buf, n)
}

/// A memory-map record of a typical size (a library path).
fn map_record(i: u64) -> ([u8; META_BUF], usize) {
    let mut buf = [0u8; META_BUF];
    let m = Meta::Map(MapRecord {
        start: 0x7f00_0000_0000 + i * 0x1000,
        end: 0x7f00_0000_1000 + i * 0x1000,
        offset: 0,
        prot: 5,
        path: format!("/usr/lib/x86_64-linux-gnu/libexample-{i}.so.6").into_bytes(),
    });
    let n = encode_meta(9, &m, &mut buf);
    (buf, n)
}

/// One drained sub-buffer: its thread, flags, sequence number, and its entries as
/// (kind, value), where value is a `Lost` count, a thread record's tid or a map record's
/// start.
type Drained = (u32, u32, u64, Vec<(Kind, u64)>);

/// Every written sub-buffer, in take order.
fn drain(pool: &Pool) -> Vec<Drained> {
    let c = Consumer::new(pool);
    let mut out = Vec::new();
    while let Some(t) = c.take() {
        let mut es = Vec::new();
        for e in format::Decoder::new(t.data()) {
            let e = e.unwrap();
            let v = match e.kind {
                Kind::Lost => e.lost,
                Kind::MetaThread | Kind::MetaMap => match e.meta().unwrap() {
                    Some(Meta::Thread(r)) => r.tid as u64,
                    Some(Meta::Map(r)) => r.start,
                    _ => 0,
                },
                _ => 0,
            };
            es.push((e.kind, v));
        }
        out.push((t.info().tid, t.info().flags, t.info().seq, es));
        t.release();
    }
    out
}

fn meta_dropped(pool: &Pool) -> u64 {
    pool.shared().meta_dropped.load(Ordering::Relaxed)
}

/// Two long-lived processes (an idle shell, a `dd` whose file I/O is not recorded) each
/// hold one of the two entry sub-buffers: the situation that dropped a third process's
/// metadata in the flooded 2 × 8 KiB pool.
fn every_entry_subbuf_held(pool: &Pool) -> [WriterState; 2] {
    let mut shell = writer(pool, 1);
    let mut dd = writer(pool, 2);
    assert!(shell.append_fn(pool, Kind::FnEnter, 1, 0x10, 0x20));
    assert!(dd.append_fn(pool, Kind::FnEnter, 2, 0x10, 0x20));
    [shell, dd]
}

#[test]
fn a_process_start_is_recorded_while_every_entry_subbuffer_is_held() {
    let (_tmp, pool) = tiny_pool();
    let _holders = every_entry_subbuf_held(&pool);
    // A third process starts (thread record and 27 map records, as `ls` has), makes some
    // calls that find no sub-buffer, and exits — with no reader running meanwhile.
    let mut ls = writer(&pool, 3);
    let (t, n) = thread_record(3);
    assert!(ls.append_meta_later(&pool, &t[..n]));
    for i in 0..27 {
        let (m, n) = map_record(i);
        assert!(ls.append_meta_later(&pool, &m[..n]), "map record {i} kept");
    }
    ls.write_out_pending(&pool);
    let mut dropped = 0;
    for k in 0..10 {
        if !ls.append_fn(&pool, Kind::FnEnter, 100 + k, 0x10, 0x20) {
            dropped += 1;
        }
    }
    assert_eq!(dropped, 10, "no entry sub-buffer: the calls are dropped");
    ls.flush(&pool, bufpool::layout::FLAG_PROCESS_EXIT);
    assert_eq!(meta_dropped(&pool), 0, "no metadata record dropped");
    assert_eq!(pool.shared().lost_unreported.load(Ordering::Relaxed), 0);
    let mut subbufs: Vec<Drained> = drain(&pool).into_iter().filter(|d| d.0 == 3).collect();
    subbufs.sort_by_key(|d| d.2);
    assert!(
        subbufs.iter().all(|d| d.1 & FLAG_META_AREA != 0),
        "{subbufs:?}"
    );
    let es: Vec<(Kind, u64)> = subbufs.iter().flat_map(|d| d.3.clone()).collect();
    assert_eq!(es[0], (Kind::MetaThread, 3));
    let starts: Vec<u64> = es
        .iter()
        .filter(|e| e.0 == Kind::MetaMap)
        .map(|e| e.1)
        .collect();
    let want: Vec<u64> = (0..27).map(|i| 0x7f00_0000_0000 + i * 0x1000).collect();
    assert_eq!(starts, want, "every map record, in order");
    assert_eq!(
        subbufs[0].3.len(),
        28,
        "the whole start-up burst in one sub-buffer of the metadata area"
    );
    let lost: u64 = es.iter().filter(|e| e.0 == Kind::Lost).map(|e| e.1).sum();
    assert_eq!(
        lost, 10,
        "the dropped calls are counted in the trace, exactly"
    );
}

#[test]
fn metadata_written_record_by_record_waits_only_for_the_readers() {
    let (_tmp, pool) = tiny_pool();
    let _holders = every_entry_subbuf_held(&pool);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let drained = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut all = Vec::new();
            while !stop.load(Ordering::Acquire) {
                all.extend(drain(&pool));
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            all.extend(drain(&pool));
            all
        });
        // Each record on its own (like thread records, code records of a Python
        // program, injected faults): more records than the metadata area has
        // sub-buffers, so some wait in the pending store for the reader.
        let mut w = writer(&pool, 3);
        for tid in 0..40 {
            let (t, n) = thread_record(1000 + tid);
            assert!(w.append(&pool, &t[..n]));
        }
        w.flush(&pool, bufpool::layout::FLAG_PROCESS_EXIT);
        stop.store(true, Ordering::Release);
        reader.join().unwrap()
    });
    assert_eq!(meta_dropped(&pool), 0);
    let mut mine: Vec<&Drained> = drained.iter().filter(|d| d.0 == 3).collect();
    mine.sort_by_key(|d| d.2);
    let tids: Vec<u64> = mine
        .iter()
        .flat_map(|d| d.3.iter())
        .filter(|e| e.0 == Kind::MetaThread)
        .map(|e| e.1)
        .collect();
    assert_eq!(tids, (1000..1040).collect::<Vec<u64>>(), "all 40, in order");
}

/// Fills the entry sub-buffers with entries of `w` and the metadata area with one
/// thread record per sub-buffer; returns (entries produced, entries dropped).
fn fill_everything(pool: &Pool, w: &mut WriterState) -> (u64, u64) {
    let mut produced = 0u64;
    let mut dropped = 0u64;
    while dropped < 10 {
        produced += 1;
        if !w.append_fn(pool, Kind::FnEnter, produced, 0x10, 0x20) {
            dropped += 1;
        }
    }
    for k in pool.meta_area() {
        let (buf, n) = thread_record(500 + k as u32);
        assert!(w.append(pool, &buf[..n]));
    }
    assert_eq!(
        pool.slots().census()[bufpool::State::Written as usize],
        pool.n_subbufs()
    );
    (produced, dropped)
}

#[test]
fn metadata_is_kept_while_the_pool_is_full_and_lost_counts_only_entries() {
    let (_tmp, pool) = tiny_pool();
    let mut w = writer(&pool, 4242);
    let (mut produced, mut dropped) = fill_everything(&pool, &mut w);
    // Three metadata records arrive while no sub-buffer at all is free.
    for tid in [101, 102, 103] {
        let (buf, n) = thread_record(tid);
        assert!(w.append(&pool, &buf[..n]), "metadata is kept, not dropped");
    }
    assert_eq!(
        w.lost, 0,
        "only entries count as lost, never metadata (and the metadata area took the count)"
    );
    // A reader frees the pool; the next entry gets a sub-buffer.
    let first = drain(&pool);
    let first_entries = first
        .iter()
        .flat_map(|d| d.3.iter())
        .filter(|e| e.0 == Kind::FnEnter)
        .count() as u64;
    let first_lost: u64 = first
        .iter()
        .flat_map(|d| d.3.iter())
        .filter(|e| e.0 == Kind::Lost)
        .map(|e| e.1)
        .sum();
    assert_eq!(
        first_lost, dropped,
        "the drops so far, in the metadata area"
    );
    let mut after = 0;
    loop {
        produced += 1;
        if w.append_fn(&pool, Kind::FnEnter, produced, 0x10, 0x20) {
            after += 1;
            break;
        }
        dropped += 1;
    }
    w.flush(&pool, 0);
    let rest: Vec<(Kind, u64)> = drain(&pool).into_iter().flat_map(|d| d.3).collect();
    let kinds: Vec<Kind> = rest.iter().map(|(k, _)| *k).collect();
    let at = usize::from(kinds[0] == Kind::Lost);
    assert_eq!(
        kinds[at..at + 4],
        [
            Kind::MetaThread,
            Kind::MetaThread,
            Kind::MetaThread,
            Kind::FnEnter
        ],
        "(Lost marker,) then the kept metadata in order, then the entry"
    );
    let tids: Vec<u64> = rest[at..at + 3].iter().map(|(_, t)| *t).collect();
    assert_eq!(tids, [101, 102, 103]);
    let lost: u64 = first_lost
        + rest
            .iter()
            .filter(|e| e.0 == Kind::Lost)
            .map(|e| e.1)
            .sum::<u64>();
    assert_eq!(lost, dropped, "the Lost markers count the dropped entries");
    assert_eq!(
        first_entries + after + lost,
        produced,
        "recorded + lost = produced"
    );
    assert_eq!(meta_dropped(&pool), 0);
}

#[test]
fn metadata_pending_at_exit_is_counted_when_no_subbuffer_frees_up() {
    let (_tmp, pool) = tiny_pool();
    let mut w = writer(&pool, 4242);
    fill_everything(&pool, &mut w);
    let (buf, n) = thread_record(9);
    assert!(w.append(&pool, &buf[..n]));
    // Nobody drains: the exit flush waits a bounded time, then counts it.
    w.flush(&pool, 0);
    assert_eq!(meta_dropped(&pool), 1);
}
