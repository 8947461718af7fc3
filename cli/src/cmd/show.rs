//! `culprit show`: one unit's call tree next to its model.

use super::common::{open, options};
use analyzer::model::Model;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `culprit show`.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  \
    culprit rank --model ring.model faulty --top 3      # ids look like node3:4242:4242:17\n  \
    culprit show --model ring.model faulty --unit node3:4242:4242:17\n\n\
    Columns: ×N the node was called N times in this unit (· only in the model), p its model\n\
    probability (- never seen in normal runs), Δ its contribution to the score if effective.")]
pub struct Args {
    /// The model.
    #[arg(long, value_name = "MODEL")]
    pub model: PathBuf,
    /// Trace directories of the run (or trees of them: `DIR/<host>/<job.step.task>/`);
    /// the unit is in one of them.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// The unit id, as printed by `culprit rank` (host:pid:tid:index).
    #[arg(long, value_name = "ID")]
    pub unit: String,
    /// Print JSON (the unit's rank object with its annotated tree).
    #[arg(long)]
    pub json: bool,
    /// Any damaged or missing part of a trace is an error (by default it is skipped
    /// with one warning line per file).
    #[arg(long)]
    pub strict: bool,
    /// The score the unit is shown with, as `culprit rank --score` (default: evidence).
    #[arg(long, value_name = "SCORE", default_value = "evidence")]
    pub score: analyzer::evidence::ScoreKind,
}

/// Runs `culprit show`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    reader::tracedir::set_strict_default(args.strict);
    let model = Model::load(&args.model)?;
    let set = open(&args.dirs)?;
    let mut opts = options();
    opts.score = args.score;
    let s = analyzer::show(&model, &set, &args.unit, &opts)?;
    // Where the unit's received bytes came from and its sent bytes went, by unit: the
    // flows of the bounded-memory pass (as `culprit rank`), linked for this unit only (the
    // other end named by its unit among all).
    let links = {
        use analyzer::messages::links;
        let spans = analyzer::messages::export::units_of(&set)?;
        let wanted = |i: usize| spans[i].id == args.unit;
        let tmp = std::env::temp_dir();
        let mut l = match links::unit_links_streamed(&set, &spans, &wanted, &tmp) {
            Ok(l) => l,
            // No temporary file can be made: the whole stage, in memory.
            Err(analyzer::Error::Io { path, .. }) if path == tmp => {
                let m = analyzer::messages::analyze(&set)?;
                links::unit_links_of(&m, &spans, &wanted)
            }
            Err(e) => return Err(e.into()),
        };
        l.remove(&args.unit).unwrap_or_default()
    };
    // The unit's process named as every view names it (`culprit rank`'s "process").
    let process = match set
        .processes
        .iter()
        .find(|p| p.host == s.unit.info.host && p.pid == s.unit.info.pid)
    {
        Some(p) => analyzer::procname::label_of(p)?.text(),
        None => String::new(),
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if args.json {
        let mut v = s.unit.to_json();
        v["process"] = serde_json::Value::String(process);
        v["tree"] = serde_json::to_value(&s.lines)?;
        v["received_from"] = serde_json::to_value(&links.received_from)?;
        v["sent_to"] = serde_json::to_value(&links.sent_to)?;
        serde_json::to_writer_pretty(&mut out, &v)?;
        writeln!(out)?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let u = &s.unit;
    writeln!(
        out,
        "unit {}  {}  score {:.3} ({:?})  {} pid {} ({process}) tid {}{}",
        u.info.id,
        u.info.kind.name(),
        u.score,
        u.verdict,
        u.info.host,
        u.info.pid,
        u.info.tid,
        u.info.fd.map_or(String::new(), |fd| format!(" fd {fd}"))
    )?;
    if u.info.local.is_some() || u.info.peer.is_some() {
        writeln!(
            out,
            "connection {} ⇄ {}",
            u.info.local.as_deref().unwrap_or("?"),
            u.info.peer.as_deref().unwrap_or("?")
        )?;
    }
    for w in &u.why {
        writeln!(out, "  why: {w}")?;
    }
    for i in &u.info.injections {
        writeln!(
            out,
            "  injected: {} fd {} → {} (errno {}) {}",
            i.func, i.fd, i.forced_ret, i.forced_errno, i.spec
        )?;
    }
    for l in analyzer::messages::links::lines(&links, 10) {
        writeln!(out, "  {l}")?;
    }
    write!(out, "{}", analyzer::report::tree_text(&s.lines))?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
