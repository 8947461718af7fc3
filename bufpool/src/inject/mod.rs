//! Fault injection: the rule language, and the allocation-free matcher `libtrace.so` runs
//! on every wrapped call.
//!
//! A *rule* (a SPEC) says which calls to disturb and how:
//! `FUNC[|FUNC…]:EFFECT[,KEY=VALUE…]`, e.g. `recv:short=3,nth=17`,
//! `read:errno=ECONNRESET,peer-port=7000,after=600,count=1`,
//! `send|write:delay=20ms,prob=0.05,seed=7`. The full grammar, every effect and every
//! key are in [`spec`]; the semantics of a match are below.
//!
//! # Using it from the command line side (`culprit record --inject SPEC`)
//!
//! Validate every SPEC before starting the program, then pass them all through one
//! environment variable, [`INJECT_ENV`]. [`HELP`] documents the grammar for `--help`.
//!
//! ```
//! use bufpool::inject::{parse_spec, encode_env, INJECT_ENV};
//! let specs = ["recv:short=3,nth=17", "send|write:delay=20ms,prob=0.05,seed=7"];
//! for s in &specs {
//!     // On error: `e` names the column and what was expected; `e.caret(s)` draws it.
//!     parse_spec(s).map_err(|e| format!("--inject {s:?}: {e}\n{}", e.caret(s))).unwrap();
//! }
//! let value = encode_env(&specs).unwrap();            // rules separated by '\n'
//! # let mut cmd = std::process::Command::new("true");
//! cmd.env(INJECT_ENV, &value);
//!
//! let err = parse_spec("recv:shrt=3").unwrap_err();
//! assert_eq!(err.column, 6);
//! assert_eq!(err.to_string(), "column 6: expected an effect: short=N, errno=NAME, eof, \
//!            corrupt=N, delay=DURATION, close or kill=SIGNAL, found `shrt`");
//! ```
//!
//! Rules are separated by newlines ([`RULE_SEPARATOR`]) because a newline is the one
//! character a rule can never contain; empty lines are ignored. A rule's *index* (0-based,
//! in the order given) identifies it in the trace: the `inject` option of the affected
//! `LibExit` entry and the `rule` field of [`crate::format::InjectRecord`].
//!
//! # Using it inside the traced process (`libtrace.so`)
//!
//! At load time (allocation is fine there): [`RuleSet::from_env_value`], then
//! [`RuleSet::bind`] with [`ProcessInfo::current`] — this evaluates the process filters
//! (`pid=`, `exe=`, `argv=`) once. In a forked child call [`RuleSet::on_fork`] (per-process
//! counters restart, `pid=` is re-evaluated). On each wrapped call:
//!
//! ```no_run
//! # use bufpool::inject::{RuleSet, FdPorts, Effect};
//! # use bufpool::format::LibFn;
//! # let rules: RuleSet = RuleSet::from_env_value("recv:short=3").unwrap();
//! # let fd = 3;
//! if rules.wants(LibFn::Recv) {                         // one bitmap load
//!     if let Some(hit) = rules.check(LibFn::Recv, &mut FdPorts::new(fd)) {
//!         match hit.effect { Effect::Short(n) => { /* call recv with min(n, len) */ }
//!                            _ => { /* … */ } }
//!         // record hit.rule / hit.spec with encode_inject(), and set the LibExit
//!         // entry's `inject` option to hit.rule.
//!     }
//! }
//! ```
//!
//! [`RuleSet::check`] never allocates, locks or blocks, and makes a `getsockname` /
//! `getpeername` system call only when a rule for that function has a port key
//! ([`FdPorts`] asks lazily and caches).
//!
//! # Semantics of a match
//!
//! For each rule, in order, a call *matches* when its function is one of the rule's,
//! the process passes the process filters, and the socket passes the port filters
//! (see *Ports* below), and, with `at=T` (UNIX seconds)
//! or `after-s=S` (seconds since the process started: the library's constructor, or the
//! fork for a forked child), the call is made at or after that `CLOCK_REALTIME` instant
//! (both given: the later one; once a call has reached it the rule stays open in that
//! process). Every matching call increments the rule's per-process counter `c`
//! (1, 2, 3, …). The call is *eligible* when `c == nth` (if given), `c > after` (if given),
//! and, if `prob=P` is given, the `c`-th output of a splitmix64 stream seeded with `seed`
//! is below `P · 2^64`. An eligible call is injected if fewer than `count` injections were
//! made by this rule in this process (`count=0`, the default, means no limit). One effect
//! per call: the first rule that injects wins; later rules still count the call but do
//! not use up their `count`.
//!
//! Hence determinism: without a time key, the decision for a call depends only on the
//! SPEC, the seed and how many matching calls the process made before it — the same program doing the same
//! calls gets the same injections, run after run. (Threads of one process share the
//! counters; with several threads racing for the same function, "the n-th call" is the
//! n-th in the order the counter was reached.)
//!
//! "Per process" means per process image: a forked child starts its counters at zero
//! (`libtrace.so` calls [`RuleSet::on_fork`] from a `pthread_atfork` child handler; a
//! child made with a raw `clone`, or a `vfork` child before it execs, shares the parent's
//! counts), and so does a program after `exec` (the library is loaded afresh).
//!
//! # Ports
//!
//! `local-port=P` and `peer-port=P` concern the socket the call is made on; a socket
//! without a port (UNIX, not a socket, `peer-port` on a socket that was never connected)
//! never passes them. The caller's [`PortSource`] gives the ports: [`FdPorts`] asks the
//! kernel at the time of the call, while `libtrace.so` also remembers the ports a TCP
//! connection *had* — after `connect` (a non-blocking one once it completes), `accept`,
//! or the first lookup that succeeds — so that a call made after the connection was
//! closed in both directions or reset (when `getpeername` fails with `ENOTCONN`) still
//! matches: the receive of the last data and the one that meets end of stream included.
//! It forgets them when the descriptor is closed or replaced. A datagram socket's peer
//! port is the one it is `connect`ed to, never the address a `sendto`/`recvfrom` names:
//! an unconnected UDP socket never passes `peer-port`, and `local-port` is its bound port.
//!
//! # Effects
//!
//! See [`Effect`] for exactly what each does to the call and which functions it applies to
//! (`short`, `close` to receives and sends; `eof`, `corrupt` to receives; `errno` and
//! `delay` also to `socket`, `bind`, `listen`, `accept`, `accept4`, `connect` and the
//! event waits `select`,
//! `pselect`, `poll`, `ppoll`, `epoll_wait`, `epoll_pwait`; `delay` and `kill` also to
//! `close`; `kill` to all of these).
//!
//! A `py:` rule (`py:MODULE:QUALNAME:raise=EXCEPTION,…`) names a Python function instead
//! of libc calls; its funcs are empty, so `libtrace.so` never matches it. The Python shim
//! reads the same [`INJECT_ENV`] value, counts the function's calls per process with the
//! same `nth`/`after`/`count`/`prob`/`seed`/`at`/`after-s` semantics (`after-s` from the
//! shim's start, or the fork), raises the exception from eligible
//! calls, and records each such injection in the trace with `func` = [`PY_FUNC_ID`].

