//! The C hooks in isolation: this test binary plays the part of `libtrace.so`'s Rust side
//! (it defines `culprit_global_enabled` and `culprit_append_slow` over a real bufpool
//! pool), `dlopen`s a shared object compiled with `-finstrument-functions` and checks the
//! entries the hooks wrote — call trees, filters, clock modes, the guards, sub-buffer
//! changes. The whole-system test under `LD_PRELOAD=libtrace.so` is `preload.rs`.

mod common;

use bufpool::format::Kind;
use bufpool::{Pool, PoolConfig, WriterState};
use common::*;
use gcc_hooks::config::{ClockMode, HooksConfig};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};

/// The tracer's switch, as tracer-preload defines it (`int` in C).
#[no_mangle]
pub static culprit_global_enabled: AtomicI32 = AtomicI32::new(0);

static POOL: OnceLock<Pool> = OnceLock::new();
static POOL_DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
/// Tests share the hooks' global configuration and the pool: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The slow path, as tracer-preload implements it: attach the thread on first use, then
/// `WriterState::append_slow`.
///
/// # Safety
/// `w` is the calling thread's `culprit_tls.w`; `entry` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn culprit_append_slow(
    w: *mut WriterState,
    entry: *const u8,
    len: usize,
) -> i32 {
    let Some(pool) = POOL.get() else { return 0 };
    let t = gcc_hooks::thread_state();
    // SAFETY: `t` is this thread's state and `w` its writer (the hooks pass &t->w);
    // `entry` is valid for `len` bytes (the caller's stack buffer).
    unsafe {
        assert_eq!(
            w,
            &mut (*t).w as *mut WriterState,
            "hooks pass &culprit_tls.w"
        );
        if (*t).status == 0 {
            let pid = bufpool::sys::getpid();
            let ticks = bufpool::sys::proc_stat(pid).map_or(0, |s| s.2);
            (*w).attach(pool, pid, ticks, bufpool::sys::gettid());
            (*t).status = 1;
        }
        (*w).append_slow(pool, core::slice::from_raw_parts(entry, len)) as i32
    }
}

fn pool() -> &'static Pool {
    POOL.get_or_init(|| {
        let dir = POOL_DIR.get_or_init(tempdir);
        let cfg = PoolConfig {
            n_subbufs: 64,
            subbuf_size: 8192,
            ..Default::default()
        };
        Pool::create(dir.path().join("pool"), &cfg).expect("create pool")
    })
}

/// Publishes the calling thread's sub-buffer.
fn flush_thread() {
    let t = gcc_hooks::thread_state();
    // SAFETY: this thread's own state; no hook runs on this thread meanwhile.
    unsafe { (*t).w.flush(pool(), 0) };
}

const FIXTURE: &str = r#"
#include <pthread.h>
#define NOINSTR __attribute__((no_instrument_function))
int leaf(int x);
static int sq(int x) { return x * x; }
int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }
typedef int (*op_t)(int);
int apply(op_t f, int x) { return f(x); }
int fixture_run(int n) { return apply(sq, n) + fact(n) + apply(leaf, n); }
long spin(long n) { long s = 0; for (long i = 0; i < n; i++) s += leaf((int)i); return s; }
NOINSTR int fixture_main(int n) { return fixture_run(n); }
NOINSTR long fixture_spin(long n) { return spin(n); }
"#;
const UTIL: &str = "int leaf(int x) { return x + 1; }\n";

struct Fixture {
    _dir: tempfile::TempDir,
    main: extern "C" fn(i32) -> i32,
    spin: extern "C" fn(i64) -> i64,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempdir();
        std::fs::write(dir.path().join("fixture.c"), FIXTURE).unwrap();
        std::fs::write(dir.path().join("util.c"), UTIL).unwrap();
        let so = join(dir.path(), "libfixture.so");
        cc(
            &[
                "-O1",
                "-g",
                "-fPIC",
                "-shared",
                "-fno-inline",
                "-fno-optimize-sibling-calls",
                "-finstrument-functions",
                "-o",
                s(&so),
                "fixture.c",
                "util.c",
            ],
            dir.path(),
        );
        let c = std::ffi::CString::new(s(&so)).unwrap();
        // SAFETY: loading a library we just built; its constructors do nothing.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW) };
        assert!(!h.is_null(), "dlopen failed");
        // SAFETY: `h` is a valid handle; the symbols have the given C signatures.
        unsafe {
            let m = libc::dlsym(h, c"fixture_main".as_ptr());
            let sp = libc::dlsym(h, c"fixture_spin".as_ptr());
            assert!(!m.is_null() && !sp.is_null());
            Fixture {
                _dir: dir,
                main: std::mem::transmute::<*mut libc::c_void, extern "C" fn(i32) -> i32>(m),
                spin: std::mem::transmute::<*mut libc::c_void, extern "C" fn(i64) -> i64>(sp),
            }
        }
    })
}

