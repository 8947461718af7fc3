//! The layout of the pool file. Everything is little-endian (x86-64 only), `#[repr(C)]`,
//! at fixed offsets checked by `const` asserts.
//!
//! ```text
//! offset 0                 PoolInfo (256 bytes, immutable after creation) + PoolShared
//!                          (atomic counters), padded to one 4 KiB page
//! offset 4096              state words: n_subbufs × u64 (see crate::slots), padded to 4 KiB
//! offset data_offset       n_subbufs sub-buffers of subbuf_size bytes, each:
//!                            SubBufHeader (64 bytes) | entries (subbuf_size − 64 bytes)
//!                          the last `meta_subbufs` of them are the metadata area
//! ```

use bytemuck::{Pod, Zeroable};
use core::sync::atomic::{AtomicU32, AtomicU64};

/// Magic at offset 0 of a pool file.
pub const POOL_MAGIC: [u8; 8] = *b"CULPRIT\x01";
/// Format version of the pool file and of the entries in it. Bumped on any
/// incompatible change to this module or to `crate::format`.
pub const FORMAT_VERSION: u32 = 1;
/// Size of the header page.
pub const HEADER_SIZE: usize = 4096;
/// Page size assumed by the layout.
pub const PAGE: usize = 4096;
/// Size of a sub-buffer header.
pub const SUBBUF_HEADER: usize = 64;
/// Magic of a sub-buffer header.
pub const SUBBUF_MAGIC: u32 = u32::from_le_bytes(*b"CSB1");

/// Sub-buffer flag: published by a repair pass after its writer died.
pub const FLAG_SALVAGED: u32 = 1;
/// `PoolInfo::flags` bit 0: the creator let other users' processes write the pool (mode
/// `0666`, `--shared-writers`), so openers accept a pool others can write.
pub const POOL_FLAG_SHARED_WRITERS: u32 = 1;
/// Sub-buffer flag: published at thread exit.
pub const FLAG_THREAD_EXIT: u32 = 2;
/// Sub-buffer flag: published at process exit, exec or `_exit`.
pub const FLAG_PROCESS_EXIT: u32 = 4;
/// Sub-buffer flag: published on an explicit flush request.
pub const FLAG_FLUSH: u32 = 8;
/// Sub-buffer flag, in saved records only: a *piece* copied while its writer still
/// owned the sub-buffer (`crate::live`); more of the same sub-buffer follows in a later
/// record. Never set in the pool.
pub const FLAG_LIVE: u32 = 32;
/// Sub-buffer flag: taken from the metadata area (`PoolInfo::meta_subbufs`): it holds
/// metadata records (and possibly a leading `Lost` marker) only.
pub const FLAG_META_AREA: u32 = 16;
/// Sub-buffer flag, in saved records only: the flight recorder (`culprit record --keep`)
/// rotated this record's entries away and kept only its metadata records and `Lost`
/// marker (`bytes_used` is what is left). Never set in the pool.
pub const FLAG_COMPACTED: u32 = 64;

/// TSC calibration taken when the pool was created: two simultaneous readings of the
/// TSC and the clocks, far enough apart to give the TSC frequency.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Calibration {
    /// TSC at the first reading.
    pub tsc0: u64,
    /// `CLOCK_REALTIME` (ns) at the first reading.
    pub realtime0_ns: u64,
    /// `CLOCK_MONOTONIC` (ns) at the first reading.
    pub monotonic0_ns: u64,
    /// TSC at the second reading.
    pub tsc1: u64,
    /// `CLOCK_REALTIME` (ns) at the second reading.
    pub realtime1_ns: u64,
    /// `CLOCK_MONOTONIC` (ns) at the second reading.
    pub monotonic1_ns: u64,
}

impl Calibration {
    /// TSC ticks per nanosecond (from the monotonic clock), or 0 if unknown.
    pub fn ticks_per_ns(&self) -> f64 {
        let dt = self.monotonic1_ns.saturating_sub(self.monotonic0_ns);
        let dc = self.tsc1.saturating_sub(self.tsc0);
        if dt == 0 || dc == 0 {
            0.0
        } else {
            dc as f64 / dt as f64
        }
    }

    /// Converts a (56-bit) TSC value to `CLOCK_REALTIME` nanoseconds.
    pub fn tsc_to_unix_ns(&self, tsc: u64) -> i128 {
        self.converter().unix_ns(tsc)
    }

    /// [`Calibration::tsc_to_unix_ns`] for many values: the frequency is computed once.
    pub fn converter(&self) -> TscToUnix {
        TscToUnix {
            ticks_per_ns: self.ticks_per_ns(),
            base: self.tsc0 & crate::format::TSC_MASK,
            realtime0_ns: self.realtime0_ns,
        }
    }
}

