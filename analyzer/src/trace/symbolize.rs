//! Stage 2 — **symbolize**: stable keys and human names for what the trace records.
//!
//! Raw addresses and Python indices change from run to run (ASLR, the order in which code
//! objects are first seen), so models cannot use them. [`ProcessSymbols`] is built from a
//! process's metadata records (`Meta::Map`, `Meta::Code`) and turns them into **stable
//! keys**:
//!
//! - a C address → `(file name of its mapping, address − load base)`; the load base of a
//!   file is the start of its first mapping minus that mapping's file offset, so static
//!   functions of PIE executables and shared libraries are covered;
//! - a Python code or builtin index → `(module.qualname, file, first line)`; a Python call
//!   site → `(calling code, instruction offset)`;
//! - a library function → its fixed [`LibFn`] id.
//!
//! A process that execs runs one image after another: [`ProcessSymbols::add_at`] keeps one
//! set of tables per image, cut at each `Meta::Proc` record of an exec, and
//! [`ProcessSymbols::at`] gives the tables in force at a TSC. What a child made by fork +
//! exec did between the two (bash's `close`/`dup2`/`execve` before it becomes `readlink`)
//! ran in its parent's image, which it never recorded: [`ProcessSymbols::inherit`] gives
//! that first image the parent's tables at the fork.
//!
//! The key of a Python index is computed once, when its code record is added (it was hashed
//! on every call, a hot path of splitting). So is whether the index is **library code**
//! ([`is_stdlib_file`]: the interpreter's standard library, frozen modules, builtins), which
//! call trees collapse like libc (see [`crate::trees::TreeOptions::collapse_library`]).
//!
//! Names for people come from [`ProcessSymbols::name_c`] (a [`CSym`]: file and relative
//! address) resolved by an [`ElfResolver`] through the ELF symbol tables (`.symtab` and
//! `.dynsym`, via `object`) and DWARF line tables (`addr2line`), each file read once per
//! process. This module is public so that other tools (`culprit dump`) can call it.
//!
//! ```
//! use analyzer::symbolize::{ProcessSymbols, ElfResolver};
//! use bufpool::format::{Meta, MapRecord};
//! let mut s = ProcessSymbols::default();
//! s.add(&Meta::Map(MapRecord { start: 0x5000, end: 0x9000, offset: 0x1000, prot: 5,
//!                              path: b"/bin/demo".to_vec() }));
//! let sym = s.name_c(0x5010);
//! assert_eq!(sym.rel, 0x1010);
//! // The file does not exist here: the name falls back to file+offset.
//! assert_eq!(ElfResolver.resolve(&sym), "demo+0x1010");
//! ```

use super::elf::with_file;
use crate::hash::{mix, str_hash, FxMap};
use bufpool::format::{CodeKind, CodeRecord, LibFn, MapRecord, Meta, ProcReason};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The key of every C address outside the recorded mappings ([`ProcessSymbols::key_c`]).
pub const UNMAPPED_KEY: u64 = 0x756e_6d61_7070_6564;

/// One file mapped in a process.
#[derive(Clone, Debug)]
struct Mapping {
    start: u64,
    end: u64,
    module: usize,
}

#[derive(Clone, Debug)]
struct Module {
    path: Arc<str>,
    base: u64,
    key: u64,
}

/// The symbol tables of one process: its memory map and its Python code table.
///
/// The fields hold the tables of one program image: the process's last (current) one.
/// The images it ran before an exec are in `before_exec`, each a `ProcessSymbols` of its
/// own (with an empty `before_exec`), so every lookup method works on any of them.
#[derive(Clone, Debug, Default)]
pub struct ProcessSymbols {
    maps: Vec<Mapping>,
    modules: Vec<Module>,
    by_path: HashMap<Arc<str>, usize>,
    code: FxMap<u32, PyCode>,
    /// The images run before each exec, oldest first, each with the TSC of the exec record
    /// that ended it (only through [`ProcessSymbols::add_at`]).
    before_exec: Vec<(u64, ProcessSymbols)>,
    /// `(parent pid, TSC)` of the process's fork record, kept across execs.
    fork: Option<(u32, u64)>,
}

