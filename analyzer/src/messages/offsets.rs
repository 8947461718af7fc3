//! Clock offsets between hosts, from matched messages, and the one-host causality check.
//!
//! A receive cannot end before the send it read from began. With `θ` the correction that
//! turns host B's clock into host A's (`t_A = t_B + θ`), a message A → B gives
//! `θ ≥ send_start_A − recv_end_B` and a message B → A gives
//! `θ ≤ recv_end_A − send_start_B`. The tightest bounds over all matched messages give an
//! interval `[lo, hi]`; the estimate is its middle and the uncertainty its half-width (an
//! interval bounded on one side only has an infinite uncertainty; `lo > hi` means the
//! clocks drifted or a message was wrongly matched, and is reported). Hosts are placed
//! relative to a reference host (the first in name order) through a spanning tree of the
//! host pairs with the narrowest intervals.
//!
//! On one host every process reads the same TSC, so the check is direct: a matched
//! receive that ends before its send began is a **violation** (tests require none).

use super::ops::ProcOps;
use super::stream::Flow;
use serde::Serialize;
use std::collections::BTreeMap;

/// The offset of one host.
#[derive(Clone, Debug, Serialize)]
pub struct HostOffset {
    /// Host.
    pub host: String,
    /// Relative to this host.
    pub reference: String,
    /// Add this to the host's times to get the reference's, ns (middle of the interval).
    pub offset_ns: f64,
    /// Half-width of the interval, ns (infinite — `null` in JSON — if bounded on one side
    /// only or not at all).
    pub uncertainty_ns: f64,
    /// Lower and upper bound (ns; ±inf when unbounded, `null` in JSON).
    pub bounds_ns: (f64, f64),
    /// Messages the bounds came from.
    pub messages: u64,
    /// Bounds crossed (lo > hi).
    pub inconsistent: bool,
}

/// A matched receive that ended before its send began, on one host.
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    /// The flow.
    pub flow: Flow,
    /// By how much, ns.
    pub by_ns: i64,
}

/// Offsets of every host and the one-host violations.
pub fn estimate<'a>(
    procs: &[ProcOps],
    flows: impl Iterator<Item = &'a Flow>,
) -> (Vec<HostOffset>, Vec<Violation>) {
    // (host a, host b) with a < b → (lo, hi, n) for θ(b → a).
    let mut b: BTreeMap<(&str, &str), (f64, f64, u64)> = BTreeMap::new();
    let mut viol = Vec::new();
    for f in flows {
        let (ps, pr) = (&procs[f.send.proc as usize], &procs[f.recv.proc as usize]);
        let s0 = ps.ns(ps.ops[f.send.idx as usize].start);
        let r1 = pr.ns(pr.ops[f.recv.idx as usize].end);
        if ps.host == pr.host {
            if r1 < s0 {
                viol.push(Violation {
                    flow: *f,
                    by_ns: s0 - r1,
                });
            }
            continue;
        }
        // θ converts the larger-named host's clock into the smaller's.
        let (a, bb) = if ps.host < pr.host {
            (ps.host.as_str(), pr.host.as_str())
        } else {
            (pr.host.as_str(), ps.host.as_str())
        };
        let e = b
            .entry((a, bb))
            .or_insert((f64::NEG_INFINITY, f64::INFINITY, 0));
        e.2 += 1;
        if ps.host.as_str() == a {
            // A → B: θ ≥ send_start_A − recv_end_B.
            e.0 = e.0.max((s0 - r1) as f64);
        } else {
            // B → A: θ ≤ recv_end_A − send_start_B.
            e.1 = e.1.min((r1 - s0) as f64);
        }
    }
    let mut hosts: Vec<&str> = procs.iter().map(|p| p.host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let mut out = Vec::new();
    let Some(&reference) = hosts.first() else {
        return (out, viol);
    };
    out.push(HostOffset {
        host: reference.to_string(),
        reference: reference.to_string(),
        offset_ns: 0.0,
        uncertainty_ns: 0.0,
        bounds_ns: (0.0, 0.0),
        messages: 0,
        inconsistent: false,
    });
    // Prim-like growth from the reference, narrowest interval first.
    let mut placed: BTreeMap<&str, (f64, f64, f64)> = BTreeMap::new(); // host → (offset, lo, hi) to reference
    placed.insert(reference, (0.0, 0.0, 0.0));
    loop {
        // (width, host, (offset, lo, hi), messages, inconsistent)
        #[allow(clippy::type_complexity)]
        let mut best: Option<(f64, &str, (f64, f64, f64), u64, bool)> = None;
        for (&(a, bb), &(lo, hi, n)) in &b {
            // θ(bb → a) in [lo, hi].
            let cand = match (placed.get(a), placed.get(bb)) {
                (Some(&(oa, la, ha)), None) => Some((bb, oa, la, ha, lo, hi)),
                (None, Some(&(ob, lb, hb))) => Some((a, -ob, -hb, -lb, -hi, -lo)),
                _ => None,
            };
            let Some((h, o_known, l_known, h_known, lo2, hi2)) = cand else {
                continue;
            };
            let (l, u) = (l_known + lo2, h_known + hi2);
            let width = if l.is_finite() && u.is_finite() {
                (u - l).abs()
            } else {
                f64::INFINITY
            };
            let mid = if l.is_finite() && u.is_finite() {
                (l + u) / 2.0
            } else if l.is_finite() {
                l
            } else if u.is_finite() {
                u
            } else {
                o_known
            };
            if best.as_ref().is_none_or(|x| width < x.0) {
                best = Some((width, h, (mid, l, u), n, l > u));
            }
        }
        let Some((width, h, (mid, l, u), n, bad)) = best else {
            break;
        };
        placed.insert(h, (mid, l, u));
        out.push(HostOffset {
            host: h.to_string(),
            reference: reference.to_string(),
            offset_ns: mid,
            uncertainty_ns: width / 2.0,
            bounds_ns: (l, u),
            messages: n,
            inconsistent: bad,
        });
    }
    for h in hosts {
        if !placed.contains_key(h) {
            out.push(HostOffset {
                host: h.to_string(),
                reference: reference.to_string(),
                offset_ns: 0.0,
                uncertainty_ns: f64::INFINITY,
                bounds_ns: (f64::NEG_INFINITY, f64::INFINITY),
                messages: 0,
                inconsistent: false,
            });
        }
    }
    (out, viol)
}
