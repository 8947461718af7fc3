//! Where each process's share changes, and the regression that respects it.
//!
//! A share changes at moments (a job switches from scratch files to the shared mount) or
//! over a while (a job's output moves gradually to the shared mount), and a sliding window
//! that straddles a change mixes two shares — and, since the processes are fitted jointly,
//! spoils the neighbours' shares as well. Here each process's share is modelled over the
//! whole run as segments, each with a constant share or one that drifts linearly across
//! it, found on the data:
//!
//! 1. **Breaks** ([`super::breaks`]): where each share jumps or bends, by a forward search
//!    and refinement under Schwarz's criterion (`penalty · σ² · ln n` per break, two
//!    parameters). A long run is searched in blocks (`block` intervals, 40 windows by
//!    default) overlapping by half, in parallel, which bounds the cost; the segments run
//!    across them.
//! 2. **Drifts** ([`drifts`]): neighbouring segments that are better one drifting segment
//!    (a level and a drift, against a change point and two levels) are merged, and each
//!    segment drifts where its drift pays its one parameter (`penalty · σ² · ln n / 2`) —
//!    judged on the segments' data with the other processes' segments cut there.
//!
//! Rows are weighted by Huber weights of the windowed regression's residuals, and σ² is
//! the mean weighted squared residual: a burst the server flushed late pulls little, as in
//! the windowed fit. No segment is shorter than `min_len` intervals.
//!
//! The estimate is then the windowed regression of [`super::regression`] over a window of
//! `window` intervals (twice the regression's by default: with the changes modelled, a
//! longer window no longer blurs them) in which each process has one column per segment
//! that meets the window, two for a drifting one (its share at either end of its rows in
//! the window, both in [0, 1], linear between); β of a process at t is that of its segment
//! at t. A change that was missed thus spoils only one window's worth of estimates, and
//! one found where none was costs only variance.

use super::breaks::{basis, search, Break};
use super::bvls::bvls;
use super::regression::{huber_refit, window_rows};
use super::series::Series;
use super::{Estimate, Status};
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

/// Options of the change-point search and of the segmented windows.
#[derive(Clone, Copy, Debug)]
pub struct SegmentOptions {
    /// Shortest segment, in intervals.
    pub min_len: usize,
    /// A break must reduce the weighted residual sum of squares by `penalty · σ² · ln n`
    /// (default 2: Schwarz's criterion with two parameters per break); a drift, one
    /// parameter, by half that.
    pub penalty: f64,
    /// Intervals per segmented window.
    pub window: usize,
    /// Intervals searched at once (a longer run is searched in blocks).
    pub block: usize,
    /// Whether a share may bend and a segment's share drift linearly across it (`false`:
    /// piecewise constant only).
    pub drift: bool,
}

/// Each process's segments: where its share changes and, between the changes, whether
/// it drifts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pieces {
    /// Change points of each process (sorted interval indices: a segment starts there).
    pub change_points: Vec<Vec<usize>>,
    /// Per process, per segment (from 0 through each change point to the end): its share
    /// drifts linearly across it rather than staying constant.
    pub drifting: Vec<Vec<bool>>,
}

impl Pieces {
    /// Every process's segments as `(from, to, drifting)`.
    pub fn ranges(&self, n: usize) -> Vec<Vec<(usize, usize, bool)>> {
        self.change_points
            .iter()
            .enumerate()
            .map(|(c, cps)| {
                let mut bounds = vec![0];
                bounds.extend(cps.iter().copied());
                bounds.push(n);
                bounds
                    .windows(2)
                    .enumerate()
                    .map(|(k, b)| {
                        let d = self.drifting.get(c).and_then(|v| v.get(k)).copied();
                        (b[0], b[1], d.unwrap_or(false))
                    })
                    .collect()
            })
            .collect()
    }
}

/// One process's segment: column `col`, intervals `from..to`; `sloped`: its share drifts
/// across it (a second design column, the IO weighted by time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    col: usize,
    from: usize,
    to: usize,
    sloped: bool,
}

