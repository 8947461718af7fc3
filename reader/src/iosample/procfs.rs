//! Reading `/proc` for the IO sampler: a process's `io` counters (through a descriptor kept
//! open and re-read with `pread`, one syscall per process per sample), its `stat` line, its
//! open descriptors grouped by mount or peer, the mount table, TCP sockets and
//! `/proc/diskstats`.

use super::backlog::{endpoint_text, is_listening, SockDiag};
use super::format::{Counters, DiskLine, FdClass, FdGroup};
use std::collections::{BTreeMap, HashMap};
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

/// Parses the text of `/proc/[pid]/io` (`name: value` lines; all seven counters required).
pub fn parse_io(text: &str) -> Option<Counters> {
    parse_io_bytes(text.as_bytes())
}

/// [`parse_io`] on the bytes as read (no UTF-8 pass: it runs for every process at every
/// sample).
pub fn parse_io_bytes(b: &[u8]) -> Option<Counters> {
    let mut a = [0u64; 7];
    let mut seen = 0u8;
    for line in b.split(|&c| c == b'\n') {
        if line.is_empty() {
            continue;
        }
        let colon = line.iter().position(|&c| c == b':')?;
        let i = match &line[..colon] {
            b"rchar" => 0,
            b"wchar" => 1,
            b"syscr" => 2,
            b"syscw" => 3,
            b"read_bytes" => 4,
            b"write_bytes" => 5,
            b"cancelled_write_bytes" => 6,
            _ => continue,
        };
        let digits = line[colon + 1..].trim_ascii();
        if digits.is_empty() || digits.len() > 20 {
            return None;
        }
        let mut v = 0u64;
        for &d in digits {
            if !d.is_ascii_digit() {
                return None;
            }
            v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        a[i] = v;
        seen |= 1 << i;
    }
    (seen == 0x7f).then(|| Counters::from_array(a))
}

/// An open `/proc/[pid]/io`, re-read in place.
pub struct IoFile {
    fd: OwnedFd,
}

/// Why a process's counters could not be read.
#[derive(Debug)]
pub enum IoReadError {
    /// The process is gone.
    Gone,
    /// Permission denied (another user's process, without CAP_SYS_PTRACE).
    Denied,
    /// Anything else.
    Other(io::Error),
}

impl From<io::Error> for IoReadError {
    fn from(e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ESRCH) | Some(libc::ENOENT) => IoReadError::Gone,
            Some(libc::EACCES) | Some(libc::EPERM) => IoReadError::Denied,
            _ => IoReadError::Other(e),
        }
    }
}

impl IoFile {
    /// Opens `/proc/<pid>/io`.
    pub fn open(pid: u32) -> Result<IoFile, IoReadError> {
        let p = CString::new(format!("/proc/{pid}/io")).expect("no NUL in a path of digits");
        // SAFETY: `p` is a valid NUL-terminated path; the flags ask for a read-only,
        // close-on-exec descriptor, which we own from here on.
        let fd = unsafe { libc::open(p.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error().into());
        }
        // SAFETY: `fd` was just returned by open(2) and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(IoFile { fd })
    }

    /// Reads the counters now. A process that exited (or whose pid was reused: the
    /// descriptor names the old task) gives [`IoReadError::Gone`].
    pub fn read(&self) -> Result<Counters, IoReadError> {
        let mut buf = [0u8; 512];
        // SAFETY: `buf` is writable for its whole length and the descriptor is open.
        let n = unsafe { libc::pread(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error().into());
        }
        if n == 0 {
            return Err(IoReadError::Gone);
        }
        parse_io_bytes(&buf[..n as usize]).ok_or_else(|| {
            IoReadError::Other(io::Error::new(
                io::ErrorKind::InvalidData,
                "unexpected /proc/[pid]/io format",
            ))
        })
    }
}

/// Fields of `/proc/[pid]/stat` the sampler uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// `comm`.
    pub comm: String,
    /// Parent pid.
    pub ppid: u32,
    /// Start time, clock ticks after boot.
    pub start_ticks: u64,
}

