//! `rotated.json`: what a flight recorder (`culprit record --keep`, [`crate::keep`]) rotated
//! away, and how every reader of the directory turns that into a *window*.
//!
//! The flight recorder deletes the oldest chunk segments when the directory would pass its
//! budget. It keeps what the rest needs to decode — every metadata record (process, thread,
//! map, code, clock, injection, filter) and `Lost` marker of a rotated record, as a
//! [`FLAG_COMPACTED`] record with the same identity — and the newest record of each thread,
//! and writes here, per thread, the identity of the newest record it rotated away
//! (`until`). Readers ([`crate::TraceDir`]) then treat every *uncompacted* record of that
//! thread at or before `until` (left in another file) as rotated too, so that what remains
//! of each thread is a suffix of its records: a thread's trace begins at its window, never
//! with a hole in the middle. Sequence gaps before the window are not damage.
//!
//! The file is rewritten atomically (temporary file, fsync, rename) after every rotation.

use crate::error::{io, Error, Result};
use crate::tracedir::ThreadKey;
use bufpool::layout::{SubBufInfo, FLAG_COMPACTED};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Name of the file in the trace directory.
pub const ROTATED_FILE: &str = "rotated.json";
/// Value of [`Rotated::format`].
pub const ROTATED_FORMAT: &str = "culprit-rotated";
/// The largest `rotated.json` read (about 150 bytes per thread).
pub const MAX_ROTATED_BYTES: u64 = 64 << 20;

/// What the flight recorder of a directory rotated away.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rotated {
    /// Always [`ROTATED_FORMAT`].
    pub format: String,
    /// The disk budget (`--keep`), bytes; 0 when only an age was given.
    pub budget_bytes: u64,
    /// The age budget (`--keep-for`), ns, if any.
    pub keep_for_ns: Option<u64>,
    /// Chunk segments rotated (deleted after their metadata was kept).
    pub segments: u64,
    /// Saved sub-buffer records whose entries were rotated away.
    pub records: u64,
    /// Entries rotated away (metadata records and `Lost` markers are kept, not counted).
    pub entries: u64,
    /// Bytes of entries rotated away.
    pub bytes: u64,
    /// Bytes of disk freed.
    pub freed_bytes: u64,
    /// `CLOCK_REALTIME` ns of the last rotation.
    pub last_rotation_unix_ns: u64,
    /// Per thread, oldest first by process.
    pub threads: Vec<RotatedThread>,
}

/// One thread's window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RotatedThread {
    /// Process id.
    pub pid: u32,
    /// Process start time (clock ticks), with `pid` the process identity.
    pub start_ticks: u64,
    /// Thread id.
    pub tid: u32,
    /// `first_tsc` of the newest record rotated away.
    pub until_first_tsc: u64,
    /// Its `seq`.
    pub until_seq: u64,
    /// Its piece offset.
    pub until_piece: u32,
    /// TSC of the last entry rotated away: the thread's window starts after it.
    pub window_start_tsc: u64,
    /// Entries of this thread rotated away.
    pub entries: u64,
}

/// The order of a thread's records ([`crate::TraceDir`]'s): first TSC, seq, piece.
pub type RecordKey = (u64, u64, u32);

/// The key of a record.
pub fn record_key(info: &SubBufInfo, piece: u32) -> RecordKey {
    (info.first_tsc, info.seq, piece)
}

impl RotatedThread {
    /// The key of the newest record rotated away.
    pub fn until(&self) -> RecordKey {
        (self.until_first_tsc, self.until_seq, self.until_piece)
    }

    /// The thread.
    pub fn key(&self) -> ThreadKey {
        ThreadKey {
            pid: self.pid,
            start_ticks: self.start_ticks,
            tid: self.tid,
        }
    }
}

impl Rotated {
    /// A new, empty record of rotations for the given budgets.
    pub fn new(budget_bytes: u64, keep_for_ns: Option<u64>) -> Rotated {
        Rotated {
            format: ROTATED_FORMAT.into(),
            budget_bytes,
            keep_for_ns,
            ..Default::default()
        }
    }

