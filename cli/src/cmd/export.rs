//! `culprit export`: write the traces, with every matched message as a flow, for Perfetto
//! or for tools that read Chrome's JSON trace-event format.

use analyzer::messages::{self, export::Format};
use std::path::PathBuf;
use std::process::ExitCode;

/// Output formats.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Fmt {
    /// Perfetto protobuf (open in ui.perfetto.dev or trace_processor).
    Perfetto,
    /// Chrome JSON trace events (chrome://tracing, Perfetto's UI, speedscope…).
    Chrome,
}

/// Arguments of `culprit export`.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  \
    culprit export trace/ --format perfetto -o run.pftrace\n  \
    culprit export host-a/ host-b/ --format chrome -o run.json\n\n\
    Processes and threads are tracks; library calls and function calls are slices, execution\n\
    units slices on a `units` track per thread; every matched message (see `culprit messages`)\n\
    is a flow from its send to its receive; injected faults are instant events. Traces of\n\
    several hosts are put on the first host's clock (offset and drift per host, fitted to\n\
    the messages between hosts, as `culprit messages` reports them).\n\n\
    Memory does not grow with the trace's length (with --no-units; the units are computed one\n\
    process at a time): the calls on sockets are spilled to unnamed temporary files beside\n\
    FILE (about 55 bytes a call) while the export runs.")]
pub struct Args {
    /// Trace directories, or trees of them (`DIR/<host>/<job.step.task>/`).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum)]
    pub format: Fmt,
    /// Output file.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Leave out the execution units (saves the units pass).
    #[arg(long)]
    pub no_units: bool,
}

/// Runs `culprit export`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let set = super::common::open_any(&args.dirs)?;
    let format = match args.format {
        Fmt::Perfetto => Format::Perfetto,
        Fmt::Chrome => Format::Chrome,
    };
    let e = messages::export::export(&set, !args.no_units, format, &args.output)?;
    eprintln!(
        "exported {} slices and {} flows ({:.1} MB) to {}",
        e.slices,
        e.flows,
        e.bytes as f64 / 1e6,
        args.output.display()
    );
    for l in messages::align::describe(&e.offsets) {
        eprintln!("culprit: clock of {l}");
    }
    for n in &e.unseen {
        eprintln!("culprit: {n}");
    }
    Ok(ExitCode::SUCCESS)
}
