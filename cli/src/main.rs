//! `culprit` — record what every process of a distributed program does, learn what
//! normal looks like, and rank the parts of a faulty run by how suspicious they are.
//!
//! The binary is thin: each subcommand lives in `cmd/<name>.rs`, parses its own
//! arguments (clap) and calls into the libraries. Errors print with their whole chain.

mod cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// mimalloc rather than the system allocator: it takes memory from the kernel in large
/// committed blocks, so ranking a run no longer pays a page fault for every 4 KiB of rows it
/// keeps (6 240 faults → 170 for the 78-process benchmark trial, about a tenth of
/// `culprit rank`'s CPU time on a virtual machine, where each fault cost ~3 µs). Peak
/// resident memory grows by the blocks committed ahead (~25 MB): see `bench/RESULTS.md`.
/// Only this binary: `libtrace.so`, loaded into traced programs, keeps their allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "culprit",
    version,
    about = "Find where a distributed program went wrong, without changing the program.",
    long_about = "Find where a distributed program went wrong, without changing the program.\n\n\
        Typical session:\n  \
        culprit record -o normal1 -- ./cluster.sh      # record normal runs (any number)\n  \
        culprit learn normal1 normal2 -o model.cpm     # learn a model of normal behaviour\n  \
        culprit record -o faulty -- ./cluster.sh       # record the run that went wrong\n  \
        culprit rank --model model.cpm faulty --top 10 # the most suspicious execution units"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a command with tracing: create a pool, start readers, follow the process tree.
    Record(cmd::record::Args),
    /// Drain a pool to a trace directory (for daemons started by hand with LD_PRELOAD).
    Reader(cmd::reader::Args),
    /// Print every recorded entry of a trace directory.
    Dump(cmd::dump::Args),
    /// Compile C with -finstrument-functions (use as CC="culprit cc" in a make build).
    Cc(cmd::cc::Args),
    /// Learn a model of normal behaviour from trace directories.
    Learn(cmd::learn::Args),
    /// Merge models learned on different nodes into one.
    Merge(cmd::merge::Args),
    /// Learn or rank a whole job's traces as Slurm jobs (sbatch), or the same steps here.
    Cluster(cmd::cluster::Args),
    /// Rank the execution units of a faulty run by how suspicious they are.
    Rank(cmd::rank::Args),
    /// Show one unit's call tree next to its model.
    Show(cmd::show::Args),
    /// Match every byte sent to where it was received, per connection (SPEC §7).
    Messages(cmd::messages::Args),
    /// Export the traces with their messages as flows (Perfetto protobuf or Chrome JSON).
    Export(cmd::export::Args),
    /// Draw the time–process diagram and process states of a run as an HTML page.
    Timeline(cmd::timeline::Args),
    /// Recover what a full disk or a killed reader left in a trace directory.
    Repair(cmd::repair::Args),
    /// Freeze a consistent copy of a trace directory while it is being recorded.
    Snapshot(cmd::snapshot::Args),
    /// Score units as a recording runs and report each anomalous one as it ends.
    Watch(cmd::watch::Args),
    /// Service demand per process and the residual control chart: which process became slow.
    Demand(cmd::demand::Args),
    /// Sample per-process IO counters on absolute deadlines (for `culprit ioshare`).
    Iosample(cmd::iosample::Args),
    /// Estimate each process's share of a shared file server's load from IO samples.
    Ioshare(cmd::ioshare::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Command::Record(a) => cmd::record::run(a),
        Command::Reader(a) => cmd::reader::run(a),
        Command::Dump(a) => cmd::dump::run(a),
        Command::Cc(a) => cmd::cc::run(a),
        Command::Learn(a) => cmd::learn::run(a),
        Command::Merge(a) => cmd::merge::run(a),
        Command::Cluster(a) => cmd::cluster::run(a),
        Command::Rank(a) => cmd::rank::run(a),
        Command::Show(a) => cmd::show::run(a),
        Command::Messages(a) => cmd::messages::run(a),
        Command::Export(a) => cmd::export::run(a),
        Command::Timeline(a) => cmd::timeline::run(a),
        Command::Repair(a) => cmd::repair::run(a),
        Command::Snapshot(a) => cmd::snapshot::run(a),
        Command::Watch(a) => cmd::watch::run(a),
        Command::Demand(a) => cmd::demand::run(a),
        Command::Iosample(a) => cmd::iosample::run(a),
        Command::Ioshare(a) => cmd::ioshare::run(a),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            // A closed pipe (culprit dump | head) is a normal way to stop.
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                if io.kind() == std::io::ErrorKind::BrokenPipe {
                    return ExitCode::SUCCESS;
                }
            }
            eprintln!("culprit: error: {}", cmd::common::error_text(&e));
            ExitCode::from(2)
        }
    }
}
