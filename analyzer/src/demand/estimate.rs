//! **Estimation**: service demands from per-interval busy time and request counts.
//!
//! The utilization law `b_j = Σ_i a_ji d_i + ε_j` is fitted by least squares with
//! `d ≥ 0` (Lawson–Hanson's active-set method, on the normal equations: the number of
//! services is small). Two estimators ([`Estimator`]):
//!
//! - [`Estimator::Nnls`]: plain non-negative least squares, as 003. Its weakness is
//!   collinearity: services whose counts move together (a page that always fetches its
//!   images) are told apart only by noise, and with few intervals or identical columns
//!   the normal equations are singular.
//! - [`Estimator::Prior`] (the default): the same fit, regularized toward a second,
//!   independent measurement that Culprit has and 003 did not — each request's **own**
//!   busy time from its exact boundaries ([`super::busy`]). The mean own busy time `p_i`
//!   of service `i` has a variance `v_i = s_i²/n_i + (f_i p_i)²` (sampling variance, plus
//!   the share `f_i` of that time during which other requests were open, when the split
//!   is a guess). Both are combined as two measurements are:
//!   minimize `‖A d − b‖²/σ² + Σ_i (d_i − p_i)²/v_i`, `d ≥ 0`, with `σ²` the residual
//!   variance, re-estimated twice. Directions the counts cannot tell apart are decided by
//!   the prior; those they can, by the regression. Indistinguishable services are not
//!   merged: each keeps its own prior.
//!
//! Confidence intervals (95 %) come from the inverse of the fit's precision matrix
//! (`AᵀA/σ² + diag(1/v)`, or `AᵀA/σ²` alone); a direction the data cannot determine gets
//! a wide but finite interval.

use nalgebra::{DMatrix, DVector};
use serde::Serialize;

/// How demands are estimated (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Estimator {
    /// Plain non-negative least squares (003).
    Nnls,
    /// Least squares regularized toward each request's own measured busy time.
    #[default]
    Prior,
}

/// The independent per-service measurement [`Estimator::Prior`] pulls toward.
#[derive(Clone, Debug, PartialEq)]
pub struct Prior {
    /// Mean own busy time per request (s).
    pub mean_s: Vec<f64>,
    /// Its variance (s²), > 0.
    pub var_s2: Vec<f64>,
}

/// The result of one fit.
#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    /// Estimated demand per service (s).
    pub demand_s: Vec<f64>,
    /// Half-width of its 95 % confidence interval (s).
    pub ci95_s: Vec<f64>,
    /// Root mean square residual over the fitted intervals (s).
    pub sigma_s: f64,
}

/// Fits `b ≈ A d` (`a[j]` is row `j`) with `d ≥ 0`. `prior` is used by
/// [`Estimator::Prior`] only. Rows of all zeros are fine; an empty `a` gives zero demands.
pub fn fit(a: &[Vec<f64>], b: &[f64], est: Estimator, prior: Option<&Prior>) -> Fit {
    let n = a.first().map_or(0, |r| r.len());
    let m = a.len();
    if n == 0 || m == 0 {
        return Fit {
            demand_s: vec![0.0; n],
            ci95_s: vec![0.0; n],
            sigma_s: rms(b),
        };
    }
    let am = DMatrix::from_fn(m, n, |j, i| a[j][i]);
    let bv = DVector::from_column_slice(b);
    let ata = am.transpose() * &am;
    let atb = am.transpose() * &bv;
    // A ridge too small to bias anything, so that singular systems still solve.
    let eps = 1e-12 * (ata.trace() / n as f64).max(1e-300);
    let plain = nnls(&ata, &atb, eps);
    let resid = |d: &DVector<f64>| rms_v(&(&am * d - &bv));
    let (d, precision, sigma) = match (est, prior) {
        (Estimator::Prior, Some(p)) if p.mean_s.len() == n => {
            let pm = DVector::from_column_slice(&p.mean_s);
            let inv_v = DVector::from_iterator(n, p.var_s2.iter().map(|v| 1.0 / v.max(1e-30)));
            // σ is floored at 10⁻⁴ of the busy time's scale: data that fit exactly must not
            // outweigh the prior by more than floating point can carry.
            let floor = (1e-4 * rms(b)).max(1e-9);
            let mut sigma = resid(&plain).max(floor);
            let mut d = plain.clone();
            for _ in 0..3 {
                let s2 = sigma * sigma;
                let q = &ata / s2 + DMatrix::from_diagonal(&inv_v);
                let c = &atb / s2 + inv_v.component_mul(&pm);
                d = nnls(&q, &c, eps / s2);
                sigma = resid(&d).max(floor);
            }
            let q = &ata / (sigma * sigma) + DMatrix::from_diagonal(&inv_v);
            let sigma = resid(&d);
            (d, q, sigma)
        }
        _ => {
            let sigma = resid(&plain);
            let s2 = (sigma * sigma).max(1e-18);
            (plain, &ata / s2, sigma)
        }
    };
    let ridge =
        DMatrix::from_diagonal_element(n, n, 1e-12 * (precision.trace() / n as f64).max(1e-300));
    let cov = (precision + ridge).try_inverse();
    let ci95_s = (0..n)
        .map(|i| {
            let v = cov.as_ref().map_or(f64::MAX, |c| c[(i, i)]);
            let h = 1.96 * v.max(0.0).sqrt();
            if h.is_finite() {
                h
            } else {
                f64::MAX
            }
        })
        .collect();
    Fit {
        demand_s: d
            .iter()
            .map(|&x| if x.is_finite() { x.max(0.0) } else { 0.0 })
            .collect(),
        ci95_s,
        sigma_s: if sigma.is_finite() { sigma } else { 0.0 },
    }
}

