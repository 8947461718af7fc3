//! The stream matching of [`super::stream`] in **bounded memory**, for `culprit export`: the
//! flows of a trace set of any size, holding state per open connection, not per call.
//!
//! Every thread is decoded first ([`super::ops::stream_thread`], threads in parallel on the
//! pool) to an unnamed temporary file of its ops (the calls that set up, use or end a
//! socket, forks and gaps; ~55 bytes each), then the threads of all processes are merged
//! by wall-clock time (then process, TSC, thread), each file read through a 32 KiB buffer. The merged ops replay the
//! descriptor tables as [`super::sockets`] does (a forked child starts with its parent's
//! table as it was when the child's first op or the parent's `fork` came, whichever is
//! first), pair the ends of each stream by [`super::sockets::pair_key`] as they are set
//! up (an accepted end takes the earliest connecting end waiting under its key, and the
//! other way round), and match each direction in byte offsets as its sends and receives
//! arrive: a send's range waits in its socket's queue until the receives that cover it
//! have come, and a receive's range until the sends — so a queue holds the bytes in flight
//! (in calls), and what arrived before the connection was paired.
//!
//! State: per socket ever seen, its addresses and counters (~150 bytes); per connection,
//! the calls in flight; per thread, a read buffer; the flow ends, spilled in sorted runs
//! of [`RUN`] to an unnamed temporary file (each run read back through a 32 KiB buffer by
//! [`FlowEnds`]). Nothing grows with the number of calls but the count of runs.
//!
//! Same flows as [`super::analyze`] on every stream whose offsets are known throughout
//! (the tests compare the two), with these limits, each on the safe side (fewer flows,
//! never a wrong one):
//! - after lost entries (a gap) in a process, its sockets draw no more flows — the batch
//!   stage may resynchronize at the end of the stream, which needs the whole stream;
//! - an end that is not paired within [`PAIR_WINDOW_NS`] of its setup (its peer is
//!   untraced, or on a host whose clock is that far off) draws none;
//! - datagrams are matched as [`super::datagram`] does, receive by receive in time order
//!   (the batch stage takes each receiving socket in turn), once the merge is
//!   [`DGRAM_SLACK_NS`] past the receive; a datagram waits for its receive at most
//!   [`PAIR_WINDOW_NS`]. A sender is listed under the port of every destination it sent
//!   to (its connected peer, or each datagram's recorded destination); its pending
//!   datagrams keep their destination, so memory grows with the datagrams in flight only.
//! - an end met already open (an adopted socket: [`super::sockets::Origin::Adopted`]) starts
//!   its counters at the byte counts the tracer recorded and pairs, when it is met, with the
//!   earliest waiting end of its four-tuple that faces it (as the stage does); one without
//!   counts draws no flow.

use super::datagram::{addr_matches, source_fits};
use super::ops::{Op, OpAddrs, OpKind, NO_RET};
use super::slices::{FlowLookup, ProcNames};
use super::sockets::{pair_key, Origin, EINPROGRESS};
use super::spill::{get_end, get_op, put_end, spill_thread, End, Spilled};
use crate::decode::TraceSet;
use crate::error::{Error, Result};
use crate::hash::FxMap;
use bufpool::format::{Addr, LibFn, Meta, ProcReason};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{BufReader, BufWriter, Seek};
use std::path::Path;

/// Ops per batch handed from a decoding thread to the merge.
pub const BATCH: usize = 1024;
/// An end set up this long (trace time) without its other end is given up.
pub const PAIR_WINDOW_NS: i64 = 10_000_000_000;
/// A datagram receive is matched once the merge is this far past its end (a send that
/// began before the receive ended but ended later comes by then).
pub const DGRAM_SLACK_NS: i64 = 1_000_000_000;
/// Flow ends per sorted run (32 bytes each in memory, 25 on disk).
pub const RUN: usize = 1 << 18;

/// A library call as the export's walk meets it: process index, position of the thread in
/// its process's `threads`, entry TSC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallKey {
    /// Process index in the trace set.
    pub proc: u32,
    /// Thread position in the process.
    pub thread: u32,
    /// Entry TSC.
    pub start: u64,
}

