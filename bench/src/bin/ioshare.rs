//! Benchmark of `culprit iosample` / `culprit ioshare` (issue 16), side by side with the
//! tool people would use instead.
//!
//! 1. **Cost**: 1 000 idle processes plus the machine's own, sampled by `culprit iosample
//!    --all` at 10 Hz for `--cost-seconds` (its CPU time, user + system of all its threads,
//!    over its wall time, from its own report, and jitter p50/p99) — once per step of the
//!    cost work (every process at every sample; new pids probed between listings; quiet
//!    processes read every 10th sample) —, next to `pidstat -d` (sysstat) over the same
//!    processes at its finest interval, 1 s (CPU time of the pidstat process from
//!    `/proc/[pid]/stat`), both per second and per sample.
//! 2. **Accuracy**: Debian's vsftpd on loopback and N FTP client processes
//!    (`tests/ioshare/workload.py`: local and server writes, shares changing every 6–15 s,
//!    partly correlated rates) recorded by `culprit record` while `culprit iosample`
//!    samples at 10 Hz; `culprit ioshare --truth` gives each estimator's mean absolute error
//!    per process against the traced bytes, per 1 s interval and per 60 s window. The
//!    workload's seed is `1000·K + 31·N` for N clients and `--seed K` (default 0), so
//!    several recordings of each configuration can be made. `--ramp`: the shares drift
//!    linearly from one phase's value to the next instead of changing in steps. `--from
//!    DIR` estimates the recordings kept by an earlier `--keep DIR` again. Each recording
//!    is estimated four times: as `culprit ioshare` does by default, with `--no-backlog`
//!    (the server's counter alone, without the change of its backlog), with `--no-drift`
//!    (shares constant between change points) and with `--no-segments` (the plain sliding
//!    windows), side by side. Every recording passes
//!    the server to the sampler by pid (`server.pid`): another vsftpd on the machine is
//!    not its load. `--server-nice N` starts vsftpd N nice levels below the benchmark: on
//!    a busy machine the server is then descheduled and falls behind its clients (its
//!    backlog grows), as a server does on an overloaded host.
//!
//! ```text
//! cargo build --release -p cli -p tracer-preload
//! 4. **Among busy neighbours** (`--neighbours N`, issue 26; `ioshare_parts/busy.rs`): the
//!    same workload against vsftpd (`--kind ftp`) or nginx WebDAV PUT (`--kind http`, one
//!    process serving every client), sampled with `--all` while N unrelated processes
//!    write (`bench/ioshare/neighbours.py`), estimated as `culprit ioshare` does, with
//!    every process a candidate and told the client pids; `--seeds` lists the recordings;
//!    `--body-buffer SIZE` sets nginx's `client_body_buffer_size` (the request-body bytes
//!    it reads and holds before writing them: what makes its 8-client error larger).
//! 3. **Estimation cost** (`--only estimate`): a synthetic 10-minute run at 10 Hz (6 000
//!    intervals) of 16 processes whose shares change in steps every 8–19 s, and the same
//!    with shares drifting between those values: the change-point search and the windowed
//!    fit timed with drifts, with steps only and with plain windows, with each one's error
//!    against the synthetic truth.
//!
//! cargo run --release -p bench --bin ioshare [-- --only cost|interfaces|accuracy|estimate] [--clients 2,5,8,16] [--duration 60] [--cost-seconds 60] [--seed K] [--ramp] [--server-nice N] [--keep DIR | --from DIR]
//! cargo run --release -p bench --bin ioshare -- --only accuracy --neighbours 24 --kind ftp|http --clients 4,8 --seeds 0,1 [--body-buffer SIZE] [--keep DIR | --from DIR]
//!   (--record-only: record and keep, estimate later with --from; --skip-every: no estimate
//!   with every process a column, the slowest, its cells NaN; IOSHARE_CULPRIT=PATH: the
//!   recordings estimated by another culprit binary, e.g. an older method's, with --from)
//! ```

#[path = "ioshare_parts/busy.rs"]
mod busy;

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn release(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/release")
        .join(name)
}

