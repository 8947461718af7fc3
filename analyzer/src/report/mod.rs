//! Stage 8 — **report**: ranked units with where, when and *why*; text, JSON and HTML.
//!
//! A [`RankedUnit`] is a unit's [`UnitInfo`] (host, pid, tid, kind, connection addresses,
//! wall-clock start and end) with its [`UnitScore`] and the sentences that explain it: the
//! effective nodes that contributed most, e.g. "expected `recv_dict_msg` (p = 0.98) not
//! called" or "`close` never seen here". [`annotate`] lays a unit's tree next to its model
//! (probability and Δ per node) for `culprit show` and the HTML page.

mod heads;

pub use heads::UnitHead;

use crate::decode::DecodeStats;
use crate::model::TreeModel;
use crate::score::{Effective, NodeClass, UnitScore, Verdict};
use crate::trees::{CallTree, NodeKey, NodeKind, Outcome, ROOT};
use crate::units::UnitInfo;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One unit of the ranking.
#[derive(Clone, Debug)]
pub struct RankedUnit {
    /// Where and when.
    pub info: UnitInfo,
    /// Score, verdict and effective nodes (the largest contributions; at most
    /// [`crate::Options::effective_kept`]).
    pub score: f64,
    /// How the score was obtained.
    pub verdict: Verdict,
    /// Effective nodes, largest Δ first.
    pub effective: Vec<Effective>,
    /// Index of the process group in the model (None: no group matched).
    pub group: Option<usize>,
    /// Sentences explaining the score.
    pub why: Vec<String>,
    /// The unit's tree next to its model (kept for the top units only).
    pub annotated: Option<Vec<TreeLine>>,
    /// The id of the root unit this one was caused by ([`crate::consequence`]), if any.
    pub caused_by: Option<String>,
    /// Units the unit's model was learned from (0: no model).
    pub model_units: u64,
    /// Its call that lasted far beyond every normal one at its node, if any
    /// ([`crate::durations`]).
    pub slow: Option<crate::durations::SlowCall>,
    /// Its send of a size never sent at its node in normal runs, if any
    /// ([`crate::sizes`]).
    pub odd_size: Option<crate::sizes::OddSize>,
    /// For the root of an incident: the other processes whose units were filed under it
    /// ([`crate::consequence`], [`crate::weigh`]).
    pub incident: u16,
    /// For the last unit of a process that ended abnormally: how ([`crate::ending`]).
    pub ending: Option<crate::ending::Ending>,
}

/// What only a few compact units have.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct RowExtra {
    pub lost: u64,
    pub injections: Vec<crate::units::Injection>,
    /// All the effective nodes kept (the shared score has the light ones).
    pub effective: Option<Vec<Effective>>,
    pub annotated: Option<Vec<TreeLine>>,
    /// When the unit's first call never seen in normal runs was made (wall clock, ns), for
    /// units that may be the root of an incident ([`crate::consequence`]).
    pub anomaly_ns: Option<i64>,
    /// The longest that call took there (entry to return, ns): the call was entered no
    /// earlier than `anomaly_ns` minus this.
    #[serde(default)]
    pub anomaly_dur_ns: u64,
    /// Whether a wait of the unit (a multiplexer call) returned at or before its first
    /// call never seen in normal runs ([`crate::consequence::waited_by`]).
    pub waited: bool,
    /// Its call too long ([`crate::durations::ClassLimits::slowest`]), if any.
    pub slow: Option<crate::durations::SlowCall>,
    /// Its send of a size never sent there ([`crate::sizes::ClassSizes::odd`]), if any.
    pub odd: Option<crate::sizes::OddSize>,
    /// Whether its first anomaly closed its connection or saw the peer close it
    /// ([`crate::consequence::close_role`]).
    pub close: Option<crate::consequence::CloseRole>,
    /// Its process ended abnormally while it ran ([`crate::ending`]).
    #[serde(default)]
    pub ending: Option<crate::ending::Ending>,
}

pub(crate) use crate::localize::rows::{Row, RowRef, SharedScore};

