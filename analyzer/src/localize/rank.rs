//! `rank`: every unit of a (faulty) run scored against the model (§6), kept as compact
//! rows, the highest-ranked made whole.

use super::options::Options;
use super::pipeline::{merge_names, scan_and_split_some, sorted_processes};
use super::{consequence, durations, ending, evidence, ranking, sizes, weigh};
use crate::decode::TraceSet;
use crate::error::Result;
use crate::model::Model;
use crate::report::{self, ConnRow, Report, Row};
use crate::trees::{self};
use crate::units::{self, NameBook};
use crate::{hash, model, score};

/// A process's scored units, compact; the best also kept whole (trees) for annotation.
pub(crate) struct ProcessRanking {
    pub rows: Vec<Row>,
    /// Verdicts and effective nodes the rows share (`Row::shared`, local to the process).
    pub shared: Vec<report::SharedScore>,
    /// Lost entries and injected faults of the rows that have any.
    pub extras: Vec<(u32, report::RowExtra)>,
    pub group: Option<u32>,
    /// Connections the rows refer to (indices local to the process).
    pub conns: Vec<ConnRow>,
    pub heavy: Vec<Heavy>,
    /// Counts of both passes.
    pub stats: crate::decode::DecodeStats,
    /// Names of key parts, resolved (in key order) or still to resolve.
    pub names: ProcessNames,
    pub unmatched: bool,
    /// How its group's normal processes ended ([`super::ending`]).
    pub ending: Option<super::ending::EndingModel>,
}

/// The names of key parts a process's units use.
pub(crate) enum ProcessNames {
    /// As the process's units found them (C addresses resolved when the ranking is made).
    Book(units::NameBook),
    /// Resolved (by the shard that ranked the process).
    Resolved(std::collections::BTreeMap<u64, String>),
}

/// A unit among its process's best, kept with its tree (or, read from a shard's part
/// file, with its tree already annotated: [`super::partial`]).
pub(crate) struct Heavy {
    /// Index of its row in its process's rows.
    pub row: usize,
    pub lines: HeavyLines,
    pub score: score::UnitScore,
}

/// A kept unit's tree, to annotate if it is among the first `trees_kept`.
pub(crate) enum HeavyLines {
    /// The tree and its class, annotated against the model when needed.
    Tree(trees::CallTree, model::UnitClass),
    /// Annotated already (by the shard that ranked its process), its names in its part
    /// file's table: made whole only if listed.
    Interned(super::interned::InternedLines),
}

/// Scores of distinct trees a process's ranker keeps for reuse.
const SCORE_CACHE_MAX: usize = 1 << 16;

/// A score shared by the units of equal trees.
#[derive(Clone, Copy)]
struct CachedScore {
    score: f64,
    /// The paper's score of the tree and its number of effective nodes (what an odd send
    /// adds to, [`sizes::odd_score`]).
    paper: f64,
    effective: u32,
    /// Index of its verdict and light effective nodes in [`Ranker::shared`].
    shared: u32,
    /// The model that scored it: its class's, or the same class's on the other thread kind
    /// ([`Ranker::sibling`]).
    model: ClassModel,
}

/// A process's group in the model, as far as its ranker knows it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum GroupMatch {
    /// Not known yet: the process's signature is not final.
    Pending,
    /// No group of the model has the process's signature.
    Unmatched,
    /// Index in [`Model::groups`].
    Group(usize),
}

impl GroupMatch {
    fn of(group: Option<usize>) -> GroupMatch {
        group.map_or(GroupMatch::Unmatched, GroupMatch::Group)
    }

    fn index(self) -> Option<usize> {
        match self {
            GroupMatch::Group(i) => Some(i),
            GroupMatch::Pending | GroupMatch::Unmatched => None,
        }
    }
}

/// The model a unit's class is scored against, in its process's group.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum ClassModel {
    /// The process matched no group.
    NoGroup,
    /// The group has no model of this class.
    NoModel,
    /// Index in the group's classes.
    Model(usize),
}

