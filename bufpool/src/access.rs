//! Who may read, write or replace what Culprit creates, and whether a file someone else
//! made may be trusted (`bufpool/FORMAT.md` §8, "Other local users").
//!
//! Everything a tool creates — the pool, trace directories and their files — is private
//! to its owner: files `0600`, directories `0700`, set exactly (by `fchmod`/`chmod` after
//! creation, whatever the umask), unless the user asked for their group to read it
//! ([`set_group_shared`]: `--shared-group` on `culprit record` / `reader`: `0640`, `0750`).
//! Nothing is ever made writable by another user.
//!
//! A file or directory made by someone else is used only if [`check_trusted`] accepts it:
//! owned by this process's real or effective uid, or by root, and writable by nobody
//! else (no group or other write bit). Another user who could write, truncate or replace
//! it could change what runs, plant symbolic links, or — for a mapped pool — shrink the
//! file and kill the mapping process with `SIGBUS`.

use std::sync::atomic::{AtomicBool, Ordering};

static GROUP_SHARED: AtomicBool = AtomicBool::new(false);
static SHARED_WRITERS: AtomicBool = AtomicBool::new(false);

/// Makes the pools this process creates from now on writable by every user (`0666`, and
/// `PoolInfo::flags` says so: [`crate::layout::POOL_FLAG_SHARED_WRITERS`]), for tracing
/// programs that run as several users (`--shared-writers`). Every local user can then
/// also read the pool, and truncate it under the traced programs (`SIGBUS`).
pub fn set_shared_writers(shared: bool) {
    SHARED_WRITERS.store(shared, Ordering::Relaxed);
}

/// True after [`set_shared_writers`]`(true)`.
pub fn shared_writers() -> bool {
    SHARED_WRITERS.load(Ordering::Relaxed)
}

/// The mode of a pool this process creates: `0666` with [`set_shared_writers`], else
/// [`file_mode`].
pub fn pool_mode() -> u32 {
    if shared_writers() {
        0o666
    } else {
        file_mode()
    }
}

/// Makes what this process creates from now on readable by its group (`0640` files,
/// `0750` directories) instead of private (`0600`, `0700`).
pub fn set_group_shared(shared: bool) {
    GROUP_SHARED.store(shared, Ordering::Relaxed);
}

/// True after [`set_group_shared`]`(true)`.
pub fn group_shared() -> bool {
    GROUP_SHARED.load(Ordering::Relaxed)
}

/// The mode of a file this process creates: `0600`, or `0640` when group-shared.
pub fn file_mode() -> u32 {
    if group_shared() {
        0o640
    } else {
        0o600
    }
}

/// The mode of a directory this process creates: `0700`, or `0750` when group-shared.
pub fn dir_mode() -> u32 {
    if group_shared() {
        0o750
    } else {
        0o700
    }
}

/// This process's real and effective uids.
pub fn uids() -> (u32, u32) {
    // SAFETY: getuid and geteuid have no preconditions and cannot fail.
    unsafe { (libc::getuid(), libc::geteuid()) }
}

/// Why a file or directory with owner `uid` and permission bits `mode` must not be
/// trusted by this process, or `None`: it must be owned by this process's real or
/// effective uid or by root, and not be writable by group or others.
pub fn untrusted_why(uid: u32, mode: u32) -> Option<String> {
    let (me, eme) = uids();
    if uid != me && uid != eme && uid != 0 {
        return Some(format!(
            "owned by uid {uid}, not by uid {eme} or root: another user controls it"
        ));
    }
    if mode & 0o022 != 0 {
        let who = if mode & 0o002 != 0 {
            "every user"
        } else {
            "its group"
        };
        return Some(format!(
            "mode {:04o}: writable by {who}, who could replace or truncate it",
            mode & 0o7777
        ));
    }
    None
}

/// [`untrusted_why`] of what `meta` describes (from `fstat` of an open descriptor, or
/// `lstat`).
pub fn check_trusted(meta: &std::fs::Metadata) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    match untrusted_why(meta.uid(), meta.mode()) {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// Checks every directory above `real` (a path without symbolic links, as from
/// `canonicalize`): each must be owned by this process's uid or root, and writable by no
/// one else unless it has the sticky bit (as `/tmp`: others may add entries there, but
/// not rename or remove this user's). Another user who could write in one of them could
/// replace what is below it. With `group_ok`, a directory its group can write is
/// accepted too (the user trusts the group: `--shared-group`).
pub fn check_ancestors(real: &std::path::Path, group_ok: bool) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    for a in real.ancestors().skip(1) {
        let m = std::fs::metadata(a).map_err(|e| format!("{}: stat: {e}", a.display()))?;
        let sticky = m.mode() & libc::S_ISVTX != 0;
        let mut mode = if sticky { m.mode() & !0o022 } else { m.mode() };
        if group_ok {
            mode &= !0o020;
        }
        if let Some(why) = untrusted_why(m.uid(), mode) {
            return Err(format!("the directory {} above it is {why}", a.display()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_own_or_root_files_writable_by_no_one_else_are_trusted() {
        let (_, me) = uids();
        assert!(untrusted_why(me, 0o600).is_none());
        assert!(untrusted_why(0, 0o644).is_none());
        assert!(untrusted_why(me, 0o755).is_none());
        let other = if me == 65534 { 65533 } else { 65534 };
        assert!(untrusted_why(other, 0o600)
            .unwrap()
            .contains("owned by uid"));
        assert!(untrusted_why(me, 0o620).unwrap().contains("its group"));
        assert!(untrusted_why(0, 0o1777).unwrap().contains("every user"));
        assert_eq!(file_mode(), 0o600);
        assert_eq!(dir_mode(), 0o700);
    }
}
