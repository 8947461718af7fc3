//! The ioshare estimators on synthetic series with known shares: bounded regression and
//! single variation recover piecewise-constant β, both beat plain least squares under
//! noise, and processes whose IO moves together are diagnosed rather than given made-up
//! individual shares; the cross-validated window and prior, and the robust weights, do
//! better than the plain window where noise dominates and cost nothing without noise; the
//! change points of each share are found where the shares change (and nowhere when they
//! do not), and the windows that respect them beat the plain windows.

use analyzer::ioshare::regression::{self, RegressionOptions};
use analyzer::ioshare::segments::{self, SegmentOptions};
use analyzer::ioshare::select;
use analyzer::ioshare::series::{Column, Series};
use analyzer::ioshare::single::{self, SingleOptions};
use analyzer::ioshare::{Estimate, Status};

#[path = "common/xorshift.rs"]
mod xorshift;
use xorshift::Rng;

/// `p` processes over `n` intervals; β of process i is `beta(i, t)`; `noise` is the
/// relative noise on the server's counter; `shared` makes process 1 copy process 0's IO.
fn synth(
    p: usize,
    n: usize,
    beta: impl Fn(usize, usize) -> f64,
    noise: f64,
    shared: bool,
) -> Series {
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let mut cols: Vec<Column> = (0..p)
        .map(|i| Column {
            pid: 100 + i as u32,
            exe: format!("/bin/p{i}"),
            comm: format!("p{i}"),
            x: (0..n)
                .map(|_| {
                    if rng.next() < 0.75 {
                        1e6 * (0.2 + rng.next())
                    } else {
                        0.0
                    }
                })
                .collect(),
        })
        .collect();
    if shared {
        cols[1].x = cols[0].x.iter().map(|v| v * 0.5).collect();
    }
    let y = (0..n)
        .map(|t| {
            let v: f64 = (0..p).map(|i| beta(i, t) * cols[i].x[t]).sum();
            v + noise * 1e6 * (rng.next() - 0.5)
        })
        .collect();
    Series {
        t_end: (1..=n as u64).map(|t| t * 100_000_000).collect(),
        t_start: (0..n as u64).map(|t| t * 100_000_000).collect(),
        y,
        columns: cols,
        server: vec![(1, "server".into())],
        small_bytes: 0.0,
        backlog: None,
        backlog_max: 0.0,
        backlog_added: false,
        intake: None,
        intake_closes: Vec::new(),
        intake_used: false,
        unsure: vec![false; n],
    }
}

fn mae(e: &Estimate, s: &Series, beta: impl Fn(usize, usize) -> f64) -> f64 {
    let (mut sum, mut k) = (0.0, 0);
    for c in 0..s.columns.len() {
        for t in 0..s.y.len() {
            if let (Some(b), true) = (e.beta[c][t], s.columns[c].x[t] > 0.0) {
                sum += (b - beta(c, t)).abs();
                k += 1;
            }
        }
    }
    100.0 * sum / k as f64
}

fn step_beta(i: usize, t: usize) -> f64 {
    // Each process changes its share once, at a different time.
    let change = 50 + 30 * i;
    let (a, b) = [(0.2, 0.8), (0.9, 0.3), (0.5, 0.0), (0.0, 0.6)][i % 4];
    if t < change {
        a
    } else {
        b
    }
}

#[test]
fn constant_shares_are_recovered_exactly_without_noise() {
    let beta = |i: usize, _| [0.1, 0.7, 1.0][i];
    let s = synth(3, 60, beta, 0.0, false);
    let (e, _) = regression::estimate(&s, &RegressionOptions::default());
    assert!(mae(&e, &s, beta) < 0.01, "{}", mae(&e, &s, beta));
    let e = single::estimate(&s, &SingleOptions::default());
    // Starts at β = 1 and converges within a few intervals.
    let tail: f64 = (0..3)
        .filter_map(|c| e.beta[c][59].map(|b| (b - beta(c, 59)).abs()))
        .sum();
    assert!(
        tail < 0.02,
        "{:?}",
        (0..3).map(|c| e.beta[c][59]).collect::<Vec<_>>()
    );
}

