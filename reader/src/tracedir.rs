//! Reading a trace directory back: the manifest, and every saved sub-buffer grouped per
//! thread, in order, each exactly once.
//!
//! Opening a directory reads the manifest, then walks every chunk file once and keeps only
//! an index in memory: where each record is, and its [`SubBufInfo`]. Records are
//! deduplicated by (pid, start time, tid, seq, first TSC) — a reader killed between saving
//! a sub-buffer and releasing it makes it be saved twice — and ordered per thread by first
//! TSC, then seq (a thread's seq starts again at 0 when its process execs), then piece
//! offset: a sub-buffer saved while its writer was still filling it (the live data path,
//! [`crate::live`]) is several records, each a *piece* of whole entries at its offset in
//! the data area, read in order as if they were sub-buffers of their own. A piece that a
//! piece read before it already covers (a reader restarted and saved it again) is a
//! duplicate, skipped like one.
//! [`TraceDir::chunks`] then reads one thread's records on demand, and
//! [`TraceDir::visit_chunks`] reads them into one reused buffer instead of allocating one
//! per record.
//!
//! Each record's CRC-32 is verified before its data is used (so before it is decoded), at
//! one of two times:
//!
//! - [`TraceDir::open`] (eager) streams every byte of every chunk file and checks each
//!   record as it indexes it: a damaged directory fails to open. For tools that must know
//!   up front (`culprit dump`, the reader's salvage of a directory it resumes).
//! - [`TraceDir::open_lazy`] reads only each record's fixed part (record header and
//!   sub-buffer header, checked for everything but the checksum) and skips its data; the
//!   checksum is verified the first time the record's data is read, and a mismatch is that
//!   read's error, naming the file and the record's offset. For the analyzer, which reads
//!   every record anyway: reading all the data once more only to checksum it cost about a
//!   tenth of the CPU time of `culprit learn`. Only records that are read are checked: the
//!   dropped copy of a duplicate, or a thread never read, is not.
//!
//! A record read again after its checksum was verified must still parse and carry the very
//! sub-buffer header that was indexed, or the read is an error (the file changed under the
//! reader), but its data is not checksummed a second time: a change of data bytes only,
//! after the check, goes unnoticed.

use crate::error::{io, Error, Result};
use crate::manifest::Manifest;
use bufpool::disk::{self, RECORD_FIXED_SIZE};
use bufpool::format::{Decoder, EntryRef};
use bufpool::{Calibration, SubBufInfo};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

mod entries;
mod stale;
mod stand_in;
mod suffix;
pub use suffix::{kept_before, kept_entries, RecordId};

/// Identity of one traced thread: pid, process start time (so a recycled pid is another
/// process) and tid. Ordered by pid, then start time, then tid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadKey {
    /// Process id.
    pub pid: u32,
    /// Process start time in clock ticks.
    pub start_ticks: u64,
    /// Thread id.
    pub tid: u32,
}

impl ThreadKey {
    /// The key of a saved sub-buffer.
    pub fn of(info: &SubBufInfo) -> ThreadKey {
        ThreadKey {
            pid: info.pid,
            start_ticks: info.owner_start_ticks,
            tid: info.tid,
        }
    }
}

/// Where one record is, and whether its checksum is known to match.
#[derive(Debug)]
struct RecordLoc {
    file: u32,
    offset: u64,
    /// Offset of the record's data in the sub-buffer (0 unless a later piece).
    piece: u32,
    info: SubBufInfo,
    /// The record's CRC-32 has been verified (at index time by [`TraceDir::open`], else by
    /// the first read of its data). Atomic because a `TraceDir` is read through `&self`
    /// from many threads; `Relaxed` is enough because the flag publishes no other memory:
    /// a thread that misses another's `true` only verifies the record once more, which is
    /// harmless.
    verified: AtomicBool,
    /// The record failed a read (tolerant mode): it is skipped from then on, and was
    /// reported once. `Relaxed`: as `verified`.
    bad: AtomicBool,
    /// Damage found in the record's entries (an entry that does not decode, a header that
    /// disagrees with its data) was reported: it is reported once however many times the
    /// record is decoded. `Relaxed`: as `verified`.
    noted: AtomicBool,
}

