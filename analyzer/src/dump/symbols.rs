//! The symbol tables `culprit dump` names entries with: the analyzer's own, per process,
//! and one cache of resolved C names for the whole run.

use crate::decode::{ProcessTrace, ThreadSource, ThreadTrace};
use crate::error::Result;
use crate::symbolize::{CSym, ElfResolver, ProcessSymbols};
use crate::units;
use bufpool::format::CodeKind;
use rayon::prelude::*;
use reader::TraceDir;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The symbol tables of every process of `trace`, by `(pid, start_ticks)`, as the analyzer
/// builds them: pass 1 of each process ([`units::scan_process`]: its `Meta::Map`,
/// `Meta::Code` and `Meta::Proc` records, one table per program image, an exec starting a
/// new one), then [`units::inherit`]: a forked child records no memory map of its own until
/// it execs (it runs its parent's image as it was at the fork), so that image gets its
/// parent's tables at the fork — grandchildren included.
pub fn process_symbols(trace: &Arc<TraceDir>) -> Result<HashMap<(u32, u64), ProcessSymbols>> {
    let procs = processes(trace);
    let refs: Vec<&ProcessTrace> = procs.iter().collect();
    let mut scans = refs
        .par_iter()
        .map(|p| units::scan_process(p))
        .collect::<Result<Vec<_>>>()?;
    units::inherit(&refs, &mut scans);
    Ok(procs
        .iter()
        .zip(scans)
        .map(|(p, s)| ((p.pid, p.start_ticks), s.symbols))
        .collect())
}

/// The processes of an open trace directory, as the analyzer sees them (threads read from
/// `trace` itself, so that no record is read from disk twice).
fn processes(trace: &Arc<TraceDir>) -> Vec<ProcessTrace> {
    let host = match &trace.manifest().host {
        h if h.is_empty() => trace.path().display().to_string(),
        h => h.clone(),
    };
    let calib = crate::trace::clock::recording_calibration(trace.manifest());
    let mut by_proc: BTreeMap<(u32, u64), Vec<ThreadTrace>> = BTreeMap::new();
    for key in trace.threads() {
        let source = ThreadSource::Dir {
            dir: trace.clone(),
            key,
        };
        let t = ThreadTrace {
            tid: key.tid,
            source,
        };
        by_proc
            .entry((key.pid, key.start_ticks))
            .or_default()
            .push(t);
    }
    by_proc
        .into_iter()
        .map(|((pid, start_ticks), threads)| ProcessTrace {
            host: host.clone(),
            pid,
            start_ticks,
            calib,
            recording: Default::default(),
            threads,
        })
        .collect()
}

/// Resolves C addresses through ELF symbols and DWARF, with one cache for the whole run.
#[derive(Default)]
pub(crate) struct Namer {
    elf: RefCell<ElfResolver>,
    cache: RefCell<HashMap<CSym, String>>,
}

/// Names in one process: its tables (if any were recorded) and the shared resolver.
/// C addresses become `function (file:line)` from the ELF symbol tables and DWARF of the
/// recorded mappings (or `file+0xoffset` when the file has no symbols or is gone);
/// Python indices their `module.qualname` from the `Meta::Code` records.
pub(crate) struct Symbols<'a> {
    pub(crate) ps: Option<&'a ProcessSymbols>,
    pub(crate) namer: &'a Namer,
}

impl Symbols<'_> {
    /// The name of a C address.
    pub(crate) fn c_name(&self, addr: u64) -> String {
        let Some(ps) = self.ps else {
            return format!("0x{addr:x}");
        };
        let sym = ps.name_c(addr);
        if let Some(n) = self.namer.cache.borrow().get(&sym) {
            return n.clone();
        }
        let n = self.namer.elf.borrow_mut().resolve(&sym);
        self.namer.cache.borrow_mut().insert(sym, n.clone());
        n
    }

    /// Where a C address is, whatever its name: `(mapped file, offset from its load
    /// base)`, if it lies in a recorded mapping.
    pub(crate) fn c_place(&self, addr: u64) -> Option<(String, u64)> {
        let sym = self.ps?.name_c(addr);
        Some((sym.module?.to_string(), sym.rel))
    }

    fn code(&self, index: u64) -> Option<&bufpool::format::CodeRecord> {
        self.ps.and_then(|p| p.code(index as u32))
    }

    /// `module.qualname`, or `py#N` when the index was never named.
    pub(crate) fn py_name(&self, index: u64) -> String {
        match self.code(index) {
            Some(c) => String::from_utf8_lossy(&c.name).into_owned(),
            None => format!("py#{index}"),
        }
    }

    /// `file:line` of a Python code object, if known.
    pub(crate) fn py_where(&self, index: u64) -> Option<String> {
        match self.code(index) {
            Some(c) if c.kind == CodeKind::PyCode && !c.file.is_empty() => Some(format!(
                "{}:{}",
                String::from_utf8_lossy(&c.file),
                c.first_line
            )),
            _ => None,
        }
    }

    /// `module.qualname+offset` of a Python call site.
    pub(crate) fn py_site(&self, site: u64) -> String {
        let (code, off) = bufpool::format::py_site_parts(site);
        format!("{}+{}", self.py_name(code as u64), off * 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bufpool::format::Meta;

    #[test]
    fn c_addresses_are_named_by_file_and_offset() {
        let mut ps = ProcessSymbols::default();
        ps.add(&Meta::Map(bufpool::format::MapRecord {
            start: 0x5000,
            end: 0x9000,
            offset: 0x1000,
            prot: 5,
            path: b"/usr/bin/demo".to_vec(),
        }));
        let namer = Namer::default();
        let s = Symbols {
            ps: Some(&ps),
            namer: &namer,
        };
        assert_eq!(s.c_name(0x5010), "demo+0x1010");
        assert_eq!(s.c_name(0x9000), "0x9000");
        assert_eq!(s.py_name(3), "py#3");
    }
}
