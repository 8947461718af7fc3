//! Damage costs only itself: reading a trace directory past damaged or missing parts.
//!
//! A chunk file can be damaged (a torn last record after a reader was killed or the disk
//! filled, flipped bytes, a 0-byte file, a FIFO or a directory named `*.chunk`) and a
//! part of a trace can be missing (a deleted chunk file, a file cut at a record
//! boundary). [`crate::TraceDir`] by default skips exactly the damaged bytes — records
//! before and after a damaged one are still read: the scan resynchronizes on the next
//! record magic whose fixed part checks — and says what it skipped as one [`Damage`] per
//! file, printed as one warning line. Missing parts are found from two independent
//! counts, so none goes unnoticed:
//!
//! - **sequence numbers**: each thread numbers its sub-buffers 0, 1, 2… (restarting at 0
//!   in the low 32 bits after an exec, see `bufpool/FORMAT.md` §3); a gap is a missing
//!   sub-buffer (a seq is never skipped by a writer: a drop does not consume one);
//! - **the manifest's totals**: a finished reader counts the sub-buffers of every
//!   process; fewer in the files than in the manifest is a missing part, even at the end
//!   of a thread where no later seq reveals it.
//!
//! With `strict` ([`crate::tracedir::OpenOptions::strict`], `--strict` on the command
//! line) any damage or missing part is an error instead.

use crate::tracedir::ThreadKey;
use bufpool::disk::{self, ChunkErrorKind, RECORD_FIXED_SIZE};
use bufpool::SubBufInfo;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// One damaged or missing part of a trace, and what skipping it cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// The chunk file (or `manifest.json`, or the directory, for a missing part).
    pub path: PathBuf,
    /// Byte offset in the file where the skipped part starts, if in a file.
    pub offset: Option<u64>,
    /// Bytes skipped.
    pub bytes: u64,
    /// Records (saved sub-buffers) skipped or missing, as far as known (0: unknown).
    pub records: u64,
    /// Threads known to lose entries through it.
    pub threads: Vec<ThreadKey>,
    /// What is wrong.
    pub why: String,
    /// A torn tail that `culprit repair DIR` cuts off.
    pub repairable: bool,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: ", self.path.display())?;
        match (self.records, self.bytes) {
            // Nothing skipped (a manifest stood in for, a header that disagrees with its
            // entries): only what is wrong.
            (0, 0) => write!(f, "damaged")?,
            (0, b) => write!(f, "skipped {b} byte(s)")?,
            (n, 0) => write!(f, "{n} sub-buffer record(s) missing")?,
            (n, b) => write!(f, "skipped {n} record(s), {b} byte(s)")?,
        }
        if !self.threads.is_empty() {
            write!(f, " of thread(s) {}", threads_text(&self.threads))?;
        }
        if let Some(o) = self.offset {
            write!(f, " from byte offset {o}")?;
        }
        write!(f, ": {}", self.why)?;
        if self.repairable {
            write!(
                f,
                " (a reader was killed or the disk filled: `culprit repair DIR` cuts it off)"
            )?;
        }
        Ok(())
    }
}

/// `pid/tid` list, at most 6 shown.
pub fn threads_text(threads: &[ThreadKey]) -> String {
    let mut s: Vec<String> = threads
        .iter()
        .take(6)
        .map(|k| format!("{}/{}", k.pid, k.tid))
        .collect();
    if threads.len() > 6 {
        s.push(format!("… ({} in all)", threads.len()));
    }
    s.join(", ")
}

impl Damage {
    pub(crate) fn whole_file(path: &Path, bytes: u64, why: String) -> Damage {
        Damage {
            path: path.to_path_buf(),
            offset: None,
            bytes,
            records: 0,
            threads: Vec::new(),
            why,
            repairable: false,
        }
    }
}

/// Merges the damages of one file into one (one warning line per file).
pub fn per_file(list: Vec<Damage>) -> Vec<Damage> {
    let mut out: Vec<Damage> = Vec::new();
    for d in list {
        match out.iter_mut().find(|o| o.path == d.path) {
            Some(o) => {
                o.bytes += d.bytes;
                o.records += d.records;
                for t in d.threads {
                    if !o.threads.contains(&t) {
                        o.threads.push(t);
                    }
                }
                o.repairable |= d.repairable;
                if !o.why.contains(&d.why) {
                    o.why = format!("{}; {}", o.why, d.why);
                }
            }
            None => out.push(d),
        }
    }
    out
}