/// What makes two units' scores equal: the model they are scored against, their tree's
/// node set ([`TreeBuf::fingerprint`](crate::trees::TreeBuf::fingerprint)), and whether the
/// trace ended inside them.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct ScoreKey {
    class: ClassModel,
    tree: (u64, u64),
    cut: bool,
}

/// What a unit among its process's best keeps until the ranking is known.
struct Candidate {
    tree: trees::CallTree,
    class: model::UnitClass,
    cut: bool,
}

/// Scores one process's units as the splitter lends them, into compact rows.
struct Ranker<'a> {
    model: &'a Model,
    opts: &'a Options,
    pi: u32,
    /// The process's group in the model.
    group: GroupMatch,
    /// Scores of trees already seen (same class, same node set), with their light effective
    /// nodes. Scores with nodes new to the model are not cached: which library calls are
    /// listed under a new node depends on the order of the calls.
    cache: hash::FxMap<ScoreKey, CachedScore>,
    /// The model of each class key, and the same class's model on the other thread kind
    /// when the unit is also scored against it ([`sibling_of`]).
    class_idx: hash::FxMap<units::ClassKey, (ClassModel, Option<usize>)>,
    rows: Vec<Row>,
    shared: Vec<report::SharedScore>,
    extras: Vec<(u32, report::RowExtra)>,
    best: ranking::BestUnits<Candidate>,
    /// The duration rules of each class model used (by index in the group's classes).
    limits: Vec<Option<durations::ClassLimits>>,
    /// The size rules of each class model used (by index in the group's classes).
    size_rules: Vec<Option<sizes::ClassSizes>>,
}

