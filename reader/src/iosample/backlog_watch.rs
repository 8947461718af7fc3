//! The server's sockets followed from one sample to the next, for its backlog
//! ([`super::backlog`]) at the cost of a few hash lookups instead of a walk.
//!
//! A dump of the TCP sockets walks the kernel's whole connection hash: on a machine with
//! 23 GB of memory (262 144 buckets) about 0.3 ms whatever the number of sockets — most of
//! what the backlog cost per sample. Looking one socket up by its addresses and cookie is
//! one hash lookup. So [`SocketWatch`] dumps only when the dump may show something a
//! lookup cannot:
//!
//! - a server process holds a socket inode not classified yet (a new connection) — each
//!   new inode is classified once: a TCP connection of the dump, a listening TCP socket
//!   (a dump of the listening hash), a UNIX-domain socket (one `UNIX_DIAG` request by
//!   inode), or *other*;
//! - it holds an *other* socket (not connected yet, UDP, netlink…): a TCP socket created
//!   and not connected at one dump may be connected at the next sample, so while such a
//!   socket is held every sample dumps, as without the watch;
//! - a connection of the last dump was still being set up (`SYN_SENT`, `SYN_RECV`: the
//!   local peer's end may not exist yet), or a lookup missed a server's end (closed or
//!   reset: the next dump tells);
//! - looking up the followed sockets costs more than a dump (both are timed in thread
//!   CPU time and averaged, and lookups are tried again every [`REPROBE`] samples: a
//!   server with thousands of connections is dumped).
//!
//! Otherwise it looks up the sockets the last dump matched — the servers' ends and the
//! local peers' ends of the same connections, the two [`super::backlog::attribute`] uses —
//! and gets the same answer the dump would have given: the other sockets of the dump are
//! ignored by the attribution anyway.

use super::backlog::{SockDiag, TcpQueue};
use std::collections::{HashMap, HashSet};
use std::io;

/// What a socket inode held by a server process is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// A TCP connection of the last dump (followed by lookups).
    Connection,
    /// A listening TCP socket: it never carries bytes.
    Listening,
    /// A UNIX-domain socket: not measured.
    Unix,
    /// Anything else, or a connection no longer in the connection hash: dumped at every
    /// sample while held.
    Other,
}

/// TCP states of a connection being set up.
const SYN_SENT: u8 = 2;
const SYN_RECV: u8 = 3;
/// The state the kernel's diag reports for a request socket (`TCP_NEW_SYN_RECV`).
const NEW_SYN_RECV: u8 = 12;

fn setting_up(state: u8) -> bool {
    matches!(state, SYN_SENT | SYN_RECV | NEW_SYN_RECV)
}

/// How the sockets of the last sample were measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measured {
    /// A full dump.
    Dump,
    /// Lookups of the followed sockets.
    Lookup,
}

/// While dumps are cheaper, lookups are timed again every this many samples.
pub const REPROBE: u64 = 64;

/// A moving average of CPU times (weight 1/8 to the newest).
fn average(old: Option<u64>, new: u64) -> Option<u64> {
    Some(old.map_or(new, |o| (o * 7 + new) / 8))
}

/// The server processes' sockets, classified, and the connections followed between dumps.
pub struct SocketWatch {
    class: HashMap<u32, Class>,
    /// The sockets to look up: the servers' connections and their local peers' ends.
    followed: Vec<TcpQueue>,
    /// A connection was being set up at the last dump, or a lookup missed a server's end.
    unsettled: bool,
    /// Thread CPU time of a dump (average), ns.
    dump_ns: Option<u64>,
    /// Thread CPU time per socket looked up (average), ns.
    lookup_ns: Option<u64>,
    /// Samples dumped because lookups cost more, since lookups were last timed.
    dearer_dumps: u64,
    /// Choose between dumps and lookups by their cost (off in tests: the choice is
    /// then by what the dump may show only).
    by_cost: bool,
    /// Samples measured by a dump.
    pub dumps: u64,
    /// Samples measured by lookups.
    pub lookups: u64,
}