/// Finds the next offset at or after `from` where a record's fixed part checks (the
/// record magic, then every field but the checksum); `len` if none. Holes of a sparse
/// file are skipped without reading them (`SEEK_DATA`: a hole reads as zeros, and no
/// record starts with a zero byte), so a 10 GB file holding 200 KB costs 200 KB.
fn resync(file: &File, from: u64, len: u64) -> u64 {
    const BLOCK: usize = 1 << 20;
    let magic = disk::RECORD_MAGIC.to_le_bytes();
    debug_assert!(magic[0] != 0);
    let mut buf = vec![0u8; BLOCK];
    let mut at = from;
    let mut fixed = [0u8; RECORD_FIXED_SIZE];
    while at < len {
        match next_data(file, at) {
            Some(d) if d >= len => return len,
            Some(d) => at = d,
            None => {}
        }
        let n = (len - at).min(BLOCK as u64) as usize;
        if file.read_exact_at(&mut buf[..n], at).is_err() {
            return len;
        }
        for i in 0..n.saturating_sub(3) {
            if buf[i..i + 4] != magic {
                continue;
            }
            let pos = at + i as u64;
            let left = len - pos;
            let k = (left as usize).min(RECORD_FIXED_SIZE);
            if file.read_exact_at(&mut fixed[..k], pos).is_ok()
                && disk::parse_record_fixed(&fixed[..k], pos, left).is_ok()
            {
                return pos;
            }
        }
        if n < BLOCK {
            break;
        }
        at += (n - 3) as u64;
    }
    len
}

/// The start of the first data (not a hole) at or after `at`: `Some(u64::MAX)` if only a
/// hole follows, `None` if the file system cannot say (then every byte is read).
fn next_data(file: &File, at: u64) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let off = libc::off_t::try_from(at).ok()?;
    // SAFETY: lseek on a descriptor this File owns; it only moves the file offset, which
    // no reader of this File uses (every read is a pread at an explicit offset).
    let r = unsafe { libc::lseek(file.as_raw_fd(), off, libc::SEEK_DATA) };
    if r >= 0 {
        return Some(r as u64);
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ENXIO) => Some(u64::MAX),
        _ => None,
    }
}

