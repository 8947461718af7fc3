//! Datagram matching (UDP, UNIX datagram sockets): by (source, destination, size, order).
//!
//! The tracer records the addresses of `connect` and `bind` but not the destination of
//! each `sendto` nor the source of each `recvfrom`, so a sending socket's destination is
//! its connected peer, and a receiving socket is found by its local address (bound or
//! connected; a wildcard address matches any address of the same port on its host). A
//! receiving socket's *candidates* are the sending sockets whose peer is its local address
//! (and, if it is connected, whose local address is its peer).
//!
//! The receives are taken in order; each takes the earliest unmatched datagram of the same
//! size from the candidates, sent before the receive ended (on one host). When several
//! candidates have such a datagram, the receive is [`Reason::Ambiguous`] (never guessed).
//! A datagram taken after a later one of the same sender was already received counts as
//! **reordered**; datagrams never received are [`Reason::DatagramLost`]. Sockets with no
//! candidate are [`Reason::NoAddress`] (sending without a connected peer) or
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
}

/// A sender's datagrams (op, size, start ns), which are taken, the first not taken, and one
/// past the last taken.
type Sent = (Vec<(OpRef, u64, i64)>, Vec<bool>, usize, usize);

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
            if s == r || !ss.items.iter().any(|i| i.kind == ItemKind::Send) {
                continue;
            }
            let same = host(s) == host(r);
            let Some(sp) = ss.peer else { continue };
            if !addr_matches(&sp, &rl, same) {
                continue;
            }
            if let (Some(rp), Some(sl)) = (rs.peer, ss.local) {
                if !addr_matches(&rp, &sl, same) {
                    continue;
                }
            }
            cands.entry(r).or_default().push(s);
        }
    }
    let mut pairs: FxMap<(u32, u32), DgramPair> = FxMap::default();
    let mut leftover: FxMap<u32, Direction> = FxMap::default();
    // Per sender: its datagrams (op, size, start ns), and which are taken.
    let mut sent: FxMap<u32, Sent> = FxMap::default();
    for &s in &dg {
        let v: Vec<_> = socks[s as usize]
            .items
            .iter()
            .filter(|i| i.kind == ItemKind::Send)
            .map(|i| (i.op, i.n, ns_of(i.op, true)))
            .collect();
        let n = v.len();
        sent.insert(s, (v, vec![false; n], 0, 0));
    }
    for &r in &dg {
        let c = cands.get(&r).cloned().unwrap_or_default();
        for it in socks[r as usize].items.iter() {
            if it.kind != ItemKind::Recv {
                continue;
            }
            let rend = ns_of(it.op, false);
            let mut found: Vec<(u32, usize)> = Vec::new();
            for &s in &c {
                let same = host(s) == host(r);
                let (v, taken, first, _) = &sent[&s];
                let hit = (*first..v.len())
                    .take(4096)
                    .find(|&k| !taken[k] && v[k].1 == it.n && (!same || v[k].2 <= rend));
                if let Some(k) = hit {
                    found.push((s, k));
                }
            }
            if found.len() == 1 {
                let (s, k) = found[0];
                let e = sent.get_mut(&s).expect("sender");
                e.1[k] = true;
                let reordered = k < e.3;
                e.3 = e.3.max(k + 1);
                while e.2 < e.1.len() && e.1[e.2] {
                    e.2 += 1;
                }
                let p = pairs.entry((s, r)).or_insert_with(|| DgramPair {
                    from: s,
                    to: r,
                    ..Default::default()
                });
                p.reordered += reordered as u64;
                p.dir.matched += it.n;
                p.dir.received += it.n;
                p.dir.recvs += 1;
                p.dir.flows.push(Flow {
                    send: e.0[k].0,
                    recv: it.op,
                    offset: 0,
                    bytes: it.n,
                });
            } else {
                let why = if found.len() > 1 {
                    Reason::Ambiguous
                } else if c.is_empty() {
                    Reason::PeerUntraced
                } else {
                    Reason::Inconsistent
                };
                let d = leftover.entry(r).or_default();
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
    }
    // Sends: counted in the pair of their first receiver, unmatched ones reported.
    let receivers_of: FxMap<u32, Vec<u32>> = {
        let mut m: FxMap<u32, Vec<u32>> = FxMap::default();
        for (&r, c) in &cands {
            for &s in c {
                m.entry(s).or_default().push(r);
            }
        }
        m
    };
    for &s in &dg {
        let (v, taken, _, _) = &sent[&s];
        if v.is_empty() {
            continue;
        }
        let rcv = receivers_of.get(&s).and_then(|r| r.iter().min().copied());
        let d = match rcv {
            Some(r) => {
                &mut pairs
                    .entry((s, r))
                    .or_insert_with(|| DgramPair {
                        from: s,
                        to: r,
                        ..Default::default()
                    })
                    .dir
            }
            None => leftover.entry(s).or_default(),
        };
        for (k, &(op, n, _)) in v.iter().enumerate() {
            d.sent += n;
            d.sends += 1;
            if !taken[k] {
                let why = match (rcv, socks[s as usize].peer) {
                    (Some(_), _) => Reason::DatagramLost,
                    (None, None) => Reason::NoAddress,
                    (None, Some(_)) => Reason::PeerUntraced,
                };
                d.unmatched.push(Unmatched {
                    op,
                    bytes: n,
                    reason: why,
                    sent: true,
                });
            }
        }
    }
    // Flows of a pair: in the pair; sends counted where the sender's were.
    let mut out: Vec<DgramPair> = pairs.into_values().collect();
    out.sort_by_key(|p| (p.from, p.to));
    let mut left: Vec<(u32, Direction)> = leftover.into_iter().collect();
    left.sort_by_key(|l| l.0);
    (out, left)
}
