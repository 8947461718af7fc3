//! The traces as slices, streamed to a [`Sink`]: what the Perfetto and Chrome exports
//! write. Each thread is decoded again, one chunk at a time, its calls' flow ids asked of a
//! [`FlowLookup`] in order (the sorted runs of [`super::streamed::FlowEnds`]); one
//! thread's open frames and one process's units are held:
//!
//! - a library call is one complete slice (category `lib`, named after the libc function),
//!   from its entry to its exit, carrying the ids of the flows it starts (a send) and ends
//!   (a receive); a call whose exit never came is a slice of zero length;
//! - C and Python function calls are nested slices (category `fn`; C functions by address,
//!   Python ones by `module.qualname`), opened at the entry and closed at the return;
//! - an injected fault is an instant event (category `inject`) on its thread;
//! - execution units, when given, are complete slices on a track of their own per thread
//!   (category `unit`).
//!
//! A flow's id is its rank in the order the streamed pass matched it, from one.

use super::links::UnitSpan;
use crate::decode::{CallKind, Event, LibEvent, ProcessTrace, TraceSet, Visit};
use crate::error::Result;
use crate::hash::FxMap;
use bufpool::format::{CodeKind, LibFn, Meta};

/// Where the slices go.
pub trait Sink {
    /// A process starts (before its threads).
    fn process(&mut self, pid: u32, name: &str) -> std::io::Result<()>;
    /// A thread starts (before its slices).
    fn thread(&mut self, pid: u32, tid: u32, name: &str) -> std::io::Result<()>;
    /// A nested slice opens.
    fn begin(&mut self, pid: u32, tid: u32, ts: u64, name: &str) -> std::io::Result<()>;
    /// The innermost open slice closes.
    fn end(&mut self, pid: u32, tid: u32, ts: u64) -> std::io::Result<()>;
    /// A complete slice (a library call, or a unit when `unit` is set).
    #[allow(clippy::too_many_arguments)]
    fn complete(
        &mut self,
        pid: u32,
        tid: u32,
        ts: u64,
        end: u64,
        name: &str,
        cat: &'static str,
        flows_out: &[u64],
        flows_in: &[u64],
    ) -> std::io::Result<()>;
    /// An instant event.
    fn instant(&mut self, pid: u32, tid: u32, ts: u64, name: &str) -> std::io::Result<()>;
}

/// Gives a process's execution units, for [`walk`].
pub type UnitsOf<'a> = &'a mut dyn FnMut(&ProcessTrace) -> Result<Vec<UnitSpan>>;

/// Where the walk finds the flows each library call starts and ends. The walk asks in its
/// order: processes in order, each one's threads in order, each thread's calls by entry.
pub trait FlowLookup {
    /// The flows started (`out`) and ended (`inn`) by the call of process `p`, thread
    /// `thread` (its position in the process; id `tid`), entered at `start`.
    #[allow(clippy::too_many_arguments)]
    fn of(
        &mut self,
        p: usize,
        thread: usize,
        tid: u32,
        start: u64,
        out: &mut Vec<u64>,
        inn: &mut Vec<u64>,
    ) -> std::io::Result<()>;
}

/// What the walk needs of each process besides its trace: its executable and thread
/// names (found by the streamed pass, from the process and thread records).
#[derive(Clone, Debug, Default)]
pub struct ProcNames {
    /// Executable.
    pub exe: String,
    /// Thread names.
    pub threads: Vec<(u32, String)>,
    /// How the process is named ([`crate::procname::ProcLabel::text`]; empty: by `exe`).
    pub label: String,
}

/// Streams every process of `set` (`names_of` in the same order)
/// to `sink`. `units_of` gives a process's execution units (asked once per process, when
/// the walk reaches it, so that one process's units are held at a time), drawn on their own
/// tracks; `None` draws none. Returns the slices written.
pub fn walk(
    set: &TraceSet,
    names_of: &[ProcNames],
    flows: &mut dyn FlowLookup,
    mut units_of: Option<UnitsOf<'_>>,
    sink: &mut dyn Sink,
) -> Result<u64> {
    let mut n = 0u64;
    for (pi, p) in set.processes.iter().enumerate() {
        let units = match units_of.as_mut() {
            Some(f) => f(p)?,
            None => Vec::new(),
        };
        let mut by_thread: FxMap<u32, Vec<&UnitSpan>> = FxMap::default();
        for u in &units {
            by_thread.entry(u.tid).or_default().push(u);
        }
        let ops = &names_of[pi];
        let pname = if !ops.label.is_empty() {
            format!("{}:{} {}", p.host, p.pid, ops.label)
        } else if ops.exe.is_empty() {
            format!("{}:{}", p.host, p.pid)
        } else {
            format!(
                "{}:{} {}",
                p.host,
                p.pid,
                ops.exe.rsplit('/').next().unwrap_or(&ops.exe)
            )
        };
        let io = |e: std::io::Error| crate::error::Error::Io {
            path: "export".into(),
            what: "write",
            source: e,
        };
        sink.process(p.pid, &pname).map_err(io)?;
        let names: FxMap<u32, &str> = ops.threads.iter().map(|(t, s)| (*t, s.as_str())).collect();
        let mut code: FxMap<(u8, u64), String> = FxMap::default();
        for (ti, t) in p.threads.iter().enumerate() {
            sink.thread(p.pid, t.tid, names.get(&t.tid).copied().unwrap_or(""))
                .map_err(io)?;
            let mut w = Walker {
                p,
                pid: p.pid,
                tid: t.tid,
                thread: ti,
                flows: &mut *flows,
                pi,
                fl_out: Vec::new(),
                fl_in: Vec::new(),
                code: &mut code,
                sink: &mut *sink,
                pending: None,
                depth: 0,
                last: 0,
                err: None,
                n: 0,
            };
            t.visit(&mut w)?;
            if let Some((f, ts)) = w.pending.take() {
                w.lib_slice(f, ts, ts);
            }
            // Frames still open when the thread's trace ends close there.
            while w.depth > 0 && w.err.is_none() {
                w.depth -= 1;
                let r = w.sink.end(w.pid, w.tid, w.last);
                w.put(r);
            }
            if let Some(e) = w.err.take() {
                return Err(io(e));
            }
            n += w.n;
            let conv = p.calib.converter();
            if let Some(us) = by_thread.get(&t.tid) {
                for u in us {
                    sink.complete(
                        p.pid,
                        t.tid,
                        conv.unix_ns(u.tsc_start).max(0) as u64,
                        conv.unix_ns(u.tsc_end).max(0) as u64,
                        &u.id,
                        "unit",
                        &[],
                        &[],
                    )
                    .map_err(io)?;
                    n += 1;
                }
            }
        }
    }
    Ok(n)
}