/// Walks the records of one chunk file, skipping damage: calls `add` with each good
/// record's offset and info, and pushes one [`Damage`] per skipped part. Verifies
/// checksums when `verify` (reading every data byte). Returns the open file, or `None` if
/// nothing of it can be read. A truncated last record of a reader that still runs is not
/// damage (it is being written) and is left out silently.
pub(crate) fn scan_tolerant(
    path: &Path,
    verify: bool,
    mut add: impl FnMut(u64, u32, &SubBufInfo),
    damage: &mut Vec<Damage>,
) -> Option<File> {
    let file = match crate::safefile::open_regular(path) {
        Ok(f) => f,
        Err(e) => {
            let why = e.to_string();
            let why = why
                .strip_prefix(&format!("{}: ", path.display()))
                .unwrap_or(&why)
                .to_string();
            damage.push(Damage::whole_file(path, 0, why));
            return None;
        }
    };
    let len = match file.metadata() {
        Ok(m) => m.len(),
        Err(e) => {
            damage.push(Damage::whole_file(path, 0, format!("stat: {e}")));
            return None;
        }
    };
    let mut head = vec![0u8; disk::CHUNK_HEADER_SIZE.min(len as usize)];
    let header = file
        .read_exact_at(&mut head, 0)
        .map_err(|e| format!("read: {e}"))
        .and_then(|()| disk::parse_chunk_header(&head).map_err(|e| e.to_string()));
    if let Err(why) = header {
        let mut d = Damage::whole_file(path, len, why);
        // A file cut inside its header: what a full disk leaves; nothing is in it.
        d.repairable = len < disk::CHUNK_HEADER_SIZE as u64;
        damage.push(d);
        return None;
    }
    let mut off = disk::CHUNK_HEADER_SIZE as u64;
    // What an earlier open of this process found in the file (`crate::scanned`).
    let damage_before = damage.len();
    let mut remembered = None;
    if !verify && crate::scanned::on() {
        use std::os::unix::fs::MetadataExt;
        let id = file
            .metadata()
            .map(|m| (m.dev(), m.ino()))
            .unwrap_or_default();
        let s = crate::scanned::take(path, &file, id, len).unwrap_or(crate::scanned::Scanned {
            id,
            end: off,
            last: None,
            records: Vec::new(),
        });
        for (at, piece, info) in &s.records {
            add(*at, *piece, info);
        }
        off = s.end;
        remembered = Some(s);
    }
    let mut fixed = [0u8; RECORD_FIXED_SIZE];
    let mut data = Vec::new();
    while off < len {
        let left = len - off;
        let n = (left as usize).min(RECORD_FIXED_SIZE);
        if let Err(e) = file.read_exact_at(&mut fixed[..n], off) {
            damage.push(Damage {
                offset: Some(off),
                bytes: left,
                ..Damage::whole_file(path, left, format!("read: {e}"))
            });
            break;
        }
        match disk::parse_record_fixed(&fixed[..n], off, left) {
            Ok((h, info)) => {
                let size = RECORD_FIXED_SIZE as u64 + u64::from(h.data_len);
                if verify {
                    data.resize(h.data_len as usize, 0);
                    let checked = file
                        .read_exact_at(&mut data, off + RECORD_FIXED_SIZE as u64)
                        .map_err(|e| format!("read: {e}"))
                        .and_then(|()| {
                            disk::check_record(&h, &info, &data, off).map_err(|e| e.to_string())
                        });
                    if let Err(why) = checked {
                        damage.push(Damage {
                            offset: Some(off),
                            bytes: size,
                            records: 1,
                            threads: vec![ThreadKey::of(&info)],
                            ..Damage::whole_file(path, size, why)
                        });
                        off += size;
                        continue;
                    }
                }
                add(off, h.piece, &info);
                if let Some(s) = &mut remembered {
                    s.records.push((off, h.piece, info));
                    s.last = Some((off, fixed));
                }
                off += size;
            }
            Err(e) => {
                if matches!(e.kind, ChunkErrorKind::Truncated { .. }) {
                    if crate::chunkfile::writer_alive(path) {
                        break;
                    }
                    let threads = if n == RECORD_FIXED_SIZE {
                        let info: SubBufInfo =
                            bytemuck::pod_read_unaligned(&fixed[disk::RECORD_HEADER_SIZE..]);
                        vec![ThreadKey::of(&info)]
                    } else {
                        Vec::new()
                    };
                    damage.push(Damage {
                        offset: Some(off),
                        bytes: left,
                        records: 1,
                        threads,
                        why: e.to_string(),
                        repairable: true,
                        path: path.to_path_buf(),
                    });
                    break;
                }
                let next = resync(&file, off + 1, len);
                damage.push(Damage {
                    offset: Some(off),
                    bytes: next - off,
                    ..Damage::whole_file(path, next - off, e.to_string())
                });
                off = next;
            }
        }
    }
    if let Some(mut s) = remembered.filter(|_| damage.len() == damage_before) {
        // No damage: the scan stopped at the end of its last whole record.
        s.end = off;
        crate::scanned::put(path, s);
    }
    Some(file)
}

/// Missing sub-buffers of one thread, from its records' seqs in record order: ranges
/// `(first missing, count)`. Seqs count 0, 1, 2… in their low 32 bits; the high bits
/// number the process image (exec), and a new image starts again at 0.
pub fn seq_gaps(seqs: impl IntoIterator<Item = u64>) -> Vec<(u64, u64)> {
    const LOW: u64 = 0xffff_ffff;
    let mut gaps = Vec::new();
    let mut prev: Option<u64> = None;
    for s in seqs {
        match prev {
            None if s & LOW != 0 => gaps.push((s & !LOW, s & LOW)),
            Some(p) if s > p + 1 && s >> 32 == p >> 32 => gaps.push((p + 1, s - p - 1)),
            Some(p) if s >> 32 != p >> 32 && s & LOW != 0 => {
                gaps.push((s & !LOW, s & LOW));
            }
            _ => {}
        }
        prev = Some(match prev {
            Some(p) if s < p && s >> 32 == p >> 32 => p,
            _ => s,
        });
    }
    gaps
}

