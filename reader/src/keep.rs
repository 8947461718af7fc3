//! The flight recorder: a trace directory that never grows past a disk budget
//! (`culprit record --keep SIZE`, `--keep-for DURATION`).
//!
//! ```text
//!  drain thread k:  append a record → Keeper::appended
//!                     segment ≥ budget/16 → close it (read-only), the next record opens
//!                     a new one; directory over budget → rotate the oldest closed segments
//!  rotation of S:   every record of S
//!                     the newest of its thread (nothing later saved) → carried whole
//!                         into a new segment
//!                     else → its metadata records, Lost marker and descriptor calls
//!                         (socket, bind, connect, accept, dup, close…), same identity,
//!                         FLAG_COMPACTED, appended to the keep file (never rotated);
//!                         its entries counted in rotated.json
//!                   fsync both, then delete S, then rewrite rotated.json
//! ```
//!
//! What remains decodes: process, thread, map, code, clock, injection and filter records
//! are never rotated away, nor the calls that say what each descriptor is (a handler of
//! a connection accepted long before the window still belongs to that connection), and
//! [`crate::rotated`] makes every reader see each thread's records as a suffix (its
//! *window*). The budget counts every file of the directory (chunks, the keep file,
//! `manifest.json`, `cpu.tsv`, `rotated.json`). Writers [`Keeper::reserve`] the bytes of
//! what they are about to write (a drain thread one sub-buffer, the live copier the
//! committed prefixes it will copy — and its poll writes no more than that, however much
//! the traced threads committed meanwhile), so the rotation comes before the write. A
//! rotation writes what it carries and keeps before it deletes the segment, so rotations
//! start that far below the budget, and a segment at least: what the oldest segment's
//! rotation would write is read from it once and weighed against each thread's newest
//! record (`Keeper::headroom`). It is more than a segment when the drain is behind: the
//! live copier's pieces of sub-buffers published after a thread's newest drained record
//! are carried too. The directory passes the budget only when it holds nothing a rotation
//! can drop (each thread's newest records), or by what its other files grew since they
//! were last measured. (Two passes measured before both rules, in loaded test runs of a
//! debug build: 1.07 and 2.02 sub-buffers over a 4 MiB budget — a live poll that wrote
//! 700 KB more than it had reserved, and carries of up to 1.1 MB.)
//!
//! Writers, rotation and [`crate::snapshot`] are ordered by `flock` on `DIR/keep.lock`: each
//! writer holds it shared (through its own descriptor, a [`Gate`]) while it appends; a
//! rotation and a snapshot hold it exclusively. So a snapshot, even from another process,
//! copies every file at one instant between appends (no thread's records have a hole),
//! and never sees a segment deleted before its compacted records were written.

use crate::chunkfile::ChunkWriter;
use crate::error::{io, Result};
use crate::rotated::{record_key, RecordKey, Rotated};
use crate::tracedir::ThreadKey;
use bufpool::disk;
use bufpool::layout::{SubBufInfo, FLAG_COMPACTED};
use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Name of the lock file that orders rotations and snapshots.
pub const LOCK_FILE: &str = "keep.lock";
/// Segments per budget: a segment is closed once it holds a sixteenth of the budget.
const SEGMENTS_PER_BUDGET: u64 = 16;
/// The smallest segment (a tiny budget still rotates whole sub-buffers).
const MIN_SEGMENT: u64 = 64 << 10;
/// The smallest budget accepted.
pub const MIN_KEEP_BYTES: u64 = 1 << 20;

/// What a flight recorder keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeepOptions {
    /// At most this many bytes in the directory (`--keep`).
    pub bytes: Option<u64>,
    /// Records older than this are rotated away (`--keep-for`).
    pub age: Option<Duration>,
}

impl KeepOptions {
    /// True if either budget is set.
    pub fn active(&self) -> bool {
        self.bytes.is_some() || self.age.is_some()
    }
}

