//! The server's backlog: bytes its clients have written that it has not read yet.
//!
//! A server descheduled on a loaded machine keeps receiving — the kernel queues what its
//! clients send — but its own counters stop moving until it runs again and catches up. So
//! at each sample the sampler also measures, for the server processes' TCP sockets:
//!
//! - **received**: the bytes in their receive queues (received, not yet read by the
//!   process: `rcv_nxt − copied_seq`);
//! - **unsent**: for a client on this machine (the *local* socket connected to a server
//!   socket), the bytes it wrote that the server's socket has not received yet: written
//!   (`tcpi_bytes_acked` + its send queue `write_seq − snd_una`) minus received by the
//!   server's end (`tcpi_bytes_received`), i.e. `write_seq − rcv_nxt` — the bytes waiting
//!   in the client's send queue (when the server's window is full) and those in flight,
//!   which on loopback includes the segments queued on a server socket that its process
//!   holds locked while it reads (the socket's backlog, not yet in `rcv_nxt`). Neither
//!   the send queue alone (a byte received but not yet acknowledged, a delayed ACK,
//!   would count twice) nor the unsent bytes alone (`tcpi_notsent_bytes`: the in-flight
//!   ones would be missed — on this machine they were most of it) is right. Kernels
//!   without the byte counters (before 4.2) fall back to the unsent bytes, or the send
//!   queue before 4.6. The SYN's and a FIN's sequence numbers are not counted as bytes.
//!
//! Both come from `NETLINK_SOCK_DIAG` `inet_diag` (every TCP socket of the network
//! namespace that is not listening or in `TIME_WAIT`, with its `tcp_info`; no text
//! formatting), matched by inode to the sockets the server processes hold (`/proc/[pid]/fd`,
//! listed at every sample: FTP-like servers open a data connection per transfer): a dump of
//! all of them, or — between dumps, see [`super::backlog_watch`] — exact lookups of the
//! ones the last dump matched ([`SockDiag::lookup`]). A socket held by several server processes (a forking server's parent and
//! child) is counted once, for the lowest pid holding it. UNIX-domain sockets and pipes
//! are not measured.

use super::netlink;
use super::procfs::FdDir;
use std::collections::HashMap;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

const NETLINK_SOCK_DIAG: i32 = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const TCPDIAG_GETSOCK: u16 = 18;
/// Every state but `LISTEN` and `TIME_WAIT`.
const STATES: u32 = 0xfff & !(1 << TCP_LISTEN) & !(1 << TCP_TIME_WAIT);
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const TCP_LISTEN: u32 = 10;
const TCP_TIME_WAIT: u32 = 6;
const ESTABLISHED: u8 = 1;
const FIN_WAIT1: u8 = 4;
const FIN_WAIT2: u8 = 5;
const CLOSE_WAIT: u8 = 8;
const LAST_ACK: u8 = 9;
const CLOSING: u8 = 11;
/// Size of `struct inet_diag_msg`.
const MSG_LEN: usize = 72;
/// `INET_DIAG_INFO`: the attribute carrying `struct tcp_info`.
const INET_DIAG_INFO: u16 = 2;
/// Offset of `tcpi_notsent_bytes` in `struct tcp_info` (Linux ≥ 4.6).
const OFF_NOTSENT: usize = 144;
/// Offsets of `tcpi_bytes_acked` and `tcpi_bytes_received` (u64, Linux ≥ 4.2).
const OFF_BYTES_ACKED: usize = 120;
const OFF_BYTES_RECEIVED: usize = 128;

/// An address (IPv4 in the first 4 bytes) and a port.
pub type Endpoint = ([u8; 16], u16);

