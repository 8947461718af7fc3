//! The writer side: one [`WriterState`] per thread, appending entries to the sub-buffer
//! that thread holds.
//!
//! Appending is a bounds check, a copy, and a `Release` store of the committed length:
//! no system call, no allocation, no lock, no read-modify-write. Only when the current
//! sub-buffer is full does [`WriterState::append_slow`] publish it and scan the state
//! table for a free one (compare-and-swap, once per sub-buffer). When none is free the
//! writer never waits: it drops the entry, counts it, and tries again only after
//! `retry_after` more events; the next sub-buffer it gets starts with a `Lost` marker
//! and carries the count in its header, so recorded + lost = produced, exactly.
//!
//! A reader may copy the committed prefix of the sub-buffer a writer holds while it fills
//! it ([`crate::live`]): the per-entry `Release` store of `bytes_used` is all the writer
//! does for it (plus one `Release` fence per sub-buffer, after filling the header).

use crate::format::{encode_fn, encode_lost, encode_ret, Kind, ADDR_MASK, TSC_MASK};
use crate::layout::{SubBufHeader, FLAG_FLUSH, FLAG_META_AREA};
use crate::pool::Pool;
use crate::slots::Holder;
use core::sync::atomic::{AtomicU32, Ordering};

/// Slot value meaning "no sub-buffer held".
pub const NO_SLOT: u32 = u32::MAX;

/// How many times `publish` retries while a repair pass briefly holds its word.
const PUBLISH_RETRIES: u32 = 10_000;

/// Per-thread writer state. `#[repr(C)]` because C hooks (gcc `-finstrument-functions`)
/// append through the same state: they check `end - cur`, copy, advance `cur` and store
/// `cur - start` into `*used` with release semantics, and call the slow path otherwise.
/// Offsets are part of that contract (`const` asserts below; mirrored in
/// `struct culprit_writer` in `tracer-preload/include/culprit.h`).
#[repr(C)]
#[derive(Debug)]
pub struct WriterState {
    /// Next free byte in the held sub-buffer's data area (null when none is held).
    pub cur: *mut u8,
    /// End of the data area (null when none is held, so `end - cur` is 0).
    pub end: *mut u8,
    /// Start of the data area.
    pub start: *mut u8,
    /// The held sub-buffer's `bytes_used` (null when none is held).
    pub used: *const AtomicU32,
    /// Held slot, or [`NO_SLOT`].
    pub slot: u32,
    /// Events still to drop before trying again to get a sub-buffer.
    pub skip: u32,
    /// Entries dropped since the last sub-buffer was obtained.
    pub lost: u64,
    /// Sequence number of the next sub-buffer this thread obtains.
    pub seq: u64,
    /// Owning process id (0 until [`WriterState::attach`]).
    pub pid: u32,
    /// Owning thread id.
    pub tid: u32,
    /// Process start time in clock ticks.
    pub start_ticks: u64,
    /// Entries dropped in total (statistics).
    pub lost_total: u64,
    /// Metadata records kept until a sub-buffer is free (see [`crate::pending`]): a
    /// private mapping of [`crate::pending::CAPACITY`] bytes, or null until needed.
    pub pending: *mut u8,
    /// Bytes used in `pending`.
    pub pending_len: u32,
    /// Records in `pending`.
    pub pending_records: u32,
}

const _: () = assert!(core::mem::offset_of!(WriterState, cur) == 0);
const _: () = assert!(core::mem::offset_of!(WriterState, end) == 8);
const _: () = assert!(core::mem::offset_of!(WriterState, start) == 16);
const _: () = assert!(core::mem::offset_of!(WriterState, used) == 24);
const _: () = assert!(core::mem::size_of::<WriterState>() == 96);

impl Default for WriterState {
    fn default() -> Self {
        Self::new()
    }
}

