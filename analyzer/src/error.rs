//! Typed errors of every stage. Each names the file (and the byte offset) it is about.

use std::path::PathBuf;

/// Everything that can go wrong while analyzing traces or handling model files.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading a file failed.
    #[error("{path}: {what}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// A trace chunk holds an entry that cannot be decoded.
    #[error("{path}: {source}")]
    Decode {
        /// The file holding the chunk (or a description of an in-memory chunk).
        path: PathBuf,
        /// The decoder's error, with the byte offset in that file.
        source: bufpool::format::DecodeError,
    },
    /// A trace directory could not be read (the reader's error names the file and offset).
    #[error(transparent)]
    Reader(reader::Error),
    /// A trace directory is not usable.
    #[error("{path}: {why}")]
    BadTrace {
        /// The directory or file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A model file is not usable.
    #[error("{path}: not a usable Culprit model: {why}")]
    BadModel {
        /// The model file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A unit id given by the user does not exist.
    #[error("no unit {0} in these traces (ids are listed by `culprit rank`)")]
    NoSuchUnit(String),
}

impl From<reader::Error> for Error {
    fn from(e: reader::Error) -> Self {
        Error::Reader(e)
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
