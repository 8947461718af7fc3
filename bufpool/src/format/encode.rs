//! Building entries. Every function here writes into a stack buffer: no allocation,
//! so the tracer can call them from any hook.

use super::{head_word, Kind, LibFn, LibOpts, Meta, ADDR_MASK, MAX_ENTRY, MAX_META_BODY, MAX_OPTS};

/// One encoded trace entry (16..=148 bytes) in a stack buffer.
///
/// The buffer is not zeroed first (that would cost more than the encoding of a 20-byte
/// entry): bytes are only ever appended, and `as_bytes` shows only those.
#[derive(Clone, Copy)]
pub struct EntryBuf {
    /// Invariant: the first `len` bytes have been written by [`EntryBuf::push`].
    buf: core::mem::MaybeUninit<[u8; MAX_ENTRY]>,
    len: u8,
}

impl EntryBuf {
    #[inline(always)]
    fn new() -> EntryBuf {
        EntryBuf {
            buf: core::mem::MaybeUninit::uninit(),
            len: 0,
        }
    }

    /// Appends `bytes`.
    #[inline(always)]
    fn push(&mut self, bytes: &[u8]) {
        let at = self.len as usize;
        let end = at + bytes.len();
        assert!(end <= MAX_ENTRY, "entry larger than MAX_ENTRY");
        // SAFETY: `at..end` lies inside the buffer (checked above); a byte copy into a
        // MaybeUninit buffer needs no initialized destination.
        unsafe {
            core::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                (self.buf.as_mut_ptr() as *mut u8).add(at),
                bytes.len(),
            );
        }
        self.len = end as u8;
    }

    /// The encoded bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: by the invariant of `buf`, its first `len` bytes are initialized.
        unsafe { core::slice::from_raw_parts(self.buf.as_ptr() as *const u8, self.len as usize) }
    }

    #[inline(always)]
    fn push48(&mut self, v: u64) {
        self.push(&(v & ADDR_MASK).to_le_bytes()[..6]);
    }
}

/// A call-shaped entry (`FnEnter`, `PyCall`, `PyCCall`, `PyExc`): 20 bytes.
#[inline]
pub fn encode_fn(kind: Kind, tsc: u64, caller: u64, callee: u64) -> EntryBuf {
    debug_assert!(kind.is_call_shaped());
    let mut e = EntryBuf::new();
    e.push(&head_word(kind, tsc).to_le_bytes());
    e.push48(caller);
    e.push48(callee);
    e
}

/// A return-shaped entry (`FnExit`, `PyReturn`, `PyCReturn`): 16 bytes.
#[inline]
pub fn encode_ret(kind: Kind, tsc: u64, callee: u64, aux: u16) -> EntryBuf {
    debug_assert!(kind.is_return_shaped());
    let mut e = EntryBuf::new();
    e.push(&head_word(kind, tsc).to_le_bytes());
    e.push48(callee);
    e.push(&aux.to_le_bytes());
    e
}

/// A library-call entry (`LibEnter` or `LibExit`): 21 + options bytes.
#[inline]
pub fn encode_lib(kind: Kind, tsc: u64, caller: u64, func: LibFn, opts: &LibOpts) -> EntryBuf {
    debug_assert!(matches!(kind, Kind::LibEnter | Kind::LibExit));
    let mut e = EntryBuf::new();
    e.push(&head_word(kind, tsc).to_le_bytes());
    e.push48(caller);
    e.push48(func.id());
    let mut block = [0u8; MAX_OPTS];
    let n = opts.encode(&mut block);
    e.push(&[n as u8]);
    e.push(&block[..n]);
    e
}

/// A lost-entries marker: 16 bytes.
#[inline]
pub fn encode_lost(tsc: u64, count: u64) -> EntryBuf {
    let mut e = EntryBuf::new();
    e.push(&head_word(Kind::Lost, tsc).to_le_bytes());
    e.push(&count.to_le_bytes());
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
