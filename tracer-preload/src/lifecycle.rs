//! Start-up, fork, thread exit and process exit.
//!
//! - The constructor (in `.init_array`, so it runs before the program's own) copies the
//!   environment it needs, resolves the real functions, maps the pool (before the program
//!   can drop privileges or close its fds; the mapping survives both), and records the
//!   process, the thread, a clock sample and the memory map. If the pool cannot be used it
//!   prints one line on stderr and the program runs untraced.
//! - After `fork` (a `pthread_atfork` child handler, and the fork wrapper for the raw
//!   fallback) the child takes its new identity and forgets the sub-buffer the forking
//!   thread held — it belongs to the parent, which will publish it. Nothing is flushed
//!   twice.
//! - Thread exit publishes the thread's sub-buffer (a pthread key destructor, which glibc
//!   runs after C++/Rust TLS destructors); process exit is handled by the `exit` wrappers
//!   and, for what atexit handlers record, the library destructor (`.fini_array`).

use crate::record::{self, with_thread};
use crate::{envp, global, real, sysx, tls};
use bufpool::format::{encode_meta, Kind, ProcReason, META_BUF, TSC_MASK};
use bufpool::layout::FLAG_PROCESS_EXIT;
use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicU32, Ordering};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The pthread key whose destructor flushes an exiting thread (`u32::MAX`: none).
static EXIT_KEY: AtomicU32 = AtomicU32::new(u32::MAX);

#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = init;

#[cfg(not(test))]
#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = fini;

/// The library constructor. glibc passes `argc, argv, envp` to `.init_array` functions.
extern "C" fn init(_argc: c_int, _argv: *const *const c_char, envp: *const *const c_char) {
    if !global::begin_init() {
        return;
    }
    // Recording is off (culprit_global_enabled = 0) until `global::enable`, so what the
    // start-up does through libc (opening the pool) passes the wrappers unrecorded.
    if catch_unwind(AssertUnwindSafe(|| start(envp))).is_err() {
        global::disable();
    }
}

/// Set in the environment after the warning, so the rest of the process tree (which
/// inherits it) stays quiet: one line per traced run, not one per process.
const WARNED_VAR: &core::ffi::CStr = c"CULPRIT_WARNED";

fn warn(reason: &str) {
    // SAFETY: the constructor runs before the program's threads exist; getenv/setenv are
    // safe then. The name and value are NUL-terminated.
    unsafe {
        if !libc::getenv(WARNED_VAR.as_ptr()).is_null() {
            return;
        }
        libc::setenv(WARNED_VAR.as_ptr(), c"1".as_ptr(), 1);
    }
    let line = format!("culprit: tracing disabled: {reason}\n");
    sysx::write_all(2, line.as_bytes());
}

fn self_path(buf: &mut [u8; 4096]) -> usize {
    // SAFETY: an all-zero Dl_info is a valid value; dladdr fills it for an address
    // inside this library and does not allocate.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: `init` is a function of this library.
    let ok = unsafe { libc::dladdr(init as *const c_void, &mut info) };
    if ok == 0 || info.dli_fname.is_null() {
        return 0;
    }
    // SAFETY: dladdr returns a NUL-terminated path owned by the loader.
    let p = unsafe { core::ffi::CStr::from_ptr(info.dli_fname) }.to_bytes();
    let n = p.len().min(buf.len());
    buf[..n].copy_from_slice(&p[..n]);
    n
}

