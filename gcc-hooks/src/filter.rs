//! Exclusion filters: resolving function and file patterns to addresses once, at tracer
//! start, and the lookup table the C hooks probe without allocating or locking.
//!
//! Names are resolved against the ELF symbol tables (`.symtab`, else `.dynsym`) of every
//! object loaded at that moment — the executable and its shared libraries; objects
//! `dlopen`ed later are not filtered. File patterns are matched against the source file
//! of each function: from DWARF line info when the object has `-g`, else from the
//! `STT_FILE` symbol that precedes a static function in `.symtab`.

use crate::config::HooksConfig;
use object::{Object, ObjectSymbol, SymbolKind};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Table flag: the function's own calls are not recorded (mirrors `EXCL_FN` in hooks.c).
pub const EXCL_FN: u32 = 1;
/// Table flag: nor is anything it calls (mirrors `EXCL_TREE` in hooks.c).
pub const EXCL_TREE: u32 = 2;

/// An object loaded in this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedObject {
    /// File to read its symbols from.
    pub path: PathBuf,
    /// Load bias: run-time address = bias + link-time address.
    pub bias: u64,
}

/// The objects loaded in this process (executable first), from `dl_iterate_phdr`.
pub fn loaded_objects() -> Vec<LoadedObject> {
    unsafe extern "C" fn cb(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `&mut Vec` passed below; `info` is valid for this call
        // (dl_iterate_phdr's contract), and its name a NUL-terminated string or null.
        unsafe {
            let out = &mut *(data as *mut Vec<LoadedObject>);
            let info = &*info;
            let name = if info.dlpi_name.is_null() {
                &[][..]
            } else {
                std::ffi::CStr::from_ptr(info.dlpi_name).to_bytes()
            };
            let path = if name.is_empty() {
                if out.is_empty() {
                    PathBuf::from("/proc/self/exe")
                } else {
                    return 0;
                }
            } else if !name.contains(&b'/') {
                // The vDSO ("linux-vdso.so.1"): no file to read, no instrumented code.
                return 0;
            } else {
                PathBuf::from(std::ffi::OsStr::from_encoded_bytes_unchecked(name))
            };
            out.push(LoadedObject {
                path,
                bias: info.dlpi_addr,
            });
        }
        0
    }
    let mut out: Vec<LoadedObject> = Vec::new();
    // SAFETY: the callback only touches `out`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut out as *mut _ as *mut libc::c_void) };
    out
}

/// Matches `s` against a glob with `*` (any run) and `?` (any one byte): the same
/// matcher fault-injection rules use for `exe=`/`argv=` ([`bufpool::inject::glob_match`]).
pub fn glob_match(pat: &str, s: &str) -> bool {
    bufpool::inject::glob_match(pat.as_bytes(), s.as_bytes())
}

/// Does a source path match a file pattern? A pattern without `/` or `*` matches the
/// basename; one with `/` matches a path suffix (at a `/` boundary); globs match the
/// whole path or the basename.
pub fn file_match(pat: &str, path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    if pat.contains(['*', '?']) {
        return glob_match(pat, path) || glob_match(pat, base);
    }
    if !pat.contains('/') {
        return base == pat;
    }
    path == pat || (path.ends_with(pat) && path.as_bytes()[path.len() - pat.len() - 1] == b'/')
}

/// What the patterns matched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    /// Run-time function address → [`EXCL_FN`] / [`EXCL_TREE`] flags.
    pub addrs: BTreeMap<u64, u32>,
    /// Patterns that matched nothing (worth a warning: a typo, or a stripped binary).
    pub unmatched: Vec<String>,
    /// Objects whose symbols could not be read, with the reason.
    pub unreadable: Vec<(PathBuf, String)>,
}

fn read_object(path: &Path) -> std::io::Result<Vec<u8>> {
    std::fs::read(path)
}

