//! Fault injection inside the traced process (issue 6): the rules of `CULPRIT_INJECT`
//! ([`bufpool::inject`]) applied to the wrapped calls.
//!
//! Every wrapper that can be disturbed goes through one seam (`wrap::seam::data_call` for
//! the data calls, `wrap::sock::seamed` and `wrap::mux::mux_call` for the others):
//!
//! 1. if [`enabled`] — one relaxed load, inlined into every wrapper — it calls [`before`]
//!    with a [`CallInfo`]. `Some(Forced)` means: skip the real call; the program sees
//!    `ret`, and errno `errno` when `ret < 0`; the `LibEnter`/`LibExit` entries carry
//!    the `Inject` option with `rule`.
//! 2. otherwise it makes the real call — data calls with their length capped at
//!    [`limit`] — and calls [`after`] with the outcome and the bytes the call moved
//!    ([`Data`]). `after` returns the rule id when an injection concerned this call; it
//!    goes into the `LibExit` entry's `Inject` option.
//!
//! What each effect does here (see [`bufpool::inject::Effect`]):
//!
//! | effect      | when                         | what the program sees                               |
//! |-------------|------------------------------|-----------------------------------------------------|
//! | `errno=E`   | `before`: call not made      | -1, errno E                                         |
//! | `eof`       | `before`: call not made      | 0; nothing consumed                                 |
//! | `close`     | `before`: `shutdown(fd, SHUT_RDWR)` for real, call not made | -1, `ECONNRESET`; the fd stays open (the program's own `close` works), the peer sees end of stream, later calls fail as the kernel decides (`EPIPE` on send, 0 on receive) |
//! | `delay=D`   | sleeps D, then the real call (data calls sleep after `LibEnter` is recorded, so the traced call spans the delay) | the real result, D later |
//! | `short=N`   | real call with `min(N, len)` bytes | at most N bytes moved; unread bytes stay in the socket, unsent ones are not sent |
//! | `corrupt=N` | `after`: XOR 0xff            | the first `min(N, ret)` returned bytes inverted     |
//! | `kill=SIG`  | `before`: recorded, published, then `kill(getpid(), SIG)` | SIGKILL: the process dies in the call; SIGSTOP: it hangs there until continued, then the real call is made |
//!
//! Every injection writes a `MetaInject` record ([`bufpool::format::InjectRecord`]) in the
//! calling thread's trace: rule index, function, fd, the original result (what the real
//! call returned; -1 when it was not made; for `short` on a receive, what a full call
//! would have returned at that moment — the bytes returned plus those still queued, by
//! `FIONREAD`, capped at the length asked; for `short` on a send, the length asked), the
//! forced result and errno, and the rule's text. For effects applied before the call the
//! record precedes `LibEnter`; otherwise it lies between `LibEnter` and `LibExit`.
//!
//! Rules are parsed once, by this library's own constructor (`.init_array`), from the
//! initial environment; a malformed value prints one line on stderr and disables
//! injection. Counters are per process: a `pthread_atfork` child handler restarts them
//! (and re-evaluates `pid=`); an `exec` loads the library afresh. Nothing here allocates,
//! locks or panics after the constructor; system calls are raw.

use bufpool::format::{LibFn, TSC_MASK};
use bufpool::inject::{
    corrupt_bytes, encode_inject, sleep_ns, socket_port, Effect, InjectEvent, PortSource,
    ProcessInfo, RuleSet, INJECT_ENV,
};
use core::cell::{Cell, UnsafeCell};
use core::ffi::{c_char, c_int, CStr};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicBool, Ordering};

/// What a wrapper knows about a call before making it.
#[derive(Debug)]
pub struct CallInfo {
    /// The wrapped function.
    pub func: LibFn,
    /// Its fd (the epoll fd for `epoll_wait`, -1 for `select`/`poll`).
    pub fd: i32,
    /// Bytes requested (sum of the iovec for vector calls; 0 where meaningless).
    pub len: u64,
    /// The injection [`before`] decided on and [`after`] completes (set by `before`).
    pending: Cell<Option<Pending>>,
}

