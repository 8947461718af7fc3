//! **Slower or starved?** Busy time from messages is wall-clock time: on a shared machine
//! it swells when a process waits for a CPU, although the process itself did no more work.
//! Where the reader sampled CPU time and run-queue wait (`cpu.tsv`), each alarm is told:
//!
//! - **cpu** — the process burns more CPU per request than in training (its CPU time,
//!   fitted per request type on the same training window as busy time, leaves its own
//!   3σ̂ limit in at least two of the three violating intervals, on the same side): it got
//!   slower;
//! - **run-queue** — CPU per request as in training, and the wait on a run queue beyond
//!   what training's wait per CPU second predicts accounts for at least half the busy
//!   residual: it was **starved** of CPU by other processes. Such alarms are not raised as
//!   a slowdown of the process: the report lists them apart ([`super::ProcessDemand::starved`]);
//! - **off-cpu** — neither: it waited off the CPU (a disk, a lock, a process not traced)
//!   more per request than in training: a slowdown it did not burn CPU on.
//!
//! Without samples for the three intervals the alarm keeps no kind.

use super::chart::{is_active, Alarm, Rows};
use super::estimate::{fit, Estimator, Prior};

/// The CPU side of one process: demands in CPU seconds per request, and the chart's limit.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuFit {
    /// CPU seconds per request, per type (column order).
    pub demand_s: Vec<f64>,
    /// σ̂ of the CPU residual in training (s).
    pub sigma_s: f64,
    /// Run-queue wait per CPU second in training.
    pub wait_per_cpu: Option<f64>,
}

/// Fits CPU time per request type on the training intervals `0..train_end` of `rows`
/// that have a CPU value; `None` with fewer than three.
pub fn fit_cpu(
    rows: &Rows,
    cpu: &[Option<f64>],
    wait: &[Option<f64>],
    train_end: usize,
) -> Option<CpuFit> {
    let idx: Vec<usize> = (0..train_end.min(rows.b.len()))
        .filter(|&j| is_active(&rows.a[j], rows.b[j]) && cpu[j].is_some())
        .collect();
    if idx.len() < 3 {
        return None;
    }
    let a: Vec<Vec<f64>> = idx.iter().map(|&j| rows.a[j].clone()).collect();
    let c: Vec<f64> = idx.iter().map(|&j| cpu[j].unwrap_or(0.0)).collect();
    let busy: f64 = idx.iter().map(|&j| rows.b[j]).sum();
    let total: f64 = c.iter().sum();
    // The per-request busy time, scaled by the window's CPU share, as the prior.
    let mut prior: Prior = rows.slice(0..train_end.min(rows.b.len())).active().prior();
    let share = if busy > 0.0 { total / busy } else { 1.0 };
    for (m, v) in prior.mean_s.iter_mut().zip(prior.var_s2.iter_mut()) {
        *m *= share;
        *v *= share * share;
        *v = v.max(1e-18);
    }
    // Without per-request measurements (rows built by hand), the plain fit.
    let f = if rows.own.len() == rows.b.len() {
        fit(&a, &c, Estimator::Prior, Some(&prior))
    } else {
        fit(&a, &c, Estimator::Nnls, None)
    };
    let mean = total / idx.len() as f64;
    let waits: Vec<(f64, f64)> = idx
        .iter()
        .filter_map(|&j| Some((wait[j]?, cpu[j]?)))
        .collect();
    let wait_per_cpu = (!waits.is_empty()).then(|| {
        let (w, c) = waits.iter().fold((0.0, 0.0), |s, x| (s.0 + x.0, s.1 + x.1));
        if c > 0.0 {
            w / c
        } else {
            0.0
        }
    });
    Some(CpuFit {
        sigma_s: f.sigma_s.max(1e-3 * mean).max(1e-6),
        demand_s: f.demand_s,
        wait_per_cpu,
    })
}

