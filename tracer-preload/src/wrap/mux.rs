//! Event multiplexers: `select pselect poll ppoll epoll_wait epoll_pwait epoll_pwait2` (with the ready
//! set in the `LibExit` entry) and `epoll_ctl` (which maps epoll data to fds).

use super::seam::{errno, set_errno};
use super::{real_or_enosys, real_or_sys};
use crate::entry::Small;
use crate::inject::{self, CallInfo, Data, Outcome};
use crate::real::*;
use crate::record::Call;
use bufpool::format::{LibFn, ReadyItem, ReadySet};
use core::ffi::c_int;
use libc::{epoll_event, fd_set, nfds_t, pollfd, sigset_t, timespec, timeval};

/// Records and runs one multiplexer call; `ready` builds the ready set from the result.
#[inline(always)]
fn mux_call(
    func: LibFn,
    site: usize,
    fd: i32,
    enter: Small,
    real: impl FnOnce() -> c_int,
    ready: impl FnOnce(c_int) -> ReadySet,
) -> c_int {
    let info = CallInfo::new(func, fd, 0);
    let forced = if inject::enabled() {
        inject::before(&info)
    } else {
        None
    };
    let call = Call::enter(
        func,
        site,
        &Small {
            inject: forced.map(|f| f.rule),
            ..enter
        },
    );
    let (r, e, rule) = match forced {
        Some(f) => {
            if f.ret < 0 {
                set_errno(f.errno);
            }
            (f.ret as c_int, f.errno, Some(f.rule))
        }
        None => {
            let r = real();
            let e = if r < 0 { errno() } else { 0 };
            if inject::enabled() {
                let mut out = Outcome {
                    ret: r as i64,
                    errno: e,
                };
                let rule = inject::after(&info, &mut out, Data::None);
                if rule.is_some() && out.ret < 0 {
                    set_errno(out.errno);
                }
                (out.ret as c_int, out.errno, rule)
            } else {
                (r, e, None)
            }
        }
    };
    if let Some(c) = call {
        let set = if r > 0 { Some(ready(r)) } else { None };
        c.exit(
            &Small {
                fd: (fd >= 0).then_some(fd),
                ret: Some(r as i64),
                errno: (r < 0).then_some(e),
                inject: rule,
                ..Small::default()
            },
            set.as_ref(),
        );
    }
    r
}

fn timeout_ms(tv: *const timeval) -> Option<u64> {
    // SAFETY: the program passes a valid timeval or null to select.
    (!tv.is_null()).then(|| unsafe {
        ((*tv).tv_sec as u64).saturating_mul(1000) + (*tv).tv_usec as u64 / 1000
    })
}

fn timeout_ts(ts: *const timespec) -> Option<u64> {
    // SAFETY: the program passes a valid timespec or null.
    (!ts.is_null()).then(|| unsafe {
        ((*ts).tv_sec as u64).saturating_mul(1000) + (*ts).tv_nsec as u64 / 1_000_000
    })
}

/// The fds set in the result sets of `select`: events 1 read, 4 write, 2 except.
fn select_ready(nfds: c_int, r: *const fd_set, w: *const fd_set, x: *const fd_set) -> ReadySet {
    let mut set = ReadySet::default();
    let n = (nfds.max(0) as usize).min(libc::FD_SETSIZE);
    let words = n.div_ceil(64);
    let word = |s: *const fd_set, i: usize| -> u64 {
        if s.is_null() {
            0
        } else {
            // SAFETY: an fd_set is FD_SETSIZE bits; i < FD_SETSIZE / 64.
            unsafe { (s as *const u64).add(i).read_unaligned() }
        }
    };
    for i in 0..words {
        let (rw, ww, xw) = (word(r, i), word(w, i), word(x, i));
        let mut any = rw | ww | xw;
        while any != 0 {
            let b = any.trailing_zeros() as usize;
            any &= any - 1;
            let fd = i * 64 + b;
            if fd >= n {
                break;
            }
            let bit = 1u64 << b;
            let ev = (rw & bit != 0) as u16
                | ((xw & bit != 0) as u16) << 1
                | ((ww & bit != 0) as u16) << 2;
            set.push(ReadyItem {
                id: fd as u32,
                events: ev,
            });
        }
    }
    set
}

