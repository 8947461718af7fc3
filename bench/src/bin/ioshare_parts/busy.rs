//! `--neighbours N` (issue 26): the accuracy workload recorded with `culprit iosample --all`
//! while N unrelated processes do IO on the machine (`bench/ioshare/neighbours.py`: burst
//! writers, log writers, installers, a compiler loop, short-lived `dd`s — none talks to the
//! server), against two kinds of server: vsftpd (`--kind ftp`, a process per session) and
//! nginx with WebDAV PUT (`--kind http`, one worker process serving every client). Each
//! recording is estimated three ways: as `culprit ioshare` does by default (candidate
//! clients: the processes seen connected to the server), with every process that wrote a
//! candidate (`--clients all`, the estimator before issue 26), and told the client pids
//! (`--clients PIDS`, whose least squares is the baseline of the goal).

use super::{estimate, release, vsftpd, Reaped};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The server kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// vsftpd: a process per session.
    Ftp,
    /// nginx, one worker, WebDAV PUT.
    Http,
}

impl Kind {
    pub fn parse(s: &str) -> Result<Kind> {
        Ok(match s {
            "ftp" => Kind::Ftp,
            "http" => Kind::Http,
            _ => bail!("--kind {s:?}: expected ftp or http"),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Ftp => "ftp",
            Kind::Http => "http",
        }
    }
}

/// nginx in `dir` with one worker process (the master's child), WebDAV PUT under `/up/`;
/// `body_buffer`: its `client_body_buffer_size` (nginx's default, 16k on 64-bit, when
/// `None`) — the bytes of a request body it reads and holds before writing them to the
/// body's temporary file.
fn nginx(dir: &Path, body_buffer: Option<&str>) -> Result<(Reaped, u16)> {
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("up"))?;
    std::fs::create_dir_all(dir.join("tmp"))?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let d = dir.display();
    let conf = dir.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "daemon off;\nmaster_process on;\nworker_processes 1;\nuser root;\n\
             pid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n  access_log {d}/access.log;\n  client_body_temp_path {d}/tmp/body;\n\
               proxy_temp_path {d}/tmp/proxy;\n  fastcgi_temp_path {d}/tmp/fastcgi;\n\
               uwsgi_temp_path {d}/tmp/uwsgi;\n  scgi_temp_path {d}/tmp/scgi;\n\
               client_max_body_size 0;\n{}\
               server {{\n    listen 127.0.0.1:{port};\n    root {};\n\
                 location /up/ {{ dav_methods PUT; create_full_put_path on; }}\n  }}\n}}\n",
            body_buffer.map_or(String::new(), |b| format!(
                "  client_body_buffer_size {b};\n"
            )),
            root.display()
        ),
    )?;
    let c = Command::new("/usr/sbin/nginx")
        .arg("-c")
        .arg(&conf)
        .arg("-p")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting nginx (apt-get install nginx)")?;
    let g = Reaped(vec![c]);
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok((g, port));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("nginx did not start (see {d}/error.log)")
}

/// The neighbours, stopped by SIGTERM (they then stop their own children and remove their
/// files) and reaped when dropped.
struct Neighbours(Option<Child>);

impl Drop for Neighbours {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }
}

