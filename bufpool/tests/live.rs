//! `bufpool::live::peek`: the committed prefix of an owned sub-buffer, validated; and,
//! under a writer cycling through a small pool as fast as it can, live copies stitched to
//! the rest of each taken sub-buffer give every entry exactly once, in order.

use bufpool::format::{encode_fn, Decoder, Kind};
use bufpool::live::{peek, Incarnation};
use bufpool::{Consumer, Pool, PoolConfig, WriterState};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn pool(dir: &std::path::Path, n: u32) -> Pool {
    Pool::create(
        dir.join("pool"),
        &PoolConfig {
            n_subbufs: n,
            subbuf_size: 8192,
            calibration: Duration::from_millis(1),
            ..Default::default()
        },
    )
    .unwrap()
}

#[test]
fn peek_copies_only_new_committed_bytes_of_owned_sub_buffers() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path(), 2);
    let mut buf = Vec::new();
    assert!(peek(&pool, 0, |_| 0, &mut buf).is_none(), "a free slot");
    let mut w = WriterState::for_this_thread(&pool);
    for i in 0..3 {
        w.append(&pool, encode_fn(Kind::FnEnter, 5 + i, i, 0x10).as_bytes());
    }
    let slot = w.slot as usize;
    let p = peek(&pool, slot, |_| 0, &mut buf).unwrap();
    assert_eq!((p.from, p.end()), (0, 60));
    assert_eq!(buf.len(), 60);
    assert_eq!(p.info.last_tsc, 7, "the last entry's TSC");
    assert_ne!(p.info.flags & bufpool::layout::FLAG_LIVE, 0);
    let inc = Incarnation::of(&p.info);
    assert!(peek(&pool, slot, |_| 60, &mut buf).is_none(), "nothing new");
    w.append(&pool, encode_fn(Kind::FnEnter, 9, 3, 0x10).as_bytes());
    let q = peek(&pool, slot, |i| if *i == inc { 60 } else { 0 }, &mut buf).unwrap();
    assert_eq!((q.from, q.end(), q.info.lost_before), (60, 80, 0));
    assert_eq!(Decoder::new(&buf).count(), 1);
    w.flush(&pool, 0);
    assert!(
        peek(&pool, slot, |_| 0, &mut buf).is_none(),
        "published: not owned"
    );
}

#[test]
fn live_copies_and_takes_stitch_every_entry_once_under_a_fast_writer() {
    const N: u64 = 60_000;
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path(), 4);
    let done = AtomicBool::new(false);
    let got = std::thread::scope(|s| {
        s.spawn(|| {
            let mut w = WriterState::for_this_thread(&pool);
            // An entry dropped for lack of a free sub-buffer (a Lost marker follows) is
            // written again.
            let mut i = 0;
            while i < N {
                if w.append(&pool, encode_fn(Kind::FnEnter, i + 1, i, 0x10).as_bytes()) {
                    i += 1;
                } else {
                    std::thread::yield_now();
                }
            }
            w.flush(&pool, 0);
            done.store(true, Ordering::Release);
        });
        let c = Consumer::new(&pool);
        let mut copied: HashMap<Incarnation, Vec<u8>> = HashMap::new();
        let mut whole: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut buf = Vec::new();
        let mut pieces = 0;
        loop {
            let finished = done.load(Ordering::Acquire);
            for i in 0..pool.n_subbufs() {
                let from = |inc: &Incarnation| copied.get(inc).map_or(0, |v| v.len() as u32);
                if let Some(p) = peek(&pool, i, from, &mut buf) {
                    let v = copied.entry(Incarnation::of(&p.info)).or_default();
                    assert_eq!(v.len() as u32, p.from);
                    v.extend_from_slice(&buf);
                    pieces += 1;
                }
            }
            while let Some(t) = c.take() {
                let mut d = copied
                    .remove(&Incarnation::of(t.info()))
                    .unwrap_or_default();
                assert!(d.len() <= t.data().len());
                assert_eq!(&d[..], &t.data()[..d.len()], "a piece is the prefix");
                d.extend_from_slice(&t.data()[d.len()..]);
                whole.push((t.info().seq, d));
                t.release();
            }
            if finished {
                break;
            }
        }
        assert!(pieces > 0, "no live copy happened");
        whole.sort_by_key(|w| w.0);
        whole
    });
    let callers: Vec<u64> = got
        .iter()
        .flat_map(|(_, d)| {
            Decoder::new(d)
                .map(|e| e.unwrap())
                .filter(|e| e.kind == Kind::FnEnter)
                .map(|e| e.caller)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(callers.len() as u64, N);
    assert!(
        callers.iter().copied().eq(0..N),
        "every entry once, in order"
    );
}
