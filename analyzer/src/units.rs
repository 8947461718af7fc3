//! Stage 3 — **execution units**: the event loop, and initializer / handler / loop /
//! finalizer units, each with its call tree (stage 4, built while splitting).
//!
//! Two streaming passes over each process:
//!
//! 1. [`scan_process`] reads every thread once, decoding only what it needs (descriptor-
//!    creating calls, receives, multiplexers, frames, metadata): it collects the metadata (memory maps, Python
//!    code tables → [`ProcessSymbols`]), replays the descriptor-creating calls of all threads
//!    into an [`FdTable`], and finds each thread's **event loop**: the call-stack frame whose
//!    single activation contains recurring calls to a multiplexer (`select`, `poll`,
//!    `epoll_wait`… — at least 2) and a receive. Frames that contain the same multiplexer
//!    calls nest (`main` → `run` → …); the innermost one is taken: the deepest frame holding
//!    at least half as many multiplexer calls as the frame holding the most. With no function
//!    entries at all (an `LD_PRELOAD`-only trace) the only frame is the thread itself.
//! 2. [`split_process`] (or [`split_process_each`], which lends each unit as a [`UnitView`]
//!    over buffers it reuses) reads every thread again and cuts it into units:
//!    - **initializer**: from the start to the first handler (the loop's first iteration up
//!      to its first receive or accept is part of it);
//!    - **handler**: starts at an `accept` or a receive on a socket (`recv*`, or `read`/`readv`
//!      on a descriptor known to be a socket) and runs to the next one; a receive on the same
//!      descriptor as the current handler's with no multiplexer call in between continues it
//!      (a receive loop draining one message). A handler also ends when the loop body calls
//!      its multiplexer again, and — with function entries — when the function under the loop
//!      frame that contained its first receive returns (its *anchor*); a multiplexer call made
//!      inside a still-active anchor (a nested wait) does not end it;
//!    - **loop**: what the loop body does outside handlers (000's pre-/post-processing units:
//!      the multiplexer call itself, timers, deferred work); a handler takes from the loop
//!      unit before it the frames entered there that led to its first receive;
//!    - **finalizer**: from the return of the loop frame (or a call to `exit`) to the end.
//!
//!    Threads without an event loop are one initializer unit.
//!
//! **Deferred work** (redis writes replies and closes clients in `beforeSleep`, before the
//! next `epoll_wait`): with function entries the handler that read the request ends when
//! its anchor (`aeProcessEvents`) returns, so the deferred writes and closes form a *loop*
//! unit of their own, modelled per process like the handlers. Without function entries
//! there is no anchor: the deferred calls belong to the last handler unit that started
//! before them (the last receive of that loop iteration), up to the next multiplexer call.
//! Either way the attribution is the same in normal and faulty runs, which is what the
//! coverage model needs.

use crate::connections::{self, ConnKey, FdTable, SetupCall};
use crate::decode::{
    CallKind, CallOpts, DecodeStats, Event, LibEvent, ProcessTrace, ThreadTrace, Visit,
};
use crate::error::Result;
use crate::hash::{mix, FxMap, FxSet, IdMap};
use crate::symbolize::{key_lib, CSym, ElfResolver, ProcessSymbols};
use crate::trees::{child_id, CallTree, NodeKey, NodeKind, Outcome, TreeBuf, TreeOptions, ROOT};
use bufpool::format::{LibFn, Meta, ProcReason};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Kinds of execution units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnitKind {
    /// From the start to the event loop.
    Initializer,
    /// From a receive or accept to the next.
    Handler,
    /// Loop-body work outside handlers.
    Loop,
    /// From the end of the event loop to the end.
    Finalizer,
}

impl UnitKind {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            UnitKind::Initializer => "initializer",
            UnitKind::Handler => "handler",
            UnitKind::Loop => "loop",
            UnitKind::Finalizer => "finalizer",
        }
    }
}

/// The event loop of a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopSpec {
    /// Number of frames on the stack down to and including the loop frame (0: the thread).
    pub depth: usize,
    /// Raw path hash of the loop frame.
    pub path: u64,
    /// Multiplexer calls inside its activations.
    pub mux_calls: u64,
}

/// What pass 1 learned about a thread.
#[derive(Clone, Debug)]
pub struct ThreadScan {
    /// Thread id.
    pub tid: u32,
    /// The event loop, if any.
    pub event_loop: Option<LoopSpec>,
    /// Socket receives and accepts (an upper bound of its handler units).
    pub receives: u64,
}

/// What pass 1 learned about a process.
#[derive(Clone, Debug)]
pub struct ProcessScan {
    /// Symbol tables.
    pub symbols: ProcessSymbols,
    /// Per-thread results, in the order of `ProcessTrace::threads`.
    pub threads: Vec<ThreadScan>,
    /// Descriptor history.
    pub fds: FdTable,
    /// Executable (from the last process record).
    pub exe: String,
    /// Counts.
    pub stats: DecodeStats,
    /// `(parent pid, TSC)` of the fork that made this process, if it was forked (and did
    /// not exec since).
    pub forked_from: Option<(u32, u64)>,
    /// The parent's descriptors at the fork (see [`inherit`]).
    pub inherited_fds: Option<(FdTable, u64)>,
    /// The descriptor-creating calls `fds` was built from, kept to build it again once a
    /// forked child has its parent's symbols (see [`inherit`]).
    setups: Vec<RawSetup>,
}

impl ProcessScan {
    /// Builds the descriptor history from the recorded calls with the symbols as they are
    /// now (a setup call's stack key is made of its stable frame keys), starting from the
    /// descriptors inherited at a fork if any.
    fn build_fds(&mut self, inherited: Option<(&FdTable, u64)>) {
        let symbols = &self.symbols;
        let calls = self
            .setups
            .iter()
            .map(|r| {
                let mut abs = ROOT;
                for &(k, s, c) in &r.frames {
                    abs = frame_key(symbols.at(r.call.tsc), k, s, c).child_of(abs);
                }
                let mut call = r.call.clone();
                if connections::is_setup(call.func) {
                    call.stack = setup_stack_key(symbols.at(call.tsc), abs, &r.ev);
                }
                call
            })
            .collect();
        self.fds = FdTable::build_from(inherited, calls);
    }

    /// What `fd` was at `tsc`: this process's own history, else what it inherited at fork.
    pub fn fd_at(&self, fd: i32, tsc: u64) -> Option<&std::sync::Arc<connections::ConnInfo>> {
        match self.fds.state(fd, tsc) {
            Some(s) => s,
            None => self
                .inherited_fds
                .as_ref()
                .and_then(|(t, at)| t.at(fd, *at)),
        }
    }
}

/// The index in `procs` of the parent `ppid` of `procs[i]` (same host), if it was traced.
fn parent_of(procs: &[&ProcessTrace], i: usize, ppid: u32) -> Option<usize> {
    (0..procs.len()).find(|&j| j != i && procs[j].host == procs[i].host && procs[j].pid == ppid)
}

/// Would [`inherit`] change `scan`, the scan of `procs[i]`? Only for a forked child whose
/// parent is in `procs`; the scan of any other process is final after its own pass 1.
pub fn inherits(procs: &[&ProcessTrace], i: usize, scan: &ProcessScan) -> bool {
    [scan.symbols.forked_from(), scan.forked_from]
        .into_iter()
        .flatten()
        .any(|(ppid, _)| parent_of(procs, i, ppid).is_some())
}

