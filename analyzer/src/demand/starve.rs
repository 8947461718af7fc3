//! **Slower or starved?** Busy time from messages is wall-clock time: on a shared machine
//! it swells when a process waits for a CPU, although the process itself did no more work.
//! Where the reader sampled CPU time and run-queue wait (`cpu.tsv`), each alarm is told:
//!
//! - **cpu** — the process burns more CPU per request than in training (its CPU time,
//!   fitted per request type on the same training window as busy time, leaves its own
//!   3σ̂ limit in at least two of the three violating intervals, on the same side): it got
//!   slower;
//! - **run-queue** — CPU per request as in training, and the wait on a run queue beyond
//!   what training predicts accounts for at least half the busy residual: it was
//!   **starved** of CPU by other processes. Training predicts the wait twice, from its
//!   wait per CPU second and (where the reader counted timeslices) from its wait per
//!   timeslice, and the smaller excess counts: starved means each wakeup waited longer
//!   for a CPU. A process that waits on a lock or sleeps in a retry loop wakes up more
//!   often for the same work: its wait per CPU second rises with its wakeups, its wait per
//!   wakeup does not, and it is not starved but slower. Such alarms are not raised as a
//!   slowdown of the process: the report lists them apart ([`super::ProcessDemand::starved`]);
//! - **off-cpu** — neither: it waited off the CPU (a disk, a lock, a process not traced)
//!   more per request than in training: a slowdown it did not burn CPU on.
//!
//! Without samples for the three intervals the alarm keeps no kind.
//!
//! The CPU time has a **control chart of its own** ([`cpu_alarms`]): the same utilization
//! law with CPU seconds for busy time, the same 3σ̂ limit on three intervals in a row. A
//! process that burns more CPU per request while its busy time is noisy (a disk's fsync in
//! some requests widens the busy chart's limit) is seen there; its alarms have kind `cpu`
//! and `chart: "cpu"`, and one that overlaps a busy-time alarm is not raised twice. It
//! runs on measured intervals only ([`super::cpu::measured_per_interval`]): an interval
//! whose CPU time the reader's sampling gaps spread over it ends a run of violations.

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
    /// Run-queue wait per timeslice in training, where the reader counted timeslices.
    pub wait_per_slice: Option<f64>,
}

/// The run-queue samples of one process per interval: wait (s), timeslices.
#[derive(Clone, Copy, Debug)]
pub struct Sched<'a> {
    /// Run-queue wait seconds per interval.
    pub wait: &'a [Option<f64>],
    /// Timeslices per interval.
    pub slices: &'a [Option<f64>],
}

