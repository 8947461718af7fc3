//! The recording layer: wrappers hand it calls, it encodes entries and appends them to
//! the calling thread's writer.
//!
//! Every function here runs under the thread's [`Busy`] guard (so nothing it does is
//! recorded, and a signal handler interrupting it records nothing), catches any panic at
//! its edge (a panic switches tracing off for the process instead of unwinding into C),
//! and leaves errno as it found it. The hot path — [`Call::enter`] / [`Call::exit`] with
//! small options — encodes straight into the free part of the thread's sub-buffer and
//! publishes the new length: no system call, no allocation, no lock, no copy.

use crate::entry::{self, Small};
use crate::global;
use crate::metabody::{nul_split, MetaOut};
use crate::tls::{Busy, CulpritThread, STATUS_ATTACHED, STATUS_DEAD, STATUS_NEW};
use bufpool::format::{
    encode_lib, Kind, LibFn, LibOpts, ProcReason, ReadySet, MAX_ENTRY, META_BUF, TSC_MASK,
};
use bufpool::sys::{rdtsc, ErrnoGuard};
use bufpool::Pool;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f` on this thread's state if recording is on for it (enabled, not reentrant,
/// not torn down). A panic in `f` disables tracing for the process.
#[inline(always)]
pub fn with_thread<R>(f: impl FnOnce(&mut CulpritThread, &'static Pool) -> R) -> Option<R> {
    let pool = global::pool()?;
    let mut busy = Busy::enter()?;
    let t = busy.thread();
    if t.status == STATUS_DEAD {
        return None;
    }
    match catch_unwind(AssertUnwindSafe(|| f(t, pool))) {
        Ok(r) => Some(r),
        Err(_) => {
            global::disable();
            None
        }
    }
}

/// Appends one encoded entry, attaching the thread first if needed.
#[inline(always)]
pub fn append(t: &mut CulpritThread, pool: &Pool, bytes: &[u8]) -> bool {
    if t.status != STATUS_ATTACHED && !attach(t, pool, true) {
        return false;
    }
    t.w.append(pool, bytes)
}

/// Appends one metadata record of a burst (process start, fork, `dlopen`): in a full
/// pool it is kept in the writer until the burst ends with [`write_out_meta`], which
/// writes the whole burst into one sub-buffer of the pool's metadata area.
pub fn append_later(t: &mut CulpritThread, pool: &Pool, bytes: &[u8]) -> bool {
    if t.status != STATUS_ATTACHED && !attach(t, pool, true) {
        return false;
    }
    t.w.append_meta_later(pool, bytes)
}

/// Ends a burst of [`append_later`] (see `bufpool::WriterState::write_out_pending`).
pub fn write_out_meta(t: &mut CulpritThread, pool: &Pool) {
    if t.status == STATUS_ATTACHED {
        t.w.write_out_pending(pool);
    }
}

/// Binds the thread's writer to this process (first event of a thread, or of the
/// forking thread in a child) and, if `announce`, records the thread start.
#[cold]
#[inline(never)]
pub fn attach(t: &mut CulpritThread, pool: &Pool, announce: bool) -> bool {
    if t.status == STATUS_DEAD {
        return false;
    }
    let _e = ErrnoGuard::new();
    let (pid, ticks) = global::identity();
    if pid == 0 {
        return false;
    }
    t.w.attach(pool, pid, ticks, bufpool::sys::gettid());
    // Successive images of one process (exec) keep pid and tids: number their
    // sub-buffers apart (see envp::EXEC_GEN_VAR).
    t.w.seq = crate::envp::exec_gen() << 32;
    t.status = STATUS_ATTACHED;
    crate::lifecycle::watch_thread_exit();
    if announce {
        emit_thread(t, pool);
        write_out_meta(t, pool);
    }
    true
}

/// FNV-1a of the main thread's name as last recorded (0: none yet): a process that renamed
/// itself since is recorded again as it exits ([`record_rename`]).
static MAIN_NAME_HASH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn name_hash(name: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h | 1
}

/// Records the thread-start record of the calling thread.
pub fn emit_thread(t: &mut CulpritThread, pool: &Pool) {
    let mut name = [0u8; 32];
    let n = crate::procinfo::thread_name(&mut name);
    if t.w.tid == t.w.pid {
        MAIN_NAME_HASH.store(name_hash(&name[..n]), std::sync::atomic::Ordering::Relaxed);
    }
    let mut m = MetaOut::<64>::new(Kind::MetaThread, rdtsc() & TSC_MASK);
    m.u32(t.w.tid);
    m.u32(t.w.pid);
    m.bytes(&name[..n]);
    t.w.append_meta_later(pool, m.finish());
}

/// Records a process record (start, fork or exec) for this process. `parent` is the pid
/// of the process that forked this one, when known (a forked child knows it: its parent's
/// identity); otherwise the kernel's parent is recorded. Returns the kernel's parent.
pub fn emit_proc(
    t: &mut CulpritThread,
    pool: &Pool,
    reason: ProcReason,
    parent: Option<u32>,
) -> u32 {
    let (pid, ticks) = global::identity();
    let kernel_ppid = bufpool::sys::proc_stat(pid).map_or(0, |s| s.1);
    let ppid = parent.unwrap_or(kernel_ppid);
    let mut exe = [0u8; 1024];
    let ne = crate::procinfo::exe(&mut exe);
    let mut cmd = [0u8; 4096];
    let nc = crate::procinfo::cmdline(&mut cmd);
    let mut m = MetaOut::<META_BUF>::new(Kind::MetaProc, rdtsc() & TSC_MASK);
    m.u8(reason as u8);
    m.u32(pid);
    m.u32(ppid);
    m.u64(ticks);
    m.bytes(&exe[..ne]);
    m.argv(nul_split(&cmd[..nc]));
    append_later(t, pool, m.finish());
    kernel_ppid
}

/// Records a TSC / clock sample.
pub fn emit_clock(t: &mut CulpritThread, pool: &Pool) {
    let tsc = rdtsc();
    let real = bufpool::sys::clock_ns(libc::CLOCK_REALTIME);
    let mono = bufpool::sys::clock_ns(libc::CLOCK_MONOTONIC);
    let mut m = MetaOut::<64>::new(Kind::MetaClock, tsc & TSC_MASK);
    m.u64(tsc);
    m.u64(real);
    m.u64(mono);
    append_later(t, pool, m.finish());
}

/// Records the memory map (executable mappings and each file's first mapping).
pub fn emit_maps(t: &mut CulpritThread, pool: &Pool) {
    let tsc = rdtsc() & TSC_MASK;
    crate::procinfo::for_each_mapping(|l| {
        if l.prot & 1 != 0 {
            crate::stack::note_code_range(l.start, l.end);
        }
        let mut m = MetaOut::<META_BUF>::new(Kind::MetaMap, tsc);
        m.u64(l.start);
        m.u64(l.end);
        m.u64(l.offset);
        m.u8(l.prot);
        m.bytes(l.path);
        append_later(t, pool, m.finish());
    });
}

/// Encodes a library entry with small options straight into the thread's sub-buffer
/// when it has room for the largest entry (the common case: no copy, no zeroing), and
/// through [`append`] otherwise.
#[inline(always)]
fn emit_small(
    t: &mut CulpritThread,
    pool: &Pool,
    kind: Kind,
    site: u64,
    func: LibFn,
    o: &Small,
    ready: Option<&ReadySet>,
) {
    let w = &mut t.w;
    let room = (w.end as usize).wrapping_sub(w.cur as usize);
    if t.status == STATUS_ATTACHED
        && !w.cur.is_null()
        && room >= MAX_ENTRY
        && room <= pool.data_size()
    {
        // SAFETY: [cur, cur + MAX_ENTRY) lies inside the data area of the sub-buffer this
        // thread holds (checked just above); nobody else touches it while we hold it.
        let out = unsafe { &mut *(w.cur as *mut [u8; MAX_ENTRY]) };
        let n = entry::encode_into(out, kind, rdtsc() & TSC_MASK, site, func, o, ready);
        // SAFETY: n <= MAX_ENTRY <= room; `used` points to the held sub-buffer's header.
        unsafe {
            w.cur = w.cur.add(n);
            // Release: the entry bytes happen before a salvager's Acquire load.
            (*w.used).store(
                w.cur.offset_from(w.start) as u32,
                core::sync::atomic::Ordering::Release,
            );
        }
        return;
    }
    let e = entry::encode(kind, rdtsc() & TSC_MASK, site, func, o, ready);
    append(t, pool, e.as_bytes());
}

/// A wrapped call in progress: `LibEnter` was recorded; [`Call::exit`] records `LibExit`.
pub struct Call {
    func: LibFn,
    site: u64,
}

impl Call {
    /// Records `LibEnter` with small options; `None` if this thread is not recording.
    #[inline(always)]
    pub fn enter(func: LibFn, site: usize, o: &Small) -> Option<Call> {
        with_thread(|t, pool| emit_small(t, pool, Kind::LibEnter, site as u64, func, o, None))?;
        Some(Call {
            func,
            site: site as u64,
        })
    }

    /// Records `LibEnter` with full options (addresses, stack, string).
    pub fn enter_full(func: LibFn, site: usize, o: &LibOpts) -> Option<Call> {
        with_thread(|t, pool| {
            let e = encode_lib(Kind::LibEnter, rdtsc() & TSC_MASK, site as u64, func, o);
            append(t, pool, e.as_bytes());
        })?;
        Some(Call {
            func,
            site: site as u64,
        })
    }

    /// Records `LibExit` with small options and an optional ready set.
    #[inline(always)]
    pub fn exit(self, o: &Small, ready: Option<&ReadySet>) {
        with_thread(|t, pool| emit_small(t, pool, Kind::LibExit, self.site, self.func, o, ready));
    }

    /// Records `LibExit` with full options.
    pub fn exit_full(self, o: &LibOpts) {
        with_thread(|t, pool| {
            let e = encode_lib(Kind::LibExit, rdtsc() & TSC_MASK, self.site, self.func, o);
            append(t, pool, e.as_bytes());
        });
    }
}

/// Publishes the calling thread's sub-buffer with `flags` (`FLAG_*`).
pub fn flush_thread(flags: u32) {
    with_thread(|t, pool| {
        if t.status == STATUS_ATTACHED {
            t.w.flush(pool, flags);
        }
    });
}

/// At process exit, on the main thread: if the process renamed itself since its name was
/// recorded (`prctl(PR_SET_NAME)`, `/proc/self/comm`, `setproctitle`), records its name
/// again, so that the views name it as it named itself (the last record of a thread wins).
/// Two reads of `/proc/thread-self/comm` into a stack buffer; nothing when unchanged.
pub fn record_rename() {
    with_thread(|t, pool| {
        if t.status != STATUS_ATTACHED || t.w.tid != t.w.pid {
            return;
        }
        let _e = ErrnoGuard::new();
        let mut name = [0u8; 32];
        let n = crate::procinfo::thread_name(&mut name);
        let was = MAIN_NAME_HASH.load(std::sync::atomic::Ordering::Relaxed);
        if n > 0 && was != 0 && name_hash(&name[..n]) != was {
            emit_thread(t, pool);
            write_out_meta(t, pool);
        }
    });
}

/// Thread exit: publish, then record nothing more on this thread.
pub fn thread_exit() {
    // Not `with_thread`: the thread must be torn down even while recording is paused.
    let Some(pool) = global::pool_if_initialized() else {
        return;
    };
    let Some(mut busy) = Busy::enter() else {
        return;
    };
    let t = busy.thread();
    if t.status == STATUS_ATTACHED {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            t.w.flush(pool, bufpool::layout::FLAG_THREAD_EXIT)
        }));
    }
    t.status = STATUS_DEAD;
}

/// In a forked child: forget the parent's sub-buffer (it still belongs to the parent),
/// and let the next event attach this thread to the child.
pub fn reset_after_fork(t: &mut CulpritThread) {
    t.w.forget();
    if t.status == STATUS_ATTACHED {
        t.status = STATUS_NEW;
    }
}
