//! What a trace holds per process — libc calls, C functions, Python functions and builtins,
//! counted — for the summary `culprit record` prints at the end, so a user sees at once
//! which processes were traced at which level (a Python process with no Python function
//! recorded stands out).

use crate::decode::{CallKind, Event, LibEvent, TraceSet, Visit};
use bufpool::format::Meta;
use rayon::prelude::*;
use std::path::Path;

/// Counts of one process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessCounts {
    /// Process id.
    pub pid: u32,
    /// Its program and arguments, from its process record (the last one: after `exec`).
    pub command: Vec<String>,
    /// The name it was started as ([`crate::procname::started_name`]), as every view
    /// names it.
    pub name: String,
    /// Calls of wrapped libc functions (`libtrace.so`).
    pub libc: u64,
    /// Calls of C functions (`-finstrument-functions`).
    pub c_functions: u64,
    /// Calls of Python functions.
    pub python: u64,
    /// Calls of C functions from Python (builtins).
    pub builtins: u64,
    /// What of it is not recorded, and why ([`crate::unseen`]).
    pub unseen: Option<crate::unseen::Unseen>,
}

impl ProcessCounts {
    /// True if the process ran a Python interpreter (by the name of its program).
    pub fn is_python(&self) -> bool {
        self.command.first().is_some_and(|p| {
            Path::new(p)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("python"))
        })
    }
}

/// Counts, exec watch, executable, `argv[0]`, main thread's last name.
#[derive(Default)]
struct Counter(
    ProcessCounts,
    crate::unseen::ExecWatch,
    String,
    Option<String>,
    Option<String>,
);

impl Visit for Counter {
    fn call(&mut self, _tsc: u64, kind: CallKind, _site: u64, _callee: u64) {
        match kind {
            CallKind::C => self.0.c_functions += 1,
            CallKind::Py => self.0.python += 1,
            CallKind::PyBuiltin => self.0.builtins += 1,
        }
    }
    fn ret(&mut self, _tsc: u64, _kind: CallKind, _callee: u64) {}
    fn lib(&mut self, l: &mut LibEvent) {
        if !l.exit {
            self.0.libc += 1;
        }
        self.1.lib(l);
    }
    fn other(&mut self, e: Event) {
        match e {
            Event::Meta {
                meta: Meta::Proc(p),
                tsc,
            } => {
                self.1.proc_record(tsc, &p);
                self.2 = String::from_utf8_lossy(&p.exe).into_owned();
                self.3 = p
                    .argv
                    .first()
                    .map(|a| String::from_utf8_lossy(a).into_owned());
                self.0.command = std::iter::once(&p.exe)
                    .chain(p.argv.iter().skip(1))
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect();
            }
            Event::Meta {
                meta: Meta::Thread(t),
                ..
            } if t.tid == self.0.pid => {
                self.4 = Some(String::from_utf8_lossy(&t.name).into_owned());
            }
            _ => {}
        }
    }
    fn wants_opts(&self, func: bufpool::format::LibFn) -> bool {
        // An exec's path (its string option) comes with the full decoding.
        func.is_exec()
    }
}

/// The counts of every process of the trace directory `dir`, by pid.
pub fn per_process(dir: &Path) -> crate::error::Result<Vec<ProcessCounts>> {
    let set = TraceSet::open(&[dir.to_path_buf()])?;
    let mut out: Vec<ProcessCounts> = set
        .processes
        .par_iter()
        .map(|p| {
            let mut c = Counter(
                ProcessCounts {
                    pid: p.pid,
                    ..Default::default()
                },
                Default::default(),
                String::new(),
                None,
                None,
            );
            for t in &p.threads {
                t.visit(&mut c)?;
                c.1.end_thread();
            }
            c.0.unseen = crate::unseen::Unseen::of(&c.2, c.0.libc, c.1.untraced_exec());
            c.0.name = crate::procname::started_name(c.3.as_deref(), &c.2, c.4.as_deref());
            Ok(c.0)
        })
        .collect::<crate::error::Result<_>>()?;
    out.sort_by_key(|c| c.pid);
    Ok(out)
}

/// Processes listed one per line; more are summed up in one line.
const MAX_LINES: usize = 20;

/// The per-process lines of `culprit record`'s summary (empty if the trace cannot be read:
/// the recorder has already said what is wrong with it).
pub fn summary(dir: &Path) -> String {
    match per_process(dir) {
        Ok(v) => render(&v),
        Err(e) => format!("culprit: cannot count what was recorded: {e}\n"),
    }
}

/// Renders counts as the summary's lines.
pub fn render(procs: &[ProcessCounts]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    if procs.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "culprit: recorded per process (libc calls / C functions / Python functions):"
    );
    for p in procs.iter().take(MAX_LINES) {
        // The program as it was started (its name in every view), then its arguments; by
        // its executable's file name when no name could be made (the path is in the trace).
        let mut words = p.command.iter().map(String::as_str);
        let prog = words.next().map(|e| {
            if p.name.is_empty() {
                Path::new(e)
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or(e)
            } else {
                p.name.as_str()
            }
        });
        let mut cmd = prog.into_iter().chain(words).collect::<Vec<_>>().join(" ");
        if cmd.chars().count() > 60 {
            cmd = cmd.chars().take(59).collect::<String>() + "…";
        }
        let _ = write!(
            s,
            "  {:>7} {:<60} {} / {} / {}",
            p.pid, cmd, p.libc, p.c_functions, p.python
        );
        if p.builtins > 0 {
            let _ = write!(s, " (+{} builtin calls)", p.builtins);
        }
        // A Python process without Python functions: the interpreter's own line (an
        // interpreter too old, -S/-E/-I) explains it better than "no libc call" (it made
        // no call Culprit wraps, such as a socket call, either).
        let no_python = p.is_python() && p.python == 0;
        match &p.unseen {
            Some(super::unseen::Unseen::NoLibcCall) | None if no_python => {
                let _ = write!(
                    s,
                    "  <- no Python function: see the line it printed, or it ran with -S/-E/-I"
                );
            }
            Some(u) => {
                let _ = write!(s, "\n          ↳ not recorded: {}", u.why());
            }
            None => {}
        }
        s.push('\n');
    }
    if procs.len() > MAX_LINES {
        let rest = &procs[MAX_LINES..];
        let sum = |f: fn(&ProcessCounts) -> u64| rest.iter().map(f).sum::<u64>();
        let _ = writeln!(
            s,
            "  … {} more process(es): {} / {} / {}",
            rest.len(),
            sum(|p| p.libc),
            sum(|p| p.c_functions),
            sum(|p| p.python)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_process_without_python_functions_stands_out() {
        let procs = vec![
            ProcessCounts {
                pid: 10,
                command: vec!["/usr/bin/python3.12".into(), "app.py".into()],
                libc: 5,
                python: 0,
                ..Default::default()
            },
            ProcessCounts {
                pid: 11,
                command: vec!["/usr/bin/python3.12".into(), "app.py".into()],
                libc: 2,
                python: 7,
                builtins: 3,
                ..Default::default()
            },
        ];
        let s = render(&procs);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 3, "{s}");
        assert!(lines[1].contains("5 / 0 / 0") && lines[1].contains("no Python function"));
        assert!(lines[2].contains("2 / 0 / 7 (+3 builtin calls)"));
        assert!(!lines[2].contains("no Python function"));
    }
}
