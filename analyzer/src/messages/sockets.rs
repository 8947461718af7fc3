//! Endpoints: which socket each op used, and which two sockets are the ends of one
//! connection.
//!
//! **Sockets.** Each process's ops are replayed in TSC order with a descriptor table
//! (`socket`, `socketpair`, `accept*`, `connect`, `bind`, `dup*`, `close`); a forked child
//! starts with a copy of its parent's table at the `fork` (parents are replayed first), so
//! a socket used by several processes is one [`Socket`] whose items (sends, receives,
//! gaps…) are merged in TSC order — the byte stream is the socket's, not the process's.
//! A descriptor used without any recorded setup (the trace began after the connection was
//! made, or the descriptor came from an untraced parent or over `SCM_RIGHTS`) gets a socket
//! of origin [`Origin::Unknown`] — unless the tracer described it on first use (an
//! [`OpKind::Adopt`] marker: traces since the first-sight record): then it is
//! [`Origin::Adopted`], with its local and peer address and, for TCP, the bytes it had
//! read and written before ([`Socket::base`]).
//!
//! **Pairing** (what is recorded: `connect`'s exit has the local and peer address, and so
//! has `accept`'s for the new descriptor):
//! - TCP (`AF_INET`/`AF_INET6` stream): a connecting socket (local L, peer P) and an
//!   accepted one (local P, peer L). IPv4-mapped IPv6 addresses are compared as IPv4;
//!   loopback four-tuples only pair within one host. A four-tuple reused over time pairs
//!   in time order: each accepted socket takes the earliest unpaired connecting one whose
//!   `connect` began before the `accept` returned (on one host; across hosts, in order).
//! - An adopted TCP end (met already open) does not know which end connected: TCP keys
//!   are the two addresses in a fixed order, and each adopted end takes the earliest
//!   unpaired end of its four-tuple (connecting, accepted or adopted) met before it whose
//!   local address is its peer and the reverse (not another descriptor of the same end,
//!   such as one passed over `SCM_RIGHTS`).
//!   **Alignment** is then certain, never guessed: each side numbers its bytes from its
//!   base (the kernel's own count of the bytes the process had read and written, recorded
//!   by the tracer; 0 for an end seen from its setup), so both ends' offsets are the
//!   connection's; bytes below the other side's base moved while that end was untraced
//!   ([`super::Reason::BeforeTrace`]). An adopted end whose counts could not be read (not
//!   TCP, an older kernel) is never aligned: its bytes and its partner's are
//!   [`super::Reason::OffsetsUnknown`]. Adopted UNIX stream ends are not paired (a path
//!   names a listener, not a connection): they stay unmatched.
//! - UNIX stream sockets: `connect(path)` with the `accept` on a listener bound to `path`,
//!   on the same host, in time order (the kernel's accept queue is FIFO).
//! - `socketpair`: its two descriptors, by construction (and after a `fork`, the parent's
//!   and the child's copies are the same two sockets).
//! - Pipes are not recorded by the tracer (`read`/`write` are recorded on sockets only),
//!   so they cannot be paired.
//! - Datagram sockets: see [`super::datagram`].

use super::ops::{Op, OpKind, ProcOps, NO_RET, NO_SOCK};
use crate::hash::FxMap;
use bufpool::format::Addr;
use serde::Serialize;

/// An op: (process index, op index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct OpRef {
    /// Index of the process in [`super::Messages::procs`].
    pub proc: u32,
    /// Index of the op in its process.
    pub idx: u32,
}

/// How a socket came to be known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// `connect` (the client end).
    Connect,
    /// `accept` (the server end).
    Accept,
    /// One end of a `socketpair`.
    Pair,
    /// `socket` (+ `bind`), never connected or accepted.
    Socket,
    /// Used without a recorded setup.
    Unknown,
    /// Met already open (inherited across `exec`, or the trace began late) and described by
    /// the tracer on its first use: addresses and, for TCP, byte offsets ([`Socket::base`]).
    Adopted,
}