#[test]
fn changing_shares_under_noise_beat_plain_least_squares() {
    let s = synth(4, 200, step_beta, 0.15, false);
    let o = RegressionOptions {
        window: 15,
        ..Default::default()
    };
    let (reg, _) = regression::estimate(&s, &o);
    let (ols, _) = regression::estimate(
        &s,
        &RegressionOptions {
            bounded: false,
            lag: false,
            ..o
        },
    );
    let sv = single::estimate(
        &s,
        &SingleOptions {
            noise: 0.15e6 / 12f64.sqrt(),
            ..Default::default()
        },
    );
    let (r, l, si) = (
        mae(&reg, &s, step_beta),
        mae(&ols, &s, step_beta),
        mae(&sv, &s, step_beta),
    );
    eprintln!("MAE points: regression {r:.1}, least squares {l:.1}, single {si:.1}");
    assert!(r < l, "regression {r} vs least squares {l}");
    assert!(r < 10.0 && si < 10.0, "regression {r}, single {si}");
    // Bounded estimates stay in [0, 1]; the baseline does not.
    assert!(reg
        .beta
        .iter()
        .flatten()
        .flatten()
        .all(|b| (0.0..=1.0).contains(b)));
}

#[test]
fn processes_moving_together_are_diagnosed() {
    let beta = |i: usize, _| [0.3, 0.6, 0.5][i];
    let s = synth(3, 80, beta, 0.05, true);
    let (e, episodes) = regression::estimate(&s, &RegressionOptions::default());
    assert!(e.status.iter().filter(|s| **s == Status::Collinear).count() > 60);
    let ep = &episodes[0];
    assert!(
        ep.pids.contains(&100) && ep.pids.contains(&101) && !ep.pids.contains(&102),
        "{ep:?}"
    );
    // Their individual shares are not identified, but what they explain together is.
    let mut together = 0.0;
    let mut truth = 0.0;
    for t in 0..80 {
        together += e.explained(&s, 0, t) + e.explained(&s, 1, t);
        truth += 0.3 * s.columns[0].x[t] + 0.6 * s.columns[1].x[t];
    }
    assert!(
        (together - truth).abs() / truth < 0.03,
        "{together} vs {truth}"
    );
}

/// The 15-interval regression with a 60-interval prior window, and its cross-validated
/// choice on `s` with the estimate it gives.
fn base_and_selected(s: &Series) -> (RegressionOptions, select::Choice, Estimate) {
    let base = RegressionOptions {
        window: 15,
        prior_window: 60,
        ..Default::default()
    };
    let c = select::choose(
        s,
        &base,
        &select::candidate_windows(15, 10),
        &select::PRIORS,
    );
    let (e, _) = regression::estimate(
        s,
        &RegressionOptions {
            window: c.window,
            prior: c.prior,
            ..base
        },
    );
    (base, c, e)
}

#[test]
fn under_noise_cross_validation_chooses_a_prior_that_beats_the_plain_window() {
    let s = synth(4, 160, step_beta, 0.5, false);
    let (base, c, sel) = base_and_selected(&s);
    eprintln!(
        "chosen: window {} prior {} ({:?})",
        c.window, c.prior, c.scores
    );
    assert!(c.prior > 0.0 || c.window > 15, "{c:?}");
    let (plain_window, _) = regression::estimate(&s, &base);
    let (ols, _) = regression::estimate(
        &s,
        &RegressionOptions {
            bounded: false,
            lag: false,
            robust: false,
            ..base
        },
    );
    let (a, b, l) = (
        mae(&sel, &s, step_beta),
        mae(&plain_window, &s, step_beta),
        mae(&ols, &s, step_beta),
    );
    eprintln!("MAE points: selected {a:.1}, 15-interval window {b:.1}, least squares {l:.1}");
    assert!(
        a < b && b < l,
        "selected {a}, plain window {b}, least squares {l}"
    );
}

