//! Opening only some hosts of a run: what a shard of `culprit rank --shard K/N` needs.
//!
//! Every process of the run is **named** — host, pid, start time — from its trace
//! directory's manifest, which lists them (`reader::summary`, written when the recording
//! ended); only the directories of the hosts chosen from those names are **opened** (their
//! record headers indexed). A directory whose manifest is missing, damaged or not final
//! (`complete: false`, and not a snapshot) is opened to name its processes, as
//! [`TraceSet::open`] would. The clock of every recording is chosen from all the manifests
//! (`super::clock`), as one `TraceSet::open` over every directory chooses it, so the
//! processes opened are converted exactly alike.

use super::load::{host_of, open_dir, process_threads, TraceSet};
use super::outline::RunOutline;
use crate::error::{Error, Result};
use bufpool::Calibration;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

/// A process of a run, as its manifest names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcId {
    /// Host name (the directory's path when the recording names none).
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks.
    pub start_ticks: u64,
}

/// A run outlined ([`RunOutline`]) and some hosts' directories opened
/// ([`TraceSet::open_selected`], `crate::runindex::RunIndex::open_selected`).
#[derive(Debug, Default)]
pub struct Selected {
    /// The processes of the directories opened.
    pub set: TraceSet,
    /// Where each process of `set` is (by index in `set.processes`) in the order
    /// [`TraceSet::open`] lists the whole run's processes (directories in discovery order,
    /// then pid and start time).
    pub places: Vec<u64>,
    /// The whole run: its hosts in ranking order, its size and identity.
    pub outline: RunOutline,
    /// Of the trace directories found, opened.
    pub opened: usize,
}

impl Selected {
    /// Adds the opened directory `dir` (at `d`, converted by `calib`), whose first process
    /// is at `place` in the run's order.
    pub(super) fn add(
        &mut self,
        dir: &Arc<reader::TraceDir>,
        d: &std::path::Path,
        calib: Calibration,
        place: u64,
    ) {
        let before = self.set.processes.len();
        self.set.add_recording(dir, d, calib);
        let added = self.set.processes.len() - before;
        self.places.extend((0..added as u64).map(|k| place + k));
        self.opened += 1;
    }
}

enum Source {
    Named(Box<reader::Manifest>),
    Open(Arc<reader::TraceDir>),
}

impl Source {
    fn manifest(&self) -> &reader::Manifest {
        match self {
            Source::Named(m) => m,
            Source::Open(t) => t.manifest(),
        }
    }
}

/// Every trace directory under some roots, with what its manifest names: the run's
/// processes without opening their directories (but those whose manifest cannot name them).
pub(super) struct Named {
    /// The trace directories, in discovery order.
    pub found: Vec<PathBuf>,
    sources: Vec<Source>,
    /// Each directory's clock, chosen from all the manifests.
    pub clocks: Vec<Calibration>,
    /// Each directory's host.
    pub hosts: Vec<String>,
    /// Each directory's processes (pid, start time), sorted.
    pub ids: Vec<Vec<(u32, u64)>>,
}

impl Named {
    /// Finds the trace directories under `dirs` and names their processes.
    pub fn find(dirs: &[PathBuf], quiet: bool) -> Result<Named> {
        let found = super::discover::trace_dirs(dirs)?;
        let mut sources = Vec::with_capacity(found.len());
        for d in &found {
            sources.push(match reader::Manifest::read(d) {
                Ok(m) if m.complete || m.snapshot_unix_ns.is_some() => Source::Named(Box::new(m)),
                _ => Source::Open(Arc::new(open_dir(d, quiet)?)),
            });
        }
        let manifests: Vec<&reader::Manifest> = sources.iter().map(Source::manifest).collect();
        let clocks = super::clock::domain_calibrations(&manifests);
        let mut hosts = Vec::with_capacity(found.len());
        let mut ids = Vec::with_capacity(found.len());
        for (s, d) in sources.iter().zip(&found) {
            ids.push(match s {
                Source::Named(m) => {
                    let ids: BTreeSet<(u32, u64)> =
                        m.processes.iter().map(|p| (p.pid, p.start_ticks)).collect();
                    ids.into_iter().collect()
                }
                Source::Open(t) => process_threads(t, &Default::default())
                    .into_keys()
                    .collect(),
            });
            hosts.push(host_of(s.manifest(), d));
        }
        Ok(Named {
            found,
            sources,
            clocks,
            hosts,
            ids,
        })
    }
}

