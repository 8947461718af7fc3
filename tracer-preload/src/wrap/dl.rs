//! `dlopen`: after a library is loaded, the memory map is recorded again so addresses
//! in it can be symbolized offline.
//!
//! Caveat: glibc resolves `$ORIGIN` in a `dlopen` path and picks the link namespace from
//! the caller's address, which is now this library's. Programs that `dlopen` a path
//! containing `$ORIGIN` relative to themselves are affected.

use super::real_or_enosys;
use crate::real::DLOPEN;
use core::ffi::{c_char, c_int, c_void};

/// `dlopen`.
pub unsafe extern "C" fn dlopen(file: *const c_char, mode: c_int, _site: usize) -> *mut c_void {
    let h = real_or_enosys!(DLOPEN, (file, mode), core::ptr::null_mut());
    if !h.is_null() && !file.is_null() {
        crate::record::with_thread(|t, pool| {
            crate::record::emit_maps(t, pool);
            crate::record::write_out_meta(t, pool);
        });
    }
    h
}
