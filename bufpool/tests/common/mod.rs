//! Shared pieces of the multi-process tests: the writer and reader child processes
//! (the test binary re-executed with a role in the environment), the side file through
//! which writers publish their progress, the readers' output files, and the checker
//! that accounts for every entry.

#![allow(dead_code)]

use bufpool::format::{
    encode_fn, encode_lib, encode_ret, Decoder, Kind, LibFn, LibOpts, ADDR_MASK,
};
use bufpool::layout::SubBufInfo;
use bufpool::{salvage_dead, sys, Consumer, Pool, WriterState};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};

/// Environment variable naming the child's role ("writer" or "reader").
pub const ROLE: &str = "BUFPOOL_TEST_ROLE";
const POOL: &str = "BUFPOOL_TEST_POOL";
const SIDE: &str = "BUFPOOL_TEST_SIDE";
const INDEX: &str = "BUFPOOL_TEST_INDEX";
const THREADS: &str = "BUFPOOL_TEST_THREADS";
const COUNT: &str = "BUFPOOL_TEST_COUNT";
const OUT: &str = "BUFPOOL_TEST_OUT";
const STOP: &str = "BUFPOOL_TEST_STOP";
const SLOW: &str = "BUFPOOL_TEST_SLOW_RELEASE";

/// Magic of one record in a test reader's output file.
const REC_MAGIC: u32 = 0xC0FF_EE01;

/// A directory on tmpfs when there is one (the pools live in shared memory in real use).
pub fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().expect("temporary directory")
}

/// Side file: per writer thread two u64s — its tid, and `produced << 32 | pending_lost`
/// stored after every append (so a killed writer's last known progress survives it).
pub struct Side {
    map: memmap2::MmapMut,
}

impl Side {
    pub fn create(path: &Path, slots: usize) -> Side {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .unwrap();
        f.set_len((slots * 16) as u64).unwrap();
        // SAFETY: the file is ours, sized above and never truncated while mapped.
        let map = unsafe { memmap2::MmapMut::map_mut(&f).unwrap() };
        Side { map }
    }

    fn open(path: &Path) -> Side {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        // SAFETY: as in `create`.
        let map = unsafe { memmap2::MmapMut::map_mut(&f).unwrap() };
        Side { map }
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i * 8 + 8 <= self.map.len());
        // SAFETY: in bounds (checked), 8-aligned (page-aligned map), valid for any bits.
        unsafe { &*(self.map.as_ptr().add(i * 8) as *const AtomicU64) }
    }

    /// (tid, produced, pending lost) of writer thread slot `i`.
    pub fn get(&self, i: usize) -> (u32, u64, u64) {
        let tid = self.word(2 * i).load(Ordering::Relaxed) as u32;
        let p = self.word(2 * i + 1).load(Ordering::Relaxed);
        (tid, p >> 32, p & 0xffff_ffff)
    }
}

