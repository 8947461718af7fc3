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
use crate::hash::{mix, IdMap, IdSet};
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
    /// Collapse Python library code like libc is for C: a chain of library frames (the
    /// standard library — see [`crate::symbolize::is_stdlib_file`] — and builtins) is ONE
    /// node, the outermost library frame, called from user code or from the thread root.
    /// Library frames called from a library frame get no node; what is recorded under them
    /// (library calls such as `recv` or `close`, exceptions, and user functions called back
    /// from library code) attaches to the nearest frame above that has a node. Default:
    /// **true** (see `analyzer/MODEL.md`, "Library frames").
    pub collapse_library: bool,
}

impl Default for TreeOptions {
    fn default() -> Self {
        TreeOptions {
            outcome_aware: true,
            collapse_library: true,
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

/// A C-function node key for tests: call site `n`, callee `100 + n`.
#[cfg(test)]
pub(crate) fn test_key(n: u64) -> NodeKey {
    NodeKey {
        kind: NodeKind::C,
        site: n,
        callee: 100 + n,
        outcome: Outcome::Any,
    }
}

impl NodeKey {
    /// The id of this node under `parent`.
    #[inline]
    pub fn child_of(&self, parent: u64) -> u64 {
        child_id(parent, self.hash())
    }

    /// The hash of the key alone: a node's id is [`child_id`]`(parent, key.hash())`.
    #[inline]
    pub fn hash(&self) -> u64 {
        mix(
            mix(self.site, self.callee),
            ((self.kind as u64) << 40) ^ (self.outcome.code() as u32 as u64),
        )
    }

    /// The same key without its outcome (for connection stacks).
    pub fn without_outcome(mut self) -> NodeKey {
        self.outcome = Outcome::Any;
        self
    }
}

/// The id of the node of key hash `key_hash` ([`NodeKey::hash`]) under `parent`.
#[inline]
pub fn child_id(parent: u64, key_hash: u64) -> u64 {
    mix(parent, key_hash)
}

/// The two parts of a node's contribution to a tree's fingerprint (ids are hashes already,
/// so a sum of them and a sum of a scrambled copy suffice).
#[inline]
fn fp_parts(id: u64) -> (u64, u64) {
    (
        id,
        (id ^ 0x6a09_e667_f3bc_c909)
            .rotate_left(29)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15),
    )
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
    /// How many times the path was taken in the unit (informative; models use coverage),
    /// and the size classes of the sends made there ([`Tally`]).
    pub tally: Tally,
    /// The longest of its calls in the unit, entry to exit: library calls whose entry and
    /// exit were both recorded; 0 otherwise (function frames, a call that never returned).
    /// What the per-call durations of a model ([`crate::durations::Durations`]) learn.
    pub dur: Dur,
}

/// A duration kept in a tree node: nanoseconds as the bits of an `f32` (relative precision
/// 6·10⁻⁸, any duration), so that a node stays 56 bytes — its size is a share of ranking's
/// time. The bits of non-negative floats order like the floats: `max` on `Dur` is the
/// longer duration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(u32);

impl Dur {
    /// A duration of `ns` nanoseconds.
    #[inline]
    pub fn from_ns(ns: u64) -> Dur {
        Dur((ns as f32).to_bits())
    }

    /// The duration in nanoseconds (rounded to `f32` precision).
    #[inline]
    pub fn ns(self) -> u64 {
        f32::from_bits(self.0) as u64
    }
}

/// How many times a node was reached in a unit (saturating at [`Tally::CALLS_MAX`]) and,
/// for a send on a socket, the least and greatest **size class** of its calls
/// ([`size_class`]), packed in 32 bits so that a node stays 56 bytes: calls in bits 0–19,
/// the least class in bits 20–25, the greatest in bits 26–31 (0: no sized call).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Tally(u32);

impl Tally {
    /// The most calls a tally counts.
    pub const CALLS_MAX: u32 = (1 << 20) - 1;
    /// One call, no size.
    pub const ONE: Tally = Tally(1);

    /// Calls counted.
    #[inline]
    pub fn calls(self) -> u32 {
        self.0 & Tally::CALLS_MAX
    }

    /// Counts one more call.
    #[inline]
    pub fn bump(&mut self) {
        if self.calls() < Tally::CALLS_MAX {
            self.0 += 1;
        }
    }

    /// The least and greatest size class of the sized calls, if any.
    #[inline]
    pub fn sizes(self) -> Option<(u8, u8)> {
        let hi = (self.0 >> 26) as u8;
        (hi != 0).then_some((((self.0 >> 20) & 63) as u8, hi))
    }

    /// Notes a call of size class `class` (1–63; 0: none, ignored).
    #[inline]
    pub fn add_size(&mut self, class: u8) {
        let class = u32::from(class.min(63));
        if class == 0 {
            return;
        }
        let (lo, hi) = match self.sizes() {
            Some((lo, hi)) => (u32::from(lo).min(class), u32::from(hi).max(class)),
            None => (class, class),
        };
        self.0 = self.calls() | (lo << 20) | (hi << 26);
    }
}

/// The size class of a transfer of `bytes` bytes: its bit length (1 byte: 1, 2–3: 2, 4–7:
/// 3, … 16–31: 5), at most 63; 0 for none.
#[inline]
pub fn size_class(bytes: u64) -> u8 {
    (64 - bytes.leading_zeros()).min(63) as u8
}

/// The bytes of size class `c`: `(least, greatest)`.
pub fn class_bytes(c: u8) -> (u64, u64) {
    match c {
        0 => (0, 0),
        63.. => (1 << 62, u64::MAX),
        c => (1 << (c - 1), (1 << c) - 1),
    }
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
                e.get_mut().tally.bump();
                (id, false)
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(TreeNode {
                    parent,
                    key,
                    first_tsc: tsc,
                    tally: Tally::ONE,
                    dur: Dur::default(),
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

/// A unit's call tree while it is built, reused from unit to unit: nodes in insertion
/// order, an index by id, and an order-independent **fingerprint** of the node set kept up
/// to date as nodes are added (two units with equal node sets score alike against any
/// model, so learn and rank handle a repeated tree once — see [`TreeBuf::fingerprint`]).
///
/// Clearing keeps the allocations, so building a unit's tree allocates nothing once the
/// buffers have grown to the size of the process's units.
#[derive(Clone, Debug, Default)]
pub struct TreeBuf {
    nodes: Vec<(u64, TreeNode)>,
    /// The ids of `nodes`, packed: a small tree (most units) is searched by scanning them.
    ids: Vec<u64>,
    /// Index by id, kept only above [`TREEBUF_SCAN`] nodes.
    index: IdMap<u32>,
    fa: u64,
    fb: u64,
    /// The largest `dur` of any node added since the last clear (an upper bound once a
    /// subtree was taken out): ranking looks at a unit's durations only when this passes
    /// the shortest duration its model would call too long.
    slowest_ns: u64,
    /// Was a sized call added since the last clear ([`TreeBuf::sized`])?
    sized: bool,
}

/// Up to this many nodes a tree is searched by scanning its ids (cheaper than hashing for the
/// handful of nodes most units have); above, through an index.
const TREEBUF_SCAN: usize = 24;

/// Above this many index slots a cleared buffer gives its index back (one huge unit, such
/// as an initializer, must not make clearing every later small unit costly).
const TREEBUF_KEEP: usize = 4096;

impl TreeBuf {
    /// Where node `id` is in `nodes`.
    #[inline]
    fn find(&self, id: u64) -> Option<usize> {
        if self.ids.len() <= TREEBUF_SCAN {
            self.ids.iter().position(|&x| x == id)
        } else {
            self.index.get(&id).map(|&i| i as usize)
        }
    }

    /// Appends a node that is not in the tree.
    #[inline]
    fn push(&mut self, id: u64, n: TreeNode) {
        self.nodes.push((id, n));
        self.ids.push(id);
        let len = self.ids.len();
        if len == TREEBUF_SCAN + 1 {
            self.index.clear();
            for (i, &x) in self.ids.iter().enumerate() {
                self.index.insert(x, i as u32);
            }
        } else if len > TREEBUF_SCAN + 1 {
            self.index.insert(id, (len - 1) as u32);
        }
        let (a, b) = fp_parts(id);
        self.fa = self.fa.wrapping_add(a);
        self.fb = self.fb.wrapping_add(b);
    }

    /// Adds (or counts again) node `key` under `parent`; returns its id and whether it is
    /// new in this tree.
    #[inline]
    pub fn add_new(&mut self, parent: u64, key: NodeKey, tsc: u64) -> (u64, bool) {
        self.add_new_h(parent, key, key.hash(), tsc)
    }

    /// Like [`TreeBuf::add_new`] with the key's hash ([`NodeKey::hash`]) already known.
    #[inline]
    pub fn add_new_h(&mut self, parent: u64, key: NodeKey, key_hash: u64, tsc: u64) -> (u64, bool) {
        self.add_timed(parent, key, key_hash, tsc, 0)
    }

    /// Like [`TreeBuf::add_new_h`] for a call that lasted `dur_ns` (entry to exit; 0:
    /// unknown): the node keeps the longest of its calls.
    #[inline]
    pub fn add_timed(
        &mut self,
        parent: u64,
        key: NodeKey,
        key_hash: u64,
        tsc: u64,
        dur_ns: u64,
    ) -> (u64, bool) {
        self.add_call(parent, key, key_hash, tsc, dur_ns, 0)
    }

    /// Like [`TreeBuf::add_timed`] for a send of size class `size` ([`size_class`]; 0:
    /// not a sized call): the node keeps the range of its calls' classes ([`Tally`]).
    #[inline]
    pub fn add_call(
        &mut self,
        parent: u64,
        key: NodeKey,
        key_hash: u64,
        tsc: u64,
        dur_ns: u64,
        size: u8,
    ) -> (u64, bool) {
        let id = child_id(parent, key_hash);
        self.slowest_ns = self.slowest_ns.max(dur_ns);
        self.sized |= size != 0;
        let dur = Dur::from_ns(dur_ns);
        match self.find(id) {
            Some(i) => {
                let n = &mut self.nodes[i].1;
                n.tally.bump();
                n.tally.add_size(size);
                n.dur = n.dur.max(dur);
                (id, false)
            }
            None => {
                let mut tally = Tally::ONE;
                tally.add_size(size);
                self.push(
                    id,
                    TreeNode {
                        parent,
                        key,
                        first_tsc: tsc,
                        tally,
                        dur,
                    },
                );
                (id, true)
            }
        }
    }

    /// Does a node of the tree hold a sized call (since the last clear; an upper bound once
    /// a subtree was taken out)?
    #[inline]
    pub fn sized(&self) -> bool {
        self.sized
    }

    /// The longest call of the tree, ns (an upper bound: see the field).
    #[inline]
    pub fn slowest_ns(&self) -> u64 {
        self.slowest_ns
    }

    /// Like [`TreeBuf::add_new`], returning the id only.
    #[inline]
    pub fn add(&mut self, parent: u64, key: NodeKey, tsc: u64) -> u64 {
        self.add_new(parent, key, tsc).0
    }

    /// Puts a node taken from another tree (see [`TreeBuf::take_subtree_into`]); a node already
    /// present is replaced.
    pub fn insert(&mut self, id: u64, n: TreeNode) {
        self.slowest_ns = self.slowest_ns.max(n.dur.ns());
        self.sized |= n.tally.sizes().is_some();
        match self.find(id) {
            Some(i) => self.nodes[i].1 = n,
            None => self.push(id, n),
        }
    }

    /// Removes node `id` and its descendants, putting them into `out` (cleared first;
    /// parents before children): in place, allocating nothing once `out` has grown (a handler takes a subtree from the loop unit before it,
    /// so this runs once per handler unit).
    pub fn take_subtree_into(&mut self, id: u64, out: &mut Vec<(u64, TreeNode)>) {
        out.clear();
        let Some(at) = self.find(id) else {
            return;
        };
        // Descendants were added after their ancestors: one scan from `id` on finds them,
        // asking of each whether its parent was taken — among the few taken so far, or,
        // past a handful, through a set of them.
        let mut many: Option<IdSet> = None;
        let mut kept = at;
        for i in at..self.nodes.len() {
            let (nid, n) = self.nodes[i];
            let taken = nid == id
                || match &many {
                    Some(set) => set.contains(&n.parent),
                    None => out.iter().any(|(t, _)| *t == n.parent),
                };
            if taken {
                out.push((nid, n));
                match &mut many {
                    Some(set) => {
                        set.insert(nid);
                    }
                    None if out.len() > TREEBUF_SCAN => {
                        many = Some(out.iter().map(|(t, _)| *t).collect());
                    }
                    None => {}
                }
            } else {
                self.nodes[kept] = (nid, n);
                kept += 1;
            }
        }
        let indexed = self.ids.len() > TREEBUF_SCAN;
        self.nodes.truncate(kept);
        self.ids.truncate(at);
        self.ids
            .extend(self.nodes[at..].iter().map(|(nid, _)| *nid));
        if self.ids.len() > TREEBUF_SCAN {
            // Positions from `at` on moved.
            for (i, &x) in self.ids.iter().enumerate().skip(at) {
                self.index.insert(x, i as u32);
            }
            for (nid, _) in out.iter() {
                self.index.remove(nid);
            }
        } else if indexed {
            self.index.clear();
        }
        for (nid, _) in out.iter() {
            let (a, b) = fp_parts(*nid);
            self.fa = self.fa.wrapping_sub(a);
            self.fb = self.fb.wrapping_sub(b);
        }
    }

    /// Empties the tree, keeping its allocations (unless they grew very large).
    pub fn clear(&mut self) {
        if self.ids.len() > TREEBUF_SCAN {
            if self.index.capacity() > TREEBUF_KEEP {
                self.index = IdMap::default();
            } else {
                self.index.clear();
            }
        }
        self.nodes.clear();
        self.ids.clear();
        self.fa = 0;
        self.fb = 0;
        self.slowest_ns = 0;
        self.sized = false;
    }

    /// The nodes, in the order they were first added.
    pub fn nodes(&self) -> &[(u64, TreeNode)] {
        &self.nodes
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Has the tree no node?
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Is this id in the tree (the root always is)?
    pub fn contains(&self, id: u64) -> bool {
        id == ROOT || self.find(id).is_some()
    }

    /// Order-independent fingerprint of the node set: equal sets give equal fingerprints
    /// (and unequal ones differ but with probability ~2⁻¹²⁸). The same as
    /// [`CallTree::fingerprint`] of [`TreeBuf::to_tree`].
    pub fn fingerprint(&self) -> (u64, u64) {
        (self.fa.wrapping_add(self.nodes.len() as u64), self.fb)
    }

    /// A [`CallTree`] holding the same nodes.
    pub fn to_tree(&self) -> CallTree {
        let mut nodes = IdMap::default();
        nodes.reserve(self.nodes.len());
        for (id, n) in &self.nodes {
            nodes.insert(*id, *n);
        }
        CallTree { nodes }
    }
}

impl CallTree {
    /// Order-independent fingerprint of the node set (see [`TreeBuf::fingerprint`]).
    pub fn fingerprint(&self) -> (u64, u64) {
        let (mut a, mut b) = (self.nodes.len() as u64, 0u64);
        for &id in self.nodes.keys() {
            let (x, y) = fp_parts(id);
            a = a.wrapping_add(x);
            b = b.wrapping_add(y);
        }
        (a, b)
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
        assert_eq!(t.nodes[&b1].tally.calls(), 2);
        assert_eq!(t.ids_sorted(), vec![a, b1, c, b_elsewhere]);
    }

    #[test]
    fn tree_buffer_fingerprints_node_sets_and_moves_subtrees() {
        let mut a = TreeBuf::default();
        let x = a.add(ROOT, k(1), 0);
        let y = a.add(x, k(2), 1);
        let z = a.add(y, k(3), 2);
        let w = a.add(x, k(4), 3);
        a.add(y, k(3), 4);
        assert_eq!(a.len(), 4);
        assert_eq!(a.fingerprint(), a.to_tree().fingerprint());
        // Another order, other counts: the same node set, the same fingerprint.
        let mut b = TreeBuf::default();
        b.add(ROOT, k(1), 9);
        b.add(x, k(4), 9);
        b.add(x, k(2), 9);
        assert_ne!(a.fingerprint(), b.fingerprint());
        b.add(y, k(3), 9);
        assert_eq!(a.fingerprint(), b.fingerprint());
        // Taking y's subtree leaves x and w, and the fingerprint of that set.
        let mut moved = Vec::new();
        a.take_subtree_into(y, &mut moved);
        assert_eq!(moved.iter().map(|m| m.0).collect::<Vec<_>>(), vec![y, z]);
        assert_eq!(moved[1].1.tally.calls(), 2);
        assert!(a.contains(x) && a.contains(w) && !a.contains(y) && !a.contains(z));
        assert_eq!(a.fingerprint(), a.to_tree().fingerprint());
        let mut c = TreeBuf::default();
        for (id, n) in moved {
            c.insert(id, n);
        }
        assert_eq!(c.to_tree().nodes[&z].tally.calls(), 2);
        a.clear();
        assert!(a.is_empty());
        assert_eq!(a.fingerprint(), TreeBuf::default().fingerprint());
    }

    #[test]
    fn large_tree_buffers_switch_to_an_index_and_back() {
        // A chain of 60 nodes with a leaf under each: past the scanning size, then cut.
        let mut t = TreeBuf::default();
        let mut parent = ROOT;
        let mut chain = Vec::new();
        for i in 0..60 {
            let id = t.add(parent, k(1000 + i), i);
            t.add(id, k(5000 + i), i);
            chain.push(id);
            parent = id;
        }
        assert_eq!(t.len(), 120);
        for (i, &id) in chain.iter().enumerate() {
            assert!(t.contains(id));
            assert_eq!(
                t.add_new(
                    if i == 0 { ROOT } else { chain[i - 1] },
                    k(1000 + i as u64),
                    0
                ),
                (id, false)
            );
        }
        assert_eq!(t.fingerprint(), t.to_tree().fingerprint());
        let mut moved = Vec::new();
        t.take_subtree_into(chain[50], &mut moved);
        assert_eq!(moved.len(), 20);
        assert_eq!(t.len(), 100);
        assert!(t.contains(chain[49]) && !t.contains(chain[50]));
        assert_eq!(t.fingerprint(), t.to_tree().fingerprint());
        t.take_subtree_into(chain[5], &mut moved);
        assert_eq!((moved.len(), t.len()), (90, 10));
        assert!(t.contains(chain[4]) && !t.contains(chain[6]));
        assert_eq!(t.fingerprint(), t.to_tree().fingerprint());
        t.clear();
        assert!(t.is_empty() && !t.contains(chain[0]));
    }

    #[test]
    fn taking_a_subtree_in_place_matches_filtering_the_nodes() {
        // Random trees of 1..200 nodes (both sides of the scanning size), every node's
        // subtree taken in turn from a fresh copy.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut out = Vec::new();
        for size in [1usize, 5, 24, 25, 26, 40, 200] {
            let mut t = TreeBuf::default();
            let mut ids = vec![ROOT];
            while t.len() < size {
                let parent = ids[(next() % ids.len() as u64) as usize];
                let (id, new) = t.add_new(parent, k(next() % 50), 0);
                if new {
                    ids.push(id);
                }
            }
            for &id in &ids[1..] {
                let mut u = t.clone();
                u.take_subtree_into(id, &mut out);
                // The reference: the nodes under `id`, by walking parents.
                let under = |mut x: u64| loop {
                    if x == id {
                        break true;
                    }
                    if x == ROOT {
                        break false;
                    }
                    x = t.nodes().iter().find(|(n, _)| *n == x).unwrap().1.parent;
                };
                let want: Vec<u64> = t
                    .nodes()
                    .iter()
                    .map(|n| n.0)
                    .filter(|&x| under(x))
                    .collect();
                let left: Vec<u64> = t
                    .nodes()
                    .iter()
                    .map(|n| n.0)
                    .filter(|&x| !under(x))
                    .collect();
                assert_eq!(out.iter().map(|n| n.0).collect::<Vec<_>>(), want);
                assert_eq!(u.nodes().iter().map(|n| n.0).collect::<Vec<_>>(), left);
                for &x in &left {
                    assert!(u.contains(x));
                }
                for &x in &want {
                    assert!(!u.contains(x));
                }
                assert_eq!(u.fingerprint(), u.to_tree().fingerprint());
                // Adding a node afterwards finds the ones left.
                if let Some(&x) = left.first() {
                    let n = u.nodes()[0].1;
                    assert_eq!(u.add_new(n.parent, n.key, 0), (x, false));
                }
            }
        }
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
