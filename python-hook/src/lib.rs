//! `python-hook` — Python tracing under `culprit record` with nothing installed.
//!
//! The Python shim `culprit_trace` (this directory's package: a C profile / `sys.monitoring`
//! callback in `src/native.c`, its Python front in `culprit_trace/`) is embedded in this crate
//! ([`sources`]). Before `culprit record` starts its command, [`prepare`] copies it into a
//! per-user cache keyed by the shim's version and its sources' hash ([`cache`]) — a bootstrap
//! directory holding the package and a `sitecustomize.py` — and [`Prepared::env`] puts that
//! directory first on `PYTHONPATH`. Every CPython process of the traced tree (virtualenvs,
//! interpreters started deep in the tree or by `exec`, however many versions) then runs the
//! bootstrap at start-up: it loads the extension built for its own ABI from the cache, or
//! builds it there once (`culprit_trace/_bootstrap.py`), falling back to the pure-Python
//! tracer with one line on stderr, and then runs the program's own `sitecustomize`.
//! [`Prepared::prebuild`] builds the extension beforehand for the interpreter `culprit
//! record` is about to start ([`interpreter_of`]), so that the usual case compiles nothing
//! inside the traced tree.
//!
//! `pip install ./python-hook` still installs the same package the classic way.

pub mod cache;
pub mod sources;

pub use cache::{interpreter_of, prepare, Prepared};

use std::ffi::OsString;

/// The environment `culprit record` adds to its command so that Python processes trace
/// their functions: [`prepare`] + [`Prepared::prebuild`] for the command's interpreter +
/// [`Prepared::env`]. Never fails the recording: what goes wrong is said on stderr (one
/// line) and the variables that could be prepared are returned. `CULPRIT_PY_AUTO=0` turns
/// the whole thing off (nothing returned).
pub fn record_env(cmd: &[OsString]) -> Vec<(OsString, OsString)> {
    if std::env::var_os("CULPRIT_PY_AUTO").is_some_and(|v| v == "0") {
        return Vec::new();
    }
    let prepared = match prepare() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("culprit: Python functions will not be traced: {e}");
            return Vec::new();
        }
    };
    if let Some(python) = interpreter_of(cmd) {
        if let Err(e) = prepared.prebuild(&python) {
            eprintln!("culprit: {e}");
        }
    }
    prepared.env(std::env::var_os("PYTHONPATH"))
}
