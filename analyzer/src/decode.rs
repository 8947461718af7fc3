//! Stage 1 — **decode**: trace data into per-thread event streams with wall-clock times.
//!
//! The input of the analyzer is a [`TraceSet`]: processes (host, pid, TSC calibration),
//! each with threads, each with its chunks (the sub-buffers the readers saved) in sequence
//! order. Chunks are loaded one at a time ([`ThreadSource::Dir`] reads them from a trace
//! directory through `reader::TraceDir`, which verifies each record's checksum the first
//! time its data is read, so before it is decoded), so a trace is streamed, never held
//! whole; a stage that goes over a process twice may first read that one process into
//! memory ([`ProcessTrace::load`], bounded). [`ThreadTrace::for_each`]
//! decodes a thread's chunks with `bufpool`'s decoder and hands each entry, turned into an
//! [`Event`], to a callback. A corrupt entry stops the stream with [`Error::Decode`] naming
//! the file and the byte offset.
//!
//! [`TraceBuilder`] writes the same input by hand (tests, benchmarks), with `bufpool`'s
//! encoders.

use crate::error::{Error, Result};
use bufpool::format::{
    self, encode_fn, encode_lib, encode_meta, encode_ret, Addr, Kind, LibFn, LibOpts, Meta,
    META_BUF,
};
use bufpool::Calibration;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// All the traces one analysis looks at (one or many directories, from several hosts).
#[derive(Clone, Debug, Default)]
pub struct TraceSet {
    /// Processes, in any order (stages sort what they output).
    pub processes: Vec<ProcessTrace>,
}

/// The traces of one process.
#[derive(Clone, Debug)]
pub struct ProcessTrace {
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks (with `pid`, a pid-reuse-proof identity).
    pub start_ticks: u64,
    /// TSC ↔ clock calibration of the pool it wrote into.
    pub calib: Calibration,
    /// Threads, in any order.
    pub threads: Vec<ThreadTrace>,
}

/// The chunks of one thread.
#[derive(Clone, Debug)]
pub struct ThreadTrace {
    /// Thread id.
    pub tid: u32,
    /// Where its chunks are.
    pub source: ThreadSource,
}

/// Where a thread's chunks are.
#[derive(Clone, Debug)]
pub enum ThreadSource {
    /// In memory (hand-built traces), in order.
    Memory(Vec<Chunk>),
    /// In a trace directory, read one chunk at a time (each record's checksum verified
    /// the first time it is read).
    Dir {
        /// The open directory.
        dir: Arc<reader::TraceDir>,
        /// The thread.
        key: reader::ThreadKey,
    },
    /// Read from a trace directory into memory, every record at once (see
    /// [`ProcessTrace::load`]).
    Loaded(Arc<LoadedThread>),
}

/// A thread's records, read into one buffer ([`ProcessTrace::load`]).
#[derive(Debug)]
pub struct LoadedThread {
    /// The records, each its fixed part then its data.
    bytes: Vec<u8>,
    /// Where each record's data is in `bytes`, in order.
    records: Vec<reader::LoadedRecord>,
}

impl ProcessTrace {
    /// This process with the records of its threads read from their trace directory into
    /// memory, each read and checked once, for a stage that goes over them more than once
    /// (the two passes of `units`): `None` if they come to more than `max_bytes` (such a
    /// process is read from disk, chunk by chunk, in each pass). Threads already in memory
    /// stay as they are.
    pub fn load(&self, max_bytes: u64) -> Result<Option<ProcessTrace>> {
        let total: u64 = self
            .threads
            .iter()
            .map(|t| match &t.source {
                ThreadSource::Dir { dir, key } => dir.thread_bytes(*key),
                _ => 0,
            })
            .sum();
        if total > max_bytes {
            return Ok(None);
        }
        let mut threads = Vec::with_capacity(self.threads.len());
        for t in &self.threads {
            let source = match &t.source {
                ThreadSource::Dir { dir, key } => {
                    let mut bytes = Vec::new();
                    let records = dir.load_thread(*key, &mut bytes).map_err(Error::Reader)?;
                    ThreadSource::Loaded(Arc::new(LoadedThread { bytes, records }))
                }
                other => other.clone(),
            };
            threads.push(ThreadTrace { tid: t.tid, source });
        }
        Ok(Some(ProcessTrace {
            host: self.host.clone(),
            pid: self.pid,
            start_ticks: self.start_ticks,
            calib: self.calib,
            threads,
        }))
    }
}

/// One hand-built chunk.
#[derive(Clone, Debug)]
pub struct Chunk {
    /// Entries lost just before this chunk.
    pub lost_before: u64,
    /// A name standing for the file in error messages.
    pub name: Arc<PathBuf>,
    /// The entries.
    pub bytes: Arc<Vec<u8>>,
}

