//! Stream matching, M:N, in byte offsets — 004's list algorithm.
//!
//! One direction of a connection is the sender socket's sends and the receiver socket's
//! receives. Each side numbers its bytes from 0 in order; a send is the byte range
//! `[o, o + n)` of its side, a receive likewise, and every overlap of a send's range with a
//! receive's range is one [`Flow`]: those bytes went from that send to that receive. One
//! receive may so consume several sends and one send feed several receives; a partial
//! transfer is just a shorter range, a `MSG_PEEK` receive consumes nothing (it is counted,
//! not matched).
//!
//! **Gaps.** Where entries were lost in a process using a socket, the calls in the gap are
//! unknown, so that side's offsets after it are known only up to an unknown shift δ ≥ 0.
//! The matcher then matches the bytes before the first gap exactly and:
//! - *resynchronizes* when δ is determined: one gap on one side, none on the other, and a
//!   recorded end of stream (a receive returned 0 after the gap), so that both sides' totals
//!   are equal — δ is the difference; the bytes of the gap itself are reported (reason
//!   [`Reason::Gap`]);
//! - otherwise reports every byte after the gap, on both sides, as unmatched with reason
//!   [`Reason::Gap`] — never attributed to a guess.
//!
//! **Order of sends sharing a socket.** One thread's calls never overlap, so its sends'
//! order is certain; but when several threads or processes write to one socket (a
//! descriptor shared across `fork`), the kernel takes each send's bytes at some instant
//! between its entry and its exit, and calls that overlap in time have no recorded order.
//! The sends are taken in exit order (measured on racing writers: the order that most
//! often puts each send's bytes where the receiver really read them), **except** that a
//! send is never placed at a byte offset whose receive ended before the send began: there
//! the earliest-exiting send that began before that receive ended takes the place (if it
//! exited within [`IN_FLIGHT_NS`] of the receive's end: what the bounded-memory pass can
//! wait for). This constraint can always be met — the receives that ended by some time `t`
//! read no more bytes than the sends begun by `t` wrote — so on one host no receive is
//! matched to a send that began after it ended (what [`super::offsets`] counts as a
//! violation) unless a sender stayed in its send longer than [`IN_FLIGHT_NS`]. Exit order
//! alone made such violations when a sender was preempted between handing its bytes to
//! the kernel and its exit stamp, and another process's later send, exiting first, took
//! its place. The constraint needs one clock on both ends: across hosts, exit order alone.
//! A socket written by one thread only keeps that thread's order (the rule never changes
//! it).
//!
//! Bytes sent and never received are [`Reason::LostInFlight`] when the connection was reset
//! (`ECONNRESET`/`EPIPE`) or the receiver closed it, else [`Reason::NotReceived`] (still in
//! flight when the trace ended). Bytes received beyond everything sent, with both sides
//! fully known, are [`Reason::Inconsistent`] (never seen on a correct trace).

use super::sockets::{Item, ItemKind, OpRef};
use serde::Serialize;

/// Bytes that went from one send to one receive: the arrow of the time–process diagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Flow {
    /// The send.
    pub send: OpRef,
    /// The receive.
    pub recv: OpRef,
    /// Offset of the first byte in the stream (sender's numbering).
    pub offset: u64,
    /// Bytes.
    pub bytes: u64,
}

/// Why bytes are not matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The other end was not traced (no socket with the matching addresses).
    PeerUntraced,
    /// The descriptor's setup (`connect`/`accept`/`socketpair`) was not recorded: the trace
    /// began mid-connection, or the descriptor came from an untraced process.
    NoSetup,
    /// Sent, never received: the connection was reset or the receiver closed it.
    LostInFlight,
    /// Sent, not received by the end of the trace.
    NotReceived,
    /// Offsets unknown after lost entries (either side).
    Gap,
    /// Received, but more than was ever sent (a damaged trace).
    Inconsistent,
    /// A datagram that was never received.
    DatagramLost,
    /// A datagram whose sender cannot be told apart (several candidate senders, or the
    /// source address not recorded).
    Ambiguous,
    /// Moved while the other end was not traced yet: sent before the receiving end's trace
    /// began (read by its untraced past), or received before the sending end's began.
    BeforeTrace,
    /// One end was met already open and its byte offsets could not be read (not TCP, or
    /// a kernel without the counters): the two ends' numberings cannot be aligned.
    OffsetsUnknown,
    /// A datagram received again (it fits only datagrams already received).
    Duplicated,
    /// A datagram socket neither connected nor bound to an address a sender used.
    NoAddress,
}

