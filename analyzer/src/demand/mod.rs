//! Service demand and the residual control chart (Kato et al., SPEC §8, seed 003): which
//! process became slow, whatever the load intensity and request mix do.
//!
//! The stage, in named steps, each a module:
//!
//! | step | module | input → output |
//! |------|--------|----------------|
//! | transactions | [`transactions`] | a process's events → served requests and calls ([`transactions::Transaction`]) |
//! | callers | [`callers`] | served requests of every process → the call of another process that sent each |
//! | busy time | [`busy`] | transactions → busy time and request counts per interval ([`busy::Intervals`]) |
//! | CPU time | [`cpu`] | the reader's `cpu.tsv` → CPU time per interval, agreement with busy time |
//! | steady flow | [`flow`] | counts per interval → where the default training window starts |
//! | estimation | [`estimate`] | counts, busy time → demands per service ([`estimate::Fit`]) |
//! | control chart | [`chart`] | demands, later intervals → residuals, alarms ([`chart::Chart`]) |
//! | starved alone | [`alone`] | run-queue samples of every serving process → alarms of a process starved while its peers were not |
//! | report | [`report`] | [`DemandReport`] → text, JSON, HTML |
//!
//! [`analyze`] runs them over every process of a [`TraceSet`]; [`follow`] runs them again
//! as trace directories grow. Services ([`ServiceMode`]) are the handler-unit classes of
//! a learned model when one is given (`model`), else the listening ports a process
//! answers on (`port:8080`), or ports told apart by the code that set up the listener
//! (`conn`).

pub mod alone;
pub mod arrival;
pub mod busy;
pub mod callers;
pub mod chart;
pub mod classes;
pub mod cpu;
pub mod estimate;
pub mod flow;
pub mod follow;
pub mod identify;
pub mod report;
pub mod shape;
pub mod starve;
pub mod transactions;
pub mod types;
pub mod waits;

use crate::decode::{ProcessTrace, TraceSet};
use crate::error::{Error, Result};
use busy::{Grid, Intervals};
use chart::Rows;
use estimate::Estimator;
use rayon::prelude::*;
use serde::Serialize;
use std::path::PathBuf;
use transactions::{ByteFlow, ProcessTransactions, TransactionSource};

/// What names a service (request type) of a process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceMode {
    /// Request types found from what serving each request involved ([`types`]): the
    /// functions run, the downstream calls, the sizes of request and reply.
    #[default]
    Auto,
    /// The listening port (or Unix socket path) the request came in on.
    Port,
    /// The port and the call site of the listener's setup (`bind`/`listen`), or of the
    /// `accept` for a listener inherited from outside the trace.
    Conn,
    /// The class of the handler unit of a learned model that processed the request
    /// ([`classes`]; needs [`Options::model`]).
    Model,
}

/// Which intervals train the demand model.
#[derive(Clone, Debug)]
pub enum Train {
    /// The first fraction of each process's steady request flow ([`flow`]: from where it
    /// starts to the run's end; default a third).
    Fraction(f64),
    /// The first seconds of the run.
    Seconds(f64),
    /// A separate normal run: every interval of the analysed run is monitored.
    Baseline(TraceSet),
}

impl Default for Train {
    fn default() -> Self {
        Train::Fraction(1.0 / 3.0)
    }
}

/// Options of the demand stage.
#[derive(Clone, Debug)]
pub struct Options {
    /// Interval length (ns). Default 1 s.
    pub interval_ns: i64,
    /// Training window. Default: the first third of each process's steady request flow.
    pub train: Train,
    /// Services. Default: listening ports.
    pub services: ServiceMode,
    /// Estimator. Default: least squares regularized toward each request's own busy time.
    pub estimator: Estimator,
    /// Re-estimation window (intervals); 0: as long as the training window (at least 5).
    pub window: usize,
    /// A learned model, for [`ServiceMode::Model`].
    pub model: Option<std::sync::Arc<crate::model::Model>>,
    /// CPU samples of the traced processes (`reader::cpustat::read_samples` of each
    /// directory), if any.
    pub cpu: Vec<reader::cpustat::CpuSample>,
    /// Widen a training window whose request-type counts are collinear ([`identify`]):
    /// true for the default window, false for one the user chose.
    pub widen: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            interval_ns: 1_000_000_000,
            train: Train::default(),
            services: ServiceMode::Auto,
            estimator: Estimator::Prior,
            window: 0,
            model: None,
            cpu: Vec::new(),
            widen: true,
        }
    }
}

