//! Stage 1 — **decode**: trace data into per-thread event streams with wall-clock times.
//!
//! The input of the analyzer is a [`TraceSet`](super::load::TraceSet) ([`super::load`]): processes (host, pid, TSC calibration),
//! each with threads, each with its chunks (the sub-buffers the readers saved) in sequence
//! order. Chunks are loaded one at a time ([`ThreadSource::Dir`] reads them from a trace
//! directory through `reader::TraceDir`, which verifies each record's checksum the first
//! time its data is read, so before it is decoded), so a trace is streamed, never held
//! whole; a stage that goes over a process twice may first read that one process into
//! memory ([`ProcessTrace::load`](super::load::ProcessTrace::load), bounded).
//! [`ThreadTrace::for_each`](super::load::ThreadTrace::for_each)
//! decodes a thread's chunks with `bufpool`'s decoder and hands each entry, turned into an
//! [`Event`], to a callback. A corrupt entry stops the stream with [`Error::Decode`] naming
//! the file and the byte offset.
//!
//! [`TraceBuilder`](super::builder::TraceBuilder) writes the same input by hand (tests, benchmarks), with `bufpool`'s
//! encoders.

use super::load::{ThreadSource, ThreadTrace};
use crate::error::{Error, Result};
use bufpool::format::{self, Addr, Kind, LibFn, LibOpts, Meta, ScalarOpts};
use std::path::Path;

/// Kinds of function-call events (the format's: which functions an entry is about).
pub use bufpool::format::CallKind;

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
    /// The scalar options: arguments and results.
    pub opts: CallOpts,
    /// Addresses and native stack: descriptor-creating calls only
    /// ([`crate::connections::is_tracked`]) — the rare ones.
    pub extra: Option<Box<CallExtra>>,
}

impl LibEvent {
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
}

/// The options of a library entry the analyzer reads on every call: the format's scalar
/// options, read without building a whole [`LibOpts`] (which carries buffers for addresses,
/// stacks and strings). The rest is in [`LibEvent::extra`].
pub type CallOpts = ScalarOpts;

/// The rarely needed options of a call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallExtra {
    /// Local address.
    pub local: Option<Addr>,
    /// Peer address.
    pub peer: Option<Addr>,
    /// Native call stack.
    pub stack: Vec<u64>,
    /// The call's string argument, kept for `exec*` calls only: the program's path.
    pub text: Vec<u8>,
}