impl CallInfo {
    /// A call of `func` on `fd` asking for `len` bytes.
    #[inline(always)]
    pub fn new(func: LibFn, fd: i32, len: u64) -> CallInfo {
        CallInfo {
            func,
            fd,
            len,
            pending: Cell::new(None),
        }
    }
}

/// An injection decided before the call, to be completed after it.
#[derive(Clone, Copy, Debug)]
struct Pending {
    rule: u32,
    effect: Effect,
    spec: &'static str,
}

/// A result to return instead of making the real call.
#[derive(Clone, Copy, Debug)]
pub struct Forced {
    /// Return value the program sees.
    pub ret: i64,
    /// errno the program sees when `ret < 0`.
    pub errno: i32,
    /// Id of the rule that forced it.
    pub rule: u32,
}

/// The outcome of the real call as the program will see it; [`after`] may change it.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    /// Return value.
    pub ret: i64,
    /// errno (meaningful when `ret < 0`).
    pub errno: i32,
}

/// The bytes a call moved.
#[derive(Clone, Copy, Debug)]
pub enum Data {
    /// Nothing (or not applicable).
    None,
    /// A flat buffer: pointer and the number of bytes the call returned.
    Buf(*mut u8, usize),
    /// A scatter/gather vector and its length; the call moved `Outcome::ret` bytes.
    Iov(*const libc::iovec, usize),
}

/// True once rules are in force in this process. Set by the constructor (single-threaded,
/// before the program runs), after `RULES` was written; never cleared.
static ACTIVE: AtomicBool = AtomicBool::new(false);

struct RulesCell(UnsafeCell<MaybeUninit<RuleSet>>);
// SAFETY: written once by the constructor before ACTIVE is set (Release); afterwards only
// read (Acquire on ACTIVE), and a RuleSet is Sync (its mutable state is atomics).
unsafe impl Sync for RulesCell {}
static RULES: RulesCell = RulesCell(UnsafeCell::new(MaybeUninit::uninit()));

#[inline(always)]
fn rules() -> Option<&'static RuleSet> {
    // Acquire pairs with the Release store in `install`.
    if ACTIVE.load(Ordering::Acquire) {
        // SAFETY: ACTIVE is only set after RULES was written, and RULES is never written
        // again or dropped.
        Some(unsafe { (*RULES.0.get()).assume_init_ref() })
    } else {
        None
    }
}

/// Whether any fault rule is active in this process (inlined into every wrapper).
#[inline(always)]
pub fn enabled() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = init;

/// Constructor: reads `CULPRIT_INJECT` from the initial environment and installs the rules.
extern "C" fn init(_argc: c_int, _argv: *const *const c_char, envp: *const *const c_char) {
    let _e = bufpool::sys::ErrnoGuard::new();
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: glibc passes the process's initial environment to .init_array functions.
        if let Some(v) = unsafe { env_value(envp, INJECT_ENV.as_bytes()) } {
            install(v);
        }
    });
}

/// The value of `name` in a NULL-terminated `envp`.
///
/// # Safety
/// `envp` is null or a NULL-terminated array of NUL-terminated strings.
unsafe fn env_value(envp: *const *const c_char, name: &[u8]) -> Option<&'static [u8]> {
    if envp.is_null() {
        return None;
    }
    let mut p = envp;
    // SAFETY: the caller guarantees the array is NULL-terminated and its strings valid;
    // the initial environment lives as long as the process (we only read it here).
    unsafe {
        while !(*p).is_null() {
            let s = CStr::from_ptr(*p).to_bytes();
            if s.len() > name.len() && s.starts_with(name) && s[name.len()] == b'=' {
                return Some(&s[name.len() + 1..]);
            }
            p = p.add(1);
        }
    }
    None
}

fn install(value: &[u8]) {
    let parsed = std::str::from_utf8(value)
        .map_err(|e| format!("{INJECT_ENV} is not UTF-8 (byte {})", e.valid_up_to() + 1))
        .and_then(|s| RuleSet::from_env_value(s).map_err(|e| format!("{INJECT_ENV}: {e}")));
    let set = match parsed {
        Ok(s) if s.is_empty() => return,
        Ok(s) => s,
        Err(msg) => {
            crate::sysx::write_all(
                2,
                format!("culprit: fault injection disabled: {msg}\n").as_bytes(),
            );
            return;
        }
    };
    set.bind(&ProcessInfo::current());
    if set.has_port_keys() {
        crate::fdtab::track_ports();
    }
    // SAFETY: constructor, single-threaded, runs once (ACTIVE is still false, so nobody
    // reads RULES yet).
    unsafe { (*RULES.0.get()).write(set) };
    // Release: the rules written above are visible to every Acquire load of ACTIVE.
    ACTIVE.store(true, Ordering::Release);
    // SAFETY: registers a child handler that only stores atomics.
    unsafe { libc::pthread_atfork(None, None, Some(atfork_child)) };
}

