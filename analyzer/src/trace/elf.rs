//! Names of code addresses in one ELF file: its symbols, each with its **extent**, and its
//! debug information, found the way gdb and `eu-addr2line` find it.
//!
//! A symbol names an address only if the address lies inside it: `[st_value, st_value +
//! st_size)`, or, for a symbol without a size, up to the next symbol and within its
//! section. The nearest symbol below an address is not its function in a stripped program:
//! Debian's `redis-server` keeps only its exported functions (`.dynsym`), and a call site in
//! the static `connSocketRead` lies past the end of the exported function below it. Such
//! an address gets no name from the symbols (`ElfFile::resolve` finds no function, and the
//! caller writes `file+0xoffset`).
//!
//! The symbols are the file's `.symtab` and `.dynsym` and those of its **separate debug
//! file**, which also gives the DWARF (function names of inlined and static functions, file
//! and line). The debug file is looked for, in this order:
//!
//! 1. by build ID: `ROOT/.build-id/xx/yyyy….debug` (Debian's `-dbgsym` packages, Fedora's
//!    `-debuginfo`), for each debug root;
//! 2. by `.gnu_debuglink`: `DIR/NAME`, `DIR/.debug/NAME`, `ROOT/DIR/NAME`, where `DIR` is the
//!    file's directory (a candidate must have the link's CRC, or the file's build ID);
//! 3. in debuginfod's client cache: `$DEBUGINFOD_CACHE_PATH/<build-id>/debuginfo`, else
//!    `$XDG_CACHE_HOME/debuginfod_client/…`, else `$HOME/.cache/debuginfod_client/…` (only
//!    what is already there: nothing is downloaded).
//!
//! The debug roots are `/usr/lib/debug`, or the colon-separated directories of
//! `$CULPRIT_DEBUG_ROOT` ([`DEBUG_ROOT_ENV`]) instead. A debug file's `.gnu_debugaltlink`
//! (the common part `dwz` moved out, as Debian does) is opened beside it when found.

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SectionKind, SymbolKind};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

/// Directories searched for separate debug files instead of `/usr/lib/debug`
/// (colon-separated).
pub const DEBUG_ROOT_ENV: &str = "CULPRIT_DEBUG_ROOT";

/// One symbol with its extent `[start, end)`, in the file's virtual addresses.
#[derive(Clone, Debug)]
struct Sym {
    start: u64,
    end: u64,
    name: String,
}

/// A file's code symbols, sorted by start address.
#[derive(Debug, Default)]
struct SymTable {
    syms: Vec<Sym>,
}

/// A symbol as read, before its extent is known.
struct RawSym {
    addr: u64,
    size: u64,
    /// `[start, end)` of its section, when it has one.
    section: Option<(u64, u64)>,
    name: String,
}

/// How far below an address [`SymTable::find`] looks for a symbol whose extent holds it
/// (symbols nested in others, aliases).
const LOOK_BACK: usize = 16;

impl SymTable {
    /// The code symbols of `obj` (functions, and untyped symbols in executable sections),
    /// added to `raw`.
    fn collect(obj: &object::File<'_>, raw: &mut Vec<RawSym>) {
        for s in obj.symbols().chain(obj.dynamic_symbols()) {
            let section = s.section_index().and_then(|i| obj.section_by_index(i).ok());
            let code = match s.kind() {
                SymbolKind::Text => true,
                SymbolKind::Unknown => section
                    .as_ref()
                    .is_some_and(|sec| sec.kind() == SectionKind::Text),
                _ => false,
            };
            let Ok(name) = s.name() else { continue };
            if !code || name.is_empty() || s.address() == 0 || s.is_undefined() {
                continue;
            }
            raw.push(RawSym {
                addr: s.address(),
                size: s.size(),
                section: section.map(|sec| (sec.address(), sec.address() + sec.size())),
                name: addr2line::demangle_auto(name.into(), None).into_owned(),
            });
        }
    }

