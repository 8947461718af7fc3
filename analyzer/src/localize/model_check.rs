//! Checking a model file before it is used: every count in range, keys in order, no
//! group or class twice. A model file is input like any other (it may be truncated,
//! hand-edited, or written by another tool): `Model::from_json` runs these checks, so
//! `rank`, `show` and `merge` refuse a bad model with a clear error naming the file, and
//! `merge` never propagates one.
//!
//! The rules (`analyzer/MODEL.md`, "Model file format"):
//!
//! - `keys` strictly ascending (no key twice: each names one call site or callee);
//! - no two process groups with the same signature, no unit class twice in a group;
//! - a class model has `units ≥ 1` and `models ≥ 1`;
//! - a node has `1 ≤ models ≤` its class's `models`, and a finite `p_sum` with
//!   `0 ≤ p_sum ≤ models` (its probability, `p_sum / models`, is in [0, 1]);
//! - per-call durations (version 4) belong to a library-call node of their class, given once;
//!   their buckets are strictly ascending and in range, each counts ≥ 1 unit, the calls are
//!   at least the units, the longest call falls in the last bucket, and no node has more
//!   samples than its class has units ([`crate::durations::Durations::check`]);
//! - send sizes (version 5) belong to a library-call node of their class, given once; their
//!   classes are in range and ordered, and they count at least one unit and at most the
//!   class's units ([`crate::sizes::SizeRange::check`]).

use crate::model::Model;

/// The largest model file read (a model of a very large system is tens of megabytes).
pub const MAX_MODEL_BYTES: u64 = 1 << 31;

/// Checks the `keys` array of a parsed model file: strictly ascending numbers.
pub fn check_keys(v: &serde_json::Value) -> Result<(), String> {
    let Some(keys) = v.get("keys").and_then(|k| k.as_array()) else {
        return Ok(()); // the schema check reports a missing field
    };
    let mut prev: Option<u64> = None;
    for (i, k) in keys.iter().enumerate() {
        let Some(k) = k.as_u64() else {
            return Err(format!("keys[{i}] is not an unsigned 64-bit integer"));
        };
        if prev.is_some_and(|p| p >= k) {
            return Err(format!(
                "keys[{i}] = {k} is not greater than keys[{}]: keys must be strictly ascending",
                i - 1
            ));
        }
        prev = Some(k);
    }
    Ok(())
}

/// Checks a model read from a file (groups sorted by signature, classes by class).
pub fn check_model(m: &Model) -> Result<(), String> {
    for (gi, g) in m.groups.iter().enumerate() {
        if gi > 0 && m.groups[gi - 1].signature == g.signature {
            return Err(format!(
                "process groups {} and {gi} have the same signature (a group listed twice)",
                gi - 1
            ));
        }
        if let Some(e) = &g.ending {
            e.check().map_err(|e| format!("group {gi}: {e}"))?;
        }
        for (ci, (c, t)) in g.classes.iter().enumerate() {
            let at = || format!("group {gi}, class {ci} ({:?} unit)", c.kind);
            if ci > 0 && g.classes[ci - 1].0 == *c {
                return Err(format!("{}: the class is listed twice", at()));
            }
            if t.units == 0 {
                return Err(format!(
                    "{}: \"units\" is 0 (a model has at least one)",
                    at()
                ));
            }
            if t.models == 0 {
                return Err(format!("{}: \"models\" is 0 (at least one)", at()));
            }
            for (ni, n) in t.nodes.iter().enumerate() {
                if n.models == 0 || n.models > t.models {
                    return Err(format!(
                        "{}, node {ni}: \"models\" is {}, must be 1 to the class's {}",
                        at(),
                        n.models,
                        t.models
                    ));
                }
                if !n.p_sum.is_finite() || n.p_sum < 0.0 || n.p_sum > f64::from(n.models) {
                    return Err(format!(
                        "{}, node {ni}: \"p_sum\" is {}, must be 0 to its \"models\" ({})",
                        at(),
                        n.p_sum,
                        n.models
                    ));
                }
            }
            for (id, d) in &t.durations {
                let Some(n) = t.get(*id) else {
                    return Err(format!(
                        "{}: durations of node id {id}, not in the class",
                        at()
                    ));
                };
                if n.key.kind != crate::trees::NodeKind::Lib {
                    return Err(format!(
                        "{}: durations of node id {id}, not a library call",
                        at()
                    ));
                }
                d.check()
                    .map_err(|e| format!("{}, durations of node id {id}: {e}", at()))?;
                if d.samples() > t.units {
                    return Err(format!(
                        "{}, durations of node id {id}: {} samples for {} units",
                        at(),
                        d.samples(),
                        t.units
                    ));
                }
            }
            for (id, r) in &t.sizes {
                let Some(n) = t.get(*id) else {
                    return Err(format!("{}: sizes of node id {id}, not in the class", at()));
                };
                if n.key.kind != crate::trees::NodeKind::Lib {
                    return Err(format!(
                        "{}: sizes of node id {id}, not a library call",
                        at()
                    ));
                }
                r.check()
                    .map_err(|e| format!("{}, sizes of node id {id}: {e}", at()))?;
                if r.units > t.units {
                    return Err(format!(
                        "{}, sizes of node id {id}: {} units of {}",
                        at(),
                        r.units,
                        t.units
                    ));
                }
            }
        }
    }
    Ok(())
}
