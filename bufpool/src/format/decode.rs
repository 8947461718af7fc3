//! Reading entries back. The decoder never panics: truncated or corrupt input yields a
//! [`DecodeError`] naming the offset of the bad entry, and decoding stops there.

use super::{Kind, LibFn, LibOpts, Meta, ADDR_MASK, MAX_META_BODY, MAX_OPTS, TSC_MASK};

/// What is wrong with an entry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    /// The type byte is not a known [`Kind`].
    #[error("unknown entry type 0x{0:02x}")]
    UnknownKind(u8),
    /// The entry runs past the end of the data.
    #[error("entry truncated: needs {need} bytes, {have} left")]
    Truncated {
        /// Bytes the entry needs.
        need: usize,
        /// Bytes left.
        have: usize,
    },
    /// A library entry names an unknown function id.
    #[error("unknown library function id {0}")]
    UnknownLibFn(u64),
    /// A length field is out of range.
    #[error("invalid length {0}")]
    BadLength(usize),
    /// An option block or metadata body is malformed.
    #[error("malformed {what} at +{at}: {msg}")]
    Malformed {
        /// "option block" or "metadata record".
        what: &'static str,
        /// Offset inside the block.
        at: usize,
        /// What is wrong.
        msg: &'static str,
    },
}

/// A decode error at a byte offset of the decoded buffer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("at byte offset {offset}: {kind}")]
pub struct DecodeError {
    /// Offset of the entry's first byte (relative to the decoded buffer plus the base
    /// offset given to [`Decoder::with_base`]).
    pub offset: u64,
    /// What is wrong.
    pub kind: DecodeErrorKind,
}

/// A borrowed view of one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryRef<'a> {
    /// Offset of the entry in the decoded data (plus the base).
    pub offset: u64,
    /// Entry type.
    pub kind: Kind,
    /// 56-bit TSC.
    pub tsc: u64,
    /// Caller / call site (0 for return-shaped entries, metadata and lost markers).
    pub caller: u64,
    /// Callee: function address, Python index, or [`LibFn`] id.
    pub callee: u64,
    /// Aux field of return-shaped entries; 0 elsewhere.
    pub aux: u16,
    /// Lost count of a `Lost` marker; 0 elsewhere.
    pub lost: u64,
    /// Option block of library entries, body of metadata records; empty elsewhere.
    pub body: &'a [u8],
    /// Total encoded size.
    pub size: usize,
}

impl EntryRef<'_> {
    /// The library function of a `LibEnter`/`LibExit` entry.
    pub fn lib_fn(&self) -> Option<LibFn> {
        match self.kind {
            Kind::LibEnter | Kind::LibExit => LibFn::from_id(self.callee),
            _ => None,
        }
    }

    /// Parsed options of a library entry (empty options for other kinds).
    pub fn opts(&self) -> Result<LibOpts, DecodeError> {
        if !matches!(self.kind, Kind::LibEnter | Kind::LibExit) {
            return Ok(LibOpts::default());
        }
        LibOpts::parse(self.body).map_err(|(at, msg)| DecodeError {
            offset: self.offset,
            kind: DecodeErrorKind::Malformed {
                what: "option block",
                at,
                msg,
            },
        })
    }

    /// Parsed metadata record.
    pub fn meta(&self) -> Result<Option<Meta>, DecodeError> {
        if !self.kind.is_meta() {
            return Ok(None);
        }
        Meta::parse(self.kind, self.body)
            .map(Some)
            .map_err(|(at, msg)| DecodeError {
                offset: self.offset,
                kind: DecodeErrorKind::Malformed {
                    what: "metadata record",
                    at,
                    msg,
                },
            })
    }

    /// Checks what a tool parses of the entry besides its fixed fields: the option block
    /// of a library entry (read as scalars, or parsed whole when it holds more) and the
    /// body of a metadata record. An entry that passes is one every tool can use; one that
    /// fails is undecodable, as if the [`Decoder`] had refused it.
    pub fn check(&self) -> Result<(), DecodeError> {
        match self.kind {
            Kind::LibEnter | Kind::LibExit => {
                if super::ScalarOpts::parse(self.body).is_none() {
                    self.opts()?;
                }
                Ok(())
            }
            k if k.is_meta() => self.meta().map(|_| ()),
            _ => Ok(()),
        }
    }

    /// Converts to an owned [`Entry`] (parsing options and metadata).
    pub fn to_owned(&self) -> Result<Entry, DecodeError> {
        Ok(match self.kind {
            k if k.is_call_shaped() => Entry::Fn {
                kind: k,
                tsc: self.tsc,
                caller: self.caller,
                callee: self.callee,
            },
            k if k.is_return_shaped() => Entry::Ret {
                kind: k,
                tsc: self.tsc,
                callee: self.callee,
                aux: self.aux,
            },
            Kind::LibEnter | Kind::LibExit => Entry::Lib {
                kind: self.kind,
                tsc: self.tsc,
                caller: self.caller,
                func: self.lib_fn().ok_or(DecodeError {
                    offset: self.offset,
                    kind: DecodeErrorKind::UnknownLibFn(self.callee),
                })?,
                opts: Box::new(self.opts()?),
            },
            Kind::Lost => Entry::Lost {
                tsc: self.tsc,
                count: self.lost,
            },
            _ => Entry::Meta {
                tsc: self.tsc,
                meta: self.meta()?.unwrap_or_else(unreachable_meta),
            },
        })
    }
}