impl Segment {
    /// Position of interval `t` (in the segment) across it, centred: −½ … ½.
    fn u(&self, t: usize) -> f64 {
        (t - self.from) as f64 / (self.to - self.from) as f64 - 0.5
    }

    /// The design columns of the segment (weighted by `w`): its level, and its drift
    /// when sloped.
    fn columns(&self, s: &Series, w: &[f64]) -> Vec<DVector<f64>> {
        let n = s.y.len();
        let x = &s.columns[self.col].x;
        let level = DVector::from_fn(n, |t, _| {
            if (self.from..self.to).contains(&t) {
                w[t] * x[t]
            } else {
                0.0
            }
        });
        if !self.sloped {
            return vec![level];
        }
        let slope = DVector::from_fn(n, |t, _| {
            if level[t] != 0.0 {
                level[t] * self.u(t)
            } else {
                0.0
            }
        });
        vec![level, slope]
    }
}

/// The segments of a model (`ranges` per column) that carry IO.
fn segments(s: &Series, ranges: &[Vec<(usize, usize, bool)>]) -> Vec<Segment> {
    let mut out = Vec::new();
    for (col, r) in ranges.iter().enumerate() {
        for &(from, to, sloped) in r {
            if s.columns[col].x[from..to].iter().any(|&v| v > 0.0) {
                out.push(Segment {
                    col,
                    from,
                    to,
                    sloped,
                });
            }
        }
    }
    out
}

/// Each process's segments, with row weights `w` and noise variance `sigma2` (of the
/// weighted residuals): the breaks of its share ([`breaks`]), then which segments between
/// them drift ([`drifts`]).
pub fn pieces(s: &Series, w: &[f64], sigma2: f64, o: &SegmentOptions) -> Pieces {
    let change_points: Vec<Vec<usize>> = breaks(s, w, sigma2, o)
        .iter()
        .map(|b| b.iter().map(|b| b.at).collect())
        .collect();
    drifts(s, w, sigma2, &change_points, o)
}

/// The breaks of each column's share (sorted by time; jumps only without `o.drift`), with
/// row weights `w` and noise variance `sigma2` (of the weighted residuals).
///
/// Each step of the search decomposes the design of the whole stretch searched, so a long
/// run is searched in blocks of `o.block` intervals overlapping by half: the cost grows
/// with the run's length instead of its cube. The blocks bound only the search; the
/// segments of the estimate run across them.
pub fn breaks(s: &Series, w: &[f64], sigma2: f64, o: &SegmentOptions) -> Vec<Vec<Break>> {
    let n = s.y.len();
    let block = o.block.max(4 * o.min_len.max(1));
    let search = |part: &Series, w: &[f64]| search(part, w, sigma2, o.penalty, o.min_len, o.drift);
    if n < 2 * block {
        return search(s, w);
    }
    // Blocks overlap by half; each keeps the breaks of its middle half (the first from
    // the start, the last to the end), so a break near a block's edge is in the middle
    // of another. The blocks are searched in parallel.
    let half = block / 2;
    let mut blocks = Vec::new();
    let mut from = 0;
    loop {
        let last = n - from < block + half;
        let to = if last { n } else { from + block };
        let keep_from = if from == 0 { 0 } else { from + half / 2 };
        let keep_to = if last { n } else { to - half / 2 };
        blocks.push((from, to, keep_from..keep_to));
        if last {
            break;
        }
        from += half;
    }
    let found: Vec<Vec<Vec<Break>>> = blocks
        .par_iter()
        .map(|(from, to, keep)| {
            search(&s.intervals(*from..*to), &w[*from..*to])
                .into_iter()
                .map(|bs| {
                    bs.into_iter()
                        .map(|b| Break {
                            at: b.at + from,
                            ..b
                        })
                        .filter(|b| keep.contains(&b.at))
                        .collect()
                })
                .collect()
        })
        .collect();
    let mut out: Vec<Vec<Break>> = vec![Vec::new(); s.columns.len()];
    for block in found {
        for (all, bs) in out.iter_mut().zip(block) {
            all.extend(bs);
        }
    }
    // Two blocks' breaks of one process closer than `min_len`: keep the first.
    for c in &mut out {
        c.sort_by_key(|b| b.at);
        c.dedup_by(|b, a| b.at < a.at + o.min_len.max(1));
    }
    out
}

