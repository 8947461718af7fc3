//! A recording session: what `culprit record` does between parsing its flags and exiting.
//!
//! [`Session::run`] creates the pool, starts the drain threads ([`crate::run`]), runs the
//! command with `libtrace.so` preloaded and the pool named in its environment, follows its
//! whole process tree (children that daemonize included: the session is a child
//! subreaper), passes signals on to it, drains what is left, and returns the command's
//! exit status with what the reader saved ([`Recording`]).
//!
//! ```text
//!  Session::run ─ create pool (else: run the command untraced, Notice::Untraced)
//!       │         prepare the trace directory, become subreaper, install SIGINT/TERM/HUP
//!       ├─ drain threads: crate::run(pool, out) until told the tree is gone
//!       └─ this thread: spawn CMD (LD_PRELOAD=libtrace.so, CULPRIT_POOL=pool)
//!                       reap the tree; on a signal: forward it (supervise::forward)
//!                       → exit status; stop the drain; Recording
//! ```
//!
//! Policies, each at its place: the exit status is the command's, `128 + signal` when a
//! signal killed it, 127 when it cannot be started (as a shell); a pool that cannot be
//! created runs the command untraced (the command matters more than its trace); a pool
//! whose contents could not all be saved is kept, to be drained again by `culprit reader`;
//! see [`supervise`] for the signal policy.
//!
//! - [`preload`]: finding `libtrace.so`, building `LD_PRELOAD`.
//! - [`pool_file`]: where the pool and the trace go by default; room for the pool.
//! - [`supervise`]: running and reaping the traced tree, forwarding signals.
//! - [`standalone`]: a reader alone (`culprit reader`), for programs started by hand.
//! - [`outcome`]: what a session reports as it goes ([`Notice`]) and at the end
//!   ([`Recording`]).

pub mod outcome;
pub mod pool_file;
pub mod preload;
pub mod standalone;
pub mod supervise;

pub use outcome::{Notice, Recording, Traced};
pub use pool_file::{check_space, default_out_dir, default_pool_path};
pub use preload::{find_libtrace, preload_value, LIBTRACE_ENV};

use bufpool::{Pool, PoolConfig, PoolError};
use std::ffi::OsString;
use std::path::PathBuf;

