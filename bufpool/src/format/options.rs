//! Optional fields of library-call entries: a compact tag–value list.
//!
//! The option block of a `LibEnter`/`LibExit` entry is at most [`MAX_OPTS`] bytes. Each
//! option is a tag byte ([`OptTag`]) followed by a payload whose size the tag fixes or
//! whose first byte gives. Unknown tags are a decode error (the block cannot be skipped
//! safely otherwise); new tags are appended with a format version bump.
//!
//! Encoding writes into a fixed stack buffer and never allocates; parsing fills a
//! fixed-size [`LibOpts`] and never allocates either.

use super::scalars::ScalarOpts;
use super::MAX_OPTS;

/// Most ready-set items an entry carries; the rest is counted and flagged as truncated.
pub const MAX_READY_ITEMS: usize = 16;
/// Most return addresses in a recorded native call stack.
pub const MAX_STACK: usize = 8;
/// Most bytes kept of a socket address payload (a UNIX path is truncated to this).
pub const MAX_ADDR_BYTES: usize = 108;
/// Most bytes kept of a string option.
pub const MAX_STR: usize = 96;

/// Option tags.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptTag {
    /// `i32`: the file descriptor argument.
    Fd = 0x01,
    /// `i32`: a second descriptor (the `dup2`/`dup3` target, the second end of `socketpair`).
    Fd2 = 0x02,
    /// `u64`: requested byte count (sum of the iovec for vector calls).
    Len = 0x03,
    /// `i64`: the return value.
    Ret = 0x04,
    /// `i32`: errno after a failed call.
    Errno = 0x05,
    /// `u32`: flags argument (send/recv flags, socket type, fcntl/epoll_ctl op, how…).
    Flags = 0x06,
    /// Address: the local address of the socket (see [`Addr`]).
    Local = 0x07,
    /// Address: the peer address of the socket.
    Peer = 0x08,
    /// Ready set returned by a multiplexer (see [`ReadySet`]).
    Ready = 0x09,
    /// `u8 n` then `n` 48-bit return addresses: a short native call stack.
    Stack = 0x0a,
    /// `u8 len` then `len` bytes: a string (exec path), truncated to `MAX_STR` bytes.
    Str = 0x0b,
    /// `u64`: an extra argument (epoll_ctl data, socket domain, fcntl argument, timeout…).
    Arg = 0x0c,
    /// `u64`: a second extra argument.
    Arg2 = 0x0d,
    /// `u32`: id of the fault-injection rule that changed this call's result.
    Inject = 0x0e,
    /// `u8`: 1 if the fd is a socket (recorded on `read`/`write`/`close` style calls).
    IsSocket = 0x0f,
}

impl OptTag {
    fn from_u8(b: u8) -> Option<OptTag> {
        Some(match b {
            0x01 => OptTag::Fd,
            0x02 => OptTag::Fd2,
            0x03 => OptTag::Len,
            0x04 => OptTag::Ret,
            0x05 => OptTag::Errno,
            0x06 => OptTag::Flags,
            0x07 => OptTag::Local,
            0x08 => OptTag::Peer,
            0x09 => OptTag::Ready,
            0x0a => OptTag::Stack,
            0x0b => OptTag::Str,
            0x0c => OptTag::Arg,
            0x0d => OptTag::Arg2,
            0x0e => OptTag::Inject,
            0x0f => OptTag::IsSocket,
            _ => return None,
        })
    }
}

/// A socket address, normalized: family, port (host order) and address bytes
/// (4 for IPv4, 16 for IPv6, the path for UNIX sockets — leading NUL for abstract ones —,
/// raw bytes for other families).
///
/// Encoded as `u8 len, u16 family, u16 port, len-4 bytes`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Addr {
    /// `AF_*` value.
    pub family: u16,
    /// Port in host byte order (0 where the family has none).
    pub port: u16,
    len: u8,
    bytes: [u8; MAX_ADDR_BYTES],
}

impl Addr {
    /// An address from its parts; `bytes` is truncated to `MAX_ADDR_BYTES` bytes.
    pub fn new(family: u16, port: u16, bytes: &[u8]) -> Addr {
        let n = bytes.len().min(MAX_ADDR_BYTES);
        let mut b = [0u8; MAX_ADDR_BYTES];
        b[..n].copy_from_slice(&bytes[..n]);
        Addr {
            family,
            port,
            len: n as u8,
            bytes: b,
        }
    }