/// Whether directories opened with default options are read strictly: the command
/// line's `--strict`, set once by [`set_strict_default`] so that every analysis that
/// opens traces (through [`TraceDir::open`], [`TraceDir::open_lazy`] or the analyzer's
/// `TraceSet::open`) inherits it. `Relaxed`: set before any trace is opened.
static STRICT_DEFAULT: AtomicBool = AtomicBool::new(false);

/// Makes every later open with default options strict (`--strict`) or not.
pub fn set_strict_default(strict: bool) {
    STRICT_DEFAULT.store(strict, Ordering::Relaxed);
}

/// Whether `--strict` was given ([`set_strict_default`]): for readers of hand-built
/// traces, which have no [`TraceDir`] to ask.
pub fn strict_default() -> bool {
    STRICT_DEFAULT.load(Ordering::Relaxed)
}

/// How [`TraceDir::open_with`] opens a directory. The default is not lazy, not quiet,
/// and strict only after [`set_strict_default`]`(true)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    /// Any damaged or missing part is an error (instead of being skipped with a
    /// warning, see [`crate::damage`]).
    pub strict: bool,
    /// Verify checksums the first time a record is read rather than while indexing (see
    /// [`TraceDir::open_lazy`]).
    pub lazy: bool,
    /// Do not print warnings (the damage is still in [`TraceDir::damage`]).
    pub quiet: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            strict: STRICT_DEFAULT.load(Ordering::Relaxed),
            lazy: false,
            quiet: false,
        }
    }
}

/// When records' checksums are verified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verify {
    /// While indexing: every data byte is read and checked before the directory opens.
    AtIndex,
    /// The first time a record's data is read; indexing reads only the fixed parts.
    OnFirstRead,
}

/// One saved sub-buffer: its header and its entries.
#[derive(Clone, Debug)]
pub struct Chunk {
    /// The sub-buffer header, as it was in the pool (for a piece, see
    /// [`bufpool::live::Piece::info`]).
    pub info: SubBufInfo,
    /// Offset of these entries in the sub-buffer's data area: 0 for a whole sub-buffer
    /// or its first piece.
    pub piece: u32,
    /// The entries (`info.bytes_used` bytes).
    pub data: Vec<u8>,
    /// The chunk file it was read from.
    pub path: Arc<PathBuf>,
    /// Offset of the first data byte in that file.
    pub data_offset: u64,
}

impl Chunk {
    /// Decodes the entries. A decode error names the chunk file and the file offset of
    /// the bad entry; iteration stops after it.
    pub fn entries(&self) -> impl Iterator<Item = Result<EntryRef<'_>>> + '_ {
        Decoder::with_base(&self.data, self.data_offset).map(move |r| {
            r.map_err(|err| Error::Decode {
                path: self.path.as_ref().clone(),
                err,
            })
        })
    }
}

/// One saved sub-buffer lent to a [`TraceDir::visit_chunks`] callback.
#[derive(Clone, Copy, Debug)]
pub struct ChunkRef<'a> {
    /// The sub-buffer header, as it was in the pool.
    pub info: &'a SubBufInfo,
    /// Offset of these entries in the sub-buffer's data area (see [`Chunk::piece`]).
    pub piece: u32,
    /// The entries (`info.bytes_used` bytes).
    pub data: &'a [u8],
    /// The chunk file it was read from.
    pub path: &'a Arc<PathBuf>,
    /// Offset of the first data byte in that file.
    pub data_offset: u64,
}

/// Where [`TraceDir::load_thread`] put one record.
#[derive(Clone, Debug)]
pub struct LoadedRecord {
    /// The sub-buffer header, as it was in the pool.
    pub info: SubBufInfo,
    /// The chunk file it was read from.
    pub path: Arc<PathBuf>,
    /// Offset of its first data byte in that file.
    pub data_offset: u64,
    /// Where its data (`info.bytes_used` bytes) starts in the buffer.
    pub at: usize,
}

