//! `culprit timeline`: the time–process diagram and the process-state diagram of a run,
//! as one HTML page (analyzer::messages::timeline).

use analyzer::messages::{self, links::UnitSpan, timeline::TimelineUnit};
use analyzer::model::Model;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `culprit timeline`.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  \
    culprit timeline trace/ -o run.html\n  \
    culprit timeline faulty/ --model model.cpm -o faulty.html   # units coloured by score\n\n\
    A lane per process (threads as sub-lanes) with its waits (receive, multiplexer, send), an\n\
    arrow per matched message, execution units as bars, injected faults as red marks. Wheel\n\
    to zoom, drag to pan, double-click to see everything again.")]
pub struct Args {
    /// Trace directories, or trees of them (`DIR/<host>/<job.step.task>/`).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Where to write the page.
    #[arg(short, long, value_name = "FILE.html")]
    pub output: PathBuf,
    /// Colour units by their suspect score under this model (`culprit learn`).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<PathBuf>,
    /// Open on this part of the run: two fractions of its span, e.g. `0.8,1`.
    #[arg(long, value_name = "FROM,TO", value_parser = parse_window)]
    pub window: Option<(f64, f64)>,
    /// Leave out the execution units.
    #[arg(long, conflicts_with = "model")]
    pub no_units: bool,
}

/// Runs `culprit timeline`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let set = super::common::open_any(&args.dirs)?;
    let m = messages::analyze(&set)?;
    let units: Vec<TimelineUnit> = match &args.model {
        Some(path) => {
            let model = Model::load(path)?;
            let report = analyzer::rank(&model, &set, &analyzer::Options::default())?;
            report
                .iter()
                .map(|u| TimelineUnit {
                    span: UnitSpan::of(&u.info),
                    score: Some(u.score),
                })
                .collect()
        }
        None if args.no_units => Vec::new(),
        None => messages::export::units_of(&set)?
            .into_iter()
            .map(|span| TimelineUnit { span, score: None })
            .collect(),
    };
    let st = messages::timeline::write(&m, &units, args.window, &args.output)?;
    let labels = analyzer::procname::labels(&set)?;
    for n in analyzer::procname::unseen_notes(&set, &labels) {
        eprintln!("culprit: {n}");
    }
    eprintln!(
        "timeline of {} threads, {} messages, {} units → {}",
        st.lanes,
        st.messages,
        st.units,
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn parse_window(s: &str) -> Result<(f64, f64), String> {
    let (a, b) = s
        .split_once(',')
        .ok_or_else(|| format!("`{s}`: expected FROM,TO (fractions of the run, e.g. 0.8,1)"))?;
    let f = |x: &str| {
        x.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| (0.0..=1.0).contains(v))
            .ok_or_else(|| format!("`{x}`: not a fraction between 0 and 1"))
    };
    let (a, b) = (f(a)?, f(b)?);
    if b <= a {
        return Err(format!("`{s}`: TO must be greater than FROM"));
    }
    Ok((a, b))
}