fn load() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn cpu_ticks(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest: Vec<&str> = s[s.rfind(')')? + 1..].split_whitespace().collect();
    Some(rest.get(11)?.parse::<u64>().ok()? + rest.get(12)?.parse::<u64>().ok()?)
}

struct Reaped(Vec<Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn idle_processes() -> Result<Reaped> {
    let mut idle = Reaped(Vec::new());
    for _ in 0..1000 {
        idle.0.push(
            Command::new("sleep")
                .arg("3600")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("spawning sleep")?,
        );
    }
    Ok(idle)
}

/// The two interfaces that carry the seven counters, per process, over the 1 000 idle
/// processes: `pread` of a kept-open `/proc/[pid]/io` against `TASKSTATS_CMD_GET`
/// (all requests in one `sendto`, replies by `recvmmsg`), CPU time of this thread.
fn interfaces() -> Result<()> {
    use reader::iosample::procfs::IoFile;
    use reader::iosample::sampler::clock_ns;
    use reader::iosample::taskstats::Query;
    let idle = idle_processes()?;
    std::thread::sleep(Duration::from_millis(300));
    let pids: Vec<u32> = idle.0.iter().map(|c| c.id()).collect();
    let files: Vec<IoFile> = pids.iter().filter_map(|&p| IoFile::open(p).ok()).collect();
    let rounds = 50;
    let cpu = || clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) as f64;
    let t0 = cpu();
    for _ in 0..rounds {
        for f in &files {
            let _ = f.read();
        }
    }
    let pread_us = (cpu() - t0) / (rounds * files.len().max(1)) as f64 / 1e3;
    println!("## The interfaces, per process ({} idle processes, {rounds} rounds, thread CPU time; load average {:.1})\n", files.len(), load());
    println!("| interface | CPU per process | counters |");
    println!("|---|---|---|");
    println!("| `pread` of an open `/proc/[pid]/io` (the sampler's) | {pread_us:.2} µs | all seven, exact, whole process |");
    match Query::open() {
        Ok(mut q) => {
            let t0 = cpu();
            let mut got = 0;
            for _ in 0..rounds {
                got = q.get(&pids)?.len();
            }
            let us = (cpu() - t0) / (rounds * pids.len()) as f64 / 1e3;
            println!("| taskstats `TASKSTATS_CMD_GET` ×{} per `sendto`, `recvmmsg` ({got} answers) | {us:.2} µs | per task; `rchar wchar syscr syscw` rounded down to 1024 |", pids.len());
        }
        Err(e) => println!("| taskstats `TASKSTATS_CMD_GET` | unavailable: {e} | |"),
    }
    println!();
    // The server's backlog, per sample: its descriptors listed (by path, as before, and
    // through the directory kept open, as the sampler does), its sockets measured (one
    // inet_diag walk of every TCP socket, as before, and the sampler's lookups of the
    // connections the last dump matched), the attribution — against /proc/net/tcp{,6}.
    use reader::iosample::backlog::{attribute, socket_inodes_in, SockDiag};
    use reader::iosample::backlog_watch::SocketWatch;
    use reader::iosample::procfs::FdDir;
    let (_srv, server, _conns) = backlog_server()?;
    let rounds = 500;
    let per_round = |f: &mut dyn FnMut()| {
        let t0 = cpu();
        for _ in 0..rounds {
            f();
        }
        (cpu() - t0) / rounds as f64 / 1e3
    };
    let by_path_us = per_round(&mut || {
        let _ = inodes_by_path(server);
    });
    let mut dir = FdDir::open(server)?;
    let inodes = socket_inodes_in(&mut dir).unwrap_or_default();
    let kept_us = per_round(&mut || {
        let _ = socket_inodes_in(&mut dir);
    });
    let holders = [(server, inodes)];
    let mut d = SockDiag::open()?;
    let mut v = Vec::new();
    let mut dump_got = 0;
    let dump_us = per_round(&mut || {
        v.clear();
        let _ = d.dump_all(&mut v);
        dump_got = backlog_total(&attribute(&holders, &v));
    });
    let n_sockets = v.len();
    let mut w = SocketWatch::default();
    let mut lookup_got = 0;
    let lookup_us = per_round(&mut || {
        let _ = w.sockets(&mut d, &holders, &mut v);
        lookup_got = backlog_total(&attribute(&holders, &v));
    });
    let text_us = per_round(&mut || {
        let _ = std::fs::read_to_string("/proc/net/tcp");
        let _ = std::fs::read_to_string("/proc/net/tcp6");
    });
    println!("### The server's backlog, per sample (a server holding 16 loopback connections, {n_sockets} TCP sockets in the namespace, {rounds} rounds, thread CPU time)\n");
    println!("| step | method | CPU per sample | at 10 Hz | backlog found |");
    println!("|---|---|---|---|---|");
    println!("| the server's descriptors | `/proc/[pid]/fd` by path, `readlink` of `/proc/[pid]/fd/N` (before) | {by_path_us:.1} µs | {:.3} % of a core | |", by_path_us / 1e3);
    println!("| the server's descriptors | its `/proc/[pid]/fd` kept open, `rewinddir`, `readlinkat` (the sampler's) | {kept_us:.1} µs | {:.3} % of a core | |", kept_us / 1e3);
    println!("| its sockets | one `TCPDIAG_GETSOCK` walk of every TCP socket with `tcp_info` (before) | {dump_us:.1} µs | {:.3} % of a core | {dump_got} bytes (16 × 10 000 expected) |", dump_us / 1e3);
    println!("| its sockets | `SocketWatch`: lookups of the {} sockets the last dump matched (the sampler's; {} dump(s) in {rounds} rounds) | {lookup_us:.1} µs | {:.3} % of a core | {lookup_got} bytes |", w.followed(), w.dumps, lookup_us / 1e3);
    println!("| its sockets | reading `/proc/net/tcp` and `/proc/net/tcp6` (text, no `tcp_info`) | {text_us:.1} µs | {:.3} % of a core | – |", text_us / 1e3);
    println!();
    Ok(())
}