impl Reason {
    /// snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Reason::PeerUntraced => "peer_untraced",
            Reason::NoSetup => "no_setup",
            Reason::LostInFlight => "lost_in_flight",
            Reason::NotReceived => "not_received",
            Reason::Gap => "gap",
            Reason::Inconsistent => "inconsistent",
            Reason::DatagramLost => "datagram_lost",
            Reason::Ambiguous => "ambiguous",
            Reason::Duplicated => "duplicated",
            Reason::BeforeTrace => "before_trace",
            Reason::OffsetsUnknown => "offsets_unknown",
            Reason::NoAddress => "no_address",
        }
    }
}

/// Bytes of an op left unmatched, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Unmatched {
    /// The op.
    pub op: OpRef,
    /// Bytes.
    pub bytes: u64,
    /// Why.
    pub reason: Reason,
    /// Sent (true) or received bytes.
    pub sent: bool,
}

/// The result of matching one direction.
#[derive(Clone, Debug, Default)]
pub struct Direction {
    /// Bytes sent (recorded).
    pub sent: u64,
    /// Bytes received (recorded; peeks excluded).
    pub received: u64,
    /// Bytes peeked.
    pub peeked: u64,
    /// Bytes matched.
    pub matched: u64,
    /// Sends, receives.
    pub sends: u64,
    /// Receives.
    pub recvs: u64,
    /// Gaps met (both sides).
    pub gaps: u32,
    /// Gaps resynchronized.
    pub resynced: u32,
    /// Bytes of sends that overlapped in time a send of another thread on the same socket:
    /// their place in the stream is the inferred order of the module docs, not a recorded
    /// one (0 for a socket one thread writes).
    pub order_inferred: u64,
    /// Flows.
    pub flows: Vec<Flow>,
    /// Unmatched bytes.
    pub unmatched: Vec<Unmatched>,
}

impl Direction {
    /// The sends of one direction and the receives of the other, unmatched both.
    pub fn join(mut self, other: Direction) -> Direction {
        self.sent += other.sent;
        self.received += other.received;
        self.peeked += other.peeked;
        self.matched += other.matched;
        self.sends += other.sends;
        self.recvs += other.recvs;
        self.gaps += other.gaps;
        self.resynced += other.resynced;
        self.order_inferred += other.order_inferred;
        self.flows.extend(other.flows);
        self.unmatched.extend(other.unmatched);
        self
    }
}

/// One side, numbered.
struct Side {
    /// (offset, bytes, op), contiguous from 0 except across a resolved hole.
    ranges: Vec<(u64, u64, OpRef)>,
    /// Items after the first gap (unresolved): (op, bytes).
    post: Vec<(OpRef, u64)>,
    /// Offset at the first gap (or the total).
    pre: u64,
    gaps: u32,
    /// A receive returned 0 after the last gap (receiving side).
    eof_after_gap: bool,
    /// Resolved: hole of unrecorded bytes.
    hole: Option<(u64, u64)>,
    /// Unresolved: offsets known below this only.
    known_until: Option<u64>,
    ops: u64,
    total: u64,
    /// Offset of this side's first recorded byte (non-zero for an end met already open).
    base: u64,
}

fn number(items: &[Item], want: ItemKind, peeked: &mut u64, base: u64) -> Side {
    let mut s = Side {
        ranges: Vec::new(),
        post: Vec::new(),
        pre: base,
        base,
        gaps: 0,
        eof_after_gap: false,
        hole: None,
        known_until: None,
        ops: 0,
        total: 0,
    };
    // Gap markers with no transfer of this side between them are one gap.
    let mut moved_since_gap = true;
    for it in items {
        match it.kind {
            k if k == want => {
                s.ops += 1;
                s.total += it.n;
                moved_since_gap = true;
                if s.gaps == 0 {
                    s.ranges.push((s.pre, it.n, it.op));
                    s.pre += it.n;
                } else {
                    s.post.push((it.op, it.n));
                }
            }
            ItemKind::Gap => {
                if moved_since_gap {
                    s.gaps += 1;
                }
                moved_since_gap = false;
                s.eof_after_gap = false;
            }
            ItemKind::Eof if want == ItemKind::Recv => s.eof_after_gap = true,
            ItemKind::Peek if want == ItemKind::Recv => *peeked += it.n,
            _ => {}
        }
    }
    s
}

impl Side {
    /// Gives the post-gap items offsets shifted by δ.
    fn resolve(&mut self, delta: u64) {
        self.hole = (delta > 0).then_some((self.pre, self.pre + delta));
        let mut o = self.pre + delta;
        for (op, n) in std::mem::take(&mut self.post) {
            self.ranges.push((o, n, op));
            o += n;
        }
    }
}

