//! **How a process ended** (issue 31, class 6): a process that dies of a signal or stops
//! (SIGKILL, SIGSTOP: a hang with no error anywhere) leaves no anomalous call in its own
//! trace — its trace just ends, inside its event loop, while the rest of the system goes
//! on. What tells it is the *ending*, weighed against how the same group's processes end
//! in normal runs, and what its peers met after it fell silent.
//!
//! - **Learned** ([`EndingModel`], per process group, `culprit learn`): how many normal
//!   processes of the group there were, how many of them ended still inside their event
//!   loop (no finalizer: no `exit` and no return from the loop — killed by a signal, as
//!   daemons SIGTERMed at the end of every run are), their units, and how early at most a
//!   normal process of the group fell silent: the **silent share**, the share of the rest
//!   of its run's units that started after its last event ([`silent_share`]), and the
//!   **silent time**, the share of the run's time after it ([`silent_time`]). A daemon
//!   stopped at the end of every run falls silent after nearly everything else (≈ 0); a
//!   name server consulted once at start-up falls silent early in every run (≈ 1): that
//!   is how it is, not evidence.
//! - **Ranked** (`weigh_endings`): a process of the trial whose trace ended inside its
//!   event loop (its last unit cut: no finalizer), silent for a share `s` of the others'
//!   units and `τ` of the run's time, beyond its group's normal `s₀` and `τ₀`, missed by
//!   the group's normal pace about `m = (units per normal process) · max(s − s₀, τ − τ₀)`
//!   units of its own (killed while the others work on, it shows in units; stopped while
//!   they wait for it, in time) while the others went on: its ending is evidence
//!   [`backing_f`]`(m)` ("never silent across `m` of its units
//!   in normal runs", as a node never seen in `m` units is), given to its **last unit**
//!   (the one that was running when it died or stopped) as a call too long raises its unit
//!   (`0.8 · evidence + 0.2 · score`). When that makes the unit an anomaly
//!   ([`ROOT_MIN`]) — the ending's evidence, not the last unit's own: a process that
//!   ended as its group's do in normal runs (SIGTERMed with the rest at the end of the
//!   run) gathers nothing, whatever its last unit did —, the peers' anomalies that
//!   followed — units of other processes
//!   connected to it that ended after it fell silent and reached [`ROOT_MIN`], on a
//!   connection to it (their peer address is one of its local addresses) or on none (the
//!   event loop handling what a connection to it told): an end of stream, a reset, a
//!   reply that never came, a reconnection refused — are its **consequences**: each
//!   one's incident (its root and everything filed under it) is filed under the last
//!   unit, whose evidence becomes the incident's,
//!   `1 − (1 − e)(1 − e_peer)` with `e_peer` the strongest peer anomaly (an anomaly with the
//!   anomalies it caused across processes is stronger evidence than either alone). A peer
//!   incident whose root ended before the process fell silent is not its consequence.
//!
//! - **Ended of an earlier incident**: a process that had already reacted to an anomaly
//!   of another process before it fell silent — one of its units filed under that
//!   anomaly's root by [`crate::consequence`] (a message from it, the very connection it
//!   broke) — ended of that incident (a client giving up after the reset it met): its last
//!   unit is filed under that root, unless its ending is clearly stronger evidence
//!   ([`STRONGER`] above the root: an early, weak anomaly does not explain a kill).
//!
//! The trace alone cannot tell a process killed from one stopped (both end inside a call
//! that never returns); the report says "killed or stopped" and names what the peers met.

use super::consequence::{CONSEQUENCE_FACTOR, ROOT_MIN, STRONGER};
use super::evidence::backing_f;
use crate::hash::{FxMap, FxSet};
use crate::report::{ConnRow, Row, RowExtra, RowRef, SharedScore};
use crate::score::Verdict;
use crate::units::UnitKind;
use serde::{Deserialize, Serialize};

/// How the normal processes of one group ended (learned; see the module's documentation).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EndingModel {
    /// Normal processes whose ending was seen.
    pub processes: u64,
    /// Of them, those whose trace ended inside their event loop (no finalizer).
    pub in_loop: u64,
    /// Units of those processes, all together.
    pub units: u64,
    /// The largest silent share of a normal process of the group ([`silent_share`]).
    pub silent_share: f64,
    /// The largest share of its run's time (first unit's start to last unit's end, over
    /// every process) that a normal process of the group was silent for, at the end.
    #[serde(default)]
    pub silent_time: f64,
}

impl EndingModel {
    /// The model of one normal process.
    pub fn of(units: u64, in_loop: bool, share: f64, time: f64) -> EndingModel {
        EndingModel {
            processes: 1,
            in_loop: u64::from(in_loop),
            units,
            silent_share: share,
            silent_time: time,
        }
    }

