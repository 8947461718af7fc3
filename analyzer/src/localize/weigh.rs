//! Evidence **weighed over several units**, before consequences are filed
//! ([`crate::consequence`]): what no single unit's score tells.
//!
//! - **Persistent change** (`persistent_runs`): the units of one connection (or, for
//!   units on no connection, of one thread) that from some point on all depart from normal
//!   in the same way — a call that 99 % of normal units make after a receive, never made
//!   again after a garbled frame desynchronized the protocol — each score little (the call
//!   was skipped by 1 % of normal units), but a run of them is overwhelming evidence. The
//!   unit where the run begins is the root candidate: its score becomes the run's evidence,
//!   and the run's other units are filed under it; for [`crate::consequence`]'s
//!   `strength` the first unit and the members weigh as that unit alone (repeating a
//!   reaction is no evidence of a cause of its own), so an earlier incident that reached
//!   the run's first unit takes the whole run. A run counts when the place behaved
//!   otherwise before it (a change, not how the place always was), and when it is longer
//!   than all the normal units that departed that way put together.
//! - **Repeats** (`first_occurrences`): the same failure (the same node, departing the
//!   same way, in processes of one group) met again later — in a respawned worker, on the
//!   next connection — ranks after its first occurrence.
//! - **A process that matches no group** (`unmatched_processes`): one piece of evidence,
//!   not one per unit: its first unit carries it, its other units are filed under it.

use super::consequence::{CONSEQUENCE_FACTOR, ROOT_MIN};
use super::evidence::backing;
use crate::hash::FxMap;
use crate::report::{ConnRow, Row, RowRef, SharedScore};
use crate::score::{NodeClass, Verdict};

/// The shortest run of units departing from normal the same way that is weighed together
/// (a single unit is weighed by its own score).
pub const RUN_MIN: usize = 2;

/// How often a normal unit of a class learned from `units` units departs from normal the
/// way effective node `e` tells, at most: a call missing whose model probability is `p`,
/// `1 − p`; a rare call seen with probability `p`, `p`; a call never seen, the bound
/// `1 − backing(units)` of a rate never observed in that many units.
fn normal_rate(e: &crate::score::Effective, units: u64) -> f64 {
    match e.class {
        NodeClass::Missing => 1.0 - e.p.unwrap_or(0.0),
        NodeClass::Common => e.p.unwrap_or(1.0),
        NodeClass::New => 1.0 - backing(units),
    }
}

/// The evidence of a run of `len` consecutive units that all depart from normal in a way
/// a normal unit does with probability at most `rate`, among `n` units (the places a run
/// could start), learned from `units` units: one minus the chance that normal behaviour
/// shows such a run anywhere among them (at most `n · rate^len`, the scan statistic's
/// union bound), times what backs the rate.
///
/// Units of a run are not independent (a worker that stops writing to one peer skips that
/// call in every unit after), so a run counts only when it is **longer than all the normal
/// units that departed that way put together** (`rate · units`): however those were
/// bunched in the normal runs, none of them showed such a run.
pub fn run_evidence(rate: f64, len: usize, n: usize, units: u64) -> f64 {
    if len < RUN_MIN || len as f64 <= rate * units as f64 {
        return 0.0;
    }
    let chance = (n as f64 * rate.clamp(0.0, 1.0).powi(len as i32)).min(1.0);
    backing(units) * (1.0 - chance)
}

/// Where the units of a run must be: one connection of a process (handlers), else one
/// thread of a process and unit kind.
fn place(r: &Row, conns: &[ConnRow]) -> (u32, u32, u32, u8) {
    let on_conn = matches!(conns.get(r.conn as usize), Some((_, Some(_), Some(_))));
    if on_conn {
        (r.proc_, r.conn, 0, 0)
    } else {
        (r.proc_, u32::MAX, r.tid, r.kind as u8 + 1)
    }
}

/// A run found: its first unit, its other units, and its evidence.
struct Run {
    start: RowRef,
    members: Vec<RowRef>,
    evidence: f64,
}

