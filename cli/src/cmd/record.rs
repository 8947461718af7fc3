//! `culprit record` — run a command with tracing: create a pool, start the readers, run
//! the command with `libtrace.so` preloaded, follow its whole process tree (children that
//! daemonize included), drain, summarize, and exit with the command's status.
//!
//! The session itself (supervision, signal policy, exit status) is
//! [`reader::session::Session`]; this module parses the flags and prints what it says.

use super::common::{KeepArgs, PoolArgs};
use anyhow::bail;
use reader::session::Session;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `culprit record`.
#[derive(clap::Args, Debug)]
#[command(
    override_usage = "culprit record [OPTIONS] -- CMD [ARGS]...",
    after_help = bufpool::inject::HELP
)]
pub struct Args {
    /// Trace directory to write (default: `culprit-<command>-<unix time>`). Under Slurm
    /// (`srun culprit record -o DIR -- CMD`: `SLURM_JOB_ID` set) each task writes
    /// `DIR/<host>/<job.step.task>/`, so every task of a job can share one `-o` (put it on
    /// node-local storage) and the analyses take `DIR` whole.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub pool: PoolArgs,
    /// Inject a fault (repeatable): FUNC[|FUNC…]:EFFECT[,KEY=VALUE…], e.g.
    /// `recv:short=3,nth=17`, `read:errno=ECONNRESET,peer-port=7000,count=1` or, from a
    /// given time on, `recv|read:delay=5ms,at=UNIX_SECONDS` (the grammar is below).
    #[arg(long = "inject", value_name = "SPEC")]
    pub inject: Vec<String>,
    /// Drain threads (1 to 64).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = super::common::parse_readers)]
    pub readers: usize,
    /// Keep the pool file at the end.
    #[arg(long)]
    pub keep_pool: bool,
    /// How often the readers save what writers committed to sub-buffers they are still
    /// filling (ns, us, ms, s; `0` or `off` = never: only whole sub-buffers, when handed over).
    #[arg(long, value_name = "DUR", default_value = "100ms", value_parser = super::record::parse_live_interval)]
    pub live_interval: std::time::Duration,
    #[command(flatten)]
    pub keep: KeepArgs,
    /// The command to run, and its arguments. Before `--`, whatever looks like an option
    /// is parsed as one (an unknown one is an error, with clap's suggestion); the command
    /// starts at `--` or at the first word that is not an option.
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub cmd: Vec<OsString>,
}

/// Parses `--live-interval`: a duration, or `0`/`off` (zero: no live copies).
pub fn parse_live_interval(s: &str) -> Result<std::time::Duration, String> {
    match s.trim() {
        "0" | "off" => Ok(std::time::Duration::ZERO),
        d => reader::iosample::parse_duration(d),
    }
}

/// Checks the `--inject` SPECs; returns the value of the injection variable.
fn inject_value(specs: &[String]) -> anyhow::Result<Option<String>> {
    if specs.is_empty() {
        return Ok(None);
    }
    for s in specs {
        if let Err(e) = bufpool::inject::parse_spec(s) {
            bail!("--inject {s:?}: {e}\n{}", e.caret(s));
        }
    }
    Ok(Some(bufpool::inject::encode_env(specs)?))
}

/// This host's name (as the pool records it).
fn hostname() -> String {
    let h = bufpool::sys::hostname();
    let end = h.iter().position(|&b| b == 0).unwrap_or(h.len());
    let name = String::from_utf8_lossy(&h[..end]).into_owned();
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        "localhost".into()
    } else {
        name
    }
}

/// Runs `culprit record`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let inject = inject_value(&args.inject)?;
    args.pool.apply_sharing();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| reader::session::default_out_dir(&args.cmd));
    let out = match reader::manifest::SlurmTask::from_env() {
        Some(task) => out.join(hostname()).join(task.dir_name()),
        None => out,
    };
    let mut session = Session::new(args.cmd.clone(), out);
    session.pool = args.pool.config();
    session.pool_path = args.pool.path();
    session.inject_env = inject;
    session.readers = args.readers;
    session.keep_pool = args.keep_pool;
    session.live_interval = Some(args.live_interval).filter(|d| !d.is_zero());
    session.keep = args.keep.options();
    // Python processes trace their functions with nothing installed (issue 17).
    session.env = python_hook::record_env(&args.cmd);
    let rec = session.run(&mut |n| eprintln!("culprit: {n}"))?;
    for line in rec.summary() {
        eprintln!("culprit: {line}");
    }
    // Per process, what was recorded: libc calls, C functions, Python functions.
    if let Some(t) = rec.traced.as_ref().filter(|t| t.report.is_ok()) {
        eprint!("{}", analyzer::recorded::summary(&t.out));
        // The command itself may be one LD_PRELOAD cannot enter (its children are in the
        // table above, with their own reasons).
        use analyzer::unseen::{resolve, ExeKind, Unseen};
        let cmd = args.cmd[0].to_string_lossy();
        let why = match resolve(&cmd).as_deref().and_then(ExeKind::of) {
            Some(ExeKind::Static) => Some(Unseen::Static.why()),
            Some(ExeKind::Go { static_: true }) => Some(format!(
                "a static Go program: {}",
                Unseen::Static
                    .why()
                    .trim_start_matches("a static executable: ")
            )),
            _ => None,
        };
        if let Some(why) = why {
            eprintln!("culprit: {cmd}: not recorded: {why}");
        }
    }
    Ok(ExitCode::from(rec.status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_inject_spec_is_rejected_with_its_position() {
        let e = inject_value(&["recv:shrt=3".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("column 6") && e.contains('^'), "{e}");
        assert!(inject_value(&[]).unwrap().is_none());
        let v = inject_value(&["recv:short=3".into(), "send:errno=EPIPE".into()]).unwrap();
        assert_eq!(v.as_deref(), Some("recv:short=3\nsend:errno=EPIPE"));
    }
}
