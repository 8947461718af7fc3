//! The SPEC grammar: parsing one rule's text into a [`Spec`].
//!
//! ```text
//! rule     = funcs ":" effect *( "," key "=" value )
//!          | "py:" MODULE ":" QUALNAME ":raise=" EXCEPTION *( "," key "=" value )
//! funcs    = func *( "|" func )                 ; libc names, e.g. recv|read
//! effect   = "short=" N | "errno=" NAME | "eof" | "corrupt=" N
//!          | "delay=" DURATION | "close" | "kill=" SIGNAL
//! key      = "pid" | "exe" | "argv" | "local-port" | "peer-port"
//!          | "nth" | "after" | "count" | "prob" | "seed" | "at" | "after-s"
//! N        = 1*DIGIT                            ; decimal
//! SECONDS  = 1*DIGIT [ "." 1*DIGIT ]            ; value of at= and after-s=
//! DURATION = 1*DIGIT [ "." 1*DIGIT ] ( "ns" | "us" | "ms" | "s" )
//! P        = 1*DIGIT [ "." 1*DIGIT ]            ; 0 ≤ P ≤ 1
//! ```
//!
//! A `py:` rule concerns a Python function, not a libc call: `MODULE` is a dotted module
//! name (`pkg.mod`), `QUALNAME` a dotted attribute path in it (`func`, `Class.method`),
//! `EXCEPTION` a builtin exception name or a dotted `module.Name`. `libtrace.so` ignores
//! it; the Python shim (`culprit_trace`) raises the exception from that function's
//! eligible calls. Its keys are those of a libc rule without the port keys.
//!
//! No whitespace is allowed anywhere; values end at the next `,` (so they cannot contain
//! one) and a rule cannot contain a newline (the rule separator of [`super::INJECT_ENV`]).
//! Every error names the 1-based column (in characters) where the text stops matching,
//! what was expected there, and what was found.

use super::errno::errno_from_name;
use crate::format::LibFn;
use std::fmt;

/// A set of [`LibFn`]s, as a fixed bitmap over their ids (ids are < 4096).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FnSet([u64; 64]);

impl FnSet {
    /// The empty set.
    pub const EMPTY: FnSet = FnSet([0; 64]);

    /// Adds a function.
    pub fn insert(&mut self, f: LibFn) {
        let id = f.id() as usize & 4095;
        self.0[id / 64] |= 1 << (id % 64);
    }

    /// Adds every member of `other`.
    pub fn union_with(&mut self, other: &FnSet) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a |= *b;
        }
    }

    /// Membership test: one load, no allocation.
    #[inline(always)]
    pub fn contains(&self, f: LibFn) -> bool {
        let id = f.id() as usize & 4095;
        self.0[id / 64] & (1 << (id % 64)) != 0
    }

    /// True when no function is in the set.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }

    /// The members, in id order.
    pub fn iter(&self) -> impl Iterator<Item = LibFn> + '_ {
        LibFn::ALL.iter().copied().filter(|&f| self.contains(f))
    }
}

impl fmt::Debug for FnSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.iter().map(|x| x.name()))
            .finish()
    }
}

/// What an injection does to a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// `short=N`: transfer at most `N` bytes (N ≥ 1). On a receive the real call is made
    /// with the smaller length, so the unread bytes stay in the socket; on a send only
    /// the first `N` bytes go out.
    Short(u64),
    /// `errno=NAME`: the real call is not made; it returns -1 with this errno.
    Errno(i32),
    /// `eof`: the real call is not made; the receive returns 0 (end of stream) and
    /// consumes nothing.
    Eof,
    /// `corrupt=N`: the real receive is made, then the first `min(N, returned)` bytes
    /// it returned are XORed with `0xff` (deterministic, and never equal to the original).
    Corrupt(u64),
    /// `delay=DURATION`: sleep this many nanoseconds, then make the real call.
    Delay(u64),
    /// `close`: the connection is shut down for real (`shutdown(fd, SHUT_RDWR)`: the peer
    /// sees end of stream, later calls on the fd fail as the kernel decides) and the call
    /// returns -1 with `ECONNRESET` without being made. The descriptor itself stays
    /// allocated, so the program's own later `close(fd)` succeeds and no other file can
    /// be mistaken for it.
    Close,
    /// `kill=SIGNAL`: the tracer sends this signal to its own process (`kill(getpid(),
    /// sig)`) at the matching call, after recording the injection: `SIGKILL` kills the
    /// process there, `SIGSTOP` stops it (a hang with no error); for a signal the process
    /// survives (stopped and continued, or handled), the real call is then made.
    Signal(i32),
    /// `raise=EXCEPTION` of a `py:` rule (the exception's name is [`PyTarget::exception`]):
    /// the Python function raises it instead of running. Applies to no libc call.
    Raise,
}

