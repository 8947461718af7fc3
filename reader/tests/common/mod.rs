//! Helpers shared by the reader's integration tests.

use bufpool::format::{encode_fn, Kind};
use bufpool::{Pool, PoolConfig, WriterState};
use reader::{Chunk, ReaderOptions, TraceDir};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// A complete trace of one thread in `tmp/trace`: `entries` function entries written into a
/// pool of `n_subbufs` 8 KiB sub-buffers (several sub-buffers) and drained into one chunk
/// file. Returns the directory and that chunk file.
#[allow(dead_code)] // not every test crate that includes this module uses it
pub fn good_trace(tmp: &Path, n_subbufs: u32, entries: u64) -> (PathBuf, PathBuf) {
    let out = write_trace(tmp, n_subbufs, &[], 0..entries);
    let files = reader::tracedir::chunk_files(&out).unwrap();
    assert_eq!(files.len(), 1);
    (out, files[0].clone())
}

/// The records of one thread in `tmp/trace`: `first` (an encoded record, or nothing), then
/// function entries 1 to 2 999 (caller = their index) over several of 16 sub-buffers.
/// Returns the directory and the thread's chunks, in order.
#[allow(dead_code)] // not every test crate that includes this module uses it
pub fn thread_chunks(tmp: &Path, first: &[u8]) -> (PathBuf, Vec<Chunk>) {
    let out = write_trace(tmp, 16, first, 1..3000);
    let t = TraceDir::open(&out).unwrap();
    let key = t.threads().next().unwrap();
    let chunks: Vec<Chunk> = t.chunks(key).map(Result::unwrap).collect();
    assert!(chunks.len() >= 4, "several sub-buffers: {}", chunks.len());
    (out, chunks)
}

/// Writes `first` and the function entries `entries` into a pool of `n_subbufs` 8 KiB
/// sub-buffers and drains it into `tmp/trace` with one drain thread.
fn write_trace(tmp: &Path, n_subbufs: u32, first: &[u8], entries: Range<u64>) -> PathBuf {
    let pool = Pool::create(
        tmp.join("pool"),
        &PoolConfig {
            n_subbufs,
            subbuf_size: 8192,
            calibration: Duration::from_millis(1),
            ..Default::default()
        },
    )
    .unwrap();
    let mut w = WriterState::for_this_thread(&pool);
    if !first.is_empty() {
        assert!(w.append(&pool, first));
    }
    for i in entries {
        assert!(w.append(&pool, encode_fn(Kind::FnEnter, i, i, 0x4000).as_bytes()));
    }
    w.flush(&pool, 0);
    let out = tmp.join("trace");
    let opts = ReaderOptions {
        workers: 1,
        ..Default::default()
    };
    reader::run(&pool, &out, &opts, &AtomicBool::new(true)).unwrap();
    out
}
