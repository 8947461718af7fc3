//! The environment the tracer needs, copied at load time, and its re-injection into the
//! `envp` of every `exec`/`posix_spawn`.
//!
//! Programs rewrite their environment (redis's setproctitle overwrites it; daemons clear
//! it; test harnesses exec with a hand-made `envp`). So the constructor copies every
//! `CULPRIT_*` variable and the path of `libtrace.so` into static storage, and the exec
//! wrappers hand the new image an `envp` that has (1) every original entry except
//! `CULPRIT_*` and `LD_PRELOAD`, (2) the `CULPRIT_*` variables as they were at load time,
//! (3) `CULPRIT_EXEC_PID=<pid>` (tells the new image it is an exec, not a new process),
//! (4) `LD_PRELOAD` with this library first, then the program's other preloads.
//! The new array lives in [`Scratch`] memory from `mmap`, never `malloc` (exec may run in
//! a child forked from a multithreaded parent).

use core::cell::UnsafeCell;
use core::ffi::c_char;

/// Variable telling a new image that it was exec'd by a traced process with that pid.
pub const EXEC_PID_VAR: &[u8] = b"CULPRIT_EXEC_PID=";
/// Variable giving a new image its exec generation (number of traced execs before it).
/// Writers number their sub-buffers from `generation << 32`, so the sub-buffers of
/// successive images of one process never share a (pid, tid, seq) key.
pub const EXEC_GEN_VAR: &[u8] = b"CULPRIT_EXEC_GEN=";
const PREFIX: &[u8] = b"CULPRIT_";
const LD_PRELOAD: &[u8] = b"LD_PRELOAD=";
const CAP: usize = 16384;
const MAX_VARS: usize = 32;

struct Saved {
    /// `NAME=value\0` strings back to back.
    buf: [u8; CAP],
    used: usize,
    /// Start offsets of the saved `CULPRIT_*` strings.
    vars: [usize; MAX_VARS],
    n_vars: usize,
    /// Offset and length of this library's path (in `buf`, NUL-terminated).
    self_at: usize,
    self_len: usize,
    /// `CULPRIT_EXEC_PID` at load time.
    exec_pid: u64,
    /// `CULPRIT_EXEC_GEN` at load time.
    exec_gen: u64,
}

struct SavedCell(UnsafeCell<Saved>);
// SAFETY: written only by the constructor (single-threaded, before recording starts),
// read-only afterwards.
unsafe impl Sync for SavedCell {}

static SAVED: SavedCell = SavedCell(UnsafeCell::new(Saved {
    buf: [0; CAP],
    used: 0,
    vars: [0; MAX_VARS],
    n_vars: 0,
    self_at: 0,
    self_len: 0,
    exec_pid: 0,
    exec_gen: 0,
}));

fn saved() -> &'static Saved {
    // SAFETY: see SavedCell: no writer once the constructor returned.
    unsafe { &*SAVED.0.get() }
}

/// Iterates a NULL-terminated array of C strings.
///
/// # Safety
/// `p` must be null or a valid NULL-terminated array of NUL-terminated strings.
pub unsafe fn c_strings<'a>(p: *const *const c_char) -> impl Iterator<Item = &'a [u8]> {
    let mut i = 0usize;
    core::iter::from_fn(move || {
        if p.is_null() {
            return None;
        }
        // SAFETY: the caller guarantees a NULL-terminated array; we stop at NULL.
        let s = unsafe { *p.add(i) };
        if s.is_null() {
            return None;
        }
        i += 1;
        // SAFETY: each element is a NUL-terminated string.
        Some(unsafe { core::ffi::CStr::from_ptr(s) }.to_bytes())
    })
}

