//! **Messages across processes** (SPEC §7, Niigaki et al., seed 004): which bytes sent by
//! one process were received by which call of another, in what causal order the events of
//! all processes happened, and where each process waited.
//!
//! The stage runs after decoding, over any number of trace directories and hosts:
//!
//! | step | module | input → output |
//! |------|--------|----------------|
//! | events | [`ops`] | a process's library calls → its [`ops::Op`]s in TSC order |
//! | endpoints | [`sockets`] | ops → [`sockets::Socket`]s (descriptor tables replayed, forks followed), ends paired |
//! | streams | [`stream`] | a paired stream's sends and receives → [`Flow`]s in byte offsets (004's list algorithm), unmatched bytes with reasons |
//! | datagrams | [`datagram`] | datagram sockets → flows by (source, destination, size, order) |
//! | causality | [`clocks`] | flows + connects + forks → Lamport times, vector clocks, happens-before |
//! | clocks | [`offsets`] | flows across hosts → each host's clock offset ± uncertainty; one-host violations |
//! | logical clock | [`logical`] | receives still before their sends → moved forward, the jump amortised (CLC) |
//! | statistics | [`stats`] | request/response latencies, waits per peer, process states |
//! | summary | [`summary`] | the `culprit messages` text and JSON |
//! | units | [`links`] | execution units → where what each received came from and where what it sent went |
//! | bounded | [`streamed`] | every thread decoded at once and merged by time → the stream flows, holding state per open connection (what `culprit export` uses) |
//!
//! **Exactness.** A byte is attributed to a (send, receive) pair only when both byte
//! offsets are known; everything else is reported with a [`Reason`]. Limits of what is
//! recorded: datagrams are matched by the destination each send recorded and the source
//! each receive recorded (traces older than those addresses: connected senders only), by
//! size and order — the contents are not recorded, so of two equal-sized datagrams of one
//! pair the first one received is taken as the first sent ([`datagram`]); sends of several
//! threads or processes into one socket (a descriptor shared across `fork`) whose calls
//! overlap in time have no recorded order: they are taken in exit order, never placing a
//! send at bytes a receive read before the send began ([`stream`], "Order of sends sharing
//! a socket") — every byte is matched, none to an impossible send, but between overlapping
//! sends of equal size the attribution is the likeliest order, not a certainty; an end met
//! mid-connection is aligned only through the byte counts the tracer read from the
//! kernel (TCP; [`sockets`]); pipes are not recorded at all; the resynchronization after a gap
//! assumes lost entries are counted (a count the tracer could not write, the pool's
//! `lost_unreported`, is invisible here).
//!
//! The views built on it: [`export`] (the traces as [`slices`] streamed to [`perfetto`]
//! or [`chrome`] writers, with the flows of [`streamed`], in memory that does not grow
//! with the trace) and [`timeline`] (the HTML time–process diagram).

pub mod align;
pub mod chrome;
pub mod clocks;
pub mod datagram;
pub mod drift;
pub mod export;
pub mod links;
pub mod logical;
pub mod offsets;
pub mod ops;
pub mod perfetto;
pub mod slices;
pub mod sockets;
mod spill;
pub mod stats;
pub mod stream;
pub mod streamed;
pub mod summary;
pub mod timeline;

use crate::decode::TraceSet;
use crate::error::Result;
use ops::{OpKind, ProcOps};
use rayon::prelude::*;
use serde::Serialize;
use sockets::{ItemKind, OpRef, Origin, Socket};
use stream::Direction;
pub use stream::{Flow, Reason};

/// What kind of channel a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnKind {
    /// A TCP connection (IPv4 or IPv6).
    Tcp,
    /// A UNIX stream connection (`connect`/`accept` on a path).
    Unix,
    /// A `socketpair`.
    Pair,
    /// Datagrams from one socket to another.
    Datagram,
    /// A stream socket whose other end is not known.
    Stream,
}

