//! What `culprit watch` **folds**: units that say nothing new once one of them was
//! reported.
//!
//! A unit that has no model — its process matches no process group of the model
//! ([`Verdict::NoProcessGroup`]: a program or role no normal run had), or its kind of unit
//! on its kind of connection never occurred in normal runs ([`Verdict::NoUnitModel`]: a
//! replica's new link after a reconnection, set up from a call path the normal runs never
//! took) — is one piece of evidence about its process or connection, not about itself: the
//! next unit of the same process or connection kind cannot be judged any better, and a
//! server that handles thousands of requests a second on such a connection would otherwise
//! print thousands of reports a second, burying everything else (and delaying it: every
//! report is written, and each snapshot request queued). The first such unit of each
//! process (no group) or of each process, thread kind, unit kind and connection kind (no
//! unit model) is reported; the later ones are counted in its fold, not reported
//! ([`Folds::fold`]) — as `culprit rank` files a process's later units under its first one.
//!
//! The same holds for a unit whose strongest evidence **repeats** one already reported in
//! its process, on its kind of unit and connection: the same call too long, the same send
//! of a size never sent there, the same node missing or never seen. On a machine busier
//! than during learning, a master's replication writes pass their normal size or
//! duration again and again; the first is news, the next ones are counted in its report
//! (as `culprit rank` ranks a failure's repeats after its first occurrence). A different
//! anomaly — another node, another way of departing — is reported as usual.
//!
//! Counting needs no memory per unit: the units of one thread come in order, so a fold
//! keeps, per thread, the start of the last unit it counted; a unit that starts at or
//! before it was counted already (`--whole` ranks every unit again on every poll).

use crate::connections::ConnKey;
use crate::report::RankedUnit;
use crate::score::{NodeClass, Verdict};
use crate::trees::NodeKey;
use crate::units::UnitKind;
use std::collections::HashMap;

/// What units fold into one report.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum FoldKey {
    /// The units of a process that matches no process group.
    Process { host: String, pid: u32 },
    /// The units of one class that has no model in the process's group.
    Class {
        host: String,
        pid: u32,
        kind: UnitKind,
        main_thread: bool,
        conn: ConnKey,
    },
    /// The units of one process, unit kind and connection kind whose strongest evidence
    /// is the same.
    Same {
        host: String,
        pid: u32,
        kind: UnitKind,
        main_thread: bool,
        conn: ConnKey,
        evidence: Evidence,
    },
}

/// What a unit's strongest evidence is, for [`FoldKey::Same`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Evidence {
    /// A call too long ([`crate::durations`]) at this node.
    Slow(NodeKey),
    /// A send of a size never sent there ([`crate::sizes`]), at this node.
    Size(NodeKey),
    /// Its effective node of largest `Δ`: how it departs, and which node of the class's
    /// tree it is.
    Node(u8, u64),
}

impl Evidence {
    fn of(u: &RankedUnit) -> Option<Evidence> {
        if let Some(s) = &u.slow {
            return Some(Evidence::Slow(s.key));
        }
        if let Some(o) = &u.odd_size {
            return Some(Evidence::Size(o.key));
        }
        let e = u.effective.first()?;
        let class = match e.class {
            NodeClass::New => 0,
            NodeClass::Missing => 1,
            NodeClass::Common => 2,
        };
        Some(Evidence::Node(class, e.id))
    }
}

impl FoldKey {
    /// The fold a unit belongs to, if any (only units with no model fold).
    fn of(u: &RankedUnit) -> Option<FoldKey> {
        let i = &u.info;
        match u.verdict {
            Verdict::NoProcessGroup => Some(FoldKey::Process {
                host: i.host.clone(),
                pid: i.pid,
            }),
            Verdict::NoUnitModel => Some(FoldKey::Class {
                host: i.host.clone(),
                pid: i.pid,
                kind: i.kind,
                main_thread: i.main_thread,
                conn: i.conn.clone(),
            }),
            Verdict::Scored => Some(FoldKey::Same {
                host: i.host.clone(),
                pid: i.pid,
                kind: i.kind,
                main_thread: i.main_thread,
                conn: i.conn.clone(),
                evidence: Evidence::of(u)?,
            }),
            Verdict::BeganBeforeWindow => None,
        }
    }
}

