//! What several subcommands share: the pool geometry flags (`record`, `reader`), worker
//! threads, the progress bar, analyzer options and opening trace directories (`learn`,
//! `rank`, `show`).

use analyzer::decode::TraceSet;
use anyhow::Context;
use bufpool::PoolConfig;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

/// The flight recorder's options, shared by `culprit record` and `culprit reader`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct KeepArgs {
    /// Flight recorder: keep the trace directory within SIZE bytes (K, M, G suffixes; at
    /// least 1M), rotating the oldest records of each thread away (metadata is kept, and
    /// `rotated.json` counts what went). `culprit snapshot` or SIGUSR1 freezes a copy.
    #[arg(long = "keep", value_name = "SIZE", value_parser = parse_keep_size)]
    pub keep: Option<u64>,
    /// Flight recorder: rotate away records older than DURATION (s, m, h; e.g. 10m).
    #[arg(long = "keep-for", value_name = "DURATION", value_parser = parse_keep_for)]
    pub keep_for: Option<std::time::Duration>,
}

impl KeepArgs {
    /// The reader's options.
    pub fn options(&self) -> reader::keep::KeepOptions {
        reader::keep::KeepOptions {
            bytes: self.keep,
            age: self.keep_for,
        }
    }
}

/// Parses `--keep`: bytes with an optional K, M or G suffix (powers of 1024), ≥ 1 MiB.
pub fn parse_keep_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 256M, 2G, 1048576)"))?;
    let v = n
        .checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))?;
    if v < reader::keep::MIN_KEEP_BYTES {
        return Err(format!(
            "{s:?}: a flight recorder needs at least 1M (it rotates whole segments)"
        ));
    }
    Ok(v)
}

/// Parses `--keep-for`: a duration of at least one second.
pub fn parse_keep_for(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'h')) => (&t[..i], 3600.0),
        Some((i, 'm')) if !t.ends_with("ms") => (&t[..i], 60.0),
        _ => return reader::iosample::parse_duration(t).and_then(at_least_a_second),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 90s, 10m, 2h)"))?;
    if !n.is_finite() || n <= 0.0 || n * mult > 1e9 {
        return Err(format!("{s:?} is not a duration (e.g. 90s, 10m, 2h)"));
    }
    at_least_a_second(std::time::Duration::from_secs_f64(n * mult))
}

fn at_least_a_second(d: std::time::Duration) -> Result<std::time::Duration, String> {
    if d < std::time::Duration::from_secs(1) {
        return Err(format!("--keep-for {d:?}: at least 1s"));
    }
    Ok(d)
}

/// Pool geometry options shared by `culprit record` and `culprit reader --create`.
#[derive(clap::Args, Clone, Debug)]
pub struct PoolArgs {
    /// Number of sub-buffers for entries in the pool (1 to 1048576). The pool adds a
    /// metadata area of N/64 more (at least 2, at most 16) that only process, thread, map
    /// and code records use, so they are never dropped for lack of a sub-buffer.
    #[arg(long, value_name = "N", default_value_t = bufpool::pool::DEFAULT_SUBBUFS,
          value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    pub subbufs: u32,
    /// Size of each sub-buffer (bytes; K and M suffixes accepted), a multiple of 4 KiB
    /// from 8K to 1024M.
    #[arg(long, value_name = "BYTES", default_value = "256K", value_parser = parse_size)]
    pub subbuf_size: u32,
    /// Events a thread drops, when the pool is full, before it tries again (0 to
    /// 4294967295; 0: try again at every event).
    #[arg(long, value_name = "N", default_value_t = bufpool::pool::DEFAULT_RETRY_AFTER)]
    pub retry_after: u32,
    /// Pool file (default: a new file in /dev/shm, deleted at the end).
    #[arg(long, value_name = "PATH")]
    pub pool: Option<PathBuf>,
    /// Let the group read the pool and the trace (files 0640, directories 0750) instead
    /// of you alone (0600, 0700). Nothing is ever writable by others.
    #[arg(long)]
    pub shared_group: bool,
    /// Let processes of every user write to the pool (mode 0666), to trace a system whose
    /// parts run as several users (a database as `postgres`…). Any local user can then
    /// also read the pool, and truncate it to kill the traced programs (SIGBUS).
    #[arg(long)]
    pub shared_writers: bool,
}

impl PoolArgs {
    /// Sets who may read what this process creates (`--shared-group`): see
    /// `bufpool::access`.
    pub fn apply_sharing(&self) {
        bufpool::access::set_group_shared(self.shared_group);
        bufpool::access::set_shared_writers(self.shared_writers);
    }

