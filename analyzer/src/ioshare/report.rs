//! The `culprit ioshare` report: per process, β over time with its uncertainty, the server
//! load it explains and, with traces, the true share and each estimator's error; the
//! server's load, the residual and the collinearity diagnosis. [`IoShareReport`] is also
//! the JSON document (`processes` — each `pid`, `exe`, `beta` as `[t_unix_ns, value]`
//! pairs —, `server`, `residual`, …).

use super::clients::{ClientChoice, Evidence, SelectedBy};
use super::load::{self, noise};
pub use super::load::{BacklogInfo, IntakeChoice, IntakeInfo};
use super::regression::{self, Collinearity, RegressionOptions};
use super::segments::{self, SegmentOptions};
use super::select::{self as cv, Choice};
use super::series::{self, Metric, Series};
use super::single::{self, SingleOptions};
use super::trend;
use super::truth::Truth;
use super::{Estimate, Status};
use reader::iosample::SampleLog;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Which estimator(s) to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Sliding-window bounded regression.
    Regression,
    /// Single-variation estimation.
    Single,
    /// Both; `beta` is the regression's, `estimators` has both.
    Both,
}

impl Method {
    /// Parses `regression`, `single`, `both`.
    pub fn parse(s: &str) -> Result<Method, String> {
        Ok(match s {
            "regression" => Method::Regression,
            "single" => Method::Single,
            "both" => Method::Both,
            _ => return Err(format!("{s:?}: expected regression, single or both")),
        })
    }
}

/// Options of [`analyze`].
#[derive(Clone, Debug)]
pub struct IoShareOptions {
    /// Server selector: a pid or a name (`comm` or executable file name).
    pub server: String,
    /// Estimator(s).
    pub method: Method,
    /// Counter (default `wchar`).
    pub metric: Metric,
    /// Samples per reported interval (default 1: the sampling interval). Estimation always
    /// runs at the sampling resolution; β per step is the explained bytes over the
    /// process's bytes in the step.
    pub step: usize,
    /// Regression options.
    pub regression: RegressionOptions,
    /// Single-variation options.
    pub single: SingleOptions,
    /// Clients under this fraction of all client bytes are not columns (default 0.01).
    pub min_share: f64,
    /// Window over which shares are also compared with the truth (ns; default 60 s).
    pub truth_window_ns: u64,
    /// Choose the regression's window (among ⅔, 1, 1.5 and 2 × `regression.window`) and
    /// prior weight by cross-validation ([`super::select`]), and the segmented window
    /// ([`segments::choose_window`]); false: use
    /// `regression.window` and `regression.prior` as given (default false: on the
    /// benchmark's runs the choice helped on average but once picked a short window and a
    /// prior that doubled the worst client's error, see `docs/ioshare.md`).
    pub select: bool,
    /// Find change points of each process's share and fit the regression in windows
    /// that respect them ([`super::segments`]; default true).
    pub segments: bool,
    /// Penalty of a change point, in multiples of σ² ln n (default 2).
    pub segment_penalty: f64,
    /// Let a segment's share drift linearly across it where that pays its penalty
    /// (default true; false: shares constant between change points).
    pub drift: bool,
    /// Intervals per segmented window; `None` (default): 4 × the regression's window, or
    /// with `select` chosen among 2, 4, 8 and 16 × it by leave-one-out cross-validation.
    pub segment_window: Option<usize>,
    /// Count the server's load as the bytes delivered to it — its counter plus the change
    /// of its backlog — where the sample file measured the backlog
    /// ([`series::Series::add_backlog`]; default true).
    pub backlog: bool,
    /// When the server's load is its intake — the bytes it read from its sockets, plus
    /// the backlog's change — where the sample file measured it
    /// ([`series::Series::use_intake`]; default [`IntakeChoice::Auto`]).
    pub intake: IntakeChoice,
    /// How the regression follows each share's course when `segments` is on: the
    /// change-point search and its windows, or the trend filter ([`trend`]); by default
    /// the filter from [`TREND_FROM`] client columns on.
    pub course: CourseChoice,
    /// Which processes are candidate clients (default: those seen connected to the
    /// server, every process when none was; [`super::clients`]).
    pub clients: ClientChoice,
}

