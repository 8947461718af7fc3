//! The controlled logical clock (Rabenseifner's CLC, as Scalasca applies it after its
//! linear offset interpolation): where the hosts' clock corrections ([`super::offsets`])
//! still leave a matched receive ending before its send began (a clock that did not
//! drift linearly, a correction too uncertain), the receive is moved **forward** to end
//! no earlier than its send's start plus the least latency of a message, and the jump is
//! **amortised forward** over the receiving process's later ops: each keeps at least
//! [`KEEP`] of its distance to the op before it, so the shift shrinks by the rest of every
//! interval until the process's own times are reached again. Ops are taken in Lamport
//! order, so a send is placed before any receive of it is.
//!
//! The least latency is the shortest of the matched messages within one host (one clock:
//! a latency that did happen), 0 if there is none. Nothing is moved when the corrections
//! leave no violation. The shifts are reported (`culprit messages`: how many ops moved,
//! by how much at most) and kept per op ([`LogicalClock::shift_ns`]) for the views.

use super::offsets::HostOffset;
use super::ops::ProcOps;
use super::sockets::OpRef;
use super::stream::Flow;
use serde::Serialize;
use std::collections::BTreeMap;

/// Share of each local interval kept while a jump is amortised (the rest of it is taken
/// off the jump).
pub const KEEP: f64 = 0.9;

/// What the pass did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LogicalClock {
    /// Matched (send, receive) pairs whose receive ended before the send began once the
    /// hosts' clocks were corrected, before the pass (within one host and across hosts).
    pub violations_before: u64,
    /// Left after it (0 unless the matches form a cycle).
    pub violations_after: u64,
    /// The least latency a receive was held to, ns.
    pub min_latency_ns: i64,
    /// Ops moved forward.
    pub moved: u64,
    /// The largest move, ns.
    pub max_shift_ns: i64,
    /// Per process, per op: how far it was moved, ns (empty when nothing moved).
    #[serde(skip)]
    pub shift_ns: Vec<Vec<i64>>,
}

/// Runs the pass over `procs` (times corrected by `offsets`), the matched messages
/// `flows` and the ops' Lamport times.
pub fn controlled<'a>(
    procs: &[ProcOps],
    flows: impl Iterator<Item = &'a Flow>,
    lamport: &[Vec<u64>],
    offsets: &[HostOffset],
) -> LogicalClock {
    let by_host: BTreeMap<&str, &HostOffset> =
        offsets.iter().map(|o| (o.host.as_str(), o)).collect();
    let t = |p: &ProcOps, tsc: u64| {
        let x = p.ns(tsc);
        x + by_host
            .get(p.host.as_str())
            .map_or(0, |o| o.correction_ns(x))
    };
    // Every receive's sends (a receive may read several), and the least one-host latency.
    let mut sends_of: BTreeMap<OpRef, Vec<OpRef>> = BTreeMap::new();
    let mut min_latency: Option<i64> = None;
    let mut before = 0u64;
    for f in flows {
        let (ps, pr) = (&procs[f.send.proc as usize], &procs[f.recv.proc as usize]);
        let s0 = t(ps, ps.ops[f.send.idx as usize].start);
        let r1 = t(pr, pr.ops[f.recv.idx as usize].end);
        if ps.host == pr.host && r1 >= s0 {
            min_latency = Some(min_latency.map_or(r1 - s0, |m| m.min(r1 - s0)));
        }
        let v = sends_of.entry(f.recv).or_default();
        if !v.contains(&f.send) {
            v.push(f.send);
            before += u64::from(r1 < s0);
        }
    }
    let mut out = LogicalClock {
        violations_before: before,
        min_latency_ns: min_latency.unwrap_or(0),
        ..Default::default()
    };
    if before == 0 {
        return out;
    }
    let l_min = out.min_latency_ns;
    let mut order: Vec<(u64, u32, u32)> = Vec::new();
    for (p, lt) in lamport.iter().enumerate() {
        for (i, &l) in lt.iter().enumerate() {
            order.push((l, p as u32, i as u32));
        }
    }
    order.sort_unstable();
    let mut shift: Vec<Vec<i64>> = procs.iter().map(|p| vec![0; p.ops.len()]).collect();
    for (_, p, i) in order {
        let (p, i) = (p as usize, i as usize);
        let pr = &procs[p];
        let end = t(pr, pr.ops[i].end);
        // The jump carried from the op before, less what this interval amortises.
        let mut d = if i == 0 {
            0
        } else {
            let gap = (end - t(pr, pr.ops[i - 1].end)).max(0);
            (shift[p][i - 1] - ((1.0 - KEEP) * gap as f64) as i64).max(0)
        };
        let r = OpRef {
            proc: p as u32,
            idx: i as u32,
        };
        for s in sends_of.get(&r).map_or(&[][..], |v| &v[..]) {
            let ps = &procs[s.proc as usize];
            let s0 = t(ps, ps.ops[s.idx as usize].start) + shift[s.proc as usize][s.idx as usize];
            d = d.max(s0 + l_min - end);
        }
        shift[p][i] = d;
        if d > 0 {
            out.moved += 1;
            out.max_shift_ns = out.max_shift_ns.max(d);
        }
    }
    out.violations_after = sends_of
        .iter()
        .flat_map(|(r, v)| v.iter().map(move |s| (*r, *s)))
        .filter(|(r, s)| {
            let (ps, pr) = (&procs[s.proc as usize], &procs[r.proc as usize]);
            let s0 = t(ps, ps.ops[s.idx as usize].start) + shift[s.proc as usize][s.idx as usize];
            let r1 = t(pr, pr.ops[r.idx as usize].end) + shift[r.proc as usize][r.idx as usize];
            r1 < s0
        })
        .count() as u64;
    out.shift_ns = shift;
    out
}
