//! Reading only the end of each thread: what `culprit watch` needs on each poll, having
//! read what came before on an earlier one.
//!
//! [`TraceDir::restrict`] leaves out each named thread's records up to a key, as a flight
//! recorder's window does (its `COMPACTED` records stay: they precede every window);
//! [`TraceDir::begins_mid_run`] then says the thread's trace starts mid-run, so its first
//! unit is marked cut at its start. What the left-out records said about descriptors and
//! the process — metadata, loss markers, the calls that say what a descriptor is — is
//! kept by the caller ([`kept_entries`] on each record once, [`TraceDir::visit_chunks_where`]).

use super::{ChunkRef, ThreadKey, TraceDir};
use crate::error::Error;
use crate::rotated::{record_key, RecordKey};
use bufpool::format::{Decoder, Kind, LibFn};
use bufpool::layout::FLAG_COMPACTED;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

/// One record of a thread: its key, whether it is `COMPACTED` and the TSC its header
/// gives as its last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordId {
    /// First TSC, seq, piece.
    pub key: RecordKey,
    /// A flight recorder's compacted record (metadata only).
    pub compacted: bool,
    /// Its header's `last_tsc`: no entry of the record is later. A live piece's is its
    /// last entry's TSC (the reader decoded it); a published sub-buffer's (or its rest's)
    /// the TSC its writer published it at — the next entry's, or the time of a flush —,
    /// never earlier than its entries. Less than `key.0` when unknown (never published:
    /// a dead writer's sub-buffer read from the pool).
    pub last_tsc: u64,
}

/// Copies onto `out` the entries of `data` (one record's entries) that later entries need
/// to be read right: metadata records, the entry and exit of the calls that say what a
/// descriptor is ([`LibFn::describes_descriptor`]) and, if `lost`, `Lost` markers. Returns
/// the count of the other entries and the TSC of the last of them (`first_tsc` when
/// none). Stops at the first entry that does not decode.
pub fn kept_entries(data: &[u8], first_tsc: u64, lost: bool, out: &mut Vec<u8>) -> (u64, u64) {
    let (mut others, mut last_tsc) = (0u64, first_tsc);
    for e in Decoder::new(data) {
        let Ok(e) = e else { break };
        if e.kind == Kind::Lost && !lost {
            continue;
        }
        let keep = e.kind.is_meta()
            || e.kind == Kind::Lost
            || e.lib_fn().is_some_and(LibFn::describes_descriptor);
        if keep {
            let at = e.offset as usize;
            out.extend_from_slice(&data[at..at + e.size]);
        } else {
            others += 1;
            last_tsc = last_tsc.max(e.tsc);
        }
    }
    (others, last_tsc)
}

/// The offset in `data` (one record's entries) of its first entry at or after `tsc` —
/// its length if there is none, the offset of the first entry that does not decode if
/// that comes first —, copying onto `out` what the entries before it keep for later
/// ones ([`kept_entries`], `Lost` markers left out: they were counted where those entries
/// were read whole).
pub fn kept_before(data: &[u8], tsc: u64, out: &mut Vec<u8>) -> usize {
    for e in Decoder::new(data) {
        let e = match e {
            Ok(e) => e,
            Err(err) => return (err.offset as usize).min(data.len()),
        };
        let at = e.offset as usize;
        if e.tsc >= tsc {
            return at;
        }
        if e.kind.is_meta() || e.lib_fn().is_some_and(LibFn::describes_descriptor) {
            out.extend_from_slice(&data[at..at + e.size]);
        }
    }
    data.len()
}

impl TraceDir {
    /// Leaves out, for each thread of `after`, its records at or before the key given
    /// (`COMPACTED` records excepted); such a thread [begins mid-run](Self::begins_mid_run)
    /// if any record was left out.
    pub fn restrict(&mut self, after: &BTreeMap<ThreadKey, RecordKey>) {
        for (k, until) in after {
            if let Some(list) = self.threads.get_mut(k) {
                let before = list.len();
                list.retain(|l| {
                    l.info.flags & FLAG_COMPACTED != 0 || record_key(&l.info, l.piece) > *until
                });
                if list.len() < before {
                    self.restricted.insert(*k);
                }
            }
        }
    }

