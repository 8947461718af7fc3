//! `culprit show` (being written).

use std::process::ExitCode;

/// Arguments of `culprit show`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `culprit show`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("culprit show is not built yet")
}