impl Ranker<'_> {
    /// Gives a unit whose score a per-call rule raised to `raised` a shared score of its
    /// own (a row's score is its shared score's, which other units of its class share).
    fn raise(&mut self, shared: &mut u32, score: &mut f64, raised: f64) {
        if raised != *score {
            let mut own = self.shared[*shared as usize].clone();
            own.score = raised;
            self.shared.push(own);
            *shared = self.shared.len() as u32 - 1;
            *score = raised;
        }
    }

    fn unit(&mut self, u: &units::UnitView<'_>) {
        if u.head.cut_at_start {
            self.not_scored(u.head);
            return;
        }
        let g = self.group.index().map(|i| &self.model.groups[i]);
        let (class, sibling) = *self
            .class_idx
            .entry(u.class_key())
            .or_insert_with(|| match g {
                None => (ClassModel::NoGroup, None),
                // A class new to its thread kind (a handler of a connection that only worker
                // threads handled in normal runs, now on the main thread — which thread of a
                // pool takes a connection is scheduling): with the evidence score, the same
                // class on the other thread kind. The paper's score keeps "no model → 1".
                Some(g) => {
                    let class = u.class();
                    let find = |c: &units::UnitClass| g.classes.binary_search_by(|(k, _)| k.cmp(c));
                    let mut other = class.clone();
                    other.main_thread = !other.main_thread;
                    match find(&class) {
                        Ok(i) if self.opts.score == evidence::ScoreKind::Evidence => {
                            (ClassModel::Model(i), sibling_of(&class, find(&other).ok()))
                        }
                        Ok(i) => (ClassModel::Model(i), None),
                        Err(_) if self.opts.score == evidence::ScoreKind::Evidence => (
                            find(&other).map_or(ClassModel::NoModel, ClassModel::Model),
                            None,
                        ),
                        Err(_) => (ClassModel::NoModel, None),
                    }
                }
            });
        let key = ScoreKey {
            class,
            tree: u.tree.fingerprint(),
            cut: u.head.cut,
        };
        let per_unit = self.opts.score.per_unit();
        let cached = if per_unit {
            None
        } else {
            self.cache.get(&key).copied()
        };
        // TSC and key of the first call never seen in normal runs (units that may be roots).
        let mut first_new: Option<(u64, trees::NodeKey, u64)> = None;
        let mut waited = false;
        let CachedScore {
            score,
            paper,
            effective,
            shared,
            model: class,
        } = match cached {
            Some(c) => c,
            None => {
                let tree = u.tree.to_tree();
                let m = match (g, class) {
                    (Some(g), ClassModel::Model(i)) => Some(&g.classes[i].1),
                    _ => None,
                };
                let s = match (g, m) {
                    (Some(_), Some(m)) => score::score_tree_as(&tree, m, u.head.cut),
                    (Some(_), None) => score::unmodelled(&tree, score::Verdict::NoUnitModel),
                    (None, _) => score::unmodelled(&tree, score::Verdict::NoProcessGroup),
                };
                let facts = evidence::UnitFacts {
                    duration_ns: u.head.t_end_unix_ns - u.head.t_start_unix_ns,
                };
                let (paper, effective) = (s.score, s.effective.len() as u32);
                let mut s = evidence::rescore(self.opts.score, s, &tree, m, facts);
                if let (Some(g), None, evidence::ScoreKind::Evidence) = (g, m, self.opts.score) {
                    s.score = evidence::unseen_class(g.processes.len());
                }
                // Also against the same class on the other thread kind: the lesser counts.
                let (s, class, m, paper, effective) = match (g, sibling) {
                    (Some(g), Some(j)) if s.score > 0.0 => {
                        let o = &g.classes[j].1;
                        let t = score::score_tree_as(&tree, o, u.head.cut);
                        let (tp, te) = (t.score, t.effective.len() as u32);
                        let t = evidence::rescore(self.opts.score, t, &tree, Some(o), facts);
                        if t.score < s.score {
                            (t, ClassModel::Model(j), Some(o), tp, te)
                        } else {
                            (s, class, m, paper, effective)
                        }
                    }
                    _ => (s, class, m, paper, effective),
                };
                if self.opts.score.groups_consequences() && s.score >= consequence::ROOT_MIN {
                    first_new = s
                        .effective
                        .iter()
                        .filter(|e| e.class == score::NodeClass::New)
                        .filter_map(|e| {
                            tree.nodes
                                .get(&e.id)
                                .map(|n| (n.first_tsc, n.key, n.dur.ns()))
                        })
                        .min_by_key(|&(tsc, _, _)| tsc);
                    waited = first_new.is_some_and(|(t, _, _)| consequence::waited_by(&tree, t));
                }
                let light: Box<[score::Effective]> = s
                    .effective
                    .iter()
                    .filter(|e| e.delta >= report::WHY_MIN_DELTA)
                    .take(self.opts.why)
                    .cloned()
                    .collect();
                let c = CachedScore {
                    score: s.score,
                    paper,
                    effective,
                    shared: self.shared.len() as u32,
                    model: class,
                };
                self.shared.push(report::SharedScore {
                    score: s.score,
                    verdict: s.verdict,
                    effective: light,
                    model_units: m.map_or(0, |m| m.units),
                    run_added: 0.0,
                });
                let cacheable = !per_unit
                    && s.verdict == score::Verdict::Scored
                    && s.effective.iter().all(|e| e.class != score::NodeClass::New);
                if cacheable {
                    // Bounded: a program whose units rarely repeat loses only the sharing.
                    if self.cache.len() >= SCORE_CACHE_MAX {
                        self.cache.clear();
                    }
                    self.cache.insert(key, c);
                }
                c
            }
        };
        let h = u.head;
        // A call that lasted far beyond every normal one at its node (per unit: units of
        // equal trees differ in durations).
        let (mut score, mut shared) = (score, shared);
        let mut slow = None;
        let mut odd = None;
        if self.opts.score == evidence::ScoreKind::Evidence {
            if let (Some(g), ClassModel::Model(i)) = (g, class) {
                let slowest = u.tree.slowest_ns();
                if slowest > 0 {
                    if self.limits.len() <= i {
                        self.limits.resize_with(i + 1, || None);
                    }
                    let lim = self.limits[i]
                        .get_or_insert_with(|| durations::ClassLimits::of(&g.classes[i].1));
                    let found = lim.slowest(
                        slowest,
                        u.tree.nodes().iter().map(|(id, n)| (*id, n)),
                        |tsc| consequence::tsc_to_ns(tsc, h),
                    );
                    if let Some(s) = &found {
                        let raised = durations::slow_score(score, s);
                        self.raise(&mut shared, &mut score, raised);
                    }
                    slow = found.map(|s| s.call);
                }
                // A send of a size never sent at its node ([`sizes`]).
                if u.tree.sized() && self.shared[shared as usize].verdict == score::Verdict::Scored
                {
                    if self.size_rules.len() <= i {
                        self.size_rules.resize_with(i + 1, || None);
                    }
                    let rules = self.size_rules[i]
                        .get_or_insert_with(|| sizes::ClassSizes::of(&g.classes[i].1));
                    if !rules.is_empty() {
                        odd = rules.odd(u.tree.nodes().iter().map(|(id, n)| (*id, n)), |tsc| {
                            consequence::tsc_to_ns(tsc, h)
                        });
                    }
                    if let Some(o) = &odd {
                        let raised = sizes::odd_score(score, paper, effective as usize, o);
                        self.raise(&mut shared, &mut score, raised);
                    }
                }
            }
        }
        // A unit holding a call too long begins where that call began: the receive that
        // opens a handler unit returns when the stall ends, but the fault began when it was
        // entered — before the consequences (peers timing out) it is compared with.
        let t_start = unit_start(h.t_start_unix_ns, slow.as_ref());
        let key = (score, t_start, h.tid, h.index);
        let row = self.rows.len();
        // The class whose model scored the unit (another thread kind's, see `class_idx`).
        self.best.offer(key, row, || Candidate {
            tree: u.tree.to_tree(),
            class: match (g, class) {
                (Some(g), ClassModel::Model(i)) => g.classes[i].0.clone(),
                _ => u.class(),
            },
            cut: u.head.cut,
        });
        let anomaly_ns = first_new.map(|(tsc, _, _)| consequence::tsc_at(tsc, h));
        let anomaly_dur_ns = first_new.map_or(0, |(_, _, d)| d);
        let close = consequence::close_role(first_new.map(|(_, k, _)| k));
        let extra = h.lost > 0
            || !h.injections.is_empty()
            || anomaly_ns.is_some()
            || slow.is_some()
            || odd.is_some()
            || close.is_some();
        if extra {
            self.extras.push((
                row as u32,
                report::RowExtra {
                    lost: h.lost,
                    injections: h.injections.clone(),
                    anomaly_ns,
                    anomaly_dur_ns,
                    waited,
                    slow,
                    odd,
                    close,
                    ..Default::default()
                },
            ));
        }
        let flag = |on: bool, f: u8| if on { f } else { 0 };
        self.rows.push(Row {
            score,
            t_start_unix_ns: t_start,
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
            incident: 0,
        });
    }
}

