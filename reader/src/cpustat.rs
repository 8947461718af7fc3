//! CPU time of the traced processes, sampled by the reader into `cpu.tsv` of the trace
//! directory, so that analyses can set each process's measured CPU time beside what its
//! trace says it was busy with (`culprit demand`).
//!
//! Every [`CpuSampler::tick`] (250 ms by default, [`crate::ReaderOptions`]) the reader
//! reads, for each process that maps the pool, `/proc/PID/stat` (user + system time of the
//! whole process, dead threads included, in clock ticks) and `/proc/PID/task/*/schedstat`
//! (time on CPU of each live thread and time it waited on a run queue, in ns). The traced processes are found by scanning
//! `/proc/*/maps` for the pool file once a second; a process seen once is sampled at every
//! tick until it is gone. Nothing runs inside the traced processes.
//!
//! The file is text, one sample per line, tab-separated, after a header line:
//!
//! ```text
//! t_unix_ns  pid  start_ticks  stat_cpu_ns  sched_cpu_ns  threads  sched_wait_ns  sched_slices
//! 1763948400123456789  4242  1234567  120000000  118734512  3  2301245  5120
//! ```
//!
//! (one tab between fields).
//!
//! `stat_cpu_ns` is `(utime + stime) × 10⁹ / CLK_TCK`; `sched_cpu_ns` and `sched_wait_ns`
//! (runnable but waiting for a CPU: what a process loses on a shared machine) are sums over
//! the live threads (0 if `schedstat` is not readable); `sched_slices` is the sum of their
//! timeslices (`schedstat`'s third field: how many times a thread was put on a CPU), so
//! that a wait can be told per wakeup. Files written before the wait column existed have
//! six fields, their wait reads as 0; before the slices column, seven, their slices 0. Lines are appended and flushed once per
//! tick; a reader killed mid-line leaves a torn last line, which [`read_samples`] skips.

use crate::error::{io, Result};
use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Name of the side file in a trace directory.
pub const CPU_FILE: &str = "cpu.tsv";

const HEADER: &str =
    "t_unix_ns\tpid\tstart_ticks\tstat_cpu_ns\tsched_cpu_ns\tthreads\tsched_wait_ns\tsched_slices";

/// One sample of one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuSample {
    /// When (`CLOCK_REALTIME`, ns).
    pub t_unix_ns: u64,
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks (with `pid`, the process's identity).
    pub start_ticks: u64,
    /// User + system time of the process (ns, clock-tick resolution).
    pub stat_cpu_ns: u64,
    /// Sum of the live threads' time on CPU (ns), 0 if unknown.
    pub sched_cpu_ns: u64,
    /// Live threads.
    pub threads: u32,
    /// Sum of the live threads' time waiting on a run queue (ns), 0 if unknown.
    pub sched_wait_ns: u64,
    /// Sum of the live threads' timeslices (times put on a CPU), 0 if unknown.
    pub sched_slices: u64,
}

/// Samples the CPU time of the processes mapping a pool file into a trace directory.
pub struct CpuSampler {
    pool_dev: String,
    pool_ino: u64,
    out: std::io::BufWriter<std::fs::File>,
    path: PathBuf,
    known: HashMap<u32, u64>,
    last_scan: Option<Instant>,
    rescan: Duration,
    tick_ns: f64,
    /// Time spent sampling so far (to report its cost).
    pub spent: Duration,
    /// Samples written so far.
    pub samples: u64,
}

impl CpuSampler {
    /// A sampler of the processes mapping `pool`, appending to `dir/cpu.tsv`.
    pub fn new(pool: &Path, dir: &Path) -> Result<CpuSampler> {
        let meta = std::fs::metadata(pool).map_err(io(pool, "stat pool file"))?;
        let dev = meta.dev();
        let path = dir.join(CPU_FILE);
        let (f, fresh) = crate::safefile::open_append(&path)?;
        let mut out = std::io::BufWriter::new(f);
        if fresh {
            writeln!(out, "{HEADER}").map_err(io(&path, "write CPU sample file"))?;
        }
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        Ok(CpuSampler {
            pool_dev: format!(
                "{:02x}:{:02x}",
                libc::major(dev as libc::dev_t),
                libc::minor(dev as libc::dev_t)
            ),
            pool_ino: meta.ino(),
            out,
            path,
            known: HashMap::new(),
            last_scan: None,
            rescan: Duration::from_secs(1),
            tick_ns: 1e9 / if hz > 0 { hz as f64 } else { 100.0 },
            spent: Duration::ZERO,
            samples: 0,
        })
    }

