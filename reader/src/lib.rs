//! `reader` — Culprit's reader: drains the shared-memory pool into a trace directory,
//! and reads trace directories back.
//!
//! - [`daemon`]: drain threads, the periodic repair pass, the final drain ([`run`]).
//! - [`chunkfile`]: appending records to chunk files; cutting torn tails ([`repair`]).
//! - [`live`]: saving the committed prefix of sub-buffers writers still fill (pieces).
//! - [`clocksnap`]: clock snapshots (TSC against both clocks) and the host's boot id.
//! - [`manifest`]: `manifest.json` — host, command, times, calibration, geometry,
//!   processes, totals.
//! - [`tracedir`]: [`TraceDir`] — every saved sub-buffer per thread, in order, once.
//! - [`damage`]: skipping damaged and missing parts, one warning per file ([`Damage`]).
//! - [`repairdir`]: `culprit repair` — what a full disk or a killed reader left.
//! - [`safefile`]: opening files safely (regular files only, bounded reads).
//! - [`scanned`]: what lazy opens found in each chunk file, remembered between opens.
//! - [`summary`]: per-process counts and totals of a directory.
//! - [`cpustat`]: the traced processes' CPU time, sampled into `cpu.tsv`.
//! - [`watch`]: whether any other process still maps the pool.
//! - [`signals`]: stopping on SIGINT / SIGTERM.
//! - [`stopmark`]: `stop.json`, when a recording session was asked to stop.
//! - [`tree`]: following a traced process tree (subreaper, reaping, descendants).
//! - [`session`]: a whole recording (`culprit record`): pool, readers, the traced command
//!   supervised, signals passed on, exit status and summary.
//!
//! The file layout itself is documented in `bufpool::disk`.
//!
//! ```
//! use bufpool::{format, Pool, PoolConfig, WriterState};
//! use std::sync::atomic::AtomicBool;
//! # let tmp = tempfile::tempdir().unwrap();
//! let pool = Pool::create(tmp.path().join("pool"), &PoolConfig {
//!     n_subbufs: 4, subbuf_size: 8192, ..Default::default() }).unwrap();
//! let me = pool.holder();
//! let mut w = WriterState::new();
//! w.attach(&pool, me.pid, bufpool::sys::proc_stat(me.pid).unwrap().2, bufpool::sys::gettid());
//! w.append(&pool, format::encode_fn(format::Kind::FnEnter, 1, 0x10, 0x20).as_bytes());
//! w.flush(&pool, 0);
//!
//! let out = tmp.path().join("trace");
//! let stop = AtomicBool::new(true); // drain what is there, then stop
//! reader::run(&pool, &out, &reader::ReaderOptions::default(), &stop).unwrap();
//!
//! let trace = reader::TraceDir::open(&out).unwrap();
//! let t = trace.threads().next().unwrap();
//! let mut n = 0;
//! trace.for_each_entry(t, |_, _| { n += 1; Ok(()) }).unwrap();
//! assert_eq!(n, 1);
//! assert_eq!(trace.manifest().totals.entries, 1);
//! ```
#![deny(missing_docs)]

pub mod chunkfile;
pub mod clocksnap;
pub mod cpustat;
pub mod daemon;
pub mod damage;
pub mod error;
pub mod iosample;
pub mod keep;
pub mod live;
pub mod manifest;
pub mod repairdir;
pub mod rotated;
pub mod safefile;
pub mod scanned;
pub mod session;
pub mod signals;
pub mod snapshot;
pub mod stopmark;
pub mod summary;
pub mod tracedir;
pub mod tree;
pub mod watch;

pub use chunkfile::{repair, ChunkWriter, Repaired};
pub use daemon::{run, ReaderOptions, ReaderReport};
pub use damage::Damage;
pub use error::{Error, Result};
pub use manifest::{Manifest, ProcessInfo, Totals};
pub use repairdir::{repair_dir, RepairReport};
pub use summary::{summarize, Summary};
pub use tracedir::{Chunk, LoadedRecord, OpenOptions, ThreadKey, TraceDir};
