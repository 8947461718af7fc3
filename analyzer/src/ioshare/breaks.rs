//! Where each process's share jumps or bends: the search behind [`super::segments`].
//!
//! Each share is modelled as a linear spline with jumps, `β(t) = a + Σ cₖ·[t ≥ σₖ] +
//! Σ dₖ·(t − τₖ)₊`: constant where it neither jumps nor bends, so that a job switching
//! from scratch files to the shared mount is one jump, and a share that changes gradually
//! is a bend where the drift starts and one where it stops rather than a staircase of
//! jumps. In the server's load `y = Σᵢ βᵢ(t)·xᵢ(t)` each break of process i is one more
//! design column: its IO from σ on, or its IO weighted by the time since τ.
//!
//! - **Forward search**, joint over processes: the break (process, kind, time) that most
//!   reduces the weighted residual sum of squares is added while the reduction exceeds
//!   `pen = penalty · σ² · ln n` (Schwarz's criterion, a break counting as two parameters —
//!   its place and its size — with the default penalty 2). The reduction at every
//!   candidate time is computed at once from suffix sums against an orthonormal basis of
//!   the current design, which each break extends by one Gram–Schmidt step.
//! - **Refinement**: each break is taken out in turn and put back, as either kind, where it
//!   reduces the residual most between the process's neighbouring breaks, or dropped if no
//!   place there pays `pen` (two sweeps at most) — judged on the data between the
//!   neighbours, so that each test is small.
//! - A greedy search can settle on the wrong kind: started with both kinds on shares that
//!   jump, an early bend across several jumps takes the place of the jumps; started with
//!   jumps only on a drifting share, it lays a staircase. So three models are searched —
//!   jumps only; jumps, then bends added to them; both kinds from the start — and the one
//!   with the least residual sum of squares plus `pen` per break over the whole stretch is
//!   kept.
//!
//! No two breaks of a process are closer than `min_len` intervals, nor closer to the ends.
//! Rows carry the Huber weights of the windowed regression's residuals.

use super::series::Series;
use nalgebra::{DMatrix, DVector};

/// What a break does to a share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The share changes at once.
    Jump,
    /// The share's rate of change changes (it starts, stops or reverses drifting).
    Bend,
}

/// A process's break at interval `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Break {
    /// First interval after the break.
    pub at: usize,
    /// Jump or bend.
    pub kind: Kind,
}

/// The weighted design column of process `col` over `from..to` (row 0 = `from`): its
/// level (`None`), or one break's column, or the slope it carries into the range from
/// bends before it (`Some(Break { at: from, kind: Bend })`).
fn column(
    s: &Series,
    w: &[f64],
    col: usize,
    from: usize,
    to: usize,
    b: Option<Break>,
) -> DVector<f64> {
    let x = &s.columns[col].x;
    DVector::from_fn(to - from, |i, _| {
        let t = from + i;
        let v = w[t] * x[t];
        match b {
            None => v,
            Some(Break { at, .. }) if t < at => 0.0,
            Some(Break {
                kind: Kind::Jump, ..
            }) => v,
            Some(Break {
                at,
                kind: Kind::Bend,
            }) => v * (t - at) as f64,
        }
    })
}

/// The design over `from..to` of every process's breaks in `model` (the slope of bends
/// before `from` as one column), leaving out break `k` of process `c` for `skip =
/// Some((c, k))`.
fn design(
    s: &Series,
    w: &[f64],
    model: &[Vec<Break>],
    from: usize,
    to: usize,
    skip: Option<(usize, usize)>,
) -> Vec<DVector<f64>> {
    let mut out = Vec::new();
    for (c, breaks) in model.iter().enumerate() {
        out.push(column(s, w, c, from, to, None));
        let mut bent = false;
        for (k, b) in breaks.iter().enumerate() {
            if skip == Some((c, k)) {
                continue;
            }
            if b.at <= from {
                bent |= b.kind == Kind::Bend;
            } else if b.at < to {
                out.push(column(s, w, c, from, to, Some(*b)));
            }
        }
        if bent {
            out.push(column(
                s,
                w,
                c,
                from,
                to,
                Some(Break {
                    at: from,
                    kind: Kind::Bend,
                }),
            ));
        }
    }
    out
}

