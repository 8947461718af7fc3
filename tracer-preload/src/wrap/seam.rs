//! The one path every data-moving call takes: record `LibEnter`, ask the fault-injection
//! seam, make the real call, let the seam alter the outcome, record `LibExit`.

use crate::entry::Small;
use crate::inject::{self, CallInfo, Data, Outcome};
use crate::record::Call;
use bufpool::format::LibFn;

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
    let call = Call::enter(c.func, c.site, &enter);
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
        call.exit(
            &Small {
                fd: Some(c.fd),
                ret: Some(ret as i64),
                errno: (ret < 0).then_some(err),
                inject: rule,
                ..Small::default()
            },
            None,
        );
    }
    ret
}