/// Gives forked children what they inherited and did not record again: the parent's symbol
/// tables (memory map, Python code table) at the fork — for a child that exec'd since, to
/// what it ran before its exec — and, to children that did not exec, the parent's program
/// and descriptors at the fork. `scans[i]` belongs to `procs[i]`; parents are found by host
/// and pid.
pub fn inherit(procs: &[&ProcessTrace], scans: &mut [ProcessScan]) {
    let parent_of = |i: usize, ppid: u32| parent_of(procs, i, ppid);
    // Symbols first. Grandchildren need their parent to have inherited first: a few rounds
    // suffice.
    let mut resymbolized = vec![false; scans.len()];
    for _ in 0..4 {
        let mut changed = false;
        for i in 0..scans.len() {
            let Some((ppid, at)) = scans[i].symbols.forked_from() else {
                continue;
            };
            let Some(j) = parent_of(i, ppid) else {
                continue;
            };
            let parent_syms = scans[j].symbols.at(at).clone();
            let parent_exe = scans[j].exe.clone();
            let c = &mut scans[i];
            if c.symbols.inherit(&parent_syms) {
                resymbolized[i] = true;
                changed = true;
            }
            // A child that did not exec runs its parent's program.
            if c.forked_from.is_some() && c.exe.is_empty() && !parent_exe.is_empty() {
                c.exe = parent_exe;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    // The stack keys of a child's own setup calls (a pre-forked worker's `accept`) are made
    // of its frames' keys: made again with the symbols it inherited, they are the same from
    // run to run (raw addresses are not: ASLR). A child that did not exec starts from its
    // parent's descriptors at the fork, so parents are done before their children. One that
    // exec'd since runs its own program; which descriptors survived the exec (close-on-exec)
    // is not known: it keeps its own record of them.
    let parent: Vec<Option<(usize, u64)>> = (0..scans.len())
        .map(|i| {
            let (ppid, at) = scans[i].forked_from?;
            Some((parent_of(i, ppid)?, at))
        })
        .collect();
    let depth = |i: usize| {
        let (mut d, mut k) = (0, i);
        while let Some((j, _)) = parent[k] {
            d += 1;
            k = j;
            if d > scans.len() {
                break; // a cycle of pids (reuse): stop anywhere
            }
        }
        d
    };
    let mut order: Vec<usize> = (0..scans.len()).collect();
    order.sort_by_key(|&i| depth(i));
    for i in order {
        match parent[i] {
            Some((j, at)) => {
                let from = scans[j].fds.clone();
                scans[i].build_fds(Some((&from, at)));
                scans[i].inherited_fds = Some((from, at));
            }
            None if resymbolized[i] => scans[i].build_fds(None),
            None => {}
        }
    }
}

/// A fault injected by the tracer, as seen in a unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Injection {
    /// Wall-clock time.
    pub unix_ns: i64,
    /// The function (libc name).
    pub func: String,
    /// The fd of the call.
    pub fd: i32,
    /// What the program saw.
    pub forced_ret: i64,
    /// The errno the program saw.
    pub forced_errno: i32,
    /// The rule's text.
    pub spec: String,
}

/// Where and when a unit ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitInfo {
    /// `host:pid:tid:index`, unique in a trace set.
    pub id: String,
    /// Host.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Is this the process's main thread?
    pub main_thread: bool,
    /// Index of the unit in its thread.
    pub index: u32,
    /// Kind.
    pub kind: UnitKind,
    /// Descriptor the handler received from (or accepted on).
    pub fd: Option<i32>,
    /// Connection identity (handlers; empty otherwise or when unknown).
    pub conn: ConnKey,
    /// Local address of the connection.
    pub local: Option<String>,
    /// Peer address of the connection.
    pub peer: Option<String>,
    /// Start, TSC.
    pub tsc_start: u64,
    /// End, TSC.
    pub tsc_end: u64,
    /// Start, wall clock (ns since the epoch).
    pub t_start_unix_ns: i64,
    /// End, wall clock.
    pub t_end_unix_ns: i64,
    /// Entries lost inside the unit.
    pub lost: u64,
    /// Faults injected inside the unit.
    pub injections: Vec<Injection>,
    /// Cut short by the end of the trace (see [`UnitHead::cut`]).
    #[serde(default)]
    pub cut: bool,
}

/// One execution unit.
#[derive(Clone, Debug)]
pub struct Unit {
    /// Where and when.
    pub info: UnitInfo,
    /// Its call tree.
    pub tree: CallTree,
}

/// A process signature: the stack keys of setup calls in its initializer units, and the
/// key of the program ([`program_key`]: its executable's file name) when it is known.
/// Processes of different programs never play the same role, so they never share a group
/// even when neither makes a setup call (shell wrappers, `basename`, `env`…).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Signature(pub Vec<u64>);

/// The signature element standing for a program: a hash of the file name of its
/// executable (`/usr/bin/basename` → `basename`), so that the same program installed in
/// different directories on different hosts is still one program — the same rule as the
/// stable keys of C addresses ([`crate::symbolize`]). Tagged so it cannot be mistaken for
/// a stack key.
pub fn program_key(exe: &str) -> u64 {
    let name = exe.rsplit('/').next().unwrap_or(exe);
    crate::hash::mix(
        0x7072_6f67_7261_6d00,
        crate::hash::str_hash(name.as_bytes()),
    )
}

/// The signature element of a process forked without exec since: a forked copy of a program
/// plays another role than the program started afresh — a shell's `$(…)` subshell is not the
/// script it was forked from, a daemon's forked worker not the daemon. Tagged like
/// [`program_key`]'s.
pub const FORKED_KEY: u64 = 0x666f_726b_6564_0001;

/// Where names of key parts come from, before ELF resolution.
#[derive(Clone, Debug)]
pub enum NameSrc {
    /// Already a name.
    Text(String),
    /// A C address to resolve.
    C(CSym),
}

/// Names of the key parts (call sites, callees) seen in a process.
#[derive(Clone, Debug, Default)]
pub struct NameBook {
    /// By stable key.
    pub names: IdMap<NameSrc>,
}

impl NameBook {
    /// Resolves every name (ELF lookups through `r`), in key order.
    pub fn resolve(&self, r: &mut ElfResolver) -> BTreeMap<u64, String> {
        let mut keys: Vec<_> = self.names.keys().copied().collect();
        keys.sort_unstable();
        keys.into_iter()
            .map(|k| {
                let n = match &self.names[&k] {
                    NameSrc::Text(s) => s.clone(),
                    NameSrc::C(c) => r.resolve(c),
                };
                (k, n)
            })
            .collect()
    }
}

/// The units of one process.
#[derive(Clone, Debug)]
pub struct ProcessUnits {
    /// Host.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks.
    pub start_ticks: u64,
    /// Executable.
    pub exe: String,
    /// Process signature.
    pub signature: Signature,
    /// Units, by thread then time.
    pub units: Vec<Unit>,
    /// Names of key parts.
    pub names: NameBook,
    /// Connections of the units (what [`UnitHead::conn`] indexes; 0 is none).
    pub conns: Vec<ConnRow>,
    /// Counts of both passes together (entries are counted once).
    pub stats: DecodeStats,
}

/// Raw path step (pass 1 and pass 2 must agree).
#[inline]
fn raw_step(parent: u64, kind: CallKind, site: u64, callee: u64) -> u64 {
    mix(parent, mix(site ^ ((kind as u64) << 56), callee))
}

const RAW_ROOT: u64 = 0x7261_7700;

/// The stable node key of a function frame.
pub fn frame_key(sy: &ProcessSymbols, kind: CallKind, site: u64, callee: u64) -> NodeKey {
    let (k, site, callee) = match kind {
        CallKind::C => (NodeKind::C, sy.key_c(site), sy.key_c(callee)),
        CallKind::Py => (NodeKind::Py, sy.key_py_site(site), sy.key_py(callee)),
        CallKind::PyBuiltin => (NodeKind::PyBuiltin, sy.key_py_site(site), sy.key_py(callee)),
    };
    NodeKey {
        kind: k,
        site,
        callee,
        outcome: Outcome::Any,
    }
}

fn lib_key(sy: &ProcessSymbols, l: &LibEvent, outcome: Outcome) -> NodeKey {
    NodeKey {
        kind: NodeKind::Lib,
        site: sy.key_c(l.site),
        callee: key_lib(l.func),
        outcome,
    }
}

/// Python library frames ([`TreeOptions::collapse_library`]): does a frame get a node of its
/// own? A library frame (standard library or builtin, [`is_library_frame`]) called from a
/// library frame gets none: what it records attaches to the nearest frame above with a node.
/// `lib` says whether the frame is a library frame; `parent` is the frame it was called from
/// (`None`: the thread root), whose `lib` says the same of it.
#[inline]
fn frame_node(lib: bool, parent: Option<&P2Frame>) -> bool {
    !(lib && parent.is_some_and(|p| p.lib))
}

/// Is a frame of this callee library code, to be collapsed ([`frame_node`])?
fn is_library_frame(sy: &ProcessSymbols, opts: &TreeOptions, kind: CallKind, callee: u64) -> bool {
    opts.collapse_library && kind != CallKind::C && sy.is_library_py(callee)
}

/// The stable key of a setup call's stack: its path from the thread root, then the native
/// frames the tracer recorded (if any).
fn setup_stack_key(sy: &ProcessSymbols, top_abs: u64, l: &LibEvent) -> u64 {
    let mut h = lib_key(sy, l, Outcome::Any).child_of(top_abs);
    for &a in l.opts.stack() {
        h = mix(h, sy.key_c(a));
    }
    h
}

fn is_exit(f: LibFn) -> bool {
    matches!(f, LibFn::Exit | LibFn::UExit | LibFn::UExitC)
}

/// Merges the entry's arguments into the exit (fd and length are often only on the entry).
#[inline(always)]
fn merge_enter(enter: &LibEvent, exit: &mut LibEvent) {
    merge_enter_opts(&enter.opts, &mut exit.opts);
}

/// [`merge_enter`] on the options.
#[inline(always)]
fn merge_enter_opts(e: &CallOpts, x: &mut CallOpts) {
    x.fd = x.fd.or(e.fd);
    x.len = x.len.or(e.len);
    x.fd2 = x.fd2.or(e.fd2);
    x.flags = x.flags.or(e.flags);
    x.is_socket = x.is_socket.or(e.is_socket);
    if let Some(ee) = &e.extra {
        merge_extra(ee, x);
    }
}

#[cold]
fn merge_extra(ee: &crate::decode::CallExtra, x: &mut CallOpts) {
    let xx = x.extra.get_or_insert_with(Default::default);
    if xx.stack.is_empty() {
        xx.stack = ee.stack.clone();
    }
    xx.local = xx.local.or(ee.local);
    xx.peer = xx.peer.or(ee.peer);
}

/// Receives a thread's events with its library calls paired (see [`for_each_paired`]).
trait PairSink {
    /// An event other than a library call.
    fn event(&mut self, e: &Event);
    /// A library call: its exit with the entry's arguments merged in (or an entry that
    /// never returned), and its outcome.
    fn call(&mut self, l: &LibEvent, o: Outcome);
    /// Does it look at the options of calls of `func` (see [`Visit::wants_opts`])?
    #[inline]
    fn wants_opts(&self, func: LibFn) -> bool {
        let _ = func;
        true
    }
}

/// Pairs the entry and exit of each library call, holding fault-injection records until
/// the call they describe completes.
///
/// The common calls (scalar options, [`Visit::lib_scalars`]) are decoded in place: an
/// entry into `pending`, an exit into `cur` over its entry's arguments. Events are never
/// built elsewhere and copied in: a whole-struct copy of an event just built field by field
/// stalls on store forwarding.
struct Pairer<'s, S> {
    s: &'s mut S,
    /// The entry waiting for its exit, if `has_pending`.
    pending: LibEvent,
    has_pending: bool,
    /// Where an exit decoded in place is built.
    cur: LibEvent,
    // Fault-injection records wait for the library call they describe: the injector
    // writes one before that call's entry (a skipped call: errno, eof…) or between its
    // entry and exit (short, corrupt…), and it belongs to the unit that call is part of.
    held: Vec<Event>,
}

/// A placeholder library event (the slots of [`Pairer`]).
fn blank_lib() -> LibEvent {
    LibEvent {
        tsc: 0,
        exit: false,
        site: 0,
        func: LibFn::Socket,
        opts: CallOpts::default(),
    }
}

impl<'s, S: PairSink> Pairer<'s, S> {
    fn new(s: &'s mut S) -> Self {
        Pairer {
            s,
            pending: blank_lib(),
            has_pending: false,
            cur: blank_lib(),
            held: Vec::new(),
        }
    }

    #[inline]
    fn flush(&mut self) {
        if self.has_pending {
            self.has_pending = false;
            self.s.call(&self.pending, Outcome::Unfinished);
        }
    }

    #[cold]
    fn release(&mut self) {
        for h in self.held.drain(..) {
            self.s.event(&h);
        }
    }

    fn finish(mut self) {
        self.flush();
        self.release();
    }
}

/// Takes a library event's fields one by one (a whole-struct copy of an event just built
/// field by field stalls on store forwarding).
#[inline(always)]
fn take_lib(l: &mut LibEvent) -> LibEvent {
    let o = &mut l.opts;
    LibEvent {
        tsc: l.tsc,
        exit: l.exit,
        site: l.site,
        func: l.func,
        opts: CallOpts {
            fd: o.fd,
            fd2: o.fd2,
            len: o.len,
            ret: o.ret,
            errno: o.errno,
            flags: o.flags,
            inject: o.inject,
            is_socket: o.is_socket,
            extra: o.extra.take(),
        },
    }
}

/// Clears the options in place.
#[inline(always)]
fn clear_opts(o: &mut CallOpts) {
    o.fd = None;
    o.fd2 = None;
    o.len = None;
    o.ret = None;
    o.errno = None;
    o.flags = None;
    o.inject = None;
    o.is_socket = None;
    o.extra = None;
}

impl<S: PairSink> Visit for Pairer<'_, S> {
    #[inline]
    fn wants_opts(&self, func: LibFn) -> bool {
        self.s.wants_opts(func)
    }

    // The events handed over own nothing: `ManuallyDrop` spares the out-of-line drop of
    // an `Event` the compiler otherwise calls after each.
    #[inline]
    fn call(&mut self, tsc: u64, kind: CallKind, site: u64, callee: u64) {
        self.flush();
        self.s.event(&std::mem::ManuallyDrop::new(Event::Call {
            tsc,
            kind,
            site,
            callee,
        }));
    }

    #[inline]
    fn ret(&mut self, tsc: u64, kind: CallKind, callee: u64) {
        self.flush();
        self.s.event(&std::mem::ManuallyDrop::new(Event::Return {
            tsc,
            kind,
            callee,
        }));
    }

    /// What [`Visit::lib`] does, with the event decoded where it is kept.
    #[inline(always)]
    fn lib_scalars(&mut self, tsc: u64, exit: bool, site: u64, func: LibFn, body: &[u8]) -> bool {
        let wants = self.s.wants_opts(func);
        if !exit {
            self.flush();
            if is_exit(func) || func.is_exec() {
                return self.lib_rare(tsc, site, func, body, wants);
            }
            let d = &mut self.pending;
            d.tsc = tsc;
            d.exit = false;
            d.site = site;
            d.func = func;
            clear_opts(&mut d.opts);
            if wants && !d.opts.parse_scalars_into(body) {
                return false;
            }
            self.has_pending = true;
        } else {
            let paired = self.has_pending && self.pending.func == func;
            let d = &mut self.cur;
            d.tsc = tsc;
            d.exit = true;
            d.site = site;
            d.func = func;
            let o = &mut d.opts;
            // The entry's arguments, then the exit's own over them: what `merge_enter`
            // gives.
            if paired {
                let e = &self.pending.opts;
                o.fd = e.fd;
                o.fd2 = e.fd2;
                o.len = e.len;
                o.ret = None;
                o.errno = None;
                o.flags = e.flags;
                o.inject = None;
                o.is_socket = e.is_socket;
                o.extra = None;
            } else {
                clear_opts(o);
            }
            if wants && !o.parse_scalars_into(body) {
                return false;
            }
            if paired {
                if let Some(ee) = &self.pending.opts.extra {
                    merge_extra(ee, o);
                }
            }
            if self.has_pending {
                self.has_pending = false;
                if !paired {
                    self.s.call(&self.pending, Outcome::Unfinished);
                }
            }
            let oc = Outcome::of(func, &self.cur.opts);
            self.s.call(&self.cur, oc);
            if !self.held.is_empty() {
                self.release();
            }
        }
        true
    }

    #[inline]
    fn lib(&mut self, l: &mut LibEvent) {
        if !l.exit {
            self.flush();
            if is_exit(l.func) || l.func.is_exec() {
                self.s.call(l, Outcome::Unfinished);
            } else {
                self.pending = take_lib(l);
                self.has_pending = true;
            }
        } else {
            if self.has_pending {
                self.has_pending = false;
                if self.pending.func == l.func {
                    merge_enter(&self.pending, l);
                } else {
                    self.s.call(&self.pending, Outcome::Unfinished);
                }
            }
            let o = Outcome::of(l.func, &l.opts);
            self.s.call(l, o);
            if !self.held.is_empty() {
                self.release();
            }
        }
    }

    fn other(&mut self, e: Event) {
        match e {
            Event::Lib(mut l) => self.lib(&mut l),
            Event::Meta {
                meta: Meta::Inject(_),
                ..
            } => self.held.push(e),
            // Other metadata (a code record, the map after dlopen) says nothing about calls:
            // it never ends a pending library call.
            meta @ Event::Meta { .. } => self.s.event(&meta),
            other => {
                self.flush();
                self.s.event(&other)
            }
        }
    }
}

impl<S: PairSink> Pairer<'_, S> {
    /// The entry of a call that never returns (`exit`, `exec`), handed over at once.
    #[cold]
    fn lib_rare(&mut self, tsc: u64, site: u64, func: LibFn, body: &[u8], wants: bool) -> bool {
        let mut opts = CallOpts::default();
        if wants && !opts.parse_scalars_into(body) {
            return false;
        }
        let l = LibEvent {
            tsc,
            exit: false,
            site,
            func,
            opts,
        };
        self.s.call(&l, Outcome::Unfinished);
        true
    }
}

/// Iterates a thread's library calls, paired, with the other events in between.
fn for_each_paired<S: PairSink>(t: &ThreadTrace, s: &mut S) -> Result<DecodeStats> {
    let mut p = Pairer::new(s);
    let st = t.visit(&mut p)?;
    p.finish();
    Ok(st)
}

#[cfg(test)]
mod pairer_tests {
    use super::tests::o;
    use super::*;
    use crate::decode::TraceBuilder;
    use bufpool::format::{encode_lib, InjectRecord, Kind, LibOpts};

    /// Records what a [`Pairer`] hands over.
    #[derive(Default)]
    struct Record(Vec<String>);

    impl PairSink for Record {
        fn event(&mut self, e: &Event) {
            self.0.push(format!("{e:?}"));
        }
        fn call(&mut self, l: &LibEvent, o: Outcome) {
            self.0.push(format!("{l:?} {o:?}"));
        }
    }

