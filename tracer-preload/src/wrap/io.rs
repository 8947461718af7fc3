//! Data transfer: `send* recv*` always, `read write readv writev` on sockets only.

use super::real_or_sys;
use super::seam::{data_call, AddrArg, DataCall};
use crate::fdtab;
use crate::inject::Data;
use crate::real::*;
use bufpool::format::LibFn;
use core::ffi::{c_int, c_void};
use libc::{iovec, msghdr, size_t, sockaddr, socklen_t, ssize_t};

fn iov_len(iov: *const iovec, n: c_int) -> u64 {
    if iov.is_null() || n <= 0 {
        return 0;
    }
    // SAFETY: the program passed `n` iovecs to the call; the kernel reads them too. A
    // bad pointer faults the same way in the real call.
    let v = unsafe { core::slice::from_raw_parts(iov, n.min(1024) as usize) };
    v.iter()
        .fold(0u64, |s, e| s.saturating_add(e.iov_len as u64))
}

fn msg_len(m: *const msghdr) -> u64 {
    if m.is_null() {
        return 0;
    }
    // SAFETY: the program's msghdr, which the real call reads as well.
    let m = unsafe { &*m };
    iov_len(m.msg_iov, m.msg_iovlen as c_int)
}

fn msg_data(m: *const msghdr) -> Data {
    if m.is_null() {
        return Data::None;
    }
    // SAFETY: as in msg_len.
    let m = unsafe { &*m };
    Data::Iov(m.msg_iov, m.msg_iovlen)
}

fn flat(buf: *const c_void) -> impl FnOnce(isize) -> Data {
    move |r| {
        if r > 0 {
            Data::Buf(buf as *mut u8, r as usize)
        } else {
            Data::None
        }
    }
}

/// `send`.
pub unsafe extern "C" fn send(
    fd: c_int,
    buf: *const c_void,
    len: size_t,
    flags: c_int,
    site: usize,
) -> ssize_t {
    let c = DataCall {
        func: LibFn::Send,
        site,
        fd,
        len: len as u64,
        flags: Some(flags as u32),
        addr: AddrArg::None,
    };
    data_call(c, flat(buf), |lim| {
        let len = len.min(lim);
        real_or_sys!(
            SEND,
            (fd, buf, len, flags),
            libc::SYS_sendto,
            (fd, buf, len, flags, 0, 0)
        )
    })
}

/// `sendto`.
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    len: size_t,
    flags: c_int,
    addr: *const sockaddr,
    alen: socklen_t,
    site: usize,
) -> ssize_t {
    let c = DataCall {
        func: LibFn::Sendto,
        site,
        fd,
        len: len as u64,
        flags: Some(flags as u32),
        addr: AddrArg::to(addr, alen),
    };
    data_call(c, flat(buf), |lim| {
        let len = len.min(lim);
        real_or_sys!(SENDTO, (fd, buf, len, flags, addr, alen), libc::SYS_sendto)
    })
}

/// `sendmsg`.
pub unsafe extern "C" fn sendmsg(
    fd: c_int,
    msg: *const msghdr,
    flags: c_int,
    site: usize,
) -> ssize_t {
    let c = DataCall {
        func: LibFn::Sendmsg,
        site,
        fd,
        len: msg_len(msg),
        flags: Some(flags as u32),
        // SAFETY: the program's msghdr for this call (or null).
        addr: unsafe { AddrArg::send_msg(msg) },
    };
    data_call(
        c,
        |_| msg_data(msg),
        |lim| {
            crate::inject::with_limited_msg(msg, lim, false, |msg| {
                real_or_sys!(SENDMSG, (fd, msg, flags), libc::SYS_sendmsg)
            })
        },
    )
}

/// `recv`.
pub unsafe extern "C" fn recv(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    flags: c_int,
    site: usize,
) -> ssize_t {
    let c = DataCall {
        func: LibFn::Recv,
        site,
        fd,
        len: len as u64,
        flags: Some(flags as u32),
        addr: AddrArg::None,
    };
    data_call(c, flat(buf), |lim| {
        let len = len.min(lim);
        real_or_sys!(
            RECV,
            (fd, buf, len, flags),
            libc::SYS_recvfrom,
            (fd, buf, len, flags, 0, 0)
        )
    })
}

