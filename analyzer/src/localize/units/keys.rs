//! Stable node keys of frames and library calls, and the raw path hashes pass 1 and
//! pass 2 agree on.

use super::split::P2Frame;
use crate::decode::{CallKind, LibEvent};
use crate::hash::mix;
use crate::symbolize::{key_lib, ProcessSymbols};
use crate::trees::{NodeKey, NodeKind, Outcome, TreeOptions};
use bufpool::format::LibFn;

/// Raw path step (pass 1 and pass 2 must agree).
#[inline]
pub(super) fn raw_step(parent: u64, kind: CallKind, site: u64, callee: u64) -> u64 {
    mix(parent, mix(site ^ ((kind as u64) << 56), callee))
}

pub(super) const RAW_ROOT: u64 = 0x7261_7700;

/// The stable node key of a function frame.
pub fn frame_key(sy: &ProcessSymbols, kind: CallKind, site: u64, callee: u64) -> NodeKey {
    let (k, site, callee) = match kind {
        CallKind::C => (NodeKind::C, sy.key_c(site), sy.key_c(callee)),
        CallKind::Py => (NodeKind::Py, sy.key_py_site(site), sy.key_py(callee)),
        CallKind::PyBuiltin => (NodeKind::PyBuiltin, sy.key_py_site(site), sy.key_py(callee)),
    };
    NodeKey {
        kind: k,
        site,
        callee,
        outcome: Outcome::Any,
    }
}

pub(super) fn lib_key(sy: &ProcessSymbols, l: &LibEvent, outcome: Outcome) -> NodeKey {
    NodeKey {
        kind: NodeKind::Lib,
        site: sy.key_c(l.site),
        callee: key_lib(l.func),
        outcome,
    }
}

/// Python library frames ([`TreeOptions::collapse_library`]): does a frame get a node of its
/// own? A library frame (standard library or builtin, [`is_library_frame`]) called from a
/// library frame gets none: what it records attaches to the nearest frame above with a node.
/// `lib` says whether the frame is a library frame; `parent` is the frame it was called from
/// (`None`: the thread root), whose `lib` says the same of it.
#[inline]
pub(super) fn frame_node(lib: bool, parent: Option<&P2Frame>) -> bool {
    !(lib && parent.is_some_and(|p| p.lib))
}

/// Is a frame of this callee library code, to be collapsed ([`frame_node`])?
pub(super) fn is_library_frame(
    sy: &ProcessSymbols,
    opts: &TreeOptions,
    kind: CallKind,
    callee: u64,
) -> bool {
    opts.collapse_library && kind != CallKind::C && sy.is_library_py(callee)
}

/// The stable key of a setup call's stack: its path from the thread root, then the native
/// frames the tracer recorded (if any).
pub(super) fn setup_stack_key(sy: &ProcessSymbols, top_abs: u64, l: &LibEvent) -> u64 {
    let mut h = lib_key(sy, l, Outcome::Any).child_of(top_abs);
    for &a in l.stack() {
        h = mix(h, sy.key_c(a));
    }
    h
}

pub(super) fn is_exit(f: LibFn) -> bool {
    matches!(f, LibFn::Exit | LibFn::UExit | LibFn::UExitC)
}