/// One matched message, as the streamed pass finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamFlow {
    /// The send.
    pub send: CallKey,
    /// The receive.
    pub recv: CallKey,
    /// Offset of the first byte in the stream.
    pub offset: u64,
    /// Bytes.
    pub bytes: u64,
    /// When the receive ended, on its process's clock (Unix ns, uncorrected): with the
    /// send's start, the bound the message puts on the two clocks (`super::align`).
    pub recv_end_ns: i64,
}

struct Range {
    call: CallKey,
    lo: u64,
    hi: u64,
    /// A receive's exit, wall-clock ns (0 for a send).
    end_ns: i64,
}

/// A send not yet given its byte offsets (see [`Matcher::place`]).
struct Pending {
    call: CallKey,
    n: u64,
    start_ns: i64,
    end_ns: i64,
}

struct Sock {
    /// The process that made it.
    proc: u32,
    origin: Origin,
    stream: bool,
    local: Option<Addr>,
    peer: Option<Addr>,
    setup_ns: i64,
    partner: Option<u32>,
    refs: u32,
    sent: u64,
    recvd: u64,
    out: VecDeque<Range>,
    inn: VecDeque<Range>,
    /// Sends arrived (in exit order) and not yet placed in the stream.
    pending: VecDeque<Pending>,
    /// Offsets unknown (a gap, no setup, never paired): no flow through it.
    broken: bool,
    closed: bool,
    /// A datagram sender's datagrams not yet received: (send, size, start ns, taken,
    /// destination).
    dgrams: VecDeque<(CallKey, u64, i64, bool, Addr)>,
    /// Ports this socket is listed under in `Matcher::senders`.
    ports: Vec<u16>,
}

impl Sock {
    fn new(proc: u32, origin: Origin, now: i64) -> Sock {
        Sock {
            proc,
            origin,
            stream: true,
            local: None,
            peer: None,
            setup_ns: now,
            partner: None,
            refs: 1,
            sent: 0,
            recvd: 0,
            out: VecDeque::new(),
            inn: VecDeque::new(),
            pending: VecDeque::new(),
            broken: origin == Origin::Unknown,
            closed: false,
            dgrams: VecDeque::new(),
            ports: Vec::new(),
        }
    }

    fn forget(&mut self) {
        self.out = VecDeque::new();
        self.inn = VecDeque::new();
        self.pending = VecDeque::new();
    }
}

struct Proc {
    forked: bool,
    ppid: Option<u32>,
    started: bool,
    fds: FxMap<i32, u32>,
}

/// Ends of one key waiting for their other end: connecting, accepted, adopted.
type Waiting = (VecDeque<u32>, VecDeque<u32>, VecDeque<u32>);

/// The replay and matching state.
struct Matcher<'s, F> {
    set: &'s TraceSet,
    procs: Vec<Proc>,
    by_pid: FxMap<(&'s str, u32), usize>,
    socks: Vec<Sock>,
    /// Ends waiting for their other end: key → (connecting, accepted, adopted).
    waiting: FxMap<String, Waiting>,
    /// Datagram senders by the port of a destination they sent to (or connected to).
    senders: FxMap<u16, Vec<u32>>,
    /// Datagram receives not matched yet, by end: (end ns, socket, process, call, size,
    /// source).
    recvs: VecDeque<(i64, u32, usize, CallKey, u64, Option<Addr>)>,
    on_flow: F,
}

