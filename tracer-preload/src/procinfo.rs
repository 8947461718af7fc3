//! Reading what the metadata records need from `/proc/self` with raw system calls into
//! stack buffers: the command line, the executable, thread names and the memory map.

use bufpool::format::MapRecord;

/// `/proc/self/cmdline` into `buf`; returns the length (argv strings, NUL-separated).
pub fn cmdline(buf: &mut [u8]) -> usize {
    bufpool::sys::read_small_file(c"/proc/self/cmdline", buf).unwrap_or(0)
}

/// `/proc/self/exe` into `buf`; returns the length.
pub fn exe(buf: &mut [u8]) -> usize {
    crate::sysx::readlink(c"/proc/self/exe", buf)
}

/// The calling thread's name (`/proc/thread-self/comm`, without the newline).
pub fn thread_name(buf: &mut [u8; 32]) -> usize {
    let n = bufpool::sys::read_small_file(c"/proc/thread-self/comm", buf).unwrap_or(0);
    if n > 0 && buf[n - 1] == b'\n' {
        n - 1
    } else {
        n
    }
}

/// One parsed line of `/proc/PID/maps`, borrowing its path.
#[derive(Debug, PartialEq, Eq)]
pub struct MapLine<'a> {
    /// Start address.
    pub start: u64,
    /// End address.
    pub end: u64,
    /// `r`=4, `w`=2, `x`=1.
    pub prot: u8,
    /// File offset.
    pub offset: u64,
    /// Path (may be empty).
    pub path: &'a [u8],
}

impl MapLine<'_> {
    /// As a bufpool record (tests and tools).
    pub fn to_record(&self) -> MapRecord {
        MapRecord {
            start: self.start,
            end: self.end,
            offset: self.offset,
            prot: self.prot,
            path: self.path.to_vec(),
        }
    }
}

fn hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v = 0u64;
    for &c in s {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        v = (v << 4) | d as u64;
    }
    Some(v)
}

/// Parses one maps line (`start-end perms offset dev inode   path`).
pub fn parse_map_line(line: &[u8]) -> Option<MapLine<'_>> {
    let mut fields = line.splitn(6, |&c| c == b' ');
    let range = fields.next()?;
    let perms = fields.next()?;
    let offset = hex(fields.next()?)?;
    let _dev = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.next().unwrap_or(b"");
    let path = match path.iter().position(|&c| c != b' ') {
        Some(i) => &path[i..],
        None => &[],
    };
    let dash = range.iter().position(|&c| c == b'-')?;
    let start = hex(&range[..dash])?;
    let end = hex(&range[dash + 1..])?;
    if perms.len() < 3 || end < start {
        return None;
    }
    let prot =
        (perms[0] == b'r') as u8 * 4 + (perms[1] == b'w') as u8 * 2 + (perms[2] == b'x') as u8;
    Some(MapLine {
        start,
        end,
        prot,
        offset,
        path,
    })
}

/// Calls `f` for each mapping worth recording in `/proc/self/maps`: executable ones and
/// the first mapping of each file (its load base). Lines longer than the 8 KiB buffer are
/// skipped. Returns false if the file could not be read.
pub fn for_each_mapping(mut f: impl FnMut(&MapLine<'_>)) -> bool {
    use crate::sysx::raw;
    let _e = bufpool::sys::ErrnoGuard::new();
    let fd = raw!(
        libc::SYS_openat,
        libc::AT_FDCWD,
        c"/proc/self/maps".as_ptr(),
        libc::O_RDONLY | libc::O_CLOEXEC
    );
    if fd < 0 {
        return false;
    }
    let mut buf = [0u8; 8192];
    let mut have = 0usize;
    let mut prev_path = [0u8; 256];
    let mut prev_len = usize::MAX;
    let mut skipping = false;
    loop {
        let r = raw!(
            libc::SYS_read,
            fd,
            buf[have..].as_mut_ptr(),
            buf.len() - have
        );
        let eof = r <= 0;
        if !eof {
            have += r as usize;
        }
        let mut start = 0usize;
        while let Some(nl) = buf[start..have].iter().position(|&c| c == b'\n') {
            let line = &buf[start..start + nl];
            start += nl + 1;
            if skipping {
                skipping = false;
                continue;
            }
            if let Some(m) = parse_map_line(line) {
                // Paths longer than 256 bytes compare by their first 256 bytes.
                let n = m.path.len().min(prev_path.len());
                let same_file = prev_len == n && m.path[..n] == prev_path[..n];
                if m.prot & 1 == 1 || (!m.path.is_empty() && !same_file) {
                    f(&m);
                }
                prev_path[..n].copy_from_slice(&m.path[..n]);
                prev_len = n;
            }
        }
        buf.copy_within(start..have, 0);
        have -= start;
        if have == buf.len() {
            // A line longer than the buffer: drop it up to its newline.
            have = 0;
            skipping = true;
        }
        if eof {
            break;
        }
    }
    raw!(libc::SYS_close, fd);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_maps_lines() {
        let l = b"55d0c8a00000-55d0c8a02000 r-xp 00002000 08:01 123  /usr/bin/cat";
        let m = parse_map_line(l).unwrap();
        assert_eq!(
            (m.start, m.end, m.prot, m.offset, m.path),
            (
                0x55d0c8a00000,
                0x55d0c8a02000,
                5,
                0x2000,
                &b"/usr/bin/cat"[..]
            )
        );
        let m = parse_map_line(b"7ffd1000-7ffd3000 rw-p 00000000 00:00 0").unwrap();
        assert_eq!((m.prot, m.path), (6, &b""[..]));
        assert!(parse_map_line(b"garbage").is_none());
        assert!(parse_map_line(b"2000-1000 r-xp 0 0 0 x").is_none());
    }

    #[test]
    fn own_map_has_this_test_binary_and_libc() {
        let mut exec_paths = Vec::new();
        let mut firsts = Vec::new();
        assert!(for_each_mapping(|m| {
            if m.prot & 1 == 1 {
                exec_paths.push(String::from_utf8_lossy(m.path).into_owned());
            } else {
                firsts.push(m.offset);
            }
        }));
        let me = std::env::current_exe().unwrap();
        let me = me.to_string_lossy();
        assert!(exec_paths.iter().any(|p| *p == me), "{exec_paths:?}");
        assert!(
            exec_paths.iter().any(|p| p.contains("libc")),
            "{exec_paths:?}"
        );
        assert!(firsts.contains(&0));
    }

    #[test]
    fn reads_cmdline_exe_and_name() {
        let mut b = [0u8; 4096];
        assert!(cmdline(&mut b) > 0);
        let n = exe(&mut b);
        assert_eq!(
            std::str::from_utf8(&b[..n]).unwrap(),
            std::env::current_exe().unwrap().to_str().unwrap()
        );
        let mut t = [0u8; 32];
        assert!(thread_name(&mut t) > 0);
    }
}
