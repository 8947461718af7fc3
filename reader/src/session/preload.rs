//! Finding `libtrace.so` and building the `LD_PRELOAD` that puts it first.

use super::SessionError;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Environment variable naming `libtrace.so` (overrides the copy next to `culprit`).
pub const LIBTRACE_ENV: &str = "CULPRIT_LIBTRACE";

/// Finds `libtrace.so`: `$CULPRIT_LIBTRACE`, else next to the running executable
/// (`culprit`).
pub fn find_libtrace() -> Result<PathBuf, SessionError> {
    if let Some(p) = std::env::var_os(LIBTRACE_ENV) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            return Err(SessionError::Libtrace(format!(
                "{LIBTRACE_ENV}={} does not name a file",
                p.display()
            )));
        }
        return Ok(std::fs::canonicalize(&p).unwrap_or(p));
    }
    let exe = std::env::current_exe().map_err(|source| SessionError::Os {
        what: "cannot find the culprit executable",
        source,
    })?;
    let p = exe.with_file_name("libtrace.so");
    if !p.is_file() {
        return Err(SessionError::Libtrace(format!(
            "libtrace.so not found next to {} (build it with `cargo build -p tracer-preload`, \
             or set {LIBTRACE_ENV})",
            exe.display()
        )));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtrace_goes_first_and_an_existing_preload_is_kept() {
        let lib = Path::new("/x/libtrace.so");
        assert_eq!(preload_value(lib, None), "/x/libtrace.so");
        assert_eq!(
            preload_value(lib, Some("/a/libjemalloc.so /x/libtrace.so:/b/c.so".into())),
            "/x/libtrace.so:/a/libjemalloc.so:/b/c.so"
        );
    }
}
