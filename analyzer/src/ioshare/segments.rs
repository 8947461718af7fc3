//! Change points of each process's share, and the regression that respects them.
//!
//! A share changes at moments (a job switches from scratch files to the shared mount),
//! and a sliding window that straddles such a moment mixes two shares — and, since the
//! processes are fitted jointly, spoils the neighbours' shares as well. Here the shares
//! are modelled as piecewise constant over the whole run, each process with its own change
//! points, found on the data:
//!
//! 1. **Forward search** (binary segmentation, joint over processes): with the current
//!    segments, each process's IO restricted to one segment is one column of the design;
//!    the split (process i, time τ) that most reduces the residual sum of squares is added,
//!    as long as that reduction exceeds `penalty · σ² · ln n` (Schwarz's criterion, a
//!    change point counting as two parameters — its level and its location — with the
//!    default penalty 2). The reduction of every candidate τ of a segment is computed at
//!    once from suffix sums against an orthonormal basis of the current design.
//!    Each split adds one direction to the design's column space, so the basis is updated
//!    by one Gram–Schmidt step rather than decomposed again.
//! 2. **Refinement**: each change point is taken out in turn and put back where it
//!    reduces the residual most between its neighbours, or dropped if no place there pays
//!    the penalty (two sweeps at most) — judged on the data between its neighbours, the
//!    other processes' segments cut there.
//!
//! Rows are weighted by Huber weights of the windowed regression's residuals, and σ² is
//! the mean weighted squared residual: a burst the server flushed late pulls little, as in
//! the windowed fit. No segment is shorter than `min_len` intervals. A long run is searched
//! in blocks (`block` intervals, 40 windows by default), which bounds the cost.
//!
//! The estimate is then the windowed regression of [`super::regression`] over a window of
//! `window` intervals (twice the regression's by default: with the changes modelled, a
//! longer window no longer blurs them) in which each process has one column per segment
//! that meets the window; β of a process at t is the one of its segment around t. A
//! change point that was missed thus spoils only one window's worth of estimates, and one
//! found where none was costs only variance.

use super::bvls::bvls;
use super::regression::{huber_refit, window_rows};
use super::series::Series;
use super::{Estimate, Status};
use nalgebra::{DMatrix, DVector};

/// Options of the change-point search and of the segmented windows.
#[derive(Clone, Copy, Debug)]
pub struct SegmentOptions {
    /// Shortest segment, in intervals.
    pub min_len: usize,
    /// A change point must reduce the weighted residual sum of squares by `penalty · σ² ·
    /// ln n` (default 2: Schwarz's criterion with two parameters per change point).
    pub penalty: f64,
    /// Intervals per segmented window.
    pub window: usize,
    /// Intervals searched at once (a longer run is searched in blocks).
    pub block: usize,
}

/// One process's segment: column `col`, intervals `from..to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    col: usize,
    from: usize,
    to: usize,
}

fn segments(s: &Series, cps: &[Vec<usize>]) -> Vec<Segment> {
    let n = s.y.len();
    let mut out = Vec::new();
    for (col, c) in cps.iter().enumerate() {
        let mut bounds = vec![0];
        bounds.extend(c.iter().copied());
        bounds.push(n);
        for w in bounds.windows(2) {
            if s.columns[col].x[w[0]..w[1]].iter().any(|&v| v > 0.0) {
                out.push(Segment {
                    col,
                    from: w[0],
                    to: w[1],
                });
            }
        }
    }
    out
}