    /// The paired events of a thread as `for_each_paired` gives them (library calls decoded
    /// in place), and as whole events handed to the pairer one by one.
    fn both(t: &ThreadTrace) -> (Vec<String>, Vec<String>) {
        let mut fast = Record::default();
        let st = for_each_paired(t, &mut fast).unwrap();
        let mut slow = Record::default();
        let mut p = Pairer::new(&mut slow);
        let st2 = t.for_each_owned(|e| p.other(e)).unwrap();
        p.finish();
        assert_eq!(st, st2);
        (fast.0, slow.0)
    }

    #[test]
    fn pairer_decodes_in_place_like_whole_events() {
        use crate::synth::{ring, Fault, Functions, Ring};
        for functions in [Functions::C, Functions::Python, Functions::None] {
            let procs = ring(&Ring {
                processes: 2,
                iterations: 12,
                functions,
                fault: Some(Fault {
                    process: 1,
                    iteration: 5,
                }),
                seed: 3,
            });
            for p in &procs {
                for t in &p.threads {
                    let (fast, slow) = both(t);
                    assert!(fast.len() > 50);
                    assert_eq!(fast, slow, "{functions:?}");
                }
            }
        }
        // Entries and exits as the tracer writes them, calls cut by others, exits without
        // entries, options that are not all scalars, calls that never return, injections.
        let mut t = TraceBuilder::new("h", 7, 7);
        let raw = |t: &mut TraceBuilder, kind: Kind, func: LibFn, o: &LibOpts| {
            let e = encode_lib(kind, t.now(), 0x900, func, o);
            t.raw(e.as_bytes());
        };
        let fd_len = |fd: i32, len: u64| LibOpts {
            fd: Some(fd),
            len: Some(len),
            ..Default::default()
        };
        let ret = |r: i64| LibOpts {
            ret: Some(r),
            ..Default::default()
        };
        t.lib(0x100, LibFn::Socket, ret(3));
        t.lib(0x210, LibFn::Accept, o(3, 10, 0));
        t.enter(0x1000, 0x2000);
        raw(&mut t, Kind::LibEnter, LibFn::Read, &fd_len(10, 8));
        raw(&mut t, Kind::LibExit, LibFn::Read, &ret(8));
        raw(&mut t, Kind::LibEnter, LibFn::Read, &fd_len(10, 8));
        raw(&mut t, Kind::LibEnter, LibFn::Send, &fd_len(10, 2));
        raw(&mut t, Kind::LibExit, LibFn::Send, &ret(2));
        raw(&mut t, Kind::LibExit, LibFn::Read, &ret(3));
        raw(&mut t, Kind::LibExit, LibFn::Recv, &ret(0));
        raw(&mut t, Kind::LibEnter, LibFn::Recv, &fd_len(10, 8));
        t.exit(0x2000);
        raw(&mut t, Kind::LibExit, LibFn::Recv, &ret(-1));
        let exit_fd = LibOpts {
            fd: Some(11),
            ret: Some(5),
            errno: Some(4),
            is_socket: Some(true),
            ..Default::default()
        };
        raw(&mut t, Kind::LibEnter, LibFn::Recv, &fd_len(10, 8));
        raw(&mut t, Kind::LibExit, LibFn::Recv, &exit_fd);
        // A peer address: not scalars.
        let peer = LibOpts {
            fd: Some(10),
            len: Some(4),
            peer: Some(bufpool::format::Addr::new(2, 80, &[10, 0, 0, 1])),
            ..Default::default()
        };
        raw(&mut t, Kind::LibEnter, LibFn::Sendto, &peer);
        raw(&mut t, Kind::LibExit, LibFn::Sendto, &ret(4));
        raw(&mut t, Kind::LibEnter, LibFn::Recvfrom, &fd_len(10, 8));
        raw(&mut t, Kind::LibExit, LibFn::Recvfrom, &peer);
        t.meta(&Meta::Inject(InjectRecord {
            rule: 0,
            func: LibFn::Recv.id() as u16,
            fd: 10,
            original_ret: -1,
            forced_ret: 3,
            forced_errno: 0,
            spec: b"recv:short=3".to_vec(),
        }));
        raw(&mut t, Kind::LibEnter, LibFn::Recv, &fd_len(10, 8));
        raw(&mut t, Kind::LibExit, LibFn::Recv, &ret(3));
        raw(&mut t, Kind::LibEnter, LibFn::Poll, &LibOpts::default());
        t.lib_enter(0x300, LibFn::Execve, LibOpts::default());
        t.lib_enter(0x300, LibFn::Exit, fd_len(0, 0));
        raw(&mut t, Kind::LibEnter, LibFn::Read, &fd_len(10, 8));
        let p = t.finish();
        let (fast, slow) = both(&p.threads[0]);
        assert_eq!(fast.len(), 20);
        assert_eq!(fast, slow);
    }
}

// ---------------------------------------------------------------- pass 1

struct P1Frame {
    kind: CallKind,
    site: u64,
    callee: u64,
    /// Raw path hash, computed when first needed ([`ThreadScanner::path_of`]): only frames
    /// that held loop-like calls need one, so most never have it.
    path: Option<u64>,
    mux: u64,
    recv: u64,
}

#[derive(Clone, Debug)]
struct RawSetup {
    call: SetupCall,
    frames: Vec<(CallKind, u64, u64)>,
    ev: LibEvent,
}

#[derive(Default)]
struct Candidates {
    by_path: IdMap<LoopSpec>,
}

impl Candidates {
    /// Do these counts make a frame a candidate?
    #[inline]
    fn counts(mux: u64, recv: u64) -> bool {
        mux >= 2 && recv >= 1
    }

    fn consider(&mut self, path: u64, depth: usize, mux: u64, recv: u64) {
        if Candidates::counts(mux, recv) {
            let c = self.by_path.entry(path).or_insert(LoopSpec {
                depth,
                path,
                mux_calls: 0,
            });
            c.mux_calls += mux;
        }
    }

    fn choose(&self) -> Option<LoopSpec> {
        let max = self.by_path.values().map(|c| c.mux_calls).max()?;
        self.by_path
            .values()
            .filter(|c| c.mux_calls * 2 >= max)
            .max_by_key(|c| (c.depth, c.mux_calls, std::cmp::Reverse(c.path)))
            .copied()
    }
}

fn is_socket_receive(l: &LibEvent, known: impl Fn(i32) -> bool) -> bool {
    is_socket_receive_parts(l.func, l.opts.is_socket, l.opts.fd, known)
}

#[inline]
fn is_socket_receive_parts(
    func: LibFn,
    is_socket: Option<bool>,
    fd: Option<i32>,
    known: impl Fn(i32) -> bool,
) -> bool {
    use LibFn::*;
    if func.is_accept() {
        return true;
    }
    if !func.is_receive() {
        return false;
    }
    match is_socket {
        Some(b) => b,
        None => matches!(func, Recv | Recvfrom | Recvmsg | Recvmmsg) || fd.is_some_and(known),
    }
}

/// Pass 1 over one thread: its frames (with the multiplexer and receive calls each
/// activation contained), the loop candidates, and what the process-wide scan collects.
struct ThreadScanner<'a> {
    tid: u32,
    frames: Vec<P1Frame>,
    /// Multiplexer and receive calls made outside any frame.
    root: (u64, u64),
    cands: Candidates,
    sockets: FxSet<i32>,
    raw_setups: &'a mut Vec<RawSetup>,
    symbols: &'a mut ProcessSymbols,
    exe: &'a mut String,
    forked: &'a mut Option<(u32, u64)>,
}

impl ThreadScanner<'_> {
    /// The raw path hash of frame `i`, computed (and kept) with those of its ancestors
    /// that have none yet.
    fn path_of(&mut self, i: usize) -> u64 {
        let mut j = i + 1;
        let mut path = RAW_ROOT;
        while j > 0 {
            if let Some(p) = self.frames[j - 1].path {
                path = p;
                break;
            }
            j -= 1;
        }
        for f in &mut self.frames[j..=i] {
            path = raw_step(path, f.kind, f.site, f.callee);
            f.path = Some(path);
        }
        path
    }

    fn pop(&mut self) {
        let Some(f) = self.frames.last() else {
            return;
        };
        // A frame is a loop candidate only with these counts: its path is needed then.
        let path = if Candidates::counts(f.mux, f.recv) {
            self.path_of(self.frames.len() - 1)
        } else {
            0
        };
        if let Some(f) = self.frames.pop() {
            self.cands
                .consider(path, self.frames.len() + 1, f.mux, f.recv);
            match self.frames.last_mut() {
                Some(p) => {
                    p.mux += f.mux;
                    p.recv += f.recv;
                }
                None => {
                    self.root.0 += f.mux;
                    self.root.1 += f.recv;
                }
            }
        }
    }

    #[inline]
    fn push_frame(&mut self, kind: CallKind, site: u64, callee: u64) {
        self.frames.push(P1Frame {
            kind,
            site,
            callee,
            path: None,
            mux: 0,
            recv: 0,
        });
    }

    /// A return of `callee`: pops frames down to its activation (none if it has none).
    #[inline]
    fn pop_frames(&mut self, kind: CallKind, callee: u64) {
        if let Some(i) = self
            .frames
            .iter()
            .rposition(|f| f.callee == callee && f.kind == kind)
        {
            while self.frames.len() > i {
                self.pop();
            }
        }
    }

    /// The thread's event loop, once every event was seen, and its number of socket
    /// receives and accepts.
    fn finish(mut self) -> (Option<LoopSpec>, u64) {
        while !self.frames.is_empty() {
            self.pop();
        }
        self.cands.consider(RAW_ROOT, 0, self.root.0, self.root.1);
        (self.cands.choose(), self.root.1)
    }
}

impl PairSink for ThreadScanner<'_> {
    /// Pass 1 looks at multiplexers (none of their options), receives and accepts (the
    /// descriptor and whether it is a socket), `socket` (the descriptor it returns) and
    /// `close`; descriptor-creating calls always have their options.
    #[inline]
    fn wants_opts(&self, func: LibFn) -> bool {
        func.is_receive() || func.is_accept() || matches!(func, LibFn::Socket | LibFn::Close)
    }

    fn event(&mut self, e: &Event) {
        match e {
            Event::Call {
                kind, site, callee, ..
            } => self.push_frame(*kind, *site, *callee),
            Event::Return { kind, callee, .. } => self.pop_frames(*kind, *callee),
            Event::Meta { meta, .. } => {
                self.symbols.add_at(meta, e.tsc());
                if let Meta::Proc(pr) = meta {
                    if pr.reason != ProcReason::Fork || self.exe.is_empty() {
                        *self.exe = String::from_utf8_lossy(&pr.exe).into_owned();
                    }
                    *self.forked = match pr.reason {
                        ProcReason::Fork => Some((pr.ppid, e.tsc())),
                        ProcReason::Exec => None,
                        ProcReason::Start => *self.forked,
                    };
                }
            }
            _ => {}
        }
    }

    fn call(&mut self, l: &LibEvent, _o: Outcome) {
        let counters = match self.frames.last_mut() {
            Some(f) => (&mut f.mux, &mut f.recv),
            None => (&mut self.root.0, &mut self.root.1),
        };
        if l.func.is_multiplexer() {
            *counters.0 += 1;
        }
        // Descriptors inherited at fork are not known yet here: a read on a descriptor of
        // unknown kind counts as a possible receive (the loop also needs multiplexer calls).
        let sockets = &self.sockets;
        if is_socket_receive(l, |fd| sockets.contains(&fd) || fd > 2) {
            *counters.1 += 1;
        }
        let ret_fd = l.opts.ret.filter(|r| *r >= 0).map(|r| r as i32);
        match l.func {
            LibFn::Socket | LibFn::Accept | LibFn::Accept4 => {
                self.sockets.extend(ret_fd);
            }
            LibFn::Close => {
                if let Some(fd) = l.opts.fd {
                    self.sockets.remove(&fd);
                }
            }
            _ => {}
        }
        if connections::is_tracked(l.func) {
            self.raw_setups.push(RawSetup {
                call: SetupCall {
                    tsc: l.tsc,
                    tid: self.tid,
                    func: l.func,
                    fd: l.opts.fd,
                    fd2: l.opts.fd2,
                    ret: l.opts.ret,
                    flags: l.opts.flags,
                    stack: 0,
                    local: l.opts.local(),
                    peer: l.opts.peer(),
                },
                frames: self
                    .frames
                    .iter()
                    .map(|f| (f.kind, f.site, f.callee))
                    .collect(),
                ev: l.clone(),
            });
        }
    }
}

/// A library call's entry waiting for its exit in pass 1.
enum Pending1 {
    None,
    /// A call pass 1 reads nothing of but its function, descriptor and socket flag.
    Lean {
        func: LibFn,
        fd: Option<i32>,
        is_socket: Option<bool>,
    },
    /// A descriptor-creating call (or one whose options needed the checking decoder).
    Full(LibEvent),
}