impl<F: FnMut(StreamFlow)> Matcher<'_, F> {
    fn start(&mut self, pi: usize) {
        if self.procs[pi].started {
            return;
        }
        self.procs[pi].started = true;
        if !self.procs[pi].forked {
            return;
        }
        let host = self.set.processes[pi].host.as_str();
        let Some(&par) = self.procs[pi]
            .ppid
            .and_then(|pp| self.by_pid.get(&(host, pp)))
        else {
            return;
        };
        if par == pi {
            return;
        }
        let fds = self.procs[par].fds.clone();
        for &s in fds.values() {
            self.socks[s as usize].refs += 1;
        }
        self.procs[pi].fds = fds;
    }

    fn new_sock(&mut self, pi: usize, fd: i32, origin: Origin, now: i64) -> u32 {
        self.socks.push(Sock::new(pi as u32, origin, now));
        let s = (self.socks.len() - 1) as u32;
        if let Some(old) = self.procs[pi].fds.insert(fd, s) {
            self.unref(old);
        }
        s
    }

    fn unref(&mut self, s: u32) {
        let so = &mut self.socks[s as usize];
        so.refs = so.refs.saturating_sub(1);
        if so.refs == 0 && !so.closed {
            so.closed = true;
            self.settle(s);
        }
    }

    fn get_or_unknown(&mut self, pi: usize, fd: i32, now: i64) -> u32 {
        match self.procs[pi].fds.get(&fd) {
            Some(&s) => s,
            None => self.new_sock(pi, fd, Origin::Unknown, now),
        }
    }

    /// A closed socket: drops what can no longer be matched.
    fn settle(&mut self, s: u32) {
        let so = &self.socks[s as usize];
        match so.partner {
            Some(p) => {
                let po = &self.socks[p as usize];
                if so.closed && po.closed {
                    self.socks[s as usize].forget();
                    self.socks[p as usize].forget();
                } else if so.inn.is_empty() {
                    // Nothing it received waits for a send: the peer's later sends are lost.
                    self.socks[p as usize].out = VecDeque::new();
                    self.socks[p as usize].pending = VecDeque::new();
                }
            }
            None => self.socks[s as usize].forget(),
        }
    }

    fn break_sock(&mut self, s: u32) {
        self.socks[s as usize].broken = true;
        self.socks[s as usize].forget();
        if let Some(p) = self.socks[s as usize].partner {
            self.socks[p as usize].forget();
        }
    }

    /// A stream end got its addresses: pairs it with a waiting other end, or waits.
    fn pair(&mut self, s: u32, now: i64) {
        let so = &self.socks[s as usize];
        if !so.stream || so.partner.is_some() {
            return;
        }
        let scope = self.set.processes[so.proc as usize].socket_scope();
        let Some(k) = pair_key(&scope, so.origin, so.local, so.peer) else {
            return;
        };
        let origin = so.origin;
        let me = (so.local, so.peer);
        let socks = &self.socks;
        let g = self.waiting.entry(k.clone()).or_default();
        // A connecting end takes an accepted one, an accepted end a connecting one, else
        // either takes an adopted end; an adopted end takes the earliest of any. An adopted
        // end is only taken by (or takes) an end facing it (see `sockets::opposite`).
        let facing = |q: &VecDeque<u32>, check: bool| {
            q.iter().position(|&e| {
                let o = &socks[e as usize];
                !check || super::sockets::opposite(me, (o.local, o.peer))
            })
        };
        let adopted = origin == Origin::Adopted;
        let cands = [
            facing(&g.0, adopted).map(|i| (0usize, i)),
            facing(&g.1, adopted).map(|i| (1usize, i)),
            facing(&g.2, true).map(|i| (2usize, i)),
        ];
        let head = |q: usize, i: usize| {
            let e = match q {
                0 => g.0[i],
                1 => g.1[i],
                _ => g.2[i],
            };
            socks[e as usize].setup_ns
        };
        let pick = match origin {
            Origin::Connect => cands[1].or(cands[2]),
            Origin::Adopted => cands
                .iter()
                .flatten()
                .min_by_key(|&&(q, i)| (head(q, i), q))
                .copied(),
            _ => cands[0].or(cands[2]),
        };
        let p = pick.and_then(|(q, i)| match q {
            0 => g.0.remove(i),
            1 => g.1.remove(i),
            _ => g.2.remove(i),
        });
        let Some(p) = p else {
            match origin {
                Origin::Connect => g.0.push_back(s),
                Origin::Adopted => g.2.push_back(s),
                _ => g.1.push_back(s),
            }
            return;
        };
        if g.0.is_empty() && g.1.is_empty() && g.2.is_empty() {
            self.waiting.remove(&k);
        }
        self.socks[s as usize].partner = Some(p);
        self.socks[p as usize].partner = Some(s);
        if self.socks[p as usize].broken {
            self.break_sock(s);
            return;
        }
        self.place(s, p, now);
        self.place(p, s, now);
        self.drain(s, p);
        self.drain(p, s);
    }

    /// Gives the sends waiting in `s` their byte offsets, by the rule of
    /// [`super::stream`] ("Order of sends sharing a socket"), as far as it can be decided at
    /// merge time `now`: sends arrive in exit order, so when the receive reading the next
    /// offset (of `s`'s partner `p`) has come, the first waiting send that began before it
    /// ended is the batch stage's pick — unless it exited more than
    /// [`super::stream::IN_FLIGHT_NS`] after that receive, or none has come and `now` is
    /// past that bound: then the first waiting send. Without that receive, or without an
    /// eligible send while one may still come, the sends wait (bytes in flight). Across
    /// hosts, sends are placed as they come (exit order).
    fn place(&mut self, s: u32, p: u32, now: i64) {
        if s == p {
            return;
        }
        let host = |x: u32| &self.set.processes[self.socks[x as usize].proc as usize].host;
        let one_clock = host(s) == host(p);
        loop {
            let (so, po) = (&self.socks[s as usize], &self.socks[p as usize]);
            if so.pending.is_empty() {
                return;
            }
            let pick = if one_clock {
                match po.inn.iter().find(|r| r.hi > so.sent) {
                    Some(r) if r.lo <= so.sent => {
                        let bound = r.end_ns.saturating_add(super::stream::IN_FLIGHT_NS);
                        match so.pending.iter().position(|q| q.start_ns <= r.end_ns) {
                            Some(i) if so.pending[i].end_ns <= bound => i,
                            _ if now > bound => 0,
                            _ => return,
                        }
                    }
                    // The receiver's numbering is past this offset: no receive reads it.
                    Some(_) => 0,
                    None if now == i64::MAX => 0,
                    // Its receive has not come yet.
                    None => return,
                }
            } else {
                0
            };
            let so = &mut self.socks[s as usize];
            let Some(q) = so.pending.remove(pick) else {
                return;
            };
            so.out.push_back(Range {
                call: q.call,
                lo: so.sent,
                hi: so.sent + q.n,
                end_ns: 0,
            });
            so.sent += q.n;
        }
    }

    /// Places every send still waiting (the end of the merge: nothing more can come).
    fn place_all(&mut self) {
        for s in 0..self.socks.len() as u32 {
            if let Some(p) = self.socks[s as usize].partner {
                if !self.socks[s as usize].pending.is_empty() && !self.socks[s as usize].broken {
                    self.place(s, p, i64::MAX);
                    self.drain(s, p);
                }
            }
        }
    }

    /// Matches what waits in `s`'s sends against `p`'s receives.
    fn drain(&mut self, s: u32, p: u32) {
        if s == p {
            return;
        }
        let (a, b) = if s < p {
            let (x, y) = self.socks.split_at_mut(p as usize);
            (&mut x[s as usize], &mut y[0])
        } else {
            let (x, y) = self.socks.split_at_mut(s as usize);
            (&mut y[0], &mut x[p as usize])
        };
        while let (Some(x), Some(y)) = (a.out.front(), b.inn.front()) {
            let lo = x.lo.max(y.lo);
            let hi = x.hi.min(y.hi);
            if lo < hi {
                (self.on_flow)(StreamFlow {
                    send: x.call,
                    recv: y.call,
                    offset: lo,
                    bytes: hi - lo,
                    recv_end_ns: y.end_ns,
                });
            }
            let (xh, yh) = (x.hi, y.hi);
            if xh <= yh {
                a.out.pop_front();
            }
            if yh <= xh {
                b.inn.pop_front();
            }
        }
    }

    /// A datagram sent or received on `s` (see [`super::datagram`] for the rule): a send
    /// waits in its socket (at most [`PAIR_WINDOW_NS`]); a receive waits until every send
    /// that began before it ended has come ([`DGRAM_SLACK_NS`]), then takes the earliest
    /// datagram of its size from the one candidate sender that has one.
    #[allow(clippy::too_many_arguments)]
    fn datagram(
        &mut self,
        s: u32,
        pi: usize,
        call: CallKey,
        n: u64,
        send: bool,
        addr: Option<Addr>,
        calib: &bufpool::Calibration,
        now: i64,
    ) {
        if send {
            let Some(dst) = addr.or(self.socks[s as usize].peer) else {
                return;
            };
            self.register(s, dst.port);
            let so = &mut self.socks[s as usize];
            let start = calib.tsc_to_unix_ns(call.start) as i64;
            so.dgrams.push_back((call, n, start, false, dst));
            while so
                .dgrams
                .front()
                .is_some_and(|d| d.3 || now.saturating_sub(d.2) > PAIR_WINDOW_NS)
            {
                so.dgrams.pop_front();
            }
        } else {
            let src = addr.or(self.socks[s as usize].peer);
            self.recvs.push_back((now, s, pi, call, n, src));
        }
    }

    /// Lists datagram sender `s` under `port` (once).
    fn register(&mut self, s: u32, port: u16) {
        let so = &mut self.socks[s as usize];
        if !so.ports.contains(&port) {
            so.ports.push(port);
            self.senders.entry(port).or_default().push(s);
        }
    }

    /// Matches the datagram receives that ended [`DGRAM_SLACK_NS`] before `now` (all of
    /// them at the end).
    fn settle_receives(&mut self, now: Option<i64>) {
        while let Some(&(end, r, rp, call, n, src)) = self.recvs.front() {
            if now.is_some_and(|t| end.saturating_add(DGRAM_SLACK_NS) > t) {
                break;
            }
            self.recvs.pop_front();
            let Some(rl) = self.socks[r as usize].local else {
                continue;
            };
            let rpeer = self.socks[r as usize].peer;
            let rhost = &self.set.processes[rp].host;
            let mut found: Option<(u32, usize)> = None;
            let mut several = false;
            for &c in self.senders.get(&rl.port).map_or(&[][..], |v| &v[..]) {
                let so = &self.socks[c as usize];
                let same = self.set.processes[so.proc as usize].host == *rhost;
                if c == r
                    || !source_fits(rpeer.as_ref(), so.local.as_ref(), same)
                    || !source_fits(src.as_ref(), so.local.as_ref(), same)
                {
                    continue;
                }
                let hit = so.dgrams.iter().take(4096).position(|d| {
                    !d.3 && d.1 == n && (!same || d.2 <= end) && addr_matches(&d.4, &rl, same)
                });
                if let Some(k) = hit {
                    several |= found.is_some();
                    found = Some((c, k));
                }
            }
            if let (Some((c, k)), false) = (found, several) {
                let d = &mut self.socks[c as usize].dgrams[k];
                d.3 = true;
                let send = d.0;
                (self.on_flow)(StreamFlow {
                    send,
                    recv: call,
                    offset: 0,
                    bytes: n,
                    recv_end_ns: end,
                });
            }
        }
    }

    /// Can `s` still be matched? Gives up an end left unpaired too long.
    fn live(&mut self, s: u32, now: i64) -> bool {
        let so = &self.socks[s as usize];
        if so.broken || !so.stream {
            return false;
        }
        if so.partner.is_none() && now.saturating_sub(so.setup_ns) > PAIR_WINDOW_NS {
            self.break_sock(s);
            return false;
        }
        true
    }

    fn op(&mut self, pi: usize, thread: u32, o: &Op, addrs: Option<OpAddrs>, now: i64) {
        self.start(pi);
        let ok = o.ret != NO_RET && o.ret >= 0;
        let host = self.set.processes[pi].host.as_str();
        match o.kind {
            OpKind::Socket if ok => {
                let s = self.new_sock(pi, o.ret as i32, Origin::Socket, now);
                self.socks[s as usize].stream = matches!(o.aux & 0xf, 1 | 5);
            }
            OpKind::Pair if ok && o.aux != u64::MAX => {
                let a = self.new_sock(pi, o.fd, Origin::Pair, now);
                let b = self.new_sock(pi, o.aux as i32, Origin::Pair, now);
                let stream = o.flags & 0xf != 2;
                for (x, y) in [(a, b), (b, a)] {
                    self.socks[x as usize].partner = Some(y);
                    self.socks[x as usize].stream = stream;
                }
            }
            OpKind::Bind if ok => {
                let s = self.get_or_unknown(pi, o.fd, now);
                if let Some((Some(l), _)) = addrs {
                    self.socks[s as usize].local = Some(l);
                }
            }
            OpKind::Connect if ok || o.errno == EINPROGRESS => {
                let mut s = self.get_or_unknown(pi, o.fd, now);
                if self.socks[s as usize].origin == Origin::Connect {
                    let (stream, local) = {
                        let so = &self.socks[s as usize];
                        (so.stream, so.local)
                    };
                    s = self.new_sock(pi, o.fd, Origin::Connect, now);
                    self.socks[s as usize].stream = stream;
                    self.socks[s as usize].local = local;
                }
                let so = &mut self.socks[s as usize];
                so.origin = Origin::Connect;
                so.broken = false;
                so.setup_ns = now;
                if let Some((l, pe)) = addrs {
                    so.local = l.or(so.local);
                    so.peer = pe;
                }
                match (so.stream, so.peer) {
                    (false, Some(pe)) => self.register(s, pe.port),
                    _ => self.pair(s, now),
                }
            }
            OpKind::Accept if ok => {
                let s = self.new_sock(pi, o.ret as i32, Origin::Accept, now);
                if let Some((l, pe)) = addrs {
                    self.socks[s as usize].local = l;
                    self.socks[s as usize].peer = pe;
                }
                self.pair(s, now);
            }
            OpKind::Dup if ok => {
                if let Some(&s) = self.procs[pi].fds.get(&o.fd) {
                    let target = if o.aux != u64::MAX {
                        o.aux as i32
                    } else {
                        o.ret as i32
                    };
                    if target != o.fd {
                        self.socks[s as usize].refs += 1;
                        if let Some(old) = self.procs[pi].fds.insert(target, s) {
                            self.unref(old);
                        }
                    }
                }
            }
            OpKind::Adopt if o.fd >= 0 && !self.procs[pi].fds.contains_key(&o.fd) => {
                let s = self.new_sock(pi, o.fd, Origin::Adopted, now);
                let so = &mut self.socks[s as usize];
                if let Some((l, pe)) = addrs {
                    so.local = l;
                    so.peer = pe;
                }
                if o.ret != NO_RET && o.aux != u64::MAX {
                    so.recvd = o.ret as u64;
                    so.sent = o.aux;
                } else {
                    // Offsets unknown: nothing through it can be aligned.
                    so.broken = true;
                }
                self.pair(s, now);
            }
            OpKind::Close => {
                if let Some(s) = self.procs[pi].fds.remove(&o.fd) {
                    self.unref(s);
                }
            }
            OpKind::Send | OpKind::Recv if o.fd >= 0 => {
                let s = self.get_or_unknown(pi, o.fd, now);
                if let (Some((Some(l), _)), None) = (addrs, self.socks[s as usize].local) {
                    self.socks[s as usize].local = Some(l);
                }
                if o.ret > 0 && matches!(o.func, LibFn::Sendmmsg | LibFn::Recvmmsg) {
                    if self.socks[s as usize].stream {
                        self.break_sock(s);
                    }
                    return;
                }
                let n = o.bytes();
                if n > 0 && !self.socks[s as usize].stream {
                    let call = CallKey {
                        proc: pi as u32,
                        thread,
                        start: o.start,
                    };
                    let calib = &self.set.processes[pi].calib;
                    let addr = addrs.and_then(|a| a.1);
                    self.datagram(s, pi, call, n, o.kind == OpKind::Send, addr, calib, now);
                    return;
                }
                if n == 0 || !self.live(s, now) {
                    return;
                }
                let call = CallKey {
                    proc: pi as u32,
                    thread,
                    start: o.start,
                };
                let so = &mut self.socks[s as usize];
                let partner = so.partner;
                if o.kind == OpKind::Send {
                    if let Some(p) = partner {
                        let po = &self.socks[p as usize];
                        if po.broken || (po.closed && po.inn.is_empty()) {
                            return;
                        }
                    }
                    let start_ns = self.set.processes[pi].calib.tsc_to_unix_ns(o.start) as i64;
                    self.socks[s as usize].pending.push_back(Pending {
                        call,
                        n,
                        start_ns,
                        end_ns: now,
                    });
                    if let Some(p) = partner {
                        self.place(s, p, now);
                        self.drain(s, p);
                    }
                } else {
                    let r = Range {
                        call,
                        lo: so.recvd,
                        hi: so.recvd + n,
                        end_ns: now,
                    };
                    so.recvd += n;
                    so.inn.push_back(r);
                    if let Some(p) = partner {
                        self.place(p, s, now);
                        self.drain(p, s);
                    }
                }
            }
            OpKind::Gap => {
                let mut seen: Vec<u32> = self.procs[pi].fds.values().copied().collect();
                seen.sort_unstable();
                seen.dedup();
                for s in seen {
                    self.break_sock(s);
                }
            }
            OpKind::Fork if o.ret > 0 && o.ret != NO_RET => {
                if let Some(&c) = self.by_pid.get(&(host, o.ret as u32)) {
                    if c != pi && self.procs[c].forked && !self.procs[c].started {
                        // The child's table is a copy of this one, as it is now.
                        let fds = self.procs[pi].fds.clone();
                        for &s in fds.values() {
                            self.socks[s as usize].refs += 1;
                        }
                        self.procs[c].fds = fds;
                        self.procs[c].started = true;
                    }
                }
            }
            _ => {}
        }
    }
}