/// The socket inodes of `pid` as the sampler listed them before it kept the directory
/// open: `/proc/PID/fd` listed by path, each link read by its full path.
fn inodes_by_path(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let t = std::fs::read_link(e.path()).ok()?;
            let t = t.to_str()?;
            t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

fn backlog_total(b: &std::collections::HashMap<u32, reader::iosample::backlog::Backlog>) -> u64 {
    b.values().map(|b| b.received + b.unsent).sum()
}

/// A server for the backlog rows: a process holding 16 accepted loopback connections
/// with 10 KB each unread (the sampler lists its descriptors and dumps the TCP sockets at
/// every sample). Not this process: the idle `sleep`s are its children, and a server's
/// children are servers too. Returns it (killed when dropped), its pid and the clients'
/// ends.
fn backlog_server() -> Result<(Reaped, u32, Vec<std::net::TcpStream>)> {
    let mut srv = Command::new("python3")
        .args([
            "-c",
            "import socket, sys, time\n\
             l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(16)\n\
             print(l.getsockname()[1], flush=True)\n\
             c = [l.accept()[0] for _ in range(16)]\n\
             sys.stdin.read()\n",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("spawning python3")?;
    let port: u16 = {
        use std::io::BufRead;
        let mut l = String::new();
        std::io::BufReader::new(srv.stdout.take().context("server stdout")?).read_line(&mut l)?;
        l.trim().parse().context("server port")?
    };
    let mut conns = Vec::new();
    for _ in 0..16 {
        use std::io::Write;
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port))?;
        c.write_all(&[0u8; 10_000])?;
        conns.push(c);
    }
    std::thread::sleep(Duration::from_millis(200));
    let pid = srv.id();
    Ok((Reaped(vec![srv]), pid, conns))
}

fn cost(seconds: u64) -> Result<()> {
    let culprit = release("culprit");
    let _idle = idle_processes()?; // killed and reaped when dropped
    let n_procs = std::fs::read_dir("/proc")?
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        })
        .count();
    println!("## Cost: {n_procs} processes (1 000 idle `sleep` + the machine's), {seconds} s per row (load average {:.1} at the start)\n", load());
    println!("| tool | interval | CPU % of a core | CPU per sample | reads per sample | jitter p50 / p99 | output |");
    println!("|---|---|---|---|---|---|---|");
    // Each step of the cost work, cumulatively: every process read at every sample with
    // /proc listed whenever a pid was allocated (as before), then new pids probed between
    // listings, then quiet processes read every 10th sample (the default).
    let (_srv, server_pid, _conns) = backlog_server()?;
    let me = server_pid.to_string();
    let variants: [(&str, Vec<&str>); 5] = [
        (
            "every process every sample, /proc listed each sample",
            vec!["--quiet-every", "1", "--list-every", "1"],
        ),
        (
            "+ new pids probed, /proc listed every 50",
            vec!["--quiet-every", "1"],
        ),
        ("+ quiet processes every 10th sample (default)", vec![]),
        (
            "default, with a server holding 16 loopback connections: its backlog measured at every sample",
            vec!["--server", &me],
        ),
        (
            "the same without the backlog",
            vec!["--server", &me, "--no-backlog"],
        ),
    ];
    for (what, extra) in variants {
        let tmp = tempfile::tempdir()?;
        let out = tmp.path().join("io.cios");
        let c = Command::new(&culprit)
            .args(["iosample", "--all", "--interval", "100ms", "--json", "-o"])
            .arg(&out)
            .args(&extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        std::thread::sleep(Duration::from_secs(seconds));
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
        let o = c.wait_with_output()?;
        let r: serde_json::Value = serde_json::from_slice(&o.stdout)
            .with_context(|| String::from_utf8_lossy(&o.stderr).into_owned())?;
        let cpu = r["cpu_ns"].as_f64().unwrap_or(0.0);
        let wall = r["wall_ns"].as_f64().unwrap_or(1.0);
        let samples = r["samples"].as_f64().unwrap_or(1.0).max(1.0);
        let size = std::fs::metadata(&out)?.len();
        println!(
            "| `culprit iosample --all {}` ({what}) | 100 ms | **{:.2} %** | {:.2} ms | {:.0} | {:.0} / {:.0} µs | {:.1} KB/s |",
            extra.join(" "),
            100.0 * cpu / wall,
            cpu / samples / 1e6,
            r["reads"].as_f64().unwrap_or(0.0) / samples,
            r["jitter_p50_ns"].as_f64().unwrap_or(0.0) / 1e3,
            r["jitter_p99_ns"].as_f64().unwrap_or(0.0) / 1e3,
            size as f64 / (wall / 1e9) / 1e3
        );
    }
    if Path::new("/usr/bin/pidstat").exists() {
        let p = Command::new("pidstat")
            .args(["-d", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let t0 = Instant::now();
        let c0 = cpu_ticks(p.id()).unwrap_or(0);
        std::thread::sleep(Duration::from_secs(seconds));
        let c1 = cpu_ticks(p.id()).unwrap_or(0);
        let wall = t0.elapsed().as_secs_f64();
        drop(Reaped(vec![p])); // killed and reaped
                               // SAFETY: sysconf reads a constant.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let cpu_s = (c1 - c0) as f64 / hz;
        println!(
            "| `pidstat -d 1` (sysstat) | 1 s (its minimum) | {:.2} % | {:.2} ms | all | – | text |",
            100.0 * cpu_s / wall,
            1e3 * cpu_s / wall
        );
    } else {
        println!("| `pidstat -d` | – | not installed (apt-get install sysstat) | | | | |");
    }
    println!();
    Ok(())
}

/// Starts vsftpd in `dir`, at `nice` (0: the benchmark's own priority).
fn vsftpd(dir: &Path, nice: i32) -> Result<(Reaped, u16)> {
    use std::os::unix::fs::PermissionsExt;
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("up"))?;
    std::fs::create_dir_all(dir.join("empty"))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o555))?;
    std::fs::set_permissions(root.join("up"), std::fs::Permissions::from_mode(0o777))?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let conf = dir.join("vsftpd.conf");
    std::fs::write(
        &conf,
        format!(
            "listen=YES\nlisten_address=127.0.0.1\nlisten_port={port}\nanonymous_enable=YES\n\
             anon_root={}\nwrite_enable=YES\nanon_upload_enable=YES\nno_anon_password=YES\n\
             local_enable=NO\nsecure_chroot_dir={}\npasv_enable=YES\npasv_address=127.0.0.1\n\
             seccomp_sandbox=NO\nbackground=NO\nanon_umask=022\nconnect_from_port_20=NO\n\
             xferlog_enable=NO\nmax_clients=64\nmax_per_ip=64\n",
            root.display(),
            dir.join("empty").display()
        ),
    )?;
    let mut cmd = Command::new("/usr/sbin/vsftpd");
    cmd.arg(&conf);
    if nice != 0 {
        use std::os::unix::process::CommandExt;
        // SAFETY: setpriority(2) on the child itself, between fork and exec; it touches
        // no memory of the parent.
        unsafe {
            cmd.pre_exec(move || {
                libc::setpriority(
                    libc::PRIO_PROCESS,
                    0,
                    libc::getpriority(libc::PRIO_PROCESS, 0) + nice,
                );
                Ok(())
            })
        };
    }
    let c = cmd.spawn()?;
    let g = Reaped(vec![c]);
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok((g, port));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("vsftpd did not start")
}

