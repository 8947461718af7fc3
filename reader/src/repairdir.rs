//! `culprit repair DIR`: recovers what a full disk or a killed reader left in a trace
//! directory, without a pool, idempotently.
//!
//! - a chunk file cut inside its 32-byte header (a reader that met a full disk while
//!   creating it) holds nothing: it is removed;
//! - a torn last record (a reader killed mid-write, or a full disk) is cut off; its
//!   sub-buffer was never released, so it is still in the pool if the pool survives
//!   (drain it with `culprit reader --pool FILE -o DIR`), else it is lost — and the
//!   sequence check says so;
//! - any other damage (flipped bytes, a record in the middle that does not check, an
//!   entry that does not decode in a record whose checksum matches, a file that is not a
//!   regular file) is left as it is and reported: readers skip exactly it, with a
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
    /// Why the manifest was rewritten besides an unfinished recording: it was damaged
    /// (rebuilt from the chunks), or its counts were stale (fewer than the chunks hold).
    pub rewritten_because: Option<String>,
    /// The directory is still being written (a reader or a recording runs): its chunk
    /// files were not cut and its manifest not touched. Says by whom.
    pub live: Option<String>,
}

/// Why `dir` is still being written, if it is: a chunk file's reader still runs, or the
/// pool of an unfinished recording is still mapped by a running process (a reader
/// creates its chunk files only when it first saves something).
fn still_written(dir: &Path, manifest: &Manifest) -> Result<Option<String>> {
    for path in chunk_files(dir)? {
        if crate::chunkfile::writer_alive(&path) {
            return Ok(Some(format!(
                "{} is being written by a running reader",
                path.display()
            )));
        }
    }
    let pool = Path::new(&manifest.pool.path);
    if !manifest.complete && !manifest.pool.path.is_empty() && crate::watch::others_map(pool) {
        return Ok(Some(format!(
            "its pool {} is mapped by a running process (a recording in progress)",
            pool.display()
        )));
    }
    Ok(None)
}

/// Whether a complete manifest counts fewer sub-buffers than the chunk files hold (for
/// a process or in all): it was written before the recording ended.
fn stale(manifest: &Manifest, found: &crate::summary::Summary) -> Option<String> {
    if !manifest.complete {
        return None;
    }
    let total = found.totals.subbufs;
    let more = found.processes.iter().find(|p| {
        let had = manifest
            .processes
            .iter()
            .find(|q| (q.pid, q.start_ticks) == (p.pid, p.start_ticks))
            .map_or(0, |q| q.subbufs);
        p.subbufs > had
    });
    if total > manifest.totals.subbufs || more.is_some() {
        Some(format!(
            "its counts were stale ({} sub-buffer(s) counted, {total} in the chunk files: \
             it was written before the recording ended)",
            manifest.totals.subbufs
        ))
    } else {
        None
    }
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
    let (manifest, damaged) = Manifest::read_or_recover(dir)?;
    if let Some(who) = still_written(dir, &manifest)? {
        // Cutting or counting what a running reader writes would mark a recording
        // complete with the counts of a moment (and then stale): leave it all.
        rep.live = Some(who);
        return Ok(rep);
    }
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
    // Opened as any reader opens it: a damaged manifest is replaced by a stand-in with
    // the calibration told from the chunks' clock records.
    let trace = TraceDir::open_with(
        dir,
        OpenOptions {
            quiet: true,
            strict: false,
            lazy: false,
        },
    )?;
    // Decoding every record finds the entries that do not decode (a record whose checksum
    // matches bytes that were wrong before it was computed): nothing of them can be
    // rebuilt, so they are reported with the rest of the damage left in place.
    let summary = crate::summary::summarize(&trace)?;
    let manifest_file = dir.join(disk::MANIFEST_FILE);
    rep.left = trace.damage();
    // A complete manifest's counts are the reference of what the trace held: kept, so a
    // part that went missing stays reported. An incomplete one (its reader was killed),
    // a damaged one, or one whose counts are below what the files hold (written before
    // the recording ended) gets the counts of what the files hold.
    rep.rewritten_because = match damaged {
        Some(why) => Some(format!(
            "it was damaged ({why}): rebuilt from the chunk files"
        )),
        None => stale(&manifest, &summary),
    };
    if manifest.complete && rep.rewritten_because.is_none() {
        return Ok(rep);
    }
    rep.left.retain(|d| d.path != manifest_file);
    let mut m = trace.manifest().clone();
    m.processes = summary.processes;
    let old = m.totals.clone();
    m.totals = Totals {
        lost_unreported: old.lost_unreported,
        lost: summary.totals.lost.saturating_add(old.lost_unreported),
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
