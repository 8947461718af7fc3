//! The calling thread's tracer state (`struct culprit_thread` of `culprit.h`) and the
//! reentrancy guard around everything the tracer does on a thread.
//!
//! The state lives in initial-exec TLS defined in C by gcc-hooks (`culprit_tls`, so the
//! `-finstrument-functions` hooks reach it without a call); the exported
//! `culprit_thread_state()` is gcc-hooks' too. The Rust side computes the same address
//! inline ([`state`]): the wrappers reach it twice per call.

use core::sync::atomic::{compiler_fence, Ordering};

/// `status`: the thread has not recorded yet (its next event attaches it).
pub const STATUS_NEW: u32 = 0;
/// `status`: attached (a [`bufpool::WriterState::attach`] was done for this thread and process).
pub const STATUS_ATTACHED: u32 = 1;
/// `status`: torn down (thread exit flushed it); nothing more is recorded.
pub const STATUS_DEAD: u32 = 2;

/// `struct culprit_thread` (culprit.h), mirrored once, by gcc-hooks (with its layout
/// asserts); `status` holds one of the `STATUS_*` values above.
pub use gcc_hooks::CulpritThread;

extern "C" {
    /// `culprit_tls` (gcc-hooks/c/hooks.c): hidden, initial-exec TLS in this library.
    /// Only its address is used, through the `asm!` below.
    static culprit_tls: CulpritThread;
}

/// The calling thread's state: `%fs:0` (the thread pointer) plus the variable's
/// initial-exec offset from the GOT — what `culprit_thread_state()` returns, without the
/// two calls.
#[inline(always)]
pub fn state() -> *mut CulpritThread {
    let p: *mut CulpritThread;
    // SAFETY: reads the thread pointer and the GOT slot the linker fills with
    // `culprit_tls`'s TLS offset (R_X86_64_GOTTPOFF); no memory is written. libtrace.so
    // is loaded at start-up, so the variable is in the static TLS block (the C hooks rely
    // on the same model).
    unsafe {
        core::arch::asm!(
            "mov {p}, qword ptr fs:[0]",
            "add {p}, qword ptr [rip + {tls}@GOTTPOFF]",
            p = out(reg) p,
            tls = sym culprit_tls,
            options(pure, readonly, nostack),
        );
    }
    p
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