impl TraceSet {
    /// Opens trace directories (written by `culprit record` / `culprit reader`), one or
    /// many, from one host or several. Chunks are indexed by their record headers, their
    /// data not read: decoding streams them, and the first read of a record verifies its
    /// checksum (`reader::TraceDir::open_lazy`), so a damaged record is the error of the
    /// stage that first reads it, naming the chunk file and the record's offset. Every
    /// stage reads its data through [`ThreadTrace::raw_chunks`], which goes through
    /// that check.
    pub fn open(dirs: &[PathBuf]) -> Result<TraceSet> {
        let mut set = TraceSet::default();
        for d in dirs {
            let dir = Arc::new(reader::TraceDir::open_lazy(d).map_err(Error::Reader)?);
            let m = dir.manifest();
            let host = if m.host.is_empty() {
                d.display().to_string()
            } else {
                m.host.clone()
            };
            let calib = dir.calibration();
            let mut by_proc: std::collections::BTreeMap<(u32, u64), Vec<ThreadTrace>> =
                Default::default();
            for key in dir.threads() {
                by_proc
                    .entry((key.pid, key.start_ticks))
                    .or_default()
                    .push(ThreadTrace {
                        tid: key.tid,
                        source: ThreadSource::Dir {
                            dir: dir.clone(),
                            key,
                        },
                    });
            }
            for ((pid, start_ticks), threads) in by_proc {
                set.processes.push(ProcessTrace {
                    host: host.clone(),
                    pid,
                    start_ticks,
                    calib,
                    threads,
                });
            }
        }
        Ok(set)
    }
}

/// Writes hand-built processes (all of one host) as a trace directory, the way
/// `culprit reader` does: chunk files of checksummed records and a manifest. Used by tests
/// and benchmarks to exercise the on-disk path end to end.
pub fn write_trace_dir(dir: &Path, host: &str, processes: &[ProcessTrace]) -> Result<()> {
    let io = |what| {
        move |source| Error::Io {
            path: dir.to_path_buf(),
            what,
            source,
        }
    };
    std::fs::create_dir_all(dir).map_err(io("create trace directory"))?;
    let start = processes.first().map_or(0, |p| p.calib.realtime0_ns);
    let mut w =
        reader::ChunkWriter::create(dir, std::process::id(), 0, start).map_err(Error::Reader)?;
    let mut infos = Vec::new();
    for p in processes {
        let mut pinfo = reader::ProcessInfo {
            pid: p.pid,
            start_ticks: p.start_ticks,
            origin: "start".into(),
            ..Default::default()
        };
        for t in &p.threads {
            pinfo.threads.push(t.tid);
            let ThreadSource::Memory(chunks) = &t.source else {
                continue;
            };
            for (seq, c) in chunks.iter().enumerate() {
                let mut last = first_tsc(&c.bytes);
                let mut n = 0u64;
                for e in format::Decoder::new(&c.bytes).flatten() {
                    last = e.tsc;
                    n += 1;
                }
                let info = bufpool::SubBufInfo {
                    magic: bufpool::layout::SUBBUF_MAGIC,
                    flags: 0,
                    pid: p.pid,
                    tid: t.tid,
                    seq: seq as u64,
                    first_tsc: first_tsc(&c.bytes),
                    last_tsc: last,
                    lost_before: c.lost_before,
                    bytes_used: c.bytes.len() as u32,
                    data_size: c.bytes.len() as u32,
                    owner_start_ticks: p.start_ticks,
                };
                w.append(&info, &c.bytes).map_err(io("write chunk"))?;
                pinfo.subbufs += 1;
                pinfo.entries += n;
                pinfo.bytes += c.bytes.len() as u64;
                pinfo.lost += c.lost_before;
            }
        }
        infos.push(pinfo);
    }
    w.sync().map_err(Error::Reader)?;
    let calib = processes.first().map(|p| p.calib).unwrap_or_default();
    let m = reader::Manifest {
        format: reader::manifest::MANIFEST_FORMAT.into(),
        version: reader::manifest::MANIFEST_VERSION,
        host: host.into(),
        command: vec!["(synthetic)".into()],
        start_unix_ns: start,
        end_unix_ns: Some(start),
        complete: true,
        calibration: calib.into(),
        pool: Default::default(),
        processes: infos,
        totals: Default::default(),
    };
    m.write(dir).map_err(Error::Reader)
}

/// Kinds of function-call events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CallKind {
    /// A C function (`-finstrument-functions`): site and callee are addresses.
    C,
    /// A Python function: site is a `py_site`, callee a code index.
    Py,
    /// A C function called from Python: site is a `py_site`, callee a builtin index.
    PyBuiltin,
}

/// One decoded event.
///
/// Events are handed to callbacks one at a time and never stored in bulk, so the size of
/// the library variant (its parsed options) costs nothing worth boxing for.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Event {
    /// A function was entered.
    Call {
        /// TSC.
        tsc: u64,
        /// Which kind of function.
        kind: CallKind,
        /// Call site.
        site: u64,
        /// Callee.
        callee: u64,
    },
    /// A function returned.
    Return {
        /// TSC.
        tsc: u64,
        /// Which kind of function.
        kind: CallKind,
        /// The function.
        callee: u64,
    },
    /// A Python exception was raised in a frame.
    Exception {
        /// TSC.
        tsc: u64,
        /// Code index of the frame.
        code: u64,
        /// Index of the exception type.
        exc_type: u64,
    },
    /// A wrapped library call (entry or exit).
    Lib(LibEvent),
    /// Entries were lost here.
    Lost {
        /// TSC.
        tsc: u64,
        /// How many.
        count: u64,
    },
    /// A metadata record.
    Meta {
        /// TSC.
        tsc: u64,
        /// The record.
        meta: Meta,
    },
}

