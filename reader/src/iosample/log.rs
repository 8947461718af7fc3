//! An IO-sample file read back as series: the sample times, and for each process its
//! cumulative counters at every sample, including the final counters of processes that
//! exited between two samples (or lived entirely between them).

use super::format::{
    read_records, Counters, EndRecord, ExitSource, FdGroup, FormatError, Meta, Record, Tail,
    PROC_SERVER,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// When one sample was taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SampleTime {
    /// Sample number (gaps: missed deadlines).
    pub seq: u64,
    /// The deadline (`CLOCK_MONOTONIC`).
    pub deadline_mono_ns: u64,
    /// Actual time (`CLOCK_MONOTONIC`).
    pub mono_ns: u64,
    /// Actual time (`CLOCK_REALTIME`).
    pub unix_ns: u64,
    /// How long the scan took.
    pub took_ns: u64,
}

/// The final counters of an exited process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ExitInfo {
    /// When the exit was noticed (`CLOCK_MONOTONIC`).
    pub mono_ns: u64,
    /// When the exit was noticed (`CLOCK_REALTIME`).
    pub unix_ns: u64,
    /// The counters.
    pub counters: Counters,
    /// Where they come from.
    pub source: ExitSource,
}

/// One process of the file.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ProcSeries {
    /// Process id.
    pub pid: u32,
    /// Parent.
    pub ppid: u32,
    /// `comm`.
    pub comm: String,
    /// Executable path (empty if unknown).
    pub exe: String,
    /// Command line.
    pub cmdline: String,
    /// Matched a `--server` selector when sampled.
    pub server: bool,
    /// Start time, clock ticks after boot (0 if known only from its exit).
    pub start_ticks: u64,
    /// Seen in the first sample (its counters before the run are not its IO during it).
    pub at_start: bool,
    /// Samples taken before it was first seen (its `PROC`, or its `EXIT` if it lived
    /// between two samples).
    pub first_sample: usize,
    /// Counters whenever they changed: (sample index, cumulative counters).
    pub points: Vec<(usize, Counters)>,
    /// Points whose change covers several intervals (a quiet process, read only every few
    /// samples): (sample index of the point, sample index of the read before it, which
    /// found the counters unchanged). Sorted; [`ProcSeries::at`] interpolates between.
    pub spans: Vec<(usize, usize)>,
    /// Final counters, if it exited during the run.
    pub exit: Option<ExitInfo>,
    /// Its counters could not be read (permission denied).
    pub denied: bool,
    /// Open descriptors, as last listed.
    pub fds: Vec<FdGroup>,
    /// Every descriptor group listed during the run (by kind and place; `count` the most
    /// seen at once): a connection closed before the last listing is still here.
    pub fds_seen: Vec<FdGroup>,
    /// Its descriptors were listed at least once.
    pub fds_listed: bool,
    /// A server process's backlog whenever it changed: (sample index, bytes received and
    /// not read, bytes unsent by local peers); see [`super::backlog`].
    pub backlog: Vec<(usize, u64, u64)>,
    /// A server process's intake whenever it changed: (sample index, bytes read from its
    /// TCP sockets so far, sockets of it closed so far); see [`super::intake`].
    pub intake: Vec<(usize, u64, u64)>,
}

impl ProcSeries {
    /// Backlog (received + unsent bytes) at sample `j`: the last value recorded at or
    /// before it, 0 before the first.
    pub fn backlog_at(&self, j: usize) -> u64 {
        let i = self.backlog.partition_point(|(s, _, _)| *s <= j);
        i.checked_sub(1)
            .map_or(0, |i| self.backlog[i].1 + self.backlog[i].2)
    }

    /// Intake at sample `j` (bytes read from its TCP sockets, sockets closed): the last
    /// value recorded at or before it; `None` before the first (not measured yet).
    pub fn intake_at(&self, j: usize) -> Option<(u64, u64)> {
        let i = self.intake.partition_point(|(s, _, _)| *s <= j);
        i.checked_sub(1)
            .map(|i| (self.intake[i].1, self.intake[i].2))
    }

    /// Cumulative counters at sample `j` of `samples`: its exit counters once it has exited,
    /// zeros before it appeared (a process born during the run), `None` where unknown.
    pub fn at(&self, samples: &[SampleTime], j: usize) -> Option<Counters> {
        self.at_with(samples, j, true)
    }

    /// [`ProcSeries::at`] as read: within a span, the counters of the quiet read before it
    /// (no interpolation).
    pub fn read_at(&self, samples: &[SampleTime], j: usize) -> Option<Counters> {
        self.at_with(samples, j, false)
    }

