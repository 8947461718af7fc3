//! Creating and opening the pool file, and reaching its parts.

use crate::error::PoolError;
use crate::layout::*;
use crate::slots::{Holder, Slots};
use crate::sync::AtomicU64;
use crate::sys;
use memmap2::{MmapOptions, MmapRaw};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default number of sub-buffers.
pub const DEFAULT_SUBBUFS: u32 = 256;
/// Default sub-buffer size (header included).
pub const DEFAULT_SUBBUF_SIZE: u32 = 256 * 1024;
/// Default number of events a writer drops before it tries again to get a sub-buffer.
pub const DEFAULT_RETRY_AFTER: u32 = 1024;
/// Default pool directory.
pub const DEFAULT_DIR: &str = "/dev/shm";
/// Most sub-buffers a pool reserves for its metadata area.
pub const MAX_META_SUBBUFS: u32 = 16;

/// Sub-buffers a pool of `n` entry sub-buffers adds as its metadata area: one per 64,
/// at least 2 and at most [`MAX_META_SUBBUFS`]. Two, so that one can be written out while
/// readers drain the other; a metadata burst (a process start: one process record, a
/// thread record and a few dozen map records, a few KiB) fits one sub-buffer of the
/// smallest size. They are held only while a writer copies records into them.
pub const fn meta_area_size(n: u32) -> u32 {
    let m = n / 64;
    if m < 2 {
        2
    } else if m > MAX_META_SUBBUFS {
        MAX_META_SUBBUFS
    } else {
        m
    }
}

/// Environment variable naming the pool file for traced processes.
pub const POOL_ENV: &str = "CULPRIT_POOL";

/// Geometry and policy of a new pool. Defaults: 256 sub-buffers of 256 KiB (64 MiB),
/// retry after 1024 dropped events, 20 ms of TSC calibration.
#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// Number of sub-buffers for entries (1 ..= 1 048 576). The pool adds
    /// [`meta_area_size`]`(n_subbufs)` more for its metadata area.
    pub n_subbufs: u32,
    /// Size of each sub-buffer, header included: a multiple of 4096, 8 KiB ..= 1 GiB.
    pub subbuf_size: u32,
    /// Events dropped before a writer with no sub-buffer tries again.
    pub retry_after: u32,
    /// How long to wait between the two calibration readings.
    pub calibration: Duration,
    /// Replace an existing file at the path.
    pub overwrite: bool,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            n_subbufs: DEFAULT_SUBBUFS,
            subbuf_size: DEFAULT_SUBBUF_SIZE,
            retry_after: DEFAULT_RETRY_AFTER,
            calibration: Duration::from_millis(20),
            overwrite: false,
        }
    }
}

impl PoolConfig {
    /// Checks the geometry.
    pub fn validate(&self) -> Result<(), PoolError> {
        check_geometry(self.n_subbufs, self.subbuf_size).map_err(PoolError::Geometry)
    }
}

fn check_geometry(n: u32, size: u32) -> Result<(), String> {
    if n == 0 || n > 1 << 20 {
        return Err(format!("{n} sub-buffers: must be 1 to 1048576"));
    }
    if !(8192..=1 << 30).contains(&size) || !(size as usize).is_multiple_of(PAGE) {
        return Err(format!(
            "sub-buffer size {size}: must be a multiple of 4096 from 8192 to 1 GiB"
        ));
    }
    Ok(())
}

/// What kind of file `ft` is, in words ("a FIFO", "a directory"…), for errors about a
/// path that is not the regular file a tool expects.
pub fn file_kind(ft: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "a regular file"
    }
}

/// A mapped pool. Cheap to share between threads (`&Pool`); every mutation goes
/// through atomics in the mapping.
pub struct Pool {
    map: MmapRaw,
    path: PathBuf,
    info: PoolInfo,
}

// SAFETY: all shared state lives in the mapping and is only accessed through atomics or
// under the exclusive ownership that the slot protocol grants (see crate::slots).
unsafe impl Send for Pool {}
// SAFETY: as above.
unsafe impl Sync for Pool {}

