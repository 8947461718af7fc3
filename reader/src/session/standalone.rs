//! A standalone reader (`culprit reader`): drains a pool that programs started by hand
//! (with `LD_PRELOAD` and `CULPRIT_POOL` set) write into, optionally creating the pool
//! first, until SIGINT/SIGTERM/SIGHUP or, unless asked to keep running, until no traced
//! process maps the pool any more.
//!
//! The signal handlers are installed first: a signal that arrives while a large pool is
//! being created and pre-faulted stops the reader normally (removing the pool), not kills
//! it. Everything that can fail comes before the pool exists, so an error leaves no pool
//! file behind; a pool made here is removed at the end unless kept, or unless something in
//! it could not be saved.

use super::pool_file::check_space;
use super::preload::{find_libtrace, preload_value};
use super::supervise::SIGNALS;
use super::SessionError;
use crate::ReaderReport;
use bufpool::{Pool, PoolConfig, POOL_ENV};
use std::path::PathBuf;

/// The pool a standalone reader drains.
#[derive(Clone, Debug)]
pub enum PoolSource {
    /// An existing pool file.
    Open(PathBuf),
    /// A pool to create at `path` with `config`; removed at the end unless `keep`.
    Create {
        /// The pool file.
        path: PathBuf,
        /// Its geometry.
        config: PoolConfig,
        /// Keep the file at the end.
        keep: bool,
    },
}

/// A standalone reader.
#[derive(Clone, Debug)]
pub struct Standalone {
    /// The trace directory (created if needed; an interrupted one is resumed).
    pub out: PathBuf,
    /// The pool.
    pub pool: PoolSource,
    /// Drain threads (at least 1).
    pub readers: usize,
    /// Keep running after every traced process is gone (stop only on a signal).
    pub keep_running: bool,
    /// How often to save the committed prefix of sub-buffers writers still fill (`None`:
    /// never); see [`crate::live`].
    pub live_interval: Option<std::time::Duration>,
    /// The flight recorder's budgets (none: keep everything); see [`crate::keep`].
    pub keep: crate::keep::KeepOptions,
}

/// What a standalone reader says once it is draining.
#[derive(Debug)]
pub struct Ready {
    /// The pool file.
    pub pool_path: PathBuf,
    /// For a pool created here: the environment to put before the commands to trace
    /// (`LD_PRELOAD=… CULPRIT_POOL=…`).
    pub env_line: Option<String>,
    /// When it stops by itself: "stops on SIGINT/SIGTERM[ or when every traced process is
    /// gone]".
    pub stops: &'static str,
}

impl Standalone {
    /// Runs the reader: see the [module documentation](self). `ready` is called once the
    /// pool exists, before draining starts. The error of a failed drain says that the pool
    /// keeps what was not saved.
    pub fn run(&self, ready: &mut dyn FnMut(&Ready)) -> Result<ReaderReport, SessionError> {
        crate::signals::install(&SIGNALS).map_err(|source| SessionError::Os {
            what: "installing signal handlers",
            source,
        })?;
        crate::signals::install_snapshot().map_err(|source| SessionError::Os {
            what: "installing the SIGUSR1 handler",
            source,
        })?;
        let (pool, path, env_line) = match &self.pool {
            PoolSource::Open(path) => (Pool::open(path)?, path, None),
            PoolSource::Create { path, config, .. } => {
                config.validate()?;
                check_space(path, config).map_err(SessionError::Space)?;
                let lib = find_libtrace()?;
                let pool = Pool::create(path, config)?;
                let pre = preload_value(&lib, None);
                let line = format!(
                    "LD_PRELOAD={} {POOL_ENV}={}",
                    pre.to_string_lossy(),
                    path.display()
                );
                (pool, path, Some(line))
            }
        };
        ready(&Ready {
            pool_path: path.clone(),
            env_line,
            stops: if self.keep_running {
                "stops on SIGINT/SIGTERM"
            } else {
                "stops on SIGINT/SIGTERM or when every traced process is gone"
            },
        });
        let opts = crate::ReaderOptions {
            workers: self.readers.max(1),
            stop_when_unmapped: !self.keep_running,
            live_interval: self.live_interval,
            keep: self.keep,
            snapshot_on_usr1: true,
            ..Default::default()
        };
        let r = crate::run(&pool, &self.out, &opts, crate::signals::stop_flag());
        // A pool made here goes away at the end, unless something in it could not be saved.
        if let (PoolSource::Create { keep: false, .. }, Ok(_)) = (&self.pool, &r) {
            let _ = std::fs::remove_file(path);
        }
        r.map_err(|source| SessionError::Drain {
            pool: path.clone(),
            source,
        })
    }
}

/// The closing lines of a standalone reader: what it saved, the torn records it cut off
/// an interrupted directory, and what it left in the pool. `created`: the reader made the
/// pool itself (`--create`), so no torn record's sub-buffer was in it.
pub fn summary(rep: &ReaderReport, out: &std::path::Path, created: bool) -> Vec<String> {
    let t = &rep.manifest.totals;
    let mut lines = vec![format!(
        "saved {} process(es), {} thread(s), {} entries ({} bytes) to {}; {} lost",
        t.processes,
        t.threads,
        t.entries,
        t.bytes,
        out.display(),
        t.lost
    )];
    for r in &rep.repaired {
        // A pool this run created never held the torn record's sub-buffer: only the pool
        // the killed reader drained can give it again.
        let fate = if created {
            "its sub-buffer stayed in the pool the killed reader drained (drain that pool \
             with `culprit reader --pool FILE -o DIR` if it still exists)"
        } else {
            "its sub-buffer, never released, was saved again from the pool"
        };
        lines.push(format!(
            "cut a torn record off {} ({} → {} bytes: {}); {fate}",
            r.path.display(),
            r.old_len,
            r.new_len,
            r.why
        ));
    }
    if created && !rep.repaired.is_empty() {
        lines.push(format!(
            "(to repair a trace directory whose pool is gone, `culprit repair {}` does it \
             without creating a pool)",
            out.display()
        ));
    }
    if rep.left_owned > 0 {
        lines.push(format!(
            "warning: {} sub-buffer(s) still held by live processes were not saved",
            rep.left_owned
        ));
    }
    lines
}