/// A `LibEnter` or `LibExit` entry.
#[derive(Clone, Debug)]
pub struct LibEvent {
    /// TSC.
    pub tsc: u64,
    /// True for `LibExit`.
    pub exit: bool,
    /// Call site (return address in the caller).
    pub site: u64,
    /// The function.
    pub func: LibFn,
    /// Arguments and results the analyzer uses.
    pub opts: CallOpts,
}

/// The options of a library entry the analyzer needs, parsed without building a whole
/// [`LibOpts`] (which carries buffers for addresses, stacks and strings): scalars always;
/// addresses and the native stack only for descriptor-creating calls
/// ([`crate::connections::is_tracked`]) — the rare ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallOpts {
    /// fd argument.
    pub fd: Option<i32>,
    /// Second fd.
    pub fd2: Option<i32>,
    /// Requested length.
    pub len: Option<u64>,
    /// Return value.
    pub ret: Option<i64>,
    /// errno.
    pub errno: Option<i32>,
    /// Flags / command argument.
    pub flags: Option<u32>,
    /// Fault-injection rule.
    pub inject: Option<u32>,
    /// Whether the fd is a socket.
    pub is_socket: Option<bool>,
    /// Addresses and stack (descriptor-creating calls only).
    pub extra: Option<Box<CallExtra>>,
}

/// The rarely needed options of a call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallExtra {
    /// Local address.
    pub local: Option<Addr>,
    /// Peer address.
    pub peer: Option<Addr>,
    /// Native call stack.
    pub stack: Vec<u64>,
}

impl CallOpts {
    /// From fully parsed options.
    pub fn from_lib_opts(o: &LibOpts, extra: bool) -> CallOpts {
        CallOpts {
            fd: o.fd,
            fd2: o.fd2,
            len: o.len,
            ret: o.ret,
            errno: o.errno,
            flags: o.flags,
            inject: o.inject,
            is_socket: o.is_socket,
            extra: extra.then(|| {
                Box::new(CallExtra {
                    local: o.local,
                    peer: o.peer,
                    stack: o.stack().to_vec(),
                })
            }),
        }
    }

    /// Local address, if recorded.
    pub fn local(&self) -> Option<Addr> {
        self.extra.as_ref().and_then(|x| x.local)
    }

    /// Peer address, if recorded.
    pub fn peer(&self) -> Option<Addr> {
        self.extra.as_ref().and_then(|x| x.peer)
    }

    /// Native call stack (empty if not recorded).
    pub fn stack(&self) -> &[u64] {
        self.extra.as_ref().map_or(&[], |x| &x.stack)
    }

    /// Parses the scalar options of a block; None if the block has anything else (or is
    /// malformed), in which case the caller parses it fully.
    #[inline(always)]
    pub(crate) fn parse_scalars(b: &[u8]) -> Option<CallOpts> {
        let mut o = CallOpts::default();
        o.parse_scalars_into(b).then_some(o)
    }