    /// The pool configuration.
    pub fn config(&self) -> PoolConfig {
        PoolConfig {
            n_subbufs: self.subbufs,
            subbuf_size: self.subbuf_size,
            retry_after: self.retry_after,
            ..Default::default()
        }
    }

    /// The pool path: the one given, or a new unique name under /dev/shm.
    pub fn path(&self) -> PathBuf {
        self.pool
            .clone()
            .unwrap_or_else(reader::session::default_pool_path)
    }
}

/// Parses `262144`, `256K`, `256k`, `1M`.
pub fn parse_size(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1024u64),
        Some((i, 'm' | 'M')) => (&t[..i], 1024 * 1024),
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 262144, 256K, 1M)"))?;
    let v = n
        .checked_mul(mult)
        .filter(|&v| v <= u32::MAX as u64)
        .ok_or_else(|| format!("{s:?} is too large"))?;
    Ok(v as u32)
}

/// Sets the number of rayon worker threads.
pub fn set_threads(n: Option<usize>) -> anyhow::Result<()> {
    if let Some(n) = n {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build_global()
            .context("cannot set up worker threads")?;
    }
    Ok(())
}

/// A progress bar on stderr when it is a terminal.
pub struct Bar {
    bar: std::sync::Mutex<Option<indicatif::ProgressBar>>,
}

impl analyzer::Progress for Bar {
    fn start(&self, stage: &str, total: u64) {
        let b = indicatif::ProgressBar::new(total);
        b.set_style(
            indicatif::ProgressStyle::with_template("{msg:>28} [{bar:40}] {pos}/{len} {elapsed}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        b.set_message(stage.to_string());
        if let Ok(mut g) = self.bar.lock() {
            *g = Some(b);
        }
    }
    fn inc(&self, n: u64) {
        if let Ok(g) = self.bar.lock() {
            if let Some(b) = &*g {
                b.inc(n);
            }
        }
    }
    fn finish(&self) {
        if let Ok(mut g) = self.bar.lock() {
            if let Some(b) = g.take() {
                b.finish_and_clear();
            }
        }
    }
}

/// Analyzer options with a progress bar if stderr is a terminal.
pub fn options() -> analyzer::Options {
    let mut o = analyzer::Options::default();
    if std::io::stderr().is_terminal() {
        o.progress = Some(Arc::new(Bar {
            bar: std::sync::Mutex::new(None),
        }));
    }
    o
}

/// Opens trace directories, or the trees of them under the directories given
/// (`DIR/<host>/<job.step.task>/`), and says on stderr what it found.
pub fn open(dirs: &[PathBuf]) -> anyhow::Result<TraceSet> {
    let set = open_any(dirs)?;
    if set.processes.is_empty() {
        anyhow::bail!("no traced process in {}", dir_list(dirs));
    }
    Ok(set)
}

/// The directories given, as a user reads them in a message: `a, b, c`.
pub fn dir_list(dirs: &[PathBuf]) -> String {
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Opens trace directories (or trees of them) and says on stderr what it found, even
/// if that is no process.
pub fn open_any(dirs: &[PathBuf]) -> anyhow::Result<TraceSet> {
    let set = TraceSet::open(dirs)?;
    eprintln!("culprit: found {}", set.found());
    Ok(set)
}

/// Most drain threads `--readers` accepts: more cannot drain a pool any faster (each
/// saves whole sub-buffers with one `write`), and every one is a thread of the recorder.
pub const MAX_READERS: usize = 64;

/// Parses `--readers`: 1 to [`MAX_READERS`].
pub fn parse_readers(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_READERS).contains(&n) => Ok(n),
        _ => Err(format!(
            "{s:?}: the number of drain threads must be 1 to {MAX_READERS}"
        )),
    }
}

/// The text of an error and its causes for the user: each cause after the message it
/// explains, but a cause whose text that message already ends with is not said twice (the
/// error types of the crates below name their OS error in their message and also expose it
/// as their `source`).
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if text.is_empty() {
            text = part;
        } else if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_in_its_message_is_said_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("trace/chunk-0: open: {source}")]
        struct Named {
            source: std::io::Error,
        }
        let io = || std::io::Error::from_raw_os_error(2);
        let e = anyhow::Error::new(Named { source: io() });
        assert_eq!(error_text(&e), format!("trace/chunk-0: open: {}", io()));
        // A cause the message does not tell is still told, after it.
        let e = anyhow::Error::new(io()).context("reading the model");
        assert_eq!(error_text(&e), format!("reading the model: {}", io()));
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("262144"), Ok(262144));
        assert_eq!(parse_size("256K"), Ok(262144));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("8192M").is_err());
    }
}
