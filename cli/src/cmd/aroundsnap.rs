//! The snapshots `culprit watch` and `culprit demand --follow` take around what they
//! report: each report asks for a snapshot of every watched directory `--keep-around`
//! after the moment it is about (a unit's end, an alarm's third interval); one snapshot
//! serves every request due by the time it is taken, and requests still pending when the
//! recording ends are served then. Snapshots are taken on a thread of their own
//! ([`with_ticker`]): copying a window of hundreds of megabytes must not hold back the
//! reports that come after it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The `--keep-around` / `--snapshots` options, shared by both commands.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct AroundArgs {
    /// Freeze a snapshot of each directory this long after each report's moment (a unit's
    /// end, an alarm's third interval; e.g. 5s; `0` = at once), into --snapshots.
    #[arg(long, value_name = "DUR", value_parser = parse_around)]
    pub keep_around: Option<Duration>,
    /// Where snapshots go (default: beside each directory, `DIR.<command>-<unix s>`).
    #[arg(long, value_name = "DIR")]
    pub snapshots: Option<PathBuf>,
}

/// A duration as `--interval` takes it, or `0` (at once).
fn parse_around(s: &str) -> Result<Duration, String> {
    if s.trim().trim_end_matches(['s', 'm']).trim() == "0" {
        return Ok(Duration::ZERO);
    }
    reader::iosample::parse_duration(s)
}

/// Snapshots due, by time.
#[derive(Clone)]
pub struct Around {
    dirs: Vec<PathBuf>,
    args: AroundArgs,
    /// Name of the command, in the snapshots' names and the messages.
    what: &'static str,
    /// When each requested snapshot is due (ns since the epoch).
    due: Vec<i64>,
}

/// Now, in ns since the epoch.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

impl Around {
    /// Snapshots of `dirs` for command `what`; creates the --snapshots directory.
    pub fn new(dirs: &[PathBuf], args: &AroundArgs, what: &'static str) -> anyhow::Result<Around> {
        if let Some(s) = &args.snapshots {
            std::fs::create_dir_all(s)
                .map_err(|e| anyhow::anyhow!("{}: cannot create: {e}", s.display()))?;
        }
        Ok(Around {
            dirs: dirs.to_vec(),
            args: args.clone(),
            what,
            due: Vec::new(),
        })
    }

    /// Asks for a snapshot `--keep-around` after `moment_unix_ns` (nothing without
    /// `--keep-around`).
    pub fn request(&mut self, moment_unix_ns: i64) {
        if let Some(k) = self.args.keep_around {
            self.due
                .push(moment_unix_ns.saturating_add(k.as_nanos() as i64));
        }
    }

    /// True if a request is due by now, or if any is pending and the recording `ended`;
    /// the requests it serves are forgotten.
    fn due(&mut self, ended: bool) -> bool {
        let now = now_ns();
        if !(self.due.iter().any(|&d| d <= now) || (ended && !self.due.is_empty())) {
            return false;
        }
        self.due.clear();
        true
    }

    /// Takes one snapshot of each directory.
    fn take_all(&self) {
        for d in &self.dirs {
            self.take(d);
        }
    }

    fn take(&self, d: &Path) {
        let target = reader::snapshot::new_path(d, self.what, self.args.snapshots.as_deref());
        match reader::snapshot::snapshot(d, &target) {
            Ok(_) => eprintln!("culprit: {}: snapshot in {}", self.what, target.display()),
            Err(e) => eprintln!(
                "culprit: {}: snapshot of {} failed: {e}",
                self.what,
                d.display()
            ),
        }
    }
}

/// Runs `body`, which reports and [requests](Around::request) snapshots through the
/// mutex, while a thread of its own takes each snapshot as it falls due (polled every
/// 50 ms; the mutex is never held while a snapshot is copied); then serves what is still
/// pending, as at the recording's end.
pub fn with_ticker<T>(around: Around, body: impl FnOnce(&Mutex<Around>) -> T) -> T {
    let taker = around.clone();
    let around = Mutex::new(around);
    let finished = AtomicBool::new(false);
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            while !finished.load(Ordering::Acquire) {
                let go = around.lock().unwrap_or_else(|p| p.into_inner()).due(false);
                if go {
                    taker.take_all();
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let r = body(&around);
        finished.store(true, Ordering::Release);
        r
    });
    if around
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .due(true)
    {
        taker.take_all();
    }
    r
}