impl ThreadScanner<'_> {
    /// What [`PairSink::call`] does with a call that creates no descriptor: count it.
    #[inline]
    fn lean_call(&mut self, func: LibFn, fd: Option<i32>, is_socket: Option<bool>) {
        let sockets = &self.sockets;
        let recv =
            is_socket_receive_parts(func, is_socket, fd, |fd| sockets.contains(&fd) || fd > 2);
        let counters = match self.frames.last_mut() {
            Some(f) => (&mut f.mux, &mut f.recv),
            None => (&mut self.root.0, &mut self.root.1),
        };
        if func.is_multiplexer() {
            *counters.0 += 1;
        }
        if recv {
            *counters.1 += 1;
        }
    }

    #[inline(always)]
    fn flush1(&mut self, pending: &mut Pending1) {
        if !matches!(pending, Pending1::None) {
            self.flush1_some(pending);
        }
    }

    #[inline(never)]
    fn flush1_some(&mut self, pending: &mut Pending1) {
        match std::mem::replace(pending, Pending1::None) {
            Pending1::None => {}
            Pending1::Lean {
                func,
                fd,
                is_socket,
            } => self.lean_call(func, fd, is_socket),
            Pending1::Full(l) => self.call(&l, Outcome::Unfinished),
        }
    }

    /// A library entry or exit decoded in full.
    fn full_lib(&mut self, pending: &mut Pending1, mut l: LibEvent) {
        if !l.exit {
            self.flush1(pending);
            if is_exit(l.func) || l.func.is_exec() {
                self.call(&l, Outcome::Unfinished);
            } else {
                *pending = Pending1::Full(l);
            }
            return;
        }
        match std::mem::replace(pending, Pending1::None) {
            Pending1::None => {}
            Pending1::Full(p) if p.func == l.func => merge_enter(&p, &mut l),
            Pending1::Lean {
                func,
                fd,
                is_socket,
            } if func == l.func => {
                l.opts.fd = l.opts.fd.or(fd);
                l.opts.is_socket = l.opts.is_socket.or(is_socket);
            }
            other => {
                *pending = other;
                self.flush1(pending);
            }
        }
        self.call(&l, Outcome::Unfinished);
    }

    /// Pass 1 over one thread: the same as pairing its library calls and handing everything
    /// to [`PairSink`] (`for_each_paired`), decoding only what pass 1 reads: library calls
    /// that create no descriptor are reduced to their function and, for receives, their
    /// descriptor and socket flag.
    fn scan_thread(&mut self, t: &ThreadTrace) -> Result<DecodeStats> {
        use crate::decode::{entry_at, RawChunk};
        let mut st = DecodeStats::default();
        let mut pending = Pending1::None;
        t.raw_chunks(|c: RawChunk<'_>| {
            if c.lost_before > 0 {
                st.lost += c.lost_before;
                self.flush1(&mut pending);
            }
            let bytes = c.bytes;
            st.bytes += bytes.len() as u64;
            let n = bytes.len();
            let mut p = 0usize;
            // Counted here, added to `st` at the end (an error discards the counts).
            let mut entries = 0u64;
            while p < n {
                if let Some(crate::decode::Head {
                    kind: head,
                    site,
                    callee,
                    ..
                }) = crate::decode::Head::at(bytes, p)
                {
                    let frame = match head {
                        0x01 => Some((CallKind::C, true)),
                        0x03 => Some((CallKind::Py, true)),
                        0x06 => Some((CallKind::PyBuiltin, true)),
                        0x02 => Some((CallKind::C, false)),
                        0x04 => Some((CallKind::Py, false)),
                        0x07 => Some((CallKind::PyBuiltin, false)),
                        _ => None,
                    };
                    if let Some((kind, enter)) = frame {
                        self.flush1(&mut pending);
                        if enter {
                            self.push_frame(kind, site, callee);
                            p += 20;
                        } else {
                            // Return-shaped: the function is in the first field.
                            self.pop_frames(kind, site);
                            p += 16;
                        }
                        entries += 1;
                        continue;
                    }
                    if let (k @ (0x10 | 0x11), Some(func)) = (head, LibFn::from_id(callee)) {
                        let m = bytes[p + 20] as usize;
                        let body = (m <= bufpool::format::MAX_OPTS && n - p >= 21 + m)
                            .then(|| &bytes[p + 21..p + 21 + m]);
                        // Receives need their descriptor and socket flag; other calls that
                        // create no descriptor, nothing. A block the quick parser refuses
                        // goes to the checking decoder below.
                        let lean = match body {
                            Some(b) if !connections::is_tracked(func) => {
                                if func.is_receive() {
                                    CallOpts::parse_scalars(b).map(|o| (o.fd, o.is_socket))
                                } else {
                                    Some((None, None))
                                }
                            }
                            _ => None,
                        };
                        if let Some((fd, is_socket)) = lean {
                            if k == 0x10 {
                                self.flush1(&mut pending);
                                if !(is_exit(func) || func.is_exec()) {
                                    pending = Pending1::Lean {
                                        func,
                                        fd,
                                        is_socket,
                                    };
                                }
                            } else {
                                // The entry's fields are read in place (moving the
                                // whole pending entry out cost more than the rest).
                                let entry = match &pending {
                                    Pending1::Lean {
                                        func: f,
                                        fd: efd,
                                        is_socket: es,
                                    } if *f == func => Some((*efd, *es)),
                                    Pending1::Full(e) if e.func == func => {
                                        Some((e.opts.fd, e.opts.is_socket))
                                    }
                                    _ => None,
                                };
                                let (mut fd, mut is_socket) = (fd, is_socket);
                                match entry {
                                    Some((efd, es)) => {
                                        fd = fd.or(efd);
                                        is_socket = is_socket.or(es);
                                        pending = Pending1::None;
                                    }
                                    None => self.flush1(&mut pending),
                                }
                                self.lean_call(func, fd, is_socket);
                            }
                            entries += 1;
                            p += 21 + m;
                            continue;
                        }
                    }
                }
                let Some(e) = entry_at(&c, p)? else { break };
                // Metadata and Lost markers are not entries (as in the manifest).
                if !e.kind.is_meta() && e.kind != bufpool::format::Kind::Lost {
                    entries += 1;
                }
                let ev = crate::decode::convert(&e)
                    .map_err(|source| crate::decode::entry_error(c.path, source))?;
                p += e.size;
                match ev {
                    Event::Lib(l) => self.full_lib(&mut pending, l),
                    // Injection records say nothing pass 1 reads.
                    Event::Meta {
                        meta: Meta::Inject(_),
                        ..
                    } => {}
                    Event::Meta { .. } => self.event(&ev),
                    Event::Lost { count, .. } => {
                        st.lost += count;
                        self.flush1(&mut pending);
                    }
                    other => {
                        self.flush1(&mut pending);
                        self.event(&other);
                    }
                }
            }
            st.entries += entries;
            Ok(())
        })?;
        self.flush1(&mut pending);
        Ok(st)
    }
}

#[cfg(test)]
mod pass1_tests {
    use super::*;

    #[test]
    fn lazy_frame_paths_are_the_eager_chain() {
        let (mut setups, mut symbols, mut exe, mut forked) =
            (Vec::new(), ProcessSymbols::default(), String::new(), None);
        let mut s = ThreadScanner {
            tid: 1,
            frames: Vec::new(),
            root: (0, 0),
            cands: Candidates::default(),
            sockets: FxSet::default(),
            raw_setups: &mut setups,
            symbols: &mut symbols,
            exe: &mut exe,
            forked: &mut forked,
        };
        let calls = [
            (CallKind::C, 0x10, 0x100),
            (CallKind::Py, 0x20, 7),
            (CallKind::PyBuiltin, 0x30, 3),
            (CallKind::C, 0x40, 0x400),
            (CallKind::C, 0x50, 0x500),
        ];
        let mut eager = Vec::new();
        let mut path = RAW_ROOT;
        for &(k, site, callee) in &calls {
            s.push_frame(k, site, callee);
            path = raw_step(path, k, site, callee);
            eager.push(path);
        }
        // Some computed first (a middle one, then the top), the rest from them.
        assert_eq!(s.path_of(2), eager[2]);
        assert!(s.frames[3].path.is_none());
        assert_eq!(s.path_of(4), eager[4]);
        for (i, &p) in eager.iter().enumerate() {
            assert_eq!(s.path_of(i), p, "frame {i}");
            assert_eq!(s.frames[i].path, Some(p));
        }
    }
}

/// Pass 1: symbols, descriptor history and event loops of one process.
pub fn scan_process(p: &ProcessTrace) -> Result<ProcessScan> {
    scan_process_with(p, true)
}

/// Pass 1, with its own lean decoding (`lean`), or with every event decoded and paired as
/// pass 2 sees them (the reference the lean one is tested against).
fn scan_process_with(p: &ProcessTrace, lean: bool) -> Result<ProcessScan> {
    let mut symbols = ProcessSymbols::default();
    let mut exe = String::new();
    let mut forked: Option<(u32, u64)> = None;
    let mut raw_setups = Vec::new();
    let mut threads = Vec::new();
    let mut stats = DecodeStats::default();
    for t in &p.threads {
        let mut s = ThreadScanner {
            tid: t.tid,
            frames: Vec::new(),
            root: (0, 0),
            cands: Candidates::default(),
            sockets: FxSet::default(),
            raw_setups: &mut raw_setups,
            symbols: &mut symbols,
            exe: &mut exe,
            forked: &mut forked,
        };
        stats += if lean {
            s.scan_thread(t)?
        } else {
            for_each_paired(t, &mut s)?
        };
        let (event_loop, receives) = s.finish();
        threads.push(ThreadScan {
            tid: t.tid,
            event_loop,
            receives,
        });
    }
    let mut scan = ProcessScan {
        symbols,
        threads,
        fds: FdTable::default(),
        exe,
        stats,
        forked_from: forked,
        inherited_fds: None,
        setups: raw_setups,
    };
    scan.build_fds(None);
    Ok(scan)
}

// ---------------------------------------------------------------- pass 2

struct P2Frame {
    kind: CallKind,
    /// Index of the unit that was current when the frame was entered.
    unit: u32,
    raw_callee: u64,
    /// Raw path hash (computed before the loop is entered only: it serves to recognize
    /// the loop frame).
    raw_path: u64,
    key: NodeKey,
    /// `key.hash()`.
    key_hash: u64,
    abs: u64,
    rel: u64,
    /// A library frame (see [`frame_node`]).
    lib: bool,
    /// Has a node of its own (else `rel` is its parent's).
    node: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Before,
    In,
    After,
}

/// Appends a number in decimal without the formatting machinery.
fn push_decimal(s: &mut String, mut v: u32) {
    let mut buf = [0u8; 10];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    s.extend(buf[i..].iter().map(|&b| b as char));
}

/// A connection as reports show it: identity, local and peer address.
pub type ConnRow = (ConnKey, Option<String>, Option<String>);

/// A unit as the splitter closes it: what a [`UnitInfo`] holds, without its strings (the id,
/// the host, the connection's addresses), which only reports need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitHead {
    /// Kind.
    pub kind: UnitKind,
    /// Thread id.
    pub tid: u32,
    /// Is this the process's main thread?
    pub main_thread: bool,
    /// Index of the unit in its thread.
    pub index: u32,
    /// Descriptor the handler received from (or accepted on).
    pub fd: Option<i32>,
    /// Index of its connection in [`UnitView::conns`] (0: none — the empty connection).
    pub conn: u32,
    /// Start, TSC.
    pub tsc_start: u64,
    /// End, TSC.
    pub tsc_end: u64,
    /// Start, wall clock (ns since the epoch).
    pub t_start_unix_ns: i64,
    /// End, wall clock.
    pub t_end_unix_ns: i64,
    /// Entries lost inside the unit.
    pub lost: u64,
    /// Faults injected inside the unit.
    pub injections: Vec<Injection>,
    /// Cut short by the end of the trace: the last unit of a thread whose trace ended while
    /// it was still in its event loop (the process was killed — a hung daemon ended by a
    /// timeout — or recording stopped). It is scored on what it did
    /// ([`crate::score::score_tree_as`]).
    pub cut: bool,
}

/// A closed unit, lent to the callback of [`split_process_each`] (its tree is a buffer
/// the splitter reuses for the next unit).
pub struct UnitView<'a> {
    /// Host.
    pub host: &'a str,
    /// Process id.
    pub pid: u32,
    /// The unit.
    pub head: &'a UnitHead,
    /// Its call tree.
    pub tree: &'a TreeBuf,
    /// The process's connections so far (`head.conn` indexes it).
    pub conns: &'a [ConnRow],
    /// The process's signature, once it is final: from the unit that closes the
    /// initializer of the process's last thread on (the signature is made of the setup
    /// calls of initializer units and of the program).
    pub signature: Option<&'a Signature>,
}

impl UnitView<'_> {
    /// The unit's connection (identity and addresses).
    pub fn conn(&self) -> &ConnRow {
        &self.conns[self.head.conn as usize]
    }

    /// What selects the unit's model inside a process: kind, main thread, and for handlers
    /// the index of the connection (equal connections may have several indices; see
    /// [`UnitView::class`]).
    pub fn class_key(&self) -> (UnitKind, bool, u32) {
        let conn = if self.head.kind == UnitKind::Handler {
            self.head.conn
        } else {
            0
        };
        (self.head.kind, self.head.main_thread, conn)
    }

    /// The unit's class (which model it is compared with).
    pub fn class(&self) -> crate::model::UnitClass {
        crate::model::UnitClass {
            kind: self.head.kind,
            main_thread: self.head.main_thread,
            conn: if self.head.kind == UnitKind::Handler {
                self.conn().0.clone()
            } else {
                ConnKey::default()
            },
        }
    }

    /// `host:pid:tid:index`.
    pub fn id(&self) -> String {
        unit_id(self.host, self.pid, self.head.tid, self.head.index)
    }

    /// The whole [`UnitInfo`].
    pub fn info(&self) -> UnitInfo {
        let h = self.head;
        let (conn, local, peer) = self.conn().clone();
        UnitInfo {
            id: self.id(),
            host: self.host.to_string(),
            pid: self.pid,
            tid: h.tid,
            main_thread: h.main_thread,
            index: h.index,
            kind: h.kind,
            fd: h.fd,
            conn,
            local,
            peer,
            tsc_start: h.tsc_start,
            tsc_end: h.tsc_end,
            t_start_unix_ns: h.t_start_unix_ns,
            t_end_unix_ns: h.t_end_unix_ns,
            lost: h.lost,
            injections: h.injections.clone(),
            cut: h.cut,
        }
    }

    /// An owned [`Unit`].
    pub fn to_unit(&self) -> Unit {
        Unit {
            info: self.info(),
            tree: self.tree.to_tree(),
        }
    }
}