    /// Samples every known process (finding new ones first when a second has passed) and
    /// flushes the lines.
    pub fn tick(&mut self) -> Result<()> {
        let t = Instant::now();
        if self.last_scan.is_none_or(|l| l.elapsed() >= self.rescan) {
            self.last_scan = Some(Instant::now());
            self.scan();
        }
        let now = now_unix_ns();
        let mut gone = Vec::new();
        let mut pids: Vec<u32> = self.known.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            match sample(pid, self.tick_ns) {
                Some(mut s) if s.start_ticks == self.known[&pid] => {
                    s.t_unix_ns = now;
                    writeln!(
                        self.out,
                        "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                        s.t_unix_ns,
                        s.pid,
                        s.start_ticks,
                        s.stat_cpu_ns,
                        s.sched_cpu_ns,
                        s.threads,
                        s.sched_wait_ns,
                        s.sched_slices
                    )
                    .map_err(io(&self.path, "write CPU sample file"))?;
                    self.samples += 1;
                }
                _ => gone.push(pid),
            }
        }
        for pid in gone {
            self.known.remove(&pid);
        }
        self.out
            .flush()
            .map_err(io(&self.path, "write CPU sample file"))?;
        self.spent += t.elapsed();
        Ok(())
    }

    /// Samples `pid` from now on, whether or not it maps the pool (benchmarks, tests).
    pub fn watch(&mut self, pid: u32) {
        if let Some((_, _, start)) = bufpool::sys::proc_stat(pid) {
            self.known.insert(pid, start);
        }
    }

    /// Finds the processes (other than this one) that map the pool.
    fn scan(&mut self) {
        let me = std::process::id();
        let Ok(rd) = std::fs::read_dir("/proc") else {
            return;
        };
        for ent in rd.flatten() {
            let Some(pid) = ent.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if pid == me || self.known.contains_key(&pid) {
                continue;
            }
            let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
                continue;
            };
            if crate::watch::maps_contain(&maps, &self.pool_dev, self.pool_ino) {
                if let Some((_, _, start)) = bufpool::sys::proc_stat(pid) {
                    self.known.insert(pid, start);
                }
            }
        }
    }
}

fn now_unix_ns() -> u64 {
    bufpool::sys::clock_ns(libc::CLOCK_REALTIME)
}

/// One sample of `pid` (its time left 0), or None if it is gone.
fn sample(pid: u32, tick_ns: f64) -> Option<CpuSample> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.iter().rposition(|&c| c == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 2..)?).ok()?;
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // After the command: field 3 is f[0]; utime (14) f[11], stime (15) f[12], starttime (22) f[19].
    let state = f.first()?;
    if *state == "Z" || *state == "X" {
        return None;
    }
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    let start: u64 = f.get(19)?.parse().ok()?;
    let (mut sched, mut wait, mut slices, mut threads) = (0u64, 0u64, 0u64, 0u32);
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for ent in rd.flatten() {
            let mut p = ent.path();
            p.push("schedstat");
            if let Ok(s) = std::fs::read_to_string(&p) {
                let mut f = s.split_ascii_whitespace().map(|x| x.parse::<u64>().ok());
                if let Some(Some(ns)) = f.next() {
                    sched += ns;
                    wait += f.next().flatten().unwrap_or(0);
                    slices += f.next().flatten().unwrap_or(0);
                    threads += 1;
                }
            }
        }
    }
    Some(CpuSample {
        t_unix_ns: 0,
        pid,
        start_ticks: start,
        stat_cpu_ns: ((utime + stime) as f64 * tick_ns) as u64,
        sched_cpu_ns: sched,
        threads,
        sched_wait_ns: wait,
        sched_slices: slices,
    })
}

/// The largest `cpu.tsv` read (1 GiB: some 20 million samples).
pub const MAX_CPU_FILE_BYTES: u64 = 1 << 30;

/// The samples of a trace directory, in file order (empty if it has none). Lines that
/// do not parse (a torn last line, bytes that are not UTF-8) are skipped. The file is
/// opened through [`crate::safefile`]: a FIFO, a device, a directory or a file larger
/// than [`MAX_CPU_FILE_BYTES`] is an error naming it, found before reading — callers
/// drop the CPU times with a warning ([`read_samples_or_warn`]).
pub fn read_samples(dir: &Path) -> Result<Vec<CpuSample>> {
    let path = dir.join(CPU_FILE);
    let bytes = match crate::safefile::read_bounded(&path, MAX_CPU_FILE_BYTES) {
        Ok(b) => b,
        Err(crate::Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Vec::new())
        }
        Err(e) => return Err(e),
    };
    Ok(bytes
        .split(|&b| b == b'\n')
        .filter_map(|l| std::str::from_utf8(l).ok())
        .filter_map(parse_line)
        .collect())
}