/// The Python function of a `py:` rule and the exception it raises.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PyTarget {
    /// The dotted module name (`aiohttp.web_protocol`).
    pub module: String,
    /// The dotted attribute path in the module (`RequestHandler.data_received`).
    pub qualname: String,
    /// The exception: a builtin name (`TimeoutError`) or a dotted `module.Name`.
    pub exception: String,
}

/// Signal names `kill=` accepts, with their numbers.
pub const SIGNAL_NAMES: &[(&str, i32)] = &[
    ("SIGKILL", libc::SIGKILL),
    ("SIGSTOP", libc::SIGSTOP),
    ("SIGTERM", libc::SIGTERM),
    ("SIGINT", libc::SIGINT),
    ("SIGQUIT", libc::SIGQUIT),
    ("SIGABRT", libc::SIGABRT),
    ("SIGSEGV", libc::SIGSEGV),
    ("SIGHUP", libc::SIGHUP),
    ("SIGUSR1", libc::SIGUSR1),
    ("SIGUSR2", libc::SIGUSR2),
];

impl Effect {
    /// The effect's keyword as written in a SPEC.
    pub fn keyword(&self) -> &'static str {
        match self {
            Effect::Short(_) => "short",
            Effect::Errno(_) => "errno",
            Effect::Eof => "eof",
            Effect::Corrupt(_) => "corrupt",
            Effect::Delay(_) => "delay",
            Effect::Close => "close",
            Effect::Signal(_) => "kill",
            Effect::Raise => "raise",
        }
    }

    /// The functions this effect can be applied to.
    pub fn applicable(&self) -> FnSet {
        match self {
            Effect::Short(_) => fns(DATA_FNS),
            Effect::Eof | Effect::Corrupt(_) => fns(RECEIVE_FNS),
            Effect::Close => fns(DATA_FNS),
            Effect::Errno(_) => {
                let mut s = fns(DATA_FNS);
                s.union_with(&fns(OTHER_FAILING_FNS));
                s
            }
            Effect::Delay(_) | Effect::Signal(_) => {
                let mut s = fns(DATA_FNS);
                s.union_with(&fns(OTHER_FAILING_FNS));
                s.insert(LibFn::Close);
                s
            }
            Effect::Raise => FnSet::EMPTY,
        }
    }
}

/// Receive calls with a byte buffer (`short`, `eof`, `corrupt`, `close` apply).
pub const RECEIVE_FNS: &[LibFn] = &[
    LibFn::Recv,
    LibFn::Recvfrom,
    LibFn::Recvmsg,
    LibFn::Read,
    LibFn::Readv,
];

/// Send calls with a byte buffer (`short`, `close` apply).
pub const SEND_FNS: &[LibFn] = &[
    LibFn::Send,
    LibFn::Sendto,
    LibFn::Sendmsg,
    LibFn::Write,
    LibFn::Writev,
];

const DATA_FNS: &[LibFn] = &[
    LibFn::Recv,
    LibFn::Recvfrom,
    LibFn::Recvmsg,
    LibFn::Read,
    LibFn::Readv,
    LibFn::Send,
    LibFn::Sendto,
    LibFn::Sendmsg,
    LibFn::Write,
    LibFn::Writev,
];

