//! What a recording cannot see, said in one line per process.
//!
//! Culprit records the calls a program makes through libc (`libtrace.so`, preloaded). Some
//! executables never pass their socket and file calls through libc, and a recording of
//! them is silent, not idle:
//!
//! - a **Go** program (a `.go.buildinfo` section, or `runtime.` symbols): Go makes its
//!   system calls itself; only what it calls through cgo is recorded;
//! - a **static** executable (no program interpreter): the dynamic loader never runs, so
//!   `LD_PRELOAD` does not apply and nothing of it is recorded — when a traced process
//!   `exec`s one, nothing after the exec;
//! - a **set-user-ID or set-group-ID** executable a traced process `exec`s: the loader runs
//!   it in secure-execution mode, which ignores `LD_PRELOAD` (unless the process already ran
//!   as the file's owner) — nothing after the exec;
//! - any process that **made no call Culprit records** while it ran (raw system calls, or it only
//!   waited).
//!
//! [`ExeKind::of`] tells the first two from the file; [`Unseen`] is the reason, and
//! [`Unseen::why`] its sentence. `culprit record`'s summary and the analyses' headers name
//! such processes with it.

use object::{Object, ObjectSymbol};
use std::path::{Path, PathBuf};

/// What an executable file is, as far as recording it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExeKind {
    /// Dynamically linked, not Go: its libc calls are recorded.
    Dynamic,
    /// A Go program (dynamically linked through cgo, or static).
    Go {
        /// Without a program interpreter: nothing at all of it is recorded.
        static_: bool,
    },
    /// A static executable that is not Go.
    Static,
}

impl ExeKind {
    /// Reads the ELF file at `path`; `None` if it is not one (a script, missing…).
    pub fn of(path: &Path) -> Option<ExeKind> {
        let data = std::fs::read(path).ok()?;
        let obj = object::File::parse(&*data).ok()?;
        // No program interpreter: the dynamic loader never runs (static, or static-pie).
        let static_ = obj.section_by_name(".interp").is_none();
        let go = obj.section_by_name(".go.buildinfo").is_some()
            || obj.section_by_name(".note.go.buildid").is_some()
            || obj
                .symbols()
                .take(50_000)
                .any(|s| s.name().is_ok_and(|n| n == "runtime.main"));
        Some(match (go, static_) {
            (true, s) => ExeKind::Go { static_: s },
            (false, true) => ExeKind::Static,
            (false, false) => ExeKind::Dynamic,
        })
    }
}

/// Why (part of) a process is not in the trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unseen {
    /// It runs a Go program.
    Go,
    /// It runs a static executable (the command itself, not traced at all).
    Static,
    /// It exec'd a static executable (or a static Go program): nothing after that.
    ExecStatic {
        /// The executable.
        path: String,
        /// It is a Go program.
        go: bool,
    },
    /// It exec'd a set-user-ID or set-group-ID executable and no traced image started after
    /// the exec: the loader's secure-execution mode dropped `LD_PRELOAD`.
    ExecSetId {
        /// The executable.
        path: String,
    },
    /// It made no call Culprit records (socket, poll, fork, exec through libc) while it ran.
    NoLibcCall,
}

impl Unseen {
    /// The reason in one sentence (no subject: it follows the process's name).
    pub fn why(&self) -> String {
        match self {
            Unseen::Go => "a Go program: Go makes its system calls itself, not through libc, \
                           so its socket and file calls are not recorded (only its cgo calls)"
                .into(),
            Unseen::Static => "a static executable: LD_PRELOAD does not apply to it, so nothing \
                               it does is recorded"
                .into(),
            Unseen::ExecStatic { path, go } => format!(
                "exec'd {path}, a static {}executable: LD_PRELOAD does not apply to it, so \
                 nothing after the exec is recorded",
                if *go { "Go " } else { "" }
            ),
            Unseen::ExecSetId { path } => format!(
                "exec'd {path}, a set-user-ID or set-group-ID executable: the loader ran it in \
                 secure-execution mode, which ignores LD_PRELOAD, so nothing after the exec is \
                 recorded"
            ),
            Unseen::NoLibcCall => "made no call that Culprit records (no socket, select/poll, \
                                   fork or exec through libc: it made raw system calls, only \
                                   computed or wrote files, or waited)"
                .into(),
        }
    }

