//! Metadata records: what the analyzer needs besides the events themselves.
//!
//! A metadata body is a sequence of fixed little-endian fields followed by
//! length-prefixed byte strings (`u16 len, bytes`). Strings are raw bytes (paths and
//! argv need not be UTF-8). Bodies never exceed [`MAX_META_BODY`]; encoders truncate
//! the trailing strings to fit (argv first).

use super::{Kind, MAX_META_BODY};

/// Why a process record was written.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcReason {
    /// The tracer started in this process (first load).
    Start = 0,
    /// The process is the child of a traced `fork`/`vfork`.
    Fork = 1,
    /// The process image was replaced by a traced `exec`.
    Exec = 2,
}

/// Process identity: written at tracer start, in a forked child and after exec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcRecord {
    /// Why it was written.
    pub reason: ProcReason,
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Start time in clock ticks since boot (`/proc/PID/stat` field 22): with `pid`, a
    /// unique process identity across pid reuse.
    pub start_ticks: u64,
    /// Executable path (`/proc/self/exe`).
    pub exe: Vec<u8>,
    /// Command-line arguments.
    pub argv: Vec<Vec<u8>>,
}

/// Thread start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadRecord {
    /// Thread id.
    pub tid: u32,
    /// Process id.
    pub pid: u32,
    /// Thread name (`/proc/self/task/TID/comm`), possibly empty.
    pub name: Vec<u8>,
}

/// One mapping of the memory map (executable mappings, and the first mapping of each
/// file so the load base of PIE executables and shared objects can be found).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapRecord {
    /// Start address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// `r`=4, `w`=2, `x`=1.
    pub prot: u8,
    /// Mapped file path (may be empty or `[vdso]`).
    pub path: Vec<u8>,
}

/// What a [`CodeRecord`] names.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeKind {
    /// A Python code object (function, method, module body, lambda…).
    PyCode = 0,
    /// A C function called from Python (builtin or method descriptor).
    PyBuiltin = 1,
    /// A Python exception type.
    PyExcType = 2,
}

/// Names one index used in Python entries. Written once per index, before its first use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeRecord {
    /// The index used in the caller/callee fields.
    pub index: u32,
    /// What it names.
    pub kind: CodeKind,
    /// First line of the code object (0 for builtins and types).
    pub first_line: u32,
    /// `module.qualname`.
    pub name: Vec<u8>,
    /// Source file (empty for builtins).
    pub file: Vec<u8>,
}

/// A simultaneous reading of the TSC and the clocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockSample {
    /// TSC value.
    pub tsc: u64,
    /// `CLOCK_REALTIME` in ns.
    pub realtime_ns: u64,
    /// `CLOCK_MONOTONIC` in ns.
    pub monotonic_ns: u64,
}

/// A fault injected into a call: the ground truth of an experiment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InjectRecord {
    /// Index of the rule (in the order given on the command line).
    pub rule: u32,
    /// The affected function (`LibFn` id).
    pub func: u16,
    /// The fd of the call (-1 if none).
    pub fd: i32,
    /// What the real call returned (or would have: -1 when not performed).
    pub original_ret: i64,
    /// What the program saw.
    pub forced_ret: i64,
    /// The errno the program saw (0 if none).
    pub forced_errno: i32,
    /// The rule's text.
    pub spec: Vec<u8>,
}

/// Function filters and clock mode in force in a process (so the analyzer knows what is
/// missing on purpose).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterRecord {
    /// Maximum recorded call depth (0 = unlimited).
    pub depth_limit: u32,
    /// Clock mode (see the gcc-hooks documentation).
    pub clock_mode: u8,
    /// The exclusion patterns, as given.
    pub excluded: Vec<u8>,
}

/// A decoded metadata record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Meta {
    /// See [`ProcRecord`].
    Proc(ProcRecord),
    /// See [`ThreadRecord`].
    Thread(ThreadRecord),
    /// See [`MapRecord`].
    Map(MapRecord),
    /// See [`CodeRecord`].
    Code(CodeRecord),
    /// See [`ClockSample`].
    Clock(ClockSample),
    /// See [`InjectRecord`].
    Inject(InjectRecord),
    /// See [`FilterRecord`].
    Filter(FilterRecord),
}

impl Meta {
    /// The entry kind this record is written with.
    pub fn kind(&self) -> Kind {
        match self {
            Meta::Proc(_) => Kind::MetaProc,
            Meta::Thread(_) => Kind::MetaThread,
            Meta::Map(_) => Kind::MetaMap,
            Meta::Code(_) => Kind::MetaCode,
            Meta::Clock(_) => Kind::MetaClock,
            Meta::Inject(_) => Kind::MetaInject,
            Meta::Filter(_) => Kind::MetaFilter,
        }
    }