/// Parses a `/proc/[pid]/stat` line (the `comm` may contain spaces and parentheses).
pub fn parse_stat(line: &str) -> Option<Stat> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let comm = line.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = line.get(close + 1..)?.split_whitespace().collect();
    // rest[0] is field 3 (state); ppid is field 4, starttime field 22.
    Some(Stat {
        comm,
        ppid: rest.get(1)?.parse().ok()?,
        start_ticks: rest.get(19)?.parse().ok()?,
    })
}

/// Reads `/proc/<pid>/stat`, and the owner uid of `/proc/<pid>`.
pub fn read_stat(pid: u32) -> Option<(Stat, u32)> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let uid = fs::metadata(format!("/proc/{pid}")).ok()?.uid();
    Some((parse_stat(&text)?, uid))
}

/// The executable path and command line of a process (empty strings where unreadable).
pub fn exe_and_cmdline(pid: u32) -> (String, String) {
    let exe = fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut cmd = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    cmd.truncate(512);
    while cmd.last() == Some(&0) {
        cmd.pop();
    }
    for b in &mut cmd {
        if *b == 0 {
            *b = b' ';
        }
    }
    (exe, String::from_utf8_lossy(&cmd).into_owned())
}

/// The last process id the kernel allocated (the 5th field of `/proc/loadavg`): while it
/// does not change, no process was created, and `/proc` need not be listed again.
pub fn last_pid() -> Option<u32> {
    let mut buf = [0u8; 128];
    let n = {
        use std::io::Read;
        fs::File::open("/proc/loadavg").ok()?.read(&mut buf).ok()?
    };
    std::str::from_utf8(&buf[..n])
        .ok()?
        .split_whitespace()
        .nth(4)?
        .parse()
        .ok()
}

/// Whether `pid` is a live process (a thread-group leader), not another thread of one:
/// `/proc/<tid>` of a thread is reachable although `/proc` does not list it, and its `io`
/// would count the whole group again.
pub fn is_process(pid: u32) -> bool {
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    text.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse::<u32>().ok())
        == Some(pid)
}

/// Process ids listed in `/proc` now.
pub fn list_pids() -> io::Result<Vec<u32>> {
    let mut out = Vec::with_capacity(1024);
    for e in fs::read_dir("/proc")? {
        let e = e?;
        if let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) {
            out.push(pid);
        }
    }
    Ok(out)
}

/// File-system types whose files live on another machine (or behind a user-space server).
pub fn is_shared_fstype(t: &str) -> bool {
    matches!(
        t,
        "nfs"
            | "nfs4"
            | "cifs"
            | "smb3"
            | "smbfs"
            | "9p"
            | "ceph"
            | "glusterfs"
            | "lustre"
            | "afs"
            | "gpfs"
            | "beegfs"
            | "ocfs2"
            | "gfs2"
            | "virtiofs"
    ) || t.starts_with("fuse")
}

/// One line of `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// Mount point.
    pub point: String,
    /// File-system type.
    pub fstype: String,
}

/// The mount table, longest mount point first (so the first prefix match is the mount).
pub fn read_mounts() -> Vec<Mount> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut out: Vec<Mount> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let dash = f.iter().position(|x| *x == "-")?;
            Some(Mount {
                point: unescape_octal(f.get(4)?),
                fstype: f.get(dash + 1)?.to_string(),
            })
        })
        .collect();
    out.sort_by_key(|m| std::cmp::Reverse(m.point.len()));
    out
}

fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount a path lies on.
pub fn mount_of<'a>(mounts: &'a [Mount], path: &str) -> Option<&'a Mount> {
    mounts.iter().find(|m| {
        path.starts_with(&m.point)
            && (m.point == "/"
                || path.len() == m.point.len()
                || path.as_bytes().get(m.point.len()) == Some(&b'/'))
    })
}

/// A TCP socket of the namespace (from a sock_diag dump or `/proc/net/tcp{,6}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpSocket {
    /// Local address, `ip:port`.
    pub local: String,
    /// Peer address, `ip:port`.
    pub peer: String,
    /// Whether it listens.
    pub listen: bool,
}

