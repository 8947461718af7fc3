//! `analyzer` — Culprit's offline analysis: learn a model of normal behaviour from traces,
//! then rank the execution units of a faulty run by suspicion (Maruyama & Matsuoka,
//! *Model-Based Fault Localization in Large-Scale Computing Systems*, IPDPS 2008).
//!
//! The pipeline is a chain of named stages, each a module joined to the next by a named type:
//!
//! | stage | module | input → output |
//! |-------|--------|----------------|
//! | 1 decode | [`decode`] | trace chunks → per-thread [`decode::Event`] streams |
//! | 2 symbolize | [`symbolize`] | addresses, Python indices → stable keys and names |
//! | 3 units | [`units`] | events → [`units::Unit`]s (initializer, handler, loop, finalizer) |
//! | 4 trees | [`trees`] | a unit's calls → its [`trees::CallTree`] |
//! | 5 connections | [`connections`] | setup calls → [`connections::ConnKey`] per descriptor |
//! | 6 models | [`model`] | units → process models → the global [`model::Model`] |
//! | 7 scores | [`score`] | unit + model → [`score::UnitScore`] (§6 of the paper) |
//! | 8 report | [`report`] | scores → ranked [`report::RankedUnit`]s (text, JSON, HTML) |
//!
//! [`learn`] and [`rank`] run the whole chain over processes in parallel (rayon); their
//! results do not depend on the number of threads.
//!
//! ```
//! use analyzer::decode::{TraceBuilder, TraceSet};
//! use bufpool::format::{LibFn, LibOpts};
//!
//! // A tiny event-driven process: set up a listening socket, then loop on poll + recv.
//! fn run(recv_ret: i64) -> TraceSet {
//!     let mut t = TraceBuilder::new("node1", 10, 10);
//!     let o = |fd: i32, ret: i64, len: u64| LibOpts { fd: Some(fd), ret: Some(ret), len: Some(len), ..Default::default() };
//!     t.lib(0x100, LibFn::Socket, LibOpts { ret: Some(3), ..Default::default() });
//!     t.lib(0x110, LibFn::Bind, o(3, 0, 0));
//!     t.lib(0x120, LibFn::Listen, o(3, 0, 0));
//!     t.lib(0x130, LibFn::Accept, o(3, 4, 0));
//!     for _ in 0..5 {
//!         t.lib(0x200, LibFn::Poll, o(-1, 1, 0));
//!         t.lib(0x210, LibFn::Recv, o(4, recv_ret, 8));
//!         t.lib(0x220, LibFn::Send, o(4, 8, 8));
//!     }
//!     TraceSet { processes: vec![t.finish()] }
//! }
//! let opts = analyzer::Options::default();
//! let model = analyzer::learn(&[run(8)], &opts).unwrap().model;
//! let report = analyzer::rank(&model, &run(3), &opts).unwrap();
//! // Short receives were never seen in normal runs: the handler units rank first.
//! assert_eq!(report.units[0].info.kind, analyzer::units::UnitKind::Handler);
//! assert!(report.units[0].score > 0.3);
//! ```
#![deny(missing_docs)]

pub mod connections;
pub mod decode;
pub mod error;
pub mod hash;
pub mod model;
pub mod report;
pub mod score;
pub mod symbolize;
pub mod synth;
pub mod trees;
pub mod units;

pub use error::{Error, Result};

use decode::{DecodeStats, ProcessTrace, TraceSet};
use model::{GroupModel, Model};
use rayon::prelude::*;
use report::{RankedUnit, Report};
use std::collections::BTreeMap;
use std::sync::Arc;
use symbolize::ElfResolver;
use trees::TreeOptions;
use units::{NameBook, NameSrc, ProcessUnits, Unit};

/// Receives progress of long stages (the CLI shows bars with it).
pub trait Progress: Send + Sync {
    /// A stage with `total` steps begins.
    fn start(&self, stage: &str, total: u64);
    /// `n` more steps are done.
    fn inc(&self, n: u64);
    /// The stage is over.
    fn finish(&self);
}

