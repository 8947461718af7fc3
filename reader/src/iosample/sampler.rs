//! The sampling loop of `culprit iosample`: sleep until an absolute `CLOCK_MONOTONIC`
//! deadline (`clock_nanosleep(TIMER_ABSTIME)`, timer slack 1 ns), scan `/proc` for new
//! processes, re-read the counters of the chosen ones, note exits (taskstats, or the last
//! sample), and append what changed to the sample file. Deadlines are `start + k·interval`:
//! a late scan never shifts the ones after it, and a scan that overruns skips (and counts)
//! the deadlines it missed.

use super::backlog::{self, Backlog, SockDiag, TcpQueue};
use super::backlog_watch::SocketWatch;
use super::format::{
    BacklogRecord, Counters, DiskLine, DiskRecord, EndRecord, ExitRecord, ExitSource, FdGroup,
    FdsRecord, FormatError, IntakeRecord, Meta, ProcRecord, Record, SampleRecord, SampleWriter,
    SpanRecord, PROC_SERVER,
};
use super::intake::Intake;
use super::procfs::{self, FdDir, IoFile, IoReadError};
use super::taskstats;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Which processes to sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Every process of the machine.
    All,
    /// These processes and their descendants (new children are picked up).
    Pids(Vec<u32>),
}

/// Options of [`run`].
#[derive(Clone, Debug)]
pub struct SamplerOptions {
    /// Time between samples (default 100 ms).
    pub interval: Duration,
    /// Which processes.
    pub selection: Selection,
    /// Server daemons, by pid or by name (`comm` or the executable's file name); sampled in
    /// addition to the selection, with their descendants, and flagged in the file.
    pub servers: Vec<String>,
    /// List open descriptors every this many samples (0: never); only processes whose
    /// counters moved since their last listing are listed again. Default 10.
    pub fd_every: u64,
    /// Use taskstats exit notifications when the kernel allows (default true).
    pub taskstats: bool,
    /// Text for the `selection` field of the file's metadata.
    pub selection_text: String,
    /// Quiet processes: a process whose counters did not change over this many samples
    /// is read only every this many samples (staggered by pid, so each sample reads a
    /// share of them), until a read finds it moved; server processes are read at every
    /// sample; a process that moved during the run turns quiet only after ten times as
    /// many unchanged samples. 0 or 1: every process at every sample. Default 10. What is
    /// lost: the time resolution of a quiet process's first change — it is seen up to
    /// `quiet_every − 1` samples late, and a `SPAN` record says since when, so a reader
    /// spreads it over those intervals; no byte is lost (exits still come from taskstats;
    /// without taskstats every process is read at every sample).
    pub quiet_every: u64,
    /// List all of `/proc` at least every this many samples (default 50). In between, new
    /// processes are found from the last pid the kernel allocated: the pids after the one
    /// seen at the previous sample are probed one by one (threads skipped), and `/proc` is
    /// listed only when more than [`PROBE_MAX`] pids were allocated meanwhile.
    pub list_every: u64,
    /// Run the sampling thread at real-time priority (`SCHED_FIFO` 1) where permitted, so
    /// that a loaded machine neither delays its deadlines nor preempts a scan between the
    /// server's counters and the clients' (default true; a scan takes milliseconds).
    pub realtime: bool,
    /// Measure the server processes' backlog at every sample — the bytes queued unread in
    /// their TCP sockets' receive queues and in their local peers' send queues
    /// ([`super::backlog`], `BACKLOG` records); default true, and only with servers.
    pub backlog: bool,
}

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions {
            interval: Duration::from_millis(100),
            selection: Selection::All,
            servers: Vec::new(),
            fd_every: 10,
            taskstats: true,
            selection_text: "all".into(),
            realtime: true,
            quiet_every: 10,
            list_every: 50,
            backlog: true,
        }
    }
}

/// Most pids probed one by one between two samples; beyond, `/proc` is listed.
pub const PROBE_MAX: u32 = 256;

