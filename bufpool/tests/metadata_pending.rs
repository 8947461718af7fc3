//! Metadata is never dropped for lack of a free sub-buffer (issue 18, defect 2): a
//! writer keeps process/thread/map/code records in its pending store while the pool is
//! full and writes them, in order, after the `Lost` marker of the next sub-buffer it
//! gets; `Lost` counts only entries.

use bufpool::format::{self, encode_meta, Kind, Meta, ThreadRecord, META_BUF};
use bufpool::{Consumer, Pool, PoolConfig, WriterState};

fn full_pool() -> (tempfile::TempDir, Pool, WriterState) {
    let tmp = tempfile::tempdir().unwrap();
    let pool = Pool::create(
        tmp.path().join("pool"),
        &PoolConfig {
            n_subbufs: 2,
            subbuf_size: 8192,
            retry_after: 4,
            ..Default::default()
        },
    )
    .unwrap();
    let me = pool.holder();
    let mut w = WriterState::new();
    w.attach(
        &pool,
        me.pid,
        bufpool::sys::proc_stat(me.pid).unwrap().2,
        4242,
    );
    (tmp, pool, w)
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

/// Every entry of every written sub-buffer, in take order.
fn drain(pool: &Pool) -> Vec<(Kind, u64)> {
    let c = Consumer::new(pool);
    let mut out = Vec::new();
    while let Some(t) = c.take() {
        for e in format::Decoder::new(t.data()) {
            let e = e.unwrap();
            let lost = match e.kind {
                Kind::Lost => e.lost,
                Kind::MetaThread => match e.meta().unwrap() {
                    Some(Meta::Thread(r)) => r.tid as u64,
                    _ => 0,
                },
                _ => 0,
            };
            out.push((e.kind, lost));
        }
        t.release();
    }
    out
}

#[test]
fn metadata_is_kept_while_the_pool_is_full_and_lost_counts_only_entries() {
    let (_tmp, pool, mut w) = full_pool();
    // Fill both sub-buffers; then entries are dropped.
    let mut produced = 0u64;
    let mut dropped = 0u64;
    while dropped < 10 {
        produced += 1;
        if !w.append_fn(&pool, Kind::FnEnter, produced, 0x10, 0x20) {
            dropped += 1;
        }
    }
    // Three metadata records arrive while no sub-buffer is free.
    for tid in [101, 102, 103] {
        let (buf, n) = thread_record(tid);
        assert!(w.append(&pool, &buf[..n]), "metadata is kept, not dropped");
    }
    assert_eq!(
        w.lost, dropped,
        "only entries count as lost, never metadata"
    );
    // A reader frees the pool; the next entry gets a sub-buffer.
    let first = drain(&pool);
    assert!(first.iter().all(|(k, _)| *k == Kind::FnEnter));
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
    let rest = drain(&pool);
    let kinds: Vec<Kind> = rest.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        kinds[..5],
        [
            Kind::Lost,
            Kind::MetaThread,
            Kind::MetaThread,
            Kind::MetaThread,
            Kind::FnEnter
        ],
        "Lost marker, then the kept metadata in order, then the entry"
    );
    assert_eq!(
        rest[0].1, dropped,
        "the Lost marker counts the dropped entries"
    );
    let tids: Vec<u64> = rest[1..4].iter().map(|(_, t)| *t).collect();
    assert_eq!(tids, [101, 102, 103]);
    let recorded = first.len() as u64 + after;
    assert_eq!(recorded + dropped, produced, "recorded + lost = produced");
    assert_eq!(
        pool.shared()
            .meta_dropped
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

#[test]
fn metadata_pending_at_exit_is_counted_when_no_subbuffer_frees_up() {
    let (_tmp, pool, mut w) = full_pool();
    while w.append_fn(&pool, Kind::FnEnter, 1, 0x10, 0x20) {}
    let (buf, n) = thread_record(9);
    assert!(w.append(&pool, &buf[..n]));
    // Nobody drains: the exit flush waits a bounded time, then counts it.
    let t0 = std::time::Instant::now();
    w.flush(&pool, 0);
    assert!(t0.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(
        pool.shared()
            .meta_dropped
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}
