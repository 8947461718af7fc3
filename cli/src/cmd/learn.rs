//! `culprit learn` (being written).

use std::process::ExitCode;

/// Arguments of `culprit learn`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `culprit learn`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("culprit learn is not built yet")
}
