//! Helpers shared by the end-to-end tests in `tests/tests/`: locating the built
//! `culprit` binary and `libtrace.so`, compiling C test programs, running commands
//! with a deadline (no test can hang), and creating temporary pools.
//!
//! The end-to-end tests run the real binaries, so build them first:
//! `cargo build --workspace` (the test harness does not build other packages' binaries).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub mod browser;

/// Environment variable that overrides where `libtrace.so` is found.
pub const LIBTRACE_ENV: &str = "CULPRIT_LIBTRACE";

/// The cargo profile directory the tests were built into (`target/<profile>/`): the
/// parent of the `deps/` directory holding the test executable, else
/// `$CARGO_TARGET_DIR/debug`, else `target/debug` of the workspace.
pub fn profile_dir() -> PathBuf {
    if let Ok(exe) = std::env::current_exe() {
        if let Some(deps) = exe.parent() {
            if deps.file_name().is_some_and(|n| n == "deps") {
                if let Some(p) = deps.parent() {
                    return p.to_path_buf();
                }
            }
        }
    }
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(t).join("debug");
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug")
}

/// The built `culprit` binary. Panics with instructions if it was not built.
pub fn culprit() -> PathBuf {
    let p = profile_dir().join("culprit");
    assert!(
        p.is_file(),
        "{} not found: run `cargo build --workspace` first (with the same profile and \
         CARGO_TARGET_DIR as the tests)",
        p.display()
    );
    p
}

/// The built `libtrace.so` (or `$CULPRIT_LIBTRACE`), if it exists.
pub fn libtrace() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(LIBTRACE_ENV) {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let p = profile_dir().join("libtrace.so");
    p.is_file().then_some(p)
}