/// One recording of the accuracy workload with `n` clients in `dir` (kept there when
/// `kept`): the sample file `io.cios`, the trace `trace/`, the clients' lines `out.txt`.
#[allow(clippy::too_many_arguments)]
fn record(
    n: usize,
    duration: u64,
    seed: u64,
    ramp: bool,
    server_nice: i32,
    dir: &Path,
    kept: bool,
) -> Result<()> {
    let culprit = release("culprit");
    let workload = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/ioshare/workload.py");
    let (server, port) = vsftpd(dir, server_nice)?;
    // The server by pid, in the sampler and in the estimate: another vsftpd on the
    // machine (the end-to-end test, run at the same time) must not count as its load.
    let server_pid = server.0[0].id().to_string();
    std::fs::write(dir.join("server.pid"), &server_pid)?;
    std::fs::create_dir_all(dir.join("local"))?;
    let rate = (6e6 / n as f64).clamp(3e5, 2e6);
    let o = Command::new(&culprit)
        .args([
            "iosample",
            "--interval",
            "100ms",
            "--server",
            &server_pid,
            "-o",
        ])
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
            &duration.to_string(),
            "--seed",
            &(seed * 1000 + n as u64 * 31).to_string(),
        ])
        .args(["--rate", &format!("{rate}"), "--dir"])
        .arg(dir.join("local"))
        .args(ramp.then_some("--ramp"))
        .output()?;
    if !o.status.success() {
        bail!("{n} clients: {}", String::from_utf8_lossy(&o.stderr));
    }
    if kept {
        // The clients' lines kept; the uploaded and local files (hundreds of MB) not.
        std::fs::write(dir.join("out.txt"), &o.stdout)?;
        let _ = std::fs::remove_dir_all(dir.join("root").join("up"));
        let _ = std::fs::remove_dir_all(dir.join("local"));
    }
    Ok(())
}

