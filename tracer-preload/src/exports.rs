//! Every libc symbol `libtrace.so` interposes, in one list.
//!
//! Each is a naked thunk: it loads its return address (`[rsp]`, the call site) into the
//! first argument register the function does not use — and for connection setup the
//! caller's frame pointer into the next one — then jumps to the implementation in
//! `wrap::*`, which takes those as extra trailing arguments. Functions with six
//! arguments pass the site on the stack instead (a 24-byte frame keeps the 16-byte
//! alignment). `execl*` save their variadic register arguments in a small frame and pass
//! pointers to them and to the caller's stack arguments.
//!
//! In the crate's own unit tests nothing is exported (`cfg_attr(not(test), no_mangle)`),
//! so the test binary does not interpose on itself.

#![allow(non_snake_case)]
// Every thunk has the safety contract of the libc function of the same name.
#![allow(clippy::missing_safety_doc)]

use crate::wrap::{dl, exec, io, mux, process, sock};
use core::ffi::{c_char, c_int, c_uint, c_void};
use libc::{
    epoll_event, fd_set, iovec, mmsghdr, msghdr, nfds_t, pid_t, pollfd, posix_spawn_file_actions_t,
    posix_spawnattr_t, sigset_t, size_t, sockaddr, socklen_t, ssize_t, timespec, timeval,
};

/// A thunk passing the call site in register `$site`.
macro_rules! site_in {
    ($name:ident, $site:literal, $imp:path, ($($a:ident: $t:ty),*) -> $r:ty) => {
        #[doc = concat!("Interposed `", stringify!($name), "` (see the module docs).")]
        #[unsafe(naked)]
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $r {
            core::arch::naked_asm!(
                concat!("mov ", $site, ", qword ptr [rsp]"),
                "jmp {f}",
                f = sym $imp,
            )
        }
    };
}

/// A thunk passing the call site in `$site` and the caller's frame pointer in `$fp`.
macro_rules! site_fp_in {
    ($name:ident, $site:literal, $fp:literal, $imp:path, ($($a:ident: $t:ty),*) -> $r:ty) => {
        #[doc = concat!("Interposed `", stringify!($name), "` (see the module docs).")]
        #[unsafe(naked)]
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $r {
            core::arch::naked_asm!(
                concat!("mov ", $site, ", qword ptr [rsp]"),
                concat!("mov ", $fp, ", rbp"),
                "jmp {f}",
                f = sym $imp,
            )
        }
    };
}

/// A thunk for six-argument functions: the site is passed as the 7th (stack) argument.
macro_rules! site_on_stack {
    ($name:ident, $imp:path, ($($a:ident: $t:ty),*) -> $r:ty) => {
        #[doc = concat!("Interposed `", stringify!($name), "` (see the module docs).")]
        #[unsafe(naked)]
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $r {
            core::arch::naked_asm!(
                "sub rsp, 24",
                "mov rax, qword ptr [rsp + 24]",
                "mov qword ptr [rsp], rax",
                "call {f}",
                "add rsp, 24",
                "ret",
                f = sym $imp,
            )
        }
    };
}

/// A thunk for `execl*`: saves the five register arguments after `path`, passes
/// (path, &saved, &stack_args, site).
macro_rules! varargs_exec {
    ($name:ident, $imp:path) => {
        #[doc = concat!("Interposed `", stringify!($name), "` (see the module docs).")]
        #[unsafe(naked)]
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name(path: *const c_char, arg0: *const c_char) -> c_int {
            core::arch::naked_asm!(
                "mov rax, qword ptr [rsp]",
                "lea r10, [rsp + 8]",
                "sub rsp, 56",
                "mov qword ptr [rsp], rsi",
                "mov qword ptr [rsp + 8], rdx",
                "mov qword ptr [rsp + 16], rcx",
                "mov qword ptr [rsp + 24], r8",
                "mov qword ptr [rsp + 32], r9",
                "mov rsi, rsp",
                "mov rdx, r10",
                "mov rcx, rax",
                "call {f}",
                "add rsp, 56",
                "ret",
                f = sym $imp,
            )
        }
    };
}

