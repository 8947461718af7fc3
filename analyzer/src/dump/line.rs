//! One entry of a thread, with what is needed to name it: the shared pieces of its text
//! and JSON renderings (`super::text`, `super::json`).

use super::symbols::Symbols;
use crate::error::Error;
use bufpool::format::{DecodeError, EntryRef, Kind, LibFn, LibOpts, Meta, ProcReason};
use bufpool::Calibration;
use reader::{Chunk, ThreadKey};

/// An entry's context: its thread, sub-buffer, clock and names.
pub(super) struct Line<'a> {
    pub(super) key: ThreadKey,
    pub(super) seq: u64,
    pub(super) calib: &'a Calibration,
    pub(super) syms: &'a Symbols<'a>,
    /// The chunk the entry is in (named by errors).
    pub(super) chunk: &'a Chunk,
}

impl Line<'_> {
    /// The name of what the entry is about: the function called or returned from, or
    /// the kind of entry.
    pub(super) fn name(&self, e: &EntryRef<'_>) -> String {
        match e.kind {
            Kind::FnEnter | Kind::FnExit => self.syms.c_name(e.callee),
            Kind::PyCall | Kind::PyReturn | Kind::PyCCall | Kind::PyCReturn | Kind::PyExc => {
                self.syms.py_name(e.callee)
            }
            Kind::LibEnter | Kind::LibExit => e
                .lib_fn()
                .map_or_else(|| format!("lib#{}", e.callee), |f| f.name().to_string()),
            k => kind_name(k).to_string(),
        }
    }

    /// The options of a library entry, a decode error naming the chunk file.
    pub(super) fn opts(&self, e: &EntryRef<'_>) -> Result<LibOpts, Error> {
        e.opts().map_err(|source| self.error(source))
    }

    /// The metadata record of a metadata entry, a decode error naming the chunk file.
    pub(super) fn meta(&self, e: &EntryRef<'_>) -> Result<Option<Meta>, Error> {
        e.meta().map_err(|source| self.error(source))
    }

    fn error(&self, source: DecodeError) -> Error {
        Error::Decode {
            path: self.chunk.path.to_path_buf(),
            source,
        }
    }
}

/// The name of an entry kind in `culprit dump` (`kind` of its JSON).
pub(super) fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::FnEnter => "fn_enter",
        Kind::FnExit => "fn_exit",
        Kind::PyCall => "py_call",
        Kind::PyReturn => "py_return",
        Kind::PyExc => "py_exception",
        Kind::PyCCall => "py_ccall",
        Kind::PyCReturn => "py_creturn",
        Kind::LibEnter => "lib_enter",
        Kind::LibExit => "lib_exit",
        Kind::Lost => "lost",
        Kind::MetaProc => "meta_proc",
        Kind::MetaThread => "meta_thread",
        Kind::MetaMap => "meta_map",
        Kind::MetaCode => "meta_code",
        Kind::MetaClock => "meta_clock",
        Kind::MetaInject => "meta_inject",
        Kind::MetaFilter => "meta_filter",
    }
}

pub(super) fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Bytes actually moved by a send or receive that returned `ret`.
pub(super) fn moved_bytes(f: LibFn, o: &LibOpts) -> Option<u64> {
    if f.is_send() || f.is_receive() {
        o.ret.filter(|&r| r >= 0).map(|r| r as u64)
    } else {
        None
    }
}

/// Why a process record was written.
pub(super) fn reason(r: ProcReason) -> &'static str {
    match r {
        ProcReason::Start => "start",
        ProcReason::Fork => "fork",
        ProcReason::Exec => "exec",
    }
}