mod errno;
mod process;
mod record;
pub mod spec;

pub use errno::{errno_from_name, errno_name, ERRNO_NAMES};
pub use process::{glob_match, ProcessInfo};
pub use record::{corrupt_bytes, encode_inject, sleep_ns, InjectEvent};
pub use spec::{
    parse_spec, Effect, FnSet, PyTarget, Spec, SpecError, KEYS, RECEIVE_FNS, SEND_FNS, SIGNAL_NAMES,
};

/// The `func` of an [`crate::format::InjectRecord`] written for a `py:` rule (no libc
/// function: the Python shim raised an exception from a Python function).
pub const PY_FUNC_ID: u16 = 0xffff;

/// The name of an injection record's `func`: the libc name, `python` for a `py:` rule,
/// `fn#N` for an id this build does not know.
pub fn record_func_name(id: u16) -> String {
    if id == PY_FUNC_ID {
        return "python".to_string();
    }
    LibFn::from_id(id as u64).map_or_else(|| format!("fn#{id}"), |f| f.name().to_string())
}

use crate::format::LibFn;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// The SPEC grammar for a command's `--help` (plain text, 80 columns).
pub const HELP: &str = "\
Fault injection: --inject FUNC[|FUNC...]:EFFECT[,KEY=VALUE...] (repeatable)