/// From this many client columns on, `CourseChoice::Auto` fits the trend filter rather
/// than searching for change points. The search adds each process's jumps and bends one at
/// a time and, with many processes, draws drifting shares as staircases; the filter's
/// single convex fit does not (`bench/results/ioshare.md`, round `trend`: over 60 s with 8
/// and 16 drifting clients the search's error is above least squares', the filter's below).
/// With fewer processes the search's unpenalised refit is two to five times more accurate
/// than the filter's shrunken jumps.
pub const TREND_FROM: usize = 8;

/// `--course`: how the regression follows each share's course.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CourseChoice {
    /// The trend filter from [`TREND_FROM`] client columns on, the search below.
    #[default]
    Auto,
    /// Change points and drifting segments, fitted in windows that respect them.
    Search,
    /// The trend filter: every share fitted over the run with penalised jumps and bends.
    Trend,
}

impl CourseChoice {
    /// Parses `auto`, `search`, `trend`.
    pub fn parse(s: &str) -> Result<CourseChoice, String> {
        Ok(match s {
            "auto" => CourseChoice::Auto,
            "search" => CourseChoice::Search,
            "trend" => CourseChoice::Trend,
            _ => return Err(format!("{s:?}: expected auto, search or trend")),
        })
    }
}

/// How the primary estimate followed each share's course (in the report).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Course {
    /// Plain sliding windows (`--no-segments`, or the regression not run).
    Windows,
    /// The change-point search and segmented windows.
    Search,
    /// The trend filter.
    Trend,
}

impl Default for IoShareOptions {
    fn default() -> Self {
        IoShareOptions {
            server: String::new(),
            method: Method::Both,
            metric: Metric::Wchar,
            step: 1,
            regression: RegressionOptions::default(),
            single: SingleOptions::default(),
            min_share: 0.01,
            truth_window_ns: 60_000_000_000,
            select: false,
            segments: true,
            segment_penalty: 2.0,
            drift: true,
            segment_window: None,
            backlog: true,
            intake: IntakeChoice::Auto,
            course: CourseChoice::Auto,
            clients: ClientChoice::Auto,
        }
    }
}

/// The segmented window chosen by leave-one-out cross-validation
/// ([`segments::choose_window`]).
#[derive(Clone, Debug, Serialize)]
pub struct WindowChoice {
    /// The window chosen.
    pub window_ns: u64,
    /// The windows tried.
    pub candidates_ns: Vec<u64>,
    /// Each one's mean absolute error predicting a left-out interval's server load, bytes.
    pub loo_errors: Vec<f64>,
}

/// A time series of `[t_unix_ns, value]` pairs.
pub type TimeSeries = Vec<(u64, f64)>;

/// One estimator's β for a process.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessEstimate {
    /// β per interval end.
    pub beta: TimeSeries,
    /// Uncertainty of β (standard error, or resolution for single variation).
    pub beta_err: TimeSeries,
    /// Share of the process's bytes over the run that this estimator sends to the server.
    pub overall: Option<f64>,
    /// Error against the truth, if traced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<TruthError>,
}

/// An estimator's error against the truth for one process, in percentage points.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct TruthError {
    /// Mean |β̂ − β| over the intervals where the process wrote.
    pub mae_points: f64,
    /// Intervals compared.
    pub intervals: usize,
    /// Intervals with IO that the estimator left without β (counted as 100 points off? no:
    /// reported, not averaged).
    pub unestimated: usize,
    /// Mean over truth windows of |Σβ̂x − Σtrue| / Σx.
    pub window_points: Option<f64>,
    /// Over the whole run.
    pub overall_points: f64,
}

/// One client process.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessRow {
    /// Process id (0 for grouped small writers).
    pub pid: u32,
    /// Executable.
    pub exe: String,
    /// `comm`.
    pub comm: String,
    /// Bytes over the run (the metric).
    pub total_bytes: f64,
    /// β of the primary estimator: `[t_unix_ns, value]`.
    pub beta: TimeSeries,
    /// Its uncertainty.
    pub beta_err: TimeSeries,
    /// Server bytes explained by this process per interval.
    pub explained: TimeSeries,
    /// Share of the process's bytes that went to the server over the run (primary).
    pub overall: Option<f64>,
    /// Every estimator run, by name (`regression`, `single`, `least_squares`).
    pub estimators: BTreeMap<String, ProcessEstimate>,
    /// Where the regression found this process's share to change (`t_unix_ns` of the
    /// first interval of each new segment; empty without `segments`).
    pub change_points: Vec<u64>,
    /// The segments across which the regression found this process's share to drift
    /// rather than stay constant: `[t_unix_ns of the first interval, t_unix_ns of the end
    /// of the last]` each.
    pub drifting: Vec<[u64; 2]>,
    /// The true β per interval, with traces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truth: Option<TimeSeries>,
    /// The true overall share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truth_overall: Option<f64>,
    /// Why it is a candidate client (`connected`, `given`, `everyone`).
    pub candidate: Evidence,
}