/// An op's entry and exit, wall-clock ns (one host's clock).
pub type Clock<'a> = &'a dyn Fn(OpRef) -> (i64, i64);

/// How long after a receive ended a send that began before it may still exit and be
/// placed at the receive's bytes (module docs): 1 s of trace time.
pub const IN_FLIGHT_NS: i64 = 1_000_000_000;

/// Matches one direction: `snd` are the sending socket's items, `rcv` the receiving one's;
/// `ended_badly` says the connection was reset or the receiver closed it; `bases` are the
/// offsets of the sender's first recorded byte and of the receiver's (both 0 when both
/// ends were seen from their setup; see [`super::sockets::Socket::base`]). Bytes below the
/// other side's base moved while that end was not traced: [`Reason::BeforeTrace`].
/// `clock` gives the times of the ops when both ends are on one host: the sends are then
/// placed so that no receive reads a send that began after it ended (module docs).
pub fn match_direction(
    snd: &[Item],
    rcv: &[Item],
    ended_badly: bool,
    bases: (u64, u64),
    clock: Option<Clock>,
) -> Direction {
    let mut d = Direction::default();
    let mut s = number(snd, ItemKind::Send, &mut 0, bases.0);
    let mut r = number(rcv, ItemKind::Recv, &mut d.peeked, bases.1);
    d.sent = s.total;
    d.received = r.total;
    d.sends = s.ops;
    d.recvs = r.ops;
    d.gaps = s.gaps + r.gaps;
    // Resynchronize when the shift is determined.
    let (s_end, r_end) = (s.base + s.total, r.base + r.total);
    if s.gaps == 1 && r.gaps == 0 && r.eof_after_gap && r_end >= s_end {
        s.resolve(r_end - s_end);
        s.gaps = 0;
        d.resynced += 1;
    } else if r.gaps == 1 && s.gaps == 0 && r.eof_after_gap && s_end >= r_end {
        r.resolve(s_end - r_end);
        r.gaps = 0;
        d.resynced += 1;
    }
    for side in [&mut s, &mut r] {
        if side.gaps > 0 {
            side.known_until = Some(side.pre);
        }
    }
    if let Some(clock) = clock {
        place_causally(&mut s.ranges, &r.ranges, clock);
    }
    for (op, n) in &s.post {
        push_un(&mut d.unmatched, *op, *n, Reason::Gap, true);
    }
    for (op, n) in &r.post {
        push_un(&mut d.unmatched, *op, *n, Reason::Gap, false);
    }
    // Two-pointer merge of the two range lists.
    let (a, b) = (&s.ranges, &r.ranges);
    let mut j = 0usize;
    let mut b_cov = vec![0u64; b.len()];
    for &(ao, an, aop) in a {
        let aend = ao + an;
        while j < b.len() && b[j].0 + b[j].1 <= ao {
            j += 1;
        }
        let mut k = j;
        let mut covered = 0u64;
        while k < b.len() && b[k].0 < aend {
            let (bo, bn, bop) = b[k];
            let lo = ao.max(bo);
            let hi = aend.min(bo + bn);
            if hi > lo {
                d.flows.push(Flow {
                    send: aop,
                    recv: bop,
                    offset: lo,
                    bytes: hi - lo,
                });
                covered += hi - lo;
                b_cov[k] += hi - lo;
            }
            k += 1;
        }
        d.matched += covered;
        if covered < an {
            // The uncovered bytes are past the receiver's known bytes or in its hole.
            let mut left = an - covered;
            let before = r.base.min(aend).saturating_sub(ao).min(left);
            push_un(&mut d.unmatched, aop, before, Reason::BeforeTrace, true);
            left -= before;
            let gap_part = gap_bytes(ao, aend, &r).min(left);
            if gap_part > 0 {
                push_un(&mut d.unmatched, aop, gap_part, Reason::Gap, true);
            }
            if left > gap_part {
                let why = if ended_badly {
                    Reason::LostInFlight
                } else {
                    Reason::NotReceived
                };
                push_un(&mut d.unmatched, aop, left - gap_part, why, true);
            }
        }
    }
    for (k, &(bo, bn, bop)) in b.iter().enumerate() {
        if b_cov[k] < bn {
            let mut left = bn - b_cov[k];
            let before = s.base.min(bo + bn).saturating_sub(bo).min(left);
            push_un(&mut d.unmatched, bop, before, Reason::BeforeTrace, false);
            left -= before;
            let gap_part = gap_bytes(bo, bo + bn, &s).min(left);
            if gap_part > 0 {
                push_un(&mut d.unmatched, bop, gap_part, Reason::Gap, false);
            }
            if left > gap_part {
                push_un(
                    &mut d.unmatched,
                    bop,
                    left - gap_part,
                    Reason::Inconsistent,
                    false,
                );
            }
        }
    }
    d
}