#[test]
fn without_noise_the_choice_still_recovers_changing_shares() {
    let s = synth(4, 160, step_beta, 0.0, false);
    let (_, c, e) = base_and_selected(&s);
    // Only the windows that straddle a change are off.
    let m = mae(&e, &s, step_beta);
    assert!(m < 4.0, "{m} with {c:?}");
}

#[test]
fn an_interval_the_processes_do_not_explain_pulls_less_with_robust_weights() {
    let beta = |i: usize, _| [0.2, 0.8, 0.5][i];
    let mut s = synth(3, 80, beta, 0.02, false);
    // A burst of server bytes that no client wrote in that interval (a flush).
    s.y[40] += 4e6;
    let o = RegressionOptions {
        window: 15,
        ..Default::default()
    };
    let near = |e: &Estimate| {
        let mut sum = 0.0;
        for t in 33..48 {
            for c in 0..3 {
                if let Some(b) = e.beta[c][t] {
                    sum += (b - beta(c, t)).abs();
                }
            }
        }
        sum
    };
    let (robust, _) = regression::estimate(&s, &o);
    let (plain, _) = regression::estimate(&s, &RegressionOptions { robust: false, ..o });
    assert!(
        near(&robust) < 0.5 * near(&plain),
        "robust {} vs plain {}",
        near(&robust),
        near(&plain)
    );
}

/// The change points of `s` found from the 15-interval regression's residuals, and the
/// segmented estimate (as `analyze` runs them).
fn segmented(s: &Series, penalty: f64) -> (Vec<Vec<usize>>, Estimate, Estimate) {
    let (p, seg, plain) = segmented_with(s, penalty, true);
    (p.change_points, seg, plain)
}

/// The segmented estimate of `s` (`drift`: segments may drift), with its segments and the
/// plain windowed estimate it starts from.
fn segmented_with(s: &Series, penalty: f64, drift: bool) -> (segments::Pieces, Estimate, Estimate) {
    segmented_in(s, penalty, drift, 15)
}

/// [`segmented_with`] from plain windows of `window` intervals (segmented: twice that).
fn segmented_in(
    s: &Series,
    penalty: f64,
    drift: bool,
    window: usize,
) -> (segments::Pieces, Estimate, Estimate) {
    let o = RegressionOptions {
        window,
        ..Default::default()
    };
    let (plain, _) = regression::estimate(s, &o);
    let r: Vec<f64> = (0..s.y.len())
        .map(|t| {
            s.y[t]
                - (0..s.columns.len())
                    .map(|c| plain.explained(s, c, t))
                    .sum::<f64>()
        })
        .collect();
    let (w, sigma2) = segments::huber_weights(&r);
    let so = SegmentOptions {
        min_len: 10,
        penalty,
        window: 2 * window,
        block: 40 * window,
        drift,
    };
    let p = segments::pieces(s, &w, sigma2, &so);
    let seg = segments::estimate(s, &plain, &p, &so);
    (p, seg, plain)
}

#[test]
fn change_points_are_found_where_shares_change_and_nowhere_else() {
    let s = synth(4, 200, step_beta, 0.05, false);
    let (cps, seg, plain) = segmented(&s, 2.0);
    for (i, c) in cps.iter().enumerate() {
        let truth = 50 + 30 * i;
        assert!(
            c.len() == 1 && c[0].abs_diff(truth) <= 2,
            "process {i}: {c:?}, the change is at {truth}"
        );
    }
    let (a, b) = (mae(&seg, &s, step_beta), mae(&plain, &s, step_beta));
    eprintln!("MAE points: segmented {a:.2}, plain window {b:.2}");
    assert!(a < 0.5 * b, "segmented {a} vs plain window {b}");
    // Constant shares: no change point.
    let beta = |i: usize, _| [0.1, 0.7, 1.0][i];
    let s = synth(3, 150, beta, 0.05, false);
    let (cps, seg, _) = segmented(&s, 2.0);
    assert!(cps.iter().all(Vec::is_empty), "{cps:?}");
    assert!(mae(&seg, &s, beta) < 2.0, "{}", mae(&seg, &s, beta));
}

