//! What a lazy open found in each chunk file, remembered between opens of a process that
//! opens a directory being written again and again (`culprit watch`, once a poll), so
//! that each open reads only the record headers written since the last one.
//!
//! Chunk files are only appended to while a recording runs (a drain thread's segment, the
//! live copier's pieces, a flight recorder's keep file); a segment rotated away is deleted,
//! and a torn tail is cut only by a reader starting again on the directory or by
//! `culprit repair`. So a file with the same device and inode, no shorter than what was
//! scanned, whose last scanned record's fixed part (header and sub-buffer info) reads the
//! same bytes at the same offset, still holds the records scanned before: they are
//! replayed and the scan goes on from there. Anything else (another inode, a shorter
//! file, another last record) is scanned again from the start. A scan that found damage
//! is not remembered: the next open scans that file whole again and finds it again.
//!
//! Off unless [`remember`] was called (a one-shot analysis would only hold the memory).

use bufpool::disk::RECORD_FIXED_SIZE;
use bufpool::layout::SubBufInfo;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static ON: AtomicBool = AtomicBool::new(false);
static FILES: Mutex<Option<HashMap<PathBuf, Scanned>>> = Mutex::new(None);

/// Remember what lazy opens find in each chunk file, for the rest of the process.
pub fn remember() {
    ON.store(true, Ordering::Relaxed);
}

/// What a scan found in one file.
pub(crate) struct Scanned {
    /// The file's device and inode.
    pub id: (u64, u64),
    /// Where the scan stopped (the end of its last whole record).
    pub end: u64,
    /// The last record's offset and fixed part, as read.
    pub last: Option<(u64, [u8; RECORD_FIXED_SIZE])>,
    /// Each record: offset, piece, info.
    pub records: Vec<(u64, u32, SubBufInfo)>,
}

/// Is remembering on?
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// What was remembered of `path` if it still holds (see the [module documentation](self)):
/// `file` is the open file, `id` its device and inode, `len` its length now.
pub(crate) fn take(path: &Path, file: &std::fs::File, id: (u64, u64), len: u64) -> Option<Scanned> {
    use std::os::unix::fs::FileExt;
    let s = FILES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_mut()?
        .remove(path)?;
    if s.id != id || s.end > len {
        return None;
    }
    if let Some((off, fixed)) = &s.last {
        let mut now = [0u8; RECORD_FIXED_SIZE];
        if file.read_exact_at(&mut now, *off).is_err() || now != *fixed {
            return None;
        }
    }
    Some(s)
}

/// Remembers what a scan of `path` found.
pub(crate) fn put(path: &Path, s: Scanned) {
    FILES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(path.to_path_buf(), s);
}

/// Forgets the files under `dir` that are not in `files` (deleted, rotated away).
pub(crate) fn forget_others(dir: &Path, files: &[PathBuf]) {
    if let Some(m) = FILES.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        m.retain(|p, _| !p.starts_with(dir) || files.contains(p));
    }
}