impl WriterState {
    /// A state that holds nothing and is not attached (appends go to the slow path,
    /// which drops them until [`WriterState::attach`]).
    pub const fn new() -> WriterState {
        WriterState {
            cur: core::ptr::null_mut(),
            end: core::ptr::null_mut(),
            start: core::ptr::null_mut(),
            used: core::ptr::null(),
            slot: NO_SLOT,
            skip: 0,
            lost: 0,
            seq: 0,
            pid: 0,
            tid: 0,
            start_ticks: 0,
            lost_total: 0,
            pending: core::ptr::null_mut(),
            pending_len: 0,
            pending_records: 0,
        }
    }

    /// Binds the state to a thread. Also used in a forked child: the child's copy of the
    /// parent's state must be re-attached *without* touching the parent's sub-buffer,
    /// which the parent still owns.
    ///
    /// A state that still holds a sub-buffer of the *same* process (re-attaching a
    /// thread) publishes it first, so it is not stranded.
    pub fn attach(&mut self, pool: &Pool, pid: u32, start_ticks: u64, tid: u32) {
        let same = self.pid == pid && self.start_ticks == start_ticks;
        if self.holds() && same {
            self.flush(pool, 0);
        }
        // Pending metadata of this very process stays; a forked child's copy of its
        // parent's is not the child's to write.
        let kept = if same {
            (self.pending, self.pending_len, self.pending_records)
        } else {
            (self.pending, 0, 0)
        };
        *self = WriterState::new();
        (self.pending, self.pending_len, self.pending_records) = kept;
        self.pid = pid;
        self.tid = tid;
        self.start_ticks = start_ticks;
        pool.shared()
            .writers_attached
            .fetch_add(1, Ordering::Relaxed);
    }

    /// A state attached to the calling thread of this process (its pid, start time and
    /// tid; start time 0 if `/proc` cannot tell).
    pub fn for_this_thread(pool: &Pool) -> WriterState {
        let me = pool.holder();
        let ticks = crate::sys::proc_stat(me.pid).map_or(0, |s| s.2);
        let mut w = WriterState::new();
        w.attach(pool, me.pid, ticks, crate::sys::gettid());
        w
    }

    /// True if a sub-buffer is held.
    pub fn holds(&self) -> bool {
        self.slot != NO_SLOT
    }

    fn holder(&self) -> Holder {
        Holder::new(self.pid, self.start_ticks)
    }

    /// Appends one encoded entry. Returns false if it was dropped (no free sub-buffer).
    #[inline(always)]
    pub fn append(&mut self, pool: &Pool, entry: &[u8]) -> bool {
        let n = entry.len();
        if (self.end as usize).wrapping_sub(self.cur as usize) >= n && !self.cur.is_null() {
            // SAFETY: [cur, cur+n) lies inside the data area of the sub-buffer this thread
            // holds (checked just above); nobody else accesses it while we hold it.
            unsafe {
                core::ptr::copy_nonoverlapping(entry.as_ptr(), self.cur, n);
                self.cur = self.cur.add(n);
                // Release: the entry bytes above happen before a salvager's Acquire load.
                (*self.used).store(self.cur.offset_from(self.start) as u32, Ordering::Release);
            }
            true
        } else {
            self.append_slow(pool, entry)
        }
    }

    /// Appends a call-shaped entry (`FnEnter`, `PyCall`, `PyCCall`, `PyExc`: 20 bytes)
    /// encoded in place — the same bytes as `append(pool, encode_fn(..).as_bytes())`,
    /// without building the entry on the stack first. Returns false if it was dropped.
    #[inline(always)]
    pub fn append_fn(
        &mut self,
        pool: &Pool,
        kind: Kind,
        tsc: u64,
        caller: u64,
        callee: u64,
    ) -> bool {
        debug_assert!(kind.is_call_shaped());
        if (self.end as usize).wrapping_sub(self.cur as usize) >= 20 && !self.cur.is_null() {
            let head = ((tsc & TSC_MASK) << 8) | kind as u64;
            let mid = (caller & ADDR_MASK) | (callee << 48);
            let tail = ((callee & ADDR_MASK) >> 16) as u32;
            // SAFETY: [cur, cur+20) lies inside the data area of the sub-buffer this
            // thread holds (checked just above); nobody else accesses it while we hold it.
            unsafe {
                (self.cur as *mut u64).write_unaligned(head.to_le());
                (self.cur.add(8) as *mut u64).write_unaligned(mid.to_le());
                (self.cur.add(16) as *mut u32).write_unaligned(tail.to_le());
                self.cur = self.cur.add(20);
                // Release: the entry bytes above happen before a salvager's Acquire load.
                (*self.used).store(self.cur.offset_from(self.start) as u32, Ordering::Release);
            }
            true
        } else {
            self.append_slow(pool, encode_fn(kind, tsc, caller, callee).as_bytes())
        }
    }

