//! Stage 7 — **suspect scores**, exactly as §3.1 of the paper (SPEC §6).
//!
//! For a unit with tree `T` and model `M`:
//! - commonality `M ∩ T`: `Δ(n) = 1 − p(n)`;
//! - **minimum difference** `M ⊕ T`: nodes in exactly one of the two, excluding nodes whose
//!   parent is also in the difference (a missing call's missing children are its
//!   consequence and are not counted again; same for a new call's new children):
//!   `Δ(n) = p(n)` if only in the model, `1` if only in the unit;
//! - effective nodes `E = (M ∩ T) ∪ (M ⊕ T)`; `Δ(u) = Σ_{n∈E} Δ(n) / |E|` ∈ [0, 1].
//!
//! A process whose signature matches no process group, and a unit whose class has no model,
//! get the maximum score, 1.

use crate::model::{GroupModel, TreeModel, UnitClass};
use crate::trees::{CallTree, NodeKey, ROOT};
use crate::units::Unit;
use serde::{Deserialize, Serialize};

/// How a unit's score was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Compared with its model.
    Scored,
    /// The process's signature matches no process group: score 1.
    NoProcessGroup,
    /// No model for the unit's class (e.g. an unknown connection): score 1.
    NoUnitModel,
    /// The unit began before the trace's window (a flight recorder rotated its beginning
    /// away, [`crate::units::UnitHead::cut_at_start`]): not scored, score 0.
    BeganBeforeWindow,
}

/// Where an effective node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeClass {
    /// In both the unit and the model.
    Common,
    /// Only in the model: expected, not called.
    Missing,
    /// Only in the unit: never seen in normal runs.
    New,
}

/// One effective node and its contribution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Effective {
    /// Node id.
    pub id: u64,
    /// Parent id.
    pub parent: u64,
    /// The node.
    pub key: NodeKey,
    /// Where it is.
    pub class: NodeClass,
    /// Its model probability (None for new nodes).
    pub p: Option<f64>,
    /// `Δ(n)`.
    pub delta: f64,
    /// For a new (missing) node: up to [`BELOW`] library calls under it in the unit (in the
    /// model) — its consequences, not counted in the score but worth telling.
    pub below: Vec<NodeKey>,
}

/// Most library calls listed under a new or missing node.
pub const BELOW: usize = 3;

/// Library calls under `id`, breadth first, at most [`BELOW`].
/// `children` are ordered by their first element (first call time in a unit, 0 in a model).
fn lib_below(id: u64, children: &crate::hash::IdMap<Vec<(u64, NodeKey, u64)>>) -> Vec<NodeKey> {
    let mut out = Vec::new();
    let mut queue = std::collections::VecDeque::from([id]);
    while let Some(n) = queue.pop_front() {
        if let Some(ch) = children.get(&n) {
            let mut ch = ch.clone();
            ch.sort();
            for (_, k, c) in ch {
                if k.kind == crate::trees::NodeKind::Lib && out.len() < BELOW && !out.contains(&k) {
                    out.push(k);
                }
                queue.push_back(c);
            }
        }
    }
    out
}

/// The score of one unit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnitScore {
    /// `Δ(u)` in [0, 1].
    pub score: f64,
    /// How it was obtained.
    pub verdict: Verdict,
    /// Effective nodes, largest `Δ` first (ties: new, missing, common; then by id).
    pub effective: Vec<Effective>,
}

/// Scores a tree against a tree model.
pub fn score_tree(t: &CallTree, m: &TreeModel) -> UnitScore {
    score_tree_as(t, m, false)
}