// Sockets.
site_in!(socket, "rcx", sock::socket, (d: c_int, t: c_int, p: c_int) -> c_int);
site_in!(socketpair, "r8", sock::socketpair, (d: c_int, t: c_int, p: c_int, sv: *mut c_int) -> c_int);
site_fp_in!(bind, "rcx", "r8", sock::bind, (fd: c_int, a: *const sockaddr, l: socklen_t) -> c_int);
site_fp_in!(listen, "rdx", "rcx", sock::listen, (fd: c_int, backlog: c_int) -> c_int);
site_fp_in!(accept, "rcx", "r8", sock::accept, (fd: c_int, a: *mut sockaddr, l: *mut socklen_t) -> c_int);
site_fp_in!(accept4, "r8", "r9", sock::accept4, (fd: c_int, a: *mut sockaddr, l: *mut socklen_t, f: c_int) -> c_int);
site_fp_in!(connect, "rcx", "r8", sock::connect, (fd: c_int, a: *const sockaddr, l: socklen_t) -> c_int);
site_in!(shutdown, "rdx", sock::shutdown, (fd: c_int, how: c_int) -> c_int);
site_in!(close, "rsi", sock::close, (fd: c_int) -> c_int);
site_in!(close_range, "rcx", sock::close_range, (a: c_uint, b: c_uint, f: c_int) -> c_int);
site_in!(dup, "rsi", sock::dup, (fd: c_int) -> c_int);
site_in!(dup2, "rdx", sock::dup2, (fd: c_int, fd2: c_int) -> c_int);
site_in!(dup3, "rcx", sock::dup3, (fd: c_int, fd2: c_int, f: c_int) -> c_int);
site_in!(fcntl, "rcx", sock::fcntl, (fd: c_int, cmd: c_int, arg: usize) -> c_int);
site_in!(fcntl64, "rcx", sock::fcntl64, (fd: c_int, cmd: c_int, arg: usize) -> c_int);
site_in!(getsockopt, "r9", sock::getsockopt,
    (fd: c_int, lv: c_int, n: c_int, v: *mut c_void, l: *mut socklen_t) -> c_int);

// Data transfer.
site_in!(send, "r8", io::send, (fd: c_int, b: *const c_void, n: size_t, f: c_int) -> ssize_t);
site_on_stack!(sendto, io::sendto,
    (fd: c_int, b: *const c_void, n: size_t, f: c_int, a: *const sockaddr, l: socklen_t) -> ssize_t);
site_in!(sendmsg, "rcx", io::sendmsg, (fd: c_int, m: *const msghdr, f: c_int) -> ssize_t);
site_in!(recv, "r8", io::recv, (fd: c_int, b: *mut c_void, n: size_t, f: c_int) -> ssize_t);
site_on_stack!(recvfrom, io::recvfrom,
    (fd: c_int, b: *mut c_void, n: size_t, f: c_int, a: *mut sockaddr, l: *mut socklen_t) -> ssize_t);
site_in!(recvmsg, "rcx", io::recvmsg, (fd: c_int, m: *mut msghdr, f: c_int) -> ssize_t);
site_in!(sendmmsg, "r8", io::sendmmsg, (fd: c_int, v: *mut mmsghdr, n: c_uint, f: c_int) -> c_int);
site_in!(recvmmsg, "r9", io::recvmmsg,
    (fd: c_int, v: *mut mmsghdr, n: c_uint, f: c_int, t: *mut timespec) -> c_int);
site_in!(read, "rcx", io::read, (fd: c_int, b: *mut c_void, n: size_t) -> ssize_t);
site_in!(__read_chk, "r8", io::read_chk, (fd: c_int, b: *mut c_void, n: size_t, bl: size_t) -> ssize_t);
site_in!(__recv_chk, "r9", io::recv_chk,
    (fd: c_int, b: *mut c_void, n: size_t, bl: size_t, f: c_int) -> ssize_t);
