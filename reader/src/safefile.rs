//! Opening files a tool did not create, safely: never block on a FIFO, never read a
//! device or a `/proc` file without bound.
//!
//! [`open_regular`] opens with `O_NONBLOCK` (a FIFO named `*.chunk` cannot hang the
//! open) and then checks with `fstat` on the open descriptor — not on the path, which
//! could be swapped in between — that it is a regular file. [`read_bounded`] reads at
//! most a given number of bytes, whatever size the file claims (a symlink to
//! `/dev/zero`, a `/proc` file that says 0 bytes).
//!
//! Writing: [`create_new`], [`open_append`] and [`private_dir`] create what a tool writes
//! so that another local user can neither read it (files `0600`, directories `0700`,
//! unless `--shared-group`) nor redirect it (no symbolic link followed, no directory used
//! that someone else controls): `bufpool/FORMAT.md` §8, "Other local users".

use crate::error::{io, Error, Result};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest `manifest.json` read (a manifest lists every traced process: about half a
/// kilobyte each, so this is room for some 100 000 processes).
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;

/// What kind of file `ft` is, in words (one wording for every tool: the pool's own).
pub use bufpool::pool::file_kind as kind_of;

/// Opens `path` read-only without blocking and checks that it is a regular file.
pub fn open_regular(path: &Path) -> Result<File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io(path, "open"))?;
    let ft = f.metadata().map_err(io(path, "stat"))?.file_type();
    if !ft.is_file() {
        return Err(Error::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(ft),
        });
    }
    Ok(f)
}

/// Reads a whole regular file of at most `max` bytes; a larger one is an error naming
/// the file and the bound — found from `fstat` before a byte is read (a sparse 3 GB
/// file costs nothing), and again while reading if the file grows or lies about its size.
pub fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>> {
    let f = open_regular(path)?;
    let len = f.metadata().map_err(io(path, "stat"))?.len();
    if len > max {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            max,
        });
    }
    let mut buf = Vec::with_capacity(len as usize);
    f.take(max + 1)
        .read_to_end(&mut buf)
        .map_err(io(path, "read"))?;
    if buf.len() as u64 > max {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            max,
        });
    }
    Ok(buf)
}

/// Creates `path` as a new file for writing, never following a symbolic link and never
/// opening a file that exists (`O_CREAT|O_EXCL|O_NOFOLLOW`), with the mode of
/// `bufpool::access::file_mode` (`0600`, or `0640` with `--shared-group`).
pub fn create_new(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::PermissionsExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    f.set_permissions(std::fs::Permissions::from_mode(bufpool::access::file_mode()))?;
    Ok(f)
}

/// Opens `path` for appending, creating it as [`create_new`] does if it does not exist;
/// an existing one must be a regular file (not a symbolic link: `O_NOFOLLOW`) that this
/// user may trust (`bufpool::access::check_trusted`). Returns the file and whether it
/// was created.
pub fn open_append(path: &Path) -> Result<(File, bool)> {
    match create_new(path) {
        Ok(f) => return Ok((f, true)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(path, "create")(e)),
    }
    let f = std::fs::OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(io(path, "open for appending"))?;
    let meta = f.metadata().map_err(io(path, "stat"))?;
    if !meta.is_file() {
        return Err(Error::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(meta.file_type()),
        });
    }
    bufpool::access::check_trusted(&meta).map_err(|why| Error::Untrusted {
        path: path.to_path_buf(),
        why,
    })?;
    Ok((f, false))
}

/// Makes `dir` a directory only this user (or root) controls, to write files in: creates
/// it (and missing parents) if needed — the last level with the mode of
/// `bufpool::access::dir_mode`, exactly — and checks, for a directory that existed, and
/// for every directory above it, that no other user could have planted or could replace
/// what is in it (`bufpool::access::check_trusted`; an ancestor writable by others is
/// accepted only with the sticky bit, as `/tmp`). A symbolic link on the way must be
/// this user's or root's. The error names the directory and who else controls it.
pub fn private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io(parent, "create directory"))?;
    }
    let created = match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(io(dir, "create directory")(e)),
    };
    if let Err(e) = check_dir(dir, !created) {
        if created {
            // Refused: leave nothing behind.
            let _ = std::fs::remove_dir(dir);
        }
        return Err(e);
    }
    if created {
        std::fs::set_permissions(
            dir,
            std::fs::Permissions::from_mode(bufpool::access::dir_mode()),
        )
        .map_err(io(dir, "chmod"))?;
    }
    Ok(())
}