fn hex_addr(s: &str) -> Option<String> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    match ip.len() {
        8 => {
            let v = u32::from_str_radix(ip, 16).ok()?;
            let b = v.to_le_bytes();
            Some(format!("{}.{}.{}.{}:{port}", b[0], b[1], b[2], b[3]))
        }
        32 => {
            let mut bytes = [0u8; 16];
            for w in 0..4 {
                let v = u32::from_str_radix(&ip[w * 8..w * 8 + 8], 16).ok()?;
                bytes[w * 4..w * 4 + 4].copy_from_slice(&v.to_le_bytes());
            }
            Some(format!("[{}]:{port}", std::net::Ipv6Addr::from(bytes)))
        }
        _ => None,
    }
}

/// TCP sockets by inode: from one `NETLINK_SOCK_DIAG` dump (a walk of the kernel's
/// connection hash: 0.2 ms here), or from the text of `/proc/net/tcp{,6}` where netlink
/// is refused (11 ms here: each line formatted, and the hash walked again for each read
/// of a page of it).
pub fn read_tcp() -> HashMap<u64, TcpSocket> {
    let mut dumped = Vec::new();
    match SockDiag::open().and_then(|mut d| d.dump_with_listening(&mut dumped)) {
        Ok(()) => dumped
            .iter()
            .filter(|s| s.inode != 0)
            .map(|s| {
                let socket = TcpSocket {
                    local: endpoint_text(s.family, &s.local),
                    peer: endpoint_text(s.family, &s.peer),
                    listen: is_listening(s),
                };
                (u64::from(s.inode), socket)
            })
            .collect(),
        Err(_) => read_tcp_text(),
    }
}

/// [`read_tcp`] from `/proc/net/tcp` and `/proc/net/tcp6`.
pub fn read_tcp_text() -> HashMap<u64, TcpSocket> {
    let mut out = HashMap::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = fs::read_to_string(f) else {
            continue;
        };
        for l in text.lines().skip(1) {
            let c: Vec<&str> = l.split_whitespace().collect();
            let (Some(local), Some(peer), Some(st), Some(ino)) =
                (c.get(1), c.get(2), c.get(3), c.get(9))
            else {
                continue;
            };
            let (Some(local), Some(peer), Ok(ino)) = (hex_addr(local), hex_addr(peer), ino.parse())
            else {
                continue;
            };
            out.insert(
                ino,
                TcpSocket {
                    local,
                    peer,
                    listen: *st == "0A",
                },
            );
        }
    }
    out
}

/// Groups the open descriptors of a process: files by mount, TCP sockets by peer, the rest by
/// kind. `None` if the directory cannot be listed (gone, or permission denied).
pub fn read_fds(
    pid: u32,
    mounts: &[Mount],
    tcp: &mut Option<HashMap<u64, TcpSocket>>,
) -> Option<Vec<FdGroup>> {
    let mut dir = FdDir::open(pid).ok()?;
    let mut groups: BTreeMap<(FdClass, bool, String), u64> = BTreeMap::new();
    dir.for_each_target(|target| {
        let t = String::from_utf8_lossy(target);
        let key = if let Some(ino) = t.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
            // The TCP tables are read once per listing, and only if some socket needs them.
            let tcp = tcp.get_or_insert_with(read_tcp);
            match ino.parse::<u64>().ok().and_then(|i| tcp.get(&i)) {
                Some(s) if s.listen => (FdClass::Socket, false, format!("listen {}", s.local)),
                Some(s) => (FdClass::Socket, true, s.peer.clone()),
                None => (FdClass::Other, false, "socket".to_string()),
            }
        } else if t.starts_with('/') {
            match mount_of(mounts, &t) {
                Some(m) if m.fstype == "proc" || m.fstype == "sysfs" || m.fstype == "devtmpfs" => (
                    FdClass::Other,
                    false,
                    format!("{} type={}", m.point, m.fstype),
                ),
                Some(m) => (
                    FdClass::File,
                    is_shared_fstype(&m.fstype),
                    format!("{} type={}", m.point, m.fstype),
                ),
                None => (FdClass::File, false, "?".to_string()),
            }
        } else {
            let kind = t.split(':').next().unwrap_or("other").to_string();
            (FdClass::Other, false, kind)
        };
        *groups.entry(key).or_default() += 1;
    })
    .ok()?;
    Some(
        groups
            .into_iter()
            .map(|((class, shared, place), count)| FdGroup {
                class,
                shared,
                place,
                count,
            })
            .collect(),
    )
}

