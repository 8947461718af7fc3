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

/// Checks the `keys` array of a model file: strictly ascending.
pub fn check_keys(keys: &[u64]) -> Result<(), String> {
    for (i, w) in keys.windows(2).enumerate() {
        if w[0] >= w[1] {
            return Err(format!(
                "keys[{}] = {} is not greater than keys[{i}]: keys must be strictly ascending",
                i + 1,
                w[1]
            ));
        }
    }
    Ok(())
}

/// Checks the `magic` and `version` fields of a model file (`None`: absent, or not a string
/// or an unsigned integer).
pub fn check_magic_version(
    magic: Option<&str>,
    version: Option<u64>,
    want: &str,
    read: std::ops::RangeInclusive<u32>,
) -> Result<(), String> {
    if magic != Some(want) {
        return Err(format!("the \"magic\" field is not \"{want}\""));
    }
    match version {
        Some(x) if (u64::from(*read.start())..=u64::from(*read.end())).contains(&x) => Ok(()),
        Some(x) => Err(format!(
            "format version {x}, this culprit reads versions {} to {} (learn the model again \
             with this culprit)",
            read.start(),
            read.end()
        )),
        None => Err("no \"version\" field".into()),
    }
}

/// Checks what a file that did not parse as a model says it is: JSON at all, then its
/// `magic` and `version` ([`check_magic_version`]). One pass over the text that keeps only
/// those two fields (everything else is skipped, not stored: bounded memory whatever the
/// file holds). `Ok` when the header is that of a model this culprit reads.
pub fn check_header(
    bytes: &[u8],
    want: &str,
    read: std::ops::RangeInclusive<u32>,
) -> Result<(), String> {
    #[derive(serde::Deserialize)]
    struct Header {
        magic: Option<Scalar>,
        version: Option<Scalar>,
    }
    let (magic, version) = match serde_json::from_slice::<Header>(bytes) {
        Ok(h) => (h.magic, h.version),
        Err(e) if e.is_syntax() || e.is_eof() || e.is_io() => return Err(format!("not JSON: {e}")),
        // JSON, but not an object (or a field twice).
        Err(_) => (None, None),
    };
    let magic = match &magic {
        Some(Scalar::Str(s)) => Some(s.as_str()),
        _ => None,
    };
    let version = match version {
        Some(Scalar::U64(v)) => Some(v),
        _ => None,
    };
    check_magic_version(magic, version, want, read)
}

/// A JSON value kept when it is a string or an unsigned integer, skipped (not stored)
/// otherwise.
enum Scalar {
    Str(String),
    U64(u64),
    Other,
}

impl<'de> serde::Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E>(self, s: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str(s.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar::U64(v))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Scalar, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Scalar, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
        }
        d.deserialize_any(V)
    }
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
