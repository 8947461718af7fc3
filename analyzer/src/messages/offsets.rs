//! Clock offsets and drifts between hosts, from matched messages, and the one-host
//! causality check.
//!
//! A receive cannot end before the send it read from began. Between two hosts, the
//! correction that turns host B's time into host A's is fitted as a line — an offset at a
//! common origin (the middle of the run's cross-host messages, `at_ns`) and a drift — by
//! [`super::drift::fit`]: the bounds of every matched message in both directions, a
//! convex-hull linear program; the estimate is the middle of what they allow and the
//! uncertainties half its ranges (infinite when messages went one way only; crossed bounds
//! — clocks that did not drift linearly, or a wrong match — are reported as
//! `inconsistent`). Hosts are placed relative to a reference host (the first in name order)
//! along a spanning tree of the host pairs with the narrowest offset ranges, their lines
//! composed along the tree's paths. `aligned_violations` counts the matched cross-host
//! receives that still end before their send began once every host's time is corrected
//! (0 when every pair's line fits its messages and the tree holds every constrained pair).
//!
//! On one host every process reads the same clock (`crate::trace::clock`), so the check is
//! direct: a matched receive that ends before its send began is a **violation** (tests
//! require none).

use super::ops::ProcOps;
use super::stream::Flow;
use serde::Serialize;
use std::collections::BTreeMap;

/// The clock correction of one host: add `offset_ns + drift · (t − at_ns)` to its time
/// `t` to get the reference's ([`HostOffset::correction_ns`]).
#[derive(Clone, Debug, Serialize)]
pub struct HostOffset {
    /// Host.
    pub host: String,
    /// Relative to this host.
    pub reference: String,
    /// The correction at `at_ns`, ns (middle of what the messages allow).
    pub offset_ns: f64,
    /// Half the range of corrections the messages allow at `at_ns`, ns (infinite — `null`
    /// in JSON — if bounded on one side only or not at all).
    pub uncertainty_ns: f64,
    /// Lower and upper bound of the correction at `at_ns` (ns; ±inf when unbounded, `null`
    /// in JSON).
    pub bounds_ns: (f64, f64),
    /// The origin of the line: the middle of the run's cross-host messages (Unix ns).
    pub at_ns: i64,
    /// How much faster the reference's clock runs than this host's, parts per million (the
    /// correction grows by this many ns per ms).
    pub drift_ppm: f64,
    /// Half the range of drifts the messages allow, ppm (infinite — `null` — when unknown).
    pub drift_uncertainty_ppm: f64,
    /// Messages the bounds came from.
    pub messages: u64,
    /// Bounds crossed: no line fits every message of the pair.
    pub inconsistent: bool,
}

impl HostOffset {
    /// The correction to add to this host's time `t_ns` (Unix ns) to get the reference's.
    pub fn correction_ns(&self, t_ns: i64) -> i64 {
        if !self.offset_ns.is_finite() {
            return 0;
        }
        let d = if self.drift_ppm.is_finite() {
            self.drift_ppm * 1e-6 * (t_ns - self.at_ns) as f64
        } else {
            0.0
        };
        (self.offset_ns + d) as i64
    }
}

/// A matched receive that ended before its send began, on one host.
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    /// The flow.
    pub flow: Flow,
    /// By how much, ns.
    pub by_ns: i64,
}

/// A host's line against the reference: `t_ref = t + a + b·(t − T0)`, with uncertainties.
#[derive(Clone, Copy, Debug)]
struct Line {
    a: f64,
    a_unc: f64,
    b: f64,
    b_unc: f64,
}

impl Line {
    /// The inverse line (`t = t_ref + …`).
    fn inverse(self) -> Line {
        Line {
            a: -self.a / (1.0 + self.b),
            a_unc: self.a_unc,
            b: -self.b / (1.0 + self.b),
            b_unc: self.b_unc,
        }
    }

    /// `outer ∘ self`: `self` takes a host to the middle one, `outer` the middle one on.
    fn then(self, outer: Line) -> Line {
        Line {
            a: self.a + outer.a + outer.b * self.a,
            a_unc: self.a_unc + outer.a_unc + outer.b.abs() * self.a_unc,
            b: self.b + outer.b + outer.b * self.b,
            b_unc: self.b_unc + outer.b_unc,
        }
    }
}

/// Offsets of every host, the one-host violations, and the cross-host receives still
/// before their sends once corrected.
pub fn estimate<'a>(
    procs: &[ProcOps],
    flows: impl Iterator<Item = &'a Flow>,
) -> (Vec<HostOffset>, Vec<Violation>, u64) {
    let mut viol = Vec::new();
    let mut cross: Vec<(&str, i64, &str, i64)> = Vec::new();
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
        cross.push((ps.host.as_str(), s0, pr.host.as_str(), r1));
    }
    let (out, aligned) = fit_hosts(procs.iter().map(|p| p.host.as_str()), &cross);
    (out, viol, aligned)
}