struct Walker<'a> {
    p: &'a ProcessTrace,
    pid: u32,
    tid: u32,
    thread: usize,
    flows: &'a mut dyn FlowLookup,
    pi: usize,
    fl_out: Vec<u64>,
    fl_in: Vec<u64>,
    code: &'a mut FxMap<(u8, u64), String>,
    sink: &'a mut dyn Sink,
    pending: Option<(LibFn, u64)>,
    depth: u64,
    /// The latest timestamp seen, ns.
    last: u64,
    err: Option<std::io::Error>,
    n: u64,
}

impl Walker<'_> {
    fn ns(&mut self, tsc: u64) -> u64 {
        let t = self.p.calib.tsc_to_unix_ns(tsc).max(0) as u64;
        self.last = self.last.max(t);
        t
    }

    fn put(&mut self, r: std::io::Result<()>) {
        if let Err(e) = r {
            if self.err.is_none() {
                self.err = Some(e);
            }
        }
    }

    fn lib_slice(&mut self, f: LibFn, start: u64, end: u64) {
        let r = self.flows.of(
            self.pi,
            self.thread,
            self.tid,
            start,
            &mut self.fl_out,
            &mut self.fl_in,
        );
        self.put(r);
        let (a, b) = (self.ns(start), self.ns(end));
        let r = self.sink.complete(
            self.pid,
            self.tid,
            a,
            b,
            f.name(),
            "lib",
            &self.fl_out,
            &self.fl_in,
        );
        self.n += 1;
        self.put(r);
    }
}

impl Visit for Walker<'_> {
    fn call(&mut self, tsc: u64, kind: CallKind, _site: u64, callee: u64) {
        let ts = self.ns(tsc);
        let name = match kind {
            CallKind::C => format!("0x{callee:x}"),
            CallKind::Py => self
                .code
                .get(&(CodeKind::PyCode as u8, callee))
                .cloned()
                .unwrap_or_else(|| format!("py#{callee}")),
            CallKind::PyBuiltin => self
                .code
                .get(&(CodeKind::PyBuiltin as u8, callee))
                .cloned()
                .unwrap_or_else(|| format!("builtin#{callee}")),
        };
        self.depth += 1;
        self.n += 1;
        let r = self.sink.begin(self.pid, self.tid, ts, &name);
        self.put(r);
    }

    fn ret(&mut self, tsc: u64, _kind: CallKind, _callee: u64) {
        if self.depth == 0 {
            // A return from a frame entered before the trace began.
            return;
        }
        self.depth -= 1;
        let ts = self.ns(tsc);
        let r = self.sink.end(self.pid, self.tid, ts);
        self.put(r);
    }

    fn lib(&mut self, l: &mut LibEvent) {
        if !l.exit {
            if let Some((f, ts)) = self.pending.take() {
                self.lib_slice(f, ts, ts);
            }
            self.pending = Some((l.func, l.tsc));
            return;
        }
        match self.pending.take() {
            Some((f, ts)) if f == l.func => self.lib_slice(f, ts, l.tsc),
            Some((f, ts)) => {
                self.lib_slice(f, ts, ts);
                self.lib_slice(l.func, l.tsc, l.tsc);
            }
            None => self.lib_slice(l.func, l.tsc, l.tsc),
        }
    }

    fn other(&mut self, e: Event) {
        if let Event::Meta { tsc, meta } = e {
            match meta {
                Meta::Code(c) => {
                    self.code.insert(
                        (c.kind as u8, c.index as u64),
                        String::from_utf8_lossy(&c.name).into_owned(),
                    );
                }
                Meta::Inject(i) => {
                    let name = format!("inject #{}: {}", i.rule, String::from_utf8_lossy(&i.spec));
                    let ts = self.ns(tsc);
                    let r = self.sink.instant(self.pid, self.tid, ts, &name);
                    self.put(r);
                }
                _ => {}
            }
        }
    }

    fn wants_opts(&self, _func: LibFn) -> bool {
        false
    }
}
