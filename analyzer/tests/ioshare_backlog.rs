//! The server's backlog correction, on a synthetic run with known shares: a server that
//! stops for seconds (its clients' bytes wait in its sockets) and catches up later no
//! longer lags its clients in the regression once the change of its backlog is added to
//! its counter; with a backlog that stays zero the estimates are the same as without it.

use analyzer::ioshare::{analyze, IoShareOptions, IoShareReport};
use reader::iosample::{Counters, ProcSeries, SampleLog};

const INTERVAL_NS: u64 = 100_000_000;
const SAMPLES: usize = 401; // 40 s at 10 Hz
const T0_UNIX: u64 = 1_700_000_000_000_000_000;

#[path = "common/sample_times.rs"]
mod sample_times;
#[path = "common/xorshift.rs"]
mod xorshift;
use xorshift::Rng;

/// True shares: three clients, two of them changing once.
fn beta(c: usize, t: usize) -> f64 {
    match (c, t < 200) {
        (0, true) => 0.8,
        (0, false) => 0.2,
        (1, _) => 0.5,
        (2, true) => 0.1,
        (2, false) => 0.9,
        _ => unreachable!(),
    }
}

/// The server stops during these intervals (descheduled) and then catches up at most
/// this many bytes per interval.
fn stalled(t: usize) -> bool {
    (90..115).contains(&t) || (250..270).contains(&t)
}
const CATCH_UP: f64 = 1.5e6;

fn cumulative(per: &[u64]) -> Vec<u64> {
    let mut c = vec![0u64];
    for v in per {
        c.push(c.last().unwrap() + v);
    }
    c
}

fn series(pid: u32, comm: &str, cum: &[u64]) -> ProcSeries {
    ProcSeries {
        pid,
        ppid: 1,
        comm: comm.into(),
        exe: format!("/usr/bin/{comm}"),
        points: cum
            .iter()
            .enumerate()
            .map(|(j, &w)| {
                (
                    j,
                    Counters {
                        wchar: w,
                        ..Default::default()
                    },
                )
            })
            .collect(),
        ..Default::default()
    }
}

/// The run: `stall` makes the server stop as above; the backlog is measured when
/// `measured`.
fn log(stall: bool, measured: bool) -> SampleLog {
    let n = SAMPLES - 1;
    let mut rng = Rng(0x2545f4914f6cdd1d);
    let x: Vec<Vec<u64>> = (0..3)
        .map(|_| {
            (0..n)
                .map(|_| {
                    if rng.next() < 0.7 {
                        (2e5 * (0.2 + rng.next())) as u64
                    } else {
                        0
                    }
                })
                .collect()
        })
        .collect();
    // Bytes delivered to the server per interval, and what it writes.
    let delivered: Vec<u64> = (0..n)
        .map(|t| (0..3).map(|c| (beta(c, t) * x[c][t] as f64) as u64).sum())
        .collect();
    let (mut queued, mut written) = (0u64, Vec::with_capacity(n));
    let mut backlog = vec![(0usize, 0u64, 0u64)];
    for (t, d) in delivered.iter().enumerate() {
        queued += d;
        let w = if stall && stalled(t) {
            0
        } else {
            queued.min(CATCH_UP as u64)
        };
        queued -= w;
        written.push(w);
        if backlog.last().unwrap().1 != queued {
            // A fifth of it still in the clients' send queues, the rest received.
            backlog.push((t + 1, queued - queued / 5, queued / 5));
        }
    }
    let mut server = series(10, "vsftpd", &cumulative(&written));
    server.server = true;
    if measured {
        server.backlog = backlog;
    }
    let mut processes = vec![server];
    for (c, xc) in x.iter().enumerate() {
        processes.push(series(20 + c as u32, "python3", &cumulative(xc)));
    }
    let mut log = SampleLog {
        samples: sample_times::regular(SAMPLES, INTERVAL_NS, T0_UNIX),
        processes,
        backlog_measured: measured,
        ..Default::default()
    };
    log.meta.interval_ns = INTERVAL_NS;
    log.children = vec![Vec::new(); 4];
    log.reaped = vec![None; 4];
    log
}

