//! Helpers of the gcc-hooks tests: compiling instrumented C, draining a pool, naming
//! addresses from ELF symbol tables, and printing a thread's call tree.
#![allow(dead_code)]

use bufpool::format::{Decoder, Kind};
use bufpool::{Consumer, Pool};
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs the C compiler (`$CC` or `cc`) with `args`; panics with its output on failure.
pub fn cc(args: &[&str], cwd: &Path) {
    let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run the C compiler");
    assert!(
        out.status.success(),
        "cc {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One recorded hook event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ev {
    /// FnEnter or FnExit.
    pub kind: Kind,
    /// Timestamp.
    pub tsc: u64,
    /// Call site (enter only).
    pub caller: u64,
    /// Function.
    pub callee: u64,
}

/// Everything drained from a pool, per (pid, tid), in sub-buffer sequence order.
#[derive(Debug, Default)]
pub struct Drained {
    /// FnEnter/FnExit events per thread.
    pub events: BTreeMap<(u32, u32), Vec<Ev>>,
    /// Metadata records per thread.
    pub metas: BTreeMap<(u32, u32), Vec<bufpool::format::Meta>>,
    /// Entries of other kinds (library calls, lost markers…) per thread.
    pub others: BTreeMap<(u32, u32), usize>,
    /// Entries lost (sum of `Lost` markers).
    pub lost: usize,
}

/// Takes every written sub-buffer of `pool` (after a salvage pass for dead writers) and
/// decodes it. Panics on a decode error.
pub fn drain(pool: &Pool) -> Drained {
    bufpool::salvage_dead(pool);
    let c = Consumer::new(pool);
    let mut bufs = Vec::new();
    while let Some(t) = c.take() {
        let i = t.info();
        bufs.push(((i.pid, i.tid, i.seq), t.data().to_vec()));
        t.release();
    }
    bufs.sort_by_key(|b| b.0);
    let mut d = Drained::default();
    for ((pid, tid, _), data) in bufs {
        for e in Decoder::new(&data) {
            let e = e.unwrap_or_else(|e| panic!("decode error in {pid}/{tid}: {e}"));
            match e.kind {
                Kind::FnEnter | Kind::FnExit => d.events.entry((pid, tid)).or_default().push(Ev {
                    kind: e.kind,
                    tsc: e.tsc,
                    caller: e.caller,
                    callee: e.callee,
                }),
                k if k.is_meta() => {
                    let m = e.meta().expect("metadata parses").expect("is metadata");
                    d.metas.entry((pid, tid)).or_default().push(m);
                }
                k => {
                    if k == Kind::Lost {
                        d.lost += e.lost as usize;
                    }
                    *d.others.entry((pid, tid)).or_default() += 1
                }
            }
        }
    }
    d
}

/// Function symbols of some objects, at run-time addresses.
#[derive(Debug, Default)]
pub struct Symbols {
    /// start → (end, name).
    by_start: BTreeMap<u64, (u64, String)>,
    /// Objects added: (path, load bias, run-time address range of their segments).
    objects: Vec<(PathBuf, u64, std::ops::Range<u64>)>,
}

impl Symbols {
    /// Adds the function symbols of the ELF file at `path` loaded with `bias`.
    pub fn add_object(&mut self, path: &Path, bias: u64) {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let f = object::File::parse(&*data).expect("ELF parses");
        let lo = f.segments().map(|g| g.address()).min().unwrap_or(0);
        let hi = f
            .segments()
            .map(|g| g.address() + g.size())
            .max()
            .unwrap_or(0);
        self.objects
            .push((path.to_path_buf(), bias, bias + lo..bias + hi));
        for s in f.symbols().chain(f.dynamic_symbols()) {
            if s.kind() != SymbolKind::Text || s.is_undefined() || s.address() == 0 {
                continue;
            }
            let Ok(name) = s.name() else { continue };
            let start = bias + s.address();
            let new = (start + s.size().max(1), name.to_owned());
            // Several names at one address (gcc's `f.localalias` for a global `f`, aliases):
            // prefer a name without a compiler suffix, then a global one.
            let rank = |n: &str, global: bool| (!n.contains('.'), global);
            match self.by_start.get(&start) {
                Some((_, old)) if rank(old, true) >= rank(name, s.is_global()) => {}
                _ => {
                    self.by_start.insert(start, new);
                }
            }
        }
    }

    /// Adds an object from a recorded mapping: the executable mapping at `start` that maps
    /// file offset `offset` of `path`; the load bias follows from the PT_LOAD segment that
    /// holds that offset (PIE executables and shared objects alike).
    pub fn add_mapping(&mut self, path: &Path, start: u64, offset: u64) -> bool {
        let Ok(data) = std::fs::read(path) else {
            return false;
        };
        let Ok(f) = object::File::parse(&*data) else {
            return false;
        };
        for seg in f.segments() {
            let (fo, fsz) = seg.file_range();
            if offset >= fo && offset < fo + fsz.max(1) {
                let vaddr = seg.address() + (offset - fo);
                self.add_object(path, start.wrapping_sub(vaddr));
                return true;
            }
        }
        false
    }

    /// Name of the function starting exactly at `addr`.
    pub fn at(&self, addr: u64) -> String {
        match self.by_start.get(&addr) {
            Some((_, n)) => n.clone(),
            None => format!("?{addr:#x}"),
        }
    }

    /// Source file (basename) and line of `addr`, from the DWARF of the object holding it.
    pub fn locate(&self, addr: u64) -> Option<(String, u32)> {
        for (path, bias, range) in &self.objects {
            if !range.contains(&addr) {
                continue;
            }
            let Ok(l) = addr2line::Loader::new(path) else {
                continue;
            };
            let probe = addr.wrapping_sub(*bias);
            if let Ok(Some(loc)) = l.find_location(probe) {
                let file = loc.file?.rsplit('/').next()?.to_owned();
                return Some((file, loc.line?));
            }
        }
        None
    }

    /// Run-time address of the function named `name` (first match).
    pub fn addr_of(&self, name: &str) -> Option<u64> {
        self.by_start
            .iter()
            .find(|(_, (_, n))| n == name)
            .map(|(&a, _)| a)
    }

    /// Name of the function containing `addr`.
    pub fn containing(&self, addr: u64) -> String {
        match self.by_start.range(..=addr).next_back() {
            Some((_, (end, n))) if addr < *end => n.clone(),
            _ => format!("?{addr:#x}"),
        }
    }
}

/// The symbols of every object loaded in this process.
pub fn own_symbols() -> Symbols {
    let mut s = Symbols::default();
    for o in gcc_hooks::filter::loaded_objects() {
        if std::fs::metadata(&o.path).is_ok() {
            s.add_object(&o.path, o.bias);
        }
    }
    s
}

/// A thread's call tree as text: one line per call, indented two spaces per level,
/// `callee <- function containing the call site`. Checks that every exit matches the
/// innermost open call, and that the tree is closed at the end.
pub fn tree(evs: &[Ev], syms: &Symbols) -> String {
    let mut out = String::new();
    let mut stack: Vec<u64> = Vec::new();
    for e in evs {
        match e.kind {
            Kind::FnEnter => {
                out.push_str(&"  ".repeat(stack.len()));
                out.push_str(&format!(
                    "{} <- {}\n",
                    syms.at(e.callee),
                    syms.containing(e.caller)
                ));
                stack.push(e.callee);
            }
            _ => {
                let top = stack.pop().unwrap_or_else(|| {
                    panic!("exit of {} with no open call\n{out}", syms.at(e.callee))
                });
                assert_eq!(
                    top,
                    e.callee,
                    "exit of {} while {} is open\n{out}",
                    syms.at(e.callee),
                    syms.at(top)
                );
            }
        }
    }
    assert!(stack.is_empty(), "calls left open: {stack:x?}\n{out}");
    out
}

/// A fresh temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temporary directory")
}

/// `path` as a `&str` (test paths are UTF-8).
pub fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// `dir/name`.
pub fn join(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// The cargo profile directory this test was built into (`target/<profile>/`), where the
/// workspace's `culprit` binary and `libtrace.so` are.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let deps = exe.parent().expect("deps dir");
    deps.parent().expect("profile dir").to_path_buf()
}

/// A built artifact of the workspace, or a panic saying how to build it (the test suite
/// runs after `cargo build --workspace`, see scripts/test.sh).
pub fn artifact(name: &str, env: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    let p = profile_dir().join(name);
    assert!(
        p.is_file(),
        "{} not found: run `cargo build --workspace` first (same profile and CARGO_TARGET_DIR), \
         or set {env}",
        p.display()
    );
    p
}
