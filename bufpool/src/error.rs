//! Errors of pool creation and opening. Each names the pool file.

use std::path::PathBuf;

/// What is wrong with a pool file.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// An I/O error (create, open, resize, map).
    #[error("{path}: {what}: {source}")]
    Io {
        /// The pool file.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not a pool, or not one this version can use.
    #[error("{path}: not a usable Culprit pool: {why}")]
    Invalid {
        /// The pool file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The requested geometry is out of range.
    #[error("invalid pool geometry: {0}")]
    Geometry(String),
}
