//! From an IO-sample file to the regression's inputs: the server's load `y_t` and each
//! client process's IO `x_it` per interval, where an interval is `step` consecutive
//! samples (the last one shorter when the samples do not divide evenly). Counters are
//! cumulative; a process born during the run counts from zero, and one that exited counts
//! its final (taskstats) counters in the interval it exited in.

use super::clients::{self, ClientChoice, Evidence, SelectedBy};
use reader::iosample::{Counters, ProcSeries, SampleLog};
use std::collections::BTreeSet;

/// Which counter measures IO (see `docs/ioshare.md` for the choice).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Bytes passed to `write`/`pwrite`/`writev` (files and sockets).
    Wchar,
    /// Bytes sent to the block layer (0 on tmpfs, delayed by write-back).
    WriteBytes,
    /// Bytes read by `read`-like calls.
    Rchar,
    /// Bytes fetched from the block layer.
    ReadBytes,
}

impl Metric {
    /// Parses `wchar`, `write_bytes`, `rchar`, `read_bytes`.
    pub fn parse(s: &str) -> Result<Metric, String> {
        Ok(match s {
            "wchar" => Metric::Wchar,
            "write_bytes" => Metric::WriteBytes,
            "rchar" => Metric::Rchar,
            "read_bytes" => Metric::ReadBytes,
            _ => {
                return Err(format!(
                    "{s:?}: expected wchar, write_bytes, rchar or read_bytes"
                ))
            }
        })
    }

    fn of(self, c: &Counters) -> u64 {
        match self {
            Metric::Wchar => c.wchar,
            Metric::WriteBytes => c.write_bytes,
            Metric::Rchar => c.rchar,
            Metric::ReadBytes => c.read_bytes,
        }
    }
}

/// One client process (a column of X).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Column {
    /// Process id (0 for the group of small writers).
    pub pid: u32,
    /// Executable path, or `comm` when the path is unknown.
    pub exe: String,
    /// `comm`.
    pub comm: String,
    /// Bytes per interval.
    pub x: Vec<f64>,
}

/// The inputs of the estimators.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Series {
    /// End of each interval (`CLOCK_REALTIME` ns of the sample that closes it).
    pub t_end: Vec<u64>,
    /// Start of each interval.
    pub t_start: Vec<u64>,
    /// The server's bytes per interval.
    pub y: Vec<f64>,
    /// Client processes.
    pub columns: Vec<Column>,
    /// Server processes (pid, comm).
    pub server: Vec<(u32, String)>,
    /// Bytes of client processes too small to be columns (each under the cut-off).
    pub small_bytes: f64,
    /// Change of the server processes' backlog per interval (bytes received and not yet
    /// read at its end minus at its start; `reader::iosample::backlog`), when the sample
    /// file has it; [`Series::add_backlog`] adds it to `y`.
    pub backlog: Option<Vec<f64>>,
    /// Largest backlog at a sample boundary, bytes (0 when not measured).
    pub backlog_max: f64,
    /// Whether `y` includes the change of the backlog.
    pub backlog_added: bool,
    /// The server processes' intake per interval — bytes they read from their TCP
    /// sockets (`reader::iosample::intake`) — when the sample file has it;
    /// [`Series::use_intake`] makes it (with the backlog's change) the load `y`.
    pub intake: Option<Vec<f64>>,
    /// Intervals in which a server socket closed: the intake misses its reads after the
    /// last sample that saw it (empty when the intake was not measured).
    pub intake_closes: Vec<bool>,
    /// Whether `y` is the intake plus the backlog's change instead of the server's counter.
    pub intake_used: bool,
    /// Intervals in which some column's bytes are not known by themselves: the sampler
    /// read that process only every few samples while it was quiet (`SPAN` records) and
    /// the change it then found is spread evenly over the intervals since its last read.
    /// Their sum is exact, but not when within them the bytes were written, so the fits
    /// leave these intervals out (a process blocked for seconds on a stalled server, then
    /// writing megabytes in one interval, would otherwise be fitted against a server load
    /// that shows the burst in one interval and the spread bytes in ten).
    pub unsure: Vec<bool>,
}

