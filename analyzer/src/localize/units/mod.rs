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
//!    calls nest (`main` → `run` → …); the innermost one is taken: the deepest frame whose
//!    busiest activation holds at least half as many multiplexer calls as the busiest
//!    activation of any frame. Activations are compared, not totals: a function called once
//!    per message that waits before each receive (a socket with a timeout in CPython polls
//!    before every `recv`) holds two waits per call, the loop that calls it all of them in
//!    one activation. With no function entries at all (an `LD_PRELOAD`-only trace) the only
//!    frame is the thread itself.
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

mod inherit;
mod keys;
mod memo;
mod pairing;
mod scan;
mod split;
#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
pub(crate) mod tests_groups;
mod view;

pub use inherit::{inherit, inherits};
pub use keys::frame_key;
pub use scan::scan_process;
pub use split::{process_units, split_process, split_process_each};
pub use view::{unit_id, ClassKey, ConnRow, UnitHead, UnitView};

use keys::setup_stack_key;
use scan::RawSetup;

use crate::connections::{self, ConnKey, FdTable};
use crate::decode::DecodeStats;
use crate::hash::IdMap;
use crate::symbolize::{CSym, ElfResolver, ProcessSymbols};
use crate::trees::{CallTree, ROOT};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
///
/// Most servers wait for work in a multiplexer (`epoll_wait`, `poll`, `select`) and then
/// receive. A thread that never waits in one but receives again and again in one activation
/// of a frame — a UDP receiver blocked in `recvfrom` (Kamailio's `udp_rcv_loop`), a
/// thread per connection blocked in `recv`, a blocking `accept` loop — has a *receive
/// loop* ([`LoopSpec::by_receive`]): there the blocking receive is the wait, and each
/// message it returns begins a handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopSpec {
    /// Number of frames on the stack down to and including the loop frame (0: the thread).
    pub depth: usize,
    /// Raw path hash of the loop frame.
    pub path: u64,
    /// Multiplexer calls inside its activations (receives, for a receive loop).
    pub mux_calls: u64,
    /// Multiplexer calls inside its busiest activation (receives, for a receive loop).
    pub busiest: u64,
    /// A receive loop: no frame of the thread waits in a multiplexer twice, and this one
    /// receives at least twice in one activation.
    pub by_receive: bool,
}

/// What pass 1 learned about a thread.
#[derive(Clone, Debug)]
pub struct ThreadScan {
    /// Thread id.
    pub tid: u32,
    /// The event loop, if any.
    pub event_loop: Option<LoopSpec>,
    /// The receive loop the thread has if what it reads are sockets the process's other
    /// threads made, to be judged with the process's descriptor history.
    pub deferred: Option<DeferredLoop>,
    /// Socket receives and accepts (an upper bound of its handler units).
    pub receives: u64,
}

/// A receive loop known only once the process's descriptor history is: a thread per
/// connection reads (`read`, not `recv`) a connection its acceptor thread accepted, so
/// pass 1, reading one thread at a time, cannot tell its reads for socket receives.
#[derive(Clone, Debug)]
pub struct DeferredLoop {
    /// The loop, by the thread's possible receives.
    pub spec: LoopSpec,
    /// Conversations the thread surely answered and opened.
    pub answered: u64,
    /// See `answered`.
    pub asked: u64,
    /// First moves on descriptors of unknown kind: `(fd, tsc, receive)`.
    pub others: Vec<(i32, u64, bool)>,
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
    /// The command's arguments after `argv[0]` (from the same record as `exe`): what
    /// tells apart the roles one program is started in ([`command_similarity`]).
    pub command: Vec<String>,
    /// Counts.
    pub stats: DecodeStats,
    /// `(parent pid, TSC)` of the fork that made this process, if it was forked (and did
    /// not exec since).
    pub forked_from: Option<(u32, u64)>,
    /// The parent's descriptors at the fork (see [`inherit()`]).
    pub inherited_fds: Option<(FdTable, u64)>,
    /// The descriptor-creating calls `fds` was built from, kept to build it again once a
    /// forked child has its parent's symbols (see [`inherit()`]).
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

    /// Gives each thread without an event loop the receive loop it deferred, if some of
    /// the descriptors it answered on first were sockets then and it answers at least as
    /// many conversations as it opens — the rule pass 1 applies to the sockets a thread
    /// made itself.
    fn resolve_loops(&mut self) {
        let resolved: Vec<Option<LoopSpec>> = self
            .threads
            .iter()
            .map(|t| {
                let d = t.deferred.as_ref().filter(|_| t.event_loop.is_none())?;
                let (mut answered, mut asked, mut handed) = (d.answered, d.asked, 0);
                for &(fd, tsc, receive) in &d.others {
                    if self.fd_at(fd, tsc).is_some() {
                        *if receive { &mut answered } else { &mut asked } += 1;
                        handed += u64::from(receive);
                    }
                }
                // The loop stands on receives from sockets it was handed: without one, its
                // possible receives were reads of something else.
                (handed > 0 && answered >= asked).then_some(d.spec)
            })
            .collect();
        for (t, r) in self.threads.iter_mut().zip(resolved) {
            if r.is_some() {
                t.event_loop = r;
            }
        }
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
    /// Began before the trace's window: its beginning was rotated away (see
    /// [`UnitHead::cut_at_start`]); not scored.
    #[serde(default)]
    pub cut_at_start: bool,
}

/// One execution unit.
#[derive(Clone, Debug)]
pub struct Unit {
    /// Where and when.
    pub info: UnitInfo,
    /// Its call tree.
    pub tree: CallTree,
}

impl Unit {
    /// The unit's class (which model it is compared with).
    pub fn class(&self) -> UnitClass {
        UnitClass {
            kind: self.info.kind,
            main_thread: self.info.main_thread,
            conn: if self.info.kind == UnitKind::Handler {
                self.info.conn.clone()
            } else {
                Default::default()
            },
        }
    }
}

/// Which model a unit is compared with: its kind, thread and (for handlers) connection.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UnitClass {
    /// Unit kind.
    pub kind: UnitKind,
    /// Main thread (true) or another thread of the process.
    pub main_thread: bool,
    /// Connection of handler units (empty for the other kinds).
    pub conn: ConnKey,
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

/// How alike two commands' arguments are (after `argv[0]`), as `[leading, equal, of]`:
/// the arguments both begin with (a role comes before its parameters: `store --name 1`,
/// `client --name 1`), the arguments equal at the same positions, and the longer
/// command's length; compared as the fractions `leading / of`, then `equal / of`
/// ([`command_order`]). A run-specific argument (a scratch directory) costs one position.
pub fn command_similarity(a: &[String], b: &[String]) -> [usize; 3] {
    let leading = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let equal = a.iter().zip(b).filter(|(x, y)| x == y).count();
    [leading, equal, a.len().max(b.len()).max(1)]
}

/// Orders two [`command_similarity`] results, exactly (as fractions of their lengths).
pub fn command_order(a: [usize; 3], b: [usize; 3]) -> std::cmp::Ordering {
    (a[0] * b[2])
        .cmp(&(b[0] * a[2]))
        .then((a[1] * b[2]).cmp(&(b[1] * a[2])))
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
    /// The command's arguments after `argv[0]` ([`ProcessScan::command`]).
    pub command: Vec<String>,
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
