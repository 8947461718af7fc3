//! Raw system calls and clock reads used on the writer side.
//!
//! The tracer interposes libc's `read`, `close` and friends, so the pool code that runs
//! inside a traced process must not go through them: these helpers issue the system
//! calls directly, never allocate and preserve `errno`.

use crate::slots::Holder;

/// Reads the TSC.
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no memory effects and is available on every x86-64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        clock_ns(libc::CLOCK_MONOTONIC)
    }
}

/// Reads a clock in nanoseconds (vDSO, no system call in practice).
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime has no other effects.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's id.
pub fn gettid() -> u32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// The calling process's id (a raw syscall: glibc's cached value is stale in a child
/// created by a raw `clone`).
pub fn getpid() -> u32 {
    // SAFETY: getpid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_getpid) as u32 }
}

/// Saves errno on creation and restores it on drop.
pub struct ErrnoGuard(i32);

impl ErrnoGuard {
    /// Saves the current errno.
    #[inline]
    pub fn new() -> ErrnoGuard {
        // SAFETY: __errno_location always returns the calling thread's errno slot.
        ErrnoGuard(unsafe { *libc::__errno_location() })
    }
}

impl Default for ErrnoGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for ErrnoGuard {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: as in `new`.
        unsafe { *libc::__errno_location() = self.0 };
    }
}

/// Reads up to `buf.len()` bytes of a small file with raw syscalls. Returns the length.
pub fn read_small_file(path: &core::ffi::CStr, buf: &mut [u8]) -> Option<usize> {
    let _e = ErrnoGuard::new();
    // SAFETY: `path` is NUL-terminated; the flags request a read-only open.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    let mut n = 0usize;
    while n < buf.len() {
        // SAFETY: the destination range lies inside `buf`.
        let r =
            unsafe { libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr().add(n), buf.len() - n) };
        if r <= 0 {
            break;
        }
        n += r as usize;
    }
    // SAFETY: `fd` is the descriptor opened above, closed once.
    unsafe { libc::syscall(libc::SYS_close, fd) };
    Some(n)
}

/// Parses `/proc/PID/stat` contents: (state char, ppid, start time in ticks).
pub fn parse_stat(stat: &[u8]) -> Option<(u8, u32, u64)> {
    // The command name (field 2) is in parentheses and may contain spaces or ')':
    // fields resume after the last ')'.
    let close = stat.iter().rposition(|&c| c == b')')?;
    let rest = stat.get(close + 2..)?;
    let mut fields = rest.split(|&c| c == b' ');
    let state = *fields.next()?.first()?;
    let ppid = parse_u64(fields.next()?)? as u32;
    // Field 3 is state, 4 ppid; starttime is field 22, i.e. 18 fields after ppid.
    let start = parse_u64(fields.nth(17)?)?;
    Some((state, ppid, start))
}

fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v = 0u64;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(v)
}

/// Formats `/proc/<pid>/stat` (or `/proc/<pid>/task/<tid>/stat`) into `buf` as a C string.
fn proc_path<'a>(
    buf: &'a mut [u8; 64],
    pid: u32,
    tid: Option<u32>,
    leaf: &str,
) -> &'a core::ffi::CStr {
    use std::io::Write;
    let mut c = std::io::Cursor::new(&mut buf[..]);
    let _ = match tid {
        Some(t) => write!(c, "/proc/{pid}/task/{t}/{leaf}\0"),
        None => write!(c, "/proc/{pid}/{leaf}\0"),
    };
    let n = c.position() as usize;
    core::ffi::CStr::from_bytes_until_nul(&buf[..n]).unwrap_or(c"/proc/self/stat")
}

/// Start time (clock ticks) and state of a process, from `/proc/PID/stat`.
pub fn proc_stat(pid: u32) -> Option<(u8, u32, u64)> {
    let mut p = [0u8; 64];
    let mut buf = [0u8; 1024];
    let n = read_small_file(proc_path(&mut p, pid, None, "stat"), &mut buf)?;
    parse_stat(&buf[..n])
}

