//! `culprit record` (being written; see issue 3).

use std::process::ExitCode;

/// Arguments of `culprit record`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `culprit record`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("culprit record is not built yet")
}
