//! `culprit iosample` — sample per-process IO counters (`/proc/[pid]/io`, open descriptors,
//! `/proc/diskstats`) on absolute deadlines into a file for `culprit ioshare`.

use anyhow::Context;
use reader::iosample::{self, SamplerOptions, Selection};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

/// Arguments of `culprit iosample`.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    culprit iosample -o io.cios --all --server vsftpd          # every process, until Ctrl-C\n  \
    culprit iosample -o io.cios --pids 1200,1201 --server nfsd\n  \
    culprit iosample -o io.cios --server vsftpd -- ./jobs.sh   # a command's process tree\n\n\
    Exited processes keep their exact final counters through taskstats exit notifications\n\
    (needs CAP_NET_ADMIN; without it their last sample is kept, and a note says so).\n\
    The file is documented in reader::iosample::format; `culprit ioshare FILE` analyses it.")]
pub struct Args {
    /// Output file.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Time between samples (ns, us, ms, s, m).
    #[arg(long, value_name = "DUR", default_value = "100ms", value_parser = iosample::parse_duration)]
    pub interval: std::time::Duration,
    /// Sample these processes (comma-separated) and their descendants.
    #[arg(
        long,
        value_name = "PID,…",
        value_delimiter = ',',
        conflicts_with = "all"
    )]
    pub pids: Vec<u32>,
    /// Sample every process of the machine.
    #[arg(long)]
    pub all: bool,
    /// The file server daemon(s), by pid or by name (repeatable); sampled with their children.
    #[arg(long, value_name = "PID|NAME")]
    pub server: Vec<String>,
    /// List open descriptors every N samples (0: never).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub fd_every: u64,
    /// Read a process whose counters did not move over N samples (10 × N once they moved
    /// during the run) only every N samples (staggered; a late change is spread over the
    /// intervals it may belong to, see the file's SPAN records); servers are read at every
    /// sample. 1: every process every time.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub quiet_every: u64,
    /// List all of /proc at least every N samples (in between, the pids allocated since the
    /// previous sample are probed one by one).
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub list_every: u64,
    /// Do not use taskstats exit notifications.
    #[arg(long)]
    pub no_taskstats: bool,
    /// Keep the normal scheduling policy (by default the sampling thread asks for
    /// SCHED_FIFO priority 1, where permitted, to keep its deadlines on a loaded machine).
    #[arg(long)]
    pub no_realtime: bool,
    /// Do not measure the server processes' backlog (bytes queued unread in their TCP
    /// sockets, by NETLINK_SOCK_DIAG, at every sample; `culprit ioshare` adds its change
    /// to the server's counter).
    #[arg(long)]
    pub no_backlog: bool,
    /// Print the run's summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Command to run and sample (with its whole process tree; with --all, every process)
    /// until it exits.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// Runs `culprit iosample`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !args.all && args.pids.is_empty() && args.command.is_empty() && args.server.is_empty() {
        anyhow::bail!("nothing to sample: give --all, --pids, --server or -- CMD");
    }
    for p in &args.pids {
        if !std::path::Path::new(&format!("/proc/{p}")).exists() {
            anyhow::bail!("--pids: no process {p}");
        }
    }
    reader::signals::install(&[libc::SIGINT, libc::SIGTERM])
        .context("installing signal handlers")?;
    let mut child = None;
    let mut selection_text = if args.all {
        "all".to_string()
    } else {
        format!("pids {:?}", args.pids)
    };
    // `-- CMD` runs the command and samples until it exits: its process tree, or with
    // `--all` every process (a workload among its neighbours).
    let mut pids = args.pids.clone();
    if let Some((cmd, rest)) = args.command.split_first() {
        let c = std::process::Command::new(cmd)
            .args(rest)
            .spawn()
            .with_context(|| format!("cannot run {}", cmd.to_string_lossy()))?;
        pids.push(c.id());
        let what = format!(
            "command {}",
            args.command
                .iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ")
        );
        selection_text = if args.all {
            format!("all, until {what} exits")
        } else {
            what
        };
        child = Some(c);
    }
    let selection = if args.all {
        Selection::All
    } else {
        Selection::Pids(pids)
    };
    if !args.server.is_empty() {
        selection_text.push_str(&format!(" server {}", args.server.join(",")));
    }
    let opts = SamplerOptions {
        interval: args.interval,
        selection,
        servers: args.server.clone(),
        fd_every: args.fd_every,
        taskstats: !args.no_taskstats,
        selection_text,
        realtime: !args.no_realtime,
        quiet_every: args.quiet_every,
        list_every: args.list_every,
        backlog: !args.no_backlog,
    };
    let mut status = None;
    let report =
        iosample::run(
            &args.output,
            &opts,
            reader::signals::stop_flag(),
            || match &mut child {
                Some(c) => {
                    if status.is_none() {
                        status = c.try_wait().ok().flatten();
                    }
                    status.is_some()
                }
                None => false,
            },
        )?;
    if let Some(c) = &mut child {
        if status.is_none() {
            // Stopped by a signal: pass it on, then reap.
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            status = c.wait().ok();
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    eprintln!(
        "culprit iosample: {} samples of {} processes every {:?} → {}; jitter p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs; {} missed; exits: {} taskstats, {} last sample; taskstats {}; server backlog {} (max {:.1} MB); CPU {:.2} % of a core",
        report.samples,
        report.processes,
        args.interval,
        args.output.display(),
        report.jitter_p50_ns as f64 / 1e3,
        report.jitter_p99_ns as f64 / 1e3,
        report.jitter_max_ns as f64 / 1e3,
        report.missed,
        report.exits_taskstats,
        report.exits_last_sample,
        report.taskstats,
        report.backlog,
        report.backlog_max as f64 / 1e6,
        100.0 * report.cpu_ns as f64 / report.wall_ns.max(1) as f64,
    );
    if !report.denied.is_empty() {
        eprintln!(
            "culprit iosample: permission denied on the counters of {} process(es) (e.g. pid {}): another user's processes need root or CAP_SYS_PTRACE",
            report.denied.len(),
            report.denied[0]
        );
    }
    let _ = reader::signals::stop_flag().load(Ordering::Relaxed);
    Ok(match status.and_then(|s| s.code()) {
        Some(c) => ExitCode::from(c.clamp(0, 255) as u8),
        None => ExitCode::SUCCESS,
    })
}