/// Reads `len` bytes at `offset` of `file` onto the end of `buf`, which grows by exactly
/// `len` bytes on success and not at all on error. The bytes are read into the vector's
/// spare room, not zeroed first.
fn pread_onto(file: &File, buf: &mut Vec<u8>, len: usize, offset: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    buf.reserve(len);
    let start = buf.len();
    let mut done = 0usize;
    while done < len {
        let at = offset + done as u64;
        let at = libc::off_t::try_from(at)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: `reserve` made room for `len` bytes after `start`; `pread` writes at most
        // `len - done` bytes from `start + done` on, inside that room, through a raw
        // pointer (no reference to the bytes not yet written is made); the file descriptor
        // is open for as long as `file` is borrowed.
        let n = unsafe {
            libc::pread(
                file.as_raw_fd(),
                buf.as_mut_ptr().add(start + done).cast(),
                len - done,
                at,
            )
        };
        match n {
            n if n > 0 => done += n as usize,
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    // SAFETY: the `len` bytes after `start` were all written by `pread` above, and lie
    // within the capacity reserved.
    unsafe { buf.set_len(start + len) };
    Ok(())
}

/// An open trace directory.
pub struct TraceDir {
    dir: PathBuf,
    manifest: Manifest,
    files: Vec<(Arc<PathBuf>, File)>,
    threads: BTreeMap<ThreadKey, Vec<RecordLoc>>,
    records: u64,
    duplicates: u64,
    opts: OpenOptions,
    /// Damaged and missing parts found so far (indexing, then reads).
    damage: std::sync::Mutex<Vec<crate::damage::Damage>>,
    /// What a flight recorder rotated away ([`crate::rotated`]).
    rotated: Option<crate::rotated::Rotated>,
    /// `manifest` stands in for a damaged or missing `manifest.json`.
    stand_in: bool,
    /// Threads whose records before a key were left out by [`TraceDir::restrict`].
    restricted: std::collections::BTreeSet<ThreadKey>,
}

impl std::fmt::Debug for TraceDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceDir")
            .field("dir", &self.dir)
            .field("files", &self.files.len())
            .field("threads", &self.threads.len())
            .field("records", &self.records)
            .finish()
    }
}

/// The chunk files of a trace directory, sorted by name.
pub fn chunk_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let cdir = dir.join(disk::CHUNK_DIR);
    let rd = match std::fs::read_dir(&cdir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(&cdir, "list")(e)),
    };
    let mut v = Vec::new();
    for ent in rd {
        let ent = ent.map_err(io(&cdir, "list"))?;
        let p = ent.path();
        if p.extension().is_some_and(|e| e == disk::CHUNK_EXT) {
            v.push(p);
        }
    }
    v.sort();
    Ok(v)
}

/// Streams the records of one chunk file, checking each, and calls `f` with its offset,
/// info and data. Stops at the first damaged record with an error naming the file.
pub fn scan_chunk_file(
    path: &Path,
    mut f: impl FnMut(u64, &SubBufInfo, &[u8]) -> Result<()>,
) -> Result<()> {
    let file = crate::safefile::open_regular(path)?;
    let len = file.metadata().map_err(io(path, "stat"))?.len();
    let mut r = BufReader::with_capacity(1 << 20, file);
    let chunk_err = |err| Error::Chunk {
        path: path.to_path_buf(),
        err,
    };
    let mut head = vec![0u8; disk::CHUNK_HEADER_SIZE.min(len as usize)];
    r.read_exact(&mut head).map_err(io(path, "read"))?;
    disk::parse_chunk_header(&head).map_err(chunk_err)?;
    let mut off = disk::CHUNK_HEADER_SIZE as u64;
    let mut fixed = [0u8; RECORD_FIXED_SIZE];
    let mut data = Vec::new();
    while off < len {
        let left = len - off;
        let n = (left as usize).min(RECORD_FIXED_SIZE);
        r.read_exact(&mut fixed[..n]).map_err(io(path, "read"))?;
        let (h, info) = disk::parse_record_fixed(&fixed[..n], off, left).map_err(chunk_err)?;
        data.resize(h.data_len as usize, 0);
        r.read_exact(&mut data).map_err(io(path, "read"))?;
        disk::check_record(&h, &info, &data, off).map_err(chunk_err)?;
        f(off, &info, &data)?;
        off += (RECORD_FIXED_SIZE + data.len()) as u64;
    }
    Ok(())
}

/// The index being built: every record seen, grouped per thread (copies of one record
/// are dropped by [`Index::finish`]).
#[derive(Default)]
struct Index {
    threads: BTreeMap<ThreadKey, Vec<RecordLoc>>,
    records: u64,
    duplicates: u64,
}

impl Index {
    /// Adds one record.
    fn add(&mut self, loc: RecordLoc) {
        self.records += 1;
        self.threads
            .entry(ThreadKey::of(&loc.info))
            .or_default()
            .push(loc);
    }