/// Scores the tree of a unit that may have been **cut short** by the end of its trace
/// ([`crate::units::UnitHead::cut`]: the process was killed, or recording stopped, while it
/// was still in its event loop). Such a unit is scored on what it did: the nodes of the model
/// it did not reach are not counted against it (they may simply not have happened yet), the
/// nodes it has — including a call still blocked when the trace ended — are.
pub fn score_tree_as(t: &CallTree, m: &TreeModel, cut: bool) -> UnitScore {
    let mut eff = Vec::new();
    for (&id, n) in &t.nodes {
        match m.get(id) {
            Some(mn) => eff.push(Effective {
                id,
                parent: n.parent,
                key: n.key,
                class: NodeClass::Common,
                p: Some(mn.p()),
                delta: 1.0 - mn.p(),
                below: Vec::new(),
            }),
            None => {
                // The parent is in T; it is in the difference iff it is not in M.
                if m.contains(n.parent) {
                    eff.push(Effective {
                        id,
                        parent: n.parent,
                        key: n.key,
                        class: NodeClass::New,
                        p: None,
                        delta: 1.0,
                        below: Vec::new(),
                    });
                }
            }
        }
    }
    for n in m.nodes.iter().filter(|_| !cut) {
        // The parent is in M; it is in the difference iff it is not in T.
        if !t.contains(n.id) && t.contains(n.parent) {
            eff.push(Effective {
                id: n.id,
                parent: n.parent,
                key: n.key,
                class: NodeClass::Missing,
                p: Some(n.p()),
                delta: n.p(),
                below: Vec::new(),
            });
        }
    }
    if eff.iter().any(|e| e.class != NodeClass::Common) {
        type Children = crate::hash::IdMap<Vec<(u64, NodeKey, u64)>>;
        let mut tc = Children::default();
        for (&id, n) in &t.nodes {
            tc.entry(n.parent)
                .or_default()
                .push((n.first_tsc, n.key, id));
        }
        let mut mc = Children::default();
        for n in &m.nodes {
            mc.entry(n.parent).or_default().push((0, n.key, n.id));
        }
        for e in &mut eff {
            e.below = match e.class {
                NodeClass::New => lib_below(e.id, &tc),
                NodeClass::Missing => lib_below(e.id, &mc),
                NodeClass::Common => Vec::new(),
            };
        }
    }
    let rank = |c: NodeClass| match c {
        NodeClass::New => 0,
        NodeClass::Missing => 1,
        NodeClass::Common => 2,
    };
    eff.sort_by(|a, b| {
        b.delta
            .total_cmp(&a.delta)
            .then(rank(a.class).cmp(&rank(b.class)))
            .then(a.id.cmp(&b.id))
    });
    // Sum in a fixed order so the score never depends on hash-map iteration order.
    let mut ds: Vec<f64> = eff.iter().map(|e| e.delta).collect();
    ds.sort_by(|a, b| a.total_cmp(b));
    let score = if ds.is_empty() {
        0.0
    } else {
        ds.iter().sum::<f64>() / ds.len() as f64
    };
    UnitScore {
        score,
        verdict: Verdict::Scored,
        effective: eff,
    }
}

/// 000's **edge** variant of the score (the Japanese predecessor of the paper, its Fig. 2): the
/// tree's edges are compared instead of its nodes — `|p − 1|` for an edge in both trees, `p`
/// for an edge only in the model, `1` for an edge only in the unit, skipping edges under a
/// caller already missing on the other side. An edge is a node with its parent, so this is
/// [`score_tree`] without the edges from the unit's virtual root (the unit's starting calls
/// are the roots of 000's trees, not edges). Not used by `culprit rank`; kept for comparison.
pub fn score_tree_edges(t: &CallTree, m: &TreeModel) -> UnitScore {
    let mut s = score_tree(t, m);
    s.effective.retain(|e| e.parent != ROOT);
    let mut ds: Vec<f64> = s.effective.iter().map(|e| e.delta).collect();
    ds.sort_by(|a, b| a.total_cmp(b));
    s.score = if ds.is_empty() {
        0.0
    } else {
        ds.iter().sum::<f64>() / ds.len() as f64
    };
    s
}

/// The class of a unit (which model it is compared with).
pub fn class_of(u: &Unit) -> UnitClass {
    u.class()
}

/// Scores a unit against its process group (None: no group matched).
pub fn score_unit(u: &Unit, group: Option<&GroupModel>) -> UnitScore {
    if u.info.cut_at_start {
        return not_scored();
    }
    let Some(g) = group else {
        return unmodelled(&u.tree, Verdict::NoProcessGroup);
    };
    match g.class(&class_of(u)) {
        Some(m) => score_tree_as(&u.tree, m, u.info.cut),
        None => unmodelled(&u.tree, Verdict::NoUnitModel),
    }
}

/// The score of a tree that has no model (no process group, or no model of its class): 1.
/// Every node is new; the effective ones (the top of the tree, with the library calls under
/// them) still say what the unit did.
pub fn unmodelled(t: &CallTree, verdict: Verdict) -> UnitScore {
    UnitScore {
        score: 1.0,
        verdict,
        effective: score_tree(t, &TreeModel::default()).effective,
    }
}

/// The score of a unit that began before the trace's window: 0, with no effective node
/// ([`Verdict::BeganBeforeWindow`]).
pub fn not_scored() -> UnitScore {
    UnitScore {
        score: 0.0,
        verdict: Verdict::BeganBeforeWindow,
        effective: Vec::new(),
    }
}

