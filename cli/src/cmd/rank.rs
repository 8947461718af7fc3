//! `culprit rank`: rank the execution units of a faulty run by suspect score.

use super::common::{open, options, set_threads};
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
    Each unit is compared with its model. The default score (evidence) is led by the unit's\n\
    strongest piece of evidence: a call never seen in the U normal units of its class\n\
    (U/(U+1); a failure never seen: 1), a call that every normal unit reaching its caller\n\
    made missing, a rare call, a library call lasting far beyond every normal one at its\n\
    place (\"`recv` took 1.00 s (normal at most 2 µs in 360 normal calls)\"; slow_call in\n\
    --json), a send on a socket of a size never sent at its place (\"`write` sent 16–31\n\
    bytes, a size never sent there (8–15 bytes in 1455 normal units)\"; odd_size in --json);\n\
    a call still blocked when the trace ended, or failing with\n\
    EAGAIN/EINTR/EINPROGRESS (timing, not a fault), weighs half. The\n\
    consequences of an anomaly (later anomalies of its process, work on connections made\n\
    after it — or, for a call too long, after the call began —, the peers at the other end\n\
    of its connections) are ranked right after it and name it (caused_by). --score paper is §3.1 of\n\
    Maruyama & Matsuoka, IPDPS'08, exactly: the mean, over the nodes in common and the\n\
    minimum difference, of 1-p for calls seen, p for expected calls not made, and 1 for\n\
    calls never seen in normal runs. Units of processes\n\
    matching no process group, and units with no model, score 1 (with the evidence score, a\n\
    class new to its thread kind is compared with the same class on the other threads, and a\n\
    handler or loop unit is compared with its class on both thread kinds: the lesser counts).\n\
    `culprit show` prints a unit's call tree next to the model.")]
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
    /// The score units are ranked by: `evidence` (the strongest single piece of evidence
    /// in a unit, with consequences filed under their root; the default), `paper` (§3.1
    /// exactly: the mean over the effective nodes), or a baseline: `rarest` (the unit's
    /// rarest call), `longest` (the longest unit), `ochiai` (spectrum-based, over nodes).
    #[arg(long, value_name = "SCORE", default_value = "evidence")]
    pub score: analyzer::evidence::ScoreKind,
    /// Do not list under each unit where its messages came from and went (saves the
    /// messages pass over the traces).
    #[arg(long)]
    pub no_messages: bool,
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
    let mut opts = options();
    opts.score = args.score;
    let rep = analyzer::rank(&model, &set, &opts)?;
    let top = args.top.unwrap_or(if args.json { usize::MAX } else { 20 });
    // Where each listed unit's received bytes came from and its sent bytes went.
    let links = if args.no_messages {
        Default::default()
    } else {
        // Every unit, so that the other end of a message is named even when unlisted; the
        // links of the listed ones (the first `top`, in ranked order) only.
        let spans: Vec<_> = rep
            .iter()
            .map(|u| analyzer::messages::links::UnitSpan::of(&u.info))
            .collect();
        let listed = |i: usize| i < top;
        let tmp = std::env::temp_dir();
        match analyzer::messages::links::unit_links_streamed(&set, &spans, &listed, &tmp) {
            Ok(l) => l,
            // No temporary file can be made: the whole stage, in memory.
            Err(analyzer::Error::Io { path, .. }) if path == tmp => {
                let m = analyzer::messages::analyze(&set)?;
                analyzer::messages::links::unit_links_of(&m, &spans, &listed)
            }
            Err(e) => return Err(e.into()),
        }
    };
    // Processes named as they were started, with their ports; what is not recorded of them.
    let proc_labels = analyzer::procname::labels(&set)?;
    let unseen = analyzer::procname::unseen_notes(&set, &proc_labels);
    let labels: std::collections::HashMap<(String, u32), String> = set
        .processes
        .iter()
        .zip(&proc_labels)
        .map(|(p, l)| ((p.host.clone(), p.pid), l.text()))
        .collect();
    let label = |host: &str, pid: u32| labels.get(&(host.to_string(), pid)).cloned();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if args.json {
        for n in &unseen {
            eprintln!("culprit: {n}");
        }
        let mut v = rep.json(top);
        if let Some(units) = v.as_array_mut() {
            for u in units {
                let (Some(h), Some(p)) = (u["host"].as_str(), u["pid"].as_u64()) else {
                    continue;
                };
                if let Some(l) = label(h, p as u32) {
                    u["process"] = serde_json::Value::String(l);
                }
            }
        }
        if !args.no_messages {
            analyzer::messages::links::annotate_json(&mut v, &links);
        }
        serde_json::to_writer_pretty(&mut out, &v)?;
        writeln!(out)?;
    } else {
        let notes = |id: &str| {
            links
                .get(id)
                .map_or_else(Vec::new, |l| analyzer::messages::links::lines(l, 3))
        };
        let text = rep.text_labelled(top, args.mark_injections, &notes, &label);
        // The header line, then what the ranking cannot see.
        let (head, rest) = text.split_once('\n').unwrap_or((&text, ""));
        writeln!(out, "{head}")?;
        for n in &unseen {
            writeln!(out, "  {n}")?;
        }
        write!(out, "{rest}")?;
    }
    out.flush()?;
    if let Some(h) = &args.html {
        std::fs::write(h, rep.html())
            .map_err(|e| anyhow::anyhow!("{}: cannot write: {e}", h.display()))?;
        eprintln!("wrote {}", h.display());
    }
    Ok(ExitCode::SUCCESS)
}
