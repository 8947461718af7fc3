//! `culprit merge` (being written).

use std::process::ExitCode;

/// Arguments of `culprit merge`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `culprit merge`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("culprit merge is not built yet")
}