/// What happened on a socket, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemKind {
    /// `n` bytes written.
    Send,
    /// `n` bytes read.
    Recv,
    /// `n` bytes peeked (not consumed).
    Peek,
    /// Entries lost in a process using the socket: offsets unknown from here on.
    Gap,
    /// A receive returned 0: the peer's bytes are all read.
    Eof,
    /// A call failed with `ECONNRESET` or `EPIPE`.
    Reset,
    /// The last descriptor of the socket was closed.
    Close,
}

/// One thing that happened on a socket.
#[derive(Clone, Copy, Debug)]
pub struct Item {
    /// The op.
    pub op: OpRef,
    /// Its end TSC.
    pub tsc: u64,
    /// What.
    pub kind: ItemKind,
    /// Bytes (sends, receives, peeks).
    pub n: u64,
}

/// One socket (possibly shared by several processes).
#[derive(Clone, Debug)]
pub struct Socket {
    /// The process that created (or first used) it.
    pub proc: u32,
    /// Its descriptor there.
    pub fd: i32,
    /// How it came to be known.
    pub origin: Origin,
    /// Stream (TCP, UNIX stream) rather than datagram?
    pub stream: bool,
    /// Local address.
    pub local: Option<Addr>,
    /// Peer address.
    pub peer: Option<Addr>,
    /// The setup op (`connect`, `accept`, `socketpair`, `socket`).
    pub setup: Option<OpRef>,
    /// The other end, once paired.
    pub partner: Option<u32>,
    /// Bytes (read, written) on the connection before its first recorded op: (0, 0) but
    /// for an adopted socket (the tracer's count, `None` when it could not be read).
    pub base: Option<(u64, u64)>,
    /// The thread (process index, tid) of its first send, and whether another thread sent
    /// on it too: then the order of their sends is inferred ([`super::stream`]).
    pub writer: Option<(u32, u32)>,
    /// Sends of more than one thread.
    pub shared_writers: bool,
    /// Items in TSC order.
    pub items: Vec<Item>,
    /// Descriptors referring to it now (during the replay).
    refs: u32,
}

impl Socket {
    fn new(proc: u32, fd: i32, origin: Origin, setup: Option<OpRef>) -> Socket {
        Socket {
            proc,
            fd,
            origin,
            stream: true,
            local: None,
            peer: None,
            setup,
            partner: None,
            base: Some((0, 0)),
            writer: None,
            shared_writers: false,
            items: Vec::new(),
            refs: 1,
        }
    }
}

const AF_UNIX: u16 = 1;
const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;
pub(super) const ECONNRESET: i32 = 104;
pub(super) const EPIPE: i32 = 32;
pub(super) const EINPROGRESS: i32 = 115;

/// An address with IPv4-mapped IPv6 turned into IPv4.
pub fn normalize(a: &Addr) -> Addr {
    let b = a.bytes();
    if a.family == AF_INET6 && b.len() == 16 && b[..10] == [0; 10] && b[10..12] == [0xff, 0xff] {
        return Addr::new(AF_INET, a.port, &b[12..16]);
    }
    *a
}

fn is_loopback(a: &Addr) -> bool {
    let b = a.bytes();
    match a.family {
        AF_INET => b.first() == Some(&127),
        AF_INET6 => b.len() == 16 && b[..15] == [0; 15] && b[15] == 1,
        _ => true,
    }
}

fn key_of(a: &Addr) -> String {
    normalize(a).to_display()
}