/// True if thread `tid` of process `pid` still exists (and is not a zombie) — or if
/// `/proc` cannot tell (the process's own directory is unreadable too, e.g. `hidepid`):
/// a thread is only declared gone when its process is visible and the thread is not.
pub fn thread_alive(pid: u32, tid: u32) -> bool {
    let mut p = [0u8; 64];
    let mut buf = [0u8; 1024];
    match read_small_file(proc_path(&mut p, pid, Some(tid), "stat"), &mut buf) {
        Some(n) => !matches!(parse_stat(&buf[..n]), Some((b'Z' | b'X', _, _))),
        None => read_small_file(proc_path(&mut p, pid, None, "stat"), &mut buf).is_none(),
    }
}

/// The calling process's identity as a [`Holder`] (pid + start time).
pub fn current_holder() -> Holder {
    let pid = getpid();
    let start = proc_stat(pid).map_or(0, |s| s.2);
    Holder::new(pid, start)
}

/// Whether a process identity is still alive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// Running (or we cannot tell: treated as alive, never salvaged).
    Alive,
    /// Gone, a zombie, or the pid now names another process.
    Dead,
}

/// Checks a holder: `kill(pid, 0)`, then the start time, so a reused pid is seen as dead
/// (unless the holder's tag is 0: its start time was unknown, so only existence counts).
pub fn holder_liveness(h: Holder) -> Liveness {
    if h.pid == 0 {
        return Liveness::Dead;
    }
    let _e = ErrnoGuard::new();
    // SAFETY: signal 0 only checks for existence and permission; nothing is sent.
    let r = unsafe { libc::kill(h.pid as libc::pid_t, 0) };
    // SAFETY: reading errno right after the call.
    if r != 0 && unsafe { *libc::__errno_location() } == libc::ESRCH {
        return Liveness::Dead;
    }
    match proc_stat(h.pid) {
        Some((b'Z' | b'X', _, _)) => Liveness::Dead,
        // Tag 0 means the holder could not read its own start time (e.g. the traced
        // program was out of file descriptors): judge by existence only, never by tag.
        Some((_, _, start)) if h.tag != 0 && start & crate::slots::TAG_MASK != h.tag => {
            Liveness::Dead
        }
        Some(_) => Liveness::Alive,
        // /proc unreadable (hidepid, no /proc): cannot tell, never salvage a live writer.
        None => Liveness::Alive,
    }
}

/// Host name (empty on failure).
pub fn hostname() -> [u8; 64] {
    let mut b = [0u8; 64];
    // SAFETY: the buffer is 64 writable bytes; one is kept for the NUL.
    unsafe { libc::gethostname(b.as_mut_ptr() as *mut libc::c_char, 63) };
    b[63] = 0;
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_hostile_comm() {
        let s = b"123 (a) b) c) S 77 123 123 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 987654 1000 10";
        assert_eq!(parse_stat(s), Some((b'S', 77, 987654)));
        assert_eq!(parse_stat(b"garbage"), None);
    }

    #[test]
    fn own_identity_is_alive_and_a_wrong_tag_is_dead() {
        let me = current_holder();
        assert!(me.tag != 0);
        assert_eq!(holder_liveness(me), Liveness::Alive);
        let reused = Holder {
            pid: me.pid,
            tag: (me.tag + 1) & crate::slots::TAG_MASK,
        };
        assert_eq!(holder_liveness(reused), Liveness::Dead);
        let unknown_start = Holder {
            pid: me.pid,
            tag: 0,
        };
        assert_eq!(holder_liveness(unknown_start), Liveness::Alive);
        assert!(thread_alive(me.pid, gettid()));
        let t = std::thread::spawn(gettid).join().unwrap();
        assert!(!thread_alive(me.pid, t), "an exited thread is gone");
        assert!(
            thread_alive(u32::MAX >> 10, 1),
            "an invisible process cannot be judged"
        );
    }
}