/// `recvfrom`.
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    alen: *mut socklen_t,
    site: usize,
) -> ssize_t {
    let c = DataCall {
        func: LibFn::Recvfrom,
        site,
        fd,
        len: len as u64,
        flags: Some(flags as u32),
        // SAFETY: `alen` is the program's length pointer for this call (or null).
        addr: unsafe { AddrArg::from(addr, alen) },
    };
    data_call(c, flat(buf), |lim| {
        let len = len.min(lim);
        real_or_sys!(
            RECVFROM,
            (fd, buf, len, flags, addr, alen),
            libc::SYS_recvfrom
        )
    })
}

/// `recvmsg`.
pub unsafe extern "C" fn recvmsg(
    fd: c_int,
    msg: *mut msghdr,
    flags: c_int,
    site: usize,
) -> ssize_t {
    let c = DataCall {
        func: LibFn::Recvmsg,
        site,
        fd,
        len: msg_len(msg),
        flags: Some(flags as u32),
        // SAFETY: the program's msghdr for this call (or null).
        addr: unsafe { AddrArg::recv_msg(msg) },
    };
    let r = data_call(
        c,
        |_| msg_data(msg),
        |lim| {
            crate::inject::with_limited_msg(msg, lim, true, |msg| {
                real_or_sys!(RECVMSG, (fd, msg, flags), libc::SYS_recvmsg)
            })
        },
    );
    if r >= 0 && !msg.is_null() {
        forget_passed_fds(msg);
    }
    r
}

/// Fds received with `SCM_RIGHTS` reuse numbers the table may still describe.
fn forget_passed_fds(msg: *const msghdr) {
    // SAFETY: the kernel just filled the control buffer of this msghdr; the CMSG macros
    // stay inside msg_control[..msg_controllen].
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c) as *const c_int;
                let n = ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize) / 4;
                for i in 0..n {
                    fdtab::forget(data.add(i).read_unaligned());
                }
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
}

/// `read` (recorded on sockets only).
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, len: size_t, site: usize) -> ssize_t {
    if !fdtab::is_socket(fd) {
        return real_or_sys!(READ, (fd, buf, len), libc::SYS_read);
    }
    let c = DataCall {
        func: LibFn::Read,
        site,
        fd,
        len: len as u64,
        flags: None,
        addr: AddrArg::None,
    };
    data_call(c, flat(buf), |lim| {
        let len = len.min(lim);
        real_or_sys!(READ, (fd, buf, len), libc::SYS_read)
    })
}

/// `write` (recorded on sockets only).
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, len: size_t, site: usize) -> ssize_t {
    if !fdtab::is_socket(fd) {
        return real_or_sys!(WRITE, (fd, buf, len), libc::SYS_write);
    }
    let c = DataCall {
        func: LibFn::Write,
        site,
        fd,
        len: len as u64,
        flags: None,
        addr: AddrArg::None,
    };
    data_call(c, flat(buf), |lim| {
        let len = len.min(lim);
        real_or_sys!(WRITE, (fd, buf, len), libc::SYS_write)
    })
}

/// `readv` (recorded on sockets only).
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, n: c_int, site: usize) -> ssize_t {
    if !fdtab::is_socket(fd) {
        return real_or_sys!(READV, (fd, iov, n), libc::SYS_readv);
    }
    let c = DataCall {
        func: LibFn::Readv,
        site,
        fd,
        len: iov_len(iov, n),
        flags: None,
        addr: AddrArg::None,
    };
    data_call(
        c,
        |_| Data::Iov(iov, n.max(0) as usize),
        |lim| {
            crate::inject::with_limited_iov(iov, n, lim, |iov, n| {
                real_or_sys!(READV, (fd, iov, n), libc::SYS_readv)
            })
        },
    )
}

/// `writev` (recorded on sockets only).
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, n: c_int, site: usize) -> ssize_t {
    if !fdtab::is_socket(fd) {
        return real_or_sys!(WRITEV, (fd, iov, n), libc::SYS_writev);
    }
    let c = DataCall {
        func: LibFn::Writev,
        site,
        fd,
        len: iov_len(iov, n),
        flags: None,
        addr: AddrArg::None,
    };
    data_call(
        c,
        |_| Data::Iov(iov, n.max(0) as usize),
        |lim| {
            crate::inject::with_limited_iov(iov, n, lim, |iov, n| {
                real_or_sys!(WRITEV, (fd, iov, n), libc::SYS_writev)
            })
        },
    )
}