    /// Serializes the body into `out`, truncating trailing strings so it fits
    /// [`MAX_META_BODY`]. Returns the body length. Never allocates.
    pub fn encode_body(&self, out: &mut [u8; MAX_META_BODY]) -> usize {
        let mut w = BodyWriter { out, pos: 0 };
        match self {
            Meta::Proc(p) => {
                w.u8(p.reason as u8);
                w.u32(p.pid);
                w.u32(p.ppid);
                w.u64(p.start_ticks);
                w.bytes(&p.exe);
                let room = MAX_META_BODY - w.pos - 2;
                let mut n = 0usize;
                let mut used = 0usize;
                for a in &p.argv {
                    // `bytes` keeps 2 bytes spare after each string: an entry is kept
                    // whole (never cut) only if its prefix, bytes and that spare fit.
                    if used + 4 + a.len() > room {
                        break;
                    }
                    used += 2 + a.len();
                    n += 1;
                }
                w.u16(n as u16);
                for a in &p.argv[..n] {
                    w.bytes(a);
                }
            }
            Meta::Thread(t) => {
                w.u32(t.tid);
                w.u32(t.pid);
                w.bytes(&t.name);
            }
            Meta::Map(m) => {
                w.u64(m.start);
                w.u64(m.end);
                w.u64(m.offset);
                w.u8(m.prot);
                w.bytes(&m.path);
            }
            Meta::Code(c) => {
                w.u32(c.index);
                w.u8(c.kind as u8);
                w.u32(c.first_line);
                w.bytes(&c.name);
                w.bytes(&c.file);
            }
            Meta::Clock(c) => {
                w.u64(c.tsc);
                w.u64(c.realtime_ns);
                w.u64(c.monotonic_ns);
            }
            Meta::Inject(i) => {
                w.u32(i.rule);
                w.u16(i.func);
                w.u32(i.fd as u32);
                w.u64(i.original_ret as u64);
                w.u64(i.forced_ret as u64);
                w.u32(i.forced_errno as u32);
                w.bytes(&i.spec);
            }
            Meta::Filter(f) => {
                w.u32(f.depth_limit);
                w.u8(f.clock_mode);
                w.bytes(&f.excluded);
            }
        }
        w.pos
    }

    /// Parses a body of the given kind. Errors give the offset inside the body.
    pub fn parse(kind: Kind, body: &[u8]) -> Result<Meta, (usize, &'static str)> {
        let mut r = BodyReader { b: body, pos: 0 };
        let m = match kind {
            Kind::MetaProc => {
                let reason = match r.u8()? {
                    0 => ProcReason::Start,
                    1 => ProcReason::Fork,
                    2 => ProcReason::Exec,
                    _ => return Err((0, "unknown process-record reason")),
                };
                let pid = r.u32()?;
                let ppid = r.u32()?;
                let start_ticks = r.u64()?;
                let exe = r.bytes()?;
                let n = r.u16()? as usize;
                let mut argv = Vec::with_capacity(n.min(256));
                for _ in 0..n {
                    argv.push(r.bytes()?);
                }
                Meta::Proc(ProcRecord {
                    reason,
                    pid,
                    ppid,
                    start_ticks,
                    exe,
                    argv,
                })
            }
            Kind::MetaThread => Meta::Thread(ThreadRecord {
                tid: r.u32()?,
                pid: r.u32()?,
                name: r.bytes()?,
            }),
            Kind::MetaMap => Meta::Map(MapRecord {
                start: r.u64()?,
                end: r.u64()?,
                offset: r.u64()?,
                prot: r.u8()?,
                path: r.bytes()?,
            }),
            Kind::MetaCode => {
                let index = r.u32()?;
                let kind = match r.u8()? {
                    0 => CodeKind::PyCode,
                    1 => CodeKind::PyBuiltin,
                    2 => CodeKind::PyExcType,
                    _ => return Err((4, "unknown code-record kind")),
                };
                Meta::Code(CodeRecord {
                    index,
                    kind,
                    first_line: r.u32()?,
                    name: r.bytes()?,
                    file: r.bytes()?,
                })
            }
            Kind::MetaClock => Meta::Clock(ClockSample {
                tsc: r.u64()?,
                realtime_ns: r.u64()?,
                monotonic_ns: r.u64()?,
            }),
            Kind::MetaInject => Meta::Inject(InjectRecord {
                rule: r.u32()?,
                func: r.u16()?,
                fd: r.u32()? as i32,
                original_ret: r.u64()? as i64,
                forced_ret: r.u64()? as i64,
                forced_errno: r.u32()? as i32,
                spec: r.bytes()?,
            }),
            Kind::MetaFilter => Meta::Filter(FilterRecord {
                depth_limit: r.u32()?,
                clock_mode: r.u8()?,
                excluded: r.bytes()?,
            }),
            _ => return Err((0, "not a metadata kind")),
        };
        if r.pos != body.len() {
            return Err((r.pos, "trailing bytes after metadata record"));
        }
        Ok(m)
    }
}

struct BodyWriter<'a> {
    out: &'a mut [u8; MAX_META_BODY],
    pos: usize,
}

impl BodyWriter<'_> {
    fn put(&mut self, b: &[u8]) {
        let n = b.len().min(MAX_META_BODY - self.pos);
        self.out[self.pos..self.pos + n].copy_from_slice(&b[..n]);
        self.pos += n;
    }
    fn u8(&mut self, v: u8) {
        self.put(&[v]);
    }
    fn u16(&mut self, v: u16) {
        self.put(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.put(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.put(&v.to_le_bytes());
    }
    /// A length-prefixed string, truncated to what is left (keeping room for the prefix).
    fn bytes(&mut self, b: &[u8]) {
        // Reserve 2 bytes for a later u16 argc in process records; harmless elsewhere.
        let room = MAX_META_BODY.saturating_sub(self.pos + 4);
        let n = b.len().min(room);
        self.u16(n as u16);
        self.put(&b[..n]);
    }
}

struct BodyReader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl BodyReader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], (usize, &'static str)> {
        if self.pos + n > self.b.len() {
            return Err((self.pos, "metadata record is truncated"));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, (usize, &'static str)> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, (usize, &'static str)> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().unwrap_or([0; 2]),
        ))
    }
    fn u32(&mut self) -> Result<u32, (usize, &'static str)> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().unwrap_or([0; 4]),
        ))
    }
    fn u64(&mut self) -> Result<u64, (usize, &'static str)> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().unwrap_or([0; 8]),
        ))
    }
    fn bytes(&mut self) -> Result<Vec<u8>, (usize, &'static str)> {
        let n = self.u16()? as usize;
        Ok(self.take(n)?.to_vec())
    }
}
