//! The C ABI of `culprit.h` implemented in Rust: what the gcc hooks and the Python shim
//! call. Each function is safe to call from any thread, in signal handlers, before
//! initialization (it does nothing), and reentrantly (dropped); none changes errno.

use crate::global;
use crate::metabody::MetaOut;
use crate::record::{append, attach, with_thread};
use crate::tls::{self, CulpritThread, STATUS_ATTACHED, STATUS_DEAD};
use bufpool::format::{encode_fn, encode_ret, Kind, META_BUF, TSC_MASK};
use bufpool::sys::rdtsc;
use bufpool::WriterState;
use core::ffi::c_char;
use core::sync::atomic::Ordering;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// `culprit_enabled()`: 1 if this thread records now.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn culprit_enabled() -> i32 {
    if global::culprit_global_enabled.load(Ordering::Relaxed) != 1 {
        return 0;
    }
    let t = tls::state();
    // SAFETY: reading two fields of this thread's own state.
    let (busy, status) = unsafe { ((*t).busy, (*t).status) };
    (busy == 0 && status != STATUS_DEAD) as i32
}

/// `culprit_writer()`: this thread's writer, or null when not recording.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn culprit_writer() -> *mut WriterState {
    if culprit_enabled() == 0 {
        return core::ptr::null_mut();
    }
    // SAFETY: this thread's own state; `w` is its first field.
    unsafe { &mut (*tls::state()).w }
}

/// `culprit_append_slow(w, entry, len)`: publish the full sub-buffer, get a new one (or
/// count a drop), append; attaches the thread on its first event. The caller may hold
/// `busy` (the C hot paths do) or not. Returns 1 if recorded.
///
/// # Safety
/// `w` must be the calling thread's writer (from `culprit_writer`) and `entry` must
/// point to `len` readable bytes.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn culprit_append_slow(
    w: *mut WriterState,
    entry: *const u8,
    len: usize,
) -> i32 {
    let Some(pool) = global::pool() else { return 0 };
    let t: *mut CulpritThread = tls::state();
    // SAFETY: `w` is compared, never dereferenced, unless it is this thread's writer.
    if !core::ptr::eq(w, unsafe { &(*t).w }) || entry.is_null() || !(16..=4106).contains(&len) {
        return 0;
    }
    // SAFETY: reading this thread's own flag.
    let was_busy = unsafe { (*t).busy } != 0;
    // SAFETY: as above; restored below.
    unsafe { (*t).busy = 1 };
    // SAFETY: the caller guarantees `len` readable bytes.
    let bytes = unsafe { core::slice::from_raw_parts(entry, len) };
    let r = catch_unwind(AssertUnwindSafe(|| {
        let _e = bufpool::sys::ErrnoGuard::new();
        // SAFETY: this thread's own state; the busy flag keeps wrappers and signal
        // handlers on this thread away from it.
        let t = unsafe { &mut *t };
        if t.status == STATUS_DEAD {
            return false;
        }
        if t.status != STATUS_ATTACHED && !attach(t, pool, true) {
            return false;
        }
        t.w.append_slow(pool, bytes)
    }));
    if !was_busy {
        // SAFETY: as above.
        unsafe { (*t).busy = 0 };
    }
    match r {
        Ok(ok) => ok as i32,
        Err(_) => {
            global::disable();
            0
        }
    }
}

/// `culprit_emit_call(kind, caller, callee)`: a 20-byte call-shaped entry.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn culprit_emit_call(kind: u8, caller: u64, callee: u64) {
    let Some(k) = Kind::from_u8(kind).filter(|k| k.is_call_shaped()) else {
        return;
    };
    with_thread(|t, pool| {
        let e = encode_fn(k, rdtsc() & TSC_MASK, caller, callee);
        append(t, pool, e.as_bytes());
    });
}

/// `culprit_emit_return(kind, callee, aux)`: a 16-byte return-shaped entry.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn culprit_emit_return(kind: u8, callee: u64, aux: u16) {
    let Some(k) = Kind::from_u8(kind).filter(|k| k.is_return_shaped()) else {
        return;
    };
    with_thread(|t, pool| {
        let e = encode_ret(k, rdtsc() & TSC_MASK, callee, aux);
        append(t, pool, e.as_bytes());
    });
}

fn c_bytes<'a>(p: *const c_char, n: usize) -> &'a [u8] {
    if p.is_null() || n == 0 {
        &[]
    } else {
        // SAFETY: the caller passes `n` readable bytes at `p` (culprit.h contract).
        unsafe { core::slice::from_raw_parts(p as *const u8, n) }
    }
}

/// `culprit_emit_code(...)`: a code-table record naming a Python index.
///
/// # Safety
/// `name`/`file` point to `name_len`/`file_len` readable bytes (or are null).
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn culprit_emit_code(
    index: u32,
    kind: u8,
    first_line: u32,
    name: *const c_char,
    name_len: usize,
    file: *const c_char,
    file_len: usize,
) {
    if kind > 2 {
        return;
    }
    let (name, file) = (c_bytes(name, name_len), c_bytes(file, file_len));
    with_thread(|t, pool| {
        let mut m = MetaOut::<META_BUF>::new(Kind::MetaCode, rdtsc() & TSC_MASK);
        m.u32(index);
        m.u8(kind);
        m.u32(first_line);
        m.bytes(name);
        m.bytes(file);
        append(t, pool, m.finish());
    });
}

/// `culprit_emit_inject(rule, spec, spec_len)`: a `MetaInject` record for an injection
/// made outside libc — the Python shim's `py:` rules — with `func` =
/// [`bufpool::inject::PY_FUNC_ID`], fd -1, the call not made (original -1), result -1,
/// errno 0, and the rule's text; then the thread's sub-buffer is published, so that the
/// record survives a process that dies of the injected fault.
///
/// # Safety
/// `spec` points to `spec_len` readable bytes (or is null).
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn culprit_emit_inject(rule: u32, spec: *const c_char, spec_len: usize) {
    let spec = c_bytes(spec, spec_len);
    with_thread(|t, pool| {
        let mut m = MetaOut::<META_BUF>::new(Kind::MetaInject, rdtsc() & TSC_MASK);
        m.u32(rule);
        m.u16(bufpool::inject::PY_FUNC_ID);
        m.u32(-1i32 as u32);
        m.u64(-1i64 as u64);
        m.u64(-1i64 as u64);
        m.u32(0);
        m.bytes(spec);
        append(t, pool, m.finish());
    });
    crate::record::flush_thread(0);
}

/// `culprit_flush_thread()`: publish this thread's sub-buffer now.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn culprit_flush_thread() {
    crate::record::flush_thread(0);
}
