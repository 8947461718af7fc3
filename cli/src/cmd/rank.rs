//! `culprit rank`: rank the execution units of a faulty run by suspect score.

use super::common::{dir_list, open, options, set_threads};
use analyzer::model::Model;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `culprit rank`.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  \
    culprit rank --model ring.model faulty --top 10\n  \
    culprit rank --model ring.model faulty --json | jq '.[0]'\n  \
    culprit rank --model ring.model faulty --html report.html\n  \
    culprit rank --write-index run.index job/                                # once\n  \
    culprit rank --model ring.model --index run.index --shard 2/8 -o part-2  # on one node\n  \
    culprit rank --merge part-* --top 10                                     # all 8 parts\n\n\
    Each unit is compared with its model. The default score (evidence) is led by the unit's\n\
    strongest piece of evidence: a call never seen in the U normal units of its class\n\
    (0.05^(1/U): \"never in 4\" is weak, \"never in 634\" strong; a failure never seen counts\n\
    as if backed by twice the units; support in --json), a call that every normal unit reaching its caller\n\
    made missing, a rare call, a library call lasting far beyond every normal one at its\n\
    place (\"`recv` took 1.00 s (normal at most 2 µs in 360 normal calls)\"; slow_call in\n\
    --json), a send on a socket of a size never sent at its place (\"`write` sent 16–31\n\
    bytes, a size never sent there (8–15 bytes in 1455 normal units)\"; odd_size in --json);\n\
    a call still blocked when the trace ended, or failing with\n\
    EAGAIN/EINTR/EINPROGRESS (timing, not a fault), weighs half. The\n\
    consequences of an anomaly (later anomalies of its process, work on connections made\n\
    after it — or, for a call too long, after the call began —, the peers it reached: that\n\
    received something its process sent after it, before their own anomaly, or saw the very\n\
    connection it broke fail, or timed out on its delay) are ranked right after it and name\n\
    it (caused_by; the root's incident counts the other processes). A run of units of one\n\
    connection that from some point on all depart from normal the same way is weighed\n\
    together, from where it began; the first occurrence of a failure ranks before its repeats;\n\
    ties of score go to the larger incident, then the better-backed evidence. --score paper is §3.1 of\n\
    Maruyama & Matsuoka, IPDPS'08, exactly: the mean, over the nodes in common and the\n\
    minimum difference, of 1-p for calls seen, p for expected calls not made, and 1 for\n\
    calls never seen in normal runs. Units of processes\n\
    matching no process group, and units with no model, score 1 (with the evidence score, a\n\
    process is matched to the nearest group of the same program, one that matches none is one\n\
    piece of evidence carried by its first unit, a\n\
    class new to its thread kind is compared with the same class on the other threads, and a\n\
    handler or loop unit is compared with its class on both thread kinds: the lesser counts).\n\
    `culprit show` prints a unit's call tree next to the model.")]
