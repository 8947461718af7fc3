//! `culprit watch`: score the execution units of a recording while it runs, and report
//! each anomalous unit once, soon after it ends.
//!
//! Every poll opens the trace directories again (the reader's live data path puts entries
//! on disk within its `--live-interval`), ranks them against the model as `culprit rank`
//! does, and reports the units that are complete (the thread went on past them: not `cut`
//! by the end of what is on disk), score at or above the threshold, and were not reported
//! before. A unit's identity is its host, process (pid and start time), thread and first
//! timestamp: indices within a thread move when a flight recorder rotates the oldest units
//! away. Each poll costs a ranking of what the directory holds: bounded by the flight
//! recorder's budget (`--keep`), not by how long the recording has run.

use crate::localize::options::Options;
use crate::model::Model;
use crate::trace::load::TraceSet;
use crate::Result;
use std::collections::HashSet;
use std::path::PathBuf;

/// How `culprit watch` reports.
#[derive(Clone)]
pub struct WatchOptions {
    /// Report units scoring at least this.
    pub threshold: f64,
    /// The ranking's options (score kind, threads).
    pub rank: Options,
}

/// One report: a unit of `culprit rank --json`'s shape, and when it was reported.
#[derive(Clone, Debug)]
pub struct Alert {
    /// The unit, as `culprit rank --json` gives it, plus `reported_unix_ns`.
    pub json: serde_json::Value,
    /// Its first line of *why*, for the text output.
    pub text: String,
    /// The unit's end (ns since the epoch).
    pub end_unix_ns: i64,
    /// When this poll reported it.
    pub reported_unix_ns: i64,
}

/// What one poll saw.
#[derive(Clone, Debug, Default)]
pub struct Poll {
    /// New reports, highest score first.
    pub alerts: Vec<Alert>,
    /// Units ranked in this poll.
    pub units: usize,
    /// Processes found.
    pub processes: usize,
}

/// The state of a watch over some trace directories.
pub struct Watcher {
    model: Model,
    dirs: Vec<PathBuf>,
    opts: WatchOptions,
    reported: HashSet<(String, u32, u32, u64)>,
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

impl Watcher {
    /// A watch of `dirs` against `model`.
    pub fn new(model: Model, dirs: Vec<PathBuf>, opts: WatchOptions) -> Watcher {
        Watcher {
            model,
            dirs,
            opts,
            reported: HashSet::new(),
        }
    }

    /// Units reported so far.
    pub fn reported(&self) -> usize {
        self.reported.len()
    }

    /// Ranks what the directories hold now and returns the units not reported before.
    /// A directory that is not (yet) a trace is an error the caller may wait out.
    pub fn poll(&mut self) -> Result<Poll> {
        let set = TraceSet::open_quiet(&self.dirs, true)?;
        let processes = set.processes.len();
        if processes == 0 {
            return Ok(Poll::default());
        }
        let rep = crate::rank(&self.model, &set, &self.opts.rank)?;
        let mut poll = Poll {
            units: rep.len(),
            processes,
            ..Default::default()
        };
        let reported_unix_ns = now_ns();
        for u in rep.iter() {
            if u.score < self.opts.threshold {
                // Ranked highest first: nothing below is above the threshold.
                break;
            }
            if u.info.cut {
                continue;
            }
            let key = (
                u.info.host.clone(),
                u.info.pid,
                u.info.tid,
                u.info.tsc_start,
            );
            if !self.reported.insert(key) {
                continue;
            }
            let mut json = rep.unit_json(&u);
            json["reported_unix_ns"] = serde_json::json!(reported_unix_ns);
            let text = format!(
                "{:.3} {} {} {}",
                u.score,
                u.info.id,
                u.info.kind.name(),
                u.why.first().map(String::as_str).unwrap_or("")
            );
            poll.alerts.push(Alert {
                json,
                text,
                end_unix_ns: u.info.t_end_unix_ns,
                reported_unix_ns,
            });
        }
        Ok(poll)
    }
}