impl Pool {
    /// Creates a pool file at `path` and maps it, pre-faulting every page.
    pub fn create(path: impl AsRef<Path>, cfg: &PoolConfig) -> Result<Pool, PoolError> {
        let path = path.as_ref().to_path_buf();
        cfg.validate()?;
        let io = |what| {
            let p = path.clone();
            move |source| PoolError::Io {
                path: p,
                what,
                source,
            }
        };
        if cfg.overwrite {
            // Replaced, never written through: the old file (or a symbolic link planted
            // at its name) is unlinked and a new one created exclusively.
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io("remove the old file")(e))
                }
                _ => {}
            }
        }
        // O_EXCL (which never follows a symbolic link), mode 0600 from the start, then
        // exactly the mode asked for, whatever the umask (crate::access).
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
                .map_err(io("create"))?
        };
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::Permissions::from_mode(crate::access::pool_mode());
            if let Err(e) = file.set_permissions(mode) {
                let _ = std::fs::remove_file(&path);
                return Err(io("chmod")(e));
            }
        }
        let meta = meta_area_size(cfg.n_subbufs);
        let total = cfg.n_subbufs + meta;
        let size = file_size(total, cfg.subbuf_size);
        let map = match Self::size_and_map(&file, size) {
            Ok(m) => m,
            Err((what, source)) => {
                // Leave no half-made pool behind.
                let _ = std::fs::remove_file(&path);
                return Err(PoolError::Io { path, what, source });
            }
        };
        let me = sys::current_holder();
        let c0 = (
            sys::rdtsc(),
            sys::clock_ns(libc::CLOCK_REALTIME),
            sys::clock_ns(libc::CLOCK_MONOTONIC),
        );
        std::thread::sleep(cfg.calibration);
        let c1 = (
            sys::rdtsc(),
            sys::clock_ns(libc::CLOCK_REALTIME),
            sys::clock_ns(libc::CLOCK_MONOTONIC),
        );
        let info = PoolInfo {
            magic: [0; 8],
            version: FORMAT_VERSION,
            header_size: HEADER_SIZE as u32,
            n_subbufs: total,
            subbuf_size: cfg.subbuf_size,
            slots_offset: HEADER_SIZE as u64,
            data_offset: data_offset(total),
            file_size: size,
            created_unix_ns: c0.1,
            retry_after: cfg.retry_after,
            flags: if crate::access::shared_writers() {
                POOL_FLAG_SHARED_WRITERS
            } else {
                0
            },
            calib: Calibration {
                tsc0: c0.0,
                realtime0_ns: c0.1,
                monotonic0_ns: c0.2,
                tsc1: c1.0,
                realtime1_ns: c1.1,
                monotonic1_ns: c1.2,
            },
            hostname: sys::hostname(),
            creator_pid: me.pid,
            _pad0: 0,
            creator_start_ticks: sys::proc_stat(me.pid).map_or(0, |s| s.2),
            meta_subbufs: meta,
            _reserved: [0; 60],
        };
        let pool = Pool {
            map,
            path: path.clone(),
            info,
        };
        // SAFETY: the mapping is `size` bytes, larger than the header; nobody else can
        // use the file before the magic is written below.
        unsafe {
            core::ptr::copy_nonoverlapping(
                bytemuck::bytes_of(&info).as_ptr(),
                pool.map.as_mut_ptr(),
                core::mem::size_of::<PoolInfo>(),
            );
        }
        for i in 0..total as usize {
            let h = pool.subbuf_header(i);
            h.magic
                .store(SUBBUF_MAGIC, core::sync::atomic::Ordering::Relaxed);
            h.data_size.store(
                cfg.subbuf_size - SUBBUF_HEADER as u32,
                core::sync::atomic::Ordering::Relaxed,
            );
        }
        // The magic goes last, with a release fence: an opener that sees it sees the rest.
        core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
        // SAFETY: offset 0 is inside the mapping; 8 bytes.
        unsafe { core::ptr::copy_nonoverlapping(POOL_MAGIC.as_ptr(), pool.map.as_mut_ptr(), 8) };
        pool.map
            .flush_range(0, HEADER_SIZE)
            .map_err(io("flush header"))?;
        Ok(Pool {
            info: PoolInfo {
                magic: POOL_MAGIC,
                ..info
            },
            ..pool
        })
    }

    /// Sizes a new pool file, reserves its blocks and maps it pre-faulted.
    fn size_and_map(file: &File, size: u64) -> Result<MmapRaw, (&'static str, std::io::Error)> {
        file.set_len(size).map_err(|e| ("resize", e))?;
        // Reserve the blocks now: on a full tmpfs (or over a size limit) creation fails
        // here with a clear error instead of SIGBUS in a traced program later.
        {
            use std::os::fd::AsRawFd;
            // SAFETY: a valid open fd and an in-range length.
            let r = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, size as libc::off_t) };
            if r != 0 {
                return Err(("allocate", std::io::Error::from_raw_os_error(r)));
            }
        }
        // Pre-fault at creation: the pages exist in the page cache before any traced
        // program touches them.
        MmapOptions::new()
            .populate()
            .map_raw(file)
            .map_err(|e| ("map", e))
    }

    /// Opens an existing pool read-write, validating magic, version, geometry and size
    /// before mapping it (a wrong file gives an error, never SIGBUS), and pre-faults the
    /// header and state pages in this process.
    ///
    /// The pool must be owned by this process's uid or by root and writable by no one
    /// else ([`crate::access::check_trusted`], checked on the open descriptor before it
    /// is mapped): only its owner could then truncate it while mapped, which would raise
    /// SIGBUS on an access past the new end. Culprit never truncates a pool; users must
    /// not either (`bufpool/FORMAT.md` §8, "Other local users").
    pub fn open(path: impl AsRef<Path>) -> Result<Pool, PoolError> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|source| PoolError::Io {
                path: path.clone(),
                what: "open read-write",
                source,
            })?;
        Self::open_file(file, path)
    }

    fn open_file(file: File, path: PathBuf) -> Result<Pool, PoolError> {
        let invalid = |why: String| PoolError::Invalid {
            path: path.clone(),
            why,
        };
        let meta = file.metadata().map_err(|source| PoolError::Io {
            path: path.clone(),
            what: "stat",
            source,
        })?;
        if !meta.is_file() {
            let kind = file_kind(meta.file_type());
            return Err(invalid(format!("{kind}, not a pool file")));
        }
        // Only a pool nobody else can write or truncate is mapped: another user could
        // otherwise shrink it under the mapping and kill this process with SIGBUS
        // (`bufpool/FORMAT.md` §8, "Other local users"). Checked on the open descriptor, before mmap.
        // The owner first: a pool someone else owns is never used, whatever it says.
        {
            use std::os::unix::fs::MetadataExt;
            if let Some(why) = crate::access::untrusted_why(meta.uid(), 0) {
                return Err(invalid(why));
            }
        }
        let len = meta.len();
        if len < HEADER_SIZE as u64 {
            return Err(invalid(format!(
                "file is {len} bytes, smaller than the {HEADER_SIZE}-byte header"
            )));
        }
        let mut raw = [0u8; core::mem::size_of::<PoolInfo>()];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut raw, 0).map_err(|source| {
            PoolError::Io {
                path: path.clone(),
                what: "read header",
                source,
            }
        })?;
        let info: PoolInfo = bytemuck::pod_read_unaligned(&raw);
        if info.magic != POOL_MAGIC {
            return Err(invalid(if info.magic == [0; 8] {
                "no magic (not a pool, or still being created)".into()
            } else {
                format!("bad magic {:02x?}", info.magic)
            }));
        }
        // Writable by others only if its owner made it so (`--shared-writers`).
        if info.flags & POOL_FLAG_SHARED_WRITERS == 0 {
            if let Err(why) = crate::access::check_trusted(&meta) {
                return Err(invalid(why));
            }
        }
        if info.version != FORMAT_VERSION {
            return Err(invalid(format!(
                "format version {} (this build reads version {FORMAT_VERSION})",
                info.version
            )));
        }
        if info.meta_subbufs > MAX_META_SUBBUFS || info.meta_subbufs >= info.n_subbufs {
            return Err(invalid(format!(
                "geometry: a metadata area of {} of {} sub-buffers (at most {MAX_META_SUBBUFS}, \
                 and fewer than all)",
                info.meta_subbufs, info.n_subbufs
            )));
        }
        check_geometry(info.n_subbufs - info.meta_subbufs, info.subbuf_size)
            .map_err(|e| invalid(format!("geometry: {e}")))?;
        let want = file_size(info.n_subbufs, info.subbuf_size);
        if info.header_size != HEADER_SIZE as u32
            || info.slots_offset != HEADER_SIZE as u64
            || info.data_offset != data_offset(info.n_subbufs)
            || info.file_size != want
        {
            return Err(invalid("header offsets disagree with its geometry".into()));
        }
        if len != want {
            return Err(invalid(format!(
                "file is {len} bytes but its geometry ({} × {} bytes) needs {want}",
                info.n_subbufs, info.subbuf_size
            )));
        }
        let map = MmapOptions::new()
            .map_raw(&file)
            .map_err(|source| PoolError::Io {
                path: path.clone(),
                what: "map",
                source,
            })?;
        let pool = Pool {
            map,
            path: path.clone(),
            info,
        };
        pool.populate_range(0, info.data_offset as usize);
        Ok(pool)
    }

    /// The pool file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The immutable header.
    pub fn info(&self) -> &PoolInfo {
        &self.info
    }

    /// Number of sub-buffers, the metadata area included (the number of state words).
    pub fn n_subbufs(&self) -> usize {
        self.info.n_subbufs as usize
    }

    /// Number of sub-buffers for entries: indices `0..entry_subbufs()`.
    pub fn entry_subbufs(&self) -> usize {
        (self.info.n_subbufs - self.info.meta_subbufs) as usize
    }

    /// The metadata area's sub-buffers (empty in a pool made before it existed).
    pub fn meta_area(&self) -> core::ops::Range<usize> {
        self.entry_subbufs()..self.n_subbufs()
    }

    /// Size of a sub-buffer's data area.
    pub fn data_size(&self) -> usize {
        self.info.subbuf_size as usize - SUBBUF_HEADER
    }

    /// The mutable shared header.
    pub fn shared(&self) -> &PoolShared {
        // SAFETY: offset 256 is inside the header page, suitably aligned (page-aligned
        // base + 256), and PoolShared is all atomics, valid for any bit pattern.
        unsafe { &*(self.map.as_ptr().add(256) as *const PoolShared) }
    }

    /// The state table.
    pub fn slots(&self) -> Slots<'_> {
        // SAFETY: the state words are `n_subbufs` aligned u64s at `slots_offset`, inside
        // the mapping (checked at open); AtomicU64 is valid for any bit pattern.
        let words = unsafe {
            core::slice::from_raw_parts(
                self.map.as_ptr().add(self.info.slots_offset as usize) as *const AtomicU64,
                self.info.n_subbufs as usize,
            )
        };
        Slots::new(words)
    }

    fn subbuf_base(&self, i: usize) -> *mut u8 {
        assert!(i < self.n_subbufs(), "sub-buffer index out of range");
        // SAFETY: i < n_subbufs, so the sub-buffer lies inside the mapping (size checked).
        unsafe {
            self.map
                .as_mut_ptr()
                .add(self.info.data_offset as usize + i * self.info.subbuf_size as usize)
        }
    }

    /// Header of sub-buffer `i`.
    pub fn subbuf_header(&self, i: usize) -> &SubBufHeader {
        // SAFETY: page-aligned, inside the mapping; all-atomic type valid for any bits.
        unsafe { &*(self.subbuf_base(i) as *const SubBufHeader) }
    }

    /// Pointer to the data area of sub-buffer `i`. Only the slot's current holder may
    /// access it (see `crate::slots`).
    pub fn subbuf_data(&self, i: usize) -> *mut u8 {
        // SAFETY: the header is 64 bytes; the data area follows it inside the sub-buffer.
        unsafe { self.subbuf_base(i).add(SUBBUF_HEADER) }
    }

    /// Asks the kernel to map sub-buffer `i`'s pages into this process now, so the
    /// writer's appends never page-fault. One system call per acquired sub-buffer.
    pub fn prefault(&self, i: usize) {
        let off = self.info.data_offset as usize + i * self.info.subbuf_size as usize;
        self.populate_range(off, self.info.subbuf_size as usize);
    }

    fn populate_range(&self, off: usize, len: usize) {
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        let _e = sys::ErrnoGuard::new();
        // SAFETY: callers pass a page-aligned range inside the mapping;
        // MADV_POPULATE_WRITE only fills page tables (Linux >= 5.14; older kernels
        // return EINVAL and the pages fault in lazily, which is only slower).
        unsafe {
            libc::madvise(
                self.map.as_mut_ptr().add(off) as *mut libc::c_void,
                len,
                MADV_POPULATE_WRITE,
            )
        };
    }

    /// Host name recorded at creation.
    pub fn hostname(&self) -> String {
        let h = &self.info.hostname;
        let end = h.iter().position(|&c| c == 0).unwrap_or(h.len());
        String::from_utf8_lossy(&h[..end]).into_owned()
    }

    /// Copies the header of sub-buffer `i`.
    pub fn subbuf_info(&self, i: usize) -> SubBufInfo {
        use core::sync::atomic::Ordering::Relaxed;
        let h = self.subbuf_header(i);
        SubBufInfo {
            magic: h.magic.load(Relaxed),
            flags: h.flags.load(Relaxed),
            pid: h.pid.load(Relaxed),
            tid: h.tid.load(Relaxed),
            seq: h.seq.load(Relaxed),
            first_tsc: h.first_tsc.load(Relaxed),
            last_tsc: h.last_tsc.load(Relaxed),
            lost_before: h.lost_before.load(Relaxed),
            bytes_used: h.bytes_used.load(core::sync::atomic::Ordering::Acquire),
            data_size: h.data_size.load(Relaxed),
            owner_start_ticks: h.owner_start_ticks.load(Relaxed),
        }
    }

    /// Resets sub-buffer `i`'s header for its next writer (`bytes_used` first).
    pub(crate) fn reset_header(&self, i: usize) {
        use core::sync::atomic::Ordering::Relaxed;
        let h = self.subbuf_header(i);
        h.bytes_used.store(0, Relaxed);
        h.flags.store(0, Relaxed);
        h.pid.store(0, Relaxed);
        h.tid.store(0, Relaxed);
        h.seq.store(0, Relaxed);
        h.first_tsc.store(0, Relaxed);
        h.last_tsc.store(0, Relaxed);
        h.lost_before.store(0, Relaxed);
        h.owner_start_ticks.store(0, Relaxed);
    }

    /// This process's identity in the slot protocol.
    pub fn holder(&self) -> Holder {
        sys::current_holder()
    }
}