    /// The address bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Human form: `127.0.0.1:7000`, `[::1]:7000`, `unix:/path`, `unix:@abstract`.
    pub fn to_display(&self) -> String {
        const AF_UNIX: u16 = 1;
        const AF_INET: u16 = 2;
        const AF_INET6: u16 = 10;
        let b = self.bytes();
        match self.family {
            AF_INET if b.len() == 4 => format!("{}.{}.{}.{}:{}", b[0], b[1], b[2], b[3], self.port),
            AF_INET6 if b.len() == 16 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(b);
                format!("[{}]:{}", std::net::Ipv6Addr::from(a), self.port)
            }
            AF_UNIX => {
                if b.is_empty() {
                    "unix:(unnamed)".to_string()
                } else if b[0] == 0 {
                    format!("unix:@{}", String::from_utf8_lossy(&b[1..]))
                } else {
                    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                    format!("unix:{}", String::from_utf8_lossy(&b[..end]))
                }
            }
            f => format!("af{}:{:02x?}", f, b),
        }
    }
}

impl std::fmt::Debug for Addr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_display())
    }
}

/// One ready descriptor: `id` is the fd for `select`/`poll`, and the low 32 bits of
/// `epoll_data` for `epoll_*` (map it to an fd through the `epoll_ctl` entries).
/// `events` holds the poll/epoll event bits (low 16); for `select`: 1 read, 4 write, 2 except.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadyItem {
    /// The fd or epoll data.
    pub id: u32,
    /// Event bits.
    pub events: u16,
}

/// The ready set of a multiplexer: at most [`MAX_READY_ITEMS`] items, `truncated` when
/// more were ready than fit. Encoded as `u8 flags (bit 0 = truncated), u8 n, n × (u32, u16)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadySet {
    /// More items were ready than recorded.
    pub truncated: bool,
    len: u8,
    items: [ReadyItem; MAX_READY_ITEMS],
}

impl ReadySet {
    /// Adds an item; sets `truncated` when full.
    pub fn push(&mut self, item: ReadyItem) {
        if (self.len as usize) < MAX_READY_ITEMS {
            self.items[self.len as usize] = item;
            self.len += 1;
        } else {
            self.truncated = true;
        }
    }

    /// The recorded items.
    pub fn items(&self) -> &[ReadyItem] {
        &self.items[..self.len as usize]
    }
}

/// The options of one library entry, parsed (or to be encoded). Absent fields are `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LibOpts {
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
    /// See [`OptTag::Local`].
    pub local: Option<Addr>,
    /// See [`OptTag::Peer`].
    pub peer: Option<Addr>,
    /// See [`OptTag::Ready`].
    pub ready: Option<ReadySet>,
    /// See [`OptTag::Stack`]: `stack[..stack_len]`.
    pub stack: [u64; MAX_STACK],
    /// Number of valid frames in `stack`.
    pub stack_len: u8,
    /// See [`OptTag::Str`]: `str_buf[..str_len]`.
    pub str_buf: [u8; MAX_STR],
    /// Length of the string option, if any (`None` when absent).
    pub str_len: Option<u8>,
    /// See [`OptTag::Arg`].
    pub arg: Option<u64>,
    /// See [`OptTag::Arg2`].
    pub arg2: Option<u64>,
    /// See [`OptTag::Inject`].
    pub inject: Option<u32>,
    /// See [`OptTag::IsSocket`].
    pub is_socket: Option<bool>,
}

impl Default for LibOpts {
    fn default() -> Self {
        LibOpts {
            fd: None,
            fd2: None,
            len: None,
            ret: None,
            errno: None,
            flags: None,
            local: None,
            peer: None,
            ready: None,
            stack: [0; MAX_STACK],
            stack_len: 0,
            str_buf: [0; MAX_STR],
            str_len: None,
            arg: None,
            arg2: None,
            inject: None,
            is_socket: None,
        }
    }
}

impl LibOpts {
    /// The recorded call stack.
    pub fn stack(&self) -> &[u64] {
        &self.stack[..self.stack_len as usize]
    }