/// One TCP socket of the dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpQueue {
    /// Address family (`AF_INET`, `AF_INET6`).
    pub family: u8,
    /// TCP state (`TCP_ESTABLISHED` = 1…).
    pub state: u8,
    /// Local address (IPv4 in the first 4 bytes) and port.
    pub local: Endpoint,
    /// Peer address and port.
    pub peer: Endpoint,
    /// Bytes received and not read by the process.
    pub rqueue: u32,
    /// Bytes written and not acknowledged yet (`write_seq − snd_una`).
    pub wqueue: u32,
    /// Bytes written and not sent yet (`tcpi_notsent_bytes`), if the kernel has it.
    pub notsent: Option<u32>,
    /// Bytes the peer acknowledged (`tcpi_bytes_acked`), if the kernel has it.
    pub bytes_acked: Option<u64>,
    /// Bytes received (`tcpi_bytes_received`), if the kernel has it.
    pub bytes_received: Option<u64>,
    /// Socket inode (as in `/proc/[pid]/fd`'s `socket:[N]`); 0 for orphans.
    pub inode: u32,
    /// Interface the socket is bound to (0: any), part of its identity for a lookup.
    pub ifindex: u32,
    /// The kernel's cookie of the socket (`idiag_cookie`, native byte order): a lookup
    /// by address finds this socket and no later one that reused its addresses.
    pub cookie: u64,
}

/// Whether a socket of the dump is listening.
pub fn is_listening(s: &TcpQueue) -> bool {
    u32::from(s.state) == TCP_LISTEN
}

/// An address and port as `/proc/net/tcp` users write them: `127.0.0.1:21`, `[::1]:21`.
pub fn endpoint_text(family: u8, (addr, port): &Endpoint) -> String {
    if i32::from(family) == libc::AF_INET {
        format!(
            "{}:{port}",
            std::net::Ipv4Addr::new(addr[0], addr[1], addr[2], addr[3])
        )
    } else {
        format!("[{}]:{port}", std::net::Ipv6Addr::from(*addr))
    }
}

/// A `NETLINK_SOCK_DIAG` socket, kept open across samples.
pub struct SockDiag {
    fd: OwnedFd,
    buf: Vec<u8>,
    /// The answers of lookups, [`SLOT`] bytes each.
    slots: Vec<u8>,
    seq: u32,
    /// The kernel refused `TCPDIAG_GETSOCK`: one dump per family.
    no_compat: bool,
}