    /// Gives every symbol its extent: its size, or up to the next symbol's start within
    /// its section (nothing if it has neither a size nor a section).
    fn build(mut raw: Vec<RawSym>) -> SymTable {
        raw.sort_by(|a, b| (a.addr, b.size, &a.name).cmp(&(b.addr, a.size, &b.name)));
        raw.dedup_by(|b, a| a.addr == b.addr && a.name == b.name);
        let mut syms = Vec::with_capacity(raw.len());
        for (i, s) in raw.iter().enumerate() {
            let end = if s.size > 0 {
                s.addr.saturating_add(s.size)
            } else {
                let Some((_, sec_end)) = s.section else {
                    continue;
                };
                let next = raw[i + 1..]
                    .iter()
                    .map(|n| n.addr)
                    .find(|&a| a > s.addr)
                    .unwrap_or(u64::MAX);
                next.min(sec_end)
            };
            if end > s.addr {
                syms.push(Sym {
                    start: s.addr,
                    end,
                    name: s.name.clone(),
                });
            }
        }
        SymTable { syms }
    }

    /// The symbol whose extent holds `addr`; of several, the one starting last.
    fn find(&self, addr: u64) -> Option<&str> {
        let i = self.syms.partition_point(|s| s.start <= addr);
        self.syms[..i]
            .iter()
            .rev()
            .take(LOOK_BACK)
            .find(|s| addr < s.end)
            .map(|s| s.name.as_str())
    }
}

/// A file as the cache of [`with_file`] knows it: its path and identity, so that a file
/// rebuilt or replaced under the same path is read again.
#[derive(Hash, PartialEq, Eq)]
struct FileId {
    path: PathBuf,
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

impl FileId {
    fn of(path: &Path) -> Option<FileId> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(FileId {
            path: path.to_path_buf(),
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        })
    }
}

/// Every file opened for naming, for the life of the process: `culprit watch` ranks anew at
/// every poll, and read and parsed each binary's symbols and DWARF again each time (a sixth
/// of its CPU in a redis soak). One entry per path — a file whose identity changed replaces
/// its old entry; a file whose metadata cannot be read is opened (or not) without caching.
/// Debug files found for a cached file are not looked for again while it is cached.
static OPENED: LazyLock<Mutex<HashMap<FileId, Option<ElfFile>>>> = LazyLock::new(Default::default);

/// Calls `f` with the ELF file at `path` opened for naming (`None`: not a readable ELF
/// file), from the process-wide cache.
pub(crate) fn with_file<R>(path: &Path, f: impl FnOnce(Option<&ElfFile>) -> R) -> R {
    let Some(id) = FileId::of(path) else {
        return f(ElfFile::open(path).as_ref());
    };
    // A panic while the lock was held leaves at worst a missing entry: the map stays usable.
    let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
    if !opened.contains_key(&id) {
        opened.retain(|k, _| k.path != id.path);
    }
    let file = opened.entry(id).or_insert_with(|| ElfFile::open(path));
    f(file.as_ref())
}

/// One ELF file opened for naming: its symbols and DWARF (its own or its debug file's).
pub(crate) struct ElfFile {
    symbols: SymTable,
    dwarf: Option<addr2line::Loader>,
    /// Added to a base-relative address to get an ELF virtual address.
    pub(crate) vaddr_bias: u64,
    /// The separate debug file used, if one was found.
    pub(crate) debug_file: Option<PathBuf>,
}

/// What [`ElfFile::resolve`] found for an address.
pub(crate) struct Found {
    /// The function whose extent holds the address (from DWARF, else from the symbols).
    pub(crate) function: Option<String>,
    /// `file:line` of the address, from DWARF.
    pub(crate) location: Option<String>,
}

impl ElfFile {
    /// Opens `path` and looks for its debug file; `None` if it is not a readable ELF file.
    pub(crate) fn open(path: &Path) -> Option<ElfFile> {
        let data = std::fs::read(path).ok()?;
        let obj = object::File::parse(&*data).ok()?;
        // Base-relative addresses count from the page of the lowest loaded segment.
        let vaddr_bias = obj
            .segments()
            .filter(|s| s.size() > 0)
            .map(|s| s.address())
            .min()
            .unwrap_or(0)
            & !0xfff;
        let mut raw = Vec::new();
        SymTable::collect(&obj, &mut raw);
        let debug_file = find_debug_file(path, &obj, &Roots::from_env());
        let mut dwarf_from = path.to_path_buf();
        if let Some(d) = &debug_file {
            if let Ok(dd) = std::fs::read(d) {
                if let Ok(dobj) = object::File::parse(&*dd) {
                    SymTable::collect(&dobj, &mut raw);
                    dwarf_from = d.clone();
                }
            }
        }
        Some(ElfFile {
            symbols: SymTable::build(raw),
            dwarf: open_dwarf(&dwarf_from),
            vaddr_bias,
            debug_file,
        })
    }