/// A connection as the rows of a [`Report`] share it: identity, local and peer address.
pub(crate) use crate::units::ConnRow;

/// A ranking.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The highest-ranked units (at most [`crate::Options::units_kept`] of them), highest
    /// score first (ties: earliest first, then by id). The others follow in the same order,
    /// kept compact: [`Report::len`] counts all, [`Report::unit`] gives any.
    pub units: Vec<RankedUnit>,
    /// Compact units, one vector per process (in any order; see `rest_order`).
    pub(crate) rest: Vec<Vec<Row>>,
    /// Verdicts and effective nodes the rows share.
    pub(crate) shared: Vec<SharedScore>,
    /// What some rows have besides (see [`Row::EXTRA`]).
    pub(crate) extras: crate::hash::FxMap<RowRef, RowExtra>,
    /// The process group of each process (an index in the model; None: no group matched).
    pub(crate) proc_groups: Vec<Option<u32>>,
    /// The units after `units`, in ranking order, as positions in `rest`: made the first
    /// time a unit past `units` is asked for (listing every unit, as `--json` and `--html`
    /// do), so that a ranking read only for its highest units never sorts the others.
    pub(crate) rest_order: std::sync::OnceLock<Vec<RowRef>>,
    /// Host and pid of each process the rows refer to.
    pub(crate) procs: Vec<(String, u32)>,
    /// Connections the rows refer to.
    pub(crate) conns: Vec<ConnRow>,
    /// Processes analyzed.
    pub processes: usize,
    /// Processes whose signature matched no group.
    pub unmatched_processes: usize,
    /// Decoding counts.
    pub stats: DecodeStats,
    /// Number of process groups in the model (for colours).
    pub groups: usize,
    /// Names of key parts (model and traces).
    pub names: BTreeMap<u64, String>,
    /// Sentences of *why* per unit.
    pub why_sentences: usize,
    /// The score the units are ranked by.
    pub score_kind: crate::evidence::ScoreKind,
    /// The root of each consequence ([`crate::consequence`]).
    pub(crate) caused_by: crate::hash::FxMap<RowRef, RowRef>,
}

/// Names a node for people.
pub fn node_name(k: &NodeKey, names: &BTreeMap<u64, String>) -> String {
    let callee = names
        .get(&k.callee)
        .cloned()
        .unwrap_or_else(|| format!("#{:x}", k.callee));
    let callee = match k.kind {
        NodeKind::Exception => format!("raise {callee}"),
        _ => callee,
    };
    match k.outcome {
        Outcome::Any | Outcome::Ok => callee,
        o => format!("{callee} → {}", o.describe()),
    }
}

/// Names a node's call site.
pub fn site_name(k: &NodeKey, names: &BTreeMap<u64, String>) -> String {
    names
        .get(&k.site)
        .cloned()
        .unwrap_or_else(|| format!("#{:x}", k.site))
}

/// The sentence for one effective node.
pub fn explain(e: &Effective, names: &BTreeMap<u64, String>) -> String {
    let n = node_name(&e.key, names);
    let below = if e.below.is_empty() {
        String::new()
    } else {
        let calls: Vec<String> = e
            .below
            .iter()
            .map(|k| format!("`{}`", node_name(k, names)))
            .collect();
        let how = if e.class == NodeClass::New {
            "it calls"
        } else {
            "nor, under it,"
        };
        format!("; {how} {}", calls.join(", "))
    };
    match e.class {
        NodeClass::New => format!(
            "`{n}` never seen here (called from {}){below}",
            site_name(&e.key, names)
        ),
        NodeClass::Missing => format!(
            "expected `{n}` (p = {:.2}) not called{below}",
            e.p.unwrap_or(0.0)
        ),
        NodeClass::Common => format!(
            "`{n}` called, seen in only {:.1}% of normal units",
            e.p.unwrap_or(0.0) * 100.0
        ),
    }
}

/// Most units plotted in the HTML page (the highest-ranked).
pub const HTML_UNITS: usize = 20_000;

