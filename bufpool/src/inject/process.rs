//! Process identity for the `pid=`, `exe=` and `argv=` filters, and the glob matcher.
//!
//! - `exe=GLOB` is matched (anchored) against the executable's full path
//!   (`/proc/self/exe`) when the pattern contains a `/`, else against its base name:
//!   `exe=python3*`, `exe=/usr/sbin/nginx`.
//! - `argv=TEXT` matches when TEXT occurs in the command line (the arguments joined by
//!   single spaces); `*` and `?` inside TEXT are wildcards: `argv=server.py 7000`,
//!   `argv=mpd*--ring`.

/// What the process filters look at. Gathered once per process image.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Process id.
    pub pid: u32,
    /// Executable path.
    pub exe: Vec<u8>,
    /// Command-line arguments.
    pub argv: Vec<Vec<u8>>,
}

impl ProcessInfo {
    /// The calling process, read with raw system calls (`/proc/self/exe`,
    /// `/proc/self/cmdline`), so it is safe inside an interposing library. Allocates.
    pub fn current() -> ProcessInfo {
        let _e = crate::sys::ErrnoGuard::new();
        let mut exe = vec![0u8; 4096];
        // SAFETY: the path is NUL-terminated and `exe` has `exe.len()` writable bytes.
        let n = unsafe {
            libc::syscall(
                libc::SYS_readlinkat,
                libc::AT_FDCWD,
                c"/proc/self/exe".as_ptr(),
                exe.as_mut_ptr(),
                exe.len(),
            )
        };
        exe.truncate(n.max(0) as usize);
        let mut cmd = vec![0u8; 128 * 1024];
        let n = crate::sys::read_small_file(c"/proc/self/cmdline", &mut cmd).unwrap_or(0);
        cmd.truncate(n);
        let argv = cmd
            .strip_suffix(&[0])
            .unwrap_or(&cmd)
            .split(|&b| b == 0)
            .filter(|_| n > 0)
            .map(|a| a.to_vec())
            .collect();
        ProcessInfo {
            pid: crate::sys::getpid(),
            exe,
            argv,
        }
    }

    /// The `exe=` test.
    pub fn exe_matches(&self, pattern: &str) -> bool {
        let p = pattern.as_bytes();
        if p.contains(&b'/') {
            glob_match(p, &self.exe)
        } else {
            let base = self.exe.rsplit(|&b| b == b'/').next().unwrap_or(&[]);
            glob_match(p, base)
        }
    }

    /// The `argv=` test.
    pub fn argv_matches(&self, text: &str) -> bool {
        let line = self.argv.join(&b' ');
        let mut p = Vec::with_capacity(text.len() + 2);
        p.push(b'*');
        p.extend_from_slice(text.as_bytes());
        p.push(b'*');
        glob_match(&p, &line)
    }
}

/// Anchored glob match over bytes: `*` matches any run (also empty), `?` any one byte,
/// everything else itself. Linear backtracking on the last `*`: O(len(p) · len(s)).
pub fn glob_match(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_basics() {
        assert!(glob_match(b"", b""));
        assert!(!glob_match(b"", b"a"));
        assert!(glob_match(b"*", b""));
        assert!(glob_match(b"a*c", b"abbbc"));
        assert!(glob_match(b"a*c", b"ac"));
        assert!(!glob_match(b"a*c", b"acb"));
        assert!(glob_match(b"a?c", b"abc"));
        assert!(!glob_match(b"a?c", b"ac"));
        assert!(glob_match(b"*b*b*", b"abab"));
        assert!(!glob_match(b"*b*b*b*", b"abab"));
        assert!(glob_match(b"python3*", b"python3.11"));
    }

    #[test]
    fn exe_and_argv_filters() {
        let p = ProcessInfo {
            pid: 7,
            exe: b"/usr/bin/python3.11".to_vec(),
            argv: vec![
                b"python3".to_vec(),
                b"/tmp/x/server.py".to_vec(),
                b"7000".to_vec(),
            ],
        };
        assert!(p.exe_matches("python3*"));
        assert!(!p.exe_matches("python3"));
        assert!(p.exe_matches("/usr/bin/python3.11"));
        assert!(p.exe_matches("/usr/*/python3.?1"));
        assert!(!p.exe_matches("/bin/python3.11"));
        assert!(p.argv_matches("server.py"));
        assert!(p.argv_matches("server.py 7000"));
        assert!(p.argv_matches("python3*7000"));
        assert!(!p.argv_matches("client.py"));
    }

    #[test]
    fn current_process_is_read_with_raw_syscalls() {
        let p = ProcessInfo::current();
        assert_eq!(p.pid, std::process::id());
        assert_eq!(
            p.exe,
            std::fs::read_link("/proc/self/exe")
                .unwrap()
                .into_os_string()
                .into_encoded_bytes()
        );
        let args: Vec<Vec<u8>> = std::env::args_os()
            .map(|a| a.into_encoded_bytes())
            .collect();
        assert_eq!(p.argv, args);
    }
}