    fn at_with(&self, samples: &[SampleTime], j: usize, spread: bool) -> Option<Counters> {
        let t = samples.get(j)?.mono_ns;
        if let Some(e) = &self.exit {
            if e.mono_ns <= t {
                return Some(e.counters);
            }
        }
        let i = self.points.partition_point(|(s, _)| *s <= j);
        if i > 0 {
            let prev = self.points[i - 1];
            // Between a quiet read and the read that found the change: by time, linearly
            // (the bytes were written somewhere in between; the sampler did not look).
            if let (true, Some(&(next_j, next))) = (spread, self.points.get(i)) {
                if let Ok(k) = self.spans.binary_search_by_key(&next_j, |s| s.0) {
                    let since = self.spans[k].1.max(prev.0);
                    if since <= j {
                        let t0 = samples.get(since)?.mono_ns;
                        let t1 = samples.get(next_j)?.mono_ns;
                        let f = if t1 > t0 {
                            (t.saturating_sub(t0)) as f64 / (t1 - t0) as f64
                        } else {
                            0.0
                        };
                        let (a, b) = (prev.1.to_array(), next.to_array());
                        return Some(Counters::from_array(std::array::from_fn(|q| {
                            a[q] + (b[q].saturating_sub(a[q]) as f64 * f.clamp(0.0, 1.0)) as u64
                        })));
                    }
                }
            }
            return Some(prev.1);
        }
        if self.at_start || self.denied {
            None
        } else {
            Some(Counters::default())
        }
    }
}

/// A whole IO-sample file.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SampleLog {
    /// The file.
    pub path: PathBuf,
    /// Its metadata.
    pub meta: Meta,
    /// Every sample, in order.
    pub samples: Vec<SampleTime>,
    /// Every process, in order of appearance (a reused pid appears twice).
    pub processes: Vec<ProcSeries>,
    /// Warnings the sampler wrote.
    pub notes: Vec<String>,
    /// Its closing record, if the sampler stopped cleanly.
    pub end: Option<EndRecord>,
    /// Where reading stopped, if the tail was damaged or cut.
    pub tail: Tail,
    /// Whether the servers' backlog was measured (the `META` field `backlog` is `on`).
    pub backlog_measured: bool,
    /// Whether the servers' intake was measured (the `META` field `intake` is `on`).
    pub intake_measured: bool,
    /// Disk sectors written per sample, summed over whole disks (not partitions).
    pub disk_sectors_written: Vec<u64>,
    /// Children of each process (indices), and each exited process's final counters as
    /// its parent's `/proc/[pid]/io` takes them in at `wait` (its own + its reaped
    /// descendants'); see [`SampleLog::own`].
    #[serde(skip)]
    pub children: Vec<Vec<usize>>,
    /// See [`SampleLog::children`].
    #[serde(skip)]
    pub reaped: Vec<Option<Counters>>,
    /// When each exited process's counters are in its parent's (`CLOCK_MONOTONIC`): the
    /// time its exit was noticed, or the sample before if the parent's counters had
    /// already grown by the child's there (a notification read one sample late).
    #[serde(skip)]
    pub reaped_by: Vec<u64>,
    /// The parent of each process, if sampled (index).
    #[serde(skip)]
    pub parent: Vec<Option<usize>>,
}