/// `culprit ioshare --truth` on the recording in `dir`, with `extra` options.
fn estimate(dir: &Path, extra: &[&str]) -> Result<serde_json::Value> {
    // Recordings made before `server.pid` was kept: the server by name.
    let server =
        std::fs::read_to_string(dir.join("server.pid")).unwrap_or_else(|_| "vsftpd".into());
    // `IOSHARE_CULPRIT=PATH`: another build estimates (an older method on the same
    // recordings, with `--from`).
    let culprit =
        std::env::var_os("IOSHARE_CULPRIT").map_or_else(|| release("culprit"), PathBuf::from);
    let r = Command::new(culprit)
        .arg("ioshare")
        .arg(dir.join("io.cios"))
        .args([
            "--server",
            server.trim(),
            "--step",
            "1s",
            "--json",
            "--truth",
        ])
        .arg(dir.join("trace"))
        .args(extra)
        .output()?;
    if !r.status.success() {
        bail!(
            "ioshare {}: {}",
            dir.display(),
            String::from_utf8_lossy(&r.stderr)
        );
    }
    Ok(serde_json::from_slice(&r.stdout)?)
}

/// `--from DIR`: the recordings DIR/nN of an earlier `--keep DIR` are estimated again
/// instead of recorded.
#[allow(clippy::too_many_arguments)]
fn accuracy(
    clients: &[usize],
    duration: u64,
    seed: u64,
    ramp: bool,
    server_nice: i32,
    keep: Option<&Path>,
    from: Option<&Path>,
) -> Result<()> {
    match from {
        Some(f) => println!("## Accuracy: the recordings of {}, estimated again\n", f.display()),
        None => println!(
            "## Accuracy: vsftpd on loopback, {duration} s per configuration, sampled at 10 Hz, seed {seed}{}{}\n",
            if ramp { ", drifting shares (--ramp)" } else { "" },
            if server_nice != 0 { format!(", vsftpd at nice +{server_nice} (--server-nice)") } else { String::new() }
        ),
    }
    println!("Mean absolute error of β against the trace, in percentage points (mean over the clients / worst client); `win` = per 60 s window. Regression: the default (windows that respect the change points and drifts found, the server's backlog added where measured); no backlog: `--no-backlog`; steps only: `--no-drift` (shares constant between change points); plain windows: `--no-segments`.\n");
    println!("| clients | regression 1 s | no backlog 1 s | steps only 1 s | plain windows 1 s | single 1 s | least squares 1 s | regression win | no backlog win | steps only win | plain windows win | single win | least squares win | change points | drifting segments | collinear windows | backlog max | jitter p99 |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &n in clients {
        let tmp = tempfile::tempdir()?;
        // `--keep DIR`: the sample file, the trace and the clients' lines stay in DIR/nN.
        let dir = match (from, keep) {
            (Some(f), _) => f.join(format!("n{n}")),
            (None, Some(k)) => {
                let d = k.join(format!("n{n}"));
                let _ = std::fs::remove_dir_all(&d);
                std::fs::create_dir_all(&d)?;
                d
            }
            (None, None) => tmp.path().to_path_buf(),
        };
        if from.is_none() {
            record(n, duration, seed, ramp, server_nice, &dir, keep.is_some())?;
        }
        let j = estimate(&dir, &[])?;
        let plain = estimate(&dir, &["--no-segments"])?;
        let nob = estimate(&dir, &["--no-backlog"])?;
        let steps = estimate(&dir, &["--no-drift"])?;
        let a = &j["accuracy"];
        let b = &plain["accuracy"];
        let c = &nob["accuracy"];
        let d = &steps["accuracy"];
        let st = |m: &str, w: &str| {
            format!(
                "{:.1} / {:.1}",
                d["regression"][m].as_f64().unwrap_or(f64::NAN),
                d["regression"][w].as_f64().unwrap_or(f64::NAN)
            )
        };
        let h = |m: &str, w: &str| {
            format!(
                "{:.1} / {:.1}",
                c["regression"][m].as_f64().unwrap_or(f64::NAN),
                c["regression"][w].as_f64().unwrap_or(f64::NAN)
            )
        };
        let backlog = &j["server"]["backlog"];
        let backlog = if backlog["measured"].as_bool() == Some(true) {
            format!(
                "{:.2} MB",
                backlog["max_bytes"].as_f64().unwrap_or(0.0) / 1e6
            )
        } else {
            "not measured".to_string()
        };
        let f = |k: &str, m: &str, w: &str| {
            format!(
                "{:.1} / {:.1}",
                a[k][m].as_f64().unwrap_or(f64::NAN),
                a[k][w].as_f64().unwrap_or(f64::NAN)
            )
        };
        let g = |m: &str, w: &str| {
            format!(
                "{:.1} / {:.1}",
                b["regression"][m].as_f64().unwrap_or(f64::NAN),
                b["regression"][w].as_f64().unwrap_or(f64::NAN)
            )
        };
        let count = |k: &str| -> usize {
            j["processes"].as_array().map_or(0, |v| {
                v.iter()
                    .map(|p| p[k].as_array().map_or(0, |c| c.len()))
                    .sum()
            })
        };
        let (cps, drifting) = (count("change_points"), count("drifting"));
        println!(
            "| {n} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {cps} | {drifting} | {} | {backlog} | {:.1} ms |",
            f("regression", "mean_mae_points", "max_mae_points"),
            h("mean_mae_points", "max_mae_points"),
            st("mean_mae_points", "max_mae_points"),
            g("mean_mae_points", "max_mae_points"),
            f("single", "mean_mae_points", "max_mae_points"),
            f("least_squares", "mean_mae_points", "max_mae_points"),
            f("regression", "mean_window_points", "max_window_points"),
            h("mean_window_points", "max_window_points"),
            st("mean_window_points", "max_window_points"),
            g("mean_window_points", "max_window_points"),
            f("single", "mean_window_points", "max_window_points"),
            f("least_squares", "mean_window_points", "max_window_points"),
            j["collinearity"].as_array().map_or(0, |v| v.len()),
            j["jitter"]["p99_ns"].as_f64().unwrap_or(0.0) / 1e6,
        );
    }
    println!();
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let only = get("--only");
    let duration: u64 = get("--duration").map_or(Ok(60), |s| s.parse())?;
    let clients: Vec<usize> = get("--clients")
        .unwrap_or_else(|| "2,5,8,16".into())
        .split(',')
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    if !release("culprit").exists() {
        bail!("build first: cargo build --release -p cli -p tracer-preload");
    }
    let cost_seconds: u64 = get("--cost-seconds").map_or(Ok(60), |s| s.parse())?;
    if only.as_deref().is_none_or(|o| o == "cost") {
        cost(cost_seconds)?;
    }
    if only
        .as_deref()
        .is_none_or(|o| o == "cost" || o == "interfaces")
    {
        interfaces()?;
    }
    if only.as_deref().is_none_or(|o| o == "estimate") {
        estimation_cost();
    }
    if let (Some(nb), true) = (
        get("--neighbours"),
        only.as_deref().is_none_or(|o| o == "accuracy"),
    ) {
        let cfg = busy::Config {
            kind: busy::Kind::parse(&get("--kind").unwrap_or_else(|| "ftp".into()))?,
            neighbours: nb.parse()?,
            duration,
            ramp: args.iter().any(|a| a == "--ramp"),
            body_buffer: get("--body-buffer"),
            record_only: args.iter().any(|a| a == "--record-only"),
            skip_every: args.iter().any(|a| a == "--skip-every"),
        };
        let seeds: Vec<u64> = get("--seeds")
            .or_else(|| get("--seed"))
            .unwrap_or_else(|| "0".into())
            .split(',')
            .map(|s| s.parse())
            .collect::<Result<_, _>>()?;
        return busy::accuracy(
            &cfg,
            &clients,
            &seeds,
            get("--keep").as_deref().map(Path::new),
            get("--from").as_deref().map(Path::new),
        );
    }
    if only.as_deref().is_none_or(|o| o == "accuracy") {
        let seed: u64 = get("--seed").map_or(Ok(0), |s| s.parse())?;
        accuracy(
            &clients,
            duration,
            seed,
            args.iter().any(|a| a == "--ramp"),
            get("--server-nice").map_or(Ok(0), |s| s.parse())?,
            get("--keep").as_deref().map(Path::new),
            get("--from").as_deref().map(Path::new),
        )?;
    }
    Ok(())
}