    /// What is not recorded of a process that ran `exe` (its last image), made `libc_calls`
    /// libc calls and whose last call was an `exec` of `exec_to` that did not return
    /// (`None` otherwise). The first reason that applies.
    pub fn of(exe: &str, libc_calls: u64, exec_to: Option<&str>) -> Option<Unseen> {
        if let Some(to) = exec_to {
            let p = resolve(to);
            match p.as_deref().and_then(ExeKind::of) {
                Some(ExeKind::Static) => {
                    return Some(Unseen::ExecStatic {
                        path: to.into(),
                        go: false,
                    })
                }
                Some(ExeKind::Go { static_: true }) => {
                    return Some(Unseen::ExecStatic {
                        path: to.into(),
                        go: true,
                    })
                }
                _ => {}
            }
            if p.as_deref().is_some_and(set_id) {
                return Some(Unseen::ExecSetId { path: to.into() });
            }
        }
        if !exe.is_empty() && matches!(ExeKind::of(Path::new(exe)), Some(ExeKind::Go { .. })) {
            return Some(Unseen::Go);
        }
        (libc_calls == 0).then_some(Unseen::NoLibcCall)
    }
}

/// Follows a process's `exec*` calls through a decoding pass, to tell whether its last one
/// replaced the process (it did not return, and no traced image recorded its start after
/// it): that image was not traced. Feed it every library event and process record of one
/// thread after another, calling [`ExecWatch::end_thread`] after each thread.
#[derive(Clone, Debug, Default)]
pub struct ExecWatch {
    /// The exec of the thread being read that has not returned: (TSC, path).
    open: Option<(u64, String)>,
    /// The execs that never returned, of every thread read.
    unreturned: Vec<(u64, String)>,
    /// TSCs of the exec records of traced images.
    traced_images: Vec<u64>,
}

impl ExecWatch {
    /// A library call's entry or exit.
    pub fn lib(&mut self, l: &super::decode::LibEvent) {
        if !l.func.is_exec() {
            return;
        }
        if l.exit {
            self.open = None;
        } else if let Some(x) = l.extra.as_ref().filter(|x| !x.text.is_empty()) {
            self.open = Some((l.tsc, String::from_utf8_lossy(&x.text).into_owned()));
        }
    }

    /// A process record (only exec records matter).
    pub fn proc_record(&mut self, tsc: u64, r: &bufpool::format::ProcRecord) {
        if r.reason == bufpool::format::ProcReason::Exec {
            self.traced_images.push(tsc);
        }
    }

    /// The thread read is done.
    pub fn end_thread(&mut self) {
        self.unreturned.extend(self.open.take());
    }

    /// The program the process exec'd last without a traced image starting after it.
    pub fn untraced_exec(&self) -> Option<&str> {
        let (tsc, path) = self.unreturned.iter().max_by_key(|(t, _)| *t)?;
        (!self.traced_images.iter().any(|t| t > tsc)).then_some(path.as_str())
    }
}

/// Is the file at `path` set-user-ID or set-group-ID?
fn set_id(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o6000 != 0)
}

/// An executable named as `exec` finds it: a path as it is, a bare name in `$PATH`.
pub fn resolve(cmd: &str) -> Option<PathBuf> {
    if cmd.contains('/') {
        return Some(PathBuf::from(cmd));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(cmd))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_is_dynamic_and_not_go() {
        let exe = std::env::current_exe().unwrap();
        assert_eq!(ExeKind::of(&exe), Some(ExeKind::Dynamic));
        assert_eq!(ExeKind::of(Path::new("/nonexistent/x")), None);
        assert_eq!(Unseen::of(exe.to_str().unwrap(), 3, None), None);
        assert_eq!(
            Unseen::of(exe.to_str().unwrap(), 0, None),
            Some(Unseen::NoLibcCall)
        );
    }

    #[test]
    fn an_untraced_exec_of_a_set_id_executable_is_said_so() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let copy = dir.path().join("setid");
        std::fs::write(&copy, "#!/bin/sh\n").unwrap();
        let to = copy.to_str().unwrap();
        // An ordinary dynamic executable: an exec of it that left no traced image has no
        // reason here (the process may have been killed first).
        assert_eq!(Unseen::of(exe.to_str().unwrap(), 3, Some(to)), None);
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o4755)).unwrap();
        let got = Unseen::of(exe.to_str().unwrap(), 3, Some(to));
        assert_eq!(got, Some(Unseen::ExecSetId { path: to.into() }));
        assert!(got.unwrap().why().contains("secure-execution mode"));
    }
}