    /// The *holes* in thread `key`'s records, in a directory still being written, in
    /// order: the key of each (non-`COMPACTED`) record that does not follow the one before
    /// it — its seq is not the next one (the sub-buffers between are in flight: two drain
    /// threads and the live copier write them in no common order), the sub-buffer before
    /// it was saved only in [`FLAG_LIVE`](bufpool::layout::FLAG_LIVE) pieces (its rest is
    /// in flight), or it is a piece that does not begin where the pieces before it end.
    /// The first record is a hole too when it is not where the thread's trace begins
    /// (seq 0 of a process image, piece 0) and the thread does not
    /// [begin mid-run](Self::begins_mid_run). Empty: every record follows the one before.
    ///
    /// What lies after a hole is read by no one that wants a thread's units whole
    /// before the hole is filled: a unit that spans it lacks the entries in flight.
    pub fn holes(&self, key: ThreadKey) -> Vec<RecordKey> {
        let mut holes = Vec::new();
        const LOW: u64 = 0xffff_ffff;
        // The previous record's sub-buffer (first TSC, seq), whether a record of it is
        // not a live piece (it is whole on disk), and the end of its data on disk.
        let mut prev: Option<((u64, u64), bool, u32)> = None;
        let mid_run = self.begins_mid_run(key);
        for l in self.threads.get(&key).into_iter().flatten() {
            if l.info.flags & FLAG_COMPACTED != 0 {
                continue;
            }
            let sub = (l.info.first_tsc, l.info.seq);
            let live = l.info.flags & bufpool::layout::FLAG_LIVE != 0;
            let end = l.piece + l.info.bytes_used;
            let (hole, next) = match prev {
                None => (
                    !mid_run && (l.info.seq & LOW != 0 || l.piece != 0),
                    (sub, !live, end),
                ),
                Some((p, whole, e)) if p == sub => (l.piece > e, (sub, whole || !live, e.max(end))),
                Some(((_, p), whole, _)) => {
                    let s = l.info.seq;
                    let seq_ok = if s >> 32 == p >> 32 {
                        s <= p + 1
                    } else {
                        s & LOW == 0
                    };
                    (!whole || !seq_ok || l.piece != 0, (sub, !live, end))
                }
            };
            if hole {
                holes.push(record_key(&l.info, l.piece));
            }
            prev = Some(next);
        }
        holes
    }

    /// Leaves out, for each thread of `from`, its (non-`COMPACTED`) records at or after
    /// the key given: what follows a [hole](Self::holes) in a directory still being
    /// written.
    pub fn cut_from(&mut self, from: &BTreeMap<ThreadKey, RecordKey>) {
        for (k, at) in from {
            if let Some(list) = self.threads.get_mut(k) {
                list.retain(|l| {
                    l.info.flags & FLAG_COMPACTED != 0 || record_key(&l.info, l.piece) < *at
                });
            }
        }
    }

    /// True if the trace of thread `key` begins mid-run: a flight recorder rotated some of
    /// its entries away, or [`TraceDir::restrict`] left some of its records out.
    pub fn begins_mid_run(&self, key: ThreadKey) -> bool {
        self.restricted.contains(&key)
            || self
                .rotated
                .as_ref()
                .is_some_and(|r| r.threads.iter().any(|t| t.key() == key && t.entries > 0))
    }

    /// The records of thread `key`, in order (no data read).
    pub fn record_ids(&self, key: ThreadKey) -> Vec<RecordId> {
        self.threads
            .get(&key)
            .into_iter()
            .flatten()
            .map(|l| RecordId {
                key: record_key(&l.info, l.piece),
                compacted: l.info.flags & FLAG_COMPACTED != 0,
                last_tsc: l.info.last_tsc,
            })
            .collect()
    }

    /// [`TraceDir::visit_chunks`] for the records of `key` that `wanted` picks (by their
    /// header and piece offset); the others are not read.
    pub fn visit_chunks_where<E: From<Error>>(
        &self,
        key: ThreadKey,
        wanted: impl Fn(&bufpool::SubBufInfo, u32) -> bool,
        mut f: impl FnMut(ChunkRef<'_>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        // One buffer per thread, kept between calls: a record is up to a sub-buffer, and a
        // fresh buffer of that size costs its pages again on every call (a watch makes
        // two calls per thread traced every poll). A call made from `f` gets a new one.
        thread_local! {
            static BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
        }
        let mut buf = BUF.with(std::cell::Cell::take);
        let mut visit = || {
            for loc in self.threads.get(&key).into_iter().flatten() {
                if loc.bad.load(Ordering::Relaxed) || !wanted(&loc.info, loc.piece) {
                    continue;
                }
                let data_offset = match self.read_into(loc, &mut buf) {
                    Ok(o) => o,
                    Err(e) => {
                        self.skip_bad(loc, e)?;
                        continue;
                    }
                };
                f(ChunkRef {
                    info: &loc.info,
                    piece: loc.piece,
                    data: &buf[bufpool::disk::RECORD_FIXED_SIZE..],
                    path: &self.files[loc.file as usize].0,
                    data_offset,
                })?;
            }
            Ok(())
        };
        let r = visit();
        BUF.with(|b| b.set(buf));
        r
    }
}
