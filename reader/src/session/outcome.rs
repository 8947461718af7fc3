//! What a session reports: [`Notice`]s as it goes, a [`Recording`] at the end. Both
//! render as the lines `culprit record` prints on stderr (after its `culprit: ` prefix).

use crate::ReaderReport;
use std::ffi::OsStr;
use std::fmt;
use std::path::PathBuf;

/// Something a session says while it runs.
#[derive(Debug)]
pub enum Notice<'a> {
    /// The pool cannot be created: the command runs untraced.
    Untraced {
        /// Why the pool cannot be created.
        why: String,
        /// The command (its first word).
        command: &'a OsStr,
    },
    /// The command cannot be started: the session's status is 127.
    CannotRun {
        /// The command (its first word).
        command: &'a OsStr,
        /// Why.
        error: std::io::Error,
    },
    /// A second interrupt: every traced process is being killed.
    Killing {
        /// How many processes.
        processes: usize,
    },
}

impl fmt::Display for Notice<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::Untraced { why, command } => write!(
                f,
                "warning: cannot create the pool ({why}); running {} untraced",
                command.to_string_lossy()
            ),
            Notice::CannotRun { command, error } => {
                write!(
                    f,
                    "error: {}",
                    super::supervise::spawn_error(command, error)
                )
            }
            Notice::Killing { processes } => write!(
                f,
                "second interrupt: killing {processes} traced process(es)"
            ),
        }
    }
}

/// How a session ended.
#[derive(Debug)]
pub struct Recording {
    /// The exit status a shell would report for the command: its exit code, 128 + the
    /// signal that killed it, or 127 if it could not be started.
    pub status: u8,
    /// The trace, unless the command ran untraced ([`Notice::Untraced`]).
    pub traced: Option<Traced>,
}

/// What was recorded.
#[derive(Debug)]
pub struct Traced {
    /// The trace directory.
    pub out: PathBuf,
    /// The pool file.
    pub pool_path: PathBuf,
    /// Whether the pool file was left in place: asked for, or because the reader failed
    /// and it holds what could not be saved.
    pub pool_kept: bool,
    /// What the reader saved, or why it failed (the trace is then incomplete).
    pub report: Result<ReaderReport, crate::Error>,
}

impl Recording {
    /// The closing lines: what was recorded, how much was lost, and what to do about it
    /// (none for an untraced run).
    pub fn summary(&self) -> Vec<String> {
        let Some(t) = &self.traced else {
            return Vec::new();
        };
        let mut lines = Vec::new();
        match &t.report {
            Ok(rep) => {
                let n = &rep.manifest.totals;
                lines.push(format!(
                    "recorded {} process(es), {} thread(s), {} entries ({} bytes) to {}; {} lost",
                    n.processes,
                    n.threads,
                    n.entries,
                    n.bytes,
                    t.out.display(),
                    n.lost
                ));
                if n.lost > 0 || n.acquire_failures > 0 {
                    lines.push(format!(
                        "the pool was full at times ({} failed sub-buffer requests): enlarge it \
                         with --subbufs or --subbuf-size",
                        n.acquire_failures
                    ));
                }
                if n.meta_dropped > 0 {
                    lines.push(format!(
                        "warning: {} metadata record(s) could not be kept until a sub-buffer \
                         was free",
                        n.meta_dropped
                    ));
                }
                if rep.left_owned > 0 {
                    lines.push(format!(
                        "warning: {} sub-buffer(s) were still held by live processes",
                        rep.left_owned
                    ));
                }
            }
            Err(e) => {
                lines.push(format!(
                    "error: the reader failed; the trace in {} is incomplete: {}",
                    t.out.display(),
                    error_chain(e)
                ));
                lines.push(format!(
                    "the pool {} is kept with what could not be saved: drain it with \
                     `culprit reader --pool {} -o DIR`",
                    t.pool_path.display(),
                    t.pool_path.display()
                ));
            }
        }
        lines
    }
}

/// An error and its sources, joined by `: ` (as `anyhow` prints `{:#}`).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let t = c.to_string();
        if !s.ends_with(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = c.source();
    }
    s
}
