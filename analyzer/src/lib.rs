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
mod ranking;
pub mod recorded;
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
use report::{ConnRow, RankedUnit, Report, Row};
use std::collections::BTreeMap;
use std::sync::Arc;
use symbolize::ElfResolver;
use trees::TreeOptions;
use units::{NameBook, NameSrc, ProcessUnits};

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
    /// Units of a ranking kept whole in [`Report::units`] (the highest-ranked); the others
    /// are kept compact (~170 bytes each) and made whole when listed ([`Report::iter`]).
    /// Default 1000.
    pub units_kept: usize,
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
            units_kept: 1000,
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

/// A process whose records come to at most this many bytes is read into memory once for
/// both passes; a larger one is read from disk, chunk by chunk, in each pass.
const LOAD_MAX_BYTES: u64 = 64 << 20;

/// Both passes over every process, in parallel: `split` gets each process (by its index in
/// `procs`) with its pass-1 scan, what forked children inherited included; the results
/// come back in the order of `procs`. A process that inherits nothing (most: only forked
/// children whose parent was traced do) is split as soon as its own pass 1 is done, from
/// its records read into memory once for both passes (up to [`LOAD_MAX_BYTES`]: one
/// process's trace per worker thread, never the whole set's); the others once every pass 1
/// is done, reading their records again.
fn scan_and_split<T: Send>(
    procs: &[&ProcessTrace],
    opts: &Options,
    stage: &str,
    split: impl Fn(usize, &ProcessTrace, &units::ProcessScan) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    opts.start(stage, procs.len());
    let first: Vec<Result<(units::ProcessScan, Option<T>)>> = procs
        .par_iter()
        .enumerate()
        .map(|(i, p)| {
            let loaded = p.load(LOAD_MAX_BYTES)?;
            let src = loaded.as_ref().unwrap_or(p);
            let scan = units::scan_process(src)?;
            if units::inherits(procs, i, &scan) {
                return Ok((scan, None));
            }
            let t = split(i, src, &scan)?;
            opts.inc();
            Ok((scan, Some(t)))
        })
        .collect();
    let mut scans = Vec::with_capacity(procs.len());
    let mut done = Vec::with_capacity(procs.len());
    for r in first {
        let (scan, t) = r?;
        scans.push(scan);
        done.push(t);
    }
    units::inherit(procs, &mut scans);
    let waiting: Vec<usize> = (0..procs.len()).filter(|&i| done[i].is_none()).collect();
    let later: Vec<Result<T>> = waiting
        .par_iter()
        .map(|&i| {
            let t = split(i, procs[i], &scans[i]);
            opts.inc();
            t
        })
        .collect();
    opts.finish();
    for (i, t) in waiting.into_iter().zip(later) {
        done[i] = Some(t?);
    }
    Ok(done.into_iter().flatten().collect())
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
    let per_ok = scan_and_split(&procs, opts, "learning process models", |_, p, scan| {
        let mut b = model::ProcessModelBuilder::default();
        let u = units::split_process_each(p, scan, &opts.tree, |u| b.add_view(&u))?;
        let m = b.finish(&u);
        Ok(LearnedProcess { model: m, units: u })
    })?;
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

/// A process's scored units, compact; the best also kept whole (trees) for annotation.
struct ProcessRanking {
    rows: Vec<Row>,
    /// Verdicts and effective nodes the rows share (`Row::shared`, local to the process).
    shared: Vec<report::SharedScore>,
    /// Lost entries and injected faults of the rows that have any.
    extras: Vec<(u32, report::RowExtra)>,
    group: Option<u32>,
    /// Connections the rows refer to (indices local to the process).
    conns: Vec<ConnRow>,
    heavy: Vec<Heavy>,
    units: ProcessUnits,
    unmatched: bool,
}

/// A unit among its process's best, kept with its tree.
struct Heavy {
    /// Index of its row in its process's rows.
    row: usize,
    tree: trees::CallTree,
    class: model::UnitClass,
    score: score::UnitScore,
}

/// Scores of distinct trees a process's ranker keeps for reuse.
const SCORE_CACHE_MAX: usize = 1 << 16;

/// A score shared by the units of equal trees: score, and the index of its verdict and
/// light effective nodes in [`Ranker::shared`].
type CachedScore = (f64, u32);

/// Scores one process's units as the splitter lends them, into compact rows.
struct Ranker<'a> {
    model: &'a Model,
    opts: &'a Options,
    pi: u32,
    /// The process's group in the model (`Some(None)`: no group matched), once known.
    group: Option<Option<usize>>,
    /// Scores of trees already seen (same class, same node set), with their light effective
    /// nodes. Scores with nodes new to the model are not cached: which library calls are
    /// listed under a new node depends on the order of the calls.
    cache: hash::FxMap<(usize, u64, u64, bool), CachedScore>,
    /// Index in the group's classes of each class key (`usize::MAX`: no group,
    /// `usize::MAX - 1`: no model of this class).
    class_idx: hash::FxMap<(units::UnitKind, bool, u32), usize>,
    rows: Vec<Row>,
    shared: Vec<report::SharedScore>,
    extras: Vec<(u32, report::RowExtra)>,
    best: ranking::BestUnits<(trees::CallTree, model::UnitClass, bool)>,
}