/// The id of a unit: `host:pid:tid:index`.
pub fn unit_id(host: &str, pid: u32, tid: u32, index: u32) -> String {
    let mut id = String::with_capacity(host.len() + 24);
    id.push_str(host);
    for v in [pid, tid] {
        id.push(':');
        push_decimal(&mut id, v);
    }
    id.push(':');
    push_decimal(&mut id, index);
    id
}

/// What the splitters of a process's threads share: names, the signature, the connections
/// seen, and the stable keys already computed.
struct ProcCtx {
    names: NameBook,
    signature: BTreeSet<u64>,
    /// Connections, distinct by value; 0 is "none".
    conns: Vec<ConnRow>,
    /// Index in `conns` of each connection state seen, by its `ConnInfo`'s address
    /// (formatting addresses for every handler unit was a tenth of the splitting time).
    conn_by_ptr: FxMap<usize, u32>,
    conn_by_value: FxMap<ConnRow, u32>,
    /// Node keys by raw parts: symbolizing a raw address or Python index (a search of the
    /// memory map, string hashes) is done once per process, and so is naming.
    memo: Memo,
    /// The signature, once final (see [`UnitView::signature`]).
    final_sig: Option<Signature>,
}

impl ProcCtx {
    fn new() -> ProcCtx {
        let none: ConnRow = (ConnKey::default(), None, None);
        let mut conn_by_value = FxMap::default();
        conn_by_value.insert(none.clone(), 0);
        ProcCtx {
            names: NameBook::default(),
            signature: BTreeSet::new(),
            conns: vec![none],
            conn_by_ptr: FxMap::default(),
            conn_by_value,
            memo: Memo::default(),
            final_sig: None,
        }
    }

    /// The process's signature: the setup calls' stack keys and the program.
    fn signature(&self, scan: &ProcessScan) -> Signature {
        let mut s = self.signature.clone();
        if !scan.exe.is_empty() {
            s.insert(program_key(&scan.exe));
        }
        if scan.forked_from.is_some() {
            s.insert(FORKED_KEY);
        }
        Signature(s.into_iter().collect())
    }

    fn conn_index(&mut self, ci: &std::sync::Arc<connections::ConnInfo>) -> u32 {
        let ptr = std::sync::Arc::as_ptr(ci) as usize;
        if let Some(&i) = self.conn_by_ptr.get(&ptr) {
            return i;
        }
        let row: ConnRow = (
            ci.key(),
            ci.local.map(|a| a.to_display()),
            ci.peer.map(|a| a.to_display()),
        );
        let i = match self.conn_by_value.get(&row) {
            Some(&i) => i,
            None => {
                let i = self.conns.len() as u32;
                self.conns.push(row.clone());
                self.conn_by_value.insert(row, i);
                i
            }
        };
        self.conn_by_ptr.insert(ptr, i);
        i
    }
}

/// A memoized node key: the key, its hash, and whether the names of its parts were noted.
#[derive(Clone, Copy, Debug)]
struct MemoVal {
    key: NodeKey,
    hash: u64,
    named: bool,
    /// A frame of library code ([`frame_node`]; false for other keys).
    lib: bool,
}

/// Raw parts of a node key: (tag | kind, site, callee).
type RawKey = (u64, u64, u64);

/// Node keys by raw parts, with a direct-mapped cache in front of the map (a process calls
/// a few hundred distinct functions from a few hundred sites, again and again).
struct Memo {
    front: Vec<(RawKey, MemoVal)>,
    map: FxMap<RawKey, MemoVal>,
}

const MEMO_FRONT_BITS: u32 = 10;

impl Default for Memo {
    fn default() -> Self {
        let empty = MemoVal {
            key: NodeKey {
                kind: NodeKind::C,
                site: 0,
                callee: 0,
                outcome: Outcome::Any,
            },
            hash: 0,
            named: false,
            lib: false,
        };
        // Tag 0 is never a raw key's first part (see the `MEMO_*` tags): empty slots.
        Memo {
            front: vec![((0, 0, 0), empty); 1 << MEMO_FRONT_BITS],
            map: FxMap::default(),
        }
    }
}

impl Memo {
    #[inline]
    fn slot(raw: RawKey) -> usize {
        let h = (raw.0 ^ raw.1.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ raw.2.rotate_left(32))
            .wrapping_mul(0xbf58_476d_1ce4_e5b9);
        (h >> (64 - MEMO_FRONT_BITS)) as usize
    }

    #[inline]
    fn get(&mut self, raw: RawKey) -> Option<MemoVal> {
        let i = Self::slot(raw);
        if self.front[i].0 == raw {
            return Some(self.front[i].1);
        }
        let v = *self.map.get(&raw)?;
        self.front[i] = (raw, v);
        Some(v)
    }

    fn insert(&mut self, raw: RawKey, key: NodeKey, lib: bool) -> MemoVal {
        let v = MemoVal {
            key,
            hash: key.hash(),
            named: false,
            lib,
        };
        self.map.insert(raw, v);
        self.front[Self::slot(raw)] = (raw, v);
        v
    }

    fn set_named(&mut self, raw: RawKey) {
        if let Some(v) = self.map.get_mut(&raw) {
            v.named = true;
        }
        let i = Self::slot(raw);
        if self.front[i].0 == raw {
            self.front[i].1.named = true;
        }
    }
}

/// Memo tags of [`ProcCtx::memo`] (the first part of the raw key).
const MEMO_FRAME: u64 = 1 << 62;
const MEMO_LIB: u64 = 2 << 62;
const MEMO_EXC: u64 = 3 << 62;

/// The image part of a memo key's first part: the same raw address or Python index means
/// something else in each image of a process that exec'd ([`ProcessSymbols::image_at`]).
#[inline]
fn memo_image(image: usize) -> u64 {
    (image as u64 & 0xff_ffff) << 32
}

struct Splitter<'a> {
    p: &'a ProcessTrace,
    /// The process's TSC calibration, ready for conversions.
    clock: bufpool::layout::TscToUnix,
    scan: &'a ProcessScan,
    opts: TreeOptions,
    tid: u32,
    event_loop: Option<LoopSpec>,
    frames: Vec<P2Frame>,
    phase: Phase,
    base: usize,
    /// The current unit and its tree.
    head: UnitHead,
    tree: TreeBuf,
    /// The tree of the unit being closed (kept to reuse its allocations).
    spare: TreeBuf,
    /// Nodes moving from a loop unit to the handler after it (kept for its allocation).
    moved: Vec<(u64, crate::trees::TreeNode)>,
    last_tsc: u64,
    /// Receives each unit as it is closed.
    sink: &'a mut dyn FnMut(UnitView<'_>),
    anchor: Option<usize>,
    mux_since_recv: bool,
    ctx: &'a mut ProcCtx,
    /// Is this the process's last thread (whose initializer completes the signature)?
    last_thread: bool,
}

impl Splitter<'_> {
    fn unix(&self, tsc: u64) -> i64 {
        let v = self.clock.unix_ns(tsc);
        v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    fn new_head(&self, kind: UnitKind, tsc: u64, index: u32) -> UnitHead {
        let t = self.unix(tsc);
        UnitHead {
            kind,
            tid: self.tid,
            main_thread: self.tid == self.p.pid,
            index,
            fd: None,
            conn: 0,
            tsc_start: tsc,
            tsc_end: tsc,
            t_start_unix_ns: t,
            t_end_unix_ns: t,
            lost: 0,
            injections: Vec::new(),
            cut: false,
        }
    }

    /// The node key of a function frame at `tsc` (with its hash, and whether its names were
    /// noted).
    #[inline]
    fn frame_key(&mut self, kind: CallKind, site: u64, callee: u64, tsc: u64) -> MemoVal {
        let (image, sy) = self.scan.symbols.image_at(tsc);
        let raw = (MEMO_FRAME | memo_image(image) | kind as u64, site, callee);
        match self.ctx.memo.get(raw) {
            Some(v) => v,
            None => {
                let k = frame_key(sy, kind, site, callee);
                let lib = is_library_frame(sy, &self.opts, kind, callee);
                self.ctx.memo.insert(raw, k, lib)
            }
        }
    }

    /// Notes the names of a frame's parts (once per process).
    #[cold]
    fn name_frame(&mut self, kind: CallKind, site: u64, callee: u64, key: &NodeKey, tsc: u64) {
        let (image, sy) = self.scan.symbols.image_at(tsc);
        let names = &mut self.ctx.names.names;
        names.entry(key.site).or_insert_with(|| match kind {
            CallKind::C => NameSrc::C(sy.name_c(site)),
            _ => NameSrc::Text(sy.name_py_site(site)),
        });
        names.entry(key.callee).or_insert_with(|| match kind {
            CallKind::C => NameSrc::C(sy.name_c(callee)),
            _ => NameSrc::Text(sy.name_py(callee)),
        });
        self.ctx
            .memo
            .set_named((MEMO_FRAME | memo_image(image) | kind as u64, site, callee));
    }

    /// Closes the current unit at `tsc` and opens a new one.
    fn start(&mut self, kind: UnitKind, tsc: u64, fd: Option<i32>) {
        let index = self.head.index + 1;
        let next = self.new_head(kind, tsc, index);
        let old = std::mem::replace(&mut self.head, next);
        std::mem::swap(&mut self.tree, &mut self.spare);
        // A handler takes from the loop unit before it the calls that led to its first
        // receive: the frames under the loop frame entered during that loop unit (e.g.
        // `handle_lhs_input`, entered after `select`), with everything they called. They
        // belong to the handling of this message, not to the loop's own work.
        let mut moved = std::mem::take(&mut self.moved);
        moved.clear();
        if kind == UnitKind::Handler && old.kind == UnitKind::Loop {
            let base = self.event_loop.map_or(0, |l| l.depth);
            if let Some(f) = self
                .frames
                .iter()
                .skip(base)
                .find(|f| f.unit == old.index && f.node)
            {
                self.spare.take_subtree_into(f.rel, &mut moved);
            }
        }
        self.close_spare(old, tsc);
        for &(id, n) in &moved {
            self.tree.insert(id, n);
        }
        self.moved = moved;
        let base = match kind {
            UnitKind::Initializer | UnitKind::Finalizer => 0,
            _ => self.event_loop.map_or(0, |l| l.depth),
        };
        if base != self.base {
            self.base = base;
            let mut rel = ROOT;
            for f in self.frames.iter_mut().skip(base) {
                if f.node {
                    rel = child_id(rel, f.key_hash);
                }
                f.rel = rel;
            }
        }
        let mut parent = ROOT;
        for f in self.frames.iter().skip(self.base).filter(|f| f.node) {
            parent = self.tree.add_new_h(parent, f.key, f.key_hash, tsc).0;
        }
        self.anchor = None;
        if kind == UnitKind::Handler {
            if let Some(fd) = fd {
                self.head.fd = Some(fd);
                if let Some(ci) = self.scan.fd_at(fd, tsc) {
                    self.head.conn = self.ctx.conn_index(ci);
                }
            }
            if self.frames.len() > self.base
                && matches!(self.frames[self.base].kind, CallKind::C | CallKind::Py)
            {
                self.anchor = Some(self.base);
            }
        }
        self.mux_since_recv = false;
    }

    /// Hands the unit `head`, whose tree is in `spare`, to the sink; empties `spare`.
    fn close_spare(&mut self, mut head: UnitHead, tsc: u64) {
        head.tsc_end = tsc.max(head.tsc_start);
        head.t_end_unix_ns = self.unix(head.tsc_end);
        let keep = !self.spare.is_empty()
            || matches!(head.kind, UnitKind::Initializer | UnitKind::Handler);
        if head.kind == UnitKind::Initializer && self.last_thread && self.ctx.final_sig.is_none() {
            self.ctx.final_sig = Some(self.ctx.signature(self.scan));
        }
        if keep {
            (self.sink)(UnitView {
                host: &self.p.host,
                pid: self.p.pid,
                head: &head,
                tree: &self.spare,
                conns: &self.ctx.conns,
                signature: self.ctx.final_sig.as_ref(),
            });
        }
        self.spare.clear();
    }

    fn top_rel(&self) -> u64 {
        if self.frames.len() > self.base {
            self.frames.last().map_or(ROOT, |f| f.rel)
        } else {
            ROOT
        }
    }

    /// Sets the first unit's start at the thread's first event.
    #[inline]
    fn first(&mut self, tsc: u64) {
        if self.head.tsc_start == 0 && self.head.index == 0 {
            self.head.tsc_start = tsc;
            self.head.t_start_unix_ns = self.unix(tsc);
        }
    }

    fn after_pop(&mut self, tsc: u64) {
        if self.phase == Phase::In {
            if let Some(l) = self.event_loop {
                if l.depth > 0 && self.frames.len() < l.depth {
                    self.phase = Phase::After;
                    self.start(UnitKind::Finalizer, tsc, None);
                    return;
                }
            }
            if self.head.kind == UnitKind::Handler {
                if let Some(a) = self.anchor {
                    if self.frames.len() <= a {
                        self.start(UnitKind::Loop, tsc, None);
                    }
                }
            }
        }
    }

    fn anchor_active(&self) -> bool {
        self.anchor.is_some_and(|a| self.frames.len() > a)
    }

    fn on_injection(&mut self, tsc: u64, r: &bufpool::format::InjectRecord) {
        let inj = Injection {
            unix_ns: self.unix(tsc),
            func: LibFn::from_id(r.func as u64)
                .map_or_else(|| format!("fn#{}", r.func), |f| f.name().to_string()),
            fd: r.fd,
            forced_ret: r.forced_ret,
            forced_errno: r.forced_errno,
            spec: String::from_utf8_lossy(&r.spec).into_owned(),
        };
        // The call's own `inject` option may already have noted it (as "rule N"): the
        // record, which has the rule's text, replaces that note.
        let note = format!("rule {}", r.rule);
        let injections = &mut self.head.injections;
        match injections
            .iter_mut()
            .find(|i| i.spec == note && i.func == inj.func && i.fd == inj.fd)
        {
            Some(i) => *i = inj,
            None => injections.push(inj),
        }
    }
}

