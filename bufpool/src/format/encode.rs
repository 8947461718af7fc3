//! Building entries. Every function here writes into a stack buffer: no allocation,
//! so the tracer can call them from any hook.

use super::{head_word, Kind, LibFn, LibOpts, Meta, ADDR_MASK, MAX_ENTRY, MAX_META_BODY, MAX_OPTS};

/// One encoded trace entry (16..=148 bytes) in a stack buffer.
#[derive(Clone, Copy)]
pub struct EntryBuf {
    buf: [u8; MAX_ENTRY],
    len: u8,
}

impl EntryBuf {
    /// The encoded bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }
}

/// Writes the first 6 bytes of `v` (a 48-bit field) at `at`.
#[inline(always)]
fn put48(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 6].copy_from_slice(&(v & ADDR_MASK).to_le_bytes()[..6]);
}

/// A call-shaped entry (`FnEnter`, `PyCall`, `PyCCall`, `PyExc`): 20 bytes.
#[inline]
pub fn encode_fn(kind: Kind, tsc: u64, caller: u64, callee: u64) -> EntryBuf {
    debug_assert!(kind.is_call_shaped());
    let mut e = EntryBuf {
        buf: [0; MAX_ENTRY],
        len: 20,
    };
    e.buf[..8].copy_from_slice(&head_word(kind, tsc).to_le_bytes());
    put48(&mut e.buf, 8, caller);
    put48(&mut e.buf, 14, callee);
    e
}

/// A return-shaped entry (`FnExit`, `PyReturn`, `PyCReturn`): 16 bytes.
#[inline]
pub fn encode_ret(kind: Kind, tsc: u64, callee: u64, aux: u16) -> EntryBuf {
    debug_assert!(kind.is_return_shaped());
    let mut e = EntryBuf {
        buf: [0; MAX_ENTRY],
        len: 16,
    };
    e.buf[..8].copy_from_slice(&head_word(kind, tsc).to_le_bytes());
    put48(&mut e.buf, 8, callee);
    e.buf[14..16].copy_from_slice(&aux.to_le_bytes());
    e
}

/// A library-call entry (`LibEnter` or `LibExit`): 21 + options bytes.
#[inline]
pub fn encode_lib(kind: Kind, tsc: u64, caller: u64, func: LibFn, opts: &LibOpts) -> EntryBuf {
    debug_assert!(matches!(kind, Kind::LibEnter | Kind::LibExit));
    let mut e = EntryBuf {
        buf: [0; MAX_ENTRY],
        len: 0,
    };
    e.buf[..8].copy_from_slice(&head_word(kind, tsc).to_le_bytes());
    put48(&mut e.buf, 8, caller);
    put48(&mut e.buf, 14, func.id());
    let mut block = [0u8; MAX_OPTS];
    let n = opts.encode(&mut block);
    e.buf[20] = n as u8;
    e.buf[21..21 + n].copy_from_slice(&block[..n]);
    e.len = (21 + n) as u8;
    e
}

/// A lost-entries marker: 16 bytes.
#[inline]
pub fn encode_lost(tsc: u64, count: u64) -> EntryBuf {
    let mut e = EntryBuf {
        buf: [0; MAX_ENTRY],
        len: 16,
    };
    e.buf[..8].copy_from_slice(&head_word(Kind::Lost, tsc).to_le_bytes());
    e.buf[8..16].copy_from_slice(&count.to_le_bytes());
    e
}

/// Size of the buffer [`encode_meta`] writes into.
pub const META_BUF: usize = 10 + MAX_META_BODY;

/// A metadata record: head, `u16` body length, body. Returns the record length.
pub fn encode_meta(tsc: u64, meta: &Meta, out: &mut [u8; META_BUF]) -> usize {
    let mut body = [0u8; MAX_META_BODY];
    let n = meta.encode_body(&mut body);
    out[..8].copy_from_slice(&head_word(meta.kind(), tsc).to_le_bytes());
    out[8..10].copy_from_slice(&(n as u16).to_le_bytes());
    out[10..10 + n].copy_from_slice(&body[..n]);
    10 + n
}