/// A closed segment, read-only, waiting to be rotated.
#[derive(Debug)]
struct Segment {
    path: PathBuf,
    len: u64,
    closed_ns: u64,
    /// Its records as a rotation sees them (read once, when first needed).
    plan: Option<Vec<Planned>>,
}

impl Segment {
    fn new(path: PathBuf, len: u64, closed_ns: u64) -> Segment {
        Segment {
            path,
            len,
            closed_ns,
            plan: None,
        }
    }
}

/// One record of a closed segment: what its rotation writes before it deletes the segment.
#[derive(Debug)]
struct Planned {
    thread: ThreadKey,
    key: RecordKey,
    /// Bytes of the record, carried whole if it is its thread's newest or later.
    whole: u64,
    /// Bytes of its compacted copy in the keep file (0: nothing of it is kept).
    kept: u64,
}

#[derive(Default)]
struct State {
    /// Closed segments, oldest first.
    closed: Vec<Segment>,
    /// Bytes of the segments drain threads (and the live copier) still write, by writer.
    open: HashMap<u32, u64>,
    /// The newest record saved of each thread (rotation carries it whole).
    newest: HashMap<ThreadKey, RecordKey>,
    /// Compacted records of rotated segments.
    keep: Option<ChunkWriter>,
    rotated: Option<Rotated>,
    /// Bytes of the directory's other files, as last measured.
    other: u64,
    /// Said once: the kept metadata alone fills half the budget.
    warned: bool,
}

/// The flight recorder of one reader run.
pub struct Keeper {
    dir: PathBuf,
    opts: KeepOptions,
    reader_pid: u32,
    /// The writer number of carried and keep files.
    keep_worker: u32,
    segment: u64,
    state: Mutex<State>,
}

fn now_ns() -> u64 {
    bufpool::sys::clock_ns(libc::CLOCK_REALTIME)
}