    /// Appends a return-shaped entry (`FnExit`, `PyReturn`, `PyCReturn`: 16 bytes)
    /// encoded in place, like [`WriterState::append_fn`].
    #[inline(always)]
    pub fn append_ret(&mut self, pool: &Pool, kind: Kind, tsc: u64, callee: u64, aux: u16) -> bool {
        debug_assert!(kind.is_return_shaped());
        if (self.end as usize).wrapping_sub(self.cur as usize) >= 16 && !self.cur.is_null() {
            let head = ((tsc & TSC_MASK) << 8) | kind as u64;
            let rest = (callee & ADDR_MASK) | ((aux as u64) << 48);
            // SAFETY: as in `append_fn`, for 16 bytes.
            unsafe {
                (self.cur as *mut u64).write_unaligned(head.to_le());
                (self.cur.add(8) as *mut u64).write_unaligned(rest.to_le());
                self.cur = self.cur.add(16);
                (*self.used).store(self.cur.offset_from(self.start) as u32, Ordering::Release);
            }
            true
        } else {
            self.append_slow(pool, encode_ret(kind, tsc, callee, aux).as_bytes())
        }
    }

    /// The slow path of [`WriterState::append`]: publish the full sub-buffer, get a
    /// new one (or drop and count), then append.
    #[cold]
    #[inline(never)]
    pub fn append_slow(&mut self, pool: &Pool, entry: &[u8]) -> bool {
        if self.pid == 0 || entry.len() < 8 {
            return false;
        }
        let tsc = (u64::from_le_bytes(entry[..8].try_into().unwrap_or([0; 8])) >> 8) & TSC_MASK;
        if self.holds() {
            self.publish(pool, 0, tsc);
        }
        if crate::pending::is_meta(entry) {
            return self.append_meta_slow(pool, entry, tsc, true);
        }
        if self.skip > 0 {
            self.skip -= 1;
            self.drop_one();
            return false;
        }
        if crate::pending::metadata_has_priority(pool) || !self.obtain(pool, tsc) {
            self.skip = pool.info().retry_after;
            self.drop_one();
            if self.pending_len > 0 {
                // Once per `retry_after` drops: metadata still kept goes to the
                // metadata area if it has room now.
                self.write_meta_area(pool, tsc, &[]);
            }
            return false;
        }
        let room = (self.end as usize) - (self.cur as usize);
        if room < entry.len() {
            // Cannot happen (entries are far smaller than a sub-buffer), but never
            // write out of bounds.
            self.drop_one();
            return false;
        }
        self.append(pool, entry)
    }

    fn drop_one(&mut self) {
        self.lost += 1;
        self.lost_total += 1;
    }