FUNC    recv recvfrom recvmsg read readv send sendto sendmsg write writev
        (read, write, readv, writev on sockets only), socket bind listen accept
        accept4 connect select pselect poll ppoll epoll_wait epoll_pwait, close
        (delay only)
EFFECT  short=N        move at most N bytes (receives and sends; unread bytes
                       stay in the socket, unsent ones are not sent)
        errno=NAME     fail with -1 and that errno, without making the call
                       (ECONNRESET, EAGAIN, EINTR, ECONNREFUSED, EPIPE,
                       ETIMEDOUT, ... or a number)
        eof            return 0 (end of stream) without consuming (receives)
        corrupt=N      invert (XOR 0xff) the first N bytes returned (receives)
        delay=DURATION sleep, then make the call (e.g. 500us, 20ms, 1.5s)
        close          shut the connection down for real; the call fails with
                       ECONNRESET (receives and sends)
        kill=SIGNAL    the tracer sends SIGNAL to its own process at the call
                       (SIGKILL: dies there; SIGSTOP: hangs there, no error)
Python  py:MODULE:QUALNAME:raise=EXCEPTION[,KEY=VALUE...]  the Python
        function (Class.method ok) raises EXCEPTION (builtin name or
        module.Name) instead of running, e.g.
        py:pkg.module:Class.method:raise=TimeoutError,nth=5
KEY     pid=PID        only in this process
        exe=GLOB       only if the executable's base name (or full path, if
                       GLOB has a '/') matches: exe=python3*
        argv=TEXT      only if the command line contains TEXT ('*', '?' ok)
        local-port=P   only on sockets with this local port
        peer-port=P    only on sockets connected to this peer port (TCP: also
                       after the connection closed or was reset; UDP: the
                       connect()ed peer, never a sendto/recvfrom address)
        nth=N          only the N-th matching call of each process (1-based)
        after=N        only matching calls after the N-th
        count=N        at most N injections per process (0 = no limit)
        prob=P         each eligible call with probability P (0..1) ...
        seed=S         ... decided by a splitmix64 stream seeded with S
        at=T           only calls from the UNIX time T (seconds, CLOCK_REALTIME,
                       fraction ok) on; earlier calls are not counted
        after-s=S      only calls S seconds or more after the process started
                       (a forked child: after its fork); earlier not counted
Same SPEC, seed and program: same calls injected (time keys aside). Examples:
  recv:short=3,nth=17
  read:errno=ECONNRESET,peer-port=7000,after=600,count=1
  send|write:delay=20ms,prob=0.05,seed=7
  recv|read:delay=5ms,at=1795862400,local-port=5432
";

/// The environment variable that carries the rules into traced processes.
pub const INJECT_ENV: &str = "CULPRIT_INJECT";

/// Separates rules in the value of [`INJECT_ENV`].
pub const RULE_SEPARATOR: char = '\n';

/// Validates every SPEC and joins them into one [`INJECT_ENV`] value. The error of the
/// first bad SPEC has `line` set to its 1-based position.
pub fn encode_env<S: AsRef<str>>(specs: &[S]) -> Result<String, SpecError> {
    let mut out = String::new();
    for (i, s) in specs.iter().enumerate() {
        let s = s.as_ref();
        parse_spec(s).map_err(|e| SpecError {
            line: Some(i + 1),
            ..e
        })?;
        if i > 0 {
            out.push(RULE_SEPARATOR);
        }
        out.push_str(s);
    }
    Ok(out)
}

/// Parses an [`INJECT_ENV`] value: one rule per line, empty lines ignored. Errors carry the
/// 1-based line.
pub fn parse_rules(value: &str) -> Result<Vec<Spec>, SpecError> {
    value
        .split(RULE_SEPARATOR)
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| {
            parse_spec(l).map_err(|e| SpecError {
                line: Some(i + 1),
                ..e
            })
        })
        .collect()
}

impl SpecError {
    /// Two lines for a terminal: the rule, and a caret under the error's column.
    pub fn caret(&self, rule: &str) -> String {
        format!("  {rule}\n  {}^", " ".repeat(self.column.saturating_sub(1)))
    }
}

