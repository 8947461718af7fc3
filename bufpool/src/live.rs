//! The live data path: a reader copies the committed prefix of a sub-buffer that a live
//! writer still owns, so entries reach the trace directory while the sub-buffer is still
//! filling (`culprit demand --follow`, a thread that goes idle with a partly filled
//! sub-buffer), without any change to the writer's hot path.
//!
//! # Protocol (FORMAT.md §4.6)
//!
//! The writer already publishes its committed length per entry: it copies the entry's
//! bytes, then stores the new `bytes_used` with `Release` (§4.4). Bytes below
//! `bytes_used` are never written again while that sub-buffer *incarnation* — identified
//! by the header's (pid, owner start time, tid, seq, first TSC) — lasts: the data area is
//! append-only until the writer publishes it and a reader takes, saves, resets and
//! releases it. A reader that holds nothing may therefore copy, without taking the slot:
//!
//! 1. `w1` = the state word (`Acquire`); only `OWNED` words are peeked;
//! 2. `id1` = the header identity (`Relaxed`; a header with tid 0 is still being filled);
//! 3. `used` = `bytes_used` (`Acquire`, pairs with the writer's `Release` store: every
//!    byte below `used` is a whole committed entry of the incarnation that stored it);
//! 4. copy bytes `from .. used`, where `from` is what this reader already saved of `id1`;
//! 5. an `Acquire` fence, then `id2` = the identity again and `w2` = the word again. The
//!    copy is kept only if `id2 == id1` and `w2 == w1`.
//!
//! Step 5 is a sequence-lock read. The slot can only be reused after its writer published
//! it and a reader reset the header (tid 0) and released it; the next writer stores its
//! new identity and then, after a `Release` fence ([`crate::writer`]'s `obtain`, once per
//! sub-buffer), its first entry. If the copy read any byte of a later incarnation, the
//! `Acquire` fence makes the identity read after it see that incarnation's (or the reset
//! header's) identity, which differs from `id1` (seq grows per thread, tid differs across
//! threads, first TSC differs across an exec): the copy is discarded and tried again at
//! the next poll. If `used` was read from a later incarnation, the `Acquire` load already
//! makes `id2` differ. A repair pass that seizes the slot meanwhile changes the word.
//!
//! What a live copy never does: take the slot, write to the pool, or make the writer
//! wait, retry or call the kernel. The writer's cost is unchanged except for the cache
//! line of the header, read by the reader once per poll.
//!
//! Exactly once is the reader's job: it remembers, per incarnation, how many bytes it
//! saved (`from`), saves each new prefix as a *piece* record (`crate::disk`, flag
//! [`FLAG_LIVE`]) and, when it finally takes the published sub-buffer, saves only the
//! rest. A reader that dies loses that memory; the next one rebuilds it from the pieces
//! on disk (`reader::live`).

use crate::format::Decoder;
use crate::layout::{SubBufInfo, FLAG_LIVE};
use crate::pool::Pool;
use crate::slots::State;
use core::sync::atomic::{fence, Ordering};

/// The identity of one sub-buffer incarnation: (pid, owner start time, tid, seq, first
/// TSC) — the key readers deduplicate by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Incarnation {
    /// Writer process id.
    pub pid: u32,
    /// Writer process start time in clock ticks.
    pub start_ticks: u64,
    /// Writer thread id.
    pub tid: u32,
    /// Per-thread sequence number.
    pub seq: u64,
    /// TSC of the first entry.
    pub first_tsc: u64,
}

impl Incarnation {
    /// The incarnation a saved or peeked header describes.
    pub fn of(info: &SubBufInfo) -> Incarnation {
        Incarnation {
            pid: info.pid,
            start_ticks: info.owner_start_ticks,
            tid: info.tid,
            seq: info.seq,
            first_tsc: info.first_tsc,
        }
    }
}