/// A thread's spilled ops, as the merge reads them.
struct Feed {
    r: BufReader<std::fs::File>,
    cur: (Op, Option<OpAddrs>),
    proc: usize,
    thread: u32,
}

/// Runs the streamed pass over `set`: calls `on_flow` for every matched message (in the
/// order they are matched) and returns each process's names. Each thread's ops are first
/// decoded (in parallel, on the pool) to an unnamed temporary file in `spill_dir`, ~55
/// bytes an op; the merge then reads every thread's file through a 32 KiB buffer.
pub fn stream_flows(
    set: &TraceSet,
    spill_dir: &Path,
    on_flow: impl FnMut(StreamFlow),
) -> Result<Vec<ProcNames>> {
    use rayon::prelude::*;
    let io = |what| {
        move |source| Error::Io {
            path: spill_dir.to_path_buf(),
            what,
            source,
        }
    };
    let threads: Vec<(usize, usize)> = set
        .processes
        .iter()
        .enumerate()
        .flat_map(|(pi, p)| (0..p.threads.len()).map(move |ti| (pi, ti)))
        .collect();
    let spilled: Vec<Spilled> = threads
        .par_iter()
        .map(|&(pi, ti)| spill_thread(&set.processes[pi].threads[ti], spill_dir))
        .collect::<Result<_>>()?;
    let mut names = vec![ProcNames::default(); set.processes.len()];
    let by_pid = set
        .processes
        .iter()
        .enumerate()
        .map(|(i, p)| ((p.host.as_str(), p.pid), i))
        .collect();
    let mut m = Matcher {
        set,
        procs: set
            .processes
            .iter()
            .map(|_| Proc {
                forked: false,
                ppid: None,
                started: false,
                fds: FxMap::default(),
            })
            .collect(),
        by_pid,
        socks: Vec::new(),
        waiting: FxMap::default(),
        senders: FxMap::default(),
        recvs: VecDeque::new(),
        on_flow,
    };
    let mut feeds = Vec::new();
    for (&(pi, ti), sp) in threads.iter().zip(spilled) {
        let mut meta = sp.meta;
        meta.sort_by_key(|x| x.0);
        for (_, meta) in meta {
            let pn = &mut names[pi];
            match meta {
                Meta::Proc(r) if r.pid == set.processes[pi].pid => {
                    m.procs[pi].ppid = Some(r.ppid);
                    m.procs[pi].forked |= r.reason == ProcReason::Fork;
                    pn.exe = String::from_utf8_lossy(&r.exe).into_owned();
                }
                Meta::Thread(t) => pn
                    .threads
                    .push((t.tid, String::from_utf8_lossy(&t.name).into_owned())),
                _ => {}
            }
        }
        let mut r = BufReader::with_capacity(1 << 15, sp.file);
        if let Some(cur) = get_op(&mut r).map_err(io("read a spill file"))? {
            feeds.push(Feed {
                r,
                cur,
                proc: pi,
                thread: ti as u32,
            });
        }
    }
    let key = |f: &Feed| {
        let o = &f.cur.0;
        let p = &set.processes[f.proc];
        (p.calib.tsc_to_unix_ns(o.end), f.proc, o.end, o.tid)
    };
    let mut heap: BinaryHeap<_> = feeds
        .iter()
        .enumerate()
        .map(|(i, f)| Reverse((key(f), i)))
        .collect();
    while let Some(Reverse((k, i))) = heap.pop() {
        let f = &mut feeds[i];
        let (o, addrs) = f.cur;
        m.op(f.proc, f.thread, &o, addrs, k.0 as i64);
        m.settle_receives(Some(k.0 as i64));
        if let Some(next) = get_op(&mut f.r).map_err(io("read a spill file"))? {
            f.cur = next;
            heap.push(Reverse((key(f), i)));
        }
    }
    m.place_all();
    m.settle_receives(None);
    Ok(names)
}