/// A Python code record with what is derived from it once, when it is added.
#[derive(Clone, Debug)]
struct PyCode {
    rec: CodeRecord,
    /// [`ProcessSymbols::key_py`].
    key: u64,
    /// [`ProcessSymbols::is_library_py`].
    library: bool,
}

impl PyCode {
    fn new(c: &CodeRecord) -> PyCode {
        PyCode {
            key: mix(
                mix(str_hash(&c.name), str_hash(&c.file)),
                ((c.kind as u64) << 32) | c.first_line as u64,
            ),
            library: match c.kind {
                CodeKind::PyCode => is_stdlib_file(&c.file),
                CodeKind::PyBuiltin => true,
                CodeKind::PyExcType => false,
            },
            rec: c.clone(),
        }
    }
}

/// Is a Python source file (`co_filename`, as recorded in a `CodeRecord`) part of the
/// interpreter's **standard library**?
///
/// - `<frozen …>`: modules frozen into the interpreter (`<frozen importlib._bootstrap>`,
///   and from 3.11 on `<frozen os>`, `<frozen site>`, `<frozen posixpath>`…);
/// - a path with a directory `lib/pythonX.Y/` or `lib64/pythonX.Y/` (optionally `X.Yt`, the
///   free-threaded build) — the stdlib directory of every CPython installation layout
///   (`/usr/lib/python3.12/`, `~/.pyenv/versions/3.11.7/lib/python3.11/`, a venv's base
///   interpreter…) — **unless** what follows it is under `site-packages/` or
///   `dist-packages/`: third-party packages installed there are the program's own code as
///   far as a model is concerned.
///
/// Anything else is user code, including `<string>` (code made by `exec`, which may be the
/// program's) and paths of other layouts (`/usr/lib/python3/dist-packages/…`).
pub fn is_stdlib_file(file: &[u8]) -> bool {
    if file.starts_with(b"<frozen ") {
        return true;
    }
    let mut rest = file;
    while let Some(i) = find(rest, b"/python") {
        let before = &rest[..i];
        let after = &rest[i + b"/python".len()..];
        rest = after;
        if !(before.ends_with(b"/lib") || before.ends_with(b"/lib64")) {
            continue;
        }
        // `X.Y` or `X.Yt`, then `/`.
        let major = after.iter().take_while(|b| b.is_ascii_digit()).count();
        let Some(after) = after[major..].strip_prefix(b".").filter(|_| major > 0) else {
            continue;
        };
        let minor = after.iter().take_while(|b| b.is_ascii_digit()).count();
        let after = &after[minor..];
        let after = after.strip_prefix(b"t").unwrap_or(after);
        let Some(inside) = after.strip_prefix(b"/").filter(|_| minor > 0) else {
            continue;
        };
        return find(inside, b"site-packages/").is_none()
            && find(inside, b"dist-packages/").is_none();
    }
    false
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A C address, placed in its file.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CSym {
    /// The mapped file, if the address is in a recorded mapping.
    pub module: Option<Arc<str>>,
    /// Address relative to the file's load base (the raw address when `module` is None).
    pub rel: u64,
}

impl ProcessSymbols {
    /// Takes in one metadata record (others than maps and code records are ignored).
    pub fn add(&mut self, m: &Meta) {
        match m {
            Meta::Map(r) => {
                let path: Arc<str> = String::from_utf8_lossy(&r.path).into();
                let module = match self.by_path.get(&path) {
                    Some(&i) => {
                        // The load base comes from the file's lowest mapping.
                        let base = r.start.wrapping_sub(r.offset);
                        let m = &mut self.modules[i];
                        if r.start < m.base.wrapping_add(r.offset) && base < m.base {
                            m.base = base;
                        }
                        i
                    }
                    None => {
                        let name = Path::new(&*path)
                            .file_name()
                            .map(|s| s.to_string_lossy().into_owned())
                            .unwrap_or_else(|| path.to_string());
                        self.modules.push(Module {
                            path: path.clone(),
                            base: r.start.wrapping_sub(r.offset),
                            key: str_hash(name.as_bytes()),
                        });
                        self.by_path.insert(path, self.modules.len() - 1);
                        self.modules.len() - 1
                    }
                };
                let at = self.maps.partition_point(|m| m.start <= r.start);
                self.maps.insert(
                    at,
                    Mapping {
                        start: r.start,
                        end: r.end,
                        module,
                    },
                );
            }
            Meta::Code(c) => {
                self.code.insert(c.index, PyCode::new(c));
            }
            _ => {}
        }
    }

    /// Takes in one metadata record written at `tsc`, in the image in force then. An exec
    /// record (`Meta::Proc` with [`ProcReason::Exec`]) starts a new image: the records that
    /// follow it in time are the new program's. A fork record is remembered
    /// ([`ProcessSymbols::forked_from`]). Records of one process may come thread by thread,
    /// but those written after an exec must come after its record (they do: the new image
    /// writes its maps right after it, in the same thread).
    pub fn add_at(&mut self, m: &Meta, tsc: u64) {
        match m {
            Meta::Proc(p) if p.reason == ProcReason::Exec => {
                let mut old = ProcessSymbols::default();
                std::mem::swap(self, &mut old);
                self.before_exec = std::mem::take(&mut old.before_exec);
                self.fork = old.fork.take();
                self.before_exec.push((tsc, old));
            }
            Meta::Proc(p) if p.reason == ProcReason::Fork => {
                self.fork.get_or_insert((p.ppid, tsc));
            }
            _ => {
                let image = match self.before_exec.iter().position(|(end, _)| tsc < *end) {
                    Some(i) => &mut self.before_exec[i].1,
                    None => self,
                };
                image.add(m);
            }
        }
    }

    /// The tables of the image the process ran at `tsc` (itself if it never exec'd).
    #[inline]
    pub fn at(&self, tsc: u64) -> &ProcessSymbols {
        self.image_at(tsc).1
    }

    /// [`ProcessSymbols::at`] with the image's index: 0 for the image the process started
    /// with, the number of its execs for the current one.
    #[inline]
    pub fn image_at(&self, tsc: u64) -> (usize, &ProcessSymbols) {
        if self.before_exec.is_empty() {
            return (0, self);
        }
        match self.before_exec.iter().position(|(end, _)| tsc < *end) {
            Some(i) => (i, &self.before_exec[i].1),
            None => (self.before_exec.len(), self),
        }
    }

    /// `(parent pid, TSC)` of the fork that made this process, even if it exec'd since
    /// (from the records given to [`ProcessSymbols::add_at`]).
    pub fn forked_from(&self) -> Option<(u32, u64)> {
        self.fork
    }

    fn module_of(&self, addr: u64) -> Option<&Module> {
        let i = self.maps.partition_point(|m| m.start <= addr);
        if i == 0 {
            return None;
        }
        let m = &self.maps[i - 1];
        if addr < m.end {
            Some(&self.modules[m.module])
        } else {
            None
        }
    }

    /// The stable key of a C address: its file's name and its offset from the file's load
    /// base. An address outside the recorded mappings has one key for all
    /// ([`UNMAPPED_KEY`]: its value changes with address-space randomization, a key made
    /// of it would match nothing in another run). Only an image with no mapping at all —
    /// a hand-built trace — keys addresses by their value.
    pub fn key_c(&self, addr: u64) -> u64 {
        match self.module_of(addr) {
            Some(m) => mix(m.key, addr.wrapping_sub(m.base)),
            None if self.maps.is_empty() => mix(0x00c0_ffee, addr),
            None => UNMAPPED_KEY,
        }
    }

    /// Where a C address is: its file and relative address.
    pub fn name_c(&self, addr: u64) -> CSym {
        match self.module_of(addr) {
            Some(m) => CSym {
                module: Some(m.path.clone()),
                rel: addr.wrapping_sub(m.base),
            },
            None => CSym {
                module: None,
                rel: addr,
            },
        }
    }

    /// The stable key of a Python code, builtin or exception-type index.
    #[inline]
    pub fn key_py(&self, index: u64) -> u64 {
        match self.code.get(&(index as u32)) {
            Some(c) => c.key,
            None => mix(0x0070_7079, index),
        }
    }

    /// Is this Python index library code: a function of the standard library
    /// ([`is_stdlib_file`]) or a builtin? Unknown indices and exception types are not.
    #[inline]
    pub fn is_library_py(&self, index: u64) -> bool {
        self.code.get(&(index as u32)).is_some_and(|c| c.library)
    }

    /// The stable key of a Python call site (`py_site`: calling code and offset).
    pub fn key_py_site(&self, site: u64) -> u64 {
        let (code, off) = bufpool::format::py_site_parts(site);
        mix(self.key_py(code as u64), off as u64)
    }

    /// The name of a Python index: `module.qualname (file:line)`, or `py#N` if unknown.
    pub fn name_py(&self, index: u64) -> String {
        match self.code.get(&(index as u32)).map(|c| &c.rec) {
            Some(c) => {
                let name = String::from_utf8_lossy(&c.name);
                match c.kind {
                    CodeKind::PyCode if !c.file.is_empty() => format!(
                        "{} ({}:{})",
                        name,
                        short_path(&String::from_utf8_lossy(&c.file)),
                        c.first_line
                    ),
                    _ => name.into_owned(),
                }
            }
            None => format!("py#{index}"),
        }
    }

    /// The name of a Python call site: `module.qualname+offset`.
    pub fn name_py_site(&self, site: u64) -> String {
        let (code, off) = bufpool::format::py_site_parts(site);
        match self.code.get(&code) {
            Some(c) => format!("{}+{}", String::from_utf8_lossy(&c.rec.name), off * 2),
            None => format!("py#{code}+{}", off * 2),
        }
    }

    /// Takes what a forked child inherited from its parent and did not record itself, into
    /// the image the child ran from its fork to its first exec (its only image if it never
    /// exec'd): the parent's mappings that none of the child's own overlaps, and code records
    /// of indices the child did not name. `parent` is the parent's image at the fork
    /// ([`ProcessSymbols::at`] the child's fork TSC). Returns true if anything was added.
    pub fn inherit(&mut self, parent: &ProcessSymbols) -> bool {
        let me = match self.before_exec.first_mut() {
            Some((_, first)) => first,
            None => self,
        };
        let mut changed = false;
        if me.maps.is_empty() && !parent.maps.is_empty() {
            me.maps = parent.maps.clone();
            me.modules = parent.modules.clone();
            me.by_path = parent.by_path.clone();
            changed = true;
        } else {
            for m in &parent.maps {
                let before = me.maps.partition_point(|x| x.start < m.end);
                if me.maps[..before].iter().any(|x| x.end > m.start) {
                    continue;
                }
                let module = &parent.modules[m.module];
                me.add(&Meta::Map(MapRecord {
                    start: m.start,
                    end: m.end,
                    offset: m.start.wrapping_sub(module.base),
                    prot: 5,
                    path: module.path.as_bytes().to_vec(),
                }));
                changed = true;
            }
        }
        for (k, v) in &parent.code {
            if !me.code.contains_key(k) {
                me.code.insert(*k, v.clone());
                changed = true;
            }
        }
        changed
    }

    /// The code record of an index, if recorded.
    pub fn code(&self, index: u32) -> Option<&CodeRecord> {
        self.code.get(&index).map(|c| &c.rec)
    }
}

/// The stable key of a library function.
pub fn key_lib(f: LibFn) -> u64 {
    f.id()
}

fn short_path(p: &str) -> &str {
    Path::new(p)
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or(p)
}

/// Resolves [`CSym`]s to `function (file:line)` through ELF symbols and DWARF, each file
/// read once per process (a cache shared by every resolver, keyed by the file's identity: see
/// `trace::elf`). A function is named only if the address lies inside it (the symbol's
/// extent, or DWARF's ranges), and debug information comes from the file itself or its
/// separate debug file (`/usr/lib/debug/.build-id/…`, `.gnu_debuglink`, debuginfod's
/// cache: see `trace::elf`, and `CULPRIT_DEBUG_ROOT` to search other roots). An address no
/// function holds, or in a file that cannot be read, gives `file+0xoffset`.
#[derive(Default)]
pub struct ElfResolver;

impl ElfResolver {
    /// `function (file:line)`, `function`, `file+0xoffset (file:line)` or `file+0xoffset`
    /// (the offset from the file's load base, as in [`CSym::rel`]).
    pub fn resolve(&mut self, s: &CSym) -> String {
        let Some(module) = &s.module else {
            return format!("0x{:x}", s.rel);
        };
        let fallback = || format!("{}+0x{:x}", short_path(module), s.rel);
        let found = with_file(Path::new(&**module), |f| {
            f.map(|f| f.resolve(s.rel.wrapping_add(f.vaddr_bias)))
        });
        let Some(found) = found else {
            return fallback();
        };
        match (found.function, found.location) {
            (Some(s), Some(l)) => format!("{s} ({l})"),
            (Some(s), None) => s,
            (None, Some(l)) => format!("{} ({l})", fallback()),
            (None, None) => fallback(),
        }
    }

    /// The separate debug file found for `module`, if any.
    pub fn debug_file(&self, module: &str) -> Option<PathBuf> {
        with_file(Path::new(module), |f| f?.debug_file.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bufpool::format::MapRecord;

    fn map(start: u64, end: u64, offset: u64, path: &str) -> Meta {
        Meta::Map(MapRecord {
            start,
            end,
            offset,
            prot: 5,
            path: path.as_bytes().to_vec(),
        })
    }

    #[test]
    fn keys_are_stable_across_load_addresses() {
        let mut a = ProcessSymbols::default();
        a.add(&map(0x5555_0000_0000, 0x5555_0000_1000, 0, "/x/prog"));
        a.add(&map(0x5555_0000_1000, 0x5555_0000_3000, 0x1000, "/x/prog"));
        let mut b = ProcessSymbols::default();
        b.add(&map(0x7777_0000_1000, 0x7777_0000_3000, 0x1000, "/y/prog"));
        b.add(&map(0x7777_0000_0000, 0x7777_0000_1000, 0, "/y/prog"));
        assert_eq!(a.key_c(0x5555_0000_1234), b.key_c(0x7777_0000_1234));
        assert_ne!(a.key_c(0x5555_0000_1234), a.key_c(0x5555_0000_1238));
        assert_eq!(a.name_c(0x5555_0000_1234).rel, 0x1234);
        assert_eq!(a.name_c(0x10).module, None);
    }

    #[test]
    fn python_keys_use_names_not_indices() {
        let rec = |index, name: &str| {
            Meta::Code(CodeRecord {
                index,
                kind: CodeKind::PyCode,
                first_line: 10,
                name: name.as_bytes().to_vec(),
                file: b"/a/mpd.py".to_vec(),
            })
        };
        let mut a = ProcessSymbols::default();
        a.add(&rec(1, "mpd.handle"));
        let mut b = ProcessSymbols::default();
        b.add(&rec(7, "mpd.handle"));
        assert_eq!(a.key_py(1), b.key_py(7));
        assert_eq!(
            a.key_py_site(bufpool::format::py_site(1, 4)),
            b.key_py_site(bufpool::format::py_site(7, 4))
        );
        assert_eq!(a.name_py(1), "mpd.handle (mpd.py:10)");
        assert_eq!(
            a.name_py_site(bufpool::format::py_site(1, 4)),
            "mpd.handle+8"
        );
    }

    #[test]
    fn resolves_static_functions_of_this_test_binary() {
        // This test binary is a PIE with a symbol table: map it as the kernel would
        // (at a random base) and resolve one of its own static functions.
        let exe = std::env::current_exe().unwrap();
        let data = std::fs::read(&exe).unwrap();
        use object::{Object, ObjectSymbol};
        let obj = object::File::parse(&*data).unwrap();
        let sym = obj
            .symbols()
            .find(|s| s.name().is_ok_and(|n| n.contains("short_path")) && s.address() != 0)
            .expect("symbol in test binary");
        let base = 0x5600_0000_0000u64;
        let mut s = ProcessSymbols::default();
        s.add(&map(base, base + 0x1000_0000, 0, exe.to_str().unwrap()));
        let c = s.name_c(base + sym.address());
        let name = ElfResolver.resolve(&c);
        assert!(name.contains("short_path"), "{name}");
    }
}
