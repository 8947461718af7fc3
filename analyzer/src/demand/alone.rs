//! **Starved alone: CPU taken from one process.** A process starved of CPU is no slower
//! itself ([`super::starve`]), but *who* is starved tells whose fault it is. When the whole
//! machine is short of CPU (other jobs, a build) every process's wakeups wait longer at the
//! same instants; when something takes the CPU from one process (a busy loop pinned on its
//! core, a cgroup quota of its own) that process waits longer while its peers — the other
//! workers of its pool, the other tiers on the host — do not. The first is a report; the
//! second is a fault of the process and is alarmed, at once: it does not wait for the busy
//! chart, which on a pool sees it late (the starved worker takes fewer requests).
//!
//! Per interval, the process's **run-queue wait per CPU second** (time it was runnable and
//! waited for a CPU, over the time it ran, from the reader's `schedstat` samples: the CPU
//! withheld from it per CPU second it got) is set against the **median of the same ratio
//! over its peers** — the other processes of `all` on the same host that ran in the
//! interval (the caller, [`super::analyze_with`], passes the processes that served
//! requests), sampled by the same reader at the same instants:
//! `x_j = ln(max(w_j/c_j, f)) − ln(max(m_j, f))`, with `f` the peers' median ratio over
//! the training window (a wait below the host's normal is no starvation). A load on the
//! whole machine moves both terms together and leaves `x` where it was; a CPU taken from
//! this process alone raises it. (Per CPU second rather than per timeslice: chosen on the
//! suite's tuning recordings, where the wait per timeslice of processes no CPU was taken
//! from — job-queue's workers and broker under lock contention, a uWSGI worker beside
//! the hogged one — crossed its limit on three intervals and the wait per CPU second did
//! not; see `bench/results/demand.md`.) `x` has the same chart as
//! busy time: its mean and σ̂ on the process's training window, an alarm when it stays
//! above mean + 3σ̂ on three consecutive intervals (one-sided: waiting less than the peers
//! is no fault). An interval without samples of the process or of any peer ends a run.
//! The alarm's residual and limit are told in seconds of run-queue wait: the wait beyond
//! what the peers' wait per CPU second predicts, in the third interval, and that excess at
//! the limit.
//!
//! Only a wait that cost the process service is alarmed ([`cost_service`]): the busy
//! chart's residuals over the alarm's three intervals must sum beyond its limit (a CPU
//! taken from a server delays its requests). The thread-summed wait of a many-threaded
//! server rises alone now and then on threads that serve no request (chosen on the suite's
//! tuning recordings: cms-varnish-perl's memcached and a PostgreSQL backend, fault-free,
//! residuals ≤ 0 over their alarms); such an alarm is listed with the starved.

use super::chart::Alarm;

/// Run-queue wait and CPU time of one traced process per interval of the run's grid.
#[derive(Clone, Debug)]
pub struct Waits {
    /// Host of the process.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Run-queue wait (s) per interval.
    pub wait: Vec<Option<f64>>,
    /// CPU time (s) per interval.
    pub cpu: Vec<Option<f64>>,
}

impl Waits {
    /// Run-queue wait per CPU second in interval `j` (None: no samples, or no CPU).
    fn per_cpu(&self, j: usize) -> Option<f64> {
        let (w, c) = (self.wait.get(j).copied()??, self.cpu.get(j).copied()??);
        (c > 0.0).then(|| w / c)
    }
}

/// The peers' median run-queue wait per CPU second per interval: every process of `all`
/// on the host of `all[me]` but `me` that ran there.
pub fn peer_median(all: &[Waits], me: usize) -> Vec<Option<f64>> {
    let n = all[me].wait.len();
    (0..n)
        .map(|j| {
            let mut v: Vec<f64> = all
                .iter()
                .enumerate()
                .filter(|(k, q)| *k != me && q.host == all[me].host)
                .filter_map(|(_, q)| q.per_cpu(j))
                .collect();
            if v.is_empty() {
                return None;
            }
            v.sort_by(f64::total_cmp);
            let h = v.len() / 2;
            Some(if v.len() % 2 == 1 {
                v[h]
            } else {
                0.5 * (v[h - 1] + v[h])
            })
        })
        .collect()
}

