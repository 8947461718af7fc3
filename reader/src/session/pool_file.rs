//! Where a session's pool and trace go by default, and whether the pool fits there.

use bufpool::PoolConfig;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A new unique pool file name under /dev/shm (`culprit-<pid>-<ns>.pool`).
pub fn default_pool_path() -> PathBuf {
    Path::new(bufpool::pool::DEFAULT_DIR).join(format!(
        "culprit-{}-{}.pool",
        std::process::id(),
        bufpool::sys::clock_ns(libc::CLOCK_REALTIME)
    ))
}

/// The default trace directory of a command: `culprit-<command>-<unix time>`.
pub fn default_out_dir(cmd: &[OsString]) -> PathBuf {
    let base = cmd
        .first()
        .and_then(|c| Path::new(c).file_name())
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
    let total = cfg.n_subbufs + bufpool::pool::meta_area_size(cfg.n_subbufs);
    let need = bufpool::layout::file_size(total, cfg.subbuf_size);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_names_say_what_they_hold() {
        let out = default_out_dir(&["/usr/bin/python3".into(), "x.py".into()]);
        let s = out.to_string_lossy();
        assert!(s.starts_with("culprit-python3-"), "{s}");
        assert!(s["culprit-python3-".len()..].parse::<u64>().is_ok(), "{s}");
        let p = default_pool_path();
        assert!(p.starts_with(bufpool::pool::DEFAULT_DIR), "{}", p.display());
        assert_ne!(p, default_pool_path(), "two pools of one process collide");
    }

    #[test]
    fn a_pool_larger_than_its_file_system_is_refused() {
        let tmp = std::env::temp_dir();
        let cfg = PoolConfig {
            n_subbufs: 1 << 20,
            subbuf_size: 1 << 30,
            ..Default::default()
        };
        let e = check_space(&tmp.join("p.pool"), &cfg).unwrap_err();
        assert!(e.contains("MiB free"), "{e}");
    }
}
