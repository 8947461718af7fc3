//! Candidate clients among neighbours (issue 26), on hand-built sample series: a server,
//! two clients seen connected to it and a neighbour that writes a hundred times their bytes
//! in bursts, read quietly (its changes found late, `SPAN`), and never connected. Taken as
//! a column, the neighbour pushes both clients under the small-writer cut-off (no estimate
//! at all) and its spans mark intervals unsure; chosen by connections, the clients are the
//! columns, their shares come out right, and the neighbour is listed with a share of 0.

use analyzer::ioshare::clients::{ClientChoice, Evidence, SelectedBy};
use analyzer::ioshare::{analyze, series, IoShareOptions};
use reader::iosample::format::{FdClass, FdGroup};
use reader::iosample::{Counters, ProcSeries, SampleLog};

#[path = "common/sample_times.rs"]
mod sample_times;

const INTERVAL_NS: u64 = 100_000_000;
const N: usize = 301;

fn wchar(w: u64) -> Counters {
    Counters {
        wchar: w,
        ..Default::default()
    }
}

fn socket(place: &str) -> FdGroup {
    FdGroup {
        class: FdClass::Socket,
        shared: !place.starts_with("listen"),
        place: place.into(),
        count: 1,
    }
}

/// Client i's bytes in interval t (deterministic, uneven so the two are not collinear).
fn x(i: usize, t: usize) -> u64 {
    let h = (t * 2654435761 + i * 40503) % 1000;
    if h < 250 {
        0
    } else {
        50_000 + 200 * h as u64 * (i as u64 + 1)
    }
}

/// The neighbour: 200 MB bursts every 7 intervals, nothing in between.
fn burst(t: usize) -> u64 {
    if t % 7 == 3 {
        200_000_000
    } else {
        0
    }
}

fn proc(pid: u32, comm: &str, f: impl Fn(usize) -> u64, fds: Vec<FdGroup>) -> ProcSeries {
    ProcSeries {
        pid,
        ppid: 1,
        comm: comm.into(),
        exe: format!("/usr/bin/{comm}"),
        points: (0..N).map(|j| (j, wchar((0..j).map(&f).sum()))).collect(),
        fds_listed: true,
        fds_seen: fds,
        ..Default::default()
    }
}

fn log() -> SampleLog {
    let shares = [1.0, 0.5];
    let server =
        move |t: usize| -> u64 { (0..2).map(|i| (shares[i] * x(i, t) as f64) as u64).sum() };
    let mut neighbour = proc(40, "cc1", burst, vec![socket("127.0.0.1:5432")]);
    // Read quietly: its burst found at the next read, spread over the 7 intervals since.
    neighbour.points.retain(|(j, _)| j % 7 == 0);
    neighbour.spans = neighbour
        .points
        .iter()
        .skip(1)
        .map(|&(j, _)| (j, j - 7))
        .collect();
    let mut log = SampleLog {
        samples: sample_times::regular(N, INTERVAL_NS, 1_700_000_000_000_000_000),
        processes: vec![
            proc(10, "srv", server, vec![socket("listen 127.0.0.1:8080")]),
            proc(20, "up", |t| x(0, t), vec![socket("127.0.0.1:8080")]),
            proc(21, "up", |t| x(1, t), vec![socket("127.0.0.1:8080")]),
            neighbour,
        ],
        ..Default::default()
    };
    log.meta.interval_ns = INTERVAL_NS;
    log.children = vec![Vec::new(); 4];
    log.reaped = vec![None; 4];
    log
}

#[test]
fn the_connected_processes_are_the_columns_and_the_neighbour_gets_none() {
    let log = log();
    let (s, sel) = series::build_for(
        &log,
        "srv",
        series::Metric::Wchar,
        1,
        0.01,
        &ClientChoice::Auto,
    )
    .unwrap();
    assert_eq!(sel.by, SelectedBy::Connections);
    assert_eq!(
        s.columns.iter().map(|c| c.pid).collect::<Vec<_>>(),
        [20, 21]
    );
    assert_eq!(s.small_bytes, 0.0);
    assert!(
        s.unsure.iter().all(|u| !u),
        "a neighbour's quiet reads make no interval unsure"
    );
    assert_eq!(sel.others.len(), 1);
    assert_eq!(sel.others[0].pid, 40);
    assert_eq!(sel.others[0].why, Evidence::NoConnection);

    // Every process a column: the neighbour's bytes push both clients under the cut-off.
    let (s, sel) = series::build_for(
        &log,
        "srv",
        series::Metric::Wchar,
        1,
        0.01,
        &ClientChoice::All,
    )
    .unwrap();
    assert_eq!(sel.by, SelectedBy::All);
    assert_eq!(s.columns.iter().map(|c| c.pid).collect::<Vec<_>>(), [40]);
    assert!(s.small_bytes > 0.0);
    assert!(s.unsure.iter().any(|u| *u));
}

#[test]
fn the_clients_shares_are_found_among_the_neighbours_bytes() {
    let r = analyze(
        &log(),
        &IoShareOptions {
            server: "srv".into(),
            ..Default::default()
        },
        None,
    )
    .unwrap();
    let share = |pid: u32| {
        r.processes
            .iter()
            .find(|p| p.pid == pid)
            .and_then(|p| p.overall)
            .unwrap()
    };
    assert!((share(20) - 1.0).abs() < 0.02, "{}", share(20));
    assert!((share(21) - 0.5).abs() < 0.02, "{}", share(21));
    assert_eq!(r.clients.others.len(), 1);
    assert!(r.to_text().contains("1 other process(es) wrote"));
}