/// The chart of `all[me]` against its peers: trained on the intervals `train` (global
/// indices), watched over `monitor`; `start_ns(j)` is the start of global interval `j`.
pub fn alarms(
    all: &[Waits],
    me: usize,
    train: std::ops::Range<usize>,
    monitor: std::ops::Range<usize>,
    start_ns: impl Fn(usize) -> i64,
    len_ns: i64,
) -> Vec<Alarm> {
    let m = peer_median(all, me);
    let p = &all[me];
    let mut floor: Vec<f64> = train.clone().filter_map(|j| m.get(j).copied()?).collect();
    if floor.len() < 3 {
        return Vec::new();
    }
    floor.sort_by(f64::total_cmp);
    let f = floor[floor.len() / 2].max(1e-9);
    let x = |j: usize| -> Option<f64> {
        let (a, b) = (p.per_cpu(j)?, m.get(j).copied()??);
        Some(a.max(f).ln() - b.max(f).ln())
    };
    let xs: Vec<f64> = train.clone().filter_map(x).collect();
    if xs.len() < 3 {
        return Vec::new();
    }
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let var = xs.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (xs.len() - 1) as f64;
    // σ̂ floored as the other charts' (a tenth of a percent, here of the ratio).
    let limit = mean + 3.0 * var.sqrt().max(1e-3);
    // What the peers predict of interval j's wait at the chart's value `at`: its CPU time
    // times their wait per CPU second, scaled by e^at.
    let predicted = |j: usize, at: f64| -> f64 {
        p.cpu[j].unwrap_or(0.0) * m[j].unwrap_or(0.0).max(f) * at.exp()
    };
    // The excess wait (s) of interval j over the prediction at `at`.
    let excess = |j: usize, at: f64| -> f64 { p.wait[j].unwrap_or(0.0) - predicted(j, at) };
    let mut out = Vec::new();
    let mut run: Vec<usize> = Vec::new();
    for j in monitor {
        match x(j) {
            Some(v) if v > limit => run.push(j),
            _ => run.clear(),
        }
        if run.len() == 3 {
            out.push(Alarm {
                t_unix_ns: start_ns(j) + len_ns,
                residual_s: excess(j, mean),
                limit_s: predicted(j, limit) - predicted(j, mean),
                first_violation_unix_ns: start_ns(run[0]),
                kind: Some("starved-alone".into()),
                cpu_residual_s: None,
                wait_excess_s: Some(run.iter().map(|&k| excess(k, mean)).sum()),
                chart: Some("run-queue".into()),
            });
        }
    }
    out
}