impl Keeper {
    /// A flight recorder for `dir`, whose drain threads are numbered below `keep_worker`.
    pub fn new(dir: &Path, opts: KeepOptions, reader_pid: u32, keep_worker: u32) -> Result<Self> {
        let segment = opts
            .bytes
            .map_or(16 << 20, |b| (b / SEGMENTS_PER_BUDGET).max(MIN_SEGMENT));
        let lock = dir.join(LOCK_FILE);
        {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&lock)
                .map_err(io(&lock, "create"))?;
        }
        let rotated = Rotated::read(dir)?;
        let k = Keeper {
            dir: dir.to_path_buf(),
            opts,
            reader_pid,
            keep_worker,
            segment,
            state: Mutex::new(State {
                rotated,
                ..Default::default()
            }),
        };
        // Chunk files of earlier runs are closed segments, oldest first.
        let mut st = k.lock();
        for path in crate::tracedir::chunk_files(dir)? {
            let Ok(m) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let closed_ns = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos() as u64);
            st.closed.push(Segment::new(path, m.len(), closed_ns));
        }
        st.closed.sort_by_key(|s| s.closed_ns);
        drop(st);
        Ok(k)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes per segment.
    pub fn segment_bytes(&self) -> u64 {
        self.segment
    }

    /// After writer `who` appended records (the last of which is `last`, if known) to
    /// `w`: closes the segment when full and rotates while the directory is over budget.
    pub fn appended(
        &self,
        who: u32,
        w: &mut Option<ChunkWriter>,
        last: Option<(&SubBufInfo, u32)>,
    ) -> Result<()> {
        let mut st = self.lock();
        if let Some((info, piece)) = last {
            let k = record_key(info, piece);
            let e = st.newest.entry(ThreadKey::of(info)).or_insert(k);
            *e = (*e).max(k);
        }
        let Some(cur) = w.as_ref() else {
            return Ok(());
        };
        if cur.len() >= self.segment {
            let done = w.take().expect("checked above");
            done.sync()?;
            close_read_only(done.path());
            st.open.remove(&who);
            st.closed.push(Segment::new(
                done.path().to_path_buf(),
                done.len(),
                now_ns(),
            ));
        } else {
            st.open.insert(who, cur.len());
        }
        self.make_room(&mut st)
    }

    /// Before writer `who`, whose open segment is `w` (none yet: a new one), writes about
    /// `incoming` bytes of records: counts them now and rotates while that would put the
    /// directory over budget, so that the write itself never passes it. Call it without
    /// holding a [`Gate`]: a rotation locks `keep.lock` exclusively.
    pub fn reserve(&self, who: u32, w: &Option<ChunkWriter>, incoming: u64) -> Result<()> {
        let mut st = self.lock();
        let cur = w
            .as_ref()
            .map_or(disk::CHUNK_HEADER_SIZE as u64, ChunkWriter::len);
        st.open.insert(who, cur + incoming);
        self.make_room(&mut st)
    }

    /// Rotates the oldest closed segments while the directory is over budget.
    fn make_room(&self, st: &mut State) -> Result<()> {
        if let Some(budget) = self.opts.bytes {
            // A rotation writes the kept and carried records before it deletes the
            // segment (a crash never loses them): the directory stays below the budget by
            // what the next rotation writes, and by one segment at least.
            let limit = |st: &mut State| budget.saturating_sub(self.headroom(st));
            if total(st) > limit(st) {
                st.other = self.other_files();
                // Each closed segment at most once: carried records go to a new segment
                // at the end, and a directory of nothing but each thread's newest record
                // cannot shrink further.
                for _ in 0..st.closed.len() {
                    if total(st) <= limit(st) {
                        break;
                    }
                    self.rotate_oldest(st)?;
                }
                let kept = st.keep.as_ref().map_or(0, ChunkWriter::len);
                if kept > budget / 2 && !st.warned {
                    st.warned = true;
                    eprintln!(
                        "culprit: warning: {}: the metadata the flight recorder must keep \
                         ({kept} bytes) fills half of --keep {budget}: the directory will \
                         pass the budget",
                        self.dir.display()
                    );
                }
            }
        }
        Ok(())
    }

    /// Rotates the segments closed longer than `--keep-for` ago (called periodically).
    pub fn expire(&self) -> Result<()> {
        let Some(age) = self.opts.age else {
            return Ok(());
        };
        let limit = now_ns().saturating_sub(age.as_nanos() as u64);
        let mut st = self.lock();
        while st.closed.first().is_some_and(|s| s.closed_ns < limit) {
            self.rotate_oldest(&mut st)?;
        }
        Ok(())
    }

    /// The room the rotation of the oldest closed segment needs while it writes what it
    /// carries and keeps: a segment, or more when it carries more — each thread's newest
    /// record and every piece the live copier saved of sub-buffers drained after it, so
    /// as much as the drain is behind.
    fn headroom(&self, st: &mut State) -> u64 {
        let State { closed, newest, .. } = st;
        let Some(seg) = closed.first_mut() else {
            return self.segment;
        };
        let plan = seg
            .plan
            .get_or_insert_with(|| plan(&seg.path, seg.len, self.segment));
        let writes: u64 = plan
            .iter()
            .map(|r| match newest.get(&r.thread) {
                Some(n) if r.key < *n => r.kept,
                _ => r.whole,
            })
            .sum();
        // A new carried segment and, the first time, the keep file: a header each.
        (writes + 2 * disk::CHUNK_HEADER_SIZE as u64).max(self.segment)
    }

    /// Bytes of the directory's files that are not chunk segments.
    fn other_files(&self) -> u64 {
        let mut n = 0;
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                if let Ok(m) = e.metadata() {
                    if m.is_file() {
                        n += m.len();
                    }
                }
            }
        }
        n
    }

    fn rotate_oldest(&self, st: &mut State) -> Result<()> {
        let seg = st.closed.remove(0);
        if let Some(carried) = self.rewrite(st, &seg, Rewrite::Rotate)? {
            st.closed.push(carried);
        }
        Ok(())
    }

    /// At the end of a run: rewrites every segment that still holds records older than
    /// its thread's window (left by another drain thread while an older segment was
    /// rotated), so that what was rotated away is counted exactly and the directory is a
    /// suffix of each thread without the readers' window rule.
    pub fn settle(&self) -> Result<()> {
        let mut st = self.lock();
        let Some(windows) = st.rotated.as_ref().map(Rotated::windows) else {
            return Ok(());
        };
        let keep_path = st.keep.as_ref().map(|k| k.path().to_path_buf());
        for path in crate::tracedir::chunk_files(&self.dir)? {
            if Some(&path) == keep_path.as_ref() {
                continue;
            }
            let Ok(bytes) = crate::safefile::read_bounded(&path, u64::from(u32::MAX)) else {
                continue;
            };
            let (good, _) = disk::valid_prefix(&bytes);
            let stale = good >= disk::CHUNK_HEADER_SIZE
                && disk::records(&bytes[..good]).flatten().any(|r| {
                    crate::rotated::outside_window(
                        &r.info,
                        r.piece,
                        windows.get(&ThreadKey::of(&r.info)),
                    )
                });
            if stale {
                let seg = Segment::new(path, bytes.len() as u64, now_ns());
                self.rewrite(&mut st, &seg, Rewrite::Settle(&windows))?;
            }
        }
        Ok(())
    }

    /// Rewrites segment `seg`: each record either carried whole into a new segment
    /// (returned) or compacted into the keep file and counted; then deletes `seg`.
    fn rewrite(&self, st: &mut State, seg: &Segment, how: Rewrite<'_>) -> Result<Option<Segment>> {
        let lock = LockFile::exclusive(&self.dir)?;
        let rotated = st.rotated.get_or_insert_with(|| {
            Rotated::new(
                self.opts.bytes.unwrap_or(0),
                self.opts.age.map(|a| a.as_nanos() as u64),
            )
        });
        // Gone or unreadable: nothing of it to keep.
        let bytes = crate::safefile::read_bounded(&seg.path, seg.len.max(self.segment) * 2)
            .unwrap_or_default();
        let mut carry: Option<ChunkWriter> = None;
        let mut meta = Vec::new();
        let (good, _) = disk::valid_prefix(&bytes);
        if good >= disk::CHUNK_HEADER_SIZE {
            for rec in disk::records(&bytes[..good]).flatten() {
                let thread = ThreadKey::of(&rec.info);
                let k = record_key(&rec.info, rec.piece);
                let compact = match how {
                    Rewrite::Rotate => st.newest.get(&thread).is_some_and(|n| k < *n),
                    Rewrite::Settle(w) => {
                        crate::rotated::outside_window(&rec.info, rec.piece, w.get(&thread))
                    }
                };
                if !compact {
                    if carry.is_none() {
                        carry = Some(ChunkWriter::create_segment(
                            &self.dir,
                            self.reader_pid,
                            self.keep_worker,
                        )?);
                    }
                    let c = carry.as_mut().expect("created above");
                    c.append_piece(&rec.info, rec.piece, rec.data)
                        .map_err(io(c.path(), "write"))?;
                    continue;
                }
                if let Some((entries, last_tsc)) = compacted(&rec, &mut meta) {
                    rotated.note(thread, k, entries, last_tsc);
                    rotated.records += 1;
                    rotated.entries += entries;
                    rotated.bytes += (rec.data.len() - meta.len()) as u64;
                }
                if !meta.is_empty() || rec.info.lost_before > 0 {
                    if st.keep.is_none() {
                        st.keep = Some(ChunkWriter::create_segment(
                            &self.dir,
                            self.reader_pid,
                            self.keep_worker + 1,
                        )?);
                    }
                    let kw = st.keep.as_mut().expect("created above");
                    let mut info = rec.info;
                    info.flags |= FLAG_COMPACTED;
                    kw.append_piece(&info, rec.piece, &meta)
                        .map_err(io(kw.path(), "write"))?;
                }
            }
        }
        if let Some(kw) = &st.keep {
            kw.sync()?;
        }
        let carried = match carry {
            Some(c) => {
                c.sync()?;
                close_read_only(c.path());
                Some(Segment::new(c.path().to_path_buf(), c.len(), seg.closed_ns))
            }
            None => None,
        };
        match std::fs::remove_file(&seg.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&seg.path, "remove")(e)),
        }
        if matches!(how, Rewrite::Rotate) {
            rotated.segments += 1;
        }
        rotated.freed_bytes += seg
            .len
            .saturating_sub(carried.as_ref().map_or(0, |c| c.len));
        rotated.last_rotation_unix_ns = now_ns();
        rotated.write(&self.dir)?;
        drop(lock);
        Ok(carried)
    }
}