impl SockDiag {
    /// Opens the netlink socket (no privilege needed: the dump lists the namespace's
    /// sockets, as `/proc/net/tcp` does).
    pub fn open() -> io::Result<SockDiag> {
        // SAFETY: plain socket(2) call; the descriptor is owned right after.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                NETLINK_SOCK_DIAG,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(SockDiag {
            // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            buf: vec![0u8; 64 << 10],
            slots: vec![0u8; SLOT * LOOKUP_BATCH],
            seq: 0,
            no_compat: false,
        })
    }

    /// Writes the `nlmsghdr` of a dump request of type `kind` at the start of `req` (its
    /// length is the whole request's), with the next sequence number.
    fn dump_header(&mut self, req: &mut [u8], kind: u16) {
        self.seq = self.seq.wrapping_add(1);
        header(req, kind, NLM_F_REQUEST | NLM_F_DUMP, self.seq);
    }

    /// Every TCP socket of one family (`AF_INET` or `AF_INET6`) that is neither listening
    /// nor in `TIME_WAIT`, appended to `out`.
    pub fn dump(&mut self, family: u8, out: &mut Vec<TcpQueue>) -> io::Result<()> {
        // nlmsghdr (16) + inet_diag_req_v2 (56).
        let mut req = [0u8; 72];
        self.dump_header(&mut req, SOCK_DIAG_BY_FAMILY);
        req[16] = family;
        req[17] = libc::IPPROTO_TCP as u8;
        req[18] = 1 << (INET_DIAG_INFO - 1);
        req[20..24].copy_from_slice(&STATES.to_ne_bytes());
        self.request(&req, out)
    }

    /// Every TCP socket of both families in one walk of the kernel's connection hash (the
    /// walk, not the sockets, is most of a dump's cost on a machine with few connections):
    /// the original `TCPDIAG_GETSOCK` request, which dumps every family. Falls back to one
    /// [`SockDiag::dump`] per family if the kernel refuses it.
    pub fn dump_all(&mut self, out: &mut Vec<TcpQueue>) -> io::Result<()> {
        self.dump_states(STATES, out)
    }

    /// Every TCP socket of both families but those in `TIME_WAIT`, listening ones included.
    pub fn dump_with_listening(&mut self, out: &mut Vec<TcpQueue>) -> io::Result<()> {
        self.dump_states(STATES | 1 << TCP_LISTEN, out)
    }

    /// The listening TCP sockets of both families (a walk of the listening hash only).
    pub fn dump_listening(&mut self, out: &mut Vec<TcpQueue>) -> io::Result<()> {
        self.dump_states(1 << TCP_LISTEN, out)
    }

    /// [`SockDiag::dump_all`] of the sockets in `states` (a bit per TCP state).
    fn dump_states(&mut self, states: u32, out: &mut Vec<TcpQueue>) -> io::Result<()> {
        if !self.no_compat {
            // nlmsghdr (16) + inet_diag_req (60): family, src_len, dst_len, ext, sockid
            // (48), states, dbs.
            let mut req = [0u8; 76];
            self.dump_header(&mut req, TCPDIAG_GETSOCK);
            req[16] = libc::AF_INET as u8;
            req[19] = 1 << (INET_DIAG_INFO - 1);
            req[68..72].copy_from_slice(&states.to_ne_bytes());
            let before = out.len();
            match self.request(&req, out) {
                Ok(()) => return Ok(()),
                Err(_) => {
                    out.truncate(before);
                    self.no_compat = true;
                }
            }
        }
        for family in [libc::AF_INET as u8, libc::AF_INET6 as u8] {
            let mut req = [0u8; 72]; // nlmsghdr (16) + inet_diag_req_v2 (56)
            self.dump_header(&mut req, SOCK_DIAG_BY_FAMILY);
            req[16] = family;
            req[17] = libc::IPPROTO_TCP as u8;
            req[18] = 1 << (INET_DIAG_INFO - 1);
            req[20..24].copy_from_slice(&states.to_ne_bytes());
            self.request(&req, out)?;
        }
        Ok(())
    }

    /// Whether socket `inode` is a UNIX-domain socket of this network namespace (one
    /// `UNIX_DIAG` request by inode; `false` also where the kernel has no `unix_diag`).
    pub fn is_unix(&mut self, inode: u32) -> io::Result<bool> {
        // nlmsghdr (16) + unix_diag_req (24): family, protocol, pad, states, inode, show,
        // cookie (all ones: not checked).
        let mut req = [0u8; 40];
        self.seq = self.seq.wrapping_add(1);
        header(&mut req, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, self.seq);
        req[16] = libc::AF_UNIX as u8;
        req[20..24].copy_from_slice(&u32::MAX.to_ne_bytes());
        req[24..28].copy_from_slice(&inode.to_ne_bytes());
        req[32..40].copy_from_slice(&[0xff; 8]);
        self.send(&req)?;
        loop {
            let n = self.recv()?;
            let mut b = &self.buf[..n];
            while let Some((ty, mseq, body)) = next_message(&mut b)? {
                if mseq != self.seq {
                    continue;
                }
                return match ty {
                    SOCK_DIAG_BY_FAMILY => Ok(true),
                    NLMSG_ERROR => match error_of(body) {
                        0 | libc::ENOENT | libc::EINVAL | libc::EOPNOTSUPP => Ok(false),
                        e => Err(io::Error::from_raw_os_error(e)),
                    },
                    _ => Ok(false),
                };
            }
        }
    }

    /// Looks the sockets `ids` up again by their addresses, interface and cookie, as a
    /// dump gave them: one exact request each (a lookup in the kernel's connection hash,
    /// where a dump walks all of it). Those still open, neither listening nor in
    /// `TIME_WAIT`, are appended to `out` with their queues now; a socket closed since
    /// (or whose addresses a newer one took) is absent.
    pub fn lookup(&mut self, ids: &[TcpQueue], out: &mut Vec<TcpQueue>) -> io::Result<()> {
        for batch in ids.chunks(LOOKUP_BATCH) {
            self.lookup_batch(batch, out)?;
        }
        Ok(())
    }

    /// One `sendto` of `ids.len()` ≤ [`LOOKUP_BATCH`] requests, then their answers: each
    /// request gets one message, the socket or an error (`ENOENT`: gone).
    fn lookup_batch(&mut self, ids: &[TcpQueue], out: &mut Vec<TcpQueue>) -> io::Result<()> {
        const REQ: usize = 72; // nlmsghdr (16) + inet_diag_req_v2 (56)
        let first = self.seq.wrapping_add(1);
        let mut req = [0u8; REQ * LOOKUP_BATCH];
        for (r, s) in req.chunks_exact_mut(REQ).zip(ids) {
            self.seq = self.seq.wrapping_add(1);
            header(r, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, self.seq);
            r[16] = s.family;
            r[17] = libc::IPPROTO_TCP as u8;
            r[18] = 1 << (INET_DIAG_INFO - 1);
            r[20..24].copy_from_slice(&STATES.to_ne_bytes());
            // inet_diag_sockid: ports (network order), addresses, interface, cookie.
            r[24..26].copy_from_slice(&s.local.1.to_be_bytes());
            r[26..28].copy_from_slice(&s.peer.1.to_be_bytes());
            r[28..44].copy_from_slice(&s.local.0);
            r[44..60].copy_from_slice(&s.peer.0);
            r[60..64].copy_from_slice(&s.ifindex.to_ne_bytes());
            r[64..72].copy_from_slice(&s.cookie.to_ne_bytes());
        }
        self.send(&req[..REQ * ids.len()])?;
        let mut answered = [false; LOOKUP_BATCH];
        let mut pending = ids.len();
        while pending > 0 {
            let mut lens = [0usize; LOOKUP_BATCH];
            let got = self.recv_many(pending, &mut lens)?;
            for (slot, &n) in self.slots.chunks(SLOT).zip(&lens[..got]) {
                let mut b = &slot[..n];
                while let Some((ty, mseq, body)) = next_message(&mut b)? {
                    let i = mseq.wrapping_sub(first) as usize;
                    if i >= ids.len() || answered[i] {
                        continue; // an answer to an earlier request
                    }
                    answered[i] = true;
                    pending -= 1;
                    match ty {
                        SOCK_DIAG_BY_FAMILY if body.len() >= MSG_LEN => {
                            let q = msg(body);
                            if STATES & 1u32.checked_shl(q.state.into()).unwrap_or(0) != 0 {
                                out.push(q);
                            }
                        }
                        NLMSG_ERROR => match error_of(body) {
                            0 | libc::ENOENT => {}
                            e => return Err(io::Error::from_raw_os_error(e)),
                        },
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }

    /// Receives up to `max` ≤ [`LOOKUP_BATCH`] datagrams in one `recvmmsg` (waiting for
    /// the first only), each into its [`SLOT`] of `slots`; their lengths go to `lens`.
    /// Returns how many came. The answers to exact requests are one datagram each, all
    /// queued by the time `sendto` returns: one system call instead of one per answer.
    fn recv_many(&mut self, max: usize, lens: &mut [usize; LOOKUP_BATCH]) -> io::Result<usize> {
        let mut bufs: Vec<&mut [u8]> = self
            .slots
            .chunks_mut(SLOT)
            .take(max.min(LOOKUP_BATCH))
            .collect();
        let got = netlink::recv_batch(&self.fd, &mut bufs, libc::MSG_WAITFORONE)?;
        for (l, r) in lens.iter_mut().zip(&got) {
            if r.truncated {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "sock_diag: an answer longer than its buffer",
                ));
            }
            *l = r.len;
        }
        Ok(got.len())
    }

    fn send(&self, req: &[u8]) -> io::Result<()> {
        netlink::send(&self.fd, req)
    }

    /// Receives one datagram into `buf`; its length.
    fn recv(&mut self) -> io::Result<usize> {
        netlink::recv(&self.fd, &mut self.buf)
    }

    fn request(&mut self, req: &[u8], out: &mut Vec<TcpQueue>) -> io::Result<()> {
        self.send(req)?;
        loop {
            let n = self.recv()?;
            if parse(&self.buf[..n], self.seq, out)? {
                return Ok(());
            }
        }
    }
}

/// Bytes of each answer's buffer in [`SockDiag::lookup`] (an answer — message, `tcp_info`
/// and the other default attributes — is under 1 KB; a longer one is an error, not cut).
const SLOT: usize = 4096;

/// Most requests of one [`SockDiag::lookup`] `sendto`: their answers (≤ 72 + 4 + 248
/// bytes each) fit the netlink socket's default receive buffer many times over.
const LOOKUP_BATCH: usize = 64;

/// Writes an `nlmsghdr` at the start of `req` (its length is the whole request's).
fn header(req: &mut [u8], kind: u16, flags: u16, seq: u32) {
    let len = req.len() as u32;
    req[0..4].copy_from_slice(&len.to_ne_bytes());
    req[4..6].copy_from_slice(&kind.to_ne_bytes());
    req[6..8].copy_from_slice(&flags.to_ne_bytes());
    req[8..12].copy_from_slice(&seq.to_ne_bytes());
}

/// The next netlink message of a datagram — type, sequence number, body — advancing `b`
/// past it; `None` at the end.
fn next_message<'a>(b: &mut &'a [u8]) -> io::Result<Option<(u16, u32, &'a [u8])>> {
    if b.len() < 16 {
        return Ok(None);
    }
    let len = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize;
    let ty = u16::from_ne_bytes([b[4], b[5]]);
    let seq = u32::from_ne_bytes([b[8], b[9], b[10], b[11]]);
    if len < 16 || len > b.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "sock_diag: truncated netlink message",
        ));
    }
    let body = &b[16..len];
    *b = &b[((len + 3) & !3).min(b.len())..];
    Ok(Some((ty, seq, body)))
}

