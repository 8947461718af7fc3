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
//!
//! Units with no model score 1 under every baseline, as under the paper's score.

use crate::model::TreeModel;
use crate::trees::{CallTree, ROOT};

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
}
