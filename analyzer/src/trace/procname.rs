//! Processes named as they were started: `argv[0]`'s base name (`redis-server`), with the
//! executable it resolved to beside it where that differs (Debian's `redis-server` is a
//! symlink to `redis-check-rdb`), and the ports it listens on and connects to, so that a
//! master and its replica are told apart: `redis-server [redis-check-rdb] :7401 → :7400`.
//!
//! [`labels`] reads them from the traces: the process's last process record (its command
//! line and executable after any exec), its main thread's last recorded name (`comm`,
//! shown where it differs: a process that renamed itself), the local port of every socket it bound and listened on or
//! accepted a connection on, and the peer port of every connection it made. Every view
//! that names processes (`timeline`, `export`, `rank`) writes [`ProcLabel::text`].

use super::decode::{CallKind, Event, LibEvent, Visit};
use super::load::{ProcessTrace, TraceSet};
use crate::error::Result;
use bufpool::format::{Addr, LibFn, Meta};
use rayon::prelude::*;
use std::collections::{BTreeSet, HashMap};

/// At most this many ports of each kind are written in a label (then `…`).
const MAX_PORTS: usize = 3;

/// What names a process in the views.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcLabel {
    /// [`started_name`]: the name it was started as (and its executable, if different).
    pub name: String,
    /// TCP/UDP ports it listens on (bound and listened, or accepted on).
    pub listens: BTreeSet<u16>,
    /// Ports of the peers it connected to (its own listening ports excluded).
    pub connects: BTreeSet<u16>,
    /// What of it is not recorded, and why ([`crate::unseen`]; only from [`labels`]).
    pub unseen: Option<crate::unseen::Unseen>,
}

impl ProcLabel {
    /// `name :L1 :L2 → :C1`: the name, the ports it listens on, the ports it connects to.
    pub fn text(&self) -> String {
        let mut s = self.name.clone();
        let ports = |set: &BTreeSet<u16>, s: &mut String| {
            for (i, p) in set.iter().enumerate() {
                if i == MAX_PORTS {
                    s.push_str(" …");
                    break;
                }
                s.push_str(&format!(" :{p}"));
            }
        };
        ports(&self.listens, &mut s);
        if !self.connects.is_empty() {
            s.push_str(" →");
            ports(&self.connects, &mut s);
        }
        s.trim().to_string()
    }
}

fn base(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// The longest `comm` the kernel keeps (`TASK_COMM_LEN` − 1 bytes): a longer name is cut.
const COMM_LEN: usize = 15;

/// Whether `comm` (as the kernel keeps it, cut to [`COMM_LEN`] bytes) names `name`.
fn comm_names(comm: &str, name: &str) -> bool {
    comm == name || (comm.len() == COMM_LEN && name.starts_with(comm))
}

/// The name a process was started as: the one function every view that names a process
/// goes through ([`ProcLabel::name`]). `argv0` as the program set it: a path (its base
/// name), or a title the program wrote over it (`nginx: worker process`: kept up to its
/// first word with a `/`). Without one, `comm`, else the executable's base name. Then, where
/// they differ from it:
///
/// - `comm` in parentheses, the name the process gave itself (`prctl(PR_SET_NAME)`,
///   `/proc/self/comm`, `setproctitle`): `python3 (mpd)`; not when it is the executable's
///   base name, which follows anyway;
/// - the executable's base name in brackets: `redis-server [redis-check-rdb]` (Debian's
///   `redis-server` is a symbolic link to `redis-check-rdb`).
pub fn started_name(argv0: Option<&str>, exe: &str, comm: Option<&str>) -> String {
    let exe_base = base(exe);
    let comm = comm.map(str::trim).filter(|c| !c.is_empty());
    let argv0 = argv0.map(str::trim).filter(|a| !a.is_empty());
    let Some(a) = argv0 else {
        return match comm {
            Some(c) if !exe_base.is_empty() && !comm_names(c, exe_base) => {
                format!("{c} [{exe_base}]")
            }
            Some(c) => c.to_string(),
            None => exe_base.to_string(),
        };
    };
    let mut started = if a.contains(char::is_whitespace) {
        // A title: its words up to the first path after the first word.
        let mut words = a.split_whitespace();
        let mut t = base(words.next().unwrap_or_default()).to_string();
        for w in words.take_while(|w| !w.contains('/')) {
            t.push(' ');
            t.push_str(w);
        }
        t
    } else {
        base(a).to_string()
    };
    let first = started
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .trim_end_matches(':')
        .to_string();
    if let Some(c) = comm {
        if !comm_names(c, &first) && !comm_names(c, &started) && !comm_names(c, exe_base) {
            started.push_str(&format!(" ({c})"));
        }
    }
    if exe_base.is_empty() || first == exe_base {
        started
    } else {
        format!("{started} [{exe_base}]")
    }
}

/// The `comm` of a process from its thread records: the last name recorded for its main
/// thread (the thread whose id is the process id; a later record follows a rename).
pub fn main_comm<'a, S: AsRef<str> + 'a>(
    pid: u32,
    threads: impl IntoIterator<Item = &'a (u32, S)>,
) -> Option<&'a str> {
    threads
        .into_iter()
        .filter(|(t, _)| *t == pid)
        .last()
        .map(|(_, n)| n.as_ref())
}

