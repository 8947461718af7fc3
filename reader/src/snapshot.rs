//! `culprit snapshot DIR -o OUT` (and `SIGUSR1` to a reader): a consistent copy of a
//! trace directory while recording goes on.
//!
//! Taken under the flight recorder's exclusive lock ([`crate::keep`]), so no record is
//! being appended and no segment rotated while the files are read. A directory being
//! written still has holes at its frontier — sub-buffers published but not yet drained
//! from the pool, while a later one's live piece is on disk — so each thread is cut at
//! its first missing sequence number inside its window: the copy holds, per thread, a
//! gap-free run of records and reads without damage. Closed segments (read-only, never
//! written again) whose records all fall before the cut are hard-linked; the rest is
//! copied record by record.

use crate::error::{io, Result};
use crate::rotated::{record_key, RecordKey, Rotated, MAX_ROTATED_BYTES, ROTATED_FILE};
use crate::tracedir::ThreadKey;
use bufpool::disk;
use bufpool::layout::FLAG_COMPACTED;
use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The largest chunk file a snapshot reads.
const MAX_CHUNK_BYTES: u64 = 16 << 30;

/// What [`snapshot`] copied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotReport {
    /// Chunk files linked (closed segments: they never change).
    pub linked: u64,
    /// Chunk files copied.
    pub copied: u64,
    /// Records left out: after a thread's first missing sub-buffer (still in the pool).
    pub cut: u64,
    /// Bytes in the snapshot.
    pub bytes: u64,
}

/// Freezes a consistent copy of trace directory `dir` into `out` (a new, private
/// directory). The copy reads as any trace directory (an incomplete one, while the
/// recording runs).
pub fn snapshot(dir: &Path, out: &Path) -> Result<SnapshotReport> {
    use std::os::unix::fs::DirBuilderExt;
    let _lock = crate::keep::LockFile::exclusive(dir)?;
    let mut manifest = crate::Manifest::read(dir)?;
    manifest.snapshot_unix_ns = Some(bufpool::sys::clock_ns(libc::CLOCK_REALTIME));
    let rotated = Rotated::read(dir)?;
    let windows = rotated.as_ref().map(Rotated::windows).unwrap_or_default();
    // Every file's whole records, read once.
    let mut files = Vec::new();
    for path in crate::tracedir::chunk_files(dir)? {
        let Ok(m) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !m.is_file() {
            continue;
        }
        let Ok(bytes) = crate::safefile::read_bounded(&path, MAX_CHUNK_BYTES) else {
            continue;
        };
        let (good, _) = disk::valid_prefix(&bytes);
        if good < disk::CHUNK_HEADER_SIZE {
            continue;
        }
        let read_only = m.permissions().mode() & 0o222 == 0;
        files.push((path, bytes, good, read_only));
    }
    let cuts = cuts(&files, &windows);
    let keep = |info: &bufpool::SubBufInfo, piece: u32| {
        info.flags & FLAG_COMPACTED != 0
            || cuts
                .get(&ThreadKey::of(info))
                .is_none_or(|c| record_key(info, piece) < *c)
    };
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(out)
        .map_err(io(out, "create snapshot directory"))?;
    let cout = out.join(disk::CHUNK_DIR);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&cout)
        .map_err(io(&cout, "create"))?;
    let mut rep = SnapshotReport::default();
    for (path, bytes, good, read_only) in &files {
        let Some(name) = path.file_name() else {
            continue;
        };
        let dest = cout.join(name);
        let recs: Vec<_> = disk::records(&bytes[..*good]).flatten().collect();
        let all = recs.iter().all(|r| keep(&r.info, r.piece));
        if all && *read_only && std::fs::hard_link(path, &dest).is_ok() {
            rep.linked += 1;
            rep.bytes += *good as u64;
            continue;
        }
        let mut copy = bytes[..disk::CHUNK_HEADER_SIZE].to_vec();
        for r in &recs {
            if keep(&r.info, r.piece) {
                disk::encode_piece(&r.info, r.piece, r.data, &mut copy);
            } else {
                rep.cut += 1;
            }
        }
        write_new(&dest, &copy)?;
        rep.copied += 1;
        rep.bytes += copy.len() as u64;
    }
    if let Ok(r) = crate::safefile::read_bounded(&dir.join(ROTATED_FILE), MAX_ROTATED_BYTES) {
        write_new(&out.join(ROTATED_FILE), &r)?;
    }
    // The processes and totals of what the copy holds (the recording's manifest lists
    // them only when its reader finishes).
    let quiet = crate::OpenOptions {
        quiet: true,
        ..Default::default()
    };
    let copy = crate::TraceDir::index_opts(out.to_path_buf(), manifest.clone(), quiet)?;
    let summary = crate::summarize(&copy)?;
    manifest.processes = summary.processes;
    manifest.totals = summary.totals;
    manifest.write(out)?;
    if let Ok(b) = crate::safefile::read_bounded(&dir.join("cpu.tsv"), 1 << 30) {
        write_new(&out.join("cpu.tsv"), &b)?;
    }
    Ok(rep)
}

/// A path for a new snapshot of `dir` that does not exist yet: `DIR.<tag>-<unix s>` beside
/// it (or, given `within`, in that directory), with `-1`, `-2`… added if taken.
pub fn new_path(dir: &Path, tag: &str, within: Option<&Path>) -> std::path::PathBuf {
    let secs = bufpool::sys::clock_ns(libc::CLOCK_REALTIME) / 1_000_000_000;
    let name = format!(
        "{}.{tag}-{secs}",
        dir.file_name().unwrap_or_default().to_string_lossy()
    );
    let at = |n: &str| match within {
        Some(w) => w.join(n),
        None => dir.with_file_name(n),
    };
    let mut p = at(&name);
    let mut i = 1;
    while p.exists() {
        p = at(&format!("{name}-{i}"));
        i += 1;
    }
    p
}

/// Per thread, the key of its first record after a missing sequence number inside its
/// window (threads without a hole have no entry).
fn cuts(
    files: &[(std::path::PathBuf, Vec<u8>, usize, bool)],
    windows: &BTreeMap<ThreadKey, RecordKey>,
) -> HashMap<ThreadKey, RecordKey> {
    let mut threads: HashMap<ThreadKey, Vec<RecordKey>> = HashMap::new();
    for (_, bytes, good, _) in files {
        for r in disk::records(&bytes[..*good]).flatten() {
            if r.info.flags & FLAG_COMPACTED != 0 {
                continue;
            }
            let t = ThreadKey::of(&r.info);
            let k = record_key(&r.info, r.piece);
            if windows.get(&t).is_some_and(|u| k <= *u) {
                continue;
            }
            threads.entry(t).or_default().push(k);
        }
    }
    let mut out = HashMap::new();
    for (t, mut keys) in threads {
        keys.sort_unstable();
        let mut prev: Option<u64> = None;
        for k in keys {
            let s = k.1;
            if let Some(p) = prev {
                if s > p + 1 && s >> 32 == p >> 32 {
                    out.insert(t, k);
                    break;
                }
            }
            prev = Some(prev.map_or(s, |p| p.max(s)));
        }
    }
    out
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut f = crate::safefile::create_new(path).map_err(io(path, "create"))?;
    f.write_all(bytes).map_err(io(path, "write"))?;
    Ok(())
}