/// The flow ends of a streamed pass, sorted by call: what the export's walk reads, in
/// its order, to put each flow id on its send and receive slices.
pub struct FlowEnds {
    runs: Vec<(BufReader<std::fs::File>, Option<End>)>,
    /// The last run, still in memory (reversed: the smallest last).
    tail: Vec<End>,
    heap: BinaryHeap<Reverse<(End, usize)>>,
    /// Flows.
    pub flows: u64,
    /// Processes' names.
    pub names: Vec<ProcNames>,
    /// The hosts' clock corrections, from the flows between hosts
    /// ([`super::align::estimate`]; empty on one host).
    pub offsets: Vec<super::offsets::HostOffset>,
}

impl FlowEnds {
    /// Runs the streamed pass over `set`, spilling sorted runs of flow ends to unnamed
    /// temporary files in `spill_dir`.
    pub fn build(set: &TraceSet, spill_dir: &Path) -> Result<FlowEnds> {
        let io = |what| {
            move |source| Error::Io {
                path: spill_dir.to_path_buf(),
                what,
                source,
            }
        };
        let mut buf: Vec<End> = Vec::with_capacity(RUN);
        let mut files = Vec::new();
        let mut err = None;
        let mut id = 0u64;
        let mut cross = super::align::Crossings::new(set);
        let spill = |buf: &mut Vec<End>| -> std::io::Result<std::fs::File> {
            buf.sort_unstable();
            let f = tempfile::tempfile_in(spill_dir)?;
            let mut w = BufWriter::with_capacity(1 << 16, f);
            for e in buf.iter() {
                put_end(&mut w, e)?;
            }
            buf.clear();
            let mut f = w.into_inner().map_err(|e| e.into_error())?;
            f.rewind()?;
            Ok(f)
        };
        let names = stream_flows(set, spill_dir, |fl| {
            cross.add(&fl);
            id += 1;
            buf.push((fl.send, id, true));
            buf.push((fl.recv, id, false));
            if buf.len() >= RUN && err.is_none() {
                match spill(&mut buf) {
                    Ok(f) => files.push(f),
                    Err(e) => err = Some(e),
                }
            }
        })?;
        if let Some(e) = err {
            return Err(io("write a spill file")(e));
        }
        buf.sort_unstable_by(|a, b| b.cmp(a));
        let mut ends = FlowEnds {
            runs: Vec::new(),
            tail: buf,
            heap: BinaryHeap::new(),
            flows: id,
            names,
            offsets: cross.fit(),
        };
        for f in files {
            let mut r = BufReader::with_capacity(1 << 15, f);
            let first = get_end(&mut r).map_err(io("read a spill file"))?;
            ends.runs.push((r, first));
        }
        for (i, (_, e)) in ends.runs.iter().enumerate() {
            if let Some(e) = e {
                ends.heap.push(Reverse((*e, i)));
            }
        }
        Ok(ends)
    }