extern "C" fn atfork_child() {
    if let Some(r) = rules() {
        r.on_fork(bufpool::sys::getpid());
    }
}

/// Called before the real call; `Some` skips it.
#[inline]
pub fn before(call: &CallInfo) -> Option<Forced> {
    let r = rules()?;
    if !r.wants(call.func) {
        return None;
    }
    let hit = r.check(call.func, &mut TracedPorts::new(call.fd))?;
    let p = Pending {
        rule: hit.rule,
        effect: hit.effect,
        spec: hit.spec,
    };
    let forced = |ret: i64, errno: i32| {
        record(call, &p, -1, ret, if ret < 0 { errno } else { 0 });
        Some(Forced {
            ret,
            errno,
            rule: p.rule,
        })
    };
    match hit.effect {
        Effect::Errno(e) => forced(-1, e),
        Effect::Eof => forced(0, 0),
        Effect::Close => {
            let _e = bufpool::sys::ErrnoGuard::new();
            // SAFETY: shutdown takes two integers; on a non-socket it fails harmlessly.
            unsafe { libc::syscall(libc::SYS_shutdown, call.fd, libc::SHUT_RDWR) };
            forced(-1, libc::ECONNRESET)
        }
        Effect::Delay(ns) => {
            // Data calls sleep in `limit`, which `data_call` runs after recording
            // `LibEnter`, so the traced call spans the delay; the others sleep here.
            if !is_data(call.func) {
                sleep_ns(ns);
            }
            call.pending.set(Some(p));
            None
        }
        Effect::Short(_) | Effect::Corrupt(_) => {
            call.pending.set(Some(p));
            None
        }
        Effect::Signal(sig) => {
            // Recorded first (the record must be in the pool before SIGKILL), then
            // published so that a process killed here leaves it to the drainer.
            record(call, &p, -1, -1, 0);
            crate::record::flush_thread(0);
            let _e = bufpool::sys::ErrnoGuard::new();
            // SAFETY: kill(getpid(), sig) with integer arguments; delivered to this process.
            unsafe { libc::syscall(libc::SYS_kill, bufpool::sys::getpid() as libc::pid_t, sig) };
            None
        }
        // `py:` rules have no libc functions, so `check` never returns them here.
        Effect::Raise => None,
    }
}

/// The ports of a call's socket for the rules' port keys: asked of the kernel (once per
/// call), remembered in the fd table when it answers, and taken from the table when it
/// answers `ENOTCONN` — a TCP connection closed in both directions, or reset, keeps the
/// ports it had (see `fdtab::Ports`). Any other failure (not a socket, bad fd) or a
/// socket without ports (UNIX) gives none, as does a never-connected one for the peer.
struct TracedPorts {
    fd: i32,
    local: Option<Option<u16>>,
    peer: Option<Option<u16>>,
}

impl TracedPorts {
    fn new(fd: i32) -> TracedPorts {
        TracedPorts {
            fd,
            local: None,
            peer: None,
        }
    }

    fn ask(fd: i32, peer: bool) -> Option<u16> {
        use crate::fdtab;
        // Read before the lookup, so a store of its answer fails if the fd was closed or
        // replaced meanwhile.
        let seen = fdtab::ports(fd);
        let known = if peer { seen.peer() } else { seen.local() };
        match socket_port(fd, peer) {
            Ok(Some(p)) if p != 0 => {
                // A peer port answered: any connect under way has completed.
                let done = peer && seen.connecting();
                if known.is_none() || done {
                    let (l, r) = if peer {
                        (None, Some(p))
                    } else {
                        (Some(p), None)
                    };
                    fdtab::remember(fd, seen, l, r, seen.connecting() && !done);
                }
                Some(p)
            }
            Ok(p) => p,
            Err(libc::ENOTCONN) if peer => fdtab::peer_it_had(fd, seen),
            Err(libc::ENOTCONN) => known,
            Err(_) => None,
        }
    }
}

