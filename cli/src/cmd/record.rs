//! `culprit record` — run a command with tracing: create a pool, start the readers, run
//! the command with `libtrace.so` preloaded, follow its whole process tree (children that
//! daemonize included), drain, summarize, and exit with the command's status.

use anyhow::{bail, Context};
use bufpool::{Pool, PoolConfig, POOL_ENV};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// Environment variable naming `libtrace.so` (overrides the copy next to `culprit`).
pub const LIBTRACE_ENV: &str = "CULPRIT_LIBTRACE";

/// Pool geometry options shared by `culprit record` and `culprit reader --create`.
#[derive(clap::Args, Clone, Debug)]
pub struct PoolArgs {
    /// Number of sub-buffers in the pool.
    #[arg(long, value_name = "N", default_value_t = bufpool::pool::DEFAULT_SUBBUFS)]
    pub subbufs: u32,
    /// Size of each sub-buffer (bytes; K and M suffixes accepted), a multiple of 4 KiB.
    #[arg(long, value_name = "BYTES", default_value = "256K", value_parser = parse_size)]
    pub subbuf_size: u32,
    /// Events a thread drops, when the pool is full, before it tries again.
    #[arg(long, value_name = "N", default_value_t = bufpool::pool::DEFAULT_RETRY_AFTER)]
    pub retry_after: u32,
    /// Pool file (default: a new file in /dev/shm, deleted at the end).
    #[arg(long, value_name = "PATH")]
    pub pool: Option<PathBuf>,
}

impl PoolArgs {
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
        self.pool.clone().unwrap_or_else(|| {
            Path::new(bufpool::pool::DEFAULT_DIR).join(format!(
                "culprit-{}-{}.pool",
                std::process::id(),
                bufpool::sys::clock_ns(libc::CLOCK_REALTIME)
            ))
        })
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

/// Arguments of `culprit record`.
#[derive(clap::Args, Debug)]
#[command(override_usage = "culprit record [OPTIONS] -- CMD [ARGS]...")]
pub struct Args {
    /// Trace directory to write (default: culprit-<command>-<unix time>).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub pool: PoolArgs,
    /// Inject a fault (repeatable): FUNC[|FUNC…]:EFFECT[,KEY=VALUE…], e.g.
    /// `recv:short=3,nth=17` or `read:errno=ECONNRESET,peer-port=7000,count=1`.
    #[arg(long = "inject", value_name = "SPEC")]
    pub inject: Vec<String>,
    /// Drain threads.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub readers: usize,
    /// Keep the pool file at the end.
    #[arg(long)]
    pub keep_pool: bool,
    /// The command to run, and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub cmd: Vec<OsString>,
}

/// Finds `libtrace.so`: `$CULPRIT_LIBTRACE`, else next to the `culprit` executable.
pub fn find_libtrace() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os(LIBTRACE_ENV) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("{LIBTRACE_ENV}={} does not name a file", p.display());
        }
        return Ok(std::fs::canonicalize(&p).unwrap_or(p));
    }
    let exe = std::env::current_exe().context("cannot find the culprit executable")?;
    let p = exe.with_file_name("libtrace.so");
    if !p.is_file() {
        bail!(
            "libtrace.so not found next to {} (build it with `cargo build -p tracer-preload`, \
             or set {LIBTRACE_ENV})",
            exe.display()
        );
    }
    Ok(p)
}

/// `LD_PRELOAD` with `lib` first and an existing value kept after it (without a second
/// copy of `lib`).
pub fn preload_value(lib: &Path, existing: Option<OsString>) -> OsString {
    let mut v = OsString::from(lib);
    if let Some(old) = existing {
        let keep: Vec<&[u8]> = std::os::unix::ffi::OsStrExt::as_bytes(old.as_os_str())
            .split(|&c| c == b':' || c == b' ')
            .filter(|p| {
                !p.is_empty() && *p != std::os::unix::ffi::OsStrExt::as_bytes(lib.as_os_str())
            })
            .collect();
        for p in keep {
            v.push(":");
            v.push(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(p));
        }
    }
    v
}

/// Checks the `--inject` SPECs; returns the value of the injection variable.
fn inject_value(specs: &[String]) -> anyhow::Result<Option<String>> {
    if specs.is_empty() {
        return Ok(None);
    }
    for s in specs {
        if let Err(e) = bufpool::inject::parse_spec(s) {
            bail!("--inject {s:?}: {e}\n{}", e.caret(s));
        }
    }
    Ok(Some(bufpool::inject::encode_env(specs)?))
}

