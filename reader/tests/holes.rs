//! Holes in a directory still being written (`TraceDir::holes`): a sub-buffer missing from
//! the sequence, a sub-buffer saved only in live pieces followed by a later one, and a
//! first record that is not where the thread's trace begins — each found at the record
//! after the hole, and gone once the missing records are on disk.

mod common;

use bufpool::layout::FLAG_LIVE;
use reader::chunkfile::ChunkWriter;
use reader::rotated::record_key;
use reader::{Chunk, TraceDir};
use std::path::Path;

/// The records of the one thread of a complete trace of several sub-buffers.
fn records(tmp: &Path) -> (std::path::PathBuf, Vec<Chunk>) {
    let (dir, _) = common::good_trace(tmp, 8, 3000);
    let t = TraceDir::open(&dir).unwrap();
    let key = t.threads().next().unwrap();
    let chunks: Vec<Chunk> = t.chunks(key).map(Result::unwrap).collect();
    assert!(chunks.len() >= 4, "several sub-buffers: {}", chunks.len());
    assert!(chunks
        .iter()
        .enumerate()
        .all(|(i, c)| c.info.seq == i as u64));
    (dir, chunks)
}

/// A directory with `good`'s manifest and the records `parts` (header, piece offset,
/// data) in one chunk file; its thread's holes.
fn holes_of(good: &Path, out: &Path, parts: &[(bufpool::SubBufInfo, u32, &[u8])]) -> Vec<u64> {
    std::fs::create_dir_all(out).unwrap();
    std::fs::copy(good.join("manifest.json"), out.join("manifest.json")).unwrap();
    let mut w = ChunkWriter::create(out, 1, 0, 0).unwrap();
    for (info, piece, data) in parts {
        w.append_piece(info, *piece, data).unwrap();
    }
    w.sync().unwrap();
    drop(w);
    let t = TraceDir::open(out).unwrap();
    let key = t.threads().next().unwrap();
    t.holes(key).iter().map(|k| k.1).collect()
}

/// Records borrowed.
fn refs(v: &[(bufpool::SubBufInfo, u32, Vec<u8>)]) -> Vec<(bufpool::SubBufInfo, u32, &[u8])> {
    v.iter().map(|(i, p, d)| (*i, *p, d.as_slice())).collect()
}

#[test]
fn holes_are_found_after_missing_and_unfinished_sub_buffers() {
    let tmp = tempfile::tempdir().unwrap();
    let (good, c) = records(tmp.path());
    let whole = |c: &Chunk| (c.info, 0, c.data.clone());
    let all: Vec<_> = c.iter().map(whole).collect();
    let seq = |k: &[u64]| k.to_vec();
    assert_eq!(
        holes_of(&good, &tmp.path().join("a"), &refs(&all)),
        seq(&[])
    );

    // Sub-buffer 2 in flight: the hole is at 3.
    let mut v = all.clone();
    v.remove(2);
    assert_eq!(holes_of(&good, &tmp.path().join("b"), &refs(&v)), seq(&[3]));

    // Sub-buffer 0 in flight: the first record (1) is not where the trace begins.
    assert_eq!(
        holes_of(&good, &tmp.path().join("c"), &refs(&all[1..])),
        seq(&[1])
    );

    // Sub-buffer 1 saved as a live piece (its first entries) and sub-buffer 2 already
    // whole: its rest is in flight, the hole is at 2 …
    let entry = c[1].entries().next().unwrap().unwrap().size;
    let half = (c[1].data.len() / 2 / entry * entry) as u32;
    let mut live = c[1].info;
    live.flags |= FLAG_LIVE;
    let mut v = vec![
        all[0].clone(),
        (live, 0, c[1].data[..half as usize].to_vec()),
    ];
    v.extend(all[2..].iter().cloned());
    assert_eq!(holes_of(&good, &tmp.path().join("d"), &refs(&v)), seq(&[2]));
    // … a live piece at the end is no hole (its writer is still filling it) …
    assert_eq!(
        holes_of(&good, &tmp.path().join("e"), &refs(&v[..2])),
        seq(&[])
    );
    // … and once the rest is saved, there is none.
    v.insert(2, (c[1].info, half, c[1].data[half as usize..].to_vec()));
    assert_eq!(holes_of(&good, &tmp.path().join("f"), &refs(&v)), seq(&[]));
    // A rest that does not begin where the piece before it ended is one.
    let mut w = v.clone();
    w[2] = (
        c[1].info,
        half + entry as u32,
        c[1].data[half as usize + entry..].to_vec(),
    );
    assert_eq!(holes_of(&good, &tmp.path().join("g"), &refs(&w)), seq(&[1]));
}

#[test]
fn cut_from_leaves_out_what_follows_a_hole() {
    let tmp = tempfile::tempdir().unwrap();
    let (good, c) = records(tmp.path());
    let out = tmp.path().join("cut");
    let mut v: Vec<_> = c
        .iter()
        .map(|c| (c.info, 0u32, c.data.as_slice()))
        .collect();
    v.remove(1);
    assert_eq!(holes_of(&good, &out, &v), [2]);
    let mut t = TraceDir::open(&out).unwrap();
    let key = t.threads().next().unwrap();
    let at = t.holes(key)[0];
    assert_eq!(at, record_key(&c[2].info, 0));
    t.cut_from(&[(key, at)].into_iter().collect());
    let left: Vec<u64> = t.record_ids(key).iter().map(|r| r.key.1).collect();
    assert_eq!(left, [0]);
    assert!(t.holes(key).is_empty());
}