/// What a run of the sampler did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SamplerReport {
    /// Samples written.
    pub samples: u64,
    /// Deadlines skipped because a scan overran.
    pub missed: u64,
    /// Jitter (|actual − deadline|) percentiles.
    pub jitter_p50_ns: u64,
    /// 99th percentile.
    pub jitter_p99_ns: u64,
    /// Largest.
    pub jitter_max_ns: u64,
    /// Processes sampled at least once.
    pub processes: u64,
    /// Exits with taskstats counters.
    pub exits_taskstats: u64,
    /// Exits that kept their last sampled counters.
    pub exits_last_sample: u64,
    /// `on`, or `off: why`.
    pub taskstats: String,
    /// Processes whose counters could not be read (permission denied).
    pub denied: Vec<u32>,
    /// CPU time the sampler used (user + system), ns.
    pub cpu_ns: u64,
    /// Wall time of the run, ns.
    pub wall_ns: u64,
    /// Samples at which `/proc` was listed.
    pub listings: u64,
    /// Pids probed one by one (allocated since the previous sample).
    pub probed: u64,
    /// `/proc/[pid]/io` reads.
    pub reads: u64,
    /// Changes of quiet processes found late (each written with a `SPAN`).
    pub late: u64,
    /// Whether the sampling thread ran at real-time priority.
    pub realtime: bool,
    /// `on`, or `off: why` (the server's backlog).
    pub backlog: String,
    /// Largest backlog seen (received + unsent, all server processes), bytes.
    pub backlog_max: u64,
    /// Samples whose backlog came from a dump of every TCP socket; the others looked up
    /// the sockets the last dump matched ([`super::backlog_watch`]).
    pub backlog_dumps: u64,
}

/// Reads a clock, ns.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn sleep_until(mono_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (mono_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (mono_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; the remaining-time pointer may be null with
    // TIMER_ABSTIME. EINTR just returns early: the caller checks its stop flag and the clock.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// A process whose counters moved during the run is read at every sample until they stay
/// unchanged this many times `quiet_every` samples (10 s by default), where a process
/// never seen moving turns quiet after `quiet_every`: a client blocked for seconds on a
/// stalled server, then writing megabytes at once, is still seen interval by interval —
/// a quiet process's change is known only summed over the samples it was not read
/// (`SPAN`), and the estimators leave those intervals out.
const QUIET_AFTER_MOVING: u64 = 10;

enum Known {
    /// Sampled. `unchanged` — consecutive reads that found its counters unchanged, never
    /// counted for a server process — is
    /// kept out of the box: deciding that a quiet process is not due touches none of its
    /// own memory (a dereference per process per sample, each a cache miss after the
    /// sleep, was 6 % of the sampler's CPU time over 1 000 processes).
    Tracked {
        unchanged: u64,
        t: Box<Tracked>,
    },
    Ignored,
    Dead {
        start_ticks: u64,
    },
}

struct Tracked {
    io: Option<IoFile>,
    start_ticks: u64,
    ppid: u32,
    comm: String,
    last: Counters,
    seen: bool,
    /// The sample of the last read.
    read_at: u64,
    moved_since_fds: bool,
    /// Listings of its descriptors so far; the first [`EARLY_LISTINGS`] are taken at the
    /// sample its counters moved, not at the next round of `fd_every`.
    listings: u8,
    fds: Vec<FdGroup>,
    gone_since: Option<u64>,
}

/// A process's descriptors are listed at its first sighting and at the first sample its
/// counters then moved, whatever `fd_every` says: which processes hold a connection to
/// the server is how `culprit ioshare` tells a server's clients from its neighbours, and a
/// client that lives less than `fd_every` samples (an upload command, a short job) would
/// otherwise never be listed. After that, every `fd_every` samples.
const EARLY_LISTINGS: u8 = 2;

struct State<'a> {
    opts: &'a SamplerOptions,
    me: u32,
    known: HashMap<u32, Known>,
    roots: HashSet<u32>,
    server_pids: HashSet<u32>,
    denied: Vec<u32>,
    report: SamplerReport,
}

