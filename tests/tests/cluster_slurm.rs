//! Culprit on a real Slurm cluster: four `slurmd` on this machine (`n1`–`n4`, each in its
//! own UTS namespace, started by `scripts/setup.d/slurm.sh`). A ring of four Python
//! processes, one per node, each listening on its node's loopback address (127.0.0.11–14),
//! passes a token around with an acknowledgement per hop; `srun culprit record -o DIR`
//! records it as `DIR/<host>/<job.step.task>/`, the recorders of n2 and n3 with clocks
//! ±50 ms off and ∓100 ppm drifting on purpose (`CULPRIT_TEST_CLOCK_SKEW`). Then: `culprit cluster learn`
//! and `culprit cluster rank` as sbatch jobs give the model and ranking of `learn` and
//! `rank` run here; `culprit messages` over the tree finds the four hosts and tasks,
//! matches every byte across hosts, estimates each skewed clock's offset and drift within
//! the uncertainty it reports, and, aligned, puts no receive before its send.

#[path = "../e2e/common.rs"]
mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The clock skews put on purpose (`OFFSET_NS,PPM` from the recorder's first reading).
const N2_SKEW: &str = "50000000,-100";
const N3_SKEW: &str = "-50000000,100";

const RING: &str = r#"
import os, socket, sys, time
r = int(os.environ['SLURM_PROCID']); n = 4; M = int(sys.argv[1]); base = int(sys.argv[2])
addr = lambda i: ('127.0.0.%d' % (11 + i), base + i)

def recv_exact(s, k):
    b = b''
    while len(b) < k:
        c = s.recv(k - len(b))
        if not c: raise EOFError
        b += c
    return b

ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(addr(r)); ls.listen(1)
for _ in range(3000):
    try:
        right = socket.create_connection(addr((r + 1) % n)); break
    except OSError:
        time.sleep(0.01)
else:
    raise SystemExit('rank %d: no right neighbour' % r)
left, _ = ls.accept()
for k in range(M):
    if r == 0:
        right.sendall(k.to_bytes(8, 'big')); recv_exact(right, 8)
        t = int.from_bytes(recv_exact(left, 8), 'big'); left.sendall(b'ackackac')
        assert t == k
    else:
        t = int.from_bytes(recv_exact(left, 8), 'big'); left.sendall(b'ackackac')
        right.sendall(t.to_bytes(8, 'big')); recv_exact(right, 8)
    time.sleep(0.002)
right.close(); left.close()
print('rank', r, 'ok on', socket.gethostname())
"#;

/// Four idle Slurm nodes, or why not.
fn slurm_ready() -> Result<(), String> {
    let r = tests::run_with_deadline(
        Command::new("sinfo").args(["-h", "-N", "-o", "%N %T"]),
        Duration::from_secs(30),
    );
    if !r.status.success() {
        return Err(format!(
            "sinfo failed ({}): run scripts/setup.d/slurm.sh",
            r.stderr.trim()
        ));
    }
    let idle = r.stdout.lines().filter(|l| l.ends_with("idle")).count();
    if idle < 4 {
        return Err(format!(
            "{idle} idle Slurm nodes, 4 needed: {}",
            r.stdout.trim()
        ));
    }
    Ok(())
}

fn culprit_ok(args: &[&str]) -> tests::RunOutput {
    let r = run_culprit(args, Duration::from_secs(180));
    r.assert_success(&format!("culprit {}", args.join(" ")));
    r
}

/// `srun` of the ring (`hops` times around) under `culprit record -o out`, the clocks of
/// task 1 (n2) 50 ms ahead and 100 ppm slow, of task 2 (n3) 50 ms behind and 100 ppm fast.
fn record_ring(out: &Path, prog: &Path, hops: u32, base: u16) {
    let py = python();
    let script = format!(
        "case $SLURM_PROCID in 1) export CULPRIT_TEST_CLOCK_SKEW={N2_SKEW};; \
         2) export CULPRIT_TEST_CLOCK_SKEW={N3_SKEW};; esac; \
         exec {} record -o {} -- {} {} {hops} {base}",
        tests::culprit().display(),
        out.display(),
        py.display(),
        prog.display()
    );
    let mut c = Command::new("srun");
    c.args([
        "-N4",
        "-n4",
        "--ntasks-per-node=1",
        "-t",
        "5",
        "sh",
        "-c",
        &script,
    ])
    .env(tests::LIBTRACE_ENV, libtrace());
    let r = tests::run_with_deadline(&mut c, Duration::from_secs(180));
    r.assert_success("srun culprit record");
    for i in 0..4 {
        assert!(
            r.stdout.contains(&format!("rank {i} ok on n{}", i + 1)),
            "{}",
            r.stdout
        );
    }
}

#[test]
fn a_ring_across_four_slurm_nodes() {
    if let Err(why) = slurm_ready() {
        tests::skip("cluster_slurm", "the four-node Slurm cluster", &why);
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let prog = t.join("ring.py");
    std::fs::write(&prog, RING).unwrap();
    let (normal, run) = (t.join("normal"), t.join("run"));
    record_ring(&normal, &prog, 100, 30100);
    record_ring(&run, &prog, 600, 30110);
    // DIR/<host>/<job.step.task>/: one per node.
    let hosts: Vec<String> = std::fs::read_dir(&run)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(hosts, ["n1", "n2", "n3", "n4"]);
    let s = |p: &Path| p.to_str().unwrap().to_string();
    // The analysis as Slurm jobs, and here: the same model and ranking.
    let (model, here) = (s(&t.join("cluster.model")), s(&t.join("here.model")));
    let work = s(&t.join("work"));
    let r = culprit_ok(&[
        "cluster",
        "learn",
        "--wait",
        "--work",
        &work,
        "-o",
        &model,
        &s(&normal),
    ]);
    assert!(r.stderr.contains("4 hosts: n1, n2, n3, n4"), "{}", r.stderr);
    let r = culprit_ok(&["learn", &s(&normal), "-o", &here]);
    assert!(r.stderr.contains("Slurm tasks: n1/"), "{}", r.stderr);
    assert!(
        without_endings(&model) == without_endings(&here),
        "cluster learn ≠ learn"
    );
    let ranked = culprit_ok(&[
        "cluster",
        "rank",
        "--wait",
        "--work",
        &work,
        "--model",
        &model,
        "--json",
        &s(&run),
    ]);
    // The same model both ways: the sharded path against one process.
    let single = culprit_ok(&[
        "rank",
        "--model",
        &model,
        "--json",
        "--no-messages",
        &s(&run),
    ]);
    assert!(ranked.stdout == single.stdout, "cluster rank ≠ rank");
    let units: Vec<Value> = serde_json::from_str(&ranked.stdout).unwrap();
    let ranked_hosts: std::collections::BTreeSet<&str> =
        units.iter().filter_map(|u| u["host"].as_str()).collect();
    assert_eq!(ranked_hosts.len(), 4, "{ranked_hosts:?}");
    // Messages across the hosts, n3's clock 50 ms behind.
    let m = culprit_ok(&["messages", "--json", &s(&run)]);
    assert!(
        m.stderr.contains("on 4 hosts (n1, n2, n3, n4)"),
        "{}",
        m.stderr
    );
    let v: Value = serde_json::from_str(&m.stdout).unwrap();
    let tcp: Vec<&Value> = v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "tcp" && !c["b"].is_null())
        .collect();
    assert_eq!(
        tcp.len(),
        4,
        "the ring's four connections, both ends traced: {v:#}"
    );
    assert_eq!(v["totals"]["unmatched_bytes"], 0, "{:#}", v["totals"]);
    let offsets = v["clock_offsets"].as_array().unwrap();
    let of = |h: &str| {
        offsets
            .iter()
            .find(|o| o["host"] == h)
            .unwrap_or_else(|| panic!("{h}: {offsets:#?}"))
    };
    let f = |o: &Value, k: &str| o[k].as_f64().unwrap_or(f64::INFINITY);
    for (h, skew) in [("n2", N2_SKEW), ("n3", N3_SKEW)] {
        let (off, ppm) = skew.split_once(',').unwrap();
        let (off, ppm): (f64, f64) = (off.parse().unwrap(), ppm.parse().unwrap());
        let o = of(h);
        // The skewed clock reads t + off + ppm·(t − t0) from its first reading t0: the
        // correction back is −off − ppm·(t − t0), drifting by −ppm.
        let first = std::fs::read_dir(run.join(h))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let m: Value =
            serde_json::from_str(&std::fs::read_to_string(first.join("manifest.json")).unwrap())
                .unwrap();
        let t0 = m["clock_snapshots"][0]["realtime_ns"].as_f64().unwrap() - off;
        let at = f(o, "at_ns");
        let want = -off - ppm * 1e-6 * (at - t0);
        let (est, unc) = (f(o, "offset_ns"), f(o, "uncertainty_ns"));
        let (d, d_unc) = (f(o, "drift_ppm"), f(o, "drift_uncertainty_ppm"));
        eprintln!("{h}: offset {est:.0} ± {unc:.0} ns (want {want:.0}), drift {d:.2} ± {d_unc:.2} ppm (want {})", -ppm);
        assert!(
            unc < 2e6 && d_unc < 100.0,
            "{h}'s clock is not bounded: {o}"
        );
        // 10 µs: the skewed clock's own time against the true one at `at` (100 ppm of 50 ms).
        assert!(
            (est - want).abs() <= unc + 10e3,
            "{h}: offset {est} ± {unc}, want {want}"
        );
        assert!(
            (d + ppm).abs() <= d_unc,
            "{h}: drift {d} ± {d_unc} ppm, want {}",
            -ppm
        );
    }
    let o = of("n4");
    assert!(
        f(o, "offset_ns").abs() <= f(o, "uncertainty_ns"),
        "n4 shares n1's clock: {o}"
    );
    assert_eq!(
        v["aligned_violations"], 0,
        "receives before sends once aligned"
    );
}

/// A model file's JSON with the groups' `ending` left out: how a group's processes ended is
/// learned against the rest of each run, so a model learned per host (or per part) and
/// merged knows only each host's processes there (analyzer/MODEL.md, `ending`); every other
/// part of it must be the model learned at once.
fn without_endings(path: &str) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).unwrap()).expect("a model is JSON");
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(o) => {
                o.remove("ending");
                o.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}