/// Every host's correction (see the [module docs](self)) from the messages between hosts
/// — `(sender's host, send start, receiver's host, receive end)`, each time on its own
/// host's clock, Unix ns — and how many of them still end before their send began once
/// corrected.
pub fn fit_hosts<'a>(
    hosts: impl Iterator<Item = &'a str>,
    cross: &[(&'a str, i64, &'a str, i64)],
) -> (Vec<HostOffset>, u64) {
    // (host a, host b) with a < b → (lower points, upper points) for θ(b → a), absolute x.
    #[allow(clippy::type_complexity)]
    let mut pairs: BTreeMap<(&str, &str), (Vec<(f64, f64)>, Vec<(f64, f64)>)> = BTreeMap::new();
    let (mut t_min, mut t_max) = (i64::MAX, i64::MIN);
    for &(hs, s0, hr, r1) in cross {
        t_min = t_min.min(s0).min(r1);
        t_max = t_max.max(s0).max(r1);
        // θ converts the larger-named host's clock into the smaller's.
        if hs < hr {
            // A → B: θ(r1) ≥ s0 − r1.
            pairs
                .entry((hs, hr))
                .or_default()
                .0
                .push((r1 as f64, (s0 - r1) as f64));
        } else {
            // B → A: θ(s0) ≤ r1 − s0.
            pairs
                .entry((hr, hs))
                .or_default()
                .1
                .push((s0 as f64, (r1 - s0) as f64));
        }
    }
    let t0 = if t_min <= t_max {
        t_min + (t_max - t_min) / 2
    } else {
        0
    };
    let fits: BTreeMap<(&str, &str), (super::drift::LineFit, u64)> = pairs
        .into_iter()
        .map(|(k, (l, u))| {
            let n = (l.len() + u.len()) as u64;
            let rel = |v: Vec<(f64, f64)>| -> Vec<(f64, f64)> {
                v.into_iter().map(|(x, y)| (x - t0 as f64, y)).collect()
            };
            (k, (super::drift::fit(rel(l), rel(u)), n))
        })
        .collect();
    let mut hosts: Vec<&str> = hosts.collect();
    hosts.sort_unstable();
    hosts.dedup();
    let mut out = Vec::new();
    let Some(&reference) = hosts.first() else {
        return (out, 0);
    };
    let offset = |host: &str, l: Line, n: u64, bad: bool| HostOffset {
        host: host.to_string(),
        reference: reference.to_string(),
        offset_ns: l.a,
        uncertainty_ns: l.a_unc,
        bounds_ns: (l.a - l.a_unc, l.a + l.a_unc),
        at_ns: t0,
        drift_ppm: l.b * 1e6,
        drift_uncertainty_ppm: l.b_unc * 1e6,
        messages: n,
        inconsistent: bad,
    };
    let zero = Line {
        a: 0.0,
        a_unc: 0.0,
        b: 0.0,
        b_unc: 0.0,
    };
    out.push(offset(reference, zero, 0, false));
    // Prim-like growth from the reference, narrowest offset range first.
    let mut placed: BTreeMap<&str, Line> = BTreeMap::new();
    placed.insert(reference, zero);
    loop {
        let mut best: Option<(f64, &str, Line, u64, bool)> = None;
        for (&(a, bb), &(f, n)) in &fits {
            // The fit takes bb's time to a's.
            let pair = Line {
                a: f.a,
                a_unc: f.a_unc,
                b: f.b,
                b_unc: f.b_unc,
            };
            let cand = match (placed.get(a), placed.get(bb)) {
                (Some(&la), None) => Some((bb, pair.then(la))),
                (None, Some(&lb)) => Some((a, pair.inverse().then(lb))),
                _ => None,
            };
            let Some((h, line)) = cand else {
                continue;
            };
            if best.as_ref().is_none_or(|x| line.a_unc < x.0) {
                best = Some((line.a_unc, h, line, n, f.inconsistent));
            }
        }
        let Some((_, h, line, n, bad)) = best else {
            break;
        };
        placed.insert(h, line);
        out.push(offset(h, line, n, bad));
    }
    for h in hosts {
        if !placed.contains_key(h) {
            let mut o = offset(h, zero, 0, false);
            o.uncertainty_ns = f64::INFINITY;
            o.bounds_ns = (f64::NEG_INFINITY, f64::INFINITY);
            o.drift_uncertainty_ppm = f64::INFINITY;
            out.push(o);
        }
    }
    // Cross-host receives before their sends, every host corrected.
    let by_host: BTreeMap<&str, &HostOffset> = out.iter().map(|o| (o.host.as_str(), o)).collect();
    let corr = |h: &str, t: i64| t + by_host.get(h).map_or(0, |o| o.correction_ns(t));
    let aligned = cross
        .iter()
        .filter(|&&(hs, s0, hr, r1)| corr(hr, r1) < corr(hs, s0))
        .count() as u64;
    (out, aligned)
}