/// Which processes were candidate clients, and the others.
#[derive(Clone, Debug, Serialize)]
pub struct ClientsInfo {
    /// `connections`: the processes seen connected to the server; `all`: every process
    /// that wrote (`--clients all`, or none seen connected); `given`: `--clients PID,…`.
    pub by: SelectedBy,
    /// The addresses the server listened on.
    pub listen: Vec<String>,
    /// The processes that wrote and are not candidates — share 0 —, largest first, with
    /// why (`no_connection`, `never_listed`, `not_given`).
    pub others: Vec<series::Other>,
    /// Their bytes over the run.
    pub others_bytes: f64,
}

/// The server side.
#[derive(Clone, Debug, Serialize)]
pub struct ServerInfo {
    /// The selector given.
    pub selector: String,
    /// Server processes (daemon and children).
    pub pids: Vec<u32>,
    /// Their names.
    pub names: Vec<String>,
    /// Bytes per interval: the load the fits explain (the counter, or the intake and
    /// backlog where `backlog.used`/`intake.used`).
    pub load: TimeSeries,
    /// Bytes the server's processes counted over the run (the metric), whichever load
    /// was chosen; the intake's own total is `intake.total_bytes`.
    pub total_bytes: f64,
    /// The server's backlog: `measured` (the sample file has it), `used` (`load` is the
    /// counter plus its change: bytes delivered to the server), `max_bytes`.
    pub backlog: BacklogInfo,
    /// The server's intake (bytes it read from its sockets): `measured`, `used` (`load`
    /// is the intake plus the backlog's change).
    pub intake: IntakeInfo,
}

/// An estimator's accuracy over all traced processes.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Accuracy {
    /// Mean over processes of their per-interval MAE (points).
    pub mean_mae_points: f64,
    /// Largest per-process MAE.
    pub max_mae_points: f64,
    /// Mean over processes of their window error.
    pub mean_window_points: Option<f64>,
    /// Largest per-process window error.
    pub max_window_points: Option<f64>,
}

/// Sampling quality.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Jitter {
    /// Median |actual − deadline|.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// Largest.
    pub max_ns: u64,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct IoShareReport {
    /// The sample file.
    pub file: String,
    /// Counter used.
    pub metric: Metric,
    /// Estimators run.
    pub method: Method,
    /// Primary estimator (whose β is each process's `beta`).
    pub primary: String,
    /// Interval length (ns, nominal).
    pub step_ns: u64,
    /// Sampling interval (ns, nominal): the estimators' resolution.
    pub sampling_interval_ns: u64,
    /// Sampling jitter.
    pub jitter: Jitter,
    /// Client processes, largest first.
    pub processes: Vec<ProcessRow>,
    /// The server.
    pub server: ServerInfo,
    /// Server bytes not explained by the primary estimator, per interval.
    pub residual: TimeSeries,
    /// Primary estimator's status per interval (`ok`, `collinear`, `transition`…).
    pub status: Vec<(u64, Status)>,
    /// Windows in which processes moved together.
    pub collinearity: Vec<Collinearity>,
    /// Bytes of clients too small to be estimated separately.
    pub small_clients_bytes: f64,
    /// With traces: each estimator's accuracy.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub accuracy: BTreeMap<String, Accuracy>,
    /// The regression's window and prior weight, and the cross-validation that chose them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection: Option<Choice>,
    /// The segmented window and the cross-validation that chose it (with `select`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment_window: Option<WindowChoice>,
    /// How the primary estimate followed the shares' course: `windows`, `search`, `trend`.
    pub course: Course,
    /// With the trend filter: its bend penalty and the held-out intervals that chose it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bend: Option<trend::BendChoice>,
    /// Which processes were candidate clients and why; the others.
    pub clients: ClientsInfo,
    /// Warnings: damaged tail, taskstats off, permission denied…
    pub warnings: Vec<String>,
}

fn series_of(s: &Series, v: &[Option<f64>]) -> TimeSeries {
    v.iter()
        .enumerate()
        .filter_map(|(t, b)| b.map(|b| (s.t_end[t], b)))
        .collect()
}