    /// [`CallOpts::parse_scalars`] in place: sets the options the block has (the last of
    /// a repeated one wins), leaving the others as they are. False if the block has
    /// anything but scalars (or is malformed); some options may have been set then.
    #[inline(always)]
    pub(crate) fn parse_scalars_into(&mut self, b: &[u8]) -> bool {
        let o = self;
        let u32_at = |a: &[u8], i: usize| u32::from_le_bytes([a[i], a[i + 1], a[i + 2], a[i + 3]]);
        let u64_at = |a: &[u8], i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&a[i..i + 8]);
            u64::from_le_bytes(w)
        };
        // The layouts the tracer writes most, whole: descriptor and length (the entries of
        // reads and sends), the same and the result (their exits), a length alone.
        if let Ok(a) = <&[u8; 14]>::try_from(b) {
            if a[0] == 0x01 && a[5] == 0x03 {
                o.fd = Some(u32_at(a, 1) as i32);
                o.len = Some(u64_at(a, 6));
                return true;
            }
        } else if let Ok(a) = <&[u8; 23]>::try_from(b) {
            if a[0] == 0x01 && a[5] == 0x03 && a[14] == 0x04 {
                o.fd = Some(u32_at(a, 1) as i32);
                o.len = Some(u64_at(a, 6));
                o.ret = Some(u64_at(a, 15) as i64);
                return true;
            }
        } else if let Ok(a) = <&[u8; 9]>::try_from(b) {
            if a[0] == 0x03 {
                o.len = Some(u64_at(a, 1));
                return true;
            }
        }
        let mut p = 0usize;
        let get = |p: usize, n: usize| b.get(p..p + n);
        while p < b.len() {
            let tag = b[p];
            p += 1;
            match tag {
                0x01 | 0x02 | 0x05 | 0x06 | 0x0e => {
                    let Some(v) = get(p, 4) else { return false };
                    let v = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
                    p += 4;
                    match tag {
                        0x01 => o.fd = Some(v as i32),
                        0x02 => o.fd2 = Some(v as i32),
                        0x05 => o.errno = Some(v as i32),
                        0x06 => o.flags = Some(v),
                        _ => o.inject = Some(v),
                    }
                }
                0x03 | 0x04 | 0x0c | 0x0d => {
                    let Some(v) = get(p, 8) else { return false };
                    let v = u64::from_le_bytes([v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]]);
                    p += 8;
                    match tag {
                        0x03 => o.len = Some(v),
                        0x04 => o.ret = Some(v as i64),
                        _ => {}
                    }
                }
                0x0f => {
                    let Some(&v) = b.get(p) else { return false };
                    if v > 1 {
                        return false;
                    }
                    o.is_socket = Some(v == 1);
                    p += 1;
                }
                0x09 => {
                    // Ready set: flags, n, n × 6 bytes; not used by the analyzer.
                    let Some(h) = get(p, 2) else { return false };
                    if h[0] > 1 || h[1] as usize > bufpool::format::MAX_READY_ITEMS {
                        return false;
                    }
                    let n = 2 + h[1] as usize * 6;
                    if p + n > b.len() {
                        return false;
                    }
                    p += n;
                }
                0x0b => {
                    // A string (exec path): not used by the analyzer.
                    let Some(&n) = b.get(p) else { return false };
                    let n = n as usize;
                    if p + 1 + n > b.len() {
                        return false;
                    }
                    p += 1 + n;
                }
                _ => return false,
            }
        }
        true
    }
}

impl Event {
    /// The event's TSC.
    pub fn tsc(&self) -> u64 {
        match self {
            Event::Call { tsc, .. }
            | Event::Return { tsc, .. }
            | Event::Exception { tsc, .. }
            | Event::Lost { tsc, .. }
            | Event::Meta { tsc, .. } => *tsc,
            Event::Lib(l) => l.tsc,
        }
    }
}

/// Counts of one decoding pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// Trace entries decoded (metadata records and `Lost` markers excluded, as in the
    /// manifest's `entries`).
    pub entries: u64,
    /// Bytes decoded.
    pub bytes: u64,
    /// Entries the tracer reported lost.
    pub lost: u64,
}

impl std::ops::AddAssign for DecodeStats {
    fn add_assign(&mut self, o: Self) {
        self.entries += o.entries;
        self.bytes += o.bytes;
        self.lost += o.lost;
    }
}

impl ThreadTrace {
    /// Decodes every chunk in order, calling `f` for each event. Loads one chunk at a time.
    pub fn for_each(&self, mut f: impl FnMut(&Event)) -> Result<DecodeStats> {
        self.for_each_owned(|e| f(&e))
    }

    /// Like [`ThreadTrace::for_each`], handing each event over (no copy needed to keep it).
    pub fn for_each_owned(&self, f: impl FnMut(Event)) -> Result<DecodeStats> {
        self.visit(&mut Owned(f))
    }

    /// Decodes every chunk in order, handing each event to `v` by kind (see [`Visit`]).
    /// Loads one chunk at a time.
    pub fn visit<V: Visit>(&self, v: &mut V) -> Result<DecodeStats> {
        let mut st = DecodeStats::default();
        self.raw_chunks(|c| decode_chunk(c.path, c.base, c.lost_before, c.bytes, &mut st, v))?;
        Ok(st)
    }

    /// Hands each chunk's bytes, in order, to `f` (one chunk loaded at a time), for
    /// decoders of their own; [`entry_error`] names what is wrong with an entry they
    /// cannot take.
    pub fn raw_chunks(&self, mut f: impl FnMut(RawChunk<'_>) -> Result<()>) -> Result<()> {
        match &self.source {
            ThreadSource::Memory(chunks) => {
                for c in chunks {
                    f(RawChunk {
                        path: &c.name,
                        base: 0,
                        lost_before: c.lost_before,
                        bytes: &c.bytes,
                    })?;
                }
            }
            ThreadSource::Loaded(l) => {
                for r in &l.records {
                    f(RawChunk {
                        path: &r.path,
                        base: r.data_offset,
                        lost_before: r.info.lost_before,
                        bytes: &l.bytes[r.at..r.at + r.info.bytes_used as usize],
                    })?;
                }
            }
            ThreadSource::Dir { dir, key } => {
                dir.visit_chunks(*key, |c| {
                    f(RawChunk {
                        path: c.path,
                        base: c.data_offset,
                        lost_before: c.info.lost_before,
                        bytes: c.data,
                    })
                })?;
            }
        }
        Ok(())
    }
}

/// One chunk of a thread, as [`ThreadTrace::raw_chunks`] lends it.
#[derive(Clone, Copy, Debug)]
pub struct RawChunk<'a> {
    /// The file it was read from (or a name standing for it).
    pub path: &'a Path,
    /// Offset of its first byte in that file.
    pub base: u64,
    /// Entries lost just before it.
    pub lost_before: u64,
    /// The entries.
    pub bytes: &'a [u8],
}