/// Where the port filters get a call's ports from. Asked only when a rule that could
/// inject into this call has a port key; an implementation should cache its answers, and
/// may answer with the ports a closed connection had (see the module's *Ports*).
pub trait PortSource {
    /// The local port of the call's socket (`None`: no port — UNIX socket, not a socket).
    fn local_port(&mut self) -> Option<u16>;
    /// The peer port of the call's socket (`None`: not connected or no port).
    fn peer_port(&mut self) -> Option<u16>;
}

/// For calls without a socket: every port filter fails.
pub struct NoPorts;

impl PortSource for NoPorts {
    fn local_port(&mut self) -> Option<u16> {
        None
    }
    fn peer_port(&mut self) -> Option<u16> {
        None
    }
}

/// Known ports (for tests, or when the caller already has them).
#[derive(Clone, Copy, Debug, Default)]
pub struct KnownPorts {
    /// Local port.
    pub local: Option<u16>,
    /// Peer port.
    pub peer: Option<u16>,
}

impl PortSource for KnownPorts {
    fn local_port(&mut self) -> Option<u16> {
        self.local
    }
    fn peer_port(&mut self) -> Option<u16> {
        self.peer
    }
}

/// Ports of a descriptor, asked of the kernel on first use with raw `getsockname` /
/// `getpeername` system calls (errno preserved, no allocation) and cached.
pub struct FdPorts {
    fd: i32,
    local: Option<Option<u16>>,
    peer: Option<Option<u16>>,
}

impl FdPorts {
    /// Ports of `fd`, not yet asked.
    pub fn new(fd: i32) -> FdPorts {
        FdPorts {
            fd,
            local: None,
            peer: None,
        }
    }
}

/// The local (`peer == false`) or peer port of socket `fd`, asked of the kernel with a raw
/// `getsockname` / `getpeername` system call (errno preserved, no allocation): `Ok(None)`
/// for a socket without a port (UNIX), `Err(errno)` when the call fails (`ENOTCONN`: not
/// connected, or no longer; `ENOTSOCK`, `EBADF`).
pub fn socket_port(fd: i32, peer: bool) -> Result<Option<u16>, i32> {
    let _e = crate::sys::ErrnoGuard::new();
    let nr = if peer {
        libc::SYS_getpeername
    } else {
        libc::SYS_getsockname
    };
    // SAFETY: sockaddr_storage is plain data; all zeroes is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `ss` and `len` are valid and writable, `len` gives the size of `ss`;
    // getsockname/getpeername write at most `len` bytes and have no other effect.
    let r = unsafe {
        libc::syscall(
            nr,
            fd,
            &mut ss as *mut libc::sockaddr_storage,
            &mut len as *mut libc::socklen_t,
        )
    };
    if r != 0 {
        // SAFETY: reads this thread's errno (set by the failed call; `_e` restores the
        // program's value when it drops).
        return Err(unsafe { *libc::__errno_location() });
    }
    match ss.ss_family as i32 {
        libc::AF_INET | libc::AF_INET6 => {
            // SAFETY: for both families the port is the big-endian u16 at offset 2
            // (sin_port / sin6_port), inside the storage.
            let raw = unsafe { *(((&ss) as *const _ as *const u8).add(2) as *const [u8; 2]) };
            Ok(Some(u16::from_be_bytes(raw)))
        }
        _ => Ok(None),
    }
}

impl PortSource for FdPorts {
    fn local_port(&mut self) -> Option<u16> {
        let fd = self.fd;
        *self
            .local
            .get_or_insert_with(|| socket_port(fd, false).ok().flatten())
    }
    fn peer_port(&mut self) -> Option<u16> {
        let fd = self.fd;
        *self
            .peer
            .get_or_insert_with(|| socket_port(fd, true).ok().flatten())
    }
}

/// A rule with its per-process state: fixed size, updated with atomics only.
#[derive(Debug)]
pub struct Rule {
    spec: Spec,
    index: u32,
    funcs: FnSet,
    /// exe= and argv= matched (evaluated once per process image by [`RuleSet::bind`]).
    image_match: AtomicBool,
    /// All process filters pass in this process (image_match and pid=).
    applies: AtomicBool,
    /// Matching calls seen in this process (the `c` of the module docs).
    seen: AtomicU64,
    /// Injections made in this process.
    fired: AtomicU64,
    /// `at=` / `after-s=`: the `CLOCK_REALTIME` instant (ns) from which calls match; 0
    /// when the rule has no time key or the instant has passed (then no clock is read).
    from_ns: AtomicU64,
}

