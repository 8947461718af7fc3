//! Metadata records (`bufpool::format::Meta`) encoded without allocating.
//!
//! `Meta` holds `Vec`s, which the tracer must not build inside a traced program (in a
//! forked child, a signal handler or a thread being torn down). These encoders write the
//! same bytes as `encode_meta` from borrowed slices into a fixed stack buffer (unit
//! tests compare both), including its truncation rules for oversized strings.

use bufpool::format::{Kind, MAX_META_BODY};

/// One metadata record (head, `u16` length, body) in a stack buffer of `N` bytes.
pub struct MetaOut<const N: usize> {
    buf: [u8; N],
    /// Position in `buf` (the body starts at 10).
    pos: usize,
}

impl<const N: usize> MetaOut<N> {
    /// Starts a record of `kind` at `tsc`.
    pub fn new(kind: Kind, tsc: u64) -> MetaOut<N> {
        let mut m = MetaOut {
            buf: [0; N],
            pos: 10,
        };
        m.buf[..8].copy_from_slice(&((tsc << 8) | kind as u64).to_le_bytes());
        m
    }

    fn body_len(&self) -> usize {
        self.pos - 10
    }

    /// Bytes still allowed in the body (bounded by both the buffer and MAX_META_BODY).
    fn cap(&self) -> usize {
        (N - 10).min(MAX_META_BODY)
    }

    fn put(&mut self, b: &[u8]) {
        let n = b.len().min(self.cap().saturating_sub(self.body_len()));
        self.buf[self.pos..self.pos + n].copy_from_slice(&b[..n]);
        self.pos += n;
    }

    /// Appends a `u8`.
    pub fn u8(&mut self, v: u8) {
        self.put(&[v]);
    }
    /// Appends a `u16`.
    pub fn u16(&mut self, v: u16) {
        self.put(&v.to_le_bytes());
    }
    /// Appends a `u32`.
    pub fn u32(&mut self, v: u32) {
        self.put(&v.to_le_bytes());
    }
    /// Appends a `u64`.
    pub fn u64(&mut self, v: u64) {
        self.put(&v.to_le_bytes());
    }

    /// Appends a length-prefixed string, truncated like `Meta::encode_body` (keeping 4
    /// bytes of room).
    pub fn bytes(&mut self, b: &[u8]) {
        let room = self.cap().saturating_sub(self.body_len() + 4);
        let n = b.len().min(room);
        self.u16(n as u16);
        self.put(&b[..n]);
    }

    /// Appends an argv list (`u16 n`, then `n` strings): as many leading arguments as fit.
    pub fn argv<'a, I: Iterator<Item = &'a [u8]> + Clone>(&mut self, args: I) {
        let room = self.cap().saturating_sub(self.body_len() + 2);
        let mut n = 0usize;
        let mut used = 0usize;
        for a in args.clone() {
            if used + 2 + a.len() > room {
                break;
            }
            used += 2 + a.len();
            n += 1;
        }
        self.u16(n as u16);
        for a in args.take(n) {
            self.bytes(a);
        }
    }

    /// The finished record.
    pub fn finish(&mut self) -> &[u8] {
        let n = self.body_len() as u16;
        self.buf[8..10].copy_from_slice(&n.to_le_bytes());
        &self.buf[..self.pos]
    }
}

/// Iterates over the NUL-separated strings of `/proc/PID/cmdline` contents.
pub fn nul_split(b: &[u8]) -> impl Iterator<Item = &[u8]> + Clone {
    let b = match b.last() {
        Some(0) => &b[..b.len() - 1],
        _ => b,
    };
    b.split(|&c| c == 0).filter(move |_| !b.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bufpool::format::{encode_meta, Meta, ProcReason, ProcRecord, ThreadRecord, META_BUF};

    fn reference(m: &Meta, tsc: u64) -> Vec<u8> {
        let mut out = [0u8; META_BUF];
        let n = encode_meta(tsc, m, &mut out);
        out[..n].to_vec()
    }

    fn proc_bytes(exe: &[u8], cmdline: &[u8]) -> Vec<u8> {
        let mut m = MetaOut::<META_BUF>::new(Kind::MetaProc, 77);
        m.u8(ProcReason::Fork as u8);
        m.u32(10);
        m.u32(9);
        m.u64(12345);
        m.bytes(exe);
        m.argv(nul_split(cmdline));
        m.finish().to_vec()
    }

    #[test]
    fn proc_record_matches_encode_meta() {
        for (exe, cmd) in [
            (&b"/bin/true"[..], &b"true\0-x\0\0y\0"[..]),
            (b"", b""),
            (&[b'e'; 5000][..], b"a\0"),
        ] {
            let argv: Vec<Vec<u8>> = nul_split(cmd).map(|a| a.to_vec()).collect();
            let want = reference(
                &Meta::Proc(ProcRecord {
                    reason: ProcReason::Fork,
                    pid: 10,
                    ppid: 9,
                    start_ticks: 12345,
                    exe: exe.to_vec(),
                    argv,
                }),
                77,
            );
            assert_eq!(proc_bytes(exe, cmd), want);
        }
    }

    #[test]
    fn long_argv_is_cut_like_encode_meta() {
        let mut cmd = Vec::new();
        for i in 0..600 {
            cmd.extend_from_slice(format!("argument-{i}").as_bytes());
            cmd.push(0);
        }
        let argv: Vec<Vec<u8>> = nul_split(&cmd).map(|a| a.to_vec()).collect();
        let want = reference(
            &Meta::Proc(ProcRecord {
                reason: ProcReason::Fork,
                pid: 10,
                ppid: 9,
                start_ticks: 12345,
                exe: b"/x".to_vec(),
                argv,
            }),
            77,
        );
        assert_eq!(proc_bytes(b"/x", &cmd), want);
    }

    #[test]
    fn small_buffer_thread_record_matches() {
        let mut m = MetaOut::<64>::new(Kind::MetaThread, 5);
        m.u32(3);
        m.u32(2);
        m.bytes(b"worker");
        let want = reference(
            &Meta::Thread(ThreadRecord {
                tid: 3,
                pid: 2,
                name: b"worker".to_vec(),
            }),
            5,
        );
        assert_eq!(m.finish(), &want[..]);
    }

    #[test]
    fn nul_split_handles_empty_and_trailing_nul() {
        assert_eq!(nul_split(b"").count(), 0);
        assert_eq!(
            nul_split(b"a\0b\0").collect::<Vec<_>>(),
            vec![&b"a"[..], b"b"]
        );
        assert_eq!(
            nul_split(b"a\0\0b").collect::<Vec<_>>(),
            vec![&b"a"[..], b"", b"b"]
        );
    }
}
