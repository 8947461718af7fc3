//! The tracer's own system calls, issued raw so they never go through its wrappers
//! (bufpool::sys has the ones shared with the pool code). None allocates; callers hold
//! an `ErrnoGuard` where errno matters.

use bufpool::format::Addr;
use core::ffi::CStr;

/// `syscall(2)` returning -1 on error (errno set).
macro_rules! raw {
    ($nr:expr $(, $a:expr)*) => {
        // SAFETY: every call site passes arguments that are valid for the system call
        // named (checked at each use: pointers to live local buffers of the stated size).
        unsafe { libc::syscall($nr $(, $a as libc::c_long)*) }
    };
}
pub(crate) use raw;

/// Writes all of `b` to `fd` (best effort, retries on EINTR and short writes).
pub fn write_all(fd: i32, mut b: &[u8]) {
    let _e = bufpool::sys::ErrnoGuard::new();
    while !b.is_empty() {
        let r = raw!(libc::SYS_write, fd, b.as_ptr(), b.len());
        if r < 0 {
            // SAFETY: reading this thread's errno.
            if unsafe { *libc::__errno_location() } == libc::EINTR {
                continue;
            }
            return;
        }
        if r == 0 {
            return;
        }
        b = &b[r as usize..];
    }
}

/// True if `fd` is a socket (`fstat`), `None` if the fd is not open.
pub fn fd_is_socket(fd: i32) -> Option<bool> {
    let _e = bufpool::sys::ErrnoGuard::new();
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    let r = raw!(libc::SYS_fstat, fd, &mut st as *mut libc::stat);
    if r < 0 {
        return None;
    }
    Some(st.st_mode & libc::S_IFMT == libc::S_IFSOCK)
}

/// Converts a socket address to the trace form. `len` is the address length the kernel
/// (or the caller) gave.
///
/// # Safety
/// `sa` must be null or point to at least `len` readable bytes.
pub unsafe fn addr_from(sa: *const libc::sockaddr, len: libc::socklen_t) -> Option<Addr> {
    let len = len as usize;
    if sa.is_null() || len < 2 {
        return None;
    }
    let mut buf = [0u8; core::mem::size_of::<libc::sockaddr_storage>()];
    let n = len.min(buf.len());
    // SAFETY: the caller guarantees `len` readable bytes at `sa`; we copy at most that.
    unsafe { core::ptr::copy_nonoverlapping(sa as *const u8, buf.as_mut_ptr(), n) };
    let family = u16::from_ne_bytes([buf[0], buf[1]]);
    let port = u16::from_be_bytes([buf[2], buf[3]]);
    Some(match family as i32 {
        libc::AF_INET if n >= 8 => Addr::new(family, port, &buf[4..8]),
        libc::AF_INET6 if n >= 24 => Addr::new(family, port, &buf[8..24]),
        libc::AF_UNIX => {
            let path = &buf[2..n];
            // Pathname sockets: cut at the NUL; abstract ones keep their leading NUL.
            let path = if path.first() == Some(&0) {
                path
            } else {
                let end = path.iter().position(|&c| c == 0).unwrap_or(path.len());
                &path[..end]
            };
            Addr::new(family, 0, path)
        }
        _ => Addr::new(family, 0, &buf[2..n]),
    })
}

/// The local (`peer == false`) or peer address of a socket.
pub fn sock_addr(fd: i32, peer: bool) -> Option<Addr> {
    let _e = bufpool::sys::ErrnoGuard::new();
    // SAFETY: an all-zero sockaddr_storage is valid.
    let mut ss: libc::sockaddr_storage = unsafe { core::mem::zeroed() };
    let mut len = core::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let nr = if peer {
        libc::SYS_getpeername
    } else {
        libc::SYS_getsockname
    };
    let r = raw!(
        nr,
        fd,
        &mut ss as *mut _ as *mut libc::sockaddr,
        &mut len as *mut libc::socklen_t
    );
    if r < 0 {
        return None;
    }
    // SAFETY: the kernel filled `len` bytes of `ss` (capped to its size by addr_from).
    unsafe { addr_from(&ss as *const _ as *const libc::sockaddr, len) }
}

