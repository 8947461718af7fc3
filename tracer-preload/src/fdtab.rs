//! Which file descriptors are sockets: `read`/`write`/`readv`/`writev`/`close` are only
//! recorded on sockets, and must cost next to nothing on files and pipes.
//!
//! Two fixed atomic bitmaps cover fds below [`TABLE_FDS`]: `KNOWN` (we know what the fd
//! is) and `SOCKET`. `socket`, `socketpair`, `accept*` mark an fd; `dup*`/`fcntl(F_DUPFD*)`
//! copy the state; `close` forgets it. An fd we have not seen (inherited, opened by
//! `open`, received with `SCM_RIGHTS`) is looked up once with `fstat` and cached. Fds at or
//! above the table size always take the `fstat`.
//!
//! A third bitmap, `NAMED`, says the socket's local address was already recorded for this
//! fd (see [`name_once`]): an unconnected datagram socket gets its port from the kernel on
//! its first `sendto`, and the tracer records it once, on that call's exit.
//!
//! A fourth, `DESCRIBED`, says the trace tells what this fd is connected to: set when the
//! tracer saw the socket made (`socket`, `accept`…; [`created`]) or recorded the addresses
//! of one it met already open ([`describe_once`]: inherited across `exec`, or the trace
//! began late). The data path reads it with one load; only an fd not described yet takes
//! the cold path that asks the kernel (once per fd).

use core::sync::atomic::{AtomicU64, Ordering};

/// Number of fds covered by the bitmaps.
pub const TABLE_FDS: usize = 65536;
const WORDS: usize = TABLE_FDS / 64;

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
static KNOWN: [AtomicU64; WORDS] = [ZERO; WORDS];
static SOCKET: [AtomicU64; WORDS] = [ZERO; WORDS];
static NAMED: [AtomicU64; WORDS] = [ZERO; WORDS];
static DESCRIBED: [AtomicU64; WORDS] = [ZERO; WORDS];

#[inline(always)]
fn slot(fd: i32) -> Option<(usize, u64)> {
    if fd >= 0 && (fd as usize) < TABLE_FDS {
        Some((fd as usize / 64, 1u64 << (fd as usize % 64)))
    } else {
        None
    }
}

/// Records what `fd` is.
pub fn mark(fd: i32, is_socket: bool) {
    if let Some((w, b)) = slot(fd) {
        NAMED[w].fetch_and(!b, Ordering::Relaxed);
        if is_socket {
            SOCKET[w].fetch_or(b, Ordering::Relaxed);
        } else {
            SOCKET[w].fetch_and(!b, Ordering::Relaxed);
        }
        // Release: a reader that sees KNOWN sees the SOCKET bit written above.
        KNOWN[w].fetch_or(b, Ordering::Release);
    }
}

/// `fd` was just made by a call the tracer recorded (its setup is in the trace).
pub fn created(fd: i32, is_socket: bool) {
    mark(fd, is_socket);
    if let Some((w, b)) = slot(fd) {
        DESCRIBED[w].fetch_or(b, Ordering::Relaxed);
    }
}

/// Does the trace already tell what `fd` is (true for fds above the table: never
/// described)?
#[inline(always)]
pub fn described(fd: i32) -> bool {
    match slot(fd) {
        Some((w, b)) => DESCRIBED[w].load(Ordering::Relaxed) & b != 0,
        None => true,
    }
}

/// True the first time it is asked for an fd not described yet (the caller records it).
#[cold]
pub fn describe_once(fd: i32) -> bool {
    match slot(fd) {
        Some((w, b)) => DESCRIBED[w].fetch_or(b, Ordering::Relaxed) & b == 0,
        None => false,
    }
}

/// Forgets `fd` (closed).
pub fn forget(fd: i32) {
    if let Some((w, b)) = slot(fd) {
        KNOWN[w].fetch_and(!b, Ordering::Relaxed);
        SOCKET[w].fetch_and(!b, Ordering::Relaxed);
        NAMED[w].fetch_and(!b, Ordering::Relaxed);
        DESCRIBED[w].fetch_and(!b, Ordering::Relaxed);
    }
}

/// True the first time it is asked for `fd` since the fd was created, marked or
/// forgotten (and always for fds above the table): the caller records the socket's local
/// address then. Called only on calls that carry an address (never on the fast path).
pub fn name_once(fd: i32) -> bool {
    match slot(fd) {
        Some((w, b)) => NAMED[w].fetch_or(b, Ordering::Relaxed) & b == 0,
        None => true,
    }
}

/// `to` is now a duplicate of `from` (described if `from` was: the trace has the dup).
pub fn copy(from: i32, to: i32) {
    match known(from) {
        Some(s) if described(from) => created(to, s),
        Some(s) => mark(to, s),
        None => forget(to),
    }
}

/// What the table knows about `fd`.
#[inline(always)]
pub fn known(fd: i32) -> Option<bool> {
    let (w, b) = slot(fd)?;
    // Acquire pairs with the Release in `mark`.
    if KNOWN[w].load(Ordering::Acquire) & b != 0 {
        Some(SOCKET[w].load(Ordering::Relaxed) & b != 0)
    } else {
        None
    }
}

/// True if `fd` is a socket (asks the kernel once for an fd not seen yet).
#[inline(always)]
pub fn is_socket(fd: i32) -> bool {
    match known(fd) {
        Some(s) => s,
        None => lookup(fd),
    }
}

#[cold]
fn lookup(fd: i32) -> bool {
    match crate::sysx::fd_is_socket(fd) {
        Some(s) => {
            mark(fd, s);
            s
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_copies_forgets_and_looks_up() {
        // Fds far above what the test process has open, so real ones are not disturbed.
        mark(60000, true);
        assert_eq!(known(60000), Some(true));
        copy(60000, 60001);
        assert!(is_socket(60001));
        forget(60000);
        assert_eq!(known(60000), None);
        mark(60001, false);
        assert_eq!(known(60001), Some(false));
        copy(60002, 60001);
        assert_eq!(known(60001), None);
        assert!(name_once(60003));
        assert!(!name_once(60003));
        forget(60003);
        assert!(name_once(60003));
        mark(60003, true);
        assert!(name_once(60003));
        assert!(!described(60004));
        assert!(describe_once(60004));
        assert!(!describe_once(60004));
        assert!(described(60004));
        forget(60004);
        assert!(!described(60004));
        created(60004, true);
        assert!(described(60004) && !describe_once(60004));
        copy(60004, 60005);
        assert!(described(60005));
        assert!(described(70000) && !describe_once(70000));
        // A real socket and a real file, looked up with fstat.
        // SAFETY: plain socket/open calls with constant arguments.
        let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
        // SAFETY: as above; the path is NUL-terminated.
        let f = unsafe { libc::open(c"/proc/self/stat".as_ptr(), libc::O_RDONLY) };
        forget(s);
        forget(f);
        assert!(is_socket(s));
        assert!(!is_socket(f));
        assert_eq!(known(s), Some(true));
        assert!(!is_socket(-1));
        assert!(!is_socket(70000));
        // SAFETY: closing the two fds opened above.
        unsafe {
            libc::close(s);
            libc::close(f);
        }
    }
}