/// Other calls that can be made to fail (`errno`) or be delayed (`delay`): socket and
/// connection setup and event waits — the calls `libtrace.so` routes through its
/// injection seam.
const OTHER_FAILING_FNS: &[LibFn] = &[
    LibFn::Socket,
    LibFn::Bind,
    LibFn::Listen,
    LibFn::Accept,
    LibFn::Accept4,
    LibFn::Connect,
    LibFn::Select,
    LibFn::Pselect,
    LibFn::Poll,
    LibFn::Ppoll,
    LibFn::EpollWait,
    LibFn::EpollPwait,
];

fn fns(list: &[LibFn]) -> FnSet {
    let mut s = FnSet::EMPTY;
    for &f in list {
        s.insert(f);
    }
    s
}

/// One parsed rule: which calls, what effect, which occurrences. Immutable; the
/// per-process counters live in [`super::Rule`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// The rule's text exactly as given.
    pub text: String,
    /// The functions, in the order written.
    pub funcs: Vec<LibFn>,
    /// The effect.
    pub effect: Effect,
    /// `pid=`: only in the process with this id.
    pub pid: Option<u32>,
    /// `exe=GLOB`: only in processes whose executable matches (see [`super::ProcessInfo`]).
    pub exe: Option<String>,
    /// `argv=TEXT`: only in processes whose command line contains TEXT (`*`, `?` wildcards).
    pub argv: Option<String>,
    /// `local-port=`: only on sockets bound to this local port.
    pub local_port: Option<u16>,
    /// `peer-port=`: only on sockets connected to this peer port (or that were: see the
    /// *Ports* section of [`crate::inject`]).
    pub peer_port: Option<u16>,
    /// `nth=`: only the n-th matching call of the process (1-based).
    pub nth: Option<u64>,
    /// `after=`: only matching calls after the n-th (n+1, n+2, …).
    pub after: Option<u64>,
    /// `count=`: at most this many injections per process (0 = unlimited, the default).
    pub count: u64,
    /// `prob=`: inject each eligible call with this probability, as a threshold on a
    /// 64-bit hash (`u64::MAX` means always); `None` when not given.
    pub prob_threshold: Option<u64>,
    /// `seed=`: seed of the per-call hash behind `prob` (default 0).
    pub seed: u64,
    /// `at=UNIX_SECONDS`: only calls made at or after this `CLOCK_REALTIME` instant, in
    /// nanoseconds since the epoch; earlier calls do not match (they are not counted).
    pub at_ns: Option<u64>,
    /// `after-s=SECONDS`: only calls made this many nanoseconds or more after the process
    /// started (the library's constructor, or the fork for a forked child); earlier calls
    /// do not match.
    pub after_s_ns: Option<u64>,
    /// For a `py:` rule: the Python function and its exception (`funcs` is then empty and
    /// `effect` is [`Effect::Raise`]).
    pub py: Option<PyTarget>,
}

/// A SPEC that does not parse: where, what was expected, and what was there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    /// The 1-based line of the rule in a multi-rule value (`None` for a single SPEC).
    pub line: Option<usize>,
    /// The 1-based column (in characters) where the error is.
    pub column: usize,
    /// What the grammar expected there.
    pub expected: String,
    /// What was found there (a short excerpt, or `end of rule`).
    pub found: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(l) = self.line {
            write!(f, "line {l}, ")?;
        }
        write!(
            f,
            "column {}: expected {}, found {}",
            self.column, self.expected, self.found
        )
    }
}

impl std::error::Error for SpecError {}

/// Keys, in the order the documentation lists them.
pub const KEYS: &[&str] = &[
    "pid",
    "exe",
    "argv",
    "local-port",
    "peer-port",
    "nth",
    "after",
    "count",
    "prob",
    "seed",
    "at",
    "after-s",
];

const EFFECTS_EXPECTED: &str =
    "an effect: short=N, errno=NAME, eof, corrupt=N, delay=DURATION, close or kill=SIGNAL";