#[test]
fn segmented_windows_beat_plain_windows_under_noise_and_stay_bounded() {
    let s = synth(4, 200, step_beta, 0.3, false);
    let (cps, seg, plain) = segmented(&s, 2.0);
    let (a, b) = (mae(&seg, &s, step_beta), mae(&plain, &s, step_beta));
    eprintln!("MAE points: segmented {a:.1}, plain window {b:.1}; change points {cps:?}");
    assert!(a < b, "segmented {a} vs plain window {b}");
    assert!(seg
        .beta
        .iter()
        .flatten()
        .flatten()
        .all(|b| (0.0..=1.0).contains(b)));
    // A higher penalty finds no more change points than a lower one.
    let (strict, _, _) = segmented(&s, 6.0);
    let count = |c: &Vec<Vec<usize>>| c.iter().map(Vec::len).sum::<usize>();
    assert!(count(&strict) <= count(&cps), "{strict:?} vs {cps:?}");
}

#[test]
fn a_long_run_is_searched_in_blocks_and_its_changes_are_found_in_each() {
    // Process i's share alternates every 150 + 40·i intervals, over 1 200 intervals.
    let beta = |i: usize, t: usize| {
        if (t / (150 + 40 * i)).is_multiple_of(2) {
            [0.2, 0.9, 0.5][i]
        } else {
            [0.7, 0.3, 0.0][i]
        }
    };
    let s = synth(3, 1200, beta, 0.05, false);
    let (plain, _) = regression::estimate(
        &s,
        &RegressionOptions {
            window: 15,
            ..Default::default()
        },
    );
    let r: Vec<f64> = (0..s.y.len())
        .map(|t| s.y[t] - (0..3).map(|c| plain.explained(&s, c, t)).sum::<f64>())
        .collect();
    let (w, sigma2) = segments::huber_weights(&r);
    let so = SegmentOptions {
        min_len: 10,
        penalty: 2.0,
        window: 30,
        block: 250,
        drift: true,
    };
    let cps = segments::pieces(&s, &w, sigma2, &so).change_points;
    for (i, c) in cps.iter().enumerate() {
        let period = 150 + 40 * i;
        let truth: Vec<usize> = (1..)
            .map(|k| k * period)
            .take_while(|&t| t < 1200)
            .collect();
        // Each true change found within 2 intervals, except one that falls within
        // `min_len` of a block's edge (it cannot be placed there).
        let found = truth
            .iter()
            .filter(|&&t| c.iter().any(|&f| f.abs_diff(t) <= 2))
            .count();
        assert!(found + 1 >= truth.len(), "process {i}: {c:?} vs {truth:?}");
        assert!(
            c.len() <= truth.len() + 1,
            "process {i}: {c:?} vs {truth:?}"
        );
    }
}

/// Shares that drift (process 0 from 0.1 to 0.9 between intervals 60 and 240, process 3
/// from 1 to 0 over the whole run) beside one that jumps (process 1 at 150) and one that
/// stays (process 2).
fn drift_beta(i: usize, t: usize) -> f64 {
    let t = t as f64;
    match i {
        0 => 0.1 + 0.8 * ((t - 60.0) / 180.0).clamp(0.0, 1.0),
        1 => {
            if t < 150.0 {
                0.8
            } else {
                0.2
            }
        }
        2 => 0.5,
        _ => 1.0 - t / 300.0,
    }
}

/// |Σ β̂·x − Σ β·x| / Σ x of process `c` over the run, in points.
fn overall_error(e: &Estimate, s: &Series, c: usize, beta: impl Fn(usize, usize) -> f64) -> f64 {
    let x = &s.columns[c].x;
    let (mut est, mut tru) = (0.0, 0.0);
    for (t, &v) in x.iter().enumerate() {
        est += e.beta[c][t].unwrap_or(0.0) * v;
        tru += beta(c, t) * v;
    }
    100.0 * (est - tru).abs() / x.iter().sum::<f64>()
}

