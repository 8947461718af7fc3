//! The real libc functions behind the wrappers, resolved with `dlsym(RTLD_NEXT, …)`.
//!
//! Resolution is lazy (a wrapper may run before the constructor, e.g. from another
//! preloaded library's constructor) and guarded: `dlsym` may allocate or call back into a
//! wrapper; a wrapper reached while a resolution runs on the same thread gets `None` and
//! falls back to the raw system call. The constructor resolves everything up front.

use core::ffi::{c_char, c_int, c_uint, c_void, CStr};
use core::marker::PhantomData;
use core::sync::atomic::{AtomicUsize, Ordering};
use libc::{
    epoll_event, fd_set, iovec, mmsghdr, msghdr, nfds_t, pid_t, pollfd, posix_spawn_file_actions_t,
    posix_spawnattr_t, sigset_t, size_t, sockaddr, socklen_t, ssize_t, timespec, timeval,
};

/// A lazily resolved function pointer of type `F`.
pub struct Real<F> {
    name: &'static CStr,
    ptr: AtomicUsize,
    _f: PhantomData<F>,
}

// SAFETY: the only state is an atomic word; F is a plain function pointer type.
unsafe impl<F> Sync for Real<F> {}

impl<F: Copy> Real<F> {
    /// An unresolved entry for symbol `name`.
    pub const fn new(name: &'static CStr) -> Real<F> {
        Real {
            name,
            ptr: AtomicUsize::new(0),
            _f: PhantomData,
        }
    }

    /// The real function, or `None` if it cannot be resolved right now.
    #[inline(always)]
    pub fn get(&self) -> Option<F> {
        // Relaxed: the pointer value is all there is; the code it points to is mapped.
        let p = self.ptr.load(Ordering::Relaxed);
        if p != 0 {
            // SAFETY: F is a function pointer type of the symbol's real signature
            // (declared in the table below), and `p` is that symbol's address.
            Some(unsafe { core::mem::transmute_copy::<usize, F>(&p) })
        } else {
            self.resolve()
        }
    }

    #[cold]
    #[inline(never)]
    fn resolve(&self) -> Option<F> {
        let _busy = crate::tls::Busy::enter()?;
        let _e = bufpool::sys::ErrnoGuard::new();
        // SAFETY: RTLD_NEXT with a NUL-terminated name; dlsym has no other precondition.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) } as usize;
        if p == 0 {
            return None;
        }
        self.ptr.store(p, Ordering::Relaxed);
        // SAFETY: as in `get`.
        Some(unsafe { core::mem::transmute_copy::<usize, F>(&p) })
    }

    /// Resolves now (constructor).
    pub fn warm(&self) {
        let _ = self.get();
    }
}

macro_rules! reals {
    ($($id:ident: $ty:ident = $name:literal fn($($a:ty),*) -> $r:ty;)*) => {
        $(
            #[doc = concat!("`", $name, "`")]
            pub type $ty = unsafe extern "C" fn($($a),*) -> $r;
            #[doc = concat!("The real `", $name, "`.")]
            pub static $id: Real<$ty> = Real::new(
                // SAFETY: the literal ends with the NUL added here and has no other NUL.
                unsafe { CStr::from_bytes_with_nul_unchecked(concat!($name, "\0").as_bytes()) });
        )*
        /// Resolves every function (called by the constructor).
        pub fn warm_all() {
            $( $id.warm(); )*
            FCNTL.warm();
            FCNTL64.warm();
        }
    };
}

type CStrP = *const c_char;
type Argv = *const *const c_char;