impl PortSource for TracedPorts {
    fn local_port(&mut self) -> Option<u16> {
        let fd = self.fd;
        *self
            .local
            .get_or_insert_with(|| TracedPorts::ask(fd, false))
    }
    fn peer_port(&mut self) -> Option<u16> {
        let fd = self.fd;
        *self.peer.get_or_insert_with(|| TracedPorts::ask(fd, true))
    }
}

/// Called by `data_call` right before the real call: the byte count the real call may
/// move (`usize::MAX`: no limit). A pending `delay` of a data call sleeps here.
#[inline]
pub fn limit(call: &CallInfo) -> usize {
    match call.pending.get() {
        Some(Pending {
            effect: Effect::Short(n),
            ..
        }) => usize::try_from(n).unwrap_or(usize::MAX),
        Some(Pending {
            effect: Effect::Delay(ns),
            ..
        }) => {
            sleep_ns(ns);
            usize::MAX
        }
        _ => usize::MAX,
    }
}

/// The calls that go through `wrap::seam::data_call` (and so through [`limit`]).
fn is_data(f: LibFn) -> bool {
    bufpool::inject::RECEIVE_FNS.contains(&f) || bufpool::inject::SEND_FNS.contains(&f)
}

/// Called after the real call; returns the rule id if an injection concerned it.
#[inline]
pub fn after(call: &CallInfo, out: &mut Outcome, data: Data) -> Option<u32> {
    let p = call.pending.take()?;
    let forced_errno = if out.ret < 0 { out.errno } else { 0 };
    let original = match p.effect {
        Effect::Short(n) if out.ret >= 0 && call.len > n => {
            if bufpool::inject::RECEIVE_FNS.contains(&call.func) {
                if out.ret as u64 == n {
                    (out.ret as u64 + queued(call.fd).min(call.len - n)) as i64
                } else {
                    out.ret
                }
            } else {
                call.len as i64
            }
        }
        Effect::Corrupt(n) => {
            if out.ret > 0 {
                corrupt(data, (out.ret as u64).min(n) as usize);
            }
            out.ret
        }
        _ => out.ret,
    };
    record(call, &p, original, out.ret, forced_errno);
    Some(p.rule)
}

/// Bytes queued for reading on a socket (`FIONREAD`), 0 if unknown.
fn queued(fd: i32) -> u64 {
    let _e = bufpool::sys::ErrnoGuard::new();
    let mut n: c_int = 0;
    // SAFETY: FIONREAD writes one int to the valid pointer given.
    let r = unsafe { libc::syscall(libc::SYS_ioctl, fd, libc::FIONREAD, &mut n as *mut c_int) };
    if r == 0 && n > 0 {
        n as u64
    } else {
        0
    }
}

/// Inverts the first `n` bytes the call returned.
fn corrupt(data: Data, n: usize) {
    match data {
        Data::None => {}
        Data::Buf(p, len) => {
            if !p.is_null() {
                // SAFETY: the call just wrote `len` bytes at `p` (the program's buffer).
                let b = unsafe { core::slice::from_raw_parts_mut(p, len) };
                corrupt_bytes(b, n as u64);
            }
        }
        Data::Iov(iov, cnt) => {
            if iov.is_null() {
                return;
            }
            let mut left = n;
            // SAFETY: the program's iovec array of `cnt` entries, which the call filled
            // in order; we touch at most `n` ≤ returned bytes, so only filled ones.
            let v = unsafe { core::slice::from_raw_parts(iov, cnt.min(1024)) };
            for e in v {
                if left == 0 {
                    break;
                }
                let k = e.iov_len.min(left);
                if k > 0 && !e.iov_base.is_null() {
                    // SAFETY: as above: `k` bytes of this buffer were filled.
                    let b = unsafe { core::slice::from_raw_parts_mut(e.iov_base as *mut u8, k) };
                    corrupt_bytes(b, k as u64);
                }
                left -= k;
            }
        }
    }
}