#[cold]
fn unreachable_meta() -> Meta {
    // Only reached if `Kind::is_meta` and `Meta::parse` disagree, which a unit test rules out.
    Meta::Clock(super::ClockSample {
        tsc: 0,
        realtime_ns: 0,
        monotonic_ns: 0,
    })
}

/// An owned, fully parsed entry (tests, tools; the analyzer works on [`EntryRef`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// Call-shaped entry.
    Fn {
        /// Kind.
        kind: Kind,
        /// TSC.
        tsc: u64,
        /// Caller.
        caller: u64,
        /// Callee.
        callee: u64,
    },
    /// Return-shaped entry.
    Ret {
        /// Kind.
        kind: Kind,
        /// TSC.
        tsc: u64,
        /// Callee.
        callee: u64,
        /// Aux.
        aux: u16,
    },
    /// Library entry.
    Lib {
        /// `LibEnter` or `LibExit`.
        kind: Kind,
        /// TSC.
        tsc: u64,
        /// Call site.
        caller: u64,
        /// Function.
        func: LibFn,
        /// Options.
        opts: Box<LibOpts>,
    },
    /// Lost marker.
    Lost {
        /// TSC.
        tsc: u64,
        /// Entries lost.
        count: u64,
    },
    /// Metadata.
    Meta {
        /// TSC.
        tsc: u64,
        /// Record.
        meta: Meta,
    },
}

/// Iterates over the entries of a byte slice. After the first error it yields nothing.
#[derive(Clone, Debug)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
    failed: bool,
}

impl<'a> Decoder<'a> {
    /// A decoder over `buf`, with offsets relative to its start.
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder {
            buf,
            pos: 0,
            base: 0,
            failed: false,
        }
    }

    /// A decoder whose reported offsets are `base + position in buf` (e.g. a file offset).
    pub fn with_base(buf: &'a [u8], base: u64) -> Self {
        Decoder {
            buf,
            pos: 0,
            base,
            failed: false,
        }
    }

    /// Position of the next entry in `buf`.
    pub fn position(&self) -> usize {
        self.pos
    }

    fn err(&mut self, kind: DecodeErrorKind) -> Option<Result<EntryRef<'a>, DecodeError>> {
        self.failed = true;
        Some(Err(DecodeError {
            offset: self.base + self.pos as u64,
            kind,
        }))
    }

    #[inline]
    fn u48(&self, at: usize) -> u64 {
        let mut w = [0u8; 8];
        w[..6].copy_from_slice(&self.buf[at..at + 6]);
        u64::from_le_bytes(w) & ADDR_MASK
    }
}