/// Replays every process's descriptor table; fills `Op::sock` and returns the sockets.
pub fn resolve(procs: &mut [ProcOps]) -> Vec<Socket> {
    let order = replay_order(procs);
    let mut socks: Vec<Socket> = Vec::new();
    let mut snapshots: FxMap<(String, u32), FxMap<i32, u32>> = FxMap::default();
    for pi in order {
        let p = &mut procs[pi];
        let mut fds: FxMap<i32, u32> = if p.forked {
            snapshots
                .remove(&(p.host.clone(), p.pid))
                .unwrap_or_default()
        } else {
            FxMap::default()
        };
        for &s in fds.values() {
            socks[s as usize].refs += 1;
        }
        let pi = pi as u32;
        for i in 0..p.ops.len() {
            let op: Op = p.ops[i];
            let r = OpRef {
                proc: pi,
                idx: i as u32,
            };
            let ok = op.ret != NO_RET && op.ret >= 0;
            let new_sock = |socks: &mut Vec<Socket>, fd: i32, origin: Origin| {
                socks.push(Socket::new(pi, fd, origin, Some(r)));
                (socks.len() - 1) as u32
            };
            let mut sock = NO_SOCK;
            match op.kind {
                OpKind::Socket if ok => {
                    let s = new_sock(&mut socks, op.ret as i32, Origin::Socket);
                    socks[s as usize].stream = matches!(op.aux & 0xf, 1 | 5);
                    release(&mut socks, fds.insert(op.ret as i32, s));
                    sock = s;
                }
                OpKind::Pair if ok && op.aux != u64::MAX => {
                    let a = new_sock(&mut socks, op.fd, Origin::Pair);
                    let b = new_sock(&mut socks, op.aux as i32, Origin::Pair);
                    let stream = op.flags & 0xf != 2;
                    for (x, y) in [(a, b), (b, a)] {
                        socks[x as usize].partner = Some(y);
                        socks[x as usize].stream = stream;
                        socks[x as usize].local = Some(Addr::new(AF_UNIX, 0, &[]));
                    }
                    release(&mut socks, fds.insert(op.fd, a));
                    release(&mut socks, fds.insert(op.aux as i32, b));
                    sock = a;
                }
                OpKind::Bind if ok => {
                    let s = get_or_unknown(&mut socks, &mut fds, pi, op.fd, r);
                    if let Some((Some(l), _)) = p.addrs.get(&r.idx) {
                        socks[s as usize].local = Some(*l);
                    }
                    sock = s;
                }
                OpKind::Connect if ok || op.errno == EINPROGRESS => {
                    let mut s = get_or_unknown(&mut socks, &mut fds, pi, op.fd, r);
                    if socks[s as usize].origin == Origin::Connect {
                        // Connected again (a datagram socket changing peer): a new endpoint.
                        let stream = socks[s as usize].stream;
                        let local = socks[s as usize].local;
                        s = new_sock(&mut socks, op.fd, Origin::Connect);
                        socks[s as usize].stream = stream;
                        socks[s as usize].local = local;
                        release(&mut socks, fds.insert(op.fd, s));
                    }
                    let so = &mut socks[s as usize];
                    so.origin = Origin::Connect;
                    so.setup = Some(r);
                    if let Some((l, pe)) = p.addrs.get(&r.idx) {
                        so.local = l.or(so.local);
                        so.peer = *pe;
                    }
                    sock = s;
                }
                OpKind::Accept if ok => {
                    let s = new_sock(&mut socks, op.ret as i32, Origin::Accept);
                    if let Some((l, pe)) = p.addrs.get(&r.idx) {
                        socks[s as usize].local = *l;
                        socks[s as usize].peer = *pe;
                    }
                    release(&mut socks, fds.insert(op.ret as i32, s));
                    sock = s;
                }
                OpKind::Dup if ok => {
                    if let Some(&s) = fds.get(&op.fd) {
                        let target = if op.aux != u64::MAX {
                            op.aux as i32
                        } else {
                            op.ret as i32
                        };
                        if target != op.fd {
                            socks[s as usize].refs += 1;
                            release(&mut socks, fds.insert(target, s));
                        }
                        sock = s;
                    }
                }
                OpKind::Close => {
                    if let Some(s) = fds.remove(&op.fd) {
                        let so = &mut socks[s as usize];
                        so.refs = so.refs.saturating_sub(1);
                        if so.refs == 0 {
                            so.items.push(Item {
                                op: r,
                                tsc: op.end,
                                kind: ItemKind::Close,
                                n: 0,
                            });
                        }
                        sock = s;
                    }
                }
                OpKind::Shutdown => {
                    sock = fds.get(&op.fd).copied().unwrap_or(NO_SOCK);
                }
                OpKind::Adopt if op.fd >= 0 && !fds.contains_key(&op.fd) => {
                    let s = new_sock(&mut socks, op.fd, Origin::Adopted);
                    release(&mut socks, fds.insert(op.fd, s));
                    let so = &mut socks[s as usize];
                    if let Some((l, pe)) = p.addrs.get(&r.idx) {
                        so.local = *l;
                        so.peer = *pe;
                    }
                    so.base =
                        (op.ret != NO_RET && op.aux != u64::MAX).then_some((op.ret as u64, op.aux));
                    sock = s;
                }
                OpKind::Send | OpKind::Recv | OpKind::Peek if op.fd >= 0 => {
                    let s = get_or_unknown(&mut socks, &mut fds, pi, op.fd, r);
                    let so = &mut socks[s as usize];
                    if let (Some((Some(l), _)), None) = (p.addrs.get(&r.idx), so.local) {
                        // The port the kernel gave on the first send with an address.
                        so.local = Some(*l);
                    }
                    let n = op.bytes();
                    let kind = match op.kind {
                        OpKind::Send => ItemKind::Send,
                        OpKind::Recv => ItemKind::Recv,
                        _ => ItemKind::Peek,
                    };
                    let unknown_count = op.ret > 0
                        && matches!(
                            op.func,
                            bufpool::format::LibFn::Sendmmsg | bufpool::format::LibFn::Recvmmsg
                        );
                    if unknown_count && so.stream {
                        // Messages, not bytes: this side's offsets are unknown from here.
                        so.items.push(Item {
                            op: r,
                            tsc: op.end,
                            kind: ItemKind::Gap,
                            n: 0,
                        });
                    } else if n > 0 {
                        if kind == ItemKind::Send {
                            let w = (pi, op.tid);
                            so.shared_writers |= *so.writer.get_or_insert(w) != w;
                        }
                        so.items.push(Item {
                            op: r,
                            tsc: op.end,
                            kind,
                            n,
                        });
                    } else if op.kind == OpKind::Recv && op.ret == 0 && so.stream {
                        so.items.push(Item {
                            op: r,
                            tsc: op.end,
                            kind: ItemKind::Eof,
                            n: 0,
                        });
                    }
                    if op.ret < 0 && op.ret != NO_RET && matches!(op.errno, ECONNRESET | EPIPE) {
                        so.items.push(Item {
                            op: r,
                            tsc: op.end,
                            kind: ItemKind::Reset,
                            n: 0,
                        });
                    }
                    sock = s;
                }
                OpKind::Gap => {
                    let mut seen: Vec<u32> = fds.values().copied().collect();
                    seen.sort_unstable();
                    seen.dedup();
                    for s in seen {
                        socks[s as usize].items.push(Item {
                            op: r,
                            tsc: op.end,
                            kind: ItemKind::Gap,
                            n: 0,
                        });
                    }
                }
                OpKind::Fork if op.ret > 0 && op.ret != NO_RET => {
                    snapshots.insert((p.host.clone(), op.ret as u32), fds.clone());
                }
                _ => {}
            }
            p.ops[i].sock = sock;
        }
    }
    for s in &mut socks {
        // Several processes' items were appended process by process: merge by TSC, ties
        // by process index — the order of the streamed pass's merge (`streamed.rs`: exit
        // time, then process), so that both number two processes' sends that exit in the
        // same instant alike.
        s.items.sort_by_key(|it| (it.tsc, it.op.proc));
    }
    socks
}