    /// Takes a free entry sub-buffer, fills its header, and writes the `Lost` marker if
    /// entries were dropped, then what the pending store holds.
    fn obtain(&mut self, pool: &Pool, tsc: u64) -> bool {
        let shared = pool.shared();
        let n = pool.entry_subbufs();
        let start = shared.acquire_cursor.load(Ordering::Relaxed) as usize % n;
        let Some(i) = pool.slots().acquire_in(0..n, start, self.holder()) else {
            shared.acquire_failures.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        shared
            .acquire_cursor
            .store(((i + 1) % n) as u32, Ordering::Relaxed);
        self.take_slot(pool, i, tsc, 0)
    }

    /// Takes a free sub-buffer of the metadata area (`Pool::meta_area`) like
    /// [`WriterState::obtain`]; its header carries [`FLAG_META_AREA`]. The caller writes
    /// metadata into it and publishes it at once ([`WriterState::write_meta_area`]).
    fn obtain_meta_area(&mut self, pool: &Pool, tsc: u64) -> bool {
        let area = pool.meta_area();
        // Start where this thread's id falls, so that writers spread over the area.
        let start = self.tid as usize;
        match pool.slots().acquire_in(area, start, self.holder()) {
            Some(i) => self.take_slot(pool, i, tsc, FLAG_META_AREA),
            None => false,
        }
    }

    /// Makes the just-acquired sub-buffer `i` the held one: header, `Lost` marker, pending
    /// metadata.
    fn take_slot(&mut self, pool: &Pool, i: usize, tsc: u64, flags: u32) -> bool {
        pool.prefault(i);
        let h: &SubBufHeader = pool.subbuf_header(i);
        h.flags.store(flags, Ordering::Relaxed);
        h.pid.store(self.pid, Ordering::Relaxed);
        h.tid.store(self.tid, Ordering::Relaxed);
        h.seq.store(self.seq, Ordering::Relaxed);
        h.first_tsc.store(tsc, Ordering::Relaxed);
        h.last_tsc.store(0, Ordering::Relaxed);
        h.lost_before.store(self.lost, Ordering::Relaxed);
        h.owner_start_ticks
            .store(self.start_ticks, Ordering::Relaxed);
        h.bytes_used.store(0, Ordering::Release);
        // Release fence: the identity above is visible before any entry byte below to a
        // live reader that copies the data and then re-reads the identity (the
        // sequence-lock check of `crate::live`). Once per sub-buffer; no instruction on
        // x86-64.
        core::sync::atomic::fence(Ordering::Release);
        self.seq += 1;
        self.slot = i as u32;
        self.start = pool.subbuf_data(i);
        self.cur = self.start;
        // SAFETY: the data area is `data_size` bytes long.
        self.end = unsafe { self.start.add(pool.data_size()) };
        self.used = &h.bytes_used;
        if self.lost > 0 {
            let m = encode_lost(tsc, self.lost);
            self.lost = 0;
            if !self.append(pool, m.as_bytes()) {
                return false;
            }
        }
        if self.pending_len > 0 {
            self.write_pending(pool);
        }
        true
    }

    /// A metadata record with no room in the held sub-buffer (none held, or full): it
    /// never waits for `skip` and is never dropped for lack of a sub-buffer — kept in
    /// the pending store instead ([`crate::pending`]). Returns false only if even that
    /// failed (counted in the pool's `meta_dropped`).
    #[cold]
    #[inline(never)]
    fn append_meta_slow(&mut self, pool: &Pool, entry: &[u8], tsc: u64, area: bool) -> bool {
        // Nothing is held here (`append_slow` published a full sub-buffer). An entry
        // sub-buffer first: the store is written out into it (obtain), and if it all
        // went, this record follows, in order.
        if !self.holds() && self.obtain(pool, tsc) {
            let room = (self.end as usize) - (self.cur as usize);
            if self.pending_len == 0 && room >= entry.len() {
                return self.append(pool, entry);
            }
        }
        // Otherwise the metadata area, which entry writers never take.
        if area && !self.holds() && self.write_meta_area(pool, tsc, entry) {
            return true;
        }
        self.keep_pending(pool, entry)
    }

    /// Appends a metadata record that is one of a burst (a process start: process, thread,
    /// clock, map and filter records): like [`WriterState::append`], except that with no
    /// sub-buffer to be had the record is kept pending without trying the metadata area.
    /// The burst ends with [`WriterState::write_out_pending`], so it takes one sub-buffer
    /// of the area, not one per record.
    pub fn append_meta_later(&mut self, pool: &Pool, entry: &[u8]) -> bool {
        let room = (self.end as usize).wrapping_sub(self.cur as usize);
        if (room >= entry.len() && !self.cur.is_null())
            || self.pid == 0
            || !crate::pending::is_meta(entry)
        {
            return self.append(pool, entry);
        }
        let tsc = (u64::from_le_bytes(entry[..8].try_into().unwrap_or([0; 8])) >> 8) & TSC_MASK;
        if self.holds() {
            self.publish(pool, 0, tsc);
        }
        self.append_meta_slow(pool, entry, tsc, false)
    }

    /// Ends a burst of [`WriterState::append_meta_later`]: with no sub-buffer held, what
    /// the pending store holds goes to the metadata area now (if it has room; otherwise
    /// it stays pending for the next sub-buffer this thread gets, or its exit).
    pub fn write_out_pending(&mut self, pool: &Pool) {
        if self.pending_len > 0 && !self.holds() && self.pid != 0 {
            self.write_meta_area(pool, crate::sys::rdtsc() & TSC_MASK, &[]);
        }
    }

    /// Writes the pending store, then `entry` (a metadata record, or empty for none),
    /// into sub-buffers of the metadata area, publishing each at once, for as long as the
    /// area has a free one. Returns true if `entry` was written. Called with nothing held;
    /// holds nothing after.
    fn write_meta_area(&mut self, pool: &Pool, tsc: u64, entry: &[u8]) -> bool {
        loop {
            if !self.obtain_meta_area(pool, tsc) {
                return false;
            }
            // The Lost marker and as much of the store as fits are in; this record
            // follows if the store is empty now.
            let room = (self.end as usize) - (self.cur as usize);
            let done = self.pending_len == 0 && (entry.is_empty() || room >= entry.len());
            if done && !entry.is_empty() {
                self.append(pool, entry);
            }
            // Nothing went in (nothing was to be written; or a pending record larger than
            // a sub-buffer, which cannot happen): it is given back, and taking it again
            // would not help: stop.
            let stuck = self.cur == self.start;
            self.publish(pool, FLAG_FLUSH, tsc);
            if stuck {
                // Given back, not published: its number is free again (readers read a
                // gap in a thread's sequence numbers as a missing sub-buffer).
                self.seq -= 1;
            }
            if done || stuck {
                return done;
            }
        }
    }

    /// Copies a metadata record to the end of the pending store.
    fn keep_pending(&mut self, pool: &Pool, entry: &[u8]) -> bool {
        if self.pending.is_null() {
            self.pending = crate::pending::map_store();
        }
        let at = self.pending_len as usize;
        if self.pending.is_null() || at + entry.len() > crate::pending::CAPACITY {
            pool.shared().meta_dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        // SAFETY: the store is CAPACITY bytes, private to this thread; [at, at+len) is
        // inside it (checked above) and does not overlap `entry`.
        unsafe {
            core::ptr::copy_nonoverlapping(entry.as_ptr(), self.pending.add(at), entry.len());
        }
        self.pending_len += entry.len() as u32;
        self.pending_records += 1;
        true
    }

    /// Writes as many whole pending records as fit into the sub-buffer just obtained,
    /// oldest first, leaving room for one more entry of any kind; the rest stays pending.
    fn write_pending(&mut self, pool: &Pool) {
        let len = self.pending_len as usize;
        // SAFETY: `pending` holds `pending_len` initialized bytes (see keep_pending).
        let store = unsafe { core::slice::from_raw_parts(self.pending, len) };
        let mut done = 0;
        let mut records = 0;
        while done < len {
            let n = crate::pending::record_len(&store[done..]).min(len - done);
            let room = (self.end as usize) - (self.cur as usize);
            if room < n + crate::format::MAX_ENTRY {
                break;
            }
            self.append(pool, &store[done..done + n]);
            done += n;
            records += 1;
        }
        if done > 0 {
            // SAFETY: both ranges lie inside the store; `copy` allows overlap.
            unsafe { core::ptr::copy(self.pending.add(done), self.pending, len - done) };
            self.pending_len -= done as u32;
            self.pending_records -= records;
        }
    }

    /// Publishes what is held and writes out the pending store, trying again for up to
    /// [`crate::pending::FLUSH_WAIT_MS`] while no sub-buffer is free; what still cannot
    /// be written is counted in `meta_dropped`.
    fn flush_pending(&mut self, pool: &Pool, flags: u32) {
        // Entry writers leave the next free sub-buffers to this thread for the bounded
        // wait (a deadline, not a lock: it lapses by itself if this process dies).
        crate::pending::claim_priority(pool);
        let mut waited = 0;
        while self.pending_len > 0 {
            let tsc = crate::sys::rdtsc() & TSC_MASK;
            if self.holds() {
                self.publish(pool, flags | FLAG_FLUSH, tsc);
            }
            if self.obtain(pool, tsc) || self.write_meta_area(pool, tsc, &[]) {
                continue;
            }
            if waited >= crate::pending::FLUSH_WAIT_MS {
                pool.shared()
                    .meta_dropped
                    .fetch_add(u64::from(self.pending_records), Ordering::Relaxed);
                self.pending_len = 0;
                self.pending_records = 0;
                break;
            }
            crate::pending::nap();
            waited += 1;
        }
    }

    fn publish(&mut self, pool: &Pool, flags: u32, tsc: u64) {
        let i = self.slot as usize;
        let h = pool.subbuf_header(i);
        h.flags.fetch_or(flags, Ordering::Relaxed);
        h.last_tsc.store(tsc, Ordering::Relaxed);
        let empty = self.cur == self.start;
        let me = self.holder();
        // publish/abandon are Release CASes: everything written above happens before a
        // reader's (or the next writer's) acquiring CAS.
        if empty {
            pool.reset_header(i);
        }
        let slots = pool.slots();
        let mut ok = false;
        // A repair pass may hold our word for a moment (SALVAGING) after seizing it by
        // mistake in the thread-death ABA case, and then gives it back: retry a bounded
        // number of times. Any other failure means we were (wrongly) judged dead.
        for _ in 0..PUBLISH_RETRIES {
            ok = if empty {
                slots.abandon(i, me)
            } else {
                slots.publish(i, me)
            };
            if ok || slots.load(i).map(|w| w.state) != Some(crate::slots::State::Salvaging) {
                break;
            }
            core::hint::spin_loop();
        }
        if ok && !empty {
            pool.shared().published.fetch_add(1, Ordering::Relaxed);
        }
        self.slot = crate::writer::NO_SLOT;
        self.cur = core::ptr::null_mut();
        self.end = core::ptr::null_mut();
        self.start = core::ptr::null_mut();
        self.used = core::ptr::null();
    }

    /// Publishes the held sub-buffer now (thread exit, process exit, exec, explicit
    /// flush). `flags` are `FLAG_*` bits recorded in its header. An empty sub-buffer
    /// goes back to the free set instead.
    ///
    /// A thread with drops not yet written into the trace (it had no sub-buffer) tries
    /// once more to get one, to write its `Lost` marker; if none is free, the count goes
    /// to the pool header's `lost_unreported`, so recorded + lost = produced still holds.
    pub fn flush(&mut self, pool: &Pool, flags: u32) {
        if self.pending_len > 0 && self.pid != 0 {
            self.flush_pending(pool, flags);
        }
        let tsc = crate::sys::rdtsc() & TSC_MASK;
        if !self.holds()
            && self.lost > 0
            && self.pid != 0
            && !self.obtain(pool, tsc)
            && !self.write_meta_area(pool, tsc, &[])
        {
            pool.shared()
                .lost_unreported
                .fetch_add(self.lost, Ordering::Relaxed);
            self.lost = 0;
        }
        if self.holds() {
            self.publish(pool, flags | FLAG_FLUSH, tsc);
        }
    }

    /// Forgets the held sub-buffer without touching it (a forked child's copy of its
    /// parent's state: the sub-buffer belongs to the parent).
    pub fn forget(&mut self) {
        *self = WriterState::new();
    }
}