/// An orthonormal basis of the weighted design's column space and the residual of the
/// weighted server load against it.
fn basis(s: &Series, w: &[f64], segs: &[Segment]) -> (DMatrix<f64>, DVector<f64>) {
    let n = s.y.len();
    let yw = DVector::from_fn(n, |t, _| w[t] * s.y[t]);
    if segs.is_empty() {
        return (DMatrix::zeros(n, 0), yw);
    }
    let z = DMatrix::from_fn(n, segs.len(), |t, k| {
        let g = segs[k];
        if (g.from..g.to).contains(&t) {
            w[t] * s.columns[g.col].x[t]
        } else {
            0.0
        }
    });
    let svd = z.svd(true, false);
    let u = svd.u.expect("u requested");
    let top = svd.singular_values.max();
    let keep: Vec<usize> = (0..svd.singular_values.len())
        .filter(|&k| svd.singular_values[k] > 1e-9 * top)
        .collect();
    let q = u.select_columns(&keep);
    let r = &yw - &q * (q.transpose() * &yw);
    (q, r)
}

/// The best split of segment `g` against basis `q` and residual `r`: (reduction, τ).
fn best_split(
    s: &Series,
    w: &[f64],
    q: &DMatrix<f64>,
    r: &DVector<f64>,
    g: Segment,
    min_len: usize,
) -> Option<(f64, usize)> {
    if g.to - g.from < 2 * min_len {
        return None;
    }
    let k = q.ncols();
    let x = &s.columns[g.col].x;
    let mut u = vec![0.0; k];
    let (mut rz, mut zz) = (0.0, 0.0);
    let total: f64 = (g.from..g.to).map(|t| (w[t] * x[t]).powi(2)).sum();
    let mut best: Option<(f64, usize)> = None;
    // τ from the end down: the new column is x·w on [τ, to).
    for t in (g.from + min_len..g.to).rev() {
        let v = w[t] * x[t];
        if v != 0.0 {
            for (j, uj) in u.iter_mut().enumerate() {
                *uj += q[(t, j)] * v;
            }
            rz += r[t] * v;
            zz += v * v;
        }
        if t > g.to - min_len {
            continue;
        }
        let den = zz - u.iter().map(|a| a * a).sum::<f64>();
        if den <= 1e-9 * total.max(1e-300) {
            continue;
        }
        let gain = rz * rz / den;
        if best.is_none_or(|(b, _)| gain > b) {
            best = Some((gain, t));
        }
    }
    best
}

/// Change points of each column (sorted interval indices: a segment starts there), with
/// row weights `w` and noise variance `sigma2` (of the weighted residuals).
///
/// Each step of the search decomposes the design of the whole stretch searched, so a long
/// run is searched in blocks of `o.block` intervals overlapping by half: the cost grows
/// with the run's length instead of its cube. The blocks bound only the search; the
/// segments of the estimate run across them.
pub fn change_points(s: &Series, w: &[f64], sigma2: f64, o: &SegmentOptions) -> Vec<Vec<usize>> {
    let n = s.y.len();
    let block = o.block.max(4 * o.min_len.max(1));
    if n < 2 * block {
        return search(s, w, sigma2, o);
    }
    // Blocks overlap by half; each keeps the change points of its middle half (the first
    // from the start, the last to the end), so a change near a block's edge is in the
    // middle of another.
    let half = block / 2;
    let mut cps: Vec<Vec<usize>> = vec![Vec::new(); s.columns.len()];
    let mut from = 0;
    loop {
        let last = n - from < block + half;
        let to = if last { n } else { from + block };
        let part = s.intervals(from..to);
        let keep_from = if from == 0 { 0 } else { from + half / 2 };
        let keep_to = if last { n } else { to - half / 2 };
        for (all, found) in cps.iter_mut().zip(search(&part, &w[from..to], sigma2, o)) {
            all.extend(
                found
                    .into_iter()
                    .map(|t| t + from)
                    .filter(|t| (keep_from..keep_to).contains(t)),
            );
        }
        if last {
            break;
        }
        from += half;
    }
    // Two blocks' change points of one process closer than `min_len`: keep the first.
    for c in &mut cps {
        c.sort_unstable();
        c.dedup_by(|b, a| *b < *a + o.min_len.max(1));
    }
    cps
}