/// One fold: the report that stands for it and the units counted in it.
#[derive(Clone, Debug)]
pub struct Fold {
    /// The id of the unit reported for the fold.
    pub id: String,
    /// What the fold is of: "process" (no group), "connection" (a connection kind with no
    /// model) or "repeat" (the same evidence again).
    pub what: &'static str,
    /// Later units folded into it (not reported).
    pub units: u64,
    /// Per thread: the start (TSC) of the last unit counted.
    last: HashMap<u32, u64>,
}

/// What a fold decided for a unit.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to fold it with (no evidence named): report it as usual.
    Own,
    /// The first unit of its fold: report it (the fold now stands for it).
    First,
    /// A later unit of a fold already reported: counted, not reported.
    Folded,
    /// Counted before (a unit ranked again): nothing to do.
    Seen,
}

/// The folds of a watch.
#[derive(Default)]
pub struct Folds {
    folds: HashMap<FoldKey, Fold>,
}

impl Folds {
    /// Decides for a unit above the threshold, not cut, whose report id would be `id`.
    pub fn fold(&mut self, u: &RankedUnit, id: &str) -> Decision {
        let Some(key) = FoldKey::of(u) else {
            return Decision::Own;
        };
        let (tid, start) = (u.info.tid, u.info.tsc_start);
        match self.folds.get_mut(&key) {
            None => {
                let what = match key {
                    FoldKey::Process { .. } => "process",
                    FoldKey::Class { .. } => "connection",
                    FoldKey::Same { .. } => "repeat",
                };
                self.folds.insert(
                    key,
                    Fold {
                        id: id.to_string(),
                        what,
                        units: 0,
                        last: HashMap::from([(tid, start)]),
                    },
                );
                Decision::First
            }
            Some(f) => match f.last.get(&tid) {
                Some(&t) if start <= t => Decision::Seen,
                _ => {
                    f.last.insert(tid, start);
                    f.units += 1;
                    Decision::Folded
                }
            },
        }
    }

    /// Every fold, by the id of its report.
    pub fn all(&self) -> Vec<&Fold> {
        let mut v: Vec<&Fold> = self.folds.values().collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }

    /// Units folded (not reported) in all.
    pub fn folded(&self) -> u64 {
        self.folds.values().map(|f| f.units).sum()
    }
}