/// The labels of every process of `set`, in `set.processes` order (one decoding pass per
/// process, processes in parallel).
pub fn labels(set: &TraceSet) -> Result<Vec<ProcLabel>> {
    set.processes.par_iter().map(label_of).collect()
}

/// The label of one process (see the [module documentation](self)).
pub fn label_of(p: &ProcessTrace) -> Result<ProcLabel> {
    let mut v = Collect {
        main: p.pid,
        ..Default::default()
    };
    for t in &p.threads {
        t.visit(&mut v)?;
        v.exec.end_thread();
    }
    let argv0 = v.argv0.as_deref();
    let mut listens: BTreeSet<u16> = v
        .bound
        .iter()
        .filter(|(fd, _)| v.listened.contains(fd))
        .map(|(_, &port)| port)
        .collect();
    listens.extend(&v.accepted_on);
    let connects = v.connects.difference(&listens).copied().collect();
    Ok(ProcLabel {
        name: started_name(argv0, &v.exe, v.comm.as_deref()),
        listens,
        connects,
        unseen: crate::unseen::Unseen::of(&v.exe, v.libc, v.exec.untraced_exec()),
    })
}

/// One line per process of `set` (labelled by [`labels`]) of which something is not
/// recorded: `pid N (label): not recorded: why`. The analyses print them in their headers.
pub fn unseen_notes(set: &TraceSet, labels: &[ProcLabel]) -> Vec<String> {
    set.processes
        .iter()
        .zip(labels)
        .filter_map(|(p, l)| unseen_note(p, l))
        .collect()
}

/// [`unseen_notes`]'s line for one process and its label, if something is not recorded.
pub fn unseen_note(p: &ProcessTrace, l: &ProcLabel) -> Option<String> {
    let u = l.unseen.as_ref()?;
    Some(format!(
        "{}:{} ({}): not recorded: {}",
        p.host,
        p.pid,
        l.text(),
        u.why()
    ))
}

/// What one pass over a process's entries gathers.
#[derive(Default)]
struct Collect {
    main: u32,
    argv0: Option<String>,
    exe: String,
    comm: Option<String>,
    /// Last local port bound, by descriptor.
    bound: HashMap<i32, u16>,
    listened: BTreeSet<i32>,
    accepted_on: BTreeSet<u16>,
    connects: BTreeSet<u16>,
    /// Library calls (entries).
    libc: u64,
    exec: crate::unseen::ExecWatch,
}

/// The port of an internet address (none for other families, or port 0).
pub fn inet_port(a: Option<Addr>) -> Option<u16> {
    const AF_INET: u16 = 2;
    const AF_INET6: u16 = 10;
    a.filter(|a| matches!(a.family, AF_INET | AF_INET6) && a.port != 0)
        .map(|a| a.port)
}