struct Cursor<'a> {
    s: &'a str,
    /// Byte offset of the next character.
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<char> {
        self.s[self.pos..].chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    /// Takes characters while `f` holds; returns (start byte offset, the text).
    fn take_while(&mut self, f: impl Fn(char) -> bool) -> (usize, &'a str) {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if !f(c) {
                break;
            }
            self.pos += c.len_utf8();
        }
        (start, &self.s[start..self.pos])
    }

    fn column(&self, byte: usize) -> usize {
        self.s[..byte].chars().count() + 1
    }

    /// An error at byte offset `at`, quoting up to the next separator.
    fn err_at(&self, at: usize, expected: impl Into<String>) -> SpecError {
        let rest = &self.s[at..];
        let found = if rest.is_empty() {
            "end of rule".to_string()
        } else {
            let end = rest
                .char_indices()
                .skip(1)
                .find(|&(_, c)| matches!(c, ',' | '|' | ':' | '='))
                .map_or(rest.len(), |(i, _)| i);
            let mut q: String = rest[..end].chars().take(24).collect();
            if q.len() < end {
                q.push('…');
            }
            format!("`{q}`")
        };
        SpecError {
            line: None,
            column: self.column(at),
            expected: expected.into(),
            found,
        }
    }

    /// An error quoting exactly `text` found at `at`.
    fn err_text(&self, at: usize, text: &str, expected: impl Into<String>) -> SpecError {
        SpecError {
            line: None,
            column: self.column(at),
            expected: expected.into(),
            found: if text.is_empty() {
                if at >= self.s.len() {
                    "end of rule".into()
                } else {
                    self.err_at(at, "").found
                }
            } else {
                format!("`{text}`")
            },
        }
    }

    /// After a value: a `,` or the end of the rule.
    fn expect_separator(&self) -> Result<(), SpecError> {
        match self.peek() {
            None | Some(',') => Ok(()),
            Some(_) => Err(self.err_at(self.pos, "`,` or the end of the rule")),
        }
    }

    /// A decimal number; the error points at the first bad character.
    fn number(&mut self, what: &str) -> Result<(usize, u64), SpecError> {
        let (start, digits) = self.take_while(|c| c.is_ascii_digit());
        if digits.is_empty() {
            return Err(self.err_at(start, format!("{what} (decimal digits)")));
        }
        let v = digits
            .parse::<u64>()
            .map_err(|_| self.err_text(start, digits, format!("{what} below 2^64")))?;
        Ok((start, v))
    }

    /// `DIGITS[.DIGITS]` as (integer part, fraction digits as text).
    fn decimal(&mut self, what: &str) -> Result<(usize, u64, &'a str), SpecError> {
        let (start, int) = self.number(what)?;
        let mut frac = "";
        if self.eat('.') {
            let (fs, f) = self.take_while(|c| c.is_ascii_digit());
            if f.is_empty() {
                return Err(self.err_at(fs, "digits after the decimal point"));
            }
            frac = f;
        }
        Ok((start, int, frac))
    }
}