impl Ranker<'_> {
    /// A unit whose beginning a flight recorder rotated away: a row of score 0 and verdict
    /// [`score::Verdict::BeganBeforeWindow`], never among the best (nothing of it is
    /// compared with the model: its first calls are missing, not absent).
    fn not_scored(&mut self, h: &units::UnitHead) {
        let s = score::not_scored();
        self.shared.push(report::SharedScore {
            score: s.score,
            verdict: s.verdict,
            effective: Box::new([]),
            model_units: 0,
            run_added: 0.0,
        });
        let flag = |on: bool, f: u8| if on { f } else { 0 };
        let extra = h.lost > 0 || !h.injections.is_empty();
        if extra {
            self.extras.push((
                self.rows.len() as u32,
                report::RowExtra {
                    lost: h.lost,
                    injections: h.injections.clone(),
                    ..Default::default()
                },
            ));
        }
        self.rows.push(Row {
            score: s.score,
            t_start_unix_ns: h.t_start_unix_ns,
            t_end_unix_ns: h.t_end_unix_ns,
            tsc_start: h.tsc_start,
            tsc_end: h.tsc_end,
            proc_: self.pi,
            conn: h.conn,
            tid: h.tid,
            index: h.index,
            shared: self.shared.len() as u32 - 1,
            fd: h.fd.unwrap_or(0),
            kind: h.kind,
            flags: flag(h.main_thread, Row::MAIN_THREAD)
                | flag(h.cut, Row::CUT)
                | flag(h.fd.is_some(), Row::FD)
                | flag(extra, Row::EXTRA)
                | Row::CUT_AT_START,
            incident: 0,
        });
    }
}