/// Checks each thread's seqs for gaps: one [`Damage`] for the whole directory if any.
pub fn check_seqs<'a>(
    dir: &Path,
    threads: impl Iterator<Item = (ThreadKey, Vec<u64>)> + 'a,
) -> Option<Damage> {
    let mut affected = Vec::new();
    let mut missing = 0;
    let mut first = String::new();
    for (key, seqs) in threads {
        let gaps = seq_gaps(seqs);
        if gaps.is_empty() {
            continue;
        }
        if first.is_empty() {
            let (s, n) = gaps[0];
            first = format!(
                "thread {}/{} lacks seq {}{}",
                key.pid,
                key.tid,
                s,
                if n > 1 {
                    format!("..={}", s + n - 1)
                } else {
                    String::new()
                }
            );
        }
        missing += gaps.iter().map(|g| g.1).sum::<u64>();
        affected.push(key);
    }
    if affected.is_empty() {
        return None;
    }
    Some(Damage {
        path: dir.to_path_buf(),
        offset: None,
        bytes: 0,
        records: missing,
        threads: affected,
        why: format!(
            "sub-buffers missing from the sequence ({first}): a chunk file deleted, cut \
             short or damaged"
        ),
        repairable: false,
    })
}

/// Compares the sub-buffers found per process with a complete manifest's counts: one
/// [`Damage`] naming `manifest.json` if fewer were found.
pub fn check_totals(
    dir: &Path,
    manifest: &crate::Manifest,
    found: &BTreeMap<(u32, u64), (u64, Vec<ThreadKey>)>,
) -> Option<Damage> {
    if !manifest.complete {
        return None;
    }
    let mut missing = 0;
    let mut procs = Vec::new();
    for p in &manifest.processes {
        let have = found.get(&(p.pid, p.start_ticks)).map_or(0, |f| f.0);
        if have < p.subbufs {
            missing += p.subbufs - have;
            procs.push(format!("{} ({}): {have} of {}", p.pid, p.exe, p.subbufs));
        }
    }
    let total: u64 = found.values().map(|f| f.0).sum();
    if missing == 0 && manifest.totals.subbufs > total {
        missing = manifest.totals.subbufs - total;
    }
    if missing == 0 {
        return stale_totals(dir, manifest, found, total);
    }
    let shown: Vec<String> = procs.iter().take(4).cloned().collect();
    Some(Damage {
        path: dir.join(disk::MANIFEST_FILE),
        offset: None,
        bytes: 0,
        records: missing,
        threads: Vec::new(),
        why: format!(
            "the manifest counts {} sub-buffer(s), the chunk files hold {total}{}",
            manifest.totals.subbufs.max(total + missing),
            if shown.is_empty() {
                String::new()
            } else {
                format!(
                    " (process {}{})",
                    shown.join(", "),
                    if procs.len() > 4 { ", …" } else { "" }
                )
            }
        ),
        repairable: false,
    })
}

/// A complete manifest that counts fewer sub-buffers than the chunk files hold (for a
/// process, or in all) was written before the recording ended — by a `culprit repair`
/// run during it, with a recorder that then died — so its counts cannot tell a missing
/// part: one [`Damage`] naming `manifest.json`.
fn stale_totals(
    dir: &Path,
    manifest: &crate::Manifest,
    found: &BTreeMap<(u32, u64), (u64, Vec<ThreadKey>)>,
    total: u64,
) -> Option<Damage> {
    let counted: BTreeMap<(u32, u64), u64> = manifest
        .processes
        .iter()
        .map(|p| ((p.pid, p.start_ticks), p.subbufs))
        .collect();
    let more = found
        .iter()
        .any(|(k, f)| f.0 > counted.get(k).copied().unwrap_or(0));
    if total <= manifest.totals.subbufs && !more {
        return None;
    }
    Some(Damage {
        path: dir.join(disk::MANIFEST_FILE),
        offset: None,
        bytes: 0,
        records: 0,
        threads: Vec::new(),
        why: format!(
            "stale: it counts {} sub-buffer(s), the chunk files hold {total} (it was written \
             before the recording ended, and cannot tell what is missing; `culprit repair \
             DIR` recounts)",
            manifest.totals.subbufs
        ),
        repairable: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_gaps_are_found_and_exec_restarts_are_not_gaps() {
        assert!(seq_gaps([0, 1, 2, 3]).is_empty());
        assert_eq!(seq_gaps([0, 1, 4, 5]), [(2, 2)]);
        assert_eq!(seq_gaps([2, 3]), [(0, 2)], "the first ones are missing");
        let g1 = 1u64 << 32;
        assert!(seq_gaps([0, 1, g1, g1 + 1]).is_empty());
        assert_eq!(seq_gaps([0, 1, g1 + 1]), [(g1, 1)]);
        assert!(
            seq_gaps([0, 0, 1]).is_empty(),
            "a restart at 0 is not a gap"
        );
    }
}