/// Spawns this test binary as a child with a role. `test_name` is the (ignored) test
/// function that dispatches on [`ROLE`].
pub fn spawn(test_name: &str, role: &str, env: &[(&str, String)]) -> Child {
    let exe = std::env::current_exe().unwrap();
    let mut c = Command::new(exe);
    c.args([
        test_name,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
        "-q",
    ])
    .env(ROLE, role)
    .stdout(std::process::Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().unwrap()
}

/// Environment of a writer child.
pub fn writer_env(
    pool: &Path,
    side: &Path,
    index: usize,
    threads: usize,
    count: u64,
) -> Vec<(&'static str, String)> {
    vec![
        (POOL, pool.display().to_string()),
        (SIDE, side.display().to_string()),
        (INDEX, index.to_string()),
        (THREADS, threads.to_string()),
        (COUNT, count.to_string()),
    ]
}

/// Environment of a reader child.
pub fn reader_env(pool: &Path, out: &Path, stop: &Path) -> Vec<(&'static str, String)> {
    vec![
        (POOL, pool.display().to_string()),
        (OUT, out.display().to_string()),
        (STOP, stop.display().to_string()),
    ]
}

/// Environment of a reader child that dawdles between saving and releasing.
pub fn slow_reader_env(pool: &Path, out: &Path, stop: &Path) -> Vec<(&'static str, String)> {
    let mut v = reader_env(pool, out, stop);
    v.push((SLOW, "1".into()));
    v
}

/// The body of a child process, if this process is one. Returns false otherwise.
pub fn child_main() -> bool {
    let Ok(role) = std::env::var(ROLE) else {
        return false;
    };
    match role.as_str() {
        "writer" => writer_main(),
        "reader" => reader_main(),
        r => panic!("unknown role {r}"),
    }
    true
}

fn env_path(k: &str) -> PathBuf {
    PathBuf::from(std::env::var(k).unwrap_or_else(|_| panic!("{k} is set")))
}

fn env_num(k: &str) -> u64 {
    std::env::var(k).unwrap().parse().unwrap()
}

/// Entry number `k` of a thread: a mix of 20-byte calls, 16-byte returns and library
/// entries of varying size; `k` is recoverable with [`entry_number`].
pub fn entry_for(k: u64) -> bufpool::format::EntryBuf {
    let tsc = sys::rdtsc();
    match k % 3 {
        0 => encode_fn(Kind::FnEnter, tsc, 0x40_1000, k),
        1 => encode_ret(Kind::FnExit, tsc, k, (k & 0xffff) as u16),
        _ => {
            let mut o = LibOpts {
                fd: Some(3),
                ret: Some(k as i64),
                ..Default::default()
            };
            let n = (k % 97) as usize;
            o.set_str(&[b'x'; 96][..n.min(96)]);
            encode_lib(Kind::LibExit, tsc, k, LibFn::Recv, &o)
        }
    }
}

/// Recovers `k` from an entry written by [`entry_for`] (None for a `Lost` marker).
fn entry_number(e: &bufpool::format::EntryRef<'_>) -> Option<u64> {
    match e.kind {
        Kind::FnEnter | Kind::FnExit => Some(e.callee & ADDR_MASK),
        Kind::LibExit => Some(e.caller),
        Kind::Lost => None,
        k => panic!("unexpected entry kind {k:?} at {}", e.offset),
    }
}

fn writer_main() {
    let pool = Pool::open(env_path(POOL)).unwrap();
    let side = Side::open(&env_path(SIDE));
    let index = env_num(INDEX) as usize;
    let threads = env_num(THREADS) as usize;
    let count = env_num(COUNT);
    let me = pool.holder();
    let start = sys::proc_stat(me.pid).unwrap().2;
    std::thread::scope(|s| {
        for t in 0..threads {
            let (pool, side) = (&pool, &side);
            s.spawn(move || {
                let slot = index * threads + t;
                let tid = sys::gettid();
                side.word(2 * slot).store(tid as u64, Ordering::Relaxed);
                let mut w = WriterState::new();
                w.attach(pool, me.pid, start, tid);
                for k in 0..count {
                    w.append(pool, entry_for(k).as_bytes());
                    side.word(2 * slot + 1)
                        .store(((k + 1) << 32) | (w.lost & 0xffff_ffff), Ordering::Relaxed);
                }
                w.flush(pool, bufpool::layout::FLAG_THREAD_EXIT);
                assert_eq!(w.lost, 0, "flush reports pending drops");
            });
        }
    });
}

fn reader_main() {
    let pool = Pool::open(env_path(POOL)).unwrap();
    let stop = env_path(STOP);
    let mut out = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(env_path(OUT))
        .unwrap();
    let c = Consumer::new(&pool);
    let slow = std::env::var_os(SLOW).is_some();
    let mut rec = Vec::new();
    let mut idle = 0u64;
    for iter in 0u64.. {
        if iter % 32 == 0 {
            salvage_dead(&pool);
        }
        match c.take() {
            Some(t) => {
                idle = 0;
                rec.clear();
                rec.extend_from_slice(&REC_MAGIC.to_le_bytes());
                rec.extend_from_slice(&(t.data().len() as u32).to_le_bytes());
                rec.extend_from_slice(bytemuck::bytes_of(t.info()));
                rec.extend_from_slice(t.data());
                out.write_all(&rec).unwrap();
                if slow {
                    // Widen the saved-but-not-released window so that kills land in it.
                    let t0 = std::time::Instant::now();
                    while t0.elapsed() < std::time::Duration::from_micros(300) {
                        std::hint::spin_loop();
                    }
                }
                t.release();
            }
            None => {
                idle += 1;
                if stop.exists() && idle > 2 {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        }
    }
}

/// One saved sub-buffer.
#[derive(Clone)]
pub struct Saved {
    pub info: SubBufInfo,
    pub data: Vec<u8>,
}

/// Reads a test reader's output file; a torn last record (reader killed mid-write) is
/// ignored — that sub-buffer was not released, so it is read again.
pub fn read_out(path: &Path) -> Vec<Saved> {
    let b = std::fs::read(path).unwrap_or_default();
    let mut v = Vec::new();
    let mut p = 0usize;
    while p + 72 <= b.len() {
        let magic = u32::from_le_bytes(b[p..p + 4].try_into().unwrap());
        assert_eq!(
            magic,
            REC_MAGIC,
            "{}: record at {p} is corrupt",
            path.display()
        );
        let n = u32::from_le_bytes(b[p + 4..p + 8].try_into().unwrap()) as usize;
        if p + 72 + n > b.len() {
            break;
        }
        let info: SubBufInfo = bytemuck::pod_read_unaligned(&b[p + 8..p + 72]);
        v.push(Saved {
            info,
            data: b[p + 72..p + 72 + n].to_vec(),
        });
        p += 72 + n;
    }
    v
}

/// Drains everything left in the pool as the calling (test) process: one salvage pass,
/// then take and release until nothing is written. Returns what was taken.
pub fn drain(pool: &Pool) -> Vec<Saved> {
    salvage_dead(pool);
    let c = Consumer::new(pool);
    let mut v = Vec::new();
    while let Some(t) = c.take() {
        v.push(Saved {
            info: *t.info(),
            data: t.data().to_vec(),
        });
        t.release();
    }
    v
}

/// What a writer thread is known to have done (from the side file).
#[derive(Clone, Copy, Debug)]
pub struct Known {
    pub pid: u32,
    pub tid: u32,
    /// Appends that returned.
    pub produced: u64,
    /// Drops not yet written into the trace when `produced` was stored.
    pub pending_lost: u64,
}

/// Result of accounting one thread's entries.
#[derive(Debug, Default)]
pub struct Tally {
    /// Entries recorded.
    pub recorded: u64,
    /// Entries reported lost in-band.
    pub lost: u64,
    /// Sub-buffers seen more than once (re-read after a reader died).
    pub duplicates: u64,
    /// Sub-buffers flagged salvaged.
    pub salvaged: u64,
}

/// Checks every saved sub-buffer against what the writers are known to have done:
/// duplicates (same pid, tid, seq) are byte-identical; each thread's sequence numbers
/// are 0..=max without a gap; its entries, in (seq, position) order, are 0, 1, 2… except
/// for gaps that `Lost` markers account for exactly; and the count reaches what the
/// side file says was produced (`exact`: writers exited normally; otherwise they were
/// killed, and the count must lie between the committed and the produced count).
/// With `exact`, the shortfalls of all threads must add up to `unreported` (the pool's
/// `lost_unreported`: drops that could not be written into the trace at flush).
pub fn check(saved: &[Saved], known: &[Known], exact: bool, unreported: u64) -> Tally {
    let mut by_key: HashMap<(u32, u32, u64), &Saved> = HashMap::new();
    let mut total = Tally::default();
    let mut shortfall = 0u64;
    for s in saved {
        let key = (s.info.pid, s.info.tid, s.info.seq);
        assert!(
            s.info.bytes_used as usize == s.data.len(),
            "{key:?}: length"
        );
        assert!(
            !s.data.is_empty(),
            "{key:?}: an empty sub-buffer was published"
        );
        if let Some(prev) = by_key.insert(key, s) {
            assert!(
                prev.data == s.data,
                "{key:?}: saved twice with different contents"
            );
            total.duplicates += 1;
        }
    }
    let mut threads: HashMap<(u32, u32), BTreeMap<u64, &Saved>> = HashMap::new();
    for (&(pid, tid, seq), s) in &by_key {
        threads.entry((pid, tid)).or_default().insert(seq, s);
    }
    for k in known {
        let bufs = threads.remove(&(k.pid, k.tid)).unwrap_or_default();
        let mut next = 0u64;
        for (i, (&seq, s)) in bufs.iter().enumerate() {
            assert_eq!(
                seq, i as u64,
                "pid {} tid {}: sub-buffer seq gap",
                k.pid, k.tid
            );
            if s.info.flags & bufpool::layout::FLAG_SALVAGED != 0 {
                total.salvaged += 1;
            }
            let mut first = true;
            for e in Decoder::new(&s.data) {
                let e =
                    e.unwrap_or_else(|err| panic!("pid {} tid {} seq {seq}: {err}", k.pid, k.tid));
                match entry_number(&e) {
                    None => {
                        assert!(first, "a Lost marker only opens a sub-buffer");
                        assert_eq!(e.lost, s.info.lost_before, "marker and header agree");
                        next += e.lost;
                        total.lost += e.lost;
                    }
                    Some(n) => {
                        assert_eq!(
                            n, next,
                            "pid {} tid {} seq {seq}: entry out of order",
                            k.pid, k.tid
                        );
                        next += 1;
                        total.recorded += 1;
                    }
                }
                first = false;
            }
        }
        if exact {
            assert!(
                next <= k.produced,
                "pid {} tid {}: more than produced",
                k.pid,
                k.tid
            );
            shortfall += k.produced - next;
        } else {
            // Everything produced before the last progress store, except drops still
            // pending then, was committed and must be found; at most the one append
            // in flight at the kill may be found beyond it.
            let committed = k.produced - k.pending_lost.min(k.produced);
            assert!(
                next >= committed && next <= k.produced + 1,
                "pid {} tid {}: found {next}, committed {committed}, produced {}",
                k.pid,
                k.tid,
                k.produced
            );
        }
    }
    assert!(
        threads.is_empty(),
        "sub-buffers of unknown threads: {:?}",
        threads.keys()
    );
    if exact {
        assert_eq!(
            shortfall, unreported,
            "recorded + lost + unreported != produced"
        );
    }
    total
}
