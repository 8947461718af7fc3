//! Process-wide tracer state: the start-up state machine, the mapped pool and the
//! process identity.
//!
//! Start-up is an atomic state machine: `UNINIT → INITIALIZING → ENABLED`, or
//! `→ DISABLED` for good (pool missing or unusable, or an internal error). Only the
//! constructor moves it forward. The pool is written once, before `ENABLED` is
//! published, and never dropped (the mapping outlives every thread of the process).

use bufpool::Pool;
use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Not initialized yet.
pub const UNINIT: u8 = 0;
/// The constructor is running.
pub const INITIALIZING: u8 = 1;
/// Recording.
pub const ENABLED: u8 = 2;
/// Never recording in this process.
pub const DISABLED: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);

/// `culprit_global_enabled` of culprit.h: 1 while recording. Written with `Release`
/// after the pool is stored (pairs with the `Acquire` load in [`pool`]).
#[cfg_attr(not(test), no_mangle)]
#[allow(non_upper_case_globals)]
pub static culprit_global_enabled: AtomicI32 = AtomicI32::new(0);

struct PoolCell(UnsafeCell<MaybeUninit<Pool>>);
// SAFETY: written once by the constructor before `culprit_global_enabled` is set with
// Release; only read afterwards (Acquire), never written again.
unsafe impl Sync for PoolCell {}
static POOL: PoolCell = PoolCell(UnsafeCell::new(MaybeUninit::uninit()));

/// This process's pid (updated in a forked child).
static PID: AtomicU32 = AtomicU32::new(0);
/// This process's start time in clock ticks (updated in a forked child).
static START_TICKS: AtomicU64 = AtomicU64::new(0);

/// The current start-up state.
pub fn state() -> u8 {
    STATE.load(Ordering::Acquire)
}

/// Moves `UNINIT → INITIALIZING`; false if someone else did already.
pub fn begin_init() -> bool {
    STATE
        .compare_exchange(UNINIT, INITIALIZING, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

/// Stores the pool and starts recording.
pub fn enable(pool: Pool) {
    // SAFETY: only the constructor calls this, once, while STATE is INITIALIZING and
    // nobody reads POOL (culprit_global_enabled is still 0).
    unsafe { (*POOL.0.get()).write(pool) };
    STATE.store(ENABLED, Ordering::Release);
    // Release: the pool written above is visible to every Acquire load of the flag.
    culprit_global_enabled.store(1, Ordering::Release);
}

/// Stops recording for good.
pub fn disable() {
    culprit_global_enabled.store(0, Ordering::Relaxed);
    STATE.store(DISABLED, Ordering::Release);
}

/// The pool, if recording is enabled.
#[inline(always)]
pub fn pool() -> Option<&'static Pool> {
    // Acquire pairs with the Release store in `enable`.
    if culprit_global_enabled.load(Ordering::Acquire) == 1 {
        // SAFETY: the flag is only 1 after `enable` wrote the pool, which is never
        // dropped or written again.
        Some(unsafe { (*POOL.0.get()).assume_init_ref() })
    } else {
        None
    }
}

/// The pool even while recording is switched off (after `enable` ran).
pub fn pool_if_initialized() -> Option<&'static Pool> {
    if matches!(state(), ENABLED) {
        // SAFETY: as in `pool`: ENABLED is stored (Release) after the pool is written.
        Some(unsafe { (*POOL.0.get()).assume_init_ref() })
    } else {
        None
    }
}

/// Records this process's identity.
pub fn set_identity(pid: u32, start_ticks: u64) {
    PID.store(pid, Ordering::Relaxed);
    START_TICKS.store(start_ticks, Ordering::Relaxed);
}

/// This process's (pid, start ticks) as last recorded.
pub fn identity() -> (u32, u64) {
    (
        PID.load(Ordering::Relaxed),
        START_TICKS.load(Ordering::Relaxed),
    )
}
