//! Helpers for applying effects and recording injections, all allocation-free.

use crate::format::{head_word, Kind, LibFn, MAX_META_BODY, META_BUF};

/// One injection, as written to the trace ([`crate::format::InjectRecord`] without the
/// owned string, so it can be built on a hot path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InjectEvent<'a> {
    /// Rule index.
    pub rule: u32,
    /// The affected function.
    pub func: LibFn,
    /// The call's fd (-1 if none).
    pub fd: i32,
    /// What the real call returned (-1 when it was not made).
    pub original_ret: i64,
    /// What the program saw.
    pub forced_ret: i64,
    /// The errno the program saw (0 if none).
    pub forced_errno: i32,
    /// The rule's text.
    pub spec: &'a [u8],
}

/// Encodes a `MetaInject` record into `out`, byte for byte what
/// [`crate::format::encode_meta`] writes for the equivalent [`crate::format::Meta::Inject`],
/// without allocating. Returns the record length.
pub fn encode_inject(tsc: u64, ev: &InjectEvent<'_>, out: &mut [u8; META_BUF]) -> usize {
    let mut b = [0u8; 30];
    b[0..4].copy_from_slice(&ev.rule.to_le_bytes());
    b[4..6].copy_from_slice(&(ev.func.id() as u16).to_le_bytes());
    b[6..10].copy_from_slice(&(ev.fd as u32).to_le_bytes());
    b[10..18].copy_from_slice(&(ev.original_ret as u64).to_le_bytes());
    b[18..26].copy_from_slice(&(ev.forced_ret as u64).to_le_bytes());
    b[26..30].copy_from_slice(&(ev.forced_errno as u32).to_le_bytes());
    // Same truncation rule as the metadata encoder: keep 4 bytes of the body spare.
    let n = ev.spec.len().min(MAX_META_BODY - (b.len() + 4));
    let body = b.len() + 2 + n;
    out[..8].copy_from_slice(&head_word(Kind::MetaInject, tsc).to_le_bytes());
    out[8..10].copy_from_slice(&(body as u16).to_le_bytes());
    out[10..40].copy_from_slice(&b);
    out[40..42].copy_from_slice(&(n as u16).to_le_bytes());
    out[42..42 + n].copy_from_slice(&ev.spec[..n]);
    10 + body
}

/// Corrupts the first `min(n, buf.len())` bytes (XOR `0xff`: deterministic and never the
/// original value). Returns how many bytes were changed.
pub fn corrupt_bytes(buf: &mut [u8], n: u64) -> usize {
    let k = buf.len().min(usize::try_from(n).unwrap_or(usize::MAX));
    for b in &mut buf[..k] {
        *b ^= 0xff;
    }
    k
}

/// Sleeps `ns` nanoseconds with the raw `nanosleep` system call, resuming after signals,
/// preserving errno. Never allocates.
pub fn sleep_ns(ns: u64) {
    let _e = crate::sys::ErrnoGuard::new();
    let mut req = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        let mut rem = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: both timespecs are valid; nanosleep only writes `rem`.
        let r = unsafe {
            libc::syscall(
                libc::SYS_nanosleep,
                &req as *const libc::timespec,
                &mut rem as *mut libc::timespec,
            )
        };
        // SAFETY: reading the calling thread's errno right after the call.
        if r == 0 || unsafe { *libc::__errno_location() } != libc::EINTR {
            return;
        }
        req = rem;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{decode_all, encode_meta, Entry, InjectRecord, Meta};

    #[test]
    fn encodes_exactly_like_the_metadata_encoder() {
        for spec in [
            &b"recv:short=3,nth=17"[..],
            b"",
            &[b'x'; 5000][..], // truncated like the generic encoder
        ] {
            let ev = InjectEvent {
                rule: 3,
                func: LibFn::Recv,
                fd: -1,
                original_ret: 8,
                forced_ret: -1,
                forced_errno: libc::ECONNRESET,
                spec,
            };
            let mut a = [0u8; META_BUF];
            let na = encode_inject(0x1234_5678, &ev, &mut a);
            let m = Meta::Inject(InjectRecord {
                rule: 3,
                func: LibFn::Recv.id() as u16,
                fd: -1,
                original_ret: 8,
                forced_ret: -1,
                forced_errno: libc::ECONNRESET,
                spec: spec.to_vec(),
            });
            let mut b = [0u8; META_BUF];
            let nb = encode_meta(0x1234_5678, &m, &mut b);
            assert_eq!(a[..na], b[..nb]);
            let got = decode_all(&a[..na]).unwrap();
            assert_eq!(got.len(), 1);
            match &got[0] {
                Entry::Meta {
                    meta: Meta::Inject(r),
                    ..
                } => {
                    assert_eq!(r.rule, 3);
                    assert_eq!(r.forced_errno, libc::ECONNRESET);
                    assert_eq!(r.fd, -1);
                    assert!(spec.starts_with(&r.spec));
                }
                other => panic!("decoded {other:?}"),
            }
        }
    }

    #[test]
    fn corrupt_flips_only_the_first_n_bytes() {
        let mut b = *b"abcdef";
        assert_eq!(corrupt_bytes(&mut b, 2), 2);
        assert_eq!(&b, &[!b'a', !b'b', b'c', b'd', b'e', b'f']);
        assert_eq!(corrupt_bytes(&mut b, 100), 6);
        assert_eq!(b[0], b'a');
        assert_eq!(corrupt_bytes(&mut [], 3), 0);
    }

    #[test]
    fn sleep_lasts_at_least_the_duration_and_keeps_errno() {
        // SAFETY: writing the calling thread's errno.
        unsafe { *libc::__errno_location() = libc::EAGAIN };
        let t = std::time::Instant::now();
        sleep_ns(20_000_000);
        assert!(t.elapsed() >= std::time::Duration::from_millis(20));
        // SAFETY: reading the calling thread's errno.
        assert_eq!(unsafe { *libc::__errno_location() }, libc::EAGAIN);
    }
}
