//! Stopping on SIGINT / SIGTERM: a handler that only stores to atomics
//! (async-signal-safe), read by the daemon's loops.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
/// The last signal received, with [`FROM_TERMINAL`] or'ed in when the kernel sent it on a
/// terminal's behalf.
static PENDING: AtomicI32 = AtomicI32::new(0);
const FROM_TERMINAL: i32 = 1 << 16;

/// A signal as the handler saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// The signal number.
    pub sig: libc::c_int,
    /// Sent by the kernel (`si_code == SI_KERNEL`): a terminal's Ctrl-C, Ctrl-\ or hang-up,
    /// which went to the whole foreground process group. Otherwise a process sent it with
    /// `kill(2)`, to this process alone or to a group: which one cannot be told.
    pub from_terminal: bool,
}

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler; reading its
    // code is async-signal-safe.
    let kernel = !info.is_null() && unsafe { (*info).si_code } == libc::SI_KERNEL;
    PENDING.store(
        sig | if kernel { FROM_TERMINAL } else { 0 },
        Ordering::SeqCst,
    );
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the handler for `signals`. Without `SA_RESTART`, so a blocking `waitpid`
/// returns `EINTR` and the caller sees the signal at once.
pub fn install(signals: &[libc::c_int]) -> std::io::Result<()> {
    type Handler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);
    for &s in signals {
        // SAFETY: a zeroed sigaction is a valid starting point; the handler only stores
        // to atomics, which is async-signal-safe; sigemptyset initializes the mask.
        unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_signal as Handler as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_SIGINFO;
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
pub fn take_pending() -> Option<Received> {
    match PENDING.swap(0, Ordering::SeqCst) {
        0 => None,
        s => Some(Received {
            sig: s & !FROM_TERMINAL,
            from_terminal: s & FROM_TERMINAL != 0,
        }),
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