/// **Persistent change** (see the module's documentation): raises the first unit of each
/// run of units that depart from normal the same way to the run's evidence
/// ([`run_evidence`]: `0.8 · evidence + 0.2 · score`, as a call too long raises its unit),
/// when that makes it a root ([`ROOT_MIN`]), and files the run's other units under it.
/// Returns the filings (unit → the run's first unit).
pub(crate) fn persistent_runs(
    blocks: &mut [Vec<Row>],
    shared: &mut Vec<SharedScore>,
    conns: &[ConnRow],
) -> Vec<(RowRef, RowRef)> {
    // Only processes with a unit departing from normal in a way a run could weigh are
    // looked at: a run must be longer than all the normal units departing that way
    // (`rate · units`, [`run_evidence`]), so a departure that frequent in normal runs can
    // never count in a process with fewer units.
    let most = blocks.iter().map(Vec::len).max().unwrap_or(0);
    let weighable: Vec<bool> = shared
        .iter()
        .map(|s| counted(s, most).next().is_some())
        .collect();
    let mut runs: Vec<Run> = Vec::new();
    for (b, rows) in blocks.iter().enumerate() {
        if !rows.iter().any(|r| weighable[r.shared as usize]) {
            continue;
        }
        let mut places: FxMap<(u32, u32, u32, u8), Vec<u32>> = FxMap::default();
        for (i, r) in rows.iter().enumerate() {
            places.entry(place(r, conns)).or_default().push(i as u32);
        }
        let mut keys: Vec<_> = places.keys().copied().collect();
        keys.sort_unstable();
        for k in keys {
            let mut idx = places.remove(&k).unwrap_or_default();
            if idx.len() < RUN_MIN {
                continue;
            }
            idx.sort_by_key(|&i| (rows[i as usize].t_start_unix_ns, rows[i as usize].index));
            find_runs(b as u32, rows, &idx, shared, most, &mut runs);
        }
    }
    let mut filed = Vec::new();
    // Strongest first: a unit already in a run is not taken by a weaker one.
    runs.sort_by(|a, b| {
        b.evidence
            .total_cmp(&a.evidence)
            .then(a.start.cmp(&b.start))
    });
    let mut taken: crate::hash::FxSet<RowRef> = Default::default();
    for run in runs {
        if taken.contains(&run.start) || run.members.iter().any(|m| taken.contains(m)) {
            continue;
        }
        let start = &mut blocks[run.start.0 as usize][run.start.1 as usize];
        let raised = start.score.max(0.8 * run.evidence + 0.2 * start.score);
        if raised < ROOT_MIN || raised <= start.score {
            continue;
        }
        let start_score = start.score;
        let mut own = shared[start.shared as usize].clone();
        own.score = raised;
        // What the run added (see `SharedScore::run_added`).
        own.run_added = raised - start_score;
        shared.push(own);
        start.shared = shared.len() as u32 - 1;
        start.score = raised;
        taken.insert(run.start);
        let under = raised * CONSEQUENCE_FACTOR;
        // A member is as strong as the run's first unit ([`crate::consequence::strength`]):
        // when an earlier incident takes that unit, it takes the run with it.
        let strength = start_score;
        let mut member_shared: FxMap<u32, u32> = FxMap::default();
        for m in run.members {
            let r = &mut blocks[m.0 as usize][m.1 as usize];
            if r.score > under {
                continue;
            }
            let s = *member_shared.entry(r.shared).or_insert_with(|| {
                let mut s = shared[r.shared as usize].clone();
                s.score = under;
                s.run_added = (under - strength).max(0.0);
                shared.push(s);
                shared.len() as u32 - 1
            });
            r.shared = s;
            r.score = under;
            taken.insert(m);
            filed.push((m, run.start));
        }
    }
    filed
}

/// The departures from normal of a shared score that a run of at most `most` units could
/// weigh: (node id, class) and the normal rate.
fn counted(s: &SharedScore, most: usize) -> impl Iterator<Item = ((u64, u8), f64)> + '_ {
    let scored = s.verdict == Verdict::Scored;
    s.effective.iter().filter_map(move |e| {
        let rate = normal_rate(e, s.model_units);
        (scored && rate < 1.0 && rate * (s.model_units as f64) < most as f64)
            .then_some(((e.id, e.class as u8), rate))
    })
}

