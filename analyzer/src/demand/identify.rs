//! **Can the training window identify the demands?** The utilization law tells the demands
//! of several request types apart only if their counts vary independently over the
//! training intervals: a window in which the mix never changes (every interval 80 % of one
//! type, 20 % of the other) fixes only the demand of that mix, and the chart then alarms
//! when the mix changes. The test is Belsley's **condition index** of the training count
//! matrix with its columns scaled to unit length: above [`COLLINEAR`] (Belsley, Kuh and
//! Welsch's limit for strong collinearity) the window is too collinear.
//!
//! With the default window, a collinear start is **widened** interval by interval to the
//! shortest window that is not, at most to [`MAX_SHARE`] of the process's steady flow
//! (`super::flow`: from where it starts to the run's end; a third is left to watch); if none is, the report says so and asks for a normal run (`--baseline`).

use nalgebra::DMatrix;

/// Condition index above which the counts are too collinear to tell the types apart.
pub const COLLINEAR: f64 = 30.0;
/// The default window is widened up to this share of the steady flow.
pub const MAX_SHARE: f64 = 2.0 / 3.0;

/// Belsley's condition index of the rows `a` (intervals × types) with each column scaled to
/// unit length; columns of zeros (types not seen) are left out. `None` without a nonzero
/// column; 1 for one column.
pub fn condition_index(a: &[Vec<f64>]) -> Option<f64> {
    let k = a.first().map_or(0, |r| r.len());
    let cols: Vec<usize> = (0..k).filter(|&i| a.iter().any(|r| r[i] != 0.0)).collect();
    if cols.is_empty() {
        return None;
    }
    let norms: Vec<f64> = cols
        .iter()
        .map(|&i| a.iter().map(|r| r[i] * r[i]).sum::<f64>().sqrt())
        .collect();
    let m = DMatrix::from_fn(a.len(), cols.len(), |j, c| a[j][cols[c]] / norms[c]);
    let ev = (m.transpose() * &m).symmetric_eigenvalues();
    let hi = ev.max();
    let lo = ev.min().max(0.0);
    Some(if lo <= hi * 1e-24 {
        f64::INFINITY
    } else {
        (hi / lo).sqrt()
    })
}

/// What the training window became.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    /// Intervals of the window (from the process's first).
    pub end: usize,
    /// Its condition index, if any type was seen in it.
    pub condition: Option<f64>,
    /// What to tell the reader, if anything.
    pub note: Option<String>,
}

/// Chooses the training window of a process: `k0` intervals, widened while the counts of
/// its active intervals (`active(j)`) are collinear, up to `max_end`.
pub fn choose(
    a: &[Vec<f64>],
    active: impl Fn(usize) -> bool,
    k0: usize,
    max_end: usize,
    widen: bool,
) -> Window {
    let rows = |k: usize| -> Vec<Vec<f64>> {
        (0..k.min(a.len()))
            .filter(|&j| active(j))
            .map(|j| a[j].clone())
            .collect()
    };
    let c0 = condition_index(&rows(k0));
    let ok = |c: Option<f64>| c.is_none_or(|c| c <= COLLINEAR);
    if ok(c0) {
        return Window {
            end: k0,
            condition: c0,
            note: None,
        };
    }
    let show = |c: Option<f64>| match c {
        Some(c) if c.is_finite() => format!("{c:.0}"),
        _ => "∞".into(),
    };
    if widen {
        for k in k0 + 1..=max_end.min(a.len()) {
            let c = condition_index(&rows(k));
            if ok(c) {
                return Window {
                    end: k,
                    condition: c,
                    note: Some(format!(
                        "training widened from {k0} to {k} intervals: the request types' counts \
                         in the first {k0} were collinear (condition index {} > {COLLINEAR:.0}: \
                         the mix hardly changed), too little to tell their demands apart",
                        show(c0)
                    )),
                };
            }
        }
    }
    let upto = if widen { max_end.min(a.len()) } else { k0 };
    let cu = condition_index(&rows(upto));
    Window {
        end: k0,
        condition: c0,
        note: Some(format!(
            "collinear training: the request types' counts over the first {upto} intervals \
             never vary enough in mix to tell their demands apart (condition index {} > \
             {COLLINEAR:.0}: one mix, or types always in proportion); the demands rest on the \
             per-request measurement and a later change of mix may alarm — give a normal run \
             with a varied mix as --baseline",
            show(cu)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_mix_is_collinear_and_a_change_of_mix_is_not() {
        // 4:1 throughout, intensity changing: collinear.
        let one: Vec<Vec<f64>> = (0..20)
            .map(|j| vec![4.0 * (1 + j % 5) as f64, (1 + j % 5) as f64])
            .collect();
        assert!(condition_index(&one).unwrap() > COLLINEAR);
        // The mix changes at interval 10.
        let mut two = one.clone();
        for r in two.iter_mut().skip(10) {
            r.swap(0, 1);
        }
        assert!(condition_index(&two).unwrap() < 5.0);
        // The window widens to the first interval of the new mix, and no further.
        let w = choose(&two, |_| true, 6, 16, true);
        assert_eq!(w.end, 11, "{w:?}");
        assert!(w.note.unwrap().contains("widened from 6 to 11"));
        // Never a change: said so, window kept.
        let w = choose(&one, |_| true, 6, 16, true);
        assert_eq!(w.end, 6);
        assert!(w.note.unwrap().contains("--baseline"));
        // One type, or none: nothing to tell apart.
        assert_eq!(condition_index(&[vec![3.0], vec![5.0]]), Some(1.0));
        assert_eq!(condition_index(&[vec![0.0, 0.0]]), None);
    }
}
