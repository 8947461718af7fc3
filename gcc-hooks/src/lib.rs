//! `gcc-hooks` — the `-finstrument-functions` hooks of `libtrace.so`.
//!
//! A C program compiled with `gcc -finstrument-functions` calls
//! `__cyg_profile_func_enter(this_fn, call_site)` and `__cyg_profile_func_exit(this_fn,
//! call_site)` around every instrumented function. glibc exports no-op versions of both,
//! so the program links with no extra flag and runs unchanged on its own; under
//! `LD_PRELOAD=libtrace.so` the definitions of this crate win, and every call and return
//! becomes a 20-byte `FnEnter` / 16-byte `FnExit` entry (see `bufpool::format`) appended
//! to the calling thread's sub-buffer.
//!
//! The hot path is C (`c/hooks.c`), reached through one-jump Rust trampolines that carry
//! the exported names — rustc keeps only Rust-defined symbols dynamic in a `cdylib`, so
//! this is how C code gets exported from `libtrace.so`. The C side also defines the
//! per-thread tracer state `culprit_tls` (initial-exec TLS) that the Rust side of the
//! tracer reaches through [`thread_state`].
//!
//! The Rust side here only configures: [`config`] reads the clock mode and the filters
//! from the environment, [`filter`] resolves exclusion patterns to addresses, and
//! [`install`] hands both to the hooks and returns the filter record to write into the
//! trace. `tracer-preload` calls it once at start-up, before it enables recording:
//!
//! ```
//! let (cfg, warnings) = gcc_hooks::config::HooksConfig::from_env();
//! let installed = gcc_hooks::install(&cfg);
//! for w in warnings.iter().chain(&installed.warnings) {
//!     eprintln!("culprit: {w}");
//! }
//! // The tracer then writes `installed.meta()` (a `Meta::Filter` record) into the trace.
//! assert_eq!(installed.meta().kind(), bufpool::format::Kind::MetaFilter);
//! ```
//!
//! Until the tracer sets `culprit_global_enabled` (defined by `tracer-preload`) the hooks
//! do nothing; they also do nothing on a thread whose state is torn down (`status == 2`).
//! On a thread whose state is `busy` (the tracer itself runs, or a signal handler
//! interrupted a hook) they record nothing but count the event, and the thread's next
//! recorded hook event writes the count as a `Lost` marker.
#![deny(missing_docs)]

pub mod config;
pub mod filter;

use bufpool::format::{FilterRecord, Meta};
use bufpool::WriterState;
use config::HooksConfig;
use core::ffi::c_void;

/// Mirror of `struct culprit_thread` (`tracer-preload/include/culprit.h`): the per-thread
/// tracer state, defined in C as `culprit_tls`.
#[repr(C)]
#[derive(Debug)]
pub struct CulpritThread {
    /// The thread's writer state (same layout as `struct culprit_writer`).
    pub w: WriterState,
    /// Reentrancy guard: nonzero while the tracer itself runs on this thread (the hooks
    /// also set it while they append).
    pub busy: u32,
    /// 0 not attached yet, 1 attached, 2 torn down.
    pub status: u32,
    /// Current instrumented call depth (maintained by the hooks).
    pub depth: u32,
    /// Reserved (0).
    pub reserved: u32,
}

const _: () = assert!(core::mem::size_of::<CulpritThread>() == 112);
const _: () = assert!(core::mem::offset_of!(CulpritThread, busy) == 96);
const _: () = assert!(core::mem::offset_of!(CulpritThread, status) == 100);
const _: () = assert!(core::mem::offset_of!(CulpritThread, depth) == 104);

extern "C" {
    fn culprit_hook_enter(this_fn: *mut c_void, call_site: *mut c_void);
    fn culprit_hook_exit(this_fn: *mut c_void, call_site: *mut c_void);
    fn culprit_hook_thread_state() -> *mut CulpritThread;
    fn culprit_hooks_configure(depth_limit: u32, sample_shift: u32, table: *const u64);
    fn culprit_hooks_lookup(fn_addr: u64) -> u32;
}

/// `__cyg_profile_func_enter`: a tail jump to the C hook (no frame, no register saved).
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub extern "C" fn __cyg_profile_func_enter(this_fn: *mut c_void, call_site: *mut c_void) {
    core::arch::naked_asm!("jmp {f}", f = sym culprit_hook_enter)
}

