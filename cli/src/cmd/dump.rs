//! `culprit dump` (being written; see issue 3).

use std::process::ExitCode;

/// Arguments of `culprit dump`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `culprit dump`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("culprit dump is not built yet")
}
