//! The splitter's memo of node keys by raw parts, with a direct-mapped cache in front.

use crate::hash::FxMap;
use crate::trees::{NodeKey, NodeKind, Outcome};

/// A memoized node key: the key, its hash, and whether the names of its parts were noted.
#[derive(Clone, Copy, Debug)]
pub(super) struct MemoVal {
    pub(super) key: NodeKey,
    pub(super) hash: u64,
    pub(super) named: bool,
    /// A frame of library code ([`frame_node`](super::keys::frame_node); false for other keys).
    pub(super) lib: bool,
}

/// Raw parts of a node key: (tag | kind, site, callee).
pub(super) type RawKey = (u64, u64, u64);

/// Node keys by raw parts, with a direct-mapped cache in front of the map (a process calls
/// a few hundred distinct functions from a few hundred sites, again and again).
pub(super) struct Memo {
    front: Vec<(RawKey, MemoVal)>,
    map: FxMap<RawKey, MemoVal>,
}

pub(super) const MEMO_FRONT_BITS: u32 = 10;

impl Default for Memo {
    fn default() -> Self {
        let empty = MemoVal {
            key: NodeKey {
                kind: NodeKind::C,
                site: 0,
                callee: 0,
                outcome: Outcome::Any,
            },
            hash: 0,
            named: false,
            lib: false,
        };
        // Tag 0 is never a raw key's first part (see the `MEMO_*` tags): empty slots.
        Memo {
            front: vec![((0, 0, 0), empty); 1 << MEMO_FRONT_BITS],
            map: FxMap::default(),
        }
    }
}

impl Memo {
    #[inline]
    fn slot(raw: RawKey) -> usize {
        let h = (raw.0 ^ raw.1.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ raw.2.rotate_left(32))
            .wrapping_mul(0xbf58_476d_1ce4_e5b9);
        (h >> (64 - MEMO_FRONT_BITS)) as usize
    }

    #[inline]
    pub(super) fn get(&mut self, raw: RawKey) -> Option<MemoVal> {
        let i = Self::slot(raw);
        if self.front[i].0 == raw {
            return Some(self.front[i].1);
        }
        let v = *self.map.get(&raw)?;
        self.front[i] = (raw, v);
        Some(v)
    }

    pub(super) fn insert(&mut self, raw: RawKey, key: NodeKey, lib: bool) -> MemoVal {
        let v = MemoVal {
            key,
            hash: key.hash(),
            named: false,
            lib,
        };
        self.map.insert(raw, v);
        self.front[Self::slot(raw)] = (raw, v);
        v
    }

    pub(super) fn set_named(&mut self, raw: RawKey) {
        if let Some(v) = self.map.get_mut(&raw) {
            v.named = true;
        }
        let i = Self::slot(raw);
        if self.front[i].0 == raw {
            self.front[i].1.named = true;
        }
    }
}

/// Memo tags of `ProcCtx::memo` (the first part of the raw key).
pub(super) const MEMO_FRAME: u64 = 1 << 62;
pub(super) const MEMO_LIB: u64 = 2 << 62;
pub(super) const MEMO_EXC: u64 = 3 << 62;

/// The image part of a memo key's first part: the same raw address or Python index means
/// something else in each image of a process that exec'd ([`ProcessSymbols::image_at`](crate::symbolize::ProcessSymbols::image_at)).
#[inline]
pub(super) fn memo_image(image: usize) -> u64 {
    (image as u64 & 0xff_ffff) << 32
}