    /// Folds another group's (or process's) endings into this one.
    pub fn merge(&mut self, o: &EndingModel) {
        self.processes += o.processes;
        self.in_loop += o.in_loop;
        self.units += o.units;
        self.silent_share = self.silent_share.max(o.silent_share);
        self.silent_time = self.silent_time.max(o.silent_time);
    }

    /// Checks a model read from a file.
    pub fn check(&self) -> Result<(), String> {
        if self.in_loop > self.processes {
            return Err(format!(
                "ending: {} processes ended in their loop, of {}",
                self.in_loop, self.processes
            ));
        }
        for (what, x) in [("share", self.silent_share), ("time", self.silent_time)] {
            if !(0.0..=1.0).contains(&x) {
                return Err(format!("ending: silent {what} {x} is not in [0, 1]"));
            }
        }
        Ok(())
    }

    /// Units a process of the group has, by the normal runs.
    fn units_per_process(&self) -> f64 {
        if self.processes == 0 {
            0.0
        } else {
            self.units as f64 / self.processes as f64
        }
    }

    /// The units of its own that a process of the group, silent for a share `share` of
    /// the other processes' units and `time` of the run's time, missed by the normal pace,
    /// beyond the group's normal silence: the larger of the two (a process killed while
    /// the others work on shows in units; one stopped while the others wait for it, in
    /// time).
    ///
    /// "Beyond" is beyond the group's bound as its `n` normal processes back it: the largest
    /// of `n` silences is extended by the mean gap between them, `max · (n + 1) / n` (the
    /// unbiased estimate of the upper end of a uniform spread from its `n` draws' maximum).
    /// Four normal processes leave a quarter of their largest silence to chance — a run
    /// whose teardown took a little longer on a loaded machine is within it —; forty leave a
    /// fortieth.
    pub fn missed_units(&self, share: f64, time: f64) -> f64 {
        let bound = |x: f64| x * (self.processes as f64 + 1.0) / self.processes.max(1) as f64;
        let beyond = (share - bound(self.silent_share)).max(time - bound(self.silent_time));
        self.units_per_process() * beyond.max(0.0)
    }

    /// The evidence of an ending inside the loop silent for `share` and `time`.
    pub fn evidence(&self, share: f64, time: f64) -> f64 {
        backing_f(self.missed_units(share, time))
    }
}

/// The share of the other processes' units (`others` of them) that started after a
/// process's last event: `after` of them.
pub fn silent_share(after: usize, others: usize) -> f64 {
    if others == 0 {
        0.0
    } else {
        after as f64 / others as f64
    }
}

/// The share of a run's time (`start` to `end`) after `last`.
pub fn silent_time(last: i64, start: i64, end: i64) -> f64 {
    if end <= start {
        0.0
    } else {
        ((end - last) as f64 / (end - start) as f64).clamp(0.0, 1.0)
    }
}

/// For each of `thresholds`, how many of `starts` are after it: one pass over the starts
/// (a binary search among the few thresholds each), no sort of the many starts.
pub fn counts_after(starts: impl Iterator<Item = i64>, thresholds: &[i64]) -> Vec<usize> {
    let mut sorted: Vec<i64> = thresholds.to_vec();
    sorted.sort_unstable();
    // A start counts for the thresholds below it: sorted[..k]. Counted once per k.
    let mut below = vec![0usize; sorted.len() + 1];
    for s in starts {
        below[sorted.partition_point(|&t| t < s)] += 1;
    }
    // After sorted[j]: the starts whose k > j.
    let mut after = vec![0usize; sorted.len()];
    let mut acc = 0usize;
    for j in (0..sorted.len()).rev() {
        acc += below[j + 1];
        after[j] = acc;
    }
    thresholds
        .iter()
        .map(|t| after[sorted.partition_point(|x| x < t)])
        .collect()
}

/// What a trial process's ending told, kept with its last unit (`rank --json`: `ending`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ending {
    /// Share of the other processes' units that started after its last event.
    pub silent_share: f64,
    /// Those units.
    pub units_after: u64,
    /// Share of the run's time after its last event.
    #[serde(default)]
    pub silent_time: f64,
    /// The group's normal silent share.
    pub normal_share: f64,
    /// The group's normal silent time.
    #[serde(default)]
    pub normal_time: f64,
    /// The group's normal processes.
    pub normal_processes: u64,
    /// Its own units missed, by the group's normal pace.
    pub missed_units: f64,
    /// The ending's evidence, before the peers' anomalies.
    pub evidence: f64,
    /// Units of other processes filed under it (their anomalies on connections to it, and
    /// the incidents they led).
    pub peer_units: u64,
    /// The processes of those units.
    pub peer_processes: u64,
    /// What the peers met on their connections to it, most frequent first (e.g. "`recv` →
    /// end of stream"); empty when no peer anomaly followed.
    #[serde(default)]
    pub peers_saw: Vec<String>,
}

