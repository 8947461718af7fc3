//! **Control chart**: demands fitted on a training window, the residual of every later
//! interval against them, and 003's alarm — `r > 3σ̂` on 3 consecutive intervals
//! (Shewhart) — plus the demands re-estimated over a sliding window, to watch both.
//!
//! The alarm is one-sided: it says the process got **slower** (more busy time than its
//! demands predict). An interval below the demands (a disk that synced faster, a cache
//! that hit more) is no slowdown of the process, and ends a run of violations.
//!
//! Intervals in which the process neither completed a request nor was busy carry no
//! information: they are left out of the training fit (they would shrink σ̂ toward zero)
//! and their residual, zero, ends a run of violations. σ̂ is floored at a tenth of a
//! percent of the mean training busy time (and 1 µs), so that a perfectly fitting
//! training window does not turn every later rounding into an alarm.

use super::estimate::{fit, Estimator, Fit, Prior};

/// The rows of a regression: counts per service and busy time, per interval.
#[derive(Clone, Debug, Default)]
pub struct Rows {
    /// `a[j][i]`: requests of service `i` completed in interval `j`.
    pub a: Vec<Vec<f64>>,
    /// Busy seconds of interval `j`.
    pub b: Vec<f64>,
    /// Own busy time of the requests completed in interval `j` (see [`super::busy`]).
    pub own: Vec<super::busy::OwnRow>,
}

impl Rows {
    /// Only the intervals with requests or busy time.
    pub fn active(&self) -> Rows {
        let keep: Vec<usize> = (0..self.b.len())
            .filter(|&j| is_active(&self.a[j], self.b[j]))
            .collect();
        Rows {
            a: keep.iter().map(|&j| self.a[j].clone()).collect(),
            b: keep.iter().map(|&j| self.b[j]).collect(),
            own: keep
                .iter()
                .filter_map(|&j| self.own.get(j).cloned())
                .collect(),
        }
    }

    /// Intervals `r` only.
    pub fn slice(&self, r: std::ops::Range<usize>) -> Rows {
        Rows {
            a: self.a[r.clone()].to_vec(),
            b: self.b[r.clone()].to_vec(),
            own: self.own.get(r).map_or(Vec::new(), |o| o.to_vec()),
        }
    }

    /// The per-request measurement over these intervals, as the prior of
    /// [`Estimator::Prior`]: each service's mean own busy time, and its variance
    /// (sampling, plus the mean part shared with other open requests, where the equal
    /// split is a guess). A service without requests here has a vague prior.
    pub fn prior(&self) -> Prior {
        let n = self.a.first().map_or(0, |r| r.len());
        let mut mean = vec![0.0; n];
        let mut var = vec![1.0; n];
        for i in 0..n {
            let k: f64 = self.a.iter().map(|r| r[i]).sum();
            if k < 1.0 {
                continue;
            }
            let s: f64 = self.own.iter().map(|o| o.sum[i]).sum();
            let sq: f64 = self.own.iter().map(|o| o.sq[i]).sum();
            let sh: f64 = self.own.iter().map(|o| o.shared[i]).sum();
            mean[i] = s / k;
            let s2 = (sq / k - mean[i] * mean[i]).max(0.0);
            let shared = sh / k;
            var[i] = (s2 / k + shared * shared).max(1e-18);
        }
        Prior {
            mean_s: mean,
            var_s2: var,
        }
    }
}

/// Did anything happen in an interval?
pub fn is_active(a: &[f64], b: f64) -> bool {
    b > 0.0 || a.iter().any(|&x| x > 0.0)
}

/// An alarm: the third of consecutive violating intervals closed.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Alarm {
    /// End of the third violating interval (unix ns): when the alarm is raised.
    pub t_unix_ns: i64,
    /// Residual of that interval (s).
    pub residual_s: f64,
    /// The control limit, 3σ̂ (s).
    pub limit_s: f64,
    /// Start of the first interval of the run (unix ns).
    pub first_violation_unix_ns: i64,
    /// Where CPU was sampled ([`super::starve`]): `cpu` (more CPU per request: slower),
    /// `run-queue` (starved of CPU by other processes), `off-cpu` (waited off the CPU),
    /// `starved-alone` (starved while its peers on the host were not: [`super::alone`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// CPU time over what the CPU demands predict, summed over the three intervals (s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_residual_s: Option<f64>,
    /// Run-queue wait over what training's wait per CPU second predicts, summed (s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_excess_s: Option<f64>,
    /// `cpu` for an alarm of the CPU-time chart ([`super::starve::cpu_alarms`]),
    /// `run-queue` for one of the chart against the peers ([`super::alone`]); absent for
    /// the busy-time chart's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chart: Option<String>,
}

