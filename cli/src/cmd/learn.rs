//! `culprit learn`: learn a model of normal behaviour from trace directories.

use super::common::{open, options, set_threads};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `culprit learn`.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  \
    culprit record -o normal1 -- ./ring.sh && culprit record -o normal2 -- ./ring.sh\n  \
    culprit learn normal1 normal2 -o ring.model\n\n\
    Each process is cut into execution units (initializer, handlers per connection, loop,\n\
    finalizer); a process model gives each call-tree node the fraction of units it appears in;\n\
    processes with the same signature (their bind/connect/listen/accept call stacks) are merged\n\
    into one process group by mean probability. The model file format is in analyzer/MODEL.md.")]
pub struct Args {
    /// Trace directories of normal runs (from one or several hosts), or trees of them
    /// (`DIR/<host>/<job.step.task>/`).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Where to write the model.
    #[arg(short, long, value_name = "MODEL")]
    pub output: PathBuf,
    /// Do not distinguish library calls by outcome (errno, end of stream, short transfer).
    #[arg(long)]
    pub no_outcomes: bool,
    /// Give every Python standard-library frame and builtin its own node (by default a chain
    /// of library frames is one node, the outermost, as libc is for C).
    #[arg(long)]
    pub all_library_frames: bool,
    /// Worker threads, 1 to 1024 (default: one per core). Results do not depend on it.
    #[arg(long, value_name = "N", value_parser = super::outpath::parse_threads)]
    pub threads: Option<usize>,
    /// Any damaged or missing part of a trace is an error (by default it is skipped
    /// with one warning line per file).
    #[arg(long)]
    pub strict: bool,
}

/// Runs `culprit learn`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    reader::tracedir::set_strict_default(args.strict);
    super::outpath::check_output_file(&args.output, "model file (-o)")?;
    set_threads(args.threads)?;
    let set = open(&args.dirs)?;
    let mut opts = options();
    opts.tree.outcome_aware = !args.no_outcomes;
    opts.tree.collapse_library = !args.all_library_frames;
    let learned = analyzer::learn(std::slice::from_ref(&set), &opts)?;
    learned.model.save(&args.output)?;
    let m = &learned.model;
    let sizes: Vec<usize> = learned.processes.iter().map(|p| p.model_bytes).collect();
    let units: usize = learned.processes.iter().map(|p| p.units).sum();
    eprintln!(
        "learned from {} processes ({} entries, {} lost), {} units: {} process group(s), {} nodes",
        learned.processes.len(),
        learned.stats.entries,
        learned.stats.lost,
        units,
        m.groups.len(),
        m.node_count()
    );
    for (i, g) in m.groups.iter().enumerate() {
        eprintln!(
            "  group {i}: {} process(es), {} unit classes, signature of {} setup stack(s){}",
            g.processes.len(),
            g.classes.len(),
            g.signature.0.len(),
            g.exes.first().map_or(String::new(), |e| format!(", {e}"))
        );
    }
    if let (Some(min), Some(max)) = (sizes.iter().min(), sizes.iter().max()) {
        eprintln!(
            "process model size: min {:.1} KB, mean {:.1} KB, max {:.1} KB; global model {:.1} KB → {}",
            *min as f64 / 1e3,
            sizes.iter().sum::<usize>() as f64 / sizes.len() as f64 / 1e3,
            *max as f64 / 1e3,
            m.encoded_size() as f64 / 1e3,
            args.output.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
