//! `culprit demand` on a real multi-process system with known service demands
//! (`tests/demand/demand_sim.c`): two single-threaded servers and a client on loopback,
//! recorded with `culprit record`, under changing intensity and mix. The estimates are
//! judged against what each request really took on the server (the server measures it:
//! on a busy machine a spin overshoots its nominal cost when preempted).
//!
//! - 3 services with freely changing mix at 25–70 % utilization: median relative error
//!   of the demands ≤ 5 %.
//! - 5 services whose per-slot counts correlate at ~0.9: median relative error ≤ 15 %, and
//!   at most half the plain least-squares estimate's.
//!
//! The benchmark (`bench/src/bin/demand.rs`) runs the same system longer and reports the
//! figures.

use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// What one recorded run of the simulation gives.
pub struct SimRun {
    /// `culprit demand --json` with the default estimator, and with `nnls`.
    pub prior: Value,
    /// Plain least squares.
    pub nnls: Value,
    /// (pid, service index) → actual mean demand (s).
    pub actual: BTreeMap<(u64, usize), f64>,
    /// Per-slot request counts of the client.
    pub slots: Vec<Vec<f64>>,
    /// The base port.
    pub port: u16,
    /// The trace directory.
    pub trace: std::path::PathBuf,
    /// Keeps the trace directory.
    pub _dir: tempfile::TempDir,
}

fn culprit(args: &[&str]) -> tests::RunOutput {
    let mut c = std::process::Command::new(tests::culprit());
    if let Some(l) = tests::libtrace() {
        c.env(tests::LIBTRACE_ENV, l);
    }
    tests::run_with_deadline(c.args(args), Duration::from_secs(120))
}

/// Records `seconds` of scenario `sc` and analyses it with 0.5 s intervals, training on
/// 90 % of the run (the accuracy of the fit, not the chart, is what is measured).
pub fn run_sim(sc: u32, seconds: u32, seed: u32) -> Option<SimRun> {
    tests::libtrace_or_skip("demand_sim")?;
    let prog = tests::compile_c(
        "demand_sim",
        include_str!("../demand/demand_sim.c"),
        &["-lm"],
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("trace");
    let port = tests::free_port_range(9);
    let rec = culprit(&[
        "record",
        "-o",
        out.to_str().unwrap(),
        "--",
        prog.path.to_str().unwrap(),
        "run",
        &port.to_string(),
        &seconds.to_string(),
        &seed.to_string(),
        &sc.to_string(),
    ]);
    rec.assert_success("culprit record demand_sim");
    let mut actual = BTreeMap::new();
    let mut slots = Vec::new();
    for l in rec.stdout.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.first() {
            Some(&"actual") => {
                actual.insert(
                    (f[1].parse().unwrap(), f[2].parse().unwrap()),
                    f[3].parse::<f64>().unwrap(),
                );
            }
            Some(&"slot") => slots.push(f[2..].iter().map(|x| x.parse().unwrap()).collect()),
            _ => {}
        }
    }
    let analyse = |est: &str| -> Value {
        let r = culprit(&[
            "demand",
            out.to_str().unwrap(),
            "--services",
            "port",
            "--json",
            "--interval",
            "0.5s",
            "--train",
            "0.9",
            "--estimator",
            est,
        ]);
        r.assert_success("culprit demand");
        serde_json::from_str(&r.stdout).expect("JSON")
    };
    Some(SimRun {
        prior: analyse("prior"),
        nnls: analyse("nnls"),
        actual,
        slots,
        port,
        trace: out.clone(),
        _dir: dir,
    })
}

/// Relative errors of every (process, service) estimate against the actual demand.
pub fn errors(run: &SimRun, report: &Value) -> Vec<f64> {
    let mut errs = Vec::new();
    for p in report["processes"].as_array().unwrap() {
        let pid = p["pid"].as_u64().unwrap();
        for s in p["services"].as_array().unwrap() {
            let id = s["id"].as_str().unwrap();
            let port: u16 = id.strip_prefix("port:").unwrap().parse().unwrap();
            let k = (port - run.port) as usize % 8;
            let truth = run.actual[&(pid, k)];
            let d = s["demand_s"].as_f64().unwrap();
            errs.push((d - truth).abs() / truth);
        }
    }
    errs
}

/// The median.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Mean pairwise correlation of the per-slot counts of the services.
pub fn mean_correlation(slots: &[Vec<f64>]) -> f64 {
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
    let mut s = 0.0;
    let mut n = 0;
    for i in 0..k {
        for j in i + 1..k {
            s += corr(&col(i), &col(j));
            n += 1;
        }
    }
    s / n.max(1) as f64
}

#[cfg(test)]
mod checks {
    use super::*;

    fn utilization(run: &SimRun, secs: f64) -> f64 {
        run.prior["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                p["intervals"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| i["busy_s"].as_f64().unwrap())
                    .sum::<f64>()
                    / secs
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn demands_of_a_real_system_are_recovered() {
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| run_sim(0, 12, 7));
            let b = s.spawn(|| run_sim(1, 12, 11));
            (a.join().unwrap(), b.join().unwrap())
        });
        let (Some(a), Some(b)) = (a, b) else { return };
        // 3 services, mix changing: both servers analysed, every demand within reach.
        assert_eq!(
            a.prior["processes"].as_array().unwrap().len(),
            2,
            "{}",
            a.prior
        );
        let ea = errors(&a, &a.prior);
        assert_eq!(ea.len(), 4);
        let u = utilization(&a, 12.0);
        assert!(u >= 0.3, "front utilization {u}");
        assert!(median(&ea) <= 0.05, "3 services: errors {ea:?}");
        // No NaN anywhere, and the contract's fields.
        // (serde_json writes a NaN as null: every number the contract names is a number.)
        for p in a.prior["processes"].as_array().unwrap() {
            for f in ["pid", "host", "exe", "services", "sigma_s", "alarms"] {
                assert!(p.get(f).is_some(), "missing {f}");
            }
            assert!(p["sigma_s"].is_f64());
            for s in p["services"].as_array().unwrap() {
                assert!(s["demand_s"].is_f64() && s["requests"].is_u64() && s["id"].is_string());
            }
        }
        // Services by the handler-unit classes of a model learned from the run itself.
        let t = a.trace.to_str().unwrap();
        let model = a.trace.with_extension("cpm");
        culprit(&["learn", t, "-o", model.to_str().unwrap()]).assert_success("culprit learn");
        let r = culprit(&["demand", t, "--json", "--model", model.to_str().unwrap()]);
        r.assert_success("culprit demand --model");
        let v: Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(v["services_mode"], "model");
        let ids: Vec<&str> = v["processes"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["services"].as_array().unwrap().iter())
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), 4, "{ids:?}");
        assert!(ids.iter().all(|i| i.starts_with("handler g")), "{ids:?}");
        // 5 correlated services.
        let c = mean_correlation(&b.slots);
        assert!(c >= 0.85, "counts correlate at {c} only");
        let eb = errors(&b, &b.prior);
        let en = errors(&b, &b.nnls);
        assert_eq!(eb.len(), 6);
        let (mp, mn) = (median(&eb), median(&en));
        eprintln!("correlated: prior {mp:.4} ({eb:?}), plain {mn:.4} ({en:?}), corr {c:.3}");
        assert!(mp <= 0.15, "5 correlated services: errors {eb:?}");
        assert!(
            mp * 2.0 <= mn,
            "prior {mp} is not 2x better than plain least squares {mn}"
        );
    }
}
