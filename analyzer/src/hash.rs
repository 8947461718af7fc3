//! Deterministic 64-bit hashing for stable keys (the same on every run, host and thread
//! count; `std`'s hasher is randomly seeded, so it is never used for keys).

use std::hash::{BuildHasherDefault, Hasher};

/// Combines two 64-bit values (a splitmix64-style finalizer over a multiply–xor).
#[inline]
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a
        .rotate_left(23)
        .wrapping_add(b.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_add(0x632b_e59b_d9b4_e019);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a of a byte string, finalized with [`mix`].
pub fn str_hash(s: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in s {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    mix(h, s.len() as u64)
}

/// A hasher for maps whose keys are already hashes: passes the value through.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix(self.0, b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// A `HashMap` keyed by hashes.
pub type IdMap<V> = std::collections::HashMap<u64, V, BuildHasherDefault<IdHasher>>;
/// A `HashSet` of hashes.
pub type IdSet = std::collections::HashSet<u64, BuildHasherDefault<IdHasher>>;

/// A fast, deterministic hasher for in-memory maps of small keys (integers, short vectors
/// and strings): rustc's `FxHasher` (the `rustc-hash` crate). Not for keys an adversary
/// chooses; never used for stable keys.
pub use rustc_hash::FxHasher;

/// A `HashMap` with [`FxHasher`].
pub type FxMap<K, V> = rustc_hash::FxHashMap<K, V>;
/// A `HashSet` with [`FxHasher`].
pub type FxSet<K> = rustc_hash::FxHashSet<K>;