/// True under CI (`CI=true`, as GitHub Actions, GitLab CI and most others set it): there a
/// missing prerequisite of an end-to-end test is a failure, never a silent skip.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Says that `test` skips `part` because of `why`: one line `TEST: SKIPPED PART: WHY` on
/// stderr (`scripts/test.sh` counts these lines in its closing line), or, under CI
/// ([`under_ci`]), a panic with the same words — CI must not pass without running it.
///
/// The line goes to the process's stderr itself, not through `eprintln!`, which the test
/// harness captures (and shows only for failing tests): a skip is shown, and counted, even
/// when the test passes.
pub fn skip(test: &str, part: &str, why: &str) {
    use std::io::Write;
    let line = format!("{test}: SKIPPED {part}: {why}");
    if under_ci() {
        panic!("{test}: cannot run {part} under CI: {why} (CI=true: a missing prerequisite is a failure, not a skip)");
    }
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// `libtrace.so`, or `None` after printing why the calling test skips its traced part
/// (under CI, a missing `libtrace.so` fails the test instead: see [`skip`]).
pub fn libtrace_or_skip(test: &str) -> Option<PathBuf> {
    let l = libtrace();
    if l.is_none() {
        skip(
            test,
            "the traced part",
            &format!(
                "libtrace.so not found in {} (run `cargo build --workspace`, or set \
                 {LIBTRACE_ENV})",
                profile_dir().display()
            ),
        );
    }
    l
}

/// A C program compiled into its own temporary directory.
pub struct CProgram {
    /// The directory (deleted on drop).
    pub dir: tempfile::TempDir,
    /// The executable.
    pub path: PathBuf,
}

/// Compiles C source `src` with `cc -O1 -g -Wall -pthread` plus `extra` into an executable
/// named `name`. Panics with the compiler's output on failure.
pub fn compile_c(name: &str, src: &str, extra: &[&str]) -> CProgram {
    let dir = tempfile::tempdir().expect("temporary directory");
    let c = dir.path().join(format!("{name}.c"));
    std::fs::write(&c, src).expect("write C source");
    let path = dir.path().join(name);
    let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-O1", "-g", "-Wall", "-pthread", "-o"])
        .arg(&path)
        .arg(&c)
        .args(extra)
        .output()
        .expect("run the C compiler (cc)");
    assert!(
        out.status.success(),
        "compiling {name}.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    CProgram { dir, path }
}

/// What a command did.
#[derive(Debug)]
pub struct RunOutput {
    /// Exit status (of the killed process, if the deadline passed).
    pub status: ExitStatus,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// True if the deadline passed and the process group was killed.
    pub timed_out: bool,
}

impl RunOutput {
    /// Panics, showing the output, unless the command exited on its own with status 0.
    pub fn assert_success(&self, what: &str) -> &Self {
        assert!(
            !self.timed_out && self.status.success(),
            "{what}: {} (timed out: {})\n--- stdout\n{}\n--- stderr\n{}",
            self.status,
            self.timed_out,
            self.stdout,
            self.stderr
        );
        self
    }
}

/// Runs `cmd` in its own process group with stdout and stderr captured (stdin is
/// /dev/null). If it is still running after `deadline`, the whole group is killed with
/// SIGKILL; the result says so.
pub fn run_with_deadline(cmd: &mut Command, deadline: Duration) -> RunOutput {
    use std::os::unix::process::CommandExt;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {:?}: {e}", cmd.get_program()));
    let pgid = child.id() as i32;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if start.elapsed() >= deadline {
            timed_out = true;
            kill_group(pgid);
            break child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // Descendants that outlived the leader (daemons) keep the pipes open: kill the group
    // so the readers finish.
    kill_group(pgid);
    let stdout = String::from_utf8_lossy(&t_out.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&t_err.join().unwrap_or_default()).into_owned();
    RunOutput {
        status,
        stdout,
        stderr,
        timed_out,
    }
}

/// Sends SIGKILL to process group `pgid` (ignores a group that is already gone).
pub fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: kill(2) with a negative pid signals that process group; no memory is
        // involved. pgid > 1 rules out "every process" (-1) and our own group (0).
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}

/// A child process killed (with its process group) when dropped: no test leaves
/// processes behind, even when it panics.
pub struct Guarded {
    /// The child.
    pub child: std::process::Child,
}

impl Guarded {
    /// Spawns `cmd` in its own process group.
    pub fn spawn(cmd: &mut Command) -> Guarded {
        use std::os::unix::process::CommandExt;
        let child = cmd
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {:?}: {e}", cmd.get_program()));
        Guarded { child }
    }

    /// Process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `deadline` for the child to exit; `None` if it did not.
    pub fn wait_for(&mut self, deadline: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                return Some(st);
            }
            if start.elapsed() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        kill_group(self.child.id() as i32);
        let _ = self.child.wait();
    }
}

/// Polls `cond` every 10 ms until it holds or `deadline` passes; returns whether it held.
pub fn wait_until(deadline: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A pool in its own temporary directory.
pub struct TempPool {
    /// The directory (deleted on drop).
    pub dir: tempfile::TempDir,
    /// The pool file.
    pub path: PathBuf,
    /// The mapped pool.
    pub pool: bufpool::Pool,
}

/// Creates a pool of `n_subbufs` sub-buffers of `subbuf_size` bytes (1 ms calibration).
pub fn temp_pool(n_subbufs: u32, subbuf_size: u32) -> TempPool {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("pool");
    let cfg = bufpool::PoolConfig {
        n_subbufs,
        subbuf_size,
        calibration: Duration::from_millis(1),
        ..Default::default()
    };
    let pool = bufpool::Pool::create(&path, &cfg).expect("create pool");
    TempPool { dir, path, pool }
}

/// A TCP port on 127.0.0.1 that was free a moment ago, outside the kernel's ephemeral
/// range (see [`free_port_range`]).
pub fn free_tcp_port() -> u16 {
    free_port_range(1)
}

/// The ports the kernel never hands out on its own: below the ephemeral range of
/// `/proc/sys/net/ipv4/ip_local_port_range` (32768..=60999 by default), at most 16 384 of
/// them and never below 1024.
fn unassigned_ports() -> std::ops::Range<u32> {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    if low >= 1024 + 2048 {
        low.saturating_sub(16384).max(1024)..low
    } else {
        // An unusual set-up with the ephemeral range starting low: use the ports above it.
        61000..65535
    }
}

/// A base port P such that P..P+n are all free on 127.0.0.1 a moment ago.
///
/// The ports come from outside the ephemeral range, so no connection made by this or any
/// other test (its local port is ephemeral) can take one of them between this probe and
/// the daemon's `bind`: that race once failed a ring daemon with EADDRINUSE in CI. Test
/// threads of one binary run concurrently, so the ranges handed out here are disjoint
/// within a process (a cursor that starts at a place derived from the pid and moves on);
/// binaries run one after another.
pub fn free_port_range(n: u16) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static CURSOR: AtomicU32 = AtomicU32::new(u32::MAX);
    let range = unassigned_ports();
    let width = range.end - range.start;
    let n = u32::from(n.max(1));
    assert!(n < width, "{n} ports asked for, {width} available");
    let start = (std::process::id().wrapping_mul(2_654_435_761) >> 7) % width;
    let _ = CURSOR.compare_exchange(u32::MAX, start, Ordering::Relaxed, Ordering::Relaxed);
    for _ in 0..width / n {
        let at = CURSOR.fetch_add(n, Ordering::Relaxed) % width;
        if at + n > width {
            continue;
        }
        let base = range.start + at;
        let all_free =
            (base..base + n).all(|p| std::net::TcpListener::bind(("127.0.0.1", p as u16)).is_ok());
        if all_free {
            return base as u16;
        }
    }
    panic!("no {n} consecutive free ports in {range:?}");
}

/// Parses the `culprit dump --json` output: one JSON object per line.
pub fn parse_json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_past_its_deadline_is_killed() {
        let r = run_with_deadline(
            Command::new("sh").args(["-c", "echo hi; sleep 30"]),
            Duration::from_millis(300),
        );
        assert!(r.timed_out);
        assert_eq!(r.stdout, "hi\n");
        let r = run_with_deadline(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(20),
        );
        assert!(!r.timed_out);
        assert_eq!(r.status.code(), Some(3));
        assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("out\n", "err\n"));
    }

    #[test]
    fn port_ranges_are_disjoint_free_and_outside_the_ephemeral_range() {
        let ports = unassigned_ports();
        let bases: Vec<u16> = (0..50).map(|_| free_port_range(5)).collect();
        let mut taken = std::collections::BTreeSet::new();
        for &b in &bases {
            assert!(ports.contains(&u32::from(b)) && ports.contains(&(u32::from(b) + 4)));
            for p in b..b + 5 {
                assert!(taken.insert(p), "port {p} handed out twice: {bases:?}");
            }
        }
        // A port the kernel picks for an unbound socket is never one of them.
        let kernel = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let k = kernel.local_addr().unwrap().port();
        assert!(!ports.contains(&u32::from(k)), "{k} in {ports:?}");
    }

    #[test]
    fn compiles_and_runs_c() {
        let p = compile_c(
            "hello",
            "#include <stdio.h>\nint main(void){puts(\"hello\");return 4;}\n",
            &[],
        );
        let r = run_with_deadline(&mut Command::new(&p.path), Duration::from_secs(20));
        assert_eq!(r.status.code(), Some(4));
        assert_eq!(r.stdout, "hello\n");
    }

    #[test]
    fn profile_dir_is_where_the_test_runs() {
        let d = profile_dir();
        assert!(d.join("deps").is_dir(), "{}", d.display());
    }
}
