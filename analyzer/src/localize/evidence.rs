//! Which score ranks the units, and the **evidence** score, the default.
//!
//! The paper's score (§3.1, [`crate::score`]) is the *mean* of `Δ` over a unit's effective
//! nodes. On a framework-heavy program a handler unit has hundreds of nodes that match
//! their model (`Δ ≈ 0`), so the one node that tells the fault — a `recv` failing with an
//! errno never seen, a call made after every receive that is missing — moves the mean to
//! 0.07–0.10, and the faulty unit ranks behind every unit with a small tree and one rare
//! call. The evidence score is instead led by the **strongest single piece of evidence**
//! in the unit, weighted by how much normal behaviour backs it:
//!
//! - a node **never seen** in the `U` normal units of its class: [`backing`]`(U)` =
//!   `0.05^(1/U)`, one minus the 95 % upper bound of a rate never observed in `U` units
//!   (with four units learned, 0.47; with eight, 0.69; with 634, 0.995): "never in 4
//!   units" is weak, "never in 634" strong — and a failure outcome (errno, end of stream,
//!   short transfer) never seen counts as if backed by twice the units (`√backing`: with
//!   four units 0.69, with 634 0.998), because a call failing in a way it never failed is
//!   the most direct sign of a fault there is;
//! - a node **expected and missing**: `q^n · backing(n)` ([`missing_evidence`]), with `q`
//!   its probability given its parent over every process model that has the parent, and
//!   `n` the normal units that reached the parent — the chance that `n` normal units all
//!   had it, so that a call made by every normal unit counts fully, one that a few normal
//!   units skipped (`q = 0.98` over 200 units: 0.02) hardly (normal runs skip it too), and
//!   one that only one process of a group makes, or that follows a branch a handful of
//!   units took, is backed by those units only;
//! - a node **seen but rare** (`p` small): `(1 − p) / 2` — rare is not never, and every
//!   normal run has rare branches (timers, retries), so it weighs half.
//!
//! - a call never seen with one of non-blocking I/O's ordinary answers (`EAGAIN`, `EINTR`,
//!   `EINPROGRESS`: [`is_timing`]): [`TIMING_WEIGHT`] of a node never seen — timing, not a
//!   fault;
//! - a call **still blocked when the trace ended** (never seen so): [`END_WEIGHT`] of a
//!   node never seen — when a system hangs every process waits, far from the fault too.
//!
//! The unit's score is `0.8 · max + 0.2 · mean`: the strongest evidence decides, the
//! paper's mean breaks ties between units with equal evidence (more wrong → higher). It
//! stays in [0, 1]. A unit whose class has **no model** (a kind of unit, on a kind of
//! connection, that no normal process of its group showed) is itself one thing never
//! seen, and what backs that is the group's normal *processes*, not units: classes are
//! made per process (a connection is set up once and carries many units), so "never in 3
//! normal processes" is weak however many units those made — it scores
//! [`unseen_class`]`(P)` = [`backing`]`(P)` (3 processes: 0.37; 12: 0.78; 60: 0.95). Units of
//! a process that matches no group still score 1 ([`crate::weigh`] makes that one piece of
//! evidence). Both are then looked at by [`crate::consequence`], which files the ones caused
//! by an earlier anomaly under it.
//!
//! [`ScoreKind`] names every score `culprit rank --score` offers: the evidence score, the
//! paper's score exactly, and the baselines of [`crate::baselines`].

use crate::baselines;
use crate::model::{ModelNode, TreeModel};
use crate::score::{NodeClass, UnitScore, Verdict};
use crate::trees::{CallTree, NodeKind, Outcome, ROOT};

