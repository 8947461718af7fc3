//! `culprit reader` (being written; see issue 3).

use std::process::ExitCode;

/// Arguments of `culprit reader`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `culprit reader`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("culprit reader is not built yet")
}