impl Series {
    /// Counts the server's load as the bytes its clients delivered to it rather than the
    /// bytes it wrote: `y_t ← y_t + ΔB_t`, with `B` the backlog (bytes in the receive
    /// queues of its sockets and the send queues of their local peers). The server writes
    /// what it reads, so what it has written by `t` plus what waits to be read is what
    /// the clients had sent by `t` (up to what it holds in its own buffers, bounded and
    /// ignored): a server descheduled for seconds no longer lags its clients in `y`.
    /// Does nothing when the backlog was not measured or was already added, or when `y`
    /// is the intake (which includes it).
    pub fn add_backlog(&mut self) {
        if let (Some(d), false, false) = (&self.backlog, self.backlog_added, self.intake_used) {
            for (y, d) in self.y.iter_mut().zip(d) {
                *y += d;
            }
            self.backlog_added = true;
        }
    }

    /// Counts the server's load as the bytes its clients delivered to it, measured where
    /// it takes them in: `y_t ← ΔI_t + ΔB_t`, with `I` the bytes the server processes
    /// read from their TCP sockets and `B` the backlog (what waits to be read). Unlike
    /// the counter plus the backlog ([`Series::add_backlog`]), it does not miss the bytes
    /// a server has read and holds in its own buffers before writing them (nginx holds
    /// up to 16 KiB of each request body), whatever its buffering. The intervals in which
    /// a server socket closed miss that socket's reads after the last sample that saw it
    /// (a sample cannot ask a closed socket): they become unsure, left out of the fits.
    /// Does nothing when the intake was not measured or is already the load.
    pub fn use_intake(&mut self) {
        let Some(taken) = &self.intake else { return };
        if self.intake_used {
            return;
        }
        let zero = vec![0.0; taken.len()];
        let waiting = self.backlog.as_ref().unwrap_or(&zero);
        for (t, y) in self.y.iter_mut().enumerate() {
            *y = (taken[t] + waiting[t]).max(0.0);
        }
        for (u, &c) in self.unsure.iter_mut().zip(&self.intake_closes) {
            *u |= c;
        }
        self.backlog_added = self.backlog.is_some();
        self.intake_used = true;
    }

    /// The intervals `r` of the series, for fitting: times, the server's bytes `y` (with
    /// the backlog if it was added) and each column's bytes; no server processes, small
    /// bytes or backlog of its own.
    pub fn intervals(&self, r: std::ops::Range<usize>) -> Series {
        Series {
            t_end: self.t_end[r.clone()].to_vec(),
            t_start: self.t_start[r.clone()].to_vec(),
            y: self.y[r.clone()].to_vec(),
            columns: self
                .columns
                .iter()
                .map(|c| Column {
                    pid: c.pid,
                    exe: c.exe.clone(),
                    comm: c.comm.clone(),
                    x: c.x[r.clone()].to_vec(),
                })
                .collect(),
            server: Vec::new(),
            small_bytes: 0.0,
            backlog: None,
            backlog_max: 0.0,
            backlog_added: false,
            intake: None,
            intake_closes: Vec::new(),
            intake_used: false,
            unsure: self.unsure[r].to_vec(),
        }
    }

    /// Whether interval `t` may be fitted (its bytes are known interval by interval).
    pub fn usable(&self, t: usize) -> bool {
        !self.unsure.get(t).copied().unwrap_or(false)
    }
}

/// Why a series could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SeriesError {
    /// No process matches the server selector.
    #[error("{file}: no process matches --server {server} (processes seen: {seen})")]
    NoServer {
        /// The sample file.
        file: String,
        /// The selector.
        server: String,
        /// Some names seen.
        seen: String,
    },
    /// Too few samples.
    #[error("{file}: {samples} sample(s): at least 2 × step ({step}) are needed")]
    TooShort {
        /// The sample file.
        file: String,
        /// Samples.
        samples: usize,
        /// Step.
        step: usize,
    },
}

fn name_matches(p: &ProcSeries, sel: &str) -> bool {
    sel.parse::<u32>().is_ok_and(|pid| pid == p.pid)
        || p.comm == sel
        || std::path::Path::new(&p.exe)
            .file_name()
            .is_some_and(|f| f.to_string_lossy() == sel)
}