/// A [`Calibration`] made ready to convert TSC values ([`Calibration::converter`]); gives
/// the same values as [`Calibration::tsc_to_unix_ns`].
#[derive(Clone, Copy, Debug)]
pub struct TscToUnix {
    ticks_per_ns: f64,
    base: u64,
    realtime0_ns: u64,
}

impl TscToUnix {
    /// Converts a (56-bit) TSC value to `CLOCK_REALTIME` nanoseconds.
    #[inline]
    pub fn unix_ns(&self, tsc: u64) -> i128 {
        let f = self.ticks_per_ns;
        if f == 0.0 {
            return self.realtime0_ns as i128;
        }
        // The difference of a TSC value and the 56-bit base fits an i64 (conversions between
        // floats and i128 are libcalls); offsets beyond ±292 years saturate.
        let d = tsc.wrapping_sub(self.base) as i64;
        self.realtime0_ns as i128 + (d as f64 / f) as i64 as i128
    }
}

/// The immutable part of the pool header, written once at creation.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct PoolInfo {
    /// [`POOL_MAGIC`]; written last at creation, so a half-created pool never validates.
    pub magic: [u8; 8],
    /// [`FORMAT_VERSION`].
    pub version: u32,
    /// [`HEADER_SIZE`].
    pub header_size: u32,
    /// Number of sub-buffers.
    pub n_subbufs: u32,
    /// Size of each sub-buffer, header included (a multiple of [`PAGE`]).
    pub subbuf_size: u32,
    /// Offset of the state words.
    pub slots_offset: u64,
    /// Offset of the first sub-buffer.
    pub data_offset: u64,
    /// Size of the file.
    pub file_size: u64,
    /// Creation time (`CLOCK_REALTIME` ns).
    pub created_unix_ns: u64,
    /// A writer with no free sub-buffer drops this many events before trying again.
    pub retry_after: u32,
    /// Flags: [`POOL_FLAG_SHARED_WRITERS`]; other bits 0.
    pub flags: u32,
    /// TSC calibration.
    pub calib: Calibration,
    /// Host name, NUL-padded.
    pub hostname: [u8; 64],
    /// Pid of the creating process.
    pub creator_pid: u32,
    /// Reserved (0).
    pub _pad0: u32,
    /// Start time (clock ticks) of the creating process.
    pub creator_start_ticks: u64,
    /// How many of the `n_subbufs` sub-buffers, the last ones, form the **metadata
    /// area**: only a writer writing out metadata records may acquire them, and it
    /// publishes each one at once (see `crate::pending`). 0 in pools made before the
    /// area existed (they still open: the field was reserved and zero).
    pub meta_subbufs: u32,
    /// Reserved (0).
    pub _reserved: [u8; 60],
}

const _: () = assert!(core::mem::size_of::<PoolInfo>() == 256);
const _: () = assert!(core::mem::offset_of!(PoolInfo, calib) == 64);
const _: () = assert!(core::mem::offset_of!(PoolInfo, hostname) == 112);

/// The mutable part of the pool header, at offset 256. Every field is an atomic
/// counter or hint; none is needed for correctness, all for statistics or speed.
#[repr(C)]
pub struct PoolShared {
    /// Rotating start index for writers scanning for a free sub-buffer. Relaxed: a hint.
    pub acquire_cursor: AtomicU32,
    /// Rotating start index for readers scanning for a written sub-buffer. Relaxed: a hint.
    pub take_cursor: AtomicU32,
    /// Sub-buffers published by writers (Relaxed, statistics).
    pub published: AtomicU64,
    /// Sub-buffers published by repair passes (Relaxed, statistics).
    pub salvaged: AtomicU64,
    /// Times a writer found no free sub-buffer (Relaxed, statistics).
    pub acquire_failures: AtomicU64,
    /// Writer threads that attached (Relaxed, statistics).
    pub writers_attached: AtomicU64,
    /// Dropped entries whose count could not be written into the trace: a thread flushed
    /// at exit with drops pending and no free sub-buffer to write its `Lost` marker into.
    /// Relaxed (a counter read after the writers are gone).
    pub lost_unreported: AtomicU64,
    /// Metadata records a writer could not keep until a sub-buffer was free (its
    /// pending store was full, or it exited — bounded wait over — with records still
    /// pending); see `crate::writer::pending`. Relaxed (a counter).
    pub meta_dropped: AtomicU64,
    /// TSC until which entry writers leave free sub-buffers to a thread writing out its
    /// pending metadata at exit (`crate::pending::claim_priority`); 0: none. A deadline,
    /// so it lapses by itself. Relaxed (a hint).
    pub meta_priority_until: AtomicU64,
}

