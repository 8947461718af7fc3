//! The clock of one host against another's as a line — offset **and** drift — from the
//! bounds matched messages put on it (a 2-variable linear program, solved on convex hulls).
//!
//! With `θ(x) = a + b·x` the correction that turns host B's time into host A's at B-time
//! `x` (measured from a chosen origin), a message A → B whose receive ended at B-time `r`
//! after its send began at A-time `s` says `θ(r) ≥ s − r` (a **lower** point
//! `(r, s − r)`), and a message B → A says `θ(s) ≤ r − s` (an **upper** point). The lines
//! `(a, b)` above every lower point and below every upper point form a convex polygon; only
//! the upper hull of the lower points and the lower hull of the upper points bound it. The
//! polygon's vertices are intersections of two bounding lines; the estimate takes the
//! middle of its drift range and, at that drift, the middle of the offsets allowed, and the
//! uncertainties are half the polygon's ranges. No point on one side, or all points at one
//! time, leaves the drift unbounded (then: drift 0, the offset as the old interval gives
//! it); an empty polygon (clocks that do not drift linearly, or a wrong match) is reported.

/// A fitted line and how well it is known.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LineFit {
    /// Offset at the origin, ns.
    pub a: f64,
    /// Half the range of offsets the polygon allows at the origin (∞ if unbounded).
    pub a_unc: f64,
    /// The offsets' range at the origin.
    pub a_range: (f64, f64),
    /// Drift (ns per ns).
    pub b: f64,
    /// Half the polygon's drift range (∞ if unbounded).
    pub b_unc: f64,
    /// The bounds crossed: no line fits every message.
    pub inconsistent: bool,
}

/// The upper (`upper = true`) or lower convex hull of points sorted by x.
fn hull(pts: &mut [(f64, f64)], upper: bool) -> Vec<(f64, f64)> {
    pts.sort_by(|p, q| p.0.total_cmp(&q.0).then(p.1.total_cmp(&q.1)));
    let mut h: Vec<(f64, f64)> = Vec::new();
    for &p in pts.iter() {
        while h.len() >= 2 {
            let (o, a) = (h[h.len() - 2], h[h.len() - 1]);
            let cross = (a.0 - o.0) * (p.1 - o.1) - (a.1 - o.1) * (p.0 - o.0);
            // Upper hull: drop `a` unless the turn o → a → p is clockwise.
            if (upper && cross >= 0.0) || (!upper && cross <= 0.0) {
                h.pop();
            } else {
                break;
            }
        }
        h.push(p);
    }
    h
}

/// Most hull points kept per side (evenly spaced) so that the vertex search stays small.
const HULL_MAX: usize = 256;

fn thin(h: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    if h.len() <= HULL_MAX {
        return h;
    }
    let step = h.len() as f64 / HULL_MAX as f64;
    (0..HULL_MAX)
        .map(|i| h[(i as f64 * step) as usize])
        .collect()
}

