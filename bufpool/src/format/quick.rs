//! The fast path of entry decoding: the common entries read in place, without the checks'
//! bookkeeping of [`Decoder`](super::Decoder) and without building an
//! [`EntryRef`](super::EntryRef).
//!
//! Function entries and returns and library calls are nearly every entry of a trace. A
//! decoding loop asks [`quick_entry`] first and falls back to the `Decoder` — which names
//! the offset and the problem of a bad entry — for everything it does not take: metadata,
//! lost markers, exceptions, an entry not whole in the buffer, an unknown function id, an
//! option block longer than [`MAX_OPTS`]. What it takes, it reads exactly as the `Decoder`
//! does (the fuzz target `bufpool/fuzz/fuzz_targets/decode.rs` and the property tests check
//! it); its option blocks are read with [`ScalarOpts::parse`](super::ScalarOpts::parse) or
//! [`LibOpts::parse`](super::LibOpts::parse).

use super::{Kind, LibFn, ADDR_MASK, MAX_OPTS, TSC_MASK};

/// Size of a call-shaped entry (`FnEnter`, `PyCall`, `PyCCall`, `PyExc`).
pub const CALL_ENTRY: usize = 20;
/// Size of a return-shaped entry (`FnExit`, `PyReturn`, `PyCReturn`).
pub const RETURN_ENTRY: usize = 16;
/// Size of a library entry without its option block (head, caller, function, length).
pub const LIB_ENTRY_FIXED: usize = 21;

/// Which functions a call or return entry is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CallKind {
    /// A C function (`FnEnter`/`FnExit`, `-finstrument-functions`): site and callee are
    /// addresses.
    C,
    /// A Python function (`PyCall`/`PyReturn`): site is a [`py_site`](super::py_site),
    /// callee a code index.
    Py,
    /// A C function called from Python (`PyCCall`/`PyCReturn`): site is a `py_site`, callee
    /// a builtin index.
    PyBuiltin,
}

impl CallKind {
    /// The kind of the functions an entry of kind `k` is about (C for anything but the
    /// Python calls and returns).
    #[inline(always)]
    pub fn of(k: Kind) -> CallKind {
        match k {
            Kind::PyCall | Kind::PyReturn => CallKind::Py,
            Kind::PyCCall | Kind::PyCReturn => CallKind::PyBuiltin,
            _ => CallKind::C,
        }
    }

    /// The entry kind of a call of such a function.
    pub fn call_kind(self) -> Kind {
        match self {
            CallKind::C => Kind::FnEnter,
            CallKind::Py => Kind::PyCall,
            CallKind::PyBuiltin => Kind::PyCCall,
        }
    }

    /// The entry kind of a return of such a function.
    pub fn return_kind(self) -> Kind {
        match self {
            CallKind::C => Kind::FnExit,
            CallKind::Py => Kind::PyReturn,
            CallKind::PyBuiltin => Kind::PyCReturn,
        }
    }
}

/// An entry [`quick_entry`] took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuickEntry<'a> {
    /// A function was entered: `FnEnter`, `PyCall` or `PyCCall` (caller = `site`).
    Call {
        /// The entry kind ([`CallKind::call_kind`]).
        kind: CallKind,
        /// TSC.
        tsc: u64,
        /// The caller field.
        site: u64,
        /// The callee field.
        callee: u64,
    },
    /// A function returned: `FnExit`, `PyReturn` or `PyCReturn` (its aux field unread).
    Return {
        /// The entry kind ([`CallKind::return_kind`]).
        kind: CallKind,
        /// TSC.
        tsc: u64,
        /// The callee field.
        callee: u64,
    },
    /// A `LibEnter` (`exit` false) or `LibExit` of a known function, options unparsed.
    Lib {
        /// True for `LibExit`.
        exit: bool,
        /// TSC.
        tsc: u64,
        /// The caller field.
        site: u64,
        /// The function.
        func: LibFn,
        /// The option block.
        body: &'a [u8],
    },
}

impl QuickEntry<'_> {
    /// The entry's size in bytes.
    #[inline(always)]
    pub fn size(&self) -> usize {
        match self {
            QuickEntry::Call { .. } => CALL_ENTRY,
            QuickEntry::Return { .. } => RETURN_ENTRY,
            QuickEntry::Lib { body, .. } => LIB_ENTRY_FIXED + body.len(),
        }
    }
}

const FN_ENTER: u8 = Kind::FnEnter as u8;
const FN_EXIT: u8 = Kind::FnExit as u8;
const PY_CALL: u8 = Kind::PyCall as u8;
const PY_RETURN: u8 = Kind::PyReturn as u8;
const PY_CCALL: u8 = Kind::PyCCall as u8;
const PY_CRETURN: u8 = Kind::PyCReturn as u8;
const LIB_ENTER: u8 = Kind::LibEnter as u8;
const LIB_EXIT: u8 = Kind::LibExit as u8;

