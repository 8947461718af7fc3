//! `learn`: process models from normal runs, merged into the global model (§4–5).

use super::ending;
use super::options::Options;
use super::pipeline::{merge_names, scan_and_split, sorted_processes};
use crate::decode::{DecodeStats, TraceSet};
use crate::error::Result;
use crate::model;
use crate::model::{GroupModel, Model};
use crate::units::{self, NameBook, ProcessUnits};

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

/// Learns a global model from normal runs: process models in parallel, then process groups
/// merged by mean probability (§4–5).
pub fn learn(sets: &[TraceSet], opts: &Options) -> Result<Learned> {
    let procs = sorted_processes(sets);
    let per_ok = scan_and_split(&procs, opts, "learning process models", |_, p, scan| {
        let mut b = model::ProcessModelBuilder::default();
        let mut end = ending::ProcessEnd::default();
        // A unit whose beginning a flight recorder rotated away is not what its class
        // looks like: it is not learned.
        let u = units::split_process_each(p, scan, &opts.tree, |u| {
            if !u.head.cut_at_start {
                b.add_view(&u);
            }
            end.starts.push(u.head.t_start_unix_ns);
            end.last_ns = end.last_ns.max(u.head.t_end_unix_ns);
            end.exited |= u.head.kind == units::UnitKind::Finalizer;
        })?;
        let m = b.finish(&u);
        Ok(LearnedProcess {
            model: m,
            units: u,
            end,
        })
    })?;
    let mut m = Model::new(opts.tree);
    let mut stats = DecodeStats::default();
    for lp in &per_ok {
        m.add_group(&lp.model);
    }
    // How the groups' processes ended, each against the rest of its run ([`ending`]): the
    // runs learned from are the sets given, each told apart by time (`culprit learn` reads
    // every directory given into one set).
    let set_of = |p: &crate::decode::ProcessTrace| {
        sets.iter()
            .position(|s| s.processes.iter().any(|q| std::ptr::eq(q, p)))
            .unwrap_or(0)
    };
    let mut ends: Vec<ending::ProcessEnd> = per_ok
        .iter()
        .zip(&procs)
        .filter_map(|(lp, p)| {
            Some(ending::ProcessEnd {
                set: set_of(p),
                group: m.group_index(&lp.model.signature)?,
                ..lp.end.clone()
            })
        })
        .collect();
    ending::assign_runs(&mut ends);
    let learned = ending::learn_endings(&ends, m.groups.len());
    for (g, e) in m.groups.iter_mut().zip(learned) {
        g.ending = (e.processes > 0).then_some(e);
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
    /// How it ended ([`ending::ProcessEnd`]; its run and group are set later).
    end: ending::ProcessEnd,
}
