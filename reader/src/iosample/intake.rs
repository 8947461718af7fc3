//! The server's intake: the bytes each server process has read from its TCP sockets.
//!
//! A server's own IO counters count what it *wrote*; a server that reads a request body
//! into a buffer and writes it later (nginx holds up to `client_body_buffer_size` of each
//! body) holds bytes that are neither in its counters nor, once read, in its sockets'
//! receive queues (the backlog, [`super::backlog`]). What it has read is known per socket
//! from the same `NETLINK_SOCK_DIAG` answers the backlog uses: `tcpi_bytes_received` minus
//! the receive queue ([`super::backlog::ServerEnd::taken`]). [`Intake`] follows every
//! server socket from sample to sample and cumulates, per server process, the growth of
//! what each has taken in.
//!
//! A socket that closed between two samples cannot be asked any more: it is credited
//! with what its peer had written by the last sample that saw it (its bytes then taken,
//! unread and — for a local peer — unsent), which the server read before closing unless
//! it reset the connection; what the peer wrote after that sample is not known. The
//! sockets closed so far are counted so that a reader knows which intervals may miss
//! such reads. A socket opened and closed between two samples is never seen.

use super::backlog::ServerEnd;
use std::collections::HashMap;

/// A server socket as last seen.
#[derive(Clone, Copy, Debug)]
struct Followed {
    pid: u32,
    taken: u64,
    /// What it will have taken by its close, as far as known: taken + unread + unsent.
    expected: u64,
}

/// Cumulative intake of one server process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Taken {
    /// Bytes read from its TCP sockets since the first sample.
    pub bytes: u64,
    /// Its sockets that closed between samples (their last reads estimated).
    pub closed: u64,
}

/// The server processes' intake, followed from sample to sample.
#[derive(Default)]
pub struct Intake {
    sockets: HashMap<u32, Followed>,
    totals: HashMap<u32, Taken>,
    written: HashMap<u32, Taken>,
    started: bool,
}

impl Intake {
    /// Takes the server sockets of one sample ([`super::backlog::server_ends`] of a dump
    /// or of lookups that succeeded). `pids`: the server processes sampled now (each gets
    /// an intake, 0 if it holds no socket). Sockets without byte counters (kernels before
    /// 4.2) are not counted.
    pub fn update(&mut self, pids: &[u32], ends: &[ServerEnd]) {
        for &p in pids {
            self.totals.entry(p).or_default();
        }
        let mut now: HashMap<u32, Followed> = HashMap::with_capacity(ends.len());
        for e in ends {
            let Some(taken) = e.taken else { continue };
            let f = Followed {
                pid: e.pid,
                taken,
                expected: taken + e.unread + e.unsent,
            };
            // Before the first sample nothing is counted: the origin is the first sample's.
            let before = match self.sockets.get(&e.inode) {
                Some(old) => old.taken.min(taken),
                None if self.started => 0,
                None => taken,
            };
            let t = self.totals.entry(e.pid).or_default();
            t.bytes += taken - before;
            now.insert(e.inode, f);
        }
        for (inode, old) in self.sockets.drain() {
            if now.contains_key(&inode) {
                continue;
            }
            let t = self.totals.entry(old.pid).or_default();
            t.bytes += old.expected - old.taken;
            t.closed += 1;
        }
        self.sockets = now;
        self.started = true;
    }

    /// The (pid, bytes, closed) that changed since the last call (every process the first
    /// time), sorted by pid.
    pub fn changed(&mut self) -> Vec<(u32, u64, u64)> {
        let first = self.written.is_empty();
        let mut out: Vec<(u32, u64, u64)> = self
            .totals
            .iter()
            .filter(|(p, t)| first || self.written.get(p) != Some(t))
            .map(|(&p, t)| (p, t.bytes, t.closed))
            .collect();
        out.sort_unstable();
        for &(p, bytes, closed) in &out {
            self.written.insert(p, Taken { bytes, closed });
        }
        out
    }