/// What [`Keeper::rewrite`] compacts.
#[derive(Clone, Copy)]
enum Rewrite<'a> {
    /// Every record but each thread's newest (rotation of the oldest segment).
    Rotate,
    /// The records before each thread's window (the end of a run).
    Settle(&'a std::collections::BTreeMap<ThreadKey, RecordKey>),
}

/// Puts into `meta` what the keep file holds of `rec` once compacted: what later entries
/// need to be read right (metadata, the loss marker, the calls that say what each
/// descriptor is), or all of a record compacted before. Returns the count of the other
/// entries and the TSC of the last of them, or `None` for a record compacted before.
fn compacted(rec: &disk::RecordRef<'_>, meta: &mut Vec<u8>) -> Option<(u64, u64)> {
    meta.clear();
    if rec.info.flags & FLAG_COMPACTED != 0 {
        meta.extend_from_slice(rec.data);
        return None;
    }
    Some(crate::tracedir::kept_entries(
        rec.data,
        rec.info.first_tsc,
        true,
        meta,
    ))
}

/// The records of the segment at `path` (`len` bytes when closed) as its rotation treats
/// them. An unreadable segment plans nothing (its rotation keeps nothing of it).
fn plan(path: &Path, len: u64, segment: u64) -> Vec<Planned> {
    let bytes = crate::safefile::read_bounded(path, len.max(segment) * 2).unwrap_or_default();
    let (good, _) = disk::valid_prefix(&bytes);
    if good < disk::CHUNK_HEADER_SIZE {
        return Vec::new();
    }
    let mut meta = Vec::new();
    disk::records(&bytes[..good])
        .flatten()
        .map(|rec| {
            compacted(&rec, &mut meta);
            let fixed = disk::RECORD_FIXED_SIZE as u64;
            let kept = if !meta.is_empty() || rec.info.lost_before > 0 {
                fixed + meta.len() as u64
            } else {
                0
            };
            Planned {
                thread: ThreadKey::of(&rec.info),
                key: record_key(&rec.info, rec.piece),
                whole: fixed + rec.data.len() as u64,
                kept,
            }
        })
        .collect()
}