/// Is `id` the root?
pub fn is_root(id: u64) -> bool {
    id == ROOT
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelNode;
    use crate::trees::test_key as key;

    /// A model node seen in one model with probability `p`.
    fn node(id: u64, parent: u64, key: NodeKey, p: f64) -> ModelNode {
        ModelNode {
            id,
            parent,
            key,
            p_sum: p,
            models: 1,
        }
    }

    /// The paper's Fig. 3: a, b, c in both (p = 1.0, 0.9, 0.8); d only in the trial;
    /// e only in the model (p = 0.3) with a child f (skipped: its parent is missing).
    /// Tree shape: a → {b, e}, b → c, c → d (trial), e → f (model).
    #[test]
    fn paper_worked_example_scores_0_32() {
        let mut t = CallTree::default();
        let a = t.add(ROOT, key(1), 0);
        let b = t.add(a, key(2), 0);
        let c = t.add(b, key(3), 0);
        let d = t.add(c, key(4), 0);
        // d's own child, also new: excluded because d is in the difference.
        t.add(d, key(7), 0);
        let e = key(5).child_of(a);
        let f = key(6).child_of(e);
        let nodes = vec![
            node(a, ROOT, key(1), 1.0),
            node(b, a, key(2), 0.9),
            node(c, b, key(3), 0.8),
            node(e, a, key(5), 0.3),
            node(f, e, key(6), 0.7),
        ];
        let m = TreeModel::from_nodes(10, 1, nodes);
        let s = score_tree(&t, &m);
        assert_eq!(s.effective.len(), 5);
        assert!((s.score - 0.32).abs() < 1e-12, "{}", s.score);
        assert_eq!(s.effective[0].class, NodeClass::New);
        assert_eq!(s.effective[0].id, d);
        let missing: Vec<_> = s
            .effective
            .iter()
            .filter(|e| e.class == NodeClass::Missing)
            .collect();
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].id, e);
        // Cut short by the end of its trace, the unit is scored on what it did: e, which it
        // had not reached, does not count: (0 + 0.1 + 0.2 + 1) / 4.
        let cut = score_tree_as(&t, &m, true);
        assert!((cut.score - 0.325).abs() < 1e-12, "{}", cut.score);
        assert!(cut.effective.iter().all(|x| x.class != NodeClass::Missing));
        assert_eq!(cut.effective.len(), 4);
    }

    #[test]
    fn identical_certain_unit_scores_zero_and_empty_model_scores_one() {
        let mut t = CallTree::default();
        let a = t.add(ROOT, key(1), 0);
        t.add(a, key(2), 0);
        let m = crate::model::TreeModel::from_trees([&t]);
        assert_eq!(score_tree(&t, &m).score, 0.0);
        let empty = TreeModel::default();
        let s = score_tree(&t, &empty);
        // Only a counts: b's parent is new too.
        assert_eq!(s.effective.len(), 1);
        assert_eq!(s.score, 1.0);
    }

    /// 000's Fig. 2: model a → b (0.9), b → c (0.8), b → d (0.2), a → e (0.3), e → f, e → g;
    /// the unit has a → b → c only. Δ = 0.1, 0.2, 0.2, 0.3 (f, g skipped) → 0.2.
    #[test]
    fn edge_variant_worked_example_scores_0_2() {
        let mut t = CallTree::default();
        let a = t.add(ROOT, key(1), 0);
        let b = t.add(a, key(2), 0);
        t.add(b, key(3), 0);
        let c = key(3).child_of(b);
        let d = key(4).child_of(b);
        let e = key(5).child_of(a);
        let f = key(6).child_of(e);
        let g = key(7).child_of(e);
        let m = TreeModel::from_nodes(
            10,
            1,
            vec![
                node(a, ROOT, key(1), 1.0),
                node(b, a, key(2), 0.9),
                node(c, b, key(3), 0.8),
                node(d, b, key(4), 0.2),
                node(e, a, key(5), 0.3),
                node(f, e, key(6), 1.0),
                node(g, e, key(7), 0.5),
            ],
        );
        let s = score_tree_edges(&t, &m);
        assert_eq!(s.effective.len(), 4);
        assert!((s.score - 0.2).abs() < 1e-12, "{}", s.score);
        // The node variant counts a too (Δ = 0): 0.8 / 5.
        assert!((score_tree(&t, &m).score - 0.16).abs() < 1e-12);
    }
}
