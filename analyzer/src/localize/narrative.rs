//! The first line of a unit's *why*, in words a maintainer reads: what happened, and what
//! usually happens instead, with how many normal units back it —
//!
//! - "`recv` failed with ECONNRESET (never in 1900 normal units); then `disconnect` was
//!   called — never seen";
//! - "`recv` returned fewer bytes than asked (never in 58 normal units); `loads`, called
//!   in every one of them, was not called".
//!
//! It names the strongest piece of evidence of the unit ([`crate::evidence::node_evidence`])
//! and the next one. The sentences after it (one per effective node, [`crate::report::why`])
//! keep the details: probabilities, call sites, the calls under a node.

use crate::evidence::node_evidence;
use crate::score::{Effective, NodeClass};
use crate::trees::{errno_name, NodeKey, Outcome};
use std::collections::BTreeMap;

/// The name of a node's callee, without its outcome.
fn callee(k: &NodeKey, names: &BTreeMap<u64, String>) -> String {
    crate::report::node_name(&k.without_outcome(), names)
}

/// "in N normal units" with `N` readable.
fn units_text(n: u64) -> String {
    match n {
        1 => "the 1 normal unit".to_string(),
        n => format!("{n} normal units"),
    }
}

/// What a node says, as the first clause of the headline.
fn first_clause(e: &Effective, units: u64, names: &BTreeMap<u64, String>) -> String {
    let name = callee(&e.key, names);
    let n = units_text(units);
    match e.class {
        NodeClass::New => match e.key.outcome {
            Outcome::Errno(err) => {
                format!("`{name}` failed with {} (never in {n})", errno_name(err))
            }
            Outcome::Eof => {
                format!("`{name}` saw the peer close the connection (end of stream; never in {n})")
            }
            Outcome::Short => format!("`{name}` moved fewer bytes than asked (never in {n})"),
            Outcome::Unfinished => format!("`{name}` never returned (never in {n})"),
            Outcome::Any | Outcome::Ok => format!("`{name}` was called (never in {n})"),
        },
        NodeClass::Missing => missing(&name, e.p.unwrap_or(0.0), &n),
        NodeClass::Common => format!(
            "`{name}` was called, as in only {:.1}% of {n}",
            e.p.unwrap_or(0.0) * 100.0
        ),
    }
}

fn missing(name: &str, p: f64, n: &str) -> String {
    if p >= 0.995 {
        format!("`{name}`, called in every one of {n}, was not called")
    } else {
        format!(
            "`{name}`, called in {:.0}% of {n}, was not called",
            p * 100.0
        )
    }
}

/// What the next node says, after the first.
fn next_clause(e: &Effective, names: &BTreeMap<u64, String>) -> String {
    let name = callee(&e.key, names);
    match e.class {
        NodeClass::New => match e.key.outcome {
            Outcome::Errno(err) => {
                format!("then `{name}` failed with {} — never seen", errno_name(err))
            }
            Outcome::Eof => format!("then `{name}` saw end of stream — never seen"),
            Outcome::Short => format!("then `{name}` moved fewer bytes than asked — never seen"),
            _ => format!("then `{name}` — never seen"),
        },
        NodeClass::Missing if e.p.unwrap_or(0.0) >= 0.995 => {
            format!("`{name}`, which always follows here, was not called")
        }
        NodeClass::Missing => format!(
            "`{name}` (in {:.0}% of normal units) was not called",
            e.p.unwrap_or(0.0) * 100.0
        ),
        NodeClass::Common => format!(
            "`{name}` called, as in only {:.1}% of normal units",
            e.p.unwrap_or(0.0) * 100.0
        ),
    }
}

/// The headline of a unit scored against a model learned from `units` units, from its
/// effective nodes (largest `Δ` first); None when nothing in it deviates.
pub fn headline(
    effective: &[Effective],
    units: u64,
    names: &BTreeMap<u64, String>,
) -> Option<String> {
    let ev = |e: &Effective| node_evidence(e.class, e.p, e.key.kind, e.key.outcome, units);
    let mut order: Vec<&Effective> = effective
        .iter()
        .filter(|e| e.class != NodeClass::Common || e.delta >= 0.5)
        .collect();
    // Strongest evidence first; ties keep the effective order (larger Δ first).
    order.sort_by(|a, b| ev(b).total_cmp(&ev(a)));
    let first = order.first()?;
    let mut s = first_clause(first, units, names);
    if let Some(next) = order.get(1) {
        s.push_str("; ");
        s.push_str(&next_clause(next, names));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trees::NodeKind;

    fn eff(class: NodeClass, p: Option<f64>, callee: u64, outcome: Outcome) -> Effective {
        let key = NodeKey {
            kind: NodeKind::Lib,
            site: 1,
            callee,
            outcome,
        };
        Effective {
            id: callee,
            parent: 0,
            key,
            class,
            p,
            delta: match class {
                NodeClass::New => 1.0,
                NodeClass::Missing => p.unwrap_or(0.0),
                NodeClass::Common => 1.0 - p.unwrap_or(0.0),
            },
            below: Vec::new(),
        }
    }

    #[test]
    fn a_reset_then_a_call_never_seen() {
        let names = BTreeMap::from([(7, "recv".to_string()), (8, "disconnect".to_string())]);
        let e = [
            eff(NodeClass::New, None, 8, Outcome::Ok),
            eff(NodeClass::New, None, 7, Outcome::Errno(104)),
        ];
        assert_eq!(
            headline(&e, 1900, &names).unwrap(),
            "`recv` failed with ECONNRESET (never in 1900 normal units); then `disconnect` — never seen"
        );
    }

    #[test]
    fn a_short_receive_and_the_call_that_always_follows_missing() {
        let names = BTreeMap::from([(7, "recv".to_string()), (9, "loads".to_string())]);
        let e = [
            eff(NodeClass::Missing, Some(1.0), 9, Outcome::Any),
            eff(NodeClass::New, None, 7, Outcome::Short),
        ];
        assert_eq!(
            headline(&e, 58, &names).unwrap(),
            "`recv` moved fewer bytes than asked (never in 58 normal units); `loads`, which always follows here, was not called"
        );
        assert_eq!(headline(&[], 58, &names), None);
    }
}
