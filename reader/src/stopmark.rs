//! `stop.json`: when a recording session was asked to stop.
//!
//! `culprit record` writes it into its trace directory when the first SIGINT, SIGTERM or
//! SIGHUP reaches it, **before** passing the signal on to the traced tree
//! ([`crate::session::supervise::forward`]): from that moment the traced programs are
//! being stopped, and what they do next — a replica reading the end of its master's
//! link, the servers closing their connections — is their shutdown, not their normal
//! work. `culprit watch` reads it on every poll and does not report units that ended
//! after it (it counts them). A signal sent by a terminal reached the whole foreground
//! group at the same time as the session, so a process of that group may react a little
//! before the time written here; a signal sent to the session alone (`kill`, a harness)
//! reaches the traced programs only through the session, after it.
//!
//! ```json
//! {"unix_ns": 1795860925000000000, "signal": 2}
//! ```

use std::path::Path;

/// The file's name in a trace directory.
pub const STOP_FILE: &str = "stop.json";

/// When a recording session was asked to stop, and by which signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StopMark {
    /// When the session received the signal (ns since the epoch).
    pub unix_ns: i64,
    /// The signal's number.
    pub signal: i32,
}

/// Writes `dir/stop.json` (a temporary file renamed into place; not synced: it is read
/// while the recording ends, and a crash loses nothing a reading needs).
pub fn write(dir: &Path, mark: &StopMark) -> crate::Result<()> {
    use std::io::Write;
    let path = dir.join(STOP_FILE);
    let tmp = dir.join(format!("{STOP_FILE}.{}.tmp", std::process::id()));
    let io = |what: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |source| crate::Error::Io {
            path: p,
            what,
            source,
        }
    };
    let _ = std::fs::remove_file(&tmp);
    let mut f = crate::safefile::create_new(&tmp).map_err(io("create", &tmp))?;
    let bytes = serde_json::to_vec(mark).unwrap_or_default();
    f.write_all(&bytes).map_err(io("write", &tmp))?;
    std::fs::rename(&tmp, &path).map_err(io("rename into place", &path))?;
    Ok(())
}

/// Reads `dir/stop.json`: None if there is none (the session was not asked to stop, or
/// the directory was not written by `culprit record`) or it cannot be read.
pub fn read(dir: &Path) -> Option<StopMark> {
    let bytes = crate::safefile::read_bounded(&dir.join(STOP_FILE), 4096).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Now, in ns since the epoch.
pub fn now_unix_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_reads_back_and_none_is_none() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read(d.path()), None);
        let m = StopMark {
            unix_ns: now_unix_ns(),
            signal: libc::SIGINT,
        };
        write(d.path(), &m).unwrap();
        assert_eq!(read(d.path()), Some(m));
        // Written again (a second signal): replaced.
        let m2 = StopMark {
            unix_ns: m.unix_ns + 1,
            signal: libc::SIGTERM,
        };
        write(d.path(), &m2).unwrap();
        assert_eq!(read(d.path()), Some(m2));
        std::fs::write(d.path().join(STOP_FILE), b"{not json").unwrap();
        assert_eq!(read(d.path()), None);
    }
}
