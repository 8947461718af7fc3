//! `culprit snapshot DIR -o OUT` — freeze a consistent copy of a trace directory while it
//! is being recorded (a flight recorder's window, see `reader::snapshot`). The same as
//! sending SIGUSR1 to the `culprit record` or `culprit reader` writing DIR.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `culprit snapshot`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The trace directory (being recorded, or finished).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The snapshot directory to create (must not exist).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub out: PathBuf,
}

/// Runs `culprit snapshot`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rep = reader::snapshot::snapshot(&args.dir, &args.out)?;
    eprintln!(
        "culprit: snapshot of {} in {}: {} file(s) linked, {} copied, {:.1} MiB{}",
        args.dir.display(),
        args.out.display(),
        rep.linked,
        rep.copied,
        rep.bytes as f64 / (1u64 << 20) as f64,
        if rep.cut > 0 {
            format!(
                "; {} record(s) after a sub-buffer still in the pool left out",
                rep.cut
            )
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}