    /// Orders each thread's records by first TSC, then seq, then piece offset; of two
    /// copies of a record (same sub-buffer and piece: a record saved twice), keeps the
    /// fuller, or the first found of equals (they are normally identical); and drops
    /// pieces that the pieces before them cover. Both count as duplicates. A piece that
    /// overlaps them only in part cannot be cut at an entry boundary known here: it is
    /// dropped too, and returned, to be reported as damage.
    fn finish(mut self) -> (BTreeMap<ThreadKey, Vec<RecordLoc>>, u64, Vec<RecordLoc>) {
        let mut overlapping = Vec::new();
        for list in self.threads.values_mut() {
            // Stable: copies of one record stay in the order they were found.
            let key = |l: &RecordLoc| (l.info.first_tsc, l.info.seq, l.piece);
            list.sort_by_key(key);
            let before = list.len();
            list.dedup_by(|later, first| {
                if key(later) != key(first) {
                    return false;
                }
                if first.info.bytes_used < later.info.bytes_used {
                    std::mem::swap(first, later);
                }
                true
            });
            self.duplicates += (before - list.len()) as u64;
            let mut covered: Option<((u64, u64), u64)> = None;
            let mut kept = Vec::with_capacity(list.len());
            for loc in list.drain(..) {
                let sb = (loc.info.seq, loc.info.first_tsc);
                let end = u64::from(loc.piece) + u64::from(loc.info.bytes_used);
                match covered {
                    // An empty last piece (everything was saved live): it carries the
                    // header as published (exit flags, last TSC).
                    Some((c, _)) if c == sb && loc.info.bytes_used == 0 => kept.push(loc),
                    Some((c, upto)) if c == sb && end <= upto => {
                        self.duplicates += 1;
                    }
                    Some((c, upto)) if c == sb && u64::from(loc.piece) < upto => {
                        overlapping.push(loc);
                    }
                    _ => {
                        covered = Some((sb, end));
                        kept.push(loc);
                    }
                }
            }
            *list = kept;
        }
        (self.threads, self.duplicates, overlapping)
    }
}

/// How many sub-buffers a thread's records (in index order) hold: pieces of one count
/// once.
pub fn count_subbufs<'a>(infos: impl IntoIterator<Item = &'a SubBufInfo>) -> u64 {
    let mut n = 0;
    let mut prev = None;
    for i in infos {
        let sb = Some((i.seq, i.first_tsc));
        if sb != prev {
            n += 1;
            prev = sb;
        }
    }
    n
}

/// Checks that `dir` is a directory and reads its manifest.
fn open_manifest(dir: &Path) -> Result<Manifest> {
    check_dir(dir)?;
    Manifest::read(dir)
}

/// Checks that `dir` is a directory.
fn check_dir(dir: &Path) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(Error::NotATrace {
                path: dir.to_path_buf(),
                why: "not a directory".into(),
            })
        }
        Err(e) => return Err(io(dir, "open trace directory")(e)),
    }
    Ok(())
}

impl TraceDir {
    /// Opens a trace directory: reads the manifest and checks (CRC-32 included) and
    /// indexes every chunk. Damaged or missing parts are skipped with one warning line per
    /// file (see [`crate::damage`]); [`TraceDir::open_with`] with `strict` makes them an
    /// error.
    pub fn open(dir: impl AsRef<Path>) -> Result<TraceDir> {
        Self::open_with(dir, OpenOptions::default())
    }

    /// Opens a trace directory as `opts` say. A damaged or missing `manifest.json` next
    /// to chunk files is damage like any other (unless strict): the chunks are read
    /// under a stand-in ([`Manifest::read_or_recover`]), whose calibration, if the
    /// damaged file lost it, comes from the clock records of the chunks, with one
    /// warning.
    pub fn open_with(dir: impl AsRef<Path>, opts: OpenOptions) -> Result<TraceDir> {
        let dir = dir.as_ref().to_path_buf();
        if opts.strict {
            let manifest = open_manifest(&dir)?;
            return Self::index_opts(dir, manifest, opts);
        }
        check_dir(&dir)?;
        let (manifest, recovered) = Manifest::read_or_recover(&dir)?;
        let mut t = Self::index_opts(dir, manifest, opts)?;
        if let Some(why) = recovered {
            t.adopt_recovered_manifest(why);
        }
        Ok(t)
    }

