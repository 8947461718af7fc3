//! `culprit repair DIR`: recovers what a full disk or a killed reader left in a trace
//! directory, without a pool, idempotently.
//!
//! - a chunk file cut inside its 32-byte header (a reader that met a full disk while
//!   creating it) holds nothing: it is removed;
//! - a torn last record (a reader killed mid-write, or a full disk) is cut off; its
//!   sub-buffer was never released, so it is still in the pool if the pool survives
//!   (drain it with `culprit reader --pool FILE -o DIR`), else it is lost — and the
//!   sequence check says so;
//! - any other damage (flipped bytes, a record in the middle that does not check, a file
//!   that is not a regular file) is left as it is: readers skip exactly it, with a
//!   warning, and nothing that could still be read is cut away;
//! - the manifest's per-process counts and totals are recomputed from what the chunk
//!   files hold, and it is marked complete.
//!
//! Files of a reader that still runs are not touched. Running it twice changes nothing
//! the second time.

use crate::damage::Damage;
use crate::error::{io, Result};
use crate::manifest::Manifest;
use crate::tracedir::{chunk_files, OpenOptions, TraceDir};
use bufpool::disk::{self, ChunkErrorKind, RECORD_FIXED_SIZE};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What [`repair_dir`] did.
#[derive(Clone, Debug, Default)]
pub struct RepairReport {
    /// Chunk files removed (cut inside their header: nothing in them), with their length.
    pub removed: Vec<(PathBuf, u64)>,
    /// Torn tails cut: file, old length, new length.
    pub cut: Vec<(PathBuf, u64, u64)>,
    /// Damage left in place (readers skip it).
    pub left: Vec<Damage>,
    /// The rewritten manifest.
    pub manifest: Option<Manifest>,
}

/// The offset where a torn last record starts, if the file ends with one (every record
/// before it is whole). Reads only fixed parts.
pub(crate) fn torn_tail(path: &Path) -> Result<Option<(u64, u64)>> {
    let file = crate::safefile::open_regular(path)?;
    let len = file.metadata().map_err(io(path, "stat"))?.len();
    if len < disk::CHUNK_HEADER_SIZE as u64 {
        return Ok(None);
    }
    let mut off = disk::CHUNK_HEADER_SIZE as u64;
    let mut fixed = [0u8; RECORD_FIXED_SIZE];
    while off < len {
        let left = len - off;
        let n = (left as usize).min(RECORD_FIXED_SIZE);
        file.read_exact_at(&mut fixed[..n], off)
            .map_err(io(path, "read"))?;
        match disk::parse_record_fixed(&fixed[..n], off, left) {
            Ok((h, _)) => off += RECORD_FIXED_SIZE as u64 + u64::from(h.data_len),
            Err(e) if matches!(e.kind, ChunkErrorKind::Truncated { .. }) => {
                return Ok(Some((off, len)))
            }
            Err(_) => return Ok(None),
        }
    }
    Ok(None)
}

/// Repairs the trace directory `dir` (see the module documentation).
pub fn repair_dir(dir: &Path) -> Result<RepairReport> {
    // Repair truncates and removes files: only in a directory no other user controls
    // (who could link `chunks` or a chunk name to someone else's files).
    crate::safefile::check_dir(dir, true)?;
    let chunks = dir.join(disk::CHUNK_DIR);
    if chunks.exists() {
        crate::safefile::check_dir(&chunks, true)?;
    }
    let mut rep = RepairReport::default();
    let manifest = Manifest::read(dir)?;
    for path in chunk_files(dir)? {
        if crate::chunkfile::writer_alive(&path) {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.file_type().is_file() {
            continue;
        }
        if meta.len() < disk::CHUNK_HEADER_SIZE as u64 {
            std::fs::remove_file(&path).map_err(io(&path, "remove"))?;
            rep.removed.push((path, meta.len()));
            continue;
        }
        if let Some((at, len)) = torn_tail(&path)? {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(&path)
                .map_err(io(&path, "open for repair"))?;
            f.set_len(at).map_err(io(&path, "truncate"))?;
            f.sync_all().map_err(io(&path, "fsync"))?;
            rep.cut.push((path, len, at));
        }
    }
    let trace = TraceDir::index_opts(
        dir.to_path_buf(),
        manifest.clone(),
        OpenOptions {
            quiet: true,
            ..Default::default()
        },
    )?;
    rep.left = trace.damage();
    // A complete manifest's counts are the reference of what the trace held: kept, so a
    // part that went missing stays reported. An incomplete one (its reader was killed)
    // gets the counts of what the files hold.
    if manifest.complete {
        return Ok(rep);
    }
    let summary = crate::summary::summarize(&trace)?;
    let mut m = manifest;
    m.processes = summary.processes;
    let old = m.totals.clone();
    m.totals = Totals {
        lost_unreported: old.lost_unreported,
        lost: summary.totals.lost + old.lost_unreported,
        acquire_failures: old.acquire_failures,
        meta_dropped: old.meta_dropped,
        ..summary.totals
    };
    m.complete = true;
    if m.end_unix_ns.is_none() {
        m.end_unix_ns = Some(bufpool::sys::clock_ns(libc::CLOCK_REALTIME));
    }
    m.write(dir)?;
    rep.manifest = Some(m);
    Ok(rep)
}

use crate::manifest::Totals;