/// Writes the `MetaInject` record into the calling thread's trace (if it records).
fn record(call: &CallInfo, p: &Pending, original: i64, forced: i64, errno: i32) {
    crate::record::with_thread(|t, pool| {
        let mut buf = [0u8; bufpool::format::META_BUF];
        let n = encode_inject(
            bufpool::sys::rdtsc() & TSC_MASK,
            &InjectEvent {
                rule: p.rule,
                func: call.func,
                fd: call.fd,
                original_ret: original,
                forced_ret: forced,
                forced_errno: errno,
                spec: p.spec.as_bytes(),
            },
            &mut buf,
        );
        crate::record::append(t, pool, &buf[..n]);
    });
}

/// Caps a scatter/gather vector at `limit` bytes: the first entries of `iov` that hold
/// them, copied into `out` (the last one shortened). Returns the count to pass.
pub(crate) fn limit_iov(
    iov: *const libc::iovec,
    cnt: usize,
    limit: usize,
    out: &mut [libc::iovec; 64],
) -> usize {
    if iov.is_null() {
        return 0;
    }
    // SAFETY: the program's iovec array of `cnt` entries (the real call reads it too).
    let v = unsafe { core::slice::from_raw_parts(iov, cnt.min(out.len())) };
    let mut left = limit;
    let mut k = 0;
    for e in v {
        if left == 0 {
            break;
        }
        out[k] = libc::iovec {
            iov_base: e.iov_base,
            iov_len: e.iov_len.min(left),
        };
        left -= out[k].iov_len;
        k += 1;
    }
    k
}

/// Runs `f` with a vector capped at `limit` bytes (`usize::MAX`: the vector as given).
#[inline(always)]
pub(crate) fn with_limited_iov<R>(
    iov: *const libc::iovec,
    cnt: c_int,
    limit: usize,
    f: impl FnOnce(*const libc::iovec, c_int) -> R,
) -> R {
    if limit == usize::MAX {
        return f(iov, cnt);
    }
    let mut v = [libc::iovec {
        iov_base: core::ptr::null_mut(),
        iov_len: 0,
    }; 64];
    let k = limit_iov(iov, cnt.max(0) as usize, limit, &mut v);
    f(v.as_ptr(), k as c_int)
}

