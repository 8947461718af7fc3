//! Metadata a writer keeps until a sub-buffer is free: process, thread, memory-map and
//! code records are never dropped for lack of a sub-buffer.
//!
//! When a writer thread must append a metadata record (kinds `0x30..=0x3f`) and no entry
//! sub-buffer can be had, [`crate::WriterState`] writes it into the pool's **metadata
//! area** (`Pool::meta_area`: the last `PoolInfo::meta_subbufs` sub-buffers, which entry
//! writers never acquire) and publishes that sub-buffer at once, so area sub-buffers wait
//! only for the readers, never for a traced program. A burst of records
//! (`WriterState::append_meta_later` … `WriterState::write_out_pending`) shares one.
//! Only when the area has no free sub-buffer either does the writer copy the record into
//! its *pending store*, and write the store out — in order, after the `Lost` marker — at
//! the start of the next sub-buffer it obtains (entry or area). Nothing waits while the
//! program runs; only a thread that exits (or execs) with records still pending tries
//! again for a bounded time ([`FLUSH_WAIT_MS`] in 1 ms steps) for the readers to free a
//! sub-buffer; meanwhile entry writers leave free entry sub-buffers to it
//! (`claim_priority`: a deadline in the pool header, `meta_priority_until`, that lapses by
//! itself, so a process killed while waiting holds nothing up). Records that still cannot
//! be written, or that do not fit the store, are counted in the pool header's
//! `meta_dropped`; they are never counted as lost entries.
//!
//! Layout: the store is a private anonymous mapping of [`CAPACITY`] bytes, made the first
//! time it is needed (`mmap`, no allocator: this runs inside traced programs, in forked
//! children and under signal handlers' feet), holding whole encoded records back to back;
//! `pending_len` in the writer state is how many bytes are used. It belongs to one thread
//! of one process: no other thread or process ever reads it, so it needs no ordering. A
//! forked child forgets its copy of the parent's store (those records are the parent's).
//! The metadata area needs no ordering of its own: its sub-buffers go through the same
//! state-word transitions as any other (`crate::slots`).

/// Bytes of the pending store: about 400 memory-map records of a typical size; a single
/// metadata record is at most 4106 bytes.
pub const CAPACITY: usize = 256 * 1024;

/// How long a thread that exits with metadata pending waits, at most, for a free
/// sub-buffer (in 1 ms steps).
pub const FLUSH_WAIT_MS: u32 = 100;

/// True for an encoded metadata record (kind byte `0x30..=0x3f`).
#[inline]
pub fn is_meta(entry: &[u8]) -> bool {
    entry.first().is_some_and(|&k| (0x30..=0x3f).contains(&k))
}

/// Size of the whole record at the start of `bytes` (head, `u16` length, body).
pub(crate) fn record_len(bytes: &[u8]) -> usize {
    if bytes.len() < 10 {
        return bytes.len();
    }
    10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize
}

/// Maps a new store; null if the kernel refuses (the record is then counted as dropped).
pub(crate) fn map_store() -> *mut u8 {
    let _e = crate::sys::ErrnoGuard::new();
    // SAFETY: an anonymous private mapping with no address hint; the result is checked.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            CAPACITY,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        core::ptr::null_mut()
    } else {
        p.cast()
    }
}

/// Sleeps one millisecond (async-signal-safe).
pub(crate) fn nap() {
    let _e = crate::sys::ErrnoGuard::new();
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 1_000_000,
    };
    // SAFETY: a valid timespec; a null remainder is allowed.
    unsafe { libc::nanosleep(&ts, core::ptr::null_mut()) };
}

/// TSC ticks in `ms` milliseconds, from the pool's calibration (0 if it is unusable).
fn ticks_in_ms(pool: &crate::Pool, ms: u64) -> u64 {
    let c = pool.info().calib;
    let dt = c.tsc1.wrapping_sub(c.tsc0);
    let dns = c.monotonic1_ns.saturating_sub(c.monotonic0_ns);
    if dns == 0 {
        return 0;
    }
    ((dt as u128 * ms as u128 * 1_000_000) / dns as u128).min(u64::MAX as u128) as u64
}

/// Gives metadata waiting at a thread's exit priority over entries for the next
/// [`FLUSH_WAIT_MS`]: sets the pool header's `meta_priority_until` (a TSC deadline) to at
/// least now + that long. Relaxed: a hint; the worst a stale read does is let one entry
/// writer take a sub-buffer first.
pub(crate) fn claim_priority(pool: &crate::Pool) {
    let until = crate::sys::rdtsc().wrapping_add(ticks_in_ms(pool, u64::from(FLUSH_WAIT_MS)));
    pool.shared()
        .meta_priority_until
        .fetch_max(until, core::sync::atomic::Ordering::Relaxed);
}

/// True while a thread waits to write pending metadata (entry writers then drop and count
/// instead of taking a free sub-buffer). Checked once per sub-buffer request, never per
/// entry.
#[inline]
pub(crate) fn metadata_has_priority(pool: &crate::Pool) -> bool {
    let until = pool
        .shared()
        .meta_priority_until
        .load(core::sync::atomic::Ordering::Relaxed);
    until != 0 && crate::sys::rdtsc() < until
}