/// The other columns' segments cut to `from..to` (shifted to start at 0), and column
/// `col`'s replaced by `own`.
fn local_ranges(
    model: &[Vec<(usize, usize, bool)>],
    col: usize,
    from: usize,
    to: usize,
    own: &[(usize, usize, bool)],
) -> Vec<Vec<(usize, usize, bool)>> {
    model
        .iter()
        .enumerate()
        .map(|(c, r)| {
            if c == col {
                return own.to_vec();
            }
            r.iter()
                .filter(|&&(a, b, _)| a < to && b > from)
                .map(|&(a, b, d)| (a.max(from) - from, b.min(to) - from, d))
                .collect()
        })
        .collect()
}

/// Residual sum of squares on `a..b` of the design made of the other columns' segments
/// cut there and column `col`'s segments `own` (shifted to start at 0).
fn local_rss(
    s: &Series,
    w: &[f64],
    model: &[Vec<(usize, usize, bool)>],
    col: usize,
    (a, b): (usize, usize),
    own: &[(usize, usize, bool)],
) -> f64 {
    let local = s.intervals(a..b);
    let w = &w[a..b];
    let cols: Vec<DVector<f64>> = segments(&local, &local_ranges(model, col, a, b, own))
        .iter()
        .flat_map(|g| g.columns(&local, w))
        .collect();
    let yw = DVector::from_fn(b - a, |t, _| w[t] * local.y[t]);
    basis(&cols, &yw).1.norm_squared()
}