/// The process group of a process with signature `sig` running executable `exe` started
/// with arguments `command`: the group of equal signature, else — with the evidence score —
/// the **nearest group of the same program** (the groups whose signature holds the
/// program's key): first by the command it was started with (the group one of whose
/// processes' commands begins with, then shares, the most of its arguments,
/// [`units::command_similarity`] — the program's own account of its role: `store --name 1`
/// is not `client --name 1`, however many set-up calls the interpreter's start-up gives
/// them in common), then by the share of the signature's elements (Jaccard; ties: the
/// first). A worker respawned after the fault, a client that reconnected, a forked copy
/// that set up one socket fewer: the same program in the same role, whose units are scored
/// against that role's models rather than all scoring 1 for want of a group. In a model
/// without commands (learned before they were kept) every group's command compares alike,
/// leaving the set-up calls to decide.
pub(crate) fn match_group(
    model: &Model,
    sig: &units::Signature,
    exe: &str,
    command: &[String],
    opts: &Options,
) -> Option<usize> {
    if let Some(i) = model.group_index(sig) {
        return Some(i);
    }
    if opts.score != evidence::ScoreKind::Evidence || exe.is_empty() {
        return None;
    }
    let program = units::program_key(exe);
    let shared = |g: &units::Signature| {
        g.0.iter()
            .filter(|k| sig.0.binary_search(k).is_ok())
            .count()
    };
    // The best command similarity of a group's processes.
    let by_command = |g: &crate::model::GroupModel| {
        g.commands
            .iter()
            .map(|c| units::command_similarity(command, c))
            .max_by(|a, b| units::command_order(*a, *b))
            .unwrap_or([0, 0, 1])
    };
    model
        .groups
        .iter()
        .enumerate()
        .filter(|(_, g)| g.signature.0.contains(&program))
        .map(|(i, g)| {
            let common = shared(&g.signature);
            // Jaccard similarity, compared exactly as common / union.
            let union = g.signature.0.len() + sig.0.len() - common;
            (i, by_command(g), common, union.max(1))
        })
        .max_by(|a, b| {
            units::command_order(a.1, b.1)
                .then((a.2 * b.3).cmp(&(b.2 * a.3)))
                .then(b.0.cmp(&a.0))
        })
        .map(|(i, _, _, _)| i)
}

/// When a unit that started at `t_start` (ns) begins in the ranking: where its call too
/// long ([`durations::SlowCall::began_ns`]) began, if that is earlier.
pub(crate) fn unit_start(t_start: i64, slow: Option<&durations::SlowCall>) -> i64 {
    slow.map_or(t_start, |s| s.began_ns.min(t_start))
}

/// The same class on the other thread kind (`other`, its index in the group's classes, if
/// the group has it), when a unit of `class` is also scored against it with the evidence
/// score — the lesser score counts: units of the event loop (handlers, loop work). Threads
/// that run one event loop and share its descriptors (haproxy's, which share the listening
/// socket) handle a connection on whichever thread the scheduler wakes: a call that the
/// other threads make in the same role, on the same connection, is not a fault because this
/// thread had made it rarely or never in normal runs — a class the main thread met once per
/// normal run is learned from three units, and every call its thread-mates make that those
/// three did not is "never seen".
pub(crate) fn sibling_of<T>(class: &units::UnitClass, other: Option<T>) -> Option<T> {
    matches!(class.kind, units::UnitKind::Handler | units::UnitKind::Loop)
        .then_some(other)
        .flatten()
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
    let wanted = vec![true; procs.len()];
    let per = score_processes(model, &procs, &wanted, procs.len(), opts, |i| i)?;
    let ids = procs.iter().map(|p| (p.host.clone(), p.pid)).collect();
    Ok(assemble(
        model.groups.len(),
        normal_processes(model),
        &model.names,
        Some(model),
        ids,
        per.into_iter().flatten().collect(),
        opts,
    ))
}