/// Parses one rule. `text` must be the whole rule (no surrounding whitespace).
pub fn parse_spec(text: &str) -> Result<Spec, SpecError> {
    let mut c = Cursor { s: text, pos: 0 };
    if let Some(rest) = text.strip_prefix("py:") {
        c.pos = text.len() - rest.len();
        return parse_py(c);
    }

    // funcs
    let mut funcs: Vec<(usize, LibFn)> = Vec::new();
    loop {
        let (at, name) = c.take_while(|ch| ch.is_ascii_alphanumeric() || ch == '_');
        if name.is_empty() {
            return Err(c.err_at(
                at,
                "a function name (recv, read, send, write, connect, accept, epoll_wait, …)",
            ));
        }
        let f = LibFn::from_name(name).ok_or_else(|| {
            c.err_text(
                at,
                name,
                "the name of a function libtrace.so wraps (recv, read, send, write, connect, accept, epoll_wait, …)",
            )
        })?;
        if funcs.iter().any(|&(_, g)| g == f) {
            return Err(c.err_text(at, name, "each function at most once"));
        }
        funcs.push((at, f));
        if c.eat('|') {
            continue;
        }
        if c.eat(':') {
            break;
        }
        return Err(c.err_at(c.pos, "`|` and another function, or `:` and an effect"));
    }

    // effect
    let eff_at = c.pos;
    let (_, kw) = c.take_while(|ch| ch.is_ascii_alphanumeric() || ch == '_');
    let effect = match kw {
        "eof" => Effect::Eof,
        "close" => Effect::Close,
        "short" | "corrupt" | "errno" | "delay" | "kill" => {
            if !c.eat('=') {
                return Err(c.err_at(c.pos, format!("`=` after `{kw}`")));
            }
            match kw {
                "short" | "corrupt" => {
                    let (at, n) = c.number("a byte count")?;
                    if n == 0 {
                        return Err(c.err_text(at, "0", "a byte count of at least 1"));
                    }
                    if kw == "short" {
                        Effect::Short(n)
                    } else {
                        Effect::Corrupt(n)
                    }
                }
                "errno" => {
                    let (at, name) = c.take_while(|ch| ch.is_ascii_alphanumeric());
                    if name.is_empty() {
                        return Err(c.err_at(at, "an errno name (ECONNRESET, EAGAIN, EINTR, …)"));
                    }
                    match errno_from_name(name) {
                        Some(v) => Effect::Errno(v),
                        None => match name.parse::<i32>() {
                            Ok(v) if v > 0 && v < 4096 => Effect::Errno(v),
                            _ => {
                                return Err(c.err_text(
                                    at,
                                    name,
                                    "an errno name (ECONNRESET, EAGAIN, EINTR, ECONNREFUSED, EPIPE, ETIMEDOUT, …) or a number from 1 to 4095",
                                ));
                            }
                        },
                    }
                }
                "kill" => {
                    let (at, name) = c.take_while(|ch| ch.is_ascii_alphanumeric());
                    match SIGNAL_NAMES.iter().find(|(n, _)| *n == name) {
                        Some(&(_, v)) => Effect::Signal(v),
                        None => match name.parse::<i32>() {
                            Ok(v) if v > 0 && v < 65 => Effect::Signal(v),
                            _ => {
                                return Err(c.err_text(
                                    at,
                                    name,
                                    "a signal name (SIGKILL, SIGSTOP, SIGTERM, SIGABRT, …) or a number from 1 to 64",
                                ));
                            }
                        },
                    }
                }
                _ => Effect::Delay(duration(&mut c)?),
            }
        }
        _ => return Err(c.err_at(eff_at, EFFECTS_EXPECTED)),
    };
    c.expect_separator()?;
    let ok = effect.applicable();
    for &(at, f) in &funcs {
        if !ok.contains(f) {
            let list: Vec<&str> = ok.iter().map(|g| g.name()).collect();
            return Err(c.err_text(
                at,
                f.name(),
                format!(
                    "a function `{}` applies to ({})",
                    effect.keyword(),
                    list.join(", ")
                ),
            ));
        }
    }

    let mut spec = Spec {
        text: text.to_string(),
        funcs: funcs.iter().map(|&(_, f)| f).collect(),
        effect,
        pid: None,
        exe: None,
        argv: None,
        local_port: None,
        peer_port: None,
        nth: None,
        after: None,
        count: 0,
        prob_threshold: None,
        seed: 0,
        at_ns: None,
        after_s_ns: None,
        py: None,
    };
    parse_keys(&mut c, &mut spec)?;
    Ok(spec)
}