impl CallExtra {
    /// The addresses and stack of fully parsed options (and the path of an `exec*`).
    pub fn of(o: &LibOpts) -> CallExtra {
        CallExtra {
            local: o.local,
            peer: o.peer,
            stack: o.stack().to_vec(),
            text: Vec::new(),
        }
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
        // Lost counts come from the trace: a damaged or hostile one must not wrap them.
        self.lost = self.lost.saturating_add(o.lost);
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
    ///
    /// Damage inside a chunk costs only itself (`reader::damage`): when `f` stops at an
    /// entry of the chunk that does not decode (an [`Error::Decode`] at an offset inside
    /// it), the rest of the chunk is skipped and reported once as damage of its trace
    /// directory, and the next chunk is handed over (an error only with `--strict`). A
    /// chunk whose header's lost count disagrees with its leading `Lost` entry is reported
    /// too; [`RawChunk::lost_before`] is the count the chunk's entries do not carry
    /// ([`format::header_lost`]), so that a loss is counted once.
    pub fn raw_chunks(&self, mut f: impl FnMut(RawChunk<'_>) -> Result<()>) -> Result<()> {
        match &self.source {
            ThreadSource::Memory(chunks) => {
                for c in chunks {
                    let c = RawChunk {
                        path: &c.name,
                        base: 0,
                        lost_before: c.lost_before,
                        bytes: &c.bytes,
                    };
                    tolerant(&mut f, c, &Sink::Memory)?;
                }
            }
            ThreadSource::Loaded(l) => {
                let sink = Sink::Dir(&l.dir, l.key);
                for r in &l.records {
                    let c = RawChunk {
                        path: &r.path,
                        base: r.data_offset,
                        lost_before: r.info.lost_before,
                        bytes: &l.bytes[r.at..r.at + r.info.bytes_used as usize],
                    };
                    tolerant(&mut f, c, &sink)?;
                }
            }
            ThreadSource::Dir { dir, key } => {
                let sink = Sink::Dir(dir, *key);
                dir.visit_chunks(*key, |c| {
                    let c = RawChunk {
                        path: c.path,
                        base: c.data_offset,
                        lost_before: c.info.lost_before,
                        bytes: c.data,
                    };
                    tolerant(&mut f, c, &sink)
                })?;
            }
            ThreadSource::Suffix {
                dir,
                key,
                context,
                skip,
            } => {
                let sink = Sink::Dir(dir, *key);
                let mut context = Some(context);
                dir.visit_chunks(*key, |c| {
                    let mut at = 0;
                    // The context follows the flight recorder's compacted records (what
                    // precedes every window) and precedes the suffix, which may begin
                    // inside its first record.
                    if c.info.flags & bufpool::layout::FLAG_COMPACTED == 0 {
                        if let Some(x) = context.take() {
                            let x = RawChunk {
                                path: &x.name,
                                base: 0,
                                lost_before: 0,
                                bytes: &x.bytes,
                            };
                            tolerant(&mut f, x, &Sink::Memory)?;
                            if let Some((k, n)) = skip {
                                if reader::rotated::record_key(c.info, c.piece) == *k {
                                    at = (*n).min(c.data.len());
                                }
                            }
                        }
                    }
                    let c = RawChunk {
                        path: c.path,
                        base: c.data_offset + at as u64,
                        lost_before: if at == 0 { c.info.lost_before } else { 0 },
                        bytes: &c.data[at..],
                    };
                    tolerant(&mut f, c, &sink)
                })?;
                if let Some(x) = context {
                    let x = RawChunk {
                        path: &x.name,
                        base: 0,
                        lost_before: 0,
                        bytes: &x.bytes,
                    };
                    tolerant(&mut f, x, &Sink::Memory)?;
                }
            }
        }
        Ok(())
    }
}

/// Where the damage found in a chunk's entries is reported.
enum Sink<'a> {
    /// The trace directory the chunk was read from (reports each record once).
    Dir(&'a reader::TraceDir, reader::ThreadKey),
    /// A hand-built chunk: a warning line (an error with `--strict`).
    Memory,
}

impl Sink<'_> {
    fn undecodable(&self, c: &RawChunk<'_>, err: format::DecodeError) -> Result<()> {
        match self {
            Sink::Dir(dir, key) => dir
                .skip_undecodable(*key, c.base, c.bytes.len() as u64, &err)
                .map_err(Error::Reader),
            Sink::Memory if reader::tracedir::strict_default() => Err(entry_error(c.path, err)),
            Sink::Memory => {
                eprintln!(
                    "culprit: warning: {}: an entry that does not decode ({err}): the rest \
                     of its chunk is skipped",
                    c.path.display()
                );
                Ok(())
            }
        }
    }

    fn inconsistent(&self, c: &RawChunk<'_>, why: String) -> Result<()> {
        match self {
            Sink::Dir(dir, key) => dir
                .note_inconsistent(*key, c.base, why)
                .map_err(Error::Reader),
            Sink::Memory => {
                eprintln!("culprit: warning: {}: {why}", c.path.display());
                Ok(())
            }
        }
    }
}

/// Hands one chunk to `f` as [`ThreadTrace::raw_chunks`] says: its lost count checked,
/// and an entry of it that does not decode costing only the rest of it.
fn tolerant(
    f: &mut impl FnMut(RawChunk<'_>) -> Result<()>,
    c: RawChunk<'_>,
    sink: &Sink<'_>,
) -> Result<()> {
    let lost_before = match format::header_lost(c.lost_before, c.bytes) {
        Ok(n) => n,
        Err(m) => {
            sink.inconsistent(&c, m.to_string())?;
            0
        }
    };
    let c = RawChunk { lost_before, ..c };
    match f(c) {
        Err(Error::Decode { source, .. })
            if source.offset >= c.base && source.offset < c.base + c.bytes.len() as u64 =>
        {
            sink.undecodable(&c, source)
        }
        r => r,
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
    /// [`ScalarOpts::parse`] if it [wants](Visit::wants_opts) the options, and hands
    /// the event to [`Visit::lib`]. False if the block has anything but scalars (or is
    /// malformed): the entry then goes through the checking decoder. A visitor may
    /// override this to build the event where it keeps it, instead of building it here and
    /// copying it (a copy of a just-built event stalls on store forwarding).
    #[inline(always)]
    fn lib_scalars(&mut self, tsc: u64, exit: bool, site: u64, func: LibFn, body: &[u8]) -> bool {
        if func.is_exec() && self.wants_opts(func) {
            // The program's path is a string: the checking decoder keeps it (rare calls).
            return false;
        }
        let opts = if self.wants_opts(func) {
            match ScalarOpts::parse(body) {
                Some(o) => o,
                None => return false,
            }
        } else {
            ScalarOpts::default()
        };
        self.lib(&mut LibEvent {
            tsc,
            exit,
            site,
            func,
            opts,
            extra: None,
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

/// The common entries handed to a [`Visit`] as [`format::quick_visit`] reads them: library
/// calls that create no descriptor only, and only if the visitor takes them in place.
struct Quick<'v, V>(&'v mut V);

impl<V: Visit> format::QuickVisit<'_> for Quick<'_, V> {
    #[inline(always)]
    fn call(&mut self, kind: CallKind, tsc: u64, site: u64, callee: u64) -> bool {
        self.0.call(tsc, kind, site, callee);
        true
    }
    #[inline(always)]
    fn ret(&mut self, kind: CallKind, tsc: u64, callee: u64) -> bool {
        self.0.ret(tsc, kind, callee);
        true
    }
    #[inline(always)]
    fn lib(&mut self, exit: bool, tsc: u64, site: u64, func: LibFn, body: &[u8]) -> bool {
        !crate::connections::is_tracked(func) && self.0.lib_scalars(tsc, exit, site, func, body)
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
        st.lost = st.lost.saturating_add(lost_before);
        v.other(Event::Lost {
            tsc: first_tsc(bytes),
            count: lost_before,
        });
    }
    st.bytes += bytes.len() as u64;
    let n = bytes.len();
    let mut p = 0usize;
    // Counted here, added to `st` at the end or at an entry that does not decode (the
    // entries before it were handed over: the rest of the chunk is skipped).
    let mut entries = 0u64;
    let r = (|| {
        while p < n {
            let size = format::quick_visit(bytes, p, &mut Quick(&mut *v));
            if size > 0 {
                entries += 1;
                p += size;
                continue;
            }
            let mut d = format::Decoder::with_base(&bytes[p..], base + p as u64);
            let Some(e) = d.next() else { break };
            let e = e.map_err(|source| entry_error(path, source))?;
            let ev = convert(&e).map_err(|source| entry_error(path, source))?;
            // "Entries" as the manifest counts them: metadata records and Lost markers are
            // not.
            if !e.kind.is_meta() && e.kind != format::Kind::Lost {
                entries += 1;
            }
            match ev {
                Event::Lib(mut l) => v.lib(&mut l),
                Event::Lost { count, .. } => {
                    st.lost = st.lost.saturating_add(count);
                    v.other(ev)
                }
                ev => v.other(ev),
            }
            p += e.size;
        }
        Ok(())
    })();
    st.entries += entries;
    r
}

pub(super) fn first_tsc(bytes: &[u8]) -> u64 {
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
        Kind::FnEnter | Kind::PyCall | Kind::PyCCall => Event::Call {
            tsc,
            kind: CallKind::of(e.kind),
            site: e.caller,
            callee: e.callee,
        },
        Kind::FnExit | Kind::PyReturn | Kind::PyCReturn => Event::Return {
            tsc,
            kind: CallKind::of(e.kind),
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
            let (opts, extra) = match (tracked || func.is_exec(), ScalarOpts::parse(e.body)) {
                (false, Some(o)) => (o, None),
                _ => {
                    let full = e.opts()?;
                    // Descriptor-creating calls, and data calls that carry an address (a
                    // datagram's destination or source).
                    // And the path of an exec.
                    let exec_path = func.is_exec().then(|| full.str_bytes()).flatten();
                    let keep = tracked
                        || full.local.is_some()
                        || full.peer.is_some()
                        || exec_path.is_some();
                    let extra = keep.then(|| {
                        let mut x = CallExtra::of(&full);
                        x.text = exec_path.map(<[u8]>::to_vec).unwrap_or_default();
                        Box::new(x)
                    });
                    (ScalarOpts::of(&full), extra)
                }
            };
            Event::Lib(LibEvent {
                tsc,
                exit: e.kind == Kind::LibExit,
                site: e.caller,
                func,
                opts,
                extra,
            })
        }
        Kind::Lost => Event::Lost { tsc, count: e.lost },
        _ => match e.meta()? {
            Some(meta) => Event::Meta { tsc, meta },
            None => Event::Lost { tsc, count: 0 },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::builder::TraceBuilder;

    #[test]
    fn round_trip_and_an_undecodable_entry_costs_the_rest_of_its_chunk() {
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
        t.lose(2);
        t.enter(0x10, 0x20);
        let p = t.finish();
        let mut seen = Vec::new();
        let st = p.threads[0]
            .for_each(|e| seen.push(e.clone()))
            .expect("the bad tail of the first chunk is skipped");
        // Four entries, then the next chunk: its `Lost` marker (counted once, not again
        // for its header) and its entry.
        assert_eq!(seen.len(), 6, "{seen:?}");
        assert!(matches!(seen[4], Event::Lost { count: 2, .. }), "{seen:?}");
        assert_eq!((st.entries, st.lost), (5, 2));
        // A chunk as written by the reader, decoded alone, stops at the bad entry and
        // names its offset.
        let ThreadSource::Memory(chunks) = &p.threads[0].source else {
            unreachable!()
        };
        let c = RawChunk {
            path: &chunks[0].name,
            base: 0,
            lost_before: 0,
            bytes: &chunks[0].bytes,
        };
        let mut at = 0;
        let err = loop {
            match entry_at(&c, at) {
                Ok(Some(e)) => at += e.size,
                Ok(None) => panic!("no error"),
                Err(e) => break e,
            }
        };
        let msg = format!("{err}");
        assert!(msg.contains("<memory h:1/1 chunk 0>"), "{msg}");
        assert!(msg.contains("at byte offset 97"), "{msg}");
        assert!(msg.contains("unknown entry type 0x7f"), "{msg}");
    }
}
