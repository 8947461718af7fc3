//! Records **outside a thread's window but not yet compacted**: what they say that later
//! entries need is read as their compacted copy will say it.
//!
//! A flight recorder's drain threads write a thread's sub-buffers into segments of their
//! own, and rotation takes the oldest closed segment first. When segment A (drain thread 1)
//! is rotated, the thread's window moves past A's newest record of it — while an older
//! record of the thread may still sit in segment B (drain thread 2), closed later or still
//! open. Readers treat that record as rotated too ([`crate::rotated`]: a window is a
//! suffix), but its metadata — often the process's exec record, its memory maps, the
//! `bind` and `accept` that say what its descriptors are — has no compacted copy until B
//! is rotated in turn, seconds later. Until then every reading saw the process without
//! them: `culprit watch` found a traced redis to be the shell it was forked from, and every
//! unit of it a unit with no model.
//!
//! So each such record is read at open (checked like any other) and replaced by what its
//! compacted copy will hold ([`super::kept_entries`], as the flight recorder keeps it),
//! encoded as a compacted record in an anonymous in-memory file: every reading path sees
//! it as the compacted copy, before and after B's rotation alike.
//!
//! A record never changes once written, and `culprit watch` opens the directory again on
//! every poll while the same records stay stale for seconds (a segment holds megabytes of
//! them): what each stale record keeps is remembered for the next open in this process
//! ([`Seen`]), so that it is read once, not on every poll.

use super::{pread_onto, RecordLoc, ThreadKey};
use crate::rotated::{outside_window, record_key, RecordKey};
use bufpool::disk::{self, RECORD_FIXED_SIZE};
use bufpool::layout::FLAG_COMPACTED;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// A stale record's identity: its file (device, inode), offset, and sub-buffer identity
/// (first TSC, seq, piece, bytes) — a file deleted and its inode reused never matches.
type StaleKey = (u64, u64, u64, u64, u64, u32, u32);

/// What each stale record of the last open kept (`None`: nothing; not readable records are
/// not remembered). Only the records stale at the last open are kept: bounded by them.
struct Seen(Mutex<HashMap<StaleKey, Option<Vec<u8>>>>);

static SEEN: std::sync::LazyLock<Seen> =
    std::sync::LazyLock::new(|| Seen(Mutex::new(HashMap::new())));

/// Replaces, in each thread's records, those outside its window (`windows`) that have no
/// compacted copy by their compacted form, read from `files` and written to a new
/// in-memory file appended to `files`. Records that cannot be read are dropped (they are
/// outside the window: what they held is counted as rotated). Returns how many were
/// replaced.
pub(super) fn compact_stale(
    dir: &Path,
    files: &mut Vec<(Arc<std::path::PathBuf>, File)>,
    threads: &mut BTreeMap<ThreadKey, Vec<RecordLoc>>,
    windows: &BTreeMap<ThreadKey, RecordKey>,
) -> usize {
    let mem_file = files.len() as u32;
    let mut mem = Vec::new();
    let mut replaced = 0;
    let mut buf = Vec::new();
    let mut seen = SEEN.0.lock().unwrap_or_else(|p| p.into_inner());
    let mut now: HashMap<StaleKey, Option<Vec<u8>>> = HashMap::new();
    // Device and inode of each file, asked once.
    let mut ids: Vec<Option<Option<(u64, u64)>>> = vec![None; files.len()];
    for (k, list) in threads.iter_mut() {
        let Some(until) = windows.get(k) else {
            continue;
        };
        let compacted: HashSet<RecordKey> = list
            .iter()
            .filter(|l| l.info.flags & FLAG_COMPACTED != 0)
            .map(|l| record_key(&l.info, l.piece))
            .collect();
        let mut added = Vec::new();
        list.retain(|l| {
            if !outside_window(&l.info, l.piece, Some(until)) {
                return true;
            }
            if compacted.contains(&record_key(&l.info, l.piece)) {
                return false;
            }
            let (_, file) = &files[l.file as usize];
            let id = *ids[l.file as usize].get_or_insert_with(|| {
                use std::os::unix::fs::MetadataExt;
                file.metadata().ok().map(|m| (m.dev(), m.ino()))
            });
            let key = id.map(|(dev, ino)| {
                let i = &l.info;
                (
                    dev,
                    ino,
                    l.offset,
                    i.first_tsc,
                    i.seq,
                    l.piece,
                    i.bytes_used,
                )
            });
            let kept = match key.and_then(|k| seen.remove(&k)) {
                Some(kept) => kept,
                None => {
                    let Some(kept) = read_kept(file, l, &mut buf) else {
                        return false;
                    };
                    kept
                }
            };
            if let Some(k) = key {
                now.insert(k, kept.clone());
            }
            let Some(meta) = kept else {
                return false;
            };
            let mut info = l.info;
            info.flags |= FLAG_COMPACTED;
            info.bytes_used = meta.len() as u32;
            let offset = mem.len() as u64;
            disk::encode_piece(&info, l.piece, &meta, &mut mem);
            added.push(RecordLoc {
                file: mem_file,
                offset,
                piece: l.piece,
                info,
                verified: AtomicBool::new(false),
                bad: AtomicBool::new(false),
                noted: AtomicBool::new(false),
            });
            false
        });
        if !added.is_empty() {
            replaced += added.len();
            list.extend(added);
            list.sort_by_key(|l| (l.info.first_tsc, l.info.seq, l.piece));
        }
    }
    *seen = now;
    drop(seen);
    if replaced == 0 {
        return 0;
    }
    match memory_file(&mem) {
        Some(f) => {
            let name = dir.join("(records outside the window, read as compacted)");
            files.push((Arc::new(name), f));
            replaced
        }
        None => {
            // No in-memory file: the records stay out, as before.
            for list in threads.values_mut() {
                list.retain(|l| l.file != mem_file);
            }
            0
        }
    }
}

/// What the compacted copy of record `l` of `file` holds (`Some(None)`: nothing — no
/// metadata, no loss), read into `buf`; None if it cannot be read or does not check.
fn read_kept(file: &File, l: &RecordLoc, buf: &mut Vec<u8>) -> Option<Option<Vec<u8>>> {
    buf.clear();
    let need = RECORD_FIXED_SIZE + l.info.bytes_used as usize;
    pread_onto(file, buf, need, l.offset).ok()?;
    let (h, info) =
        disk::parse_record_fixed(&buf[..RECORD_FIXED_SIZE], l.offset, need as u64).ok()?;
    let data = &buf[RECORD_FIXED_SIZE..];
    if info != l.info || disk::check_record(&h, &info, data, l.offset).is_err() {
        return None;
    }
    let mut meta = Vec::new();
    super::kept_entries(data, info.first_tsc, true, &mut meta);
    Some((!meta.is_empty() || info.lost_before > 0).then_some(meta))
}

/// An anonymous in-memory file holding `bytes`.
fn memory_file(bytes: &[u8]) -> Option<File> {
    use std::os::fd::FromRawFd;
    // SAFETY: the name is a NUL-terminated string that outlives the call.
    let fd = unsafe { libc::memfd_create(c"culprit-compacted".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just returned by memfd_create and is owned by nothing else.
    let mut f = unsafe { File::from_raw_fd(fd) };
    f.write_all(bytes).ok()?;
    Some(f)
}
