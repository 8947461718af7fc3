//! Where and when each ranked unit ran, without making its full form: for a caller that
//! looks at every unit of a ranking (`culprit watch` numbers the units of each thread and
//! times each one that completed) but reads the full form of a few.

use super::Report;
use super::Row;

/// Where and when a ranked unit ran ([`Report::heads`]).
#[derive(Clone, Copy, Debug)]
pub struct UnitHead<'a> {
    /// Host.
    pub host: &'a str,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Index of the unit in its thread (of what was read).
    pub index: u32,
    /// Start, TSC.
    pub tsc_start: u64,
    /// Start, wall clock (ns since the epoch).
    pub t_start_unix_ns: i64,
    /// End, wall clock (ns since the epoch).
    pub t_end_unix_ns: i64,
    /// Cut short by the end of what was read.
    pub cut: bool,
    /// Began before what was read (or the trace's window).
    pub cut_at_start: bool,
    /// Its score.
    pub score: f64,
}

impl Report {
    /// Every ranked unit, in no particular order, as where and when it ran: what
    /// [`Report::unit`] gives without its strings, effective nodes or ranking order.
    pub fn heads(&self) -> Vec<UnitHead<'_>> {
        if self.rest.iter().all(Vec::is_empty) {
            return self
                .units
                .iter()
                .map(|u| UnitHead {
                    host: &u.info.host,
                    pid: u.info.pid,
                    tid: u.info.tid,
                    index: u.info.index,
                    tsc_start: u.info.tsc_start,
                    t_start_unix_ns: u.info.t_start_unix_ns,
                    t_end_unix_ns: u.info.t_end_unix_ns,
                    cut: u.info.cut,
                    cut_at_start: u.info.cut_at_start,
                    score: u.score,
                })
                .collect();
        }
        self.rest
            .iter()
            .flatten()
            .map(|r| {
                let (host, pid) = &self.procs[r.proc_ as usize];
                UnitHead {
                    host,
                    pid: *pid,
                    tid: r.tid,
                    index: r.index,
                    tsc_start: r.tsc_start,
                    t_start_unix_ns: r.t_start_unix_ns,
                    t_end_unix_ns: r.t_end_unix_ns,
                    cut: r.flags & Row::CUT != 0,
                    cut_at_start: r.flags & Row::CUT_AT_START != 0,
                    score: r.score,
                }
            })
            .collect()
    }
}