fn neighbours(dir: &Path, procs: usize, seed: u64) -> Result<Neighbours> {
    if procs == 0 {
        return Ok(Neighbours(None));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("ioshare/neighbours.py");
    let c = Command::new("python3")
        .arg(script)
        .arg("--dir")
        .arg(dir.join("neighbours"))
        .args(["--procs", &procs.to_string(), "--seed", &seed.to_string()])
        .spawn()
        .context("starting the neighbours")?;
    // Let them start writing before the sampler does.
    std::thread::sleep(Duration::from_secs(3));
    Ok(Neighbours(Some(c)))
}

/// One recording: the server, the neighbours, and the workload recorded by `culprit
/// record` while `culprit iosample --all` samples every process. Leaves `io.cios`,
/// `trace/`, `out.txt` (the clients' lines), `server.pid` and `kind` in `dir`.
pub fn record(cfg: &Config, n: usize, seed: u64, dir: &Path) -> Result<()> {
    let culprit = release("culprit");
    let workload = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/ioshare/workload.py");
    let (server, port) = match cfg.kind {
        Kind::Ftp => vsftpd(dir, 0)?,
        Kind::Http => nginx(dir, cfg.body_buffer.as_deref())?,
    };
    let server_pid = server.0[0].id().to_string();
    std::fs::write(dir.join("server.pid"), &server_pid)?;
    std::fs::write(dir.join("kind"), cfg.kind.name())?;
    std::fs::create_dir_all(dir.join("local"))?;
    let busy = neighbours(dir, cfg.neighbours, seed)?;
    let rate = (6e6 / n as f64).clamp(3e5, 2e6);
    let o = Command::new(&culprit)
        .args(["iosample", "--all", "--interval", "100ms", "--server"])
        .arg(&server_pid)
        .arg("-o")
        .arg(dir.join("io.cios"))
        .arg("--")
        .arg(&culprit)
        .args(["record", "-o"])
        .arg(dir.join("trace"))
        .args(["--", "python3"])
        .arg(&workload)
        .args(["--port", &port.to_string(), "--clients", &n.to_string()])
        .args([
            "--duration",
            &cfg.duration.to_string(),
            "--seed",
            &(seed * 1000 + n as u64 * 31).to_string(),
        ])
        .args(["--rate", &format!("{rate}"), "--proto", cfg.kind.name()])
        .arg("--dir")
        .arg(dir.join("local"))
        .args(cfg.ramp.then_some("--ramp"))
        .output()?;
    drop(busy);
    // nginx's master stops its worker on SIGTERM; SIGKILL alone left the worker orphaned,
    // holding the port and the bench's standard output.
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(server.0[0].id() as i32, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(500));
    drop(server);
    if !o.status.success() {
        bail!("{n} clients: {}", String::from_utf8_lossy(&o.stderr));
    }
    std::fs::write(dir.join("out.txt"), &o.stdout)?;
    let _ = std::fs::remove_dir_all(dir.join("root").join("up"));
    let _ = std::fs::remove_dir_all(dir.join("local"));
    let _ = std::fs::remove_dir_all(dir.join("tmp"));
    Ok(())
}

/// The configuration of the busy runs.
pub struct Config {
    pub kind: Kind,
    pub neighbours: usize,
    pub duration: u64,
    pub ramp: bool,
    /// nginx's `client_body_buffer_size` (`--body-buffer`); its default when `None`.
    pub body_buffer: Option<String>,
    /// Record (and keep) only: estimate later with `--from`.
    pub record_only: bool,
    /// No estimate with every process a column (the slowest): its cells NaN.
    pub skip_every: bool,
}

fn client_pids(dir: &Path) -> Result<Vec<u32>> {
    let out = std::fs::read_to_string(dir.join("out.txt"))
        .with_context(|| format!("{}/out.txt", dir.display()))?;
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l)?;
            v["pid"].as_u64().map(|p| p as u32).context("pid")
        })
        .collect()
}

/// One recording's figures.
#[derive(Default)]
struct Row {
    cells: Vec<f64>,
}

/// Estimates the recording in `dir` three ways and prints its row; returns the figures
/// averaged in the summary.
fn row(label: &str, dir: &Path, skip_every: bool) -> Result<Row> {
    let pids = client_pids(dir)?;
    let told = pids
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let auto = estimate(dir, &["--method", "regression"])?;
    let all = if skip_every {
        serde_json::Value::Null
    } else {
        estimate(dir, &["--method", "regression", "--clients", "all"])?
    };
    let given = estimate(dir, &["--method", "regression", "--clients", &told])?;
    // The estimate before the intake (issue 26, item 4): the server's counter (+ backlog).
    let before = estimate(dir, &["--method", "regression", "--intake", "never"])?;
    let acc =
        |j: &serde_json::Value, e: &str, k: &str| j["accuracy"][e][k].as_f64().unwrap_or(f64::NAN);
    let cands: Vec<u32> = auto["processes"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter_map(|p| p["pid"].as_u64())
                .map(|p| p as u32)
                .collect()
        })
        .unwrap_or_default();
    let found = pids.iter().filter(|p| cands.contains(p)).count();
    let false_pos = cands.iter().filter(|p| !pids.contains(p)).count();
    let others = auto["clients"]["others"].as_array().map_or(0, |v| v.len());
    let others_mb = auto["clients"]["others_bytes"].as_f64().unwrap_or(0.0) / 1e6;
    // Every process a column: the clients left without an estimate (under the
    // small-writer cut-off) and the server's load given to the neighbours' columns.
    let all_cols: Vec<&serde_json::Value> = all["processes"]
        .as_array()
        .map_or(Vec::new(), |v| v.iter().collect());
    let unestimated = pids
        .iter()
        .filter(|p| {
            !all_cols
                .iter()
                .any(|c| c["pid"].as_u64() == Some(**p as u64))
        })
        .count();
    let unestimated = if skip_every {
        "–".to_string()
    } else {
        unestimated.to_string()
    };
    let server_total = all["server"]["total_bytes"].as_f64().unwrap_or(f64::NAN);
    let to_neighbours: f64 = all_cols
        .iter()
        .filter(|c| {
            !c["pid"]
                .as_u64()
                .is_some_and(|p| pids.contains(&(p as u32)))
        })
        .map(|c| c["overall"].as_f64().unwrap_or(0.0) * c["total_bytes"].as_f64().unwrap_or(0.0))
        .sum();
    let cells = vec![
        acc(&auto, "regression", "mean_mae_points"),
        acc(&auto, "least_squares", "mean_mae_points"),
        acc(&all, "regression", "mean_mae_points"),
        acc(&all, "least_squares", "mean_mae_points"),
        acc(&given, "regression", "mean_mae_points"),
        acc(&given, "least_squares", "mean_mae_points"),
        acc(&auto, "regression", "mean_window_points"),
        acc(&given, "least_squares", "mean_window_points"),
        100.0 * to_neighbours / server_total,
        acc(&before, "regression", "mean_mae_points"),
    ];
    let intake = &auto["server"]["intake"];
    let load = match (intake["measured"].as_bool(), intake["used"].as_bool()) {
        (Some(true), Some(true)) => format!(
            "intake ({} closing)",
            intake["closing_intervals"].as_u64().unwrap_or(0)
        ),
        (Some(true), _) => "counter (intake not better)".to_string(),
        _ => "counter (no intake)".to_string(),
    };
    println!(
        "| {label} | {} | {others} ({others_mb:.0} MB) | {found}/{} +{false_pos} | **{:.1}** / {:.1} | {load} | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | {unestimated} | {:.1} % | {:.2} MB | {:.1} ms |",
        pids.len(),
        pids.len(),
        cells[0],
        acc(&auto, "regression", "max_mae_points"),
        cells[9],
        acc(&before, "regression", "max_mae_points"),
        cells[1],
        acc(&auto, "least_squares", "max_mae_points"),
        cells[2],
        acc(&all, "regression", "max_mae_points"),
        cells[3],
        acc(&all, "least_squares", "max_mae_points"),
        cells[4],
        acc(&given, "regression", "max_mae_points"),
        cells[5],
        acc(&given, "least_squares", "max_mae_points"),
        cells[6],
        cells[7],
        cells[8],
        auto["server"]["backlog"]["max_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        auto["jitter"]["p99_ns"].as_f64().unwrap_or(0.0) / 1e6,
    );
    Ok(Row { cells })
}