fn rms(b: &[f64]) -> f64 {
    if b.is_empty() {
        0.0
    } else {
        (b.iter().map(|x| x * x).sum::<f64>() / b.len() as f64).sqrt()
    }
}

fn rms_v(r: &DVector<f64>) -> f64 {
    rms(r.as_slice())
}

/// Minimizes `½ dᵀQd − cᵀd` subject to `d ≥ 0` for a symmetric positive semi-definite
/// `Q` (Lawson–Hanson on the normal equations; `eps` is added to the diagonal of each
/// solved subsystem).
pub fn nnls(q: &DMatrix<f64>, c: &DVector<f64>, eps: f64) -> DVector<f64> {
    let n = c.len();
    let mut d = DVector::zeros(n);
    let mut passive = vec![false; n];
    let scale = c.amax().max(1e-300);
    let tol = 1e-12 * scale;
    for _ in 0..(3 * n + 10) {
        let w = c - q * &d;
        let Some(j) = (0..n)
            .filter(|&i| !passive[i] && w[i] > tol)
            .max_by(|&x, &y| w[x].total_cmp(&w[y]))
        else {
            break;
        };
        passive[j] = true;
        for _ in 0..(3 * n + 10) {
            let z = solve_passive(q, c, &passive, eps);
            if (0..n).all(|i| !passive[i] || z[i] > 0.0) {
                d = z;
                break;
            }
            let mut alpha = 1.0f64;
            for i in 0..n {
                if passive[i] && z[i] <= 0.0 {
                    let den = d[i] - z[i];
                    if den > 0.0 {
                        alpha = alpha.min(d[i] / den);
                    } else {
                        alpha = 0.0;
                    }
                }
            }
            d = &d + (z - &d) * alpha;
            for i in 0..n {
                if passive[i] && d[i] <= 1e-14 * d.amax() {
                    passive[i] = false;
                    d[i] = 0.0;
                }
            }
            if !passive.iter().any(|&p| p) {
                break;
            }
        }
    }
    d
}

/// Solves `Q_PP z_P = c_P` (zero outside the passive set).
fn solve_passive(q: &DMatrix<f64>, c: &DVector<f64>, passive: &[bool], eps: f64) -> DVector<f64> {
    let idx: Vec<usize> = (0..c.len()).filter(|&i| passive[i]).collect();
    let k = idx.len();
    let mut z = DVector::zeros(c.len());
    if k == 0 {
        return z;
    }
    let qp = DMatrix::from_fn(k, k, |r, s| {
        q[(idx[r], idx[s])] + if r == s { eps } else { 0.0 }
    });
    let cp = DVector::from_fn(k, |r, _| c[idx[r]]);
    let sol = match qp.clone().cholesky() {
        Some(ch) => ch.solve(&cp),
        None => qp.lu().solve(&cp).unwrap_or_else(|| DVector::zeros(k)),
    };
    for (r, &i) in idx.iter().enumerate() {
        z[i] = if sol[r].is_finite() { sol[r] } else { 0.0 };
    }
    z
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_demands_and_keeps_them_non_negative() {
        // b = 2·a0 + 0·a1 + 5·a2, exactly.
        let a: Vec<Vec<f64>> = (0..20)
            .map(|j| vec![(j % 7) as f64, ((j * 3) % 5) as f64, ((j * 2) % 9) as f64])
            .collect();
        let b: Vec<f64> = a.iter().map(|r| 2.0 * r[0] + 5.0 * r[2]).collect();
        let f = fit(&a, &b, Estimator::Nnls, None);
        for (x, want) in f.demand_s.iter().zip([2.0, 0.0, 5.0]) {
            assert!((x - want).abs() < 1e-9, "{:?}", f.demand_s);
        }
        // A negative truth is clamped at zero.
        let b: Vec<f64> = a.iter().map(|r| 2.0 * r[0] - 1.0 * r[1]).collect();
        let f = fit(&a, &b, Estimator::Nnls, None);
        assert!(f.demand_s.iter().all(|&x| x >= 0.0));
        assert_eq!(f.demand_s[1], 0.0);
    }

    #[test]
    fn identical_columns_are_split_by_the_prior_and_never_give_nan() {
        let a: Vec<Vec<f64>> = (0..10).map(|j| vec![j as f64, j as f64]).collect();
        let b: Vec<f64> = a.iter().map(|r| 1.0 * r[0] + 3.0 * r[1]).collect();
        let plain = fit(&a, &b, Estimator::Nnls, None);
        assert!(plain.demand_s.iter().all(|x| x.is_finite()));
        assert!(plain.ci95_s.iter().all(|x| x.is_finite()));
        let p = Prior {
            mean_s: vec![1.1, 2.9],
            var_s2: vec![0.01, 0.01],
        };
        let f = fit(&a, &b, Estimator::Prior, Some(&p));
        assert!((f.demand_s[0] - 1.1).abs() < 0.05, "{:?}", f.demand_s);
        assert!((f.demand_s[1] - 2.9).abs() < 0.05, "{:?}", f.demand_s);
        // The sum along the determined direction is the data's.
        assert!((f.demand_s[0] + f.demand_s[1] - 4.0).abs() < 1e-3);
        // No rows at all.
        let f = fit(&[], &[], Estimator::Prior, Some(&p));
        assert!(f.demand_s.is_empty());
    }
}
