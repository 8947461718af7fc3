//! **Consequences** filed under their root: a ranking shows the earliest anomaly of a process
//! and, right after it, the units it caused, instead of letting its consequences outrank it.
//!
//! Measured on the fault suite (`bench/localize/`) and on the Python cluster of issue 13:
//! ~100 ms after a connection reset, a daemon reconnects; the units on the new connection
//! have no model (the paper's rule: "no model → 1"), so dozens of units, all later than the
//! root and all caused by it, outrank it; and the peer that saw the connection break, the
//! client whose request failed, score as high as the unit where it broke. So:
//!
//! 1. **Roots.** In each process the root is the earliest unit that was scored against a
//!    model and reached [`ROOT_MIN`] — the first thing the process did that its model calls
//!    abnormal.
//! 2. **Consequences in the process.** A later unit of the same process that reached
//!    [`ROOT_MIN`] too, or that has no model (its class never occurred in normal runs) and
//!    is on a connection whose first unit started after the root began (a reconnect, a new
//!    client retrying), is a consequence of the root.
//! 3. **Consequences across processes.** Two processes' incidents are one when a unit of
//!    one (root or consequence) is on the same TCP connection as a unit of the other — the
//!    local and peer addresses of one are the peer and local addresses of the other — that
//!    started no later, or when a [`CauseSource`] (message matching: *this unit received
//!    what that unit sent*) says a unit of one received from a unit of the other. The
//!    incident whose root is earlier takes the other: its root, and everything under it,
//!    becomes a consequence of the earlier root. A process with no root of its own files
//!    its anomalous and unmodelled units under the incident of the process at the other end
//!    of their connection, if that one's root began before them (the peer that reconnects
//!    after the root broke their connection).
//!
//! A consequence ranks right after its root — its score becomes the root's times
//! [`CONSEQUENCE_FACTOR`] — and names it (`caused_by`). The root keeps its own score: an
//! incident ranks by the evidence of the unit where it began.

use crate::hash::FxMap;
use crate::report::{ConnRow, Row, RowRef, SharedScore};
use crate::score::Verdict;

/// The least score of a root (an anomaly that can have consequences).
pub const ROOT_MIN: f64 = 0.75;

/// A consequence ranks right after its root: its score is the root's times this.
pub const CONSEQUENCE_FACTOR: f64 = 0.999_999;

/// A unit, as a [`CauseSource`] names it: host, pid, thread and index (its id's parts).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UnitRef {
    /// Host.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Index of the unit in its thread.
    pub index: u32,
}

/// Cross-process causes: which units sent what a unit received. Implemented by message
/// matching (send → receive, byte-level) when it is available; the consequence step works
/// without it, from what one process's trace tells.
pub trait CauseSource: Send + Sync {
    /// The units that sent what `unit` received (any order; unknown units are ignored).
    fn received_from(&self, unit: &UnitRef) -> Vec<UnitRef>;
}

