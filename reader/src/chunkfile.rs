//! Writing chunk files, and cutting torn records off the end of old ones.

use crate::error::{io, Result};
use bufpool::disk::{self, ChunkHeader};
use bufpool::SubBufInfo;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// An append-only chunk file owned by one drain thread.
pub struct ChunkWriter {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    records: u64,
    bytes: u64,
    /// Length of the file: its header and every record written.
    len: u64,
}

impl ChunkWriter {
    /// Creates `DIR/chunks/<name>` with its file header.
    pub fn create(dir: &Path, reader_pid: u32, worker: u32, start_unix_ns: u64) -> Result<Self> {
        let cdir = dir.join(disk::CHUNK_DIR);
        crate::safefile::private_dir(&cdir)?;
        let path = cdir.join(disk::chunk_file_name(reader_pid, worker, start_unix_ns));
        let mut file = crate::safefile::create_new(&path).map_err(io(&path, "create"))?;
        let h = ChunkHeader::new(reader_pid, start_unix_ns);
        if let Err(e) = file.write_all(bytemuck::bytes_of(&h)) {
            // A full disk: leave no file cut inside its header behind.
            drop(file);
            let _ = std::fs::remove_file(&path);
            return Err(io(&path, "write header")(e));
        }
        Ok(ChunkWriter {
            path,
            file,
            buf: Vec::new(),
            records: 0,
            bytes: 0,
            len: disk::CHUNK_HEADER_SIZE as u64,
        })
    }

    /// Creates a new chunk file of drain thread `worker` named for the current time (a
    /// flight recorder's next segment: [`crate::keep`]); a name taken already is tried
    /// again one nanosecond later.
    pub fn create_segment(dir: &Path, reader_pid: u32, worker: u32) -> Result<Self> {
        let mut t = bufpool::sys::clock_ns(libc::CLOCK_REALTIME);
        loop {
            let name = dir
                .join(disk::CHUNK_DIR)
                .join(disk::chunk_file_name(reader_pid, worker, t));
            if !name.exists() {
                return Self::create(dir, reader_pid, worker, t);
            }
            t += 1;
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one sub-buffer as a record (one `write` of the whole record). On error
    /// the file may end with a partial record, which [`repair`] removes later.
    pub fn append(&mut self, info: &SubBufInfo, data: &[u8]) -> std::io::Result<()> {
        self.append_piece(info, 0, data)
    }

    /// Appends one piece of a sub-buffer (its data from offset `piece` on, see
    /// [`crate::live`]) as a record, with one `write`, like [`ChunkWriter::append`].
    pub fn append_piece(
        &mut self,
        info: &SubBufInfo,
        piece: u32,
        data: &[u8],
    ) -> std::io::Result<()> {
        self.buf.clear();
        disk::encode_piece(info, piece, data, &mut self.buf);
        self.file.write_all(&self.buf)?;
        self.records += 1;
        self.bytes += data.len() as u64;
        self.len += self.buf.len() as u64;
        Ok(())
    }

    /// Length of the file so far: header and records.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True while no record was written.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Records written.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Flushes to stable storage.
    pub fn sync(&self) -> Result<()> {
        self.file.sync_all().map_err(io(&self.path, "fsync"))
    }
}

/// What [`repair`] did to one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repaired {
    /// The file.
    pub path: PathBuf,
    /// Its length before.
    pub old_len: u64,
    /// Its length after.
    pub new_len: u64,
    /// Why the tail was cut.
    pub why: String,
}

/// Cuts torn records off the end of the chunk files of `dir`: a reader killed in the
/// middle of a write leaves a partial last record, whose sub-buffer it never released,
/// so it is saved again. Only a tail that is cut short is removed: a damaged record
/// followed by more data, a damaged file header, or a file of a reader that is still
/// running is left alone (and reported by readers of the trace).
pub fn repair(dir: &Path) -> Result<Vec<Repaired>> {
    let mut out = Vec::new();
    for path in crate::tracedir::chunk_files(dir)? {
        if writer_alive(&path) {
            continue;
        }
        // Only regular files: a FIFO named `*.chunk` must not hang the repair.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.file_type().is_file() {
            continue;
        }
        if meta.len() < disk::CHUNK_HEADER_SIZE as u64 {
            // Cut inside its header (a full disk while it was created): holds nothing.
            std::fs::remove_file(&path).map_err(io(&path, "remove"))?;
            out.push(Repaired {
                path,
                old_len: meta.len(),
                new_len: 0,
                why: "cut inside its file header (removed)".into(),
            });
            continue;
        }
        let Some((good, len)) = crate::repairdir::torn_tail(&path)? else {
            continue;
        };
        let f = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .map_err(io(&path, "open for repair"))?;
        f.set_len(good).map_err(io(&path, "truncate"))?;
        out.push(Repaired {
            path,
            old_len: len,
            new_len: good,
            why: format!("a torn last record at byte offset {good}"),
        });
    }
    Ok(out)
}

/// True if the chunk file's name says it belongs to another reader process that still
/// runs. A process with that pid that started after the file was created is another
/// process (the pid was reused), so the file's writer is gone.
pub(crate) fn writer_alive(path: &Path) -> bool {
    let Some(pid) = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.split('-').next())
        .and_then(|p| p.parse::<u32>().ok())
    else {
        return false;
    };
    // Files of this very process were written by an earlier, finished run (a run
    // repairs before its own drain threads start).
    if pid == std::process::id() {
        return false;
    }
    let Some((state, _, start_ticks)) = bufpool::sys::proc_stat(pid) else {
        return false;
    };
    if state == b'Z' || state == b'X' {
        return false;
    }
    match (created_unix_s(path), boot_time_s()) {
        (Some(created), Some(boot)) => {
            // SAFETY: sysconf has no memory effects.
            let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
            // One second of slack for the rounding of both clocks.
            boot + start_ticks / hz <= created + 1
        }
        _ => true,
    }
}

/// The creation time (s) stored in a chunk file's header.
fn created_unix_s(path: &Path) -> Option<u64> {
    use std::io::Read;
    let mut head = [0u8; disk::CHUNK_HEADER_SIZE];
    crate::safefile::open_regular(path)
        .ok()?
        .read_exact(&mut head)
        .ok()?;
    let h = disk::parse_chunk_header(&head).ok()?;
    Some(h.created_unix_ns / 1_000_000_000)
}

/// Boot time (s since the epoch), from `/proc/stat`.
fn boot_time_s() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_writer_is_recognized_and_a_reused_pid_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let now = bufpool::sys::clock_ns(libc::CLOCK_REALTIME);
        // Written by the live child, after it started.
        let w = ChunkWriter::create(dir.path(), pid, 0, now + 2_000_000_000).unwrap();
        assert!(writer_alive(w.path()));
        // "Written" long before the child started: the pid must have been reused.
        let old = ChunkWriter::create(dir.path(), pid, 1, now - 3_600_000_000_000).unwrap();
        assert!(!writer_alive(old.path()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!writer_alive(w.path()));
        // This process's own files are never "alive": it writes none while repairing.
        let own = ChunkWriter::create(dir.path(), std::process::id(), 2, now).unwrap();
        assert!(!writer_alive(own.path()));
    }
}