/// An orthonormal basis of the columns' span (as vectors) and the residual of `yw`.
pub(super) fn basis(cols: &[DVector<f64>], yw: &DVector<f64>) -> (Vec<DVector<f64>>, DVector<f64>) {
    let m = yw.len();
    let cols: Vec<&DVector<f64>> = cols.iter().filter(|c| c.norm() > 0.0).collect();
    if cols.is_empty() {
        return (Vec::new(), yw.clone());
    }
    let z = DMatrix::from_fn(m, cols.len(), |i, j| cols[j][i]);
    let svd = z.svd(true, false);
    let u = svd.u.expect("u requested");
    let top = svd.singular_values.max();
    let q: Vec<DVector<f64>> = (0..svd.singular_values.len())
        .filter(|&k| svd.singular_values[k] > 1e-9 * top)
        .map(|k| u.column(k).into_owned())
        .collect();
    let mut r = yw.clone();
    for qj in &q {
        let d = qj.dot(&r);
        r.axpy(-d, qj, 1.0);
    }
    (q, r)
}

/// The best break of each kind for process `col` over the rows of `q` and `r` (rows 0.. =
/// intervals `from..`), at a time in `lo..hi` at least `min_len` from each of `others`:
/// (reduction, time) for a jump and a bend.
#[allow(clippy::too_many_arguments)]
fn best_breaks(
    s: &Series,
    w: &[f64],
    q: &[DVector<f64>],
    r: &DVector<f64>,
    col: usize,
    from: usize,
    (lo, hi): (usize, usize),
    others: &[Break],
    min_len: usize,
) -> [Option<(f64, usize)>; 2] {
    let m = r.len();
    let k = q.len();
    let x = &s.columns[col].x;
    // Suffix sums over rows ≥ τ of v = w·x (jump: v; bend: v·(t − τ) = v·t − τ·v).
    let (mut q0, mut q1) = (vec![0.0; k], vec![0.0; k]);
    let (mut r0, mut r1) = (0.0, 0.0);
    let (mut a0, mut a1, mut a2) = (0.0, 0.0, 0.0);
    let total: f64 = (0..m).map(|i| (w[from + i] * x[from + i]).powi(2)).sum();
    let tiny = 1e-9 * total.max(1e-300);
    let mut best = [None, None];
    for i in (lo.saturating_sub(from)..m).rev() {
        let t = from + i;
        let v = w[t] * x[t];
        if v != 0.0 {
            let ti = i as f64;
            for j in 0..k {
                q0[j] += q[j][i] * v;
                q1[j] += q[j][i] * v * ti;
            }
            r0 += r[i] * v;
            r1 += r[i] * v * ti;
            a0 += v * v;
            a1 += v * v * ti;
            a2 += v * v * ti * ti;
        }
        if t >= hi || others.iter().any(|b| b.at.abs_diff(t) < min_len) {
            continue;
        }
        let ti = i as f64;
        // Jump.
        let den = a0 - q0.iter().map(|a| a * a).sum::<f64>();
        if den > tiny {
            let g = r0 * r0 / den;
            if best[0].is_none_or(|(b, _)| g > b) {
                best[0] = Some((g, t));
            }
        }
        // Bend: z = v·(t − τ).
        let zz = a2 - 2.0 * ti * a1 + ti * ti * a0;
        let qz: f64 = q1.iter().zip(&q0).map(|(a, b)| (a - ti * b).powi(2)).sum();
        let den = zz - qz;
        if den > tiny * (m as f64).powi(2) {
            let rz = r1 - ti * r0;
            let g = rz * rz / den;
            if best[1].is_none_or(|(b, _)| g > b) {
                best[1] = Some((g, t));
            }
        }
    }
    best
}

/// The breaks of each column over the whole series (sorted by time), with row weights
/// `w`, noise variance `sigma2` of the weighted residuals and penalty `penalty` (in
/// `σ² · ln n` per break; `bends`: whether bends are looked for, else jumps only).
pub fn search(
    s: &Series,
    w: &[f64],
    sigma2: f64,
    penalty: f64,
    min_len: usize,
    bends: bool,
) -> Vec<Vec<Break>> {
    let n = s.y.len();
    let p = s.columns.len();
    let min_len = min_len.max(1);
    let model: Vec<Vec<Break>> = vec![Vec::new(); p];
    if n < 2 * min_len || sigma2 <= 0.0 {
        return model;
    }
    let pen = penalty * sigma2 * (n as f64).ln();
    let mut jumps = model;
    forward(s, w, pen, min_len, false, &mut jumps);
    refine(s, w, pen, min_len, false, &mut jumps);
    if !bends {
        return jumps;
    }
    let bends_from = |mut m: Vec<Vec<Break>>| {
        forward(s, w, pen, min_len, true, &mut m);
        refine(s, w, pen, min_len, true, &mut m);
        m
    };
    let (then_bends, both) = rayon::join(
        || bends_from(jumps.clone()),
        || bends_from(vec![Vec::new(); p]),
    );
    [jumps, then_bends, both]
        .into_iter()
        .map(|m| (criterion(s, w, pen, &m), m))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, m)| m)
        .unwrap_or_default()
}