fn default_out(cmd: &[OsString]) -> PathBuf {
    let base = Path::new(&cmd[0])
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "trace".into());
    let secs = bufpool::sys::clock_ns(libc::CLOCK_REALTIME) / 1_000_000_000;
    PathBuf::from(format!("culprit-{base}-{secs}"))
}

/// Checks that the file system of the pool has room for it: a pool on a full tmpfs
/// would fault (SIGBUS) in the traced programs when they touch a page that cannot be
/// allocated.
pub fn check_space(path: &Path, cfg: &PoolConfig) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    let need = bufpool::layout::file_size(cfg.n_subbufs, cfg.subbuf_size);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return Err(format!("{}: path contains a NUL byte", dir.display()));
    };
    // SAFETY: `c` is a NUL-terminated path; `st` is a writable statvfs for the result.
    let mut st: libc::statvfs = unsafe { core::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        // Let Pool::create report what is wrong with the path.
        return Ok(());
    }
    let free = st.f_bavail as u64 * st.f_frsize as u64;
    if free < need {
        return Err(format!(
            "{}: {} MiB free, the pool needs {} MiB (use --pool on another file system, or \
             fewer/smaller sub-buffers)",
            dir.display(),
            free >> 20,
            need.div_ceil(1 << 20)
        ));
    }
    Ok(())
}

/// Runs `culprit record`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let inject = inject_value(&args.inject)?;
    args.pool.config().validate()?;
    let lib = find_libtrace()?;
    let out = args.out.clone().unwrap_or_else(|| default_out(&args.cmd));
    if out.join(bufpool::disk::MANIFEST_FILE).exists() {
        bail!(
            "{} already holds a trace: choose another output directory (-o)",
            out.display()
        );
    }
    let pool_path = args.pool.path();
    let created = check_space(&pool_path, &args.pool.config())
        .and_then(|()| Pool::create(&pool_path, &args.pool.config()).map_err(|e| e.to_string()));
    let pool = match created {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!(
                "culprit: warning: cannot create the pool ({e}); running {} untraced",
                args.cmd[0].to_string_lossy()
            );
            None
        }
    };
    let Some(pool) = pool else {
        return run_untraced(&args.cmd);
    };
    let (code, saved_all) = record(&args, &pool, &lib, &out, inject.as_deref())?;
    if !saved_all {
        eprintln!(
            "culprit: the pool {} is kept with what could not be saved: drain it with \
             `culprit reader --pool {} -o DIR`",
            pool_path.display(),
            pool_path.display()
        );
    } else if !args.keep_pool {
        let _ = std::fs::remove_file(&pool_path);
    }
    Ok(code)
}

fn run_untraced(cmd: &[OsString]) -> anyhow::Result<ExitCode> {
    reader::tree::become_subreaper().context("prctl(PR_SET_CHILD_SUBREAPER)")?;
    let child = std::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .spawn()
        .with_context(|| format!("cannot run {}", cmd[0].to_string_lossy()))?;
    let end = reader::tree::wait_tree(child.id(), |_| {})?;
    Ok(ExitCode::from(end.main.shell_status()))
}