/// Receives the entry [`quick_visit`] reads, by kind, in place: the decoding loops' hot
/// path (one dispatch on the kind byte, nothing built in between). Each method says whether
/// it took the entry; one that declines sends the caller to the [`Decoder`](super::Decoder).
pub trait QuickVisit<'a> {
    /// A function was entered: `FnEnter`, `PyCall` or `PyCCall`.
    fn call(&mut self, kind: CallKind, tsc: u64, site: u64, callee: u64) -> bool;
    /// A function returned: `FnExit`, `PyReturn` or `PyCReturn` (its aux field unread).
    fn ret(&mut self, kind: CallKind, tsc: u64, callee: u64) -> bool;
    /// A `LibEnter` (`exit` false) or `LibExit` of a known function, options unparsed.
    fn lib(&mut self, exit: bool, tsc: u64, site: u64, func: LibFn, body: &'a [u8]) -> bool;
}

/// Reads the entry at `p` of `bytes` if it is a common one (see the module's
/// documentation) and hands it to `v`: its size if `v` took it, 0 otherwise (the caller
/// then goes to the [`Decoder`](super::Decoder)). Needs [`LIB_ENTRY_FIXED`] bytes from `p`
/// whatever the kind (the fixed fields are read in three loads): the last short entry of a
/// buffer goes to the `Decoder` too.
#[inline(always)]
pub fn quick_visit<'a>(bytes: &'a [u8], p: usize, v: &mut impl QuickVisit<'a>) -> usize {
    let Some(b) = bytes.get(p..p + LIB_ENTRY_FIXED) else {
        return 0;
    };
    let word = |at: usize| -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let head = word(0);
    let tsc = (head >> 8) & TSC_MASK;
    // The two 48-bit fields at offsets 8 and 14; a return-shaped entry's function is the
    // first.
    let site = word(8) & ADDR_MASK;
    let callee = word(12) >> 16;
    let took = |t: bool, size: usize| if t { size } else { 0 };
    match head as u8 {
        FN_ENTER => took(v.call(CallKind::C, tsc, site, callee), CALL_ENTRY),
        PY_CALL => took(v.call(CallKind::Py, tsc, site, callee), CALL_ENTRY),
        PY_CCALL => took(v.call(CallKind::PyBuiltin, tsc, site, callee), CALL_ENTRY),
        FN_EXIT => took(v.ret(CallKind::C, tsc, site), RETURN_ENTRY),
        PY_RETURN => took(v.ret(CallKind::Py, tsc, site), RETURN_ENTRY),
        PY_CRETURN => took(v.ret(CallKind::PyBuiltin, tsc, site), RETURN_ENTRY),
        k @ (LIB_ENTER | LIB_EXIT) => {
            let m = b[LIB_ENTRY_FIXED - 1] as usize;
            let Some(func) = LibFn::from_id(callee) else {
                return 0;
            };
            if m > MAX_OPTS || bytes.len() - p < LIB_ENTRY_FIXED + m {
                return 0;
            }
            let body = &bytes[p + LIB_ENTRY_FIXED..p + LIB_ENTRY_FIXED + m];
            took(
                v.lib(k == LIB_EXIT, tsc, site, func, body),
                LIB_ENTRY_FIXED + m,
            )
        }
        _ => 0,
    }
}

/// [`quick_visit`] as a value: the entry at `p` of `bytes` if it is a common one, `None`
/// otherwise (for tests, tools and loops that are not hot).
pub fn quick_entry(bytes: &[u8], p: usize) -> Option<QuickEntry<'_>> {
    struct Keep<'a>(Option<QuickEntry<'a>>);
    impl<'a> QuickVisit<'a> for Keep<'a> {
        fn call(&mut self, kind: CallKind, tsc: u64, site: u64, callee: u64) -> bool {
            self.0 = Some(QuickEntry::Call {
                kind,
                tsc,
                site,
                callee,
            });
            true
        }
        fn ret(&mut self, kind: CallKind, tsc: u64, callee: u64) -> bool {
            self.0 = Some(QuickEntry::Return { kind, tsc, callee });
            true
        }
        fn lib(&mut self, exit: bool, tsc: u64, site: u64, func: LibFn, body: &'a [u8]) -> bool {
            self.0 = Some(QuickEntry::Lib {
                exit,
                tsc,
                site,
                func,
                body,
            });
            true
        }
    }
    let mut k = Keep(None);
    quick_visit(bytes, p, &mut k);
    k.0
}