/// The rest of a `py:` rule, after `py:`.
fn parse_py(mut c: Cursor<'_>) -> Result<Spec, SpecError> {
    let dotted = |ch: char| ch.is_alphanumeric() || ch == '_' || ch == '.';
    let (at, module) = c.take_while(dotted);
    if module.is_empty() || module.split('.').any(|p| !is_ident(p)) {
        return Err(c.err_text(at, module, "a dotted module name (pkg.module)"));
    }
    if !c.eat(':') {
        return Err(c.err_at(c.pos, "`:` and the function's name in its module"));
    }
    let (at, qualname) = c.take_while(dotted);
    if qualname.is_empty() || qualname.split('.').any(|p| !is_ident(p)) {
        return Err(c.err_text(
            at,
            qualname,
            "a function's dotted name in its module (func, Class.method)",
        ));
    }
    if !c.eat(':') {
        return Err(c.err_at(c.pos, "`:` and an effect (raise=EXCEPTION)"));
    }
    let kat = c.pos;
    let (_, kw) = c.take_while(|ch| ch.is_ascii_alphanumeric() || ch == '_');
    if kw != "raise" || !c.eat('=') {
        return Err(c.err_at(kat, "the effect of a py: rule, raise=EXCEPTION"));
    }
    let (at, exc) = c.take_while(dotted);
    if exc.is_empty() || exc.split('.').any(|p| !is_ident(p)) {
        return Err(c.err_text(
            at,
            exc,
            "an exception: a builtin name (TimeoutError) or module.Name",
        ));
    }
    c.expect_separator()?;
    let mut spec = Spec {
        text: c.s.to_string(),
        funcs: Vec::new(),
        effect: Effect::Raise,
        pid: None,
        exe: None,
        argv: None,
        local_port: None,
        peer_port: None,
        nth: None,
        after: None,
        count: 0,
        prob_threshold: None,
        seed: 0,
        at_ns: None,
        after_s_ns: None,
        py: Some(PyTarget {
            module: module.to_string(),
            qualname: qualname.to_string(),
            exception: exc.to_string(),
        }),
    };
    let keys_at = c.pos;
    parse_keys(&mut c, &mut spec)?;
    if spec.local_port.is_some() || spec.peer_port.is_some() {
        let at = c.s[keys_at..].find("-port=").map_or(keys_at, |i| {
            let before = &c.s[..keys_at + i];
            before.rfind(',').map_or(keys_at, |j| j + 1)
        });
        return Err(c.err_at(at, "a key of a py: rule (pid, exe, argv, nth, after, count, prob, seed, at, after-s): a Python function has no socket"));
    }
    Ok(spec)
}

/// A Python identifier (ASCII letters, digits, `_`, not starting with a digit; other
/// Unicode letters allowed as Python allows them).
fn is_ident(s: &str) -> bool {
    let mut ch = s.chars();
    matches!(ch.next(), Some(c) if c.is_alphabetic() || c == '_')
        && ch.all(|c| c.is_alphanumeric() || c == '_')
}