/// `--neighbours N`: for each server kind's client count and seed, a recording (or the
/// one kept under `from`), its row, then the mean over the seeds.
pub fn accuracy(
    cfg: &Config,
    clients: &[usize],
    seeds: &[u64],
    keep: Option<&Path>,
    from: Option<&Path>,
) -> Result<()> {
    match from {
        Some(f) => println!("## Accuracy among busy neighbours: the recordings of {}, estimated again\n", f.display()),
        None => println!(
            "## Accuracy among busy neighbours: {} on loopback, {} neighbour processes, {} s per recording, `culprit iosample --all` at 10 Hz, seeds {seeds:?}{}\n",
            match cfg.kind { Kind::Ftp => "vsftpd (a process per session)", Kind::Http => "nginx WebDAV PUT (one worker serves every client)" },
            cfg.neighbours,
            cfg.duration,
            if cfg.ramp { ", drifting shares (--ramp)" } else { "" },
        ),
    }
    println!("Mean / worst client's mean absolute error of β against the trace, points, per 1 s interval (`win`: per 60 s window). `auto`: `culprit ioshare` as it is (candidates: the processes seen connected to the server); `every process`: `--clients all`; `told`: `--clients` the client pids; `before`: `--intake never` (the server's counter, with its backlog where that explains better: the estimate before the intake). Load: what `auto` regressed on. Others: processes that wrote and were not candidates (share 0). Found: true clients among the candidates / clients, + candidates that are not clients. Unestimated: clients without an estimate with every process a column. To neighbours: the server's load the neighbours' columns took with every process a column.\n");
    println!("| recording | clients | others | found | regression 1 s | load | regression, counter (`--intake never`: before) 1 s | least squares 1 s | regression, every process 1 s | least squares, every process 1 s | regression, told 1 s | least squares, told 1 s | regression win / least squares told win | unestimated (every process) | to neighbours (every process) | backlog max | jitter p99 |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &n in clients {
        let mut rows = Vec::new();
        for &seed in seeds {
            let name = format!("{}-nb{}-n{n}-s{seed}", cfg.kind.name(), cfg.neighbours);
            let tmp = tempfile::tempdir()?;
            let dir: PathBuf = match (from, keep) {
                (Some(f), _) => f.join(&name),
                (None, Some(k)) => {
                    let d = k.join(&name);
                    let _ = std::fs::remove_dir_all(&d);
                    std::fs::create_dir_all(&d)?;
                    d
                }
                (None, None) => tmp.path().to_path_buf(),
            };
            if from.is_none() {
                record(cfg, n, seed, &dir)?;
                if cfg.record_only {
                    println!("recorded {}", dir.display());
                    continue;
                }
            }
            rows.push(row(&name, &dir, cfg.skip_every)?);
        }
        if rows.len() > 1 {
            let m = |k: usize| rows.iter().map(|r| r.cells[k]).sum::<f64>() / rows.len() as f64;
            println!(
                "| **mean of {} ({n} clients)** | | | | **{:.2}** | | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | **{:.2}** | {:.2} / {:.2} | | {:.1} % | | |",
                rows.len(),
                m(0),
                m(9),
                m(1),
                m(2),
                m(3),
                m(4),
                m(5),
                m(6),
                m(7),
                m(8)
            );
        }
    }
    println!();
    Ok(())
}