/// `select`.
pub unsafe extern "C" fn select(
    nfds: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    x: *mut fd_set,
    tv: *mut timeval,
    site: usize,
) -> c_int {
    let enter = Small {
        arg: Some(nfds as u64),
        arg2: timeout_ms(tv),
        ..Small::default()
    };
    mux_call(
        LibFn::Select,
        site,
        -1,
        enter,
        || real_or_sys!(SELECT, (nfds, r, w, x, tv), libc::SYS_select),
        |_| select_ready(nfds, r, w, x),
    )
}

/// `pselect`.
pub unsafe extern "C" fn pselect(
    nfds: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    x: *mut fd_set,
    ts: *const timespec,
    mask: *const sigset_t,
    site: usize,
) -> c_int {
    let enter = Small {
        arg: Some(nfds as u64),
        arg2: timeout_ts(ts),
        ..Small::default()
    };
    mux_call(
        LibFn::Pselect,
        site,
        -1,
        enter,
        || real_or_enosys!(PSELECT, (nfds, r, w, x, ts, mask), -1),
        |_| select_ready(nfds, r, w, x),
    )
}

fn poll_ready(fds: *const pollfd, n: nfds_t) -> ReadySet {
    let mut set = ReadySet::default();
    if fds.is_null() {
        return set;
    }
    // SAFETY: the program passed `n` pollfds, which the kernel just wrote.
    let v = unsafe { core::slice::from_raw_parts(fds, n as usize) };
    for p in v.iter().filter(|p| p.revents != 0) {
        set.push(ReadyItem {
            id: p.fd as u32,
            events: p.revents as u16,
        });
    }
    set
}

/// `poll`.
pub unsafe extern "C" fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int, site: usize) -> c_int {
    let enter = Small {
        arg: Some(n),
        arg2: Some(timeout as i64 as u64),
        ..Small::default()
    };
    mux_call(
        LibFn::Poll,
        site,
        -1,
        enter,
        || real_or_sys!(POLL, (fds, n, timeout), libc::SYS_poll),
        |_| poll_ready(fds, n),
    )
}

/// `ppoll`.
pub unsafe extern "C" fn ppoll(
    fds: *mut pollfd,
    n: nfds_t,
    ts: *const timespec,
    mask: *const sigset_t,
    site: usize,
) -> c_int {
    let enter = Small {
        arg: Some(n),
        arg2: timeout_ts(ts),
        ..Small::default()
    };
    mux_call(
        LibFn::Ppoll,
        site,
        -1,
        enter,
        || real_or_enosys!(PPOLL, (fds, n, ts, mask), -1),
        |_| poll_ready(fds, n),
    )
}

fn epoll_ready(ev: *const epoll_event, n: c_int) -> ReadySet {
    let mut set = ReadySet::default();
    if ev.is_null() || n <= 0 {
        return set;
    }
    // SAFETY: the kernel wrote `n` events at `ev` (n is the call's result).
    let v = unsafe { core::slice::from_raw_parts(ev, n as usize) };
    for e in v {
        let (events, data) = (e.events, e.u64);
        set.push(ReadyItem {
            id: data as u32,
            events: events as u16,
        });
    }
    set
}

/// `epoll_wait`.
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    ev: *mut epoll_event,
    max: c_int,
    timeout: c_int,
    site: usize,
) -> c_int {
    let enter = Small {
        fd: Some(epfd),
        arg: Some(max as u64),
        arg2: Some(timeout as i64 as u64),
        ..Small::default()
    };
    mux_call(
        LibFn::EpollWait,
        site,
        epfd,
        enter,
        || real_or_sys!(EPOLL_WAIT, (epfd, ev, max, timeout), libc::SYS_epoll_wait),
        |r| epoll_ready(ev, r),
    )
}

