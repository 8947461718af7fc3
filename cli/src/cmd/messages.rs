//! `culprit messages`: who sent what to whom — every byte sent matched to where it was
//! received, per connection, with waits per peer (analyzer::messages).

use analyzer::messages;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `culprit messages`.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  \
    culprit messages trace/                 # one host\n  \
    culprit messages host-a/ host-b/ --json # several hosts, machine-readable\n\n\
    Sends are matched to receives in byte offsets on every connection whose two ends were\n\
    traced (TCP, UNIX stream, socketpair; a TCP end met already open is aligned by the\n\
    kernel's byte counts) and datagrams by source, destination, size and order (with lost,\n\
    reordered and duplicated counts); what cannot be matched is listed with the reason\n\
    (peer_untraced, no_setup, lost_in_flight, not_received, gap, inconsistent,\n\
    datagram_lost, ambiguous, duplicated, no_address, before_trace, offsets_unknown).")]
pub struct Args {
    /// Trace directories (one per host or run), or trees of them.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Print JSON (`connections`, `totals`, `processes`, `clock_offsets`…).
    #[arg(long)]
    pub json: bool,
}

/// Runs `culprit messages`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let set = super::common::open_any(&args.dirs)?;
    let m = messages::analyze(&set)?;
    let s = messages::summary::summarize(&m);
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &s)?;
        writeln!(out)?;
    } else {
        out.write_all(messages::summary::text(&s).as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}
