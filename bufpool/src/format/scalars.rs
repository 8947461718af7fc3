//! The scalar options of a library entry, and the fast, allocation-free paths that read and
//! write them.
//!
//! Nine of the fifteen option tags carry a fixed-size number ([`OptTag::Fd`] … [`OptTag::Arg2`],
//! [`OptTag::Inject`], [`OptTag::IsSocket`]): what almost every hot-path call records.
//! [`ScalarOpts`] holds them in a few dozen bytes (a [`LibOpts`] is ~400, with buffers for
//! addresses, stacks and strings). The tracer encodes it straight into an entry
//! ([`ScalarOpts::encode_into`], byte-identical to [`LibOpts::encode`]) and the analyzer
//! reads it back without building a [`LibOpts`] ([`ScalarOpts::parse_into`]), falling back
//! to [`LibOpts::parse`] — the checking parser — for any block it does not take. The fuzz
//! target `bufpool/fuzz/fuzz_targets/decode.rs` and the property tests check that the two
//! parsers agree on every block the fast one takes.

use super::options::{LibOpts, OptTag, MAX_READY_ITEMS, MAX_STR};

/// The scalar options of a library entry. Absent fields are `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScalarOpts {
    /// See [`OptTag::Fd`].
    pub fd: Option<i32>,
    /// See [`OptTag::Fd2`].
    pub fd2: Option<i32>,
    /// See [`OptTag::Len`].
    pub len: Option<u64>,
    /// See [`OptTag::Ret`].
    pub ret: Option<i64>,
    /// See [`OptTag::Errno`].
    pub errno: Option<i32>,
    /// See [`OptTag::Flags`].
    pub flags: Option<u32>,
    /// See [`OptTag::Arg`].
    pub arg: Option<u64>,
    /// See [`OptTag::Arg2`].
    pub arg2: Option<u64>,
    /// See [`OptTag::Inject`].
    pub inject: Option<u32>,
    /// See [`OptTag::IsSocket`].
    pub is_socket: Option<bool>,
}

/// Most bytes [`ScalarOpts::encode_into`] writes (every option present): always less than
/// [`MAX_OPTS`](super::MAX_OPTS), so scalars are never cut from a block.
pub const MAX_SCALAR_BYTES: usize = 6 * 5 + 4 * 9 + 2;

const FD: u8 = OptTag::Fd as u8;
const FD2: u8 = OptTag::Fd2 as u8;
const LEN: u8 = OptTag::Len as u8;
const RET: u8 = OptTag::Ret as u8;
const ERRNO: u8 = OptTag::Errno as u8;
const FLAGS: u8 = OptTag::Flags as u8;
const READY: u8 = OptTag::Ready as u8;
const STACK: u8 = OptTag::Stack as u8;
const STR: u8 = OptTag::Str as u8;
const ARG: u8 = OptTag::Arg as u8;
const ARG2: u8 = OptTag::Arg2 as u8;
const INJECT: u8 = OptTag::Inject as u8;
const IS_SOCKET: u8 = OptTag::IsSocket as u8;

#[inline(always)]
fn u32_at(a: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([a[i], a[i + 1], a[i + 2], a[i + 3]])
}

#[inline(always)]
fn u64_at(a: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&a[i..i + 8]);
    u64::from_le_bytes(w)
}

impl ScalarOpts {
    /// Options with just a descriptor.
    #[inline(always)]
    pub fn fd(fd: i32) -> ScalarOpts {
        ScalarOpts {
            fd: Some(fd),
            ..ScalarOpts::default()
        }
    }

    /// The scalar options of full ones.
    pub fn of(o: &LibOpts) -> ScalarOpts {
        ScalarOpts {
            fd: o.fd,
            fd2: o.fd2,
            len: o.len,
            ret: o.ret,
            errno: o.errno,
            flags: o.flags,
            arg: o.arg,
            arg2: o.arg2,
            inject: o.inject,
            is_socket: o.is_socket,
        }
    }

    /// Writes the options present, in tag order — the order and bytes of
    /// [`LibOpts::encode`] —, into `out` from `pos`; returns the position after them. `out`
    /// needs [`MAX_SCALAR_BYTES`] bytes from `pos` (it panics otherwise).
    #[inline(always)]
    pub fn encode_into(&self, out: &mut [u8], pos: usize) -> usize {
        let mut p = pos;
        let mut put = |tag: u8, payload: &[u8]| {
            out[p] = tag;
            out[p + 1..p + 1 + payload.len()].copy_from_slice(payload);
            p += 1 + payload.len();
        };
        if let Some(v) = self.fd {
            put(FD, &v.to_le_bytes());
        }
        if let Some(v) = self.fd2 {
            put(FD2, &v.to_le_bytes());
        }
        if let Some(v) = self.len {
            put(LEN, &v.to_le_bytes());
        }
        if let Some(v) = self.ret {
            put(RET, &v.to_le_bytes());
        }
        if let Some(v) = self.errno {
            put(ERRNO, &v.to_le_bytes());
        }
        if let Some(v) = self.flags {
            put(FLAGS, &v.to_le_bytes());
        }
        if let Some(v) = self.arg {
            put(ARG, &v.to_le_bytes());
        }
        if let Some(v) = self.arg2 {
            put(ARG2, &v.to_le_bytes());
        }
        if let Some(v) = self.inject {
            put(INJECT, &v.to_le_bytes());
        }
        if let Some(v) = self.is_socket {
            put(IS_SOCKET, &[v as u8]);
        }
        p
    }