/// The score a ranking orders units by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ScoreKind {
    /// The strongest evidence in the unit (this module), with consequences filed under
    /// their root ([`crate::consequence`]). The default: best on the fault suite of
    /// third-party systems (`bench/localize/`, `bench/results/localize.md`), and it finds
    /// the fault first on the bundled rings.
    #[default]
    Evidence,
    /// The paper's score exactly (§3.1: the mean of `Δ` over the effective nodes).
    Paper,
    /// Baseline: the rarest node of the unit (`1 − min p`; a node never seen: 1).
    Rarest,
    /// Baseline: the longest unit first.
    Longest,
    /// Baseline: spectrum-based fault localization, Ochiai over nodes (normal units
    /// passing, the trial failing); a unit scores its most suspicious node.
    Ochiai,
    /// Baseline: a threshold rule in the manner of SimpleRCA — a unit is suspect (1) when
    /// a call outlasts its normal `max(p95, mean + 3σ)` or fails in a way its class never
    /// did there, else 0 ([`baselines::simple_rca`]).
    SimpleRca,
}

impl ScoreKind {
    /// Every kind, the default first.
    pub const ALL: [ScoreKind; 6] = [
        ScoreKind::Evidence,
        ScoreKind::Paper,
        ScoreKind::Rarest,
        ScoreKind::Longest,
        ScoreKind::Ochiai,
        ScoreKind::SimpleRca,
    ];

    /// The name `culprit rank --score` takes.
    pub fn name(self) -> &'static str {
        match self {
            ScoreKind::Evidence => "evidence",
            ScoreKind::Paper => "paper",
            ScoreKind::Rarest => "rarest",
            ScoreKind::Longest => "longest",
            ScoreKind::Ochiai => "ochiai",
            ScoreKind::SimpleRca => "simplerca",
        }
    }

    /// Does the score of a unit depend on more than its tree and class (so that units of
    /// equal trees cannot share one score)?
    pub fn per_unit(self) -> bool {
        matches!(self, ScoreKind::Longest | ScoreKind::SimpleRca)
    }

    /// Are consequences filed under their root ([`crate::consequence`])?
    pub fn groups_consequences(self) -> bool {
        self == ScoreKind::Evidence
    }
}

impl std::fmt::Display for ScoreKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ScoreKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ScoreKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = ScoreKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown score `{s}`: expected one of {}", names.join(", "))
            })
    }
}

/// What a unit's score may depend on besides its tree and its model.
#[derive(Clone, Copy, Debug, Default)]
pub struct UnitFacts {
    /// Its duration, ns.
    pub duration_ns: i64,
}

/// Weight of the units a model was learned from: `0.05^(1/U)` (0 with none), one minus the
/// 95 % upper confidence bound of the rate of something never observed in `U` units — how
/// sure "never in `U` normal units" is that it does not happen in normal runs.
pub fn backing(units: u64) -> f64 {
    backing_f(units as f64)
}

/// [`backing`] of a real number of units (the units that reached a node, `U` times the
/// probabilities of its ancestors).
pub fn backing_f(units: f64) -> f64 {
    if units <= 0.0 {
        0.0
    } else {
        0.05f64.powf(1.0 / units)
    }
}

/// The evidence score of a unit whose class has no model in a group learned from
/// `processes` normal processes: [`backing`]`(processes)` — a class is set up per process
/// (a connection, a thread kind), so the processes are the sample "never seen" rests on
/// (see the module's documentation). A reconnect's new connection in a system learned from
/// three runs (0.37) no longer outranks a call failing as it never did in hundreds of units.
pub fn unseen_class(processes: usize) -> f64 {
    backing(processes as u64)
}

/// Is this outcome a failure (errno, end of stream, short transfer)?
pub fn is_failure(o: Outcome) -> bool {
    matches!(o, Outcome::Errno(_) | Outcome::Eof | Outcome::Short)
}

/// Is this outcome one of non-blocking I/O's ordinary answers — "would block" (`EAGAIN`),
/// "interrupted" (`EINTR`), "connection under way" (`EINPROGRESS`, `EALREADY`)? Whether a
/// non-blocking call meets one depends on timing (was the peer's data there yet?), not on
/// what the program did: the caller retries.
pub fn is_timing(o: Outcome) -> bool {
    // Linux errno values: EINTR 4, EAGAIN (= EWOULDBLOCK) 11, EALREADY 114, EINPROGRESS 115.
    matches!(o, Outcome::Errno(4 | 11 | 114 | 115))
}

