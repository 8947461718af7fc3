//! **Baselines**: the simple rankings a user would try before a model-based one, scored on
//! the same units and the same models so that the fault suite (`bench/localize/`) can put
//! them in one table with the paper's score and the evidence score
//! (`culprit rank --score rarest|longest|ochiai`).
//!
//! - *rarest call*: a unit is as suspicious as the rarest node it contains — `1 − min p`
//!   over its nodes, a node the model never saw counting `p = 0`;
//! - *longest unit*: the longest first (hangs and timeouts make long units);
//! - *Ochiai* (spectrum-based fault localization): a node's suspiciousness is
//!   `failed(n) / √(failed · (failed(n) + passed(n)))` with the trial as the one failing
//!   run and the normal units of the class as passing ones, so `failed = failed(n) = 1`
//!   and `passed(n)` is the number of normal units in which the node appears (the product
//!   of the coverage probabilities along its path, times the units learned): `1 / √(1 +
//!   passed(n))`. A unit scores its most suspicious node.
//! - *SimpleRCA* (a threshold rule in the manner of Fang et al., arXiv 2510.04711): a unit
//!   is **suspect** (score 1, else 0; ties, as always, by time) when one of its timed calls
//!   lasted longer than the normal threshold of its place in the class —
//!   `max(p95, mean + 3σ)` of the normal durations there ([`crate::durations`]; the model
//!   keeps call durations, not unit durations, so the rule is applied to the calls of the
//!   unit as SimpleRCA applies it to the spans of a trace) — or when it holds a failed call
//!   (an errno, end of stream, a short transfer) that the normal units of its class never
//!   returned there.
//!
//! Units with no model score 1 under every baseline, as under the paper's score.

use crate::durations::{bucket_high, Durations};
use crate::model::TreeModel;
use crate::trees::{CallTree, Outcome, ROOT};

/// *Rarest call*: `1 − min p` over the unit's nodes (a node not in the model: 1).
pub fn rarest(t: &CallTree, m: &TreeModel) -> f64 {
    t.nodes
        .keys()
        .map(|&id| 1.0 - m.get(id).map_or(0.0, |n| n.p()))
        .fold(0.0, f64::max)
}

/// *Longest unit*: a score in [0, 1) increasing with the duration (`d / (d + 1 s)`), so
/// that it can share the ranking's machinery and plots with the other scores.
pub fn longest(duration_ns: i64) -> f64 {
    let d = duration_ns.max(0) as f64;
    d / (d + 1e9)
}

/// The number of normal units of `m` in which node `id` appears: the product of the
/// coverage probabilities from the root down, times the units learned (0 if not in `m`).
pub fn passed(id: u64, m: &TreeModel) -> f64 {
    let mut cover = 1.0;
    let mut at = id;
    // Paths are short; the bound guards against a malformed parent cycle.
    for _ in 0..4096 {
        if at == ROOT {
            return cover * m.units as f64;
        }
        match m.get(at) {
            Some(n) => {
                cover *= n.p();
                at = n.parent;
            }
            None => return 0.0,
        }
    }
    0.0
}

/// *Ochiai*: the unit's most suspicious node, `1 / √(1 + passed(n))`.
pub fn ochiai(t: &CallTree, m: &TreeModel) -> f64 {
    t.nodes
        .keys()
        .map(|&id| 1.0 / (1.0 + passed(id, m)).sqrt())
        .fold(0.0, f64::max)
}

/// The SimpleRCA duration threshold of a node: `max(p95, mean + 3σ)` of its normal
/// durations (each bucket of the histogram counted at its upper edge, capped at the longest
/// call). `None` without samples.
pub fn simple_threshold_ns(d: &Durations) -> Option<u64> {
    let n = d.samples();
    if n == 0 {
        return None;
    }
    let mut sum = 0.0;
    let mut sq = 0.0;
    for &(b, c) in &d.hist {
        let v = bucket_high(b).min(d.max_ns) as f64;
        sum += v * c as f64;
        sq += v * v * c as f64;
    }
    let mean = sum / n as f64;
    let sigma = (sq / n as f64 - mean * mean).max(0.0).sqrt();
    let three_sigma = (mean + 3.0 * sigma).min(u64::MAX as f64) as u64;
    Some(d.quantile(0.95).max(three_sigma))
}