const _: () = assert!(core::mem::size_of::<PoolShared>() == 64);
const _: () = assert!(core::mem::offset_of!(PoolShared, published) == 8);
const _: () = assert!(core::mem::offset_of!(PoolShared, lost_unreported) == 40);
const _: () = assert!(core::mem::offset_of!(PoolInfo, retry_after) == 56);
const _: () = assert!(core::mem::offset_of!(PoolInfo, creator_start_ticks) == 184);
const _: () = assert!(core::mem::offset_of!(PoolInfo, meta_subbufs) == 192);
const _: () = assert!(core::mem::offset_of!(SubBufHeader, seq) == 16);
const _: () = assert!(core::mem::offset_of!(SubBufHeader, owner_start_ticks) == 56);
const _: () = assert!(256 + core::mem::size_of::<PoolShared>() <= HEADER_SIZE);

/// Header of one sub-buffer (64 bytes at its start).
///
/// Protocol: while a sub-buffer is `Owned`, only its writer thread stores to these
/// fields. It fills `magic`..`owner_start_ticks` right after acquiring, then a `Release`
/// fence, and only then appends entries; after each entry it stores the new
/// `bytes_used` with `Release`. A live reader ([`crate::live`], FORMAT.md §4.6) may, while
/// the sub-buffer is `Owned`, load the identity fields and `bytes_used` (`Acquire`) and
/// copy the data below it — never storing — and keeps the copy only if the identity and
/// the state word are unchanged after an `Acquire` fence (a sequence-lock read).
/// A repair pass that finds the owner dead loads `bytes_used` with `Acquire` (pairing
/// with that store) and may then trust every other field and the first `bytes_used`
/// bytes of data: they are exactly the entries the writer had committed. A reader
/// reads the header after taking the slot (see `crate::slots` for that pairing) and
/// resets it (`bytes_used` = 0 first) before releasing it. All fields are atomics so
/// that no access from two processes is a data race; the non-`bytes_used` ones use
/// `Relaxed` and compile to plain moves.
#[repr(C)]
pub struct SubBufHeader {
    /// [`SUBBUF_MAGIC`].
    pub magic: AtomicU32,
    /// `FLAG_*` bits.
    pub flags: AtomicU32,
    /// Writer process id.
    pub pid: AtomicU32,
    /// Writer thread id.
    pub tid: AtomicU32,
    /// Per-thread sequence number (0, 1, 2… for each sub-buffer the thread filled).
    pub seq: AtomicU64,
    /// TSC of the first entry.
    pub first_tsc: AtomicU64,
    /// TSC of the last entry (set when published).
    pub last_tsc: AtomicU64,
    /// Entries this thread dropped just before this sub-buffer.
    pub lost_before: AtomicU64,
    /// Bytes of committed entries in the data area.
    pub bytes_used: AtomicU32,
    /// Size of the data area.
    pub data_size: AtomicU32,
    /// Writer process start time in clock ticks (pid-reuse-proof identity).
    pub owner_start_ticks: AtomicU64,
}

const _: () = assert!(core::mem::size_of::<SubBufHeader>() == SUBBUF_HEADER);
const _: () = assert!(core::mem::offset_of!(SubBufHeader, bytes_used) == 48);

/// A plain copy of a sub-buffer header (what the reader writes to disk).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct SubBufInfo {
    /// See [`SubBufHeader`].
    pub magic: u32,
    /// See [`SubBufHeader`].
    pub flags: u32,
    /// See [`SubBufHeader`].
    pub pid: u32,
    /// See [`SubBufHeader`].
    pub tid: u32,
    /// See [`SubBufHeader`].
    pub seq: u64,
    /// See [`SubBufHeader`].
    pub first_tsc: u64,
    /// See [`SubBufHeader`].
    pub last_tsc: u64,
    /// See [`SubBufHeader`].
    pub lost_before: u64,
    /// See [`SubBufHeader`].
    pub bytes_used: u32,
    /// See [`SubBufHeader`].
    pub data_size: u32,
    /// See [`SubBufHeader`].
    pub owner_start_ticks: u64,
}

const _: () = assert!(core::mem::size_of::<SubBufInfo>() == SUBBUF_HEADER);

/// Offsets derived from the geometry.
pub fn slots_bytes(n_subbufs: u32) -> u64 {
    round_up(n_subbufs as u64 * 8, PAGE as u64)
}

/// Offset of the first sub-buffer.
pub fn data_offset(n_subbufs: u32) -> u64 {
    HEADER_SIZE as u64 + slots_bytes(n_subbufs)
}

/// Total file size.
pub fn file_size(n_subbufs: u32, subbuf_size: u32) -> u64 {
    data_offset(n_subbufs) + n_subbufs as u64 * subbuf_size as u64
}

/// Rounds `v` up to a multiple of `to` (a power of two).
pub fn round_up(v: u64, to: u64) -> u64 {
    (v + to - 1) & !(to - 1)
}