/// Decodes the entry at `at` of a chunk with the checking decoder: the entry and its size,
/// or the error naming the file and offset.
pub fn entry_at<'a>(c: &RawChunk<'a>, at: usize) -> Result<Option<format::EntryRef<'a>>> {
    let mut d = format::Decoder::with_base(&c.bytes[at..], c.base + at as u64);
    match d.next() {
        None => Ok(None),
        Some(Ok(e)) => Ok(Some(e)),
        Some(Err(source)) => Err(entry_error(c.path, source)),
    }
}

/// The error for a bad entry of file `path`.
pub fn entry_error(path: &Path, source: format::DecodeError) -> Error {
    Error::Decode {
        path: path.to_path_buf(),
        source,
    }
}

/// Receives a thread's events by kind: function entries and returns as plain values and
/// library calls in place, so that the common events are never built as an [`Event`] and
/// copied (handing over a just-built event by value cost a store-forwarding stall per
/// entry). What [`ThreadTrace::for_each_owned`] hands over, in the same order.
pub trait Visit {
    /// A function was entered ([`Event::Call`]).
    fn call(&mut self, tsc: u64, kind: CallKind, site: u64, callee: u64);
    /// A function returned ([`Event::Return`]).
    fn ret(&mut self, tsc: u64, kind: CallKind, callee: u64);
    /// A library entry or exit ([`Event::Lib`]); the visitor may take from it.
    fn lib(&mut self, l: &mut LibEvent);
    /// Any other event.
    fn other(&mut self, e: Event);
    /// Does the visitor look at the options of calls of `func`? When it does not, the
    /// scalar options are not parsed ([`Visit::lib`] gets empty ones); the options of
    /// descriptor-creating calls are always parsed. Default: yes.
    #[inline]
    fn wants_opts(&self, func: LibFn) -> bool {
        let _ = func;
        true
    }
    /// A library entry or exit of a call that creates no descriptor, with its option block
    /// `body` (which fits in the entry) not parsed yet: the visitor parses it with
    /// [`CallOpts::parse_scalars`] if it [wants](Visit::wants_opts) the options, and hands
    /// the event to [`Visit::lib`]. False if the block has anything but scalars (or is
    /// malformed): the entry then goes through the checking decoder. A visitor may
    /// override this to build the event where it keeps it, instead of building it here and
    /// copying it (a copy of a just-built event stalls on store forwarding).
    #[inline(always)]
    fn lib_scalars(&mut self, tsc: u64, exit: bool, site: u64, func: LibFn, body: &[u8]) -> bool {
        let opts = if self.wants_opts(func) {
            match CallOpts::parse_scalars(body) {
                Some(o) => o,
                None => return false,
            }
        } else {
            CallOpts::default()
        };
        self.lib(&mut LibEvent {
            tsc,
            exit,
            site,
            func,
            opts,
        });
        true
    }
}

/// [`Visit`] handing over whole [`Event`]s.
struct Owned<F>(F);

impl<F: FnMut(Event)> Visit for Owned<F> {
    fn call(&mut self, tsc: u64, kind: CallKind, site: u64, callee: u64) {
        (self.0)(Event::Call {
            tsc,
            kind,
            site,
            callee,
        })
    }
    fn ret(&mut self, tsc: u64, kind: CallKind, callee: u64) {
        (self.0)(Event::Return { tsc, kind, callee })
    }
    fn lib(&mut self, l: &mut LibEvent) {
        (self.0)(Event::Lib(l.clone()))
    }
    fn other(&mut self, e: Event) {
        (self.0)(e)
    }
}

/// The fixed part of an entry, read without checks: kind byte, TSC, and the two 48-bit
/// fields at offsets 8 and 14 (call site and callee of call-shaped and library entries; the
/// first is the function of return-shaped ones). For the decoding loops' fast paths: `None`
/// when fewer than 21 bytes are left (the checking decoder takes the entry then).
pub(crate) struct Head {
    pub kind: u8,
    pub tsc: u64,
    pub site: u64,
    pub callee: u64,
}

impl Head {
    #[inline(always)]
    pub fn at(bytes: &[u8], p: usize) -> Option<Head> {
        let b = bytes.get(p..p + 21)?;
        let word = |at: usize| -> u64 {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(w)
        };
        let head = word(0);
        Some(Head {
            kind: head as u8,
            tsc: (head >> 8) & format::TSC_MASK,
            site: word(8) & format::ADDR_MASK,
            callee: word(12) >> 16,
        })
    }
}