impl SampleLog {
    /// Reads a file; a truncated tail is kept in [`SampleLog::tail`], not an error.
    pub fn open(path: &Path) -> Result<SampleLog, FormatError> {
        let (records, tail) = read_records(path)?;
        let mut log = SampleLog {
            path: path.to_path_buf(),
            tail,
            ..Default::default()
        };
        let mut by_pid: HashMap<u32, usize> = HashMap::new();
        let mut disks: HashMap<String, u64> = HashMap::new();
        let new_proc = |log: &mut SampleLog, by_pid: &mut HashMap<u32, usize>, p: ProcSeries| {
            by_pid.insert(p.pid, log.processes.len());
            let first_sample = log.samples.len();
            log.processes.push(ProcSeries { first_sample, ..p });
        };
        for r in records {
            match r {
                Record::Meta(m) => {
                    log.backlog_measured = m.backlog.as_deref() == Some("on");
                    log.intake_measured = m.intake.as_deref() == Some("on");
                    log.meta = m
                }
                Record::Backlog(b) => {
                    // It follows the SAMPLE of its seq, the last one read.
                    let j = log.samples.len().saturating_sub(1);
                    for (pid, received, unsent) in b.changed {
                        if let Some(&i) = by_pid.get(&pid) {
                            log.processes[i].backlog.push((j, received, unsent));
                        }
                    }
                }
                Record::Intake(r) => {
                    // It follows the SAMPLE of its seq, the last one read.
                    let j = log.samples.len().saturating_sub(1);
                    for (pid, taken, closed) in r.changed {
                        if let Some(&i) = by_pid.get(&pid) {
                            log.processes[i].intake.push((j, taken, closed));
                        }
                    }
                }
                Record::Proc(p) => {
                    // The same process again (it exec'd): new names, same series.
                    if let Some(&i) = by_pid.get(&p.pid) {
                        let q = &mut log.processes[i];
                        if q.exit.is_none() && q.start_ticks == p.start_ticks {
                            q.comm = p.comm;
                            q.exe = p.exe;
                            q.cmdline = p.cmdline;
                            continue;
                        }
                    }
                    let at_start = log.samples.is_empty();
                    new_proc(
                        &mut log,
                        &mut by_pid,
                        ProcSeries {
                            pid: p.pid,
                            ppid: p.ppid,
                            comm: p.comm,
                            exe: p.exe,
                            cmdline: p.cmdline,
                            server: p.flags & PROC_SERVER != 0,
                            start_ticks: p.start_ticks,
                            at_start,
                            ..Default::default()
                        },
                    );
                }
                Record::Sample(s) => {
                    let j = log.samples.len();
                    log.samples.push(SampleTime {
                        seq: s.seq,
                        deadline_mono_ns: s.deadline_mono_ns,
                        mono_ns: s.mono_ns,
                        unix_ns: s.unix_ns,
                        took_ns: s.took_ns,
                    });
                    for (pid, c) in s.changed {
                        if let Some(&i) = by_pid.get(&pid) {
                            log.processes[i].points.push((j, c));
                        }
                    }
                    log.disk_sectors_written.push(disks.values().sum());
                }
                Record::Exit(e) => {
                    let exists = by_pid.get(&e.pid).is_some_and(|&i| {
                        log.processes[i].exit.is_none() || e.source == ExitSource::Taskstats
                    });
                    if !exists {
                        // Lived and died between two samples: known from taskstats only.
                        let server = log.processes.iter().any(|p| p.pid == e.ppid && p.server);
                        new_proc(
                            &mut log,
                            &mut by_pid,
                            ProcSeries {
                                pid: e.pid,
                                ppid: e.ppid,
                                comm: e.comm.clone(),
                                server,
                                ..Default::default()
                            },
                        );
                    }
                    let i = by_pid[&e.pid];
                    let p = &mut log.processes[i];
                    match &mut p.exit {
                        // Late threads of a group already reported: their counters add up.
                        Some(x)
                            if x.source == ExitSource::Taskstats
                                && e.source == ExitSource::Taskstats =>
                        {
                            let mut a = x.counters.to_array();
                            for (s, v) in a.iter_mut().zip(e.counters.to_array()) {
                                *s = s.saturating_add(v);
                            }
                            x.counters = Counters::from_array(a);
                        }
                        _ => {
                            p.exit = Some(super::log::ExitInfo {
                                mono_ns: e.mono_ns,
                                unix_ns: e.unix_ns,
                                counters: e.counters,
                                source: e.source,
                            })
                        }
                    }
                }
                Record::Disk(d) => {
                    for l in d.lines {
                        // Whole disks only: a partition's sectors are also its disk's.
                        if !is_partition(&l.name) {
                            disks.insert(l.name, l.sectors_written);
                        }
                    }
                    if let Some(last) = log.disk_sectors_written.last_mut() {
                        *last = disks.values().sum();
                    }
                }
                Record::Fds(f) => {
                    if let Some(&i) = by_pid.get(&f.pid) {
                        let p = &mut log.processes[i];
                        p.fds_listed = true;
                        for g in &f.groups {
                            match p
                                .fds_seen
                                .iter_mut()
                                .find(|s| s.class == g.class && s.place == g.place)
                            {
                                Some(s) => s.count = s.count.max(g.count),
                                None => p.fds_seen.push(g.clone()),
                            }
                        }
                        p.fds = f.groups;
                    }
                }
                Record::Note(n) => {
                    if n.starts_with("permission denied reading /proc/") {
                        if let Some(pid) = n
                            .trim_start_matches("permission denied reading /proc/")
                            .split('/')
                            .next()
                            .and_then(|p| p.parse::<u32>().ok())
                        {
                            if let Some(&i) = by_pid.get(&pid) {
                                log.processes[i].denied = true;
                            }
                        }
                    }
                    log.notes.push(n)
                }
                Record::End(e) => log.end = Some(e),
                Record::Span(sp) => {
                    let Some(j) = log.samples.iter().rposition(|s| s.seq == sp.seq) else {
                        continue;
                    };
                    for (pid, since) in sp.since {
                        let Some(&i) = by_pid.get(&pid) else { continue };
                        let p = &mut log.processes[i];
                        if p.points.last().is_some_and(|(k, _)| *k == j) {
                            let from = log.samples.partition_point(|s| s.seq < since);
                            if from < j {
                                p.spans.push((j, from));
                            }
                        }
                    }
                }
            }
        }
        for p in &mut log.processes {
            if p.points.is_empty() && p.exit.is_none() && p.at_start {
                p.denied |= true;
            }
        }
        log.link_children();
        Ok(log)
    }

