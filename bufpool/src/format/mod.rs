//! The trace entry format: how one recorded event is laid out in a sub-buffer.
//!
//! Entries are packed back to back, little-endian, with no padding and no alignment
//! requirement. Every entry starts with an 8-byte *head*: the low byte is the entry
//! [`Kind`], the upper 56 bits the TSC value. What follows depends on the kind:
//!
//! | kind                         | layout after the head                              | size      |
//! |------------------------------|----------------------------------------------------|-----------|
//! | `FnEnter`, `PyCall`, `PyCCall`, `PyExc` | caller u48, callee u48                  | 20        |
//! | `FnExit`, `PyReturn`, `PyCReturn`       | callee u48, aux u16                     | 16        |
//! | `LibEnter`, `LibExit`        | caller u48, callee u48 (= [`LibFn`] id), optlen u8, options | 21..=148 |
//! | `Lost`                       | count u64                                          | 16        |
//! | metadata (`0x30..=0x3f`)     | len u16, body (`len` bytes)                        | 10..=4106 |
//!
//! Trace entries proper (the first four rows) are 16 to 148 bytes, as in the paper.
//! Metadata records (process info, memory map, code tables, clock samples…) are rare
//! and never written on a hot path; they are bounded by [`MAX_META_BODY`].
//!
//! See `bufpool/FORMAT.md` for the full description, including every option tag.

mod decode;
mod encode;
mod libfn;
mod meta;
mod options;
mod quick;
mod scalars;

pub use decode::{
    decode_all, header_lost, DecodeError, DecodeErrorKind, Decoder, Entry, EntryRef, LostMismatch,
};
pub use encode::{encode_fn, encode_lib, encode_lost, encode_meta, encode_ret, EntryBuf, META_BUF};
pub use libfn::LibFn;
pub use meta::{
    ClockSample, CodeKind, CodeRecord, FilterRecord, InjectRecord, MapRecord, Meta, ProcReason,
    ProcRecord, ThreadRecord,
};
pub use options::{
    Addr, LibOpts, OptTag, ReadyItem, ReadySet, MAX_ADDR_BYTES, MAX_READY_ITEMS, MAX_STACK, MAX_STR,
};
pub use quick::{
    quick_entry, quick_visit, CallKind, QuickEntry, QuickVisit, CALL_ENTRY, LIB_ENTRY_FIXED,
    RETURN_ENTRY,
};
pub use scalars::{ScalarOpts, MAX_SCALAR_BYTES};

/// Size of the entry head (type byte + 56-bit TSC).
pub const HEAD_SIZE: usize = 8;
/// Smallest trace entry.
pub const MIN_ENTRY: usize = 16;
/// Largest trace entry (library entries with the largest option block).
pub const MAX_ENTRY: usize = 148;
/// Largest option block of a library entry (`MAX_ENTRY` − 21).
pub const MAX_OPTS: usize = MAX_ENTRY - 21;
/// Largest metadata body.
pub const MAX_META_BODY: usize = 4096;
/// Mask of the 48-bit address fields.
pub const ADDR_MASK: u64 = (1 << 48) - 1;
/// Mask of the 56-bit timestamp.
pub const TSC_MASK: u64 = (1 << 56) - 1;

/// The entry type byte.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// C function entry (`__cyg_profile_func_enter`): caller = call site, callee = function.
    FnEnter = 0x01,
    /// C function exit: callee = function.
    FnExit = 0x02,
    /// Python function call: caller = [`py_site`] of the calling frame, callee = code index.
    PyCall = 0x03,
    /// Python function return: callee = code index; aux = 1 if the frame was left by an
    /// exception, 2 if it was suspended (its greenlet switched out: python-hook's
    /// `greenlets.h`; it is called again, with the same site, when the greenlet resumes).
    PyReturn = 0x04,
    /// Python exception raised in a frame: caller = exception-type index, callee = code index.
    PyExc = 0x05,
    /// Call of a C function (builtin) from Python: caller = [`py_site`], callee = builtin index.
    PyCCall = 0x06,
    /// Return of a C function called from Python: callee = builtin index, aux = 1 if it
    /// raised, 2 if it was suspended (as for [`Kind::PyReturn`]).
    PyCReturn = 0x07,
    /// A wrapped libc function is about to be called (arguments in the options).
    LibEnter = 0x10,
    /// A wrapped libc function returned (result, errno and outputs in the options).
    LibExit = 0x11,
    /// In-band marker: `count` entries of this thread were dropped just before this point.
    Lost = 0x20,
    /// Metadata: process start or exec ([`ProcRecord`]).
    MetaProc = 0x30,
    /// Metadata: thread start ([`ThreadRecord`]).
    MetaThread = 0x31,
    /// Metadata: one executable mapping of the memory map ([`MapRecord`]).
    MetaMap = 0x32,
    /// Metadata: a Python code object, builtin or exception type ([`CodeRecord`]).
    MetaCode = 0x33,
    /// Metadata: a TSC / clock sample ([`ClockSample`]).
    MetaClock = 0x34,
    /// Metadata: a fault was injected ([`InjectRecord`]).
    MetaInject = 0x35,
    /// Metadata: function filters active in this process ([`FilterRecord`]).
    MetaFilter = 0x36,
}

impl Kind {
    /// Decodes a type byte.
    pub fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            0x01 => Kind::FnEnter,
            0x02 => Kind::FnExit,
            0x03 => Kind::PyCall,
            0x04 => Kind::PyReturn,
            0x05 => Kind::PyExc,
            0x06 => Kind::PyCCall,
            0x07 => Kind::PyCReturn,
            0x10 => Kind::LibEnter,
            0x11 => Kind::LibExit,
            0x20 => Kind::Lost,
            0x30 => Kind::MetaProc,
            0x31 => Kind::MetaThread,
            0x32 => Kind::MetaMap,
            0x33 => Kind::MetaCode,
            0x34 => Kind::MetaClock,
            0x35 => Kind::MetaInject,
            0x36 => Kind::MetaFilter,
            _ => return None,
        })
    }

    /// True for metadata records (length-prefixed body).
    pub fn is_meta(self) -> bool {
        (self as u8) >= 0x30
    }

    /// Entries with caller and callee (20 bytes).
    pub fn is_call_shaped(self) -> bool {
        matches!(
            self,
            Kind::FnEnter | Kind::PyCall | Kind::PyCCall | Kind::PyExc
        )
    }

    /// Entries with callee and aux (16 bytes).
    pub fn is_return_shaped(self) -> bool {
        matches!(self, Kind::FnExit | Kind::PyReturn | Kind::PyCReturn)
    }
}

/// Packs a Python call site: the calling code's index and the instruction offset
/// (in 2-byte code units, saturated at 0xffff) into the 48-bit caller field.
pub fn py_site(code_index: u32, instr_offset_units: u32) -> u64 {
    ((code_index as u64) << 16) | (instr_offset_units.min(0xffff) as u64)
}

/// Splits a Python call site into (code index, instruction offset in 2-byte units).
pub fn py_site_parts(site: u64) -> (u32, u32) {
    (((site & ADDR_MASK) >> 16) as u32, (site & 0xffff) as u32)
}

#[inline(always)]
pub(crate) fn head_word(kind: Kind, tsc: u64) -> u64 {
    (tsc << 8) | kind as u64
}
