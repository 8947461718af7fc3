//! Running the traced command and supervising its process tree, and the signal policy.
//!
//! The session becomes a child subreaper, so processes of the tree that daemonize (fork,
//! parent exits) are re-parented to it and reaped by it: the session ends when the whole
//! tree is gone, not when the command's first process exits. SIGINT, SIGTERM and SIGHUP
//! are caught ([`crate::signals`]) and passed on ([`forward`]): the terminal already sent
//! SIGINT to the foreground group, which holds the command's first process, so a SIGINT
//! goes (as SIGTERM) only to descendants that left the group (daemons); SIGTERM and SIGHUP
//! go to every process of the tree; a second signal kills the whole tree (SIGKILL).

use super::outcome::Notice;
use super::preload::preload_value;
use super::{Session, SessionError};
use crate::ReaderReport;
use bufpool::{Pool, POOL_ENV};
use std::ffi::OsString;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// The signals a session catches and passes on.
pub const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

fn os(what: &'static str) -> impl FnOnce(std::io::Error) -> SessionError {
    move |source| SessionError::Os { what, source }
}

/// Why a command cannot be started, in a shell's words when it is not found.
pub fn spawn_error(cmd: &std::ffi::OsStr, e: &std::io::Error) -> String {
    let name = cmd.to_string_lossy();
    if e.kind() == std::io::ErrorKind::NotFound {
        if name.contains('/') {
            format!("{name}: no such file")
        } else {
            format!("{name}: command not found (not in PATH)")
        }
    } else {
        format!("cannot run {name}: {e}")
    }
}

/// Can `cmd` be started, as `execvp` would find it? A name with a `/` must be an
/// executable file; another name must be one in a directory of `$PATH` (`execvp`'s default
/// path when it is unset). The error is `NotFound` or `PermissionDenied`, as the spawn's
/// would be ([`spawn_error`] words it). What passes may still fail to start (a bad
/// interpreter line…): the spawn's own error is reported then.
pub fn findable(cmd: &std::ffi::OsStr) -> Result<(), std::io::Error> {
    use std::io::{Error, ErrorKind};
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| -> Result<(), Error> {
        let m = std::fs::metadata(p)?;
        if m.is_file() && m.permissions().mode() & 0o111 != 0 {
            Ok(())
        } else {
            Err(Error::from(ErrorKind::PermissionDenied))
        }
    };
    if cmd.as_encoded_bytes().contains(&b'/') {
        return executable(Path::new(cmd));
    }
    if cmd.is_empty() {
        return Err(Error::from(ErrorKind::NotFound));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    let mut denied = false;
    for dir in std::env::split_paths(&path) {
        let dir = if dir.as_os_str().is_empty() {
            ".".into()
        } else {
            dir
        };
        match executable(&dir.join(cmd)) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::PermissionDenied => denied = true,
            Err(_) => {}
        }
    }
    Err(Error::from(if denied {
        ErrorKind::PermissionDenied
    } else {
        ErrorKind::NotFound
    }))
}

/// Runs `cmd` without tracing, reaping its whole tree; its shell exit status.
pub fn run_untraced(cmd: &[OsString]) -> Result<u8, SessionError> {
    crate::tree::become_subreaper().map_err(os("prctl(PR_SET_CHILD_SUBREAPER)"))?;
    let child = std::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .spawn()
        .map_err(|source| SessionError::Spawn {
            why: spawn_error(&cmd[0], &source),
            source,
        })?;
    let end = crate::tree::wait_tree(child.id(), |_| {})
        .map_err(os("waiting for the untraced processes"))?;
    Ok(end.main.shell_status())
}