/// Resolves the configuration's patterns against `objects`.
pub fn resolve(cfg: &HooksConfig, objects: &[LoadedObject]) -> Resolved {
    let mut r = Resolved::default();
    if !cfg.has_exclusions() {
        return r;
    }
    let mut hit_fn = vec![false; cfg.exclude.len()];
    let mut hit_tree = vec![false; cfg.exclude_tree.len()];
    let mut hit_file = vec![false; cfg.exclude_files.len()];
    for o in objects {
        let data = match read_object(&o.path) {
            Ok(d) => d,
            Err(e) => {
                r.unreadable.push((o.path.clone(), e.to_string()));
                continue;
            }
        };
        let file = match object::File::parse(&*data) {
            Ok(f) => f,
            Err(e) => {
                r.unreadable.push((o.path.clone(), e.to_string()));
                continue;
            }
        };
        // Source file of each function, only if file patterns are set.
        let dwarf = if cfg.exclude_files.is_empty() {
            None
        } else {
            addr2line::Loader::new(&o.path).ok()
        };
        let symtab_empty = file.symbols().next().is_none();
        let syms: Box<dyn Iterator<Item = object::Symbol<'_, '_>>> = if symtab_empty {
            Box::new(file.dynamic_symbols())
        } else {
            Box::new(file.symbols())
        };
        let mut stt_file: Option<String> = None;
        for s in syms {
            if s.kind() == SymbolKind::File {
                stt_file = s.name().ok().map(str::to_owned);
                continue;
            }
            if s.kind() != SymbolKind::Text || s.is_undefined() || s.address() == 0 {
                continue;
            }
            let Ok(name) = s.name() else { continue };
            let addr = o.bias.wrapping_add(s.address());
            let mut flags = 0;
            for (i, p) in cfg.exclude.iter().enumerate() {
                if glob_match(p, name) {
                    flags |= EXCL_FN;
                    hit_fn[i] = true;
                }
            }
            for (i, p) in cfg.exclude_tree.iter().enumerate() {
                if glob_match(p, name) {
                    flags |= EXCL_TREE;
                    hit_tree[i] = true;
                }
            }
            if !cfg.exclude_files.is_empty() {
                let src = dwarf
                    .as_ref()
                    .and_then(|l| l.find_location(s.address()).ok().flatten())
                    .and_then(|loc| loc.file.map(str::to_owned))
                    .or_else(|| s.is_local().then(|| stt_file.clone()).flatten());
                if let Some(src) = src {
                    for (i, p) in cfg.exclude_files.iter().enumerate() {
                        if file_match(p, &src) {
                            flags |= EXCL_FN;
                            hit_file[i] = true;
                        }
                    }
                }
            }
            if flags != 0 {
                *r.addrs.entry(addr).or_insert(0) |= flags;
            }
        }
    }
    for (pats, hits) in [
        (&cfg.exclude, &hit_fn),
        (&cfg.exclude_tree, &hit_tree),
        (&cfg.exclude_files, &hit_file),
    ] {
        for (p, hit) in pats.iter().zip(hits.iter()) {
            if !hit {
                r.unmatched.push(p.clone());
            }
        }
    }
    r
}

/// The open-addressing set the hooks probe: slots of `(address << 2) | flags`, 0 = empty,
/// linear probing from `hash(address)`, at most half full. Layout and hash are shared
/// with `lookup()` in `c/hooks.c`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExclusionTable {
    slots: Vec<u64>,
}