fn search(s: &Series, w: &[f64], sigma2: f64, o: &SegmentOptions) -> Vec<Vec<usize>> {
    let n = s.y.len();
    let p = s.columns.len();
    let mut cps: Vec<Vec<usize>> = vec![Vec::new(); p];
    if n < 2 * o.min_len.max(1) || sigma2 <= 0.0 {
        return cps;
    }
    let min_len = o.min_len.max(1);
    let pen = o.penalty * sigma2 * (n as f64).ln();
    // Forward. A split of segment [a, b) at τ adds one direction to the design's column
    // space — the process's IO on [τ, b) — so the basis and the residual are updated by
    // one Gram–Schmidt step (twice, for stability) instead of decomposed again.
    let mut segs = segments(s, &cps);
    let (q0, mut r) = basis(s, w, &segs);
    let mut q: Vec<DVector<f64>> = q0.column_iter().map(|c| c.into_owned()).collect();
    for _ in 0..p * (n / min_len) {
        let qm = if q.is_empty() {
            DMatrix::zeros(n, 0)
        } else {
            DMatrix::from_columns(&q)
        };
        let best = segs
            .iter()
            .enumerate()
            .filter_map(|(k, &g)| best_split(s, w, &qm, &r, g, min_len).map(|(v, t)| (v, k, t)))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let Some((gain, k, t)) = best else { break };
        if gain <= pen {
            break;
        }
        let g = segs[k];
        let x = &s.columns[g.col].x;
        let mut z = DVector::from_fn(n, |i, _| {
            if (t..g.to).contains(&i) {
                w[i] * x[i]
            } else {
                0.0
            }
        });
        let norm0 = z.norm();
        for _ in 0..2 {
            for qj in &q {
                let d = qj.dot(&z);
                z.axpy(-d, qj, 1.0);
            }
        }
        let norm = z.norm();
        if norm > 1e-9 * norm0 {
            z /= norm;
            let d = z.dot(&r);
            r.axpy(-d, &z, 1.0);
            q.push(z);
        }
        let left = Segment { to: t, ..g };
        let right = Segment { from: t, ..g };
        segs.remove(k);
        segs.push(right);
        if x[g.from..t].iter().any(|&v| v > 0.0) {
            segs.push(left);
        }
        cps[g.col].push(t);
        cps[g.col].sort_unstable();
    }
    // Refinement: each change point is put back at its best place between its neighbours,
    // or dropped — judged on the data between them (the other processes' segments cut
    // there), so that each test is small.
    for _ in 0..2 {
        let mut moved = false;
        for col in 0..p {
            let mut j = 0;
            while j < cps[col].len() {
                let t0 = cps[col][j];
                let from = if j > 0 { cps[col][j - 1] } else { 0 };
                let to = cps[col].get(j + 1).copied().unwrap_or(n);
                let local = s.intervals(from..to);
                let local_cps: Vec<Vec<usize>> = (0..p)
                    .map(|c| {
                        if c == col {
                            Vec::new()
                        } else {
                            cps[c]
                                .iter()
                                .filter(|&&v| v > from && v < to)
                                .map(|&v| v - from)
                                .collect()
                        }
                    })
                    .collect();
                let lw = &w[from..to];
                let (ql, rl) = basis(&local, lw, &segments(&local, &local_cps));
                let g = Segment {
                    col,
                    from: 0,
                    to: to - from,
                };
                match best_split(&local, lw, &ql, &rl, g, min_len) {
                    Some((gain, t)) if gain > pen => {
                        if t + from != t0 {
                            cps[col][j] = t + from;
                            moved = true;
                        }
                        j += 1;
                    }
                    _ => {
                        cps[col].remove(j);
                        moved = true;
                    }
                }
            }
        }
        if !moved {
            break;
        }
    }
    cps
}

