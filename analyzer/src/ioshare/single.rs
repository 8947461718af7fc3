//! Single-variation estimation (SPEC §9, Saeki 2010 §4): the shares change rarely, so
//! between two intervals at most one β changes. Start with every β = 1; at each interval,
//! if the residual `r = y − Σ βᵢ xᵢ` stays within a threshold θ (a fraction of the server's
//! mean load per interval), keep β. Otherwise, for each process with IO in the interval,
//! the β that would explain it with the others fixed is `βᵢ + r / xᵢ`; keep the admissible
//! ones (−0.1 ≤ β ≤ 1.1, then clamped to [0, 1]) and choose the one whose error over the
//! interval and the next `lookahead − 1` (this is an offline analysis) is smallest. If no
//! candidate explains the interval to within θ, the interval is marked in transition and
//! β is kept; after `reset_after` transitions in a row — several shares changed at once —
//! β is re-fitted by bounded least squares over those intervals.

use super::bvls::bvls;
use super::series::Series;
use super::{Estimate, Status};
use nalgebra::{DMatrix, DVector};

/// Options of the single-variation estimator.
#[derive(Clone, Copy, Debug)]
pub struct SingleOptions {
    /// Threshold on the residual, as a fraction of the server's mean bytes per interval
    /// (the thesis: 1/100 – 1/50; default 1/50).
    pub threshold: f64,
    /// Admissible range of a candidate before clamping (the thesis: −0.1 … 1.1).
    pub admissible: (f64, f64),
    /// Intervals over which candidates are compared (default 3).
    pub lookahead: usize,
    /// Transitions in a row after which β is re-fitted (0: never; default 4).
    pub reset_after: usize,
    /// Noise level of the residual (bytes per interval) under which no change is sought:
    /// the threshold is at least `noise_sigmas` times it. [`super::analyze`] measures it
    /// as the robust spread (1.4826 × median |r|) of a windowed regression's residuals.
    pub noise: f64,
    /// See `noise` (default 3).
    pub noise_sigmas: f64,
}

impl Default for SingleOptions {
    fn default() -> Self {
        SingleOptions {
            threshold: 1.0 / 50.0,
            admissible: (-0.1, 1.1),
            lookahead: 3,
            reset_after: 4,
            noise: 0.0,
            noise_sigmas: 3.0,
        }
    }
}

fn residual(s: &Series, beta: &[f64], t: usize) -> f64 {
    s.y[t]
        - s.columns
            .iter()
            .zip(beta)
            .map(|(c, b)| b * c.x[t])
            .sum::<f64>()
}

/// Runs the estimator.
pub fn estimate(s: &Series, o: &SingleOptions) -> Estimate {
    let n = s.y.len();
    let p = s.columns.len();
    let mut est = Estimate::new("single", p, n);
    let busy: Vec<f64> = s.y.iter().copied().filter(|&v| v > 0.0).collect();
    let mean_y = if busy.is_empty() {
        0.0
    } else {
        busy.iter().sum::<f64>() / busy.len() as f64
    };
    let theta = (o.threshold * mean_y)
        .max(o.noise_sigmas * o.noise)
        .max(4096.0);
    let mut beta = vec![1.0; p];
    let mut run: Vec<usize> = Vec::new();
    for t in 0..n {
        let r = residual(s, &beta, t);
        let active: Vec<usize> = (0..p).filter(|&c| s.columns[c].x[t] > 0.0).collect();
        if !s.usable(t) {
            // A process's bytes here are known only summed over several intervals: no
            // change is decided on them; the shares stand, unresolved.
            est.status[t] = Status::Transition;
        } else if active.is_empty() && s.y[t] <= theta {
            est.status[t] = Status::Idle;
        } else if r.abs() <= theta {
            est.status[t] = Status::Ok;
            run.clear();
        } else {
            let horizon: Vec<usize> = (t..(t + o.lookahead.max(1)).min(n)).collect();
            let mut best: Option<(usize, f64, f64)> = None; // (col, β, error)
            for &c in &active {
                let x = s.columns[c].x[t];
                if x < theta {
                    continue; // too little IO to move the residual reliably
                }
                let cand = beta[c] + r / x;
                if !(o.admissible.0..=o.admissible.1).contains(&cand) {
                    continue;
                }
                let cand = cand.clamp(0.0, 1.0);
                let mut b = beta.clone();
                b[c] = cand;
                let err: f64 = horizon.iter().map(|&k| residual(s, &b, k).abs()).sum();
                if best.is_none_or(|(_, _, e)| err < e) {
                    best = Some((c, cand, err));
                }
            }
            match best {
                Some((c, v, _))
                    if {
                        let mut b = beta.clone();
                        b[c] = v;
                        residual(s, &b, t).abs() <= theta
                    } =>
                {
                    beta[c] = v;
                    est.status[t] = Status::Ok;
                    run.clear();
                }
                _ => {
                    est.status[t] = Status::Transition;
                    run.push(t);
                    if o.reset_after > 0 && run.len() >= o.reset_after.max(2) {
                        let cols: Vec<usize> = (0..p)
                            .filter(|&c| run.iter().any(|&k| s.columns[c].x[k] > 0.0))
                            .collect();
                        if !cols.is_empty() && run.len() > cols.len() {
                            let x = DMatrix::from_fn(run.len(), cols.len(), |i, j| {
                                s.columns[cols[j]].x[run[i]]
                            });
                            let rest = |k: usize| -> f64 {
                                (0..p)
                                    .filter(|c| !cols.contains(c))
                                    .map(|c| beta[c] * s.columns[c].x[k])
                                    .sum()
                            };
                            let y = DVector::from_iterator(
                                run.len(),
                                run.iter().map(|&k| s.y[k] - rest(k)),
                            );
                            let b = bvls(&x, &y, 0.0, 1.0);
                            for (j, &c) in cols.iter().enumerate() {
                                beta[c] = b[j];
                            }
                            run.clear();
                        }
                    }
                }
            }
        }
        let resid = residual(s, &beta, t).abs().max(theta);
        for (c, &b) in beta.iter().enumerate() {
            let x = s.columns[c].x[t];
            if x > 0.0 {
                est.beta[c][t] = Some(b);
                est.err[c][t] = Some((resid / x).min(1.0));
            }
        }
    }
    est
}