/// The sentence a fold's report carries (`fold` of its JSON object).
pub fn sentence(what: &str) -> String {
    match what {
        "repeat" => "reported once for its evidence: the later units of this process, kind and \
                     connection kind whose strongest evidence is the same are counted in this \
                     report, not reported"
            .to_string(),
        "process" => "reported once for its process: the later units of a process that matches no \
                      process group are counted in this report, not reported"
            .to_string(),
        _ => "reported once for its kind of connection: the later units of this kind on \
              connections of this kind, which have no model, are counted in this report, not \
              reported"
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::UnitInfo;

    fn unit(verdict: Verdict, pid: u32, tid: u32, start: u64, conn: &[u64]) -> RankedUnit {
        RankedUnit {
            info: UnitInfo {
                id: String::new(),
                host: "h".into(),
                pid,
                tid,
                main_thread: pid == tid,
                index: 0,
                kind: UnitKind::Handler,
                fd: None,
                conn: ConnKey(conn.to_vec()),
                local: None,
                peer: None,
                tsc_start: start,
                tsc_end: start + 1,
                t_start_unix_ns: 0,
                t_end_unix_ns: 0,
                lost: 0,
                injections: Vec::new(),
                cut: false,
                cut_at_start: false,
            },
            score: 1.0,
            verdict,
            effective: Vec::new(),
            group: None,
            why: Vec::new(),
            annotated: None,
            caused_by: None,
            model_units: 0,
            slow: None,
            odd_size: None,
            incident: 0,
            ending: None,
        }
    }

    #[test]
    fn units_with_no_model_fold_into_the_first_of_their_process_or_connection_kind() {
        let mut f = Folds::default();
        // Scored units with no evidence named are never folded.
        assert_eq!(
            f.fold(&unit(Verdict::Scored, 1, 1, 5, &[]), "a"),
            Decision::Own
        );
        assert_eq!(
            f.fold(&unit(Verdict::Scored, 1, 1, 6, &[]), "b"),
            Decision::Own
        );
        // A connection kind with no model: its first unit is reported, the next counted.
        let c = |start, conn: &[u64]| unit(Verdict::NoUnitModel, 1, 1, start, conn);
        assert_eq!(f.fold(&c(10, &[7]), "c"), Decision::First);
        assert_eq!(f.fold(&c(11, &[7]), "d"), Decision::Folded);
        assert_eq!(f.fold(&c(12, &[7]), "e"), Decision::Folded);
        // Ranked again (a whole reading): not counted twice.
        assert_eq!(f.fold(&c(11, &[7]), "d"), Decision::Seen);
        // Another kind of connection is another fold.
        assert_eq!(f.fold(&c(13, &[8]), "f"), Decision::First);
        // A process with no group: one report, whatever its units' classes.
        let p = |tid, start| unit(Verdict::NoProcessGroup, 2, tid, start, &[]);
        assert_eq!(f.fold(&p(2, 1), "g"), Decision::First);
        assert_eq!(f.fold(&p(3, 1), "h"), Decision::Folded);
        assert_eq!(f.fold(&p(2, 2), "i"), Decision::Folded);
        let all: Vec<(&str, u64)> = f.all().iter().map(|x| (x.id.as_str(), x.units)).collect();
        assert_eq!(all, vec![("c", 2), ("f", 0), ("g", 2)]);
        assert_eq!(f.folded(), 4);
    }

    fn effective(id: u64, class: NodeClass) -> crate::score::Effective {
        crate::score::Effective {
            id,
            parent: 0,
            key: crate::trees::test_key(id),
            class,
            p: None,
            delta: 1.0,
            below: Vec::new(),
        }
    }

    #[test]
    fn a_repeat_of_the_strongest_evidence_folds_into_its_first_report() {
        let mut f = Folds::default();
        let with = |start, pid, e: crate::score::Effective| {
            let mut u = unit(Verdict::Scored, pid, pid, start, &[7]);
            u.effective = vec![e];
            u
        };
        let missing = || effective(3, NodeClass::Missing);
        assert_eq!(f.fold(&with(1, 1, missing()), "a"), Decision::First);
        assert_eq!(f.fold(&with(2, 1, missing()), "b"), Decision::Folded);
        // The same node departing another way, another node, another process: reported.
        assert_eq!(
            f.fold(&with(3, 1, effective(3, NodeClass::New)), "c"),
            Decision::First
        );
        assert_eq!(
            f.fold(&with(4, 1, effective(4, NodeClass::Missing)), "d"),
            Decision::First
        );
        assert_eq!(f.fold(&with(5, 2, missing()), "e"), Decision::First);
        // A call too long outranks the effective nodes as the evidence.
        let mut slow = with(6, 1, missing());
        slow.slow = Some(crate::durations::SlowCall {
            key: crate::trees::test_key(9),
            dur_ns: 1,
            began_ns: 0,
            normal_max_ns: 0,
            normal_calls: 1,
            normal_units: 1,
        });
        assert_eq!(f.fold(&slow, "f"), Decision::First);
        assert_eq!(f.all().iter().map(|x| x.units).sum::<u64>(), 1);
    }
}
