//! Stage 4 — **call trees**: one tree per execution unit, nodes `call site → callee`.
//!
//! A node is identified by its path from the unit's root: the id of a node is a hash of its
//! parent's id and its [`NodeKey`] (kind, stable call-site key, stable callee key, and, when
//! [`TreeOptions::outcome_aware`] is on, the [`Outcome`] of a library call). Calls of the same
//! function from different call sites are different nodes; repeated calls from one site
//! (loop iterations) are one node — a [`CallTree`] is a set of paths, which is all the
//! coverage model of §4 needs.
//!
//! Library calls are leaves. Without function entries (an `LD_PRELOAD`-only trace) a unit's
//! tree is just its library calls keyed by call site, and the outcome of a call (an errno,
//! end of stream, a short transfer) is often the only thing telling a faulty unit from a
//! normal one — hence outcome-aware nodes. See `analyzer/MODEL.md` for the measurement that
//! chose the default.

use crate::decode::CallOpts;
use crate::hash::{mix, IdMap};
use bufpool::format::LibFn;
use serde::{Deserialize, Serialize};

/// The id of every tree's (virtual) root.
pub const ROOT: u64 = 0x5eed_0000_0000_0001;

/// Options of tree building.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeOptions {
    /// Distinguish library-call nodes by outcome (ok / errno / end of stream / short
    /// transfer / unfinished). Default: **true** (see `analyzer/MODEL.md`, "Choosing the default").
    pub outcome_aware: bool,
}

impl Default for TreeOptions {
    fn default() -> Self {
        TreeOptions {
            outcome_aware: true,
        }
    }
}

/// What kind of call a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// A C function (gcc hooks).
    C,
    /// A Python function.
    Py,
    /// A C function called from Python.
    PyBuiltin,
    /// A wrapped library call (callee is the `LibFn` id).
    Lib,
    /// A Python exception raised in the parent frame (callee is the exception type).
    Exception,
}

/// How a library call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// Not distinguished (function calls; library calls when outcome-awareness is off).
    Any,
    /// Returned normally.
    Ok,
    /// Failed with this errno.
    Errno(i32),
    /// A receive returned 0: end of stream.
    Eof,
    /// A transfer moved fewer bytes than asked.
    Short,
    /// Never returned (the trace ends inside it, or it was `exit`/`exec`).
    Unfinished,
}

impl Outcome {
    /// The outcome of a returned library call.
    pub fn of(func: LibFn, o: &CallOpts) -> Outcome {
        if let Some(e) = o.errno {
            if o.ret.is_none_or(|r| r < 0) {
                return Outcome::Errno(e);
            }
        }
        match (o.ret, o.len) {
            (Some(0), Some(l)) if l > 0 && func.is_receive() => Outcome::Eof,
            (Some(r), Some(l))
                if r > 0 && (r as u64) < l && (func.is_receive() || func.is_send()) =>
            {
                Outcome::Short
            }
            _ => Outcome::Ok,
        }
    }

    /// The model-file code: 0 any, 1 ok, 2 end of stream, 3 short, 4 unfinished, 1000 + errno.
    pub fn code(self) -> i32 {
        match self {
            Outcome::Any => 0,
            Outcome::Ok => 1,
            Outcome::Eof => 2,
            Outcome::Short => 3,
            Outcome::Unfinished => 4,
            Outcome::Errno(e) => 1000 + e,
        }
    }

    /// The inverse of [`Outcome::code`].
    pub fn from_code(c: i32) -> Option<Outcome> {
        Some(match c {
            0 => Outcome::Any,
            1 => Outcome::Ok,
            2 => Outcome::Eof,
            3 => Outcome::Short,
            4 => Outcome::Unfinished,
            c if c >= 1000 => Outcome::Errno(c - 1000),
            _ => return None,
        })
    }

    /// Words for reports (`""` for `Any` and `Ok`).
    pub fn describe(self) -> String {
        match self {
            Outcome::Any | Outcome::Ok => String::new(),
            Outcome::Eof => "end of stream".into(),
            Outcome::Short => "short transfer".into(),
            Outcome::Unfinished => "unfinished".into(),
            Outcome::Errno(e) => format!("errno {} ({})", errno_name(e), e),
        }
    }
}

impl Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i32(self.code())
    }
}

impl<'de> Deserialize<'de> for Outcome {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let c = i32::deserialize(d)?;
        Outcome::from_code(c).ok_or_else(|| serde::de::Error::custom(format!("bad outcome {c}")))
    }
}

/// A few errno names for reports.
pub fn errno_name(e: i32) -> &'static str {
    match e {
        1 => "EPERM",
        2 => "ENOENT",
        4 => "EINTR",
        9 => "EBADF",
        11 => "EAGAIN",
        22 => "EINVAL",
        32 => "EPIPE",
        98 => "EADDRINUSE",
        103 => "ECONNABORTED",
        104 => "ECONNRESET",
        107 => "ENOTCONN",
        110 => "ETIMEDOUT",
        111 => "ECONNREFUSED",
        113 => "EHOSTUNREACH",
        115 => "EINPROGRESS",
        _ => "errno",
    }
}

