//! What the streamed pass ([`super::streamed`]) spills to unnamed temporary files, and
//! reads back: each thread's ops (fixed 53-byte records, then the addresses of the calls
//! that carry them) and the flow ends of sorted runs (25 bytes each). Little-endian; only
//! this process ever reads them back.

use super::ops::{self, Op, OpAddrs, OpKind};
use super::streamed::{CallKey, BATCH};
use crate::error::{Error, Result};
use bufpool::format::{Addr, LibFn, Meta};
use std::io::{BufWriter, Read, Seek, Write};
use std::path::Path;

/// Ops the matcher looks at (multiplexer waits, peeks and other calls are dropped on the
/// decoding threads).
pub(super) fn wanted(o: &Op) -> bool {
    !matches!(
        o.kind,
        OpKind::Mux | OpKind::Other | OpKind::Peek | OpKind::Shutdown
    )
}

/// Bytes of an [`Op`] in a spill file (then a byte: 1 if addresses follow).
pub(super) const OP_BYTES: usize = 52;

pub(super) fn put_addr(w: &mut impl Write, a: Option<Addr>) -> std::io::Result<()> {
    match a {
        None => w.write_all(&[0]),
        Some(a) => {
            let b = a.bytes();
            w.write_all(&[1, b.len() as u8])?;
            w.write_all(&a.family.to_le_bytes())?;
            w.write_all(&a.port.to_le_bytes())?;
            w.write_all(b)
        }
    }
}

pub(super) fn get_addr(r: &mut impl Read) -> std::io::Result<Option<Addr>> {
    let mut h = [0u8; 1];
    r.read_exact(&mut h)?;
    if h[0] == 0 {
        return Ok(None);
    }
    let mut h = [0u8; 5];
    r.read_exact(&mut h)?;
    let mut b = vec![0u8; h[0] as usize];
    r.read_exact(&mut b)?;
    Ok(Some(Addr::new(
        u16::from_le_bytes([h[1], h[2]]),
        u16::from_le_bytes([h[3], h[4]]),
        &b,
    )))
}

pub(super) const KINDS: [OpKind; 16] = [
    OpKind::Send,
    OpKind::Recv,
    OpKind::Peek,
    OpKind::Connect,
    OpKind::Accept,
    OpKind::Socket,
    OpKind::Pair,
    OpKind::Bind,
    OpKind::Close,
    OpKind::Shutdown,
    OpKind::Dup,
    OpKind::Mux,
    OpKind::Fork,
    OpKind::Gap,
    OpKind::Other,
    OpKind::Adopt,
];

pub(super) fn put_op(w: &mut impl Write, o: &Op, addrs: Option<OpAddrs>) -> std::io::Result<()> {
    let mut b = [0u8; OP_BYTES + 1];
    b[0..8].copy_from_slice(&o.start.to_le_bytes());
    b[8..16].copy_from_slice(&o.end.to_le_bytes());
    b[16..24].copy_from_slice(&o.ret.to_le_bytes());
    b[24..32].copy_from_slice(&o.aux.to_le_bytes());
    b[32..36].copy_from_slice(&o.tid.to_le_bytes());
    b[36..40].copy_from_slice(&o.fd.to_le_bytes());
    b[40..44].copy_from_slice(&o.errno.to_le_bytes());
    b[44..48].copy_from_slice(&o.flags.to_le_bytes());
    b[48..50].copy_from_slice(&(o.func as u16).to_le_bytes());
    b[50] = KINDS.iter().position(|k| *k == o.kind).unwrap_or(14) as u8;
    b[51] = o.injected as u8;
    b[52] = addrs.is_some() as u8;
    w.write_all(&b)?;
    if let Some((l, p)) = addrs {
        put_addr(w, l)?;
        put_addr(w, p)?;
    }
    Ok(())
}

pub(super) fn get_op(r: &mut impl Read) -> std::io::Result<Option<(Op, Option<OpAddrs>)>> {
    let mut b = [0u8; OP_BYTES + 1];
    match r.read_exact(&mut b) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or_default());
    let func = LibFn::from_id(u16::from_le_bytes([b[48], b[49]]) as u64).unwrap_or(LibFn::Close);
    let o = Op {
        start: u64_at(0),
        end: u64_at(8),
        ret: u64_at(16) as i64,
        aux: u64_at(24),
        tid: u32_at(32),
        fd: u32_at(36) as i32,
        errno: u32_at(40) as i32,
        flags: u32_at(44),
        func,
        kind: KINDS[(b[50] as usize).min(KINDS.len() - 1)],
        injected: b[51] != 0,
        sock: ops::NO_SOCK,
    };
    let addrs = if b[52] != 0 {
        Some((get_addr(r)?, get_addr(r)?))
    } else {
        None
    };
    Ok(Some((o, addrs)))
}

/// One thread's wanted ops, decoded (on a worker of the pool) to an unnamed temporary
/// file, with the records met.
pub(super) struct Spilled {
    pub(super) file: std::fs::File,
    pub(super) meta: Vec<(u64, Meta)>,
}

pub(super) fn spill_thread(t: &crate::decode::ThreadTrace, dir: &Path) -> Result<Spilled> {
    let io = |what| {
        move |source| Error::Io {
            path: dir.to_path_buf(),
            what,
            source,
        }
    };
    let f = tempfile::tempfile_in(dir).map_err(io("create a spill file"))?;
    let mut w = BufWriter::with_capacity(1 << 16, f);
    let mut meta = Vec::new();
    let mut err = None;
    ops::stream_thread(t, BATCH, wanted, |b| {
        meta.extend(b.meta);
        let mut ai = 0;
        for (i, o) in b.ops.iter().enumerate() {
            let mut a = None;
            if let Some(&(k, x)) = b.addrs.get(ai) {
                if k as usize == i {
                    a = Some(x);
                    ai += 1;
                }
            }
            if let Err(e) = put_op(&mut w, o, a) {
                err = Some(e);
                return false;
            }
        }
        true
    })?;
    if let Some(e) = err {
        return Err(io("write a spill file")(e));
    }
    let mut file = w
        .into_inner()
        .map_err(|e| io("write a spill file")(e.into_error()))?;
    file.rewind().map_err(io("read a spill file"))?;
    Ok(Spilled { file, meta })
}

/// One end of a flow: the call, the flow id, and whether the call starts it (a send).
pub(super) type End = (CallKey, u64, bool);
pub(super) const END_BYTES: usize = 25;

pub(super) fn put_end(w: &mut impl Write, e: &End) -> std::io::Result<()> {
    let mut b = [0u8; END_BYTES];
    b[0..4].copy_from_slice(&e.0.proc.to_le_bytes());
    b[4..8].copy_from_slice(&e.0.thread.to_le_bytes());
    b[8..16].copy_from_slice(&e.0.start.to_le_bytes());
    b[16..24].copy_from_slice(&e.1.to_le_bytes());
    b[24] = e.2 as u8;
    w.write_all(&b)
}

pub(super) fn get_end(r: &mut impl Read) -> std::io::Result<Option<End>> {
    let mut b = [0u8; END_BYTES];
    match r.read_exact(&mut b) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or_default());
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
    Ok(Some((
        CallKey {
            proc: u32_at(0),
            thread: u32_at(4),
            start: u64_at(8),
        },
        u64_at(16),
        b[24] != 0,
    )))
}