/// Copies what the tracer needs from the initial environment (constructor only).
///
/// # Safety
/// Single-threaded (constructor); `envp` as for [`c_strings`]; `self_path` is this
/// library's path.
pub unsafe fn capture(envp: *const *const c_char, self_path: &[u8]) {
    // SAFETY: the constructor is the only writer and runs before any reader.
    let s = unsafe { &mut *SAVED.0.get() };
    let push = |s: &mut Saved, b: &[u8]| -> Option<usize> {
        if s.used + b.len() + 1 > CAP {
            return None;
        }
        let at = s.used;
        s.buf[at..at + b.len()].copy_from_slice(b);
        s.buf[at + b.len()] = 0;
        s.used += b.len() + 1;
        Some(at)
    };
    if let Some(at) = push(s, self_path) {
        s.self_at = at;
        s.self_len = self_path.len();
    }
    // SAFETY: forwarded caller guarantee.
    for e in unsafe { c_strings(envp) } {
        if let Some(v) = e.strip_prefix(EXEC_PID_VAR) {
            s.exec_pid = parse_dec(v).unwrap_or(0);
            continue;
        }
        if let Some(v) = e.strip_prefix(EXEC_GEN_VAR) {
            s.exec_gen = parse_dec(v).unwrap_or(0).min(u32::MAX as u64);
            continue;
        }
        if e.starts_with(PREFIX) && s.n_vars < MAX_VARS {
            if let Some(at) = push(s, e) {
                s.vars[s.n_vars] = at;
                s.n_vars += 1;
            }
        }
    }
}

/// Sets the saved `CULPRIT_<name>` to `value` (what exec'd images will get). Does nothing
/// if the storage is full.
///
/// # Safety
/// Constructor only (single-threaded, no reader yet).
pub unsafe fn replace_var(name: &[u8], value: &[u8]) {
    // SAFETY: the caller guarantees exclusive access.
    let s = unsafe { &mut *SAVED.0.get() };
    let need = PREFIX.len() + name.len() + 1 + value.len() + 1;
    if s.used + need > CAP {
        return;
    }
    let at = s.used;
    let mut pos = at;
    for part in [PREFIX, name, b"=", value, b"\0"] {
        s.buf[pos..pos + part.len()].copy_from_slice(part);
        pos += part.len();
    }
    s.used = pos;
    let existing = s.vars[..s.n_vars].iter().position(|&v| {
        let e = until_nul(&s.buf[v..]);
        e.strip_prefix(PREFIX)
            .and_then(|r| r.strip_prefix(name))
            .is_some_and(|r| r.first() == Some(&b'='))
    });
    match existing {
        Some(i) => s.vars[i] = at,
        None if s.n_vars < MAX_VARS => {
            s.vars[s.n_vars] = at;
            s.n_vars += 1;
        }
        None => {}
    }
}

fn parse_dec(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 {
        return None;
    }
    b.iter().try_fold(0u64, |v, &c| {
        c.is_ascii_digit().then(|| v * 10 + (c - b'0') as u64)
    })
}

/// The saved value of `CULPRIT_<name>` (name given without the prefix).
pub fn var(name: &[u8]) -> Option<&'static [u8]> {
    let s = saved();
    s.vars[..s.n_vars].iter().find_map(|&at| {
        let e = until_nul(&s.buf[at..]);
        let rest = e.strip_prefix(PREFIX)?.strip_prefix(name)?;
        rest.strip_prefix(b"=")
    })
}

/// The pid an exec'ing tracer announced at load time (0 if none).
pub fn exec_pid() -> u64 {
    saved().exec_pid
}

/// This image's exec generation (0 for a process that was not exec'd by a traced one).
pub fn exec_gen() -> u64 {
    saved().exec_gen
}

/// This library's path.
pub fn self_path() -> &'static [u8] {
    let s = saved();
    &s.buf[s.self_at..s.self_at + s.self_len]
}

fn until_nul(b: &[u8]) -> &[u8] {
    &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]
}

/// Memory from `mmap`, returned on drop.
pub struct Scratch {
    p: *mut u8,
    len: usize,
    used: usize,
}

