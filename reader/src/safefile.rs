//! Opening files a tool did not create, safely: never block on a FIFO, never read a
//! device or a `/proc` file without bound.
//!
//! [`open_regular`] opens with `O_NONBLOCK` (a FIFO named `*.chunk` cannot hang the
//! open) and then checks with `fstat` on the open descriptor — not on the path, which
//! could be swapped in between — that it is a regular file. [`read_bounded`] reads at
//! most a given number of bytes, whatever size the file claims (a symlink to
//! `/dev/zero`, a `/proc` file that says 0 bytes).

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
/// the file and the bound.
pub fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>> {
    let f = open_regular(path)?;
    let mut buf = Vec::new();
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
