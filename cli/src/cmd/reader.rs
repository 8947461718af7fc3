//! `culprit reader` — drain a pool to a trace directory, for daemons started by hand
//! with `LD_PRELOAD` and `CULPRIT_POOL` set. With `--create` it also creates the pool
//! and prints the line to put before those daemons' command lines.
//!
//! The reader itself is [`reader::session::standalone`]; this module parses the flags.

use super::common::{KeepArgs, PoolArgs};
use reader::session::standalone::{self, PoolSource, Standalone};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `culprit reader`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace directory to write (created if needed; an interrupted one is resumed).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub out: PathBuf,
    /// Create the pool (with the geometry options), print the environment line for the
    /// programs to trace, and delete the pool at the end (unless --keep-pool).
    #[arg(long)]
    pub create: bool,
    #[command(flatten)]
    pub pool: PoolArgs,
    /// Drain threads (1 to 64).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = super::common::parse_readers)]
    pub readers: usize,
    /// Keep running after every traced process is gone (stop only on SIGINT/SIGTERM).
    #[arg(long)]
    pub keep_running: bool,
    /// Keep a pool created with --create at the end.
    #[arg(long)]
    pub keep_pool: bool,
    /// How often the readers save what writers committed to sub-buffers they are still
    /// filling (ns, us, ms, s; `0` or `off` = never: only whole sub-buffers, when handed over).
    #[arg(long, value_name = "DUR", default_value = "100ms", value_parser = super::record::parse_live_interval)]
    pub live_interval: std::time::Duration,
    #[command(flatten)]
    pub keep: KeepArgs,
}

/// Runs `culprit reader`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    args.pool.apply_sharing();
    let pool = match (&args.pool.pool, args.create) {
        (Some(p), false) => PoolSource::Open(p.clone()),
        (_, true) => PoolSource::Create {
            path: args.pool.path(),
            config: args.pool.config(),
            keep: args.keep_pool,
        },
        (None, false) => anyhow::bail!("--pool FILE is required (or --create to make a new pool)"),
    };
    let reader = Standalone {
        out: args.out.clone(),
        pool,
        readers: args.readers,
        keep_running: args.keep_running,
        live_interval: Some(args.live_interval).filter(|d| !d.is_zero()),
        keep: args.keep.options(),
    };
    let rep = reader.run(&mut |r| {
        if let Some(line) = &r.env_line {
            // The one line of stdout: what to put before the commands to trace.
            println!("{line}");
        }
        eprintln!(
            "culprit: reading {} into {} ({})",
            r.pool_path.display(),
            args.out.display(),
            r.stops
        );
    })?;
    for line in standalone::summary(&rep, &args.out, args.create) {
        eprintln!("culprit: {line}");
    }
    Ok(ExitCode::SUCCESS)
}
