//! Helpers shared by the reader's integration tests.

use bufpool::format::{encode_fn, Kind};
use bufpool::{Pool, PoolConfig, WriterState};
use reader::ReaderOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// A complete trace of one thread in `tmp/trace`: `entries` function entries written into a
/// pool of `n_subbufs` 8 KiB sub-buffers (several sub-buffers) and drained into one chunk
/// file. Returns the directory and that chunk file.
pub fn good_trace(tmp: &Path, n_subbufs: u32, entries: u64) -> (PathBuf, PathBuf) {
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
    for i in 0..entries {
        assert!(w.append(&pool, encode_fn(Kind::FnEnter, i, i, 0x4000).as_bytes()));
    }
    w.flush(&pool, 0);
    let out = tmp.join("trace");
    let opts = ReaderOptions {
        workers: 1,
        ..Default::default()
    };
    reader::run(&pool, &out, &opts, &AtomicBool::new(true)).unwrap();
    let files = reader::tracedir::chunk_files(&out).unwrap();
    assert_eq!(files.len(), 1);
    (out, files[0].clone())
}