#[test]
fn a_drifting_share_is_one_drifting_segment_not_a_staircase() {
    let s = synth(4, 300, drift_beta, 0.05, false);
    let (p, seg, plain) = segmented_with(&s, 2.0, true);
    let (steps, stairs, _) = segmented_with(&s, 2.0, false);
    let ranges = p.ranges(300);
    eprintln!(
        "with drift: {ranges:?}\nsteps only: {:?}",
        steps.change_points
    );
    // Process 0: drifts between its bends, flat outside.
    let drifting: Vec<(usize, usize)> = ranges[0]
        .iter()
        .filter(|g| g.2)
        .map(|g| (g.0, g.1))
        .collect();
    assert!(
        drifting.len() == 1 && drifting[0].0.abs_diff(60) <= 5 && drifting[0].1.abs_diff(240) <= 5,
        "process 0: {:?}",
        ranges[0]
    );
    // Without drifts the same share is a staircase.
    assert!(
        steps.change_points[0].len() > 3,
        "{:?}",
        steps.change_points[0]
    );
    // Process 1 jumps (the noise of this seed makes a second, small change at 201 in
    // either model) and never drifts; process 2 stays; process 3 drifts throughout.
    assert!(
        p.change_points[1].iter().any(|&t| t.abs_diff(150) <= 2) && p.change_points[1].len() <= 2,
        "process 1: {:?}",
        ranges[1]
    );
    assert!(ranges[1].iter().all(|g| !g.2), "process 1: {:?}", ranges[1]);
    assert_eq!(ranges[2], vec![(0, 300, false)]);
    let drift3: usize = ranges[3].iter().filter(|g| g.2).map(|g| g.1 - g.0).sum();
    assert!(
        drift3 >= 280 && ranges[3].len() <= 2,
        "process 3: {:?}",
        ranges[3]
    );
    let (a, b, c) = (
        mae(&seg, &s, drift_beta),
        mae(&stairs, &s, drift_beta),
        mae(&plain, &s, drift_beta),
    );
    eprintln!("MAE points: drifting segments {a:.2}, steps only {b:.2}, plain window {c:.2}");
    assert!(a < b && a < c, "{a} vs {b}, {c}");
    // Over the run, what each drifting process sent is nearer the truth too.
    for i in [0, 3] {
        let (a, b) = (
            overall_error(&seg, &s, i, drift_beta),
            overall_error(&stairs, &s, i, drift_beta),
        );
        eprintln!("process {i}: whole-run error {a:.3} points with drifts, {b:.3} steps only");
        assert!(a < b, "process {i}: {a} vs {b}");
    }
}

#[test]
fn cross_validation_lengthens_the_segmented_window_where_noise_dominates() {
    let s = synth(4, 300, drift_beta, 0.6, false);
    let (p, short, plain) = segmented_with(&s, 2.0, true);
    let so = SegmentOptions {
        min_len: 10,
        penalty: 2.0,
        window: 30,
        block: 600,
        drift: true,
    };
    let (chosen, errors) = segments::choose_window(&s, &plain, &p, &so, &[30, 60, 120]);
    eprintln!("left-out errors {errors:?}, chosen {chosen}");
    assert_eq!(errors.len(), 3);
    assert!(chosen > 30, "{chosen}: {errors:?}");
    let long = segments::estimate(
        &s,
        &plain,
        &p,
        &SegmentOptions {
            window: chosen,
            ..so
        },
    );
    let (a, b) = (mae(&long, &s, drift_beta), mae(&short, &s, drift_beta));
    eprintln!("MAE points: chosen window {a:.2}, shortest {b:.2}");
    assert!(a < b, "{a} vs {b}");
}