/// `epoll_pwait`.
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    ev: *mut epoll_event,
    max: c_int,
    timeout: c_int,
    mask: *const sigset_t,
    site: usize,
) -> c_int {
    let enter = Small {
        fd: Some(epfd),
        arg: Some(max as u64),
        arg2: Some(timeout as i64 as u64),
        ..Small::default()
    };
    mux_call(
        LibFn::EpollPwait,
        site,
        epfd,
        enter,
        || real_or_enosys!(EPOLL_PWAIT, (epfd, ev, max, timeout, mask), -1),
        |r| epoll_ready(ev, r),
    )
}

/// `epoll_pwait2` (timeout as a timespec; arg2 = timeout in ms).
pub unsafe extern "C" fn epoll_pwait2(
    epfd: c_int,
    ev: *mut epoll_event,
    max: c_int,
    ts: *const timespec,
    mask: *const sigset_t,
    site: usize,
) -> c_int {
    let enter = Small {
        fd: Some(epfd),
        arg: Some(max as u64),
        arg2: timeout_ts(ts),
        ..Small::default()
    };
    mux_call(
        LibFn::EpollPwait2,
        site,
        epfd,
        enter,
        || real_or_enosys!(EPOLL_PWAIT2, (epfd, ev, max, ts, mask), -1),
        |r| epoll_ready(ev, r),
    )
}

/// `epoll_ctl`: fd = epoll fd, fd2 = target fd, flags = op, arg = events, arg2 = data.
pub unsafe extern "C" fn epoll_ctl(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    ev: *mut epoll_event,
    site: usize,
) -> c_int {
    let (events, data) = if ev.is_null() {
        (None, None)
    } else {
        // SAFETY: the program's epoll_event, read by the kernel too.
        let e = unsafe { ev.read_unaligned() };
        (Some(e.events as u64), Some(e.u64))
    };
    let call = Call::enter(
        LibFn::EpollCtl,
        site,
        &Small {
            fd: Some(epfd),
            fd2: Some(fd),
            flags: Some(op as u32),
            arg: events,
            arg2: data,
            ..Small::default()
        },
    );
    let r: c_int = real_or_sys!(EPOLL_CTL, (epfd, op, fd, ev), libc::SYS_epoll_ctl);
    let e = errno();
    if let Some(c) = call {
        c.exit(
            &Small {
                fd: Some(epfd),
                ret: Some(r as i64),
                errno: (r < 0).then_some(e),
                ..Small::default()
            },
            None,
        );
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_sets_become_ready_items() {
        // SAFETY: zeroed fd_sets are empty sets.
        let (mut r, mut w): (fd_set, fd_set) =
            unsafe { (core::mem::zeroed(), core::mem::zeroed()) };
        // SAFETY: fds below FD_SETSIZE on live sets.
        unsafe {
            libc::FD_SET(3, &mut r);
            libc::FD_SET(70, &mut r);
            libc::FD_SET(70, &mut w);
            libc::FD_SET(200, &mut w);
        }
        let s = select_ready(100, &r, &w, core::ptr::null());
        assert_eq!(
            s.items(),
            &[
                ReadyItem { id: 3, events: 1 },
                ReadyItem { id: 70, events: 5 }
            ]
        );
        assert!(!s.truncated);
        let s = select_ready(201, &r, &w, core::ptr::null());
        assert_eq!(s.items().len(), 3);
        assert_eq!(
            select_ready(5000, &r, &w, core::ptr::null()).items().len(),
            3
        );
    }

    #[test]
    fn more_than_sixteen_ready_is_truncated() {
        let fds: Vec<pollfd> = (0..20)
            .map(|i| pollfd {
                fd: i,
                events: 1,
                revents: 1,
            })
            .collect();
        let s = poll_ready(fds.as_ptr(), 20);
        assert_eq!(s.items().len(), 16);
        assert!(s.truncated);
    }
}