    /// The string option.
    pub fn str_bytes(&self) -> Option<&[u8]> {
        self.str_len.map(|n| &self.str_buf[..n as usize])
    }

    /// Sets the call stack (truncated to [`MAX_STACK`]).
    pub fn set_stack(&mut self, frames: &[u64]) {
        let n = frames.len().min(MAX_STACK);
        self.stack[..n].copy_from_slice(&frames[..n]);
        self.stack_len = n as u8;
    }

    /// Sets the string option (truncated to `MAX_STR` bytes).
    pub fn set_str(&mut self, s: &[u8]) {
        let n = s.len().min(MAX_STR);
        self.str_buf[..n].copy_from_slice(&s[..n]);
        self.str_len = Some(n as u8);
    }

    /// Encodes into `out` (at most [`MAX_OPTS`] bytes); returns the length written.
    /// Options are written in a fixed priority order (fixed-size ones first, then ready
    /// set, addresses, stack, string); variable-size ones are shortened to the room left
    /// and one that does not fit at all is left out, so the important small ones (fd,
    /// ret, errno, len) are always kept. Everything is kept when it fits in [`MAX_OPTS`].
    pub fn encode(&self, out: &mut [u8; MAX_OPTS]) -> usize {
        // The scalars first (they always fit), then the variable-size options.
        let pos = ScalarOpts::of(self).encode_into(&mut out[..], 0);
        let mut w = OptWriter { out, pos };
        if let Some(r) = &self.ready {
            let mut tmp = [0u8; 2 + MAX_READY_ITEMS * 6];
            // Keep as many items as the remaining space allows; flag the rest.
            let room = w.room().saturating_sub(2) / 6;
            let n = r.items().len().min(room);
            tmp[0] = (r.truncated || n < r.items().len()) as u8;
            tmp[1] = n as u8;
            for (i, it) in r.items()[..n].iter().enumerate() {
                tmp[2 + i * 6..6 + i * 6].copy_from_slice(&it.id.to_le_bytes());
                tmp[6 + i * 6..8 + i * 6].copy_from_slice(&it.events.to_le_bytes());
            }
            w.put(OptTag::Ready, &tmp[..2 + n * 6]);
        }
        for (tag, a) in [(OptTag::Local, &self.local), (OptTag::Peer, &self.peer)] {
            if let Some(a) = a {
                let mut tmp = [0u8; 5 + MAX_ADDR_BYTES];
                let n = a.bytes().len().min(w.room().saturating_sub(5));
                tmp[0] = (4 + n) as u8;
                tmp[1..3].copy_from_slice(&a.family.to_le_bytes());
                tmp[3..5].copy_from_slice(&a.port.to_le_bytes());
                tmp[5..5 + n].copy_from_slice(&a.bytes()[..n]);
                w.put(tag, &tmp[..5 + n]);
            }
        }
        if self.stack_len > 0 {
            let n = (self.stack_len as usize).min(w.room().saturating_sub(1) / 6);
            let mut tmp = [0u8; 1 + MAX_STACK * 6];
            tmp[0] = n as u8;
            for (i, f) in self.stack[..n].iter().enumerate() {
                tmp[1 + i * 6..7 + i * 6].copy_from_slice(&f.to_le_bytes()[..6]);
            }
            if n > 0 {
                w.put(OptTag::Stack, &tmp[..1 + n * 6]);
            }
        }
        if let Some(s) = self.str_bytes() {
            let n = s.len().min(w.room().saturating_sub(1));
            let mut tmp = [0u8; 1 + MAX_STR];
            tmp[0] = n as u8;
            tmp[1..1 + n].copy_from_slice(&s[..n]);
            w.put(OptTag::Str, &tmp[..1 + n]);
        }
        w.pos
    }