fn overall(s: &Series, e: &Estimate, c: usize) -> Option<f64> {
    let x: f64 = s.columns[c].x.iter().sum();
    (x > 0.0).then(|| (0..s.y.len()).map(|t| e.explained(s, c, t)).sum::<f64>() / x)
}

fn truth_error(s: &Series, e: &Estimate, c: usize, sent: &[f64], window: usize) -> TruthError {
    let x = &s.columns[c].x;
    let n = x.len();
    let mean_x = x.iter().sum::<f64>() / n.max(1) as f64;
    let min_x = (0.02 * mean_x).max(4096.0);
    let (mut sum, mut k, mut un) = (0.0, 0usize, 0usize);
    for t in 0..n {
        if x[t] < min_x {
            continue;
        }
        let truth = sent[t] / x[t];
        match e.beta[c][t] {
            Some(b) => {
                sum += (b - truth).abs() * 100.0;
                k += 1;
            }
            None => un += 1,
        }
    }
    let share = |r: std::ops::Range<usize>| -> Option<f64> {
        let xs: f64 = x[r.clone()].iter().sum();
        (xs > 0.0).then(|| {
            let est: f64 = r.clone().map(|t| e.explained(s, c, t)).sum();
            let tru: f64 = sent[r].iter().sum();
            (est - tru).abs() / xs * 100.0
        })
    };
    let w = window.max(1);
    let wins: Vec<f64> = (0..n / w)
        .filter_map(|i| share(i * w..(i + 1) * w))
        .collect();
    TruthError {
        mae_points: if k > 0 { sum / k as f64 } else { 0.0 },
        intervals: k,
        unestimated: un,
        window_points: (!wins.is_empty()).then(|| wins.iter().sum::<f64>() / wins.len() as f64),
        overall_points: share(0..n).unwrap_or(0.0),
    }
}

