//! `culprit rank` (being written).

use std::process::ExitCode;

/// Arguments of `culprit rank`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `culprit rank`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("culprit rank is not built yet")
}