impl Ending {
    /// The sentence of its *why*.
    pub fn sentence(&self) -> String {
        let mut s = format!(
            "the process's trace ended here, inside its event loop, with no exit (killed or \
             stopped) while the other processes went on: {:.0} % of the run's time and {} of \
             their units ({:.0} %) came after; its group's {} normal processes fell silent with \
             at most {:.1} % of the time and {:.1} % of the units still to come (about {:.0} of \
             its own units missing)",
            self.silent_time * 100.0,
            self.units_after,
            self.silent_share * 100.0,
            self.normal_processes,
            self.normal_time * 100.0,
            self.normal_share * 100.0,
            self.missed_units,
        );
        if self.peer_units > 0 {
            let n =
                |k: u64, one: &str, many: &str| format!("{k} {}", if k == 1 { one } else { many });
            s += &format!(
                "; then {} of {} on connections to it went wrong ({}), filed under it",
                n(self.peer_units, "unit", "units"),
                n(self.peer_processes, "other process", "other processes"),
                if self.peers_saw.is_empty() {
                    "anomalies".to_string()
                } else {
                    self.peers_saw.join(", ")
                }
            );
        }
        s
    }

    /// Its JSON object (`rank --json`: `ending`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "no_exit_in_loop",
            "silent_share": self.silent_share,
            "units_after": self.units_after,
            "silent_time": self.silent_time,
            "normal_silent_share": self.normal_share,
            "normal_silent_time": self.normal_time,
            "normal_processes": self.normal_processes,
            "missed_units": self.missed_units,
            "evidence": self.evidence,
            "peer_units": self.peer_units,
            "peer_processes": self.peer_processes,
            "peers_saw": self.peers_saw,
        })
    }
}

/// A process that may have ended abnormally: its last unit and its ending's evidence.
struct Candidate {
    block: u32,
    last: u32,
    last_ns: i64,
    ending: Ending,
    /// Its last unit's score with the ending's evidence (`0.8 · evidence + 0.2 · score`).
    raised: f64,
    /// The larger of that and the last unit's own score.
    base: f64,
}

