//! `culprit ioshare` — estimate each process's share of a shared file server's load from
//! an IO-sample file (`culprit iosample`), optionally checked against traced runs.

use analyzer::ioshare::series::Metric;
use analyzer::ioshare::truth::{self, ServerAddr, Truth};
use analyzer::ioshare::{self, IoShareOptions, Method};
use anyhow::Context;
use reader::iosample::SampleLog;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `culprit ioshare`.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    culprit ioshare io.cios --server vsftpd                    # table of shares\n  \
    culprit ioshare io.cios --server 812 --json > shares.json\n  \
    culprit ioshare io.cios --server vsftpd --truth trace/ --html shares.html\n\n\
    β is the share of a process's written bytes (wchar by default: write/writev calls to\n\
    files and sockets) that the server's own counter shows; see docs/ioshare.md.")]
pub struct Args {
    /// IO-sample file written by `culprit iosample`.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The server daemon: pid or name (`comm` or executable file name); its children count too.
    #[arg(long, value_name = "PID|NAME")]
    pub server: String,
    /// Estimator(s).
    #[arg(long, default_value = "both", value_parser = Method::parse)]
    pub method: Method,
    /// Counter: wchar, write_bytes, rchar, read_bytes.
    #[arg(long, default_value = "wchar", value_parser = Metric::parse)]
    pub metric: Metric,
    /// Interval of the estimates (a multiple of the sampling interval; default: the sampling interval).
    #[arg(long, value_name = "DUR", value_parser = reader::iosample::parse_duration)]
    pub step: Option<std::time::Duration>,
    /// Regression window (centred on each sample; widened to 2 samples per process).
    #[arg(long, value_name = "DUR", default_value = "1.5s", value_parser = reader::iosample::parse_duration)]
    pub window: std::time::Duration,
    /// Weight of the long-window prior, in rows of data per process (default 0: none; at
    /// most 1000000).
    #[arg(long, value_name = "MU", value_parser = super::outpath::parse_prior)]
    pub prior: Option<f64>,
    /// Long window of the prior (default: 4 × the regression window).
    #[arg(long, value_name = "DUR", value_parser = reader::iosample::parse_duration)]
    pub prior_window: Option<std::time::Duration>,
    /// Choose the window (⅔, 1, 1.5, 2 × --window) and the prior weight, and the segmented
    /// window (2, 4, 8, 16 × --window), by cross-validation on the data (overrides --window
    /// and --prior).
    #[arg(long)]
    pub select: bool,
    /// Give every interval the same weight (by default intervals with outlying residuals
    /// get Huber weights).
    #[arg(long)]
    pub no_robust: bool,
    /// Do not fit a write-back lag.
    #[arg(long)]
    pub no_lag: bool,
    /// Plain sliding windows: do not look for the moments each process's share changes
    /// (by default the regression finds them and fits windows that respect them).
    #[arg(long)]
    pub no_segments: bool,
    /// Shares constant between change points: do not let a segment's share drift linearly
    /// across it (by default a segment drifts where that pays its penalty, so that a share
    /// that changes gradually is one drifting segment rather than a staircase).
    #[arg(long)]
    pub no_drift: bool,
    /// Window of the regression that respects the change points (centred on each sample;
    /// default: 4 × --window, or with --select chosen among 2, 4, 8 and 16 × --window by
    /// cross-validation).
    #[arg(long, value_name = "DUR", value_parser = reader::iosample::parse_duration)]
    pub segment_window: Option<std::time::Duration>,
    /// Regress on the server's counter alone: do not add the change of its backlog (bytes
    /// queued unread in its sockets, recorded by `culprit iosample`) to it.
    #[arg(long)]
    pub no_backlog: bool,
    /// The server's load as what it took in — the bytes it read from its sockets
    /// (recorded by `culprit iosample`) plus the backlog's change — instead of its
    /// counter: `auto` where the clients' IO explains it better, `always` where
    /// recorded, `never`. A server that holds what it read before writing it (nginx
    /// buffers request bodies) needs it.
    #[arg(long, value_name = "WHEN", default_value = "auto", value_parser = ioshare::load::IntakeChoice::parse)]
    pub intake: ioshare::load::IntakeChoice,
    /// How the regression follows each share's course: `search` (change points and
    /// drifting segments, fitted in windows that respect them), `trend` (every share
    /// fitted over the run with penalised jumps and bends: the better with many
    /// processes), `auto` (the trend filter from 8 client processes on).
    #[arg(long, value_name = "HOW", default_value = "auto", value_parser = ioshare::report::CourseChoice::parse)]
    pub course: ioshare::report::CourseChoice,
    /// Penalty of a change point, in multiples of σ²·ln(intervals) (Schwarz: 2; 0.01 to 1000).
    #[arg(long, value_name = "K", default_value_t = 2.0, value_parser = super::outpath::parse_penalty)]
    pub segment_penalty: f64,
    /// Single-variation threshold, as a fraction of the server's mean load per interval (0 to 1).
    #[arg(long, value_name = "F", default_value_t = 0.02, value_parser = super::outpath::parse_fraction)]
    pub threshold: f64,
    /// Candidate clients: `auto` (the processes the sampler saw connected to an address
    /// the server listened on; every process that wrote when none was), `all` (every
    /// process that wrote), or PID,PID,… (those). The others get a share of 0.
    #[arg(long, value_name = "auto|all|PIDS", default_value = "auto", value_parser = ioshare::clients::ClientChoice::parse)]
    pub clients: ioshare::clients::ClientChoice,
    /// Trace directories of the same run (`culprit record`): compare with the true shares.
    #[arg(long, value_name = "DIR", num_args = 1..)]
    pub truth: Vec<PathBuf>,
    /// Server address(es) for --truth: IP, IP:PORT or IP:LO-HI (default: the IPs the
    /// server processes listened on, any port).
    #[arg(long, value_name = "ADDR", value_parser = ServerAddr::parse)]
    pub server_addr: Vec<ServerAddr>,
    /// Window of the whole-window error against the truth.
    #[arg(long, value_name = "DUR", default_value = "60s", value_parser = reader::iosample::parse_duration)]
    pub truth_window: std::time::Duration,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write an HTML page with the plots.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// Runs `culprit ioshare`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let log = SampleLog::open(&args.file)?;
    if let Some(what) = log.tail.describe() {
        eprintln!(
            "culprit ioshare: {}: {what}, {} samples kept",
            args.file.display(),
            log.samples.len()
        );
    }
    let interval = log.meta.interval_ns.max(1);
    let step = args.step.map_or(1, |d| {
        ((d.as_nanos() as u64 + interval / 2) / interval).max(1) as usize
    });
    let opts = IoShareOptions {
        server: args.server.clone(),
        method: args.method,
        metric: args.metric,
        step,
        regression: ioshare::regression::RegressionOptions {
            window: ((args.window.as_nanos() as u64 / interval) as usize).max(4),
            lag: !args.no_lag,
            prior: args.prior.unwrap_or(0.0).max(0.0),
            robust: !args.no_robust,
            prior_window: args
                .prior_window
                .map_or(0, |d| (d.as_nanos() as u64 / interval) as usize),
            ..Default::default()
        },
        select: args.select,
        segments: !args.no_segments,
        drift: !args.no_drift,
        segment_window: args
            .segment_window
            .map(|d| ((d.as_nanos() as u64 / interval) as usize).max(2)),
        backlog: !args.no_backlog,
        intake: args.intake,
        course: args.course,
        clients: args.clients.clone(),
        segment_penalty: args.segment_penalty.max(0.0),
        single: ioshare::single::SingleOptions {
            threshold: args.threshold,
            ..Default::default()
        },
        truth_window_ns: args.truth_window.as_nanos() as u64,
        ..Default::default()
    };
    let truth = if args.truth.is_empty() {
        None
    } else {
        let addrs = if args.server_addr.is_empty() {
            truth::addrs_from_log(&log, &args.server)
        } else {
            args.server_addr.clone()
        };
        if addrs.is_empty() {
            anyhow::bail!(
                "--truth: no server address known: {} has no listening socket of the server processes; give --server-addr",
                args.file.display()
            );
        }
        Some(Truth::load(&args.truth, &addrs).context("--truth")?)
    };
    let report = ioshare::analyze(&log, &opts, truth.as_ref())?;
    if let Some(h) = &args.html {
        super::outpath::write_output(h, ioshare::html::render(&report))
            .with_context(|| format!("{}: cannot write", h.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.to_text());
    }
    Ok(ExitCode::SUCCESS)
}
