//! One module per subcommand. Each defines `Args` (clap) and `run(Args) -> Result<ExitCode>`.

pub mod cc;
pub mod dump;
pub mod iosample;
pub mod ioshare;
pub mod learn;
pub mod merge;
pub mod rank;
pub mod reader;
pub mod record;
pub mod show;