/// The errno of an `NLMSG_ERROR` message's body (positive; 0 for an acknowledgement).
fn error_of(body: &[u8]) -> i32 {
    -body
        .get(..4)
        .map_or(0, |e| i32::from_ne_bytes([e[0], e[1], e[2], e[3]]))
}

/// Parses one datagram of a dump's replies; `Ok(true)` at its end (`NLMSG_DONE`).
fn parse(mut b: &[u8], seq: u32, out: &mut Vec<TcpQueue>) -> io::Result<bool> {
    while let Some((ty, mseq, body)) = next_message(&mut b)? {
        if mseq != seq {
            continue;
        }
        match ty {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => return Err(io::Error::from_raw_os_error(error_of(body))),
            SOCK_DIAG_BY_FAMILY | TCPDIAG_GETSOCK if body.len() >= MSG_LEN => out.push(msg(body)),
            _ => {}
        }
    }
    Ok(false)
}

/// Decodes a `struct inet_diag_msg`.
fn msg(m: &[u8]) -> TcpQueue {
    let u32_at = |o: usize| u32::from_ne_bytes([m[o], m[o + 1], m[o + 2], m[o + 3]]);
    // Attributes after the message: the `tcp_info` one, if present, has the unsent bytes.
    let (mut notsent, mut bytes_acked, mut bytes_received) = (None, None, None);
    let mut a = &m[MSG_LEN..];
    while a.len() >= 4 {
        let len = u16::from_ne_bytes([a[0], a[1]]) as usize;
        let ty = u16::from_ne_bytes([a[2], a[3]]);
        if len < 4 || len > a.len() {
            break;
        }
        if ty == INET_DIAG_INFO {
            let u64_at = |o: usize| {
                let o = 4 + o;
                (len >= o + 8).then(|| {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&a[o..o + 8]);
                    u64::from_ne_bytes(b)
                })
            };
            bytes_acked = u64_at(OFF_BYTES_ACKED);
            bytes_received = u64_at(OFF_BYTES_RECEIVED);
            let o = 4 + OFF_NOTSENT;
            if len >= o + 4 {
                notsent = Some(u32::from_ne_bytes([a[o], a[o + 1], a[o + 2], a[o + 3]]));
            }
        }
        a = &a[((len + 3) & !3).min(a.len())..];
    }
    let addr = |o: usize| {
        let mut a = [0u8; 16];
        a.copy_from_slice(&m[o..o + 16]);
        a
    };
    TcpQueue {
        family: m[0],
        state: m[1],
        local: (addr(8), u16::from_be_bytes([m[4], m[5]])),
        peer: (addr(24), u16::from_be_bytes([m[6], m[7]])),
        rqueue: u32_at(56),
        wqueue: u32_at(60),
        notsent,
        bytes_acked,
        bytes_received,
        inode: u32_at(68),
        ifindex: u32_at(40),
        cookie: u64::from_ne_bytes(m[44..52].try_into().expect("8 bytes")),
    }
}