/// The runs of one place's units (`idx`, in time order) of process `b`: per way of
/// departing from normal (an effective node and its class), each maximal run of
/// consecutive units that depart that way.
fn find_runs(
    b: u32,
    rows: &[Row],
    idx: &[u32],
    shared: &[SharedScore],
    most: usize,
    runs: &mut Vec<Run>,
) {
    // Open runs: (node id, class) → (position of the first unit in `idx`, rate, units).
    let mut open: FxMap<(u64, u8), (usize, f64, u64)> = FxMap::default();
    let n = idx.len();
    let close = |from: usize, to: usize, rate: f64, units: u64, runs: &mut Vec<Run>| {
        // A change: the place behaved otherwise before the run (a run from its first unit
        // is how this place always was in this run, not something that happened to it).
        if from == 0 {
            return;
        }
        let len = to - from;
        let evidence = run_evidence(rate, len, n, units);
        if evidence > 0.0 {
            runs.push(Run {
                start: (b, idx[from]),
                members: idx[from + 1..to].iter().map(|&i| (b, i)).collect(),
                evidence,
            });
        }
    };
    for (pos, &i) in idx.iter().enumerate() {
        let s = &shared[rows[i as usize].shared as usize];
        let here: Vec<((u64, u8), f64)> = counted(s, most).collect();
        // Runs that this unit breaks.
        let ended: Vec<(u64, u8)> = open
            .keys()
            .filter(|k| !here.iter().any(|(h, _)| h == *k))
            .copied()
            .collect();
        for k in ended {
            if let Some((from, rate, units)) = open.remove(&k) {
                close(from, pos, rate, units, runs);
            }
        }
        for (k, rate) in here {
            let e = open.entry(k).or_insert((pos, rate, s.model_units));
            // The least-backed unit of the run bounds it.
            e.1 = e.1.max(rate);
            e.2 = e.2.min(s.model_units);
        }
    }
    let mut rest: Vec<_> = open.into_iter().collect();
    rest.sort_unstable_by_key(|(k, _)| *k);
    for (_, (from, rate, units)) in rest {
        close(from, n, rate, units, runs);
    }
}

/// **Repeats** (see the module's documentation): among the anomalies ([`ROOT_MIN`],
/// scored) whose strongest departure from normal is the same node departing the same way,
/// in processes of one group (`groups`, per process), the first in time ranks first: a
/// repeat that scored higher (its class learned from other units, its tree otherwise a
/// little different) is brought just below it.
pub(crate) fn first_occurrences(
    blocks: &mut [Vec<Row>],
    shared: &mut Vec<SharedScore>,
    groups: &[Option<u32>],
) {
    // (group, node id, class) → [(start, row)].
    let mut same: FxMap<(u32, u64, u8), Vec<(i64, RowRef)>> = FxMap::default();
    for (b, rows) in blocks.iter().enumerate() {
        let Some(g) = groups.get(b).copied().flatten() else {
            continue;
        };
        for (i, r) in rows.iter().enumerate() {
            let s = &shared[r.shared as usize];
            if r.score < ROOT_MIN || s.verdict != Verdict::Scored {
                continue;
            }
            if let Some(e) = s.effective.iter().find(|e| e.class != NodeClass::Common) {
                same.entry((g, e.id, e.class as u8))
                    .or_default()
                    .push((r.t_start_unix_ns, (b as u32, i as u32)));
            }
        }
    }
    let mut keys: Vec<_> = same.keys().copied().collect();
    keys.sort_unstable();
    for k in keys {
        let mut v = same.remove(&k).unwrap_or_default();
        if v.len() < 2 {
            continue;
        }
        v.sort_unstable();
        let at = |r: RowRef| (r.0 as usize, r.1 as usize);
        let best = blocks[at(v[0].1).0][at(v[0].1).1].score;
        let mut set = |r: RowRef, score: f64, blocks: &mut [Vec<Row>]| {
            let row = &mut blocks[at(r).0][at(r).1];
            if row.score != score {
                let mut own = shared[row.shared as usize].clone();
                own.score = score;
                shared.push(own);
                row.shared = shared.len() as u32 - 1;
                row.score = score;
            }
        };
        let below = best * CONSEQUENCE_FACTOR;
        for &(_, r) in &v[1..] {
            if blocks[at(r).0][at(r).1].score > below {
                set(r, below, blocks);
            }
        }
    }
}

/// **A process that matches no group** (see the module's documentation): its first unit
/// carries the process's evidence — a program that ran in none of the `normal_processes`
/// processes the model was learned from, `backing(normal_processes)` — and its other units
/// are filed under it. Returns the filings.
pub(crate) fn unmatched_processes(
    blocks: &mut [Vec<Row>],
    shared: &mut Vec<SharedScore>,
    groups: &[Option<u32>],
    normal_processes: u64,
) -> Vec<(RowRef, RowRef)> {
    let mut filed = Vec::new();
    let score = backing(normal_processes);
    for (b, rows) in blocks.iter_mut().enumerate() {
        if groups.get(b).copied().flatten().is_some() || rows.is_empty() {
            continue;
        }
        let first = (0..rows.len())
            .min_by_key(|&i| (rows[i].t_start_unix_ns, rows[i].tid, rows[i].index))
            .unwrap_or(0);
        let mut by_shared: FxMap<(u32, bool), u32> = FxMap::default();
        for (i, r) in rows.iter_mut().enumerate() {
            if shared[r.shared as usize].verdict != Verdict::NoProcessGroup {
                continue;
            }
            let s = if i == first {
                score
            } else {
                score * CONSEQUENCE_FACTOR
            };
            let id = *by_shared.entry((r.shared, i == first)).or_insert_with(|| {
                let mut own = shared[r.shared as usize].clone();
                own.score = s;
                shared.push(own);
                shared.len() as u32 - 1
            });
            r.shared = id;
            r.score = s;
            if i != first {
                filed.push(((b as u32, i as u32), (b as u32, first as u32)));
            }
        }
    }
    filed
}