/// What can stop a session before the command's exit status is known.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The pool geometry is invalid.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// `libtrace.so` cannot be found.
    #[error("{0}")]
    Libtrace(String),
    /// The file system of the pool has no room for it.
    #[error("{0}")]
    Space(String),
    /// The output directory already holds a trace.
    #[error("{} already holds a trace: choose another output directory (-o)", .0.display())]
    OutputExists(PathBuf),
    /// The trace directory cannot be prepared.
    #[error(transparent)]
    Reader(#[from] crate::Error),
    /// A system call the supervision needs failed.
    #[error("{what}: {source}")]
    Os {
        /// What was being done.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The output directory cannot be made, or written in: found before the pool exists,
    /// so nothing is left behind.
    #[error("{}: {why}", .path.display())]
    OutputDir {
        /// The directory.
        path: PathBuf,
        /// What is wrong.
        why: &'static str,
        /// The OS error, if any.
        source: Option<std::io::Error>,
    },
    /// The command cannot be run untraced either.
    #[error("{why}")]
    Spawn {
        /// Why, in a shell's words ([`supervise::spawn_error`]).
        why: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A standalone reader failed; the pool keeps what was not saved.
    #[error("the pool {} keeps what was not saved", .pool.display())]
    Drain {
        /// The pool file.
        pool: PathBuf,
        /// What failed.
        source: crate::Error,
    },
    /// No command was given.
    #[error("no command to record")]
    NoCommand,
    /// The drain thread panicked.
    #[error("the reader thread panicked")]
    ReaderPanicked,
}

/// What to record and how. Build it with [`Session::new`] and adjust the fields.
#[derive(Clone, Debug)]
pub struct Session {
    /// The command and its arguments (not empty).
    pub command: Vec<OsString>,
    /// The trace directory to write (must not hold a trace yet).
    pub out: PathBuf,
    /// The pool file to create.
    pub pool_path: PathBuf,
    /// The pool's geometry.
    pub pool: PoolConfig,
    /// `libtrace.so` (default: [`find_libtrace`] when the session runs).
    pub libtrace: Option<PathBuf>,
    /// The value of `bufpool::inject::INJECT_ENV` for the traced processes, from
    /// `bufpool::inject::encode_env` (default: none, nothing injected).
    pub inject_env: Option<String>,
    /// Drain threads (default 2; at least 1).
    pub readers: usize,
    /// Keep the pool file at the end even if everything was saved (default false).
    pub keep_pool: bool,
    /// How often the readers save the committed prefix of sub-buffers writers still fill
    /// (default [`crate::daemon::DEFAULT_LIVE_INTERVAL`]; `None`: never).
    pub live_interval: Option<std::time::Duration>,
    /// More environment for the traced command (default none): for one, what lets Python
    /// processes trace their functions with nothing installed (`python_hook::record_env`).
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    /// The flight recorder's budgets (default: none, keep everything); see
    /// [`crate::keep`].
    pub keep: crate::keep::KeepOptions,
}

impl Session {
    /// A session recording `command` into `out`, with a default pool: the default geometry
    /// in a new file under /dev/shm ([`default_pool_path`]), two drain threads.
    pub fn new(command: Vec<OsString>, out: PathBuf) -> Session {
        Session {
            command,
            out,
            pool_path: default_pool_path(),
            pool: PoolConfig::default(),
            libtrace: None,
            inject_env: None,
            readers: 2,
            keep_pool: false,
            live_interval: Some(crate::daemon::DEFAULT_LIVE_INTERVAL),
            env: Vec::new(),
            keep: Default::default(),
        }
    }

    /// Runs the session: see the [module documentation](self). `notice` hears what happens
    /// on the way (before the command's own output, when it says the command runs
    /// untraced). Errors are what prevents running the command at all, or knowing how it
    /// ended; a reader that fails after the command ran is in [`Traced::report`].
    pub fn run(&self, notice: &mut dyn FnMut(Notice<'_>)) -> Result<Recording, SessionError> {
        if self.command.is_empty() {
            return Err(SessionError::NoCommand);
        }
        self.pool.validate()?;
        // A command that cannot start leaves nothing behind: no directory, no pool.
        if let Err(error) = supervise::findable(&self.command[0]) {
            notice(Notice::CannotRun {
                command: &self.command[0],
                error,
            });
            return Ok(Recording {
                status: 127,
                traced: None,
            });
        }
        let lib = match &self.libtrace {
            Some(l) => l.clone(),
            None => find_libtrace()?,
        };
        let out = &self.out;
        if out.join(bufpool::disk::MANIFEST_FILE).exists() {
            return Err(SessionError::OutputExists(out.clone()));
        }
        check_output_dir(out)?;
        let pool_path = &self.pool_path;
        let created = check_space(pool_path, &self.pool)
            .and_then(|()| Pool::create(pool_path, &self.pool).map_err(|e| e.to_string()));
        let pool = match created {
            Ok(p) => Some(p),
            Err(why) => {
                notice(Notice::Untraced {
                    why,
                    command: &self.command[0],
                });
                None
            }
        };
        let Some(pool) = pool else {
            let status = supervise::run_untraced(&self.command)?;
            return Ok(Recording {
                status,
                traced: None,
            });
        };
        let (status, report) = match supervise::record(self, &pool, &lib, notice) {
            Ok(r) => r,
            Err(e) => {
                // Nothing ran into the pool: it goes, not to leak.
                if pool
                    .shared()
                    .writers_attached
                    .load(std::sync::atomic::Ordering::Relaxed)
                    == 0
                {
                    let _ = std::fs::remove_file(pool_path);
                }
                return Err(e);
            }
        };
        let saved_all = report.is_ok();
        let pool_kept = !saved_all || self.keep_pool;
        if !pool_kept {
            let _ = std::fs::remove_file(pool_path);
        }
        Ok(Recording {
            status,
            traced: Some(Traced {
                out: out.clone(),
                pool_path: pool_path.clone(),
                pool_kept,
                report,
            }),
        })
    }
}

/// Checks, before a pool exists, that `out` can become a trace directory: creates it if
/// needed and checks that it is a directory the session may write in. A bad `-o` is then an
/// error that leaves nothing behind (no pool in /dev/shm).
fn check_output_dir(out: &std::path::Path) -> Result<(), SessionError> {
    let err = |why, source| SessionError::OutputDir {
        path: out.to_path_buf(),
        why,
        source,
    };
    if std::fs::symlink_metadata(out).is_ok() && !std::fs::metadata(out).is_ok_and(|m| m.is_dir()) {
        return Err(err(
            "the output directory exists and is not a directory",
            None,
        ));
    }
    crate::safefile::private_dir(out).map_err(|e| match e {
        crate::Error::Io { source, .. } => err("cannot create the output directory", Some(source)),
        other => SessionError::Reader(other),
    })?;
    let probe = out.join(format!(".culprit-probe-{}", std::process::id()));
    crate::safefile::create_new(&probe)
        .map_err(|e| err("cannot write in the output directory", Some(e)))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}