/// Runs the estimators on a sample file (and compares them with the truth when given).
pub fn analyze(
    log: &SampleLog,
    opts: &IoShareOptions,
    truth: Option<&Truth>,
) -> Result<IoShareReport, series::SeriesError> {
    // Estimate at the sampling resolution, report per step.
    let (mut fine, chosen) = series::build_for(
        log,
        &opts.server,
        opts.metric,
        1,
        opts.min_share,
        &opts.clients,
    )?;
    let step = opts.step.max(1);
    let mut s = if step == 1 {
        fine.clone()
    } else {
        series::build_for(
            log,
            &opts.server,
            opts.metric,
            step,
            opts.min_share,
            &opts.clients,
        )?
        .0
    };
    let mut warnings = Vec::new();
    if let Some(what) = log.tail.describe() {
        warnings.push(format!(
            "{}: {what}; the other samples are used",
            log.path.display()
        ));
    }
    warnings.extend(log.notes.iter().cloned());
    if chosen.by == SelectedBy::All && opts.clients == ClientChoice::Auto {
        warnings.push(format!(
            "no process was seen connected to the server (listening on {}): every process that wrote is a candidate client",
            if chosen.listen.is_empty() { "no address seen".to_string() } else { chosen.listen.join(", ") }
        ));
    }
    if let ClientChoice::Pids(p) = &opts.clients {
        let missing: Vec<&u32> = p
            .iter()
            .filter(|p| !fine.columns.iter().any(|c| c.pid == **p))
            .collect();
        if !missing.is_empty() {
            warnings.push(format!("--clients: {missing:?} wrote nothing, are server processes or are under the small-writer cut-off: not estimated"));
        }
    }
    let mut ests: Vec<Estimate> = Vec::new();
    let mut episodes = Vec::new();
    // Enough rows per window for the unknowns: at least three per column.
    let ropts = RegressionOptions {
        window: opts.regression.window.max(2 * (fine.columns.len() + 1)),
        ..opts.regression
    };
    // The baseline: plain least squares over the same windows as given, no bounds, no
    // lag, no prior, no weights.
    let plain = RegressionOptions {
        bounded: false,
        lag: false,
        prior: 0.0,
        robust: false,
        ..ropts
    };
    // What the server's own counter measured, before the load is chosen: the intake
    // misses a closing socket's last reads, so it cannot stand for the total.
    let counted_bytes: f64 = s.y.iter().sum();
    let (backlog_info, intake_info) =
        load::choose(&mut fine, &mut s, opts.backlog, opts.intake, &plain);
    let (ols, _) = regression::estimate(&fine, &plain);
    let regressed = matches!(opts.method, Method::Regression | Method::Both);
    let mut course = match (regressed && opts.segments, opts.course) {
        (false, _) => Course::Windows,
        (true, CourseChoice::Search) => Course::Search,
        (true, CourseChoice::Trend) => Course::Trend,
        (true, CourseChoice::Auto) if fine.columns.len() >= TREND_FROM => Course::Trend,
        (true, CourseChoice::Auto) => Course::Search,
    };
    let mut selection = None;
    let mut pieces = segments::Pieces::default();
    let mut segment_window = None;
    let mut bend = None;
    if regressed {
        let mut o = RegressionOptions {
            prior_window: ropts.prior_window.max(4 * ropts.window),
            ..ropts
        };
        if opts.select {
            let windows =
                cv::candidate_windows(opts.regression.window.max(4), 2 * (fine.columns.len() + 1));
            let c = cv::choose(&fine, &o, &windows, &cv::PRIORS);
            o.window = c.window;
            o.prior = c.prior;
            selection = Some(c);
        }
        let (mut e, ep) = regression::estimate(&fine, &o);
        if course == Course::Trend {
            // The trend filter in place of the search and its windows: β from the
            // filter, the uncertainty and status of the plain windows (a penalised fit
            // gives no standard error of its own; the windows' is the larger), no lag.
            // Without a noise scale (a server load the clients explain exactly) it has no
            // units for its penalties: the search then.
            let mut to = trend::TrendOptions {
                sigma: noise(&fine, &ols),
                ..Default::default()
            };
            // How much the shares bend, from held-out intervals of this run.
            bend = trend::choose_bend(&fine, &to, &trend::BENDS);
            if let Some(b) = &bend {
                to.bend = b.bend;
            }
            match trend::fit(&fine, &to) {
                Some(tr) => {
                    for (c, beta) in tr.beta.iter().enumerate() {
                        for (t, &b) in beta.iter().enumerate() {
                            if e.beta[c][t].is_some() || fine.columns[c].x[t] > 0.0 {
                                e.beta[c][t] = Some(b);
                            }
                        }
                    }
                    e.lag = vec![None; fine.y.len()];
                }
                None => course = Course::Search,
            }
        }
        if course == Course::Search {
            // Residuals of the windowed fit; the unsure intervals weigh nothing in the
            // search (their residual 0 leaves them out of the noise's scale).
            let r: Vec<f64> = (0..fine.y.len())
                .map(|t| {
                    if !fine.usable(t) {
                        return 0.0;
                    }
                    fine.y[t]
                        - (0..fine.columns.len())
                            .map(|c| e.explained(&fine, c, t))
                            .sum::<f64>()
                })
                .collect();
            let (mut w, sigma2) = segments::huber_weights(&r);
            for (t, w) in w.iter_mut().enumerate() {
                if !fine.usable(t) {
                    *w = 0.0;
                }
            }
            // Segmented windows: 4 × the regression's by default (with the changes
            // modelled, a longer window no longer blurs them and averages more noise out),
            // at least 2 rows per unknown; with `select`, chosen by cross-validation.
            let shortest = (2 * opts.regression.window).max(o.window);
            let mut so = SegmentOptions {
                min_len: (2 * opts.regression.window).div_ceil(3).max(2),
                penalty: opts.segment_penalty,
                window: opts.segment_window.unwrap_or(2 * shortest).max(o.window),
                block: 40 * o.window,
                drift: opts.drift,
            };
            pieces = segments::pieces(&fine, &w, sigma2, &so);
            if opts.select && opts.segment_window.is_none() {
                let candidates: Vec<usize> = [1, 2, 4, 8].iter().map(|k| k * shortest).collect();
                let (chosen, errors) =
                    segments::choose_window(&fine, &e, &pieces, &so, &candidates);
                so.window = chosen;
                segment_window = Some(WindowChoice {
                    window_ns: chosen as u64 * log.meta.interval_ns,
                    candidates_ns: candidates
                        .iter()
                        .map(|&c| c as u64 * log.meta.interval_ns)
                        .collect(),
                    loo_errors: errors,
                });
            }
            e = segments::estimate(&fine, &e, &pieces, &so);
        }
        ests.push(e);
        episodes = ep;
    }
    if matches!(opts.method, Method::Single | Method::Both) {
        let mut so = opts.single;
        if so.noise == 0.0 {
            so.noise = noise(&fine, &ols);
        }
        ests.push(single::estimate(&fine, &so));
    }
    ests.push(ols);
    let ests: Vec<Estimate> = ests
        .into_iter()
        .map(|e| {
            if step == 1 {
                e
            } else {
                e.coarsen(&fine, &s, step)
            }
        })
        .collect();
    let primary = &ests[0];
    let step_ns = log.meta.interval_ns * step as u64;
    let window = (opts.truth_window_ns / step_ns.max(1)).max(1) as usize;

    let drifting = if pieces.change_points.is_empty() {
        Vec::new()
    } else {
        pieces.ranges(fine.y.len())
    };
    let mut processes: Vec<ProcessRow> = Vec::new();
    let mut acc: BTreeMap<String, Vec<TruthError>> = BTreeMap::new();
    for (c, col) in s.columns.iter().enumerate() {
        let sent = truth.and_then(|t| t.per_interval(col.pid, &s.t_start, &s.t_end));
        let mut estimators = BTreeMap::new();
        for e in &ests {
            let error = sent
                .as_ref()
                .map(|sent| truth_error(&s, e, c, sent, window));
            if let Some(err) = error {
                acc.entry(e.name.to_string()).or_default().push(err);
            }
            estimators.insert(
                e.name.to_string(),
                ProcessEstimate {
                    beta: series_of(&s, &e.beta[c]),
                    beta_err: series_of(&s, &e.err[c]),
                    overall: overall(&s, e, c),
                    error,
                },
            );
        }
        let total: f64 = col.x.iter().sum();
        processes.push(ProcessRow {
            pid: col.pid,
            exe: col.exe.clone(),
            comm: col.comm.clone(),
            total_bytes: total,
            beta: series_of(&s, &primary.beta[c]),
            beta_err: series_of(&s, &primary.err[c]),
            explained: (0..s.y.len())
                .map(|t| (s.t_end[t], primary.explained(&s, c, t)))
                .collect(),
            overall: overall(&s, primary, c),
            estimators,
            change_points: pieces
                .change_points
                .get(c)
                .map(|v| v.iter().map(|&t| fine.t_start[t]).collect())
                .unwrap_or_default(),
            drifting: drifting
                .get(c)
                .map(|v| {
                    v.iter()
                        .filter(|g| g.2)
                        .map(|&(a, b, _)| [fine.t_start[a], fine.t_end[b - 1]])
                        .collect()
                })
                .unwrap_or_default(),
            truth: sent.as_ref().map(|sent| {
                (0..s.y.len())
                    .filter(|&t| col.x[t] > 0.0)
                    .map(|t| (s.t_end[t], sent[t] / col.x[t]))
                    .collect()
            }),
            truth_overall: sent
                .as_ref()
                .and_then(|sent| (total > 0.0).then(|| sent.iter().sum::<f64>() / total)),
            candidate: chosen.columns.get(c).cloned().unwrap_or(Evidence::Everyone),
        });
    }
    let residual = (0..s.y.len())
        .map(|t| {
            let ex: f64 = (0..s.columns.len())
                .map(|c| primary.explained(&s, c, t))
                .sum();
            (s.t_end[t], s.y[t] - ex)
        })
        .collect();
    processes.sort_by(|a, b| b.total_bytes.total_cmp(&a.total_bytes));
    let accuracy = acc
        .into_iter()
        .map(|(k, v)| {
            let n = v.len().max(1) as f64;
            let w: Vec<f64> = v.iter().filter_map(|e| e.window_points).collect();
            (
                k,
                Accuracy {
                    mean_mae_points: v.iter().map(|e| e.mae_points).sum::<f64>() / n,
                    max_mae_points: v.iter().map(|e| e.mae_points).fold(0.0, f64::max),
                    mean_window_points: (!w.is_empty())
                        .then(|| w.iter().sum::<f64>() / w.len() as f64),
                    max_window_points: (!w.is_empty())
                        .then(|| w.iter().copied().fold(0.0, f64::max)),
                },
            )
        })
        .collect();
    let (p50, p99, max) = log.jitter();
    Ok(IoShareReport {
        file: log.path.display().to_string(),
        metric: opts.metric,
        method: opts.method,
        primary: primary.name.to_string(),
        step_ns,
        sampling_interval_ns: log.meta.interval_ns,
        jitter: Jitter {
            p50_ns: p50,
            p99_ns: p99,
            max_ns: max,
        },
        server: ServerInfo {
            selector: opts.server.clone(),
            pids: s.server.iter().map(|p| p.0).collect(),
            names: {
                let mut n: Vec<String> = s.server.iter().map(|p| p.1.clone()).collect();
                n.sort();
                n.dedup();
                n
            },
            load: s.t_end.iter().copied().zip(s.y.iter().copied()).collect(),
            total_bytes: counted_bytes,
            backlog: backlog_info,
            intake: intake_info,
        },
        processes,
        residual,
        status: s
            .t_end
            .iter()
            .copied()
            .zip(primary.status.iter().copied())
            .collect(),
        collinearity: episodes,
        small_clients_bytes: s.small_bytes,
        accuracy,
        selection,
        segment_window,
        course,
        bend: if course == Course::Trend { bend } else { None },
        clients: ClientsInfo {
            by: chosen.by,
            listen: chosen.listen,
            others_bytes: chosen.others.iter().map(|o| o.total_bytes).sum(),
            others: chosen.others,
        },
        warnings,
    })
}