pub struct Args {
    /// The model (from `culprit learn` or `culprit merge`).
    #[arg(
        long,
        value_name = "MODEL",
        required_unless_present_any = ["merge", "write_index"]
    )]
    pub model: Option<PathBuf>,
    /// Trace directories of the run to examine (or trees of them:
    /// `DIR/<host>/<job.step.task>/`).
    #[arg(value_name = "DIR", required_unless_present_any = ["merge", "index"])]
    pub dirs: Vec<PathBuf>,
    /// Rank only shard K of N (1 ≤ K ≤ N) of the run's processes — sorted by host, then
    /// process: whole hosts when N is at most the number of hosts — into a part file
    /// (-o); `--merge` makes the whole ranking from the N part files.
    #[arg(long, value_name = "K/N", requires = "output", conflicts_with_all = ["merge", "html"])]
    pub shard: Option<analyzer::partial::Shard>,
    /// The part file a `--shard` writes.
    #[arg(short, long, value_name = "FILE", requires = "shard")]
    pub output: Option<PathBuf>,
    /// Write the run's index to FILE and stop: every trace directory under DIR…, its
    /// host, its processes and the clock its times are converted by (chosen from every
    /// recording's snapshots, as one `culprit rank` chooses it). Made once, read by every
    /// `--shard` (`--index`), so that no shard reads the whole run's manifests. The
    /// directories are named as given: give absolute paths when the shards run elsewhere.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["model", "shard", "merge", "html", "json", "index"])]
    pub write_index: Option<PathBuf>,
    /// The run's index (from `--write-index`) a `--shard` reads instead of DIR…: it opens
    /// only its hosts' directories, named there.
    #[arg(long, value_name = "FILE", requires = "shard", conflicts_with = "dirs")]
    pub index: Option<PathBuf>,
    /// Make the ranking from the part files of `--shard K/N` (all N of them): exactly the
    /// ranking of one `culprit rank --no-messages` over all the traces.
    #[arg(long, value_name = "PART", num_args = 1.., conflicts_with_all = ["model", "dirs", "score"])]
    pub merge: Vec<PathBuf>,
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
    /// rarest call), `longest` (the longest unit), `ochiai` (spectrum-based, over nodes),
    /// `simplerca` (suspect when a call outlasts its normal p95 / mean + 3σ or fails as its
    /// class never did; ties by time).
    #[arg(long, value_name = "SCORE", default_value = "evidence")]
    pub score: analyzer::evidence::ScoreKind,
    /// Do not list under each unit where its messages came from and went (saves the
    /// messages passes over the traces). Traces of several hosts are then ordered by their
    /// clocks as recorded, not aligned by the messages between hosts (as `--shard` ranks).
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
    let mut opts = options();
    opts.score = args.score;
    if let Some(out) = &args.write_index {
        return write_index(&args.dirs, out);
    }
    let merged = !args.merge.is_empty();
    // Processes named as they were started, with their ports; what is not recorded of them.
    let mut labels: std::collections::HashMap<(String, u32), String> = Default::default();
    let mut unseen: Vec<String> = Vec::new();
    let (rep, set) = if merged {
        let mut parts = Vec::new();
        // One buffer for every part file's bytes.
        let mut buf = Vec::new();
        for p in &args.merge {
            parts.push((
                p.clone(),
                analyzer::partial::PartFile::load_with(p, &mut buf)?,
            ));
        }
        for (_, p) in &parts {
            for (h, pid, l) in &p.labels {
                labels.entry((h.clone(), *pid)).or_insert_with(|| l.clone());
            }
        }
        // In the order one ranking says them.
        let mut notes: Vec<&(u64, String)> = parts.iter().flat_map(|p| &p.1.unseen).collect();
        notes.sort();
        for (_, n) in notes {
            if !unseen.contains(n) {
                unseen.push(n.clone());
            }
        }
        eprintln!(
            "culprit: merging {} part files: {} processes",
            parts.len(),
            parts.first().map_or(0, |p| p.1.total)
        );
        (analyzer::partial::merge_parts(parts, &opts)?, None)
    } else {
        let Some(model_path) = &args.model else {
            anyhow::bail!("--model is needed (unless --merge)");
        };
        let (model, model_hash) = Model::load_hashed(model_path)?;
        if let (Some(shard), Some(out)) = (args.shard, &args.output) {
            super::outpath::check_output_file(out, "part file (-o)")?;
            let part = rank_shard(
                (&model, model_hash),
                &args.dirs,
                args.index.as_deref(),
                &opts,
                shard,
            )?;
            part.save(out)?;
            eprintln!(
                "culprit: shard {shard}: ranked {} of {} processes → {}",
                part.processes.len(),
                part.total,
                out.display()
            );
            // The process ends here: its memory goes back to the kernel whole (see
            // `leave_at_exit`).
            leave_at_exit((part, model));
            return Ok(ExitCode::SUCCESS);
        }
        let set = open(&args.dirs)?;
        // Several hosts: each on the first one's clock, from the messages between them.
        let set = if args.no_messages {
            set
        } else {
            let offsets = analyzer::messages::align::estimate(&set, &std::env::temp_dir())?;
            for l in analyzer::messages::align::describe(&offsets) {
                eprintln!("culprit: clock of {l}");
            }
            analyzer::messages::align::corrected(&set, &offsets)
        };
        let proc_labels = analyzer::procname::labels(&set)?;
        unseen = analyzer::procname::unseen_notes(&set, &proc_labels);
        labels = set
            .processes
            .iter()
            .zip(&proc_labels)
            .map(|(p, l)| ((p.host.clone(), p.pid), l.text()))
            .collect();
        (analyzer::rank(&model, &set, &opts)?, Some(set))
    };
    let top = args.top.unwrap_or(if args.json { usize::MAX } else { 20 });
    // Where each listed unit's received bytes came from and its sent bytes went (not
    // from part files: the messages pass needs every trace).
    let links = if let (false, Some(set)) = (args.no_messages, &set) {
        // Every unit, so that the other end of a message is named even when unlisted; the
        // links of the listed ones (the first `top`, in ranked order) only.
        let spans: Vec<_> = rep
            .iter()
            .map(|u| analyzer::messages::links::UnitSpan::of(&u.info))
            .collect();
        let listed = |i: usize| i < top;
        let tmp = std::env::temp_dir();
        match analyzer::messages::links::unit_links_streamed(set, &spans, &listed, &tmp) {
            Ok(l) => l,
            // No temporary file can be made: the whole stage, in memory.
            Err(analyzer::Error::Io { path, .. }) if path == tmp => {
                let m = analyzer::messages::analyze(set)?;
                analyzer::messages::links::unit_links_of(&m, &spans, &listed)
            }
            Err(e) => return Err(e.into()),
        }
    } else {
        Default::default()
    };
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
        if !args.no_messages && !merged {
            analyzer::messages::links::annotate_json(&mut v, &links);
        }
        serde_json::to_writer_pretty(&mut out, &v)?;
        writeln!(out)?;
        leave_at_exit(v);
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
        super::outpath::write_output(h, rep.html_labelled(&label))
            .map_err(|e| anyhow::anyhow!("{}: cannot write: {e}", h.display()))?;
        eprintln!("wrote {}", h.display());
    }
    drop(out);
    leave_at_exit((rep, set, links, labels));
    Ok(ExitCode::SUCCESS)
}