impl Ranker<'_> {
    fn unit(&mut self, u: &units::UnitView<'_>) {
        let gi = self.group.flatten();
        let g = gi.map(|i| &self.model.groups[i]);
        let ci = *self
            .class_idx
            .entry(u.class_key())
            .or_insert_with(|| match g {
                None => usize::MAX,
                Some(g) => {
                    let class = u.class();
                    g.classes
                        .binary_search_by(|(k, _)| k.cmp(&class))
                        .unwrap_or(usize::MAX - 1)
                }
            });
        let (fa, fb) = u.tree.fingerprint();
        let (score, shared) = match self.cache.get(&(ci, fa, fb, u.head.cut)) {
            Some(&c) => c,
            None => {
                let tree = u.tree.to_tree();
                let s = match g {
                    None => score::unmodelled(&tree, score::Verdict::NoProcessGroup),
                    Some(g) => match g.classes.get(ci) {
                        Some((_, m)) => score::score_tree_as(&tree, m, u.head.cut),
                        None => score::unmodelled(&tree, score::Verdict::NoUnitModel),
                    },
                };
                let light: Box<[score::Effective]> = s
                    .effective
                    .iter()
                    .filter(|e| e.delta >= report::WHY_MIN_DELTA)
                    .take(self.opts.why)
                    .cloned()
                    .collect();
                let c = (s.score, self.shared.len() as u32);
                self.shared.push(report::SharedScore {
                    score: s.score,
                    verdict: s.verdict,
                    effective: light,
                });
                let cacheable = s.verdict == score::Verdict::Scored
                    && s.effective.iter().all(|e| e.class != score::NodeClass::New);
                if cacheable {
                    // Bounded: a program whose units rarely repeat loses only the sharing.
                    if self.cache.len() >= SCORE_CACHE_MAX {
                        self.cache.clear();
                    }
                    self.cache.insert((ci, fa, fb, u.head.cut), c);
                }
                c
            }
        };
        let h = u.head;
        let key = (score, h.t_start_unix_ns, h.tid, h.index);
        let row = self.rows.len();
        self.best
            .offer(key, row, || (u.tree.to_tree(), u.class(), u.head.cut));
        let extra = h.lost > 0 || !h.injections.is_empty();
        if extra {
            self.extras.push((
                row as u32,
                report::RowExtra {
                    lost: h.lost,
                    injections: h.injections.clone(),
                    ..Default::default()
                },
            ));
        }
        let flag = |on: bool, f: u8| if on { f } else { 0 };
        self.rows.push(Row {
            score,
            t_start_unix_ns: h.t_start_unix_ns,
            t_end_unix_ns: h.t_end_unix_ns,
            tsc_start: h.tsc_start,
            tsc_end: h.tsc_end,
            proc_: self.pi,
            conn: h.conn,
            tid: h.tid,
            index: h.index,
            shared,
            fd: h.fd.unwrap_or(0),
            kind: h.kind,
            flags: flag(h.main_thread, Row::MAIN_THREAD)
                | flag(h.cut, Row::CUT)
                | flag(h.fd.is_some(), Row::FD)
                | flag(extra, Row::EXTRA),
        });
    }
}