    /// Damaged and missing parts found so far, one per file (or per directory for
    /// sequence gaps): at open, and by reads of lazily checked records since.
    pub fn damage(&self) -> Vec<crate::damage::Damage> {
        self.damage
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Records a damage found, and prints it as a warning unless quiet.
    fn note_damage(&self, d: crate::damage::Damage) {
        if !self.opts.quiet {
            eprintln!("culprit: warning: {d}");
        }
        self.damage
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(d);
    }

    /// A read of `loc` failed: an error when strict; else the record is skipped from now
    /// on and reported once.
    fn skip_bad(&self, loc: &RecordLoc, e: Error) -> Result<()> {
        if self.opts.strict {
            return Err(e);
        }
        if !loc.bad.swap(true, Ordering::Relaxed) {
            let why = e.to_string();
            let path = &self.files[loc.file as usize].0;
            let why = why
                .strip_prefix(&format!("{}: ", path.display()))
                .unwrap_or(&why)
                .to_string();
            self.note_damage(crate::damage::Damage {
                path: path.as_ref().clone(),
                offset: Some(loc.offset),
                bytes: RECORD_FIXED_SIZE as u64 + u64::from(loc.info.bytes_used),
                records: 1,
                threads: vec![ThreadKey::of(&loc.info)],
                why,
                repairable: false,
            });
        }
        Ok(())
    }

    /// Opens a trace directory reading only the record headers of its chunks: each
    /// record's checksum is verified the first time its data is read
    /// ([`TraceDir::chunks`], [`TraceDir::visit_chunks`]), and a mismatch is that read's
    /// error. Everything but the checksums is checked here, as [`TraceDir::open`] does. For
    /// readers that read every record anyway (the analyzer): the data is read once, not
    /// twice.
    pub fn open_lazy(dir: impl AsRef<Path>) -> Result<TraceDir> {
        Self::open_with(
            dir,
            OpenOptions {
                lazy: true,
                ..Default::default()
            },
        )
    }

    /// Indexes the chunks of `dir` under a given manifest (used by a reader that has
    /// not written the final manifest yet), checking every record as [`TraceDir::open`]
    /// does.
    pub fn index(dir: PathBuf, manifest: Manifest) -> Result<TraceDir> {
        Self::index_opts(dir, manifest, OpenOptions::default())
    }

    /// Indexes the chunks of `dir` as `opts` say.
    pub fn index_opts(dir: PathBuf, manifest: Manifest, opts: OpenOptions) -> Result<TraceDir> {
        let verify = if opts.lazy {
            Verify::OnFirstRead
        } else {
            Verify::AtIndex
        };
        let mut files = Vec::new();
        let mut index = Index::default();
        let mut damage = Vec::new();
        // A flight recorder rotates under its exclusive lock (`keep.lock`): it appends the
        // compacted records to the keep file, deletes the segment, then rewrites
        // `rotated.json`. A reader that listed the files before a rotation and read
        // `rotated.json` after it would see a window that hides a thread's oldest records
        // while their compacted copies were not yet in its index — a process without its
        // exec record or its setup calls for one reading. So the files are listed, their
        // records indexed and `rotated.json` read under the lock held shared (writers hold
        // it shared too: only rotations and snapshots wait). Only for a lazy open: it reads
        // each record's fixed part (milliseconds); an eager one reads every byte, which
        // would hold rotations (and the drain threads that run them) back that long.
        let gate = if opts.lazy {
            crate::keep::Gate::open(&dir).unwrap_or_else(|_| crate::keep::Gate::none())
        } else {
            crate::keep::Gate::none()
        };
        let held = gate.hold();
        let paths = chunk_files(&dir)?;
        if crate::scanned::on() {
            crate::scanned::forget_others(&dir, &paths);
        }
        for path in paths {
            let fi = files.len() as u32;
            let add = |offset, piece, info: &SubBufInfo| {
                index.add(RecordLoc {
                    file: fi,
                    offset,
                    piece,
                    info: *info,
                    verified: AtomicBool::new(verify == Verify::AtIndex),
                    bad: AtomicBool::new(false),
                    noted: AtomicBool::new(false),
                });
            };
            let found =
                crate::damage::scan_tolerant(&path, verify == Verify::AtIndex, add, &mut damage);
            if opts.strict && !damage.is_empty() {
                return Err(Error::Damaged {
                    dir,
                    first: damage[0].to_string(),
                });
            }
            if let Some(f) = found {
                files.push((Arc::new(path), f));
            }
        }
        let records = index.records;
        let (mut threads, duplicates, overlapping) = index.finish();
        let rotated = match crate::rotated::Rotated::read(&dir) {
            Ok(r) => r,
            Err(e) => {
                let path = dir.join(crate::rotated::ROTATED_FILE);
                damage.push(crate::damage::Damage::whole_file(
                    &path,
                    0,
                    format!("{e}; sequence gaps before each thread's window are reported"),
                ));
                None
            }
        };
        drop(held);
        let windows = rotated.as_ref().map(|r| r.windows()).unwrap_or_default();
        // Records outside a window are left out; those not compacted yet (in a segment
        // of another drain thread, not rotated yet) are read as their compacted copy.
        stale::compact_stale(&dir, &mut files, &mut threads, &windows);
        for loc in overlapping {
            let path = &files[loc.file as usize].0;
            damage.push(crate::damage::Damage {
                offset: Some(loc.offset),
                bytes: RECORD_FIXED_SIZE as u64 + u64::from(loc.info.bytes_used),
                records: 1,
                threads: vec![ThreadKey::of(&loc.info)],
                ..crate::damage::Damage::whole_file(
                    path,
                    0,
                    format!(
                        "a piece of sub-buffer seq {} (offset {}) overlaps another copy in part",
                        loc.info.seq, loc.piece
                    ),
                )
            });
        }
        let mut damage = crate::damage::per_file(damage);
        let seqs = threads.iter().map(|(k, l)| match windows.get(k) {
            // A flight recorder's thread: only the records after its window's start.
            Some(until) => {
                let inside = l.iter().filter(|r| {
                    r.info.flags & bufpool::layout::FLAG_COMPACTED == 0
                        && crate::rotated::record_key(&r.info, r.piece) > *until
                });
                (
                    *k,
                    crate::rotated::window_seqs(inside.map(|r| r.info.seq).collect()),
                )
            }
            None => (*k, l.iter().map(|r| r.info.seq).collect::<Vec<_>>()),
        });
        damage.extend(crate::damage::check_seqs(&dir, seqs));
        let mut found: BTreeMap<(u32, u64), (u64, Vec<ThreadKey>)> = BTreeMap::new();
        for (k, l) in &threads {
            let f = found.entry((k.pid, k.start_ticks)).or_default();
            f.0 += count_subbufs(l.iter().map(|r| &r.info));
            f.1.push(*k);
        }
        damage.extend(crate::damage::check_totals(&dir, &manifest, &found));
        if opts.strict && !damage.is_empty() {
            return Err(Error::Damaged {
                dir,
                first: damage[0].to_string(),
            });
        }
        let t = TraceDir {
            dir,
            manifest,
            files,
            threads,
            records,
            duplicates,
            opts,
            damage: Default::default(),
            rotated,
            stand_in: false,
            restricted: Default::default(),
        };
        for d in damage {
            t.note_damage(d);
        }
        if let Some(r) = &t.rotated {
            if !t.opts.quiet {
                eprintln!("culprit: note: {}", r.describe(&t.dir));
            }
        }
        let tot = &t.manifest.totals;
        if tot.acquire_failures > 0 && tot.lost == 0 && !t.opts.quiet {
            eprintln!(
                "culprit: warning: {}: writers found the pool full {} time(s) but no loss \
                 was counted: entries of processes killed before they could count their \
                 drops are missing",
                t.dir.display(),
                tot.acquire_failures
            );
        }
        Ok(t)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// What a flight recorder rotated away from this directory, if one did: each
    /// thread's records begin at its window ([`crate::rotated`]).
    pub fn rotated(&self) -> Option<&crate::rotated::Rotated> {
        self.rotated.as_ref()
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The pool's TSC calibration (to convert entry timestamps to wall-clock time).
    pub fn calibration(&self) -> Calibration {
        self.manifest.calibration()
    }

    /// Every thread that saved at least one sub-buffer, ordered by pid, start time, tid.
    pub fn threads(&self) -> impl Iterator<Item = ThreadKey> + '_ {
        self.threads.keys().copied()
    }

    /// Distinct pids in the trace, ascending.
    pub fn pids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.threads.keys().map(|k| k.pid).collect();
        v.dedup();
        v
    }

    /// The headers of one thread's sub-buffers, in order (no data read).
    pub fn infos(&self, key: ThreadKey) -> impl Iterator<Item = &SubBufInfo> + '_ {
        self.threads
            .get(&key)
            .into_iter()
            .flat_map(|l| l.iter().map(|r| &r.info))
    }