/// Effective nodes contributing less than this are not worth a sentence.
pub const WHY_MIN_DELTA: f64 = 0.005;

/// The sentences explaining a score: the verdict, then up to `n` effective nodes with Δ > 0.
pub fn why(s: &UnitScore, names: &BTreeMap<u64, String>, n: usize) -> Vec<String> {
    let mut out = match s.verdict {
        Verdict::NoProcessGroup => vec![
            "no process group of the model has this process's signature (its program and its bind/connect/listen/accept stacks)"
                .to_string(),
        ],
        Verdict::NoUnitModel => {
            vec!["no model for this unit: units of this kind on this connection never occurred in normal runs".to_string()]
        }
        Verdict::BeganBeforeWindow => vec![
            "began before the trace's window (a flight recorder rotated its beginning away): not scored"
                .to_string(),
        ],
        Verdict::Scored => Vec::new(),
    };
    out.extend(
        s.effective
            .iter()
            .filter(|e| e.delta >= WHY_MIN_DELTA)
            .take(n)
            .map(|e| explain(e, names)),
    );
    out
}

/// One line of an annotated tree.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TreeLine {
    /// Depth (0 = child of the root).
    pub depth: usize,
    /// Node name.
    pub name: String,
    /// Call site name.
    pub site: String,
    /// In the unit?
    pub in_unit: bool,
    /// Model probability (None: not in the model).
    pub p: Option<f64>,
    /// Δ of the node if it is effective.
    pub delta: Option<f64>,
    /// Calls in the unit.
    pub calls: u32,
}

/// The union of a unit's tree and its model, depth first, with Δ of effective nodes.
/// At most `limit` lines.
pub fn annotate(
    t: &CallTree,
    m: Option<&TreeModel>,
    eff: &[Effective],
    names: &BTreeMap<u64, String>,
    limit: usize,
) -> Vec<TreeLine> {
    let mut children: BTreeMap<u64, Vec<(NodeKey, u64)>> = BTreeMap::new();
    for (&id, n) in &t.nodes {
        children.entry(n.parent).or_default().push((n.key, id));
    }
    if let Some(m) = m {
        for n in &m.nodes {
            if !t.nodes.contains_key(&n.id) {
                children.entry(n.parent).or_default().push((n.key, n.id));
            }
        }
    }
    let delta: BTreeMap<u64, f64> = eff.iter().map(|e| (e.id, e.delta)).collect();
    let mut out = Vec::new();
    let mut stack = vec![(ROOT, 0usize)];
    while let Some((id, depth)) = stack.pop() {
        if id != ROOT {
            if out.len() >= limit {
                break;
            }
            let tn = t.nodes.get(&id);
            let mn = m.and_then(|m| m.get(id));
            let key = tn.map(|n| n.key).or(mn.map(|n| n.key));
            if let Some(key) = key {
                out.push(TreeLine {
                    depth: depth - 1,
                    name: node_name(&key, names),
                    site: site_name(&key, names),
                    in_unit: tn.is_some(),
                    p: mn.map(|n| n.p()),
                    delta: delta.get(&id).copied(),
                    calls: tn.map_or(0, |n| n.tally.calls()),
                });
            }
        }
        if let Some(ch) = children.get_mut(&id) {
            ch.sort();
            for &(_, c) in ch.iter().rev() {
                stack.push((c, depth + 1));
            }
        }
    }
    out
}

/// Text form of an annotated tree.
pub fn tree_text(lines: &[TreeLine]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<6} {:>6} {:>6}  call tree (unit ∪ model)",
        "unit", "p", "Δ"
    );
    for l in lines {
        let p = l.p.map_or("-".to_string(), |p| format!("{p:.2}"));
        let d = l.delta.map_or("".to_string(), |d| format!("{d:.2}"));
        let mark = if l.in_unit {
            format!("×{}", l.calls)
        } else {
            "·".into()
        };
        let _ = writeln!(
            s,
            "{:<6} {:>6} {:>6}  {}{}  [{}]",
            mark,
            p,
            d,
            "  ".repeat(l.depth),
            l.name,
            l.site
        );
    }
    s
}