fn run(log: &SampleLog, backlog: bool) -> IoShareReport {
    analyze(
        log,
        &IoShareOptions {
            server: "vsftpd".into(),
            step: 10,
            backlog,
            ..Default::default()
        },
        None,
    )
    .unwrap()
}

/// Mean absolute error of the reported β per 1 s, in points, for each client.
fn errors(r: &IoShareReport) -> Vec<f64> {
    r.processes
        .iter()
        .map(|p| {
            let c = (p.pid - 20) as usize;
            let e: Vec<f64> = p
                .beta
                .iter()
                .map(|&(t, b)| {
                    let k = ((t - T0_UNIX) / INTERVAL_NS) as usize - 1;
                    100.0 * (b - beta(c, k)).abs()
                })
                .collect();
            e.iter().sum::<f64>() / e.len() as f64
        })
        .collect()
}

#[test]
fn adding_the_backlog_undoes_a_stalled_server() {
    let log = log(true, true);
    let with = run(&log, true);
    let without = run(&log, false);
    assert!(with.server.backlog.measured && with.server.backlog.used);
    assert!(without.server.backlog.measured && !without.server.backlog.used);
    assert!(
        with.server.backlog.max_bytes > 1e6,
        "{:?}",
        with.server.backlog
    );
    let (ew, eo) = (errors(&with), errors(&without));
    let worst = |e: &[f64]| e.iter().copied().fold(0.0, f64::max);
    eprintln!("error per client at 1 s, points: with the backlog {ew:?}, without {eo:?}");
    assert_eq!(ew.len(), 3);
    // With the backlog the server's load is what the clients delivered: the shares are
    // recovered (the change points respected); without it, the stalls spoil them.
    assert!(worst(&ew) < 1.0, "with the backlog: {ew:?}");
    assert!(
        worst(&eo) > 2.0 * worst(&ew) + 1.0,
        "without: {eo:?}, with: {ew:?}"
    );
    // The load is the bytes delivered: the same total as written plus what was queued at
    // the end (nothing here), interval by interval never negative.
    assert!((with.server.total_bytes - without.server.total_bytes).abs() < 1.0);
    assert!(with.server.load.iter().all(|l| l.1 >= 0.0));
}

#[test]
fn a_zero_backlog_changes_nothing() {
    // The server keeps up: its backlog is measured and stays 0.
    let measured = log(false, true);
    let not = log(false, false);
    let a = run(&measured, true);
    let b = run(&not, true);
    assert!(a.server.backlog.measured && !b.server.backlog.measured);
    assert_eq!(a.server.backlog.max_bytes, 0.0);
    assert_eq!(a.server.load, b.server.load);
    for (p, q) in a.processes.iter().zip(&b.processes) {
        assert_eq!(p.beta, q.beta);
    }
    assert!(errors(&a).iter().all(|&e| e < 1.0), "{:?}", errors(&a));
}

#[test]
fn a_backlog_the_server_load_does_not_follow_is_left_out() {
    // A server that keeps up, with a backlog measured wrong: bytes that come and go in
    // the next interval, unrelated to what the server writes (as a write in progress or a
    // late socket dump would show them).
    let mut log = log(false, true);
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let mut spurious = vec![(0usize, 0u64, 0u64)];
    for t in (1..SAMPLES - 1).step_by(2) {
        let b = (4e4 * rng.next()) as u64;
        spurious.push((t, b, 0));
        spurious.push((t + 1, 0, 0));
    }
    log.processes[0].backlog = spurious;
    let r = run(&log, true);
    let clean = run(&log, false);
    let [without, with] = r.server.backlog.residual_spread.unwrap();
    assert!(
        r.server.backlog.measured && !r.server.backlog.used,
        "{without} vs {with}"
    );
    assert!(without < with);
    assert_eq!(r.server.load, clean.server.load);
    assert!(errors(&r).iter().all(|&e| e < 1.0), "{:?}", errors(&r));
}