const FULL_TREE: &str = "\
fixture_run <- fixture_main
  apply <- fixture_run
    sq <- apply
  fact <- fixture_run
    fact <- fact
      fact <- fact
  apply <- fixture_run
    leaf <- apply
";

/// Runs `fixture_main(3)` on this thread with `cfg` installed, returns this thread's events.
fn record(cfg: &HooksConfig) -> Vec<Ev> {
    let f = fixture();
    let p = pool();
    drain(p);
    let inst = gcc_hooks::install(cfg);
    assert!(inst.warnings.is_empty(), "{:?}", inst.warnings);
    culprit_global_enabled.store(1, Ordering::Release);
    assert_eq!((f.main)(3), 9 + 6 + 4);
    culprit_global_enabled.store(0, Ordering::Release);
    flush_thread();
    let me = (bufpool::sys::getpid(), bufpool::sys::gettid());
    let mut d = drain(p);
    d.events.remove(&me).unwrap_or_default()
}

#[test]
fn records_the_exact_call_tree_with_names() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let evs = record(&HooksConfig::default());
    let syms = own_symbols();
    assert_eq!(tree(&evs, &syms), FULL_TREE);
    assert!(
        evs.windows(2).all(|w| w[0].tsc <= w[1].tsc),
        "TSC goes forward"
    );
    assert_eq!(evs.len(), 16);
}

#[test]
fn every_thread_gets_its_own_tree() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = fixture();
    let p = pool();
    drain(p);
    gcc_hooks::install(&HooksConfig::default());
    culprit_global_enabled.store(1, Ordering::Release);
    let tids: Vec<u32> = (0..3)
        .map(|_| {
            std::thread::spawn(move || {
                assert_eq!((f.main)(3), 19);
                flush_thread();
                bufpool::sys::gettid()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    culprit_global_enabled.store(0, Ordering::Release);
    let d = drain(p);
    let syms = own_symbols();
    let pid = bufpool::sys::getpid();
    for tid in tids {
        let evs = d.events.get(&(pid, tid)).expect("thread recorded");
        assert_eq!(tree(evs, &syms), FULL_TREE);
    }
}

#[test]
fn nothing_is_recorded_when_disabled_or_busy() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = fixture();
    let p = pool();
    drain(p);
    gcc_hooks::install(&HooksConfig::default());
    // Disabled: the hooks return at once.
    assert_eq!((f.main)(3), 19);
    // Enabled, but the tracer runs on this thread (busy).
    culprit_global_enabled.store(1, Ordering::Release);
    let t = gcc_hooks::thread_state();
    // SAFETY: this thread's own state.
    unsafe { (*t).busy = 1 };
    assert_eq!((f.main)(3), 19);
    // SAFETY: as above.
    unsafe { (*t).busy = 0 };
    // Torn down (status 2).
    // SAFETY: as above.
    let old = unsafe { (*t).status };
    // SAFETY: as above.
    unsafe { (*t).status = 2 };
    assert_eq!((f.main)(3), 19);
    // SAFETY: as above.
    unsafe { (*t).status = old };
    culprit_global_enabled.store(0, Ordering::Release);
    flush_thread();
    let d = drain(p);
    let me = (bufpool::sys::getpid(), bufpool::sys::gettid());
    assert!(
        d.events.get(&me).is_none_or(|e| e.is_empty()),
        "{:?}",
        d.events.get(&me)
    );
    // SAFETY: as above.
    assert_eq!(unsafe { (*t).depth }, 0, "depth is left balanced");
}

/// Program calls made while `busy` is set (a signal handler interrupting a hook or the
/// tracer) are not recorded but counted, and the next recorded event writes the count as
/// a `Lost` marker: recorded + lost = made.
#[test]
fn calls_made_while_busy_are_reported_lost() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = fixture();
    let p = pool();
    drain(p);
    gcc_hooks::install(&HooksConfig::default());
    culprit_global_enabled.store(1, Ordering::Release);
    assert_eq!((f.main)(3), 19); // attaches this thread (status 1)
    let t = gcc_hooks::thread_state();
    // SAFETY: this thread's own state.
    unsafe { (*t).busy = 1 };
    assert_eq!((f.main)(3), 19); // 16 events, none recorded
                                 // SAFETY: as above.
    unsafe { (*t).busy = 0 };
    assert_eq!((f.main)(3), 19);
    culprit_global_enabled.store(0, Ordering::Release);
    flush_thread();
    let d = drain(p);
    let me = (bufpool::sys::getpid(), bufpool::sys::gettid());
    let evs = &d.events[&me];
    let syms = own_symbols();
    assert_eq!(tree(evs, &syms), FULL_TREE.repeat(2));
    assert_eq!(d.lost, 16, "the 16 busy events are reported");
    assert_eq!(d.others.get(&me), Some(&1), "in one Lost marker");
}

#[test]
fn function_tree_and_file_exclusions() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    fixture();
    let syms = own_symbols();
    let cfg = HooksConfig {
        exclude: vec!["apply".into()],
        exclude_tree: vec!["fac?".into()],
        ..Default::default()
    };
    assert_eq!(
        tree(&record(&cfg), &syms),
        "fixture_run <- fixture_main\n  sq <- apply\n  leaf <- apply\n"
    );
    let cfg = HooksConfig {
        exclude_files: vec!["util.c".into()],
        ..Default::default()
    };
    let inst = gcc_hooks::install(&cfg);
    assert_eq!(inst.resolved, 1, "leaf only");
    assert_eq!(inst.filter.excluded, b"file=util.c;resolved=1");
    assert_eq!(
        tree(&record(&cfg), &syms),
        FULL_TREE.replace("    leaf <- apply\n", "")
    );
    // A static function (not in .dynsym) is found through .symtab.
    let cfg = HooksConfig {
        exclude: vec!["sq".into()],
        ..Default::default()
    };
    assert_eq!(
        tree(&record(&cfg), &syms),
        FULL_TREE.replace("    sq <- apply\n", "")
    );
    gcc_hooks::install(&HooksConfig::default());
}