/// Records `s.command` into `pool` (created) and `s.out`: drain threads, the command with
/// `lib` preloaded, the tree reaped, signals forwarded. Returns the command's shell exit
/// status and what the reader did.
pub fn record(
    s: &Session,
    pool: &Pool,
    lib: &Path,
    notice: &mut dyn FnMut(Notice<'_>),
) -> Result<(u8, crate::Result<ReaderReport>), SessionError> {
    let command: Vec<String> = s
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let out = &s.out;
    // Fail before running anything if the output directory is unusable.
    crate::daemon::prepare_dir(pool, out, &command)?;
    crate::tree::become_subreaper().map_err(os("prctl(PR_SET_CHILD_SUBREAPER)"))?;
    crate::signals::install(&SIGNALS).map_err(os("installing signal handlers"))?;
    crate::signals::install_snapshot().map_err(os("installing the SIGUSR1 handler"))?;
    let opts = crate::ReaderOptions {
        workers: s.readers.max(1),
        command,
        live_interval: s.live_interval,
        keep: s.keep,
        snapshot_on_usr1: true,
        ..Default::default()
    };
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        // The drain threads never take these signals: they must interrupt this thread's
        // waitpid, so that they are passed on at once.
        crate::signals::set_blocked(&SIGNALS, true).map_err(os("blocking signals"))?;
        let drain = scope.spawn(|| crate::run(pool, out, &opts, &done));
        crate::signals::set_blocked(&SIGNALS, false).map_err(os("unblocking signals"))?;
        let mut cmd = std::process::Command::new(&s.command[0]);
        cmd.args(&s.command[1..])
            .env(
                "LD_PRELOAD",
                preload_value(lib, std::env::var_os("LD_PRELOAD")),
            )
            .env(POOL_ENV, pool.path())
            .envs(s.env.iter().map(|(k, v)| (k, v)));
        if let Some(v) = &s.inject_env {
            cmd.env(bufpool::inject::INJECT_ENV, v);
        }
        // Exit status: the command's, or 127 (as a shell) when it cannot be started.
        let end = match cmd.spawn() {
            Ok(child) => {
                let main = child.id();
                let mut interrupts = 0;
                crate::tree::wait_tree(main, |sig| {
                    interrupts += 1;
                    if interrupts == 1 {
                        // Before the traced programs hear of it: what they do from now on
                        // is their shutdown (`culprit watch` does not report it).
                        let mark = crate::stopmark::StopMark {
                            unix_ns: crate::stopmark::now_unix_ns(),
                            signal: sig.sig,
                        };
                        if let Err(e) = crate::stopmark::write(out, &mark) {
                            eprintln!("culprit: warning: {e}");
                        }
                    }
                    forward(sig, interrupts, notice);
                })
                .map(|end| end.main.shell_status())
                .map_err(os("waiting for the traced processes"))
            }
            Err(error) => {
                notice(Notice::CannotRun {
                    command: &s.command[0],
                    error,
                });
                Ok(127)
            }
        };
        done.store(true, Ordering::Release);
        let report = drain.join().map_err(|_| SessionError::ReaderPanicked)?;
        Ok((end?, report))
    })
}

/// Passes a signal on to the traced tree (see the [module documentation](self)): a
/// terminal's SIGINT went to the foreground group (which includes the main process)
/// already, so it only goes (as SIGTERM) to descendants that left the group (daemons); a
/// SIGINT sent by a process also goes, as SIGINT, to the descendants in the group; other
/// signals go to every process. A second signal (`count` ≥ 2) kills the whole tree.
pub fn forward(sig: crate::signals::Received, count: u32, notice: &mut dyn FnMut(Notice<'_>)) {
    let all = crate::tree::descendants(std::process::id());
    if count >= 2 {
        notice(Notice::Killing {
            processes: all.len(),
        });
        crate::tree::signal_all(&all, libc::SIGKILL);
        return;
    }
    if sig.sig != libc::SIGINT {
        crate::tree::signal_all(&all, sig.sig);
        return;
    }
    // SAFETY: getpgrp has no arguments and cannot fail.
    let my_group = unsafe { libc::getpgrp() };
    // SAFETY: getpgid only reads the process table.
    let (in_group, daemons): (Vec<u32>, Vec<u32>) = all
        .into_iter()
        .partition(|&p| unsafe { libc::getpgid(p as libc::pid_t) } == my_group);
    if !sig.from_terminal {
        crate::tree::signal_all(&in_group, libc::SIGINT);
    }
    crate::tree::signal_all(&daemons, libc::SIGTERM);
}
