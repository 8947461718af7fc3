//! Socket life cycle: creation, connection setup (with addresses and a call stack),
//! shutdown and close, fd duplication, `getsockopt(SO_ERROR)`.

use super::real_or_sys;
use super::seam::{errno, set_errno};
use crate::entry::Small;
use crate::fdtab;
use crate::inject::{self, CallInfo, Data, Outcome};
use crate::real::*;
use crate::record::Call;
use crate::sysx::{addr_from, sock_addr};
use bufpool::format::{LibFn, LibOpts, MAX_STACK};
use core::ffi::{c_int, c_uint, c_void};
use libc::{sockaddr, socklen_t};

fn with_stack(site: usize, fp: usize, o: &mut LibOpts) {
    let mut frames = [0u64; MAX_STACK];
    let n = crate::stack::walk(site, fp, &mut frames);
    o.set_stack(&frames[..n]);
}

/// Result of a call that went through the injection seam: value, errno, rule.
struct Seamed {
    ret: i64,
    err: i32,
    rule: Option<u32>,
}

/// Asks the seam, makes the real call unless forced, lets the seam alter the outcome.
#[inline(always)]
fn seamed(info: CallInfo, real: impl FnOnce() -> i64) -> Seamed {
    if !inject::enabled() {
        let ret = real();
        let err = if ret < 0 { errno() } else { 0 };
        return Seamed {
            ret,
            err,
            rule: None,
        };
    }
    if let Some(f) = inject::before(&info) {
        if f.ret < 0 {
            set_errno(f.errno);
        }
        return Seamed {
            ret: f.ret,
            err: f.errno,
            rule: Some(f.rule),
        };
    }
    let ret = real();
    let err = if ret < 0 { errno() } else { 0 };
    let mut out = Outcome { ret, errno: err };
    let rule = inject::after(&info, &mut out, Data::None);
    if rule.is_some() && out.ret < 0 {
        set_errno(out.errno);
    }
    Seamed {
        ret: out.ret,
        err: out.errno,
        rule,
    }
}

fn exit_small(fd: Option<i32>, s: &Seamed) -> Small {
    Small {
        fd,
        ret: Some(s.ret),
        errno: (s.ret < 0).then_some(s.err),
        inject: s.rule,
        ..Small::default()
    }
}

/// `socket`.
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, proto: c_int, site: usize) -> c_int {
    let call = Call::enter(
        LibFn::Socket,
        site,
        &Small {
            flags: Some(ty as u32),
            arg: Some(domain as u64),
            arg2: Some(proto as u64),
            ..Small::default()
        },
    );
    let s = seamed(CallInfo::new(LibFn::Socket, -1, 0), || {
        let r: c_int = real_or_sys!(SOCKET, (domain, ty, proto), libc::SYS_socket);
        r as i64
    });
    let r = s.ret as c_int;
    if r >= 0 {
        fdtab::created(r, true);
    }
    if let Some(c) = call {
        c.exit(&exit_small(None, &s), None);
    }
    r
}

/// `socketpair`.
pub unsafe extern "C" fn socketpair(
    domain: c_int,
    ty: c_int,
    proto: c_int,
    sv: *mut c_int,
    site: usize,
) -> c_int {
    let call = Call::enter(
        LibFn::Socketpair,
        site,
        &Small {
            flags: Some(ty as u32),
            arg: Some(domain as u64),
            arg2: Some(proto as u64),
            ..Small::default()
        },
    );
    let r: c_int = real_or_sys!(SOCKETPAIR, (domain, ty, proto, sv), libc::SYS_socketpair);
    let e = errno();
    let (a, b) = if r == 0 && !sv.is_null() {
        // SAFETY: the call succeeded, so it wrote two fds to `sv`.
        unsafe { (*sv, *sv.add(1)) }
    } else {
        (-1, -1)
    };
    if r == 0 {
        fdtab::created(a, true);
        fdtab::created(b, true);
    }
    if let Some(c) = call {
        let mut o = Small {
            ret: Some(r as i64),
            errno: (r < 0).then_some(e),
            ..Small::default()
        };
        if r == 0 {
            o.fd = Some(a);
            o.fd2 = Some(b);
        }
        c.exit(&o, None);
    }
    r
}