impl Scratch {
    /// `len` bytes (rounded up to pages), or `None`.
    pub fn new(len: usize) -> Option<Scratch> {
        let len = (len + 4095) & !4095;
        let p = crate::sysx::map_anon(len)?;
        Some(Scratch { p, len, used: 0 })
    }

    /// `n` bytes aligned to 8.
    pub fn alloc(&mut self, n: usize) -> Option<*mut u8> {
        let at = (self.used + 7) & !7;
        if at + n > self.len {
            return None;
        }
        self.used = at + n;
        // SAFETY: at + n <= len, inside the mapping.
        Some(unsafe { self.p.add(at) })
    }

    /// A pointer array of `n` entries.
    pub fn ptrs(&mut self, n: usize) -> Option<&mut [*const c_char]> {
        let p = self.alloc(n * core::mem::size_of::<*const c_char>())? as *mut *const c_char;
        // SAFETY: freshly reserved, aligned, zero-filled (anonymous mapping) memory of
        // n pointers; null pointers are valid values.
        Some(unsafe { core::slice::from_raw_parts_mut(p, n) })
    }

    /// Copies the concatenation of `parts` plus a NUL; returns the C string.
    pub fn cstr(&mut self, parts: &[&[u8]]) -> Option<*const c_char> {
        let n: usize = parts.iter().map(|p| p.len()).sum();
        let p = self.alloc(n + 1)?;
        let mut off = 0;
        for part in parts {
            // SAFETY: the destination range lies inside the n + 1 bytes reserved above.
            unsafe { core::ptr::copy_nonoverlapping(part.as_ptr(), p.add(off), part.len()) };
            off += part.len();
        }
        // SAFETY: as above (the last reserved byte).
        unsafe { *p.add(off) = 0 };
        Some(p as *const c_char)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        crate::sysx::unmap(self.p, self.len);
    }
}

fn is_self_preload(entry: &[u8]) -> bool {
    entry == self_path() || entry.ends_with(b"/libtrace.so") || entry == b"libtrace.so"
}