    /// The function holding the ELF virtual address `probe`, and its file:line. The
    /// function is the innermost one of DWARF (an inlined function, where its code was
    /// inlined: the line is in it), else the symbol whose extent holds the address.
    pub(crate) fn resolve(&self, probe: u64) -> Found {
        let mut function = None;
        let mut location = None;
        if let Some(d) = &self.dwarf {
            if let Ok(mut frames) = d.find_frames(probe) {
                if let Ok(Some(f)) = frames.next() {
                    function = f
                        .function
                        .as_ref()
                        .and_then(|n| n.demangle().ok())
                        .map(|n| n.into_owned());
                    location = f.location.as_ref().and_then(loc_text);
                }
            }
            if location.is_none() {
                location = d
                    .find_location(probe)
                    .ok()
                    .flatten()
                    .as_ref()
                    .and_then(loc_text);
            }
        }
        if function.is_none() {
            function = self.symbols.find(probe).map(str::to_owned);
        }
        Found { function, location }
    }
}

fn loc_text(l: &addr2line::Location<'_>) -> Option<String> {
    let file = Path::new(l.file?)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| l.file.unwrap_or_default().to_owned());
    Some(match l.line {
        Some(n) => format!("{file}:{n}"),
        None => file,
    })
}

/// The DWARF of `path`, with its `.gnu_debugaltlink` file when one is found.
fn open_dwarf(path: &Path) -> Option<addr2line::Loader> {
    let alt = (|| {
        let data = std::fs::read(path).ok()?;
        let obj = object::File::parse(&*data).ok()?;
        let (name, build_id) = obj.gnu_debugaltlink().ok()??;
        let name = Path::new(OsStr::from_bytes(name));
        let candidates = [
            Some(name.to_path_buf()),
            path.parent().map(|d| d.join(name)),
            build_id_path(&Roots::from_env().roots, build_id)
                .into_iter()
                .next(),
        ];
        candidates.into_iter().flatten().find(|p| {
            std::fs::read(p)
                .ok()
                .and_then(|d| {
                    let o = object::File::parse(&*d).ok()?;
                    Some(o.build_id().ok()?? == build_id)
                })
                .unwrap_or(false)
        })
    })();
    match alt {
        Some(a) => addr2line::Loader::new_with_sup(path, Some(&a))
            .or_else(|_| addr2line::Loader::new(path))
            .ok(),
        None => addr2line::Loader::new(path).ok(),
    }
}

/// Where separate debug files are looked for.
#[derive(Clone, Debug)]
pub(crate) struct Roots {
    /// The debug roots (`/usr/lib/debug`, or [`DEBUG_ROOT_ENV`]'s).
    pub(crate) roots: Vec<PathBuf>,
    /// debuginfod client cache directories (each holding `<build-id>/debuginfo`).
    pub(crate) caches: Vec<PathBuf>,
}