/// Fits CPU time per request type on the training intervals `0..train_end` of `rows`
/// that have a CPU value; `None` with fewer than three.
pub fn fit_cpu(
    rows: &Rows,
    cpu: &[Option<f64>],
    sched: Sched,
    train: std::ops::Range<usize>,
) -> Option<CpuFit> {
    let wait = sched.wait;
    let end = train.end.min(rows.b.len());
    let train = train.start.min(end)..end;
    let idx: Vec<usize> = train
        .clone()
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
    let mut prior: Prior = rows.slice(train).active().prior();
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
    let per_slice: Vec<(f64, f64)> = idx
        .iter()
        .filter_map(|&j| Some((wait[j]?, sched.slices.get(j).copied().flatten()?)))
        .collect();
    let wait_per_slice = (!per_slice.is_empty()).then(|| {
        let (w, n) = per_slice
            .iter()
            .fold((0.0, 0.0), |s, x| (s.0 + x.0, s.1 + x.1));
        (n > 0.0).then(|| w / n)
    });
    Some(CpuFit {
        sigma_s: f.sigma_s.max(1e-3 * mean).max(1e-6),
        demand_s: f.demand_s,
        wait_per_cpu,
        wait_per_slice: wait_per_slice.flatten(),
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
    sched: Sched,
    f: &CpuFit,
) {
    let wait = sched.wait;
    let js: Vec<usize> = (j0..j0 + 3).filter(|&j| j < rows.b.len()).collect();
    if js.len() < 3 || js.iter().any(|&j| cpu[j].is_none()) {
        return;
    }
    let sign = alarm.residual_s.signum();
    let mut cpu_res = 0.0;
    let mut over = 0;
    let mut busy = 0.0;
    let mut excess: Option<f64> = f.wait_per_cpu.map(|_| 0.0);
    let mut slice_excess: Option<f64> = f.wait_per_slice.map(|_| 0.0);
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
        let slices = sched.slices.get(j).copied().flatten();
        if let (Some(e), Some(w), Some(n), Some(k)) =
            (slice_excess.as_mut(), wait[j], slices, f.wait_per_slice)
        {
            *e += w - k * n;
        } else {
            slice_excess = None;
        }
    }
    // Starved only if each wakeup waited longer too (see the module documentation).
    if let (Some(e), Some(s)) = (excess.as_mut(), slice_excess) {
        *e = e.min(s);
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

/// The CPU chart's alarms over the monitored rows `monitor_from..` (interval `j` starts at
/// `start_ns(j)`), where no alarm of `busy` overlaps them.
pub fn cpu_alarms(
    rows: &Rows,
    cpu: &[Option<f64>],
    f: &CpuFit,
    monitor_from: usize,
    start_ns: impl Fn(usize) -> i64,
    len_ns: i64,
    busy: &[&Alarm],
) -> Vec<Alarm> {
    let limit = 3.0 * f.sigma_s;
    let mut out = Vec::new();
    let mut run: Vec<f64> = Vec::new();
    #[allow(clippy::needless_range_loop)] // j also names the interval's start time
    for j in monitor_from..rows.b.len() {
        let r = cpu[j].map(|c| {
            c - rows.a[j]
                .iter()
                .zip(&f.demand_s)
                .map(|(a, d)| a * d)
                .sum::<f64>()
        });
        match r {
            // One-sided, as the busy chart: more CPU per request than the demands.
            Some(r) if r > limit && is_active(&rows.a[j], rows.b[j]) => run.push(r),
            _ => run.clear(),
        }
        if run.len() == 3 {
            let (t0, t1) = (start_ns(j - 2), start_ns(j) + len_ns);
            let overlaps = busy
                .iter()
                .any(|a| a.first_violation_unix_ns < t1 && a.t_unix_ns > t0);
            if !overlaps {
                out.push(Alarm {
                    t_unix_ns: t1,
                    residual_s: run[2],
                    limit_s: limit,
                    first_violation_unix_ns: t0,
                    kind: Some("cpu".into()),
                    cpu_residual_s: Some(run.iter().sum()),
                    wait_excess_s: None,
                    chart: Some("cpu".into()),
                });
            }
        }
    }
    out
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
            chart: None,
        }
    }

    #[test]
    fn tells_more_cpu_from_a_run_queue_wait_from_an_off_cpu_wait() {
        // 10 ms busy and 8 ms CPU per request, 1 ms of run-queue wait per 8 ms of CPU.
        let r = rows(30);
        let cpu0: Vec<Option<f64>> = r.a.iter().map(|a| Some(a[0] * 0.008)).collect();
        let wait0: Vec<Option<f64>> = cpu0.iter().map(|c| Some(c.unwrap() / 8.0)).collect();
        let none = vec![None; 30];
        let f = fit_cpu(
            &r,
            &cpu0,
            Sched {
                wait: &wait0,
                slices: &none,
            },
            0..20,
        )
        .unwrap();
        assert_eq!(f.wait_per_slice, None);
        assert!((f.demand_s[0] - 0.008).abs() < 1e-4, "{f:?}");
        let busy_res: Vec<Option<f64>> = (0..30).map(|j| (j >= 20).then_some(0.1)).collect();
        // More CPU per request in 20..23.
        let mut cpu = cpu0.clone();
        for c in cpu.iter_mut().skip(20) {
            *c = Some(c.unwrap() + 0.08);
        }
        let mut a = alarm();
        classify(
            &mut a,
            20,
            &r,
            &busy_res,
            &cpu,
            Sched {
                wait: &wait0,
                slices: &none,
            },
            &f,
        );
        assert_eq!(a.kind.as_deref(), Some("cpu"));
        // Same CPU, 0.1 s more run-queue wait per interval: starved.
        let mut wait = wait0.clone();
        for w in wait.iter_mut().skip(20) {
            *w = Some(w.unwrap() + 0.1);
        }
        let mut a = alarm();
        classify(
            &mut a,
            20,
            &r,
            &busy_res,
            &cpu0,
            Sched {
                wait: &wait,
                slices: &none,
            },
            &f,
        );
        assert_eq!(a.kind.as_deref(), Some("run-queue"));
        // Same CPU, same wait: it waited off the CPU.
        let mut a = alarm();
        classify(
            &mut a,
            20,
            &r,
            &busy_res,
            &cpu0,
            Sched {
                wait: &wait0,
                slices: &none,
            },
            &f,
        );
        assert_eq!(a.kind.as_deref(), Some("off-cpu"));
        // No samples there: no kind.
        let mut nocpu = cpu0.clone();
        nocpu[21] = None;
        let mut a = alarm();
        classify(
            &mut a,
            20,
            &r,
            &busy_res,
            &nocpu,
            Sched {
                wait: &wait0,
                slices: &none,
            },
            &f,
        );
        assert_eq!(a.kind, None);
        // The CPU chart alarms on the extra CPU from interval 20 on (once per run of
        // violations), unless a busy-time alarm covers it.
        let start = |j: usize| j as i64 * 1000;
        let c = cpu_alarms(&r, &cpu, &f, 20, start, 1000, &[]);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(
            (c[0].first_violation_unix_ns, c[0].t_unix_ns),
            (20_000, 23_000)
        );
        let mut busy = alarm();
        busy.first_violation_unix_ns = 20_000;
        busy.t_unix_ns = 23_000;
        assert!(cpu_alarms(&r, &cpu, &f, 20, start, 1000, &[&busy]).is_empty());
        assert!(cpu_alarms(&r, &cpu0, &f, 20, start, 1000, &[]).is_empty());
    }

    #[test]
    fn more_wakeups_for_the_same_work_is_not_starvation() {
        // 8 ms CPU per request; 1 ms of run-queue wait per timeslice, 4 slices per request.
        let r = rows(30);
        let cpu: Vec<Option<f64>> = r.a.iter().map(|a| Some(a[0] * 0.008)).collect();
        let slices0: Vec<Option<f64>> = r.a.iter().map(|a| Some(a[0] * 4.0)).collect();
        let wait0: Vec<Option<f64>> = slices0.iter().map(|n| Some(n.unwrap() * 0.001)).collect();
        let f = fit_cpu(
            &r,
            &cpu,
            Sched {
                wait: &wait0,
                slices: &slices0,
            },
            0..20,
        )
        .unwrap();
        assert!((f.wait_per_slice.unwrap() - 0.001).abs() < 1e-9, "{f:?}");
        let busy_res: Vec<Option<f64>> = (0..30).map(|j| (j >= 20).then_some(0.1)).collect();
        // Lock contention: a retry loop wakes up 60 more times per interval, each wakeup
        // waiting as long as in training: the wait per CPU second rises, the wait per
        // wakeup does not. Slower (off the CPU), not starved.
        let mut slices = slices0.clone();
        let mut wait = wait0.clone();
        for j in 20..30 {
            slices[j] = Some(slices0[j].unwrap() + 60.0);
            wait[j] = Some(slices[j].unwrap() * 0.001);
        }
        let mut a = alarm();
        classify(
            &mut a,
            20,
            &r,
            &busy_res,
            &cpu,
            Sched {
                wait: &wait,
                slices: &slices,
            },
            &f,
        );
        assert_eq!(a.kind.as_deref(), Some("off-cpu"), "{a:?}");
        // Without the slices, the same wait reads as starvation.
        let none = vec![None; 30];
        let g = fit_cpu(
            &r,
            &cpu,
            Sched {
                wait: &wait0,
                slices: &none,
            },
            0..20,
        )
        .unwrap();
        let mut a = alarm();
        classify(
            &mut a,
            20,
            &r,
            &busy_res,
            &cpu,
            Sched {
                wait: &wait,
                slices: &none,
            },
            &g,
        );
        assert_eq!(a.kind.as_deref(), Some("run-queue"), "{a:?}");
        // Starved: as many wakeups as in training, each waiting 3 ms longer.
        let mut wait = wait0.clone();
        for j in 20..30 {
            wait[j] = Some(slices0[j].unwrap() * 0.004);
        }
        let mut a = alarm();
        classify(
            &mut a,
            20,
            &r,
            &busy_res,
            &cpu,
            Sched {
                wait: &wait,
                slices: &slices0,
            },
            &f,
        );
        assert_eq!(a.kind.as_deref(), Some("run-queue"), "{a:?}");
    }
}