fn release(_socks: &mut [Socket], _old: Option<u32>) {
    // A descriptor number reused without a recorded close (the close of a non-socket fd
    // is not recorded): the old socket simply loses that reference.
    if let Some(o) = _old {
        let s = &mut _socks[o as usize];
        s.refs = s.refs.saturating_sub(1);
    }
}

fn get_or_unknown(
    socks: &mut Vec<Socket>,
    fds: &mut FxMap<i32, u32>,
    proc: u32,
    fd: i32,
    r: OpRef,
) -> u32 {
    if let Some(&s) = fds.get(&fd) {
        return s;
    }
    let mut so = Socket::new(proc, fd, Origin::Unknown, None);
    so.setup = None;
    let _ = r;
    socks.push(so);
    let s = (socks.len() - 1) as u32;
    fds.insert(fd, s);
    s
}

/// Parents before their forked children, then by first event.
fn replay_order(procs: &[ProcOps]) -> Vec<usize> {
    let by_pid: FxMap<(&str, u32), usize> = procs
        .iter()
        .enumerate()
        .map(|(i, p)| ((p.host.as_str(), p.pid), i))
        .collect();
    let depth = |mut i: usize| {
        let mut d = 0u32;
        while procs[i].forked && d < 64 {
            match procs[i]
                .ppid
                .and_then(|pp| by_pid.get(&(procs[i].host.as_str(), pp)))
            {
                Some(&j) if j != i => {
                    i = j;
                    d += 1;
                }
                _ => break,
            }
        }
        d
    };
    let mut order: Vec<usize> = (0..procs.len()).collect();
    order.sort_by_key(|&i| (depth(i), procs[i].ops.first().map_or(0, |o| o.end), i));
    order
}