/// Decodes one chunk. The common entries — function entries and returns, and library calls
/// whose options are scalars — are decoded in place (the checks are those of `bufpool`'s
/// [`format::Decoder`]: an entry is taken here only when all of it is in the chunk, its
/// option block fits and its function id is known); everything else (metadata, lost
/// markers, exceptions, descriptor-creating calls, and any entry in doubt) goes through the
/// decoder and [`convert`], which name the offset of what is wrong.
#[inline(always)]
fn decode_chunk(
    path: &Path,
    base: u64,
    lost_before: u64,
    bytes: &[u8],
    st: &mut DecodeStats,
    v: &mut impl Visit,
) -> Result<()> {
    if lost_before > 0 {
        st.lost += lost_before;
        v.other(Event::Lost {
            tsc: first_tsc(bytes),
            count: lost_before,
        });
    }
    st.bytes += bytes.len() as u64;
    let n = bytes.len();
    let mut p = 0usize;
    // Counted here, added to `st` at the end (an error discards the counts).
    let mut entries = 0u64;
    while p < n {
        if let Some(Head {
            kind: k,
            tsc,
            site,
            callee,
        }) = Head::at(bytes, p)
        {
            let size = match k {
                0x01 => {
                    v.call(tsc, CallKind::C, site, callee);
                    20
                }
                0x03 => {
                    v.call(tsc, CallKind::Py, site, callee);
                    20
                }
                0x06 => {
                    v.call(tsc, CallKind::PyBuiltin, site, callee);
                    20
                }
                0x02 => {
                    v.ret(tsc, CallKind::C, site);
                    16
                }
                0x04 => {
                    v.ret(tsc, CallKind::Py, site);
                    16
                }
                0x07 => {
                    v.ret(tsc, CallKind::PyBuiltin, site);
                    16
                }
                0x10 | 0x11 => {
                    let m = bytes[p + 20] as usize;
                    match LibFn::from_id(callee) {
                        Some(func)
                            if m <= format::MAX_OPTS
                                && n - p >= 21 + m
                                && !crate::connections::is_tracked(func)
                                && v.lib_scalars(
                                    tsc,
                                    k == 0x11,
                                    site,
                                    func,
                                    &bytes[p + 21..p + 21 + m],
                                ) =>
                        {
                            21 + m
                        }
                        _ => 0,
                    }
                }
                _ => 0,
            };
            if size > 0 {
                entries += 1;
                p += size;
                continue;
            }
        }
        let mut d = format::Decoder::with_base(&bytes[p..], base + p as u64);
        let Some(e) = d.next() else { break };
        let e = e.map_err(|source| Error::Decode {
            path: path.to_path_buf(),
            source,
        })?;
        // "Entries" as the manifest counts them: metadata records and Lost markers are not.
        if !e.kind.is_meta() && e.kind != Kind::Lost {
            entries += 1;
        }
        let ev = convert(&e).map_err(|source| Error::Decode {
            path: path.to_path_buf(),
            source,
        })?;
        match ev {
            Event::Lib(mut l) => v.lib(&mut l),
            Event::Lost { count, .. } => {
                st.lost += count;
                v.other(ev)
            }
            ev => v.other(ev),
        }
        p += e.size;
    }
    st.entries += entries;
    Ok(())
}

fn first_tsc(bytes: &[u8]) -> u64 {
    if bytes.len() >= 8 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[..8]);
        (u64::from_le_bytes(w) >> 8) & format::TSC_MASK
    } else {
        0
    }
}

/// Turns a decoded entry into an [`Event`] (parsing options and metadata).
#[inline(always)]
pub fn convert(e: &format::EntryRef<'_>) -> std::result::Result<Event, format::DecodeError> {
    let tsc = e.tsc;
    Ok(match e.kind {
        Kind::FnEnter => Event::Call {
            tsc,
            kind: CallKind::C,
            site: e.caller,
            callee: e.callee,
        },
        Kind::PyCall => Event::Call {
            tsc,
            kind: CallKind::Py,
            site: e.caller,
            callee: e.callee,
        },
        Kind::PyCCall => Event::Call {
            tsc,
            kind: CallKind::PyBuiltin,
            site: e.caller,
            callee: e.callee,
        },
        Kind::FnExit => Event::Return {
            tsc,
            kind: CallKind::C,
            callee: e.callee,
        },
        Kind::PyReturn => Event::Return {
            tsc,
            kind: CallKind::Py,
            callee: e.callee,
        },
        Kind::PyCReturn => Event::Return {
            tsc,
            kind: CallKind::PyBuiltin,
            callee: e.callee,
        },
        Kind::PyExc => Event::Exception {
            tsc,
            code: e.callee,
            exc_type: e.caller,
        },
        Kind::LibEnter | Kind::LibExit => {
            let func = e.lib_fn().ok_or(format::DecodeError {
                offset: e.offset,
                kind: format::DecodeErrorKind::UnknownLibFn(e.callee),
            })?;
            let tracked = crate::connections::is_tracked(func);
            let opts = match (tracked, CallOpts::parse_scalars(e.body)) {
                (false, Some(o)) => o,
                _ => CallOpts::from_lib_opts(&e.opts()?, tracked),
            };
            Event::Lib(LibEvent {
                tsc,
                exit: e.kind == Kind::LibExit,
                site: e.caller,
                func,
                opts,
            })
        }
        Kind::Lost => Event::Lost { tsc, count: e.lost },
        _ => match e.meta()? {
            Some(meta) => Event::Meta { tsc, meta },
            None => Event::Lost { tsc, count: 0 },
        },
    })
}

