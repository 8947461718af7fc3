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
//!
//! A fifth table, `PORTS`, one word per fd, remembers the local and peer ports a socket's
//! connection had, for the injection rules' `local-port=` / `peer-port=` keys: the kernel
//! stops answering `getpeername` (`ENOTCONN`) once a TCP connection is closed in both
//! directions or reset, yet the calls made then (the receive of the last data, the one
//! that meets end of stream) belong to that connection. It is kept only when some rule
//! has a port key ([`track_ports`]); see [`Ports`] for the word's layout and the protocol.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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
    forget_ports(fd);
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
    forget_ports(fd);
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

/// `to` is now a duplicate of `from` (described if `from` was: the trace has the dup; it
/// has the ports `from` has, and none of those `to` had).
pub fn copy(from: i32, to: i32) {
    match known(from) {
        Some(s) if described(from) => created(to, s),
        Some(s) => mark(to, s),
        None => forget(to),
    }
    if tracking_ports() {
        let p = ports(from);
        remember(to, forget_ports(to), p.local(), p.peer(), p.connecting());
    }
}

/// Set once, by the injection constructor, when some rule has a port key; never cleared.
/// Every function below does nothing (and [`ports`] answers "nothing known") until then,
/// so a process without such rules pays one relaxed load per `close`, `socket`, `dup`….
static TRACK_PORTS: AtomicBool = AtomicBool::new(false);

/// Starts remembering connections' ports (called by the constructor, before the program
/// runs, when some injection rule has a port key).
pub fn track_ports() {
    TRACK_PORTS.store(true, Ordering::Relaxed);
}

/// Whether ports are remembered in this process.
#[inline(always)]
pub fn tracking_ports() -> bool {
    // Relaxed: a flag set before the program's first instruction (constructor), read
    // alone; nothing else is published through it.
    TRACK_PORTS.load(Ordering::Relaxed)
}

/// The remembered ports of one fd: a copy of its `PORTS` word.
///
/// Layout (one `u64`, so a reader always sees a consistent snapshot):
///
/// | bits   | field      | meaning                                                     |
/// |--------|------------|-------------------------------------------------------------|
/// | 0-15   | peer       | peer port; 0: not known (no TCP/UDP peer has port 0)        |
/// | 16-31  | local      | local port; 0: not known                                    |
/// | 32     | connecting | a `connect` was under way when last seen: `peer` is the port it was asked to connect to, trusted only once the kernel confirms ([`peer_it_had`]) |
/// | 33-63  | generation | incremented by every [`forget_ports`]                       |
///
/// Protocol. The word changes only through read-modify-writes: [`forget_ports`] (the fd
/// was closed or replaced: ports and flag cleared, generation + 1) and [`remember`] (a
/// compare-exchange from a snapshot read *before* the lookup whose answer it stores). A
/// remember whose lookup may have seen an older descriptor under the same number therefore
/// fails: the close or creation that replaced it is followed by a `forget_ports` that
/// changed the generation (the `close` wrapper forgets again after the real close for
/// this reason). Remember only fills fields that are still 0, so two threads learning the
/// same ports race harmlessly (the loser's compare-exchange fails; its answer was the
/// same). All of it is lock-free and allocation-free: safe in signal handlers (an
/// interrupted CAS loop just retries) and across `fork` (the child inherits the fds and
/// this table with them). Not covered: an fd closed behind the wrappers' back (raw system
/// call, glibc's internal `close` in `fclose`) keeps its ports until a wrapped call reuses
/// or closes the number, so an unconnected socket made under it behind our back too would
/// match by them (the kernel is asked first: a remembered port is used only when it
/// answers `ENOTCONN`); a `vfork` child's closes before it execs forget ports its parent
/// still has (a missed match).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports(u64);

const CONNECTING: u64 = 1 << 32;
const GEN_ONE: u64 = 1 << 33;
const GEN_MASK: u64 = !(GEN_ONE - 1);

impl Ports {
    /// Nothing known (an fd above the table, or ports not tracked).
    pub const NONE: Ports = Ports(0);

    /// The remembered local port.
    pub fn local(self) -> Option<u16> {
        Some((self.0 >> 16) as u16).filter(|&p| p != 0)
    }