/// Byte offsets of a TCP connection as its process sees them now: (bytes the program has
/// read, bytes it has written) since the connection was set up, from `TCP_INFO` (Linux ≥
/// 5.5) and `SIOCINQ`:
/// - written = `tcpi_bytes_sent` − `tcpi_bytes_retrans` + `tcpi_notsent_bytes` (data
///   octets only: neither the SYN nor a FIN counts, unlike `tcpi_bytes_acked`);
/// - read = `tcpi_bytes_received` − `SIOCINQ` − 1 if a FIN was received (it counts in
///   `tcpi_bytes_received`; the states after one say so).
///
/// One `TCP_INFO` call is one snapshot; arrivals race with the separate `SIOCINQ`, so
/// `TCP_INFO` is read again after it and the result given only when the received count
/// did not move. `None` for a socket that is not TCP, an older kernel, or a race.
pub fn tcp_offsets(fd: i32) -> Option<(u64, u64)> {
    let _e = bufpool::sys::ErrnoGuard::new();
    // struct tcp_info offsets (include/uapi/linux/tcp.h).
    const STATE: usize = 0;
    const RECEIVED: usize = 128;
    const NOTSENT: usize = 144;
    const SENT: usize = 200;
    const RETRANS: usize = 208;
    let info = || -> Option<[u8; 256]> {
        let mut b = [0u8; 256];
        let mut len = b.len() as libc::socklen_t;
        let r = raw!(
            libc::SYS_getsockopt,
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            b.as_mut_ptr(),
            &mut len as *mut libc::socklen_t
        );
        (r >= 0 && len as usize >= RETRANS + 8).then_some(b)
    };
    let u64_at =
        |b: &[u8; 256], o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().expect("8 bytes"));
    let u32_at = |b: &[u8; 256], o: usize| {
        u32::from_ne_bytes(b[o..o + 4].try_into().expect("4 bytes")) as u64
    };
    let first = info()?;
    let mut inq: libc::c_int = 0;
    if raw!(
        libc::SYS_ioctl,
        fd,
        libc::FIONREAD,
        &mut inq as *mut libc::c_int
    ) < 0
        || inq < 0
    {
        return None;
    }
    let again = info()?;
    if u64_at(&first, RECEIVED) != u64_at(&again, RECEIVED) {
        return None;
    }
    // TIME_WAIT, CLOSE_WAIT, LAST_ACK, CLOSING: the peer's FIN came.
    let fin = matches!(first[STATE], 6 | 8 | 9 | 11) as u64;
    let read = u64_at(&first, RECEIVED).checked_sub(inq as u64 + fin)?;
    let written = (u64_at(&first, SENT).checked_sub(u64_at(&first, RETRANS))?)
        .checked_add(u32_at(&first, NOTSENT))?;
    Some((read, written))
}

/// `tcpi_bytes_acked` of a TCP socket (`TCP_INFO`, Linux ≥ 4.1): at least 1 once the
/// peer acknowledged the SYN, so > 0 iff the connection was ever established — it stays
/// so after the connection is closed or reset. `None` for a socket that is not TCP or an
/// older kernel. No side effect (unlike `SO_ERROR`, which clears the pending error).
pub fn tcp_bytes_acked(fd: i32) -> Option<u64> {
    let _e = bufpool::sys::ErrnoGuard::new();
    // struct tcp_info offset (include/uapi/linux/tcp.h).
    const BYTES_ACKED: usize = 120;
    let mut b = [0u8; 136];
    let mut len = b.len() as libc::socklen_t;
    let r = raw!(
        libc::SYS_getsockopt,
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_INFO,
        b.as_mut_ptr(),
        &mut len as *mut libc::socklen_t
    );
    if r < 0 || (len as usize) < BYTES_ACKED + 8 {
        return None;
    }
    Some(u64::from_ne_bytes(
        b[BYTES_ACKED..BYTES_ACKED + 8].try_into().ok()?,
    ))
}