    fn link_children(&mut self) {
        let n = self.processes.len();
        // A parent is the latest process with that pid first seen no later than the child
        // (not "earlier in the file": after a pid wrap a child's pid is the smaller one,
        // and a sampler lists new processes in pid order).
        let mut by_pid: HashMap<u32, Vec<usize>> = HashMap::new();
        for (i, p) in self.processes.iter().enumerate() {
            by_pid.entry(p.pid).or_default().push(i);
        }
        self.children = vec![Vec::new(); n];
        self.parent = vec![None; n];
        for i in 0..n {
            let me = &self.processes[i];
            let parent = by_pid.get(&me.ppid).and_then(|v| {
                v.iter()
                    .copied()
                    .filter(|&k| k != i && self.processes[k].first_sample <= me.first_sample)
                    .max_by_key(|&k| (self.processes[k].first_sample, k))
            });
            if let Some(p) = parent {
                self.children[p].push(i);
                self.parent[i] = Some(p);
            }
        }
        self.reaped = vec![None; n];
        // Children before parents: deepest first.
        let depth: Vec<usize> = (0..n)
            .map(|i| {
                let (mut d, mut at) = (0, i);
                while let Some(p) = self.parent[at] {
                    d += 1;
                    at = p;
                    if d > n {
                        break; // a cycle of reused pids: stop
                    }
                }
                d
            })
            .collect();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(depth[i]));
        for i in order {
            let Some(e) = self.processes[i].exit else {
                continue;
            };
            let kids: Vec<Counters> = self.children[i]
                .iter()
                .filter_map(|&c| self.reaped[c])
                .collect();
            let full = match e.source {
                ExitSource::LastSample => e.counters,
                ExitSource::Taskstats => {
                    // Own (taskstats) + what it reaped; at least its last sample (taskstats
                    // rounds character counts down to 1024).
                    let mut a = e.counters.to_array();
                    for k in &kids {
                        for (x, v) in a.iter_mut().zip(k.to_array()) {
                            *x += v;
                        }
                    }
                    if let Some((_, last)) = self.processes[i].points.last() {
                        for (x, v) in a.iter_mut().zip(last.to_array()) {
                            *x = (*x).max(v);
                        }
                    }
                    Counters::from_array(a)
                }
            };
            self.reaped[i] = Some(full);
        }
        self.reaped_by = (0..n)
            .map(|c| self.reaped_at(c).unwrap_or(u64::MAX))
            .collect();
    }

    /// See [`SampleLog::reaped_by`].
    fn reaped_at(&self, c: usize) -> Option<u64> {
        let e = self.processes[c].exit?;
        let full = self.reaped[c]?;
        let parent = self.parent[c]?;
        let k = self.samples.partition_point(|s| s.mono_ns < e.mono_ns);
        if k < 2 || k > self.samples.len() {
            return Some(e.mono_ns);
        }
        // The parent's read at sample k − 1 against its read before (not the counters
        // between, which a quiet parent's `SPAN` interpolates).
        let p = &self.processes[parent];
        let Some(at) = p.points.iter().position(|&(s, _)| s == k - 1) else {
            return Some(e.mono_ns);
        };
        let (a, b) = match at {
            0 if p.at_start => return Some(e.mono_ns),
            0 => (Counters::default(), p.points[0].1),
            _ => (p.points[at - 1].1, p.points[at].1),
        };
        let grew = |f: fn(&Counters) -> u64| f(&b).saturating_sub(f(&a)) >= f(&full);
        let early = (full.wchar > 0 || full.rchar > 0) && grew(|c| c.wchar) && grew(|c| c.rchar);
        Some(if early {
            self.samples[k - 1].mono_ns
        } else {
            e.mono_ns
        })
    }

    /// The counters process `i` accounts for by itself at sample `j`: its
    /// `/proc/[pid]/io` values minus the final counters of the children that had exited by
    /// then (the kernel adds a child's counters to its parent's when it reaps it), kept
    /// non-decreasing (between a child's exit and its reaping nothing is subtracted
    /// twice). After its exit: its final counters as its parent takes them in, minus its
    /// children's. `None` where unknown.
    pub fn own(&self, i: usize, j: usize) -> Option<Counters> {
        self.own_at(i, &[j])[0]
    }

    /// [`SampleLog::own`] at each of the (increasing) samples `at`, in one pass. Within a
    /// span (a quiet process's change found late) the own counters are interpolated, not
    /// the raw ones: a parent that reaps its children while quiet takes their counters in
    /// at the read that ends the span, where they are subtracted, and none of them leaks
    /// into the samples before.
    pub fn own_at(&self, i: usize, at: &[usize]) -> Vec<Option<Counters>> {
        let Some(&last) = at.iter().max() else {
            return Vec::new();
        };
        let p = &self.processes[i];
        let kids = self.children.get(i).map_or(&[][..], |v| v.as_slice());
        let from = p
            .points
            .first()
            .map_or(0, |(s, _)| *s)
            .min(at.first().copied().unwrap_or(0));
        let last = last.min(self.samples.len().saturating_sub(1));
        let mut own: Vec<Option<[u64; 7]>> = vec![None; last + 1];
        let mut best: Option<[u64; 7]> = None;
        for (k, slot) in own.iter_mut().enumerate().skip(from) {
            if let Some(raw) = p.read_at(&self.samples, k) {
                let t = self.samples[k].mono_ns;
                let mut a = match (p.exit, self.reaped.get(i).copied().flatten()) {
                    (Some(e), Some(full)) if e.mono_ns <= t => full.to_array(),
                    _ => raw.to_array(),
                };
                for &c in kids {
                    let (Some(_), Some(full)) = (self.processes[c].exit, self.reaped[c]) else {
                        continue;
                    };
                    if self.reaped_by[c] <= t {
                        for (x, v) in a.iter_mut().zip(full.to_array()) {
                            *x = x.saturating_sub(v);
                        }
                    }
                }
                best = Some(match best {
                    None => a,
                    Some(b) => std::array::from_fn(|q| b[q].max(a[q])),
                });
            }
            *slot = best;
        }
        // Spans: by time, linearly, between the quiet read and the read that found the
        // change (the bytes were written somewhere in between; the sampler did not look).
        for &(found, since) in &p.spans {
            if found > last || since >= found {
                continue;
            }
            let (Some(a), Some(b)) = (own[since], own[found]) else {
                continue;
            };
            let (t0, t1) = (self.samples[since].mono_ns, self.samples[found].mono_ns);
            for (k, slot) in own.iter_mut().enumerate().take(found).skip(since + 1) {
                let f = if t1 > t0 {
                    self.samples[k].mono_ns.saturating_sub(t0) as f64 / (t1 - t0) as f64
                } else {
                    0.0
                };
                *slot = Some(std::array::from_fn(|q| {
                    a[q] + (b[q].saturating_sub(a[q]) as f64 * f.clamp(0.0, 1.0)) as u64
                }));
            }
        }
        at.iter()
            .map(|&j| own.get(j).copied().flatten().map(Counters::from_array))
            .collect()
    }

    /// Jitter of the sample times (|actual − deadline|, ns): (p50, p99, max).
    pub fn jitter(&self) -> (u64, u64, u64) {
        let mut j: Vec<u64> = self
            .samples
            .iter()
            .map(|s| s.mono_ns.abs_diff(s.deadline_mono_ns))
            .collect();
        j.sort_unstable();
        let p = |q: f64| {
            if j.is_empty() {
                0
            } else {
                j[(((j.len() - 1) as f64) * q).round() as usize]
            }
        };
        (p(0.5), p(0.99), j.last().copied().unwrap_or(0))
    }
}

fn is_partition(name: &str) -> bool {
    let sys = Path::new("/sys/class/block").join(name).join("partition");
    if sys.exists() {
        return true;
    }
    // Without sysfs (another machine's file): sdXN, vdXN, nvme…pN, mmcblk…pN.
    let b = name.as_bytes();
    (name.starts_with("sd")
        || name.starts_with("vd")
        || name.starts_with("xvd")
        || name.starts_with("hd"))
        && b.last().is_some_and(|c| c.is_ascii_digit())
        || ((name.starts_with("nvme") || name.starts_with("mmcblk")) && name.contains('p'))
}