    /// The remembered peer port.
    pub fn peer(self) -> Option<u16> {
        Some(self.0 as u16).filter(|&p| p != 0)
    }

    /// A `connect` was under way when last seen (its peer port is not confirmed yet).
    pub fn connecting(self) -> bool {
        self.0 & CONNECTING != 0
    }
}

#[allow(clippy::declare_interior_mutable_const)]
const NO_PORTS: AtomicU64 = AtomicU64::new(0);
/// One word per fd below [`TABLE_FDS`] (512 KiB of zero pages: a page is touched only when
/// a socket among its 512 fds is remembered).
static PORTS: [AtomicU64; TABLE_FDS] = [NO_PORTS; TABLE_FDS];

#[inline(always)]
fn port_word(fd: i32) -> Option<&'static AtomicU64> {
    if tracking_ports() && fd >= 0 && (fd as usize) < TABLE_FDS {
        Some(&PORTS[fd as usize])
    } else {
        None
    }
}

/// A snapshot of what is remembered about `fd` (read before asking the kernel, so that
/// [`remember`] can tell whether the fd changed meanwhile).
#[inline]
pub fn ports(fd: i32) -> Ports {
    // Acquire pairs with the Release of `forget_ports`: a lookup made after this load,
    // if it saw the new generation, comes after the close or creation behind it.
    port_word(fd).map_or(Ports::NONE, |w| Ports(w.load(Ordering::Acquire)))
}

/// Forgets the ports of `fd` (closed, or replaced by a new socket or a `dup`); returns the
/// new, empty snapshot.
pub fn forget_ports(fd: i32) -> Ports {
    let Some(w) = port_word(fd) else {
        return Ports::NONE;
    };
    let next = |v: u64| (v & GEN_MASK).wrapping_add(GEN_ONE);
    // Release pairs with the Acquire in `ports` (see there); the closure always returns
    // Some, so this cannot fail.
    let old = w
        .fetch_update(Ordering::Release, Ordering::Relaxed, |v| Some(next(v)))
        .unwrap_or_else(|v| v);
    Ports(next(old))
}