/// How much a call never seen with a **timing** outcome ([`is_timing`]) weighs, relative to
/// a call never seen: a loaded machine or a slow peer makes a `recv` meet `EAGAIN` where it
/// never did in normal runs, with nothing wrong.
pub const TIMING_WEIGHT: f64 = 0.5;

/// The evidence of one effective node of a unit scored against a model learned from
/// `units` units (see the module's documentation).
pub fn node_evidence(
    class: NodeClass,
    p: Option<f64>,
    kind: NodeKind,
    outcome: Outcome,
    units: u64,
) -> f64 {
    let b = backing(units);
    match class {
        NodeClass::New if is_timing(outcome) => TIMING_WEIGHT * b,
        NodeClass::New if kind == NodeKind::Lib && is_failure(outcome) => b.sqrt(),
        NodeClass::New => b,
        NodeClass::Missing => p.unwrap_or(0.0).powf(units as f64) * b,
        NodeClass::Common => (1.0 - p.unwrap_or(1.0)) / 2.0,
    }
}

/// A node's probability given its parent, over **every** process model that has the
/// parent (`p_sum` over the models holding the parent): the paper's `p` is the mean over
/// the models that hold the node itself, which calls a node that one process of a group
/// always makes (the node that starts the jobs of a ring) "made by every normal unit" of
/// the group.
pub fn p_given_parent(m: &TreeModel, n: &ModelNode) -> f64 {
    let holders = if n.parent == ROOT {
        m.models
    } else {
        m.get(n.parent).map_or(m.models, |p| p.models)
    };
    (n.p_sum / holders.max(1) as f64).min(1.0)
}

/// The evidence of a node of model `m` that a unit did not reach although it reached its
/// parent: `q^n · backing(n)`, with `q` its probability given its parent
/// ([`p_given_parent`]) and `n` the normal units that reached the parent (the class's
/// units times the product of the probabilities of the ancestors): a call that follows a
/// rare branch is backed by the few units that took the branch, not by all the class's.
pub fn missing_evidence(m: &TreeModel, id: u64) -> f64 {
    let Some(node) = m.get(id) else {
        return 0.0;
    };
    let q = p_given_parent(m, node);
    let mut reach = 1.0;
    let mut up = node.parent;
    // A model file is input: a parent cycle must not loop forever.
    for _ in 0..m.nodes.len() {
        if up == ROOT {
            break;
        }
        let Some(a) = m.get(up) else { break };
        reach *= p_given_parent(m, a);
        up = a.parent;
    }
    let n = m.units as f64 * reach;
    q.powf(n) * backing_f(n)
}

/// How much a piece of evidence that only tells the run **ended** there weighs: a call
/// still blocked when the trace ended (`select` never returned). When a system hangs, every
/// process waits at once, on nodes far from the fault as on the faulty one: the wait says
/// that the run stopped, not where it went wrong — unless nothing else is abnormal, and
/// then it still ranks first, below a fault with evidence of its own.
pub const END_WEIGHT: f64 = 0.5;

/// The evidence score of a unit whose paper score is `s` against model `m`.
pub fn evidence_score(s: &UnitScore, m: &TreeModel) -> f64 {
    if s.verdict != Verdict::Scored {
        return s.score;
    }
    let missing = MissingContext::of(s);
    let max = s
        .effective
        .iter()
        .map(|e| match e.class {
            NodeClass::Missing => missing.weight(e) * missing_evidence(m, e.id),
            NodeClass::New if e.key.outcome == Outcome::Unfinished => {
                END_WEIGHT * node_evidence(e.class, e.p, e.key.kind, e.key.outcome, m.units)
            }
            _ => node_evidence(e.class, e.p, e.key.kind, e.key.outcome, m.units),
        })
        .fold(0.0f64, f64::max);
    0.8 * max + 0.2 * s.score
}

