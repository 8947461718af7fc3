//! Clocks: how a TSC value of a trace becomes a time. Every view (messages, timeline,
//! export, the localizer's durations and causality, dump) converts through the
//! calibration this module gives each process ([`crate::decode::ProcessTrace::calib`]);
//! none reads a manifest's calibration itself.
//!
//! The rules:
//! 1. **A clock domain is one boot of one host** (the manifest's host and `boot_id`):
//!    every process of it reads one TSC, so every recording of it is converted by one
//!    function — separately started recorders never disagree about the order of two
//!    entries of one host.
//! 2. **That function comes from the clock snapshots of all its recordings**
//!    (`reader::clocksnap`: TSC against `CLOCK_REALTIME` and `CLOCK_MONOTONIC`, taken at
//!    each recording's start, every second and at its end): the rate is the TSC ticks
//!    between the domain's first and last snapshot over the `CLOCK_MONOTONIC` time between
//!    them (the widest span gives the best rate; monotonic, because NTP may step the
//!    real-time clock), and the origin the first snapshot's `CLOCK_REALTIME`. A 20 ms pool
//!    calibration errs by parts per million — tens of µs per second between recorders —,
//!    a span of seconds by far less.
//! 3. **A recording without a boot id or snapshots spanning at least [`MIN_SPAN_NS`]**
//!    (traces made before they were recorded, a recording shorter than that) is its own
//!    domain, converted by its pool's calibration.
//! 4. **The choice is made once, when the traces are opened** ([`domain_calibrations`],
//!    called by `TraceSet::open`), before any value is converted, and never changes after.
//!    Corrections between hosts (offsets and drifts estimated from messages,
//!    `crate::messages::offsets`) are applied by the views on top of these
//!    (`HostOffset::correction_ns`), never folded into them.

use bufpool::Calibration;
use reader::manifest::{ClockSnapshot, Manifest};
use std::collections::BTreeMap;

/// Least monotonic time between a domain's first and last snapshot for them to give its
/// rate (below it the pools' own calibrations are used).
pub const MIN_SPAN_NS: u64 = 100_000_000;

/// The clock domain of one recording: host and boot id, `None` when it has no boot id
/// (rule 3: its own domain).
pub fn domain_key(m: &Manifest) -> Option<(String, String)> {
    (!m.boot_id.is_empty()).then(|| (m.host.clone(), m.boot_id.clone()))
}

/// The calibration of a domain from its snapshots (first and last by TSC), if they span at
/// least [`MIN_SPAN_NS`].
pub fn from_snapshots<'a>(
    snaps: impl IntoIterator<Item = &'a ClockSnapshot>,
) -> Option<Calibration> {
    let mut first: Option<&ClockSnapshot> = None;
    let mut last: Option<&ClockSnapshot> = None;
    for s in snaps {
        if first.is_none_or(|f| s.tsc < f.tsc) {
            first = Some(s);
        }
        if last.is_none_or(|l| s.tsc > l.tsc) {
            last = Some(s);
        }
    }
    let (a, b) = (first?, last?);
    if b.monotonic_ns.saturating_sub(a.monotonic_ns) < MIN_SPAN_NS || b.tsc <= a.tsc {
        return None;
    }
    Some(Calibration {
        tsc0: a.tsc,
        realtime0_ns: a.realtime_ns,
        monotonic0_ns: a.monotonic_ns,
        tsc1: b.tsc,
        realtime1_ns: b.realtime_ns,
        monotonic1_ns: b.monotonic_ns,
    })
}

/// The calibration of each recording (in the order given): its domain's, from the
/// snapshots of every recording of the domain (rules 1–3).
pub fn domain_calibrations(recordings: &[&Manifest]) -> Vec<Calibration> {
    let mut snaps: BTreeMap<(String, String), Vec<&ClockSnapshot>> = BTreeMap::new();
    for m in recordings {
        if let Some(k) = domain_key(m) {
            snaps.entry(k).or_default().extend(m.clock_snapshots.iter());
        }
    }
    let shared: BTreeMap<_, _> = snaps
        .into_iter()
        .filter_map(|(k, s)| Some((k, from_snapshots(s)?)))
        .collect();
    recordings
        .iter()
        .map(|m| {
            domain_key(m)
                .and_then(|k| shared.get(&k).copied())
                .unwrap_or_else(|| m.calibration())
        })
        .collect()
}

/// The calibration of one recording looked at alone (`culprit dump`): from its own
/// snapshots, else its pool's.
pub fn recording_calibration(m: &Manifest) -> Calibration {
    domain_calibrations(&[m])[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(host: &str, boot: &str, pool_ghz: f64, snaps: &[(u64, u64)]) -> Manifest {
        let mut m: Manifest = serde_json::from_str(
            r#"{"format":"culprit-trace","version":1,"host":"h","command":[],
                "start_unix_ns":0,"end_unix_ns":null,"complete":true,
                "calibration":{"tsc0":0,"realtime0_ns":0,"monotonic0_ns":0,
                               "tsc1":0,"realtime1_ns":0,"monotonic1_ns":0},
                "pool":{"path":"","n_subbufs":1,"subbuf_size":8192,"retry_after":1,
                        "created_unix_ns":0},
                "processes":[],"totals":{"processes":0,"threads":0,"subbufs":0,
                "salvaged":0,"entries":0,"meta_records":0,"bytes":0,"lost":0,
                "duplicates":0,"undecodable":0}}"#,
        )
        .unwrap();
        m.host = host.into();
        m.boot_id = boot.into();
        let t0 = snaps.first().map_or(0, |s| s.0);
        m.calibration.tsc0 = t0;
        m.calibration.tsc1 = t0 + (20e6 * pool_ghz) as u64;
        m.calibration.monotonic1_ns = 20_000_000;
        m.calibration.realtime0_ns = 1_000;
        m.calibration.realtime1_ns = 1_000 + 20_000_000;
        m.clock_snapshots = snaps
            .iter()
            .map(|&(tsc, ns)| ClockSnapshot {
                tsc,
                realtime_ns: 1_000 + ns,
                monotonic_ns: ns,
                window_ticks: 30,
            })
            .collect();
        m
    }

    #[test]
    fn recordings_of_one_boot_share_one_clock() {
        // A 3 GHz TSC; three recorders whose 20 ms calibrations disagree by ±100 ppm.
        let a = manifest(
            "n1",
            "b1",
            3.0003,
            &[(0, 0), (3_000_000_000, 1_000_000_000)],
        );
        let b = manifest(
            "n1",
            "b1",
            2.9997,
            &[(1_500_000_000, 500_000_000), (9e9 as u64, 3e9 as u64)],
        );
        let c = manifest("n1", "b2", 2.9997, &[(0, 0), (3e9 as u64, 1e9 as u64)]);
        let cal = domain_calibrations(&[&a, &b, &c]);
        assert_eq!(cal[0], cal[1]);
        let tsc = 6_000_000_000u64;
        assert_eq!(cal[0].tsc_to_unix_ns(tsc), 1_000 + 2_000_000_000);
        // Another boot is another domain, converted by its own snapshots.
        assert_eq!(cal[2].tsc0, 0);
        assert_eq!(cal[2].tsc1, 3_000_000_000);
        // Without snapshots: the pool's own calibration.
        let d = manifest("n1", "b1", 3.0003, &[]);
        assert_eq!(recording_calibration(&d), d.calibration());
        let short = manifest("n2", "b3", 3.0003, &[(0, 0), (3_000, 1_000)]);
        assert_eq!(recording_calibration(&short), short.calibration());
    }
}
