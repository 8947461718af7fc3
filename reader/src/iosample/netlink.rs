//! The netlink socket calls that taskstats ([`super::taskstats`]) and sock_diag
//! ([`super::backlog`]) share: a request to the kernel, one datagram back, a batch of
//! datagrams back in one `recvmmsg`. An interrupted call is retried.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// Retries `call` while it fails with `EINTR`; its non-negative result otherwise.
fn retry(mut call: impl FnMut() -> isize) -> io::Result<usize> {
    loop {
        let r = call();
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Sends `m` to the kernel (netlink port 0).
pub(super) fn send(fd: &OwnedFd, m: &[u8]) -> io::Result<()> {
    // SAFETY: an all-zero sockaddr_nl is valid; family set below, pid 0 = the kernel.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as u16;
    retry(|| {
        // SAFETY: `m` is readable for its length; `addr` is a valid sockaddr_nl of the
        // given size.
        unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                m.as_ptr().cast(),
                m.len(),
                0,
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        }
    })
    .map(drop)
}

/// Receives one datagram into `buf`; its length.
pub(super) fn recv(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is writable for its whole length.
    retry(|| unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) })
}

/// One datagram of [`recv_batch`]: its length, and whether it was longer than its buffer
/// (then `len` is its full length, not what the buffer holds).
pub(super) struct Received {
    pub len: usize,
    pub truncated: bool,
}

/// Receives up to `bufs.len()` datagrams in one `recvmmsg`, the k-th into `bufs[k]`
/// (`flags`: `MSG_WAITFORONE` to wait for the first only, 0 for all of them).
pub(super) fn recv_batch(
    fd: &OwnedFd,
    bufs: &mut [&mut [u8]],
    flags: i32,
) -> io::Result<Vec<Received>> {
    let mut iov: Vec<libc::iovec> = bufs
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: an all-zero mmsghdr is valid (no name, no control data, no iovec yet).
    let mut hdrs: Vec<libc::mmsghdr> = (0..iov.len())
        .map(|_| unsafe { std::mem::zeroed() })
        .collect();
    for (h, v) in hdrs.iter_mut().zip(iov.iter_mut()) {
        h.msg_hdr.msg_iov = v;
        h.msg_hdr.msg_iovlen = 1;
    }
    let n = retry(|| {
        // SAFETY: `hdrs` holds one header per buffer, each pointing to one iovec of `iov`,
        // which points into that distinct, writable buffer; all outlive the call.
        unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                hdrs.as_mut_ptr(),
                hdrs.len() as u32,
                flags,
                std::ptr::null_mut(),
            ) as isize
        }
    })?;
    Ok(hdrs[..n]
        .iter()
        .map(|h| Received {
            len: h.msg_len as usize,
            truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
        })
        .collect())
}