/// A committed prefix copied out of a sub-buffer its writer still owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The header as a piece record carries it: the incarnation's identity, flags with
    /// [`FLAG_LIVE`] added, `bytes_used` = the piece's length, `last_tsc` = its last
    /// entry's TSC, and `lost_before` only for the first piece (`from` = 0).
    pub info: SubBufInfo,
    /// Offset of the piece in the data area (what was saved before).
    pub from: u32,
}

impl Piece {
    /// The end offset of the piece: what is saved once it is.
    pub fn end(&self) -> u32 {
        self.from + self.info.bytes_used
    }
}

/// Loads the header fields that identify an incarnation, and the ones a piece record
/// copies (`Relaxed`: ordered by the caller's `Acquire` load or fence).
fn header_snapshot(pool: &Pool, i: usize) -> SubBufInfo {
    let h = pool.subbuf_header(i);
    let r = Ordering::Relaxed;
    SubBufInfo {
        magic: h.magic.load(r),
        flags: h.flags.load(r),
        pid: h.pid.load(r),
        tid: h.tid.load(r),
        seq: h.seq.load(r),
        first_tsc: h.first_tsc.load(r),
        last_tsc: 0,
        lost_before: h.lost_before.load(r),
        bytes_used: 0,
        data_size: h.data_size.load(r),
        owner_start_ticks: h.owner_start_ticks.load(r),
    }
}

/// Copies the committed bytes of sub-buffer `i` past `from(incarnation)` onto `buf`
/// (cleared first), if a live writer owns it and has committed more than that. `from`
/// is asked for the incarnation found (what the caller saved of it before; 0 if
/// nothing). Returns `None` when there is nothing new, the slot is not `OWNED`, or the
/// copy could not be validated (the slot moved on meanwhile: try again later).
pub fn peek(
    pool: &Pool,
    i: usize,
    from: impl FnOnce(&Incarnation) -> u32,
    buf: &mut Vec<u8>,
) -> Option<Piece> {
    let slots = pool.slots();
    let w1 = slots.load(i)?;
    if w1.state != State::Owned {
        return None;
    }
    let id1 = header_snapshot(pool, i);
    if id1.tid == 0 || id1.magic != crate::layout::SUBBUF_MAGIC {
        return None;
    }
    let from = from(&Incarnation::of(&id1));
    let h = pool.subbuf_header(i);
    let used = h.bytes_used.load(Ordering::Acquire);
    if used <= from || used as usize > pool.data_size() {
        return None;
    }
    buf.clear();
    let n = (used - from) as usize;
    buf.reserve(n);
    // SAFETY: `from < used <= data_size`, so the range lies inside sub-buffer `i`'s data
    // area in the mapping. The bytes are plain memory another process may be writing
    // only if the slot was recycled since `w1` (then the check below discards them);
    // below `used` they are otherwise stable (append-only). `buf` has room for `n` bytes
    // and does not overlap the pool.
    unsafe {
        core::ptr::copy_nonoverlapping(pool.subbuf_data(i).add(from as usize), buf.as_mut_ptr(), n);
        buf.set_len(n);
    }
    // Acquire fence: if the copy read a byte of a later incarnation, the identity loads
    // below see that incarnation's header (its writer stored it before a Release fence,
    // then the bytes).
    fence(Ordering::Acquire);
    let id2 = header_snapshot(pool, i);
    let w2 = slots.load(i)?;
    if w2 != w1 || Incarnation::of(&id2) != Incarnation::of(&id1) {
        buf.clear();
        return None;
    }
    let mut info = id1;
    info.flags |= FLAG_LIVE;
    info.bytes_used = n as u32;
    info.last_tsc = last_tsc(buf).unwrap_or(info.first_tsc);
    if from > 0 {
        info.lost_before = 0;
    }
    Some(Piece { info, from })
}

/// The TSC of the last decodable entry of `data`.
fn last_tsc(data: &[u8]) -> Option<u64> {
    Decoder::new(data)
        .map_while(|e| e.ok())
        .last()
        .map(|e| e.tsc)
}
