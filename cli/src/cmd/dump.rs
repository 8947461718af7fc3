//! `culprit dump` — print every recorded entry of a trace directory, thread by thread,
//! in order: wall-clock time, pid/tid, call depth, function name, arguments, result.
//! The rendering is [`analyzer::dump`]; this module parses the flags.

use analyzer::dump::{DumpError, DumpOptions};
use reader::TraceDir;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Arguments of `culprit dump`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The trace directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Only this process (repeatable).
    #[arg(long, value_name = "PID")]
    pub pid: Vec<u32>,
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
    /// Any damaged or missing part of a trace is an error (by default it is skipped
    /// with one warning line per file).
    #[arg(long)]
    pub strict: bool,
}

/// Runs `culprit dump`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    reader::tracedir::set_strict_default(args.strict);
    let trace = Arc::new(TraceDir::open(&args.dir)?);
    if let Some(at) = trace.manifest().snapshot_unix_ns {
        eprintln!(
            "culprit: note: {}: a snapshot taken while recording ran ({:.3} s after it \
             started): it ends there",
            args.dir.display(),
            at.saturating_sub(trace.manifest().start_unix_ns) as f64 / 1e9
        );
    } else if !trace.manifest().complete && !trace.manifest_is_stand_in() {
        eprintln!(
            "culprit: warning: {}: the reader did not finish; the trace may be incomplete",
            args.dir.display()
        );
    }
    let opts = DumpOptions {
        pids: args.pid,
        json: args.json,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    match analyzer::dump::dump(&trace, &opts, &mut out) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // An I/O error as such, so that a closed pipe (`culprit dump | head`) is told apart.
        Err(DumpError::Write(e)) => Err(e.into()),
        Err(DumpError::Trace(e)) => Err(e.into()),
    }
}
