//! Multiple regression over a sliding window (SPEC §9): for the window of `W` intervals
//! ending at t, β minimizing Σ (y − Σ βᵢ xᵢ)² with 0 ≤ βᵢ ≤ 1 ([`super::bvls`]), optionally
//! with a write-back lag — each process's bytes reach the server's counter partly one
//! interval later, `xᵢ ← (1 − λ)·xᵢ(t) + λ·xᵢ(t − 1)`, λ chosen on a grid and kept only
//! where it cuts the residual by a tenth — and a diagnosis of multicollinearity: the
//! condition number of the window, and the processes whose variance inflation exceeds 10,
//! which move together and whose individual shares the data cannot separate.
//!
//! The same code without bounds and lag is the plain least-squares baseline.

use super::bvls::{bvls, condition_number, ols, vif};
use super::series::Series;
use super::{Estimate, Status};
use nalgebra::{DMatrix, DVector};

/// Options of the regression.
#[derive(Clone, Copy, Debug)]
pub struct RegressionOptions {
    /// Intervals per window (default 20; the thesis needed ≥ 15 for two processes).
    pub window: usize,
    /// Fit a write-back lag where it helps (default true).
    pub lag: bool,
    /// Constrain β to [0, 1] (false: plain least squares).
    pub bounded: bool,
    /// Condition number above which a window is diagnosed as collinear (default 30).
    pub max_condition: f64,
    /// Centre the window on the interval (offline analysis: half the delay in following a
    /// change) rather than end it there (default true).
    pub centered: bool,
}

impl Default for RegressionOptions {
    fn default() -> Self {
        RegressionOptions {
            window: 20,
            lag: true,
            bounded: true,
            max_condition: 30.0,
            centered: true,
        }
    }
}

/// A run of windows in which some processes' IO moved together.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Collinearity {
    /// First interval end (ns) of the run.
    pub from_ns: u64,
    /// Last interval end (ns).
    pub to_ns: u64,
    /// Largest condition number seen.
    pub condition: f64,
    /// Processes (pids) whose variance inflation exceeded 10.
    pub pids: Vec<u32>,
    /// Their largest variance inflation factors, in the same order.
    pub vif: Vec<f64>,
}

fn design(s: &Series, rows: &[usize], cols: &[usize], lambda: f64) -> DMatrix<f64> {
    DMatrix::from_fn(rows.len(), cols.len(), |r, c| {
        let x = &s.columns[cols[c]].x;
        let t = rows[r];
        let prev = if t > 0 { x[t - 1] } else { 0.0 };
        (1.0 - lambda) * x[t] + lambda * prev
    })
}

/// Runs the sliding-window regression.
pub fn estimate(s: &Series, o: &RegressionOptions) -> (Estimate, Vec<Collinearity>) {
    let n = s.y.len();
    let p = s.columns.len();
    let mut est = Estimate::new(
        if o.bounded {
            "regression"
        } else {
            "least_squares"
        },
        p,
        n,
    );
    let mut episodes: Vec<Collinearity> = Vec::new();
    let w = o.window.max(2);
    for t in 0..n {
        let (lo, hi) = if o.centered {
            let lo = t.saturating_sub(w / 2);
            let hi = (lo + w - 1).min(n - 1);
            (hi.saturating_sub(w - 1).min(lo), hi)
        } else {
            (t.saturating_sub(w - 1), t)
        };
        let rows: Vec<usize> = (lo..=hi).collect();
        let cols: Vec<usize> = (0..p)
            .filter(|&c| {
                rows.iter().any(|&r| {
                    s.columns[c].x[r] > 0.0 || (o.lag && r > 0 && s.columns[c].x[r - 1] > 0.0)
                })
            })
            .collect();
        if cols.is_empty() {
            est.status[t] = Status::Idle;
            continue;
        }
        if rows.len() < cols.len() + 1 {
            est.status[t] = Status::Insufficient;
            continue;
        }
        let y = DVector::from_iterator(rows.len(), rows.iter().map(|&r| s.y[r]));
        let solve = |x: &DMatrix<f64>| {
            if o.bounded {
                bvls(x, &y, 0.0, 1.0)
            } else {
                ols(x, &y)
            }
        };
        let x0 = design(s, &rows, &cols, 0.0);
        let mut best = (0.0, solve(&x0), x0.clone());
        let rss = |x: &DMatrix<f64>, b: &DVector<f64>| (&y - x * b).norm_squared();
        let rss0 = rss(&x0, &best.1);
        if o.lag && o.bounded {
            let mut best_rss = rss0;
            for k in 1..10 {
                let lambda = k as f64 / 10.0;
                let x = design(s, &rows, &cols, lambda);
                let b = solve(&x);
                let r = rss(&x, &b);
                if r < best_rss && r < 0.9 * rss0 {
                    best_rss = r;
                    best = (lambda, b, x);
                }
            }
        }
        let (lambda, b, x) = best;
        let m = rows.len() as f64;
        let dof = (m - cols.len() as f64).max(1.0);
        let sigma2 = rss(&x, &b) / dof;
        let gram = x.transpose() * &x;
        let inv = gram
            .clone()
            .pseudo_inverse(1e-12 * gram.norm().max(1e-300))
            .ok();
        for (c, &col) in cols.iter().enumerate() {
            est.beta[col][t] = Some(b[c]);
            let free = b[c] > 1e-9 && b[c] < 1.0 - 1e-9;
            let var = match (&inv, free || !o.bounded) {
                (Some(inv), true) => sigma2 * inv[(c, c)],
                _ => sigma2 / x.column(c).norm_squared().max(1e-300),
            };
            est.err[col][t] = Some(var.max(0.0).sqrt());
        }
        est.lag[t] = Some(lambda);
        est.status[t] = Status::Ok;

        let kappa = condition_number(&x0);
        if kappa > o.max_condition {
            est.status[t] = Status::Collinear;
            let v = vif(&x0);
            let mut pids = Vec::new();
            let mut vifs = Vec::new();
            for (c, &col) in cols.iter().enumerate() {
                if v[c] > 10.0 {
                    pids.push(s.columns[col].pid);
                    vifs.push(v[c]);
                }
            }
            match episodes.last_mut() {
                Some(e) if e.pids == pids && t > 0 && e.to_ns == s.t_end[t - 1] => {
                    e.to_ns = s.t_end[t];
                    e.condition = e.condition.max(kappa);
                    for (a, b) in e.vif.iter_mut().zip(&vifs) {
                        *a = a.max(*b);
                    }
                }
                _ => episodes.push(Collinearity {
                    from_ns: s.t_end[t],
                    to_ns: s.t_end[t],
                    condition: kappa,
                    pids,
                    vif: vifs,
                }),
            }
        }
    }
    (est, episodes)
}