/// Gives `alarm` its kind: the three violating intervals begin at row `j0`; `busy_res`
/// are the busy-time residuals per row.
pub fn classify(
    alarm: &mut Alarm,
    j0: usize,
    rows: &Rows,
    busy_res: &[Option<f64>],
    cpu: &[Option<f64>],
    wait: &[Option<f64>],
    f: &CpuFit,
) {
    let js: Vec<usize> = (j0..j0 + 3).filter(|&j| j < rows.b.len()).collect();
    if js.len() < 3 || js.iter().any(|&j| cpu[j].is_none()) {
        return;
    }
    let sign = alarm.residual_s.signum();
    let mut cpu_res = 0.0;
    let mut over = 0;
    let mut busy = 0.0;
    let mut excess: Option<f64> = f.wait_per_cpu.map(|_| 0.0);
    for &j in &js {
        let c = cpu[j].unwrap_or(0.0);
        let pred: f64 = rows.a[j].iter().zip(&f.demand_s).map(|(a, d)| a * d).sum();
        let r = c - pred;
        cpu_res += r;
        if r * sign > 3.0 * f.sigma_s {
            over += 1;
        }
        busy += busy_res[j].unwrap_or(0.0);
        if let (Some(e), Some(w), Some(k)) = (excess.as_mut(), wait[j], f.wait_per_cpu) {
            *e += w - k * c;
        } else {
            excess = None;
        }
    }
    alarm.cpu_residual_s = Some(cpu_res);
    alarm.wait_excess_s = excess;
    alarm.kind = Some(
        if over >= 2 {
            "cpu"
        } else if sign > 0.0 && excess.is_some_and(|e| e >= 0.5 * busy) {
            "run-queue"
        } else {
            "off-cpu"
        }
        .to_string(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: usize) -> Rows {
        let mut r = Rows::default();
        for j in 0..n {
            let k = 10.0 + (j % 5) as f64;
            r.a.push(vec![k]);
            r.b.push(k * 0.01);
        }
        r
    }

    fn alarm() -> Alarm {
        Alarm {
            t_unix_ns: 0,
            residual_s: 0.1,
            limit_s: 0.01,
            first_violation_unix_ns: 0,
            kind: None,
            cpu_residual_s: None,
            wait_excess_s: None,
        }
    }

    #[test]
    fn tells_more_cpu_from_a_run_queue_wait_from_an_off_cpu_wait() {
        // 10 ms busy and 8 ms CPU per request, 1 ms of run-queue wait per 8 ms of CPU.
        let r = rows(30);
        let cpu0: Vec<Option<f64>> = r.a.iter().map(|a| Some(a[0] * 0.008)).collect();
        let wait0: Vec<Option<f64>> = cpu0.iter().map(|c| Some(c.unwrap() / 8.0)).collect();
        let f = fit_cpu(&r, &cpu0, &wait0, 20).unwrap();
        assert!((f.demand_s[0] - 0.008).abs() < 1e-4, "{f:?}");
        let busy_res: Vec<Option<f64>> = (0..30).map(|j| (j >= 20).then_some(0.1)).collect();
        // More CPU per request in 20..23.
        let mut cpu = cpu0.clone();
        for c in cpu.iter_mut().skip(20) {
            *c = Some(c.unwrap() + 0.08);
        }
        let mut a = alarm();
        classify(&mut a, 20, &r, &busy_res, &cpu, &wait0, &f);
        assert_eq!(a.kind.as_deref(), Some("cpu"));
        // Same CPU, 0.1 s more run-queue wait per interval: starved.
        let mut wait = wait0.clone();
        for w in wait.iter_mut().skip(20) {
            *w = Some(w.unwrap() + 0.1);
        }
        let mut a = alarm();
        classify(&mut a, 20, &r, &busy_res, &cpu0, &wait, &f);
        assert_eq!(a.kind.as_deref(), Some("run-queue"));
        // Same CPU, same wait: it waited off the CPU.
        let mut a = alarm();
        classify(&mut a, 20, &r, &busy_res, &cpu0, &wait0, &f);
        assert_eq!(a.kind.as_deref(), Some("off-cpu"));
        // No samples there: no kind.
        let mut none = cpu0.clone();
        none[21] = None;
        let mut a = alarm();
        classify(&mut a, 20, &r, &busy_res, &none, &wait0, &f);
        assert_eq!(a.kind, None);
    }
}