fn start(envp_ptr: *const *const c_char) {
    let mut me = [0u8; 4096];
    let n = self_path(&mut me);
    // SAFETY: constructor, single-threaded; envp is the process's initial environment.
    unsafe { envp::capture(envp_ptr, &me[..n]) };
    real::warm_all();
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: valid out pointer; the destructor is an extern "C" fn that never unwinds.
    if unsafe { libc::pthread_key_create(&mut key, Some(thread_key_dtor)) } == 0 {
        EXIT_KEY.store(key, Ordering::Relaxed);
    }
    // SAFETY: registering a child handler that never unwinds.
    unsafe { libc::pthread_atfork(None, None, Some(atfork_child)) };

    let Some(path) = envp::var(b"POOL") else {
        warn(&format!("{} is not set", bufpool::POOL_ENV));
        global::disable();
        return;
    };
    let path = std::path::PathBuf::from(
        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path),
    );
    let pool = match bufpool::Pool::open(&path) {
        Ok(p) => p,
        Err(e) => {
            warn(&e.to_string());
            global::disable();
            return;
        }
    };
    if path.is_relative() {
        // Children exec'd from another directory must find the same pool.
        if let Ok(abs) = std::env::current_dir().map(|d| d.join(&path)) {
            use std::os::unix::ffi::OsStrExt;
            // SAFETY: constructor, single-threaded, before recording starts.
            unsafe { envp::replace_var(b"POOL", abs.as_os_str().as_bytes()) };
        }
    }
    let pid = bufpool::sys::getpid();
    let ticks = bufpool::sys::proc_stat(pid).map_or(0, |s| s.2);
    global::set_identity(pid, ticks);
    // The C hooks read their settings with relaxed loads: configure before enabling.
    let hooks = gcc_hooks::install_from_env();
    for w in &hooks.warnings {
        sysx::write_all(2, format!("culprit: {w}\n").as_bytes());
    }
    let mut filter = [0u8; META_BUF];
    let filter_len = encode_meta(0, &hooks.meta(), &mut filter);
    global::enable(pool);
    let reason = if envp::exec_pid() == pid as u64 {
        ProcReason::Exec
    } else {
        ProcReason::Start
    };
    with_thread(|t, pool| {
        if record::attach(t, pool, false) {
            record::emit_proc(t, pool, reason, None);
            record::emit_thread(t, pool);
            record::emit_clock(t, pool);
            record::emit_maps(t, pool);
            // Stamp the filter record now (it was encoded before recording started).
            let head = ((bufpool::sys::rdtsc() & TSC_MASK) << 8) | Kind::MetaFilter as u64;
            filter[..8].copy_from_slice(&head.to_le_bytes());
            record::append_later(t, pool, &filter[..filter_len]);
            record::write_out_meta(t, pool);
        }
    });
}

extern "C" fn fini() {
    record::record_rename();
    record::flush_thread(FLAG_PROCESS_EXIT);
}

extern "C" fn thread_key_dtor(_v: *mut c_void) {
    record::thread_exit();
}

/// Arms the thread-exit flush for the calling thread (on attach).
pub fn watch_thread_exit() {
    let key = EXIT_KEY.load(Ordering::Relaxed);
    if key != u32::MAX {
        // SAFETY: a key created by the constructor; any non-null value arms it. The key
        // was created early, so it sits in glibc's static block: no allocation.
        unsafe { libc::pthread_setspecific(key, std::ptr::dangling::<c_void>()) };
    }
}

extern "C" fn atfork_child() {
    after_fork_in_child();
}

/// In a forked child: new identity, forget the parent's sub-buffer, record the fork.
/// Idempotent (the atfork handler and the fork wrapper both call it).
pub fn after_fork_in_child() {
    let pid = bufpool::sys::getpid();
    let (old, _) = global::identity();
    if old == pid || old == 0 {
        return;
    }
    let ticks = bufpool::sys::proc_stat(pid).map_or(0, |s| s.2);
    global::set_identity(pid, ticks);
    let t = tls::state();
    // SAFETY: this is the only thread of the new process; whatever the parent's copy of
    // this thread state pointed to in the pool belongs to the parent.
    record::reset_after_fork(unsafe { &mut *t });
    with_thread(|t, pool| {
        if record::attach(t, pool, false) {
            // The parent is the process whose identity this one had until now, even if it
            // exited already (a daemon's double fork: the middle process gone, this one
            // re-parented to a subreaper). Then its maps, which this process shares, may
            // never reach the trace: this process records them itself.
            let kernel_ppid = record::emit_proc(t, pool, ProcReason::Fork, Some(old));
            if kernel_ppid != old {
                record::emit_maps(t, pool);
            }
            record::emit_thread(t, pool);
            record::write_out_meta(t, pool);
        }
    });
}
