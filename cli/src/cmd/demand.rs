//! `culprit demand`: service demand per process and the residual control chart (003).

use analyzer::decode::TraceSet;
use analyzer::demand::{self, estimate::Estimator, Options, ServiceMode, Train};
use anyhow::{bail, Context};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `culprit demand`.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  \
    culprit demand run1\n  \
    culprit demand run1 --interval 2s --train 30s --html demand.html\n  \
    culprit demand faulty --baseline normal1 --json | jq '.processes[].alarms'\n  \
    culprit demand live-trace --follow\n\n\
    For each process that answers requests: the busy time per interval (requests in the\n\
    system, +1 on a request received, -1 on its reply, -1 on a request sent to another\n\
    process, +1 on its reply; busy while >= 1), the requests completed per request type\n\
    (by default found from what serving them involved: functions, downstream calls, sizes),\n\
    and the demand of each type (least squares, >= 0, regularized toward each request's own\n\
    busy time: --estimator nnls for the plain fit). Trained on the first third of the run (or\n\
    --train, or a --baseline run); afterwards an alarm is raised when the residual exceeds\n\
    3 sigma on 3 consecutive intervals. CPU time is shown when the reader sampled it\n\
    (cpu.tsv in the trace directory): CPU per request type, a CPU chart beside the busy\n\
    one, and each alarm told slower (more CPU) from waiting; waiting for a CPU (starved)\n\
    is listed apart.")]
pub struct Args {
    /// Trace directories of the run to examine.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Interval length: `1s` (default), `500ms`, `2` (seconds).
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    pub interval: String,
    /// Training window: a fraction of the run (`1/3`, the default, or `0.25`) or its
    /// first seconds (`30s`). With --follow the default is the first 10 intervals. The
    /// default window is widened (up to 2/3 of the run) while the request types' counts
    /// in it are too collinear to tell their demands apart; a window given here is not.
    #[arg(long, value_name = "PART")]
    pub train: Option<String>,
    /// Train on a separate normal run instead (its trace directories); every interval of
    /// the examined run is then monitored. Processes are matched by executable.
    #[arg(long, value_name = "DIR", num_args = 1..)]
    pub baseline: Vec<PathBuf>,
    /// A learned model (`culprit learn`): services are then the classes of the handler
    /// units that processed the requests, unless --services says otherwise.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<PathBuf>,
    /// What a service (request type) is: `auto` (the default without a model: types
    /// found per program from what serving each request involved — the functions run, the
    /// downstream calls and to whom, the sizes of request and reply), `model` (the
    /// handler-unit class in --model; the default with a model), `port` (the listening
    /// port or Unix socket path) or `conn` (the port and the code that set up the listener).
    #[arg(long, value_name = "MODE")]
    pub services: Option<String>,
    /// `prior` (default: least squares regularized toward each request's own measured
    /// busy time) or `nnls` (plain non-negative least squares, as the paper).
    #[arg(long, value_name = "NAME", default_value = "prior")]
    pub estimator: String,
    /// Re-estimate demands over windows of N intervals (default: the training length).
    #[arg(long, value_name = "N")]
    pub window: Option<usize>,
    /// Print JSON: {"processes": [{"pid", "host", "exe", "services": [{"id", "requests",
    /// "demand_s"}], "sigma_s", "alarms": [{"t_unix_ns", "residual_s", "limit_s"}]}]}.
    #[arg(long)]
    pub json: bool,
    /// Also write an HTML page: per process, demand estimates over time and the residual
    /// with its ±3σ limits, alarms marked.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Read the directories while they are written; print each alarm when its third
    /// violating interval is on disk (one line each; JSON lines with --json); stop when
    /// the recording ends or on Ctrl-C.
    #[arg(long)]
    pub follow: bool,
    /// With --follow: --keep-around (after each alarm's third violating interval) and
    /// --snapshots, as `culprit watch` takes them.
    #[command(flatten)]
    pub around: super::aroundsnap::AroundArgs,
}

/// Parses `1s`, `250ms`, `2.5` (seconds) into ns.
fn duration_ns(s: &str) -> anyhow::Result<i64> {
    let t = s.trim();
    let (num, mult) = if let Some(v) = t.strip_suffix("ms") {
        (v, 1e6)
    } else if let Some(v) = t.strip_suffix("us") {
        (v, 1e3)
    } else if let Some(v) = t.strip_suffix('s') {
        (v, 1e9)
    } else if let Some(v) = t.strip_suffix('m') {
        (v, 60e9)
    } else {
        (t, 1e9)
    };
    let v: f64 = num
        .trim()
        .parse()
        .with_context(|| format!("not a duration: {s:?} (try 1s, 500ms)"))?;
    let ns = v * mult;
    if !(ns.is_finite() && ns >= 1e6) {
        bail!("interval {s:?} is too short or not a number: at least 1ms");
    }
    if ns > reader::iosample::MAX_DURATION_S * 1e9 {
        bail!("interval {s:?} is too long: at most a year");
    }
    Ok(ns as i64)
}

fn train(s: &str) -> anyhow::Result<Train> {
    let t = s.trim();
    if t.ends_with('s') {
        return Ok(Train::Seconds(duration_ns(t)? as f64 * 1e-9));
    }
    let f = match t.split_once('/') {
        Some((a, b)) => {
            let a: f64 = a
                .trim()
                .parse()
                .with_context(|| format!("bad --train {s:?}"))?;
            let b: f64 = b
                .trim()
                .parse()
                .with_context(|| format!("bad --train {s:?}"))?;
            a / b
        }
        None => t
            .parse()
            .with_context(|| format!("bad --train {s:?} (try 1/3, 0.25, 30s)"))?,
    };
    if !(f > 0.0 && f < 1.0) {
        bail!("--train {s:?}: a fraction must be between 0 and 1 (exclusive)");
    }
    Ok(Train::Fraction(f))
}

/// Runs `culprit demand`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut opts = Options {
        interval_ns: duration_ns(&args.interval)?,
        services: match args.services.as_deref() {
            None if args.model.is_some() => ServiceMode::Model,
            None | Some("auto") => ServiceMode::Auto,
            Some("port") => ServiceMode::Port,
            Some("conn") => ServiceMode::Conn,
            Some("model") if args.model.is_some() => ServiceMode::Model,
            Some("model") => bail!("--services model needs --model FILE"),
            Some(o) => bail!("--services {o:?}: expected auto, model, port or conn"),
        },
        model: match &args.model {
            Some(m) => Some(std::sync::Arc::new(analyzer::model::Model::load(m)?)),
            None => None,
        },
        estimator: match args.estimator.as_str() {
            "prior" => Estimator::Prior,
            "nnls" => Estimator::Nnls,
            o => bail!("--estimator {o:?}: expected prior or nnls"),
        },
        window: args.window.unwrap_or(0),
        ..Default::default()
    };
    if let Some(t) = &args.train {
        if !args.baseline.is_empty() {
            bail!("--train and --baseline exclude each other");
        }
        opts.train = train(t)?;
        opts.widen = false;
    }
    if !args.baseline.is_empty() {
        opts.train = Train::Baseline(TraceSet::open(&args.baseline)?);
    } else if args.follow && args.train.is_none() {
        // The run's length is not known yet: a fixed window, not a share of it.
        opts.train = Train::Seconds(10.0 * opts.interval_ns as f64 * 1e-9);
        opts.widen = false;
    }
    if !args.follow && (args.around.keep_around.is_some() || args.around.snapshots.is_some()) {
        bail!("--keep-around and --snapshots go with --follow");
    }
    let report = if args.follow {
        let stop = reader::signals::stop_flag();
        reader::signals::install(&[libc::SIGINT, libc::SIGTERM])
            .context("installing signal handlers")?;
        let json = args.json;
        let around = super::aroundsnap::Around::new(&args.dirs, &args.around, "demand")?;
        let last = super::aroundsnap::with_ticker(around, |around| {
            follow_alarms(&args, &opts, stop, json, around)
        });
        match last? {
            Some(r) => r,
            None => return Ok(ExitCode::SUCCESS),
        }
    } else {
        let set = super::common::open_any(&args.dirs)?;
        for d in &args.dirs {
            opts.cpu.extend(reader::cpustat::read_samples_or_warn(d));
        }
        demand::analyze(&set, &opts)?
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if args.json && !args.follow {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else if !args.json {
        write!(out, "{}", demand::report::text(&report))?;
    }
    out.flush()?;
    if let Some(h) = &args.html {
        super::outpath::write_output(h, demand::report::html(&report))
            .map_err(|e| anyhow::anyhow!("{}: cannot write: {e}", h.display()))?;
        eprintln!("wrote {}", h.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `--follow`: prints each alarm as it is raised and asks `around` for a snapshot after it.
fn follow_alarms(
    args: &Args,
    opts: &Options,
    stop: &std::sync::atomic::AtomicBool,
    json: bool,
    around: &std::sync::Mutex<super::aroundsnap::Around>,
) -> anyhow::Result<Option<demand::DemandReport>> {
    Ok(demand::follow::follow(&args.dirs, opts, stop, |a| {
        around
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .request(a.alarm.t_unix_ns);
        let mut out = std::io::stdout().lock();
        let _ = if json {
            serde_json::to_writer(&mut out, a)
                .map_err(std::io::Error::from)
                .and_then(|_| writeln!(out))
        } else {
            writeln!(
                out,
                "ALARM {}:{} {}: residual {} beyond ±{} (3 intervals from {} ns, raised at {} ns)",
                a.host,
                a.pid,
                a.process,
                demand::report::secs(a.alarm.residual_s),
                demand::report::secs(a.alarm.limit_s),
                a.alarm.first_violation_unix_ns,
                a.alarm.t_unix_ns
            )
        };
        let _ = out.flush();
    })?)
}