/// `bind`.
pub unsafe extern "C" fn bind(
    fd: c_int,
    addr: *const sockaddr,
    len: socklen_t,
    site: usize,
    fp: usize,
) -> c_int {
    let call = crate::global::pool().and_then(|_| {
        let mut o = LibOpts {
            fd: Some(fd),
            ..LibOpts::default()
        };
        // SAFETY: the program passes `len` bytes at `addr` to bind.
        o.local = unsafe { addr_from(addr, len) };
        with_stack(site, fp, &mut o);
        Call::enter_full(LibFn::Bind, site, &o)
    });
    let s = seamed(CallInfo::new(LibFn::Bind, fd, 0), || {
        let r: c_int = real_or_sys!(BIND, (fd, addr, len), libc::SYS_bind);
        r as i64
    });
    let (r, e) = (s.ret as c_int, s.err);
    if let Some(c) = call {
        let mut o = LibOpts {
            fd: Some(fd),
            ret: Some(r as i64),
            inject: s.rule,
            ..LibOpts::default()
        };
        o.errno = (r < 0).then_some(e);
        if r == 0 {
            o.local = sock_addr(fd, false);
        }
        c.exit_full(&o);
    }
    r
}

/// `listen`.
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int, site: usize, fp: usize) -> c_int {
    let call = crate::global::pool().and_then(|_| {
        let mut o = LibOpts {
            fd: Some(fd),
            arg: Some(backlog as u64),
            ..LibOpts::default()
        };
        o.local = sock_addr(fd, false);
        with_stack(site, fp, &mut o);
        Call::enter_full(LibFn::Listen, site, &o)
    });
    let s = seamed(CallInfo::new(LibFn::Listen, fd, 0), || {
        let r: c_int = real_or_sys!(LISTEN, (fd, backlog), libc::SYS_listen);
        r as i64
    });
    if let Some(c) = call {
        c.exit(&exit_small(Some(fd), &s), None);
    }
    s.ret as c_int
}

/// `connect`.
pub unsafe extern "C" fn connect(
    fd: c_int,
    addr: *const sockaddr,
    len: socklen_t,
    site: usize,
    fp: usize,
) -> c_int {
    let call = crate::global::pool().and_then(|_| {
        let mut o = LibOpts {
            fd: Some(fd),
            ..LibOpts::default()
        };
        // SAFETY: the program passes `len` bytes at `addr` to connect.
        o.peer = unsafe { addr_from(addr, len) };
        with_stack(site, fp, &mut o);
        Call::enter_full(LibFn::Connect, site, &o)
    });
    let info = CallInfo::new(LibFn::Connect, fd, 0);
    let s = seamed(info, || {
        let r: c_int = real_or_sys!(CONNECT, (fd, addr, len), libc::SYS_connect);
        r as i64
    });
    if fdtab::tracking_ports() {
        // SAFETY: the program passes `len` bytes at `addr` to connect.
        let to = unsafe { addr_from(addr, len) }
            .filter(|a| matches!(a.family as i32, libc::AF_INET | libc::AF_INET6))
            .map(|a| a.port);
        fdtab::connected(fd, to, s.ret, s.err);
    }
    if let Some(c) = call {
        let mut o = LibOpts {
            fd: Some(fd),
            ret: Some(s.ret),
            inject: s.rule,
            ..LibOpts::default()
        };
        o.errno = (s.ret < 0).then_some(s.err);
        if s.ret == 0 || s.err == libc::EINPROGRESS {
            o.local = sock_addr(fd, false);
        }
        // SAFETY: as above.
        o.peer = unsafe { addr_from(addr, len) };
        c.exit_full(&o);
    }
    s.ret as c_int
}

