//! `culprit cc` (being written).

use std::process::ExitCode;

/// Arguments of `culprit cc`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `culprit cc`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("culprit cc is not built yet")
}