impl State<'_> {
    fn is_server(&self, pid: u32, comm: &str, exe: &str) -> bool {
        self.server_pids.contains(&pid)
            || self.opts.servers.iter().any(|s| {
                s == comm
                    || Path::new(exe)
                        .file_name()
                        .is_some_and(|f| f.to_string_lossy() == *s)
            })
    }

    fn tracked_parent(&self, ppid: u32) -> bool {
        matches!(
            self.known.get(&ppid),
            Some(Known::Tracked { .. }) | Some(Known::Dead { .. })
        )
    }

    /// Decides about a pid first seen; pushes its `PROC` record if it is sampled.
    fn classify(&mut self, pid: u32, out: &mut Vec<Record>) {
        let Some((st, uid)) = procfs::read_stat(pid) else {
            return; // gone already: taskstats may still report it
        };
        let (exe, cmdline) = procfs::exe_and_cmdline(pid);
        let server = self.is_server(pid, &st.comm, &exe)
            || (self.tracked_parent(st.ppid) && self.server_pids.contains(&st.ppid));
        let selected = pid != self.me
            && (server
                || match &self.opts.selection {
                    Selection::All => true,
                    Selection::Pids(_) => self.roots.contains(&pid) || self.tracked_parent(st.ppid),
                });
        if !selected {
            self.known.insert(pid, Known::Ignored);
            return;
        }
        if server {
            self.server_pids.insert(pid);
        }
        out.push(Record::Proc(ProcRecord {
            pid,
            ppid: st.ppid,
            uid,
            start_ticks: st.start_ticks,
            flags: if server { PROC_SERVER } else { 0 },
            comm: st.comm.clone(),
            exe,
            cmdline,
        }));
        let io = match IoFile::open(pid) {
            Ok(f) => Some(f),
            Err(IoReadError::Denied) => {
                self.deny(pid, uid, out);
                None
            }
            Err(_) => None,
        };
        self.report.processes += 1;
        self.known.insert(
            pid,
            Known::Tracked {
                unchanged: 0,
                t: Box::new(Tracked {
                    io,
                    start_ticks: st.start_ticks,
                    ppid: st.ppid,
                    comm: st.comm,
                    last: Counters::default(),
                    seen: false,
                    read_at: 0,
                    moved_since_fds: true,
                    listings: 0,
                    fds: Vec::new(),
                    gone_since: None,
                }),
            },
        );
    }

    fn deny(&mut self, pid: u32, uid: u32, out: &mut Vec<Record>) {
        if self.denied.is_empty() {
            out.push(Record::Note(format!(
                "permission denied reading /proc/{pid}/io (owner uid {uid}): another user's \
                 processes need root or CAP_SYS_PTRACE; they are listed without counters"
            )));
        }
        self.denied.push(pid);
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn cpu_time_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// The socket inodes server `pid` holds, through its descriptor directory kept open in
/// `dirs` between samples (dropped once the process is gone).
fn server_socket_inodes(dirs: &mut HashMap<u32, FdDir>, pid: u32) -> Option<Vec<u32>> {
    let dir = match dirs.entry(pid) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => e.insert(FdDir::open(pid).ok()?),
    };
    let inodes = backlog::socket_inodes_in(dir);
    if inodes.is_none() {
        dirs.remove(&pid);
    }
    inodes
}

/// Errors of the sampler.
pub type SamplerError = FormatError;

