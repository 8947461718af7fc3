//! `culprit rank`: rank the execution units of a faulty run by suspect score.

use super::learn::{open, options, set_threads};
use analyzer::model::Model;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `culprit rank`.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  \
    culprit rank --model ring.model faulty --top 10\n  \
    culprit rank --model ring.model faulty --json | jq '.[0]'\n  \
    culprit rank --model ring.model faulty --html report.html\n\n\
    Each unit is scored against its model (§3.1 of Maruyama & Matsuoka, IPDPS'08): the mean,\n\
    over the nodes in common and the minimum difference, of 1-p for calls seen, p for expected\n\
    calls not made, and 1 for calls never seen in normal runs. Units of processes matching no\n\
    process group, and units with no model, score 1. The earliest high-scoring unit is usually\n\
    the one to look at; `culprit show` prints its call tree next to the model.")]
pub struct Args {
    /// The model (from `culprit learn` or `culprit merge`).
    #[arg(long, value_name = "MODEL")]
    pub model: PathBuf,
    /// Trace directories of the run to examine.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Print the N highest-ranked units (default 20; with --json, all units unless given).
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Print a JSON array, highest score first.
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML page: every unit's score against time.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// List the faults injected inside each printed unit (ground truth of an experiment).
    #[arg(long)]
    pub mark_injections: bool,
    /// Worker threads, 1 to 1024 (default: one per core). Results do not depend on it.
    #[arg(long, value_name = "N", value_parser = super::outpath::parse_threads)]
    pub threads: Option<usize>,
    /// Any damaged or missing part of a trace is an error (by default it is skipped
    /// with one warning line per file).
    #[arg(long)]
    pub strict: bool,
}

/// Runs `culprit rank`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    reader::tracedir::set_strict_default(args.strict);
    if let Some(h) = &args.html {
        super::outpath::check_output_file(h, "page (--html)")?;
    }
    set_threads(args.threads)?;
    let model = Model::load(&args.model)?;
    let set = open(&args.dirs)?;
    let opts = options();
    let rep = analyzer::rank(&model, &set, &opts)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if args.json {
        let top = args.top.unwrap_or(usize::MAX);
        serde_json::to_writer_pretty(&mut out, &rep.json(top))?;
        writeln!(out)?;
    } else {
        write!(
            out,
            "{}",
            rep.text(args.top.unwrap_or(20), args.mark_injections)
        )?;
    }
    out.flush()?;
    if let Some(h) = &args.html {
        std::fs::write(h, rep.html())
            .map_err(|e| anyhow::anyhow!("{}: cannot write: {e}", h.display()))?;
        eprintln!("wrote {}", h.display());
    }
    Ok(ExitCode::SUCCESS)
}
