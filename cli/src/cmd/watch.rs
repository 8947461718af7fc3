//! `culprit watch --model M DIR` — score the units of a recording as they complete and
//! print each anomalous one once (`analyzer::watch`), and freeze a snapshot of the flight
//! recorder around it.

use super::common::set_threads;
use analyzer::model::Model;
use analyzer::watch::{WatchOptions, Watcher};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Folds listed at the end (each with the id of its report and its count).
const FOLDS_SHOWN: usize = 20;
/// How often a watch polls when nothing was written (for holes' patience).
const IDLE_POLL: Duration = Duration::from_secs(1);

/// Arguments of `culprit watch`.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  \
    culprit record --keep 256M -o live -- ./cluster.sh &\n  \
    culprit watch --model normal.cpm live --json\n\n\
    Each poll ranks what the directory holds (as `culprit rank` does) and prints the units\n\
    that ended since, scoring at least --threshold, once each. With --keep-around, the\n\
    flight recorder's window is frozen into a snapshot (`culprit snapshot`) that long after\n\
    each reported unit ended: it holds what led to the unit and what followed.\n\n\
    A unit with no model (its process matches no process group, or its kind of unit on its\n\
    kind of connection never occurred in normal runs) is reported once per process or\n\
    connection kind, and a unit whose strongest evidence repeats one already reported in\n\
    its process once per evidence; the later ones are counted in that report (listed at\n\
    the end). Units that ended after their recording was asked to stop (`culprit record`\n\
    got SIGINT/SIGTERM and is stopping its programs: `stop.json`) are their shutdown: not\n\
    reported, counted at the end. With --json each report has `delay_ns`: where the time\n\
    from the unit's end to its report went (next_unit, to_poll, unseen, read, rank), and\n\
    the end prints the same over every unit that completed (`timing:`).")]
pub struct Args {
    /// The model (from `culprit learn` or `culprit merge`).
    #[arg(long, value_name = "MODEL")]
    pub model: PathBuf,
    /// Trace directories being recorded (or finished).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Report units scoring at least this (0 to 1).
    #[arg(long, value_name = "SCORE", default_value_t = 0.8, value_parser = parse_threshold)]
    pub threshold: f64,
    /// How often to look (e.g. 200ms, 1s): a poll starts this long after the previous
    /// one started (at once if that one took longer), when anything in the directories
    /// changed since — at least once a second otherwise.
    #[arg(long, value_name = "DUR", default_value = "100ms", value_parser = reader::iosample::parse_duration)]
    pub interval: Duration,
    /// One JSON object per line (the fields of `culprit rank --json`, plus
    /// `reported_unix_ns`) instead of text.
    #[arg(long)]
    pub json: bool,
    /// --keep-around (after each reported unit's end) and --snapshots.
    #[command(flatten)]
    pub around: super::aroundsnap::AroundArgs,
    /// Keep watching after the recording finished (by default the watch ends with it).
    #[arg(long)]
    pub forever: bool,
    /// Rank everything the directories hold on every poll, instead of what was written
    /// since the last one (plus a sub-buffer per thread): slower, for comparison.
    #[arg(long)]
    pub whole: bool,
    /// Rank only what was written since the last poll (the default; kept for scripts
    /// written when it was not).
    #[arg(long, conflicts_with = "whole")]
    pub incremental: bool,
    /// The score units are ranked by (see `culprit rank --score`).
    #[arg(long, value_name = "SCORE", default_value = "evidence")]
    pub score: analyzer::evidence::ScoreKind,
    /// Worker threads, 1 to 1024 (default: one per core).
    #[arg(long, value_name = "N", value_parser = super::outpath::parse_threads)]
    pub threads: Option<usize>,
}

fn parse_threshold(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?}: a score from 0 to 1")),
    }
}

/// True once every directory's reader finished.
fn finished(dirs: &[PathBuf]) -> bool {
    dirs.iter()
        .all(|d| reader::Manifest::read(d).is_ok_and(|m| m.complete))
}

/// Runs `culprit watch`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    set_threads(args.threads)?;
    let around = super::aroundsnap::Around::new(&args.dirs, &args.around, "watch")?;
    let model = Model::load(&args.model)?;
    // Every poll opens the directories again: each chunk file's record headers are read
    // once, not once a poll.
    reader::scanned::remember();
    // A watch prints the units above the threshold of each poll, as JSON or one line
    // each, never an annotated tree: the full form of a few units only (the defaults,
    // made for `culprit rank`'s page, annotate 200 trees and make 1 000 units whole on
    // every poll); the others' is made when one is reported (`Report::unit`,
    // `Report::why_of`). Scores do not depend on these.
    let rank = analyzer::Options {
        score: args.score,
        units_kept: 32,
        why_units: 0,
        trees_kept: 8,
        ..Default::default()
    };
    let mut w = Watcher::new(
        model,
        args.dirs.clone(),
        WatchOptions {
            threshold: args.threshold,
            rank,
            incremental: !args.whole,
        },
    );
    reader::signals::install(&[libc::SIGINT, libc::SIGTERM])
        .map_err(|e| anyhow::anyhow!("installing signal handlers: {e}"))?;
    let stop = reader::signals::stop_flag();
    // Snapshots are taken on a thread of their own: a report never waits for one.
    super::aroundsnap::with_ticker(around, |around| -> anyhow::Result<()> {
        let mut out = std::io::stdout().lock();
        let mut waiting_said = false;
        let mut last: Option<(u64, Instant)> = None;
        loop {
            let t = Instant::now();
            let done = finished(&args.dirs);
            // Nothing written since the last poll: nothing new to rank (a hole's patience
            // is still looked at once a second).
            let print = analyzer::watch::fingerprint(&args.dirs);
            if !done && last.is_some_and(|(p, at)| p == print && at.elapsed() < IDLE_POLL) {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                std::thread::sleep(args.interval.saturating_sub(t.elapsed()));
                continue;
            }
            last = Some((print, t));
            match w.poll() {
                Ok(p) => {
                    for a in &p.alerts {
                        if args.json {
                            writeln!(out, "{}", serde_json::to_string(&a.json)?)?;
                        } else {
                            writeln!(out, "{}", a.text)?;
                        }
                        around
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .request(a.end_unix_ns);
                    }
                    out.flush()?;
                }
                Err(e) if !waiting_said => {
                    eprintln!("culprit: watch: waiting for the recording ({e})");
                    waiting_said = true;
                }
                Err(_) => {}
            }
            if stop.load(Ordering::Acquire) || (done && !args.forever) {
                break;
            }
            std::thread::sleep(args.interval.saturating_sub(t.elapsed()));
        }
        Ok(())
    })?;
    let folds = w.folds();
    eprintln!(
        "culprit: watch: {} unit(s) reported; {} more folded into {} of them (a process or connection kind with no model, or the same evidence again)",
        w.reported(),
        folds.folded(),
        folds.all().len()
    );
    for f in folds.all().iter().take(FOLDS_SHOWN) {
        eprintln!(
            "culprit: watch:   {} ({}): {} later unit(s) folded into it",
            f.id, f.what, f.units
        );
    }
    if w.after_stop() > 0 {
        eprintln!(
            "culprit: watch: {} unit(s) scoring at least {} not reported: they ended after their recording was asked to stop (stop.json), while its programs were being stopped",
            w.after_stop(),
            args.threshold
        );
    }
    if args.json {
        eprintln!("culprit: watch: timing: {}", w.timing().summary());
    } else {
        eprintln!("culprit: watch: timing: {}", w.timing().text());
    }
    Ok(ExitCode::SUCCESS)
}