reals! {
    SOCKET: Socket = "socket" fn(c_int, c_int, c_int) -> c_int;
    SOCKETPAIR: Socketpair = "socketpair" fn(c_int, c_int, c_int, *mut c_int) -> c_int;
    BIND: Bind = "bind" fn(c_int, *const sockaddr, socklen_t) -> c_int;
    LISTEN: Listen = "listen" fn(c_int, c_int) -> c_int;
    ACCEPT: Accept = "accept" fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int;
    ACCEPT4: Accept4 = "accept4" fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int;
    CONNECT: Connect = "connect" fn(c_int, *const sockaddr, socklen_t) -> c_int;
    SHUTDOWN: Shutdown = "shutdown" fn(c_int, c_int) -> c_int;
    CLOSE: Close = "close" fn(c_int) -> c_int;
    SEND: Send = "send" fn(c_int, *const c_void, size_t, c_int) -> ssize_t;
    SENDTO: Sendto = "sendto" fn(c_int, *const c_void, size_t, c_int, *const sockaddr, socklen_t) -> ssize_t;
    SENDMSG: Sendmsg = "sendmsg" fn(c_int, *const msghdr, c_int) -> ssize_t;
    RECV: Recv = "recv" fn(c_int, *mut c_void, size_t, c_int) -> ssize_t;
    RECVFROM: Recvfrom = "recvfrom" fn(c_int, *mut c_void, size_t, c_int, *mut sockaddr, *mut socklen_t) -> ssize_t;
    RECVMSG: Recvmsg = "recvmsg" fn(c_int, *mut msghdr, c_int) -> ssize_t;
    READ: Read = "read" fn(c_int, *mut c_void, size_t) -> ssize_t;
    READ_CHK: ReadChk = "__read_chk" fn(c_int, *mut c_void, size_t, size_t) -> ssize_t;
    RECV_CHK: RecvChk = "__recv_chk" fn(c_int, *mut c_void, size_t, size_t, c_int) -> ssize_t;
    WRITE: Write = "write" fn(c_int, *const c_void, size_t) -> ssize_t;
    READV: Readv = "readv" fn(c_int, *const iovec, c_int) -> ssize_t;
    WRITEV: Writev = "writev" fn(c_int, *const iovec, c_int) -> ssize_t;
    DUP: Dup = "dup" fn(c_int) -> c_int;
    DUP2: Dup2 = "dup2" fn(c_int, c_int) -> c_int;
    DUP3: Dup3 = "dup3" fn(c_int, c_int, c_int) -> c_int;
    GETSOCKOPT: Getsockopt = "getsockopt" fn(c_int, c_int, c_int, *mut c_void, *mut socklen_t) -> c_int;
    SELECT: Select = "select" fn(c_int, *mut fd_set, *mut fd_set, *mut fd_set, *mut timeval) -> c_int;
    PSELECT: Pselect = "pselect" fn(c_int, *mut fd_set, *mut fd_set, *mut fd_set, *const timespec, *const sigset_t) -> c_int;
    POLL: Poll = "poll" fn(*mut pollfd, nfds_t, c_int) -> c_int;
    PPOLL: Ppoll = "ppoll" fn(*mut pollfd, nfds_t, *const timespec, *const sigset_t) -> c_int;
    EPOLL_WAIT: EpollWait = "epoll_wait" fn(c_int, *mut epoll_event, c_int, c_int) -> c_int;
    EPOLL_PWAIT: EpollPwait = "epoll_pwait" fn(c_int, *mut epoll_event, c_int, c_int, *const sigset_t) -> c_int;
    EPOLL_PWAIT2: EpollPwait2 = "epoll_pwait2" fn(c_int, *mut epoll_event, c_int, *const timespec, *const sigset_t) -> c_int;
    EPOLL_CTL: EpollCtl = "epoll_ctl" fn(c_int, c_int, c_int, *mut epoll_event) -> c_int;
    SENDMMSG: Sendmmsg = "sendmmsg" fn(c_int, *mut mmsghdr, c_uint, c_int) -> c_int;
    RECVMMSG: Recvmmsg = "recvmmsg" fn(c_int, *mut mmsghdr, c_uint, c_int, *mut timespec) -> c_int;
    FORK: Fork = "fork" fn() -> pid_t;
    EXECVE: Execve = "execve" fn(CStrP, Argv, Argv) -> c_int;
    EXECVPE: Execvpe = "execvpe" fn(CStrP, Argv, Argv) -> c_int;
    FEXECVE: Fexecve = "fexecve" fn(c_int, Argv, Argv) -> c_int;
    EXECVEAT: Execveat = "execveat" fn(c_int, CStrP, Argv, Argv, c_int) -> c_int;
    POSIX_SPAWN: PosixSpawn = "posix_spawn" fn(*mut pid_t, CStrP, *const posix_spawn_file_actions_t, *const posix_spawnattr_t, Argv, Argv) -> c_int;
    POSIX_SPAWNP: PosixSpawnp = "posix_spawnp" fn(*mut pid_t, CStrP, *const posix_spawn_file_actions_t, *const posix_spawnattr_t, Argv, Argv) -> c_int;
    DAEMON: Daemon = "daemon" fn(c_int, c_int) -> c_int;
    EXIT: Exit = "exit" fn(c_int) -> ();
    UEXIT: UExit = "_exit" fn(c_int) -> ();
    UEXITC: UExitC = "_Exit" fn(c_int) -> ();
    DLOPEN: Dlopen = "dlopen" fn(CStrP, c_int) -> *mut c_void;
    CLOSE_RANGE: CloseRange = "close_range" fn(c_uint, c_uint, c_int) -> c_int;
}

/// `fcntl` (variadic).
pub type Fcntl = unsafe extern "C" fn(c_int, c_int, ...) -> c_int;
/// The real `fcntl`.
pub static FCNTL: Real<Fcntl> = Real::new(c"fcntl");
/// The real `fcntl64`.
pub static FCNTL64: Real<Fcntl> = Real::new(c"fcntl64");
