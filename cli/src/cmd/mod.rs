//! One module per subcommand. Each defines `Args` (clap) and `run(Args) -> Result<ExitCode>`.

pub mod dump;
pub mod reader;
pub mod record;
