//! Multiple regression over a sliding window (SPEC §9): for the window of `W` intervals
//! ending at t, β minimizing Σ (y − Σ βᵢ xᵢ)² with 0 ≤ βᵢ ≤ 1 ([`super::bvls`]), optionally
//! with a write-back lag — each process's bytes reach the server's counter partly one
//! interval later, `xᵢ ← (1 − λ)·xᵢ(t) + λ·xᵢ(t − 1)`, λ chosen on a grid and kept only
//! where it cuts the residual by a tenth — and a diagnosis of multicollinearity: the
//! condition number of the window, and the processes whose variance inflation exceeds 10,
//! which move together and whose individual shares the data cannot separate.
//!
//! With a **prior** (`prior` > 0), each window's fit is also pulled toward the β of a
//! longer window centred on the same interval (ridge regression toward that estimate:
//! `μ · mean(xᵢ²) · (βᵢ − β_longᵢ)²` added per process, so `μ` counts in rows of data): a
//! short window follows changes, the long one averages the noise out, and `μ` — chosen by
//! cross-validation on the data itself ([`super::select`]) — says how much of each.
//!
//! Each window's fit is **robust**: after the first solve, intervals whose residual is
//! far beyond the window's robust spread (1.4826 × median |r|) get Huber weights
//! (c = 1.345) and the fit is solved again, twice — a burst the server flushed from socket
//! buffers, or a sample taken late, then pulls less on the β of the processes active
//! around it.
//!
//! The same code without bounds, lag, prior and weights is the plain least-squares
//! baseline.

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
    /// Weight μ of the long-window prior, in rows of data per process (0: no prior).
    pub prior: f64,
    /// Down-weight intervals with outlying residuals (Huber weights, two passes; default
    /// true for the bounded regression).
    pub robust: bool,
    /// Intervals of the long window that gives the prior (at least `window`; `analyze`
    /// makes it at least 4 × `window`).
    pub prior_window: usize,
}

