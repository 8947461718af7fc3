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

/// Parses a number that must be finite and within `lo..=hi` (never NaN or infinite:
/// issue 27, `--prior inf` spun for minutes, NaN was taken silently).
pub fn finite_in(s: &str, lo: f64, hi: f64) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (lo..=hi).contains(&v) => Ok(v),
        Ok(_) => Err(format!("{s:?}: must be a finite number from {lo} to {hi}")),
        Err(_) => Err(format!("{s:?}: not a number")),
    }
}

/// `--prior` of `culprit ioshare`: 0 to 1 000 000 rows of data per process.
pub fn parse_prior(s: &str) -> Result<f64, String> {
    finite_in(s, 0.0, 1e6)
}

/// `--segment-penalty` of `culprit ioshare`: 0.01 to 1 000 (multiples of σ²·ln n).
pub fn parse_penalty(s: &str) -> Result<f64, String> {
    finite_in(s, 0.01, 1e3)
}

/// `--threshold` of `culprit ioshare`: a fraction, 0 to 1.
pub fn parse_fraction(s: &str) -> Result<f64, String> {
    finite_in(s, 0.0, 1.0)
}

/// Writes `text` to the output file `path` (`reader::safefile::create_output`: never
/// through a link or into a file another user planted).
pub fn write_output(path: &Path, text: impl AsRef<[u8]>) -> std::io::Result<()> {
    use std::io::Write;
    reader::safefile::create_output(path)?.write_all(text.as_ref())
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