impl PairSink for Splitter<'_> {
    fn event(&mut self, e: &Event) {
        let tsc = e.tsc();
        self.first(tsc);
        self.last_tsc = self.last_tsc.max(tsc);
        match e {
            Event::Call {
                kind, site, callee, ..
            } => {
                let m = self.frame_key(*kind, *site, *callee, tsc);
                let (abs_parent, raw_parent, rel_parent) = match self.frames.last() {
                    Some(f) => (f.abs, f.raw_path, self.top_rel()),
                    None => (ROOT, RAW_ROOT, ROOT),
                };
                let lib = m.lib;
                let node = frame_node(lib, self.frames.last());
                let in_unit = self.frames.len() >= self.base;
                let (rel, new) = if !node {
                    (rel_parent, false)
                } else if in_unit {
                    self.tree.add_new_h(rel_parent, m.key, m.hash, tsc)
                } else {
                    (child_id(rel_parent, m.hash), false)
                };
                if new && !m.named {
                    self.name_frame(*kind, *site, *callee, &m.key, tsc);
                }
                let raw_path = if self.phase == Phase::Before {
                    raw_step(raw_parent, *kind, *site, *callee)
                } else {
                    0
                };
                self.frames.push(P2Frame {
                    kind: *kind,
                    unit: self.head.index,
                    raw_callee: *callee,
                    raw_path,
                    key: m.key,
                    key_hash: m.hash,
                    abs: child_id(abs_parent, m.hash),
                    rel,
                    lib,
                    node,
                });
            }
            Event::Return { kind, callee, .. } => {
                if let Some(i) = self
                    .frames
                    .iter()
                    .rposition(|f| f.raw_callee == *callee && f.kind == *kind)
                {
                    while self.frames.len() > i {
                        self.frames.pop();
                        self.after_pop(tsc);
                    }
                }
            }
            Event::Exception { code, exc_type, .. } => {
                let (image, sy) = self.scan.symbols.image_at(tsc);
                let raw = (MEMO_EXC | memo_image(image), *code, *exc_type);
                let m = match self.ctx.memo.get(raw) {
                    Some(m) => m,
                    None => {
                        let key = NodeKey {
                            kind: NodeKind::Exception,
                            site: sy.key_py(*code),
                            callee: sy.key_py(*exc_type),
                            outcome: Outcome::Any,
                        };
                        self.ctx.memo.insert(raw, key, false)
                    }
                };
                let key = m.key;
                let (_, new) = self.tree.add_new_h(self.top_rel(), key, m.hash, tsc);
                if new && !m.named {
                    let (n1, n2) = (sy.name_py(*code), sy.name_py(*exc_type));
                    let names = &mut self.ctx.names.names;
                    names.entry(key.site).or_insert(NameSrc::Text(n1));
                    names.entry(key.callee).or_insert(NameSrc::Text(n2));
                    self.ctx.memo.set_named(raw);
                }
            }
            Event::Lost { count, .. } => self.head.lost += count,
            Event::Meta {
                meta: Meta::Inject(r),
                ..
            } => self.on_injection(tsc, r),
            Event::Meta { .. } | Event::Lib(_) => {}
        }
    }

    fn call(&mut self, l: &LibEvent, outcome: Outcome) {
        let tsc = l.tsc;
        self.first(tsc);
        self.last_tsc = self.last_tsc.max(tsc);
        if self.phase == Phase::Before && l.func.is_multiplexer() {
            if let Some(lp) = self.event_loop {
                let on_path = self.frames.len() >= lp.depth
                    && (lp.depth == 0 || self.frames[lp.depth - 1].raw_path == lp.path);
                if on_path {
                    // The initializer runs on through the loop's first iteration up to
                    // the first receive: a first "loop" unit would always be a truncated
                    // iteration (it starts at the multiplexer, after what precedes it in
                    // later iterations) and rank as an anomaly in every run.
                    self.phase = Phase::In;
                }
            }
        }
        if self.phase == Phase::In {
            if is_exit(l.func) {
                self.phase = Phase::After;
                self.start(UnitKind::Finalizer, tsc, None);
            } else if l.func.is_multiplexer() {
                if self.head.kind == UnitKind::Handler && !self.anchor_active() {
                    self.start(UnitKind::Loop, tsc, None);
                }
                self.mux_since_recv = true;
            } else if is_socket_receive(l, |fd| self.scan.fd_at(fd, tsc).is_some()) {
                let fd = l.opts.fd;
                let same = self.head.kind == UnitKind::Handler
                    && self.head.fd == fd
                    && !self.mux_since_recv;
                if !same {
                    self.start(UnitKind::Handler, tsc, fd);
                }
                self.mux_since_recv = false;
            }
        }
        let (image, sy) = self.scan.symbols.image_at(tsc);
        if self.head.kind == UnitKind::Initializer && connections::is_setup(l.func) {
            let top_abs = self.frames.last().map_or(ROOT, |f| f.abs);
            self.ctx.signature.insert(setup_stack_key(sy, top_abs, l));
        }
        let o = if self.opts.outcome_aware {
            outcome
        } else {
            Outcome::Any
        };
        let raw = (
            MEMO_LIB | memo_image(image),
            l.site,
            (key_lib(l.func) << 32) | o.code() as u32 as u64,
        );
        let m = match self.ctx.memo.get(raw) {
            Some(m) => m,
            None => {
                let k = lib_key(sy, l, o);
                self.ctx.memo.insert(raw, k, false)
            }
        };
        let key = m.key;
        let (_, new) = self.tree.add_new_h(self.top_rel(), key, m.hash, tsc);
        if new && !m.named {
            let site = sy.name_c(l.site);
            let names = &mut self.ctx.names.names;
            names.entry(key.site).or_insert(NameSrc::C(site));
            names
                .entry(key.callee)
                .or_insert_with(|| NameSrc::Text(l.func.name().to_string()));
            self.ctx.memo.set_named(raw);
        }
        if let Some(rule) = l.opts.inject {
            // Covered by a Meta::Inject record when the injector writes one; note it anyway.
            if self.head.injections.is_empty() {
                let inj = Injection {
                    unix_ns: self.unix(tsc),
                    func: l.func.name().to_string(),
                    fd: l.opts.fd.unwrap_or(-1),
                    forced_ret: l.opts.ret.unwrap_or(0),
                    forced_errno: l.opts.errno.unwrap_or(0),
                    spec: format!("rule {rule}"),
                };
                self.head.injections.push(inj);
            }
        }
    }
}

/// Pass 2: cuts every thread of a process into units with their call trees.
pub fn split_process(
    p: &ProcessTrace,
    scan: &ProcessScan,
    opts: &TreeOptions,
) -> Result<ProcessUnits> {
    let mut units = Vec::new();
    let mut pu = split_process_each(p, scan, opts, |u| units.push(u.to_unit()))?;
    pu.units = units;
    Ok(pu)
}