/// Processes the model was learned from (what backs "no process group matches").
pub(crate) fn normal_processes(model: &Model) -> u64 {
    model.groups.iter().map(|g| g.processes.len() as u64).sum()
}

/// How many units of each process keep their trees, among `processes` in all.
pub(crate) fn trees_per_process(opts: &Options, processes: usize) -> usize {
    opts.trees_kept
        .min((opts.trees_kept * 4 / processes.max(1)).max(16))
}

/// Both passes over the processes `wanted` (by index in `procs`), each unit scored into
/// a compact row naming its process by `global(index)`, its index among the `total`
/// sorted processes of the whole run; the others are only scanned (what forked children
/// inherit) and give `None`.
pub(crate) fn score_processes(
    model: &Model,
    procs: &[&crate::decode::ProcessTrace],
    wanted: &[bool],
    total: usize,
    opts: &Options,
    global: impl Fn(usize) -> usize + Sync,
) -> Result<Vec<Option<ProcessRanking>>> {
    let keep = trees_per_process(opts, total);
    scan_and_split_some(procs, wanted, opts, "scoring units", |pi, p, scan| {
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
            pi: global(pi) as u32,
            group: GroupMatch::Pending,
            cache: Default::default(),
            class_idx: Default::default(),
            rows: Vec::with_capacity(bound),
            shared: Vec::new(),
            extras: Vec::new(),
            best: ranking::BestUnits::new(keep),
            limits: Default::default(),
            size_rules: Default::default(),
        };
        // A unit is scored against its process's group, known once the signature is
        // final (after the initializer of the process's last thread): units closed
        // before that wait, with their trees.
        let mut waiting: Vec<(units::UnitHead, trees::TreeBuf)> = Vec::new();
        let pu =
            units::split_process_each(p, scan, &model.options, |u| match (r.group, u.signature) {
                (GroupMatch::Group(_) | GroupMatch::Unmatched, _) => r.unit(&u),
                (GroupMatch::Pending, Some(sig)) => {
                    r.group =
                        GroupMatch::of(match_group(model, sig, &scan.exe, &scan.command, opts));
                    for (head, tree) in waiting.drain(..) {
                        r.unit(&units::UnitView {
                            head: &head,
                            tree: &tree,
                            ..u
                        });
                    }
                    r.unit(&u);
                }
                (GroupMatch::Pending, None) => waiting.push((u.head.clone(), u.tree.clone())),
            })?;
        if r.group == GroupMatch::Pending {
            r.group = GroupMatch::of(match_group(
                model,
                &pu.signature,
                &scan.exe,
                &scan.command,
                opts,
            ));
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
        let gi = r.group.index();
        let g = gi.map(|i| &model.groups[i]);
        // This process's best candidates keep their trees (and all their effective
        // nodes): enough for the global top `trees_kept` unless a few processes hold all
        // of it.
        let heavy = r
            .best
            .finish()
            .into_iter()
            .map(|(row, Candidate { tree, class, cut })| {
                let mc = g.and_then(|g| g.class(&class));
                let s = match (g, mc) {
                    (Some(_), Some(m)) => score::score_tree_as(&tree, m, cut),
                    (None, _) => score::unmodelled(&tree, score::Verdict::NoProcessGroup),
                    (Some(_), None) => score::unmodelled(&tree, score::Verdict::NoUnitModel),
                };
                Heavy {
                    row,
                    lines: HeavyLines::Tree(tree, class),
                    score: s,
                }
            })
            .collect();
        Ok(ProcessRanking {
            rows: r.rows,
            shared: r.shared,
            extras: r.extras,
            group: gi.map(|g| g as u32),
            conns: pu.conns,
            heavy,
            stats: pu.stats,
            names: ProcessNames::Book(pu.names),
            unmatched: gi.is_none(),
            ending: g.and_then(|g| g.ending.clone()),
        })
    })
}

