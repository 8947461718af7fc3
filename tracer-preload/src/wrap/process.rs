//! Process life cycle: `fork vfork daemon posix_spawn(p) exit _exit _Exit`.
//!
//! `vfork` is implemented as `fork`: a wrapper cannot return into a caller whose stack
//! the child shares. Programs that use vfork as the standard says (exec or `_exit` next)
//! behave the same, only the copy is not avoided.

use super::seam::errno;
use super::{real_or_enosys, real_or_sys};
use crate::entry::Small;
use crate::real::*;
use crate::record::{self, Call};
use bufpool::format::{LibFn, LibOpts};
use bufpool::layout::FLAG_PROCESS_EXIT;
use core::ffi::{c_char, c_int, CStr};
use libc::{pid_t, posix_spawn_file_actions_t, posix_spawnattr_t};

fn fork_like(func: LibFn, site: usize) -> pid_t {
    let call = Call::enter(func, site, &Small::default());
    let r: pid_t = real_or_sys!(FORK, (), libc::SYS_fork);
    let e = errno();
    if r == 0 {
        // Normally done already by the atfork handler; needed after the raw fallback.
        crate::lifecycle::after_fork_in_child();
    }
    if let Some(c) = call {
        c.exit(
            &Small {
                ret: Some(r as i64),
                errno: (r < 0).then_some(e),
                ..Small::default()
            },
            None,
        );
    }
    r
}

/// `fork`.
pub unsafe extern "C" fn fork(site: usize) -> pid_t {
    fork_like(LibFn::Fork, site)
}

/// `vfork` (as `fork`, see the module docs).
pub unsafe extern "C" fn vfork(site: usize) -> pid_t {
    fork_like(LibFn::Vfork, site)
}

/// `daemon`: the entry is recorded in the caller, which `daemon` ends; the exit in the
/// daemon process (a fork child, attached afresh).
pub unsafe extern "C" fn daemon(nochdir: c_int, noclose: c_int, site: usize) -> c_int {
    let call = Call::enter(
        LibFn::Daemon,
        site,
        &Small {
            arg: Some(nochdir as u64),
            arg2: Some(noclose as u64),
            ..Small::default()
        },
    );
    // The parent ends inside daemon() with an unwrapped _exit: publish what it has.
    record::flush_thread(FLAG_PROCESS_EXIT);
    let r = real_or_enosys!(DAEMON, (nochdir, noclose), -1);
    let e = errno();
    if let Some(c) = call {
        c.exit(
            &Small {
                ret: Some(r as i64),
                errno: (r < 0).then_some(e),
                ..Small::default()
            },
            None,
        );
    }
    r
}

fn spawn_common(
    func: LibFn,
    site: usize,
    pid: *mut pid_t,
    path: *const c_char,
    envp: *const *const c_char,
    real: impl FnOnce(*const *const c_char) -> c_int,
) -> c_int {
    let call = crate::global::pool().and_then(|_| {
        let mut o = LibOpts::default();
        if !path.is_null() {
            // SAFETY: posix_spawn requires a NUL-terminated path.
            o.set_str(unsafe { CStr::from_ptr(path) }.to_bytes());
        }
        Call::enter_full(func, site, &o)
    });
    let injected = if crate::global::pool().is_some() {
        // SAFETY: envp is the program's NULL-terminated environment array (or null).
        unsafe { crate::envp::inject(envp, bufpool::sys::getpid()) }
    } else {
        None
    };
    let env = injected.as_ref().map_or(envp, |(_, p)| *p);
    let r = real(env);
    drop(injected);
    if let Some(c) = call {
        let child = if r == 0 && !pid.is_null() {
            // SAFETY: on success posix_spawn wrote the child's pid to *pid.
            Some(unsafe { *pid } as u64)
        } else {
            None
        };
        // posix_spawn returns an error number instead of setting errno.
        c.exit(
            &Small {
                ret: Some(r as i64),
                errno: (r != 0).then_some(r),
                arg: child,
                ..Small::default()
            },
            None,
        );
    }
    r
}

/// `posix_spawn`.
pub unsafe extern "C" fn posix_spawn(
    pid: *mut pid_t,
    path: *const c_char,
    fa: *const posix_spawn_file_actions_t,
    attr: *const posix_spawnattr_t,
    argv: *const *const c_char,
    envp: *const *const c_char,
    site: usize,
) -> c_int {
    spawn_common(LibFn::PosixSpawn, site, pid, path, envp, |env| {
        real_or_enosys!(POSIX_SPAWN, (pid, path, fa, attr, argv, env), libc::ENOSYS)
    })
}

/// `posix_spawnp`.
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut pid_t,
    file: *const c_char,
    fa: *const posix_spawn_file_actions_t,
    attr: *const posix_spawnattr_t,
    argv: *const *const c_char,
    envp: *const *const c_char,
    site: usize,
) -> c_int {
    spawn_common(LibFn::PosixSpawnp, site, pid, file, envp, |env| {
        real_or_enosys!(POSIX_SPAWNP, (pid, file, fa, attr, argv, env), libc::ENOSYS)
    })
}

fn exit_like(func: LibFn, status: c_int, site: usize, real: &Real<Exit>) -> ! {
    // Only the entry: the call does not return.
    let _ = Call::enter(
        func,
        site,
        &Small {
            arg: Some(status as u64),
            ..Small::default()
        },
    );
    record::flush_thread(FLAG_PROCESS_EXIT);
    if let Some(f) = real.get() {
        // SAFETY: the real exit function; it does not return.
        unsafe { f(status) };
    }
    loop {
        // SAFETY: exit_group ends the process; it has no memory arguments.
        unsafe { libc::syscall(libc::SYS_exit_group, status as libc::c_long) };
    }
}

/// `exit`: the entry is recorded and the thread's sub-buffer published first. (Atexit
/// handlers that call wrapped functions afterwards are recorded in a new sub-buffer,
/// published by the library destructor.)
pub unsafe extern "C" fn exit(status: c_int, site: usize) -> ! {
    exit_like(LibFn::Exit, status, site, &EXIT)
}

/// `_exit`.
pub unsafe extern "C" fn u_exit(status: c_int, site: usize) -> ! {
    exit_like(LibFn::UExit, status, site, &UEXIT)
}

/// `_Exit`.
pub unsafe extern "C" fn u_exit_c(status: c_int, site: usize) -> ! {
    exit_like(LibFn::UExitC, status, site, &UEXITC)
}
