//! Following a traced process tree: become a child subreaper so that children which
//! daemonize (fork, parent exits) are re-parented to us, reap every process of the tree,
//! and tell when it is all gone.

use std::io;

/// How the main traced process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// `exit(code)`.
    Code(i32),
    /// Killed by a signal.
    Signal(i32),
}

impl Exit {
    fn from_status(st: libc::c_int) -> Exit {
        if libc::WIFSIGNALED(st) {
            Exit::Signal(libc::WTERMSIG(st))
        } else {
            Exit::Code(libc::WEXITSTATUS(st))
        }
    }

    /// The exit status a shell would report: the code, or 128 + the signal.
    pub fn shell_status(self) -> u8 {
        match self {
            Exit::Code(c) => c as u8,
            Exit::Signal(s) => (128 + s) as u8,
        }
    }
}

/// Makes the calling process a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`):
/// orphaned descendants are re-parented to it instead of to init.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes one integer argument and touches
    // no memory of ours.
    let r = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What [`wait_tree`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeEnd {
    /// How the main process ended.
    pub main: Exit,
    /// Processes reaped (the main one included).
    pub reaped: u64,
}

/// Reaps every child (and, as a subreaper, every orphaned descendant) until none is
/// left. `on_signal` is called with each signal that interrupted the wait (see
/// [`crate::signals`]).
pub fn wait_tree(
    main: u32,
    mut on_signal: impl FnMut(crate::signals::Received),
) -> io::Result<TreeEnd> {
    let mut main_exit = None;
    let mut reaped = 0;
    loop {
        // A signal that arrived while we were not blocked in waitpid (e.g. during spawn).
        if let Some(sig) = crate::signals::take_pending() {
            on_signal(sig);
        }
        let mut st: libc::c_int = 0;
        // SAFETY: waitpid writes the status into `st`, a valid c_int.
        let r = unsafe { libc::waitpid(-1, &mut st, 0) };
        if r > 0 {
            reaped += 1;
            if r as u32 == main {
                main_exit = Some(Exit::from_status(st));
            }
            continue;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::ECHILD) => break,
            _ => return Err(e),
        }
    }
    let main = main_exit.ok_or_else(|| {
        io::Error::other(format!("process {main} was not a child of this process"))
    })?;
    Ok(TreeEnd { main, reaped })
}

/// Every live descendant of `root` (children, grandchildren…), from `/proc/*/stat`.
pub fn descendants(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for ent in rd.flatten() {
            let Some(pid) = ent.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some((state, ppid, _)) = bufpool::sys::proc_stat(pid) {
                if state != b'Z' && state != b'X' {
                    parent_of.push((pid, ppid));
                }
            }
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(c, pp) in &parent_of {
            if pp == p && !out.contains(&c) {
                out.push(c);
                frontier.push(c);
            }
        }
    }
    out
}

/// Sends `sig` to every process in `pids` (ignoring those already gone).
pub fn signal_all(pids: &[u32], sig: libc::c_int) {
    for &p in pids {
        // SAFETY: kill(2) touches no memory. The pids were our descendants a moment ago;
        // children and re-parented orphans cannot be recycled before we reap them.
        unsafe { libc::kill(p as libc::pid_t, sig) };
    }
}
