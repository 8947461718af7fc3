//! Fast encoding of `LibEnter`/`LibExit` entries straight into a stack buffer.
//!
//! `bufpool::format::encode_lib` goes through the general [`LibOpts`] (about 400 bytes,
//! zeroed, then re-encoded); this module writes the few options of a hot-path call
//! directly, byte-identical to `encode_lib` (a unit test checks it on random inputs).
//! Calls that carry addresses, a call stack or a string (connect, accept, exec… — all
//! rare) still use `encode_lib`.
//!
//! [`LibOpts`]: bufpool::format::LibOpts

use bufpool::format::{Kind, LibFn, OptTag, ReadySet, ADDR_MASK, MAX_ENTRY, MAX_OPTS};

/// The small options of a library entry: the format's scalar options (one type for the
/// tracer, the format and the analyzer).
pub use bufpool::format::ScalarOpts as Small;

/// A stack buffer holding one encoded entry.
pub struct Encoded {
    buf: [u8; MAX_ENTRY],
    len: usize,
}

impl Encoded {
    /// The encoded bytes.
    #[inline(always)]
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

struct W<'a> {
    b: &'a mut [u8; MAX_ENTRY],
    /// Position inside the option block (which starts at byte 21).
    pos: usize,
}

impl W<'_> {
    #[inline(always)]
    fn put(&mut self, tag: OptTag, payload: &[u8]) {
        if self.pos + 1 + payload.len() > MAX_OPTS {
            return;
        }
        let at = 21 + self.pos;
        self.b[at] = tag as u8;
        self.b[at + 1..at + 1 + payload.len()].copy_from_slice(payload);
        self.pos += 1 + payload.len();
    }

    fn room(&self) -> usize {
        MAX_OPTS.saturating_sub(self.pos + 1)
    }
}

/// Encodes a library entry with small options and an optional ready set.
#[inline(always)]
pub fn encode(
    kind: Kind,
    tsc: u64,
    caller: u64,
    func: LibFn,
    o: &Small,
    ready: Option<&ReadySet>,
) -> Encoded {
    let mut e = Encoded {
        buf: [0; MAX_ENTRY],
        len: 0,
    };
    e.len = encode_into(&mut e.buf, kind, tsc, caller, func, o, ready);
    e
}

/// Encodes into `out` (at least [`MAX_ENTRY`] bytes, e.g. straight into the free part of
/// a sub-buffer); returns the entry's length. Only the entry's bytes are written.
#[inline(always)]
pub fn encode_into(
    out: &mut [u8; MAX_ENTRY],
    kind: Kind,
    tsc: u64,
    caller: u64,
    func: LibFn,
    o: &Small,
    ready: Option<&ReadySet>,
) -> usize {
    let head = (tsc << 8) | kind as u64;
    out[..8].copy_from_slice(&head.to_le_bytes());
    // caller (48 bits) then the function id (48 bits): two overlapping 8-byte stores.
    out[8..16].copy_from_slice(&(caller & ADDR_MASK).to_le_bytes());
    out[14..22].copy_from_slice(&func.id().to_le_bytes());
    // The scalars first (they always fit), with the format's own writer.
    let pos = o.encode_into(&mut out[21..], 0);
    let mut w = W { b: out, pos };
    if let Some(r) = ready {
        // Same rule as LibOpts::encode: keep what fits, flag the rest.
        let items = r.items();
        let n = items.len().min(w.room().saturating_sub(2) / 6);
        let mut tmp = [0u8; 2 + bufpool::format::MAX_READY_ITEMS * 6];
        tmp[0] = (r.truncated || n < items.len()) as u8;
        tmp[1] = n as u8;
        for (i, it) in items[..n].iter().enumerate() {
            tmp[2 + i * 6..6 + i * 6].copy_from_slice(&it.id.to_le_bytes());
            tmp[6 + i * 6..8 + i * 6].copy_from_slice(&it.events.to_le_bytes());
        }
        w.put(OptTag::Ready, &tmp[..2 + n * 6]);
    }
    let n = w.pos;
    out[20] = n as u8;
    21 + n
}

#[cfg(test)]
mod tests {
    use super::*;
    use bufpool::format::{encode_lib, LibOpts, ReadyItem};
    use proptest::prelude::*;

    fn lib_opts(o: &Small, ready: Option<&ReadySet>) -> LibOpts {
        LibOpts {
            ready: ready.copied(),
            ..LibOpts::from(*o)
        }
    }

    proptest! {
        #[test]
        fn matches_encode_lib(
            fd in proptest::option::of(any::<i32>()),
            fd2 in proptest::option::of(any::<i32>()),
            len in proptest::option::of(any::<u64>()),
            ret in proptest::option::of(any::<i64>()),
            errno in proptest::option::of(any::<i32>()),
            flags in proptest::option::of(any::<u32>()),
            arg in proptest::option::of(any::<u64>()),
            arg2 in proptest::option::of(any::<u64>()),
            inject in proptest::option::of(any::<u32>()),
            is_socket in proptest::option::of(any::<bool>()),
            ready in proptest::option::of((any::<bool>(), proptest::collection::vec((any::<u32>(), any::<u16>()), 0..20))),
            tsc in 0u64..(1 << 56),
            caller in any::<u64>(),
        ) {
            let o = Small { fd, fd2, len, ret, errno, flags, arg, arg2, inject, is_socket };
            let rs = ready.map(|(t, items)| {
                let mut r = ReadySet::default();
                r.truncated = t;
                for (id, events) in items {
                    r.push(ReadyItem { id, events });
                }
                r
            });
            let fast = encode(Kind::LibExit, tsc, caller, LibFn::EpollWait, &o, rs.as_ref());
            let slow = encode_lib(Kind::LibExit, tsc, caller, LibFn::EpollWait, &lib_opts(&o, rs.as_ref()));
            prop_assert_eq!(fast.as_bytes(), slow.as_bytes());
            // In place over stale bytes (a reused sub-buffer): only the entry matters.
            let mut dirty = [0xaau8; MAX_ENTRY];
            let n = encode_into(&mut dirty, Kind::LibExit, tsc, caller, LibFn::EpollWait, &o, rs.as_ref());
            prop_assert_eq!(&dirty[..n], slow.as_bytes());
        }
    }
}