/// Weighs how each process of a trial ended (see the module's documentation), after the
/// consequences were filed (`caused_by`: unit → root): raises the last unit of each
/// process that ended abnormally, files its peers' later anomalies (their incidents) under
/// it, and records the ending in its extra. `models`: the ending model of each process's
/// group (by block); `names` names the peers' calls.
pub(crate) fn weigh_endings(
    blocks: &mut [Vec<Row>],
    shared: &mut Vec<SharedScore>,
    extras: &mut FxMap<RowRef, RowExtra>,
    conns: &[ConnRow],
    models: &[Option<EndingModel>],
    caused_by: &mut FxMap<RowRef, RowRef>,
    describe: &dyn Fn(&SharedScore) -> Option<String>,
) {
    let mut cands = candidates(blocks, models);
    if cands.is_empty() {
        return;
    }
    let rows = || blocks.iter().flatten();
    let total = rows().count();
    let (start, end) = (
        rows().map(|r| r.t_start_unix_ns).min().unwrap_or(0),
        rows().map(|r| r.t_end_unix_ns).max().unwrap_or(0),
    );
    let lasts: Vec<i64> = cands.iter().map(|c| c.last_ns).collect();
    let afters = counts_after(rows().map(|r| r.t_start_unix_ns), &lasts);
    for (c, after) in cands.iter_mut().zip(afters) {
        let m = models[c.block as usize]
            .as_ref()
            .expect("candidates have a model");
        let own = blocks[c.block as usize].len();
        let share = silent_share(after, total - own);
        let time = silent_time(c.last_ns, start, end);
        let e = m.evidence(share, time);
        let score = blocks[c.block as usize][c.last as usize].score;
        c.raised = 0.8 * e + 0.2 * score;
        c.base = score.max(c.raised);
        c.ending = Ending {
            silent_share: share,
            units_after: after as u64,
            silent_time: time,
            normal_share: m.silent_share,
            normal_time: m.silent_time,
            normal_processes: m.processes,
            missed_units: m.missed_units(share, time),
            evidence: e,
            peer_units: 0,
            peer_processes: 0,
            peers_saw: Vec::new(),
        };
    }
    // Only an ending that is evidence of its own counts: one that makes its last unit an
    // anomaly. A process that ended as its group's processes end in normal runs (SIGTERMed
    // with the rest when the run ends, silent no longer than they were) fell silent as they
    // do; the peers' anomalies after that are not its doing, whatever its last unit did
    // (that is weighed as any unit is, and filed by [`crate::consequence`]).
    cands.retain(|c| c.raised >= ROOT_MIN);
    // Earliest first: a process that died of an earlier one's death is filed under it.
    cands.sort_by_key(|c| (c.last_ns, c.block));
    for c in cands {
        let l: RowRef = (c.block, c.last);
        if caused_by.contains_key(&l) {
            // Its last unit was already explained by an earlier incident.
            continue;
        }
        if let Some(root) = reacted_to(blocks, caused_by, &c) {
            // It had already reacted to an earlier incident before it fell silent: it
            // ended of that incident (a client giving up), not the other way round.
            let under = blocks[root.0 as usize][root.1 as usize].score * CONSEQUENCE_FACTOR;
            caused_by.insert(l, root);
            let row = &mut blocks[c.block as usize][c.last as usize];
            if under > row.score {
                let mut own = shared[row.shared as usize].clone();
                own.score = under;
                shared.push(own);
                row.shared = shared.len() as u32 - 1;
                row.score = under;
            }
            continue;
        }
        // Its local addresses: where its peers' connections to it lead.
        let locals = addresses(&blocks[c.block as usize], conns, |cr| cr.1.as_deref());
        let its_peers = addresses(&blocks[c.block as usize], conns, |cr| cr.2.as_deref());
        // The incidents its peers' later anomalies on connections to it belong to.
        let mut roots: FxSet<RowRef> = FxSet::default();
        let mut saw: FxMap<String, u32> = FxMap::default();
        for (b, rows) in blocks.iter().enumerate() {
            if b as u32 == c.block {
                continue;
            }
            // Connected to it: one of its connections leads here, or one of ours to it.
            let connected = rows.iter().any(|r| {
                conns.get(r.conn as usize).is_some_and(|cr| {
                    cr.2.as_deref().is_some_and(|p| locals.contains(p))
                        || cr.1.as_deref().is_some_and(|l| its_peers.contains(l))
                })
            });
            if !connected {
                continue;
            }
            for (i, r) in rows.iter().enumerate() {
                // On a connection to it, or on none (a loop unit handling what its
                // connections to it told: an error, an end of stream).
                let to_it = match conns.get(r.conn as usize) {
                    Some((_, _, Some(p))) => locals.contains(p.as_str()),
                    _ => true,
                };
                if !to_it
                    || r.t_end_unix_ns < c.last_ns
                    || r.score < ROOT_MIN
                    || shared[r.shared as usize].verdict != Verdict::Scored
                {
                    continue;
                }
                let me = (b as u32, i as u32);
                let root = caused_by.get(&me).copied().unwrap_or(me);
                if root.0 == c.block {
                    continue;
                }
                let rr = &blocks[root.0 as usize][root.1 as usize];
                if rr.t_end_unix_ns < c.last_ns {
                    continue; // the incident ended before it fell silent: not its doing
                }
                roots.insert(root);
                if let Some(d) = describe(&shared[r.shared as usize]) {
                    *saw.entry(d).or_default() += 1;
                }
            }
        }
        let strongest = roots
            .iter()
            .map(|r| blocks[r.0 as usize][r.1 as usize].score)
            .fold(0.0f64, f64::max);
        let raised = 1.0 - (1.0 - c.base) * (1.0 - strongest);
        let under = raised * CONSEQUENCE_FACTOR;
        let mut moved: Vec<RowRef> = caused_by
            .iter()
            .filter(|(_, root)| roots.contains(root))
            .map(|(u, _)| *u)
            .collect();
        moved.extend(roots.iter().copied());
        moved.sort_unstable();
        let mut procs: FxSet<u32> = FxSet::default();
        let mut own_shared: FxMap<u32, u32> = FxMap::default();
        for &u in &moved {
            caused_by.insert(u, l);
            procs.insert(u.0);
            let r = &mut blocks[u.0 as usize][u.1 as usize];
            let s = *own_shared.entry(r.shared).or_insert_with(|| {
                let mut s = shared[r.shared as usize].clone();
                s.score = under;
                shared.push(s);
                shared.len() as u32 - 1
            });
            r.shared = s;
            r.score = under;
        }
        procs.remove(&c.block);
        let mut ending = c.ending;
        ending.peer_units = moved.iter().filter(|u| u.0 != c.block).count() as u64;
        ending.peer_processes = procs.len() as u64;
        let mut saw: Vec<(String, u32)> = saw.into_iter().collect();
        saw.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        ending.peers_saw = saw.into_iter().take(3).map(|(d, _)| d).collect();
        let row = &mut blocks[c.block as usize][c.last as usize];
        let mut own = shared[row.shared as usize].clone();
        own.score = raised;
        shared.push(own);
        row.shared = shared.len() as u32 - 1;
        row.score = raised;
        row.flags |= Row::EXTRA;
        extras.entry(l).or_default().ending = Some(ending);
    }
}