/// Options of [`learn`] and [`rank`]. Every default is documented at its field.
#[derive(Clone)]
pub struct Options {
    /// How trees are built (learning; ranking always uses the model's own options).
    /// Default: [`TreeOptions::default`] (outcome-aware nodes).
    pub tree: TreeOptions,
    /// Sentences of *why* per unit. Default 3.
    pub why: usize,
    /// Units whose *why* is written out by [`rank`] (the highest-ranked); the others'
    /// is made when printed ([`report::Report::why_of`]), which keeps a large ranking small
    /// in memory. Default 100.
    pub why_units: usize,
    /// Effective nodes kept per ranked unit. Default 16.
    pub effective_kept: usize,
    /// Units whose annotated call tree is kept (the highest-ranked). Default 200.
    pub trees_kept: usize,
    /// Lines of an annotated tree. Default 400.
    pub tree_lines: usize,
    /// Progress receiver. Default none.
    pub progress: Option<Arc<dyn Progress>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            tree: TreeOptions::default(),
            why: 3,
            why_units: 100,
            effective_kept: 16,
            trees_kept: 200,
            tree_lines: 400,
            progress: None,
        }
    }
}

impl Options {
    fn start(&self, stage: &str, total: usize) {
        if let Some(p) = &self.progress {
            p.start(stage, total as u64);
        }
    }
    fn inc(&self) {
        if let Some(p) = &self.progress {
            p.inc(1);
        }
    }
    fn finish(&self) {
        if let Some(p) = &self.progress {
            p.finish();
        }
    }
}

/// What one process contributed to a learned model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessSummary {
    /// `host:pid`.
    pub process: String,
    /// Units found.
    pub units: usize,
    /// Index of its group in the model.
    pub group: usize,
    /// Size of its process model alone, in bytes of the model format (names included).
    pub model_bytes: usize,
    /// Entries decoded.
    pub entries: u64,
}

/// The result of [`learn`].
#[derive(Clone, Debug)]
pub struct Learned {
    /// The global model.
    pub model: Model,
    /// Per process, in (host, pid) order.
    pub processes: Vec<ProcessSummary>,
    /// Decoding counts.
    pub stats: DecodeStats,
}

fn sorted_processes(sets: &[TraceSet]) -> Vec<&ProcessTrace> {
    let mut v: Vec<&ProcessTrace> = sets.iter().flat_map(|s| &s.processes).collect();
    v.sort_by(|a, b| (&a.host, a.pid, a.start_ticks).cmp(&(&b.host, b.pid, b.start_ticks)));
    v
}

/// Pass 1 over every process (in parallel), then what forked children inherited.
fn scan_all(procs: &[&ProcessTrace], opts: &Options) -> Result<Vec<units::ProcessScan>> {
    opts.start("finding event loops", procs.len());
    let scans: Vec<Result<units::ProcessScan>> = procs
        .par_iter()
        .map(|p| {
            let s = units::scan_process(p);
            opts.inc();
            s
        })
        .collect();
    opts.finish();
    let mut out = Vec::with_capacity(scans.len());
    for s in scans {
        out.push(s?);
    }
    units::inherit(procs, &mut out);
    Ok(out)
}

fn merge_names(books: &[&NameBook]) -> BTreeMap<u64, String> {
    let mut all: BTreeMap<u64, &NameSrc> = BTreeMap::new();
    for b in books {
        for (k, v) in &b.names {
            all.entry(*k).or_insert(v);
        }
    }
    let mut r = ElfResolver::default();
    all.into_iter()
        .map(|(k, v)| {
            let n = match v {
                NameSrc::Text(s) => s.clone(),
                NameSrc::C(c) => r.resolve(c),
            };
            (k, n)
        })
        .collect()
}