/// Checks an existing directory as [`private_dir`] does, without creating anything:
/// the directory itself (when `itself`: owner this user or root, writable by no one
/// else), every directory above it, and the symbolic links on the way.
pub fn check_dir(dir: &Path, itself: bool) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let untrusted = |p: &Path, why: String| Error::Untrusted {
        path: p.to_path_buf(),
        why,
    };
    let abs = std::path::absolute(dir).map_err(io(dir, "resolve"))?;
    // Symbolic links on the way as given: only this user's or root's are followed.
    let mut at = std::path::PathBuf::new();
    for c in abs.components() {
        at.push(c);
        if let Ok(m) = std::fs::symlink_metadata(&at) {
            if m.file_type().is_symlink() {
                if let Some(why) = bufpool::access::untrusted_why(m.uid(), 0) {
                    return Err(untrusted(&at, format!("a symbolic link {why}")));
                }
            }
        }
    }
    let real = std::fs::canonicalize(&abs).map_err(io(dir, "resolve"))?;
    let meta = std::fs::metadata(&real).map_err(io(dir, "stat"))?;
    if !meta.is_dir() {
        let kind = kind_of(meta.file_type());
        return Err(untrusted(dir, format!("{kind}, not a directory")));
    }
    // A directory the group can write is the group's to trust (--shared-group).
    let group_ok = bufpool::access::group_shared();
    let hint = |why: String| {
        if why.contains("its group") {
            format!("{why} (--shared-group accepts a directory your group can write)")
        } else {
            why
        }
    };
    if itself {
        let mode = meta.mode() & if group_ok { !0o020 } else { !0 };
        if let Some(why) = bufpool::access::untrusted_why(meta.uid(), mode) {
            return Err(untrusted(dir, hint(why)));
        }
    }
    bufpool::access::check_ancestors(&real, group_ok).map_err(|why| untrusted(dir, hint(why)))
}

/// Creates or replaces an output file the user named (a model, a page, a sample file)
/// without letting another user redirect it: a name that does not exist is created
/// `O_CREAT|O_EXCL|O_NOFOLLOW` (mode `0666` less the umask, as any output); an existing
/// one is truncated only if it — and, for a symbolic link, the link itself — belongs to
/// this user or root (a file or link someone else planted in `/tmp` is refused: writing
/// through it would overwrite what the link points to, or hand them the output).
/// Character devices such as `/dev/null` are written as they are.
pub fn create_output(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |why: String| std::io::Error::other(format!("not written: {why}"));
    for _ in 0..2 {
        let link = match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                match std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                    .open(path)
                {
                    // Made between the two calls: look again.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    r => return r,
                }
            }
            Err(e) => return Err(e),
            Ok(m) => m,
        };
        let follow = link.file_type().is_symlink();
        if follow {
            if let Some(why) = bufpool::access::untrusted_why(link.uid(), 0) {
                return Err(refuse(format!("a symbolic link {why}")));
            }
        }
        let flags = libc::O_CLOEXEC | libc::O_NONBLOCK | if follow { 0 } else { libc::O_NOFOLLOW };
        let f = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(flags)
            .open(path)?;
        let m = f.metadata()?;
        if let Some(why) = bufpool::access::untrusted_why(m.uid(), 0) {
            return Err(refuse(why));
        }
        if m.is_file() {
            f.set_len(0)?;
        }
        // Back to blocking writes (O_NONBLOCK only kept a FIFO from hanging the open).
        // SAFETY: fcntl on a descriptor `f` owns; it changes only its status flags.
        unsafe {
            use std::os::fd::AsRawFd;
            let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
            if fl >= 0 {
                libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
            }
        }
        return Ok(f);
    }
    Err(refuse("the name keeps changing under it".into()))
}

/// Writes `DIR/name` atomically: a temporary file made by [`create_new`] (a stale one, or a
/// link planted at its name, is unlinked first), fsync, rename.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = create_new(&tmp).map_err(io(&tmp, "create"))?;
    f.write_all(bytes).map_err(io(&tmp, "write"))?;
    f.sync_all().map_err(io(&tmp, "fsync"))?;
    std::fs::rename(&tmp, &path).map_err(io(&path, "rename into place"))?;
    Ok(())
}
