//! Where a report's delay goes: from a unit's end to the poll that ranked it, in stages.
//!
//! A unit is known complete when its thread's next unit has begun (before, the unit may
//! still go on) and what the thread wrote since is on disk (the reader's live copier saves
//! it within its `--live-interval`, 100 ms by default); then a poll must start, read the
//! directory and rank it. For every unit that a poll finds complete for the first time
//! (reported or not), its delay is split into:
//!
//! - `next_unit`: from its end to the start of its thread's next unit (the thread was
//!   idle, or its next entries were not written yet);
//! - `to_poll`: from then to the start of the first poll after it;
//! - `unseen`: polls that started after it but did not find it complete (the entries were
//!   not on disk yet, or were in a hole left out);
//! - `read` and `rank`: the poll that found it, opening and decoding the directory, and
//!   ranking its units against the model.
//!
//! The stages add up to the unit's end → the end of that poll's ranking; a report is
//! printed right after. The same figures over every unit are summed up when the watch
//! ends ([`Timing::summary`]).

use std::collections::{HashMap, VecDeque};

/// Poll starts remembered, to find the first poll after a unit's end.
const STARTS_KEPT: usize = 4096;
/// Histogram buckets: one a millisecond, the last one for everything longer.
const BUCKETS: usize = 60_000;

/// Durations (ns) in one-millisecond buckets.
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    n: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS],
            n: 0,
        }
    }
}

impl Histogram {
    /// Adds a duration (ns; a negative one counts as 0).
    pub fn add(&mut self, ns: i64) {
        let ms = (ns.max(0) / 1_000_000) as usize;
        self.counts[ms.min(BUCKETS - 1)] += 1;
        self.n += 1;
    }

    /// How many durations were added.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The `q`-quantile (0 to 1) in seconds, to the millisecond above (None: empty).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        let want = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (ms, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Some((ms + 1) as f64 / 1000.0);
            }
        }
        None
    }

    /// `{"n", "p50_s", "p99_s"}`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "n": self.n,
            "p50_s": self.quantile(0.5),
            "p99_s": self.quantile(0.99),
        })
    }
}

/// The stages of one unit's delay, in ns (see the [module documentation](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stages {
    /// End → its thread's next unit began.
    pub next_unit: i64,
    /// → the first poll after that started.
    pub to_poll: i64,
    /// → the poll that found it complete started.
    pub unseen: i64,
    /// That poll's reading of the directory.
    pub read: i64,
    /// That poll's ranking.
    pub rank: i64,
}

impl Stages {
    /// The whole delay: end → ranked.
    pub fn total(&self) -> i64 {
        self.next_unit + self.to_poll + self.unseen + self.read + self.rank
    }

    /// As `culprit watch --json` gives it (`delay_ns` of a report).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "next_unit": self.next_unit,
            "to_poll": self.to_poll,
            "unseen": self.unseen,
            "read": self.read,
            "rank": self.rank,
        })
    }
}

/// One poll's times (ns since the epoch for `start`, durations in ns).
#[derive(Clone, Copy, Debug, Default)]
pub struct PollTimes {
    /// When it started.
    pub start: i64,
    /// Reading the directories.
    pub read: i64,
    /// Ranking.
    pub rank: i64,
}

/// The watch's timing so far.
#[derive(Default)]
pub struct Timing {
    /// Recent poll starts, oldest first.
    starts: VecDeque<i64>,
    polls: u64,
    /// Per poll: reading, ranking, and the time between two poll starts.
    read: Histogram,
    rank: Histogram,
    period: Histogram,
    /// Per unit found complete: each stage, and the whole.
    stages: [Histogram; 5],
    total: Histogram,
    /// Per host, pid and thread: the start (TSC) of the last unit found complete.
    complete_until: HashMap<(String, u32, u32), u64>,
}

/// The stage names, in order.
const NAMES: [&str; 5] = ["next_unit", "to_poll", "unseen", "read", "rank"];

impl Timing {
    /// Notes a poll (before its units).
    pub fn poll(&mut self, p: PollTimes) {
        if let Some(&last) = self.starts.back() {
            self.period.add(p.start - last);
        }
        if self.starts.len() == STARTS_KEPT {
            self.starts.pop_front();
        }
        self.starts.push_back(p.start);
        self.polls += 1;
        self.read.add(p.read);
        self.rank.add(p.rank);
    }

    /// The stages of a unit that ended at `end` and whose thread's next unit began at
    /// `next` (None: not yet), ranked by poll `p` (noted by [`Timing::poll`]).
    pub fn stages(&self, p: &PollTimes, end: i64, next: Option<i64>) -> Stages {
        let end = end.min(p.start);
        let next = next.unwrap_or(end).clamp(end, p.start);
        // The first poll that started at or after `next`.
        let i = self.starts.partition_point(|&s| s < next);
        let first = self.starts.get(i).copied().unwrap_or(p.start).min(p.start);
        Stages {
            next_unit: next - end,
            to_poll: first - next,
            unseen: p.start - first,
            read: p.read,
            rank: p.rank,
        }
    }

