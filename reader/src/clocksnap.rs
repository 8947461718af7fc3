//! Clock snapshots and host identity: what a trace says about the clock its timestamps
//! were read from, so that every recording of one boot of one host is converted to time
//! alike (`analyzer::clock`).
//!
//! A snapshot reads the TSC, `CLOCK_REALTIME` and `CLOCK_MONOTONIC` at one moment: the
//! clocks are read between two TSC reads, the TSC value kept is their middle and the
//! distance between them its uncertainty; of [`TRIES`] attempts the narrowest is kept
//! (a preempted attempt is wide). A recording takes one when it starts, every
//! [`SNAPSHOT_INTERVAL`] and when it ends ([`crate::daemon`]), and writes them into its
//! manifest with the host's boot id ([`boot_id`]): recordings with one boot id read one
//! TSC.
//!
//! Test-only knobs (environment of the recorder; they make a trace lie on purpose, to
//! test what the analyses do with clocks that disagree):
//! - [`CALIBRATION_PPM_ENV`]: the pool's 20 ms calibration is reported `PPM` parts per
//!   million fast (as a calibration taken on a loaded machine can be), snapshots unchanged.
//! - [`CLOCK_SKEW_ENV`] = `OFFSET_NS,PPM`: every clock reading the recording reports
//!   (calibration and snapshots) is moved by `OFFSET_NS` and runs `PPM` parts per million
//!   fast from the first reading on, as a host whose clock is off would read it.

use crate::manifest::ClockSnapshot;
use bufpool::sys::{clock_ns, rdtsc};
use std::time::Duration;

/// How often a recording takes a snapshot.
pub const SNAPSHOT_INTERVAL: Duration = Duration::from_secs(1);
/// Attempts per snapshot; the narrowest is kept.
pub const TRIES: usize = 7;
/// Test-only: the pool calibration's error in ppm (see the module docs).
pub const CALIBRATION_PPM_ENV: &str = "CULPRIT_TEST_CALIBRATION_PPM";
/// Test-only: `OFFSET_NS,PPM` applied to every clock reading (see the module docs).
pub const CLOCK_SKEW_ENV: &str = "CULPRIT_TEST_CLOCK_SKEW";

/// Reads the TSC and both clocks at one moment (the narrowest of [`TRIES`] attempts).
pub fn take() -> ClockSnapshot {
    let mut best: Option<ClockSnapshot> = None;
    for _ in 0..TRIES {
        let a = rdtsc();
        let rt = clock_ns(libc::CLOCK_REALTIME);
        let mono = clock_ns(libc::CLOCK_MONOTONIC);
        let b = rdtsc();
        let s = ClockSnapshot {
            tsc: a + b.saturating_sub(a) / 2,
            realtime_ns: rt,
            monotonic_ns: mono,
            window_ticks: b.saturating_sub(a),
        };
        if best.is_none_or(|x| s.window_ticks < x.window_ticks) {
            best = Some(s);
        }
    }
    skew().apply(best.unwrap_or_default())
}

/// This boot of this host: `/proc/sys/kernel/random/boot_id` ("" if it cannot be read).
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// This process's network namespace (`net:[N]`, "" if it cannot be read).
pub fn net_ns() -> String {
    std::fs::read_link("/proc/self/ns/net")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The [`CLOCK_SKEW_ENV`] knob: readings moved by `offset_ns` and scaled by `1 + ppm·10⁻⁶`
/// around the first reading of the process.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Skew {
    /// Added to every reading, ns.
    pub offset_ns: i64,
    /// Rate error, parts per million.
    pub ppm: f64,
}

/// The origins the [`Skew`] scales around (realtime, monotonic): the first readings of the
/// process, so that every recording of one process scales alike.
static ORIGIN: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();