impl Visit for Collect {
    fn call(&mut self, _: u64, _: CallKind, _: u64, _: u64) {}
    fn ret(&mut self, _: u64, _: CallKind, _: u64) {}
    fn wants_opts(&self, func: LibFn) -> bool {
        func.is_exec()
            || matches!(
                func,
                LibFn::Bind | LibFn::Listen | LibFn::Accept | LibFn::Accept4 | LibFn::Connect
            )
    }
    fn lib(&mut self, l: &mut LibEvent) {
        self.libc += u64::from(!l.exit);
        self.exec.lib(l);
        if !self.wants_opts(l.func) || l.func.is_exec() {
            return;
        }
        let ok = !l.exit || l.opts.ret.is_some_and(|r| r >= 0);
        let fd = l.opts.fd.unwrap_or(-1);
        match l.func {
            LibFn::Bind => {
                if let (true, Some(p)) = (ok, inet_port(l.local())) {
                    self.bound.insert(fd, p);
                }
            }
            LibFn::Listen if l.exit && ok => {
                self.listened.insert(fd);
            }
            LibFn::Accept | LibFn::Accept4 if l.exit && ok => {
                self.accepted_on.extend(inet_port(l.local()));
            }
            LibFn::Connect => {
                // A non-blocking connect fails with EINPROGRESS and still connects.
                self.connects.extend(inet_port(l.peer()));
            }
            _ => {}
        }
    }
    fn other(&mut self, e: Event) {
        if let Event::Meta { meta, tsc } = e {
            match meta {
                Meta::Proc(r) if r.pid == self.main => {
                    self.exec.proc_record(tsc, &r);
                    self.exe = String::from_utf8_lossy(&r.exe).into_owned();
                    self.argv0 = r
                        .argv
                        .first()
                        .map(|a| String::from_utf8_lossy(a).into_owned());
                }
                Meta::Thread(t) if t.tid == self.main => {
                    self.comm = Some(String::from_utf8_lossy(&t.name).into_owned());
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_started_with_the_executable_where_it_differs() {
        let n = |a: Option<&str>, e: &str, c: Option<&str>| started_name(a, e, c);
        assert_eq!(
            n(Some("redis-server"), "/usr/bin/redis-check-rdb", None),
            "redis-server [redis-check-rdb]"
        );
        assert_eq!(
            n(
                Some("/usr/bin/redis-check-rdb"),
                "/usr/bin/redis-check-rdb",
                None
            ),
            "redis-check-rdb"
        );
        assert_eq!(n(Some("./srv"), "/tmp/srv", Some("srv")), "srv");
        assert_eq!(
            n(Some("nginx: worker process"), "/usr/sbin/nginx", None),
            "nginx: worker process"
        );
        assert_eq!(
            n(
                Some("nginx: master process /usr/sbin/nginx -g x"),
                "/usr/sbin/nginx",
                None
            ),
            "nginx: master process"
        );
        assert_eq!(
            n(None, "/usr/bin/python3.11", Some("mpd")),
            "mpd [python3.11]"
        );
        assert_eq!(n(Some(""), "/bin/true", None), "true");
        // comm where the process renamed itself, not where it only repeats a name.
        assert_eq!(
            n(Some("/usr/bin/python3"), "/usr/bin/python3.11", Some("mpd")),
            "python3 (mpd) [python3.11]"
        );
        assert_eq!(
            n(
                Some("redis-server"),
                "/usr/bin/redis-check-rdb",
                Some("redis-server")
            ),
            "redis-server [redis-check-rdb]"
        );
        assert_eq!(
            n(
                Some("nginx: worker process"),
                "/usr/sbin/nginx",
                Some("nginx")
            ),
            "nginx: worker process"
        );
        assert_eq!(
            n(Some("worker"), "/usr/bin/foo", Some("foo")),
            "worker [foo]"
        );
        // The kernel keeps 15 bytes of a name.
        assert_eq!(
            n(
                Some("/opt/a-very-long-daemon-name"),
                "/opt/a-very-long-daemon-name",
                Some("a-very-long-dae")
            ),
            "a-very-long-daemon-name"
        );
        assert_eq!(
            n(Some("./srv"), "/tmp/srv", Some("srv: conn 4")),
            "srv (srv: conn 4)"
        );
    }

    #[test]
    fn labels_list_listening_then_connected_ports() {
        let l = ProcLabel {
            name: "redis-server".into(),
            listens: [7401].into(),
            connects: [7400].into(),
            ..Default::default()
        };
        assert_eq!(l.text(), "redis-server :7401 → :7400");
        let many = ProcLabel {
            name: "c".into(),
            listens: BTreeSet::new(),
            connects: [1, 2, 3, 4].into(),
            ..Default::default()
        };
        assert_eq!(many.text(), "c → :1 :2 :3 …");
    }
}
