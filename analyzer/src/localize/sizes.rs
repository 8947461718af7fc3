//! **Send sizes** of a model node: the range of size classes of what the program sent at
//! that place of the tree in normal units, and the rule that calls a send of a faulty run
//! **odd** ([`ClassSizes::odd`]).
//!
//! A coverage model holds which calls happen, not what they say: a server that answers a
//! garbled command through its ordinary error path (`UNKNOWN_COMMAND`) makes the same
//! `write` as for every reply. The reply's *shape* differs: its size. Each send on a socket
//! that moved data has a **size class** — the bit length of the bytes it asked to send
//! ([`crate::trees::size_class`]: 16–31 bytes is class 5) — and a unit's tree keeps, per
//! node, the least and greatest class of its sends ([`crate::trees::Tally`]). A model node
//! learns the range over its normal units ([`SizeRange`]); ranges merge by widening, so
//! `culprit merge` of models learned apart equals one `culprit learn` over all traces.
//!
//! Only sends: a send's size is what the program chose to say, a receive's what the
//! network delivered at that moment (segments split and coalesced by timing). Classes, not
//! byte counts: a reply that carries a counter (`INSERTED 99`, `INSERTED 100`) keeps its
//! class. A send is odd when its node has at least [`MIN_UNITS`] normal units with a sized
//! send (the same least backing as a per-call duration rule) and its class lies outside
//! the normal range; it then weighs as a call never seen there, backed by those units
//! ([`odd_score`]).

use crate::evidence::backing;
use crate::hash::IdMap;
use crate::trees::{class_bytes, NodeKey, TreeNode};

/// Fewest normal units with a sized send at a node behind a size rule.
pub const MIN_UNITS: u64 = crate::durations::MIN_SAMPLES;

/// The size classes of one model node's sends in the normal units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SizeRange {
    /// Normal units with a sized send at the node.
    pub units: u64,
    /// The least size class.
    pub lo: u8,
    /// The greatest size class.
    pub hi: u8,
}

impl SizeRange {
    /// Adds one unit whose sends at the node had classes `lo` to `hi`.
    pub fn add(&mut self, lo: u8, hi: u8) {
        self.merge(&SizeRange { units: 1, lo, hi });
    }

    /// Adds another node's range (associative and commutative).
    pub fn merge(&mut self, o: &SizeRange) {
        if o.units == 0 {
            return;
        }
        if self.units == 0 {
            *self = *o;
            return;
        }
        self.units = self.units.saturating_add(o.units);
        self.lo = self.lo.min(o.lo);
        self.hi = self.hi.max(o.hi);
    }

    /// Does the node have a rule (enough normal units)?
    pub fn has_rule(&self) -> bool {
        self.units >= MIN_UNITS
    }

    /// Checks a node's range read from a file: at least one unit, classes 1–63, `lo ≤ hi`.
    pub fn check(&self) -> Result<(), String> {
        if self.units == 0 {
            return Err("\"sizes\" with no unit".into());
        }
        if self.lo == 0 || self.hi > 63 || self.lo > self.hi {
            return Err(format!(
                "size classes {}–{} out of order or range",
                self.lo, self.hi
            ));
        }
        Ok(())
    }
}

/// Bytes of the classes `lo` to `hi` in words: `8–15 bytes`, `1 byte`.
pub fn describe_classes(lo: u8, hi: u8) -> String {
    let (a, _) = class_bytes(lo);
    let (_, b) = class_bytes(hi);
    if a == b {
        format!("{a} byte{}", if a == 1 { "" } else { "s" })
    } else {
        format!("{a}–{b} bytes")
    }
}

/// A send of a faulty run whose size class lies outside the normal range at its node.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OddSize {
    /// The node.
    pub key: NodeKey,
    /// The unit's least and greatest class there.
    pub lo: u8,
    /// See `lo`.
    pub hi: u8,
    /// The normal range.
    pub normal: SizeRange,
    /// When the node was first called in the unit (wall clock, ns).
    pub at_ns: i64,
}

impl OddSize {
    /// The class outside the normal range (the greater one when both are).
    fn odd_class(&self) -> u8 {
        if self.hi > self.normal.hi {
            self.hi
        } else {
            self.lo
        }
    }