/// Learns a global model from normal runs: process models in parallel, then process groups
/// merged by mean probability (§4–5).
pub fn learn(sets: &[TraceSet], opts: &Options) -> Result<Learned> {
    let procs = sorted_processes(sets);
    opts.start("learning process models", procs.len());
    let scans = scan_all(&procs, opts)?;
    let per: Vec<Result<LearnedProcess>> = procs
        .par_iter()
        .zip(&scans)
        .map(|(p, scan)| {
            let mut u = units::split_process(p, scan, &opts.tree)?;
            let m = model::process_model(&u);
            u.units = Vec::new();
            opts.inc();
            Ok(LearnedProcess { model: m, units: u })
        })
        .collect();
    opts.finish();
    let mut per_ok = Vec::with_capacity(per.len());
    for r in per {
        per_ok.push(r?);
    }
    let mut m = Model::new(opts.tree);
    let mut stats = DecodeStats::default();
    for lp in &per_ok {
        m.add_group(&lp.model);
    }
    let books: Vec<&NameBook> = per_ok.iter().map(|lp| &lp.units.names).collect();
    m.names = merge_names(&books);
    let processes = per_ok
        .iter()
        .map(|lp| {
            let (pm, u) = (&lp.model, &lp.units);
            stats += u.stats;
            let mut alone = Model::new(opts.tree);
            alone.groups.push(pm.clone());
            alone.names = u
                .names
                .names
                .keys()
                .filter_map(|k| m.names.get(k).map(|n| (*k, n.clone())))
                .collect();
            ProcessSummary {
                process: format!("{}:{}", u.host, u.pid),
                units: pm.classes.iter().map(|(_, t)| t.units as usize).sum(),
                group: m.group_index(&pm.signature).unwrap_or(0),
                model_bytes: alone.encoded_size(),
                entries: u.stats.entries,
            }
        })
        .collect();
    Ok(Learned {
        model: m,
        processes,
        stats,
    })
}

/// A process's learned model and what else its units told.
struct LearnedProcess {
    model: GroupModel,
    units: ProcessUnits,
}

/// A process's scored units: the best kept whole (with trees), the rest light.
struct ProcessRanking {
    light: Vec<RankedUnit>,
    heavy: Vec<Scored>,
    units: ProcessUnits,
    unmatched: bool,
}

struct Scored {
    unit: Unit,
    score: score::UnitScore,
    group: Option<usize>,
}

fn rank_key(a: &RankedUnit) -> (std::cmp::Reverse<u64>, i64, &str) {
    (
        std::cmp::Reverse(a.score.to_bits()),
        a.info.t_start_unix_ns,
        &a.info.id,
    )
}

/// Ranks the units of a (faulty) run by suspect score (§6). Deterministic: the result does
/// not depend on the number of threads.
pub fn rank(model: &Model, set: &TraceSet, opts: &Options) -> Result<Report> {
    let procs = sorted_processes(std::slice::from_ref(set));
    opts.start("scoring units", procs.len());
    let scans = scan_all(&procs, opts)?;
    let per: Vec<Result<ProcessRanking>> = procs
        .par_iter()
        .zip(&scans)
        .map(|(p, scan)| {
            let mut pu = units::split_process(p, scan, &model.options)?;
            let gi = model.group_index(&pu.signature);
            let g = gi.map(|i| &model.groups[i]);
            let mut scored: Vec<Scored> = std::mem::take(&mut pu.units)
                .into_iter()
                .map(|u| {
                    let s = score::score_unit(&u, g);
                    Scored {
                        unit: u,
                        score: s,
                        group: gi,
                    }
                })
                .collect();
            scored.sort_by(|a, b| {
                b.score
                    .score
                    .total_cmp(&a.score.score)
                    .then(
                        a.unit
                            .info
                            .t_start_unix_ns
                            .cmp(&b.unit.info.t_start_unix_ns),
                    )
                    .then(a.unit.info.id.cmp(&b.unit.info.id))
            });
            // Keep full units (trees) only for this process's best candidates: enough for
            // the global top `trees_kept` unless a few processes hold all of it.
            let keep = opts
                .trees_kept
                .min((opts.trees_kept * 4 / procs.len().max(1)).max(16));
            let rest = scored.split_off(scored.len().min(keep));
            // Units ranked below them keep only what their *why* needs.
            let light = rest
                .into_iter()
                .map(|s| RankedUnit {
                    info: s.unit.info,
                    score: s.score.score,
                    verdict: s.score.verdict,
                    effective: s
                        .score
                        .effective
                        .into_iter()
                        .filter(|e| e.delta >= report::WHY_MIN_DELTA)
                        .take(opts.why)
                        .collect(),
                    group: s.group,
                    why: Vec::new(),
                    annotated: None,
                })
                .collect();
            opts.inc();
            Ok(ProcessRanking {
                light,
                heavy: scored,
                units: pu,
                unmatched: gi.is_none(),
            })
        })
        .collect();
    opts.finish();
    let mut rep = Report {
        processes: procs.len(),
        groups: model.groups.len(),
        ..Default::default()
    };
    let total: usize = per
        .iter()
        .flatten()
        .map(|p| p.light.len() + p.heavy.len())
        .sum();
    rep.units.reserve_exact(total);
    let mut heavy = Vec::new();
    let mut books = Vec::new();
    for r in per {
        let pr = r?;
        rep.units.extend(pr.light);
        heavy.extend(pr.heavy);
        rep.stats += pr.units.stats;
        rep.unmatched_processes += pr.unmatched as usize;
        books.push(pr.units.names);
    }
    let mut names = model.names.clone();
    let book_refs: Vec<&NameBook> = books.iter().collect();
    for (k, v) in merge_names(&book_refs) {
        names.entry(k).or_insert(v);
    }
    heavy.sort_by(|a, b| {
        b.score
            .score
            .total_cmp(&a.score.score)
            .then(
                a.unit
                    .info
                    .t_start_unix_ns
                    .cmp(&b.unit.info.t_start_unix_ns),
            )
            .then(a.unit.info.id.cmp(&b.unit.info.id))
    });
    for (i, s) in heavy.into_iter().enumerate() {
        let annotated = (i < opts.trees_kept).then(|| {
            let m = s
                .group
                .and_then(|g| model.groups[g].class(&score::class_of(&s.unit)));
            report::annotate(&s.unit.tree, m, &s.score.effective, &names, opts.tree_lines)
        });
        rep.units.push(RankedUnit {
            info: s.unit.info,
            score: s.score.score,
            verdict: s.score.verdict,
            effective: s
                .score
                .effective
                .into_iter()
                .take(opts.effective_kept)
                .collect(),
            group: s.group,
            why: Vec::new(),
            annotated,
        });
    }
    rep.units.sort_by(|a, b| rank_key(a).cmp(&rank_key(b)));
    rep.names = names;
    rep.why_sentences = opts.why;
    let n = rep.units.len().min(opts.why_units);
    for i in 0..n {
        let w = rep.why_of(&rep.units[i]);
        rep.units[i].why = w;
    }
    Ok(rep)
}

