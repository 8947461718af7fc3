//! Reporting per step of several samples must not lose the end of the run: when the
//! number of samples is not a multiple of the step, the samples after the last whole step
//! (where the sampler's final sample, after the clients' exits, lands) form a shorter last
//! interval, so the server's and the clients' totals are the same at every step.

use analyzer::ioshare::{analyze, series, IoShareOptions};
use reader::iosample::{Counters, ProcSeries, SampleLog};

#[path = "common/sample_times.rs"]
mod sample_times;

const INTERVAL_NS: u64 = 100_000_000;
const T0_UNIX: u64 = 1_700_000_000_000_000_000;
const SAMPLES: usize = 23; // 22 intervals: two whole steps of 10 and a last one of 2

fn wchar(w: u64) -> Counters {
    Counters {
        wchar: w,
        ..Default::default()
    }
}

/// A process born before the first sample whose cumulative wchar at sample j is `cum(j)`.
fn proc(pid: u32, ppid: u32, comm: &str, cum: impl Fn(usize) -> u64) -> ProcSeries {
    ProcSeries {
        pid,
        ppid,
        comm: comm.into(),
        exe: format!("/usr/bin/{comm}"),
        points: (0..SAMPLES).map(|j| (j, wchar(cum(j)))).collect(),
        ..Default::default()
    }
}

/// Bytes per interval (interval t ends at sample t + 1); most at the very end of the run.
fn rate(t: usize, client: u64) -> u64 {
    let base = 1000 * client + 137 * ((t as u64 * (client + 3)) % 7);
    if t >= 20 {
        base * 50
    } else {
        base
    }
}

fn cum(j: usize, f: impl Fn(usize) -> u64) -> u64 {
    (0..j).map(f).sum()
}

fn log() -> SampleLog {
    let samples = sample_times::regular(SAMPLES, INTERVAL_NS, T0_UNIX);
    // The server writes half of client 1's bytes and all of client 2's.
    let server = |t: usize| rate(t, 1) / 2 + rate(t, 2);
    let mut log = SampleLog {
        samples,
        processes: vec![
            proc(10, 1, "vsftpd", |j| cum(j, server)),
            proc(20, 1, "python3", |j| cum(j, |t| rate(t, 1))),
            proc(21, 1, "python3", |j| cum(j, |t| rate(t, 2))),
        ],
        ..Default::default()
    };
    log.meta.interval_ns = INTERVAL_NS;
    log.children = vec![Vec::new(); 3];
    log.reaped = vec![None; 3];
    log
}

#[test]
fn a_partial_last_step_keeps_the_end_of_the_run() {
    let log = log();
    let server_total = cum(SAMPLES - 1, |t| rate(t, 1) / 2 + rate(t, 2));
    for step in [1, 3, 4, 7, 10, 11, 22] {
        let s = series::build(&log, "vsftpd", series::Metric::Wchar, step, 0.01).unwrap();
        assert_eq!(s.y.len(), (SAMPLES - 1).div_ceil(step), "step {step}");
        assert_eq!(s.y.iter().sum::<f64>(), server_total as f64, "step {step}");
        assert_eq!(
            *s.t_end.last().unwrap(),
            log.samples[SAMPLES - 1].unix_ns,
            "step {step}: the last interval ends at the last sample"
        );
        for (c, client) in s.columns.iter().zip([1, 2]) {
            assert_eq!(
                c.x.iter().sum::<f64>(),
                cum(SAMPLES - 1, |t| rate(t, client)) as f64,
                "step {step}, pid {}",
                c.pid
            );
        }
    }

    // The report: the same totals per 1 s step as per sample.
    for step in [1, 10] {
        let r = analyze(
            &log,
            &IoShareOptions {
                server: "vsftpd".into(),
                step,
                ..Default::default()
            },
            None,
        )
        .unwrap();
        assert_eq!(r.server.total_bytes, server_total as f64, "step {step}");
        assert_eq!(r.server.load.len(), (SAMPLES - 1).div_ceil(step));
        for p in &r.processes {
            let client = if p.pid == 20 { 1 } else { 2 };
            assert_eq!(p.total_bytes, cum(SAMPLES - 1, |t| rate(t, client)) as f64);
        }
    }
}