/// The chart of one process.
#[derive(Clone, Debug)]
pub struct Chart {
    /// Demands fitted on the training window.
    pub fit: Fit,
    /// σ̂ after flooring (s).
    pub sigma_s: f64,
    /// The control limit, 3σ̂ (s).
    pub limit_s: f64,
    /// Residual per monitored interval (`None`: training, or before it).
    pub residual_s: Vec<Option<f64>>,
    /// Alarms, in time order.
    pub alarms: Vec<Alarm>,
    /// Demands re-estimated over the window ending at each interval (`None`: too early).
    pub series: Vec<Option<Vec<f64>>>,
}

/// Builds the chart of one process. `rows` are its intervals (interval `j` starts at
/// `start_ns(j)`), `train` the training rows (this process's first intervals, or a
/// baseline run's), `monitor_from` the first interval to watch, `window` the re-estimation
/// window (intervals), `len_ns` the interval length.
#[allow(clippy::too_many_arguments)]
pub fn chart(
    rows: &Rows,
    train: &Rows,
    monitor_from: usize,
    window: usize,
    est: Estimator,
    start_ns: impl Fn(usize) -> i64,
    len_ns: i64,
) -> Chart {
    let t = train.active();
    let prior = t.prior();
    let f = fit(&t.a, &t.b, est, Some(&prior));
    let mean_b = if t.b.is_empty() {
        0.0
    } else {
        t.b.iter().sum::<f64>() / t.b.len() as f64
    };
    let sigma = f.sigma_s.max(1e-3 * mean_b).max(1e-6);
    let limit = 3.0 * sigma;
    let mut residual_s = vec![None; rows.b.len()];
    let mut alarms = Vec::new();
    let mut run = 0usize;
    #[allow(clippy::needless_range_loop)] // j also names the interval's start time
    for j in monitor_from..rows.b.len() {
        let pred: f64 = rows.a[j].iter().zip(&f.demand_s).map(|(a, d)| a * d).sum();
        let r = rows.b[j] - pred;
        residual_s[j] = Some(r);
        if r > limit && is_active(&rows.a[j], rows.b[j]) {
            run += 1;
            if run == 3 {
                alarms.push(Alarm {
                    t_unix_ns: start_ns(j) + len_ns,
                    residual_s: r,
                    limit_s: limit,
                    first_violation_unix_ns: start_ns(j + 1 - 3),
                    kind: None,
                    cpu_residual_s: None,
                    wait_excess_s: None,
                    chart: None,
                });
            }
        } else {
            run = 0;
        }
    }
    let window = window.max(3);
    let series = (0..rows.b.len())
        .map(|j| {
            (j + 1 >= window).then(|| {
                let w = rows.slice(j + 1 - window..j + 1).active();
                fit(&w.a, &w.b, est, Some(&w.prior())).demand_s
            })
        })
        .collect();
    Chart {
        fit: f,
        sigma_s: sigma,
        limit_s: limit,
        residual_s,
        alarms,
        series,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_consecutive_violations_raise_one_alarm() {
        // d = 0.01 s per request; noise ±1 ms; a jump of +50 ms from interval 20 on.
        let mut rows = Rows::default();
        for j in 0..30 {
            let n = 10.0 + (j % 4) as f64;
            let noise = if j % 2 == 0 { 0.001 } else { -0.001 };
            let jump = if (20..26).contains(&j) { 0.05 } else { 0.0 };
            rows.a.push(vec![n]);
            rows.b.push(n * 0.01 + noise + jump);
        }
        let train = rows.slice(0..10);
        let run = |rows: &Rows| {
            chart(
                rows,
                &train,
                10,
                10,
                Estimator::Nnls,
                |j| j as i64 * 1000,
                1000,
            )
        };
        let c = run(&rows);
        assert!((c.fit.demand_s[0] - 0.01).abs() < 1e-3);
        assert_eq!(c.alarms.len(), 1, "{:?}", c.alarms);
        assert_eq!(c.alarms[0].t_unix_ns, 23_000);
        assert_eq!(c.alarms[0].first_violation_unix_ns, 20_000);
        assert!(c.residual_s[..10].iter().all(|r| r.is_none()));
        assert!(c.series[9].is_some() && c.series[8].is_none());
        // The same run faster instead of slower: no alarm.
        for j in 20..26 {
            rows.b[j] -= 0.1;
        }
        let c = run(&rows);
        assert!(c.alarms.is_empty(), "{:?}", c.alarms);
        assert!(c.residual_s[20].unwrap() < -0.04, "{:?}", c.residual_s[20]);
    }
}