/// One connection: two sockets, or one whose other end is unknown.
#[derive(Clone, Debug)]
pub struct Connection {
    /// Kind.
    pub kind: ConnKind,
    /// The first end (the connecting one for TCP/UNIX, the sender for datagrams).
    pub a: u32,
    /// The other end, if traced.
    pub b: Option<u32>,
    /// a → b.
    pub ab: Direction,
    /// b → a.
    pub ba: Direction,
    /// Reset (`ECONNRESET`/`EPIPE`) seen on either end.
    pub reset: bool,
    /// Datagrams received out of order.
    pub reordered: u64,
    /// Datagrams sent and never received.
    pub lost: u64,
    /// Datagrams received again.
    pub duplicated: u64,
}

impl Connection {
    /// Every flow, both directions.
    pub fn flows(&self) -> impl Iterator<Item = &Flow> {
        self.ab.flows.iter().chain(self.ba.flows.iter())
    }
}

/// The result of the stage.
#[derive(Clone, Debug, Default)]
pub struct Messages {
    /// Processes with their ops.
    pub procs: Vec<ProcOps>,
    /// Sockets.
    pub sockets: Vec<Socket>,
    /// Connections (every socket that moved bytes is in one).
    pub conns: Vec<Connection>,
    /// Lamport time of every op, per process.
    pub lamport: Vec<Vec<u64>>,
    /// Cross-process edges (flows, connect → accept, fork → child).
    pub edges: clocks::Edges,
    /// Edges a cycle forced to ignore (0 on a consistent trace).
    pub broken_edges: u64,
    /// Clock offsets of the hosts.
    pub offsets: Vec<offsets::HostOffset>,
    /// One-host matched receives that end before their send began.
    pub violations: Vec<offsets::Violation>,
    /// Matched cross-host receives that end before their send began once every host's
    /// clock is corrected ([`offsets`]).
    pub aligned_violations: u64,
    /// The controlled logical clock pass over the corrected times ([`logical`]).
    pub logical: logical::LogicalClock,
    /// Entries decoded.
    pub entries: u64,
}

impl Messages {
    /// Every flow.
    pub fn flows(&self) -> impl Iterator<Item = &Flow> {
        self.conns.iter().flat_map(|c| c.flows())
    }

    /// The op behind a reference.
    pub fn op(&self, r: OpRef) -> &ops::Op {
        &self.procs[r.proc as usize].ops[r.idx as usize]
    }

    /// 004's event id of an op: (host, pid, Lamport time).
    pub fn event_id(&self, r: OpRef) -> (&str, u32, u64) {
        let p = &self.procs[r.proc as usize];
        (
            &p.host,
            p.pid,
            self.lamport[r.proc as usize][r.idx as usize],
        )
    }

    /// Vector clocks of every op (see [`clocks::vector_clocks`]).
    pub fn vector_clocks(&self) -> Vec<Vec<Vec<u32>>> {
        let lens: Vec<usize> = self.procs.iter().map(|p| p.ops.len()).collect();
        clocks::vector_clocks(&lens, &self.edges, &self.lamport)
    }

    /// A reachability index for [`clocks::OutEdges::happens_before`] queries.
    pub fn causality(&self) -> clocks::OutEdges {
        let lens: Vec<usize> = self.procs.iter().map(|p| p.ops.len()).collect();
        clocks::OutEdges::new(&lens, &self.edges)
    }

    /// Wall-clock ns of an op's start and end.
    pub fn op_ns(&self, r: OpRef) -> (i64, i64) {
        let p = &self.procs[r.proc as usize];
        let o = &p.ops[r.idx as usize];
        (p.ns(o.start), p.ns(o.end))
    }
}

/// Runs the stage over a trace set (processes decoded in parallel).
pub fn analyze(set: &TraceSet) -> Result<Messages> {
    let procs: Vec<ProcOps> = set
        .processes
        .par_iter()
        .map(ops::collect)
        .collect::<Result<Vec<_>>>()?;
    Ok(analyze_ops(procs))
}