/// What a node is, independent of where it sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeKey {
    /// Kind of call.
    pub kind: NodeKind,
    /// Stable key of the call site (see [`crate::symbolize`]).
    pub site: u64,
    /// Stable key of the callee.
    pub callee: u64,
    /// Outcome (library calls, when outcome-aware).
    pub outcome: Outcome,
}

impl NodeKey {
    /// The id of this node under `parent`.
    #[inline]
    pub fn child_of(&self, parent: u64) -> u64 {
        let k = mix(
            mix(self.site, self.callee),
            ((self.kind as u64) << 40) ^ (self.outcome.code() as u32 as u64),
        );
        mix(parent, k)
    }

    /// The same key without its outcome (for connection stacks).
    pub fn without_outcome(mut self) -> NodeKey {
        self.outcome = Outcome::Any;
        self
    }
}

/// One node of a unit's tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeNode {
    /// Parent id ([`ROOT`] at the top).
    pub parent: u64,
    /// What the node is.
    pub key: NodeKey,
    /// TSC of the first call.
    pub first_tsc: u64,
    /// How many times the path was taken in the unit (informative; models use coverage).
    pub calls: u32,
}

/// The call tree of one unit: a set of paths.
#[derive(Clone, Debug, Default)]
pub struct CallTree {
    /// Nodes by id.
    pub nodes: IdMap<TreeNode>,
}

impl CallTree {
    /// Adds (or counts again) node `key` under `parent`; returns its id.
    #[inline]
    pub fn add(&mut self, parent: u64, key: NodeKey, tsc: u64) -> u64 {
        self.add_new(parent, key, tsc).0
    }

    /// Like [`CallTree::add`], also telling whether the node is new in this tree.
    #[inline]
    pub fn add_new(&mut self, parent: u64, key: NodeKey, tsc: u64) -> (u64, bool) {
        let id = key.child_of(parent);
        match self.nodes.entry(id) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                let n = e.get_mut();
                n.calls = n.calls.saturating_add(1);
                (id, false)
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(TreeNode {
                    parent,
                    key,
                    first_tsc: tsc,
                    calls: 1,
                });
                (id, true)
            }
        }
    }

    /// Is this id in the tree (the root always is)?
    pub fn contains(&self, id: u64) -> bool {
        id == ROOT || self.nodes.contains_key(&id)
    }

    /// Node ids in a deterministic order (depth-first, children by key).
    pub fn ids_sorted(&self) -> Vec<u64> {
        let mut children: IdMap<Vec<(NodeKey, u64)>> = IdMap::default();
        for (&id, n) in &self.nodes {
            children.entry(n.parent).or_default().push((n.key, id));
        }
        let mut out = Vec::with_capacity(self.nodes.len());
        let mut stack = vec![ROOT];
        while let Some(id) = stack.pop() {
            if id != ROOT {
                out.push(id);
            }
            if let Some(ch) = children.get_mut(&id) {
                ch.sort();
                for &(_, c) in ch.iter().rev() {
                    stack.push(c);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(site: u64) -> NodeKey {
        NodeKey {
            kind: NodeKind::C,
            site,
            callee: site + 1,
            outcome: Outcome::Any,
        }
    }

    #[test]
    fn repeated_calls_from_one_site_are_one_node() {
        let mut t = CallTree::default();
        let a = t.add(ROOT, k(1), 0);
        let b1 = t.add(a, k(2), 1);
        let b2 = t.add(a, k(2), 2);
        let c = t.add(a, k(3), 3);
        let b_elsewhere = t.add(c, k(2), 4);
        assert_eq!(b1, b2);
        assert_ne!(b1, b_elsewhere);
        assert_eq!(t.nodes.len(), 4);
        assert_eq!(t.nodes[&b1].calls, 2);
        assert_eq!(t.ids_sorted(), vec![a, b1, c, b_elsewhere]);
    }

    #[test]
    fn outcomes() {
        let o = |ret: i64, len: u64, errno: Option<i32>| CallOpts {
            ret: Some(ret),
            len: Some(len),
            errno,
            ..Default::default()
        };
        assert_eq!(Outcome::of(LibFn::Recv, &o(8, 8, None)), Outcome::Ok);
        assert_eq!(Outcome::of(LibFn::Recv, &o(3, 8, None)), Outcome::Short);
        assert_eq!(Outcome::of(LibFn::Recv, &o(0, 8, None)), Outcome::Eof);
        assert_eq!(
            Outcome::of(LibFn::Recv, &o(-1, 8, Some(104))),
            Outcome::Errno(104)
        );
        assert_eq!(Outcome::of(LibFn::Close, &o(0, 0, None)), Outcome::Ok);
        assert_eq!(Outcome::of(LibFn::Send, &o(2, 8, None)), Outcome::Short);
        for c in [0, 1, 2, 3, 4, 1104] {
            assert_eq!(Outcome::from_code(c).unwrap().code(), c);
        }
    }
}