impl<'a> Iterator for Decoder<'a> {
    type Item = Result<EntryRef<'a>, DecodeError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let p = self.pos;
        let have = self.buf.len() - p;
        let trunc = |need| DecodeErrorKind::Truncated { need, have };
        if have < 8 {
            return self.err(trunc(8));
        }
        let head = u64::from_le_bytes(self.buf[p..p + 8].try_into().unwrap_or([0; 8]));
        let Some(kind) = Kind::from_u8(head as u8) else {
            return self.err(DecodeErrorKind::UnknownKind(head as u8));
        };
        let mut e = EntryRef {
            offset: self.base + p as u64,
            kind,
            tsc: (head >> 8) & TSC_MASK,
            caller: 0,
            callee: 0,
            aux: 0,
            lost: 0,
            body: &[],
            size: 0,
        };
        let size = if kind.is_call_shaped() {
            if have < 20 {
                return self.err(trunc(20));
            }
            e.caller = self.u48(p + 8);
            e.callee = self.u48(p + 14);
            20
        } else if kind.is_return_shaped() {
            if have < 16 {
                return self.err(trunc(16));
            }
            e.callee = self.u48(p + 8);
            e.aux = u16::from_le_bytes([self.buf[p + 14], self.buf[p + 15]]);
            16
        } else if matches!(kind, Kind::LibEnter | Kind::LibExit) {
            if have < 21 {
                return self.err(trunc(21));
            }
            let n = self.buf[p + 20] as usize;
            if n > MAX_OPTS {
                return self.err(DecodeErrorKind::BadLength(n));
            }
            if have < 21 + n {
                return self.err(trunc(21 + n));
            }
            e.caller = self.u48(p + 8);
            e.callee = self.u48(p + 14);
            if LibFn::from_id(e.callee).is_none() {
                return self.err(DecodeErrorKind::UnknownLibFn(e.callee));
            }
            e.body = &self.buf[p + 21..p + 21 + n];
            21 + n
        } else if kind == Kind::Lost {
            if have < 16 {
                return self.err(trunc(16));
            }
            e.lost = u64::from_le_bytes(self.buf[p + 8..p + 16].try_into().unwrap_or([0; 8]));
            16
        } else {
            if have < 10 {
                return self.err(trunc(10));
            }
            let n = u16::from_le_bytes([self.buf[p + 8], self.buf[p + 9]]) as usize;
            if n > MAX_META_BODY {
                return self.err(DecodeErrorKind::BadLength(n));
            }
            if have < 10 + n {
                return self.err(trunc(10 + n));
            }
            e.body = &self.buf[p + 10..p + 10 + n];
            10 + n
        };
        e.size = size;
        self.pos += size;
        Some(Ok(e))
    }
}

/// A sub-buffer header's `lost_before` that its data does not carry in a leading `Lost`
/// entry (FORMAT.md §2: the two hold the same count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "its header counts {header} entries lost before it, but its first entry {}",
    match marker { Some(n) => format!("counts {n}"), None => "is no `Lost` marker".to_string() }
)]
pub struct LostMismatch {
    /// The header's `lost_before`.
    pub header: u64,
    /// The count of the leading `Lost` entry, if the data starts with one.
    pub marker: Option<u64>,
}

/// The entries lost before a sub-buffer that its data does not count itself, from its
/// header's `lost_before` and its `data` (FORMAT.md §2: a writer that dropped entries
/// writes the count twice, in `lost_before` and in a `Lost` entry that starts the data;
/// count one). A tool counts the `Lost` entries of the data, plus this:
///
/// - 0 when `lost_before` is 0, or when the leading `Lost` entry carries the same count;
/// - `lost_before` when the data is empty (the writer died before it committed the
///   marker: the header is all that says it);
/// - a [`LostMismatch`] when the header and the data disagree (the data's markers are
///   counted, the header is not).
pub fn header_lost(lost_before: u64, data: &[u8]) -> Result<u64, LostMismatch> {
    if lost_before == 0 {
        return Ok(0);
    }
    if data.is_empty() {
        return Ok(lost_before);
    }
    let marker = match Decoder::new(data).next() {
        Some(Ok(e)) if e.kind == Kind::Lost => Some(e.lost),
        _ => None,
    };
    if marker == Some(lost_before) {
        Ok(0)
    } else {
        Err(LostMismatch {
            header: lost_before,
            marker,
        })
    }
}

/// Decodes every entry of `buf` into owned entries, stopping at the first error.
pub fn decode_all(buf: &[u8]) -> Result<Vec<Entry>, DecodeError> {
    Decoder::new(buf)
        .map(|r| r.and_then(|e| e.to_owned()))
        .collect()
}