/// The socket inodes a process holds (`socket:[N]` links of `/proc/[pid]/fd`); `None` if
/// the directory cannot be listed (gone, or another user's).
pub fn socket_inodes(pid: u32) -> Option<Vec<u32>> {
    socket_inodes_in(&mut FdDir::open(pid).ok()?)
}

/// [`socket_inodes`] of a process's descriptor directory kept open.
pub fn socket_inodes_in(dir: &mut FdDir) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    dir.for_each_target(|t| {
        if let Some(n) = t
            .strip_prefix(b"socket:[")
            .and_then(|s| s.strip_suffix(b"]"))
            .and_then(|s| std::str::from_utf8(s).ok())
            .and_then(|s| s.parse().ok())
        {
            out.push(n);
        }
    })
    .ok()?;
    Some(out)
}

/// Received and unsent bytes per server process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Bytes in the receive queues of its TCP sockets.
    pub received: u64,
    /// Bytes in the send queues of local sockets connected to them.
    pub unsent: u64,
}

/// One TCP connection of a server process, as [`server_ends`] finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerEnd {
    /// The server process it counts for (the lowest pid holding it).
    pub pid: u32,
    /// Its socket inode.
    pub inode: u32,
    /// Bytes in its receive queue (received, not read; a FIN is not a byte).
    pub unread: u64,
    /// Bytes its local peer wrote that it has not received yet (0 for a remote peer).
    pub unsent: u64,
    /// Bytes the server process has read from it (`tcpi_bytes_received` minus the
    /// receive queue, a FIN not counted), if the kernel has the byte counters.
    pub taken: Option<u64>,
}

