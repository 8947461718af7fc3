//! The shim's files, embedded at compile time: the package `culprit_trace`, the bootstrap
//! `sitecustomize.py`, the C extension's source and the C ABI header of `libtrace.so` it
//! includes.

/// One embedded file: its path relative to the bootstrap copy's root, and its content.
#[derive(Clone, Copy, Debug)]
pub struct Source {
    /// Path under the copy's root (`boot/…` is on `PYTHONPATH`, `src/…` is compiled).
    pub path: &'static str,
    /// The file's bytes.
    pub text: &'static str,
}

macro_rules! embed {
    ($path:literal, $file:literal) => {
        Source {
            path: $path,
            text: include_str!($file),
        }
    };
}

/// Every file of the bootstrap copy.
pub const FILES: &[Source] = &[
    embed!("boot/sitecustomize.py", "../boot/sitecustomize.py"),
    embed!(
        "boot/culprit_trace/__init__.py",
        "../culprit_trace/__init__.py"
    ),
    embed!(
        "boot/culprit_trace/__main__.py",
        "../culprit_trace/__main__.py"
    ),
    embed!(
        "boot/culprit_trace/_autostart.py",
        "../culprit_trace/_autostart.py"
    ),
    embed!(
        "boot/culprit_trace/_bootstrap.py",
        "../culprit_trace/_bootstrap.py"
    ),
    embed!(
        "boot/culprit_trace/_fallback.py",
        "../culprit_trace/_fallback.py"
    ),
    embed!(
        "boot/culprit_trace/_inject.py",
        "../culprit_trace/_inject.py"
    ),
    embed!(
        "boot/culprit_trace/_greenlets.py",
        "../culprit_trace/_greenlets.py"
    ),
    embed!("src/native.c", "native.c"),
    embed!("src/emit.h", "emit.h"),
    embed!("src/codes.h", "codes.h"),
    embed!("src/profile.h", "profile.h"),
    embed!("src/frames.h", "frames.h"),
    embed!("src/monitor.h", "monitor.h"),
    embed!("src/chain.h", "chain.h"),
    embed!("src/greenlets.h", "greenlets.h"),
    embed!("src/culprit.h", "../../tracer-preload/include/culprit.h"),
];

/// The cache key of these sources: the crate's version and a CRC-32 of every file's path
/// and content (a changed source gets a fresh copy and fresh extensions).
pub fn key() -> String {
    let mut h = crc32fast::Hasher::new();
    for f in FILES {
        h.update(f.path.as_bytes());
        h.update(&[0]);
        h.update(&(f.text.len() as u64).to_le_bytes());
        h.update(f.text.as_bytes());
    }
    format!("{}-{:08x}", env!("CARGO_PKG_VERSION"), h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_stable_and_every_file_is_there() {
        assert_eq!(key(), key());
        assert!(FILES.iter().all(|f| !f.text.is_empty()));
        assert!(FILES.iter().any(|f| f.path == "boot/sitecustomize.py"));
        // native.c includes "culprit.h" from the same directory.
        let c = FILES.iter().find(|f| f.path == "src/native.c").unwrap();
        assert!(c.text.contains("#include \"culprit.h\""));
    }
}