fn accept_common(
    func: LibFn,
    fd: c_int,
    flags: Option<c_int>,
    site: usize,
    fp: usize,
    real: impl FnOnce() -> c_int,
) -> c_int {
    let call = crate::global::pool().and_then(|_| {
        let mut o = LibOpts {
            fd: Some(fd),
            flags: flags.map(|f| f as u32),
            ..LibOpts::default()
        };
        with_stack(site, fp, &mut o);
        Call::enter_full(func, site, &o)
    });
    let info = CallInfo::new(func, fd, 0);
    let s = seamed(info, || real() as i64);
    let nfd = s.ret as c_int;
    if s.ret >= 0 {
        fdtab::created(nfd, true);
        fdtab::learn_ports(nfd);
    }
    if let Some(c) = call {
        let mut o = LibOpts {
            fd: Some(fd),
            ret: Some(s.ret),
            inject: s.rule,
            ..LibOpts::default()
        };
        o.errno = (s.ret < 0).then_some(s.err);
        if s.ret >= 0 {
            o.local = sock_addr(nfd, false);
            o.peer = sock_addr(nfd, true);
        }
        c.exit_full(&o);
    }
    nfd
}

/// `accept`.
pub unsafe extern "C" fn accept(
    fd: c_int,
    addr: *mut sockaddr,
    alen: *mut socklen_t,
    site: usize,
    fp: usize,
) -> c_int {
    accept_common(LibFn::Accept, fd, None, site, fp, || {
        real_or_sys!(ACCEPT, (fd, addr, alen), libc::SYS_accept)
    })
}

/// `accept4`.
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    alen: *mut socklen_t,
    flags: c_int,
    site: usize,
    fp: usize,
) -> c_int {
    accept_common(LibFn::Accept4, fd, Some(flags), site, fp, || {
        real_or_sys!(ACCEPT4, (fd, addr, alen, flags), libc::SYS_accept4)
    })
}

/// `shutdown`.
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int, site: usize) -> c_int {
    let call = Call::enter(
        LibFn::Shutdown,
        site,
        &Small {
            fd: Some(fd),
            flags: Some(how as u32),
            ..Small::default()
        },
    );
    let r: c_int = real_or_sys!(SHUTDOWN, (fd, how), libc::SYS_shutdown);
    let e = errno();
    if let Some(c) = call {
        c.exit(
            &Small {
                fd: Some(fd),
                ret: Some(r as i64),
                errno: (r < 0).then_some(e),
                ..Small::default()
            },
            None,
        );
    }
    r
}

/// `close` (recorded on sockets; every close updates the fd table).
pub unsafe extern "C" fn close(fd: c_int, site: usize) -> c_int {
    let sock = crate::global::pool().is_some() && fdtab::is_socket(fd);
    fdtab::forget(fd);
    if !sock {
        let r: c_int = real_or_sys!(CLOSE, (fd), libc::SYS_close);
        // Again after the real close: a lookup that raced with it may have stored the
        // closing connection's ports (see `fdtab::Ports`). Atomics only: errno is kept.
        fdtab::forget_ports(fd);
        return r;
    }
    let call = Call::enter(LibFn::Close, site, &Small::fd(fd));
    let s = seamed(CallInfo::new(LibFn::Close, fd, 0), || {
        let r: c_int = real_or_sys!(CLOSE, (fd), libc::SYS_close);
        r as i64
    });
    fdtab::forget_ports(fd);
    if let Some(c) = call {
        c.exit(&exit_small(Some(fd), &s), None);
    }
    s.ret as c_int
}

/// `close_range` (not recorded; forgets the closed fds).
pub unsafe extern "C" fn close_range(
    first: c_uint,
    last: c_uint,
    flags: c_int,
    _site: usize,
) -> c_int {
    let r: c_int = real_or_sys!(CLOSE_RANGE, (first, last, flags), libc::SYS_close_range);
    if r == 0 && flags & libc::CLOSE_RANGE_CLOEXEC as c_int == 0 {
        let hi = (last as u64).min(fdtab::TABLE_FDS as u64 - 1);
        for fd in first as u64..=hi {
            fdtab::forget(fd as i32);
        }
    }
    r
}