/// The root of the earliest incident in another process that the candidate's process had
/// already reacted to before it fell silent — one of its units filed under that root
/// ([`crate::consequence`]: by happens-before, or on the very connection the root broke) —
/// unless its ending is clearly stronger evidence than that root ([`STRONGER`]: an early,
/// weak anomaly that a unit of it was filed under does not explain a process killed later).
fn reacted_to(
    blocks: &[Vec<Row>],
    caused_by: &FxMap<RowRef, RowRef>,
    c: &Candidate,
) -> Option<RowRef> {
    let row = |r: &RowRef| &blocks[r.0 as usize][r.1 as usize];
    caused_by
        .iter()
        .filter(|(u, root)| u.0 == c.block && root.0 != c.block)
        .map(|(_, root)| *root)
        .filter(|root| {
            let r = row(root);
            r.t_start_unix_ns <= c.last_ns && r.score + STRONGER >= c.base
        })
        .min_by_key(|root| (row(root).t_start_unix_ns, *root))
}

/// The addresses `which` picks (local or peer) of the connections of `rows`.
fn addresses<'a>(
    rows: &[Row],
    conns: &'a [ConnRow],
    which: impl Fn(&'a ConnRow) -> Option<&'a str>,
) -> FxSet<&'a str> {
    rows.iter()
        .filter_map(|r| which(conns.get(r.conn as usize)?))
        .collect()
}

/// The processes whose trace ended inside their event loop (no finalizer, last unit cut)
/// and whose group's endings were learned: each with its last unit.
fn candidates(blocks: &[Vec<Row>], models: &[Option<EndingModel>]) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (b, rows) in blocks.iter().enumerate() {
        let Some(Some(m)) = models.get(b) else {
            continue;
        };
        if m.processes == 0 || rows.iter().any(|r| r.kind == UnitKind::Finalizer) {
            continue;
        }
        let Some(last) = (0..rows.len()).max_by_key(|&i| {
            let r = &rows[i];
            (r.t_end_unix_ns, r.tid, r.index)
        }) else {
            continue;
        };
        if rows[last].flags & Row::CUT == 0 {
            continue;
        }
        out.push(Candidate {
            block: b as u32,
            last: last as u32,
            last_ns: rows[last].t_end_unix_ns,
            ending: Ending {
                silent_share: 0.0,
                units_after: 0,
                silent_time: 0.0,
                normal_share: 0.0,
                normal_time: 0.0,
                normal_processes: 0,
                missed_units: 0.0,
                evidence: 0.0,
                peer_units: 0,
                peer_processes: 0,
                peers_saw: Vec::new(),
            },
            raised: 0.0,
            base: 0.0,
        });
    }
    out
}

/// What one normal process told about its ending, for [`learn_endings`].
#[derive(Clone, Debug, Default)]
pub struct ProcessEnd {
    /// Its run (trace set).
    pub set: usize,
    /// Its group in the model.
    pub group: usize,
    /// Its units' starts (any order).
    pub starts: Vec<i64>,
    /// The end of its last unit.
    pub last_ns: i64,
    /// It had a finalizer (called `exit` or left its event loop).
    pub exited: bool,
}

/// Tells the runs of `ends` apart ([`ProcessEnd::set`]: the trace set given on entry,
/// a run on return): within a set, processes whose spans (first unit's start to last
/// unit's end) overlap, directly or through others, are of one run — the normal runs
/// learned from are recorded one after the other.
pub fn assign_runs(ends: &mut [ProcessEnd]) {
    let span = |e: &ProcessEnd| {
        (
            e.starts.iter().copied().min().unwrap_or(e.last_ns),
            e.last_ns,
        )
    };
    let mut order: Vec<usize> = (0..ends.len()).collect();
    order.sort_by_key(|&i| (ends[i].set, span(&ends[i])));
    let (mut run, mut until, mut set) = (0usize, i64::MIN, None);
    for (k, &i) in order.iter().enumerate() {
        let (first, last) = span(&ends[i]);
        if k > 0 && (first > until || set != Some(ends[i].set)) {
            run += 1;
            until = i64::MIN;
        }
        set = Some(ends[i].set);
        until = until.max(last);
        ends[i].set = run;
    }
}