/// Indices of the server processes: those matching `server` (pid or name), and their
/// descendants (a daemon's per-session children).
pub fn server_processes(log: &SampleLog, server: &str) -> BTreeSet<usize> {
    let mut set: BTreeSet<usize> = log
        .processes
        .iter()
        .enumerate()
        .filter(|(_, p)| name_matches(p, server))
        .map(|(i, _)| i)
        .collect();
    loop {
        let pids: BTreeSet<u32> = set.iter().map(|&i| log.processes[i].pid).collect();
        let before = set.len();
        for (i, p) in log.processes.iter().enumerate() {
            if pids.contains(&p.ppid) && p.pid != log.meta.sampler_pid {
                set.insert(i);
            }
        }
        if set.len() == before {
            return set;
        }
    }
}

/// A process that wrote during the run and is not a candidate client: its share is 0.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Other {
    /// Process id.
    pub pid: u32,
    /// Executable path, or `comm`.
    pub exe: String,
    /// `comm`.
    pub comm: String,
    /// Bytes over the run (the metric).
    pub total_bytes: f64,
    /// Why it is not a candidate.
    pub why: Evidence,
}

/// Which processes became columns, and why ([`super::clients`]).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Selection {
    /// How the candidates were chosen.
    pub by: SelectedBy,
    /// The addresses the server listened on.
    pub listen: Vec<String>,
    /// Why each column is one (parallel to [`Series::columns`]).
    pub columns: Vec<Evidence>,
    /// The processes that wrote and are not candidates, largest first.
    pub others: Vec<Other>,
}

/// Builds the series with every process that wrote a candidate client unless the sample
/// file shows which were connected to the server ([`ClientChoice::Auto`]); see
/// [`build_for`].
pub fn build(
    log: &SampleLog,
    server: &str,
    metric: Metric,
    step: usize,
    min_share: f64,
) -> Result<Series, SeriesError> {
    build_for(log, server, metric, step, min_share, &ClientChoice::Auto).map(|(s, _)| s)
}

