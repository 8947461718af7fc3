//! Datagram matching (UDP, UNIX datagram sockets): by (source, destination, size, order).
//!
//! **Addresses.** A datagram's destination is the address recorded on its send's exit
//! (`sendto`'s destination, `sendmsg`'s `msg_name`: the `Peer` option) or else its
//! socket's connected peer; a receive's source is the address recorded on its exit
//! (`recvfrom`'s or `recvmsg`'s source) or else its socket's connected peer. A sending
//! socket's local address is the one it was bound or connected with, or the one the tracer
//! recorded (once per descriptor, as `Local`) on its first send with an address, when the
//! kernel had just given it a port. Traces made before these addresses were recorded
//! match only connected senders (their destination is the peer). A destination matches a
//! receiving socket's local address when family, port and address are equal; a wildcard
//! local address matches any address of the same port on the same host.
//!
//! **Candidates.** A receiving socket's candidates are the sending sockets with a datagram
//! whose destination is its local address (and, if it is connected, whose local address
//! is its peer). A receive with a recorded source only takes datagrams of a candidate
//! whose local address is that source (or is unknown).
//!
//! **Order.** The receives are taken in order; each takes the earliest unmatched datagram
//! of the same size and a fitting destination from the candidates, sent before the
//! receive ended (on one host). When several candidates have such a datagram, the receive
//! is [`Reason::Ambiguous`] (never guessed). Per (sender, receiver) pair: a datagram taken
//! after a later one of the pair was already received counts as **reordered**; datagrams
//! never received are [`Reason::DatagramLost`] (counted as **lost**); a receive that fits
//! no unmatched datagram but fits one already matched, of exactly one candidate, is
//! [`Reason::Duplicated`] (counted as **duplicated**; a duplicate that arrives while an
//! equal-sized datagram of the pair is still unmatched is taken as that one — sizes and
//! order are all the trace has). Sockets with no candidate, and receives whose source is no
//! candidate, are [`Reason::NoAddress`] (sending with no destination known) or
//! [`Reason::PeerUntraced`].

use super::ops::ProcOps;
use super::sockets::{normalize, ItemKind, OpRef, Socket};
use super::stream::{Direction, Flow, Reason, Unmatched};
use crate::hash::FxMap;
use bufpool::format::Addr;

/// The result for one (sender socket, receiver socket) pair.
#[derive(Clone, Debug, Default)]
pub struct DgramPair {
    /// Sender socket.
    pub from: u32,
    /// Receiver socket.
    pub to: u32,
    /// Flows and counts.
    pub dir: Direction,
    /// Datagrams received out of order.
    pub reordered: u64,
    /// Datagrams sent and never received.
    pub lost: u64,
    /// Receives of a datagram already received.
    pub duplicated: u64,
    /// One past the highest index (in the sender's datagrams) taken by this pair.
    last: usize,
}

/// One datagram of a sender: the op, its size, its start (ns), its destination.
struct Dgram {
    op: OpRef,
    n: u64,
    start: i64,
    dst: Option<Addr>,
    /// The receiving socket that took it.
    taken: Option<u32>,
}

/// A sender's datagrams and the first not taken.
struct Sent {
    v: Vec<Dgram>,
    first: usize,
}

/// The address recorded on a data op's exit (`Peer`: destination of a send, source of a
/// receive), if any.
pub(super) fn op_addr(procs: &[ProcOps], r: OpRef) -> Option<Addr> {
    procs[r.proc as usize].addrs.get(&r.idx).and_then(|a| a.1)
}

pub(super) fn addr_matches(dst: &Addr, local: &Addr, same_host: bool) -> bool {
    let (d, l) = (normalize(dst), normalize(local));
    if d.family != l.family || d.port != l.port {
        return false;
    }
    if d.bytes() == l.bytes() {
        let lb = l.bytes();
        let loop_ = (l.family == 2 && lb.first() == Some(&127)) || l.family == 1;
        return same_host || !loop_;
    }
    same_host && l.bytes().iter().all(|&b| b == 0)
}

