//! **Busy time** per interval with 003's counting algorithm, and request counts per
//! interval and service.
//!
//! Requests in the system: +1 when a request from a parent arrives, −1 when its reply
//! leaves; −1 when a request to a child leaves, +1 when its reply arrives. The process is
//! busy while the count is ≥ 1, so time spent waiting on a child is not its own. The count
//! may go below zero while a parent request fans out. A call made while no served request
//! is open is **spontaneous** (no parent) and is left out of the count (003 §3).
//!
//! A served request counts in the interval where it **completes** (its reply leaves), so
//! each request is counted once and the counts of a long run add up to its requests;
//! busy time is split exactly at interval boundaries. Beside the counts, each request's
//! **own busy time** is the busy time while it was open, shared equally with the other
//! served requests open at the same time ([`Intervals::own_busy_s`]): an estimate of its
//! demand that needs no regression, exact for a server that handles one request at a time.
//!
//! Stretches in which the process's event loop waited for readiness (`idle`,
//! [`super::waits`]) are not busy, whatever is open, and no request's own time.

use super::transactions::{Role, Transaction};

/// The interval grid of one analysis: interval `j` is `[t0 + j·len, t0 + (j+1)·len)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// Start of interval 0 (unix ns).
    pub t0_ns: i64,
    /// Interval length (ns), > 0.
    pub len_ns: i64,
}

impl Grid {
    /// The interval holding `t` (negative before `t0`).
    pub fn index(&self, t: i64) -> i64 {
        (t - self.t0_ns).div_euclid(self.len_ns)
    }

    /// Start of interval `j`.
    pub fn start(&self, j: i64) -> i64 {
        self.t0_ns + j * self.len_ns
    }
}

/// What one process did in each interval of its span.
#[derive(Clone, Debug, Default)]
pub struct Intervals {
    /// Index (on the grid) of the first interval.
    pub first: i64,
    /// Busy seconds per interval.
    pub busy_s: Vec<f64>,
    /// Completed served requests per interval and service (`counts[j][i]`).
    pub counts: Vec<Vec<f64>>,
    /// Service ids, in column order.
    pub services: Vec<String>,
    /// Sum over requests of their own busy time (s), per service.
    pub own_busy_s: Vec<f64>,
    /// The same per interval of completion (`own_rows[j][i]`), with the sums of squares
    /// and of shared time: the per-request measurement of a window (training).
    pub own_rows: Vec<OwnRow>,
    /// Sum over requests of the square of their own busy time (s²), per service.
    pub own_sq_s: Vec<f64>,
    /// Sum over requests of the part of their own busy time shared with other open
    /// requests (s), per service: where the equal split is a guess.
    pub shared_s: Vec<f64>,
    /// Requests per service.
    pub requests: Vec<u64>,
    /// Calls to children left out of the count because no served request was open.
    pub spontaneous: u64,
    /// Calls to children made while serving.
    pub calls: u64,
}

/// Sums of the requests of each service completed in one interval (s, s², s).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OwnRow {
    /// Own busy time.
    pub sum: Vec<f64>,
    /// Its square.
    pub sq: Vec<f64>,
    /// Its part shared with other open requests.
    pub shared: Vec<f64>,
}

/// Marks an `idle` stretch's events in the count.
const IDLE: usize = usize::MAX - 1;

/// Builds the intervals of a process whose events span `span` (unix ns), not busy within
/// the sorted `idle` stretches.
pub fn intervals(
    grid: Grid,
    span: (i64, i64),
    tx: &[Transaction],
    idle: &[(i64, i64)],
) -> Intervals {
    let first = grid.index(span.0);
    let last = grid.index(span.1.max(span.0));
    let n = (last - first + 1) as usize;
    let mut services: Vec<String> = tx
        .iter()
        .filter(|t| t.role == Role::Served)
        .map(|t| t.service.clone())
        .collect();
    services.sort();
    services.dedup();
    let col = |s: &str| services.binary_search_by(|x| x.as_str().cmp(s)).ok();
    let mut out = Intervals {
        first,
        busy_s: vec![0.0; n],
        counts: vec![vec![0.0; services.len()]; n],
        own_busy_s: vec![0.0; services.len()],
        own_rows: vec![
            OwnRow {
                sum: vec![0.0; services.len()],
                sq: vec![0.0; services.len()],
                shared: vec![0.0; services.len()],
            };
            n
        ],
        own_sq_s: vec![0.0; services.len()],
        shared_s: vec![0.0; services.len()],
        requests: vec![0; services.len()],
        ..Default::default()
    };
    // Served requests open at each instant, to tell spontaneous calls.
    let mut served: Vec<(i64, i64)> = tx
        .iter()
        .filter(|t| t.role == Role::Served)
        .map(|t| (t.start_ns, t.end_ns))
        .collect();
    served.sort();
    // Latest end among the requests that started by each one (a call is made while some
    // request is open iff the latest end of those started before it is after it).
    let reach: Vec<i64> = served
        .iter()
        .scan(i64::MIN, |m, s| {
            *m = (*m).max(s.1);
            Some(*m)
        })
        .collect();
    // Events of the count: (time, order, delta, served request index or MAX).
    // At equal times, arrivals come before departures so that a request answered at the
    // instant it arrived still counts as open for an instant of zero length.
    let mut ev: Vec<(i64, u8, i32, usize)> = Vec::new();
    for (k, t) in tx.iter().enumerate() {
        match t.role {
            Role::Served => {
                let c = col(&t.service).expect("collected above");
                out.requests[c] += 1;
                let j = grid.index(t.end_ns) - first;
                if (0..n as i64).contains(&j) {
                    out.counts[j as usize][c] += 1.0;
                }
                ev.push((t.start_ns, 0, 1, k));
                ev.push((t.end_ns, 1, -1, k));
            }
            Role::Called => {
                let started = served.partition_point(|s| s.0 <= t.start_ns);
                let open = started > 0 && reach[started - 1] >= t.start_ns;
                if !open {
                    out.spontaneous += 1;
                    continue;
                }
                out.calls += 1;
                ev.push((t.start_ns, 1, -1, usize::MAX));
                ev.push((t.end_ns, 0, 1, usize::MAX));
            }
        }
    }
    for &(a, b) in idle {
        ev.push((a, 0, 1, IDLE));
        ev.push((b, 0, -1, IDLE));
    }
    ev.sort();
    let mut count = 0i32;
    let mut waiting = 0i32;
    let mut open: Vec<usize> = Vec::new();
    let mut own = vec![0.0f64; tx.len()];
    let mut shared = vec![0.0f64; tx.len()];
    let mut prev = ev.first().map_or(0, |e| e.0);
    for &(t, _, d, k) in &ev {
        if count >= 1 && waiting == 0 && t > prev {
            add_busy(&mut out, grid, first, prev, t);
            if !open.is_empty() {
                let share = (t - prev) as f64 * 1e-9 / open.len() as f64;
                for &o in &open {
                    own[o] += share;
                    if open.len() > 1 {
                        shared[o] += share;
                    }
                }
            }
        }
        prev = t;
        if k == IDLE {
            waiting += d;
            continue;
        }
        count += d;
        if k != usize::MAX {
            if d > 0 {
                open.push(k);
            } else if let Some(i) = open.iter().position(|&o| o == k) {
                open.swap_remove(i);
            }
        }
    }
    for (k, t) in tx.iter().enumerate() {
        if t.role == Role::Served {
            let c = col(&t.service).expect("collected above");
            out.own_busy_s[c] += own[k];
            let j = grid.index(t.end_ns) - first;
            if (0..n as i64).contains(&j) {
                let r = &mut out.own_rows[j as usize];
                r.sum[c] += own[k];
                r.sq[c] += own[k] * own[k];
                r.shared[c] += shared[k];
            }
            out.own_sq_s[c] += own[k] * own[k];
            out.shared_s[c] += shared[k];
        }
    }
    out.services = services;
    out
}

