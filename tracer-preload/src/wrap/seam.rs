//! The one path every data-moving call takes: record `LibEnter`, ask the fault-injection
//! seam, make the real call, let the seam alter the outcome, record `LibExit`.

use crate::entry::Small;
use crate::inject::{self, CallInfo, Data, Outcome};
use crate::record::Call;
use bufpool::format::{Addr, LibFn, LibOpts};
use libc::{msghdr, sockaddr, socklen_t};

/// The calling thread's errno.
#[inline(always)]
pub fn errno() -> i32 {
    // SAFETY: __errno_location always returns this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's errno.
#[inline(always)]
pub fn set_errno(e: i32) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = e };
}

/// A data-path call: fd, requested length, flags.
pub struct DataCall {
    /// The function.
    pub func: LibFn,
    /// Call site.
    pub site: usize,
    /// The fd.
    pub fd: i32,
    /// Bytes requested.
    pub len: u64,
    /// Flags argument, if the function has one.
    pub flags: Option<u32>,
    /// The datagram address argument, recorded on the exit entry when there is one.
    pub addr: AddrArg,
}

/// The address argument of a datagram call. Wrappers without one pass [`AddrArg::None`]
/// (a constant: the exit path compiles to what it was without addresses). With a non-null
/// address, the `LibExit` entry carries it as the `Peer` option (a send's destination, a
/// receive's source, read after the call returned) and, on the first send of the fd with
/// an address, the socket's local address as `Local` (see `fdtab::name_once`).
#[derive(Clone, Copy)]
pub enum AddrArg {
    /// No address argument.
    None,
    /// `sendto`'s destination and its length.
    To(*const sockaddr, socklen_t),
    /// `recvfrom`'s source buffer, its length pointer, and the buffer size at entry.
    From(*const sockaddr, *const socklen_t, socklen_t),
    /// `sendmsg`'s message (its `msg_name`).
    SendMsg(*const msghdr),
    /// `recvmsg`'s message (its `msg_name`) and the name buffer size at entry.
    RecvMsg(*const msghdr, socklen_t),
}

impl AddrArg {
    /// `sendto`'s destination (none when null).
    #[inline(always)]
    pub fn to(addr: *const sockaddr, len: socklen_t) -> AddrArg {
        if addr.is_null() {
            AddrArg::None
        } else {
            AddrArg::To(addr, len)
        }
    }

    /// `sendmsg`'s `msg_name` (none when null or empty).
    ///
    /// # Safety
    /// `msg` is null or the program's `msghdr` given to the call.
    #[inline(always)]
    pub unsafe fn send_msg(msg: *const msghdr) -> AddrArg {
        if msg.is_null() {
            return AddrArg::None;
        }
        // SAFETY: the program's msghdr, which the kernel reads as well.
        let m = unsafe { &*msg };
        if m.msg_name.is_null() || m.msg_namelen == 0 {
            return AddrArg::None;
        }
        AddrArg::SendMsg(msg)
    }

    /// `recvfrom`'s source argument, with the buffer size read before the call.
    ///
    /// # Safety
    /// `len` is null or the program's `socklen_t` pointer given to the call.
    #[inline(always)]
    pub unsafe fn from(addr: *mut sockaddr, len: *mut socklen_t) -> AddrArg {
        if addr.is_null() || len.is_null() {
            return AddrArg::None;
        }
        // SAFETY: the program's length pointer, which the kernel reads as well.
        AddrArg::From(addr, len, unsafe { *len })
    }

    /// `recvmsg`'s `msg_name`, with its buffer size read before the call.
    ///
    /// # Safety
    /// `msg` is null or the program's `msghdr` given to the call.
    #[inline(always)]
    pub unsafe fn recv_msg(msg: *const msghdr) -> AddrArg {
        if msg.is_null() {
            return AddrArg::None;
        }
        // SAFETY: the program's msghdr, which the kernel reads as well.
        let m = unsafe { &*msg };
        if m.msg_name.is_null() || m.msg_namelen == 0 {
            return AddrArg::None;
        }
        AddrArg::RecvMsg(msg, m.msg_namelen)
    }

    /// The (local, peer) options of the exit entry, if the call has an address.
    #[inline(always)]
    fn read(self, fd: i32, ret: isize) -> Option<(Option<Addr>, Option<Addr>)> {
        match self {
            AddrArg::None => None,
            a => a.read_cold(fd, ret),
        }
    }