/// Stores what a lookup made after snapshot `seen` learnt: each given port fills its field
/// if empty; `connecting` sets or clears the flag. Does nothing if the word changed since
/// `seen` (another thread forgot the fd, or remembered first). Returns whether it changed
/// the word.
pub fn remember(
    fd: i32,
    seen: Ports,
    local: Option<u16>,
    peer: Option<u16>,
    connecting: bool,
) -> bool {
    let Some(w) = port_word(fd) else {
        return false;
    };
    let mut v = seen.0;
    if let Some(p) = local.filter(|_| seen.local().is_none()) {
        v |= u64::from(p) << 16;
    }
    if let Some(p) = peer.filter(|_| seen.peer().is_none()) {
        v |= u64::from(p);
    }
    v = if connecting {
        v | CONNECTING
    } else {
        v & !CONNECTING
    };
    // Relaxed: the word carries everything it means; the compare with `seen` is what
    // rejects a stale store (see `Ports`).
    v != seen.0
        && w.compare_exchange(seen.0, v, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}

/// After `connect(fd, …)` to `peer` (the port of the address given) returned `ret`
/// (errno `err`): a new connection's ports are remembered (`ret == 0`); its local port
/// and `peer`, marked connecting, when the kernel goes on connecting (`EINPROGRESS`, or
/// `EINTR`); `EALREADY` changes nothing, `EISCONN` fills in what is missing, and any
/// other failure forgets the ports (the socket is not connected).
pub fn connected(fd: i32, peer: Option<u16>, ret: i64, err: i32) {
    if !tracking_ports() {
        return;
    }
    match (ret, err) {
        (0, _) => {
            forget_ports(fd);
            learn_ports(fd);
        }
        (_, libc::EINPROGRESS | libc::EINTR) => {
            let seen = forget_ports(fd);
            let local = bufpool::inject::socket_port(fd, false).ok().flatten();
            remember(fd, seen, local, peer, true);
        }
        (_, libc::EALREADY) => {}
        (_, libc::EISCONN) => learn_ports(fd),
        _ => {
            forget_ports(fd);
        }
    }
}

/// The peer port a connection had, for a lookup that failed with `ENOTCONN` after
/// snapshot `seen`. A connect that was still under way when last seen counts only if the
/// kernel says it completed (`tcpi_bytes_acked` > 0: the SYN was acknowledged — never so
/// for a refused or timed-out one); it is then marked complete.
pub fn peer_it_had(fd: i32, seen: Ports) -> Option<u16> {
    let peer = seen.peer()?;
    if !seen.connecting() {
        return Some(peer);
    }
    if crate::sysx::tcp_bytes_acked(fd)? == 0 {
        return None;
    }
    remember(fd, seen, None, None, false);
    Some(peer)
}

/// Remembers both ports of a connected socket as the kernel gives them now.
pub fn learn_ports(fd: i32) {
    let seen = ports(fd);
    if !tracking_ports() {
        return;
    }
    let local = bufpool::inject::socket_port(fd, false).ok().flatten();
    let peer = bufpool::inject::socket_port(fd, true).ok().flatten();
    remember(fd, seen, local, peer, false);
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

    #[test]
    fn ports_are_remembered_per_generation() {
        track_ports();
        let fd = 61000;
        let g0 = forget_ports(fd);
        assert_eq!(ports(fd), g0);
        assert_eq!(
            (g0.local(), g0.peer(), g0.connecting()),
            (None, None, false)
        );
        assert!(remember(fd, g0, Some(40000), Some(7000), false));
        let p = ports(fd);
        assert_eq!((p.local(), p.peer()), (Some(40000), Some(7000)));
        // A field already known is kept; a lookup that read an older word stores nothing.
        assert!(!remember(fd, p, Some(1), Some(2), false));
        assert_eq!(
            (ports(fd).local(), ports(fd).peer()),
            (Some(40000), Some(7000))
        );
        assert!(!remember(fd, g0, None, None, true));
        // Replaced: the generation moves on, so the snapshot taken before is stale.
        let g1 = forget_ports(fd);
        assert_ne!(g1, g0);
        assert!(!remember(fd, p, Some(5), Some(6), false));
        assert_eq!(ports(fd), g1);
        // A dup carries the ports; the target's old ones are gone.
        remember(fd, g1, Some(40001), Some(7001), true);
        remember(fd + 1, forget_ports(fd + 1), Some(9), Some(9), false);
        copy(fd, fd + 1);
        let d = ports(fd + 1);
        assert_eq!(
            (d.local(), d.peer(), d.connecting()),
            (Some(40001), Some(7001), true)
        );
        forget(fd + 1);
        created(fd, true);
        assert_eq!(ports(fd + 1).peer(), None);
        assert_eq!(ports(fd).peer(), None);
        assert_eq!(ports(-1), Ports::NONE);
        assert_eq!(forget_ports(70000), Ports::NONE);
        assert!(!remember(70000, Ports::NONE, Some(1), None, false));
    }

    #[test]
    fn a_connect_under_way_counts_once_the_kernel_confirms_it() {
        use std::net::{TcpListener, TcpStream};
        use std::os::fd::AsRawFd;
        track_ports();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let fd = c.as_raw_fd();
        connected(fd, Some(port), -1, libc::EINPROGRESS);
        let p = ports(fd);
        assert!(p.connecting());
        assert_eq!(p.peer(), Some(port));
        assert_eq!(p.local(), Some(c.local_addr().unwrap().port()));
        // Established (the SYN was acknowledged): confirmed, and no longer connecting.
        assert_eq!(peer_it_had(fd, p), Some(port));
        assert!(!ports(fd).connecting());
        // EALREADY changes nothing; another failure forgets.
        connected(fd, Some(port), -1, libc::EALREADY);
        assert_eq!(ports(fd).peer(), Some(port));
        connected(fd, Some(port), -1, libc::ECONNREFUSED);
        assert_eq!(ports(fd).peer(), None);
        connected(fd, Some(port), 0, 0);
        assert_eq!(ports(fd).peer(), Some(port));
        // A TCP socket that never connected: not confirmed.
        // SAFETY: a plain socket call with constant arguments.
        let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
        remember(s, forget_ports(s), Some(1), Some(port), true);
        assert_eq!(peer_it_had(s, ports(s)), None);
        assert!(ports(s).connecting());
        forget(s);
        // SAFETY: closing the socket opened above.
        unsafe { libc::close(s) };
        forget(fd);
    }
}