/// Reads 16 bytes at `addr` of our own memory without faulting (`process_vm_readv`);
/// `None` if it is not mapped readable.
pub fn peek16(addr: usize) -> Option<[u64; 2]> {
    let _e = bufpool::sys::ErrnoGuard::new();
    let mut out = [0u64; 2];
    let local = libc::iovec {
        iov_base: out.as_mut_ptr() as *mut libc::c_void,
        iov_len: 16,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: 16,
    };
    let r = raw!(
        libc::SYS_process_vm_readv,
        bufpool::sys::getpid(),
        &local as *const libc::iovec,
        1,
        &remote as *const libc::iovec,
        1,
        0
    );
    (r == 16).then_some(out)
}

/// Anonymous private memory from the kernel (`None` on failure). Used where `malloc`
/// is not allowed (exec after fork).
pub fn map_anon(len: usize) -> Option<*mut u8> {
    let _e = bufpool::sys::ErrnoGuard::new();
    let p = raw!(
        libc::SYS_mmap,
        0,
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0
    );
    if p < 0 && p > -4096 {
        None
    } else {
        Some(p as *mut u8)
    }
}

/// Returns memory from [`map_anon`].
pub fn unmap(p: *mut u8, len: usize) {
    let _e = bufpool::sys::ErrnoGuard::new();
    raw!(libc::SYS_munmap, p, len);
}

/// `readlink` into `buf`; the length read (0 on failure).
pub fn readlink(path: &CStr, buf: &mut [u8]) -> usize {
    let _e = bufpool::sys::ErrnoGuard::new();
    let r = raw!(
        libc::SYS_readlinkat,
        libc::AT_FDCWD,
        path.as_ptr(),
        buf.as_mut_ptr(),
        buf.len()
    );
    r.max(0) as usize
}

/// Formats `v` in decimal into `out`; returns the digits.
pub fn fmt_u64(mut v: u64, out: &mut [u8; 20]) -> &[u8] {
    let mut i = out.len();
    loop {
        i -= 1;
        out[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &out[i..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_numbers() {
        let mut b = [0u8; 20];
        assert_eq!(fmt_u64(0, &mut b), b"0");
        assert_eq!(fmt_u64(1234567, &mut b), b"1234567");
        assert_eq!(fmt_u64(u64::MAX, &mut b), b"18446744073709551615");
    }

    #[test]
    fn converts_addresses() {
        // SAFETY: all-zero is a valid sockaddr_in.
        let mut sin: libc::sockaddr_in = unsafe { core::mem::zeroed() };
        sin.sin_family = libc::AF_INET as u16;
        sin.sin_port = 7000u16.to_be();
        sin.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        // SAFETY: sin is a live sockaddr_in.
        let a = unsafe {
            addr_from(
                &sin as *const _ as *const libc::sockaddr,
                core::mem::size_of_val(&sin) as u32,
            )
        }
        .unwrap();
        assert_eq!(a.to_display(), "127.0.0.1:7000");
        // SAFETY: all-zero is a valid sockaddr_un.
        let mut sun: libc::sockaddr_un = unsafe { core::mem::zeroed() };
        sun.sun_family = libc::AF_UNIX as u16;
        for (i, c) in b"/tmp/s".iter().enumerate() {
            sun.sun_path[i] = *c as libc::c_char;
        }
        // SAFETY: sun is a live sockaddr_un.
        let a = unsafe {
            addr_from(
                &sun as *const _ as *const libc::sockaddr,
                core::mem::size_of_val(&sun) as u32,
            )
        }
        .unwrap();
        assert_eq!(a.to_display(), "unix:/tmp/s");
        // SAFETY: null is allowed.
        assert!(unsafe { addr_from(core::ptr::null(), 16) }.is_none());
    }

    #[test]
    fn peek_reads_own_stack_and_refuses_unmapped() {
        let x = [0x1122u64, 0x3344u64];
        assert_eq!(peek16(x.as_ptr() as usize), Some(x));
        assert_eq!(peek16(16), None);
    }
}