    #[cold]
    #[inline(never)]
    fn read_cold(self, fd: i32, ret: isize) -> Option<(Option<Addr>, Option<Addr>)> {
        let peer = match self {
            AddrArg::None => None,
            // SAFETY: the destination the program passed (`len` bytes), unchanged by the call.
            AddrArg::To(a, len) => unsafe { crate::sysx::addr_from(a, len) },
            AddrArg::SendMsg(m) => {
                // SAFETY: the program's msghdr, read by the kernel during the call.
                let m = unsafe { &*m };
                // SAFETY: `msg_namelen` bytes at `msg_name`, as the kernel read them.
                unsafe { crate::sysx::addr_from(m.msg_name as *const sockaddr, m.msg_namelen) }
            }
            // The kernel writes the full address length; it filled at most the buffer.
            // SAFETY: after a successful call, the kernel wrote the source at `a` and its
            // length at `len` (the program's pointers).
            AddrArg::From(a, len, cap) if ret >= 0 => unsafe {
                crate::sysx::addr_from(a, (*len).min(cap))
            },
            AddrArg::RecvMsg(m, cap) if ret >= 0 => {
                // SAFETY: the program's msghdr, whose name fields the kernel just wrote.
                let m = unsafe { &*m };
                // SAFETY: as above, at most the buffer size given at entry.
                unsafe {
                    crate::sysx::addr_from(m.msg_name as *const sockaddr, m.msg_namelen.min(cap))
                }
            }
            AddrArg::From(..) | AddrArg::RecvMsg(..) => None,
        };
        peer?;
        let sending = matches!(self, AddrArg::To(..) | AddrArg::SendMsg(_));
        let local = if sending && ret >= 0 && crate::fdtab::name_once(fd) {
            crate::sysx::sock_addr(fd, false)
        } else {
            None
        };
        Some((local, peer))
    }
}

/// Records `LibEnter` of the first data call on an fd the trace does not describe (not
/// seen made: inherited across `exec`, or the trace began late), once per fd: with
/// `IsSocket` = 1, the socket's `Local` and `Peer` addresses and, for TCP, `Arg` = bytes the
/// program had read and `Arg2` = bytes it had written on the connection before this call
/// (see `sysx::tcp_offsets`). errno is preserved (each query holds an `ErrnoGuard`).
#[cold]
#[inline(never)]
fn enter_first_sight(func: LibFn, site: usize, enter: &Small) -> Option<Call> {
    let fd = enter.fd.unwrap_or(-1);
    if crate::global::pool().is_none()
        || !crate::fdtab::describe_once(fd)
        || !crate::fdtab::is_socket(fd)
    {
        return Call::enter(func, site, enter);
    }
    let offsets = crate::sysx::tcp_offsets(fd);
    Call::enter_full(
        func,
        site,
        &LibOpts {
            fd: enter.fd,
            len: enter.len,
            flags: enter.flags,
            inject: enter.inject,
            is_socket: Some(true),
            local: crate::sysx::sock_addr(fd, false),
            peer: crate::sysx::sock_addr(fd, true),
            arg: offsets.map(|o| o.0),
            arg2: offsets.map(|o| o.1),
            ..LibOpts::default()
        },
    )
}

/// Runs a data-path call through recording and the fault-injection seam. `real` makes
/// the real call, moving at most the given number of bytes (`usize::MAX`: as asked;
/// less when a `short` fault is injected); `data` describes the bytes it moved given its
/// return value.
#[inline(always)]
pub fn data_call(
    c: DataCall,
    data: impl FnOnce(isize) -> Data,
    real: impl FnOnce(usize) -> isize,
) -> isize {
    let info = CallInfo::new(c.func, c.fd, c.len);
    let forced = if inject::enabled() {
        inject::before(&info)
    } else {
        None
    };
    let enter = Small {
        fd: Some(c.fd),
        len: Some(c.len),
        flags: c.flags,
        inject: forced.map(|f| f.rule),
        ..Small::default()
    };
    let call = if crate::fdtab::described(c.fd) {
        Call::enter(c.func, c.site, &enter)
    } else {
        enter_first_sight(c.func, c.site, &enter)
    };
    let (ret, err, rule) = match forced {
        Some(f) => {
            let r = f.ret as isize;
            if r < 0 {
                set_errno(f.errno);
            }
            (r, f.errno, Some(f.rule))
        }
        None => {
            let r = real(if inject::enabled() {
                inject::limit(&info)
            } else {
                usize::MAX
            });
            let e = if r < 0 { errno() } else { 0 };
            if inject::enabled() {
                let mut out = Outcome {
                    ret: r as i64,
                    errno: e,
                };
                let rule = inject::after(&info, &mut out, data(r));
                if rule.is_some() && out.ret < 0 {
                    set_errno(out.errno);
                }
                (out.ret as isize, out.errno, rule)
            } else {
                (r, e, None)
            }
        }
    };
    if let Some(call) = call {
        let exit = Small {
            fd: Some(c.fd),
            ret: Some(ret as i64),
            errno: (ret < 0).then_some(err),
            inject: rule,
            ..Small::default()
        };
        match c.addr.read(c.fd, ret) {
            None => call.exit(&exit, None),
            Some((local, peer)) => call.exit_full(&LibOpts {
                fd: exit.fd,
                ret: exit.ret,
                errno: exit.errno,
                inject: exit.inject,
                local,
                peer,
                ..LibOpts::default()
            }),
        }
    }
    ret
}