    /// The sentence of the unit's *why*: "`write` sent 16–31 bytes, a size never sent there
    /// (8–15 bytes in 1464 normal units)".
    pub fn sentence(&self, names: &std::collections::BTreeMap<u64, String>) -> String {
        let name = crate::report::node_name(&self.key.without_outcome(), names);
        let c = self.odd_class();
        format!(
            "`{name}` sent {}, a size never sent there ({} in {} normal unit{})",
            describe_classes(c, c),
            describe_classes(self.normal.lo, self.normal.hi),
            self.normal.units,
            if self.normal.units == 1 { "" } else { "s" }
        )
    }

    /// Its JSON object (`odd_size` of `culprit rank --json`).
    pub fn to_json(&self, names: &std::collections::BTreeMap<u64, String>) -> serde_json::Value {
        let c = self.odd_class();
        let (least, greatest) = (class_bytes(c).0, class_bytes(c).1);
        serde_json::json!({
            "call": crate::report::node_name(&self.key.without_outcome(), names),
            "bytes_least": least,
            "bytes_greatest": greatest,
            "normal_bytes_least": class_bytes(self.normal.lo).0,
            "normal_bytes_greatest": class_bytes(self.normal.hi).1,
            "normal_units": self.normal.units,
            "at_unix_ns": self.at_ns,
        })
    }
}

/// The size rules of one class model: its nodes with enough normal units.
#[derive(Clone, Debug, Default)]
pub struct ClassSizes {
    by_id: IdMap<SizeRange>,
}

impl ClassSizes {
    /// The rules of a class model.
    pub fn of(m: &crate::model::TreeModel) -> ClassSizes {
        ClassSizes {
            by_id: m
                .sizes
                .iter()
                .filter(|(_, r)| r.has_rule())
                .map(|(&id, r)| (id, *r))
                .collect(),
        }
    }

    /// Has the class no rule?
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The earliest send of a unit's tree whose size class lies outside its node's normal
    /// range, if any (`unix`: a TSC as wall-clock ns).
    pub fn odd<'a>(
        &self,
        nodes: impl IntoIterator<Item = (u64, &'a TreeNode)>,
        unix: impl Fn(u64) -> i64,
    ) -> Option<OddSize> {
        let mut best: Option<(u64, u64, TreeNode, SizeRange)> = None;
        for (id, n) in nodes {
            let Some((lo, hi)) = n.tally.sizes() else {
                continue;
            };
            let Some(r) = self.by_id.get(&id) else {
                continue;
            };
            if lo >= r.lo && hi <= r.hi {
                continue;
            }
            if best.as_ref().is_none_or(|b| (n.first_tsc, id) < (b.0, b.1)) {
                best = Some((n.first_tsc, id, *n, *r));
            }
        }
        best.map(|(tsc, _, n, normal)| {
            let (lo, hi) = n.tally.sizes().unwrap_or_default();
            OddSize {
                key: n.key,
                lo,
                hi,
                normal,
                at_ns: unix(tsc),
            }
        })
    }
}