/// Ranks the units of a (faulty) run by suspect score (§6). Deterministic: the result does
/// not depend on the number of threads.
///
/// Memory and time: each unit is scored as the splitter closes it (units closed before the
/// process's signature is final — before the initializer of its last thread closes — wait
/// with their trees), units of equal trees share one scoring, and only a compact row is kept
/// per unit (the effective nodes its *why* needs are shared by the units of equal trees);
/// trees are kept only for the candidates of each process's best units. The
/// first [`Options::units_kept`] units of the ranking are then made whole.
pub fn rank(model: &Model, set: &TraceSet, opts: &Options) -> Result<Report> {
    let procs = sorted_processes(std::slice::from_ref(set));
    let keep = opts
        .trees_kept
        .min((opts.trees_kept * 4 / procs.len().max(1)).max(16));
    let per = scan_and_split(&procs, opts, "scoring units", |pi, p, scan| {
        // Handler units start at socket receives and accepts (consecutive ones on one
        // descriptor make one unit): their count is a good guess of the rows (a few loop
        // units aside). Room reserved and not written costs no memory; rows moved by a
        // growing vector cost a copy each, a tenth of ranking's time.
        let bound = scan
            .threads
            .iter()
            .map(|t| t.receives as usize + 2)
            .sum::<usize>();
        let mut r = Ranker {
            model,
            opts,
            pi: pi as u32,
            group: None,
            cache: Default::default(),
            class_idx: Default::default(),
            rows: Vec::with_capacity(bound),
            shared: Vec::new(),
            extras: Vec::new(),
            best: ranking::BestUnits::new(keep),
        };
        // A unit is scored against its process's group, known once the signature is
        // final (after the initializer of the process's last thread): units closed
        // before that wait, with their trees.
        let mut waiting: Vec<(units::UnitHead, trees::TreeBuf)> = Vec::new();
        let pu = units::split_process_each(p, scan, &model.options, |u| {
            match (&r.group, u.signature) {
                (Some(_), _) => r.unit(&u),
                (None, Some(sig)) => {
                    r.group = Some(model.group_index(sig));
                    for (head, tree) in waiting.drain(..) {
                        r.unit(&units::UnitView {
                            head: &head,
                            tree: &tree,
                            ..u
                        });
                    }
                    r.unit(&u);
                }
                (None, None) => waiting.push((u.head.clone(), u.tree.clone())),
            }
        })?;
        if r.group.is_none() {
            r.group = Some(model.group_index(&pu.signature));
        }
        for (head, tree) in waiting.drain(..) {
            r.unit(&units::UnitView {
                host: &p.host,
                pid: p.pid,
                head: &head,
                tree: &tree,
                conns: &pu.conns,
                signature: None,
            });
        }
        let gi = r.group.flatten();
        let g = gi.map(|i| &model.groups[i]);
        // This process's best candidates keep their trees (and all their effective
        // nodes): enough for the global top `trees_kept` unless a few processes hold all
        // of it.
        let heavy = r
            .best
            .finish()
            .into_iter()
            .map(|(row, (tree, class, cut))| {
                let mc = g.and_then(|g| g.class(&class));
                let s = match (g, mc) {
                    (Some(_), Some(m)) => score::score_tree_as(&tree, m, cut),
                    (None, _) => score::unmodelled(&tree, score::Verdict::NoProcessGroup),
                    (Some(_), None) => score::unmodelled(&tree, score::Verdict::NoUnitModel),
                };
                Heavy {
                    row,
                    tree,
                    class,
                    score: s,
                }
            })
            .collect();
        let conns = pu.conns.clone();
        Ok(ProcessRanking {
            rows: r.rows,
            shared: r.shared,
            extras: r.extras,
            group: gi.map(|g| g as u32),
            conns,
            heavy,
            units: pu,
            unmatched: gi.is_none(),
        })
    })?;
    let mut rep = Report {
        processes: procs.len(),
        groups: model.groups.len(),
        ..Default::default()
    };
    rep.procs = procs.iter().map(|p| (p.host.clone(), p.pid)).collect();
    // Rows stay in their process's vector (never copied); the ranking is an order over
    // (process, index) pairs.
    let mut blocks: Vec<Vec<Row>> = Vec::with_capacity(per.len());
    let mut heavy = Vec::new();
    let mut books = Vec::new();
    for pr in per {
        let b = blocks.len() as u32;
        let (conn0, shared0) = (rep.conns.len() as u32, rep.shared.len() as u32);
        let mut rows = pr.rows;
        for r in &mut rows {
            r.conn += conn0;
            r.shared += shared0;
        }
        blocks.push(rows);
        rep.conns.extend(pr.conns);
        rep.shared.extend(pr.shared);
        rep.proc_groups.push(pr.group);
        rep.extras
            .extend(pr.extras.into_iter().map(|(i, x)| ((b, i), x)));
        heavy.extend(pr.heavy.into_iter().map(|h| ((b, h.row as u32), h)));
        rep.stats += pr.units.stats;
        rep.unmatched_processes += pr.unmatched as usize;
        books.push(pr.units.names);
    }
    let mut names = model.names.clone();
    let book_refs: Vec<&NameBook> = books.iter().collect();
    for (k, v) in merge_names(&book_refs) {
        names.entry(k).or_insert(v);
    }
    let ids = ranking::IdOrder::new(&rep.procs);
    heavy.sort_by(|(ra, _), (rb, _)| {
        ranking::cmp_rows(
            &blocks[ra.0 as usize][ra.1 as usize],
            &blocks[rb.0 as usize][rb.1 as usize],
            &ids,
        )
    });
    for (i, (r, h)) in heavy.into_iter().enumerate() {
        let row = &mut blocks[r.0 as usize][r.1 as usize];
        row.flags |= Row::EXTRA;
        let x = rep.extras.entry(r).or_default();
        if i < opts.trees_kept {
            let m = rep.proc_groups[row.proc_ as usize]
                .and_then(|g| model.groups[g as usize].class(&h.class));
            x.annotated = Some(report::annotate(
                &h.tree,
                m,
                &h.score.effective,
                &names,
                opts.tree_lines,
            ));
        }
        x.effective = Some(
            h.score
                .effective
                .into_iter()
                .take(opts.effective_kept)
                .collect(),
        );
    }
    // The highest-ranked units only: the order of the rest is made if they are listed.
    let order = ranking::ranking_order(&blocks, &rep.shared, &ids, opts.units_kept);
    drop(ids);
    rep.rest = blocks;
    rep.units = order.iter().map(|&r| rep.ranked(r)).collect();
    drop(order);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What a process's units are, comparably: each unit's info and its tree's nodes.
    fn units_of(u: &ProcessUnits) -> Vec<(units::UnitInfo, Vec<(u64, trees::TreeNode)>)> {
        u.units
            .iter()
            .map(|u| {
                let mut nodes: Vec<_> = u.tree.nodes.iter().map(|(k, n)| (*k, *n)).collect();
                nodes.sort_by_key(|n| n.0);
                (u.info.clone(), nodes)
            })
            .collect()
    }

    #[test]
    fn both_passes_read_a_process_once_and_forked_children_wait_for_their_parent() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("h");
        let (procs, _) = units::tests::parent_and_forked_child();
        decode::write_trace_dir(&dir, "h", &procs).unwrap();
        let set = TraceSet::open(&[dir]).unwrap();
        let procs = sorted_processes(std::slice::from_ref(&set));
        let opts = Options::default();
        let tree = TreeOptions::default();
        // Loading reads every record (none if they do not fit).
        assert!(procs[0].load(0).unwrap().is_none());
        let loaded = procs[0].load(LOAD_MAX_BYTES).unwrap().unwrap();
        assert!(matches!(
            loaded.threads[0].source,
            decode::ThreadSource::Loaded(_)
        ));
        // The reference: every pass 1, inheritance, then every pass 2, from disk.
        let scans = scan_all(&procs, &opts).unwrap();
        let want: Vec<_> = procs
            .iter()
            .zip(&scans)
            .map(|(p, s)| units_of(&units::split_process(p, s, &tree).unwrap()))
            .collect();
        let got = scan_and_split(&procs, &opts, "test", |i, p, s| {
            let memory = matches!(p.threads[0].source, decode::ThreadSource::Loaded(_));
            let u = units::split_process(p, s, &tree)?;
            Ok((units::inherits(&procs, i, s), memory, units_of(&u)))
        })
        .unwrap();
        // The parent is split from memory at once; the child, which inherits, later (from
        // disk) — and with what it inherited: its reads are handlers.
        assert_eq!((got[0].0, got[0].1), (false, true));
        assert_eq!((got[1].0, got[1].1), (true, false));
        let handlers = |u: &[(units::UnitInfo, _)]| {
            u.iter()
                .filter(|(i, _)| i.kind == units::UnitKind::Handler)
                .count()
        };
        assert_eq!(handlers(&got[1].2), 3);
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(&g.2, w);
        }
    }

    #[test]
    fn compact_rows_stay_compact() {
        // A row per unit of the ranking: 164 504 of them in the benchmark's trial.
        assert_eq!(std::mem::size_of::<Row>(), 72);
    }
}
