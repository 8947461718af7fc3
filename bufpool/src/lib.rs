//! `bufpool` — Culprit's shared-memory sub-buffer pool and trace entry format.
//!
//! This crate is the contract every other part of Culprit speaks:
//!
//! - [`format`](mod@format): how one event is encoded (16 to 148 bytes, little-endian), the fixed
//!   ids of wrapped libc functions, metadata records, and a decoder that never panics.
//! - [`layout`]: the pool file — header with geometry and TSC calibration, the state
//!   table, and sub-buffers with their headers.
//! - [`slots`]: the crash-proof, lock-free handoff of sub-buffers between writer and
//!   reader processes (one CAS per transition on a per-sub-buffer word).
//! - [`writer`], [`consumer`], [`salvage`](mod@salvage): the three roles; [`live`]: a
//!   reader's copy of the committed prefix of a sub-buffer a writer is still filling.
//!
//! ```
//! use bufpool::{Pool, PoolConfig, WriterState, Consumer, format};
//! # let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("pool");
//! let cfg = PoolConfig { n_subbufs: 4, subbuf_size: 8192, ..Default::default() };
//! let pool = Pool::create(&path, &cfg).unwrap();
//!
//! // A writer thread appends entries…
//! let me = pool.holder();
//! let mut w = WriterState::new();
//! w.attach(&pool, me.pid, bufpool::sys::proc_stat(me.pid).unwrap().2, bufpool::sys::gettid());
//! let e = format::encode_fn(format::Kind::FnEnter, 42, 0x401000, 0x402000);
//! assert!(w.append(&pool, e.as_bytes()));
//! w.flush(&pool, 0);
//!
//! // …and a reader drains them.
//! let c = Consumer::new(&pool);
//! let t = c.take().unwrap();
//! let entries = format::decode_all(t.data()).unwrap();
//! assert_eq!(entries.len(), 1);
//! t.release();
//! ```
//!
//! Under `--cfg loom` only the protocol parts are built ([`slots`] with loom's atomics,
//! plus the format), for the model checks in `slots::loom_model` and `live_model` (the
//! live copy of an owned sub-buffer's committed prefix) (`bufpool/loom.sh`).
#![deny(missing_docs)]

#[cfg(not(loom))]
pub mod access;
#[cfg(not(loom))]
pub mod consumer;
pub mod disk;
pub mod error;
pub mod format;
pub mod inject;
pub mod layout;
#[cfg(not(loom))]
pub mod live;
#[cfg(all(test, loom))]
mod live_model;
#[cfg(not(loom))]
pub mod pending;
#[cfg(not(loom))]
pub mod pool;
#[cfg(not(loom))]
pub mod salvage;
pub mod slots;
pub mod sync;
pub mod sys;
#[cfg(not(loom))]
pub mod writer;

#[cfg(not(loom))]
pub use consumer::{Consumer, Taken};
pub use error::PoolError;
pub use layout::{Calibration, PoolInfo, SubBufInfo};
#[cfg(not(loom))]
pub use pool::{Pool, PoolConfig, POOL_ENV};
#[cfg(not(loom))]
pub use salvage::{salvage, salvage_dead, LivenessOracle, ProcOracle, SalvageReport};
pub use slots::{Holder, State};
#[cfg(not(loom))]
pub use writer::WriterState;