site_in!(write, "rcx", io::write, (fd: c_int, b: *const c_void, n: size_t) -> ssize_t);
site_in!(readv, "rcx", io::readv, (fd: c_int, v: *const iovec, n: c_int) -> ssize_t);
site_in!(writev, "rcx", io::writev, (fd: c_int, v: *const iovec, n: c_int) -> ssize_t);

// Event multiplexing.
site_in!(select, "r9", mux::select,
    (n: c_int, r: *mut fd_set, w: *mut fd_set, x: *mut fd_set, t: *mut timeval) -> c_int);
site_on_stack!(pselect, mux::pselect,
    (n: c_int, r: *mut fd_set, w: *mut fd_set, x: *mut fd_set, t: *const timespec, m: *const sigset_t) -> c_int);
site_in!(poll, "rcx", mux::poll, (f: *mut pollfd, n: nfds_t, t: c_int) -> c_int);
site_in!(ppoll, "r8", mux::ppoll, (f: *mut pollfd, n: nfds_t, t: *const timespec, m: *const sigset_t) -> c_int);
site_in!(epoll_wait, "r8", mux::epoll_wait, (e: c_int, ev: *mut epoll_event, n: c_int, t: c_int) -> c_int);
site_in!(epoll_pwait, "r9", mux::epoll_pwait,
    (e: c_int, ev: *mut epoll_event, n: c_int, t: c_int, m: *const sigset_t) -> c_int);
site_in!(epoll_pwait2, "r9", mux::epoll_pwait2,
    (e: c_int, ev: *mut epoll_event, n: c_int, t: *const timespec, m: *const sigset_t) -> c_int);
site_in!(epoll_ctl, "r8", mux::epoll_ctl, (e: c_int, op: c_int, fd: c_int, ev: *mut epoll_event) -> c_int);

// Processes.
site_in!(fork, "rdi", process::fork, () -> pid_t);
site_in!(vfork, "rdi", process::vfork, () -> pid_t);
site_in!(daemon, "rdx", process::daemon, (nochdir: c_int, noclose: c_int) -> c_int);
site_on_stack!(posix_spawn, process::posix_spawn,
    (pid: *mut pid_t, p: *const c_char, fa: *const posix_spawn_file_actions_t,
     at: *const posix_spawnattr_t, argv: *const *const c_char, envp: *const *const c_char) -> c_int);
site_on_stack!(posix_spawnp, process::posix_spawnp,
    (pid: *mut pid_t, p: *const c_char, fa: *const posix_spawn_file_actions_t,
     at: *const posix_spawnattr_t, argv: *const *const c_char, envp: *const *const c_char) -> c_int);
site_in!(exit, "rsi", process::exit, (status: c_int) -> !);
site_in!(_exit, "rsi", process::u_exit, (status: c_int) -> !);
site_in!(_Exit, "rsi", process::u_exit_c, (status: c_int) -> !);

// Exec.
site_in!(execve, "rcx", exec::execve,
    (p: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int);
site_in!(execv, "rdx", exec::execv, (p: *const c_char, argv: *const *const c_char) -> c_int);
site_in!(execvp, "rdx", exec::execvp, (p: *const c_char, argv: *const *const c_char) -> c_int);
site_in!(execvpe, "rcx", exec::execvpe,
    (p: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int);
site_in!(fexecve, "rcx", exec::fexecve,
    (fd: c_int, argv: *const *const c_char, envp: *const *const c_char) -> c_int);
site_in!(execveat, "r9", exec::execveat,
    (d: c_int, p: *const c_char, argv: *const *const c_char, envp: *const *const c_char, f: c_int) -> c_int);
varargs_exec!(execl, exec::execl);
varargs_exec!(execlp, exec::execlp);
varargs_exec!(execle, exec::execle);

// Dynamic loading.
site_in!(dlopen, "rdx", dl::dlopen, (f: *const c_char, mode: c_int) -> *mut c_void);