/// The real `__*_chk` function, or the system call after the check it makes.
fn chk_fallback(len: size_t, buflen: size_t) {
    if len > buflen {
        // What glibc's __chk_fail does: the program asked for more than its buffer holds.
        // SAFETY: abort has no preconditions.
        unsafe { libc::abort() };
    }
}

/// `__read_chk` (`read` under `_FORTIFY_SOURCE`; recorded as `read`, on sockets only).
pub unsafe extern "C" fn read_chk(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    buflen: size_t,
    site: usize,
) -> ssize_t {
    let real = |len: size_t| -> ssize_t {
        match READ_CHK.get() {
            // SAFETY: the real __read_chk with the program's arguments.
            Some(f) => unsafe { f(fd, buf, len, buflen) },
            None => {
                chk_fallback(len, buflen);
                // SAFETY: the program's read arguments, checked against its buffer.
                unsafe { libc::syscall(libc::SYS_read, fd, buf, len) as ssize_t }
            }
        }
    };
    if !fdtab::is_socket(fd) {
        return real(len);
    }
    let c = DataCall {
        func: LibFn::Read,
        site,
        fd,
        len: len as u64,
        flags: None,
        addr: AddrArg::None,
    };
    data_call(c, flat(buf), |lim| real(len.min(lim)) as _)
}

/// `__recv_chk` (`recv` under `_FORTIFY_SOURCE`; recorded as `recv`).
pub unsafe extern "C" fn recv_chk(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    buflen: size_t,
    flags: c_int,
    site: usize,
) -> ssize_t {
    let c = DataCall {
        func: LibFn::Recv,
        site,
        fd,
        len: len as u64,
        flags: Some(flags as u32),
        addr: AddrArg::None,
    };
    data_call(c, flat(buf), |lim| {
        let len = len.min(lim);
        match RECV_CHK.get() {
            // SAFETY: the real __recv_chk with the program's arguments.
            Some(f) => unsafe { f(fd, buf, len, buflen, flags) as _ },
            None => {
                chk_fallback(len, buflen);
                // SAFETY: the program's recv arguments, checked against its buffer.
                unsafe { libc::syscall(libc::SYS_recvfrom, fd, buf, len, flags, 0, 0) as _ }
            }
        }
    })
}

fn mmsg_len(v: *const libc::mmsghdr, n: core::ffi::c_uint) -> u64 {
    if v.is_null() {
        return 0;
    }
    // SAFETY: the program passes `n` mmsghdrs to the call, which the kernel reads too.
    let v = unsafe { core::slice::from_raw_parts(v, (n as usize).min(1024)) };
    v.iter()
        .fold(0u64, |s, m| s.saturating_add(msg_len(&m.msg_hdr)))
}

/// `sendmmsg`: len = bytes offered over all messages; ret = messages sent.
pub unsafe extern "C" fn sendmmsg(
    fd: c_int,
    v: *mut libc::mmsghdr,
    n: core::ffi::c_uint,
    flags: c_int,
    site: usize,
) -> c_int {
    let c = DataCall {
        func: LibFn::Sendmmsg,
        site,
        fd,
        len: mmsg_len(v, n),
        flags: Some(flags as u32),
        addr: AddrArg::None,
    };
    // A byte cap from fault injection does not apply to message vectors.
    data_call(
        c,
        |_| Data::None,
        |_| real_or_sys!(SENDMMSG, (fd, v, n, flags), libc::SYS_sendmmsg),
    ) as c_int
}

/// `recvmmsg`: len = buffer bytes offered over all messages; ret = messages received.
pub unsafe extern "C" fn recvmmsg(
    fd: c_int,
    v: *mut libc::mmsghdr,
    n: core::ffi::c_uint,
    flags: c_int,
    ts: *mut libc::timespec,
    site: usize,
) -> c_int {
    let c = DataCall {
        func: LibFn::Recvmmsg,
        site,
        fd,
        len: mmsg_len(v, n),
        flags: Some(flags as u32),
        addr: AddrArg::None,
    };
    data_call(
        c,
        |_| Data::None,
        |_| real_or_sys!(RECVMMSG, (fd, v, n, flags, ts), libc::SYS_recvmmsg),
    ) as c_int
}
