//! Stopping on SIGINT / SIGTERM: a handler that only stores to atomics
//! (async-signal-safe), read by the daemon's loops.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    PENDING.store(sig, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the handler for `signals`. Without `SA_RESTART`, so a blocking `waitpid`
/// returns `EINTR` and the caller sees the signal at once.
pub fn install(signals: &[libc::c_int]) -> std::io::Result<()> {
    for &s in signals {
        // SAFETY: a zeroed sigaction is a valid starting point; the handler only stores
        // to atomics, which is async-signal-safe; sigemptyset initializes the mask.
        unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = 0;
            if libc::sigaction(s, &sa, core::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Set once any installed signal arrived.
pub fn stop_flag() -> &'static AtomicBool {
    &STOP
}

/// The last signal received since the previous call, if any.
pub fn take_pending() -> Option<libc::c_int> {
    match PENDING.swap(0, Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Blocks (`true`) or unblocks `signals` in the calling thread. Threads inherit the
/// mask, so blocking before spawning helper threads and unblocking afterwards makes the
/// calling thread the one the signals interrupt (e.g. in a blocking `waitpid`).
pub fn set_blocked(signals: &[libc::c_int], blocked: bool) -> std::io::Result<()> {
    // SAFETY: the set is initialized by sigemptyset before use; pthread_sigmask only
    // changes this thread's mask.
    let r = unsafe {
        let mut set: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        let how = if blocked {
            libc::SIG_BLOCK
        } else {
            libc::SIG_UNBLOCK
        };
        libc::pthread_sigmask(how, &set, core::ptr::null_mut())
    };
    if r != 0 {
        return Err(std::io::Error::from_raw_os_error(r));
    }
    Ok(())
}

static SNAPSHOT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_snapshot(_sig: libc::c_int) {
    SNAPSHOT.store(true, Ordering::SeqCst);
}

/// Makes `SIGUSR1` ask for a snapshot of the flight recorder (read with
/// [`take_snapshot_request`]) instead of ending the process. With `SA_RESTART`: the
/// request is polled, nothing needs interrupting.
pub fn install_snapshot() -> std::io::Result<()> {
    // SAFETY: as in `install`: a zeroed sigaction, a handler that only stores to an
    // atomic, an initialized mask.
    unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = on_snapshot as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = libc::SA_RESTART;
        if libc::sigaction(libc::SIGUSR1, &sa, core::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// True once per `SIGUSR1` received since the last call.
pub fn take_snapshot_request() -> bool {
    SNAPSHOT.swap(false, Ordering::SeqCst)
}