    /// The cumulative intake of `pid`, if it was a server process sampled.
    pub fn of(&self, pid: u32) -> Option<Taken> {
        self.totals.get(&pid).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(pid: u32, inode: u32, taken: u64, unread: u64, unsent: u64) -> ServerEnd {
        ServerEnd {
            pid,
            inode,
            unread,
            unsent,
            taken: Some(taken),
        }
    }

    #[test]
    fn growth_is_cumulated_and_a_closed_socket_counts_what_its_peer_had_written() {
        let mut it = Intake::default();
        // First sample: the origin (an open socket's past is not counted).
        it.update(&[5], &[end(5, 1, 1000, 10, 0)]);
        assert_eq!(it.changed(), vec![(5, 0, 0)]);
        // It read 500 more; a new socket read 300 since it appeared.
        it.update(&[5], &[end(5, 1, 1500, 0, 0), end(5, 2, 300, 40, 60)]);
        assert_eq!(it.changed(), vec![(5, 800, 0)]);
        // Nothing changed: nothing written.
        it.update(&[5], &[end(5, 1, 1500, 0, 0), end(5, 2, 300, 40, 60)]);
        assert!(it.changed().is_empty());
        // Socket 2 closed: its 40 unread and 60 unsent were read before the close.
        it.update(&[5], &[end(5, 1, 1500, 0, 0)]);
        assert_eq!(it.changed(), vec![(5, 900, 1)]);
        assert_eq!(
            it.of(5),
            Some(Taken {
                bytes: 900,
                closed: 1
            })
        );
    }

    #[test]
    fn a_socket_passed_to_another_server_process_counts_there_from_then() {
        let mut it = Intake::default();
        it.update(&[5, 6], &[end(5, 1, 100, 0, 0)]);
        assert_eq!(it.changed(), vec![(5, 0, 0), (6, 0, 0)]);
        it.update(&[5, 6], &[end(6, 1, 250, 0, 0)]);
        assert_eq!(it.changed(), vec![(6, 150, 0)]);
    }

    #[test]
    fn sockets_without_byte_counters_are_not_counted() {
        let mut it = Intake::default();
        let mut e = end(5, 1, 0, 0, 0);
        e.taken = None;
        it.update(&[5], &[e]);
        it.update(&[5], &[]);
        assert_eq!(it.changed(), vec![(5, 0, 0)]);
    }

    /// What a server process holding `srv` has taken in, per a fresh dump.
    fn measured(d: &mut super::super::backlog::SockDiag, inode: u32) -> ServerEnd {
        let mut all = Vec::new();
        d.dump_all(&mut all).unwrap();
        let ends = super::super::backlog::server_ends(&[(1, vec![inode])], &all);
        assert_eq!(ends.len(), 1, "{all:?}");
        ends[0]
    }

    #[test]
    fn a_real_loopback_connection_counts_what_was_read_and_its_close() {
        use std::io::{Read, Write};
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut srv, _) = l.accept().unwrap();
        let inode = std::fs::metadata(format!("/proc/self/fd/{}", srv.as_raw_fd()))
            .unwrap()
            .ino() as u32;
        let settle = || std::thread::sleep(std::time::Duration::from_millis(50));
        let mut d = super::super::backlog::SockDiag::open().unwrap();
        let mut it = Intake::default();
        it.update(&[1], &[measured(&mut d, inode)]);
        c.write_all(&[7u8; 10_000]).unwrap();
        settle();
        let mut buf = vec![0u8; 4000];
        srv.read_exact(&mut buf).unwrap();
        let e = measured(&mut d, inode);
        assert_eq!((e.taken, e.unread, e.unsent), (Some(4000), 6000, 0));
        it.update(&[1], &[e]);
        assert_eq!(it.of(1).unwrap().bytes, 4000);
        // Read the rest; the client writes 2500 more, read in part.
        let mut rest = vec![0u8; 6000];
        srv.read_exact(&mut rest).unwrap();
        c.write_all(&[8u8; 2500]).unwrap();
        settle();
        let mut part = vec![0u8; 500];
        srv.read_exact(&mut part).unwrap();
        let e = measured(&mut d, inode);
        assert_eq!((e.taken, e.unread), (Some(10_500), 2000));
        it.update(&[1], &[e]);
        assert_eq!(it.of(1).unwrap().bytes, 10_500);
        // The client closes; the server reads the last 2000 bytes and its EOF (the FIN is
        // not a byte), then closes: gone at the next sample, credited with the 2000 it
        // had not read at the last one.
        drop(c);
        settle();
        let mut tail = Vec::new();
        srv.read_to_end(&mut tail).unwrap();
        assert_eq!(tail.len(), 2000);
        let e = measured(&mut d, inode);
        assert_eq!((e.taken, e.unread), (Some(12_500), 0), "FIN not counted");
        drop(srv);
        it.update(&[1], &[]);
        assert_eq!(
            it.of(1),
            Some(Taken {
                bytes: 12_500,
                closed: 1
            })
        );
    }
}
