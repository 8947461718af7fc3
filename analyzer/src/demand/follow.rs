//! **Follow**: the demand stage run again and again over trace directories while they
//! are being written, printing each alarm once, as soon as the interval that completes it
//! is on disk.
//!
//! Each round (one per interval) opens the directories afresh, reads what the readers
//! have saved so far and runs [`super::analyze`]; an alarm not printed before is printed.
//! A round that cannot read the directories yet (no manifest, a record being written) is
//! retried at the next. An alarm is printed once its third interval has ended (while the
//! recording goes on, the last interval may show only its first part), and once: a later round that places the same run
//! of violations differently (more data) prints nothing new. Give the training window in
//! seconds (`Train::Seconds`) or a baseline: a fraction of a run still being written
//! moves with it (the command line defaults to the first 10 intervals when following). Following ends once every directory's manifest says it is
//! complete (the reader finished), after one last round, or when `stop` is set.
//!
//! What reaches the disk is what the readers have saved: whole sub-buffers when their
//! writers fill them or hand them over, and — the live data path, `reader::live` — the
//! committed prefix of every sub-buffer a writer is still filling, every `--live-interval`
//! of the recording (default 100 ms). So an event is on disk within about that interval
//! whatever the sub-buffer size, and an alarm is printed within about one interval (the
//! round period) plus the analysis time of its third interval's end
//! (`target/release/demand --only live`: 0.97 s with the default 256 KiB sub-buffers).

use super::{analyze, DemandReport, Options};
use crate::decode::TraceSet;
use crate::error::Result;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One alarm as [`follow`] reports it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LiveAlarm {
    /// Host.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Executable.
    pub exe: String,
    /// How the process is named in every view ([`crate::procname::ProcLabel::text`]).
    pub process: String,
    /// The alarm.
    #[serde(flatten)]
    pub alarm: super::chart::Alarm,
    /// When it was found (unix ns).
    pub found_unix_ns: i64,
}

/// Follows `dirs` (and `baseline` trace directories, read once), calling `on_alarm` for
/// each new alarm. Returns the last report, if any round could read the directories.
pub fn follow(
    dirs: &[PathBuf],
    opts: &Options,
    stop: &AtomicBool,
    mut on_alarm: impl FnMut(&LiveAlarm),
) -> Result<Option<DemandReport>> {
    // Per process, the end of the last alarm printed: a later round may place the same
    // run of violations an interval earlier or later (more data, a longer training
    // window); only a run that begins after it is a new alarm.
    let mut printed: BTreeMap<(String, u32), i64> = BTreeMap::new();
    let mut last = None;
    let period = Duration::from_nanos(opts.interval_ns.clamp(10_000_000, 60_000_000_000) as u64);
    let mut last_err;
    loop {
        let round = Instant::now();
        let complete = dirs
            .iter()
            .all(|d| reader::Manifest::read(d).is_ok_and(|m| m.complete));
        match round_once(dirs, opts) {
            Ok(r) => {
                for p in &r.processes {
                    for a in &p.alarms {
                        // The third interval must have ended: a run still being
                        // written may show an interval's first part only.
                        if !complete && a.t_unix_ns > now_unix_ns() {
                            continue;
                        }
                        let last = printed.entry((p.host.clone(), p.pid)).or_insert(i64::MIN);
                        if a.first_violation_unix_ns >= *last {
                            *last = a.t_unix_ns;
                            on_alarm(&LiveAlarm {
                                host: p.host.clone(),
                                pid: p.pid,
                                exe: p.exe.clone(),
                                process: p.process.clone(),
                                alarm: a.clone(),
                                found_unix_ns: now_unix_ns(),
                            });
                        }
                    }
                }
                last = Some(r);
                last_err = None;
            }
            Err(e) => last_err = Some(e),
        }
        if complete || stop.load(Ordering::Acquire) {
            break;
        }
        let wait = period.saturating_sub(round.elapsed());
        let t = Instant::now();
        while t.elapsed() < wait && !stop.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(20).min(wait));
        }
    }
    match (last, last_err) {
        (None, Some(e)) => Err(e),
        (last, _) => Ok(last),
    }
}

fn round_once(dirs: &[PathBuf], opts: &Options) -> Result<DemandReport> {
    let set = TraceSet::open(dirs)?;
    let mut o = opts.clone();
    for d in dirs {
        o.cpu.extend(reader::cpustat::read_samples_or_warn(d));
    }
    analyze(&set, &o)
}

fn now_unix_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}