impl Rule {
    fn new(spec: Spec, index: u32) -> Rule {
        let mut funcs = FnSet::EMPTY;
        for &f in &spec.funcs {
            funcs.insert(f);
        }
        Rule {
            spec,
            index,
            funcs,
            image_match: AtomicBool::new(false),
            applies: AtomicBool::new(false),
            seen: AtomicU64::new(0),
            fired: AtomicU64::new(0),
            from_ns: AtomicU64::new(0),
        }
    }

    /// The instant from which calls match in a process started at `start_ns` (0: always).
    fn start_of(&self, start_ns: u64) -> u64 {
        let at = self.spec.at_ns.unwrap_or(0);
        let after = self
            .spec
            .after_s_ns
            .map_or(0, |d| start_ns.saturating_add(d));
        at.max(after)
    }

    /// Whether the time keys let this call match. Reads the clock (through `now`, once
    /// per [`RuleSet::check`]) only while the instant is still ahead; once a call reaches
    /// it, the gate stays open in this process (a clock stepped back does not close it).
    #[inline]
    fn time_passes(&self, now: &mut impl FnMut() -> u64) -> bool {
        // Relaxed: a standalone flag; two threads opening it at once store the same 0.
        let from = self.from_ns.load(Relaxed);
        if from == 0 {
            return true;
        }
        if now() < from {
            return false;
        }
        self.from_ns.store(0, Relaxed);
        true
    }

    /// The parsed SPEC.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// The rule's index (0-based, in the order given).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Whether the process filters pass in this process.
    pub fn applies(&self) -> bool {
        self.applies.load(Relaxed)
    }

    /// Matching calls seen so far in this process.
    pub fn seen(&self) -> u64 {
        self.seen.load(Relaxed)
    }

    /// Injections made so far in this process.
    pub fn fired(&self) -> u64 {
        self.fired.load(Relaxed)
    }

    fn ports_pass<P: PortSource + ?Sized>(&self, ports: &mut P) -> bool {
        if let Some(want) = self.spec.local_port {
            if ports.local_port() != Some(want) {
                return false;
            }
        }
        if let Some(want) = self.spec.peer_port {
            if ports.peer_port() != Some(want) {
                return false;
            }
        }
        true
    }

    /// Counts a matching call; its number when it is eligible (nth, after, prob).
    fn count_and_test(&self) -> Option<u64> {
        // Relaxed: the counter only has to hand out each number once; nothing else is
        // published through it.
        let c = self.seen.fetch_add(1, Relaxed).wrapping_add(1);
        if self.spec.nth.is_some_and(|n| c != n) || self.spec.after.is_some_and(|a| c <= a) {
            return None;
        }
        if let Some(t) = self.spec.prob_threshold {
            if t != u64::MAX && splitmix64_nth(self.spec.seed, c) >= t {
                return None;
            }
        }
        Some(c)
    }

    /// Takes one injection from the `count` budget.
    fn take_budget(&self) -> bool {
        if self.spec.count == 0 {
            self.fired.fetch_add(1, Relaxed);
            return true;
        }
        // Relaxed CAS loop: the budget is a standalone counter.
        self.fired
            .fetch_update(Relaxed, Relaxed, |f| (f < self.spec.count).then_some(f + 1))
            .is_ok()
    }
}

/// `CLOCK_REALTIME` in nanoseconds since the epoch (vDSO; errno preserved).
fn realtime_ns() -> u64 {
    let _e = crate::sys::ErrnoGuard::new();
    crate::sys::clock_ns(libc::CLOCK_REALTIME)
}

/// The `n`-th output (1-based) of splitmix64 seeded with `seed`.
#[inline]
pub fn splitmix64_nth(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A decision to inject into one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit<'a> {
    /// Index of the rule (0-based).
    pub rule: u32,
    /// What to do.
    pub effect: Effect,
    /// The rule's text, for the trace record.
    pub spec: &'a str,
    /// The call's number among the rule's matching calls in this process (1-based).
    pub call: u64,
}

/// Every rule in force in a process. Immutable after [`RuleSet::bind`] except for the
/// per-rule atomics, so it can live in a `static` and be shared by all threads.
#[derive(Debug)]
pub struct RuleSet {
    rules: Vec<Rule>,
    wanted: FnSet,
    /// Some rule has `local-port=` or `peer-port=`.
    port_keys: bool,
}