    /// Reads the scalar options of an option block; `None` if the block has an address,
    /// a call stack (with frames), an unknown tag or is malformed — the caller then parses it with
    /// [`LibOpts::parse`]. A ready set and a string are checked and skipped.
    #[inline(always)]
    pub fn parse(block: &[u8]) -> Option<ScalarOpts> {
        let mut o = ScalarOpts::default();
        o.parse_into(block).then_some(o)
    }

    /// [`ScalarOpts::parse`] in place: sets the options the block has (the last of a
    /// repeated one wins, as with [`LibOpts::parse`]), leaving the others as they are.
    /// False if the block has anything [`ScalarOpts::parse`] does not take; some options
    /// may have been set then. Allocation-free; the layouts the tracer writes most
    /// (descriptor and length: the entries of reads and sends; the same and the result:
    /// their exits; a length alone) are read whole.
    #[inline(always)]
    pub fn parse_into(&mut self, b: &[u8]) -> bool {
        let o = self;
        if let Ok(a) = <&[u8; 14]>::try_from(b) {
            if a[0] == FD && a[5] == LEN {
                o.fd = Some(u32_at(a, 1) as i32);
                o.len = Some(u64_at(a, 6));
                return true;
            }
        } else if let Ok(a) = <&[u8; 23]>::try_from(b) {
            if a[0] == FD && a[5] == LEN && a[14] == RET {
                o.fd = Some(u32_at(a, 1) as i32);
                o.len = Some(u64_at(a, 6));
                o.ret = Some(u64_at(a, 15) as i64);
                return true;
            }
        } else if let Ok(a) = <&[u8; 9]>::try_from(b) {
            if a[0] == LEN {
                o.len = Some(u64_at(a, 1));
                return true;
            }
        }
        let mut p = 0usize;
        let get = |p: usize, n: usize| b.get(p..p + n);
        while p < b.len() {
            let tag = b[p];
            p += 1;
            match tag {
                FD | FD2 | ERRNO | FLAGS | INJECT => {
                    let Some(v) = get(p, 4) else { return false };
                    let v = u32_at(v, 0);
                    p += 4;
                    match tag {
                        FD => o.fd = Some(v as i32),
                        FD2 => o.fd2 = Some(v as i32),
                        ERRNO => o.errno = Some(v as i32),
                        FLAGS => o.flags = Some(v),
                        _ => o.inject = Some(v),
                    }
                }
                LEN | RET | ARG | ARG2 => {
                    let Some(v) = get(p, 8) else { return false };
                    let v = u64_at(v, 0);
                    p += 8;
                    match tag {
                        LEN => o.len = Some(v),
                        RET => o.ret = Some(v as i64),
                        ARG => o.arg = Some(v),
                        _ => o.arg2 = Some(v),
                    }
                }
                IS_SOCKET => {
                    let Some(&v) = b.get(p) else { return false };
                    if v > 1 {
                        return false;
                    }
                    o.is_socket = Some(v == 1);
                    p += 1;
                }
                READY => {
                    // flags, n, n × (u32 id, u16 events): checked, not kept.
                    let Some(h) = get(p, 2) else { return false };
                    if h[0] > 1 || h[1] as usize > MAX_READY_ITEMS {
                        return false;
                    }
                    let n = 2 + h[1] as usize * 6;
                    if p + n > b.len() {
                        return false;
                    }
                    p += n;
                }
                STACK => {
                    // An empty call stack (as good as none); one with frames is refused.
                    if b.get(p) != Some(&0) {
                        return false;
                    }
                    p += 1;
                }
                STR => {
                    // len, bytes: checked, not kept.
                    let Some(&n) = b.get(p) else { return false };
                    let n = n as usize;
                    if n > MAX_STR || p + 1 + n > b.len() {
                        return false;
                    }
                    p += 1 + n;
                }
                _ => return false,
            }
        }
        true
    }
}

impl From<ScalarOpts> for LibOpts {
    /// Full options with these scalars and nothing else.
    fn from(s: ScalarOpts) -> LibOpts {
        LibOpts {
            fd: s.fd,
            fd2: s.fd2,
            len: s.len,
            ret: s.ret,
            errno: s.errno,
            flags: s.flags,
            arg: s.arg,
            arg2: s.arg2,
            inject: s.inject,
            is_socket: s.is_socket,
            ..LibOpts::default()
        }
    }
}