/// `*( "," key "=" value )` to the end of the rule.
fn parse_keys(c: &mut Cursor<'_>, spec: &mut Spec) -> Result<(), SpecError> {
    let text = c.s;
    let mut seen: Vec<&str> = Vec::new();

    // keys
    while c.eat(',') {
        let (kat, key) = c.take_while(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_');
        let Some(&key) = KEYS.iter().find(|&&k| k == key) else {
            return Err(c.err_at(
                kat,
                "a key: pid, exe, argv, local-port, peer-port, nth, after, count, prob, seed, at or after-s",
            ));
        };
        if seen.contains(&key) {
            return Err(c.err_text(
                kat,
                key,
                format!("each key at most once (`{key}` is repeated)"),
            ));
        }
        seen.push(key);
        if !c.eat('=') {
            return Err(c.err_at(c.pos, format!("`=` after `{key}`")));
        }
        match key {
            "pid" => {
                let (at, v) = c.number("a process id")?;
                if v == 0 || v > i32::MAX as u64 {
                    return Err(c.err_text(at, &v.to_string(), "a process id from 1 to 2^31-1"));
                }
                spec.pid = Some(v as u32);
            }
            "exe" | "argv" => {
                let (at, v) = c.take_while(|ch| ch != ',' && ch != '\n');
                if v.is_empty() {
                    return Err(c.err_at(at, format!("a non-empty {key} pattern")));
                }
                if key == "exe" {
                    spec.exe = Some(v.to_string());
                } else {
                    spec.argv = Some(v.to_string());
                }
            }
            "local-port" | "peer-port" => {
                let (at, v) = c.number("a port number")?;
                if v == 0 || v > 65535 {
                    return Err(c.err_text(at, &v.to_string(), "a port number from 1 to 65535"));
                }
                if key == "local-port" {
                    spec.local_port = Some(v as u16);
                } else {
                    spec.peer_port = Some(v as u16);
                }
            }
            "nth" => {
                let (at, v) = c.number("a call number")?;
                if v == 0 {
                    return Err(c.err_text(
                        at,
                        "0",
                        "a call number of at least 1 (nth is 1-based)",
                    ));
                }
                spec.nth = Some(v);
            }
            "after" => spec.after = Some(c.number("a call count")?.1),
            "count" => spec.count = c.number("an injection count (0 = unlimited)")?.1,
            "prob" => {
                let (at, int, _) = c.decimal("a probability from 0 to 1")?;
                let text = &c.s[at..c.pos];
                let p: f64 = text.parse().unwrap_or(f64::NAN);
                if int > 1 || !(0.0..=1.0).contains(&p) {
                    return Err(c.err_text(at, text, "a probability from 0 to 1"));
                }
                spec.prob_threshold = Some(prob_threshold(p));
            }
            "seed" => spec.seed = c.number("a seed (decimal, below 2^64)")?.1,
            "at" => spec.at_ns = Some(seconds(c, "a UNIX time in seconds (e.g. 1795862400.5)")?),
            "after-s" => {
                spec.after_s_ns = Some(seconds(
                    c,
                    "seconds since the process started (e.g. 30, 2.5)",
                )?)
            }
            _ => unreachable!("every key of KEYS is handled"),
        }
        c.expect_separator()?;
    }
    if c.pos != text.len() {
        return Err(c.err_at(c.pos, "`,` and a key, or the end of the rule"));
    }
    Ok(())
}

/// Maps a probability to a threshold on a uniform 64-bit value: a call is injected when
/// its hash is `< threshold`, or always when the threshold is `u64::MAX` (p = 1).
fn prob_threshold(p: f64) -> u64 {
    if p >= 1.0 {
        u64::MAX
    } else {
        // 2^64 * p, exact enough: f64 has 53 bits and p < 1.
        (p * 18_446_744_073_709_551_616.0) as u64
    }
}

/// `DIGITS[.DIGITS]` seconds → nanoseconds (`at=`, `after-s=`); digits below one
/// nanosecond must be zeros, and the value must stay below 2^64 ns (year 2554).
fn seconds(c: &mut Cursor<'_>, what: &str) -> Result<u64, SpecError> {
    let (at, int, frac) = c.decimal(what)?;
    scaled(c, at, int, frac, 1_000_000_000)
}

/// `int.frac` times `scale` nanoseconds, exactly; an error at `at` when it is not a
/// whole number of nanoseconds or overflows.
fn scaled(c: &Cursor<'_>, at: usize, int: u64, frac: &str, scale: u64) -> Result<u64, SpecError> {
    let too_long = || c.err_text(at, &c.s[at..c.pos], "a time below 584 years (2^64 ns)");
    let mut ns = int.checked_mul(scale).ok_or_else(too_long)?;
    // The fraction, digit by digit, truncated below one nanosecond.
    let mut place = scale;
    for d in frac.bytes() {
        place /= 10;
        if place == 0 {
            if d != b'0' {
                return Err(c.err_text(
                    at,
                    &c.s[at..c.pos],
                    "a time that is a whole number of nanoseconds",
                ));
            }
            continue;
        }
        ns = ns
            .checked_add((d - b'0') as u64 * place)
            .ok_or_else(too_long)?;
    }
    Ok(ns)
}

/// `DIGITS[.DIGITS](ns|us|ms|s)` → nanoseconds.
fn duration(c: &mut Cursor<'_>) -> Result<u64, SpecError> {
    let (at, int, frac) = c.decimal("a duration (e.g. 20ms, 1.5s, 500us, 100ns)")?;
    let uat = c.pos;
    let (_, unit) = c.take_while(|ch| ch.is_ascii_alphabetic());
    let scale: u64 = match unit {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return Err(c.err_at(uat, "a duration unit: ns, us, ms or s")),
    };
    scaled(c, at, int, frac, scale)
}