    /// Reads `DIR/rotated.json`; `Ok(None)` when the directory has none (no flight
    /// recorder, or nothing rotated yet).
    pub fn read(dir: &Path) -> Result<Option<Rotated>> {
        let path = dir.join(ROTATED_FILE);
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&path, "stat")(e)),
            Ok(_) => {}
        }
        let bytes = crate::safefile::read_bounded(&path, MAX_ROTATED_BYTES)?;
        let r: Rotated = serde_json::from_slice(&bytes).map_err(|e| Error::Manifest {
            path: path.clone(),
            why: e.to_string(),
        })?;
        if r.format != ROTATED_FORMAT {
            return Err(Error::Manifest {
                path,
                why: format!("format is {:?}, not {ROTATED_FORMAT:?}", r.format),
            });
        }
        Ok(Some(r))
    }

    /// Writes `DIR/rotated.json` atomically.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(ROTATED_FILE);
        let mut text = serde_json::to_vec_pretty(self).map_err(|e| Error::Manifest {
            path: path.clone(),
            why: e.to_string(),
        })?;
        text.push(b'\n');
        crate::safefile::write_atomic(dir, ROTATED_FILE, &text)
    }

    /// Notes that a record of `thread` with key `k` was rotated away, holding `entries`
    /// entries, the last at `last_tsc`.
    pub fn note(&mut self, thread: ThreadKey, k: RecordKey, entries: u64, last_tsc: u64) {
        let i = match self.threads.binary_search_by_key(&thread, |t| t.key()) {
            Ok(i) => i,
            Err(i) => {
                self.threads.insert(
                    i,
                    RotatedThread {
                        pid: thread.pid,
                        start_ticks: thread.start_ticks,
                        tid: thread.tid,
                        ..Default::default()
                    },
                );
                i
            }
        };
        let t = &mut self.threads[i];
        if k > t.until() {
            (t.until_first_tsc, t.until_seq, t.until_piece) = k;
        }
        t.window_start_tsc = t.window_start_tsc.max(last_tsc);
        t.entries += entries;
    }

    /// Per thread, the key of its newest rotated record.
    pub fn windows(&self) -> BTreeMap<ThreadKey, RecordKey> {
        self.threads.iter().map(|t| (t.key(), t.until())).collect()
    }

    /// One line for the analyses' headers.
    pub fn describe(&self, dir: &Path) -> String {
        let mut budget = Vec::new();
        if self.budget_bytes > 0 {
            budget.push(format!(
                "{:.1} MiB",
                self.budget_bytes as f64 / (1u64 << 20) as f64
            ));
        }
        if let Some(ns) = self.keep_for_ns {
            budget.push(format!("{:.0} s", ns as f64 / 1e9));
        }
        format!(
            "{}: flight recorder (keeps {}): {} entries of {} thread(s) rotated away \
             ({} record(s), {:.1} MiB); each thread's trace begins at its window, metadata kept",
            dir.display(),
            budget.join(" / "),
            self.entries,
            self.threads.len(),
            self.records,
            self.bytes as f64 / (1u64 << 20) as f64,
        )
    }
}

/// Whether a record of a thread whose newest rotated record is `until` is outside the
/// window: older than or equal to `until`, and not a compacted record (which holds only
/// what the rest needs to decode).
pub fn outside_window(info: &SubBufInfo, piece: u32, until: Option<&RecordKey>) -> bool {
    match until {
        Some(u) => info.flags & FLAG_COMPACTED == 0 && record_key(info, piece) <= *u,
        None => false,
    }
}

/// A thread's seqs for the gap check, with what precedes its window not counted as a
/// gap: the seqs of records inside the window, renumbered from 0 within the first
/// process image (the gap check only looks at differences and at the first value).
pub fn window_seqs(seqs: Vec<u64>) -> Vec<u64> {
    const LOW: u64 = 0xffff_ffff;
    let Some(&first) = seqs.first() else {
        return seqs;
    };
    let base = first & LOW;
    seqs.into_iter()
        .map(|s| if s >> 32 == first >> 32 { s - base } else { s })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pid: u32) -> ThreadKey {
        ThreadKey {
            pid,
            start_ticks: 7,
            tid: pid,
        }
    }

    #[test]
    fn notes_keep_the_newest_key_and_sum_entries() {
        let mut r = Rotated::new(1 << 20, None);
        r.note(key(2), (10, 1, 0), 5, 20);
        r.note(key(1), (30, 3, 0), 1, 40);
        r.note(key(2), (5, 0, 0), 2, 9);
        assert_eq!(r.threads.len(), 2);
        assert_eq!(r.threads[0].pid, 1);
        let t = r.threads[1];
        assert_eq!(t.until(), (10, 1, 0));
        assert_eq!((t.entries, t.window_start_tsc), (7, 20));
    }

    #[test]
    fn the_window_hides_older_records_but_not_compacted_ones() {
        let mut info = SubBufInfo {
            first_tsc: 10,
            seq: 1,
            ..Default::default()
        };
        let until = (10, 1, 0);
        assert!(outside_window(&info, 0, Some(&until)));
        assert!(!outside_window(&info, 8, Some(&until)));
        assert!(!outside_window(&info, 0, None));
        info.flags |= FLAG_COMPACTED;
        assert!(!outside_window(&info, 0, Some(&until)));
    }

    #[test]
    fn seqs_before_the_window_are_not_a_gap_but_gaps_inside_are() {
        assert_eq!(window_seqs(vec![5, 6, 7]), [0, 1, 2]);
        assert_eq!(window_seqs(vec![5, 7]), [0, 2]);
        assert_eq!(window_seqs(vec![5, (1 << 32) | 1]), [0, (1 << 32) | 1]);
        assert!(window_seqs(vec![]).is_empty());
    }
}