/// Did the wait of an alarm of [`alarms`] cost the process service? A CPU taken from it
/// delays its requests: their busy time rises beyond what its demands predict. The busy
/// chart's residuals over the alarm's three intervals (`residual[j0..j0 + 3]`, this
/// process's rows) must sum beyond the chart's limit `limit` (3σ̂: beyond its noise).
/// A wait that rose on threads or at moments that serve no request — a server's helper
/// threads, a cache that answered from memory in microseconds — costs none: such an
/// alarm is reported as starved, not raised.
pub fn cost_service(residual: &[Option<f64>], j0: usize, limit: f64) -> bool {
    let sum: f64 = residual
        .iter()
        .skip(j0)
        .take(3)
        .map(|r| r.unwrap_or(0.0))
        .sum();
    sum > limit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_that_cost_no_busy_time_is_no_alarm() {
        let limit = 0.01;
        // CPU taken from a worker: its requests waited, busy 0.2–0.3 s over the demands.
        let hogged = [Some(0.0), Some(0.2), Some(0.3), Some(0.25), None];
        assert!(cost_service(&hogged, 1, limit));
        // A cache whose helper threads waited: its requests took what they always did.
        let idle = [Some(0.0), Some(-0.0001), Some(0.0), Some(0.0001), None];
        assert!(!cost_service(&idle, 1, limit));
        // Noise within the limit, one interval up, one down.
        let noise = [Some(0.008), Some(-0.004), Some(0.005)];
        assert!(!cost_service(&noise, 0, limit));
        // Intervals past the rows count as none.
        assert!(!cost_service(&hogged, 4, limit));
    }

    /// `n` intervals of 0.1 s of CPU each, waiting `per_cpu(j)` per CPU second.
    fn proc(pid: u32, n: usize, per_cpu: impl Fn(usize) -> f64) -> Waits {
        Waits {
            host: "h".into(),
            pid,
            wait: (0..n).map(|j| Some(0.1 * per_cpu(j))).collect(),
            cpu: vec![Some(0.1); n],
        }
    }

    fn noisy(pid: u32, j: usize) -> f64 {
        // 0.2 s ± 10 % per CPU second, varying by process and interval.
        0.2 * (1.0 + 0.1 * (((j * 7 + pid as usize * 3) % 5) as f64 - 2.0) / 2.0)
    }

    #[test]
    fn a_process_starved_while_its_peers_are_not_is_alarmed_the_machine_is_not() {
        let n = 60;
        let start = |j: usize| j as i64 * 1000;
        // The whole machine starved from interval 30 to 40 (every wait ×50): no alarm.
        let load = |j: usize| if (30..40).contains(&j) { 50.0 } else { 1.0 };
        let mut all: Vec<Waits> = (0..4)
            .map(|k| proc(k, n, |j| noisy(k, j) * load(j)))
            .collect();
        for me in 0..4 {
            assert!(alarms(&all, me, 0..20, 20..n, start, 1000).is_empty());
        }
        // Process 2 alone waits ×30 per CPU second from interval 45 on: alarmed at the end
        // of interval 47, its peers not.
        all[2] = proc(2, n, |j| {
            noisy(2, j) * load(j) * if j >= 45 { 30.0 } else { 1.0 }
        });
        let a = alarms(&all, 2, 0..20, 20..n, start, 1000);
        assert_eq!(a.len(), 1, "{a:?}");
        assert_eq!(
            (a[0].first_violation_unix_ns, a[0].t_unix_ns),
            (45_000, 48_000)
        );
        assert_eq!(a[0].kind.as_deref(), Some("starved-alone"));
        assert!(a[0].residual_s > a[0].limit_s && a[0].wait_excess_s.unwrap() > 1.0);
        for me in [0, 1, 3] {
            assert!(alarms(&all, me, 0..20, 20..n, start, 1000).is_empty());
        }
        // Peers on another host are no peers: alone on its host, nothing to compare with.
        let mut other = all.clone();
        for (k, q) in other.iter_mut().enumerate() {
            if k != 2 {
                q.host = "g".into();
            }
        }
        assert!(alarms(&other, 2, 0..20, 20..n, start, 1000).is_empty());
        // An interval without its samples ends the run.
        all[2].cpu[46] = None;
        assert!(alarms(&all, 2, 0..20, 20..n, start, 1000)
            .iter()
            .all(|a| a.first_violation_unix_ns > 46_000));
    }

    #[test]
    fn waits_below_the_hosts_normal_are_no_starvation() {
        // Peers wait 0.2 s per CPU second; the process 0.01 s in training, 0.1 s later: ten
        // times its own normal, still below the host's.
        let n = 40;
        let mut all: Vec<Waits> = (0..3).map(|k| proc(k, n, |j| noisy(k, j))).collect();
        all[0] = proc(0, n, |j| if j < 20 { 0.01 } else { 0.1 });
        assert!(alarms(&all, 0, 0..20, 20..n, |j| j as i64, 1).is_empty());
    }
}