/// Leaves `what` — the ranking, the traces, the model: memory only, no file or lock —
/// to the end of the process instead of freeing it piece by piece just before the
/// process exits (the kernel takes the whole address space back at once). Freeing a
/// ranking of 10 000 processes cost a twelfth of a `--merge`'s CPU; one `culprit rank`
/// and a `--shard` skip it alike, so that the sharded path and one rank stay comparable.
fn leave_at_exit<T>(what: T) {
    std::mem::forget(what);
}

/// Shard `shard` of the run under `dirs` (or in the run's `index`) as a part file: only
/// the shard's hosts' trace directories opened (the run outlined from the index, or from
/// every manifest), with the labels of the processes it ranks and what is not recorded of
/// them.
fn rank_shard(
    (model, model_hash): (&Model, u64),
    dirs: &[PathBuf],
    index: Option<&std::path::Path>,
    opts: &analyzer::Options,
    shard: analyzer::partial::Shard,
) -> anyhow::Result<analyzer::partial::PartFile> {
    let choose = |o: &analyzer::partial::RunOutline| shard.hosts_of(o);
    let sel = match index {
        Some(f) => analyzer::runindex::RunIndex::open_selected(f, false, choose)?,
        None => analyzer::decode::TraceSet::open_selected(dirs, false, choose)?,
    };
    let o = &sel.outline;
    if o.total == 0 {
        let what = match index {
            Some(f) => format!("the run index {}", f.display()),
            None => dir_list(dirs),
        };
        anyhow::bail!("no traced process in {what}");
    }
    eprintln!(
        "culprit: found {} processes in {} recordings on {} hosts; shard {shard} opens {} of the recordings ({} processes)",
        o.total,
        o.recordings,
        o.hosts.len(),
        sel.opened,
        sel.set.processes.len()
    );
    let part = analyzer::partial::rank_selected(model, model_hash, &sel, opts, shard)?;
    leave_at_exit(sel);
    Ok(part)
}

/// `culprit rank --write-index FILE DIR…`: the run's index, made once for every shard.
fn write_index(dirs: &[PathBuf], out: &std::path::Path) -> anyhow::Result<ExitCode> {
    super::outpath::check_output_file(out, "run index (--write-index)")?;
    let index = analyzer::runindex::RunIndex::build(dirs, false)?;
    let processes: usize = index.recordings.iter().map(|r| r.processes.len()).sum();
    if processes == 0 {
        anyhow::bail!("no traced process in {}", dir_list(dirs));
    }
    let hosts: std::collections::BTreeSet<&str> =
        index.recordings.iter().map(|r| r.host.as_str()).collect();
    index.save(out)?;
    eprintln!(
        "culprit: indexed {processes} processes in {} recordings on {} hosts → {}",
        index.recordings.len(),
        hosts.len(),
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}