/// Where shares drift, given the change points `cps`. Each process's neighbouring
/// segments are judged by Schwarz's criterion (the residual sum of squares plus `c =
/// penalty · σ² · ln n / 2` per parameter, on the data of the two segments with the other
/// processes' segments cut there): as they are — a change point and two levels, each with
/// its drift where that pays — or as one drifting segment (a level and a drift); the
/// cheaper wins, from the first change point on, a merged segment meeting the next (two
/// sweeps at most): a drift that the search cut into a staircase becomes one segment.
/// Then each segment of at least twice `o.min_len` intervals drifts if its drift pays its
/// parameter (two sweeps, each seeing the other segments' last decision). Returns the
/// change points left and, per segment, whether it drifts; all flat without `o.drift`.
pub fn drifts(
    s: &Series,
    w: &[f64],
    sigma2: f64,
    cps: &[Vec<usize>],
    o: &SegmentOptions,
) -> Pieces {
    let n = s.y.len();
    let mut model = Pieces {
        change_points: cps.to_vec(),
        drifting: Vec::new(),
    }
    .ranges(n);
    if o.drift && sigma2 > 0.0 {
        let c = 0.5 * o.penalty * sigma2 * (n as f64).ln();
        let long = |a: usize, b: usize| b - a >= 2 * o.min_len.max(1);
        // Whether segment a..b of `col` drifts, on its own data.
        let drifts = |model: &[Vec<(usize, usize, bool)>], col: usize, a: usize, b: usize| {
            long(a, b)
                && local_rss(s, w, model, col, (a, b), &[(0, b - a, true)]) + c
                    < local_rss(s, w, model, col, (a, b), &[(0, b - a, false)])
        };
        for _ in 0..2 {
            let mut merged = false;
            for col in 0..model.len() {
                let mut j = 1;
                while j < model[col].len() {
                    let (a, m, _) = model[col][j - 1];
                    let (_, b, _) = model[col][j];
                    let (d1, d2) = (drifts(&model, col, a, m), drifts(&model, col, m, b));
                    let own = [(0, m - a, d1), (m - a, b - a, d2)];
                    let apart = local_rss(s, w, &model, col, (a, b), &own)
                        + c * (2.0 + f64::from(u8::from(d1)) + f64::from(u8::from(d2)));
                    let one = local_rss(s, w, &model, col, (a, b), &[(0, b - a, true)]) + c;
                    if long(a, b) && one < apart {
                        model[col][j - 1] = (a, b, true);
                        model[col].remove(j);
                        merged = true;
                    } else {
                        j += 1;
                    }
                }
            }
            if !merged {
                break;
            }
        }
        for _ in 0..2 {
            let mut changed = false;
            for col in 0..model.len() {
                for k in 0..model[col].len() {
                    let (a, b, was) = model[col][k];
                    let now = drifts(&model, col, a, b);
                    if now != was {
                        model[col][k].2 = now;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
    }
    Pieces {
        change_points: model
            .iter()
            .map(|r| r.iter().skip(1).map(|g| g.0).collect())
            .collect(),
        drifting: model
            .iter()
            .map(|r| r.iter().map(|g| g.2).collect())
            .collect(),
    }
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
/// lag per interval is reused), `pieces` each process's segments. In each window, a
/// segment meeting it is one column — or, if it drifts and has at least four rows there,
/// two: its share at the first and at the last of those rows, linear between, both in
/// [0, 1] (so the share stays in [0, 1] across them). The windows are fitted in parallel.
pub fn estimate(s: &Series, base: &Estimate, pieces: &Pieces, o: &SegmentOptions) -> Estimate {
    let n = s.y.len();
    let p = s.columns.len();
    let ranges = pieces.ranges(n);
    let fits: Vec<Option<Shares>> = (0..n)
        .into_par_iter()
        .map(|t| fit_window(s, base, &ranges, o, t, false).map(|f| f.0))
        .collect();
    let mut est = base.clone();
    for (t, fit) in fits.into_iter().enumerate() {
        let Some(fit) = fit else { continue };
        for c in 0..p {
            est.beta[c][t] = None;
            est.err[c][t] = None;
        }
        for (c, beta, err) in fit {
            est.beta[c][t] = Some(beta);
            est.err[c][t] = Some(err);
        }
    }
    est
}

/// Each process's (column, β, standard error) at one interval.
type Shares = Vec<(usize, f64, f64)>;

/// Intervals left out, at most, to rank the segmented windows (200).
const LOO_POINTS: usize = 200;

/// The segmented window, in intervals, chosen among `candidates` by leave-one-out
/// cross-validation: the one whose windows, each fitted without its own middle interval,
/// predict the server's load there with the least mean absolute error (over at most
/// 200 intervals spread over the run). With the changes modelled, a longer window no longer blurs them and averages more noise out — until a
/// change the segments missed or a course they draw wrong pulls the prediction. Returns
/// the window and each candidate's error (bytes per interval).
pub fn choose_window(
    s: &Series,
    base: &Estimate,
    pieces: &Pieces,
    o: &SegmentOptions,
    candidates: &[usize],
) -> (usize, Vec<f64>) {
    let errors: Vec<f64> = candidates
        .iter()
        .map(|&window| loo_error(s, base, pieces, &SegmentOptions { window, ..*o }))
        .collect();
    let best = (0..candidates.len())
        .min_by(|&a, &b| errors[a].total_cmp(&errors[b]))
        .map_or(o.window, |k| candidates[k]);
    (best, errors)
}

/// The mean leave-one-out absolute prediction error of segmented windows of `o.window`
/// intervals, over at most [`LOO_POINTS`] intervals.
fn loo_error(s: &Series, base: &Estimate, pieces: &Pieces, o: &SegmentOptions) -> f64 {
    let n = s.y.len();
    let ranges = pieces.ranges(n);
    // At most `LOO_POINTS` intervals, evenly spread: the error of a window length is a
    // mean over the run, and a long run need not be predicted in full to rank four.
    let every = n.div_ceil(LOO_POINTS).max(1);
    let e: Vec<f64> = (0..n)
        .step_by(every)
        .filter(|&t| s.usable(t))
        .collect::<Vec<_>>()
        .into_par_iter()
        .filter_map(|t| fit_window(s, base, &ranges, o, t, true).map(|f| f.1))
        .collect();
    e.iter().map(|v| v.abs()).sum::<f64>() / e.len().max(1) as f64
}

/// The segmented window around `t` (without row t itself with `leave_out`): each process's
/// (β, standard error) at t, and the error of the window's prediction of the server's load
/// at t; `None` where the windowed estimate `base` stands (an idle or underdetermined
/// window).
fn fit_window(
    s: &Series,
    base: &Estimate,
    ranges: &[Vec<(usize, usize, bool)>],
    o: &SegmentOptions,
    t: usize,
    leave_out: bool,
) -> Option<(Shares, f64)> {
    let n = s.y.len();
    let p = s.columns.len();
    if matches!(base.status[t], Status::Idle | Status::Insufficient) {
        return None;
    }
    let rows: Vec<usize> = window_rows(n, t, o.window, true).collect();
    let (lo, hi) = (rows[0], rows[rows.len() - 1]);
    let rows: Vec<usize> = rows
        .into_iter()
        .filter(|&r| (!leave_out || r != t) && s.usable(r))
        .collect();
    let lambda = base.lag[t].unwrap_or(0.0);
    let lagged = |c: usize, r: usize| {
        let x = &s.columns[c].x;
        (1.0 - lambda) * x[r] + lambda * if r > 0 { x[r - 1] } else { 0.0 }
    };
    // Columns: (process, first row, end, part): part 0 a constant share; 1 and 2 a
    // drifting share's value at the first and at the last row. A part gets columns only
    // if some fitted row shows its bytes: one whose bytes fall only in unsure intervals
    // would be a column of zeros, fitted as β 0.
    let mut cols: Vec<(usize, usize, usize, u8)> = Vec::new();
    for (c, r) in ranges.iter().enumerate().take(p) {
        for &(from, to, drifting) in r {
            let (a, b) = (from.max(lo), to.min(hi + 1));
            if a >= b
                || !rows
                    .iter()
                    .any(|&r| (a..b).contains(&r) && lagged(c, r) > 0.0)
            {
                continue;
            }
            if drifting && b - a >= 4 {
                cols.push((c, a, b, 1));
                cols.push((c, a, b, 2));
            } else {
                cols.push((c, a, b, 0));
            }
        }
    }
    if cols.is_empty() || rows.len() < cols.len() + 1 {
        return None;
    }
    // Position of row r between a part's first (0) and last (1) row.
    let u = |a: usize, b: usize, r: usize| (r - a) as f64 / (b - 1 - a) as f64;
    let m = rows.len();
    let k = cols.len();
    let cell = |j: usize, r: usize| {
        let (c, a, b, part) = cols[j];
        if !(a..b).contains(&r) {
            return 0.0;
        }
        lagged(c, r)
            * match part {
                0 => 1.0,
                1 => 1.0 - u(a, b, r),
                _ => u(a, b, r),
            }
    };
    let x = DMatrix::from_fn(m, k, |i, j| cell(j, rows[i]));
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
    let mut out = Vec::new();
    let free = |j: usize| beta[j] > 1e-9 && beta[j] < 1.0 - 1e-9;
    for (j, &(c, a, b, part)) in cols.iter().enumerate() {
        if !(a..b).contains(&t) || part == 2 {
            continue;
        }
        // β at t = vᵀ (the part's coefficients); its variance σ² vᵀ (XᵀX)⁻¹ v when
        // they are inside the box, else that of the combined column alone.
        let v: Vec<(usize, f64)> = if part == 0 {
            vec![(j, 1.0)]
        } else {
            vec![(j, 1.0 - u(a, b, t)), (j + 1, u(a, b, t))]
        };
        let value: f64 = v.iter().map(|&(i, f)| f * beta[i]).sum();
        let var = match &inv {
            Some(inv) if v.iter().all(|&(i, _)| free(i)) => {
                sigma2
                    * v.iter()
                        .flat_map(|&(i, f)| v.iter().map(move |&(l, g)| f * g * inv[(i, l)]))
                        .sum::<f64>()
            }
            _ => {
                let col: DVector<f64> = v.iter().map(|&(i, f)| x.column(i) * f).sum();
                sigma2 / col.norm_squared().max(1e-300)
            }
        };
        out.push((c, value, var.max(0.0).sqrt()));
    }
    let predicted: f64 = (0..k).map(|j| beta[j] * cell(j, t)).sum();
    Some((out, s.y[t] - predicted))
}
