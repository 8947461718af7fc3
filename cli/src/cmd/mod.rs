//! One module per subcommand. Each defines `Args` (clap) and `run(Args) -> Result<ExitCode>`.

pub mod aroundsnap;
pub mod cc;
pub mod cluster;
pub mod common;
pub mod demand;
pub mod dump;
pub mod export;
pub mod iosample;
pub mod ioshare;
pub mod learn;
pub mod merge;
pub mod messages;
pub mod outpath;
pub mod rank;
pub mod reader;
pub mod record;
pub mod repair;
pub mod show;
pub mod snapshot;
pub mod timeline;
pub mod watch;
