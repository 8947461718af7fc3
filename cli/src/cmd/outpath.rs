//! Checks of the paths and numbers commands take, shared by the subcommands: an output
//! file must be a file culprit can replace (never a FIFO, which would block the write, a
//! socket or a directory), and `--threads` is bounded.

use std::path::Path;

/// Most worker threads `--threads` accepts.
pub const MAX_THREADS: usize = 1024;

/// Parses `--threads`: 1 to [`MAX_THREADS`].
pub fn parse_threads(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
        _ => Err(format!(
            "{s:?}: the number of worker threads must be 1 to {MAX_THREADS}"
        )),
    }
}

/// Checks that `path` can be written as an output file: it does not exist, or it is a
/// regular file (replaced), or a character device such as `/dev/null`.
pub fn check_output_file(path: &Path, what: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(path) {
        Err(_) => Ok(()),
        Ok(m) if m.is_file() || m.file_type().is_char_device() => Ok(()),
        Ok(m) => anyhow::bail!(
            "{}: the {what} is {}, not a file it can write",
            path.display(),
            reader::safefile::kind_of(m.file_type())
        ),
    }
}
