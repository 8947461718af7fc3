//! The `exec*` family. Every public variant is wrapped (glibc's `execvp` and `execl*`
//! do not go through `execve`), and all of them end in the real `execve`, `execvpe`,
//! `fexecve` or `execveat` with an `envp` that keeps the new image traced
//! (`crate::envp::inject`). The thread's sub-buffer is published before the real call;
//! if the exec fails, the `LibExit` entry goes into a new one.

use super::real_or_enosys;
use super::seam::errno;
use crate::entry::Small;
use crate::envp::{self, Scratch};
use crate::real::*;
use crate::record::{self, Call};
use bufpool::format::{LibFn, LibOpts};
use bufpool::layout::FLAG_PROCESS_EXIT;
use core::ffi::{c_char, c_int, CStr};

extern "C" {
    static environ: *const *const c_char;
}

fn current_environ() -> *const *const c_char {
    // SAFETY: reading the libc global; exec reads it the same way.
    unsafe { environ }
}

fn exec_common(
    func: LibFn,
    site: usize,
    path: *const c_char,
    fd: Option<c_int>,
    envp: *const *const c_char,
    real: impl FnOnce(*const *const c_char) -> c_int,
) -> c_int {
    let call = crate::global::pool().and_then(|_| {
        let mut o = LibOpts {
            fd,
            ..LibOpts::default()
        };
        if !path.is_null() {
            // SAFETY: exec requires a NUL-terminated path.
            o.set_str(unsafe { CStr::from_ptr(path) }.to_bytes());
        }
        Call::enter_full(func, site, &o)
    });
    let injected = if crate::global::pool().is_some() {
        // SAFETY: envp is a NULL-terminated environment array (or null).
        unsafe { envp::inject(envp, bufpool::sys::getpid()) }
    } else {
        None
    };
    record::flush_thread(FLAG_PROCESS_EXIT);
    let env = injected.as_ref().map_or(envp, |(_, p)| *p);
    let r = real(env);
    let e = errno();
    drop(injected);
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

/// `execve`.
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    site: usize,
) -> c_int {
    exec_common(LibFn::Execve, site, path, None, envp, |env| {
        real_or_enosys!(EXECVE, (path, argv, env), -1)
    })
}

/// `execv`.
pub unsafe extern "C" fn execv(
    path: *const c_char,
    argv: *const *const c_char,
    site: usize,
) -> c_int {
    exec_common(LibFn::Execv, site, path, None, current_environ(), |env| {
        real_or_enosys!(EXECVE, (path, argv, env), -1)
    })
}

/// `execvp`.
pub unsafe extern "C" fn execvp(
    file: *const c_char,
    argv: *const *const c_char,
    site: usize,
) -> c_int {
    exec_common(LibFn::Execvp, site, file, None, current_environ(), |env| {
        real_or_enosys!(EXECVPE, (file, argv, env), -1)
    })
}

/// `execvpe`.
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    site: usize,
) -> c_int {
    exec_common(LibFn::Execvpe, site, file, None, envp, |env| {
        real_or_enosys!(EXECVPE, (file, argv, env), -1)
    })
}

/// `fexecve`.
pub unsafe extern "C" fn fexecve(
    fd: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
    site: usize,
) -> c_int {
    exec_common(
        LibFn::Fexecve,
        site,
        core::ptr::null(),
        Some(fd),
        envp,
        |env| real_or_enosys!(FEXECVE, (fd, argv, env), -1),
    )
}

/// `execveat`.
pub unsafe extern "C" fn execveat(
    dirfd: c_int,
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    flags: c_int,
    site: usize,
) -> c_int {
    exec_common(LibFn::Execveat, site, path, Some(dirfd), envp, |env| {
        real_or_enosys!(EXECVEAT, (dirfd, path, argv, env, flags), -1)
    })
}

/// The variadic arguments of `execl*` as the thunk saved them: the five register
/// arguments after `path`, then the caller's stack arguments.
struct VarArgs {
    regs: *const *const c_char,
    stack: *const *const c_char,
}

impl VarArgs {
    /// Argument `i` (0 = `arg0`).
    ///
    /// # Safety
    /// Only arguments up to and including the terminating NULL (and, for `execle`, the
    /// `envp` after it) exist.
    unsafe fn get(&self, i: usize) -> *const c_char {
        // SAFETY: the thunk saved 5 registers; later arguments are on the caller's
        // stack, in order; the caller of `get` stays within the passed arguments.
        unsafe {
            if i < 5 {
                *self.regs.add(i)
            } else {
                *self.stack.add(i - 5)
            }
        }
    }

    /// Collects the NULL-terminated list into a pointer array in `sc`; returns it and
    /// the index of the terminating NULL.
    ///
    /// # Safety
    /// The program passed a NULL-terminated list (what execl requires).
    unsafe fn argv(&self, sc: &mut Option<Scratch>) -> Option<(*const *const c_char, usize)> {
        let mut n = 0usize;
        // SAFETY: stops at the NULL the caller guarantees.
        while !unsafe { self.get(n) }.is_null() {
            n += 1;
            if n > 1 << 20 {
                return None;
            }
        }
        *sc = Scratch::new((n + 1) * core::mem::size_of::<*const c_char>());
        let arr = sc.as_mut()?.ptrs(n + 1)?;
        for (i, slot) in arr.iter_mut().enumerate().take(n) {
            // SAFETY: i < n, inside the list.
            *slot = unsafe { self.get(i) };
        }
        Some((arr.as_ptr(), n))
    }
}

fn fail_e2big() -> c_int {
    super::seam::set_errno(libc::E2BIG);
    -1
}

/// `execl` (called by its thunk with the variadic arguments saved).
pub unsafe extern "C" fn execl(
    path: *const c_char,
    regs: *const *const c_char,
    stack: *const *const c_char,
    site: usize,
) -> c_int {
    let va = VarArgs { regs, stack };
    let mut sc = None;
    // SAFETY: execl's contract: a NULL-terminated list.
    let Some((argv, _)) = (unsafe { va.argv(&mut sc) }) else {
        return fail_e2big();
    };
    exec_common(LibFn::Execl, site, path, None, current_environ(), |env| {
        real_or_enosys!(EXECVE, (path, argv, env), -1)
    })
}

/// `execlp`.
pub unsafe extern "C" fn execlp(
    file: *const c_char,
    regs: *const *const c_char,
    stack: *const *const c_char,
    site: usize,
) -> c_int {
    let va = VarArgs { regs, stack };
    let mut sc = None;
    // SAFETY: execlp's contract: a NULL-terminated list.
    let Some((argv, _)) = (unsafe { va.argv(&mut sc) }) else {
        return fail_e2big();
    };
    exec_common(LibFn::Execlp, site, file, None, current_environ(), |env| {
        real_or_enosys!(EXECVPE, (file, argv, env), -1)
    })
}

/// `execle`.
pub unsafe extern "C" fn execle(
    path: *const c_char,
    regs: *const *const c_char,
    stack: *const *const c_char,
    site: usize,
) -> c_int {
    let va = VarArgs { regs, stack };
    let mut sc = None;
    // SAFETY: execle's contract: a NULL-terminated list followed by envp.
    let Some((argv, n)) = (unsafe { va.argv(&mut sc) }) else {
        return fail_e2big();
    };
    // SAFETY: the argument after the terminating NULL is envp.
    let envp = unsafe { va.get(n + 1) } as *const *const c_char;
    exec_common(LibFn::Execle, site, path, None, envp, |env| {
        real_or_enosys!(EXECVE, (path, argv, env), -1)
    })
}