/// The demand stage's result over a set of traces.
#[derive(Clone, Debug, Serialize)]
pub struct DemandReport {
    /// Interval length (s).
    pub interval_s: f64,
    /// Start of interval 0 (unix ns).
    pub t0_unix_ns: i64,
    /// Intervals in the run.
    pub intervals: usize,
    /// What trained the model.
    pub train: String,
    /// How services are named.
    pub services_mode: ServiceMode,
    /// The estimator.
    pub estimator: Estimator,
    /// Processes that served requests, by host and pid.
    pub processes: Vec<ProcessDemand>,
    /// Processes left out, and why.
    pub skipped: Vec<Skipped>,
}

/// A process left out of the analysis.
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    /// Process id.
    pub pid: u32,
    /// Host.
    pub host: String,
    /// Executable.
    pub exe: String,
    /// How the process is named in every view ([`crate::procname::ProcLabel::text`]).
    pub process: String,
    /// Why.
    pub why: String,
}

/// One service of one process.
#[derive(Clone, Debug, Serialize)]
pub struct ServiceDemand {
    /// Service id (`port:8080`, `unix:/run/x.sock`, …).
    pub id: String,
    /// Requests served over the whole run.
    pub requests: u64,
    /// Estimated demand per request (s), from the training window.
    pub demand_s: f64,
    /// Half-width of its 95 % confidence interval (s).
    pub ci95_s: f64,
    /// Mean own busy time per request, measured from request boundaries (s).
    pub own_busy_s: f64,
    /// `--services auto`: what tells this request type apart from the program's others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `--services auto`: signatures too rare to estimate merged into this type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged_signatures: Option<u64>,
    /// Their requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged_requests: Option<u64>,
    /// CPU seconds per request, fitted on the training window, where CPU was sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_demand_s: Option<f64>,
}

/// One interval of one process.
#[derive(Clone, Debug, Serialize)]
pub struct IntervalRow {
    /// Start (unix ns).
    pub t_unix_ns: i64,
    /// Busy time (s).
    pub busy_s: f64,
    /// Measured CPU time (s), if the reader sampled it.
    pub cpu_s: Option<f64>,
    /// Requests completed.
    pub requests: u64,
    /// Residual against the trained demands (s); none in training.
    pub residual_s: Option<f64>,
    /// Demands re-estimated over the window ending here (s, in service order).
    pub demand_s: Option<Vec<f64>>,
}

/// The demand analysis of one process.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessDemand {
    /// Process id.
    pub pid: u32,
    /// Host.
    pub host: String,
    /// Executable.
    pub exe: String,
    /// How the process is named in every view ([`crate::procname::ProcLabel::text`]).
    pub process: String,
    /// Services, by id.
    pub services: Vec<ServiceDemand>,
    /// σ̂ of the training residuals (s).
    pub sigma_s: f64,
    /// Control limit 3σ̂ (s).
    pub limit_s: f64,
    /// Total busy time (s).
    pub busy_s: f64,
    /// Total measured CPU time (s) over the intervals that have it, if any.
    pub cpu_s: Option<f64>,
    /// Agreement of busy and CPU time per interval.
    pub cpu_agreement: cpu::Agreement,
    /// Calls to children made while serving (counted) and spontaneous ones (not counted).
    pub calls: u64,
    /// Spontaneous calls.
    pub spontaneous_calls: u64,
    /// Training intervals with activity.
    pub train_intervals: usize,
    /// A remark on the quality of the fit (too few intervals, …), if any.
    pub note: Option<String>,
    /// Condition index of the training window's request-type counts (columns scaled;
    /// above 30 they are too collinear to tell the demands apart; 1e9 when some types are
    /// always in the same proportion), if any type was seen.
    pub condition_index: Option<f64>,
    /// Start of the training window (unix ns), when trained on this run: where the
    /// process's steady request flow starts ([`flow`]), or its first interval.
    pub train_start_unix_ns: Option<i64>,
    /// End of the training window (unix ns), when trained on this run.
    pub train_end_unix_ns: Option<i64>,
    /// Alarms: the process got slower (more CPU per request, or more waiting off the CPU).
    pub alarms: Vec<chart::Alarm>,
    /// Runs of 3 violating intervals explained by waiting for a CPU on a shared machine
    /// (same CPU per request, more run-queue wait: [`starve`]): starved, not slower.
    pub starved: Vec<chart::Alarm>,
    /// Total run-queue wait (s) over the intervals that have it, if the reader sampled it.
    pub wait_s: Option<f64>,
    /// Every interval.
    pub intervals: Vec<IntervalRow>,
}