/// With a write-back lag fitted, a step's β is still the share of the process's own bytes
/// in that step: the lagged bytes of the interval before it are not counted again (that
/// made β > 1 when a process with β = 1 slowed down at a step boundary).
#[test]
fn a_coarse_share_stays_within_the_fine_ones_under_lag() {
    use analyzer::ioshare::{series::Column, series::Series, Estimate, Status};
    let fine = Series {
        t_end: vec![1, 2, 3, 4],
        t_start: vec![0, 1, 2, 3],
        y: vec![100.0, 100.0, 55.0, 10.0],
        columns: vec![Column {
            pid: 1,
            exe: "c".into(),
            comm: "c".into(),
            x: vec![100.0, 100.0, 10.0, 10.0],
        }],
        server: vec![(2, "s".into())],
        small_bytes: 0.0,
        backlog: None,
        backlog_max: 0.0,
        backlog_added: false,
        intake: None,
        intake_closes: Vec::new(),
        intake_used: false,
        unsure: vec![false; 4],
    };
    let coarse = Series {
        t_end: vec![2, 4],
        t_start: vec![0, 2],
        y: vec![200.0, 65.0],
        columns: vec![Column {
            x: vec![200.0, 20.0],
            ..fine.columns[0].clone()
        }],
        ..fine.clone()
    };
    let e = Estimate {
        name: "regression",
        beta: vec![vec![Some(1.0); 4]],
        err: vec![vec![Some(0.0); 4]],
        status: vec![Status::Ok; 4],
        lag: vec![None, None, Some(0.5), None],
    };
    let c = e.coarsen(&fine, &coarse, 2);
    assert_eq!(c.beta[0], vec![Some(1.0), Some(1.0)]);
}

#[test]
fn a_change_found_late_is_fitted_only_in_sum() {
    // Three clients over 30 s at 10 Hz, shares 1, ½ and ⅕. Client 20 is blocked from
    // sample 100 to 130 (a stalled server), then writes its backlog of 3 s at once in the
    // interval ending at sample 132, which the server shows there too — but the sampler,
    // which had found it quiet, reads it again only at sample 140: the change is known
    // summed over the intervals 130‥140 (a SPAN) and spread evenly over them.
    const N: usize = 301;
    let rate = |t: usize, c: u64| 20_000 + 3_001 * ((t as u64 * (c + 5) + c * c) % 11);
    let beta = [1.0, 0.5, 0.2];
    let x0 = |t: usize| match t {
        100..=130 => 0,
        131 => (100..=131).map(|k| rate(k, 0)).sum(),
        _ => rate(t, 0),
    };
    let x = |c: usize, t: usize| if c == 0 { x0(t) } else { rate(t, c as u64) };
    let server = |t: usize| -> u64 { (0..3).map(|c| (beta[c] * x(c, t) as f64) as u64).sum() };
    let cumu = |f: &dyn Fn(usize) -> u64, j: usize| -> u64 { (0..j).map(f).sum() };
    let pts = |f: &dyn Fn(usize) -> u64, skip: std::ops::Range<usize>| -> Vec<(usize, Counters)> {
        (0..N)
            .filter(|j| !skip.contains(j))
            .map(|j| (j, wchar(cumu(f, j))))
            .collect()
    };
    let mut log = SampleLog {
        samples: sample_times::regular(N, INTERVAL_NS, T0_UNIX),
        processes: (0..4)
            .map(|i| {
                let (pid, comm) = if i == 0 {
                    (10, "vsftpd")
                } else {
                    (19 + i as u32, "python3")
                };
                let f: Box<dyn Fn(usize) -> u64> = if i == 0 {
                    Box::new(server)
                } else {
                    Box::new(move |t| x(i - 1, t))
                };
                ProcSeries {
                    pid,
                    ppid: 1,
                    comm: comm.into(),
                    exe: format!("/usr/bin/{comm}"),
                    points: pts(&*f, if i == 1 { 131..140 } else { 0..0 }),
                    spans: if i == 1 { vec![(140, 130)] } else { Vec::new() },
                    ..Default::default()
                }
            })
            .collect(),
        ..Default::default()
    };
    log.meta.interval_ns = INTERVAL_NS;
    log.children = vec![Vec::new(); 4];
    log.reaped = vec![None; 4];

    let s = series::build(&log, "vsftpd", series::Metric::Wchar, 1, 0.01).unwrap();
    let unsure: Vec<usize> = (0..s.y.len()).filter(|&t| !s.usable(t)).collect();
    assert_eq!(unsure, (130..140).collect::<Vec<_>>());
    // Over 1 s steps the span falls within one interval (130‥140): nothing unsure.
    let coarse = series::build(&log, "vsftpd", series::Metric::Wchar, 10, 0.01).unwrap();
    assert!((0..coarse.y.len()).all(|t| coarse.usable(t)));

    let r = analyze(
        &log,
        &IoShareOptions {
            server: "vsftpd".into(),
            method: analyzer::ioshare::Method::Regression,
            ..Default::default()
        },
        None,
    )
    .unwrap();
    for (c, want) in beta.iter().enumerate() {
        let p = r.processes.iter().find(|p| p.pid == 20 + c as u32).unwrap();
        let got = p.overall.unwrap();
        assert!(
            (got - want).abs() < 0.005,
            "client {c}: {got} against {want}"
        );
    }
}