/// Adds breaks to `model` (jumps, and bends with `bends`) while the best one reduces the
/// weighted residual sum of squares by more than `pen`.
fn forward(s: &Series, w: &[f64], pen: f64, min_len: usize, bends: bool, model: &mut [Vec<Break>]) {
    let n = s.y.len();
    let p = s.columns.len();
    let yw = DVector::from_fn(n, |t, _| w[t] * s.y[t]);
    let (mut q, mut r) = basis(&design(s, w, model, 0, n, None), &yw);
    for _ in 0..2 * p * (n / min_len) {
        let mut best: Option<(f64, usize, Break)> = None;
        for (col, breaks) in model.iter().enumerate() {
            let found = best_breaks(
                s,
                w,
                &q,
                &r,
                col,
                0,
                (min_len, n + 1 - min_len),
                breaks,
                min_len,
            );
            for (kind, f) in [(Kind::Jump, found[0]), (Kind::Bend, found[1])] {
                let Some((gain, at)) = f else { continue };
                if kind == Kind::Bend && !bends {
                    continue;
                }
                if best.is_none_or(|(g, _, _)| gain > g) {
                    best = Some((gain, col, Break { at, kind }));
                }
            }
        }
        let Some((gain, col, b)) = best else { break };
        if gain <= pen {
            break;
        }
        let mut z = column(s, w, col, 0, n, Some(b));
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
        model[col].push(b);
        model[col].sort_by_key(|b| b.at);
    }
}

/// Schwarz's criterion of a model over the whole series: the weighted residual sum of
/// squares plus `pen` per break.
fn criterion(s: &Series, w: &[f64], pen: f64, model: &[Vec<Break>]) -> f64 {
    let n = s.y.len();
    let yw = DVector::from_fn(n, |t, _| w[t] * s.y[t]);
    let (_, r) = basis(&design(s, w, model, 0, n, None), &yw);
    r.norm_squared() + pen * model.iter().map(Vec::len).sum::<usize>() as f64
}

/// Each break is put back at its best place (either kind, with `bends`) between the
/// process's neighbouring breaks, or dropped if no place there pays `pen` — judged on the
/// data between the neighbours, with every other break that falls there in the design.
fn refine(s: &Series, w: &[f64], pen: f64, min_len: usize, bends: bool, model: &mut [Vec<Break>]) {
    let n = s.y.len();
    for _ in 0..2 {
        let mut moved = false;
        for col in 0..model.len() {
            let mut k = 0;
            while k < model[col].len() {
                let from = if k > 0 { model[col][k - 1].at } else { 0 };
                let to = model[col].get(k + 1).map_or(n, |b| b.at);
                let yw = DVector::from_fn(to - from, |i, _| w[from + i] * s.y[from + i]);
                let (q, r) = basis(&design(s, w, model, from, to, Some((col, k))), &yw);
                let found = best_breaks(
                    s,
                    w,
                    &q,
                    &r,
                    col,
                    from,
                    (from + min_len, (to + 1).saturating_sub(min_len)),
                    &[],
                    min_len,
                );
                let best = [(Kind::Jump, found[0]), (Kind::Bend, found[1])]
                    .into_iter()
                    .filter(|(kind, _)| bends || *kind == Kind::Jump)
                    .filter_map(|(kind, f)| f.map(|(g, at)| (g, Break { at, kind })))
                    .max_by(|a, b| a.0.total_cmp(&b.0));
                match best {
                    Some((gain, b)) if gain > pen => {
                        if b != model[col][k] {
                            model[col][k] = b;
                            moved = true;
                        }
                        k += 1;
                    }
                    _ => {
                        model[col].remove(k);
                        moved = true;
                    }
                }
            }
        }
        if !moved {
            break;
        }
    }
}
