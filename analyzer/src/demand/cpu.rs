//! **Measured CPU time** per interval, from the samples the reader took (`cpu.tsv`, see
//! `reader::cpustat`), to set beside the busy time the trace gives.
//!
//! The cumulative CPU time of a process is interpolated linearly between samples at each
//! interval boundary; an interval not covered by samples has no value. The thread clock
//! (`schedstat`, ns) is used when it never goes back between samples (threads that end
//! take their time with them), else the clock-tick count of `/proc/PID/stat`.

use super::busy::Grid;
use reader::cpustat::CpuSample;

/// Run-queue wait seconds per interval (`None` where no samples cover it, or the file has
/// no wait column, or the sum over live threads went back between the samples it spans: a
/// thread ended and took its wait with it, so the others' wait there is unknown; a server
/// that starts and ends threads all along keeps its other intervals).
pub fn wait_per_interval(
    samples: &[CpuSample],
    grid: Grid,
    first: i64,
    n: usize,
) -> Vec<Option<f64>> {
    let mut s: Vec<&CpuSample> = samples.iter().collect();
    s.sort_by_key(|x| x.t_unix_ns);
    let ok = s.len() >= 2 && s.iter().any(|x| x.sched_wait_ns > 0);
    if !ok {
        return vec![None; n];
    }
    integrate(&s, grid, first, n, |x| x.sched_wait_ns as f64, None)
}

/// Timeslices (times a thread was put on a CPU: its wakeups and preemptions) per interval
/// (`None` where no samples cover it, or the file has no slices column, or the sum over
/// live threads went back between the samples it spans: a thread ended).
pub fn slices_per_interval(
    samples: &[CpuSample],
    grid: Grid,
    first: i64,
    n: usize,
) -> Vec<Option<f64>> {
    let mut s: Vec<&CpuSample> = samples.iter().collect();
    s.sort_by_key(|x| x.t_unix_ns);
    let ok = s.len() >= 2 && s.iter().any(|x| x.sched_slices > 0);
    if !ok {
        return vec![None; n];
    }
    integrate(&s, grid, first, n, |x| x.sched_slices as f64, None)
}

/// CPU seconds per interval (`None` where no samples cover it).
pub fn per_interval(samples: &[CpuSample], grid: Grid, first: i64, n: usize) -> Vec<Option<f64>> {
    cpu_seconds(samples, grid, first, n, None)
}

/// [`per_interval`], measured: `None` also where a boundary of the interval lies between
/// two samples more than an interval apart (the reader waited for a CPU on a loaded
/// machine). Interpolation spreads such a gap's time evenly over the intervals it spans —
/// good enough to tell starved from slower over three intervals, but not a value of one
/// interval to raise the CPU chart's alarm on.
pub fn measured_per_interval(
    samples: &[CpuSample],
    grid: Grid,
    first: i64,
    n: usize,
) -> Vec<Option<f64>> {
    cpu_seconds(samples, grid, first, n, Some(grid.len_ns))
}

fn cpu_seconds(
    samples: &[CpuSample],
    grid: Grid,
    first: i64,
    n: usize,
    max_gap: Option<i64>,
) -> Vec<Option<f64>> {
    let mut s: Vec<&CpuSample> = samples.iter().collect();
    s.sort_by_key(|x| x.t_unix_ns);
    if s.len() < 2 {
        return vec![None; n];
    }
    let sched_ok = s.windows(2).all(|w| w[1].sched_cpu_ns >= w[0].sched_cpu_ns)
        && s.iter().any(|x| x.sched_cpu_ns > 0);
    let cum = |x: &CpuSample| {
        if sched_ok {
            x.sched_cpu_ns as f64
        } else {
            x.stat_cpu_ns as f64
        }
    };
    integrate(&s, grid, first, n, cum, max_gap)
}