    /// Records read (duplicates included).
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Duplicate records skipped.
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    /// One thread's sub-buffers, in order, each once, read from disk on demand. A record
    /// whose checksum was not verified yet (see [`TraceDir::open_lazy`]) is verified here.
    pub fn chunks(&self, key: ThreadKey) -> impl Iterator<Item = Result<Chunk>> + '_ {
        self.threads
            .get(&key)
            .into_iter()
            .flat_map(|l| l.iter())
            .filter(|loc| !loc.bad.load(Ordering::Relaxed))
            .filter_map(move |loc| match self.read(loc) {
                Ok(c) => Some(Ok(c)),
                Err(e) => self.skip_bad(loc, e).err().map(Err),
            })
    }

    /// Every entry of one thread, in order: a record whose entries stop decoding is read up
    /// to the bad entry ([`TraceDir::entries`]). Errors name the file and offset.
    pub fn for_each_entry(
        &self,
        key: ThreadKey,
        mut f: impl FnMut(&Chunk, EntryRef<'_>) -> Result<()>,
    ) -> Result<()> {
        for c in self.chunks(key) {
            let c = c?;
            for e in self.entries(key, &c) {
                f(&c, e?)?;
            }
        }
        Ok(())
    }

    /// One thread's sub-buffers, in order, each once, read from disk into one buffer that
    /// is reused from record to record; stops at the first error (of the read or of `f`).
    /// A record whose checksum was not verified yet (see [`TraceDir::open_lazy`]) is
    /// verified before `f` sees it.
    pub fn visit_chunks<E: From<Error>>(
        &self,
        key: ThreadKey,
        f: impl FnMut(ChunkRef<'_>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        self.visit_chunks_where(key, |_, _| true, f)
    }

    /// Bytes [`TraceDir::load_thread`] reads for one thread: its records, fixed parts
    /// included.
    pub fn thread_bytes(&self, key: ThreadKey) -> u64 {
        self.infos(key)
            .map(|i| RECORD_FIXED_SIZE as u64 + i.bytes_used as u64)
            .sum()
    }

    /// Reads every record of one thread, in order, onto the end of `buf` (each record's
    /// fixed part, then its data), checked as [`TraceDir::visit_chunks`] checks them; says
    /// where each record's data landed. For a reader that goes over a thread more than
    /// once: the kernel copies each record once, and nothing is zeroed first.
    pub fn load_thread(&self, key: ThreadKey, buf: &mut Vec<u8>) -> Result<Vec<LoadedRecord>> {
        let locs = self.threads.get(&key).map_or(&[][..], Vec::as_slice);
        buf.reserve(self.thread_bytes(key) as usize);
        let mut out = Vec::with_capacity(locs.len());
        for loc in locs {
            if loc.bad.load(Ordering::Relaxed) {
                continue;
            }
            let (path, file) = &self.files[loc.file as usize];
            let need = RECORD_FIXED_SIZE + loc.info.bytes_used as usize;
            let start = buf.len();
            let read = pread_onto(file, buf, need, loc.offset)
                .map_err(io(path.as_ref(), "read"))
                .and_then(|()| self.check_record(loc, &buf[start..]));
            if let Err(e) = read {
                buf.truncate(start);
                self.skip_bad(loc, e)?;
                continue;
            }
            out.push(LoadedRecord {
                info: loc.info,
                path: path.clone(),
                data_offset: loc.offset + RECORD_FIXED_SIZE as u64,
                at: start + RECORD_FIXED_SIZE,
            });
        }
        Ok(out)
    }

    fn read(&self, loc: &RecordLoc) -> Result<Chunk> {
        let mut data = Vec::new();
        let data_offset = self.read_into(loc, &mut data)?;
        data.drain(..RECORD_FIXED_SIZE);
        Ok(Chunk {
            info: loc.info,
            piece: loc.piece,
            data,
            path: self.files[loc.file as usize].0.clone(),
            data_offset,
        })
    }

    /// Reads an indexed record into `buf` (its fixed part, then its data from
    /// [`RECORD_FIXED_SIZE`] on); returns the file offset of the data.
    /// The record's fixed part must still parse and hold the indexed sub-buffer header; its
    /// checksum is verified if it has not been yet (a record of a lazily opened directory
    /// read for the first time), and then only.
    fn read_into(&self, loc: &RecordLoc, buf: &mut Vec<u8>) -> Result<u64> {
        let (path, file) = &self.files[loc.file as usize];
        // The whole record in one read (its size is indexed): fixed part, then data, read
        // into the buffer's room (nothing zeroed first).
        let need = RECORD_FIXED_SIZE + loc.info.bytes_used as usize;
        buf.clear();
        pread_onto(file, buf, need, loc.offset).map_err(io(path.as_ref(), "read"))?;
        self.check_record(loc, buf)?;
        Ok(loc.offset + RECORD_FIXED_SIZE as u64)
    }

    /// Checks a record read back (`rec`: its fixed part, then its data): it must still
    /// parse and hold the indexed sub-buffer header, and its checksum is verified if it has
    /// not been yet (a record of a lazily opened directory read for the first time).
    fn check_record(&self, loc: &RecordLoc, rec: &[u8]) -> Result<()> {
        let path = &self.files[loc.file as usize].0;
        let chunk_err = |err| Error::Chunk {
            path: path.as_ref().clone(),
            err,
        };
        let (h, info) =
            disk::parse_record_fixed(&rec[..RECORD_FIXED_SIZE], loc.offset, rec.len() as u64)
                .map_err(chunk_err)?;
        if info != loc.info {
            return Err(chunk_err(disk::ChunkError {
                offset: loc.offset,
                kind: disk::ChunkErrorKind::Inconsistent(
                    "the record changed since the directory was indexed".into(),
                ),
            }));
        }
        // Relaxed: see `RecordLoc::verified`.
        if !loc.verified.load(Ordering::Relaxed) {
            disk::check_record(&h, &info, &rec[RECORD_FIXED_SIZE..], loc.offset)
                .map_err(chunk_err)?;
            loc.verified.store(true, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Index, RecordLoc, SubBufInfo, ThreadKey};
    use std::sync::atomic::AtomicBool;

    /// A record of thread `tid`'s sub-buffer `seq` (first TSC `10 * seq`), piece `piece`,
    /// `bytes` long, found at `offset`.
    fn loc(tid: u32, seq: u64, piece: u32, bytes: u32, offset: u64) -> RecordLoc {
        RecordLoc {
            file: 0,
            offset,
            piece,
            info: SubBufInfo {
                pid: 7,
                tid,
                seq,
                first_tsc: 10 * seq,
                bytes_used: bytes,
                ..Default::default()
            },
            verified: AtomicBool::new(false),
            bad: AtomicBool::new(false),
            noted: AtomicBool::new(false),
        }
    }

    #[test]
    fn the_index_keeps_one_copy_of_each_record_the_fuller_or_the_first() {
        let mut ix = Index::default();
        // Thread 1: sub-buffer 2 saved three times (the second copy fuller), 1 once, 3
        // twice alike; thread 2: sub-buffer 1 twice, the first fuller.
        for l in [
            loc(1, 2, 0, 100, 0),
            loc(1, 3, 0, 50, 1),
            loc(2, 1, 0, 80, 2),
            loc(1, 2, 0, 120, 3),
            loc(1, 1, 0, 10, 4),
            loc(1, 2, 0, 120, 5),
            loc(1, 3, 0, 50, 6),
            loc(2, 1, 0, 60, 7),
        ] {
            ix.add(l);
        }
        assert_eq!(ix.records, 8);
        let (threads, duplicates, overlapping) = ix.finish();
        assert_eq!(duplicates, 4);
        assert!(overlapping.is_empty());
        let key = |tid| ThreadKey {
            pid: 7,
            start_ticks: 0,
            tid,
        };
        let got = |tid| -> Vec<(u64, u32, u64)> {
            threads[&key(tid)]
                .iter()
                .map(|l| (l.info.seq, l.info.bytes_used, l.offset))
                .collect()
        };
        assert_eq!(got(1), vec![(1, 10, 4), (2, 120, 3), (3, 50, 1)]);
        assert_eq!(got(2), vec![(1, 80, 2)]);
    }
}
