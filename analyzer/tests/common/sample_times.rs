//! Sample times of a synthetic IO-sample file (shared by the ioshare tests that build a
//! `SampleLog` directly).

use reader::iosample::SampleTime;

/// `n` samples every `interval_ns`, on their deadlines, the first at `t0_unix`
/// (`CLOCK_REALTIME`) and at 0 on `CLOCK_MONOTONIC`.
pub fn regular(n: usize, interval_ns: u64, t0_unix: u64) -> Vec<SampleTime> {
    (0..n as u64)
        .map(|j| SampleTime {
            seq: j,
            deadline_mono_ns: j * interval_ns,
            mono_ns: j * interval_ns,
            unix_ns: t0_unix + j * interval_ns,
            took_ns: 0,
        })
        .collect()
}