impl Skew {
    /// A reading as the skewed clock gives it (the same reading when there is no skew).
    pub fn apply(&self, mut s: ClockSnapshot) -> ClockSnapshot {
        if *self == Skew::default() {
            return s;
        }
        let (rt0, mono0) = *ORIGIN.get_or_init(|| (s.realtime_ns, s.monotonic_ns));
        let f = |t: u64, t0: u64| -> u64 {
            let d = t as i64 - t0 as i64;
            (t as i64 + self.offset_ns + (d as f64 * self.ppm * 1e-6) as i64).max(0) as u64
        };
        s.realtime_ns = f(s.realtime_ns, rt0);
        s.monotonic_ns = f(s.monotonic_ns, mono0);
        s
    }
}

/// The [`CLOCK_SKEW_ENV`] knob, if set and well-formed (a malformed value is said once on
/// stderr and ignored).
pub fn skew() -> Skew {
    static SKEW: std::sync::OnceLock<Skew> = std::sync::OnceLock::new();
    *SKEW.get_or_init(|| {
        let Ok(v) = std::env::var(CLOCK_SKEW_ENV) else {
            return Skew::default();
        };
        let parsed = v.split_once(',').and_then(|(o, p)| {
            Some(Skew {
                offset_ns: o.trim().parse().ok()?,
                ppm: p.trim().parse().ok()?,
            })
        });
        parsed.unwrap_or_else(|| {
            eprintln!("culprit: {CLOCK_SKEW_ENV}={v:?} is not OFFSET_NS,PPM: ignored");
            Skew::default()
        })
    })
}

/// The pool calibration as the recording reports it: with the [`CLOCK_SKEW_ENV`] skew and
/// the [`CALIBRATION_PPM_ENV`] error applied (unchanged when neither is set).
pub fn reported_calibration(c: bufpool::Calibration) -> bufpool::Calibration {
    let sk = skew();
    let snap = |tsc, realtime_ns, monotonic_ns| {
        sk.apply(ClockSnapshot {
            tsc,
            realtime_ns,
            monotonic_ns,
            window_ticks: 0,
        })
    };
    let a = snap(c.tsc0, c.realtime0_ns, c.monotonic0_ns);
    let b = snap(c.tsc1, c.realtime1_ns, c.monotonic1_ns);
    let mut out = bufpool::Calibration {
        tsc0: c.tsc0,
        realtime0_ns: a.realtime_ns,
        monotonic0_ns: a.monotonic_ns,
        tsc1: c.tsc1,
        realtime1_ns: b.realtime_ns,
        monotonic1_ns: b.monotonic_ns,
    };
    if let Ok(v) = std::env::var(CALIBRATION_PPM_ENV) {
        match v.trim().parse::<f64>() {
            // Reported fast by PPM: the same ticks over fewer nanoseconds.
            Ok(ppm) => {
                let span = out.monotonic1_ns.saturating_sub(out.monotonic0_ns) as f64;
                let short = (span / (1.0 + ppm * 1e-6)).round() as u64;
                out.monotonic1_ns = out.monotonic0_ns + short;
                out.realtime1_ns = out.realtime0_ns + short;
            }
            Err(_) => eprintln!("culprit: {CALIBRATION_PPM_ENV}={v:?} is not a number: ignored"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_narrow_and_ordered() {
        let a = take();
        let b = take();
        assert!(b.tsc >= a.tsc);
        assert!(b.monotonic_ns >= a.monotonic_ns);
        assert!(a.window_ticks < 10_000_000, "{a:?}");
    }

    #[test]
    fn a_skew_moves_and_scales_from_the_first_reading() {
        let s = Skew {
            offset_ns: 50_000_000,
            ppm: 100.0,
        };
        let snap = |t: u64| ClockSnapshot {
            tsc: t,
            realtime_ns: t,
            monotonic_ns: t,
            window_ticks: 0,
        };
        let a = s.apply(snap(1_000_000_000));
        let b = s.apply(snap(11_000_000_000));
        assert_eq!(a.realtime_ns, 1_050_000_000);
        // 10 s later: 1 ms more (100 ppm).
        assert_eq!(b.realtime_ns - a.realtime_ns, 10_001_000_000);
        assert_eq!(Skew::default().apply(snap(7)), snap(7));
    }
}