fn total(st: &State) -> u64 {
    st.closed.iter().map(|s| s.len).sum::<u64>()
        + st.open.values().sum::<u64>()
        + st.keep.as_ref().map_or(0, ChunkWriter::len)
        + st.other
}

/// Makes a closed segment read-only: [`crate::snapshot`] links such files instead of copying
/// them. Best effort (a failure only costs the snapshot a copy).
fn close_read_only(path: &Path) {
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o400));
}

/// A `flock` on `DIR/keep.lock`, released on drop.
pub(crate) struct LockFile(std::fs::File);

impl LockFile {
    fn take(dir: &Path, how: libc::c_int) -> Result<Option<LockFile>> {
        let path = dir.join(LOCK_FILE);
        use std::os::unix::fs::OpenOptionsExt;
        let f = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&path, "open")(e)),
        };
        use std::os::fd::AsRawFd;
        loop {
            // SAFETY: flock on a descriptor this function owns; no memory is involved.
            let r = unsafe { libc::flock(f.as_raw_fd(), how) };
            if r == 0 {
                return Ok(Some(LockFile(f)));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(io(&path, "lock")(e));
            }
        }
    }

    pub(crate) fn exclusive(dir: &Path) -> Result<Option<LockFile>> {
        Self::take(dir, libc::LOCK_EX)
    }
}

