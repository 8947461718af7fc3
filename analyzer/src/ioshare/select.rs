//! The regression's window and prior weight, chosen by cross-validation on the data itself
//! (nothing about the workload is assumed): every few intervals, row t is left out, each
//! candidate (window W, prior weight μ) is fitted without it — the long-window prior
//! too —, and the server's load in t is predicted from the fitted β and the processes' IO
//! in t. The candidate with the smallest prediction error over the run wins. A short
//! window and no prior win where shares change often and the data are clean; a longer one
//! and a stronger pull toward the long window where noise dominates.
//!
//! The write-back lag is left out of the comparison (it would multiply the cost by ten);
//! the chosen candidate is then fitted with the lag as usual. The robust weights
//! ([`RegressionOptions::robust`]) are part of every candidate's fit.

use super::regression::{fit_at, Outcome, RegressionOptions};
use super::series::Series;

/// One candidate's cross-validation error.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct CvScore {
    /// Window, in intervals.
    pub window: usize,
    /// Prior weight μ (rows per process).
    pub prior: f64,
    /// √(Σ (y − ŷ)² / Σ y²) over the left-out intervals.
    pub relative_error: f64,
}

/// What was chosen, and why.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Choice {
    /// Window, in intervals.
    pub window: usize,
    /// Prior weight μ.
    pub prior: f64,
    /// Long window of the prior, in intervals.
    pub prior_window: usize,
    /// Intervals left out in turn.
    pub points: usize,
    /// Every candidate's score.
    pub scores: Vec<CvScore>,
}

/// Candidate windows: ⅔, 1, 1.5 and 2 × the base one, none shorter than `min` (two rows
/// per unknown).
pub fn candidate_windows(base: usize, min: usize) -> Vec<usize> {
    let mut w: Vec<usize> = [2 * base / 3, base, (base * 3).div_ceil(2), 2 * base]
        .into_iter()
        .map(|w| w.max(min))
        .collect();
    w.dedup();
    w
}

/// Candidate prior weights (0: none).
pub const PRIORS: [f64; 5] = [0.0, 0.5, 2.0, 8.0, 32.0];

/// Left-out intervals at most (evenly spread), to bound the cost on long runs.
pub const MAX_POINTS: usize = 300;

/// Chooses the window among `windows` and μ among `priors` for the bounded regression `base`
/// (its lag is ignored here).
pub fn choose(s: &Series, base: &RegressionOptions, windows: &[usize], priors: &[f64]) -> Choice {
    let n = s.y.len();
    let busy: Vec<usize> = (0..n)
        .filter(|&t| s.usable(t) && (s.y[t] > 0.0 || s.columns.iter().any(|c| c.x[t] > 0.0)))
        .collect();
    let stride = busy.len().div_ceil(MAX_POINTS).max(1);
    let points: Vec<usize> = busy.iter().copied().step_by(stride).collect();
    let plain = RegressionOptions {
        lag: false,
        bounded: true,
        ..*base
    };
    let mut sse = vec![vec![0.0f64; priors.len()]; windows.len()];
    let mut total = 0.0;
    for &t in &points {
        let long = match fit_at(
            s,
            &RegressionOptions {
                window: base.prior_window,
                prior: 0.0,
                ..plain
            },
            t,
            Some(t),
            None,
        ) {
            Outcome::Fitted(f) => Some(f),
            _ => None,
        };
        let prior_of = |c: usize| {
            let f = long.as_ref()?;
            let i = f.cols.iter().position(|&k| k == c)?;
            Some(f.beta[i])
        };
        total += s.y[t] * s.y[t];
        for (wi, &w) in windows.iter().enumerate() {
            for (pi, &mu) in priors.iter().enumerate() {
                let o = RegressionOptions {
                    window: w,
                    prior: mu,
                    ..plain
                };
                let predicted = match fit_at(s, &o, t, Some(t), Some(&prior_of)) {
                    Outcome::Fitted(f) => f
                        .cols
                        .iter()
                        .enumerate()
                        .map(|(i, &c)| f.beta[i] * s.columns[c].x[t])
                        .sum::<f64>(),
                    _ => 0.0,
                };
                sse[wi][pi] += (s.y[t] - predicted).powi(2);
            }
        }
    }
    let mut scores = Vec::new();
    let mut best = (base.window, 0.0, f64::INFINITY);
    for (wi, &w) in windows.iter().enumerate() {
        for (pi, &mu) in priors.iter().enumerate() {
            let e = (sse[wi][pi] / total.max(1e-300)).sqrt();
            scores.push(CvScore {
                window: w,
                prior: mu,
                relative_error: e,
            });
            if e < best.2 {
                best = (w, mu, e);
            }
        }
    }
    Choice {
        window: best.0,
        prior: best.1,
        prior_window: base.prior_window,
        points: points.len(),
        scores,
    }
}
