//! Bounded-variable least squares: β minimizing ‖y − Xβ‖² with `lo ≤ β ≤ hi`, by the
//! active-set method of Lawson & Hanson (NNLS) extended to two bounds (Stark & Parker's
//! BVLS). Each sub-problem over the free variables is an ordinary least-squares solve by
//! nalgebra's SVD, which also serves the unconstrained baseline ([`ols`]) and the
//! diagnostics (condition number, variance inflation).

use nalgebra::{DMatrix, DVector};

/// Ordinary least squares (minimum-norm solution through the SVD; rank-deficient inputs
/// give the minimum-norm β rather than garbage).
pub fn ols(x: &DMatrix<f64>, y: &DVector<f64>) -> DVector<f64> {
    if x.ncols() == 0 {
        return DVector::zeros(0);
    }
    let svd = x.clone().svd(true, true);
    let eps = svd.singular_values.max() * 1e-12 * (x.nrows().max(x.ncols()) as f64);
    svd.solve(y, eps.max(f64::MIN_POSITIVE))
        .unwrap_or_else(|_| DVector::zeros(x.ncols()))
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum At {
    Free,
    Lo,
    Hi,
}

/// β in `[lo, hi]` minimizing ‖y − Xβ‖² (BVLS). Columns that are all zero stay at `lo`.
pub fn bvls(x: &DMatrix<f64>, y: &DVector<f64>, lo: f64, hi: f64) -> DVector<f64> {
    let n = x.ncols();
    let mut beta = DVector::from_element(n, lo);
    let mut at = vec![At::Lo; n];
    let tol = 1e-10 * (1.0 + y.norm() * x.norm());
    for _outer in 0..(3 * n + 10) {
        // Gradient of ½‖y − Xβ‖²: w = Xᵀ(y − Xβ) (positive: increasing β helps).
        let w = x.transpose() * (y - x * &beta);
        let mut best = None;
        for j in 0..n {
            let gain = match at[j] {
                At::Lo => w[j],
                At::Hi => -w[j],
                At::Free => continue,
            };
            if gain > tol && best.is_none_or(|(_, g)| gain > g) {
                best = Some((j, gain));
            }
        }
        let Some((j, _)) = best else {
            break; // Kuhn–Tucker conditions hold.
        };
        at[j] = At::Free;
        // Inner loop: solve over the free set, step back into the box if needed.
        for _inner in 0..(3 * n + 10) {
            let free: Vec<usize> = (0..n).filter(|&k| at[k] == At::Free).collect();
            let fixed_part =
                x * DVector::from_fn(n, |k, _| if at[k] == At::Free { 0.0 } else { beta[k] });
            let xf = DMatrix::from_fn(x.nrows(), free.len(), |r, c| x[(r, free[c])]);
            let z = ols(&xf, &(y - fixed_part));
            let inside = z.iter().all(|&v| (lo..=hi).contains(&v));
            if inside {
                for (c, &k) in free.iter().enumerate() {
                    beta[k] = z[c];
                }
                break;
            }
            // Largest step α toward z that stays in the box.
            let mut alpha = 1.0f64;
            for (c, &k) in free.iter().enumerate() {
                let (b, t) = (beta[k], z[c]);
                if t < lo && b > t {
                    alpha = alpha.min((b - lo) / (b - t));
                } else if t > hi && t > b {
                    alpha = alpha.min((hi - b) / (t - b));
                }
            }
            for (c, &k) in free.iter().enumerate() {
                beta[k] += alpha * (z[c] - beta[k]);
                if beta[k] <= lo + 1e-12 {
                    beta[k] = lo;
                    at[k] = At::Lo;
                } else if beta[k] >= hi - 1e-12 {
                    beta[k] = hi;
                    at[k] = At::Hi;
                }
            }
            if free.iter().all(|&k| at[k] != At::Free) {
                break;
            }
        }
    }
    beta
}

/// Condition number of X with unit-norm columns (all-zero columns left out): how close the
/// processes' IO timings are to being linear combinations of each other. 1 = orthogonal;
/// above ~30 the individual shares are poorly determined.
pub fn condition_number(x: &DMatrix<f64>) -> f64 {
    let cols: Vec<usize> = (0..x.ncols())
        .filter(|&c| x.column(c).norm() > 0.0)
        .collect();
    if cols.len() < 2 {
        return 1.0;
    }
    let z = DMatrix::from_fn(x.nrows(), cols.len(), |r, c| {
        x[(r, cols[c])] / x.column(cols[c]).norm()
    });
    let s = z.singular_values();
    let (mx, mn) = (s.max(), s.min());
    if mn <= mx * 1e-15 {
        f64::INFINITY
    } else {
        mx / mn
    }
}

/// Variance inflation factor of each column: 1 / (1 − R²) of that column regressed on the
/// others (uncentred, as the model has no intercept). ∞ for a column the others explain
/// exactly; 1 for an all-zero column or a column orthogonal to the rest.
pub fn vif(x: &DMatrix<f64>) -> Vec<f64> {
    (0..x.ncols())
        .map(|j| {
            let xj = x.column(j).clone_owned();
            let ss = xj.norm_squared();
            if ss == 0.0 || x.ncols() < 2 {
                return 1.0;
            }
            let others: Vec<usize> = (0..x.ncols()).filter(|&k| k != j).collect();
            let xo = DMatrix::from_fn(x.nrows(), others.len(), |r, c| x[(r, others[c])]);
            let b = ols(&xo, &xj);
            let res = (&xj - xo * b).norm_squared();
            if res <= ss * 1e-12 {
                f64::INFINITY
            } else {
                ss / res
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_shares_inside_the_box_are_found() {
        let x = DMatrix::from_row_slice(
            5,
            3,
            &[
                1.0, 2.0, 0.0, 3.0, 1.0, 1.0, 0.0, 4.0, 2.0, 2.0, 2.0, 5.0, 1.0, 0.0, 3.0,
            ],
        );
        let truth = DVector::from_vec(vec![0.2, 0.7, 0.5]);
        let y = &x * &truth;
        let b = bvls(&x, &y, 0.0, 1.0);
        assert!((b - truth).norm() < 1e-9);
    }

    #[test]
    fn bounds_bind_where_least_squares_would_leave_the_box() {
        let x = DMatrix::from_row_slice(4, 2, &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 1.0]);
        // Wants β₀ = 1.5 and β₁ = −0.5.
        let y = &x * DVector::from_vec(vec![1.5, -0.5]);
        let b = bvls(&x, &y, 0.0, 1.0);
        assert!(b.iter().all(|v| (0.0..=1.0).contains(v)), "{b}");
        assert!((b[0] - 1.0).abs() < 1e-9, "{b}");
        // No feasible point does better (brute force on a grid).
        let f = |b0: f64, b1: f64| (&y - &x * DVector::from_vec(vec![b0, b1])).norm_squared();
        let best = f(b[0], b[1]);
        for i in 0..=50 {
            for j in 0..=50 {
                assert!(f(i as f64 / 50.0, j as f64 / 50.0) >= best - 1e-9);
            }
        }
    }

    #[test]
    fn proportional_columns_show_in_the_diagnostics() {
        let x = DMatrix::from_row_slice(
            4,
            3,
            &[1.0, 2.0, 0.0, 2.0, 4.0, 1.0, 3.0, 6.0, 0.0, 1.0, 2.0, 1.0],
        );
        assert!(condition_number(&x) > 1e6);
        let v = vif(&x);
        assert!(v[0] > 1e6 && v[1] > 1e6 && v[2] < 10.0, "{v:?}");
    }
}