/// Builds traces by hand with `bufpool`'s encoders (tests and benchmarks).
///
/// ```
/// use analyzer::decode::TraceBuilder;
/// use bufpool::format::{LibFn, LibOpts};
/// let mut t = TraceBuilder::new("host", 100, 100);
/// t.enter(0x1000, 0x2000);
/// t.lib(0x2010, LibFn::Socket, LibOpts { ret: Some(3), ..Default::default() });
/// t.exit(0x2000);
/// let p = t.finish();
/// assert_eq!(p.threads.len(), 1);
/// ```
pub struct TraceBuilder {
    host: String,
    pid: u32,
    tid: u32,
    tsc: u64,
    chunk_size: usize,
    cur: Vec<u8>,
    chunks: Vec<Chunk>,
    lost: u64,
    threads: Vec<ThreadTrace>,
    calib: Calibration,
}

impl TraceBuilder {
    /// A process `pid` on `host`, writing thread `tid` first. The TSC runs at 1 GHz from
    /// 1 000 000 ticks, and wall-clock time starts at 1.7e18 ns.
    pub fn new(host: &str, pid: u32, tid: u32) -> TraceBuilder {
        TraceBuilder {
            host: host.to_string(),
            pid,
            tid,
            tsc: 1_000_000,
            chunk_size: 64 * 1024,
            cur: Vec::new(),
            chunks: Vec::new(),
            lost: 0,
            threads: Vec::new(),
            calib: Calibration {
                tsc0: 1_000_000,
                realtime0_ns: 1_700_000_000_000_000_000,
                monotonic0_ns: 1_000_000,
                tsc1: 2_001_000_000,
                realtime1_ns: 1_700_000_002_000_000_000,
                monotonic1_ns: 2_001_000_000,
            },
        }
    }

    /// Sets the chunk size (entries are split into chunks of at most this many bytes).
    pub fn chunk_size(mut self, n: usize) -> Self {
        self.chunk_size = n.max(256);
        self
    }

    /// Advances the clock by `ticks` (every entry also advances it by 100).
    pub fn wait(&mut self, ticks: u64) {
        self.tsc += ticks;
    }

    /// The current TSC.
    pub fn now(&self) -> u64 {
        self.tsc
    }

    fn push(&mut self, b: &[u8]) {
        if self.cur.len() + b.len() > self.chunk_size {
            self.cut();
        }
        self.cur.extend_from_slice(b);
        self.tsc += 100;
    }

    fn cut(&mut self) {
        if self.cur.is_empty() {
            return;
        }
        let name = format!(
            "<memory {}:{}/{} chunk {}>",
            self.host,
            self.pid,
            self.tid,
            self.chunks.len()
        );
        self.chunks.push(Chunk {
            lost_before: std::mem::take(&mut self.lost),
            name: Arc::new(PathBuf::from(name)),
            bytes: Arc::new(std::mem::take(&mut self.cur)),
        });
    }

    /// Appends raw bytes as they are (to test corrupt input).
    pub fn raw(&mut self, b: &[u8]) {
        self.cur.extend_from_slice(b);
    }

    /// A C function entry.
    pub fn enter(&mut self, site: u64, callee: u64) {
        let e = encode_fn(Kind::FnEnter, self.tsc, site, callee);
        self.push(e.as_bytes());
    }

    /// A C function exit.
    pub fn exit(&mut self, callee: u64) {
        let e = encode_ret(Kind::FnExit, self.tsc, callee, 0);
        self.push(e.as_bytes());
    }

    /// A Python call (`site` from [`format::py_site`]).
    pub fn py_call(&mut self, site: u64, code: u32) {
        let e = encode_fn(Kind::PyCall, self.tsc, site, code as u64);
        self.push(e.as_bytes());
    }

    /// A Python return.
    pub fn py_return(&mut self, code: u32) {
        let e = encode_ret(Kind::PyReturn, self.tsc, code as u64, 0);
        self.push(e.as_bytes());
    }

    /// A call of a builtin from Python.
    pub fn py_ccall(&mut self, site: u64, builtin: u32) {
        let e = encode_fn(Kind::PyCCall, self.tsc, site, builtin as u64);
        self.push(e.as_bytes());
    }

    /// The return of a builtin called from Python.
    pub fn py_creturn(&mut self, builtin: u32) {
        let e = encode_ret(Kind::PyCReturn, self.tsc, builtin as u64, 0);
        self.push(e.as_bytes());
    }

    /// A Python exception raised in frame `code`.
    pub fn py_exc(&mut self, code: u32, exc_type: u32) {
        let e = encode_fn(Kind::PyExc, self.tsc, exc_type as u64, code as u64);
        self.push(e.as_bytes());
    }