    /// The start (TSC) of the last unit of `thread` (host, pid, tid) found complete.
    pub fn complete_until(&self, thread: &(String, u32, u32)) -> Option<u64> {
        self.complete_until.get(thread).copied()
    }

    /// Notes that `thread`'s units up to the one that began at `tsc_start` were found
    /// complete.
    pub fn set_complete_until(&mut self, thread: (String, u32, u32), tsc_start: u64) {
        let u = self.complete_until.entry(thread).or_insert(tsc_start);
        *u = (*u).max(tsc_start);
    }

    /// Counts a unit found complete, with its stages.
    pub fn unit(&mut self, s: &Stages) {
        for (h, v) in self
            .stages
            .iter_mut()
            .zip([s.next_unit, s.to_poll, s.unseen, s.read, s.rank])
        {
            h.add(v);
        }
        self.total.add(s.total());
    }

    /// Everything so far, as JSON: polls (count, read, rank, period), and units found
    /// complete (the whole delay and each stage, p50 and p99 in seconds).
    pub fn summary(&self) -> serde_json::Value {
        let mut stages = serde_json::Map::new();
        for (name, h) in NAMES.iter().zip(&self.stages) {
            stages.insert((*name).to_string(), h.json());
        }
        serde_json::json!({
            "polls": self.polls,
            "poll_read": self.read.json(),
            "poll_rank": self.rank.json(),
            "poll_period": self.period.json(),
            "units": self.total.json(),
            "unit_stages": stages,
        })
    }

    /// [`Timing::summary`] in words, for the end of a watch.
    pub fn text(&self) -> String {
        let f = |h: &Histogram| {
            format!(
                "{:.3}/{:.3} s",
                h.quantile(0.5).unwrap_or(0.0),
                h.quantile(0.99).unwrap_or(0.0)
            )
        };
        let stages: Vec<String> = NAMES
            .iter()
            .zip(&self.stages)
            .map(|(n, h)| format!("{n} {}", f(h)))
            .collect();
        format!(
            "{} polls (one every {}; reading {}, ranking {}); {} units complete, end → ranked {} ({}) — p50/p99",
            self.polls,
            f(&self.period),
            f(&self.read),
            f(&self.rank),
            self.total.count(),
            f(&self.total),
            stages.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_read_to_the_millisecond_above() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile(0.5), None);
        for ms in 0..100 {
            h.add(ms * 1_000_000 + 500_000);
        }
        assert_eq!(h.quantile(0.5), Some(0.05));
        assert_eq!(h.quantile(0.99), Some(0.099));
        h.add(-5);
        h.add(i64::MAX);
        assert_eq!(h.count(), 102);
        assert_eq!(h.quantile(1.0), Some(BUCKETS as f64 / 1000.0));
    }

    #[test]
    fn a_delay_is_split_at_the_next_unit_and_the_polls_after_it() {
        let mut t = Timing::default();
        let ms = 1_000_000;
        for start in [0, 250 * ms, 500 * ms] {
            t.poll(PollTimes {
                start,
                read: 10 * ms,
                rank: 20 * ms,
            });
        }
        let p = PollTimes {
            start: 750 * ms,
            read: 30 * ms,
            rank: 40 * ms,
        };
        t.poll(p);
        // Ended at 100 ms, next unit at 300 ms: the poll at 500 ms was the first after,
        // missed it; found by the poll at 750 ms.
        let s = t.stages(&p, 100 * ms, Some(300 * ms));
        assert_eq!(
            s,
            Stages {
                next_unit: 200 * ms,
                to_poll: 200 * ms,
                unseen: 250 * ms,
                read: 30 * ms,
                rank: 40 * ms,
            }
        );
        assert_eq!(s.total(), 720 * ms);
        // No next unit known: it counts from the end; a poll at the very end sees it.
        let s = t.stages(&p, 600 * ms, None);
        assert_eq!((s.next_unit, s.to_poll, s.unseen), (0, 150 * ms, 0));
        // An end after the poll's start (clocks apart): nothing before the poll.
        let s = t.stages(&p, 800 * ms, Some(900 * ms));
        assert_eq!((s.next_unit, s.to_poll, s.unseen), (0, 0, 0));
        let th = ("h".to_string(), 1, 1);
        assert_eq!(t.complete_until(&th), None);
        t.set_complete_until(th.clone(), 10);
        t.set_complete_until(th.clone(), 5);
        assert_eq!(t.complete_until(&th), Some(10));
        t.unit(&s);
        assert_eq!(t.summary()["units"]["n"], 1);
    }
}