/// Files consequences under their roots (see the module's documentation): changes the
/// scores of the consequences in `blocks` (one vector of rows per process, whose process
/// is `procs[row.proc_]`; `conns` are the connections the rows refer to), adding the
/// shared scores they now use to `shared`, and returns each consequence's root.
pub(crate) fn file_consequences(
    blocks: &mut [Vec<Row>],
    shared: &mut Vec<SharedScore>,
    procs: &[(String, u32)],
    conns: &[ConnRow],
    causes: Option<&dyn CauseSource>,
) -> FxMap<RowRef, RowRef> {
    let verdict = |r: &Row, shared: &[SharedScore]| shared[r.shared as usize].verdict;
    // 1 and 2: per process, its root and the rows of its incident (the root first).
    let mut incidents: Vec<Vec<u32>> = Vec::with_capacity(blocks.len());
    for rows in blocks.iter() {
        let root = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.score >= ROOT_MIN && verdict(r, shared) == Verdict::Scored)
            .min_by_key(|(i, r)| (r.t_start_unix_ns, *i))
            .map(|(i, r)| (i, r.t_start_unix_ns));
        let Some((root, t_root)) = root else {
            incidents.push(Vec::new());
            continue;
        };
        // When each connection of the process was first seen (its first unit's start).
        let mut first: FxMap<u32, i64> = FxMap::default();
        for r in rows.iter() {
            let t = first.entry(r.conn).or_insert(r.t_start_unix_ns);
            *t = (*t).min(r.t_start_unix_ns);
        }
        let mut members = vec![root as u32];
        for (i, r) in rows.iter().enumerate() {
            if i == root || r.t_start_unix_ns < t_root {
                continue;
            }
            let later_anomaly = r.score >= ROOT_MIN && verdict(r, shared) == Verdict::Scored;
            let new_conn = verdict(r, shared) == Verdict::NoUnitModel
                && r.conn != 0
                && first.get(&r.conn).is_some_and(|&t| t >= t_root);
            if later_anomaly || new_conn {
                members.push(i as u32);
            }
        }
        incidents.push(members);
    }
    // 3: processes whose incidents are one, as a forest: each points to the process whose
    // root is earlier.
    let t_root = |b: usize, blocks: &[Vec<Row>]| {
        incidents[b]
            .first()
            .map(|&i| blocks[b][i as usize].t_start_unix_ns)
    };
    let mut parent: Vec<usize> = (0..blocks.len()).collect();
    fn find(parent: &mut [usize], mut b: usize) -> usize {
        while parent[b] != b {
            parent[b] = parent[parent[b]];
            b = parent[b];
        }
        b
    }
    let mut links: Vec<(usize, usize)> = Vec::new();
    // The process each connection belongs to (connections are per process), and the
    // processes with a root by the addresses of their connections.
    let mut owner: Vec<Option<usize>> = vec![None; conns.len()];
    for (b, rows) in blocks.iter().enumerate() {
        if incidents[b].is_empty() {
            continue;
        }
        for r in rows {
            if let Some(o) = owner.get_mut(r.conn as usize) {
                *o = Some(b);
            }
        }
    }
    let mut by_addr: FxMap<(&str, &str), Vec<usize>> = FxMap::default();
    for (c, o) in owner.iter().enumerate() {
        if let (Some(b), (_, Some(l), Some(p))) = (o, &conns[c]) {
            by_addr
                .entry((l.as_str(), p.as_str()))
                .or_default()
                .push(*b);
        }
    }
    // The processes with a root earlier than `t` that have a unit on the other end of
    // connection `conn` (of process `b`).
    let other_end = |b: usize, conn: u32, t: i64, blocks: &[Vec<Row>]| -> Vec<usize> {
        let (_, Some(l), Some(p)) = &conns[conn as usize] else {
            return Vec::new();
        };
        let mut out: Vec<usize> = by_addr
            .get(&(p.as_str(), l.as_str()))
            .into_iter()
            .flatten()
            .copied()
            .filter(|&a| a != b && t_root(a, blocks).is_some_and(|ta| ta <= t))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    };
    // Units of processes without a root (no anomaly of their own that reached ROOT_MIN)
    // that are anomalous or unmodelled: consequences of the incident at the other end.
    let mut orphans: Vec<(RowRef, usize)> = Vec::new();
    for (b, rows) in blocks.iter().enumerate() {
        if incidents[b].is_empty() {
            for (i, r) in rows.iter().enumerate() {
                let v = verdict(r, shared);
                let odd =
                    (r.score >= ROOT_MIN && v == Verdict::Scored) || v == Verdict::NoUnitModel;
                if odd && r.conn != 0 {
                    if let Some(&a) = other_end(b, r.conn, r.t_start_unix_ns, blocks).first() {
                        orphans.push(((b as u32, i as u32), a));
                    }
                }
            }
        } else {
            for &i in &incidents[b] {
                let r = &blocks[b][i as usize];
                if r.conn != 0 {
                    for a in other_end(b, r.conn, r.t_start_unix_ns, blocks) {
                        links.push((a, b));
                    }
                }
            }
        }
    }
    if let Some(src) = causes {
        let mut by_ref: FxMap<UnitRef, (usize, i64)> = FxMap::default();
        for (b, members) in incidents.iter().enumerate() {
            for &i in members {
                let r = &blocks[b][i as usize];
                by_ref.insert(unit_ref(procs, r), (b, r.t_start_unix_ns));
            }
        }
        for (b, members) in incidents.iter().enumerate() {
            for &i in members {
                let r = &blocks[b][i as usize];
                for from in src.received_from(&unit_ref(procs, r)) {
                    if let Some(&(a, t)) = by_ref.get(&from) {
                        if a != b && t <= r.t_start_unix_ns {
                            links.push((a, b));
                        }
                    }
                }
            }
        }
    }
    for (a, b) in links {
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        if ra == rb {
            continue;
        }
        // The incident whose root is earlier takes the other (ties: the lower index).
        let (ta, tb) = (t_root(ra, blocks), t_root(rb, blocks));
        if (ta, ra) <= (tb, rb) {
            parent[rb] = ra;
        } else {
            parent[ra] = rb;
        }
    }
    // Every member but the root of its whole incident is a consequence of that root.
    let mut caused_by: FxMap<RowRef, RowRef> = FxMap::default();
    // (shared score, root score) → the shared score of consequences of that root.
    let mut demoted: FxMap<(u32, u64), u32> = FxMap::default();
    for b in 0..blocks.len() {
        let top = find(&mut parent, b);
        let Some(&root_i) = incidents[top].first() else {
            continue;
        };
        let root = (top as u32, root_i);
        let root_score = blocks[top][root_i as usize].score;
        // Right after the root: lower for an unmodelled unit (1), higher for a weaker
        // anomaly it caused — either way next to it.
        let score = root_score * CONSEQUENCE_FACTOR;
        for &i in &incidents[b] {
            if (b as u32, i) == root {
                continue;
            }
            let row = &mut blocks[b][i as usize];
            let k = (row.shared, score.to_bits());
            let s = *demoted.entry(k).or_insert_with(|| {
                let mut s = shared[row.shared as usize].clone();
                s.score = score;
                shared.push(s);
                shared.len() as u32 - 1
            });
            row.score = score;
            row.shared = s;
            caused_by.insert((b as u32, i), root);
        }
    }
    for (at, a) in orphans {
        let top = find(&mut parent, a);
        let Some(&root_i) = incidents[top].first() else {
            continue;
        };
        let score = blocks[top][root_i as usize].score * CONSEQUENCE_FACTOR;
        let row = &mut blocks[at.0 as usize][at.1 as usize];
        let k = (row.shared, score.to_bits());
        let s = *demoted.entry(k).or_insert_with(|| {
            let mut s = shared[row.shared as usize].clone();
            s.score = score;
            shared.push(s);
            shared.len() as u32 - 1
        });
        row.score = score;
        row.shared = s;
        caused_by.insert(at, (top as u32, root_i));
    }
    caused_by
}