/// `--only estimate`: the change-point search and the segmented windows on a synthetic
/// 10-minute run of 16 processes, timed, with their error against the synthetic truth.
fn estimation_cost() {
    use analyzer::ioshare::regression::{self, RegressionOptions};
    use analyzer::ioshare::segments::{self, SegmentOptions};
    use analyzer::ioshare::series::{Column, Series};
    use analyzer::ioshare::trend;
    let (p, n) = (16usize, 6000usize);
    // xorshift: the same series every run.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rng = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let levels = [0.1, 0.9, 0.4, 0.0, 0.7];
    let steps = |i: usize, t: usize| levels[(t / (80 + 7 * i)) % levels.len()];
    let drifts = |i: usize, t: usize| {
        let period = 80 + 7 * i;
        let (k, f) = (t / period, (t % period) as f64 / period as f64);
        let (a, b) = (levels[k % levels.len()], levels[(k + 1) % levels.len()]);
        a + (b - a) * f
    };
    println!("## Estimation cost: a synthetic 10-minute run (6 000 intervals) of 16 processes\n");
    println!("| shares | estimate | search | windows | change points | drifting segments | MAE (points) |");
    println!("|---|---|---|---|---|---|---|");
    for (label, beta) in [
        ("in steps", &steps as &dyn Fn(usize, usize) -> f64),
        ("drifting", &drifts),
    ] {
        let cols: Vec<Column> = (0..p)
            .map(|i| Column {
                pid: i as u32,
                exe: String::new(),
                comm: String::new(),
                x: (0..n)
                    .map(|_| {
                        if rng() < 0.75 {
                            1e6 * (0.2 + rng())
                        } else {
                            0.0
                        }
                    })
                    .collect(),
            })
            .collect();
        let y: Vec<f64> = (0..n)
            .map(|t| {
                (0..p).map(|i| beta(i, t) * cols[i].x[t]).sum::<f64>() + 0.05e6 * (rng() - 0.5)
            })
            .collect();
        let s = Series {
            t_end: (1..=n as u64).map(|t| t * 100_000_000).collect(),
            t_start: (0..n as u64).map(|t| t * 100_000_000).collect(),
            y,
            columns: cols,
            server: Vec::new(),
            small_bytes: 0.0,
            backlog: None,
            backlog_max: 0.0,
            backlog_added: false,
            intake: None,
            intake_closes: Vec::new(),
            intake_used: false,
            unsure: vec![false; n],
        };
        // As `culprit ioshare` sets them at 10 Hz with 16 processes: windows of 2 rows
        // per unknown.
        let o = RegressionOptions {
            window: 2 * (p + 1),
            ..Default::default()
        };
        let t0 = Instant::now();
        let (plain, _) = regression::estimate(&s, &o);
        let plain_s = t0.elapsed().as_secs_f64();
        let mae = |e: &analyzer::ioshare::Estimate| {
            let (mut sum, mut k) = (0.0, 0usize);
            for c in 0..p {
                for t in 0..n {
                    if let (Some(b), true) = (e.beta[c][t], s.columns[c].x[t] > 0.0) {
                        sum += (b - beta(c, t)).abs();
                        k += 1;
                    }
                }
            }
            100.0 * sum / k.max(1) as f64
        };
        println!(
            "| {label} | plain windows | – | {plain_s:.1} s | – | – | {:.2} |",
            mae(&plain)
        );
        let r: Vec<f64> = (0..n)
            .map(|t| s.y[t] - (0..p).map(|c| plain.explained(&s, c, t)).sum::<f64>())
            .collect();
        let (w, sigma2) = segments::huber_weights(&r);
        for drift in [false, true] {
            let so = SegmentOptions {
                min_len: 10,
                penalty: 2.0,
                window: 4 * 15,
                block: 40 * o.window,
                drift,
            };
            let t0 = Instant::now();
            let pieces = segments::pieces(&s, &w, sigma2, &so);
            let search = t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            let e = segments::estimate(&s, &plain, &pieces, &so);
            let fit = t1.elapsed().as_secs_f64();
            println!(
                "| {label} | {} | {search:.1} s | {fit:.1} s | {} | {} | {:.2} |",
                if drift {
                    "search"
                } else {
                    "search, steps only"
                },
                pieces.change_points.iter().map(Vec::len).sum::<usize>(),
                pieces.drifting.iter().flatten().filter(|d| **d).count(),
                mae(&e)
            );
        }
        // The trend filter (the default from 8 processes), its noise scale as
        // `culprit ioshare` takes it: the robust spread of plain windows' residuals.
        let mut abs: Vec<f64> = r.iter().map(|v| v.abs()).collect();
        abs.sort_by(f64::total_cmp);
        let sigma = 1.4826 * abs[abs.len() / 2];
        let t0 = Instant::now();
        let tr = trend::fit(
            &s,
            &trend::TrendOptions {
                sigma,
                ..Default::default()
            },
        );
        let fit = t0.elapsed().as_secs_f64();
        if let Some(tr) = tr {
            let mut e = plain.clone();
            for (c, b) in tr.beta.iter().enumerate() {
                for (t, &v) in b.iter().enumerate() {
                    e.beta[c][t] = Some(v);
                }
            }
            println!(
                "| {label} | trend filter ({} ADMM iterations, last round) | – | {fit:.1} s | – | – | {:.2} |",
                tr.iterations,
                mae(&e)
            );
        }
    }
    println!();
}