/// Huber weights (c = 1.345 robust σ, σ = 1.4826 × median of the non-zero |r|) of the
/// residuals `r`, and the mean squared weighted residual.
pub fn huber_weights(r: &[f64]) -> (Vec<f64>, f64) {
    let mut a: Vec<f64> = r.iter().map(|v| v.abs()).filter(|&v| v > 0.0).collect();
    if a.is_empty() {
        return (vec![1.0; r.len()], 0.0);
    }
    a.sort_by(f64::total_cmp);
    let scale = 1.4826 * a[a.len() / 2];
    let w: Vec<f64> = r
        .iter()
        .map(|v| (1.345 * scale / v.abs().max(1e-300)).min(1.0).sqrt())
        .collect();
    let s2 = r.iter().zip(&w).map(|(v, w)| (v * w).powi(2)).sum::<f64>() / r.len() as f64;
    (w, s2)
}

/// The segmented windowed regression: `base` is the windowed regression's estimate (its
/// lag per interval is reused), `cps` the change points of each column.
pub fn estimate(s: &Series, base: &Estimate, cps: &[Vec<usize>], o: &SegmentOptions) -> Estimate {
    let n = s.y.len();
    let p = s.columns.len();
    let mut est = base.clone();
    for t in 0..n {
        if matches!(base.status[t], Status::Idle | Status::Insufficient) {
            continue;
        }
        let rows: Vec<usize> = window_rows(n, t, o.window, true).collect();
        let (lo, hi) = (rows[0], rows[rows.len() - 1]);
        let lambda = base.lag[t].unwrap_or(0.0);
        let lagged = |c: usize, r: usize| {
            let x = &s.columns[c].x;
            (1.0 - lambda) * x[r] + lambda * if r > 0 { x[r - 1] } else { 0.0 }
        };
        // Columns: (process, segment start, end) of every segment meeting the window.
        let mut cols: Vec<(usize, usize, usize)> = Vec::new();
        for (c, cp) in cps.iter().enumerate().take(p) {
            let mut bounds = vec![lo];
            bounds.extend(cp.iter().copied().filter(|&v| v > lo && v <= hi));
            bounds.push(hi + 1);
            for b in bounds.windows(2) {
                if (b[0]..b[1]).any(|r| lagged(c, r) > 0.0) {
                    cols.push((c, b[0], b[1]));
                }
            }
        }
        if cols.is_empty() || rows.len() < cols.len() + 1 {
            continue;
        }
        let m = rows.len();
        let k = cols.len();
        let x = DMatrix::from_fn(m, k, |i, j| {
            let (c, a, b) = cols[j];
            let r = rows[i];
            if (a..b).contains(&r) {
                lagged(c, r)
            } else {
                0.0
            }
        });
        let y = DVector::from_iterator(m, rows.iter().map(|&r| s.y[r]));
        let beta = huber_refit(&x, &y, bvls(&x, &y, 0.0, 1.0), |xw, yw| {
            bvls(xw, yw, 0.0, 1.0)
        });
        let sigma2 = (&y - &x * &beta).norm_squared() / (m as f64 - k as f64).max(1.0);
        let gram = x.transpose() * &x;
        let inv = gram
            .clone()
            .pseudo_inverse(1e-12 * gram.norm().max(1e-300))
            .ok();
        for c in 0..p {
            est.beta[c][t] = None;
            est.err[c][t] = None;
        }
        for (j, &(c, a, b)) in cols.iter().enumerate() {
            if !(a..b).contains(&t) {
                continue;
            }
            est.beta[c][t] = Some(beta[j]);
            let free = beta[j] > 1e-9 && beta[j] < 1.0 - 1e-9;
            let var = match (&inv, free) {
                (Some(inv), true) => sigma2 * inv[(j, j)],
                _ => sigma2 / x.column(j).norm_squared().max(1e-300),
            };
            est.err[c][t] = Some(var.max(0.0).sqrt());
        }
    }
    est
}