/// Samples until `stop` is set or `done()` says so, appending to a new file at `path`.
/// After the stop one last sample is taken (after a short grace for late exit
/// notifications), then the `END` record.
pub fn run(
    path: &Path,
    opts: &SamplerOptions,
    stop: &AtomicBool,
    mut done: impl FnMut() -> bool,
) -> Result<SamplerReport, SamplerError> {
    let mut w = SampleWriter::create(path)?;
    let wall0 = clock_ns(libc::CLOCK_MONOTONIC);
    let cpu0 = cpu_time_ns();
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer; 1 ns makes the kernel wake this
    // thread at its deadline instead of up to 50 µs later.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };

    let mut listener = None;
    let ts_status = if opts.taskstats {
        match taskstats::Listener::start() {
            Ok(l) => {
                listener = Some(l);
                "on".to_string()
            }
            Err(e) => {
                let why = match e.raw_os_error() {
                    Some(libc::EPERM) | Some(libc::EACCES) => {
                        "registering needs CAP_NET_ADMIN".to_string()
                    }
                    _ => e.to_string(),
                };
                format!("off: {why}")
            }
        }
    } else {
        "off: disabled by option".to_string()
    };
    if listener.is_none() {
        eprintln!(
            "culprit iosample: taskstats exit notifications unavailable ({}); exited processes \
             keep the counters of their last sample",
            ts_status.trim_start_matches("off: ")
        );
    }

    // After the taskstats thread started: it keeps the normal policy.
    let mut realtime = false;
    if opts.realtime {
        let p = libc::sched_param { sched_priority: 1 };
        // SAFETY: sched_setscheduler on this thread (tid 0 = the caller) with a valid
        // parameter; failure (no CAP_SYS_NICE) leaves the normal policy.
        realtime = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } == 0;
    }
    let interval_ns = opts.interval.as_nanos().max(1) as u64;
    let start_mono = clock_ns(libc::CLOCK_MONOTONIC);
    let uts = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let me = std::process::id();
    let mut diag = None;
    let backlog_status = if !opts.backlog {
        "off: disabled by option".to_string()
    } else if opts.servers.is_empty() {
        "off: no server selected".to_string()
    } else {
        match SockDiag::open() {
            Ok(d) => {
                diag = Some(d);
                "on".to_string()
            }
            Err(e) => format!("off: NETLINK_SOCK_DIAG: {e}"),
        }
    };
    let mut st = State {
        opts,
        me,
        known: HashMap::new(),
        roots: match &opts.selection {
            Selection::All => HashSet::new(),
            Selection::Pids(p) => p.iter().copied().collect(),
        },
        server_pids: opts.servers.iter().filter_map(|s| s.parse().ok()).collect(),
        denied: Vec::new(),
        report: SamplerReport {
            taskstats: ts_status.clone(),
            realtime,
            backlog: backlog_status.clone(),
            ..Default::default()
        },
    };
    let mut out = vec![Record::Meta(Meta {
        host: host.trim().to_string(),
        kernel: uts.trim().to_string(),
        interval_ns,
        start_mono_ns: start_mono,
        start_unix_ns: clock_ns(libc::CLOCK_REALTIME),
        selection: opts.selection_text.clone(),
        taskstats: ts_status.clone(),
        sampler_pid: me,
        clk_tck: procfs::clk_tck(),
        boot_unix_s: procfs::boot_unix_s(),
        backlog: Some(backlog_status.clone()),
        intake: Some(backlog_status),
    })];
    if let Some(why) = ts_status.strip_prefix("off: ") {
        out.push(Record::Note(format!(
            "taskstats unavailable ({why}): exited processes keep their last sampled counters"
        )));
    }

    let mut disks: HashMap<String, DiskLine> = HashMap::new();
    let mut mounts = procfs::read_mounts();
    let mut jitter = Vec::new();
    let mut seq = 0u64;
    let mut k = 0u64;
    let mut last_round = false;
    let mut listed: HashSet<u32> = HashSet::new();
    let mut last_pid_seen = None;
    let mut sockets: Vec<TcpQueue> = Vec::new();
    let mut backlogs: HashMap<u32, Backlog> = HashMap::new();
    let mut backlog_failed = false;
    let mut watch = SocketWatch::default();
    let mut intake = Intake::default();
    let mut intake_written = false;
    let mut fd_dirs: HashMap<u32, FdDir> = HashMap::new();
    loop {
        let deadline = start_mono + k * interval_ns;
        if !last_round {
            sleep_until(deadline);
        }
        let mono = clock_ns(libc::CLOCK_MONOTONIC);
        let unix = clock_ns(libc::CLOCK_REALTIME);
        if mono < deadline && !last_round {
            // Woken early by a signal: check the stop flag, then sleep again.
            if stop.load(Ordering::Relaxed) || done() {
                last_round = true;
                std::thread::sleep(Duration::from_millis(50));
            }
            continue;
        }
        if !last_round {
            jitter.push(mono.abs_diff(deadline));
        }

        // New processes, vanished ones. `/proc` is listed every `list_every` samples; in
        // between, the pids allocated since the previous sample (the kernel hands them out
        // in increasing order) are probed one by one. Between listings a vanished process
        // shows as a read error, and exits come from taskstats.
        let pid_hint = procfs::last_pid();
        let full = listed.is_empty()
            || opts.list_every <= 1
            || seq.is_multiple_of(opts.list_every)
            || match (pid_hint, last_pid_seen) {
                (Some(h), Some(l)) => h < l || h - l > PROBE_MAX,
                _ => true,
            };
        let mut fresh = false;
        if full {
            let pids = procfs::list_pids().unwrap_or_default();
            listed = pids.iter().copied().collect();
            st.report.listings += 1;
            fresh = true;
        } else if let (Some(h), Some(l)) = (pid_hint, last_pid_seen) {
            for pid in l + 1..=h {
                st.report.probed += 1;
                if procfs::is_process(pid) {
                    listed.insert(pid);
                    fresh = true;
                }
            }
        }
        last_pid_seen = pid_hint;
        // Parents before children, so descendants of a new selected process are selected.
        let mut new: Vec<u32> = if fresh {
            listed
                .iter()
                .copied()
                .filter(|p| !st.known.contains_key(p))
                .collect()
        } else {
            Vec::new()
        };
        // Parents first — not by pid: after a wrap (`pid_max` is 32 768 on many machines) a
        // child's pid is smaller than its parent's.
        new.sort_unstable();
        let ppids: HashMap<u32, u32> = new
            .iter()
            .filter_map(|&p| Some((p, procfs::read_stat(p)?.0.ppid)))
            .collect();
        let depth = |mut p: u32| {
            let mut d = 0;
            while let Some(&pp) = ppids.get(&p) {
                d += 1;
                p = pp;
                if d > ppids.len() {
                    break;
                }
            }
            d
        };
        new.sort_by_cached_key(|&p| (depth(p), p));
        for pid in new {
            st.classify(pid, &mut out);
        }
        if full {
            st.known.retain(|pid, k| {
                !matches!(k, Known::Ignored | Known::Dead { .. }) || listed.contains(pid)
            });
        }

        // Counters: every process that moved lately, the quiet ones in turn.
        let mut changed = Vec::new();
        let mut late = Vec::new();
        let mut gone = Vec::new();
        let mut denied_now = Vec::new();
        // Without taskstats an exit keeps the last read: every process is then read at
        // every sample, so a quiet process that wakes, writes and exits loses nothing more
        // than one interval's bytes (as before).
        let quiet_every = if listener.is_some() {
            opts.quiet_every.max(1)
        } else {
            1
        };
        let quiet_after = QUIET_AFTER_MOVING.saturating_mul(quiet_every);
        let head_start = quiet_after - quiet_every;
        for (&pid, k) in st.known.iter_mut() {
            let Known::Tracked { unchanged, t } = k else {
                continue;
            };
            // Not read now: a quiet process whose turn it is not (a server's count of
            // unchanged reads stays 0: servers are read at every sample).
            if quiet_every > 1
                && *unchanged >= quiet_after
                && !last_round
                && !(seq + u64::from(pid)).is_multiple_of(quiet_every)
            {
                continue;
            }
            let Some(io) = &t.io else {
                if !listed.contains(&pid) {
                    gone.push(pid);
                }
                continue;
            };
            st.report.reads += 1;
            match io.read() {
                Ok(c) => {
                    if !t.seen || c != t.last {
                        changed.push((pid, c));
                        t.moved_since_fds = true;
                        if t.seen && seq > t.read_at + 1 {
                            late.push((pid, t.read_at));
                        }
                        // A process first read is quiet after `quiet_every` unchanged
                        // reads; one that moved, only after `QUIET_AFTER_MOVING` times
                        // as many.
                        *unchanged = if t.seen { 0 } else { head_start };
                    } else if !st.server_pids.contains(&pid) {
                        *unchanged += 1;
                    }
                    t.last = c;
                    t.seen = true;
                    t.read_at = seq;
                }
                Err(IoReadError::Gone) => gone.push(pid),
                Err(IoReadError::Denied) => denied_now.push(pid),
                Err(IoReadError::Other(_)) => {}
            }
        }
        for pid in denied_now {
            if let Some(Known::Tracked { unchanged, t }) = st.known.get_mut(&pid) {
                t.io = None;
                *unchanged = 0; // looked at every sample from now on, for its exit
            }
            st.deny(pid, 0, &mut out);
        }
        changed.sort_unstable_by_key(|c| c.0);
        out.push(Record::Sample(SampleRecord {
            seq,
            deadline_mono_ns: deadline,
            mono_ns: mono,
            unix_ns: unix,
            took_ns: 0,
            changed,
        }));
        if !late.is_empty() {
            late.sort_unstable();
            st.report.late += late.len() as u64;
            out.push(Record::Span(SpanRecord { seq, since: late }));
        }

        // The servers' backlog, right after their counters.
        if let Some(d) = &mut diag {
            let mut pids: Vec<u32> = st
                .server_pids
                .iter()
                .copied()
                .filter(|p| matches!(st.known.get(p), Some(Known::Tracked { .. })))
                .collect();
            pids.sort_unstable();
            fd_dirs.retain(|p, _| pids.binary_search(p).is_ok());
            let holders: Vec<(u32, Vec<u32>)> = pids
                .into_iter()
                .filter_map(|p| Some((p, server_socket_inodes(&mut fd_dirs, p)?)))
                .collect();
            match watch.sockets(d, &holders, &mut sockets) {
                Ok(_) => {
                    let ends = backlog::server_ends(&holders, &sockets);
                    let pids: Vec<u32> = holders.iter().map(|h| h.0).collect();
                    intake.update(&pids, &ends);
                    let now = backlog::backlog_of(&ends);
                    let mut changed: Vec<(u32, u64, u64)> = now
                        .iter()
                        .filter(|(p, b)| backlogs.get(p) != Some(b))
                        .map(|(&p, b)| (p, b.received, b.unsent))
                        .chain(
                            backlogs
                                .keys()
                                .filter(|p| !now.contains_key(p))
                                .map(|&p| (p, 0, 0)),
                        )
                        .collect();
                    let total: u64 = now.values().map(|b| b.received + b.unsent).sum();
                    st.report.backlog_max = st.report.backlog_max.max(total);
                    backlogs = now;
                    if !changed.is_empty() {
                        changed.sort_unstable();
                        out.push(Record::Backlog(BacklogRecord { seq, changed }));
                    }
                    let changed = intake.changed();
                    if !changed.is_empty() || !intake_written {
                        intake_written = true;
                        out.push(Record::Intake(IntakeRecord { seq, changed }));
                    }
                }
                Err(e) if !backlog_failed => {
                    backlog_failed = true;
                    out.push(Record::Note(format!(
                        "backlog: the socket dump failed at sample {seq} ({e}); samples without \
                         a BACKLOG record keep the previous values"
                    )));
                }
                Err(_) => {}
            }
        }

        // Exits: taskstats first, then processes gone for a whole interval without one.
        if let Some(l) = &listener {
            let known = &st.known;
            for g in l.take(|pid| {
                listed.contains(&pid) && matches!(known.get(&pid), Some(Known::Tracked { .. }))
            }) {
                let ours = match st.known.get(&g.tgid) {
                    Some(Known::Tracked { .. }) | Some(Known::Dead { .. }) => true,
                    Some(Known::Ignored) => false,
                    None => {
                        g.tgid != me
                            && (matches!(opts.selection, Selection::All)
                                || st.tracked_parent(g.ppid)
                                || st.is_server(g.tgid, &g.comm, ""))
                    }
                };
                if !ours {
                    continue;
                }
                let start_ticks = match st.known.get(&g.tgid) {
                    Some(Known::Tracked { t, .. }) => t.start_ticks,
                    Some(Known::Dead { start_ticks }) => *start_ticks,
                    _ => 0,
                };
                // The group's own counters: taskstats does not include the children it
                // reaped (which /proc/[pid]/io does); `log::SampleLog` reconciles the two.
                let counters = g.counters;
                if st.server_pids.contains(&g.ppid) && !st.server_pids.contains(&g.tgid) {
                    st.server_pids.insert(g.tgid);
                }
                out.push(Record::Exit(ExitRecord {
                    pid: g.tgid,
                    ppid: g.ppid,
                    source: ExitSource::Taskstats,
                    mono_ns: mono,
                    unix_ns: unix,
                    counters,
                    comm: g.comm,
                }));
                st.report.exits_taskstats += 1;
                st.known.insert(g.tgid, Known::Dead { start_ticks });
            }
        }
        for pid in gone {
            let Some(Known::Tracked { t, .. }) = st.known.get_mut(&pid) else {
                continue;
            };
            let waited = t.gone_since.get_or_insert(seq);
            // With taskstats, give its notification one more interval to arrive.
            if listener.is_some() && *waited == seq && !last_round {
                continue;
            }
            out.push(Record::Exit(ExitRecord {
                pid,
                ppid: t.ppid,
                source: ExitSource::LastSample,
                mono_ns: mono,
                unix_ns: unix,
                counters: t.last,
                comm: t.comm.clone(),
            }));
            st.report.exits_last_sample += 1;
            let start_ticks = t.start_ticks;
            st.known.insert(pid, Known::Dead { start_ticks });
        }

        // Disks.
        if let Ok(text) = std::fs::read_to_string("/proc/diskstats") {
            let lines: Vec<DiskLine> = procfs::parse_diskstats(&text)
                .into_iter()
                .filter(|l| disks.get(&l.name) != Some(l))
                .collect();
            for l in &lines {
                disks.insert(l.name.clone(), l.clone());
            }
            if !lines.is_empty() {
                out.push(Record::Disk(DiskRecord { seq, lines }));
            }
        }

        // Descriptors.
        let round = opts.fd_every > 0 && seq.is_multiple_of(opts.fd_every);
        let early = opts.fd_every > 0
            && st.known.values().any(|k| {
                matches!(k, Known::Tracked { t, .. } if t.moved_since_fds && t.listings < EARLY_LISTINGS)
            });
        if round || early {
            if round && seq != 0 {
                mounts = procfs::read_mounts();
            }
            // The TCP sockets by inode, read at most once per listing (one sock_diag dump),
            // when a descriptor first needs them.
            let mut tcp = None;
            for (&pid, k) in st.known.iter_mut() {
                let Known::Tracked { t, .. } = k else {
                    continue;
                };
                if !t.moved_since_fds || !(round || t.listings < EARLY_LISTINGS) {
                    continue;
                }
                t.moved_since_fds = false;
                t.listings = t.listings.saturating_add(1);
                // A process that exec'd since it was first seen gets a new PROC record.
                if let Some((stat, uid)) = procfs::read_stat(pid) {
                    if stat.comm != t.comm && stat.start_ticks == t.start_ticks {
                        let (exe, cmdline) = procfs::exe_and_cmdline(pid);
                        t.comm = stat.comm.clone();
                        out.push(Record::Proc(ProcRecord {
                            pid,
                            ppid: stat.ppid,
                            uid,
                            start_ticks: stat.start_ticks,
                            flags: if st.server_pids.contains(&pid) {
                                PROC_SERVER
                            } else {
                                0
                            },
                            comm: stat.comm,
                            exe,
                            cmdline,
                        }));
                    }
                }
                if let Some(groups) = procfs::read_fds(pid, &mounts, &mut tcp) {
                    if groups != t.fds {
                        out.push(Record::Fds(FdsRecord {
                            pid,
                            mono_ns: mono,
                            groups: groups.clone(),
                        }));
                        t.fds = groups;
                    }
                }
            }
        }

        let took = clock_ns(libc::CLOCK_MONOTONIC).saturating_sub(mono);
        for r in out.iter_mut().rev() {
            if let Record::Sample(s) = r {
                s.took_ns = took;
                break;
            }
        }
        w.write(&out)?;
        out.clear();
        seq += 1;
        if last_round {
            break;
        }
        if stop.load(Ordering::Relaxed) || done() {
            // One more sample after a short grace, so exits of the last moment are in.
            last_round = true;
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let now = clock_ns(libc::CLOCK_MONOTONIC);
        let next = (now.saturating_sub(start_mono) / interval_ns) + 1;
        st.report.missed += next.saturating_sub(k + 1);
        k = next;
    }
    st.report.backlog_dumps = watch.dumps;
    if let Some(l) = &mut listener {
        l.stop();
        st.report.taskstats = format!(
            "{}{}",
            ts_status,
            match l.overruns.load(Ordering::Relaxed) {
                0 => String::new(),
                n => format!(" ({n} notification batches lost: socket buffer full)"),
            }
        );
    }
    jitter.sort_unstable();
    st.report.samples = seq;
    st.report.jitter_p50_ns = percentile(&jitter, 0.5);
    st.report.jitter_p99_ns = percentile(&jitter, 0.99);
    st.report.jitter_max_ns = jitter.last().copied().unwrap_or(0);
    st.report.denied = std::mem::take(&mut st.denied);
    st.report.cpu_ns = cpu_time_ns().saturating_sub(cpu0);
    st.report.wall_ns = clock_ns(libc::CLOCK_MONOTONIC).saturating_sub(wall0);
    w.write(&[Record::End(EndRecord {
        samples: st.report.samples,
        missed: st.report.missed,
        jitter_p50_ns: st.report.jitter_p50_ns,
        jitter_p99_ns: st.report.jitter_p99_ns,
        jitter_max_ns: st.report.jitter_max_ns,
    })])?;
    Ok(st.report)
}