/// One writer's descriptor of `keep.lock`, held shared while it appends (see the module
/// documentation). Each writer needs its own: `flock` locks belong to the open file.
pub struct Gate(Option<std::fs::File>);

/// A held [`Gate`]; released on drop.
pub struct GateGuard<'a>(Option<&'a std::fs::File>);

impl Gate {
    /// Opens a gate of `dir` (none if the directory has no `keep.lock`).
    pub fn open(dir: &Path) -> Result<Gate> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = dir.join(LOCK_FILE);
        match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(f) => Ok(Gate(Some(f))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Gate(None)),
            Err(e) => Err(io(&path, "open")(e)),
        }
    }

    /// A gate that orders nothing (no flight recorder).
    pub fn none() -> Gate {
        Gate(None)
    }

    /// Holds the gate shared until the guard is dropped.
    pub fn hold(&self) -> GateGuard<'_> {
        use std::os::fd::AsRawFd;
        if let Some(f) = &self.0 {
            // SAFETY: flock on a descriptor this gate owns; no memory is involved. An
            // error (only EINTR or ENOLCK here) leaves the append unordered against a
            // snapshot, which then may miss this one record: never worse than that.
            while unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH) } != 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
            }
        }
        GateGuard(self.0.as_ref())
    }
}

impl Drop for GateGuard<'_> {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        if let Some(f) = self.0 {
            // SAFETY: unlocking a descriptor the gate owns.
            unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_UN) };
        }
    }
}

impl Drop for LockFile {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: unlocking a descriptor this value owns.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bufpool::format::{encode_fn, Kind};

    fn info(seq: u64, lost_before: u64) -> SubBufInfo {
        SubBufInfo {
            pid: 7,
            tid: 7,
            seq,
            first_tsc: 1000 + seq,
            lost_before,
            magic: bufpool::layout::SUBBUF_MAGIC,
            bytes_used: 40_000,
            data_size: 256 << 10,
            ..Default::default()
        }
    }

    /// The room a rotation needs is what it writes before it deletes the segment: each
    /// thread's newest record and what came after it whole, of older records only what
    /// the keep file holds (here a loss marker's record header), one segment at least.
    #[test]
    fn headroom_is_what_the_oldest_segments_rotation_writes() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = KeepOptions {
            bytes: Some(1 << 20),
            age: None,
        };
        let k = Keeper::new(tmp.path(), opts, 1, 10).unwrap();
        assert_eq!(k.segment_bytes(), 64 << 10);
        let entry = encode_fn(Kind::FnEnter, 1, 0, 0x4000);
        let data: Vec<u8> = (0..2000).flat_map(|_| entry.as_bytes().to_vec()).collect();
        assert_eq!(data.len(), 40_000, "the records' bytes_used");
        let mut w = ChunkWriter::create_segment(tmp.path(), 1, 0).unwrap();
        // seq 1 (older, with a loss before it), 2 (the newest drained), 3 (a live piece
        // of a sub-buffer not drained yet).
        for (seq, lost) in [(1, 3), (2, 0), (3, 0)] {
            w.append_piece(&info(seq, lost), 0, &data).unwrap();
        }
        w.sync().unwrap();
        let whole = (disk::RECORD_FIXED_SIZE + data.len()) as u64;
        let mut st = k.lock();
        st.closed
            .push(Segment::new(w.path().to_path_buf(), w.len(), 1));
        // Nothing drained yet: every record is carried.
        assert_eq!(k.headroom(&mut st), 3 * whole + 64);
        let newest = record_key(&info(2, 0), 0);
        st.newest.insert(ThreadKey::of(&info(2, 0)), newest);
        let kept = disk::RECORD_FIXED_SIZE as u64;
        assert_eq!(k.headroom(&mut st), kept + 2 * whole + 64);
        // Once the piece's sub-buffer is drained, only it is carried: less than a segment.
        st.newest
            .insert(ThreadKey::of(&info(3, 0)), record_key(&info(3, 0), 0));
        assert_eq!(k.headroom(&mut st), 64 << 10);
    }
}