/// The dumped sockets held by the server processes: `holders` lists each server pid with
/// its socket inodes, in increasing pid order (a socket held by several counts for the
/// first), each with its local peer's unsent bytes.
pub fn server_ends(holders: &[(u32, Vec<u32>)], sockets: &[TcpQueue]) -> Vec<ServerEnd> {
    let mut owner: HashMap<u32, u32> = HashMap::new();
    for (pid, inodes) in holders {
        for &i in inodes {
            owner.entry(i).or_insert(*pid);
        }
    }
    // The server's connections by (local, peer), to find their local peers' ends.
    let mut ends: HashMap<(u8, Endpoint, Endpoint), (usize, &TcpQueue)> = HashMap::new();
    let mut out: Vec<ServerEnd> = Vec::new();
    for s in sockets {
        if let Some(&pid) = (s.inode != 0).then(|| owner.get(&s.inode)).flatten() {
            ends.insert((s.family, s.local, s.peer), (out.len(), s));
            // A FIN received takes one sequence number (in `bytes_received`, and in the
            // receive queue until read): not a byte.
            let fin = u32::from(matches!(s.state, CLOSE_WAIT | LAST_ACK | CLOSING));
            let unread = s.rqueue.saturating_sub(fin);
            out.push(ServerEnd {
                pid,
                inode: s.inode,
                unread: u64::from(unread),
                unsent: 0,
                taken: s
                    .bytes_received
                    .map(|r| r.saturating_sub(u64::from(fin) + u64::from(unread))),
            });
        }
    }
    for p in sockets {
        if owner.contains_key(&p.inode) {
            continue; // the server's own end
        }
        let Some(&(at, s)) = ends.get(&(p.family, p.peer, p.local)) else {
            continue;
        };
        // Written by the client, not received by the server's end: `write_seq − rcv_nxt`.
        // `tcpi_bytes_acked` counts the SYN's sequence number, and the send queue a FIN
        // the client queued or sent that the server's end has not received yet: not bytes.
        let u = match (p.bytes_acked, s.bytes_received) {
            (Some(acked), Some(received)) => {
                let fin = u64::from(
                    matches!(p.state, FIN_WAIT1 | FIN_WAIT2 | CLOSING | LAST_ACK)
                        && matches!(s.state, ESTABLISHED | FIN_WAIT1 | FIN_WAIT2),
                );
                (acked + u64::from(p.wqueue)).saturating_sub(received + 1 + fin)
            }
            _ => u64::from(p.notsent.unwrap_or(p.wqueue)),
        };
        out[at].unsent += u;
    }
    out
}