/// Builds the series. The candidate clients are chosen by `choice`
/// ([`super::clients::classify`]); the other processes that wrote are listed in the
/// [`Selection`] with a share of 0. Candidates whose total is under `min_share` of all
/// candidates' bytes are summed into [`Series::small_bytes`] instead of being columns.
pub fn build_for(
    log: &SampleLog,
    server: &str,
    metric: Metric,
    step: usize,
    min_share: f64,
    choice: &ClientChoice,
) -> Result<(Series, Selection), SeriesError> {
    let step = step.max(1);
    let file = log.path.display().to_string();
    let servers = server_processes(log, server);
    if servers.is_empty() {
        let mut names: Vec<&str> = log.processes.iter().map(|p| p.comm.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.truncate(12);
        return Err(SeriesError::NoServer {
            file,
            server: server.to_string(),
            seen: names.join(", "),
        });
    }
    let n_samples = log.samples.len();
    if n_samples < step + 1 {
        return Err(SeriesError::TooShort {
            file,
            samples: n_samples,
            step,
        });
    }
    // Every `step` samples, and the last sample closes a final, shorter interval: the
    // samples after the last whole step (up to step − 1 of them, the end of the run, where
    // the last sample after the clients' exits lands) belong to the run's bytes too.
    let mut bounds: Vec<usize> = (0..n_samples).step_by(step).collect();
    if bounds.last() != Some(&(n_samples - 1)) {
        bounds.push(n_samples - 1);
    }
    let n = bounds.len() - 1;
    let deltas = |i: usize| -> Vec<f64> {
        let p: &ProcSeries = &log.processes[i];
        let v: Vec<Option<u64>> = log
            .own_at(i, &bounds)
            .into_iter()
            .map(|c| c.map(|c| metric.of(&c)))
            .collect();
        v.windows(2)
            .map(|w| match (w[0], w[1]) {
                (Some(a), Some(b)) => b.saturating_sub(a) as f64,
                (None, Some(b)) if !p.at_start => b as f64,
                _ => 0.0,
            })
            .collect()
    };
    let mut y = vec![0.0; n];
    for &i in &servers {
        for (a, d) in y.iter_mut().zip(deltas(i)) {
            *a += d;
        }
    }
    let backlog = log.backlog_measured.then(|| {
        let at = |j: usize| -> f64 {
            servers
                .iter()
                .map(|&i| log.processes[i].backlog_at(j) as f64)
                .sum()
        };
        let b: Vec<f64> = bounds.iter().map(|&j| at(j)).collect();
        b
    });
    let backlog_max = backlog
        .as_ref()
        .map_or(0.0, |b| b.iter().copied().fold(0.0, f64::max));
    let backlog = backlog.map(|b| b.windows(2).map(|w| w[1] - w[0]).collect());
    // The intake (bytes read, sockets closed), cumulative per server process from its
    // first INTAKE record (0 before: a process born during the run).
    let intake_at = |j: usize| -> (f64, u64) {
        servers.iter().fold((0.0, 0), |(b, c), &i| {
            let (tb, tc) = log.processes[i].intake_at(j).unwrap_or((0, 0));
            (b + tb as f64, c + tc)
        })
    };
    // What the server took in is the load of uploads only: with a read metric the
    // clients read what the server sends.
    let uploads = matches!(metric, Metric::Wchar | Metric::WriteBytes);
    let (intake, intake_closes) = if log.intake_measured && uploads {
        let at: Vec<(f64, u64)> = bounds.iter().map(|&j| intake_at(j)).collect();
        (
            Some(at.windows(2).map(|w| (w[1].0 - w[0].0).max(0.0)).collect()),
            at.windows(2).map(|w| w[1].1 > w[0].1).collect(),
        )
    } else {
        (None, Vec::new())
    };
    let cols: Vec<(usize, Column)> = log
        .processes
        .iter()
        .enumerate()
        .filter(|(i, p)| !servers.contains(i) && p.pid != log.meta.sampler_pid)
        .map(|(i, p)| {
            (
                i,
                Column {
                    pid: p.pid,
                    exe: if p.exe.is_empty() {
                        p.comm.clone()
                    } else {
                        p.exe.clone()
                    },
                    comm: p.comm.clone(),
                    x: deltas(i),
                },
            )
        })
        .filter(|(_, c)| c.x.iter().any(|&v| v > 0.0))
        .collect();
    let procs: Vec<usize> = cols.iter().map(|(i, _)| *i).collect();
    let (evidence, by) = clients::classify(log, &servers, &procs, choice);
    let mut others = Vec::new();
    let mut why = Vec::new();
    let mut kept = Vec::new();
    for ((i, c), e) in cols.into_iter().zip(evidence) {
        if e.is_client() {
            kept.push((i, c));
            why.push(e);
        } else {
            others.push(Other {
                pid: c.pid,
                exe: c.exe,
                comm: c.comm,
                total_bytes: c.x.iter().sum(),
                why: e,
            });
        }
    }
    others.sort_by(|a, b| b.total_bytes.total_cmp(&a.total_bytes));
    let mut cols = kept;
    let total: f64 = cols.iter().map(|(_, c)| c.x.iter().sum::<f64>()).sum();
    let mut small = 0.0;
    let mut why = why.into_iter();
    let mut column_why = Vec::new();
    cols.retain(|(_, c)| {
        let s: f64 = c.x.iter().sum();
        let w = why.next();
        if s < min_share * total {
            small += s;
            false
        } else {
            column_why.extend(w);
            true
        }
    });
    // A column's change found late and spread over several intervals (`SPAN`): the
    // intervals it was spread over, unless one interval holds the whole span.
    let mut unsure = vec![false; n];
    for (i, c) in &cols {
        for &(at, before) in &log.processes[*i].spans {
            let r0 = bounds.partition_point(|&b| b <= before).saturating_sub(1);
            let r1 = bounds.partition_point(|&b| b < at).min(n);
            if r1 > r0 + 1 && c.x[r0..r1].iter().any(|&v| v > 0.0) {
                unsure[r0..r1].iter_mut().for_each(|u| *u = true);
            }
        }
    }
    let cols: Vec<Column> = cols.into_iter().map(|(_, c)| c).collect();
    let selection = Selection {
        by,
        listen: clients::listen_addrs(log, &servers)
            .iter()
            .map(|a| a.to_string())
            .collect(),
        columns: column_why,
        others,
    };
    let series = Series {
        t_start: bounds[..n]
            .iter()
            .map(|&j| log.samples[j].unix_ns)
            .collect(),
        t_end: bounds[1..]
            .iter()
            .map(|&j| log.samples[j].unix_ns)
            .collect(),
        y,
        columns: cols,
        server: servers
            .iter()
            .map(|&i| (log.processes[i].pid, log.processes[i].comm.clone()))
            .collect(),
        small_bytes: small,
        backlog,
        backlog_max,
        backlog_added: false,
        intake,
        intake_closes,
        intake_used: false,
        unsure,
    };
    Ok((series, selection))
}