/// Adds the busy stretch `[a, b)` to the intervals it overlaps.
fn add_busy(out: &mut Intervals, grid: Grid, first: i64, a: i64, b: i64) {
    let n = out.busy_s.len() as i64;
    let mut t = a;
    while t < b {
        let j = grid.index(t);
        let end = grid.start(j + 1).min(b);
        let k = j - first;
        if (0..n).contains(&k) {
            out.busy_s[k as usize] += (end - t) as f64 * 1e-9;
        }
        t = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tx(role: Role, s: &str, a: i64, b: i64) -> Transaction {
        Transaction {
            role,
            service: s.into(),
            start_ns: a,
            end_ns: b,
            shape: None,
            link: Default::default(),
        }
    }

    #[test]
    fn counts_busy_time_without_child_waits_and_spontaneous_calls() {
        let g = Grid {
            t0_ns: 0,
            len_ns: 1_000,
        };
        let t = vec![
            // Served 100..900 with a call to a child 300..600: busy 500.
            tx(Role::Served, "port:1", 100, 900),
            tx(Role::Called, "peer:2", 300, 600),
            // Spontaneous call: not counted.
            tx(Role::Called, "peer:2", 950, 990),
            // Served across the boundary: 1_500..2_500, completes in interval 2.
            tx(Role::Served, "port:3", 1_500, 2_500),
        ];
        let iv = intervals(g, (0, 2_999), &t, &[]);
        assert_eq!(iv.services, vec!["port:1", "port:3"]);
        assert_eq!(iv.busy_s.len(), 3);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-15;
        assert!(close(iv.busy_s[0], 500e-9), "{:?}", iv.busy_s);
        assert!(close(iv.busy_s[1], 500e-9));
        assert!(close(iv.busy_s[2], 500e-9));
        assert_eq!(iv.counts[0], vec![1.0, 0.0]);
        assert_eq!(iv.counts[2], vec![0.0, 1.0]);
        assert_eq!(iv.spontaneous, 1);
        assert_eq!(iv.calls, 1);
        assert!(close(iv.own_busy_s[0], 500e-9));
        assert!(close(iv.own_busy_s[1], 1000e-9));
    }

    #[test]
    fn concurrent_requests_share_busy_time() {
        let g = Grid {
            t0_ns: 0,
            len_ns: 10_000,
        };
        let t = vec![
            tx(Role::Served, "a", 0, 400),
            tx(Role::Served, "b", 200, 600),
        ];
        let iv = intervals(g, (0, 9_999), &t, &[]);
        // Busy 0..600 once, however many are open.
        assert!((iv.busy_s[0] - 600e-9).abs() < 1e-15);
        // a: 200 alone + 100 shared; b: 100 shared + 200 alone.
        assert!((iv.own_busy_s[0] - 300e-9).abs() < 1e-15);
        assert!((iv.own_busy_s[1] - 300e-9).abs() < 1e-15);
    }

    #[test]
    fn an_event_loops_readiness_waits_are_not_busy() {
        let g = Grid {
            t0_ns: 0,
            len_ns: 10_000,
        };
        // Open 0..1000 with no call; the loop waited in epoll 200..700.
        let t = vec![tx(Role::Served, "a", 0, 1_000)];
        let iv = intervals(g, (0, 9_999), &t, &[(200, 700)]);
        assert!((iv.busy_s[0] - 500e-9).abs() < 1e-15, "{:?}", iv.busy_s);
        assert!((iv.own_busy_s[0] - 500e-9).abs() < 1e-15);
    }
}