/// The ending models of `groups` groups from the normal processes' ends.
pub fn learn_endings(ends: &[ProcessEnd], groups: usize) -> Vec<EndingModel> {
    let mut out = vec![EndingModel::default(); groups];
    let sets = ends.iter().map(|e| e.set + 1).max().unwrap_or(0);
    for set in 0..sets {
        let mine: Vec<&ProcessEnd> = ends.iter().filter(|e| e.set == set).collect();
        let starts = || mine.iter().flat_map(|e| e.starts.iter().copied());
        let total: usize = mine.iter().map(|e| e.starts.len()).sum();
        let start = starts().min().unwrap_or(0);
        let end = mine.iter().map(|e| e.last_ns).max().unwrap_or(0);
        let lasts: Vec<i64> = mine.iter().map(|e| e.last_ns).collect();
        let afters = counts_after(starts(), &lasts);
        for (e, after) in mine.iter().zip(afters) {
            // A process alone in what was learned (a per-process or per-host model of a
            // one-process run) tells nothing of how it ended against the rest of its run.
            if e.starts.is_empty() || e.group >= groups || total == e.starts.len() {
                continue;
            }
            let share = silent_share(after, total - e.starts.len());
            let time = silent_time(e.last_ns, start, end);
            out[e.group].merge(&EndingModel::of(
                e.starts.len() as u64,
                !e.exited,
                share,
                time,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(proc_: u32, index: u32, t: i64, conn: u32, score: f64, shared: u32) -> Row {
        Row {
            score,
            t_start_unix_ns: t,
            t_end_unix_ns: t + 5,
            tsc_start: 0,
            tsc_end: 0,
            proc_,
            conn,
            tid: 1,
            index,
            shared,
            fd: 0,
            kind: UnitKind::Handler,
            flags: 0,
            incident: 0,
        }
    }

    fn sh(score: f64) -> SharedScore {
        SharedScore {
            score,
            verdict: Verdict::Scored,
            effective: Box::new([]),
            model_units: 100,
            run_added: 0.0,
        }
    }

    fn conns() -> Vec<ConnRow> {
        let c = |l: &str, p: &str| (Default::default(), Some(l.to_string()), Some(p.to_string()));
        vec![
            (Default::default(), None, None),
            // The server's end of the client's connection, and the client's.
            c("127.0.0.1:7000", "127.0.0.1:50000"),
            c("127.0.0.1:50000", "127.0.0.1:7000"),
        ]
    }

    /// A server (process 0) and a client (process 1), 100 units each, one every 10 ns; the
    /// server's trace ends at `server_units` (cut), the client's goes on; with `fails` the
    /// client's first unit after the server fell silent failed (0.99).
    fn run(server_units: u32, fails: bool) -> (Vec<Vec<Row>>, Vec<SharedScore>) {
        let shared = vec![sh(0.0), sh(0.99)];
        let mut server: Vec<Row> = (0..server_units)
            .map(|i| row(0, i, 10 * i as i64, 1, 0.0, 0))
            .collect();
        if let Some(l) = server.last_mut() {
            l.flags |= Row::CUT;
        }
        let mut client: Vec<Row> = (0..100)
            .map(|i| row(1, i, 10 * i as i64 + 3, 2, 0.0, 0))
            .collect();
        if fails && server_units < 100 {
            let f = &mut client[server_units as usize + 1];
            f.score = 0.99;
            f.shared = 1;
        }
        (vec![server, client], shared)
    }

    fn normal() -> EndingModel {
        // Three normal runs of the server's group: 100 units each, stopped at the end
        // (in their loop) with at most 2 % of the run after them.
        let mut m = EndingModel::of(100, true, 0.01, 0.01);
        m.merge(&EndingModel::of(100, true, 0.02, 0.005));
        m.merge(&EndingModel::of(100, true, 0.0, 0.02));
        m
    }

    fn weigh(blocks: &mut [Vec<Row>], shared: &mut Vec<SharedScore>) -> FxMap<RowRef, RowRef> {
        let mut extras = FxMap::default();
        let mut caused_by = FxMap::default();
        weigh_endings(
            blocks,
            shared,
            &mut extras,
            &conns(),
            &[Some(normal()), None],
            &mut caused_by,
            &|_| Some("`recv` → end of stream".into()),
        );
        for ((b, i), x) in &extras {
            let e = x.ending.as_ref().expect("an ending");
            let why = e.sentence();
            assert!(why.contains("with no exit (killed or stopped)"), "{why}");
            if e.peer_units == 1 {
                assert!(why.contains("then 1 unit of 1 other process on"), "{why}");
            }
            assert_eq!(e.to_json()["kind"], "no_exit_in_loop");
            assert!(blocks[*b as usize][*i as usize].flags & Row::EXTRA != 0);
        }
        caused_by
    }

    #[test]
    fn a_process_that_falls_silent_while_its_peers_go_on_makes_its_last_unit_a_suspect() {
        let (mut blocks, mut shared) = run(40, false);
        weigh(&mut blocks, &mut shared);
        let last = &blocks[0][39];
        // 60 % of the client's units came after: about 58 of its own units missing.
        assert!(last.score >= ROOT_MIN, "{}", last.score);
        assert!(blocks[0][..39].iter().all(|r| r.score == 0.0));
        assert_eq!(shared[last.shared as usize].score, last.score);
    }

    #[test]
    fn its_peers_failures_after_it_fell_silent_are_its_consequences() {
        let (mut blocks, mut shared) = run(40, true);
        let caused_by = weigh(&mut blocks, &mut shared);
        let last = blocks[0][39].score;
        let failed = blocks[1][41].score;
        // The incident is stronger than either piece of evidence alone.
        assert!(
            last > 0.99 && failed < last && failed > 0.98,
            "{last} {failed}"
        );
        assert_eq!(caused_by.get(&(1, 41)), Some(&(0, 39)));
    }

    /// [`weigh_endings`] on the run of [`run`]`(40, true)` after the consequence step filed
    /// the server's unit 35 under an anomaly of the client (unit 30) scoring `root`.
    fn reacted(root: f64) -> (Vec<Vec<Row>>, FxMap<RowRef, RowRef>) {
        let (mut blocks, mut shared) = run(40, true);
        shared.push(sh(root));
        blocks[1][30].score = root;
        blocks[1][30].shared = 2;
        blocks[0][35].score = root * CONSEQUENCE_FACTOR;
        let mut caused_by: FxMap<RowRef, RowRef> = FxMap::default();
        caused_by.insert((0, 35), (1, 30));
        weigh_endings(
            &mut blocks,
            &mut shared,
            &mut FxMap::default(),
            &conns(),
            &[Some(normal()), None],
            &mut caused_by,
            &|_| None,
        );
        (blocks, caused_by)
    }

    #[test]
    fn a_process_that_reacted_to_an_earlier_incident_ended_of_it() {
        // The server met the client's anomaly (filed under it) and then fell silent: its
        // ending goes with that incident, right after its root, and takes no peer's
        // later failure.
        let (blocks, caused_by) = reacted(0.97);
        assert_eq!(caused_by.get(&(0, 39)), Some(&(1, 30)));
        assert_eq!(blocks[0][39].score, 0.97 * CONSEQUENCE_FACTOR);
        assert_eq!(caused_by.get(&(1, 41)), None);
        assert_eq!(blocks[1][41].score, 0.99);
        // An earlier anomaly clearly weaker than the ending does not explain it: the
        // ending is weighed as before, and the client's later failure is filed under it.
        let (blocks, caused_by) = reacted(0.5);
        assert_eq!(caused_by.get(&(0, 39)), None);
        assert_eq!(caused_by.get(&(1, 41)), Some(&(0, 39)));
        assert!(blocks[0][39].score > 0.99, "{}", blocks[0][39].score);
    }

    #[test]
    fn a_process_stopped_at_the_end_of_the_run_as_in_normal_runs_is_not_flagged() {
        // The server falls silent with 1 % of the client's units after it (SIGTERM at
        // the end): within its group's normal endings.
        let (mut blocks, mut shared) = run(100, false);
        for r in &mut blocks[1] {
            r.t_start_unix_ns -= 10;
            r.t_end_unix_ns -= 10;
        }
        blocks[1][99].t_start_unix_ns = 996;
        blocks[1][99].t_end_unix_ns = 1001;
        let caused_by = weigh(&mut blocks, &mut shared);
        assert!(caused_by.is_empty());
        assert!(blocks[0].iter().all(|r| r.score == 0.0));
    }

    #[test]
    fn an_ending_as_in_normal_runs_gathers_no_peers_whatever_its_last_unit_did() {
        // The server falls silent as its group's processes do at the end of normal runs
        // (1 % of the client's units after it), its last unit an anomaly of its own (0.9);
        // the client's last unit, after it, failed (0.99). The ending is no evidence: the
        // client's failure is not the server's doing by its ending, and nothing moves.
        let (mut blocks, mut shared) = run(99, false);
        shared.push(sh(0.9));
        blocks[0][98].score = 0.9;
        blocks[0][98].shared = 2;
        blocks[1][99].score = 0.99;
        blocks[1][99].shared = 1;
        let caused_by = weigh(&mut blocks, &mut shared);
        assert!(caused_by.is_empty(), "{caused_by:?}");
        assert_eq!((blocks[0][98].score, blocks[1][99].score), (0.9, 0.99));
    }

    #[test]
    fn a_process_that_exited_or_was_not_cut_is_not_a_candidate() {
        let (mut blocks, mut shared) = run(40, true);
        blocks[0][39].kind = UnitKind::Finalizer;
        let caused_by = weigh(&mut blocks, &mut shared);
        assert!(caused_by.is_empty());
        assert_eq!(blocks[0][39].score, 0.0);
        let (mut blocks, mut shared) = run(40, true);
        blocks[0][39].flags &= !Row::CUT;
        assert!(weigh(&mut blocks, &mut shared).is_empty());
    }

    #[test]
    fn a_silence_a_little_beyond_a_bound_few_processes_back_is_no_evidence() {
        // A fault-free run on a loaded machine: its teardown took 3 % of the run longer
        // than the longest of the group's four normal endings (23 %).
        let mut few = EndingModel::of(300, true, 0.004, 0.232);
        for _ in 0..3 {
            few.merge(&EndingModel::of(300, true, 0.004, 0.2));
        }
        assert_eq!(few.evidence(0.004, 0.262), 0.0);
        // The same margin beyond a bound forty processes back is evidence; a process
        // stopped for half the run is evidence either way.
        let mut many = few.clone();
        for _ in 0..36 {
            many.merge(&EndingModel::of(300, true, 0.004, 0.2));
        }
        assert!(
            many.evidence(0.004, 0.262) > 0.5,
            "{}",
            many.evidence(0.004, 0.262)
        );
        assert!(
            few.evidence(0.004, 0.6) > 0.9,
            "{}",
            few.evidence(0.004, 0.6)
        );
    }

    #[test]
    fn a_group_that_falls_silent_early_in_normal_runs_gives_no_evidence() {
        // A name server consulted once at start-up: silent for 70 % of every normal run.
        let m = EndingModel::of(10, true, 0.7, 0.8);
        assert_eq!(m.evidence(0.6, 0.75), 0.0);
        assert!(m.evidence(0.9, 0.8) < 0.4);
        // The evidence grows with what the process missed, by its group's pace, in units
        // of the others (killed while they work on) or in time (stopped while they wait).
        let n = normal();
        assert!(n.evidence(0.1, 0.0) < n.evidence(0.5, 0.0));
        assert!(n.evidence(0.5, 0.0) > 0.9);
        // Three processes back a bound of 2 % · 4/3.
        let bound = 0.02 * 4.0 / 3.0;
        assert!((n.missed_units(0.5, 0.0) - 100.0 * (0.5 - bound)).abs() < 1e-9);
        assert!((n.missed_units(0.03, 0.9) - 100.0 * (0.9 - bound)).abs() < 1e-9);
    }

    #[test]
    fn counts_after_each_threshold_match_a_plain_count() {
        let starts: Vec<i64> = (0..50).map(|i| (i * 37) % 101).collect();
        let thresholds = [50, -1, 100, 50, 3, 200];
        let got = counts_after(starts.iter().copied(), &thresholds);
        let want: Vec<usize> = thresholds
            .iter()
            .map(|&t| starts.iter().filter(|&&s| s > t).count())
            .collect();
        assert_eq!(got, want);
        assert!(counts_after(starts.iter().copied(), &[]).is_empty());
    }

    #[test]
    fn endings_are_learned_per_run_and_group() {
        let end = |set, group, starts: Vec<i64>, exited| ProcessEnd {
            set,
            group,
            last_ns: starts.iter().max().copied().unwrap_or(0) + 1,
            starts,
            exited,
        };
        let ends = vec![
            // Run 0: the daemon (group 0) ends after everything; the client (group 1) exits
            // early, a third of the daemon's units after it.
            end(0, 0, (0..9).collect(), false),
            end(0, 1, vec![0, 1, 2], true),
            // Run 1: the daemon falls silent with 1 of the client's 4 units after it.
            end(1, 0, (0..10).collect(), false),
            end(1, 1, vec![0, 5, 9, 20], true),
        ];
        let mut runs = ends.clone();
        for e in &mut runs {
            e.set = 9;
        }
        let mut apart = ends.clone();
        assign_runs(&mut apart);
        assert_eq!(
            apart.iter().map(|e| e.set).collect::<Vec<_>>(),
            vec![0, 0, 1, 1],
            "two sets that overlap in time are two runs"
        );
        // Run 1 comes after run 0 in time.
        for e in &mut runs[2..] {
            e.starts.iter_mut().for_each(|s| *s += 100);
            e.last_ns += 100;
        }
        assign_runs(&mut runs);
        assert_eq!(
            runs.iter().map(|e| e.set).collect::<Vec<_>>(),
            vec![0, 0, 1, 1]
        );
        let m = learn_endings(&ends, 2);
        assert_eq!(learn_endings(&runs, 2), m);
        assert_eq!(m[0].processes, 2);
        assert_eq!(m[0].in_loop, 2);
        assert_eq!(m[0].units, 19);
        assert!((m[0].silent_share - 0.25).abs() < 1e-12);
        assert_eq!(m[1].in_loop, 0);
        // Client of run 0: its last event at 3; daemon units 4..8 after: 5 of 9.
        assert!((m[1].silent_share - 5.0 / 9.0).abs() < 1e-12);
        // Run 0 spans 0 to 9 (the daemon's last unit ends at 9): the client, silent from 3.
        assert!((m[1].silent_time - 6.0 / 9.0).abs() < 1e-12);
        assert!(m[0].check().is_ok());
        let mut bad = m[0].clone();
        bad.in_loop = 3;
        assert!(bad.check().is_err());
    }
}
