//! The per-user cache of bootstrap copies, and the extension builds in it.
//!
//! Layout, under the cache's base directory ([`base_dir`]):
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
//!
//! Every Python process of the traced tree runs the code in this cache, so it is used only
//! where no other user could have put or changed anything (issue 27): the base directory
//! and every level below it are owned by this user and writable by no one else (made
//! `0700`, files `0600`), and every directory above it is this user's or root's and, unless
//! sticky like `/tmp`, writable by no one else (`bufpool::access`). A level that fails the
//! check is never used: the cache goes to a fresh private directory instead, said in one
//! line.

use crate::sources::FILES;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
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

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Why the directory `dir` must not hold this user's cache, or `None`: it must be a
/// directory (not a symbolic link), owned by this user, writable by no one else, with
/// every directory above it trusted (`bufpool::access::check_ancestors`).
pub fn unsafe_dir_why(dir: &Path) -> Option<String> {
    let m = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) => return Some(format!("stat: {e}")),
    };
    if !m.is_dir() {
        return Some("not a directory".into());
    }
    if m.uid() != euid() {
        return Some(format!(
            "owned by uid {}, not by uid {}: another user controls it",
            m.uid(),
            euid()
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Some(format!(
            "mode {:04o}: others could write in it",
            m.mode() & 0o7777
        ));
    }
    let real = match std::fs::canonicalize(dir) {
        Ok(r) => r,
        Err(e) => return Some(format!("resolve: {e}")),
    };
    bufpool::access::check_ancestors(&real, false).err()
}

/// Creates `dir` private (`0700`) if it does not exist; then checks it with
/// [`unsafe_dir_why`].
fn private_dir(dir: &Path) -> Result<(), String> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    match unsafe_dir_why(dir) {
        None => Ok(()),
        Some(why) => Err(format!("{}: not used: {why}", dir.display())),
    }
}

/// The cache's base directory, chosen among, in order: `$CULPRIT_CACHE_DIR` (made if
/// missing; refused if unsafe); `$XDG_CACHE_HOME/culprit` when `$XDG_CACHE_HOME` exists
/// and is safe ([`unsafe_dir_why`]); `$HOME/.cache/culprit` when `$HOME` is safe (a daemon
/// that switched users with `HOME=/root` falls through); else `culprit-cache-<uid>` in the
/// temporary directory, private — or, when that name is taken by someone else, a fresh
/// private `culprit-cache-<uid>.XXXXXX` beside it (said on `note`). Never a directory
/// another user could write.
pub fn base_dir(note: &mut dyn FnMut(String)) -> Result<PathBuf, String> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    base_dir_from(&env, &std::env::temp_dir(), note)
}

/// [`base_dir`] with the environment `env` and the temporary directory `tmp`.
pub fn base_dir_from(
    env: &dyn Fn(&str) -> Option<OsString>,
    tmp: &Path,
    note: &mut dyn FnMut(String),
) -> Result<PathBuf, String> {
    if let Some(d) = env(CACHE_ENV).map(PathBuf::from) {
        if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        private_dir(&d).map_err(|e| format!("{e} (${CACHE_ENV})"))?;
        return Ok(d);
    }
    if let Some(x) = env("XDG_CACHE_HOME").map(PathBuf::from) {
        if unsafe_dir_why(&x).is_none() {
            let d = x.join("culprit");
            private_dir(&d)?;
            return Ok(d);
        }
    }
    if let Some(h) = env("HOME").map(PathBuf::from) {
        if unsafe_dir_why(&h).is_none() {
            let c = h.join(".cache");
            private_dir(&c)?;
            let d = c.join("culprit");
            private_dir(&d)?;
            return Ok(d);
        }
    }
    let uid = euid();
    let d = tmp.join(format!("culprit-cache-{uid}"));
    let why = match private_dir(&d) {
        Ok(()) => return Ok(d),
        Err(why) => why,
    };
    // Someone else holds the name: a fresh private directory (mkdtemp makes it 0700).
    let mut templ = tmp
        .join(format!("culprit-cache-{uid}.XXXXXX"))
        .into_os_string()
        .into_encoded_bytes();
    templ.push(0);
    // SAFETY: `templ` is a writable NUL-terminated template ending in XXXXXX.
    let p = unsafe { libc::mkdtemp(templ.as_mut_ptr().cast()) };
    if p.is_null() {
        return Err(format!(
            "{why}; and mkdtemp failed: {}",
            io::Error::last_os_error()
        ));
    }
    templ.pop();
    // SAFETY: the bytes came from an OsString and mkdtemp replaced only the X's with
    // ASCII letters and digits.
    let fresh = PathBuf::from(unsafe { OsString::from_encoded_bytes_unchecked(templ) });
    private_dir(&fresh)?;
    note(format!(
        "{why}; the Python shim goes to {} instead",
        fresh.display()
    ));
    Ok(fresh)
}

