//! One clock for every host: the views that put events of several hosts on one time axis
//! — `culprit export` (Perfetto's tracks), `culprit rank`'s causality (what happened
//! after an anomaly, on other processes) — read each host's times through its
//! correction ([`super::offsets`]: offset and drift against the reference host, fitted to
//! the bounds of the matched messages between hosts).
//!
//! The correction is estimated from the flows of the streamed pass ([`super::streamed`];
//! [`Crossings`] keeps 24 bytes per message between two hosts, nothing for messages within
//! one) and **folded into a copy of each process's calibration** ([`corrected`]): a
//! calibration is a line from TSC to time and the correction a line from time to time, so
//! their composition is again a calibration, and every stage that converts through
//! `ProcessTrace::calib` — units, durations, consequences, slices — sees corrected times
//! without a change. The traces' own calibrations (`crate::trace::clock`) are left as they
//! are: the estimate is always made from them. On one host nothing is estimated or changed.

use super::offsets::HostOffset;
use super::streamed::StreamFlow;
use crate::decode::TraceSet;
use crate::error::{Error, Result};
use bufpool::Calibration;
use std::path::Path;

/// The matched messages between hosts of a streamed pass, as bounds on their clocks.
pub struct Crossings<'a> {
    set: &'a TraceSet,
    several_hosts: bool,
    /// (sending process, send start, receiving process, receive end), Unix ns on each
    /// process's own clock.
    v: Vec<(u32, i64, u32, i64)>,
}

impl<'a> Crossings<'a> {
    /// None yet, for the processes of `set`.
    pub fn new(set: &'a TraceSet) -> Crossings<'a> {
        Crossings {
            set,
            several_hosts: hosts(set) > 1,
            v: Vec::new(),
        }
    }

    /// Keeps `f` if it went from one host to another.
    pub fn add(&mut self, f: &StreamFlow) {
        if !self.several_hosts {
            return;
        }
        let (ps, pr) = (
            &self.set.processes[f.send.proc as usize],
            &self.set.processes[f.recv.proc as usize],
        );
        if ps.host != pr.host {
            let s0 = ps.calib.tsc_to_unix_ns(f.send.start) as i64;
            self.v.push((f.send.proc, s0, f.recv.proc, f.recv_end_ns));
        }
    }

    /// Every host's correction (empty on one host).
    pub fn fit(&self) -> Vec<HostOffset> {
        if !self.several_hosts {
            return Vec::new();
        }
        let host = |p: u32| self.set.processes[p as usize].host.as_str();
        let cross: Vec<(&str, i64, &str, i64)> = self
            .v
            .iter()
            .map(|&(a, s0, b, r1)| (host(a), s0, host(b), r1))
            .collect();
        super::offsets::fit_hosts(self.set.processes.iter().map(|p| p.host.as_str()), &cross).0
    }
}

/// How many hosts `set` holds.
pub fn hosts(set: &TraceSet) -> usize {
    let mut h: Vec<&str> = set.processes.iter().map(|p| p.host.as_str()).collect();
    h.sort_unstable();
    h.dedup();
    h.len()
}

/// Every host's correction, from one streamed pass over `set` (spilling to `spill_dir`;
/// in memory, by [`super::analyze`], if no file can be made there). Empty on one host.
pub fn estimate(set: &TraceSet, spill_dir: &Path) -> Result<Vec<HostOffset>> {
    if hosts(set) <= 1 {
        return Ok(Vec::new());
    }
    let mut c = Crossings::new(set);
    match super::streamed::stream_flows(set, spill_dir, |f| c.add(&f)) {
        Ok(_) => Ok(c.fit()),
        Err(Error::Io { path, .. }) if path == spill_dir => Ok(super::analyze(set)?.offsets),
        Err(e) => Err(e),
    }
}

/// `c` with `o`'s correction folded in: it converts a TSC value to the reference host's
/// time (`t + o.correction_ns(t)` for the time `t` that `c` gives).
pub fn fold(c: Calibration, o: &HostOffset) -> Calibration {
    if !o.offset_ns.is_finite() {
        return c;
    }
    let b = if o.drift_ppm.is_finite() {
        o.drift_ppm * 1e-6
    } else {
        0.0
    };
    let shift = |t: u64| (t as i64).saturating_add(o.correction_ns(t as i64)).max(0) as u64;
    let span = c.monotonic1_ns.saturating_sub(c.monotonic0_ns);
    Calibration {
        realtime0_ns: shift(c.realtime0_ns),
        realtime1_ns: shift(c.realtime1_ns),
        monotonic1_ns: c.monotonic0_ns + (span as f64 * (1.0 + b)).round() as u64,
        ..c
    }
}

/// A copy of `set` whose processes convert their times to the reference host's
/// ([`fold`]); hosts without a correction are left as they are.
pub fn corrected(set: &TraceSet, offsets: &[HostOffset]) -> TraceSet {
    let by_host: std::collections::BTreeMap<&str, &HostOffset> =
        offsets.iter().map(|o| (o.host.as_str(), o)).collect();
    let mut out = set.clone();
    for p in &mut out.processes {
        if let Some(o) = by_host.get(p.host.as_str()) {
            p.calib = fold(p.calib, o);
        }
    }
    out
}

/// One line per corrected host, for a user: `hb: −100.012 ms ± 15.0 µs, drift 200.00 ±
/// 3.10 ppm against ha (4000 messages)`; hosts placed by no message say so.
pub fn describe(offsets: &[HostOffset]) -> Vec<String> {
    offsets
        .iter()
        .filter(|o| o.host != o.reference)
        .map(|o| {
            if !o.uncertainty_ns.is_finite() && o.messages == 0 {
                return format!(
                    "{}: no message to or from {} (clock as recorded)",
                    o.host, o.reference
                );
            }
            format!(
                "{}: {:+.3} ms ± {:.1} µs, drift {:+.2} ± {:.2} ppm against {} ({} messages{})",
                o.host,
                o.offset_ns / 1e6,
                o.uncertainty_ns / 1e3,
                o.drift_ppm,
                o.drift_uncertainty_ppm,
                o.reference,
                o.messages,
                if o.inconsistent { ", inconsistent" } else { "" }
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folded_calibration_converts_as_the_correction_says() {
        let c = Calibration {
            tsc0: 1_000_000,
            realtime0_ns: 1_700_000_000_000_000_000,
            monotonic0_ns: 5_000_000_000,
            tsc1: 3_001_000_000,
            realtime1_ns: 1_700_000_001_000_000_000,
            monotonic1_ns: 6_000_000_000,
        };
        let o = HostOffset {
            host: "b".into(),
            reference: "a".into(),
            offset_ns: -100_000_000.0,
            uncertainty_ns: 10_000.0,
            bounds_ns: (-100_010_000.0, -99_990_000.0),
            at_ns: 1_700_000_000_500_000_000,
            drift_ppm: 200.0,
            drift_uncertainty_ppm: 1.0,
            messages: 10,
            inconsistent: false,
        };
        let f = fold(c, &o);
        for tsc in [1_000_000u64, 900_000_000, 3_001_000_000, 30_000_000_000] {
            let t = c.tsc_to_unix_ns(tsc) as i64;
            let want = t + o.correction_ns(t);
            let got = f.tsc_to_unix_ns(tsc) as i64;
            assert!((got - want).abs() <= 10, "tsc {tsc}: {got} vs {want}");
        }
    }
}
