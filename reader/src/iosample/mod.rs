//! Per-process IO sampling for `culprit iosample` (SPEC §9, Saeki 2010): the counters any
//! user can read without changing the kernel — `/proc/[pid]/io`, `/proc/[pid]/fd`,
//! `/proc/diskstats` — taken on absolute deadlines, with the final counters of exited
//! processes from taskstats, appended to a compact versioned file that `culprit ioshare`
//! turns into per-process shares of a file server's load.
//!
//! - [`format`](mod@format): the file — framed, CRC-checked records; layout documented there.
//! - [`procfs`]: reading `/proc`.
//! - [`taskstats`]: exit notifications over generic netlink.
//! - [`backlog`]: bytes queued unread in the server's sockets (`NETLINK_SOCK_DIAG`).
//! - [`backlog_watch`]: the server's sockets followed between dumps by lookups.
//! - [`intake`]: the bytes the server processes have read from their TCP sockets.
//! - `netlink`: the socket calls taskstats and sock_diag share.
//! - [`sampler`]: the sampling loop ([`run`]).
//! - [`log`]: the file read back as per-process series ([`SampleLog`]).
//!
//! ```no_run
//! use reader::iosample::{self, SamplerOptions, Selection};
//! use std::sync::atomic::AtomicBool;
//! let opts = SamplerOptions { selection: Selection::Pids(vec![1234]), ..Default::default() };
//! let stop = AtomicBool::new(false);
//! let report = iosample::run("io.cios".as_ref(), &opts, &stop, || false).unwrap();
//! println!("jitter p99 {} µs", report.jitter_p99_ns / 1000);
//! let log = iosample::SampleLog::open("io.cios".as_ref()).unwrap();
//! println!("{} samples of {} processes", log.samples.len(), log.processes.len());
//! ```

pub mod backlog;
pub mod backlog_watch;
pub mod format;
pub mod intake;
pub mod log;
mod netlink;
pub mod procfs;
pub mod sampler;
pub mod taskstats;

pub use format::{Counters, FormatError};
pub use log::{ProcSeries, SampleLog, SampleTime};
pub use sampler::{run, SamplerOptions, SamplerReport, Selection};

/// The longest duration a flag takes (a year, in seconds).
pub const MAX_DURATION_S: f64 = 365.0 * 86400.0;

/// Parses a duration: `100ms`, `0.5s`, `2s`, `1m`, `250us`, or plain seconds (`0.1`),
/// positive and at most [`MAX_DURATION_S`].
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: not a duration (try 100ms, 0.5s, 2s)"))?;
    let mult = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "m" | "min" => 60.0,
        u => return Err(format!("{s:?}: unknown unit {u:?} (ns, us, ms, s, m)")),
    };
    let secs = v * mult;
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!("{s:?}: must be positive"));
    }
    if secs > MAX_DURATION_S {
        return Err(format!("{s:?}: at most a year"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}