/// `__cyg_profile_func_exit`: a tail jump to the C hook.
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub extern "C" fn __cyg_profile_func_exit(this_fn: *mut c_void, call_site: *mut c_void) {
    core::arch::naked_asm!("jmp {f}", f = sym culprit_hook_exit)
}

/// `culprit_thread_state()` of the C ABI: the calling thread's state (never null).
#[unsafe(no_mangle)]
pub extern "C" fn culprit_thread_state() -> *mut CulpritThread {
    // SAFETY: the C function only takes the address of a thread-local variable.
    unsafe { culprit_hook_thread_state() }
}

/// The calling thread's tracer state (`culprit_tls`). Valid for the thread's lifetime;
/// only that thread may touch it, and only with `busy` set or from the hooks.
pub fn thread_state() -> *mut CulpritThread {
    culprit_thread_state()
}

/// The result of [`install`].
#[derive(Clone, Debug)]
pub struct Installed {
    /// The configuration in force.
    pub config: HooksConfig,
    /// Function addresses the exclusion patterns matched.
    pub resolved: usize,
    /// What the user should hear about (patterns that matched nothing, unreadable
    /// objects). Never fatal.
    pub warnings: Vec<String>,
    /// The record to write into the trace.
    pub filter: FilterRecord,
}

impl Installed {
    /// The filter record as a metadata record.
    pub fn meta(&self) -> Meta {
        Meta::Filter(self.filter.clone())
    }
}

/// Resolves `cfg`'s filters against the objects loaded now and configures the hooks.
/// Call during tracer start-up, before `culprit_global_enabled` is set (a thread that
/// raced start-up would record at most a few events with the previous settings). Safe to
/// call again while hooks run (each table stays valid forever; a hook never mixes two),
/// though each call leaks its table. Allocates and reads the objects' ELF files: never
/// call it from a hook.
pub fn install(cfg: &HooksConfig) -> Installed {
    let mut warnings = Vec::new();
    let (table_ptr, resolved) = if cfg.has_exclusions() {
        let r = filter::resolve(cfg, &filter::loaded_objects());
        for p in &r.unmatched {
            warnings.push(format!("exclusion pattern {p:?} matched no function"));
        }
        for (path, why) in &r.unreadable {
            warnings.push(format!("cannot read symbols of {}: {why}", path.display()));
        }
        let table = filter::ExclusionTable::build(&r.addrs);
        let n = table.len();
        // The layout hooks.c reads: [capacity - 1, slots...]. Leaked on purpose: the
        // hooks read it for the rest of the process's life (even after a new install).
        let mut words = Vec::with_capacity(table.slots().len() + 1);
        words.push(table.mask());
        words.extend_from_slice(table.slots());
        let words: &'static [u64] = Box::leak(words.into_boxed_slice());
        (words.as_ptr(), n)
    } else {
        (core::ptr::null(), 0)
    };
    let shift = match cfg.clock {
        config::ClockMode::Tsc => 0,
        config::ClockMode::Sampled { shift } => u32::from(shift),
    };
    // SAFETY: `table_ptr` is null or points to [mask, mask + 1 slots] that live forever.
    unsafe { culprit_hooks_configure(cfg.depth_limit, shift, table_ptr) };
    Installed {
        config: cfg.clone(),
        resolved,
        warnings,
        filter: cfg.filter_record(resolved),
    }
}

/// Reads the settings from the environment ([`config`]) and [`install`]s them. Warnings
/// about invalid values come first in [`Installed::warnings`].
pub fn install_from_env() -> Installed {
    let (cfg, mut warnings) = HooksConfig::from_env();
    let mut i = install(&cfg);
    warnings.append(&mut i.warnings);
    i.warnings = warnings;
    i
}

/// The exclusion flags the installed hooks apply to a function address
/// ([`filter::EXCL_FN`], [`filter::EXCL_TREE`]; 0 if not excluded).
pub fn excluded(fn_addr: u64) -> u32 {
    // SAFETY: reads the configured table (or nothing), no side effect.
    unsafe { culprit_hooks_lookup(fn_addr) }
}