/// Attributes the dumped sockets to the server processes ([`server_ends`], summed per
/// pid). Processes without backlog are absent from the result.
pub fn attribute(holders: &[(u32, Vec<u32>)], sockets: &[TcpQueue]) -> HashMap<u32, Backlog> {
    backlog_of(&server_ends(holders, sockets))
}

/// The backlog per server process of its connections `ends`; processes without backlog
/// are absent.
pub fn backlog_of(ends: &[ServerEnd]) -> HashMap<u32, Backlog> {
    let mut out: HashMap<u32, Backlog> = HashMap::new();
    for e in ends {
        if e.unread > 0 || e.unsent > 0 {
            let b = out.entry(e.pid).or_default();
            b.received += e.unread;
            b.unsent += e.unsent;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn v4(a: [u8; 4], port: u16) -> ([u8; 16], u16) {
        let mut x = [0u8; 16];
        x[..4].copy_from_slice(&a);
        (x, port)
    }

    #[test]
    fn a_message_decodes_at_the_kernels_offsets() {
        let mut m = [0u8; MSG_LEN];
        m[0] = libc::AF_INET as u8;
        m[4..6].copy_from_slice(&21u16.to_be_bytes());
        m[6..8].copy_from_slice(&40000u16.to_be_bytes());
        m[8..12].copy_from_slice(&[127, 0, 0, 1]);
        m[24..28].copy_from_slice(&[127, 0, 0, 2]);
        m[56..60].copy_from_slice(&1234u32.to_ne_bytes());
        m[60..64].copy_from_slice(&55u32.to_ne_bytes());
        m[68..72].copy_from_slice(&777u32.to_ne_bytes());
        let q = msg(&m);
        assert_eq!(q.local, v4([127, 0, 0, 1], 21));
        assert_eq!(q.peer, v4([127, 0, 0, 2], 40000));
        assert_eq!((q.rqueue, q.wqueue, q.inode), (1234, 55, 777));
        // With a `tcp_info` attribute: the byte counters.
        let mut with = m.to_vec();
        let mut info = vec![0u8; 4 + 160];
        info[0..2].copy_from_slice(&164u16.to_ne_bytes());
        info[2..4].copy_from_slice(&INET_DIAG_INFO.to_ne_bytes());
        info[4 + OFF_NOTSENT..8 + OFF_NOTSENT].copy_from_slice(&40u32.to_ne_bytes());
        info[4 + OFF_BYTES_ACKED..12 + OFF_BYTES_ACKED].copy_from_slice(&9u64.to_ne_bytes());
        info[4 + OFF_BYTES_RECEIVED..12 + OFF_BYTES_RECEIVED]
            .copy_from_slice(&(1u64 << 33).to_ne_bytes());
        with.extend(info);
        let q = msg(&with);
        assert_eq!(q.wqueue, 55);
        assert_eq!(
            (q.notsent, q.bytes_acked, q.bytes_received),
            (Some(40), Some(9), Some(1 << 33))
        );
    }

    #[test]
    fn sockets_are_attributed_once_with_their_local_peers() {
        let server = v4([127, 0, 0, 1], 21);
        let client = v4([127, 0, 0, 1], 40000);
        let other = v4([127, 0, 0, 1], 40001);
        let s = |inode, local, peer, rqueue, wqueue| TcpQueue {
            family: 2,
            state: 1,
            local,
            peer,
            rqueue,
            wqueue,
            notsent: None,
            bytes_acked: None,
            bytes_received: None,
            inode,
            ifindex: 0,
            cookie: 0,
        };
        let sockets = [
            s(10, server, client, 300, 7), // the server's end: its wqueue is its own
            s(11, client, server, 0, 500), // the client's end, waiting to be received
            s(12, other, server, 9, 900),  // another connection: not the server's
        ];
        // Both processes hold socket 10 (a forking server): counted for pid 5 only.
        let b = attribute(&[(5, vec![10]), (6, vec![10, 99])], &sockets);
        assert_eq!(b.len(), 1);
        assert_eq!(
            b[&5],
            Backlog {
                received: 300,
                unsent: 500
            }
        );
        // With the byte counters: 1 000 bytes received and not read, 400 of them not
        // acknowledged yet (a delayed ACK), 250 more in flight, 100 not sent.
        let mut srv = s(10, server, client, 1000, 0);
        srv.bytes_received = Some(5000);
        let mut cli = s(11, client, server, 0, 400 + 250 + 100);
        cli.bytes_acked = Some(4601); // the SYN counts
        cli.notsent = Some(100);
        let b = attribute(&[(5, vec![10])], &[srv, cli]);
        assert_eq!(
            b[&5],
            Backlog {
                received: 1000,
                unsent: 350
            }
        );
    }

    /// A connected loopback TCP pair: (client, the server's accepted end).
    fn loopback_pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (srv, _) = l.accept().unwrap();
        (c, srv)
    }

    /// The socket inode of `s`, as `/proc/PID/fd` names it.
    fn inode_of(s: &std::net::TcpStream) -> u32 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(format!("/proc/self/fd/{}", s.as_raw_fd()))
            .unwrap()
            .ino() as u32
    }

    #[test]
    fn a_real_loopback_connection_shows_what_was_not_read() {
        use std::io::Write;
        let (mut c, srv) = loopback_pair();
        c.write_all(&[7u8; 10_000]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let inode = inode_of(&srv);
        let mut d = SockDiag::open().unwrap();
        let mut all = Vec::new();
        d.dump(libc::AF_INET as u8, &mut all).unwrap();
        let b = attribute(&[(1, vec![inode])], &all);
        assert_eq!(b[&1].received, 10_000, "{all:?}");
        // The same from the one-walk dump of both families.
        let mut both = Vec::new();
        d.dump_all(&mut both).unwrap();
        assert!(!d.no_compat);
        assert_eq!(attribute(&[(1, vec![inode])], &both)[&1].received, 10_000);
        // Looked up by addresses and cookie: the same two sockets, the same queues.
        let port = srv.local_addr().unwrap().port();
        let ends: Vec<TcpQueue> = both
            .iter()
            .filter(|s| s.local.1 == port || s.peer.1 == port)
            .copied()
            .collect();
        assert_eq!(ends.len(), 2, "{both:?}");
        let mut again = Vec::new();
        d.lookup(&ends, &mut again).unwrap();
        assert_eq!(again, ends);
        // A cookie that is not the socket's: not found.
        let mut wrong = ends.clone();
        wrong[0].cookie ^= 1;
        again.clear();
        d.lookup(&wrong, &mut again).unwrap();
        assert_eq!(again, ends[1..]);
        let me = socket_inodes(std::process::id()).unwrap();
        assert!(me.contains(&inode));
    }

    #[test]
    fn what_a_client_wrote_is_received_or_unsent_never_both() {
        use std::io::Write;
        let (mut c, srv) = loopback_pair();
        // The server does not read: write until the receive window and the send buffer
        // are both full.
        c.set_nonblocking(true).unwrap();
        let chunk = [1u8; 65536];
        let mut total = 0u64;
        loop {
            match c.write(&chunk) {
                Ok(n) => total += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        let inode = inode_of(&srv);
        let mut d = SockDiag::open().unwrap();
        let mut all = Vec::new();
        d.dump(libc::AF_INET as u8, &mut all).unwrap();
        let b = attribute(&[(1, vec![inode])], &all)[&1];
        assert!(b.unsent > 0, "the window filled: {b:?} of {total}");
        assert_eq!(b.received + b.unsent, total, "{b:?}");
    }
}