/// Writes the bootstrap copy of the embedded sources into the cache unless it is there.
pub fn prepare() -> Result<Prepared, String> {
    let base = base_dir(&mut |line| eprintln!("culprit: {line}"))?;
    prepare_in(&base)
}

/// [`prepare`] with the cache at `base`, which must be safe ([`unsafe_dir_why`]).
pub fn prepare_in(base: &Path) -> Result<Prepared, String> {
    if let Some(why) = unsafe_dir_why(base) {
        return Err(format!("{}: not used: {why}", base.display()));
    }
    let dir = base.join("python");
    private_dir(&dir)?;
    let root = dir.join(crate::sources::key());
    if root.join("boot/sitecustomize.py").is_file() {
        check_copy(&root)?;
        return Ok(Prepared { root });
    }
    let fail = |what: &str, p: &Path, e: io::Error| format!("{what} {}: {e}", p.display());
    let tmp = dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    let mkdirs = |d: &Path| {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(d)
            .map_err(|e| fail("cannot create", d, e))
    };
    let written = (|| {
        for f in FILES {
            let p = tmp.join(f.path);
            if let Some(parent) = p.parent() {
                mkdirs(parent)?;
            }
            use std::io::Write;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&p)
                .and_then(|mut o| o.write_all(f.text.as_bytes()))
                .map_err(|e| fail("cannot write", &p, e))?;
        }
        mkdirs(&tmp.join("ext"))
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
            check_copy(&root)?;
            Ok(Prepared { root })
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(fail("cannot rename into", &root, e))
        }
    }
}

/// Checks that the directories of a copy found in the cache are this user's alone (a
/// copy made by an older culprit under a loose umask is not used).
fn check_copy(root: &Path) -> Result<(), String> {
    for d in [
        root.to_path_buf(),
        root.join("boot"),
        root.join("boot/culprit_trace"),
        root.join("src"),
        root.join("ext"),
    ] {
        if let Some(why) = unsafe_dir_why(&d) {
            return Err(format!("{}: not used: {why}", d.display()));
        }
    }
    Ok(())
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

    fn chown(p: &Path, uid: u32) {
        std::os::unix::fs::chown(p, Some(uid), Some(uid)).unwrap();
    }

    fn as_root(test: &str) -> bool {
        if euid() != 0 {
            eprintln!("{test}: SKIPPED another user's directories: not root (cannot chown)");
        }
        euid() == 0
    }

    #[test]
    fn another_users_home_or_temporary_cache_is_never_used() {
        if !as_root("another_users_home_or_temporary_cache_is_never_used") {
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        std::fs::create_dir(&home).unwrap();
        chown(&home, 65534);
        let tmp = t.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
        // Planted by uid 65534 where root's cache would go with HOME unset.
        let planted = tmp.join(format!("culprit-cache-{}", euid()));
        std::fs::create_dir(&planted).unwrap();
        chown(&planted, 65534);
        let env = |k: &str| (k == "HOME").then(|| home.clone().into_os_string());
        let mut notes = Vec::new();
        let base = base_dir_from(&env, &tmp, &mut |l| notes.push(l)).unwrap();
        assert!(
            base.starts_with(&tmp) && base != planted,
            "{}",
            base.display()
        );
        assert!(unsafe_dir_why(&base).is_none());
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("owned by uid 65534"), "{notes:?}");
        // A group-writable one of root's own is refused too.
        std::fs::remove_dir(&planted).unwrap();
        std::fs::create_dir(&planted).unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o770)).unwrap();
        let base = base_dir_from(&env, &tmp, &mut |_| {}).unwrap();
        assert_ne!(base, planted);
        // Unplanted: the usual private name, made 0700.
        std::fs::remove_dir(&planted).unwrap();
        let base = base_dir_from(&env, &tmp, &mut |_| panic!("no note")).unwrap();
        assert_eq!(base, planted);
        let mode = std::fs::metadata(&base).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // An explicit $CULPRIT_CACHE_DIR of another user is refused, not used.
        let env2 = |k: &str| (k == CACHE_ENV).then(|| home.clone().into_os_string());
        let e = base_dir_from(&env2, &tmp, &mut |_| {}).unwrap_err();
        assert!(e.contains("owned by uid 65534"), "{e}");
    }

    #[test]
    fn a_copy_in_a_directory_others_can_write_is_refused() {
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = prepare_in(base.path()).unwrap_err();
        assert!(e.contains("not used") && e.contains("0777"), "{e}");
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let a = prepare_in(base.path()).unwrap();
        for d in ["", "boot", "src", "ext"] {
            let m = std::fs::metadata(a.root.join(d)).unwrap().mode() & 0o777;
            assert_eq!(m, 0o700, "{d}");
        }
        // A level loosened afterwards (an old umask, another tool) stops its use.
        std::fs::set_permissions(a.root.join("ext"), std::fs::Permissions::from_mode(0o775))
            .unwrap();
        let e = prepare_in(base.path()).unwrap_err();
        assert!(e.contains("ext"), "{e}");
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