/// The ranking of a whole run from every process's scored units (`per`, in the order of
/// `procs`, the host and pid of each): consequences filed, rows ordered, the first made
/// whole. `model` annotates the kept trees; without it (a merge of shards' part files,
/// whose trees came annotated) `groups` and `model_names` stand for it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn assemble(
    groups: usize,
    normal_processes: u64,
    model_names: &std::collections::BTreeMap<u64, String>,
    model: Option<&Model>,
    procs: Vec<(String, u32)>,
    per: Vec<ProcessRanking>,
    opts: &Options,
) -> Report {
    let mut rep = Report {
        processes: procs.len(),
        groups,
        ..Default::default()
    };
    rep.procs = procs;
    // Rows stay in their process's vector (never copied); the ranking is an order over
    // (process, index) pairs.
    let mut blocks: Vec<Vec<Row>> = Vec::with_capacity(per.len());
    let mut heavy = Vec::new();
    let mut books = Vec::new();
    let mut endings = Vec::with_capacity(per.len());
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
        rep.stats += pr.stats;
        rep.unmatched_processes += pr.unmatched as usize;
        books.push(pr.names);
        endings.push(pr.ending);
    }
    let mut names = model_names.clone();
    // The first process naming a key names it (as `merge_names` does over the books).
    let book_refs: Vec<&NameBook> = books
        .iter()
        .filter_map(|b| match b {
            ProcessNames::Book(b) => Some(b),
            ProcessNames::Resolved(_) => None,
        })
        .collect();
    let mut from_books = merge_names(&book_refs);
    for b in &books {
        if let ProcessNames::Resolved(r) = b {
            for (k, v) in r {
                from_books.entry(*k).or_insert_with(|| v.clone());
            }
        }
    }
    for (k, v) in from_books {
        names.entry(k).or_insert(v);
    }
    rep.score_kind = opts.score;
    if opts.score.groups_consequences() {
        // Evidence weighed over several units ([`weigh`]), then consequences filed.
        let mut filed = weigh::unmatched_processes(
            &mut blocks,
            &mut rep.shared,
            &rep.proc_groups,
            normal_processes,
        );
        filed.extend(weigh::persistent_runs(
            &mut blocks,
            &mut rep.shared,
            &rep.conns,
        ));
        weigh::first_occurrences(&mut blocks, &mut rep.shared, &rep.proc_groups);
        rep.caused_by = consequence::file_consequences(
            &mut blocks,
            &mut rep.shared,
            &rep.extras,
            &rep.procs,
            &rep.conns,
            opts.causes.as_deref(),
        );
        for (unit, root) in filed {
            rep.caused_by.entry(unit).or_insert(root);
        }
        let describe = |s: &report::SharedScore| {
            let e = s.effective.first()?;
            Some(format!("`{}`", report::node_name(&e.key, &names)))
        };
        ending::weigh_endings(
            &mut blocks,
            &mut rep.shared,
            &mut rep.extras,
            &rep.conns,
            &endings,
            &mut rep.caused_by,
            &describe,
        );
        weigh::count_incidents(&mut blocks, &rep.caused_by);
    }
    let ids = ranking::IdOrder::new(&rep.procs);
    heavy.sort_by(|(ra, _), (rb, _)| {
        ranking::cmp_rows(
            &blocks[ra.0 as usize][ra.1 as usize],
            &blocks[rb.0 as usize][rb.1 as usize],
            &rep.shared,
            &ids,
        )
    });
    for (i, (r, h)) in heavy.into_iter().enumerate() {
        let row = &mut blocks[r.0 as usize][r.1 as usize];
        row.flags |= Row::EXTRA;
        let x = rep.extras.entry(r).or_default();
        if i < opts.trees_kept {
            x.annotated = match h.lines {
                HeavyLines::Tree(tree, class) => {
                    let m = rep.proc_groups[row.proc_ as usize]
                        .and_then(|g| model.and_then(|m| m.groups.get(g as usize)?.class(&class)));
                    Some(report::annotate(
                        &tree,
                        m,
                        &h.score.effective,
                        &names,
                        opts.tree_lines,
                    ))
                }
                HeavyLines::Interned(lines) => Some(lines.expand()),
            };
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
    rep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unit_holding_a_slow_call_begins_where_the_call_began() {
        let slow = durations::SlowCall {
            key: crate::trees::NodeKey {
                kind: crate::trees::NodeKind::Lib,
                site: 1,
                callee: 2,
                outcome: crate::trees::Outcome::Ok,
            },
            dur_ns: 3_000_000_000,
            began_ns: 1_000,
            normal_max_ns: 300_000,
            normal_calls: 2400,
            normal_units: 634,
        };
        // The receive that opened the unit returned 3 s after it was entered.
        assert_eq!(unit_start(3_000_001_000, Some(&slow)), 1_000);
        assert_eq!(unit_start(500, Some(&slow)), 500);
        assert_eq!(unit_start(3_000_001_000, None), 3_000_001_000);
    }

    #[test]
    fn a_process_matching_no_group_goes_to_the_group_started_with_its_command() {
        // Two roles of one interpreter: the clients' group shares more set-up calls with
        // the faulty run's store (the interpreter's own) than the stores' group does.
        let python = units::program_key("/usr/bin/python3");
        let args = |role: &str, n: &str| -> Vec<String> {
            ["systems.py", role, "--name", n]
                .iter()
                .map(|s| s.to_string())
                .collect()
        };
        let group = |sig: Vec<u64>, commands: Vec<Vec<String>>| {
            let mut sig = sig;
            sig.push(python);
            sig.sort_unstable();
            crate::model::GroupModel {
                signature: units::Signature(sig),
                exes: vec!["/usr/bin/python3".into()],
                commands,
                ..Default::default()
            }
        };
        let mut model = Model::new(Default::default());
        model.add_group(&group(
            vec![1, 2, 3, 4, 5],
            vec![args("client", "1"), args("client", "2")],
        ));
        model.add_group(&group(vec![1, 2, 9], vec![args("store", "1")]));
        let mut sig = vec![python, 1, 2, 3, 4];
        sig.sort_unstable();
        let sig = units::Signature(sig);
        let opts = Options::default();
        let exe = "/usr/bin/python3";
        let store = model
            .groups
            .iter()
            .position(|g| g.commands[0][1] == "store");
        // Started as store 2: the stores' group, though it shares fewer set-up calls.
        assert_eq!(
            match_group(&model, &sig, exe, &args("store", "2"), &opts),
            store
        );
        // No command to go by (a model learned before commands were kept, or the same
        // command in both): the set-up calls decide, as before.
        let client = store.map(|s| 1 - s);
        assert_eq!(
            match_group(&model, &sig, exe, &args("client", "2"), &opts),
            client
        );
        let mut old = model.clone();
        for g in &mut old.groups {
            g.commands.clear();
        }
        assert_eq!(
            match_group(&old, &sig, exe, &args("store", "2"), &opts),
            client
        );
        // An exact signature is its group, whatever the command.
        let exact = model.groups[store.unwrap()].signature.clone();
        assert_eq!(
            match_group(&model, &exact, exe, &args("client", "1"), &opts),
            store
        );
    }

    #[test]
    fn compact_rows_stay_compact() {
        // A row per unit of the ranking: 164 504 of them in the benchmark's trial.
        assert_eq!(std::mem::size_of::<Row>(), 72);
    }
}