    /// A library call: a `LibEnter` with the arguments (fd, len) and a `LibExit` with
    /// all of `opts`.
    pub fn lib(&mut self, site: u64, func: LibFn, opts: LibOpts) {
        let enter = LibOpts {
            fd: opts.fd,
            len: opts.len,
            ..Default::default()
        };
        let e = encode_lib(Kind::LibEnter, self.tsc, site, func, &enter);
        self.push(e.as_bytes());
        let e = encode_lib(Kind::LibExit, self.tsc, site, func, &opts);
        self.push(e.as_bytes());
    }

    /// Only the `LibEnter` of a call that never returns (exit, exec) or is still blocked.
    pub fn lib_enter(&mut self, site: u64, func: LibFn, opts: LibOpts) {
        let e = encode_lib(Kind::LibEnter, self.tsc, site, func, &opts);
        self.push(e.as_bytes());
    }

    /// A metadata record.
    pub fn meta(&mut self, m: &Meta) {
        let mut out = [0u8; META_BUF];
        let n = encode_meta(self.tsc, m, &mut out);
        self.push(&out[..n]);
    }

    /// Starts writing another thread of the same process.
    pub fn thread(&mut self, tid: u32) {
        self.cut();
        let chunks = std::mem::take(&mut self.chunks);
        if !chunks.is_empty() {
            self.threads.push(ThreadTrace {
                tid: self.tid,
                source: ThreadSource::Memory(chunks),
            });
        }
        self.tid = tid;
    }

    /// Marks `n` entries lost before the next chunk (cuts the current one).
    pub fn lose(&mut self, n: u64) {
        self.cut();
        self.lost += n;
    }

    /// The finished process trace.
    pub fn finish(mut self) -> ProcessTrace {
        self.thread(0);
        ProcessTrace {
            host: self.host,
            pid: self.pid,
            start_ticks: 0,
            calib: self.calib,
            threads: self.threads,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quick scalar parser (and its fast paths for whole common layouts) accepts only
    /// blocks the full parser reads the same way, and every block of scalars.
    #[test]
    fn scalar_parser_agrees_with_the_full_one() {
        let mut blocks: Vec<Vec<u8>> = Vec::new();
        let some = [None, Some(7), Some(-1)];
        for fd in some {
            for len in [None, Some(8u64), Some(1 << 40)] {
                for ret in [None, Some(0i64), Some(-5)] {
                    for extra in 0..5 {
                        let mut o = LibOpts {
                            fd,
                            len,
                            ret,
                            ..Default::default()
                        };
                        match extra {
                            1 => o.is_socket = Some(true),
                            2 => o.errno = Some(11),
                            3 => {
                                let mut r = format::ReadySet::default();
                                r.push(format::ReadyItem { id: 3, events: 1 });
                                o.ready = Some(r);
                            }
                            4 => o.peer = Some(Addr::new(2, 80, &[10, 0, 0, 1])),
                            _ => {}
                        }
                        let mut out = [0u8; format::MAX_OPTS];
                        let n = o.encode(&mut out);
                        blocks.push(out[..n].to_vec());
                    }
                }
            }
        }
        // Damaged ones: cut short, a byte changed.
        let whole = blocks.clone();
        for b in &whole {
            for cut in 0..b.len() {
                blocks.push(b[..cut].to_vec());
            }
            for i in 0..b.len() {
                for v in [0x00, 0x01, 0x03, 0x04, 0x09, 0x0f, 0x7f] {
                    let mut d = b.clone();
                    d[i] = v;
                    blocks.push(d);
                }
            }
        }
        let mut fast = 0;
        for b in &blocks {
            let full = LibOpts::parse(b);
            match CallOpts::parse_scalars(b) {
                Some(o) => {
                    let f = full.as_ref().expect("accepted by the quick parser only");
                    assert_eq!(o, CallOpts::from_lib_opts(f, false), "{b:02x?}");
                    fast += [9, 14, 23].contains(&b.len()) as usize;
                }
                None => {
                    // Refused: malformed, or has more than scalars.
                    if let Ok(f) = full {
                        assert!(f.peer.is_some(), "{b:02x?}");
                    }
                }
            }
        }
        assert!(fast > 100, "{fast}");
    }

    #[test]
    fn round_trip_and_corrupt_input_names_offset() {
        let mut t = TraceBuilder::new("h", 1, 1);
        t.enter(0x10, 0x20);
        t.lib(
            0x30,
            LibFn::Recv,
            LibOpts {
                fd: Some(4),
                ret: Some(8),
                ..Default::default()
            },
        );
        t.exit(0x20);
        t.raw(&[0x7f; 12]);
        let p = t.finish();
        let mut seen = Vec::new();
        let err = p.threads[0]
            .for_each(|e| seen.push(e.clone()))
            .expect_err("corrupt tail");
        assert_eq!(seen.len(), 4);
        let msg = format!("{err}");
        assert!(msg.contains("<memory h:1/1 chunk 0>"), "{msg}");
        assert!(msg.contains("at byte offset 97"), "{msg}");
        assert!(msg.contains("unknown entry type 0x7f"), "{msg}");
    }
}