#[test]
fn depth_limit() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    fixture();
    let syms = own_symbols();
    let cfg = HooksConfig {
        depth_limit: 2,
        ..Default::default()
    };
    assert_eq!(
        tree(&record(&cfg), &syms),
        "fixture_run <- fixture_main\n  apply <- fixture_run\n  fact <- fixture_run\n  apply <- fixture_run\n"
    );
    gcc_hooks::install(&HooksConfig::default());
}

#[test]
fn sampled_clock_keeps_the_tree_and_strictly_increasing_time() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    fixture();
    let syms = own_symbols();
    let cfg = HooksConfig {
        clock: ClockMode::Sampled { shift: 2 },
        ..Default::default()
    };
    let evs = record(&cfg);
    gcc_hooks::install(&HooksConfig::default());
    assert_eq!(tree(&evs, &syms), FULL_TREE);
    assert!(
        evs.windows(2).all(|w| w[0].tsc < w[1].tsc),
        "strictly increasing"
    );
    // A real reading at least every 4 events: never more than 3 interpolated (+1) steps
    // in a row, and some steps are real readings (a real rdtsc gap is far above 1).
    let mut run = 0;
    let mut real = 0;
    for w in evs.windows(2) {
        if w[1].tsc == w[0].tsc + 1 {
            run += 1;
            assert!(run <= 3, "more than 3 interpolated timestamps in a row");
        } else {
            run = 0;
            real += 1;
        }
    }
    assert!(
        real >= evs.len() / 4 - 1,
        "{real} real readings for {} events",
        evs.len()
    );
}

#[test]
fn sub_buffer_changes_lose_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = fixture();
    let p = pool();
    drain(p);
    gcc_hooks::install(&HooksConfig::default());
    culprit_global_enabled.store(1, Ordering::Release);
    // 1 + 2000 calls = 4002 events of 18 bytes on average: about 9 sub-buffers of 8 KiB.
    assert_eq!((f.spin)(2000), (1..=2000).sum::<i64>());
    culprit_global_enabled.store(0, Ordering::Release);
    flush_thread();
    let me = (bufpool::sys::getpid(), bufpool::sys::gettid());
    let d = drain(p);
    let evs = &d.events[&me];
    assert_eq!(evs.len(), 4002);
    assert!(!d.others.contains_key(&me), "no lost marker");
    let syms = own_symbols();
    let t = tree(evs, &syms);
    assert!(t.starts_with("spin <- fixture_spin\n  leaf <- spin\n"));
    assert_eq!(t.lines().filter(|l| *l == "  leaf <- spin").count(), 2000);
    let enters = evs.iter().filter(|e| e.kind == Kind::FnEnter).count();
    assert_eq!(enters, 2001);
}