/// [`read_samples`], or no samples and one line on stderr saying why: CPU times are an
/// addition to an analysis, never a reason for it to fail.
pub fn read_samples_or_warn(dir: &Path) -> Vec<CpuSample> {
    read_samples(dir).unwrap_or_else(|e| {
        eprintln!("culprit: {e}: CPU times not used");
        Vec::new()
    })
}

fn parse_line(l: &str) -> Option<CpuSample> {
    let mut f = l.split('\t');
    let s = CpuSample {
        t_unix_ns: f.next()?.parse().ok()?,
        pid: f.next()?.parse().ok()?,
        start_ticks: f.next()?.parse().ok()?,
        stat_cpu_ns: f.next()?.parse().ok()?,
        sched_cpu_ns: f.next()?.parse().ok()?,
        threads: f.next()?.parse().ok()?,
        sched_wait_ns: 0,
        sched_slices: 0,
    };
    let mut s = s;
    // Older files end after `threads` (six fields) or after the wait (seven).
    if let Some(w) = f.next() {
        s.sched_wait_ns = w.parse().ok()?;
        if let Some(n) = f.next() {
            s.sched_slices = n.parse().ok()?;
        }
    }
    f.next().is_none().then_some(s)
}

/// Runs a sampler every `every` until `stop` says so (the reader's sampling thread).
/// Errors end the sampling with one line on stderr: the trace itself goes on.
pub fn run_sampler(
    pool: &Path,
    dir: &Path,
    every: Duration,
    stop: &std::sync::atomic::AtomicBool,
) -> Option<CpuSampler> {
    let mut s = match CpuSampler::new(pool, dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("culprit reader: CPU sampling off: {e}");
            return None;
        }
    };
    let tick = Duration::from_millis(10).min(every);
    let mut next = Instant::now();
    while !stop.load(std::sync::atomic::Ordering::Acquire) {
        if Instant::now() >= next {
            next += every;
            if let Err(e) = s.tick() {
                eprintln!("culprit reader: CPU sampling off: {e}");
                return Some(s);
            }
        }
        std::thread::sleep(tick);
    }
    let _ = s.tick();
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_a_process_mapping_the_pool_and_reads_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let pool = dir.path().join("pool");
        std::fs::write(&pool, vec![0u8; 4096]).unwrap();
        let mut s = CpuSampler::new(&pool, dir.path()).unwrap();
        // This process maps nothing: no samples, but the header is written.
        s.tick().unwrap();
        assert_eq!(read_samples(dir.path()).unwrap(), vec![]);
        // Sample this very process by hand: CPU time grows while it burns.
        s.watch(std::process::id());
        s.tick().unwrap();
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(60) {
            std::hint::black_box(0u64.wrapping_add(1));
        }
        s.tick().unwrap();
        let v = read_samples(dir.path()).unwrap();
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v[1].sched_cpu_ns > v[0].sched_cpu_ns);
        assert!(v[1].stat_cpu_ns >= v[0].stat_cpu_ns);
        assert!(v[1].threads >= 1);
        assert!(v[1].sched_slices >= v[0].sched_slices && v[1].sched_slices > 0);
        // A file of the six-field format reads with no wait, of the seven-field one with
        // no slices; a ninth field is an error.
        let old = tempfile::tempdir().unwrap();
        std::fs::write(
            old.path().join(CPU_FILE),
            "t_unix_ns\tpid\tstart_ticks\tstat_cpu_ns\tsched_cpu_ns\tthreads\n1\t2\t3\t4\t5\t6\n",
        )
        .unwrap();
        let o = read_samples(old.path()).unwrap();
        assert_eq!((o.len(), o[0].threads, o[0].sched_wait_ns), (1, 6, 0));
        let seven = parse_line("1\t2\t3\t4\t5\t6\t7").unwrap();
        assert_eq!((seven.sched_wait_ns, seven.sched_slices), (7, 0));
        assert_eq!(
            parse_line("1\t2\t3\t4\t5\t6\t7\t8").unwrap().sched_slices,
            8
        );
        assert_eq!(parse_line("1\t2\t3\t4\t5\t6\t7\t8\t9"), None);
        // A torn line is skipped.
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(CPU_FILE))
            .unwrap()
            .write_all(b"17639\t42")
            .unwrap();
        assert_eq!(read_samples(dir.path()).unwrap().len(), 2);
    }
}