/// *SimpleRCA*: 1 when the unit is suspect (a call slower than its normal threshold, or a
/// failure its class never returned at that place), else 0.
pub fn simple_rca(t: &CallTree, m: &TreeModel) -> f64 {
    let suspect = t.nodes.iter().any(|(id, n)| {
        let failed = matches!(
            n.key.outcome,
            Outcome::Errno(_) | Outcome::Eof | Outcome::Short
        );
        if failed && m.get(*id).is_none() {
            return true;
        }
        m.durations
            .get(id)
            .and_then(simple_threshold_ns)
            .is_some_and(|limit| n.dur.ns() > limit)
    });
    if suspect {
        1.0
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trees::test_key as key;

    #[test]
    fn baselines_on_a_small_model() {
        // Four normal units: a in all, b under a in one of them.
        let mut with_b = CallTree::default();
        let a = with_b.add(ROOT, key(1), 0);
        with_b.add(a, key(2), 1);
        let mut plain = CallTree::default();
        plain.add(ROOT, key(1), 0);
        let m = TreeModel::from_trees([&with_b, &plain, &plain, &plain]);
        assert_eq!(rarest(&plain, &m), 0.0);
        assert!((rarest(&with_b, &m) - 0.75).abs() < 1e-12);
        let b = key(2).child_of(a);
        assert!((passed(a, &m) - 4.0).abs() < 1e-12);
        assert!((passed(b, &m) - 1.0).abs() < 1e-12);
        assert!((ochiai(&with_b, &m) - 1.0 / 2f64.sqrt()).abs() < 1e-12);
        // A node never seen: the most suspicious there is.
        let mut new = plain.clone();
        new.add(ROOT, key(9), 2);
        assert_eq!(ochiai(&new, &m), 1.0);
        assert_eq!(rarest(&new, &m), 1.0);
        assert!(longest(2_000_000_000) > longest(1_000) && longest(-5) == 0.0);
    }

    #[test]
    fn simple_rca_flags_slow_calls_and_new_failures_only() {
        use crate::trees::{Dur, NodeKey, NodeKind};
        let recv = |outcome| NodeKey {
            kind: NodeKind::Lib,
            site: 7,
            callee: 8,
            outcome,
        };
        // Forty normal units: a recv that returns in 1–2 ms.
        let mut normal = Vec::new();
        for i in 0..40u64 {
            let mut t = CallTree::default();
            let id = t.add(ROOT, recv(Outcome::Ok), 0);
            t.nodes.get_mut(&id).unwrap().dur = Dur::from_ns(1_000_000 + 25_000 * i);
            normal.push(t);
        }
        let mut m = TreeModel::from_trees(normal.iter());
        let ok_id = recv(Outcome::Ok).child_of(ROOT);
        if m.durations.is_empty() {
            // The model learns durations only of timed nodes; give it this one's.
            let mut d = Durations::default();
            for i in 0..40u64 {
                d.add(1_000_000 + 25_000 * i, 1);
            }
            m.durations.insert(ok_id, d);
        }
        let limit = simple_threshold_ns(&m.durations[&ok_id]).unwrap();
        assert!((1_900_000..4_000_000).contains(&limit), "{limit}");
        let with = |outcome, ns| {
            let mut t = CallTree::default();
            let id = t.add(ROOT, recv(outcome), 0);
            t.nodes.get_mut(&id).unwrap().dur = Dur::from_ns(ns);
            t
        };
        assert_eq!(simple_rca(&with(Outcome::Ok, 1_500_000), &m), 0.0);
        assert_eq!(simple_rca(&with(Outcome::Ok, 50_000_000), &m), 1.0, "slow");
        assert_eq!(
            simple_rca(&with(Outcome::Errno(104), 1_000), &m),
            1.0,
            "new error"
        );
        // A failure the normal units did return there is not suspect.
        let mut reset = normal.clone();
        reset.push(with(Outcome::Eof, 1_000));
        let m2 = TreeModel::from_trees(reset.iter());
        assert_eq!(simple_rca(&with(Outcome::Eof, 1_000), &m2), 0.0);
        assert_eq!(simple_threshold_ns(&Durations::default()), None);
    }
}