impl Default for RegressionOptions {
    fn default() -> Self {
        RegressionOptions {
            window: 20,
            lag: true,
            bounded: true,
            max_condition: 30.0,
            centered: true,
            prior: 0.0,
            robust: true,
            prior_window: 0,
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

/// The rows of the window around (or ending at) interval `t` of `n`.
pub fn window_rows(
    n: usize,
    t: usize,
    w: usize,
    centered: bool,
) -> std::ops::RangeInclusive<usize> {
    let w = w.max(2);
    if centered {
        let lo = t.saturating_sub(w / 2);
        let hi = (lo + w - 1).min(n - 1);
        hi.saturating_sub(w - 1).min(lo)..=hi
    } else {
        t.saturating_sub(w - 1)..=t
    }
}

/// One window's fit.
pub struct Fit {
    /// The columns (processes) that did IO in the window.
    pub cols: Vec<usize>,
    /// Their β.
    pub beta: DVector<f64>,
    /// The lag chosen.
    pub lambda: f64,
    /// The design with that lag (data rows only).
    pub x: DMatrix<f64>,
    /// The design without lag (for the diagnosis).
    pub x0: DMatrix<f64>,
    /// Residual variance per row.
    pub sigma2: f64,
    /// `(XᵀX + prior)⁻¹`, if it could be formed.
    pub inv: Option<DMatrix<f64>>,
}

/// The outcome of fitting one window.
pub enum Outcome {
    /// Nobody did IO in it.
    Idle,
    /// Fewer rows than unknowns.
    Insufficient,
    /// Fitted.
    Fitted(Box<Fit>),
}

/// Fits the window around interval `t`, leaving row `skip` out (cross-validation), pulled
/// toward `prior[column]` with weight `o.prior` where given.
pub fn fit_at(
    s: &Series,
    o: &RegressionOptions,
    t: usize,
    skip: Option<usize>,
    prior: Option<&dyn Fn(usize) -> Option<f64>>,
) -> Outcome {
    let p = s.columns.len();
    let rows: Vec<usize> = window_rows(s.y.len(), t, o.window, o.centered)
        .filter(|&r| Some(r) != skip && s.usable(r))
        .collect();
    let cols: Vec<usize> = (0..p)
        .filter(|&c| {
            rows.iter().any(|&r| {
                s.columns[c].x[r] > 0.0 || (o.lag && r > 0 && s.columns[c].x[r - 1] > 0.0)
            })
        })
        .collect();
    if cols.is_empty() {
        return Outcome::Idle;
    }
    if rows.len() < cols.len() + 1 {
        return Outcome::Insufficient;
    }
    let m = rows.len();
    let k = cols.len();
    let y = DVector::from_iterator(m, rows.iter().map(|&r| s.y[r]));
    let targets: Vec<Option<f64>> = match (prior, o.prior > 0.0) {
        (Some(f), true) => cols.iter().map(|&c| f(c)).collect(),
        _ => vec![None; k],
    };
    let with_prior = targets.iter().any(Option::is_some);
    // The prior as k extra rows: √(μ·mean x²)·(β − β_long) for each process.
    let augment = |x: &DMatrix<f64>, y: &DVector<f64>| -> (DMatrix<f64>, DVector<f64>) {
        let mut xa = x.clone().resize_vertically(m + k, 0.0);
        let mut ya = y.clone().resize_vertically(m + k, 0.0);
        for (c, target) in targets.iter().enumerate() {
            if let Some(b) = target {
                let d = (o.prior * x.column(c).norm_squared() / m as f64).sqrt();
                xa[(m + c, c)] = d;
                ya[m + c] = d * b;
            }
        }
        (xa, ya)
    };
    let solve = |x: &DMatrix<f64>, y: &DVector<f64>| -> (DVector<f64>, f64) {
        let b = if with_prior {
            let (xa, ya) = augment(x, y);
            let b = bvls(&xa, &ya, 0.0, 1.0);
            let r = (&ya - &xa * &b).norm_squared();
            return (b, r);
        } else if o.bounded {
            bvls(x, y, 0.0, 1.0)
        } else {
            ols(x, y)
        };
        let r = (y - x * &b).norm_squared();
        (b, r)
    };
    let x0 = design(s, &rows, &cols, 0.0);
    let (b0, rss0) = solve(&x0, &y);
    let mut best = (0.0, b0, x0.clone(), rss0);
    if o.lag && o.bounded {
        for step in 1..10 {
            let lambda = step as f64 / 10.0;
            let x = design(s, &rows, &cols, lambda);
            let (b, r) = solve(&x, &y);
            if r < best.3 && r < 0.9 * rss0 {
                best = (lambda, b, x, r);
            }
        }
    }
    let (lambda, mut beta, x, _) = best;
    // Robust weights (Huber, c = 1.345 robust σ): an interval whose server bytes the
    // others do not explain — a burst flushed from socket buffers, a late sample — pulls
    // less on its neighbours' β.
    if o.robust && o.bounded {
        beta = huber_refit(&x, &y, beta, |xw, yw| solve(xw, yw).0);
    }
    let dof = (m as f64 - k as f64).max(1.0);
    let sigma2 = (&y - &x * &beta).norm_squared() / dof;
    let gram = if with_prior {
        let (xa, _) = augment(&x, &y);
        xa.transpose() * xa
    } else {
        x.transpose() * &x
    };
    let inv = gram
        .clone()
        .pseudo_inverse(1e-12 * gram.norm().max(1e-300))
        .ok();
    Outcome::Fitted(Box::new(Fit {
        cols,
        beta,
        lambda,
        x,
        x0,
        sigma2,
        inv,
    }))
}

/// Runs the sliding-window regression (with the long-window prior when `o.prior` > 0).
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
    let long = (o.prior > 0.0 && o.bounded).then(|| {
        estimate(
            s,
            &RegressionOptions {
                window: o.prior_window.max(o.window),
                prior: 0.0,
                ..*o
            },
        )
        .0
    });
    let mut episodes: Vec<Collinearity> = Vec::new();
    for t in 0..n {
        let prior_of = |c: usize| long.as_ref().and_then(|l| l.beta[c][t]);
        let fit = match fit_at(s, o, t, None, Some(&prior_of)) {
            Outcome::Idle => {
                est.status[t] = Status::Idle;
                continue;
            }
            Outcome::Insufficient => {
                est.status[t] = Status::Insufficient;
                continue;
            }
            Outcome::Fitted(f) => f,
        };
        let Fit {
            cols,
            beta: b,
            lambda,
            x,
            x0,
            sigma2,
            inv,
        } = *fit;
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

        // The diagnosis is of the data alone: a prior can steady a split the data do not
        // identify, but the window is still reported as collinear.
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

/// Fits again twice with Huber weights (c = 1.345 robust σ, σ = 1.4826 × the median |r|)
/// of the residuals of `beta`, by `solve` on the weighted rows: intervals whose server
/// bytes the others do not explain pull less. Stops when the residuals' median is 0.
pub(super) fn huber_refit(
    x: &DMatrix<f64>,
    y: &DVector<f64>,
    mut beta: DVector<f64>,
    solve: impl Fn(&DMatrix<f64>, &DVector<f64>) -> DVector<f64>,
) -> DVector<f64> {
    let (m, k) = x.shape();
    for _ in 0..2 {
        let r = y - x * &beta;
        let mut a: Vec<f64> = r.iter().map(|v| v.abs()).collect();
        a.sort_by(f64::total_cmp);
        let sigma = 1.4826 * a[a.len() / 2];
        if sigma <= 0.0 {
            break;
        }
        let w: Vec<f64> = r
            .iter()
            .map(|v| (1.345 * sigma / v.abs().max(1e-300)).min(1.0).sqrt())
            .collect();
        let xw = DMatrix::from_fn(m, k, |i, j| w[i] * x[(i, j)]);
        let yw = DVector::from_fn(m, |i, _| w[i] * y[i]);
        beta = solve(&xw, &yw);
    }
    beta
}