/// Like [`split_process`], lending each unit to `on_unit` as soon as it is closed (by thread,
/// then time) instead of collecting them: the returned [`ProcessUnits`] has no units.
pub fn split_process_each(
    p: &ProcessTrace,
    scan: &ProcessScan,
    opts: &TreeOptions,
    mut on_unit: impl FnMut(UnitView<'_>),
) -> Result<ProcessUnits> {
    let mut ctx = ProcCtx::new();
    let n_threads = p.threads.len();
    for (i, (t, ts)) in p.threads.iter().zip(&scan.threads).enumerate() {
        let mut s = Splitter {
            p,
            clock: p.calib.converter(),
            scan,
            opts: *opts,
            tid: t.tid,
            event_loop: ts.event_loop,
            frames: Vec::new(),
            phase: Phase::Before,
            base: 0,
            head: UnitHead {
                kind: UnitKind::Initializer,
                tid: t.tid,
                main_thread: false,
                index: 0,
                fd: None,
                conn: 0,
                tsc_start: 0,
                tsc_end: 0,
                t_start_unix_ns: 0,
                t_end_unix_ns: 0,
                lost: 0,
                injections: Vec::new(),
                cut: false,
            },
            tree: TreeBuf::default(),
            spare: TreeBuf::default(),
            moved: Vec::new(),
            last_tsc: 0,
            sink: &mut on_unit,
            anchor: None,
            mux_since_recv: false,
            ctx: &mut ctx,
            last_thread: i + 1 == n_threads,
        };
        s.head = s.new_head(UnitKind::Initializer, 0, 0);
        for_each_paired(t, &mut s)?;
        let end = s.last_tsc;
        let placeholder = s.new_head(UnitKind::Loop, end, 0);
        let mut last = std::mem::replace(&mut s.head, placeholder);
        // Still in the loop when the trace ended: it did not end, it was cut.
        last.cut = s.phase == Phase::In;
        std::mem::swap(&mut s.tree, &mut s.spare);
        s.close_spare(last, end);
    }
    let signature = ctx.signature(scan);
    Ok(ProcessUnits {
        host: p.host.clone(),
        pid: p.pid,
        start_ticks: p.start_ticks,
        exe: scan.exe.clone(),
        signature,
        units: Vec::new(),
        names: ctx.names,
        conns: ctx.conns,
        stats: scan.stats,
    })
}

/// Both passes.
pub fn process_units(p: &ProcessTrace, opts: &TreeOptions) -> Result<ProcessUnits> {
    let scan = scan_process(p)?;
    split_process(p, &scan, opts)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::decode::TraceBuilder;
    use bufpool::format::LibOpts;

    pub(crate) fn o(fd: i32, ret: i64, len: u64) -> LibOpts {
        LibOpts {
            fd: Some(fd),
            ret: Some(ret),
            len: Some(len),
            ..Default::default()
        }
    }

    fn kinds(p: &ProcessUnits) -> Vec<(UnitKind, Option<i32>)> {
        p.units.iter().map(|u| (u.info.kind, u.info.fd)).collect()
    }

    /// No function entries at all: the loop is the thread; accept and receives start
    /// handlers; consecutive receives on one fd are one; a multiplexer call ends a handler.
    /// Splits every chunk of `p` into chunks of about `size` bytes at entry boundaries
    /// (entries near chunk ends take the checking decoder's path), marking some entries
    /// lost before every seventh chunk.
    fn rechunk(p: &ProcessTrace, size: usize) -> ProcessTrace {
        use crate::decode::{Chunk, ThreadSource};
        let mut q = p.clone();
        for t in &mut q.threads {
            let ThreadSource::Memory(chunks) = &t.source else {
                panic!("synthetic traces are in memory")
            };
            let all: Vec<u8> = chunks
                .iter()
                .flat_map(|c| c.bytes.iter().copied())
                .collect();
            let mut out = Vec::new();
            let (mut start, mut at) = (0, 0);
            for e in bufpool::format::Decoder::new(&all) {
                let e = e.expect("synthetic entries decode");
                at += e.size;
                if at - start >= size {
                    out.push(Chunk {
                        lost_before: if out.len() % 7 == 6 { 3 } else { 0 },
                        name: std::sync::Arc::new(format!("chunk {}", out.len()).into()),
                        bytes: std::sync::Arc::new(all[start..at].to_vec()),
                    });
                    start = at;
                }
            }
            out.push(Chunk {
                lost_before: 0,
                name: std::sync::Arc::new("last".into()),
                bytes: std::sync::Arc::new(all[start..].to_vec()),
            });
            t.source = ThreadSource::Memory(out);
        }
        q
    }

    #[test]
    fn lean_pass_1_finds_what_the_paired_events_give() {
        use crate::synth::{ring, Fault, Functions, Ring};
        for functions in [Functions::C, Functions::Python, Functions::None] {
            for fault in [
                None,
                Some(Fault {
                    process: 1,
                    iteration: 9,
                }),
            ] {
                let procs = ring(&Ring {
                    processes: 3,
                    iterations: 30,
                    functions,
                    fault,
                    seed: 5,
                });
                for p in &procs {
                    for size in [usize::MAX, 300, 64] {
                        let p = if size == usize::MAX {
                            p.clone()
                        } else {
                            rechunk(p, size)
                        };
                        let lean = scan_process_with(&p, true).unwrap();
                        let full = scan_process_with(&p, false).unwrap();
                        let what =
                            format!("{functions:?} {fault:?} pid {} chunks of {size}", p.pid);
                        let loops = |s: &ProcessScan| {
                            s.threads
                                .iter()
                                .map(|t| (t.tid, t.event_loop))
                                .collect::<Vec<_>>()
                        };
                        assert_eq!(loops(&lean), loops(&full), "{what}");
                        assert!(loops(&lean).iter().all(|l| l.1.is_some()), "{what}");
                        assert_eq!(lean.stats, full.stats, "{what}");
                        assert_eq!(lean.exe, full.exe, "{what}");
                        assert_eq!(lean.forked_from, full.forked_from, "{what}");
                        for fd in 0..12 {
                            for tsc in (0..4_000_000u64).step_by(9_973) {
                                assert_eq!(
                                    lean.fd_at(fd, tsc).map(|c| c.key()),
                                    full.fd_at(fd, tsc).map(|c| c.key()),
                                    "{what}: fd {fd} at {tsc}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn lean_pass_1_pairs_entries_and_exits_like_the_paired_events() {
        use bufpool::format::{encode_lib, Kind};
        // As the tracer writes them: the descriptor on the entry only, the result on the
        // exit; reads on a descriptor known from accept; calls cut by others.
        let mut t = TraceBuilder::new("h", 7, 7);
        let exit = |t: &mut TraceBuilder, func: LibFn, ret: i64| {
            let x = LibOpts {
                ret: Some(ret),
                ..Default::default()
            };
            let e = encode_lib(Kind::LibExit, t.now(), 0x900, func, &x);
            t.raw(e.as_bytes());
        };
        t.lib(
            0x100,
            LibFn::Socket,
            LibOpts {
                ret: Some(3),
                ..Default::default()
            },
        );
        t.lib(0x110, LibFn::Listen, o(3, 0, 0));
        t.lib(0x210, LibFn::Accept, o(3, 10, 0));
        t.lib(0x210, LibFn::Accept, o(3, 12, 0));
        // The only receives of the loop are the reads: pairing decides that there is one.
        t.enter(0x1000, 0x2000);
        for _ in 0..6 {
            t.lib_enter(0x200, LibFn::Poll, LibOpts::default());
            exit(&mut t, LibFn::Poll, 1);
            t.enter(0x1010, 0x3000);
            t.lib_enter(
                0x220,
                LibFn::Read,
                LibOpts {
                    fd: Some(10),
                    len: Some(8),
                    ..Default::default()
                },
            );
            exit(&mut t, LibFn::Read, 8);
            t.exit(0x3000);
        }
        t.exit(0x2000);
        // A read cut short by a send (a signal handler), then its exit.
        t.lib_enter(
            0x230,
            LibFn::Read,
            LibOpts {
                fd: Some(12),
                len: Some(8),
                ..Default::default()
            },
        );
        t.lib_enter(
            0x240,
            LibFn::Send,
            LibOpts {
                fd: Some(12),
                len: Some(2),
                ..Default::default()
            },
        );
        exit(&mut t, LibFn::Send, 2);
        exit(&mut t, LibFn::Read, 8);
        let p = t.finish();
        for size in [usize::MAX, 90, 40] {
            let p = if size == usize::MAX {
                p.clone()
            } else {
                rechunk(&p, size)
            };
            let lean = scan_process_with(&p, true).unwrap();
            let full = scan_process_with(&p, false).unwrap();
            assert_eq!(full.threads[0].event_loop.map(|l| l.depth), Some(1));
            assert_eq!(
                lean.threads[0].event_loop, full.threads[0].event_loop,
                "chunks of {size}"
            );
            assert_eq!(lean.stats, full.stats);
        }
    }

    #[test]
    fn lean_pass_1_reports_corrupt_entries_like_the_decoder() {
        let mut t = TraceBuilder::new("h", 1, 1);
        t.lib(0x10, LibFn::Recv, o(4, 8, 8));
        t.enter(0x20, 0x30);
        t.raw(&[0x7f; 12]);
        let p = t.finish();
        let lean = scan_process_with(&p, true)
            .expect_err("corrupt")
            .to_string();
        let full = scan_process_with(&p, false)
            .expect_err("corrupt")
            .to_string();
        assert_eq!(lean, full);
        assert!(lean.contains("unknown entry type 0x7f"), "{lean}");
    }

    #[test]
    fn library_calls_only() {
        use UnitKind::*;
        let mut t = TraceBuilder::new("h", 7, 7);
        t.lib(0x10, LibFn::Socket, o(-1, 3, 0));
        t.lib(0x20, LibFn::Bind, o(3, 0, 0));
        t.lib(0x30, LibFn::Listen, o(3, 0, 0));
        t.lib(0x40, LibFn::Poll, o(-1, 1, 0));
        t.lib(0x50, LibFn::Accept, o(3, 4, 0));
        t.lib(0x40, LibFn::Poll, o(-1, 1, 0));
        t.lib(0x60, LibFn::Recv, o(4, 8, 8));
        t.lib(0x61, LibFn::Recv, o(4, 100, 100));
        t.lib(0x70, LibFn::Send, o(4, 108, 108));
        t.lib(0x40, LibFn::Poll, o(-1, 1, 0));
        t.lib(0x60, LibFn::Recv, o(4, 0, 8));
        t.lib(0x80, LibFn::Close, o(4, 0, 0));
        t.lib(0x40, LibFn::Poll, o(-1, 0, 0));
        t.lib_enter(0x90, LibFn::Exit, LibOpts::default());
        let p = t.finish();
        let u = process_units(&p, &TreeOptions::default()).unwrap();
        assert_eq!(
            kinds(&u),
            vec![
                (Initializer, None),
                (Handler, Some(3)),
                (Loop, None),
                (Handler, Some(4)),
                (Loop, None),
                (Handler, Some(4)),
                (Loop, None),
                (Finalizer, None)
            ]
        );
        // The accept handler's connection is the listening socket's (bind + listen); the
        // receives' adds the accept's stack.
        assert_eq!(u.units[1].info.conn.0.len(), 2);
        assert_eq!(u.units[3].info.conn.0.len(), 3);
        assert_eq!(u.units[3].info.conn, u.units[5].info.conn);
        assert_eq!(u.signature.0.len(), 2, "bind and listen in the initializer");
        // Both receives and the send are in one unit; the EOF one is distinct (outcome).
        assert_eq!(u.units[3].tree.nodes.len(), 3);
        let eof = u.units[5]
            .tree
            .nodes
            .values()
            .find(|n| n.key.callee == LibFn::Recv.id())
            .unwrap();
        assert_eq!(eof.key.outcome, Outcome::Eof);
        let off = process_units(
            &p,
            &TreeOptions {
                outcome_aware: false,
                ..TreeOptions::default()
            },
        )
        .unwrap();
        let any = off.units[5]
            .tree
            .nodes
            .values()
            .find(|n| n.key.callee == LibFn::Recv.id())
            .unwrap();
        assert_eq!(any.key.outcome, Outcome::Any);
    }

    /// An injection record written between a call's entry and exit (a short read) or
    /// before its entry (a skipped call) belongs to that call's unit, once, and never
    /// ends the call (it used to show as "`recv → unfinished`" and be counted twice).
    #[test]
    fn injection_records_belong_to_the_call_they_describe() {
        use bufpool::format::{encode_lib, InjectRecord, Kind};
        let inj = |rule: u32, forced_ret: i64, forced_errno: i32, spec: &str| {
            Meta::Inject(InjectRecord {
                rule,
                func: LibFn::Recv.id() as u16,
                fd: 3,
                original_ret: -1,
                forced_ret,
                forced_errno,
                spec: spec.as_bytes().to_vec(),
            })
        };
        let exit = |t: &mut TraceBuilder, ret: i64, errno: Option<i32>, rule: u32| {
            let opts = LibOpts {
                fd: Some(3),
                ret: Some(ret),
                errno,
                inject: Some(rule),
                ..Default::default()
            };
            let e = encode_lib(Kind::LibExit, t.now(), 0x60, LibFn::Recv, &opts);
            t.raw(e.as_bytes());
        };
        let enter = LibOpts {
            fd: Some(3),
            len: Some(8),
            ..Default::default()
        };
        let mut t = TraceBuilder::new("h", 7, 7);
        t.lib(0x10, LibFn::Socket, o(-1, 3, 0));
        t.lib(0x20, LibFn::Connect, o(3, 0, 0));
        t.lib(0x40, LibFn::Poll, o(-1, 1, 0));
        t.lib(0x60, LibFn::Recv, o(3, 8, 8));
        t.lib(0x40, LibFn::Poll, o(-1, 1, 0));
        // Short read: entry, injection record, exit.
        t.lib_enter(0x60, LibFn::Recv, enter);
        t.meta(&inj(0, 3, 0, "recv:short=3"));
        exit(&mut t, 3, None, 0);
        t.lib(0x40, LibFn::Poll, o(-1, 1, 0));
        // Skipped call: injection record, entry, exit.
        t.meta(&inj(1, -1, 104, "recv:errno=ECONNRESET"));
        t.lib_enter(0x60, LibFn::Recv, enter);
        exit(&mut t, -1, Some(104), 1);
        t.lib(0x80, LibFn::Close, o(3, 0, 0));
        t.lib(0x40, LibFn::Poll, o(-1, 0, 0));
        let u = process_units(&t.finish(), &TreeOptions::default()).unwrap();
        let with: Vec<&Unit> = u
            .units
            .iter()
            .filter(|u| !u.info.injections.is_empty())
            .collect();
        assert_eq!(with.len(), 2, "one unit per injection: {:?}", kinds(&u));
        for (unit, spec, outcome) in [
            (with[0], "recv:short=3", Outcome::Short),
            (with[1], "recv:errno=ECONNRESET", Outcome::Errno(104)),
        ] {
            assert_eq!(unit.info.kind, UnitKind::Handler);
            let specs: Vec<&str> = unit
                .info
                .injections
                .iter()
                .map(|i| i.spec.as_str())
                .collect();
            assert_eq!(
                specs,
                vec![spec],
                "the record's text replaces the rule-id note"
            );
            let recvs: Vec<Outcome> = unit
                .tree
                .nodes
                .values()
                .filter(|n| n.key.callee == LibFn::Recv.id())
                .map(|n| n.key.outcome)
                .collect();
            assert_eq!(
                recvs,
                vec![outcome],
                "the injected call is one finished call"
            );
        }
    }

    /// redis-like: the loop frame is `aeMain`; handlers are anchored at `aeProcessEvents`,
    /// so the replies and closes deferred to `beforeSleep` form a loop unit of their own.
    #[test]
    fn deferred_work_goes_to_a_loop_unit_when_handlers_are_anchored() {
        use UnitKind::*;
        let (main, ae_main, before_sleep, process_events, read_query) =
            (0x1000, 0x1100, 0x1200, 0x1300, 0x1400);
        let mut t = TraceBuilder::new("h", 9, 9);
        t.enter(0x10, main);
        t.lib(main + 4, LibFn::Socket, o(-1, 3, 0));
        t.lib(main + 8, LibFn::Listen, o(3, 0, 0));
        t.enter(main + 0x10, ae_main);
        for i in 0..3 {
            t.enter(ae_main + 4, before_sleep);
            if i > 0 {
                let mut w = o(5, 10, 10);
                w.is_socket = Some(true);
                t.lib(before_sleep + 4, LibFn::Write, w);
                t.lib(before_sleep + 8, LibFn::Close, o(6, 0, 0));
            }
            t.exit(before_sleep);
            t.enter(ae_main + 8, process_events);
            t.lib(process_events + 4, LibFn::EpollWait, o(-1, 2, 0));
            for fd in [5, 6] {
                t.enter(process_events + 8, read_query);
                let mut r = o(fd, 10, 100);
                r.is_socket = Some(true);
                t.lib(read_query + 4, LibFn::Read, r);
                t.exit(read_query);
            }
            t.exit(process_events);
        }
        t.exit(ae_main);
        t.exit(main);
        let p = t.finish();
        let scan = scan_process(&p).unwrap();
        assert_eq!(scan.threads[0].event_loop.unwrap().depth, 2, "aeMain");
        let u = split_process(&p, &scan, &TreeOptions::default()).unwrap();
        let k = kinds(&u);
        assert_eq!(k[0], (Initializer, None));
        assert_eq!(
            &k[1..4],
            &[(Handler, Some(5)), (Handler, Some(6)), (Loop, None)]
        );
        assert_eq!(*k.last().unwrap(), (Finalizer, None));
        // The loop unit after the first iteration holds beforeSleep's write and close.
        let lp = &u.units[3];
        let libs: Vec<u64> = lp
            .tree
            .nodes
            .values()
            .filter(|n| n.key.kind == NodeKind::Lib)
            .map(|n| n.key.callee)
            .collect();
        assert!(libs.contains(&LibFn::Write.id()) && libs.contains(&LibFn::Close.id()));
        // Handler trees start under the loop frame: aeProcessEvents → readQuery → read.
        assert_eq!(u.units[1].tree.nodes.len(), 3);
    }

    /// Of nested frames holding the same multiplexer calls, the innermost is the loop.
    #[test]
    fn innermost_loop_is_chosen() {
        let (main, init, run, handle) = (0x1000, 0x1100, 0x1200, 0x1300);
        let mut t = TraceBuilder::new("h", 5, 5);
        t.enter(0, main);
        t.enter(main + 4, init);
        // A wait in the initializer (connect with poll): also a multiplexer call.
        t.lib(init + 4, LibFn::Poll, o(-1, 1, 0));
        t.exit(init);
        t.enter(main + 8, run);
        for _ in 0..10 {
            t.lib(run + 4, LibFn::Select, o(-1, 1, 0));
            t.enter(run + 8, handle);
            t.lib(handle + 4, LibFn::Recv, o(4, 8, 8));
            t.exit(handle);
        }
        let p = t.finish();
        let scan = scan_process(&p).unwrap();
        let l = scan.threads[0].event_loop.unwrap();
        assert_eq!(l.depth, 2);
        assert_eq!(l.mux_calls, 10);
        let u = split_process(&p, &scan, &TreeOptions::default()).unwrap();
        // Initializer (with its poll), then loop/handler pairs; the trace ends in the loop.
        assert_eq!(u.units[0].info.kind, UnitKind::Initializer);
        assert_eq!(
            u.units
                .iter()
                .filter(|u| u.info.kind == UnitKind::Handler)
                .count(),
            10
        );
        assert!(u.units.iter().all(|u| u.info.kind != UnitKind::Finalizer));
    }

    #[test]
    fn thread_without_a_loop_is_one_initializer() {
        let mut t = TraceBuilder::new("h", 5, 5);
        t.lib(0x10, LibFn::Socket, o(-1, 3, 0));
        t.lib(0x20, LibFn::Connect, o(3, 0, 0));
        t.lib(0x30, LibFn::Send, o(3, 10, 10));
        t.lib(0x40, LibFn::Recv, o(3, 10, 10));
        let u = process_units(&t.finish(), &TreeOptions::default()).unwrap();
        assert_eq!(kinds(&u), vec![(UnitKind::Initializer, None)]);
        assert_eq!(u.units[0].tree.nodes.len(), 4);
    }

    /// Helper processes with no setup call at all (a shell wrapper, `basename`) used to share
    /// the empty signature, so their models were merged and each was scored against the
    /// other's calls ("`write` expected", "`fork` never seen here"). The program is part of the
    /// signature: they form one group per program and score 0 against their own runs.
    #[test]
    fn programs_without_setup_calls_group_per_program() {
        use bufpool::format::ProcRecord;
        let helper = |pid: u32, exe: &str, calls: &[(u64, LibFn)]| {
            let mut t = TraceBuilder::new("h", pid, pid);
            t.meta(&Meta::Proc(ProcRecord {
                reason: ProcReason::Start,
                pid,
                ppid: 1,
                start_ticks: 0,
                exe: exe.as_bytes().to_vec(),
                argv: vec![exe.as_bytes().to_vec()],
            }));
            for &(site, f) in calls {
                t.lib(site, f, o(1, 0, 0));
            }
            t.finish()
        };
        let run = |base: u32| crate::decode::TraceSet {
            processes: vec![
                helper(
                    base,
                    "/bin/bash",
                    &[(0x10, LibFn::Fork), (0x20, LibFn::Close)],
                ),
                helper(base + 1, "/usr/bin/basename", &[(0x30, LibFn::Write)]),
            ],
        };
        let opts = crate::Options::default();
        let learned = crate::learn(&[run(100), run(200)], &opts).unwrap();
        assert_eq!(learned.model.groups.len(), 2, "one group per program");
        let rep = crate::rank(&learned.model, &run(300), &opts).unwrap();
        assert_eq!(rep.units.len(), 2);
        for u in &rep.units {
            assert_eq!(u.score, 0.0, "{} {:?}", u.info.id, u.why);
        }
        // A forked child that did not exec runs its parent's program.
        assert_eq!(
            program_key("/usr/bin/basename"),
            program_key("/bin/basename")
        );
        assert_ne!(program_key("/bin/bash"), program_key("/usr/bin/basename"));
    }

    /// A child `pid` of `parent` (pid `ppid`, host "h"), forked now without exec: its
    /// builder, with the fork's process record written, and the fork's TSC.
    fn forked(parent: &TraceBuilder, ppid: u32, pid: u32) -> (TraceBuilder, u64) {
        use bufpool::format::ProcRecord;
        let at = parent.now();
        let mut child = TraceBuilder::new("h", pid, pid);
        child.wait(at - child.now());
        child.meta(&Meta::Proc(ProcRecord {
            reason: ProcReason::Fork,
            pid,
            ppid,
            start_ticks: 0,
            exe: Vec::new(),
            argv: Vec::new(),
        }));
        (child, at)
    }

    /// A parent (pid 10) that accepts a connection on descriptor 4, and a child forked
    /// after it (no exec, no code table of its own) that polls and reads descriptor 4 three
    /// times in `d.handle`: it knows 4 as a socket, and its code, only through its parent.
    /// Also the fork's TSC.
    pub(crate) fn parent_and_forked_child() -> (Vec<ProcessTrace>, u64) {
        use bufpool::format::{py_site, CodeKind, CodeRecord};
        let code = |index, name: &str| {
            Meta::Code(CodeRecord {
                index,
                kind: CodeKind::PyCode,
                first_line: 1,
                name: name.as_bytes().to_vec(),
                file: b"/srv/d.py".to_vec(),
            })
        };
        let mut parent = TraceBuilder::new("h", 10, 10);
        parent.meta(&code(1, "d.serve"));
        parent.meta(&code(2, "d.handle"));
        parent.lib(0x10, LibFn::Socket, o(-1, 3, 0));
        parent.lib(0x20, LibFn::Listen, o(3, 0, 0));
        parent.lib(0x30, LibFn::Accept, o(3, 4, 0));
        parent.wait(1000);
        let (mut child, fork_at) = forked(&parent, 10, 11);
        child.py_call(0, 1);
        for _ in 0..3 {
            child.lib(0x40, LibFn::Poll, o(-1, 1, 0));
            child.py_call(py_site(1, 4), 2);
            let mut r = o(4, 10, 10);
            r.is_socket = None;
            child.lib(0x50, LibFn::Read, r);
            child.py_return(2);
        }
        (vec![parent.finish(), child.finish()], fork_at)
    }

    /// A forked child records neither the code table nor the accept of the descriptor it
    /// serves: it inherits both from its parent.
    #[test]
    fn forked_child_inherits_code_table_and_descriptors() {
        let (procs, fork_at) = parent_and_forked_child();
        let refs: Vec<&ProcessTrace> = procs.iter().collect();
        let mut scans: Vec<ProcessScan> = refs.iter().map(|p| scan_process(p).unwrap()).collect();
        assert_eq!(scans[1].forked_from, Some((10, fork_at)));
        inherit(&refs, &mut scans);
        let u = split_process(&procs[1], &scans[1], &TreeOptions::default()).unwrap();
        let handlers: Vec<&Unit> = u
            .units
            .iter()
            .filter(|u| u.info.kind == UnitKind::Handler)
            .collect();
        // read(4) is known as a socket only through the parent's accept.
        assert_eq!(handlers.len(), 3);
        assert_eq!(handlers[0].info.conn.0.len(), 2, "listen + accept stacks");
        let names: Vec<String> = u
            .names
            .names
            .values()
            .filter_map(|n| match n {
                NameSrc::Text(t) => Some(t.clone()),
                NameSrc::C(_) => None,
            })
            .collect();
        assert!(names.iter().any(|n| n.starts_with("d.handle")), "{names:?}");
    }

    /// A pre-forking server: the parent listens, its forked workers (no exec, so no map of
    /// their own) accept. A worker's accept is keyed through the map it inherited, so its
    /// connection is the same in a run where ASLR moved the program.
    #[test]
    fn a_forked_workers_connections_keep_their_keys_when_aslr_moves_the_program() {
        use bufpool::format::MapRecord;
        let conn_of_worker = |base: u64| {
            let mut parent = TraceBuilder::new("h", 10, 10);
            parent.meta(&Meta::Map(MapRecord {
                start: base,
                end: base + 0x10000,
                offset: 0,
                prot: 5,
                path: b"/nonexistent/sbin/prefork".to_vec(),
            }));
            parent.lib(base + 0x10, LibFn::Socket, o(-1, 3, 0));
            parent.lib(base + 0x20, LibFn::Bind, o(3, 0, 0));
            parent.lib(base + 0x30, LibFn::Listen, o(3, 0, 0));
            parent.wait(1000);
            let (mut worker, _) = forked(&parent, 10, 11);
            worker.lib(base + 0x40, LibFn::Accept, o(3, 4, 0));
            for _ in 0..3 {
                worker.lib(base + 0x50, LibFn::Poll, o(-1, 1, 0));
                worker.lib(base + 0x60, LibFn::Recv, o(4, 10, 10));
            }
            let procs = [parent.finish(), worker.finish()];
            let refs: Vec<&ProcessTrace> = procs.iter().collect();
            let mut scans: Vec<ProcessScan> =
                refs.iter().map(|p| scan_process(p).unwrap()).collect();
            inherit(&refs, &mut scans);
            let u = split_process(&procs[1], &scans[1], &TreeOptions::default()).unwrap();
            let h: Vec<&Unit> = u
                .units
                .iter()
                .filter(|u| u.info.kind == UnitKind::Handler)
                .collect();
            assert!(!h.is_empty());
            assert_eq!(
                h[0].info.conn.0.len(),
                3,
                "bind + listen + the worker's accept"
            );
            h[0].info.conn.clone()
        };
        assert_eq!(
            conn_of_worker(0x5555_0000_0000),
            conn_of_worker(0x5602_1234_0000)
        );
    }

    /// A subshell (forked, no exec) is not grouped with the script it was forked from, nor
    /// with a child that exec'd the same program.
    #[test]
    fn processes_forked_without_exec_are_marked_in_their_signature() {
        use bufpool::format::ProcRecord;
        let proc_rec = |t: &mut TraceBuilder, reason, pid, ppid| {
            t.meta(&Meta::Proc(ProcRecord {
                reason,
                pid,
                ppid,
                start_ticks: 0,
                exe: b"/usr/bin/bash".to_vec(),
                argv: Vec::new(),
            }))
        };
        let mut script = TraceBuilder::new("h", 20, 20);
        proc_rec(&mut script, ProcReason::Start, 20, 1);
        script.lib(0x10, LibFn::Fork, o(-1, 21, 0));
        let mut subshell = TraceBuilder::new("h", 21, 21);
        proc_rec(&mut subshell, ProcReason::Fork, 21, 20);
        subshell.lib_enter(0x20, LibFn::Exit, LibOpts::default());
        let mut execd = TraceBuilder::new("h", 22, 22);
        proc_rec(&mut execd, ProcReason::Fork, 22, 20);
        proc_rec(&mut execd, ProcReason::Exec, 22, 20);
        execd.lib_enter(0x20, LibFn::Exit, LibOpts::default());
        let procs = [script.finish(), subshell.finish(), execd.finish()];
        let refs: Vec<&ProcessTrace> = procs.iter().collect();
        let mut scans: Vec<ProcessScan> = refs.iter().map(|p| scan_process(p).unwrap()).collect();
        inherit(&refs, &mut scans);
        let sig = |i: usize| {
            split_process(&procs[i], &scans[i], &TreeOptions::default())
                .unwrap()
                .signature
        };
        let (script, subshell, execd) = (sig(0), sig(1), sig(2));
        assert!(subshell.0.contains(&FORKED_KEY));
        assert!(!script.0.contains(&FORKED_KEY) && !execd.0.contains(&FORKED_KEY));
        assert_ne!(subshell, script);
        assert_eq!(script, execd, "the same program, started afresh");
    }

    /// A daemon killed in its event loop (a hang ended by a timeout): its last unit was cut
    /// by the end of the trace, not ended; one that exits ends with a finalizer.
    #[test]
    fn the_last_unit_of_a_thread_killed_in_its_loop_is_cut() {
        let run = |exits: bool| {
            let mut t = TraceBuilder::new("h", 1, 1);
            t.lib(0x10, LibFn::Socket, o(-1, 3, 0));
            t.lib(0x20, LibFn::Listen, o(3, 0, 0));
            t.lib(0x30, LibFn::Accept, o(3, 4, 0));
            for _ in 0..4 {
                t.lib(0x40, LibFn::Poll, o(-1, 1, 0));
                t.lib(0x50, LibFn::Recv, o(4, 8, 8));
            }
            if exits {
                t.lib_enter(0x60, LibFn::Exit, LibOpts::default());
            } else {
                t.lib_enter(0x40, LibFn::Poll, o(-1, 0, 0));
            }
            process_units(&t.finish(), &TreeOptions::default()).unwrap()
        };
        let killed = run(false);
        let last = killed.units.last().unwrap();
        assert_eq!(last.info.kind, UnitKind::Loop);
        assert!(last.info.cut);
        assert!(killed.units[..killed.units.len() - 1]
            .iter()
            .all(|u| !u.info.cut));
        let exited = run(true);
        assert_eq!(exited.units.last().unwrap().info.kind, UnitKind::Finalizer);
        assert!(exited.units.iter().all(|u| !u.info.cut));
    }
}