fn record(
    args: &Args,
    pool: &Pool,
    lib: &Path,
    out: &Path,
    inject: Option<&str>,
) -> anyhow::Result<(ExitCode, bool)> {
    let command: Vec<String> = args
        .cmd
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // Fail before running anything if the output directory is unusable.
    reader::daemon::prepare_dir(pool, out, &command)?;
    reader::tree::become_subreaper().context("prctl(PR_SET_CHILD_SUBREAPER)")?;
    const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
    reader::signals::install(&SIGNALS).context("installing signal handlers")?;
    let opts = reader::ReaderOptions {
        workers: args.readers.max(1),
        command,
        ..Default::default()
    };
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        // The drain threads never take these signals: they must interrupt this thread's
        // waitpid, so that they are passed on at once.
        reader::signals::set_blocked(&SIGNALS, true)?;
        let drain = s.spawn(|| reader::run(pool, out, &opts, &done));
        reader::signals::set_blocked(&SIGNALS, false)?;
        let mut cmd = std::process::Command::new(&args.cmd[0]);
        cmd.args(&args.cmd[1..])
            .env(
                "LD_PRELOAD",
                preload_value(lib, std::env::var_os("LD_PRELOAD")),
            )
            .env(POOL_ENV, pool.path())
            // Python processes trace their functions with nothing installed (issue 17).
            .envs(python_hook::record_env(&args.cmd));
        if let Some(v) = inject {
            cmd.env(bufpool::inject::INJECT_ENV, v);
        }
        // Exit status: the command's, or 127 (as a shell) when it cannot be started.
        let end = match cmd.spawn() {
            Ok(child) => {
                let main = child.id();
                let mut interrupts = 0;
                reader::tree::wait_tree(main, |sig| {
                    interrupts += 1;
                    forward(sig, interrupts);
                })
                .map(|end| end.main.shell_status())
                .context("waiting for the traced processes")
            }
            Err(e) => {
                eprintln!(
                    "culprit: error: cannot run {}: {e}",
                    args.cmd[0].to_string_lossy()
                );
                Ok(127)
            }
        };
        done.store(true, Ordering::Release);
        let report = drain
            .join()
            .map_err(|_| anyhow::anyhow!("the reader thread panicked"))?;
        let status = end?;
        let saved_all = match report {
            Ok(rep) => {
                print_summary(&rep, out);
                eprint!("{}", analyzer::recorded::summary(out));
                true
            }
            Err(e) => {
                eprintln!(
                    "culprit: error: the reader failed; the trace in {} is incomplete: {e:#}",
                    out.display()
                );
                false
            }
        };
        Ok((ExitCode::from(status), saved_all))
    })
}

/// Passes a signal on to the traced tree. The terminal already sent SIGINT to the
/// foreground group (which includes the main process), so SIGINT only goes to
/// descendants that left the group (daemons); other signals go to every process. A
/// second signal kills the whole tree.
fn forward(sig: libc::c_int, count: u32) {
    let all = reader::tree::descendants(std::process::id());
    if count >= 2 {
        eprintln!(
            "culprit: second interrupt: killing {} traced process(es)",
            all.len()
        );
        reader::tree::signal_all(&all, libc::SIGKILL);
        return;
    }
    // SAFETY: getpgrp has no arguments and cannot fail.
    let my_group = unsafe { libc::getpgrp() };
    let targets: Vec<u32> = if sig == libc::SIGINT {
        all.into_iter()
            // SAFETY: getpgid only reads the process table.
            .filter(|&p| unsafe { libc::getpgid(p as libc::pid_t) } != my_group)
            .collect()
    } else {
        all
    };
    let sent = if sig == libc::SIGINT {
        libc::SIGTERM
    } else {
        sig
    };
    reader::tree::signal_all(&targets, sent);
}

fn print_summary(rep: &reader::ReaderReport, out: &Path) {
    let t = &rep.manifest.totals;
    eprintln!(
        "culprit: recorded {} process(es), {} thread(s), {} entries ({} bytes) to {}; {} lost",
        t.processes,
        t.threads,
        t.entries,
        t.bytes,
        out.display(),
        t.lost
    );
    if t.lost > 0 {
        eprintln!(
            "culprit: the pool was full at times: enlarge it with --subbufs or --subbuf-size"
        );
    }
    if rep.left_owned > 0 {
        eprintln!(
            "culprit: warning: {} sub-buffer(s) were still held by live processes",
            rep.left_owned
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("262144"), Ok(262144));
        assert_eq!(parse_size("256K"), Ok(262144));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("8192M").is_err());
    }

    #[test]
    fn libtrace_goes_first_and_an_existing_preload_is_kept() {
        let lib = Path::new("/x/libtrace.so");
        assert_eq!(preload_value(lib, None), "/x/libtrace.so");
        assert_eq!(
            preload_value(lib, Some("/a/libjemalloc.so /x/libtrace.so:/b/c.so".into())),
            "/x/libtrace.so:/a/libjemalloc.so:/b/c.so"
        );
    }

    #[test]
    fn a_bad_inject_spec_is_rejected_with_its_position() {
        let e = inject_value(&["recv:shrt=3".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("column 6") && e.contains('^'), "{e}");
        assert!(inject_value(&[]).unwrap().is_none());
        let v = inject_value(&["recv:short=3".into(), "send:errno=EPIPE".into()]).unwrap();
        assert_eq!(v.as_deref(), Some("recv:short=3\nsend:errno=EPIPE"));
    }
}
