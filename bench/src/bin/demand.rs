//! Benchmark of `culprit demand` (issue 15): accuracy of the service demands on a real
//! multi-process system with known demands, beside the plain least-squares estimate of
//! the paper (003), and the cost of the reader's CPU sampling.
//!
//! 1. **Accuracy**: `tests/demand/demand_sim.c` (two single-threaded servers and a client
//!    on loopback; exponential per-request costs of known means; intensity and mix change
//!    every 500 ms) recorded with `culprit record`, analysed with 1 s intervals (fit over
//!    the first 90 %): the median relative error of the demands against what the servers
//!    measured each request to take, for the default estimator and for plain NNLS.
//!    Scenario 0: 3 services, free mix; scenario 1: 5 services whose counts correlate.
//! 2. **Live** (`--follow`): the same system with its back server slowed 3× at 10 s, recorded
//!    while `culprit demand --follow --json` reads the directory; for each pool geometry, how
//!    long after the third violating interval closed the alarm was printed: with whole
//!    sub-buffers only (`--live-interval 0`: what reaches the disk is what fills a
//!    sub-buffer, smaller sub-buffers sooner) and with the live data path (default).
//! 3. **CPU sampling**: the reader's sampler (`reader::cpustat`) timed over N processes:
//!    its cost per process and tick, and as a share of one core at the default 250 ms.
//!
//! ```text
//! cargo build --release -p cli -p tracer-preload
//! cargo run --release -p bench --bin demand [-- --seconds 60] [--seeds 3] [--only accuracy|live|cpu]
//! ```

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn culprit() -> PathBuf {
    let r = root().join("target/release/culprit");
    if r.exists() {
        r
    } else {
        root().join("target/debug/culprit")
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn correlation(slots: &[Vec<f64>]) -> f64 {
    let k = slots.first().map_or(0, |s| s.len());
    let col = |i: usize| -> Vec<f64> { slots.iter().map(|s| s[i]).collect() };
    let corr = |a: &[f64], b: &[f64]| {
        let n = a.len() as f64;
        let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
        let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
        let va: f64 = a.iter().map(|x| (x - ma) * (x - ma)).sum();
        let vb: f64 = b.iter().map(|y| (y - mb) * (y - mb)).sum();
        cov / (va * vb).sqrt()
    };
    let (mut s, mut n) = (0.0, 0);
    for i in 0..k {
        for j in i + 1..k {
            s += corr(&col(i), &col(j));
            n += 1;
        }
    }
    s / n.max(1) as f64
}

struct Outcome {
    prior: f64,
    nnls: f64,
    corr: f64,
    util: f64,
    cpu_over_busy: f64,
    cpu_corr: f64,
    services: usize,
}

fn run_once(prog: &Path, tmp: &Path, sc: u32, secs: u32, seed: u32, port: u16) -> Result<Outcome> {
    let out = tmp.join(format!("trace-{sc}-{seed}"));
    let _ = std::fs::remove_dir_all(&out);
    let rec = Command::new(culprit())
        .args(["record", "-o"])
        .arg(&out)
        .arg("--")
        .arg(prog)
        .args([
            "run",
            &port.to_string(),
            &secs.to_string(),
            &seed.to_string(),
            &sc.to_string(),
        ])
        .output()
        .context("culprit record")?;
    if !rec.status.success() {
        bail!("record failed: {}", String::from_utf8_lossy(&rec.stderr));
    }
    let stdout = String::from_utf8_lossy(&rec.stdout);
    let mut actual = BTreeMap::new();
    let mut slots = Vec::new();
    for l in stdout.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.first() {
            Some(&"actual") => {
                actual.insert(
                    (f[1].parse::<u64>()?, f[2].parse::<usize>()?),
                    f[3].parse::<f64>()?,
                );
            }
            Some(&"slot") => slots.push(
                f[2..]
                    .iter()
                    .map(|x| x.parse().unwrap_or(0.0))
                    .collect::<Vec<f64>>(),
            ),
            _ => {}
        }
    }
    let analyse = |est: &str| -> Result<Value> {
        let r = Command::new(culprit())
            .arg("demand")
            .arg(&out)
            .args([
                "--json",
                "--services",
                "port",
                "--train",
                "0.9",
                "--estimator",
                est,
            ])
            .output()?;
        if !r.status.success() {
            bail!("demand failed: {}", String::from_utf8_lossy(&r.stderr));
        }
        Ok(serde_json::from_slice(&r.stdout)?)
    };
    let errs = |v: &Value| -> Vec<f64> {
        let mut e = Vec::new();
        for p in v["processes"].as_array().into_iter().flatten() {
            let pid = p["pid"].as_u64().unwrap_or(0);
            for s in p["services"].as_array().into_iter().flatten() {
                let id = s["id"].as_str().unwrap_or("");
                let Some(port_s) = id.strip_prefix("port:").and_then(|x| x.parse::<u16>().ok())
                else {
                    continue;
                };
                let k = (port_s - port) as usize % 8;
                if let Some(t) = actual.get(&(pid, k)) {
                    e.push((s["demand_s"].as_f64().unwrap_or(0.0) - t).abs() / t);
                }
            }
        }
        e
    };
    let pv = analyse("prior")?;
    let nv = analyse("nnls")?;
    let front = pv["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .max_by_key(|p| p["services"].as_array().map_or(0, |s| s.len()))
        .cloned()
        .unwrap_or(Value::Null);
    let busy = front["busy_s"].as_f64().unwrap_or(0.0);
    Ok(Outcome {
        prior: median(&errs(&pv)),
        nnls: median(&errs(&nv)),
        corr: correlation(&slots),
        util: busy / secs as f64,
        cpu_over_busy: front["cpu_agreement"]["cpu_over_busy"]
            .as_f64()
            .unwrap_or(0.0),
        cpu_corr: front["cpu_agreement"]["correlation"]
            .as_f64()
            .unwrap_or(0.0),
        services: errs(&pv).len(),
    })
}

fn sampler_cost(n: usize) -> Result<(f64, f64)> {
    let tmp = tempfile::tempdir()?;
    let pool = tmp.path().join("pool");
    std::fs::write(&pool, vec![0u8; 4096])?;
    let mut kids: Vec<std::process::Child> = (0..n)
        .map(|_| Command::new("sleep").arg("30").spawn())
        .collect::<std::io::Result<_>>()?;
    let mut s = reader::cpustat::CpuSampler::new(&pool, tmp.path())?;
    s.tick()?; // the first tick scans /proc for mappers
    let scan = s.spent;
    for k in &kids {
        s.watch(k.id());
    }
    let t = Instant::now();
    let ticks = 200;
    for _ in 0..ticks {
        s.tick()?;
    }
    let per_tick = t.elapsed().as_secs_f64() / ticks as f64;
    for k in &mut kids {
        let _ = k.kill();
        let _ = k.wait();
    }
    Ok((per_tick / n as f64, scan.as_secs_f64()))
}

/// Records the simulation with a fault while following it; returns the alarms printed:
/// (process, seconds from the third violating interval's end to the print).
fn live_once(
    prog: &Path,
    tmp: &Path,
    subbuf: &str,
    live: &str,
    port: u16,
) -> Result<Vec<(u64, f64)>> {
    let out = tmp.join(format!("live-{subbuf}-{live}"));
    let _ = std::fs::remove_dir_all(&out);
    let mut rec = Command::new(culprit())
        .args(["record", "--subbuf-size", subbuf, "--subbufs", "1024"])
        .args(["--live-interval", live, "-o"])
        .arg(&out)
        .arg("--")
        .arg(prog)
        .args(["run", &port.to_string(), "25", "5", "0"])
        .env("FAULT_AT", "10")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let follow = Command::new(culprit())
        .arg("demand")
        .arg(&out)
        .args(["--follow", "--json", "--train", "8s"])
        .output()?;
    rec.wait()?;
    let mut v = Vec::new();
    for l in String::from_utf8_lossy(&follow.stdout).lines() {
        let a: Value = serde_json::from_str(l)?;
        let lag = (a["found_unix_ns"].as_i64().unwrap_or(0) - a["t_unix_ns"].as_i64().unwrap_or(0))
            as f64
            * 1e-9;
        v.push((a["pid"].as_u64().unwrap_or(0), lag));
    }
    Ok(v)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let get = |name: &str, d: u32| -> u32 {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let secs = get("--seconds", 60);
    let seeds = get("--seeds", 3);
    let tmp = tempfile::tempdir()?;
    let src = tmp.path().join("demand_sim.c");
    std::fs::write(&src, include_str!("../../../tests/demand/demand_sim.c"))?;
    let prog = tmp.path().join("demand_sim");
    let st = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&prog)
        .arg(&src)
        .arg("-lm")
        .status()?;
    if !st.success() {
        bail!("cannot compile demand_sim.c");
    }
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_default();
    let want = |x: &str| only.is_empty() || only == x;
    println!("culprit: {}", culprit().display());
    if want("live") {
        // Whole sub-buffers only (`--live-interval 0`) at 8 KiB and the default 256 KiB,
        // then the default live path (100 ms) at 256 KiB.
        for (k, (subbuf, live)) in [("8K", "0"), ("256K", "0"), ("256K", "100ms")]
            .iter()
            .enumerate()
        {
            let a = live_once(&prog, tmp.path(), subbuf, live, 23500 + 10 * k as u16)?;
            println!("live, sub-buffers of {subbuf}, --live-interval {live}: alarms (pid, seconds after the third violating interval closed): {a:?}");
        }
    }
    if !want("accuracy") && !want("cpu") {
        return Ok(());
    }
    if want("accuracy") {
        println!("| scenario | seed | services | count corr. | front util. | median err. prior | median err. NNLS | NNLS / prior | CPU/busy | corr(busy, CPU) |");
        println!("|---|---|---|---|---|---|---|---|---|---|");
        let mut port = 23000u16;
        for sc in [0u32, 1] {
            for seed in 1..=seeds {
                port += 10;
                let o = run_once(&prog, tmp.path(), sc, secs, seed, port)?;
                println!(
                "| {} | {seed} | {} | {:.2} | {:.0} % | {:.2} % | {:.1} % | {:.1}× | {:.2} | {:.2} |",
                if sc == 0 { "3 services, free mix" } else { "5 services, correlated" },
                o.services,
                o.corr,
                o.util * 100.0,
                o.prior * 100.0,
                o.nnls * 100.0,
                o.nnls / o.prior.max(1e-9),
                o.cpu_over_busy,
                o.cpu_corr
            );
            }
        }
    }
    if !want("cpu") {
        return Ok(());
    }
    for n in [1usize, 16, 64] {
        let (per, scan) = sampler_cost(n)?;
        println!(
            "CPU sampler, {n} processes: {:.1} µs per process per tick ({:.3} % of a core at the default 250 ms); first /proc scan {:.1} ms",
            per * 1e6,
            per * n as f64 / 0.25 * 100.0,
            scan * 1e3
        );
    }
    Ok(())
}