/// Sets each incident root's [`Row::incident`]: the number of other processes whose units
/// were filed under it (`caused_by`: unit → root).
pub(crate) fn count_incidents(blocks: &mut [Vec<Row>], caused_by: &FxMap<RowRef, RowRef>) {
    let mut procs: Vec<(RowRef, u32)> = caused_by
        .iter()
        .filter(|(unit, root)| unit.0 != root.0)
        .map(|(unit, root)| (*root, unit.0))
        .collect();
    procs.sort_unstable();
    procs.dedup();
    for w in procs.chunk_by(|a, b| a.0 == b.0) {
        let root = w[0].0;
        if let Some(r) = blocks
            .get_mut(root.0 as usize)
            .and_then(|rows| rows.get_mut(root.1 as usize))
        {
            r.incident = w.len().min(u16::MAX as usize) as u16;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::Effective;
    use crate::trees::{NodeKey, NodeKind, Outcome};
    use crate::units::UnitKind;

    fn row(proc_: u32, index: u32, t: i64, conn: u32, score: f64, shared: u32) -> Row {
        Row {
            score,
            t_start_unix_ns: t,
            t_end_unix_ns: t + 1,
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

    fn departs(id: u64, class: NodeClass, p: Option<f64>) -> Effective {
        Effective {
            id,
            parent: 0,
            key: NodeKey {
                kind: NodeKind::Lib,
                site: id,
                callee: 1,
                outcome: Outcome::Ok,
            },
            class,
            p,
            delta: p.unwrap_or(1.0),
            below: Vec::new(),
        }
    }

    fn shared(score: f64, verdict: Verdict, effective: Vec<Effective>, units: u64) -> SharedScore {
        SharedScore {
            score,
            verdict,
            effective: effective.into_boxed_slice(),
            model_units: units,
            run_added: 0.0,
        }
    }

    fn conns() -> Vec<ConnRow> {
        let c = |l: &str, p: &str| (Default::default(), Some(l.to_string()), Some(p.to_string()));
        vec![
            (Default::default(), None, None),
            c("a:1", "b:2"),
            c("a:1", "b:3"),
        ]
    }

    /// One connection (1) of 40 units: 20 normal, then 20 that all skip the call that
    /// `p` of 634 normal units make (each scoring 0.03); another connection (2) where one
    /// unit skips it.
    fn desynchronized(p: f64) -> (Vec<Vec<Row>>, Vec<SharedScore>) {
        let sh = vec![
            shared(0.0, Verdict::Scored, vec![], 634),
            shared(
                0.03,
                Verdict::Scored,
                vec![departs(7, NodeClass::Missing, Some(p))],
                634,
            ),
        ];
        let mut rows = Vec::new();
        for i in 0..40u32 {
            let s = u32::from(i >= 20);
            rows.push(row(0, i, 10 * i as i64, 1, sh[s as usize].score, s));
            rows.push(row(
                0,
                100 + i,
                10 * i as i64 + 5,
                2,
                0.0,
                u32::from(i == 7),
            ));
        }
        rows[2 * 7 + 1].score = 0.03;
        (vec![rows], sh)
    }

    #[test]
    fn a_persistent_departure_on_one_connection_is_weighed_together_from_where_it_began() {
        let (mut blocks, mut sh) = desynchronized(0.99);
        let filed = persistent_runs(&mut blocks, &mut sh, &conns());
        let rows = &blocks[0];
        // The first unit of the run (connection 1, unit 20) leads; its 19 followers are
        // filed under it; the lone departure on connection 2 is left alone.
        let best = (0..rows.len())
            .max_by(|&a, &b| rows[a].score.total_cmp(&rows[b].score).then(b.cmp(&a)))
            .unwrap();
        assert_eq!(rows[best].index, 20);
        assert!(rows[best].score >= ROOT_MIN, "{}", rows[best].score);
        assert_eq!(filed.len(), 19);
        assert!(filed.iter().all(|(_, root)| *root == (0, best as u32)));
        assert!(rows.iter().filter(|r| r.conn == 2).all(|r| r.score <= 0.03));
        assert_eq!(sh[rows[best].shared as usize].score, rows[best].score);
    }

    #[test]
    fn a_run_of_departures_normal_units_often_make_is_not_evidence() {
        // A call that only 60 % of normal units make, skipped by 20 units in a row among
        // 80: normal behaviour shows such runs (0.4^20 · 80 is small, but 0.4^2 · 80 is
        // not — the run is weighed by its length).
        let (mut blocks, mut sh) = desynchronized(0.6);
        blocks[0].retain(|r| r.conn == 2 || r.index < 22);
        let filed = persistent_runs(&mut blocks, &mut sh, &conns());
        assert!(filed.is_empty());
        assert!(blocks[0].iter().all(|r| r.score <= 0.03));
        // No run as long as all the normal units that departed that way (0.4 · 634) counts,
        // however unlikely under independence.
        assert_eq!(run_evidence(0.4, 20, 80, 634), 0.0);
        assert!(run_evidence(0.01, 7, 80, 634) > 0.9);
        // The evidence grows with the run, and a single unit is no run.
        assert!(run_evidence(0.2, 3, 80, 10) < run_evidence(0.2, 6, 80, 10));
        assert!(run_evidence(0.2, 3, 80, 10) > 0.0);
        assert_eq!(run_evidence(0.01, 1, 80, 634), 0.0);
    }

    #[test]
    fn the_first_occurrence_of_a_failure_ranks_before_its_repeats() {
        // The same failure (node 9 never seen) in three processes of group 0: the first
        // scored 0.943, a repeat in a respawned worker 0.947; another failure stays.
        let never = |s| {
            shared(
                s,
                Verdict::Scored,
                vec![departs(9, NodeClass::New, None)],
                634,
            )
        };
        let mut sh = vec![
            never(0.943),
            never(0.947),
            never(0.9),
            shared(
                0.95,
                Verdict::Scored,
                vec![departs(8, NodeClass::New, None)],
                634,
            ),
        ];
        let mut blocks = vec![
            vec![row(0, 0, 10, 1, 0.943, 0)],
            vec![row(1, 0, 20, 1, 0.947, 1)],
            vec![row(2, 0, 30, 1, 0.9, 2), row(2, 1, 5, 2, 0.95, 3)],
        ];
        first_occurrences(&mut blocks, &mut sh, &[Some(0), Some(0), Some(0)]);
        assert_eq!(blocks[0][0].score, 0.943);
        assert!(blocks[1][0].score < blocks[0][0].score);
        assert_eq!(blocks[2][0].score, 0.9);
        assert_eq!(blocks[2][1].score, 0.95);
        assert_eq!(sh[blocks[1][0].shared as usize].score, blocks[1][0].score);
    }

    #[test]
    fn a_process_that_matches_no_group_is_one_piece_of_evidence() {
        let mut sh = vec![
            shared(1.0, Verdict::NoProcessGroup, vec![], 0),
            shared(
                0.948,
                Verdict::Scored,
                vec![departs(9, NodeClass::New, None)],
                634,
            ),
        ];
        let mut blocks = vec![
            vec![row(0, 0, 10, 1, 0.948, 1)],
            (0..3000)
                .map(|i| row(1, i, 20 + i as i64, 1, 1.0, 0))
                .collect::<Vec<_>>(),
        ];
        // 12 normal processes learned.
        let filed = unmatched_processes(&mut blocks, &mut sh, &[Some(0), None], 12);
        assert_eq!(filed.len(), 2999);
        assert!(filed.iter().all(|(_, root)| *root == (1, 0)));
        assert!((blocks[1][0].score - backing(12)).abs() < 1e-12);
        assert!(blocks[1][1..].iter().all(|r| r.score < blocks[1][0].score));
        // The anomaly of a matched process keeps its score.
        assert_eq!(blocks[0][0].score, 0.948);
    }

    #[test]
    fn incidents_count_the_other_processes_filed_under_their_root() {
        let mut blocks = vec![
            vec![row(0, 0, 10, 1, 0.9, 0), row(0, 1, 11, 1, 0.9, 0)],
            vec![row(1, 0, 12, 1, 0.9, 0)],
            vec![row(2, 0, 13, 1, 0.9, 0), row(2, 1, 14, 1, 0.9, 0)],
        ];
        let mut caused_by = FxMap::default();
        for u in [(0, 1), (1, 0), (2, 0), (2, 1)] {
            caused_by.insert(u, (0, 0));
        }
        count_incidents(&mut blocks, &caused_by);
        assert_eq!(blocks[0][0].incident, 2);
        assert_eq!(blocks[0][1].incident, 0);
    }
}