fn fmt_time(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let frac = ns.rem_euclid(1_000_000_000) / 1000;
    let day = secs.rem_euclid(86_400);
    format!(
        "{:02}:{:02}:{:02}.{:06}",
        day / 3600,
        day / 60 % 60,
        day % 60,
        frac
    )
}

impl RankedUnit {
    /// The JSON object of `culprit rank --json`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "id": self.info.id,
            "score": self.score,
            "verdict": self.verdict,
            "host": self.info.host,
            "pid": self.info.pid,
            "tid": self.info.tid,
            "kind": self.info.kind.name(),
            "fd": self.info.fd,
            "local": self.info.local,
            "peer": self.info.peer,
            "t_start_unix_ns": self.info.t_start_unix_ns,
            "t_end_unix_ns": self.info.t_end_unix_ns,
            "duration_ns": self.info.t_end_unix_ns - self.info.t_start_unix_ns,
            "group": self.group,
            "why": self.why,
            "lost": self.info.lost,
            "cut": self.info.cut,
            "cut_at_start": self.info.cut_at_start,
            "injections": self.info.injections,
            "support": self.model_units,
            "incident": self.incident,
        });
        if let Some(c) = &self.caused_by {
            v["caused_by"] = serde_json::Value::String(c.clone());
        }
        v
    }
}

impl Report {
    /// The full form of the compact unit at `r` in `rest`.
    pub(crate) fn ranked(&self, r: RowRef) -> RankedUnit {
        let row = &self.rest[r.0 as usize][r.1 as usize];
        let (host, pid) = &self.procs[row.proc_ as usize];
        let (conn, local, peer) = &self.conns[row.conn as usize];
        let SharedScore {
            verdict,
            effective,
            model_units,
            ..
        } = &self.shared[row.shared as usize];
        let extra = (row.flags & Row::EXTRA != 0)
            .then(|| self.extras.get(&r))
            .flatten();
        RankedUnit {
            info: UnitInfo {
                id: crate::units::unit_id(host, *pid, row.tid, row.index),
                host: host.clone(),
                pid: *pid,
                tid: row.tid,
                main_thread: row.flags & Row::MAIN_THREAD != 0,
                index: row.index,
                kind: row.kind,
                fd: (row.flags & Row::FD != 0).then_some(row.fd),
                conn: conn.clone(),
                local: local.clone(),
                peer: peer.clone(),
                tsc_start: row.tsc_start,
                tsc_end: row.tsc_end,
                t_start_unix_ns: row.t_start_unix_ns,
                t_end_unix_ns: row.t_end_unix_ns,
                lost: extra.map_or(0, |x| x.lost),
                injections: extra.map(|x| x.injections.clone()).unwrap_or_default(),
                cut: row.flags & Row::CUT != 0,
                cut_at_start: row.flags & Row::CUT_AT_START != 0,
            },
            score: row.score,
            verdict: *verdict,
            effective: extra
                .and_then(|x| x.effective.clone())
                .unwrap_or_else(|| effective.to_vec()),
            group: self.proc_groups[row.proc_ as usize].map(|g| g as usize),
            why: Vec::new(),
            annotated: extra.and_then(|x| x.annotated.clone()),
            caused_by: self.caused_by.get(&r).map(|c| {
                let root = &self.rest[c.0 as usize][c.1 as usize];
                let (host, pid) = &self.procs[root.proc_ as usize];
                crate::units::unit_id(host, *pid, root.tid, root.index)
            }),
            model_units: *model_units,
            slow: extra.and_then(|x| x.slow.clone()),
            odd_size: extra.and_then(|x| x.odd.clone()),
            incident: row.incident,
            ending: extra.and_then(|x| x.ending.clone()),
        }
    }
}

impl Report {
    /// Number of ranked units (those in [`Report::units`] and the compact rest).
    pub fn len(&self) -> usize {
        let rows: usize = self.rest.iter().map(Vec::len).sum();
        rows.max(self.units.len())
    }