/// The stage from collected ops.
pub fn analyze_ops(mut procs: Vec<ProcOps>) -> Messages {
    let entries = procs.iter().map(|p| p.entries).sum();
    let mut socks = sockets::resolve(&mut procs);
    sockets::pair_streams(&procs, &mut socks);
    let mut conns = Vec::new();
    let mut done = vec![false; socks.len()];
    for i in 0..socks.len() {
        if done[i] || !socks[i].stream {
            continue;
        }
        let s = &socks[i];
        let moved = s
            .items
            .iter()
            .any(|it| matches!(it.kind, ItemKind::Send | ItemKind::Recv | ItemKind::Peek));
        match s.partner {
            Some(p) => {
                let p = p as usize;
                done[i] = true;
                done[p] = true;
                // The connecting end is `a`.
                let (a, b) = if socks[p].origin == Origin::Connect {
                    (p, i)
                } else {
                    (i, p)
                };
                let (sa, sb) = (&socks[a], &socks[b]);
                let reset = [sa, sb]
                    .iter()
                    .any(|s| s.items.iter().any(|it| it.kind == ItemKind::Reset));
                let closed = |s: &Socket| s.items.iter().any(|it| it.kind == ItemKind::Close);
                // One clock on both ends: sends placed so that no receive precedes them.
                let clock = |r: OpRef| {
                    let p = &procs[r.proc as usize];
                    let o = &p.ops[r.idx as usize];
                    (p.ns(o.start), p.ns(o.end))
                };
                // Only where several threads write to the socket: one thread's order is
                // certain (and the rule would keep it).
                let one_host = procs[sa.proc as usize].host == procs[sb.proc as usize].host;
                let writers = |s: &Socket| s.shared_writers;
                let clock_of = |s: &Socket| -> Option<stream::Clock> {
                    (one_host && writers(s)).then_some(&clock)
                };
                // Sends of several threads that overlapped: their order is inferred.
                let inferred = |s: &Socket| -> u64 {
                    let mut v: Vec<(i64, i64, (u32, u32), u64)> = s
                        .items
                        .iter()
                        .filter(|it| it.kind == ItemKind::Send)
                        .map(|it| {
                            let (a, b) = clock(it.op);
                            let tid = procs[it.op.proc as usize].ops[it.op.idx as usize].tid;
                            (a, b, (it.op.proc, tid), it.n)
                        })
                        .collect();
                    stream::overlapping_bytes(&mut v)
                };
                let (mut ab, mut ba) = match (sa.base, sb.base) {
                    (Some((ra, wa)), Some((rb, wb))) => (
                        stream::match_direction(
                            &sa.items,
                            &sb.items,
                            reset || closed(sb),
                            (wa, rb),
                            clock_of(sa),
                        ),
                        stream::match_direction(
                            &sb.items,
                            &sa.items,
                            reset || closed(sa),
                            (wb, ra),
                            clock_of(sb),
                        ),
                    ),
                    // An end met already open whose offsets are unknown: no alignment.
                    _ => {
                        let (ao, ai) = stream::unpaired(&sa.items, Reason::OffsetsUnknown);
                        let (bo, bi) = stream::unpaired(&sb.items, Reason::OffsetsUnknown);
                        (ao.join(bi), bo.join(ai))
                    }
                };
                if writers(sa) {
                    ab.order_inferred = inferred(sa);
                }
                if writers(sb) {
                    ba.order_inferred = inferred(sb);
                }
                let kind = match (sa.origin, sa.peer.map(|p| p.family)) {
                    (Origin::Pair, _) => ConnKind::Pair,
                    (_, Some(1)) => ConnKind::Unix,
                    _ => ConnKind::Tcp,
                };
                conns.push(Connection {
                    kind,
                    a: a as u32,
                    b: Some(b as u32),
                    ab,
                    ba,
                    reset,
                    reordered: 0,
                    lost: 0,
                    duplicated: 0,
                });
            }
            None if moved => {
                done[i] = true;
                let why = if s.origin == Origin::Unknown {
                    Reason::NoSetup
                } else {
                    Reason::PeerUntraced
                };
                let (ab, ba) = stream::unpaired(&s.items, why);
                let reset = s.items.iter().any(|it| it.kind == ItemKind::Reset);
                let kind = match s.peer.map(|p| p.family) {
                    Some(1) => ConnKind::Unix,
                    Some(2 | 10) => ConnKind::Tcp,
                    _ => ConnKind::Stream,
                };
                conns.push(Connection {
                    kind,
                    a: i as u32,
                    b: None,
                    ab,
                    ba,
                    reset,
                    reordered: 0,
                    lost: 0,
                    duplicated: 0,
                });
            }
            None => {}
        }
    }
    let (pairs, left) = datagram::match_datagrams(&procs, &socks);
    for p in pairs {
        conns.push(Connection {
            kind: ConnKind::Datagram,
            a: p.from,
            b: Some(p.to),
            ab: p.dir,
            ba: Direction::default(),
            reset: false,
            reordered: p.reordered,
            lost: p.lost,
            duplicated: p.duplicated,
        });
    }
    for (s, d) in left {
        let (ab, ba) = if d.sent > 0 || d.received == 0 {
            (d, Direction::default())
        } else {
            (Direction::default(), d)
        };
        conns.push(Connection {
            kind: ConnKind::Datagram,
            a: s,
            b: None,
            ab,
            ba,
            reset: false,
            reordered: 0,
            lost: 0,
            duplicated: 0,
        });
    }
    // Causal edges.
    let mut pairs: Vec<(OpRef, OpRef)> = Vec::new();
    for c in &conns {
        for f in c.flows() {
            pairs.push((f.send, f.recv));
        }
        let adopted = |s: u32| socks[s as usize].origin == Origin::Adopted;
        if let (Some(b), ConnKind::Tcp | ConnKind::Unix) = (c.b, c.kind) {
            // connect → accept; an adopted end's first use is no such edge.
            if adopted(c.a) || adopted(b) {
                continue;
            }
            if let (Some(x), Some(y)) = (socks[c.a as usize].setup, socks[b as usize].setup) {
                pairs.push((x, y));
            }
        }
    }
    let by_pid: crate::hash::FxMap<(&str, u32), usize> = procs
        .iter()
        .enumerate()
        .map(|(i, p)| ((p.host.as_str(), p.pid), i))
        .collect();
    for (pi, p) in procs.iter().enumerate() {
        for (i, o) in p.ops.iter().enumerate() {
            if o.kind == OpKind::Fork && o.ret > 0 {
                if let Some(&c) = by_pid.get(&(p.host.as_str(), o.ret as u32)) {
                    if c != pi && procs[c].forked && !procs[c].ops.is_empty() {
                        pairs.push((
                            OpRef {
                                proc: pi as u32,
                                idx: i as u32,
                            },
                            OpRef {
                                proc: c as u32,
                                idx: 0,
                            },
                        ));
                    }
                }
            }
        }
    }
    let lens: Vec<usize> = procs.iter().map(|p| p.ops.len()).collect();
    let edges = clocks::Edges::build(&lens, pairs);
    let (lamport, broken_edges) = clocks::lamport(&lens, &edges);
    let (offsets, violations, aligned_violations) =
        offsets::estimate(&procs, conns.iter().flat_map(|c| c.flows()));
    let logical = logical::controlled(
        &procs,
        conns.iter().flat_map(|c| c.flows()),
        &lamport,
        &offsets,
    );
    Messages {
        procs,
        sockets: socks,
        conns,
        lamport,
        edges,
        broken_edges,
        offsets,
        violations,
        aligned_violations,
        logical,
        entries,
    }
}