impl RuleSet {
    /// Rules from parsed SPECs (index = position). Nothing applies until [`RuleSet::bind`].
    pub fn new(specs: Vec<Spec>) -> RuleSet {
        let rules: Vec<Rule> = specs
            .into_iter()
            .enumerate()
            .map(|(i, s)| Rule::new(s, i as u32))
            .collect();
        let mut wanted = FnSet::EMPTY;
        for r in &rules {
            wanted.union_with(&r.funcs);
        }
        let port_keys = rules
            .iter()
            .any(|r| r.spec.local_port.is_some() || r.spec.peer_port.is_some());
        RuleSet {
            rules,
            wanted,
            port_keys,
        }
    }

    /// Whether some rule has a port key (`local-port=`, `peer-port=`): only then does a
    /// caller need to remember the ports of its connections (see [`PortSource`]).
    pub fn has_port_keys(&self) -> bool {
        self.port_keys
    }

    /// Parses an [`INJECT_ENV`] value (see [`parse_rules`]).
    pub fn from_env_value(value: &str) -> Result<RuleSet, SpecError> {
        Ok(RuleSet::new(parse_rules(value)?))
    }

    /// The rules, by index.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// True when there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Evaluates the process filters for this process and resets every counter.
    pub fn bind(&self, p: &ProcessInfo) {
        for r in &self.rules {
            let s = &r.spec;
            let image = s.exe.as_deref().is_none_or(|pat| p.exe_matches(pat))
                && s.argv.as_deref().is_none_or(|pat| p.argv_matches(pat));
            r.image_match.store(image, Relaxed);
        }
        self.on_fork(p.pid);
    }

    /// In a forked child (`pid` is the child's): counters restart at zero, `pid=` is
    /// evaluated again and `after-s=` counts from now; `exe=`/`argv=` keep their result
    /// (the image did not change).
    pub fn on_fork(&self, pid: u32) {
        self.restart(pid, realtime_ns());
    }

    /// [`RuleSet::on_fork`] for a process that started at `start_ns` (`CLOCK_REALTIME`).
    fn restart(&self, pid: u32, start_ns: u64) {
        for r in &self.rules {
            let ok = r.image_match.load(Relaxed) && r.spec.pid.is_none_or(|want| want == pid);
            r.seen.store(0, Relaxed);
            r.fired.store(0, Relaxed);
            r.from_ns.store(r.start_of(start_ns), Relaxed);
            r.applies.store(ok, Relaxed);
        }
    }

    /// Fast pre-check: could any rule concern `f`? One load from a bitmap.
    #[inline(always)]
    pub fn wants(&self, f: LibFn) -> bool {
        self.wanted.contains(f)
    }

    /// Counts the call against every rule it matches and returns the injection to make,
    /// if any. Never allocates or blocks; asks `ports` only for rules with port keys.
    /// A rule with `at=`/`after-s=` reads `CLOCK_REALTIME` (vDSO) until its instant passes.
    pub fn check<P: PortSource + ?Sized>(&self, f: LibFn, ports: &mut P) -> Option<Hit<'_>> {
        self.check_with_clock(f, ports, realtime_ns)
    }

    /// [`RuleSet::check`] with the clock given (read at most once, and only when a rule
    /// with a time key that has not yet opened concerns the call).
    fn check_with_clock<P: PortSource + ?Sized>(
        &self,
        f: LibFn,
        ports: &mut P,
        clock: impl Fn() -> u64,
    ) -> Option<Hit<'_>> {
        let mut read: Option<u64> = None;
        let mut now = || *read.get_or_insert_with(&clock);
        let mut hit = None;
        for r in &self.rules {
            if !r.funcs.contains(f)
                || !r.applies.load(Relaxed)
                || !r.time_passes(&mut now)
                || !r.ports_pass(ports)
            {
                continue;
            }
            if let Some(call) = r.count_and_test() {
                if hit.is_none() && r.take_budget() {
                    hit = Some(Hit {
                        rule: r.index,
                        effect: r.spec.effect,
                        spec: &r.spec.text,
                        call,
                    });
                }
            }
        }
        hit
    }
}

#[cfg(test)]
mod tests;