impl TraceSet {
    /// The processes of the set, named as a run names them, in the set's order.
    pub fn ids(&self) -> Vec<ProcId> {
        self.processes
            .iter()
            .map(|p| ProcId {
                host: p.host.clone(),
                pid: p.pid,
                start_ticks: p.start_ticks,
            })
            .collect()
    }

    /// Names every process under `dirs` from the manifests, outlines the run, and opens
    /// the directories of the hosts `choose` picks from the outline (see the [module
    /// docs](self)). A directory opened whose records hold other processes than its
    /// manifest lists is an error naming it (shards must agree on the run's processes).
    pub fn open_selected(
        dirs: &[PathBuf],
        quiet: bool,
        choose: impl FnOnce(&RunOutline) -> BTreeSet<String>,
    ) -> Result<Selected> {
        let named = Named::find(dirs, quiet)?;
        let mut all = Vec::new();
        for (host, ids) in named.hosts.iter().zip(&named.ids) {
            all.extend(ids.iter().map(|&(pid, start_ticks)| ProcId {
                host: host.clone(),
                pid,
                start_ticks,
            }));
        }
        let mut sel = Selected {
            outline: RunOutline::of(&all, named.found.len()),
            ..Default::default()
        };
        drop(all);
        let chosen = choose(&sel.outline);
        let mut place = 0;
        for i in 0..named.found.len() {
            let first = place;
            place += named.ids[i].len() as u64;
            if !chosen.contains(&named.hosts[i]) {
                continue;
            }
            let d = &named.found[i];
            let dir = match &named.sources[i] {
                Source::Open(t) => t.clone(),
                Source::Named(_) => Arc::new(open_dir(d, quiet)?),
            };
            let got: Vec<(u32, u64)> = process_threads(&dir, &Default::default())
                .into_keys()
                .collect();
            if got != named.ids[i] {
                return Err(Error::BadTrace {
                    path: d.clone(),
                    why: format!(
                        "its records hold {} processes, its manifest lists {} others: \
                         `culprit repair` it, or rank without --shard",
                        got.len(),
                        named.ids[i].len()
                    ),
                });
            }
            sel.add(&dir, d, named.clocks[i], first);
        }
        Ok(sel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_chosen_hosts_are_opened_and_every_process_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        crate::synth::write_task_tree(tmp.path(), 6, 3).unwrap();
        let root = vec![tmp.path().to_path_buf()];
        let whole = TraceSet::open(&root).unwrap();
        let sel = TraceSet::open_selected(&root, true, |o| {
            assert_eq!(o.total, 6);
            ["h1".to_string()].into_iter().collect()
        })
        .unwrap();
        let ids = TraceSet::ids;
        // Outlined as the whole run is; opened: h1's two directories only, each process
        // at its place in the order one open lists them.
        assert_eq!(sel.outline, RunOutline::of(&ids(&whole), 6));
        assert_eq!((sel.outline.recordings, sel.opened), (6, 2));
        let want: Vec<ProcId> = ids(&whole).into_iter().filter(|p| p.host == "h1").collect();
        assert_eq!(ids(&sel.set), want);
        for (p, &at) in sel.set.processes.iter().zip(&sel.places) {
            assert_eq!(whole.processes[at as usize].pid, p.pid);
        }
        // Converted alike.
        for p in &sel.set.processes {
            let q = whole.processes.iter().find(|q| q.pid == p.pid).unwrap();
            assert_eq!(p.calib, q.calib);
        }
        // A manifest that lists another process than the records hold: an error naming it.
        let d = tmp.path().join("h1/1.0.1");
        let mut m = reader::Manifest::read(&d).unwrap();
        m.processes[0].pid += 1000;
        m.write(&d).unwrap();
        let e = TraceSet::open_selected(&root, true, |_| ["h1".to_string()].into()).unwrap_err();
        assert!(e.to_string().contains("1.0.1"), "{e}");
    }
}
