//! Errors of reading and writing trace directories. Each names the file, and for a
//! damaged file the byte offset.

use bufpool::disk::{ChunkError, DiskError};
use bufpool::format::DecodeError;
use std::path::PathBuf;

/// What went wrong with a trace directory or a pool.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O error on a file of the trace directory.
    #[error("{path}: {what}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The directory is not a trace directory (or not yet one).
    #[error("{path}: not a Culprit trace directory: {why}")]
    NotATrace {
        /// The directory.
        path: PathBuf,
        /// What is missing.
        why: String,
    },
    /// `manifest.json` cannot be parsed.
    #[error("{path}: bad manifest: {why}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A chunk file is damaged.
    #[error("{path}: {err}{}", repair_hint(err))]
    Chunk {
        /// The chunk file.
        path: PathBuf,
        /// What is wrong, and at which offset.
        err: ChunkError,
    },
    /// A recorded entry cannot be decoded (offsets are file offsets).
    #[error("{path}: {err}")]
    Decode {
        /// The chunk file.
        path: PathBuf,
        /// What is wrong, and at which offset of the file.
        err: DecodeError,
    },
    /// The pool could not be used.
    #[error(transparent)]
    Pool(#[from] bufpool::PoolError),
    /// A file the trace should hold as a regular file is something else.
    #[error("{path}: {kind}, not a regular file")]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// A file or directory another user could write, replace or plant links in
    /// (`bufpool::access`): not used.
    #[error("{path}: not used: {why}")]
    Untrusted {
        /// The file or directory.
        path: PathBuf,
        /// Who else controls it.
        why: String,
    },
    /// A file is larger than any valid one.
    #[error("{path}: larger than {max} bytes, more than any valid file of its kind")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The bound.
        max: u64,
    },
    /// The trace is damaged or incomplete and strict reading was asked for.
    #[error("{dir}: damaged or incomplete trace (--strict): {first}")]
    Damaged {
        /// The trace directory.
        dir: PathBuf,
        /// The first damage found.
        first: String,
    },
    /// Not even one drain thread could be started (a thread limit).
    #[error("cannot start a drain thread: {source}")]
    Spawn {
        /// The OS error.
        source: std::io::Error,
    },
    /// A drain thread could not save what it took (the sub-buffers stay in the pool).
    #[error("saving to {path} failed ({kept} sub-buffer(s) left in the pool): {source}")]
    Save {
        /// The chunk file.
        path: PathBuf,
        /// Sub-buffers left written in the pool.
        kept: usize,
        /// The OS error.
        source: std::io::Error,
    },
}

impl From<DiskError> for Error {
    fn from(e: DiskError) -> Self {
        match e {
            DiskError::Io { path, what, source } => Error::Io { path, what, source },
            DiskError::Chunk { path, err } => Error::Chunk { path, err },
        }
    }
}

/// What to do about a torn record (the file ends inside it): `culprit repair` cuts it.
fn repair_hint(err: &ChunkError) -> &'static str {
    if matches!(err.kind, bufpool::disk::ChunkErrorKind::Truncated { .. }) {
        " (a torn last record, left by a killed reader or a full disk: `culprit repair DIR` \
         cuts it off)"
    } else {
        ""
    }
}

/// Shorthand.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn io(
    path: impl Into<PathBuf>,
    what: &'static str,
) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { path, what, source }
}
