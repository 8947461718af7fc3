//! `culprit repair DIR` — recover what a full disk or a killed reader left in a trace
//! directory (see `reader::repairdir`): remove chunk files cut inside their header, cut
//! torn last records, complete an unfinished manifest. Idempotent.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `culprit repair`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Damage that is not a torn tail (flipped bytes, a bad record in the \
    middle of a file) is left as it is: dump, learn, rank and show skip exactly it, with a \
    warning. A torn record's sub-buffer is still in the pool if the pool survives: drain it \
    first with `culprit reader --pool FILE -o DIR`."
)]
pub struct Args {
    /// The trace directory to repair.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Runs `culprit repair`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rep = reader::repair_dir(&args.dir)?;
    if let Some(who) = &rep.live {
        eprintln!(
            "culprit: {}: still being written ({who}): left as it is; repair it once the \
             recording has ended",
            args.dir.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    for (p, len) in &rep.removed {
        eprintln!(
            "culprit: removed {} ({len} bytes, cut inside its file header: nothing in it)",
            p.display()
        );
    }
    for (p, old, new) in &rep.cut {
        eprintln!(
            "culprit: cut a torn last record off {} ({old} → {new} bytes)",
            p.display()
        );
    }
    for d in &rep.left {
        eprintln!("culprit: left as it is (readers skip it): {d}");
    }
    match &rep.manifest {
        Some(m) => eprintln!(
            "culprit: {} the manifest of {}{}: {} process(es), {} entries, {} lost",
            if rep.rewritten_because.is_some() {
                "rewrote"
            } else {
                "completed"
            },
            args.dir.display(),
            rep.rewritten_because
                .as_ref()
                .map_or(String::new(), |w| format!(" ({w})")),
            m.totals.processes,
            m.totals.entries,
            m.totals.lost
        ),
        None if rep.removed.is_empty() && rep.cut.is_empty() => eprintln!(
            "culprit: {}: nothing to repair{}",
            args.dir.display(),
            if rep.left.is_empty() {
                ""
            } else {
                " (the damage above cannot be repaired, only skipped)"
            }
        ),
        None => {}
    }
    Ok(ExitCode::SUCCESS)
}