/// Does a receive from `src` (if known) fit a sender whose local address is `local`?
pub(super) fn source_fits(src: Option<&Addr>, local: Option<&Addr>, same_host: bool) -> bool {
    match (src, local) {
        (Some(s), Some(l)) => addr_matches(s, l, same_host),
        _ => true,
    }
}

/// Matches every datagram socket. Returns the pairs and, per socket, the bytes that could
/// not be matched (sends and receives of sockets in no pair, ambiguous receives).
pub fn match_datagrams(
    procs: &[ProcOps],
    socks: &[Socket],
) -> (Vec<DgramPair>, Vec<(u32, Direction)>) {
    let dg: Vec<u32> = (0..socks.len() as u32)
        .filter(|&i| !socks[i as usize].stream && !socks[i as usize].items.is_empty())
        .collect();
    let host = |s: u32| procs[socks[s as usize].proc as usize].host.as_str();
    let ns_of = |r: OpRef, start: bool| {
        let p = &procs[r.proc as usize];
        let o = &p.ops[r.idx as usize];
        p.ns(if start { o.start } else { o.end })
    };
    // Per sender: its datagrams, each with its destination.
    let mut sent: FxMap<u32, Sent> = FxMap::default();
    // Per sender: its distinct destinations.
    let mut dsts: FxMap<u32, Vec<Addr>> = FxMap::default();
    for &s in &dg {
        let so = &socks[s as usize];
        let v: Vec<Dgram> = so
            .items
            .iter()
            .filter(|i| i.kind == ItemKind::Send)
            .map(|i| Dgram {
                op: i.op,
                n: i.n,
                start: ns_of(i.op, true),
                dst: op_addr(procs, i.op).or(so.peer),
                taken: None,
            })
            .collect();
        let d = dsts.entry(s).or_default();
        for g in &v {
            if let Some(a) = g.dst {
                if !d.contains(&a) {
                    d.push(a);
                }
            }
        }
        sent.insert(s, Sent { v, first: 0 });
    }
    // Candidates of each receiving socket.
    let mut cands: FxMap<u32, Vec<u32>> = FxMap::default();
    for &r in &dg {
        let rs = &socks[r as usize];
        if !rs.items.iter().any(|i| i.kind == ItemKind::Recv) {
            continue;
        }
        let Some(rl) = rs.local else { continue };
        for &s in &dg {
            let ss = &socks[s as usize];
            let same = host(s) == host(r);
            if s == r || !dsts[&s].iter().any(|d| addr_matches(d, &rl, same)) {
                continue;
            }
            if !source_fits(rs.peer.as_ref(), ss.local.as_ref(), same) {
                continue;
            }
            cands.entry(r).or_default().push(s);
        }
    }
    let mut pairs: FxMap<(u32, u32), DgramPair> = FxMap::default();
    let mut leftover: FxMap<u32, Direction> = FxMap::default();
    for &r in &dg {
        let c = cands.get(&r).cloned().unwrap_or_default();
        let rl = socks[r as usize].local;
        for it in socks[r as usize].items.iter() {
            if it.kind != ItemKind::Recv {
                continue;
            }
            let rend = ns_of(it.op, false);
            let src = op_addr(procs, it.op).or(socks[r as usize].peer);
            let mut found: Vec<(u32, usize)> = Vec::new();
            let mut again: Vec<u32> = Vec::new();
            let mut from_candidate = false;
            for &s in &c {
                let same = host(s) == host(r);
                if !source_fits(src.as_ref(), socks[s as usize].local.as_ref(), same) {
                    continue;
                }
                from_candidate = true;
                let e = &sent[&s];
                let fits = |g: &Dgram| {
                    g.n == it.n
                        && (!same || g.start <= rend)
                        && match (g.dst, rl) {
                            (Some(d), Some(l)) => addr_matches(&d, &l, same),
                            _ => false,
                        }
                };
                let hit = (e.first..e.v.len())
                    .take(4096)
                    .find(|&k| e.v[k].taken.is_none() && fits(&e.v[k]));
                match hit {
                    Some(k) => found.push((s, k)),
                    None => {
                        if e.v.iter().any(|g| g.taken == Some(r) && fits(g)) {
                            again.push(s);
                        }
                    }
                }
            }
            if found.len() == 1 {
                let (s, k) = found[0];
                let e = sent.get_mut(&s).expect("sender");
                e.v[k].taken = Some(r);
                while e.first < e.v.len() && e.v[e.first].taken.is_some() {
                    e.first += 1;
                }
                let p = pairs.entry((s, r)).or_insert_with(|| DgramPair {
                    from: s,
                    to: r,
                    ..Default::default()
                });
                p.reordered += (k < p.last) as u64;
                p.last = p.last.max(k + 1);
                p.dir.matched += it.n;
                p.dir.received += it.n;
                p.dir.recvs += 1;
                p.dir.flows.push(Flow {
                    send: e.v[k].op,
                    recv: it.op,
                    offset: 0,
                    bytes: it.n,
                });
                continue;
            }
            let (why, d) = if found.is_empty() && again.len() == 1 {
                let p = pairs.entry((again[0], r)).or_insert_with(|| DgramPair {
                    from: again[0],
                    to: r,
                    ..Default::default()
                });
                p.duplicated += 1;
                (Reason::Duplicated, &mut p.dir)
            } else {
                let why = if found.len() > 1 || again.len() > 1 {
                    Reason::Ambiguous
                } else if !from_candidate {
                    Reason::PeerUntraced
                } else {
                    Reason::Inconsistent
                };
                (why, leftover.entry(r).or_default())
            };
            d.received += it.n;
            d.recvs += 1;
            d.unmatched.push(Unmatched {
                op: it.op,
                bytes: it.n,
                reason: why,
                sent: false,
            });
        }
    }
    // Sends: counted in the pair that took them, or whose receiver their destination is.
    let receivers_of: FxMap<u32, Vec<u32>> = {
        let mut m: FxMap<u32, Vec<u32>> = FxMap::default();
        for (&r, c) in &cands {
            for &s in c {
                m.entry(s).or_default().push(r);
            }
        }
        for v in m.values_mut() {
            v.sort_unstable();
        }
        m
    };
    for &s in &dg {
        let e = &sent[&s];
        for g in &e.v {
            let rcv = g.taken.or_else(|| {
                let same = |r: u32| host(s) == host(r);
                receivers_of.get(&s).and_then(|rs| {
                    rs.iter()
                        .copied()
                        .find(|&r| match (g.dst, socks[r as usize].local) {
                            (Some(d), Some(l)) => addr_matches(&d, &l, same(r)),
                            _ => false,
                        })
                })
            });
            let d = match rcv {
                Some(r) => {
                    let p = pairs.entry((s, r)).or_insert_with(|| DgramPair {
                        from: s,
                        to: r,
                        ..Default::default()
                    });
                    p.lost += g.taken.is_none() as u64;
                    &mut p.dir
                }
                None => leftover.entry(s).or_default(),
            };
            d.sent += g.n;
            d.sends += 1;
            if g.taken.is_none() {
                let why = match (rcv, g.dst) {
                    (Some(_), _) => Reason::DatagramLost,
                    (None, None) => Reason::NoAddress,
                    (None, Some(_)) => Reason::PeerUntraced,
                };
                d.unmatched.push(Unmatched {
                    op: g.op,
                    bytes: g.n,
                    reason: why,
                    sent: true,
                });
            }
        }
    }
    let mut out: Vec<DgramPair> = pairs.into_values().collect();
    out.sort_by_key(|p| (p.from, p.to));
    let mut left: Vec<(u32, Direction)> = leftover.into_iter().collect();
    left.sort_by_key(|l| l.0);
    (out, left)
}