#[inline]
fn slot_of(addr: u64, mask: u64) -> u64 {
    ((addr >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) & mask
}

impl ExclusionTable {
    /// Builds the table. Addresses must be nonzero and below 2^48 (others are skipped).
    pub fn build(addrs: &BTreeMap<u64, u32>) -> ExclusionTable {
        let n = addrs.len().max(4);
        let cap = (2 * n).next_power_of_two();
        let mask = cap as u64 - 1;
        let mut slots = vec![0u64; cap];
        for (&a, &f) in addrs {
            if a == 0 || a >= 1 << 48 || f & 3 == 0 {
                continue;
            }
            let mut i = slot_of(a, mask);
            while slots[i as usize] != 0 {
                i = (i + 1) & mask;
            }
            slots[i as usize] = (a << 2) | u64::from(f & 3);
        }
        ExclusionTable { slots }
    }

    /// The flags of `addr` (0 if absent) — the same probe as the C hook.
    pub fn lookup(&self, addr: u64) -> u32 {
        let mask = self.mask();
        let mut i = slot_of(addr, mask);
        loop {
            let e = self.slots[i as usize];
            if e == 0 {
                return 0;
            }
            if e >> 2 == addr {
                return (e & 3) as u32;
            }
            i = (i + 1) & mask;
        }
    }

    /// Capacity − 1.
    pub fn mask(&self) -> u64 {
        self.slots.len() as u64 - 1
    }

    /// The slots, for handing to the C hooks.
    pub fn slots(&self) -> &[u64] {
        &self.slots
    }

    /// Number of addresses in the table.
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|&&e| e != 0).count()
    }

    /// True if no address is in the table.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("foo", "foo"));
        assert!(!glob_match("foo", "foobar"));
        assert!(glob_match("foo*", "foobar"));
        assert!(glob_match("*bar", "foobar"));
        assert!(glob_match("f*o*r", "foobar"));
        assert!(glob_match("f?o", "foo"));
        assert!(!glob_match("f?o", "fo"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("a*b", "acbd"));
    }

    #[test]
    fn file_patterns() {
        assert!(file_match("util.c", "/src/x/util.c"));
        assert!(!file_match("til.c", "/src/x/util.c"));
        assert!(file_match("x/util.c", "/src/x/util.c"));
        assert!(!file_match("x/util.c", "/src/yx/util.c"));
        assert!(file_match("*/vendor/*", "/src/vendor/zlib/inflate.c"));
        assert!(file_match("*.h", "/usr/include/stdio.h"));
    }

    #[test]
    fn table_finds_exactly_what_was_put_in() {
        let mut m = BTreeMap::new();
        for i in 1..200u64 {
            m.insert(
                0x5555_0000_0000 + i * 16,
                if i % 3 == 0 { EXCL_TREE } else { EXCL_FN },
            );
        }
        let t = ExclusionTable::build(&m);
        assert_eq!(t.len(), m.len());
        assert!(t.slots().len() >= 2 * m.len());
        for (&a, &f) in &m {
            assert_eq!(t.lookup(a), f);
            assert_eq!(t.lookup(a + 1), 0);
            assert_eq!(t.lookup(a + 8), 0);
        }
        assert_eq!(t.lookup(0x1234), 0);
        let empty = ExclusionTable::build(&BTreeMap::new());
        assert!(empty.is_empty());
        assert_eq!(empty.lookup(0x401000), 0);
    }

    #[test]
    fn resolves_own_functions_by_name() {
        let objs = loaded_objects();
        assert!(objs[0].path.ends_with("exe"));
        assert!(objs
            .iter()
            .any(|o| o.path.to_string_lossy().contains("libc.so")));
        let cfg = HooksConfig {
            exclude: vec![
                "culprit_hook_enter".into(),
                "no_such_function_anywhere".into(),
            ],
            exclude_tree: vec!["culprit_hook_exi?".into()],
            ..Default::default()
        };
        let r = resolve(&cfg, &objs);
        extern "C" {
            fn culprit_hook_enter(f: *mut libc::c_void, s: *mut libc::c_void);
            fn culprit_hook_exit(f: *mut libc::c_void, s: *mut libc::c_void);
        }
        let enter = culprit_hook_enter as *const () as u64;
        let exit = culprit_hook_exit as *const () as u64;
        assert_eq!(r.addrs.get(&enter), Some(&EXCL_FN));
        assert_eq!(r.addrs.get(&exit), Some(&EXCL_TREE));
        assert_eq!(r.addrs.len(), 2, "{:x?}", r.addrs);
        assert_eq!(r.unmatched, ["no_such_function_anywhere"]);
    }
}