impl Roots {
    /// From the environment (see the [module documentation](self)).
    pub(crate) fn from_env() -> Roots {
        let roots = match std::env::var_os(DEBUG_ROOT_ENV) {
            Some(v) => std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect(),
            None => vec![PathBuf::from("/usr/lib/debug")],
        };
        let cache = if let Some(c) = std::env::var_os("DEBUGINFOD_CACHE_PATH") {
            Some(PathBuf::from(c))
        } else if let Some(x) = std::env::var_os("XDG_CACHE_HOME") {
            Some(PathBuf::from(x).join("debuginfod_client"))
        } else {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/debuginfod_client"))
        };
        Roots {
            roots,
            caches: cache.into_iter().collect(),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `ROOT/.build-id/xx/yyyy….debug` for each root.
fn build_id_path(roots: &[PathBuf], id: &[u8]) -> Vec<PathBuf> {
    if id.len() < 2 {
        return Vec::new();
    }
    let h = hex(id);
    roots
        .iter()
        .map(|r| {
            r.join(".build-id")
                .join(&h[..2])
                .join(format!("{}.debug", &h[2..]))
        })
        .collect()
}

/// The separate debug file of `path` (whose parsed contents are `obj`), if one is found
/// (see the [module documentation](self) for where).
pub(crate) fn find_debug_file(
    path: &Path,
    obj: &object::File<'_>,
    roots: &Roots,
) -> Option<PathBuf> {
    let id = obj.build_id().ok().flatten().filter(|id| !id.is_empty());
    let same_id = |p: &Path| -> bool {
        let Some(id) = id else { return true };
        std::fs::read(p)
            .ok()
            .and_then(|d| {
                let o = object::File::parse(&*d).ok()?;
                // A debug file without a build ID cannot be told apart: it is taken.
                Some(o.build_id().ok().flatten().is_none_or(|b| b == id))
            })
            .unwrap_or(false)
    };
    let is_file = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file());
    if let Some(id) = id {
        if let Some(p) = build_id_path(&roots.roots, id)
            .into_iter()
            .find(|p| is_file(p) && same_id(p))
        {
            return Some(p);
        }
    }
    if let Ok(Some((name, crc))) = obj.gnu_debuglink() {
        let name = Path::new(OsStr::from_bytes(name));
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if let Some(dir) = real.parent() {
            let mut candidates = vec![dir.join(name), dir.join(".debug").join(name)];
            let rel = dir.strip_prefix("/").unwrap_or(dir);
            candidates.extend(roots.roots.iter().map(|r| r.join(rel).join(name)));
            let found = candidates.into_iter().find(|p| {
                p != &real
                    && is_file(p)
                    && std::fs::read(p).is_ok_and(|d| crc32fast::hash(&d) == crc)
            });
            if found.is_some() {
                return found;
            }
        }
    }
    let id = id?;
    roots
        .caches
        .iter()
        .map(|c| c.join(hex(id)).join("debuginfo"))
        .find(|p| is_file(p) && same_id(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(addr: u64, size: u64, section: Option<(u64, u64)>, name: &str) -> RawSym {
        RawSym {
            addr,
            size,
            section,
            name: name.into(),
        }
    }

    #[test]
    fn a_symbol_names_only_addresses_inside_its_extent() {
        let t = SymTable::build(vec![
            raw(0x1000, 0x40, Some((0x1000, 0x3000)), "exported"),
            raw(0x2000, 0, Some((0x1000, 0x3000)), "label"),
            raw(0x2800, 0, Some((0x1000, 0x3000)), "last"),
            raw(0x4000, 0, None, "no_section"),
        ]);
        assert_eq!(t.find(0x1000), Some("exported"));
        assert_eq!(t.find(0x103f), Some("exported"));
        // Past the end of a sized symbol: no name, however near.
        assert_eq!(t.find(0x1040), None);
        assert_eq!(t.find(0x1fff), None);
        // Unsized: up to the next symbol, and within its section.
        assert_eq!(t.find(0x27ff), Some("label"));
        assert_eq!(t.find(0x2800), Some("last"));
        assert_eq!(t.find(0x2fff), Some("last"));
        assert_eq!(t.find(0x3000), None);
        assert_eq!(t.find(0x4000), None);
        assert_eq!(t.find(0x10), None);
    }

    #[test]
    fn nested_symbols_name_what_holds_the_address() {
        let t = SymTable::build(vec![
            raw(0x1000, 0x100, None, "outer"),
            raw(0x1010, 0x10, None, "inner"),
        ]);
        assert_eq!(t.find(0x1018), Some("inner"));
        assert_eq!(t.find(0x1020), Some("outer"));
    }

    #[test]
    fn build_id_paths_split_the_first_byte() {
        let p = build_id_path(&[PathBuf::from("/r")], &[0xab, 0xcd, 0xef]);
        assert_eq!(p, vec![PathBuf::from("/r/.build-id/ab/cdef.debug")]);
        assert!(build_id_path(&[PathBuf::from("/r")], &[1]).is_empty());
    }
}