/// Builds the `envp` a traced exec passes on (see the module docs). `None` if memory
/// could not be had (the caller then passes the original `envp`).
///
/// # Safety
/// `envp` as for [`c_strings`].
pub unsafe fn inject(
    envp: *const *const c_char,
    pid: u32,
) -> Option<(Scratch, *const *const c_char)> {
    let s = saved();
    let mut n = 0usize;
    let mut old_preload: &[u8] = b"";
    // SAFETY: forwarded caller guarantee.
    for e in unsafe { c_strings(envp) } {
        n += 1;
        if let Some(v) = e.strip_prefix(LD_PRELOAD) {
            old_preload = v;
        }
    }
    let need = (n + s.n_vars + 4) * 8 + LD_PRELOAD.len() + s.self_len + old_preload.len() + 64;
    let mut sc = Scratch::new(need)?;
    let out = sc.ptrs(n + s.n_vars + 4)? as *mut [*const c_char] as *mut *const c_char;
    let mut k = 0usize;
    let mut put = |p: *const c_char| {
        // SAFETY: `out` has n + n_vars + 4 slots; at most n + n_vars + 3 pointers are
        // put, leaving the last one null.
        unsafe { *out.add(k) = p };
        k += 1;
    };
    let mut i = 0usize;
    loop {
        let p = if envp.is_null() {
            core::ptr::null()
        } else {
            // SAFETY: walking the caller's NULL-terminated array; we stop at NULL.
            unsafe { *envp.add(i) }
        };
        if p.is_null() {
            break;
        }
        i += 1;
        // SAFETY: a NUL-terminated string of the array.
        let e = unsafe { core::ffi::CStr::from_ptr(p) }.to_bytes();
        if e.starts_with(PREFIX) || e.starts_with(LD_PRELOAD) {
            continue;
        }
        put(p);
    }
    for &at in &s.vars[..s.n_vars] {
        put(s.buf[at..].as_ptr() as *const c_char);
    }
    let mut num = [0u8; 20];
    put(sc.cstr(&[EXEC_PID_VAR, crate::sysx::fmt_u64(pid as u64, &mut num)])?);
    put(sc.cstr(&[EXEC_GEN_VAR, crate::sysx::fmt_u64(s.exec_gen + 1, &mut num)])?);
    // LD_PRELOAD: this library first, then the program's others (minus any libtrace).
    let lp = sc.alloc(LD_PRELOAD.len() + s.self_len + old_preload.len() + 2)?;
    let mut len = 0usize;
    let mut add = |b: &[u8]| {
        // SAFETY: the total written is at most the size reserved above (each byte of
        // old_preload is copied at most once, plus one separator per entry, which
        // replaces the separator it follows).
        unsafe { core::ptr::copy_nonoverlapping(b.as_ptr(), lp.add(len), b.len()) };
        len += b.len();
    };
    add(LD_PRELOAD);
    add(self_path());
    for ent in old_preload.split(|&c| c == b':' || c == b' ') {
        if ent.is_empty() || is_self_preload(ent) {
            continue;
        }
        add(b":");
        add(ent);
    }
    add(b"\0");
    put(lp as *const c_char);
    Some((sc, out as *const *const c_char))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    fn arr(v: &[CString]) -> Vec<*const c_char> {
        let mut a: Vec<*const c_char> = v.iter().map(|c| c.as_ptr()).collect();
        a.push(core::ptr::null());
        a
    }

    #[test]
    fn captures_and_reinjects() {
        let init: Vec<CString> = [
            "PATH=/bin",
            "CULPRIT_POOL=/dev/shm/p",
            "CULPRIT_X=1",
            "CULPRIT_EXEC_PID=42",
            "CULPRIT_EXEC_GEN=3",
        ]
        .iter()
        .map(|s| CString::new(*s).unwrap())
        .collect();
        let a = arr(&init);
        // SAFETY: tests run this once before any reader; the array is NULL-terminated.
        unsafe { capture(a.as_ptr(), b"/opt/culprit/libtrace.so") };
        assert_eq!(var(b"POOL"), Some(&b"/dev/shm/p"[..]));
        assert_eq!(var(b"X"), Some(&b"1"[..]));
        assert_eq!(var(b"NOPE"), None);
        assert_eq!(exec_pid(), 42);
        assert_eq!(exec_gen(), 3);

        let custom: Vec<CString> = [
            "HOME=/root",
            "LD_PRELOAD=/usr/lib/libfoo.so:/other/libtrace.so libbar.so",
            "CULPRIT_POOL=/wrong",
        ]
        .iter()
        .map(|s| CString::new(*s).unwrap())
        .collect();
        let c = arr(&custom);
        // SAFETY: NULL-terminated array of C strings.
        let (_sc, out) = unsafe { inject(c.as_ptr(), 777) }.unwrap();
        // SAFETY: inject returns a NULL-terminated array.
        let got: Vec<String> = unsafe { c_strings(out) }
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
            .collect();
        assert_eq!(
            got,
            vec![
                "HOME=/root",
                "CULPRIT_POOL=/dev/shm/p",
                "CULPRIT_X=1",
                "CULPRIT_EXEC_PID=777",
                "CULPRIT_EXEC_GEN=4",
                "LD_PRELOAD=/opt/culprit/libtrace.so:/usr/lib/libfoo.so:libbar.so",
            ]
        );
        // A replaced variable (the pool path made absolute) is what children get.
        // SAFETY: single-threaded test of the constructor-only function.
        unsafe { replace_var(b"POOL", b"/abs/pool") };
        assert_eq!(var(b"POOL"), Some(&b"/abs/pool"[..]));
        assert_eq!(var(b"X"), Some(&b"1"[..]));
        // An empty (null) envp still gets the tracer's variables.
        // SAFETY: null is allowed.
        let (_sc2, out) = unsafe { inject(core::ptr::null(), 1) }.unwrap();
        // SAFETY: NULL-terminated.
        assert_eq!(unsafe { c_strings(out) }.count(), 5);
    }
}