/// What weighs a unit's **missing** calls down, from what the unit did (see
/// [`MissingContext::weight`]).
#[derive(Default)]
struct MissingContext {
    /// The unit holds a call still blocked when the trace ended.
    ended_blocked: bool,
    /// Calls (parent, site, callee) the unit made and that met a timing outcome
    /// ([`is_timing`]); sorted.
    timing: Vec<(u64, u64, u64)>,
}

impl MissingContext {
    fn of(s: &UnitScore) -> MissingContext {
        let mut c = MissingContext::default();
        if !s.effective.iter().any(|e| e.class == NodeClass::Missing) {
            return c;
        }
        for e in s.effective.iter().filter(|e| e.class != NodeClass::Missing) {
            c.ended_blocked |= e.key.outcome == Outcome::Unfinished;
            if is_timing(e.key.outcome) {
                c.timing.push((e.parent, e.key.site, e.key.callee));
            }
        }
        c.timing.sort_unstable();
        c
    }

    /// How much a missing call of the unit weighs, relative to [`missing_evidence`]:
    ///
    /// - [`TIMING_WEIGHT`] when the unit made the same call (same parent, site and callee)
    ///   and it met a timing outcome instead — the expected `accept4` that another thread
    ///   of the process won, leaving this one `EAGAIN`: the call was made, and what it met
    ///   depended on timing, as with a timing outcome never seen;
    /// - [`END_WEIGHT`] when the unit holds a call still blocked when the trace ended: the
    ///   unit was **cut by the end of the run** (the process was stopped while it waited),
    ///   and what it did not do it may only not have had time to do — a server stopped
    ///   before its client's disconnection reached it does not unregister the connection;
    /// - else 1.
    fn weight(&self, e: &crate::score::Effective) -> f64 {
        let k = (e.parent, e.key.site, e.key.callee);
        let timing = e.key.kind == NodeKind::Lib && self.timing.binary_search(&k).is_ok();
        let mut w: f64 = 1.0;
        if timing {
            w = w.min(TIMING_WEIGHT);
        }
        if self.ended_blocked {
            w = w.min(END_WEIGHT);
        }
        w
    }
}