/// The key under which a stream socket meets its other end: the connecting end (origin
/// [`Origin::Connect`]) and the accepted one of a connection have the same key; loopback
/// and UNIX addresses are meant within `host`, the socket scope of its process
/// (`ProcessTrace::socket_scope`). `None` for a socket that cannot be paired by address.
pub fn pair_key(
    host: &str,
    origin: Origin,
    local: Option<Addr>,
    peer: Option<Addr>,
) -> Option<String> {
    let (Some(l), Some(p)) = (local, peer) else {
        // UNIX sockets: an unnamed end may have no recorded address at all.
        return match (origin, local, peer) {
            (Origin::Connect, _, Some(p)) if p.family == AF_UNIX => {
                Some(format!("unix|{host}|{}", key_of(&p)))
            }
            (Origin::Accept, Some(l), _) if l.family == AF_UNIX => {
                Some(format!("unix|{host}|{}", key_of(&l)))
            }
            _ => None,
        };
    };
    match (l.family, origin) {
        (AF_UNIX, Origin::Connect) => Some(format!("unix|{host}|{}", key_of(&p))),
        (AF_UNIX, Origin::Accept) => Some(format!("unix|{host}|{}", key_of(&l))),
        (AF_INET | AF_INET6, Origin::Connect | Origin::Accept | Origin::Adopted) => {
            // Both ends name the same two addresses; an adopted end does not know which
            // one connected, so the key is the pair in a fixed order.
            let scope = if is_loopback(&normalize(&l)) || is_loopback(&normalize(&p)) {
                host
            } else {
                ""
            };
            let (x, y) = (key_of(&l), key_of(&p));
            let (x, y) = if x <= y { (x, y) } else { (y, x) };
            Some(format!("inet|{scope}|{x}|{y}"))
        }
        _ => None,
    }
}

/// Can ends with these (local, peer) addresses be the two ends of one connection (each
/// one's local address is the other's peer)? Two descriptors of the same end — a socket
/// passed over `SCM_RIGHTS` and met again — have the same key but not this.
pub fn opposite(a: (Option<Addr>, Option<Addr>), b: (Option<Addr>, Option<Addr>)) -> bool {
    let same = |x: Option<Addr>, y: Option<Addr>| match (x, y) {
        (Some(x), Some(y)) => normalize(&x) == normalize(&y),
        _ => false,
    };
    same(a.0, b.1) && same(a.1, b.0)
}