/// Transactions, intervals and grid of a trace set.
struct Prepared {
    procs: Vec<(usize, ProcessTransactions)>,
    grid: Grid,
    n: usize,
    /// `--services auto`: the request types, by id.
    types: std::collections::HashMap<String, types::TypeInfo>,
}

fn prepare(set: &TraceSet, opts: &Options, src: &dyn TransactionSource) -> Result<Prepared> {
    let all: Vec<Result<ProcessTransactions>> = set
        .processes
        .par_iter()
        .map(|p| src.transactions(p, opts.services))
        .collect();
    let classes = match (opts.services, &opts.model) {
        (ServiceMode::Model, Some(m)) => Some(classes::Classes::new(m, set)?),
        (ServiceMode::Model, None) => {
            return Err(Error::BadTrace {
                path: PathBuf::from(trace_name(set)),
                why: "services by model need a model (--model FILE)".into(),
            })
        }
        _ => None,
    };
    let mut procs = Vec::new();
    for (i, r) in all.into_iter().enumerate() {
        let mut pt = r?;
        if let Some(c) = &classes {
            let p = &set.processes[i];
            c.relabel(&p.host, p.pid, &mut pt.transactions);
        }
        procs.push((i, pt));
    }
    let lo = procs.iter().filter_map(|p| p.1.span_ns.map(|s| s.0)).min();
    let hi = procs.iter().filter_map(|p| p.1.span_ns.map(|s| s.1)).max();
    let len = opts.interval_ns.max(1);
    let (t0, n) = match (lo, hi) {
        (Some(lo), Some(hi)) => {
            let t0 = lo - lo.rem_euclid(len);
            (t0, ((hi - t0) / len + 1) as usize)
        }
        _ => (0, 0),
    };
    let grid = Grid {
        t0_ns: t0,
        len_ns: len,
    };
    let mut types = std::collections::HashMap::new();
    if opts.services == ServiceMode::Auto {
        // The executable serving each port (where one does), for pools of peers.
        let mut serving: std::collections::HashMap<String, Option<String>> = Default::default();
        for (_, pt) in procs.iter() {
            for t in &pt.transactions {
                if t.role == transactions::Role::Served {
                    if let Some(port) = t.service.strip_prefix("port:") {
                        let e = serving
                            .entry(format!("peer:{port}"))
                            .or_insert_with(|| Some(pt.exe.clone()));
                        if e.as_deref() != Some(pt.exe.as_str()) {
                            *e = None;
                        }
                    }
                }
            }
        }
        let peer_exe: std::collections::HashMap<String, String> = serving
            .into_iter()
            .filter_map(|(p, e)| Some((p, e?)))
            .collect();
        types = assign_types(set, &mut procs, grid, &peer_exe);
    }
    // A request begins when its bytes were there and the process in the receive.
    let hosts: Vec<&str> = procs
        .iter()
        .map(|(i, _)| set.processes[*i].host.as_str())
        .collect();
    let mut txs: Vec<&mut ProcessTransactions> = procs.iter_mut().map(|p| &mut p.1).collect();
    arrival::apply(&hosts, &mut txs);
    Ok(Prepared {
        procs,
        grid,
        n,
        types,
    })
}

