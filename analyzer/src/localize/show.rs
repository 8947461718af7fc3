//! `show`: one unit next to its model, its tree annotated.

use super::options::Options;
use super::pipeline::{merge_names, scan_all, sorted_processes};
use super::{durations, evidence, narrative, sizes};
use crate::decode::TraceSet;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::report::{self, RankedUnit};
use crate::score;
use crate::units::{self};

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
    // The unit's class model; with the evidence score, for a class new to its thread kind,
    // the same class on the other thread kind (as the ranking does, `rank.rs`).
    let m = g.and_then(|g| {
        let class = score::class_of(u);
        g.class(&class).or_else(|| {
            (opts.score == evidence::ScoreKind::Evidence)
                .then(|| {
                    let mut other = class.clone();
                    other.main_thread = !other.main_thread;
                    g.class(&other)
                })
                .flatten()
        })
    });
    let s = match (g, m) {
        (None, _) => score::unmodelled(&u.tree, score::Verdict::NoProcessGroup),
        (Some(_), Some(m)) => score::score_tree_as(&u.tree, m, u.info.cut),
        (Some(_), None) => score::unmodelled(&u.tree, score::Verdict::NoUnitModel),
    };
    let facts = evidence::UnitFacts {
        duration_ns: u.info.t_end_unix_ns - u.info.t_start_unix_ns,
    };
    let (paper, effective) = (s.score, s.effective.len());
    let mut s = evidence::rescore(opts.score, s, &u.tree, m, facts);
    if let (Some(g), None, evidence::ScoreKind::Evidence) = (g, m, opts.score) {
        s.score = evidence::unseen_class(g.processes.len());
    }
    // A unit of the event loop is also scored against its class on the other thread kind;
    // the lesser counts (as the ranking does, `rank::sibling_of`).
    let sibling = g
        .filter(|_| opts.score == evidence::ScoreKind::Evidence)
        .and_then(|g| {
            let class = score::class_of(u);
            g.class(&class)?;
            let mut other = class.clone();
            other.main_thread = !other.main_thread;
            super::rank::sibling_of(&class, g.class(&other))
        });
    let (mut s, m, paper, effective) = match sibling {
        Some(o) if s.score > 0.0 => {
            let t = score::score_tree_as(&u.tree, o, u.info.cut);
            let (tp, te) = (t.score, t.effective.len());
            let t = evidence::rescore(opts.score, t, &u.tree, Some(o), facts);
            if t.score < s.score {
                (t, Some(o), tp, te)
            } else {
                (s, m, paper, effective)
            }
        }
        _ => (s, m, paper, effective),
    };
    let i = &u.info;
    let unix = |tsc: u64| {
        let span = i.tsc_end.saturating_sub(i.tsc_start);
        if span == 0 {
            return i.t_start_unix_ns;
        }
        let f = (tsc.saturating_sub(i.tsc_start) as f64 / span as f64).clamp(0.0, 1.0);
        i.t_start_unix_ns + (f * (i.t_end_unix_ns - i.t_start_unix_ns) as f64) as i64
    };
    // A call too long and a send of a size never sent there, as the ranking finds them
    // (`rank.rs`).
    let (slow, odd) = match m {
        Some(m) if opts.score == evidence::ScoreKind::Evidence => {
            let slowest = u.tree.nodes.values().map(|n| n.dur.ns()).max().unwrap_or(0);
            let nodes = || u.tree.nodes.iter().map(|(id, n)| (*id, n));
            let slow = durations::ClassLimits::of(m).slowest(slowest, nodes(), unix);
            let odd = (s.verdict == score::Verdict::Scored)
                .then(|| sizes::ClassSizes::of(m).odd(nodes(), unix))
                .flatten();
            (slow, odd)
        }
        _ => (None, None),
    };
    if let Some(x) = &slow {
        s.score = durations::slow_score(s.score, x);
    }
    let slow = slow.map(|x| x.call);
    if let Some(x) = &odd {
        s.score = sizes::odd_score(s.score, paper, effective, x);
    }
    let lines = report::annotate(&u.tree, m, &s.effective, &names, opts.tree_lines);
    let mut why = report::why(&s, &names, opts.why);
    // The same first line as the ranking's (`Report::why_of`): what happened, in words.
    let model_units = m.map_or(0, |m| m.units);
    if opts.score != evidence::ScoreKind::Paper && s.verdict == score::Verdict::Scored {
        if let Some(h) = narrative::headline(&s.effective, model_units, &names) {
            why.insert(0, h);
        }
    }
    if let Some(x) = &odd {
        why.insert(0, x.sentence(&names));
    }
    if let Some(x) = &slow {
        why.insert(0, x.sentence(&names));
    }
    Ok(Shown {
        unit: RankedUnit {
            info: u.info.clone(),
            score: s.score,
            verdict: s.verdict,
            effective: s.effective,
            group: gi,
            why,
            annotated: Some(lines.clone()),
            caused_by: None,
            model_units,
            slow,
            odd_size: odd,
            ending: None,
            incident: 0,
        },
        lines,
    })
}