/// The stream ends of one key: connecting, accepted, adopted.
type Ends = (Vec<u32>, Vec<u32>, Vec<u32>);

/// Pairs the stream sockets: sets [`Socket::partner`] of connected pairs.
pub fn pair_streams(procs: &[ProcOps], socks: &mut [Socket]) {
    // key → (connecting sockets, accepted sockets, adopted sockets)
    let mut groups: std::collections::BTreeMap<String, Ends> = Default::default();
    for (i, s) in socks.iter().enumerate() {
        if !s.stream || s.partner.is_some() {
            continue;
        }
        let scope = &procs[s.proc as usize].scope;
        let Some(k) = pair_key(scope, s.origin, s.local, s.peer) else {
            continue;
        };
        let g = groups.entry(k).or_default();
        match s.origin {
            Origin::Connect => g.0.push(i as u32),
            Origin::Adopted => g.2.push(i as u32),
            _ => g.1.push(i as u32),
        }
    }
    let start_ns = |s: &Socket| {
        s.setup.map_or(i64::MIN, |r| {
            let p = &procs[r.proc as usize];
            p.ns(p.ops[r.idx as usize].start)
        })
    };
    let end_ns = |s: &Socket| {
        s.setup.map_or(i64::MAX, |r| {
            let p = &procs[r.proc as usize];
            p.ns(p.ops[r.idx as usize].end)
        })
    };
    let first_ns = |s: &Socket| {
        s.items.first().map_or(i64::MAX, |it| {
            let p = &procs[it.op.proc as usize];
            p.ns(it.tsc)
        })
    };
    for (_, (mut clients, mut servers, adopted)) in groups {
        clients.sort_by_key(|&c| start_ns(&socks[c as usize]));
        servers.sort_by_key(|&c| end_ns(&socks[c as usize]));
        let mut used = vec![false; clients.len()];
        for &sv in &servers {
            let s_host = &procs[socks[sv as usize].proc as usize].host;
            let s_end = end_ns(&socks[sv as usize]);
            let pick = clients.iter().enumerate().position(|(ci, &c)| {
                if used[ci] {
                    return false;
                }
                let cs = &socks[c as usize];
                &procs[cs.proc as usize].host != s_host || start_ns(cs) <= s_end
            });
            if let Some(ci) = pick {
                used[ci] = true;
                let c = clients[ci];
                socks[c as usize].partner = Some(sv);
                socks[sv as usize].partner = Some(c);
            }
        }
        // Adopted ends: each takes the earliest unpaired end of its key (any origin), in
        // the order they were met.
        if adopted.is_empty() {
            continue;
        }
        let mut ends: Vec<u32> = clients
            .iter()
            .chain(servers.iter())
            .chain(adopted.iter())
            .copied()
            .filter(|&e| socks[e as usize].partner.is_none())
            .collect();
        let when: FxMap<u32, i64> = ends
            .iter()
            .map(|&e| {
                let so = &socks[e as usize];
                let t = if so.origin == Origin::Adopted {
                    first_ns(so)
                } else {
                    end_ns(so)
                };
                (e, t)
            })
            .collect();
        ends.sort_by_key(|&e| (when[&e], e));
        let mut adopted: Vec<u32> = adopted
            .into_iter()
            .filter(|e| when.contains_key(e))
            .collect();
        adopted.sort_by_key(|&e| (when[&e], e));
        for a in adopted {
            if socks[a as usize].partner.is_some() {
                continue;
            }
            let ends_of = |x: u32| (socks[x as usize].local, socks[x as usize].peer);
            let pick = ends.iter().copied().find(|&e| {
                e != a
                    && socks[e as usize].partner.is_none()
                    && when[&e] <= when[&a]
                    && opposite(ends_of(a), ends_of(e))
            });
            if let Some(e) = pick {
                socks[a as usize].partner = Some(e);
                socks[e as usize].partner = Some(a);
            }
        }
    }
}