fn dup_common(
    func: LibFn,
    fd: c_int,
    fd2: Option<c_int>,
    flags: Option<u32>,
    site: usize,
    real: impl FnOnce() -> c_int,
) -> c_int {
    let sock = crate::global::pool().is_some() && fdtab::is_socket(fd);
    let call = if sock {
        Call::enter(
            func,
            site,
            &Small {
                fd: Some(fd),
                fd2,
                flags,
                ..Small::default()
            },
        )
    } else {
        None
    };
    let r = real();
    let e = errno();
    if r >= 0 && Some(r) != Some(fd) {
        fdtab::copy(fd, r);
    }
    if let Some(c) = call {
        c.exit(
            &Small {
                fd: Some(fd),
                ret: Some(r as i64),
                errno: (r < 0).then_some(e),
                ..Small::default()
            },
            None,
        );
    }
    r
}

/// `dup`.
pub unsafe extern "C" fn dup(fd: c_int, site: usize) -> c_int {
    dup_common(LibFn::Dup, fd, None, None, site, || {
        real_or_sys!(DUP, (fd), libc::SYS_dup)
    })
}

/// `dup2`.
pub unsafe extern "C" fn dup2(fd: c_int, fd2: c_int, site: usize) -> c_int {
    dup_common(LibFn::Dup2, fd, Some(fd2), None, site, || {
        real_or_sys!(DUP2, (fd, fd2), libc::SYS_dup2)
    })
}

/// `dup3`.
pub unsafe extern "C" fn dup3(fd: c_int, fd2: c_int, flags: c_int, site: usize) -> c_int {
    dup_common(LibFn::Dup3, fd, Some(fd2), Some(flags as u32), site, || {
        real_or_sys!(DUP3, (fd, fd2, flags), libc::SYS_dup3)
    })
}

/// `fcntl`: `F_DUPFD*` on sockets is recorded; everything else passes.
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: usize, site: usize) -> c_int {
    fcntl_common(&FCNTL, fd, cmd, arg, site)
}

/// `fcntl64`: as `fcntl`.
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: usize, site: usize) -> c_int {
    fcntl_common(&FCNTL64, fd, cmd, arg, site)
}

fn fcntl_common(which: &Real<Fcntl>, fd: c_int, cmd: c_int, arg: usize, site: usize) -> c_int {
    let real = || -> c_int {
        match which.get() {
            // SAFETY: the real variadic fcntl with the program's three arguments.
            Some(f) => unsafe { f(fd, cmd, arg) },
            // SAFETY: the same arguments to the system call.
            None => unsafe { libc::syscall(libc::SYS_fcntl, fd, cmd, arg) as c_int },
        }
    };
    if cmd == libc::F_DUPFD || cmd == libc::F_DUPFD_CLOEXEC {
        return dup_common(LibFn::Fcntl, fd, None, Some(cmd as u32), site, real);
    }
    real()
}

/// `getsockopt`: `SO_ERROR` is recorded (the outcome of a non-blocking connect).
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
    site: usize,
) -> c_int {
    let interesting = level == libc::SOL_SOCKET && name == libc::SO_ERROR;
    let call = if interesting {
        Call::enter(
            LibFn::Getsockopt,
            site,
            &Small {
                fd: Some(fd),
                arg: Some(name as u64),
                ..Small::default()
            },
        )
    } else {
        None
    };
    let r: c_int = real_or_sys!(
        GETSOCKOPT,
        (fd, level, name, val, len),
        libc::SYS_getsockopt
    );
    let e = errno();
    if let Some(c) = call {
        let so_error = if r == 0 && !val.is_null() && !len.is_null() {
            // SAFETY: the call succeeded and wrote `*len` (≥ 4 for SO_ERROR) bytes at `val`.
            unsafe { (*len as usize >= 4).then(|| (val as *const c_int).read_unaligned()) }
        } else {
            None
        };
        c.exit(
            &Small {
                fd: Some(fd),
                ret: Some(r as i64),
                errno: (r < 0).then_some(e),
                arg2: so_error.map(|v| v as u64),
                ..Small::default()
            },
            None,
        );
    }
    r
}