/// Fits `θ(x) = a + b·x` above `lower` and below `upper` (see the module docs).
pub fn fit(mut lower: Vec<(f64, f64)>, mut upper: Vec<(f64, f64)>) -> LineFit {
    let lo0 = lower.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    let hi0 = upper.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let offset_only = |inconsistent: bool| {
        let a = match (lo0.is_finite(), hi0.is_finite()) {
            (true, true) => (lo0 + hi0) / 2.0,
            (true, false) => lo0,
            (false, true) => hi0,
            _ => 0.0,
        };
        let unc = if lo0.is_finite() && hi0.is_finite() {
            (hi0 - lo0).abs() / 2.0
        } else {
            f64::INFINITY
        };
        LineFit {
            a,
            a_unc: unc,
            a_range: (lo0, hi0),
            b: 0.0,
            b_unc: f64::INFINITY,
            inconsistent,
        }
    };
    if lower.is_empty() || upper.is_empty() {
        return offset_only(false);
    }
    let l = thin(hull(&mut lower, true));
    let u = thin(hull(&mut upper, false));
    // Constraint lines in (a, b): a + b·x = y, with the side they bound.
    let lines: Vec<(f64, f64, bool)> = l
        .iter()
        .map(|&(x, y)| (x, y, true))
        .chain(u.iter().map(|&(x, y)| (x, y, false)))
        .collect();
    let scale = lines.iter().map(|c| c.1.abs()).fold(1.0, f64::max);
    let eps = 1e-9 * scale + 1e-3;
    let ok = |a: f64, b: f64| {
        lines.iter().all(|&(x, y, low)| {
            let v = a + b * x;
            if low {
                v >= y - eps
            } else {
                v <= y + eps
            }
        })
    };
    let (mut b_min, mut b_max) = (f64::INFINITY, f64::NEG_INFINITY);
    let (mut a_min, mut a_max) = (f64::INFINITY, f64::NEG_INFINITY);
    for i in 0..lines.len() {
        for j in i + 1..lines.len() {
            let (xi, yi, _) = lines[i];
            let (xj, yj, _) = lines[j];
            if (xi - xj).abs() < 1.0 {
                continue;
            }
            let b = (yi - yj) / (xi - xj);
            let a = yi - b * xi;
            if ok(a, b) {
                b_min = b_min.min(b);
                b_max = b_max.max(b);
                a_min = a_min.min(a);
                a_max = a_max.max(a);
            }
        }
    }
    if b_min > b_max {
        // No vertex: the polygon is empty, or unbounded (every point at one time).
        return offset_only(lo0 > hi0 && !ok((lo0 + hi0) / 2.0, 0.0));
    }
    // A polygon bounded on one side only in b has its vertices but open edges: a line
    // through a vertex with a slightly larger or smaller slope still fits.
    let unbounded = |b: f64| {
        let lo = l
            .iter()
            .map(|&(x, y)| y - b * x)
            .fold(f64::NEG_INFINITY, f64::max);
        let hi = u
            .iter()
            .map(|&(x, y)| y - b * x)
            .fold(f64::INFINITY, f64::min);
        lo <= hi + eps
    };
    let span = lines.iter().map(|c| c.0.abs()).fold(1.0, f64::max);
    let nudge = 1e3 * scale / span;
    if unbounded(b_max + nudge) || unbounded(b_min - nudge) {
        return offset_only(false);
    }
    let b = (b_min + b_max) / 2.0;
    let lo = l
        .iter()
        .map(|&(x, y)| y - b * x)
        .fold(f64::NEG_INFINITY, f64::max);
    let hi = u
        .iter()
        .map(|&(x, y)| y - b * x)
        .fold(f64::INFINITY, f64::min);
    LineFit {
        a: (lo + hi) / 2.0,
        a_unc: (a_max - a_min) / 2.0,
        a_range: (a_min, a_max),
        b,
        b_unc: (b_max - b_min) / 2.0,
        inconsistent: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages both ways between two clocks: B runs `ppm` fast and `off` ns behind A;
    /// latencies 20–120 µs; times over `secs` seconds.
    type Points = Vec<(f64, f64)>;

    fn messages(off: f64, ppm: f64, secs: f64, n: usize) -> (Points, Points) {
        let (mut lower, mut upper) = (Vec::new(), Vec::new());
        // B-time of A-time t: t·(1 + ppm) − off (θ(x) ≈ off − ppm·x).
        let b_of = |t: f64| t * (1.0 + ppm * 1e-6) - off;
        for i in 0..n {
            let t = -secs * 0.5e9 + secs * 1e9 * i as f64 / n as f64;
            let lat = 20e3 + 100e3 * ((i * 7919 % 101) as f64 / 100.0);
            // A → B: sent at A-time t, received at A-time t + lat.
            let r = b_of(t + lat);
            lower.push((r, t - r));
            // B → A: sent at B-time of t, received at A-time t + lat.
            let s = b_of(t);
            upper.push((s, t + lat - s));
        }
        (lower, upper)
    }

    #[test]
    fn offset_and_drift_come_back_within_their_uncertainty() {
        for (off, ppm) in [(50e6, 100.0), (-50e6, -100.0), (3e6, 0.0), (0.0, 30.0)] {
            let (l, u) = messages(off, ppm, 4.0, 400);
            let f = fit(l, u);
            assert!(!f.inconsistent, "{f:?}");
            let b_true = -ppm * 1e-6 / (1.0 + ppm * 1e-6);
            assert!((f.b - b_true).abs() <= f.b_unc, "{off} {ppm}: {f:?}");
            // θ at B-time 0 is the A-time of B-time 0, minus 0.
            let a_true = off / (1.0 + ppm * 1e-6);
            assert!((f.a - a_true).abs() <= f.a_unc, "{off} {ppm}: {f:?}");
            assert!(f.a_unc < 200e3 && f.b_unc < 100e-6, "{f:?}");
        }
    }

    #[test]
    fn one_way_messages_leave_the_drift_unknown() {
        let (l, _) = messages(1e6, 50.0, 1.0, 50);
        let f = fit(l, Vec::new());
        assert!(f.b_unc.is_infinite() && f.a_unc.is_infinite());
        // Crossed bounds at every drift: inconsistent.
        let f = fit(vec![(0.0, 10.0), (1e9, 10.0)], vec![(0.0, 0.0), (1e9, 0.0)]);
        assert!(f.inconsistent, "{f:?}");
    }
}
