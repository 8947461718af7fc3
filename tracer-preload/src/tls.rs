//! The calling thread's tracer state (`struct culprit_thread` of `culprit.h`) and the
//! reentrancy guard around everything the tracer does on a thread.
//!
//! The state lives in initial-exec TLS defined in C by gcc-hooks (so the
//! `-finstrument-functions` hooks reach it without a call); Rust reaches it through
//! `culprit_thread_state()`. With the `rust-tls` feature the state is defined here
//! instead (used until the C definition is linked in).

use bufpool::WriterState;
use core::sync::atomic::{compiler_fence, Ordering};

/// `status`: the thread has not recorded yet (its next event attaches it).
pub const STATUS_NEW: u32 = 0;
/// `status`: attached (a [`WriterState::attach`] was done for this thread and process).
pub const STATUS_ATTACHED: u32 = 1;
/// `status`: torn down (thread exit flushed it); nothing more is recorded.
pub const STATUS_DEAD: u32 = 2;

/// Mirror of `struct culprit_thread` (culprit.h).
#[repr(C)]
#[derive(Debug)]
pub struct CulpritThread {
    /// The thread's writer (`struct culprit_writer`).
    pub w: WriterState,
    /// Nonzero while the tracer itself runs on this thread.
    pub busy: u32,
    /// One of `STATUS_*`.
    pub status: u32,
    /// C call depth (owned by the gcc hooks).
    pub depth: u32,
    /// Unused.
    pub reserved: u32,
}

const _: () = assert!(core::mem::size_of::<CulpritThread>() == 96);
const _: () = assert!(core::mem::offset_of!(CulpritThread, busy) == 80);

#[cfg(not(feature = "rust-tls"))]
extern "C" {
    /// Defined in C by gcc-hooks: the address of the calling thread's state.
    fn culprit_thread_state() -> *mut CulpritThread;
}

#[cfg(feature = "rust-tls")]
mod rust_tls {
    use super::CulpritThread;
    use core::cell::UnsafeCell;

    thread_local! {
        // `const` initializer and no Drop: no lazy-init flag, no destructor registration,
        // so reaching it never allocates and works during thread teardown.
        static STATE: UnsafeCell<CulpritThread> = const {
            UnsafeCell::new(CulpritThread {
                w: bufpool::WriterState::new(),
                busy: 0,
                status: super::STATUS_NEW,
                depth: 0,
                reserved: 0,
            })
        };
    }

    /// The calling thread's state (never null).
    ///
    /// # Safety
    /// None; `unsafe` only to match the C declaration used without the feature.
    #[cfg_attr(not(test), no_mangle)]
    pub unsafe extern "C" fn culprit_thread_state() -> *mut CulpritThread {
        STATE.with(|s| s.get())
    }
}
#[cfg(feature = "rust-tls")]
use rust_tls::culprit_thread_state;

/// The calling thread's state.
#[inline(always)]
pub fn state() -> *mut CulpritThread {
    // SAFETY: culprit_thread_state has no preconditions and never returns null.
    unsafe { culprit_thread_state() }
}

/// RAII reentrancy guard: while it lives, `busy` is set on this thread, so wrappers and
/// hooks called from inside the tracer (or from a signal handler interrupting it) record
/// nothing.
pub struct Busy {
    t: *mut CulpritThread,
}

impl Busy {
    /// Takes the guard, or `None` if the tracer already runs on this thread.
    #[inline(always)]
    pub fn enter() -> Option<Busy> {
        let t = state();
        // SAFETY: `t` is this thread's own state; only this thread (and signal handlers
        // running on it, which see busy set and back off) touches `busy`.
        unsafe {
            if (*t).busy != 0 {
                return None;
            }
            (*t).busy = 1;
        }
        // A signal handler on this thread must see busy set before we touch the writer.
        compiler_fence(Ordering::SeqCst);
        Some(Busy { t })
    }

    /// The guarded thread state.
    #[inline(always)]
    pub fn thread(&mut self) -> &mut CulpritThread {
        // SAFETY: the guard is held, so nothing else on this thread uses the state until
        // it is dropped; other threads never touch it.
        unsafe { &mut *self.t }
    }
}

impl Drop for Busy {
    #[inline(always)]
    fn drop(&mut self) {
        compiler_fence(Ordering::SeqCst);
        // SAFETY: see `enter`.
        unsafe { (*self.t).busy = 0 };
    }
}