/// Runs `f` with a copy of `msg` whose vector is capped at `limit` bytes. With
/// `write_back` (receives), the fields the kernel writes into a msghdr (`msg_namelen`,
/// `msg_controllen`, `msg_flags`) are copied back to the program's `msg`. With
/// `limit == usize::MAX` or a null `msg`, `f` gets `msg` itself.
#[inline(always)]
pub(crate) fn with_limited_msg<R>(
    msg: *const libc::msghdr,
    limit: usize,
    write_back: bool,
    f: impl FnOnce(*mut libc::msghdr) -> R,
) -> R {
    if limit == usize::MAX || msg.is_null() {
        return f(msg as *mut libc::msghdr);
    }
    let mut v = [libc::iovec {
        iov_base: core::ptr::null_mut(),
        iov_len: 0,
    }; 64];
    // SAFETY: the program's msghdr, which the real call reads as well.
    let mut m = unsafe { *msg };
    let k = limit_iov(m.msg_iov, m.msg_iovlen, limit, &mut v);
    m.msg_iov = v.as_mut_ptr();
    m.msg_iovlen = k as _;
    let r = f(&mut m);
    if write_back {
        let out = msg as *mut libc::msghdr;
        // SAFETY: a receive's msghdr is writable (the kernel writes these fields of the
        // program's msghdr in an unmodified call); only those fields are copied back.
        unsafe {
            (*out).msg_namelen = m.msg_namelen;
            (*out).msg_controllen = m.msg_controllen;
            (*out).msg_flags = m.msg_flags;
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::fd::AsRawFd;

    #[test]
    fn env_value_finds_exactly_the_variable() {
        let vars: Vec<CString> = [
            "CULPRIT_INJECTX=no",
            "A=1",
            "CULPRIT_INJECT=recv:eof\nsend:close",
            "CULPRIT_INJECT=second",
        ]
        .iter()
        .map(|s| CString::new(*s).unwrap())
        .collect();
        let mut ptrs: Vec<*const c_char> = vars.iter().map(|c| c.as_ptr()).collect();
        ptrs.push(core::ptr::null());
        // SAFETY: a NULL-terminated array of C strings that outlive the call.
        let v = unsafe { env_value(ptrs.as_ptr(), INJECT_ENV.as_bytes()) };
        assert_eq!(v, Some(&b"recv:eof\nsend:close"[..]));
        // SAFETY: as above.
        assert_eq!(unsafe { env_value(ptrs.as_ptr(), b"B") }, None);
        // SAFETY: null is allowed.
        assert_eq!(unsafe { env_value(core::ptr::null(), b"A") }, None);
    }

    fn iov(b: &mut [u8]) -> libc::iovec {
        libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        }
    }

    #[test]
    fn vectors_are_capped_at_the_limit() {
        let (mut a, mut b, mut c) = ([0u8; 4], [0u8; 4], [0u8; 4]);
        let v = [iov(&mut a), iov(&mut b), iov(&mut c)];
        let mut out = [libc::iovec {
            iov_base: core::ptr::null_mut(),
            iov_len: 0,
        }; 64];
        assert_eq!(limit_iov(v.as_ptr(), 3, 6, &mut out), 2);
        assert_eq!((out[0].iov_len, out[1].iov_len), (4, 2));
        assert_eq!(out[1].iov_base, v[1].iov_base);
        assert_eq!(limit_iov(v.as_ptr(), 3, 100, &mut out), 3);
        assert_eq!(limit_iov(v.as_ptr(), 3, 4, &mut out), 1);
        assert_eq!(limit_iov(core::ptr::null(), 3, 4, &mut out), 0);
        let total = with_limited_iov(v.as_ptr(), 3, usize::MAX, |p, n| {
            assert_eq!((p, n), (v.as_ptr(), 3));
            n
        });
        assert_eq!(total, 3);
    }

    #[test]
    fn corrupt_walks_the_vector() {
        let (mut a, mut b) = (*b"abcd", *b"efgh");
        let v = [iov(&mut a), iov(&mut b)];
        corrupt(Data::Iov(v.as_ptr(), 2), 6);
        assert_eq!(a, [!b'a', !b'b', !b'c', !b'd']);
        assert_eq!(b, [!b'e', !b'f', b'g', b'h']);
        let mut f = *b"xyz";
        corrupt(Data::Buf(f.as_mut_ptr(), 3), 1);
        assert_eq!(f, [!b'x', b'y', b'z']);
        corrupt(Data::None, 3);
    }

    #[test]
    fn a_limited_recvmsg_leaves_the_rest_queued_and_reports_its_fields() {
        let (s, r) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::io::Write;
        (&s).write_all(b"0123456789").unwrap();
        let (mut a, mut b) = ([0u8; 2], [0u8; 8]);
        let mut v = [iov(&mut a), iov(&mut b)];
        // SAFETY: all-zero msghdr is valid (no name, no control).
        let mut m: libc::msghdr = unsafe { core::mem::zeroed() };
        m.msg_iov = v.as_mut_ptr();
        m.msg_iovlen = 2;
        m.msg_flags = 0x7777;
        let n = with_limited_msg(&m, 3, true, |p| {
            // SAFETY: `p` is a valid msghdr whose buffers outlive the call.
            unsafe { libc::recvmsg(r.as_raw_fd(), p, 0) }
        });
        assert_eq!(n, 3);
        assert_eq!((&a, b[0]), (b"01", b'2'));
        assert_eq!(m.msg_flags, 0, "written back");
        assert_eq!(
            m.msg_iov,
            v.as_mut_ptr(),
            "the program's vector is untouched"
        );
        assert_eq!(queued(r.as_raw_fd()), 7);
        assert_eq!(queued(-1), 0);
    }

    #[test]
    fn nothing_is_injected_without_rules() {
        // The test binary has no rules installed (the constructor is not linked in tests).
        assert!(!enabled());
        let c = CallInfo::new(LibFn::Recv, 0, 8);
        assert!(before(&c).is_none());
        assert_eq!(limit(&c), usize::MAX);
        let mut o = Outcome { ret: 8, errno: 0 };
        assert_eq!(after(&c, &mut o, Data::None), None);
        assert_eq!(o.ret, 8);
    }
}
