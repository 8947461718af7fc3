//! The wrappers' implementations: each takes the real call's arguments plus the call
//! site (and, for connection setup, the caller's frame pointer) from its thunk in
//! `exports.rs`, and hands the call to the recording layer (`record`) through the
//! fault-injection seam (`seam`). Wrappers are thin: argument digests in, real call,
//! result digests out.

// Every wrapper has the safety contract of the libc function of the same name (its
// trailing `site`/`fp` arguments come from the thunk).
#![allow(clippy::missing_safety_doc)]

pub mod dl;
pub mod exec;
pub mod io;
pub mod mux;
pub mod process;
pub mod seam;
pub mod sock;

/// Calls the real function, or issues the system call if it is not resolved (a wrapper
/// reached while `dlsym` runs on this thread, before the constructor).
macro_rules! real_or_sys {
    ($real:expr, ($($a:expr),*), $sys:expr) => {
        $crate::wrap::real_or_sys!($real, ($($a),*), $sys, ($($a),*))
    };
    ($real:expr, ($($a:expr),*), $sys:expr, ($($s:expr),*)) => {
        match $real.get() {
            // SAFETY: the real libc function, called with the wrapper's own arguments.
            Some(f) => (unsafe { f($($a),*) }) as _,
            // SAFETY: the same arguments, given to the system call the function wraps.
            None => (unsafe { libc::syscall($sys, $($s as libc::c_long),*) }) as _,
        }
    };
}
pub(crate) use real_or_sys;

/// Calls the real function, or fails with ENOSYS if it cannot be resolved.
macro_rules! real_or_enosys {
    ($real:expr, ($($a:expr),*), $fail:expr) => {
        match $real.get() {
            // SAFETY: the real libc function, called with the wrapper's own arguments.
            Some(f) => unsafe { f($($a),*) },
            None => {
                $crate::wrap::seam::set_errno(libc::ENOSYS);
                $fail
            }
        }
    };
}
pub(crate) use real_or_enosys;
