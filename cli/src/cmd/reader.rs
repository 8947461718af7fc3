//! `culprit reader` — drain a pool to a trace directory, for daemons started by hand
//! with `LD_PRELOAD` and `CULPRIT_POOL` set. With `--create` it also creates the pool
//! and prints the line to put before those daemons' command lines.

use super::record::{check_space, find_libtrace, preload_value, PoolArgs};
use anyhow::Context;
use bufpool::{Pool, POOL_ENV};
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
    #[arg(long, value_name = "N", default_value_t = 2,
          value_parser = super::record::parse_readers)]
    pub readers: usize,
    /// Keep running after every traced process is gone (stop only on SIGINT/SIGTERM).
    #[arg(long)]
    pub keep_running: bool,
    /// Keep a pool created with --create at the end.
    #[arg(long)]
    pub keep_pool: bool,
}

/// Runs `culprit reader`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let path = match (&args.pool.pool, args.create) {
        (Some(p), _) => p.clone(),
        (None, true) => args.pool.path(),
        (None, false) => anyhow::bail!("--pool FILE is required (or --create to make a new pool)"),
    };
    // Handlers first: a signal that arrives while a large pool is being created and
    // pre-faulted must stop the reader normally (removing the pool), not kill it.
    reader::signals::install(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP])
        .context("installing signal handlers")?;
    let pool = if args.create {
        args.pool.config().validate()?;
        check_space(&path, &args.pool.config()).map_err(anyhow::Error::msg)?;
        // Everything that can fail comes before the pool exists, so an error leaves no
        // pool file behind.
        let lib = find_libtrace()?;
        let pool = Pool::create(&path, &args.pool.config())?;
        let pre = preload_value(&lib, None);
        // The one line of stdout: what to put before the commands to trace.
        println!(
            "LD_PRELOAD={} {POOL_ENV}={}",
            pre.to_string_lossy(),
            path.display()
        );
        pool
    } else {
        Pool::open(&path)?
    };
    let opts = reader::ReaderOptions {
        workers: args.readers.max(1),
        stop_when_unmapped: !args.keep_running,
        ..Default::default()
    };
    eprintln!(
        "culprit: reading {} into {} (stops on SIGINT/SIGTERM{})",
        path.display(),
        args.out.display(),
        if args.keep_running {
            ""
        } else {
            " or when every traced process is gone"
        }
    );
    let r = reader::run(&pool, &args.out, &opts, reader::signals::stop_flag());
    // A pool we made goes away at the end, unless something in it could not be saved.
    if args.create && !args.keep_pool && r.is_ok() {
        let _ = std::fs::remove_file(&path);
    }
    let rep = r.with_context(|| format!("the pool {} keeps what was not saved", path.display()))?;
    let t = &rep.manifest.totals;
    eprintln!(
        "culprit: saved {} process(es), {} thread(s), {} entries ({} bytes) to {}; {} lost",
        t.processes,
        t.threads,
        t.entries,
        t.bytes,
        args.out.display(),
        t.lost
    );
    for r in &rep.repaired {
        // A pool this run created never held the torn record's sub-buffer: only the pool
        // the killed reader drained can give it again.
        let fate = if args.create {
            "its sub-buffer stayed in the pool the killed reader drained (drain that pool \
             with `culprit reader --pool FILE -o DIR` if it still exists)"
        } else {
            "its sub-buffer, never released, was saved again from the pool"
        };
        eprintln!(
            "culprit: cut a torn record off {} ({} → {} bytes: {}); {fate}",
            r.path.display(),
            r.old_len,
            r.new_len,
            r.why
        );
    }
    if args.create && !rep.repaired.is_empty() {
        eprintln!(
            "culprit: (to repair a trace directory whose pool is gone, `culprit repair {}` \
             does it without creating a pool)",
            args.out.display()
        );
    }
    if rep.left_owned > 0 {
        eprintln!(
            "culprit: warning: {} sub-buffer(s) still held by live processes were not saved",
            rep.left_owned
        );
    }
    Ok(ExitCode::SUCCESS)
}