    /// The units after [`Report::units`] in ranking order (see `rest_order`).
    fn rest_order(&self) -> &[RowRef] {
        self.rest_order.get_or_init(|| {
            let ids = crate::ranking::IdOrder::new(&self.procs);
            let mut order =
                crate::ranking::ranking_order(&self.rest, &self.shared, &ids, usize::MAX);
            order.drain(..self.units.len().min(order.len()));
            order
        })
    }

    /// Units that began before their trace's window (a flight recorder rotated their
    /// beginning away): listed, not scored ([`Verdict::BeganBeforeWindow`]).
    pub fn cut_at_start(&self) -> usize {
        let rows = self
            .rest
            .iter()
            .flatten()
            .filter(|r| r.flags & Row::CUT_AT_START != 0)
            .count();
        if self.rest.iter().all(Vec::is_empty) {
            self.units.iter().filter(|u| u.info.cut_at_start).count()
        } else {
            rows
        }
    }

    /// True if no unit was ranked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th unit of the ranking (borrowed from [`Report::units`], or made from its
    /// compact form).
    pub fn unit(&self, i: usize) -> Option<std::borrow::Cow<'_, RankedUnit>> {
        use std::borrow::Cow;
        match self.units.get(i) {
            Some(u) => Some(Cow::Borrowed(u)),
            None => self
                .rest_order()
                .get(i - self.units.len())
                .map(|&r| Cow::Owned(self.ranked(r))),
        }
    }

    /// The units in ranking order (see [`Report::unit`]).
    pub fn iter(&self) -> impl Iterator<Item = std::borrow::Cow<'_, RankedUnit>> + '_ {
        (0..self.len()).filter_map(move |i| self.unit(i))
    }

    /// A unit's *why*: the sentences stored with it, or made now from its effective nodes.
    pub fn why_of(&self, u: &RankedUnit) -> Vec<String> {
        if !u.why.is_empty() {
            return u.why.clone();
        }
        let s = UnitScore {
            score: u.score,
            verdict: u.verdict,
            effective: u.effective.clone(),
        };
        let mut w = why(&s, &self.names, self.why_sentences.max(1));
        if self.score_kind != crate::evidence::ScoreKind::Paper && u.verdict == Verdict::Scored {
            if let Some(h) = crate::narrative::headline(&u.effective, u.model_units, &self.names) {
                w.insert(0, h);
            }
        }
        if let Some(odd) = &u.odd_size {
            w.insert(0, odd.sentence(&self.names));
        }
        if let Some(slow) = &u.slow {
            w.insert(0, slow.sentence(&self.names));
        }
        if let Some(e) = &u.ending {
            w.insert(0, e.sentence());
        }
        w
    }

    /// The JSON object of one unit (see [`RankedUnit::to_json`]), with its *why*.
    pub fn unit_json(&self, u: &RankedUnit) -> serde_json::Value {
        let mut v = u.to_json();
        if u.why.is_empty() {
            v["why"] = serde_json::to_value(self.why_of(u)).unwrap_or_default();
        }
        if let Some(slow) = &u.slow {
            v["slow_call"] = slow.to_json(&self.names);
        }
        if let Some(odd) = &u.odd_size {
            v["odd_size"] = odd.to_json(&self.names);
        }
        if let Some(e) = &u.ending {
            v["ending"] = e.to_json();
        }
        v
    }

    /// The text table of `culprit rank` (the first `top` units).
    pub fn text(&self, top: usize, mark_injections: bool) -> String {
        self.text_with(top, mark_injections, &|_| Vec::new())
    }

    /// [`Report::text`] with further lines under each unit, given by `notes` from the
    /// unit's id (`culprit rank` lists there where the unit's messages came from and went,
    /// [`crate::messages::links`]).
    pub fn text_with(
        &self,
        top: usize,
        mark_injections: bool,
        notes: &dyn Fn(&str) -> Vec<String>,
    ) -> String {
        self.text_labelled(top, mark_injections, notes, &|_, _| None)
    }

    /// [`Report::text_with`], each unit's process named by `label` from its host and pid
    /// (`culprit rank`: as it was started, with its ports, [`crate::procname`]).
    pub fn text_labelled(
        &self,
        top: usize,
        mark_injections: bool,
        notes: &dyn Fn(&str) -> Vec<String>,
        label: &dyn Fn(&str, u32) -> Option<String>,
    ) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} units from {} processes ({} entries; {} lost){}",
            self.len(),
            self.processes,
            self.stats.entries,
            self.stats.lost,
            if self.unmatched_processes > 0 {
                format!(
                    "; {} processes match no process group",
                    self.unmatched_processes
                )
            } else {
                String::new()
            }
        );
        let began_before = self.cut_at_start();
        if began_before > 0 {
            let _ = writeln!(
                s,
                "{began_before} units began before the trace's window (a flight recorder \
                 rotated their beginning away): listed with score 0, not scored"
            );
        }
        for u in self.iter().take(top) {
            let u = &*u;
            let i = &u.info;
            let conn = match (&i.local, &i.peer) {
                (None, None) => String::new(),
                (l, p) => format!(
                    " {} ⇄ {}",
                    l.as_deref().unwrap_or("?"),
                    p.as_deref().unwrap_or("?")
                ),
            };
            let caused = u
                .caused_by
                .as_deref()
                .map_or(String::new(), |c| format!("  ↳ caused by {c}"));
            let name = label(&i.host, i.pid).map_or(String::new(), |l| format!(" ({l})"));
            let _ = writeln!(
                s,
                "{:.3}  {}  {} pid {}{name} tid {}  {}{}{}  {} +{:.3} ms{caused}",
                u.score,
                i.id,
                i.host,
                i.pid,
                i.tid,
                i.kind.name(),
                i.fd.map_or(String::new(), |fd| format!(" fd {fd}")),
                conn,
                fmt_time(i.t_start_unix_ns),
                (i.t_end_unix_ns - i.t_start_unix_ns) as f64 / 1e6
            );
            for w in self.why_of(u) {
                let _ = writeln!(s, "        {w}");
            }
            for n in notes(&i.id) {
                let _ = writeln!(s, "        {n}");
            }
            if mark_injections {
                for inj in &i.injections {
                    let _ = writeln!(
                        s,
                        "        INJECTED: {} on fd {} returned {} (errno {}) — {}",
                        inj.func, inj.fd, inj.forced_ret, inj.forced_errno, inj.spec
                    );
                }
            }
        }
        s
    }

    /// The JSON array of `culprit rank --json` (the first `top` units).
    pub fn json(&self, top: usize) -> serde_json::Value {
        serde_json::Value::Array(self.iter().take(top).map(|u| self.unit_json(&u)).collect())
    }

    /// A self-contained HTML page: every unit's score against time (one colour per process
    /// group), each point opening that unit's annotated call tree. Inline SVG and a little
    /// script; no external assets.
    pub fn html(&self) -> String {
        self.html_labelled(&|_, _| None)
    }

    /// [`Report::html`], each unit's process named by `label` from its host and pid (the
    /// label `culprit rank` prints: [`crate::procname::ProcLabel::text`]) in its point's
    /// title and its details.
    pub fn html_labelled(&self, label: &dyn Fn(&str, u32) -> Option<String>) -> String {
        // The units are ranked: plotting the first HTML_UNITS keeps every interesting point
        // and the page small enough for a browser.
        let shown: Vec<std::borrow::Cow<'_, RankedUnit>> = self.iter().take(HTML_UNITS).collect();
        let palette = [
            "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
            "#bcbd22", "#7f7f7f",
        ];
        let (w, h, pad) = (960.0f64, 420.0f64, 50.0f64);
        let t0 = shown
            .iter()
            .map(|u| u.info.t_start_unix_ns)
            .min()
            .unwrap_or(0);
        let t1 = shown
            .iter()
            .map(|u| u.info.t_start_unix_ns)
            .max()
            .unwrap_or(1)
            .max(t0 + 1);
        let x = |t: i64| pad + (t - t0) as f64 / (t1 - t0) as f64 * (w - 2.0 * pad);
        let y = |s: f64| h - pad - s * (h - 2.0 * pad);
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" style="border:1px solid #ccc">"#
        );
        for k in 0..=4 {
            let s = k as f64 / 4.0;
            let _ = write!(
                svg,
                r##"<line x1="{pad}" x2="{}" y1="{y}" y2="{y}" stroke="#eee"/><text x="5" y="{}" font-size="11">{s:.2}</text>"##,
                w - pad,
                y(s) + 4.0,
                y = y(s)
            );
        }
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" font-size="11">time (s since first unit; span {:.3} s)</text>"#,
            w / 2.0 - 100.0,
            h - 10.0,
            (t1 - t0) as f64 / 1e9
        );
        // Draw low scores first so the interesting points are on top.
        for (i, u) in shown.iter().enumerate().rev() {
            let colour = match u.group {
                Some(g) => palette[g % palette.len()],
                None => "#000000",
            };
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="{}" fill="{}" fill-opacity="0.7" onclick="show({})"><title>{} {:.3} {}{}</title></circle>"#,
                x(u.info.t_start_unix_ns),
                y(u.score),
                if u.annotated.is_some() { 4.0 } else { 2.5 },
                colour,
                i,
                esc(&u.info.id),
                u.score,
                u.info.kind.name(),
                label(&u.info.host, u.info.pid)
                    .map_or(String::new(), |l| format!(" ({})", esc(&l)))
            );
        }
        svg.push_str("</svg>");
        let data: Vec<serde_json::Value> = shown
            .iter()
            .map(|u| {
                let mut v = self.unit_json(u);
                v["tree"] = serde_json::to_value(&u.annotated).unwrap_or_default();
                if let Some(l) = label(&u.info.host, u.info.pid) {
                    v["process"] = serde_json::Value::String(l);
                }
                v
            })
            .collect();
        let data = serde_json::to_string(&data)
            .unwrap_or_default()
            .replace("</", "<\\/");
        let mut legend = String::new();
        for (g, colour) in palette.iter().enumerate().take(self.groups) {
            let _ = write!(
                legend,
                r#"<span style="color:{colour}">● group {g}</span> "#
            );
        }
        legend.push_str(r#"<span>● no group</span>"#);
        format!(
            r#"<!doctype html><html><head><meta charset="utf-8"><title>Culprit — suspect scores</title>
<style>body{{font-family:sans-serif;margin:20px}} pre{{background:#f7f7f7;padding:8px;font-size:12px;overflow:auto}} .new{{color:#c00}} .missing{{color:#a60}} td{{padding:2px 8px}} a.go{{color:#06c;cursor:pointer;text-decoration:underline}}</style></head>
<body><h2>Suspect score of every execution unit against time</h2>
<p>{n} units, {p} processes{cut}. Click a point to see the unit's call tree next to its model. {legend}</p>
{svg}
<div id="detail"><p>Top unit shown below; click any point.</p></div>
<script>
const U = {data};
function esc(s) {{ return String(s).replace(/[&<>]/g, c => ({{'&':'&amp;','<':'&lt;','>':'&gt;'}})[c]); }}
function show(i) {{
  const u = U[i];
  let h = '<h3>' + esc(u.id) + ' — ' + u.kind + ' — score ' + u.score.toFixed(3) + '</h3>';
  h += '<table><tr><td>host</td><td>' + esc(u.host) + '</td></tr><tr><td>pid / tid</td><td>' + u.pid + ' / ' + u.tid + '</td></tr>';
  if (u.process) h += '<tr><td>process</td><td class="process">' + esc(u.process) + '</td></tr>';
  h += '<tr><td>fd</td><td>' + (u.fd ?? '') + '</td></tr><tr><td>local ⇄ peer</td><td>' + esc(u.local ?? '?') + ' ⇄ ' + esc(u.peer ?? '?') + '</td></tr>';
  h += '<tr><td>start</td><td>' + new Date(u.t_start_unix_ns / 1e6).toISOString() + ' (+' + (u.duration_ns / 1e6).toFixed(3) + ' ms)</td></tr></table>';
  if (u.caused_by) {{ const r = U.findIndex(v => v.id === u.caused_by); h += '<p class="caused">caused by ' + (r >= 0 ? '<a class="go" onclick="show(' + r + ')">' + esc(u.caused_by) + '</a>' : esc(u.caused_by)) + '</p>'; }}
  const cs = U.map((v, j) => [v, j]).filter(x => x[0].caused_by === u.id);
  if (cs.length) h += '<h4>consequences (' + cs.length + ')</h4><ul class="consequences">' + cs.slice(0, 50).map(x => '<li><a class="go" onclick="show(' + x[1] + ')">' + esc(x[0].id) + '</a> ' + x[0].kind + ' — ' + esc(x[0].why[0] ?? '') + '</li>').join('') + '</ul>';
  h += '<h4>why</h4><ul>' + u.why.map(w => '<li>' + esc(w) + '</li>').join('') + '</ul>';
  if (u.injections.length) h += '<h4>injected faults</h4><ul>' + u.injections.map(j => '<li>' + esc(j.func + ' fd ' + j.fd + ' → ' + j.forced_ret + ' (' + j.spec + ')') + '</li>').join('') + '</ul>';
  if (u.tree) {{
    h += '<h4>call tree (× calls in this unit, · only in the model; p = model probability, Δ = contribution)</h4><pre>';
    for (const l of u.tree) {{
      const cls = !l.in_unit ? 'missing' : (l.p === null ? 'new' : '');
      h += '<span class="' + cls + '">' + (l.in_unit ? ('×' + l.calls).padEnd(6) : '·     ') + (l.p === null ? '     -' : l.p.toFixed(2).padStart(6)) + ' ' + (l.delta === null ? '      ' : l.delta.toFixed(2).padStart(6)) + '  ' + '  '.repeat(l.depth) + esc(l.name) + '  [' + esc(l.site) + ']</span>\n';
    }}
    h += '</pre>';
  }} else {{ h += '<p>(call tree kept for the top units only; use <code>culprit show --unit ' + esc(u.id) + '</code>)</p>'; }}
  document.getElementById('detail').innerHTML = h;
}}
if (U.length) show(0);
</script></body></html>
"#,
            n = self.len(),
            p = self.processes,
            cut = if shown.len() < self.len() {
                format!(" (the {} highest-scoring are plotted)", shown.len())
            } else {
                String::new()
            },
        )
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trees::NodeKind;

    #[test]
    fn sentences() {
        let mut names = BTreeMap::new();
        names.insert(1, "mpd.recv_dict_msg (mpd.py:40)".to_string());
        names.insert(2, "close".to_string());
        names.insert(3, "mpd.handle+12".to_string());
        let k = |callee, outcome| NodeKey {
            kind: NodeKind::Py,
            site: 3,
            callee,
            outcome,
        };
        let e = |callee, class, p, delta| Effective {
            id: 9,
            parent: ROOT,
            key: k(callee, Outcome::Any),
            class,
            p,
            delta,
            below: Vec::new(),
        };
        assert_eq!(
            explain(&e(1, NodeClass::Missing, Some(0.98), 0.98), &names),
            "expected `mpd.recv_dict_msg (mpd.py:40)` (p = 0.98) not called"
        );
        assert_eq!(
            explain(&e(2, NodeClass::New, None, 1.0), &names),
            "`close` never seen here (called from mpd.handle+12)"
        );
        let mut short = e(2, NodeClass::New, None, 1.0);
        short.key.kind = NodeKind::Lib;
        short.key.outcome = Outcome::Errno(104);
        assert!(explain(&short, &names).starts_with("`close → errno ECONNRESET (104)` never"));
        assert_eq!(fmt_time(1_700_000_000_123_456_789), "22:13:20.123456");
    }
}