    /// Parses an option block. Errors name the offset inside the block.
    pub fn parse(block: &[u8]) -> Result<LibOpts, (usize, &'static str)> {
        let mut o = LibOpts::default();
        let mut p = 0usize;
        let take = |p: &mut usize, n: usize| -> Result<&[u8], (usize, &'static str)> {
            if *p + n > block.len() {
                return Err((*p, "option runs past the end of its block"));
            }
            let s = &block[*p..*p + n];
            *p += n;
            Ok(s)
        };
        while p < block.len() {
            let at = p;
            let tag = OptTag::from_u8(block[p]).ok_or((at, "unknown option tag"))?;
            p += 1;
            match tag {
                OptTag::Fd => o.fd = Some(i32::from_le_bytes(arr(take(&mut p, 4)?))),
                OptTag::Fd2 => o.fd2 = Some(i32::from_le_bytes(arr(take(&mut p, 4)?))),
                OptTag::Len => o.len = Some(u64::from_le_bytes(arr(take(&mut p, 8)?))),
                OptTag::Ret => o.ret = Some(i64::from_le_bytes(arr(take(&mut p, 8)?))),
                OptTag::Errno => o.errno = Some(i32::from_le_bytes(arr(take(&mut p, 4)?))),
                OptTag::Flags => o.flags = Some(u32::from_le_bytes(arr(take(&mut p, 4)?))),
                OptTag::Arg => o.arg = Some(u64::from_le_bytes(arr(take(&mut p, 8)?))),
                OptTag::Arg2 => o.arg2 = Some(u64::from_le_bytes(arr(take(&mut p, 8)?))),
                OptTag::Inject => o.inject = Some(u32::from_le_bytes(arr(take(&mut p, 4)?))),
                OptTag::IsSocket => {
                    let b = take(&mut p, 1)?[0];
                    if b > 1 {
                        return Err((at, "is-socket option is not 0 or 1"));
                    }
                    o.is_socket = Some(b == 1);
                }
                OptTag::Ready => {
                    let h = take(&mut p, 2)?;
                    let (flags, n) = (h[0], h[1] as usize);
                    if n > MAX_READY_ITEMS || flags > 1 {
                        return Err((at, "ready set header is invalid"));
                    }
                    let body = take(&mut p, n * 6)?;
                    let mut r = ReadySet {
                        truncated: flags & 1 == 1,
                        ..Default::default()
                    };
                    for c in body.chunks_exact(6) {
                        r.push(ReadyItem {
                            id: u32::from_le_bytes(arr(&c[..4])),
                            events: u16::from_le_bytes(arr(&c[4..6])),
                        });
                    }
                    o.ready = Some(r);
                }
                OptTag::Local | OptTag::Peer => {
                    let n = take(&mut p, 1)?[0] as usize;
                    if !(4..=4 + MAX_ADDR_BYTES).contains(&n) {
                        return Err((at, "address option has an invalid length"));
                    }
                    let b = take(&mut p, n)?;
                    let a = Addr::new(
                        u16::from_le_bytes(arr(&b[..2])),
                        u16::from_le_bytes(arr(&b[2..4])),
                        &b[4..],
                    );
                    if tag == OptTag::Local {
                        o.local = Some(a);
                    } else {
                        o.peer = Some(a);
                    }
                }
                OptTag::Stack => {
                    let n = take(&mut p, 1)?[0] as usize;
                    if n > MAX_STACK {
                        return Err((at, "call stack option has too many frames"));
                    }
                    let b = take(&mut p, n * 6)?;
                    for (i, c) in b.chunks_exact(6).enumerate() {
                        let mut w = [0u8; 8];
                        w[..6].copy_from_slice(c);
                        o.stack[i] = u64::from_le_bytes(w);
                    }
                    o.stack_len = n as u8;
                }
                OptTag::Str => {
                    let n = take(&mut p, 1)?[0] as usize;
                    if n > MAX_STR {
                        return Err((at, "string option is too long"));
                    }
                    let b = take(&mut p, n)?;
                    o.set_str(b);
                }
            }
        }
        Ok(o)
    }
}

fn arr<const N: usize>(s: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&s[..N]);
    a
}

struct OptWriter<'a> {
    out: &'a mut [u8; MAX_OPTS],
    pos: usize,
}

impl OptWriter<'_> {
    /// Largest payload that still fits after a tag byte.
    fn room(&self) -> usize {
        MAX_OPTS.saturating_sub(self.pos + 1)
    }

    fn put(&mut self, tag: OptTag, payload: &[u8]) {
        if self.pos + 1 + payload.len() > MAX_OPTS {
            return;
        }
        self.out[self.pos] = tag as u8;
        self.out[self.pos + 1..self.pos + 1 + payload.len()].copy_from_slice(payload);
        self.pos += 1 + payload.len();
    }
}