#[test]
fn a_segment_seen_only_in_unsure_intervals_is_not_estimated_as_zero() {
    // Process 0 (β 0.6) is quiet but for intervals 100‥110, whose bytes the sampler knows
    // only summed (unsure), and a segment of its own spans exactly those: no row of any
    // window shows that segment's share, so it is not estimated — not fitted as β 0 from
    // a column of zeros.
    let beta = |i: usize, _| [0.6, 0.3, 0.9][i];
    let mut s = synth(3, 200, beta, 0.02, false);
    // Quiet from 85 to 125 but for its bytes of 100‥110, spread evenly as a span is.
    for t in 85..125 {
        s.columns[0].x[t] = if (100..110).contains(&t) { 5e5 } else { 0.0 };
    }
    for t in 0..200 {
        s.y[t] = (0..3).map(|c| beta(c, t) * s.columns[c].x[t]).sum();
    }
    s.unsure[100..110].fill(true);
    let o = RegressionOptions {
        window: 15,
        ..Default::default()
    };
    let (plain, _) = regression::estimate(&s, &o);
    let pieces = segments::Pieces {
        change_points: vec![vec![100, 110], Vec::new(), Vec::new()],
        drifting: vec![vec![false; 3], vec![false], vec![false]],
    };
    let so = SegmentOptions {
        min_len: 10,
        penalty: 2.0,
        window: 30,
        block: 600,
        drift: false,
    };
    let seg = segments::estimate(&s, &plain, &pieces, &so);
    for t in 100..110 {
        assert_eq!(seg.beta[0][t], None, "interval {t}: {:?}", seg.beta[0][t]);
        for c in 1..3 {
            let b = seg.beta[c][t].unwrap();
            assert!((b - beta(c, t)).abs() < 0.01, "process {c} at {t}: {b}");
        }
    }
    // Outside the unsure intervals its share is found as usual.
    for t in (40..80).chain(140..180) {
        let b = seg.beta[0][t].unwrap();
        assert!((b - 0.6).abs() < 0.01, "process 0 at {t}: {b}");
    }
}

/// Eight shares drifting up and down over the run, each with its own knots (a V, a ramp
/// then a plateau, …), between 0.1 and 0.9.
fn vee_beta(i: usize, t: usize) -> f64 {
    let period = 150.0 + 37.0 * i as f64;
    let phase = (t as f64 + 23.0 * i as f64) % period / period;
    let tri = if phase < 0.5 {
        2.0 * phase
    } else {
        2.0 - 2.0 * phase
    };
    0.1 + 0.8 * tri
}

#[test]
fn the_trend_filter_follows_many_drifting_shares_better_than_the_search() {
    use analyzer::ioshare::trend;
    let s = synth(8, 600, vee_beta, 0.3, false);
    let o = RegressionOptions {
        window: 40,
        robust: false,
        lag: false,
        bounded: false,
        ..Default::default()
    };
    let (ls, _) = regression::estimate(&s, &o);
    let mut r: Vec<f64> = (0..s.y.len())
        .map(|t| {
            (s.y[t]
                - (0..s.columns.len())
                    .map(|c| ls.explained(&s, c, t))
                    .sum::<f64>())
            .abs()
        })
        .collect();
    r.sort_by(f64::total_cmp);
    let sigma = 1.4826 * r[r.len() / 2];
    let tr = trend::fit(
        &s,
        &trend::TrendOptions {
            sigma,
            ..Default::default()
        },
    )
    .unwrap();
    let mut filtered = ls.clone();
    for c in 0..8 {
        for t in 0..600 {
            filtered.beta[c][t] = Some(tr.beta[c][t]);
            assert!((0.0..=1.0).contains(&tr.beta[c][t]));
        }
    }
    let (_, searched, plain) = segmented_in(&s, 2.0, true, 40);
    let (f, g, p, l) = (
        mae(&filtered, &s, vee_beta),
        mae(&searched, &s, vee_beta),
        mae(&plain, &s, vee_beta),
        mae(&ls, &s, vee_beta),
    );
    eprintln!(
        "MAE points: trend {f:.2} ({} ADMM iterations), search {g:.2}, plain windows {p:.2}, \
         least squares {l:.2}",
        tr.iterations
    );
    assert!(
        f < 0.8 * g && f < 0.75 * p && f < 0.75 * l,
        "trend {f} search {g} windows {p} least squares {l}"
    );
}