/// `--services auto`: one set of types per program (the processes running one
/// executable and serving the same ports), programs typed after the programs whose requests call them, so that a
/// served request can take the type of the request that sent it ([`callers`]).
fn assign_types(
    set: &TraceSet,
    procs: &mut [(usize, ProcessTransactions)],
    grid: Grid,
    peer_exe: &std::collections::HashMap<String, String>,
) -> std::collections::HashMap<String, types::TypeInfo> {
    use std::collections::{BTreeMap, BTreeSet, HashMap};
    let hosts: Vec<&str> = procs
        .iter()
        .map(|(i, _)| set.processes[*i].host.as_str())
        .collect();
    let matched = {
        let view: Vec<(&str, &ProcessTransactions)> = hosts
            .iter()
            .zip(procs.iter())
            .map(|(h, p)| (*h, &p.1))
            .collect();
        callers::match_calls(&view)
    };
    // Each call's parent request and which of the parent's calls to its peer it was.
    let mut parent_of: HashMap<(usize, usize), ((usize, usize), usize)> = HashMap::new();
    for (j, (_, pt)) in procs.iter().enumerate() {
        let served: HashMap<(u32, i64), usize> = pt
            .transactions
            .iter()
            .enumerate()
            .filter(|(_, t)| t.role == transactions::Role::Served)
            .map(|(k, t)| ((t.link.conn, t.start_ns), k))
            .collect();
        let mut by_parent: BTreeMap<(usize, &str), Vec<(i64, usize)>> = BTreeMap::new();
        for (m, t) in pt.transactions.iter().enumerate() {
            if let Some(k) = t.link.parent.and_then(|p| served.get(&p)) {
                by_parent
                    .entry((*k, t.service.as_str()))
                    .or_default()
                    .push((t.start_ns, m));
            }
        }
        for ((k, _), mut calls) in by_parent {
            calls.sort();
            for (n, (_, m)) in calls.into_iter().enumerate() {
                parent_of.insert((j, m), ((j, k), n));
            }
        }
    }
    // Served request -> (its caller's parent request, ordinal).
    let caller_of: HashMap<(usize, usize), ((usize, usize), usize)> = matched
        .iter()
        .filter_map(|(r, c)| Some((*r, *parent_of.get(c)?)))
        .collect();
    // A program: an executable and the ports it serves (an interpreter runs several).
    let exe_of: Vec<String> = procs
        .iter()
        .map(|p| {
            let ports: BTreeSet<&str> =
                p.1.transactions
                    .iter()
                    .filter(|t| t.role == transactions::Role::Served)
                    .map(|t| t.service.as_str())
                    .collect();
            let ports: Vec<&str> = ports.into_iter().collect();
            format!("{} {}", p.1.exe, ports.join(","))
        })
        .collect();
    // Programs and the programs calling them.
    let mut deps: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for e in &exe_of {
        deps.entry(e.as_str()).or_default();
    }
    for (r, (p, _)) in &caller_of {
        let (a, b) = (exe_of[r.0].as_str(), exe_of[p.0].as_str());
        if a != b {
            deps.entry(a).or_default().insert(b);
        }
    }
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut out = HashMap::new();
    while done.len() < deps.len() {
        let mut ready: Vec<&str> = deps
            .iter()
            .filter(|(e, d)| !done.contains(**e) && d.iter().all(|x| done.contains(*x)))
            .map(|(e, _)| *e)
            .collect();
        if ready.is_empty() {
            // Programs calling each other: typed together, callers where typed already.
            ready = deps
                .keys()
                .filter(|e| !done.contains(**e))
                .copied()
                .collect();
        }
        for exe in ready {
            // Caller keys of the program's served requests, from typed callers; not from an
            // event loop's types, which are the sizes and calls of its requests: the
            // bytes the callee sees itself (they would only split its types by the
            // front tier's size classes).
            let keys: Vec<((usize, usize), String)> = caller_of
                .iter()
                .filter(|(r, (p, _))| {
                    exe_of[r.0] == exe && exe_of[p.0] != exe && done.contains(&exe_of[p.0])
                })
                .filter(|(_, (p, _))| {
                    let t = &procs[p.0].1.transactions[p.1];
                    !out.get(&t.service)
                        .is_some_and(|i: &types::TypeInfo| i.event_loop)
                })
                .map(|(r, (p, n))| {
                    let t = &procs[p.0].1.transactions[p.1];
                    (*r, format!("{}/{n}", t.service))
                })
                .collect();
            for (r, key) in keys {
                procs[r.0].1.transactions[r.1].link.caller = Some(key);
            }
            let mut group: Vec<&mut ProcessTransactions> = procs
                .iter_mut()
                .zip(&exe_of)
                .filter(|(_, e)| e.as_str() == exe)
                .map(|(p, _)| &mut p.1)
                .collect();
            out.extend(types::assign(&mut group, grid, peer_exe));
            done.insert(exe.to_string());
        }
    }
    out
}