fn mb(b: f64) -> String {
    format!("{:.1} MB", b / 1e6)
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1}%", v * 100.0))
}

impl IoShareReport {
    /// The text report.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "{}: server {} (pids {:?}), {} over the run; {} intervals of {:.3} s; metric {:?}; jitter p50 {:.1} µs p99 {:.1} µs",
            self.file,
            self.server.names.join(","),
            self.server.pids.iter().take(8).collect::<Vec<_>>(),
            mb(self.server.total_bytes),
            self.server.load.len(),
            self.step_ns as f64 / 1e9,
            self.metric,
            self.jitter.p50_ns as f64 / 1e3,
            self.jitter.p99_ns as f64 / 1e3,
        );
        if let Some(c) = &self.selection {
            let interval_s = self.sampling_interval_ns as f64 / 1e9;
            let _ = writeln!(
                o,
                "regression: window {:.1} s, prior weight {} toward a {:.1} s window (chosen by cross-validation over {} left-out intervals)",
                c.window as f64 * interval_s,
                c.prior,
                c.prior_window as f64 * interval_s,
                c.points
            );
        }
        if let Some(c) = &self.segment_window {
            let _ = writeln!(
                o,
                "regression: segmented windows of {:.1} s (chosen by cross-validation among {} s)",
                c.window_ns as f64 / 1e9,
                c.candidates_ns
                    .iter()
                    .map(|w| format!("{:.1}", *w as f64 / 1e9))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        match self.clients.by {
            SelectedBy::Connections => {
                let _ = writeln!(
                    o,
                    "clients: the {} process(es) seen connected to the server ({}); {} other process(es) wrote {} with no connection to it: share 0{}",
                    self.processes.len(),
                    self.clients.listen.join(", "),
                    self.clients.others.len(),
                    mb(self.clients.others_bytes),
                    if self.clients.others.is_empty() { String::new() } else {
                        format!(" (largest: {})", self.clients.others.iter().take(4).map(|p| format!("{} {} {}", p.pid, p.comm, mb(p.total_bytes))).collect::<Vec<_>>().join(", "))
                    }
                );
            }
            SelectedBy::Given => {
                let _ = writeln!(
                    o,
                    "clients: the processes named by --clients; {} other process(es) wrote {}: share 0",
                    self.clients.others.len(),
                    mb(self.clients.others_bytes)
                );
            }
            SelectedBy::All => {}
        }
        let names: Vec<&String> = self
            .processes
            .first()
            .map(|p| p.estimators.keys().collect())
            .unwrap_or_default();
        let _ = write!(o, "\n{:>8}  {:<24} {:>10}", "pid", "process", "bytes");
        for n in &names {
            let _ = write!(o, " {:>14}", n);
        }
        let has_truth = self.processes.iter().any(|p| p.truth_overall.is_some());
        if has_truth {
            let _ = write!(o, " {:>8}", "truth");
        }
        let _ = writeln!(o);
        for p in &self.processes {
            let name = std::path::Path::new(&p.exe)
                .file_name()
                .map_or(p.comm.clone(), |f| f.to_string_lossy().into_owned());
            let _ = write!(o, "{:>8}  {:<24} {:>10}", p.pid, name, mb(p.total_bytes));
            for n in &names {
                let e = &p.estimators[*n];
                let _ = match e.error {
                    Some(err) => write!(o, " {:>6} ±{:>5.1}p", pct(e.overall), err.mae_points),
                    None => write!(o, " {:>14}", pct(e.overall)),
                };
            }
            if has_truth {
                let _ = write!(o, " {:>8}", pct(p.truth_overall));
            }
            let _ = writeln!(o);
        }
        let _ = writeln!(
            o,
            "\n(share of each process's bytes that reached the server over the run{})",
            if has_truth {
                "; ±p: mean absolute error per interval against the trace, in points"
            } else {
                ""
            }
        );
        for (k, a) in &self.accuracy {
            let _ = writeln!(
                o,
                "accuracy {k}: per-interval MAE mean {:.1} max {:.1} points; per-window mean {} max {} points",
                a.mean_mae_points,
                a.max_mae_points,
                a.mean_window_points.map_or("-".into(), |v| format!("{v:.1}")),
                a.max_window_points.map_or("-".into(), |v| format!("{v:.1}")),
            );
        }
        let cps: usize = self.processes.iter().map(|p| p.change_points.len()).sum();
        let drifting: usize = self.processes.iter().map(|p| p.drifting.len()).sum();
        if self.course == Course::Trend {
            let _ = writeln!(
                o,
                "regression: each share fitted over the run by the trend filter (penalised jumps and bends; the default from {TREND_FROM} client processes; --course search: change points and segmented windows){}",
                self.bend.as_ref().map_or(String::new(), |b| format!(
                    "; bend penalty {} of {:?}, chosen on every fifth interval held out",
                    b.bend, b.candidates
                ))
            );
        } else if cps + drifting > 0 {
            let _ = writeln!(
                o,
                "regression: {cps} change point(s) of the processes' shares found, {drifting} segment(s) across which a share drifts; windows respect them (--no-segments: plain windows; --no-drift: constant between change points)"
            );
        }
        let b = &self.server.backlog;
        if b.measured {
            let _ = writeln!(
                o,
                "server backlog: up to {} queued unread in its sockets; {}",
                mb(b.max_bytes),
                match (b.used, b.residual_spread) {
                    (true, Some([a, w])) => format!("the server's load counts bytes delivered to it (its counter + the backlog's change), which the clients' IO explains better (residual spread {:.1} KB per interval against {:.1} KB on the counter alone; --no-backlog: its counter only)", w / 1e3, a / 1e3),
                    (true, None) => "the server's load counts bytes delivered to it (its counter + the backlog's change; --no-backlog: its counter only)".to_string(),
                    (false, Some([a, w])) => format!("not used: the clients' IO explains the server's counter alone better (residual spread {:.1} KB per interval against {:.1} KB with the backlog's change)", a / 1e3, w / 1e3),
                    (false, None) => "not used (--no-backlog)".to_string(),
                }
            );
        }
        let i = &self.server.intake;
        if i.measured {
            let _ = writeln!(
                o,
                "server intake: {} read from its sockets, {} interval(s) with a socket closing; {}",
                mb(i.total_bytes),
                i.closing_intervals,
                match (i.used, i.residual_spread) {
                    (true, Some([c, w])) => format!("the server's load is what it took in (its intake + the backlog's change; intervals with a socket closing left out), which the clients' IO explains better (residual spread {:.1} KB per interval against {:.1} KB on its counter; --intake never: the counter)", w / 1e3, c / 1e3),
                    (true, None) => "the server's load is what it took in (its intake + the backlog's change; --intake never: the counter)".to_string(),
                    (false, Some([c, w])) => format!("not used: the clients' IO explains the server's counter better (residual spread {:.1} KB per interval against {:.1} KB on the intake)", c / 1e3, w / 1e3),
                    (false, None) => "not used (--intake never)".to_string(),
                }
            );
        }
        let transitions = self
            .status
            .iter()
            .filter(|s| s.1 == Status::Transition)
            .count();
        if transitions > 0 {
            let _ = writeln!(o, "{transitions} interval(s) in transition");
        }
        for c in &self.collinearity {
            let _ = writeln!(
                o,
                "collinear {:.1}–{:.1} s: processes {:?} move together (condition {:.0}, VIF {:?}); their individual shares are unreliable, their sum is not",
                (c.from_ns.saturating_sub(self.server.load.first().map_or(0, |l| l.0))) as f64 / 1e9,
                (c.to_ns.saturating_sub(self.server.load.first().map_or(0, |l| l.0))) as f64 / 1e9,
                c.pids,
                c.condition,
                c.vif.iter().map(|v| (v * 10.0).round() / 10.0).collect::<Vec<_>>(),
            );
        }
        for w in &self.warnings {
            let _ = writeln!(o, "warning: {w}");
        }
        o
    }
}
