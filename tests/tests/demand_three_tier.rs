//! `culprit demand` on a real three-tier system, end to end: nginx → gunicorn running a
//! small WSGI app (`tests/demand/three_tier/app.py`) → PostgreSQL, all on loopback, under
//! a load generator whose intensity and mix change every 3 s (`load.py`). Installs:
//! `tests/demand/setup.sh`.
//!
//! - The faulty run drops the index of the table the queries use at 14 s (003's own fault:
//!   the database needs more work per query from then on): alarms are raised on
//!   PostgreSQL's backends only, the first within 3 intervals of the fault.
//! - The same load without the fault raises no alarm anywhere.
//!
//! About 70 s: not in the default run (`cargo test -p tests --test demand_three_tier --
//! --ignored`).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const SECONDS: u32 = 24;
const FAULT_AT: f64 = 14.0;

fn pg_bin() -> Option<PathBuf> {
    let out = Command::new("sh")
        .args(["-c", "readlink -f \"$(command -v postgres || ls /usr/lib/postgresql/*/bin/postgres | tail -1)\""])
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    p.exists().then(|| p.parent().unwrap().to_path_buf())
}

/// What is missing to run the system, if anything.
fn missing() -> Option<String> {
    let ok = |c: &str, a: &[&str]| {
        Command::new(c)
            .args(a)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !ok("nginx", &["-v"]) && !Path::new("/usr/sbin/nginx").exists() {
        return Some("nginx".into());
    }
    if pg_bin().is_none() {
        return Some("postgresql".into());
    }
    if !ok("id", &["postgres"]) {
        return Some("the postgres user".into());
    }
    if !ok("python3", &["-c", "import gunicorn, psycopg2"]) {
        return Some("gunicorn, psycopg2 (pip)".into());
    }
    (!ok("runuser", &["--help"])).then(|| "runuser".into())
}

fn culprit() -> Command {
    let mut c = Command::new(tests::culprit());
    if let Some(l) = tests::libtrace() {
        c.env(tests::LIBTRACE_ENV, l);
    }
    c
}

/// A database with a 300 000-row table and its index, in `dir/pgdata`.
fn init_db(dir: &Path, port: u16) {
    let bin = pg_bin().unwrap();
    let sh = |script: &str| {
        let r = tests::run_with_deadline(
            Command::new("sh").arg("-c").arg(script),
            Duration::from_secs(120),
        );
        r.assert_success(script);
    };
    let d = dir.display();
    sh(&format!("chown postgres {d} && chmod 777 {d}"));
    sh(&format!(
        "runuser -u postgres -- {b}/initdb -D {d}/pgdata -A trust -U postgres >/dev/null",
        b = bin.display()
    ));
    sh(&format!(
        "runuser -u postgres -- {b}/pg_ctl -D {d}/pgdata -o '-p {port} -k {d}/pgdata -c listen_addresses=127.0.0.1' -w start >/dev/null && \
         psql -q -h 127.0.0.1 -p {port} -U postgres -c 'CREATE TABLE kv (k int, v int); \
           INSERT INTO kv SELECT g, g % 1000 FROM generate_series(1, 300000) g; \
           CREATE INDEX kv_k ON kv(k); ANALYZE kv;' && \
         runuser -u postgres -- {b}/pg_ctl -D {d}/pgdata -m fast -w stop >/dev/null",
        b = bin.display()
    ));
}

/// Records one run (with the fault or not) and returns `culprit demand --json` and the
/// fault's time.
fn run(fault: bool) -> (Value, Option<i64>) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ports = tests::free_port_range(4);
    init_db(dir, ports + 3);
    // Not below `dir`, which the postgres user owns: a trace goes only where no other
    // user could plant links (issue 27).
    let out = tempfile::tempdir().unwrap();
    let trace = out.path().join("trace");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("demand/three_tier/run.sh");
    let mut c = culprit();
    // Its parts run as root and as postgres: both write the pool.
    c.args(["record", "--shared-writers", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&script)
        .arg(dir)
        .args([ports, ports + 1, ports + 2].map(|p| p.to_string()))
        .args([SECONDS.to_string(), "1".into()]);
    if fault {
        c.env("FAULT_AT", FAULT_AT.to_string());
    }
    let r = tests::run_with_deadline(&mut c, Duration::from_secs(SECONDS as u64 + 90));
    r.assert_success("culprit record (three tiers)");
    let fault_ns = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("fault ")?.trim().parse::<i64>().ok());
    let d = tests::run_with_deadline(
        culprit().arg("demand").arg(&trace).arg("--json"),
        Duration::from_secs(120),
    );
    d.assert_success("culprit demand (three tiers)");
    (serde_json::from_str(&d.stdout).unwrap(), fault_ns)
}

fn alarms(v: &Value) -> Vec<(String, i64)> {
    v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            let exe = p["exe"].as_str().unwrap().to_string();
            p["alarms"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |a| (exe.clone(), a["t_unix_ns"].as_i64().unwrap()))
        })
        .collect()
}

#[test]
#[ignore = "about 70 s; needs nginx, PostgreSQL, gunicorn (tests/demand/setup.sh)"]
fn a_slow_database_raises_alarms_on_the_database_only() {
    if tests::libtrace_or_skip("demand_three_tier").is_none() {
        return;
    }
    if let Some(m) = missing() {
        eprintln!("demand_three_tier: skipped, {m} missing (tests/demand/setup.sh)");
        return;
    }
    let (v, fault) = run(true);
    let fault = fault.expect("the load generator printed the fault's time");
    let tiers: Vec<&str> = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["exe"].as_str().unwrap())
        .collect();
    assert!(tiers.iter().any(|e| e.contains("nginx")), "{tiers:?}");
    assert!(tiers.iter().any(|e| e.contains("python")), "{tiers:?}");
    assert!(tiers.iter().any(|e| e.contains("postgres")), "{tiers:?}");
    let a = alarms(&v);
    assert!(!a.is_empty(), "no alarm after the fault");
    for (exe, _) in &a {
        assert!(exe.contains("postgres"), "alarm on {exe}: {a:?}");
    }
    let first = a.iter().map(|x| x.1).min().unwrap();
    let interval = (v["interval_s"].as_f64().unwrap() * 1e9) as i64;
    assert!(
        first > fault && first <= fault + 3 * interval,
        "first alarm {} s after the fault",
        (first - fault) as f64 * 1e-9
    );
    let (v, _) = run(false);
    let a = alarms(&v);
    assert!(a.is_empty(), "alarms without a fault: {a:?}");
}
