//! The atomics the handoff protocol uses: `core`'s normally, loom's under `--cfg loom`
//! so the protocol in [`crate::slots`] can be model-checked in one process.

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicU64, Ordering};

#[cfg(not(loom))]
pub use core::sync::atomic::{AtomicU64, Ordering};