/// The evidence score of a unit with an odd send ([`ClassSizes::odd`]) whose evidence score
/// was `score`, paper score `paper` over `effective` effective nodes: the send weighs as a
/// node never seen, backed by the normal units that sent there — the strongest evidence
/// `units / (units + 1)`, and the paper's mean with one more effective node at `Δ = 1` —,
/// and the unit keeps the larger of that and its score.
pub fn odd_score(score: f64, paper: f64, effective: usize, odd: &OddSize) -> f64 {
    let k = effective as f64;
    let mean = (paper * k + 1.0) / (k + 1.0);
    score.max(0.8 * backing(odd.normal.units) + 0.2 * mean)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trees::{size_class, NodeKind, Outcome, Tally, TreeBuf, ROOT};

    #[test]
    fn size_classes_are_bit_lengths() {
        assert_eq!(size_class(0), 0);
        assert_eq!(size_class(1), 1);
        assert_eq!((size_class(8), size_class(15), size_class(16)), (4, 4, 5));
        assert_eq!(size_class(u64::MAX), 63);
        assert_eq!(class_bytes(5), (16, 31));
        assert_eq!(describe_classes(4, 4), "8–15 bytes");
        assert_eq!(describe_classes(1, 1), "1 byte");
        let mut t = Tally::ONE;
        assert_eq!(t.sizes(), None);
        t.add_size(5);
        t.add_size(3);
        t.bump();
        t.add_size(0);
        assert_eq!((t.calls(), t.sizes()), (2, Some((3, 5))));
        let mut t = Tally::ONE;
        t.add_size(63);
        for _ in 0..Tally::CALLS_MAX + 5 {
            t.bump();
        }
        assert_eq!((t.calls(), t.sizes()), (Tally::CALLS_MAX, Some((63, 63))));
    }

    #[test]
    fn ranges_merge_like_one_learning() {
        let mut a = SizeRange::default();
        a.add(4, 4);
        a.add(3, 4);
        let mut b = SizeRange::default();
        b.add(4, 6);
        let mut ab = a;
        ab.merge(&b);
        let mut all = SizeRange::default();
        for (lo, hi) in [(4, 4), (3, 4), (4, 6)] {
            all.add(lo, hi);
        }
        assert_eq!(ab, all);
        assert_eq!(
            ab,
            SizeRange {
                units: 3,
                lo: 3,
                hi: 6
            }
        );
        ab.merge(&SizeRange::default());
        assert_eq!(ab.units, 3);
        assert!(SizeRange {
            units: 1,
            lo: 5,
            hi: 4
        }
        .check()
        .is_err());
        assert!(SizeRange {
            units: 0,
            lo: 1,
            hi: 4
        }
        .check()
        .is_err());
    }

    fn write_node() -> NodeKey {
        NodeKey {
            kind: NodeKind::Lib,
            site: 1,
            callee: crate::symbolize::key_lib(bufpool::format::LibFn::Write),
            outcome: Outcome::Ok,
        }
    }

    /// A server whose replies are 9–15 bytes in 1 464 normal units answers a garbled
    /// command with 17: that send is odd, weighs as a call never seen, and is dated.
    #[test]
    fn a_reply_of_a_size_never_sent_there_is_odd() {
        let k = write_node();
        let mut m =
            crate::model::TreeModel::from_trees(std::iter::empty::<&crate::trees::CallTree>());
        let id = k.child_of(ROOT);
        m.sizes.insert(
            id,
            SizeRange {
                units: 1464,
                lo: 4,
                hi: 4,
            },
        );
        let rules = ClassSizes::of(&m);
        let reply = |bytes: u64| {
            let mut t = TreeBuf::default();
            t.add_call(ROOT, k, k.hash(), 100, 0, size_class(bytes));
            t
        };
        let normal = reply(14);
        assert!(normal.sized());
        assert_eq!(
            rules.odd(normal.nodes().iter().map(|(i, n)| (*i, n)), |t| t as i64),
            None
        );
        let odd = reply(17);
        let o = rules
            .odd(odd.nodes().iter().map(|(i, n)| (*i, n)), |t| t as i64 * 10)
            .expect("17 bytes is odd");
        assert_eq!((o.lo, o.hi, o.at_ns), (5, 5, 1000));
        let names = std::collections::BTreeMap::new();
        let s = o.sentence(&names);
        assert!(
            s.contains("sent 16–31 bytes") && s.contains("(8–15 bytes in 1464 normal units)"),
            "{s}"
        );
        // As a call never seen in a unit of three effective nodes that matched.
        let raised = odd_score(0.0, 0.0, 3, &o);
        assert!((raised - (0.8 * crate::evidence::backing(1464) + 0.2 * 0.25)).abs() < 1e-12);
        assert_eq!(odd_score(0.95, 0.5, 3, &o), 0.95);
        // Too few normal units: no rule.
        m.sizes.insert(
            id,
            SizeRange {
                units: MIN_UNITS - 1,
                lo: 4,
                hi: 4,
            },
        );
        let rules = ClassSizes::of(&m);
        assert!(rules.is_empty());
    }
}