/// One unit next to its model, for `culprit show`.
#[derive(Clone, Debug)]
pub struct Shown {
    /// The unit, ranked alone.
    pub unit: RankedUnit,
    /// The annotated tree (all lines up to [`Options::tree_lines`]).
    pub lines: Vec<report::TreeLine>,
}

/// Finds unit `id` (`host:pid:tid:index`, as `culprit rank` prints it) and lays its tree
/// next to its model.
pub fn show(model: &Model, set: &TraceSet, id: &str, opts: &Options) -> Result<Shown> {
    let mut parts = id.rsplitn(4, ':');
    let (_idx, tid, pid, host) = (parts.next(), parts.next(), parts.next(), parts.next());
    let (Some(host), Some(pid)) = (host, pid.and_then(|p| p.parse::<u32>().ok())) else {
        return Err(Error::NoSuchUnit(id.to_string()));
    };
    let _ = tid;
    let procs = sorted_processes(std::slice::from_ref(set));
    let i = procs
        .iter()
        .position(|p| p.host == host && p.pid == pid)
        .ok_or_else(|| Error::NoSuchUnit(id.to_string()))?;
    let scans = scan_all(&procs, opts)?;
    let pu = units::split_process(procs[i], &scans[i], &model.options)?;
    let gi = model.group_index(&pu.signature);
    let g = gi.map(|i| &model.groups[i]);
    let u = pu
        .units
        .iter()
        .find(|u| u.info.id == id)
        .ok_or_else(|| Error::NoSuchUnit(id.to_string()))?;
    let mut names = model.names.clone();
    for (k, v) in merge_names(&[&pu.names]) {
        names.entry(k).or_insert(v);
    }
    let s = score::score_unit(u, g);
    let m = g.and_then(|g| g.class(&score::class_of(u)));
    let lines = report::annotate(&u.tree, m, &s.effective, &names, opts.tree_lines);
    let why = report::why(&s, &names, opts.why);
    Ok(Shown {
        unit: RankedUnit {
            info: u.info.clone(),
            score: s.score,
            verdict: s.verdict,
            effective: s.effective,
            group: gi,
            why,
            annotated: Some(lines.clone()),
        },
        lines,
    })
}