/// Reorders the sends of each run of contiguous offsets (exit order, as numbered) so that
/// none lands at an offset whose receive ended before it began: at each offset, the first
/// send in exit order that began no later than the end `e` of the receive reading that
/// offset, if it exited by `e +` [`IN_FLIGHT_NS`]; else (no receive reads the offset, a
/// sender stuck longer, a clock that contradicts itself) the first send in exit order.
/// Sends of one thread keep their order: a thread's earlier send began and ended before
/// its later one.
fn place_causally(sends: &mut [(u64, u64, OpRef)], recvs: &[(u64, u64, OpRef)], clock: Clock) {
    let mut i = 0;
    while i < sends.len() {
        let mut j = i + 1;
        while j < sends.len() && sends[j - 1].0 + sends[j - 1].1 == sends[j].0 {
            j += 1;
        }
        let run = &mut sends[i..j];
        i = j;
        if run.len() < 2 {
            continue;
        }
        let mut pending: std::collections::VecDeque<(u64, OpRef, (i64, i64))> =
            run.iter().map(|&(_, n, op)| (n, op, clock(op))).collect();
        let mut x = run[0].0;
        for slot in run.iter_mut() {
            // The receive reading offset `x`, if any.
            let k = recvs.partition_point(|r| r.0 + r.1 <= x);
            let end = recvs.get(k).filter(|r| r.0 <= x).map(|r| clock(r.2).1);
            let pick = end
                .and_then(|e| {
                    pending
                        .iter()
                        .position(|p| p.2 .0 <= e)
                        .filter(|&i| pending[i].2 .1 <= e.saturating_add(IN_FLIGHT_NS))
                })
                .unwrap_or(0);
            let Some((n, op, _)) = pending.remove(pick) else {
                break;
            };
            *slot = (x, n, op);
            x += n;
        }
    }
}

/// Bytes of the sends that overlap in time a send of another thread: `sends` are (entry,
/// exit, thread, bytes) of one socket's sends, in any order. A thread's own sends never
/// overlap, so at most one send per thread is in progress at any time: a sweep in entry
/// order keeps those (one per writer thread) and marks each send that begins while one of
/// another thread is still in progress, and that one.
pub fn overlapping_bytes<T: Copy + Eq>(sends: &mut [(i64, i64, T, u64)]) -> u64 {
    sends.sort_unstable_by_key(|x| (x.0, x.1));
    let mut marked = vec![false; sends.len()];
    // In progress: (index, exit).
    let mut active: Vec<(usize, i64)> = Vec::new();
    for i in 0..sends.len() {
        let (s0, s1, t, _) = sends[i];
        active.retain(|&(_, e)| e > s0);
        for &(j, _) in &active {
            if sends[j].2 != t {
                marked[i] = true;
                marked[j] = true;
            }
        }
        active.push((i, s1));
    }
    sends
        .iter()
        .zip(marked)
        .filter(|(_, m)| *m)
        .map(|(x, _)| x.3)
        .sum()
}

/// Bytes of `[lo, hi)` the other side cannot account for because of its gap.
fn gap_bytes(lo: u64, hi: u64, other: &Side) -> u64 {
    let mut n = 0;
    if let Some(k) = other.known_until {
        n += hi.saturating_sub(lo.max(k));
    }
    if let Some((h0, h1)) = other.hole {
        let a = lo.max(h0);
        let b = hi.min(h1);
        n += b.saturating_sub(a);
    }
    n
}

fn push_un(v: &mut Vec<Unmatched>, op: OpRef, bytes: u64, reason: Reason, sent: bool) {
    if bytes > 0 {
        v.push(Unmatched {
            op,
            bytes,
            reason,
            sent,
        });
    }
}

/// Every byte of one unpaired side is unmatched for `reason`.
pub fn unpaired(items: &[Item], reason: Reason) -> (Direction, Direction) {
    let mut out = Direction::default();
    let mut inn = Direction::default();
    for it in items {
        match it.kind {
            ItemKind::Send => {
                out.sent += it.n;
                out.sends += 1;
                push_un(&mut out.unmatched, it.op, it.n, reason, true);
            }
            ItemKind::Recv => {
                inn.received += it.n;
                inn.recvs += 1;
                push_un(&mut inn.unmatched, it.op, it.n, reason, false);
            }
            ItemKind::Peek => inn.peeked += it.n,
            ItemKind::Gap => out.gaps += 1,
            _ => {}
        }
    }
    (out, inn)
}