/// A process's `/proc/[pid]/fd`, kept open: listed again at each
/// [`FdDir::for_each_target`] (`rewinddir`), each link read relative to it (`readlinkat`:
/// one path component to look up instead of four). The directory names the process it was
/// opened for: once that process is gone, listing it fails, even if its pid was reused.
pub struct FdDir {
    dir: std::ptr::NonNull<libc::DIR>,
}

impl FdDir {
    /// Opens `/proc/<pid>/fd`.
    pub fn open(pid: u32) -> io::Result<FdDir> {
        let p = CString::new(format!("/proc/{pid}/fd")).expect("no NUL in a path of digits");
        // SAFETY: `p` is a valid NUL-terminated path; the descriptor is owned by the
        // `DIR` made of it below, or closed here on failure.
        let fd = unsafe {
            libc::open(
                p.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is an open directory descriptor; on success the `DIR` owns it.
        let dir = unsafe { libc::fdopendir(fd) };
        match std::ptr::NonNull::new(dir) {
            Some(dir) => Ok(FdDir { dir }),
            None => {
                let e = io::Error::last_os_error();
                // SAFETY: `fd` is still ours: fdopendir failed.
                unsafe { libc::close(fd) };
                Err(e)
            }
        }
    }

    /// Calls `f` with the target of each descriptor's link (`socket:[123]`, `/path`…), in
    /// the order of the listing; fails if the process is gone. A descriptor closed
    /// between the listing and its `readlinkat` is skipped.
    pub fn for_each_target(&mut self, mut f: impl FnMut(&[u8])) -> io::Result<()> {
        let mut target = [0u8; 4096];
        // SAFETY: `self.dir` is an open `DIR` owned by `self`; rewinddir and dirfd only use it.
        let dirfd = unsafe {
            libc::rewinddir(self.dir.as_ptr());
            libc::dirfd(self.dir.as_ptr())
        };
        loop {
            // SAFETY: errno is this thread's; resetting it tells a failed readdir (errno
            // set) from the end of the listing (errno left at 0).
            unsafe { *libc::__errno_location() = 0 };
            // SAFETY: `self.dir` is an open `DIR`; the entry it returns stays valid until
            // the next readdir on it, and is only read before that.
            let e = unsafe { libc::readdir(self.dir.as_ptr()) };
            if e.is_null() {
                let err = io::Error::last_os_error();
                return match err.raw_os_error() {
                    Some(0) | None => Ok(()),
                    _ => Err(err),
                };
            }
            // SAFETY: `e` points to a valid dirent whose `d_name` is NUL-terminated.
            let name = unsafe { std::ffi::CStr::from_ptr((*e).d_name.as_ptr()) };
            if name.to_bytes().first() == Some(&b'.') {
                continue;
            }
            // SAFETY: `dirfd` is open, `name` NUL-terminated, `target` writable for its
            // length; readlinkat writes at most that many bytes and returns how many.
            let n = unsafe {
                libc::readlinkat(
                    dirfd,
                    name.as_ptr(),
                    target.as_mut_ptr().cast(),
                    target.len(),
                )
            };
            if n >= 0 {
                f(&target[..n as usize]);
            }
        }
    }
}

impl Drop for FdDir {
    fn drop(&mut self) {
        // SAFETY: `self.dir` is an open `DIR` owned by `self`, closed once, here.
        unsafe { libc::closedir(self.dir.as_ptr()) };
    }
}

/// Parses `/proc/diskstats` (partitions and virtual devices included).
pub fn parse_diskstats(text: &str) -> Vec<DiskLine> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let n = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok());
            Some(DiskLine {
                name: f.get(2)?.to_string(),
                reads: n(3)?,
                sectors_read: n(5)?,
                writes: n(7)?,
                sectors_written: n(9)?,
                io_ms: n(12)?,
            })
        })
        .collect()
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
pub fn clk_tck() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// Boot time (`btime` of `/proc/stat`), seconds since the epoch.
pub fn boot_unix_s() -> u64 {
    fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("btime ").and_then(|v| v.trim().parse().ok()))
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_of_this_process_parses() {
        let c = IoFile::open(std::process::id()).unwrap().read().unwrap();
        assert!(c.rchar > 0);
        assert_eq!(
            parse_io("rchar: 1\n"),
            None,
            "all seven counters are required"
        );
        let text = "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 5\nwrite_bytes: 6\n\
                    cancelled_write_bytes: 18446744073709551615\n";
        assert_eq!(
            parse_io(text),
            Some(Counters::from_array([1, 2, 3, 4, 5, 6, u64::MAX]))
        );
        assert_eq!(parse_io(&text.replace("5", "5x")), None);
        assert_eq!(parse_io(&text.replace("615", "616")), None, "overflow");
    }

    #[test]
    fn threads_are_not_processes() {
        let me = std::process::id();
        assert!(is_process(me));
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            // SAFETY: gettid takes no arguments.
            tx.send(unsafe { libc::gettid() } as u32).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        assert!(std::path::Path::new(&format!("/proc/{tid}/status")).exists());
        let answer = is_process(tid);
        done_tx.send(()).unwrap();
        h.join().unwrap();
        assert!(
            tid != me && !answer,
            "thread {tid} of {me} taken for a process"
        );
        assert!(!is_process(u32::MAX));
    }

    #[test]
    fn stat_with_spaces_and_parentheses_in_comm() {
        let s =
            parse_stat("42 (a (b) c) S 7 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 12345 0 0")
                .unwrap();
        assert_eq!(s.comm, "a (b) c");
        assert_eq!(s.ppid, 7);
        assert_eq!(s.start_ticks, 12345);
    }

    #[test]
    fn mounts_match_by_whole_components() {
        let m = vec![
            Mount {
                point: "/srv/nfs".into(),
                fstype: "nfs4".into(),
            },
            Mount {
                point: "/".into(),
                fstype: "ext4".into(),
            },
        ];
        assert_eq!(mount_of(&m, "/srv/nfs/a").unwrap().fstype, "nfs4");
        assert_eq!(mount_of(&m, "/srv/nfsx").unwrap().fstype, "ext4");
        assert!(is_shared_fstype("fuse.sshfs") && !is_shared_fstype("tmpfs"));
    }

    #[test]
    fn tcp_addresses_decode() {
        assert_eq!(hex_addr("0100007F:0845").unwrap(), "127.0.0.1:2117");
        assert_eq!(
            hex_addr("00000000000000000000000001000000:0016").unwrap(),
            "[::1]:22"
        );
    }

    #[test]
    fn the_tcp_table_from_netlink_is_the_text_ones() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, _) = l.accept().unwrap();
        let l6 = std::net::TcpListener::bind("[::1]:0");
        let (dumped, text) = (read_tcp(), read_tcp_text());
        for f in std::iter::once(&l as &dyn AsRawFd).chain(l6.iter().map(|l| l as &dyn AsRawFd)) {
            let ino = std::fs::metadata(format!("/proc/self/fd/{}", f.as_raw_fd()))
                .unwrap()
                .ino();
            assert!(dumped[&ino].listen);
            assert_eq!(dumped.get(&ino), text.get(&ino));
        }
        // Sockets may come and go between the two reads: compare those in both.
        let both: Vec<_> = dumped.keys().filter(|i| text.contains_key(i)).collect();
        assert!(both.len() >= 3, "{dumped:?} {text:?}");
        for i in both {
            assert_eq!(dumped[i], text[i], "inode {i}");
        }
    }

    #[test]
    fn diskstats_lines_parse() {
        let d = parse_diskstats(" 254 0 vda 10 0 80 5 20 0 160 9 0 7 14 0 0 0 0\n");
        assert_eq!(d[0].name, "vda");
        assert_eq!(
            (
                d[0].reads,
                d[0].sectors_read,
                d[0].writes,
                d[0].sectors_written,
                d[0].io_ms
            ),
            (10, 80, 20, 160, 7)
        );
    }
}