fn thread_cpu_ns() -> u64 {
    super::sampler::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

impl Default for SocketWatch {
    fn default() -> Self {
        SocketWatch {
            class: HashMap::new(),
            followed: Vec::new(),
            unsettled: false,
            dump_ns: None,
            lookup_ns: None,
            dearer_dumps: 0,
            by_cost: true,
            dumps: 0,
            lookups: 0,
        }
    }
}

impl SocketWatch {
    /// How many sockets are followed between dumps.
    pub fn followed(&self) -> usize {
        self.followed.len()
    }

    /// Puts in `out` (cleared first) the TCP sockets the attribution needs for `holders`
    /// (each server pid with the socket inodes it holds now): by a dump of every socket,
    /// or by looking up the ones followed since the last dump.
    pub fn sockets(
        &mut self,
        diag: &mut SockDiag,
        holders: &[(u32, Vec<u32>)],
        out: &mut Vec<TcpQueue>,
    ) -> io::Result<Measured> {
        out.clear();
        let held: HashSet<u32> = holders.iter().flat_map(|h| h.1.iter().copied()).collect();
        self.class.retain(|i, _| held.contains(i));
        let must_dump = self.unsettled
            || held
                .iter()
                .any(|i| matches!(self.class.get(i), None | Some(Class::Other)));
        let lookup_dearer = self.by_cost
            && self.dearer_dumps < REPROBE
            && match (self.lookup_ns, self.dump_ns) {
                (Some(per), Some(dump)) => per.saturating_mul(self.followed.len() as u64) > dump,
                _ => false,
            };
        if !must_dump && !lookup_dearer {
            let t0 = thread_cpu_ns();
            diag.lookup(&self.followed, out)?;
            let per = thread_cpu_ns().saturating_sub(t0) / self.followed.len().max(1) as u64;
            self.lookup_ns = average(self.lookup_ns, per);
            self.dearer_dumps = 0;
            self.lookups += 1;
            self.check_lookup(out);
            return Ok(Measured::Lookup);
        }
        if !must_dump {
            self.dearer_dumps += 1;
        }
        let t0 = thread_cpu_ns();
        diag.dump_all(out)?;
        self.dump_ns = average(self.dump_ns, thread_cpu_ns().saturating_sub(t0));
        self.dumps += 1;
        self.classify(diag, &held, out)?;
        self.follow(&held, out);
        Ok(Measured::Dump)
    }

    /// After a dump: the held inodes it shows are connections; those never seen before
    /// are classified (listening, UNIX-domain or other); a connection that left the hash
    /// becomes other.
    fn classify(
        &mut self,
        diag: &mut SockDiag,
        held: &HashSet<u32>,
        dumped: &[TcpQueue],
    ) -> io::Result<()> {
        let in_dump: HashSet<u32> = dumped
            .iter()
            .map(|s| s.inode)
            .filter(|i| held.contains(i))
            .collect();
        let mut new = Vec::new();
        for &i in held {
            match (in_dump.contains(&i), self.class.get(&i)) {
                (true, _) => {
                    self.class.insert(i, Class::Connection);
                }
                (false, None) => new.push(i),
                (false, Some(Class::Connection)) => {
                    self.class.insert(i, Class::Other);
                }
                (false, Some(_)) => {}
            }
        }
        if new.is_empty() {
            return Ok(());
        }
        let mut listening = Vec::new();
        diag.dump_listening(&mut listening)?;
        let listening: HashSet<u32> = listening.iter().map(|s| s.inode).collect();
        for i in new {
            let c = if listening.contains(&i) {
                Class::Listening
            } else if diag.is_unix(i)? {
                Class::Unix
            } else {
                Class::Other
            };
            self.class.insert(i, c);
        }
        Ok(())
    }

    /// After a dump: the sockets to look up until the next one — the held connections
    /// and, from the dump, the other end of each of them that is on this machine.
    fn follow(&mut self, held: &HashSet<u32>, dumped: &[TcpQueue]) {
        self.followed.clear();
        let ends: HashMap<_, _> = dumped
            .iter()
            .filter(|s| s.inode != 0 && held.contains(&s.inode))
            .map(|s| ((s.family, s.local, s.peer), s))
            .collect();
        self.unsettled = false;
        for s in dumped {
            let server_end = s.inode != 0 && held.contains(&s.inode);
            let peer_end = !server_end && ends.contains_key(&(s.family, s.peer, s.local));
            if server_end || peer_end {
                self.unsettled |= setting_up(s.state);
                self.followed.push(*s);
            }
        }
    }

    /// After lookups: a server's end that was not found, or a connection still being set
    /// up, makes the next sample dump.
    fn check_lookup(&mut self, found: &[TcpQueue]) {
        let found_inodes: HashSet<u32> = found.iter().map(|s| s.inode).collect();
        let servers_end = |s: &&TcpQueue| self.class.get(&s.inode) == Some(&Class::Connection);
        self.unsettled = found.iter().any(|s| setting_up(s.state))
            || self
                .followed
                .iter()
                .filter(servers_end)
                .any(|s| !found_inodes.contains(&s.inode));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iosample::backlog::attribute;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    /// The inode of one of this process's descriptors, as `/proc/PID/fd` names it.
    fn inode_of(fd: &impl AsRawFd) -> u32 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .unwrap()
            .ino() as u32
    }

    fn received(w: &mut SocketWatch, d: &mut SockDiag, inodes: &[u32]) -> (Measured, u64) {
        let holders = [(1, inodes.to_vec())];
        let mut out = Vec::new();
        let how = w.sockets(d, &holders, &mut out).unwrap();
        let b = attribute(&holders, &out);
        (how, b.get(&1).map_or(0, |b| b.received))
    }

    #[test]
    fn lookups_follow_the_connections_of_the_last_dump() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (srv, _) = l.accept().unwrap();
        let (ua, _ub) = std::os::unix::net::UnixStream::pair().unwrap();
        c.write_all(&[1u8; 10_000]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut held = vec![inode_of(&l), inode_of(&srv), inode_of(&ua)];
        let mut d = SockDiag::open().unwrap();
        // Which of a dump or lookups costs less is not this test's business.
        let mut w = SocketWatch {
            by_cost: false,
            ..SocketWatch::default()
        };
        assert_eq!(received(&mut w, &mut d, &held), (Measured::Dump, 10_000));
        assert_eq!(w.class[&inode_of(&l)], Class::Listening);
        assert_eq!(w.class[&inode_of(&ua)], Class::Unix);
        assert_eq!(w.class[&inode_of(&srv)], Class::Connection);
        // The server's end and the client's: both followed.
        assert_eq!(w.followed.len(), 2, "{:?}", w.followed);
        assert_eq!(received(&mut w, &mut d, &held), (Measured::Lookup, 10_000));
        c.write_all(&[1u8; 5_000]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(received(&mut w, &mut d, &held), (Measured::Lookup, 15_000));
        // A new connection: dumped, then followed too.
        let mut c2 = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (srv2, _) = l.accept().unwrap();
        c2.write_all(&[2u8; 700]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        held.push(inode_of(&srv2));
        assert_eq!(received(&mut w, &mut d, &held), (Measured::Dump, 15_700));
        assert_eq!(received(&mut w, &mut d, &held), (Measured::Lookup, 15_700));
        // A socket that is not classified (UDP): every sample dumps while it is held.
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        held.push(inode_of(&udp));
        assert_eq!(received(&mut w, &mut d, &held), (Measured::Dump, 15_700));
        assert_eq!(w.class[&inode_of(&udp)], Class::Other);
        assert_eq!(received(&mut w, &mut d, &held), (Measured::Dump, 15_700));
        held.pop();
        assert_eq!(received(&mut w, &mut d, &held), (Measured::Lookup, 15_700));
        // The client of the second connection closes: its server end keeps its unread
        // bytes (`CLOSE_WAIT`), still found by lookup.
        drop(c2);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(received(&mut w, &mut d, &held), (Measured::Lookup, 15_700));
        // The first connection reset by its client: the lookup misses the server's end
        // (out of the hash), the next sample dumps, and dumps while the process holds it.
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: setsockopt on an open socket with a valid `linger` of the right size.
        let r = unsafe {
            libc::setsockopt(
                c.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as u32,
            )
        };
        assert_eq!(r, 0);
        drop(c);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(received(&mut w, &mut d, &held), (Measured::Lookup, 700));
        assert_eq!(received(&mut w, &mut d, &held), (Measured::Dump, 700));
        assert_eq!(w.class[&inode_of(&srv)], Class::Other);
        assert_eq!(received(&mut w, &mut d, &held), (Measured::Dump, 700));
        drop(srv);
    }
}
