//! The per-user cache of bootstrap copies, and the extension builds in it.
//!
//! Layout, under `$CULPRIT_CACHE_DIR`, else `$XDG_CACHE_HOME/culprit`, else
//! `~/.cache/culprit`, else `/tmp/culprit-cache-<uid>`:
//!
//! ```text
//! python/<key>/boot/sitecustomize.py        the start-up hook (on PYTHONPATH)
//! python/<key>/boot/culprit_trace/…          the package
//! python/<key>/src/native.c, culprit.h       the extension's sources
//! python/<key>/ext/_native<EXT_SUFFIX>       one build per interpreter ABI, made on first use
//! ```
//!
//! `<key>` is [`crate::sources::key`]: a copy is never modified once written (it is written
//! to a temporary directory and renamed into place, so concurrent `culprit record`s agree),
//! and a changed shim gets a new key.

use crate::sources::FILES;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Overrides the cache's base directory.
pub const CACHE_ENV: &str = "CULPRIT_CACHE_DIR";

/// A bootstrap copy ready in the cache.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// `python/<key>` in the cache.
    pub root: PathBuf,
}

/// The cache's base directory (see the module documentation).
pub fn base_dir() -> PathBuf {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = env(CACHE_ENV) {
        return d;
    }
    if let Some(d) = env("XDG_CACHE_HOME") {
        return d.join("culprit");
    }
    if let Some(h) = env("HOME") {
        return h.join(".cache").join("culprit");
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir().join(format!("culprit-cache-{uid}"))
}

/// Writes the bootstrap copy of the embedded sources into the cache unless it is there.
pub fn prepare() -> Result<Prepared, String> {
    prepare_in(&base_dir())
}

/// [`prepare`] with the cache at `base`.
pub fn prepare_in(base: &Path) -> Result<Prepared, String> {
    let dir = base.join("python");
    let root = dir.join(crate::sources::key());
    if root.join("boot/sitecustomize.py").is_file() {
        return Ok(Prepared { root });
    }
    let fail = |what: &str, p: &Path, e: io::Error| format!("{what} {}: {e}", p.display());
    std::fs::create_dir_all(&dir).map_err(|e| fail("cannot create", &dir, e))?;
    let tmp = dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    let written = (|| {
        for f in FILES {
            let p = tmp.join(f.path);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).map_err(|e| fail("cannot create", parent, e))?;
            }
            std::fs::write(&p, f.text).map_err(|e| fail("cannot write", &p, e))?;
        }
        let ext = tmp.join("ext");
        std::fs::create_dir_all(&ext).map_err(|e| fail("cannot create", &ext, e))
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    match std::fs::rename(&tmp, &root) {
        Ok(()) => Ok(Prepared { root }),
        // Another culprit wrote the same copy meanwhile: use it.
        Err(_) if root.join("boot/sitecustomize.py").is_file() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(Prepared { root })
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(fail("cannot rename into", &root, e))
        }
    }
}

impl Prepared {
    /// The directory put on `PYTHONPATH`.
    pub fn boot_dir(&self) -> PathBuf {
        self.root.join("boot")
    }

    /// The variables to add to the command's environment: `PYTHONPATH` with the bootstrap
    /// directory first and `existing` (the current value) kept after it.
    pub fn env(&self, existing: Option<OsString>) -> Vec<(OsString, OsString)> {
        let boot = self.boot_dir();
        let mut v = OsString::from(boot.as_os_str());
        if let Some(old) = existing.filter(|o| !o.is_empty()) {
            let rest: Vec<PathBuf> = std::env::split_paths(&old).filter(|p| p != &boot).collect();
            if let Some(joined) = std::env::join_paths(rest).ok().filter(|j| !j.is_empty()) {
                v.push(":");
                v.push(joined);
            }
        }
        vec![(OsString::from("PYTHONPATH"), v)]
    }

    /// Builds the extension for `python` into the cache unless it is there (runs
    /// `python -S -E boot/culprit_trace/_bootstrap.py`, outside the traced tree). Returns its
    /// path, or the interpreter's reason why it cannot have one.
    pub fn prebuild(&self, python: &Path) -> Result<PathBuf, String> {
        let script = self.root.join("boot/culprit_trace/_bootstrap.py");
        let out = Command::new(python)
            .arg("-S")
            .arg("-E")
            .arg(&script)
            .env_remove("LD_PRELOAD")
            .env_remove("CULPRIT_POOL")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{}: cannot run: {e}", python.display()))?;
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr);
            let why = why.lines().last().unwrap_or("no message").trim();
            return Err(format!("{}: no C extension: {why}", python.display()));
        }
        Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    }
}

/// The Python interpreter `cmd` starts, if it visibly starts one: its program is named
/// `python…`, or is a script whose `#!` line names one (`#!/usr/bin/env python3` included).
/// Programs are looked up on `PATH` as `execvp` would.
pub fn interpreter_of(cmd: &[OsString]) -> Option<PathBuf> {
    let prog = which(cmd.first()?)?;
    if is_python_name(&prog) {
        return Some(prog);
    }
    let head = read_head(&prog)?;
    let line = head.strip_prefix("#!")?.lines().next()?.trim().to_string();
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    if first.file_name().is_some_and(|n| n == "env") {
        let name = words.find(|w| !w.starts_with('-'))?;
        let p = which(OsStr::new(name))?;
        return is_python_name(&p).then_some(p);
    }
    is_python_name(&first).then_some(first)
}

fn is_python_name(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("python") && !n.ends_with("-config"))
}

fn read_head(p: &Path) -> Option<String> {
    use std::io::Read;
    let mut buf = [0u8; 256];
    let n = std::fs::File::open(p).ok()?.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

fn which(prog: &OsStr) -> Option<PathBuf> {
    let p = Path::new(prog);
    if p.components().count() > 1 {
        return p.is_file().then(|| p.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(p))
        .find(|c| c.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_written_once_and_put_first_on_pythonpath() {
        let base = tempfile::tempdir().unwrap();
        let a = prepare_in(base.path()).unwrap();
        let b = prepare_in(base.path()).unwrap();
        assert_eq!(a.root, b.root);
        for f in FILES {
            assert_eq!(
                std::fs::read_to_string(a.root.join(f.path)).unwrap(),
                f.text
            );
        }
        let env = a.env(Some(OsString::from("/x:/y")));
        assert_eq!(env[0].0, "PYTHONPATH");
        let want = format!("{}:/x:/y", a.boot_dir().display());
        assert_eq!(env[0].1, OsString::from(want));
        assert_eq!(a.env(None)[0].1, OsString::from(a.boot_dir().as_os_str()));
    }

    #[test]
    fn interpreters_are_recognized_by_name_and_by_shebang() {
        let d = tempfile::tempdir().unwrap();
        let py = d.path().join("python3.12");
        std::fs::write(&py, "").unwrap();
        assert_eq!(interpreter_of(&[py.clone().into()]), Some(py.clone()));
        let script = d.path().join("app");
        std::fs::write(&script, format!("#!{} -u\nprint(1)\n", py.display())).unwrap();
        assert_eq!(interpreter_of(&[script.into()]), Some(py));
        let sh = d.path().join("run.sh");
        std::fs::write(&sh, "#!/bin/sh\necho\n").unwrap();
        assert_eq!(interpreter_of(&[sh.into()]), None);
    }
}