/// The increase per interval of a cumulative counter, interpolated linearly between samples
/// (sorted by time, at least two). Where the counter went back between two samples (a sum
/// over live threads when one ended), the intervals that span that pair have no value.
fn integrate(
    s: &[&CpuSample],
    grid: Grid,
    first: i64,
    n: usize,
    cum: impl Fn(&CpuSample) -> f64,
    max_gap: Option<i64>,
) -> Vec<Option<f64>> {
    // back[k]: pairs (s[i-1], s[i]) with i ≤ k across which the counter went back.
    let mut back = vec![0usize; s.len()];
    for k in 1..s.len() {
        back[k] = back[k - 1] + usize::from(cum(s[k]) < cum(s[k - 1]));
    }
    // The pair holding `t`: its later sample's index.
    let pair = |t: i64| -> Option<usize> {
        let t = u64::try_from(t).ok()?;
        let k = s.partition_point(|x| x.t_unix_ns <= t);
        (k > 0 && k < s.len()).then_some(k)
    };
    let at = |t: i64| -> Option<f64> {
        let k = pair(t)?;
        let t = t as u64;
        let (a, b) = (s[k - 1], s[k]);
        if max_gap.is_some_and(|g| (b.t_unix_ns - a.t_unix_ns) as i64 > g) {
            return None;
        }
        let f = (t - a.t_unix_ns) as f64 / (b.t_unix_ns - a.t_unix_ns).max(1) as f64;
        Some(cum(a) + f * (cum(b) - cum(a)))
    };
    (0..n as i64)
        .map(|j| {
            let (a, b) = (grid.start(first + j), grid.start(first + j + 1));
            let (ka, kb) = (pair(a)?, pair(b)?);
            if back[kb] != back[ka - 1] {
                return None;
            }
            match (at(a), at(b)) {
                (Some(x), Some(y)) => Some(((y - x) * 1e-9).max(0.0)),
                _ => None,
            }
        })
        .collect()
}

/// How well busy and CPU time agree over the intervals that have both.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Agreement {
    /// Intervals with both values.
    pub intervals: usize,
    /// Total CPU time over total busy time on those intervals (0 if no busy time).
    pub cpu_over_busy: f64,
    /// Pearson correlation of the two per-interval series (0 if undefined).
    pub correlation: f64,
}

/// Compares per-interval busy and CPU time.
pub fn agreement(busy: &[f64], cpu: &[Option<f64>]) -> Agreement {
    let pairs: Vec<(f64, f64)> = busy
        .iter()
        .zip(cpu)
        .filter_map(|(&b, c)| c.map(|c| (b, c)))
        .collect();
    let n = pairs.len();
    if n == 0 {
        return Agreement::default();
    }
    let (sb, sc) = pairs.iter().fold((0.0, 0.0), |a, p| (a.0 + p.0, a.1 + p.1));
    let (mb, mc) = (sb / n as f64, sc / n as f64);
    let (mut cov, mut vb, mut vc) = (0.0, 0.0, 0.0);
    for &(b, c) in &pairs {
        cov += (b - mb) * (c - mc);
        vb += (b - mb) * (b - mb);
        vc += (c - mc) * (c - mc);
    }
    let corr = if vb > 0.0 && vc > 0.0 {
        cov / (vb * vc).sqrt()
    } else {
        0.0
    };
    Agreement {
        intervals: n,
        cpu_over_busy: if sb > 0.0 { sc / sb } else { 0.0 },
        correlation: corr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn sample(k: u64, wait_ns: u64) -> CpuSample {
        CpuSample {
            t_unix_ns: 1_000_000_000_000 + k * 250 * MS,
            pid: 1,
            start_ticks: 0,
            stat_cpu_ns: k * 10 * MS,
            sched_cpu_ns: k * 10 * MS,
            threads: 3,
            sched_wait_ns: wait_ns,
            sched_slices: k * 5,
        }
    }

    #[test]
    fn a_thread_that_ends_leaves_only_the_intervals_it_spans_unknown() {
        let grid = Grid {
            t0_ns: 1_000_000_000_000,
            len_ns: 1_000 * MS as i64,
        };
        // 4 ms of run-queue wait per sample (16 ms a second); in the second second a
        // thread with 30 ms of wait ends: the sum goes back by 30 ms once.
        let mut s: Vec<CpuSample> = (0..=20).map(|k| sample(k, 100 * MS + k * 4 * MS)).collect();
        for x in s.iter_mut().skip(6) {
            x.sched_wait_ns -= 30 * MS;
        }
        let w = wait_per_interval(&s, grid, 0, 4);
        assert!((w[0].unwrap() - 0.016).abs() < 1e-9, "{w:?}");
        assert_eq!(w[1], None, "{w:?}");
        assert!((w[2].unwrap() - 0.016).abs() < 1e-9, "{w:?}");
        assert!((w[3].unwrap() - 0.016).abs() < 1e-9, "{w:?}");
        // A counter that never goes back keeps every interval.
        let s: Vec<CpuSample> = (0..=20).map(|k| sample(k, 100 * MS + k * 4 * MS)).collect();
        assert!(wait_per_interval(&s, grid, 0, 4)
            .iter()
            .all(|x| x.is_some()));
        // The slices (5 a sample) likewise: the same in every interval.
        let sl = slices_per_interval(&s, grid, 0, 4);
        assert!(sl.iter().all(|x| x.is_some() && *x == sl[0]), "{sl:?}");
        assert!(sl[0].unwrap() > 0.0);
    }
}