    /// The smallest end left.
    fn peek(&self) -> Option<End> {
        let a = self.heap.peek().map(|r| r.0 .0);
        let b = self.tail.last().copied();
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn pop(&mut self) -> std::io::Result<()> {
        let from_heap = match (self.heap.peek(), self.tail.last()) {
            (Some(h), Some(t)) => h.0 .0 <= *t,
            (Some(_), None) => true,
            _ => false,
        };
        if !from_heap {
            self.tail.pop();
            return Ok(());
        }
        if let Some(Reverse((_, i))) = self.heap.pop() {
            let (r, cur) = &mut self.runs[i];
            *cur = get_end(r)?;
            if let Some(e) = cur {
                self.heap.push(Reverse((*e, i)));
            }
        }
        Ok(())
    }
}

impl FlowLookup for FlowEnds {
    fn of(
        &mut self,
        p: usize,
        thread: usize,
        _tid: u32,
        start: u64,
        out: &mut Vec<u64>,
        inn: &mut Vec<u64>,
    ) -> std::io::Result<()> {
        out.clear();
        inn.clear();
        let k = CallKey {
            proc: p as u32,
            thread: thread as u32,
            start,
        };
        while let Some(e) = self.peek() {
            if e.0 > k {
                break;
            }
            if e.0 == k {
                if e.2 {
                    out.push(e.1);
                } else {
                    inn.push(e.1);
                }
            }
            self.pop()?;
        }
        Ok(())
    }
}
