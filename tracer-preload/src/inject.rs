//! Fault-injection seam (filled in by issue 6; this version passes everything through).
//!
//! Every data-path wrapper (`recv*`, `read*`, `send*`, `write*`, `connect`, `accept*`,
//! `select`/`poll`/`epoll_wait*`, `close`) goes through one place
//! (`wrap::seam::data_call` and the few calls built the same way) which:
//!
//! 1. if [`enabled`] — a cheap check, inlined into every wrapper — calls [`before`] with
//!    what it knows of the call. `Some(Forced)` means: skip the real call; the program
//!    sees `ret`, and errno `errno` when `ret < 0`. The `LibEnter` and `LibExit` entries
//!    carry the `Inject` option with `rule`.
//! 2. otherwise makes the real call and, if [`enabled`], calls [`after`] with the
//!    outcome (`ret`, `errno`) and the bytes the call moved ([`Data`]). `after` may change
//!    the outcome (a short count, an error) or the bytes (corruption), or act on the fd
//!    itself (close it with a raw system call); it returns the rule id when it changed
//!    anything, which goes into the `LibExit` entry's `Inject` option.
//!
//! Both run inside the traced program: no allocation, no lock, no panic, and any system
//! call raw (`bufpool::sys`, `crate::sysx`). To record the ground-truth `MetaInject`
//! record, use `crate::record::with_thread` + `crate::record::append` with an encoded
//! record (see `crate::metabody::MetaOut`).

use bufpool::format::LibFn;

/// What a wrapper knows about a call before making it.
#[derive(Clone, Copy, Debug)]
pub struct CallInfo {
    /// The wrapped function.
    pub func: LibFn,
    /// Its fd (the epoll fd for `epoll_wait`, -1 for `select`/`poll`).
    pub fd: i32,
    /// Bytes requested (sum of the iovec for vector calls; 0 where meaningless).
    pub len: u64,
}

/// A result to return instead of making the real call.
#[derive(Clone, Copy, Debug)]
pub struct Forced {
    /// Return value the program sees.
    pub ret: i64,
    /// errno the program sees when `ret < 0`.
    pub errno: i32,
    /// Id of the rule that forced it.
    pub rule: u32,
}

/// The outcome of the real call as the program will see it; [`after`] may change it.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    /// Return value.
    pub ret: i64,
    /// errno (meaningful when `ret < 0`).
    pub errno: i32,
}

/// The bytes a call moved.
#[derive(Clone, Copy, Debug)]
pub enum Data {
    /// Nothing (or not applicable).
    None,
    /// A flat buffer: pointer and the number of bytes the call returned.
    Buf(*mut u8, usize),
    /// A scatter/gather vector and its length; the call moved `Outcome::ret` bytes.
    Iov(*const libc::iovec, usize),
}

/// Whether any fault rule is active in this process (inlined into every wrapper).
#[inline(always)]
pub fn enabled() -> bool {
    false
}

/// Called before the real call; `Some` skips it.
#[inline]
pub fn before(_call: &CallInfo) -> Option<Forced> {
    None
}

/// Called after the real call; returns the rule id if it changed the outcome or data.
#[inline]
pub fn after(_call: &CallInfo, _out: &mut Outcome, _data: Data) -> Option<u32> {
    None
}