/// Re-scores a unit scored by the paper's method ([`crate::score::score_tree_as`], or
/// [`crate::score::unmodelled`] when `m` is None) with score `kind`. The verdict and the
/// effective nodes are kept: they are what the *why* of the unit tells.
pub fn rescore(
    kind: ScoreKind,
    mut s: UnitScore,
    t: &CallTree,
    m: Option<&TreeModel>,
    facts: UnitFacts,
) -> UnitScore {
    s.score = match (kind, m) {
        (ScoreKind::Paper, _) => s.score,
        (ScoreKind::Evidence, Some(m)) => evidence_score(&s, m),
        (ScoreKind::Rarest, Some(m)) => baselines::rarest(t, m),
        (ScoreKind::Ochiai, Some(m)) => baselines::ochiai(t, m),
        (ScoreKind::SimpleRca, Some(m)) => baselines::simple_rca(t, m),
        (ScoreKind::Longest, _) => baselines::longest(facts.duration_ns),
        (_, None) => 1.0,
    };
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::score_tree;
    use crate::trees::NodeKey;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for k in ScoreKind::ALL {
            assert_eq!(k.name().parse::<ScoreKind>(), Ok(k));
        }
        let e = "mean".parse::<ScoreKind>().unwrap_err();
        assert!(e.contains("`mean`") && e.contains("evidence, paper"), "{e}");
    }

    fn lib(n: u64, outcome: Outcome) -> NodeKey {
        NodeKey {
            kind: NodeKind::Lib,
            site: n,
            callee: 1000 + n,
            outcome,
        }
    }

    /// A model of `units` identical units of `width` calls, and a unit equal to them but
    /// for one extra call with `outcome`.
    fn wide(width: u64, units: u64, outcome: Outcome) -> (CallTree, TreeModel) {
        let mut normal = CallTree::default();
        for i in 0..width {
            normal.add(ROOT, lib(i, Outcome::Ok), i);
        }
        let m = TreeModel::from_trees(std::iter::repeat_n(&normal, units as usize));
        let mut t = normal.clone();
        t.add(ROOT, lib(width, outcome), width);
        (t, m)
    }

    #[test]
    fn one_never_seen_failure_dominates_however_wide_the_tree() {
        for width in [3, 30, 300] {
            let (t, m) = wide(width, 50, Outcome::Errno(104));
            let s = score_tree(&t, &m);
            let e = evidence_score(&s, &m);
            // The paper's mean is diluted by the width; the evidence is not.
            assert!((s.score - 1.0 / (width as f64 + 1.0)).abs() < 1e-9);
            assert!(e >= 0.8 * backing(50).sqrt(), "width {width}: {e}");
        }
    }

    #[test]
    fn evidence_grows_with_the_normal_units_behind_it() {
        let (t3, m3) = wide(10, 3, Outcome::Ok);
        let (t900, m900) = wide(10, 900, Outcome::Ok);
        let e3 = evidence_score(&score_tree(&t3, &m3), &m3);
        let e900 = evidence_score(&score_tree(&t900, &m900), &m900);
        assert!(e3 < e900, "{e3} vs {e900}");
        // A rare call seen in normal runs weighs less than a call never seen in as many.
        assert!(
            node_evidence(
                NodeClass::Common,
                Some(0.01),
                NodeKind::Lib,
                Outcome::Ok,
                900
            ) < e900
        );
        // "Never in 4 units" is weak, "never in 634" strong, a failure counting more.
        let never = |u, o| node_evidence(NodeClass::New, None, NodeKind::Lib, o, u);
        assert!(never(4, Outcome::Ok) < 0.5 && never(634, Outcome::Ok) > 0.99);
        assert!(never(4, Outcome::Errno(104)) < never(634, Outcome::Ok));
        assert!(never(634, Outcome::Errno(104)) > never(634, Outcome::Ok));
    }

    /// A unit that makes call `n` only.
    fn calls(n: u64) -> CallTree {
        let mut t = CallTree::default();
        t.add(ROOT, lib(n, Outcome::Ok), 0);
        t
    }

    /// A unit that makes call 0, and call 1 under it.
    fn calls_1_after_0() -> CallTree {
        let mut t = CallTree::default();
        let a = t.add(ROOT, lib(0, Outcome::Ok), 0);
        t.add(a, lib(1, Outcome::Ok), 1);
        t
    }

    #[test]
    fn a_call_that_one_process_of_a_group_always_makes_is_not_expected_of_the_others() {
        // Three process models of one group: only the first (the node that starts the
        // jobs) makes call 1 after call 0, in every unit. The paper's p of call 1 is 1 (the
        // mean over the models that hold it); given its parent, over every model, 1/3.
        let (starter, other) = (calls_1_after_0(), calls(0));
        let mut m = TreeModel::from_trees(std::iter::repeat_n(&starter, 100));
        for _ in 0..2 {
            m.merge(&TreeModel::from_trees(std::iter::repeat_n(&other, 100)));
        }
        let s = score_tree(&other, &m);
        let missing = s
            .effective
            .iter()
            .find(|e| e.class == NodeClass::Missing)
            .unwrap();
        assert_eq!(missing.p, Some(1.0));
        assert!(missing_evidence(&m, missing.id) < 1e-9);
        // Only the paper's mean (a tie-breaker) is left.
        assert!((evidence_score(&s, &m) - 0.2 * s.score).abs() < 1e-9);
        // In the starter's own model, its units always make it: full evidence.
        let own = TreeModel::from_trees(std::iter::repeat_n(&starter, 100));
        let s = score_tree(&other, &own);
        assert!(evidence_score(&s, &own) > 0.8);
    }

    #[test]
    fn a_class_never_seen_is_backed_by_the_processes_not_the_units() {
        use crate::consequence::ROOT_MIN;
        // A reconnect's new connection in a group of 3 normal processes (one per normal
        // run): weak, not an anomaly, below a call failing as it never did in 634 units.
        let (t, m) = wide(10, 634, Outcome::Errno(104));
        let failing = evidence_score(&score_tree(&t, &m), &m);
        assert!(unseen_class(3) < ROOT_MIN, "{}", unseen_class(3));
        assert!(
            unseen_class(3) < failing,
            "{} vs {failing}",
            unseen_class(3)
        );
        // The same class never seen among 60 normal processes is an anomaly.
        assert!(unseen_class(60) > ROOT_MIN && unseen_class(60) < 1.0);
        // More processes, more backing; no process, none.
        assert!(unseen_class(12) > unseen_class(3) && unseen_class(0) == 0.0);
    }

    #[test]
    fn a_missing_call_after_a_rare_branch_is_backed_by_the_units_that_took_it() {
        // 1 unit in 100 takes branch 0, and then always makes call 1.
        let (rare, plain) = (calls_1_after_0(), calls(2));
        let trees: Vec<&CallTree> = std::iter::once(&rare)
            .chain(std::iter::repeat_n(&plain, 99))
            .collect();
        let m = TreeModel::from_trees(trees);
        let s = score_tree(&calls(0), &m);
        let id = s
            .effective
            .iter()
            .find(|e| e.class == NodeClass::Missing && e.key.site == 1)
            .unwrap()
            .id;
        // Backed by 1 unit: backing(1) = 0.05, not backing(100).
        assert!((missing_evidence(&m, id) - backing(1)).abs() < 1e-9);
        assert!(backing(1) < 0.1 && backing(100) > 0.97);
    }

    /// The evidence score of a unit of 10 normal calls and one with `outcome`, against 300
    /// normal units.
    fn one_extra(outcome: Outcome) -> f64 {
        let (t, m) = wide(10, 300, outcome);
        evidence_score(&score_tree(&t, &m), &m)
    }

    #[test]
    fn a_wait_cut_by_the_end_of_the_trace_or_a_would_block_weighs_less_than_a_failure() {
        let failed = one_extra(Outcome::Errno(104));
        // Still blocked when the trace ended; EAGAIN (timing), EINPROGRESS.
        for o in [Outcome::Unfinished, Outcome::Errno(11), Outcome::Errno(115)] {
            let e = one_extra(o);
            assert!(e < 0.5 && failed > 0.8, "{o:?}: {e} vs {failed}");
        }
    }

    #[test]
    fn a_missing_call_weighs_less_in_a_unit_cut_by_the_end_or_when_it_met_would_block() {
        // Every normal unit makes call 1 after call 0 (300 units).
        let m = TreeModel::from_trees(std::iter::repeat_n(&calls_1_after_0(), 300));
        let full = evidence_score(&score_tree(&calls(0), &m), &m);
        assert!(full > 0.8, "{full}");
        // The same unit, also still blocked in a call when the trace ended.
        let mut cut = calls(0);
        let a = *cut.nodes.keys().next().unwrap();
        cut.add(a, lib(5, Outcome::Unfinished), 2);
        let e = evidence_score(&score_tree(&cut, &m), &m);
        assert!(e < 0.6 && e < full - 0.3, "{e} vs {full}");
        // Call 1 made, meeting EAGAIN instead of succeeding.
        let mut blocked = calls(0);
        blocked.add(a, lib(1, Outcome::Errno(11)), 1);
        let s = score_tree(&blocked, &m);
        let missing = s.effective.iter().find(|e| e.class == NodeClass::Missing);
        assert!(missing.is_some());
        let e = evidence_score(&s, &m);
        assert!(e < 0.6 && e < full - 0.3, "{e} vs {full}");
        // Another call meeting EAGAIN does not excuse the missing one.
        let mut other = calls(0);
        other.add(a, lib(7, Outcome::Errno(11)), 1);
        let e = evidence_score(&score_tree(&other, &m), &m);
        assert!(e > 0.8, "{e}");
    }

    #[test]
    fn an_identical_unit_scores_zero() {
        let (_, m) = wide(10, 5, Outcome::Ok);
        let mut t = CallTree::default();
        for i in 0..10 {
            t.add(ROOT, lib(i, Outcome::Ok), i);
        }
        assert_eq!(evidence_score(&score_tree(&t, &m), &m), 0.0);
    }
}