/// Requests completed per interval of a process whose intervals start at grid index
/// `first`, as [`flow::start`] reads them: those a traced tier's request sent, if any
/// did (a tier behind another: its steady flow is its callers'; a set-up script's
/// statements, a health check, a locker's are not), else every one.
fn flow_counts(pt: &ProcessTransactions, grid: Grid, first: i64, n: usize) -> Vec<f64> {
    let served = || {
        pt.transactions
            .iter()
            .filter(|t| t.role == transactions::Role::Served)
    };
    let called = served().any(|t| t.link.caller.is_some());
    let mut c = vec![0.0; n];
    for t in served().filter(|t| !called || t.link.caller.is_some()) {
        let j = grid.index(t.end_ns) - first;
        if (0..n as i64).contains(&j) {
            c[j as usize] += 1.0;
        }
    }
    c
}

fn rows_of(iv: &Intervals) -> Rows {
    Rows {
        a: iv.counts.clone(),
        b: iv.busy_s.clone(),
        own: iv.own_rows.clone(),
    }
}

/// Runs the demand stage over `set`.
pub fn analyze(set: &TraceSet, opts: &Options) -> Result<DemandReport> {
    analyze_with(set, opts, &ByteFlow)
}

/// [`analyze`] with another source of transactions (matched messages, tests).
pub fn analyze_with(
    set: &TraceSet,
    opts: &Options,
    src: &dyn TransactionSource,
) -> Result<DemandReport> {
    let prep = prepare(set, opts, src)?;
    if !prep.procs.iter().any(|p| p.1.sockets) {
        return Err(Error::BadTrace {
            path: PathBuf::from(trace_name(set)),
            why: "no socket calls in these traces: service demand needs the requests a \
                  process receives and answers (were they recorded with libtrace.so preloaded?)"
                .into(),
        });
    }
    let baseline = match &opts.train {
        Train::Baseline(b) => Some(prepare(b, opts, src)?),
        _ => None,
    };
    let train_end = match &opts.train {
        Train::Fraction(f) => ((prep.n as f64 * f.clamp(0.0, 1.0)).round() as usize).max(1),
        Train::Seconds(s) => ((s * 1e9 / prep.grid.len_ns as f64).round() as usize).max(1),
        Train::Baseline(_) => 0,
    };
    let train_desc = match &opts.train {
        Train::Fraction(f) => format!(
            "first {:.0} % of each process's steady request flow (from where it starts to the \
             run's end)",
            f * 100.0
        ),
        Train::Seconds(s) => format!("first {s} s of the run ({train_end} intervals)"),
        Train::Baseline(b) => format!("baseline run ({})", trace_name(b)),
    };
    let mut report = DemandReport {
        interval_s: prep.grid.len_ns as f64 * 1e-9,
        t0_unix_ns: prep.grid.t0_ns,
        intervals: prep.n,
        train: train_desc,
        services_mode: opts.services,
        estimator: opts.estimator,
        processes: Vec::new(),
        skipped: Vec::new(),
    };
    // Baseline processes, by executable, most requests first.
    let base_ivs: Vec<(String, Intervals)> = baseline
        .as_ref()
        .map(|b| {
            let mut v: Vec<(String, Intervals)> = b
                .procs
                .iter()
                .filter_map(|(_, pt)| {
                    let span = pt.span_ns?;
                    let iv = busy::intervals(b.grid, span, &pt.transactions, &pt.idle_ns);
                    (!iv.services.is_empty()).then(|| (pt.exe.clone(), iv))
                })
                .collect();
            v.sort_by_key(|(e, iv)| {
                (
                    e.clone(),
                    std::cmp::Reverse(iv.requests.iter().sum::<u64>()),
                )
            });
            v
        })
        .unwrap_or_default();
    let mut used_base = vec![false; base_ivs.len()];
    // The run-queue samples of every process that served requests, on the run's grid: the
    // peers of [`alone`]'s chart (other workers of a pool, other tiers; not the load
    // generators and busy loops beside them), by index in `set.processes`.
    let serving: Vec<usize> = prep
        .procs
        .iter()
        .filter(|(_, pt)| {
            pt.transactions
                .iter()
                .any(|t| t.role == transactions::Role::Served)
        })
        .map(|(i, _)| *i)
        .collect();
    let peer_waits: Vec<alone::Waits> = serving
        .iter()
        .map(|&i| {
            let q = &set.processes[i];
            let s: Vec<reader::cpustat::CpuSample> = opts
                .cpu
                .iter()
                .filter(|s| {
                    s.pid == q.pid && (q.start_ticks == 0 || s.start_ticks == q.start_ticks)
                })
                .copied()
                .collect();
            alone::Waits {
                host: q.host.clone(),
                pid: q.pid,
                wait: cpu::wait_per_interval(&s, prep.grid, 0, prep.n),
                cpu: cpu::per_interval(&s, prep.grid, 0, prep.n),
            }
        })
        .collect();
    // Processes named as every view names them.
    let labels = crate::procname::labels(set)?;
    let mut order: Vec<&(usize, ProcessTransactions)> = prep.procs.iter().collect();
    order.sort_by_key(|(i, pt)| {
        let p = &set.processes[*i];
        (
            pt.exe.clone(),
            std::cmp::Reverse(pt.transactions.len()),
            p.host.clone(),
            p.pid,
        )
    });
    for (i, pt) in order {
        let p: &ProcessTrace = &set.processes[*i];
        let process = labels[*i].text();
        let skip = |why: String| Skipped {
            pid: p.pid,
            host: p.host.clone(),
            exe: pt.exe.clone(),
            process: process.clone(),
            why,
        };
        let Some(span) = pt.span_ns else {
            report.skipped.push(skip("no events".into()));
            continue;
        };
        let iv = busy::intervals(prep.grid, span, &pt.transactions, &pt.idle_ns);
        if iv.services.is_empty() {
            report.skipped.push(skip(if pt.sockets {
                format!(
                    "served no requests (made {} calls to other processes on its own): no demand to estimate",
                    iv.spontaneous + iv.calls
                )
            } else {
                "used no sockets".into()
            }));
            continue;
        }
        let rows = rows_of(&iv);
        let n = rows.b.len();
        let first0 = iv.first;
        let mut window_note = None;
        let mut condition = None;
        let mut train_from = 0;
        // Training rows and the first monitored interval.
        let (train, monitor_from) = match &baseline {
            Some(_) => {
                let k = (0..base_ivs.len()).find(|&k| !used_base[k] && base_ivs[k].0 == pt.exe);
                match k {
                    Some(k) => {
                        used_base[k] = true;
                        (align(&base_ivs[k].1, &iv.services), 0)
                    }
                    None => {
                        report.skipped.push(skip(format!(
                            "no process running {} in the baseline to train on",
                            if pt.exe.is_empty() {
                                "(unknown)"
                            } else {
                                &pt.exe
                            }
                        )));
                        continue;
                    }
                }
            }
            None => {
                // The default window: a fraction of what follows the start of the
                // process's steady flow; a window in seconds: from the run's start.
                let (s, k, max_end) = match &opts.train {
                    Train::Fraction(f) => {
                        let s = flow::start(&flow_counts(pt, prep.grid, first0, n));
                        let left = (prep.n as i64 - iv.first - s as i64).max(0) as f64;
                        let k = s + ((left * f.clamp(0.0, 1.0)).round() as usize).max(1);
                        let max_end = s + (left * identify::MAX_SHARE) as usize;
                        (s, k.min(n), max_end.clamp(k, n.max(k)))
                    }
                    _ => {
                        let k = (train_end as i64 - iv.first).clamp(0, n as i64) as usize;
                        let max_end = ((prep.n as f64 * identify::MAX_SHARE) as i64 - iv.first)
                            .clamp(k as i64, n as i64)
                            as usize;
                        (0, k, max_end)
                    }
                };
                let w = identify::choose(
                    &rows.a[s..],
                    |j| chart::is_active(&rows.a[s + j], rows.b[s + j]),
                    k - s,
                    max_end - s,
                    opts.widen && iv.services.len() > 1,
                );
                window_note = w.note;
                condition = w.condition;
                train_from = s;
                (rows.slice(s..s + w.end), s + w.end)
            }
        };
        let train_active = train.active().b.len();
        let need = 3;
        let mut note = None;
        if train_active < need {
            note = Some(format!(
                "too few intervals: {train_active} with requests in the training window (need at least {need}); \
                 demands are fitted on every interval and no alarm is raised"
            ));
        } else if train_active < iv.services.len() + 2 {
            note = Some(format!(
                "{train_active} training intervals for {} services: demands rest mostly on the \
                 per-request measurement",
                iv.services.len()
            ));
        }
        if let Some(w) = window_note {
            note = Some(match note {
                Some(n) => format!("{n}; {w}"),
                None => w,
            });
        }
        if baseline.is_some() {
            condition = identify::condition_index(&train.active().a);
        }
        let whole_prior = rows.active().prior();
        let window = if opts.window > 0 {
            opts.window
        } else {
            train_active.max(5)
        };
        let grid = prep.grid;
        let first = iv.first;
        let start = |j: usize| grid.start(first + j as i64);
        let mut ch = if train_active < need {
            chart::chart(&rows, &rows, n, window, opts.estimator, start, grid.len_ns)
        } else {
            chart::chart(
                &rows,
                &train,
                monitor_from,
                window,
                opts.estimator,
                start,
                grid.len_ns,
            )
        };
        if train_active < need {
            ch.alarms.clear();
        }
        let own_cpu: Vec<reader::cpustat::CpuSample> = opts
            .cpu
            .iter()
            .filter(|s| s.pid == p.pid && (p.start_ticks == 0 || s.start_ticks == p.start_ticks))
            .copied()
            .collect();
        let cpu_iv = cpu::per_interval(&own_cpu, grid, first, n);
        let cpu_measured = cpu::measured_per_interval(&own_cpu, grid, first, n);
        let wait_iv = cpu::wait_per_interval(&own_cpu, grid, first, n);
        let slices_iv = cpu::slices_per_interval(&own_cpu, grid, first, n);
        let sched = starve::Sched {
            wait: &wait_iv,
            slices: &slices_iv,
        };
        // Slower or starved: CPU demands fitted on this run's training window.
        let cpu_fit = if baseline.is_none() && train_active >= need {
            starve::fit_cpu(&rows, &cpu_iv, sched, train_from..monitor_from)
        } else {
            None
        };
        let mut starved = Vec::new();
        if let Some(f) = &cpu_fit {
            let mut kept = Vec::new();
            for mut a in std::mem::take(&mut ch.alarms) {
                let j0 = ((a.first_violation_unix_ns - start(0)) / grid.len_ns).max(0) as usize;
                starve::classify(&mut a, j0, &rows, &ch.residual_s, &cpu_iv, sched, f);
                if a.kind.as_deref() == Some("run-queue") {
                    starved.push(a);
                } else {
                    kept.push(a);
                }
            }
            let busy: Vec<&chart::Alarm> = kept.iter().chain(&starved).collect();
            let more = starve::cpu_alarms(
                &rows,
                &cpu_measured,
                f,
                monitor_from,
                start,
                grid.len_ns,
                &busy,
            );
            kept.extend(more);
            kept.sort_by_key(|a| a.t_unix_ns);
            ch.alarms = kept;
        }
        // Starved while its peers on the host were not: CPU taken from this process.
        let me = serving.iter().position(|k| k == i);
        if let (None, true, Some(me)) = (&baseline, train_active >= need, me) {
            let g = first.max(0) as usize;
            let lone = alone::alarms(
                &peer_waits,
                me,
                g + train_from..g + monitor_from,
                g + monitor_from..g + n,
                |j| grid.start(j as i64),
                grid.len_ns,
            );
            let overlap = |a: &chart::Alarm, b: &chart::Alarm| {
                a.first_violation_unix_ns < b.t_unix_ns && b.first_violation_unix_ns < a.t_unix_ns
            };
            for a in lone {
                let j0 = ((a.first_violation_unix_ns - start(0)) / grid.len_ns).max(0) as usize;
                if !alone::cost_service(&ch.residual_s, j0, ch.limit_s) {
                    starved.push(a);
                } else if !ch.alarms.iter().any(|b| overlap(&a, b)) {
                    starved.retain(|s| !overlap(&a, s));
                    ch.alarms.push(a);
                }
            }
            ch.alarms.sort_by_key(|a| a.t_unix_ns);
        }
        let wait_total: Option<f64> = wait_iv
            .iter()
            .any(|c| c.is_some())
            .then(|| wait_iv.iter().flatten().sum());
        let agreement = cpu::agreement(&iv.busy_s, &cpu_iv);
        let cpu_total: Option<f64> = cpu_iv
            .iter()
            .any(|c| c.is_some())
            .then(|| cpu_iv.iter().flatten().sum());
        let services = iv
            .services
            .iter()
            .enumerate()
            .map(|(k, id)| ServiceDemand {
                id: id.clone(),
                requests: iv.requests[k],
                demand_s: ch.fit.demand_s[k],
                ci95_s: ch.fit.ci95_s[k],
                own_busy_s: whole_prior.mean_s[k],
                cpu_demand_s: cpu_fit.as_ref().map(|f| f.demand_s[k]),
                name: prep.types.get(id).map(|t| t.name.clone()),
                merged_signatures: prep
                    .types
                    .get(id)
                    .filter(|t| t.merged_signatures > 0)
                    .map(|t| t.merged_signatures),
                merged_requests: prep
                    .types
                    .get(id)
                    .filter(|t| t.merged_signatures > 0)
                    .map(|t| t.merged_requests),
            })
            .collect();
        let intervals = (0..n)
            .map(|j| IntervalRow {
                t_unix_ns: start(j),
                busy_s: rows.b[j],
                cpu_s: cpu_iv[j],
                requests: rows.a[j].iter().sum::<f64>() as u64,
                residual_s: ch.residual_s[j],
                demand_s: ch.series[j].clone(),
            })
            .collect();
        report.processes.push(ProcessDemand {
            pid: p.pid,
            host: p.host.clone(),
            exe: pt.exe.clone(),
            process,
            services,
            sigma_s: ch.sigma_s,
            limit_s: ch.limit_s,
            busy_s: iv.busy_s.iter().sum(),
            cpu_s: cpu_total,
            cpu_agreement: agreement,
            calls: iv.calls,
            spontaneous_calls: iv.spontaneous,
            train_intervals: train_active,
            note,
            condition_index: condition.map(|c| c.min(1e9)),
            train_start_unix_ns: baseline
                .is_none()
                .then(|| prep.grid.start(iv.first + train_from as i64)),
            train_end_unix_ns: baseline
                .is_none()
                .then(|| prep.grid.start(iv.first + monitor_from as i64)),
            alarms: ch.alarms,
            starved,
            wait_s: wait_total,
            intervals,
        });
    }
    report
        .processes
        .sort_by(|a, b| (&a.host, a.pid).cmp(&(&b.host, b.pid)));
    report
        .skipped
        .sort_by(|a, b| (&a.host, a.pid).cmp(&(&b.host, b.pid)));
    Ok(report)
}

/// A baseline process's rows with its columns put in the order of `services` (services
/// it did not serve get zero columns).
fn align(base: &Intervals, services: &[String]) -> Rows {
    let map: Vec<Option<usize>> = services
        .iter()
        .map(|s| base.services.iter().position(|b| b == s))
        .collect();
    let pick = |r: &[f64]| -> Vec<f64> { map.iter().map(|m| m.map_or(0.0, |k| r[k])).collect() };
    Rows {
        a: base.counts.iter().map(|r| pick(r)).collect(),
        b: base.busy_s.clone(),
        own: base
            .own_rows
            .iter()
            .map(|o| busy::OwnRow {
                sum: pick(&o.sum),
                sq: pick(&o.sq),
                shared: pick(&o.shared),
            })
            .collect(),
    }
}

fn trace_name(set: &TraceSet) -> String {
    let mut names: Vec<String> = set
        .processes
        .iter()
        .flat_map(|p| p.threads.iter())
        .filter_map(|t| match &t.source {
            crate::decode::ThreadSource::Dir { dir, .. } => Some(dir.path().display().to_string()),
            _ => None,
        })
        .collect();
    names.sort();
    names.dedup();
    if names.is_empty() {
        "(traces)".into()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests;