fn unit_ref(procs: &[(String, u32)], r: &Row) -> UnitRef {
    let (host, pid) = &procs[r.proc_ as usize];
    UnitRef {
        host: host.clone(),
        pid: *pid,
        tid: r.tid,
        index: r.index,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        }
    }

    fn shared(score: f64, verdict: Verdict) -> SharedScore {
        SharedScore {
            score,
            verdict,
            effective: Box::new([]),
            model_units: 0,
        }
    }

    fn conns() -> Vec<ConnRow> {
        let c = |l: &str, p: &str| (Default::default(), Some(l.to_string()), Some(p.to_string()));
        vec![
            (Default::default(), None, None),
            c("a:1", "b:2"),
            c("a:1", "b:3"),
            c("a:1", "b:4"),
            // The other end of connection 1.
            c("b:2", "a:1"),
        ]
    }

    #[test]
    fn later_anomalies_and_units_on_connections_made_after_the_root_are_filed_under_it() {
        // Shared scores: 0 normal, 1 the anomaly, 2 no unit model.
        let mut sh = vec![
            shared(0.1, Verdict::Scored),
            shared(0.8, Verdict::Scored),
            shared(1.0, Verdict::NoUnitModel),
        ];
        let mut blocks = vec![vec![
            row(0, 0, 10, 1, 0.1, 0),
            // Unmodelled, on a connection older than the root: not a consequence.
            row(0, 1, 15, 2, 1.0, 2),
            row(0, 2, 20, 1, 0.8, 1),
            row(0, 3, 25, 2, 1.0, 2),
            // On connection 3, first seen after the root: consequences.
            row(0, 4, 30, 3, 1.0, 2),
            row(0, 5, 40, 3, 1.0, 2),
            // A later anomaly of the process.
            row(0, 6, 50, 1, 0.8, 1),
            row(0, 7, 60, 1, 0.1, 0),
        ]];
        let procs = vec![("h".to_string(), 7)];
        let c = file_consequences(&mut blocks, &mut sh, &procs, &conns(), None);
        let mut got: Vec<_> = c.into_iter().collect();
        got.sort();
        assert_eq!(
            got,
            vec![((0, 4), (0, 2)), ((0, 5), (0, 2)), ((0, 6), (0, 2))]
        );
        let rows = &blocks[0];
        assert!(rows[4].score < 0.8 && rows[4].score > 0.799);
        assert_eq!(sh[rows[4].shared as usize].score, rows[4].score);
        assert_eq!(sh[rows[4].shared as usize].verdict, Verdict::NoUnitModel);
        assert_eq!(rows[4].shared, rows[5].shared);
        assert_eq!(
            (rows[1].score, rows[3].score, rows[2].score),
            (1.0, 1.0, 0.8)
        );
    }

    #[test]
    fn the_other_end_of_a_connection_joins_the_earlier_incident() {
        let mut sh = vec![shared(0.7, Verdict::Scored), shared(0.9, Verdict::Scored)];
        // Process 0's root at t 10 on a:1 ⇄ b:2; process 1's, stronger, at t 12 on the
        // other end of that connection: one incident, rooted at the earlier one.
        let mut blocks = vec![
            vec![row(0, 0, 10, 1, 0.7, 0)],
            vec![row(1, 0, 12, 4, 0.9, 1)],
        ];
        let procs = vec![("h".to_string(), 1), ("h".to_string(), 2)];
        let c = file_consequences(&mut blocks, &mut sh, &procs, &conns(), None);
        assert_eq!(c.len(), 1);
        assert_eq!(c.get(&(1, 0)), Some(&(0, 0)));
        assert!((blocks[1][0].score - 0.7 * CONSEQUENCE_FACTOR).abs() < 1e-12);
        // The other way round in time: process 1's root came first.
        let mut blocks = vec![
            vec![row(0, 0, 14, 1, 0.7, 0)],
            vec![row(1, 0, 12, 4, 0.9, 1)],
        ];
        let c = file_consequences(&mut blocks, &mut sh, &procs, &conns(), None);
        assert_eq!(c.get(&(0, 0)), Some(&(1, 0)));
    }

    struct Matched(Vec<(UnitRef, UnitRef)>);

    impl CauseSource for Matched {
        fn received_from(&self, unit: &UnitRef) -> Vec<UnitRef> {
            self.0
                .iter()
                .filter(|(to, _)| to == unit)
                .map(|(_, from)| from.clone())
                .collect()
        }
    }

    #[test]
    fn a_cause_source_joins_incidents_of_processes_with_no_connection_in_common() {
        let mut sh = vec![shared(0.9, Verdict::Scored), shared(0.7, Verdict::Scored)];
        let mut blocks = vec![
            vec![row(0, 0, 10, 2, 0.9, 0)],
            vec![row(1, 0, 20, 3, 0.7, 1)],
        ];
        let procs = vec![("h".to_string(), 1), ("h".to_string(), 2)];
        let none = file_consequences(&mut blocks.clone(), &mut sh.clone(), &procs, &conns(), None);
        assert!(none.is_empty());
        let r = |pid, index| UnitRef {
            host: "h".into(),
            pid,
            tid: 1,
            index,
        };
        let src = Matched(vec![(r(2, 0), r(1, 0))]);
        let c = file_consequences(&mut blocks, &mut sh, &procs, &conns(), Some(&src));
        assert_eq!(c.len(), 1);
        assert_eq!(c.get(&(1, 0)), Some(&(0, 0)));
        assert!((blocks[1][0].score - 0.9 * CONSEQUENCE_FACTOR).abs() < 1e-12);
    }
}
