//! The two passes over every process of a trace set, in parallel: pass 1 (event loops,
//! descriptors), fork inheritance, then pass 2 (units) handed to the caller's stage.

use super::options::Options;
use crate::decode::{ProcessTrace, TraceSet};
use crate::error::Result;
use crate::symbolize::ElfResolver;
use crate::units::{self, NameBook, NameSrc};
use rayon::prelude::*;
use std::collections::BTreeMap;

pub(crate) fn sorted_processes(sets: &[TraceSet]) -> Vec<&ProcessTrace> {
    let mut v: Vec<&ProcessTrace> = sets.iter().flat_map(|s| &s.processes).collect();
    v.sort_by(|a, b| (&a.host, a.pid, a.start_ticks).cmp(&(&b.host, b.pid, b.start_ticks)));
    v
}

/// Pass 1 over every process (in parallel), then what forked children inherited.
pub(crate) fn scan_all(procs: &[&ProcessTrace], opts: &Options) -> Result<Vec<units::ProcessScan>> {
    opts.start("finding event loops", procs.len());
    let scans: Vec<Result<units::ProcessScan>> = procs
        .par_iter()
        .map(|p| {
            let s = units::scan_process(p);
            opts.inc();
            s
        })
        .collect();
    opts.finish();
    let mut out = Vec::with_capacity(scans.len());
    for s in scans {
        out.push(s?);
    }
    units::inherit(procs, &mut out);
    Ok(out)
}

/// A process whose records come to at most this many bytes is read into memory once for
/// both passes; a larger one is read from disk, chunk by chunk, in each pass.
pub(crate) const LOAD_MAX_BYTES: u64 = 64 << 20;

/// Both passes over every process, in parallel: `split` gets each process (by its index in
/// `procs`) with its pass-1 scan, what forked children inherited included; the results
/// come back in the order of `procs`. A process that inherits nothing (most: only forked
/// children whose parent was traced do) is split as soon as its own pass 1 is done, from
/// its records read into memory once for both passes (up to [`LOAD_MAX_BYTES`]: one
/// process's trace per worker thread, never the whole set's); the others once every pass 1
/// is done, reading their records again.
pub(crate) fn scan_and_split<T: Send>(
    procs: &[&ProcessTrace],
    opts: &Options,
    stage: &str,
    split: impl Fn(usize, &ProcessTrace, &units::ProcessScan) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let all = vec![true; procs.len()];
    Ok(scan_and_split_some(procs, &all, opts, stage, split)?
        .into_iter()
        .flatten()
        .collect())
}

/// [`scan_and_split`] for the processes `wanted` only (a shard of a ranking); the others
/// are only scanned (pass 1: what their forked children inherit) and give `None`.
pub(crate) fn scan_and_split_some<T: Send>(
    procs: &[&ProcessTrace],
    wanted: &[bool],
    opts: &Options,
    stage: &str,
    split: impl Fn(usize, &ProcessTrace, &units::ProcessScan) -> Result<T> + Sync,
) -> Result<Vec<Option<T>>> {
    opts.start(stage, wanted.iter().filter(|&&w| w).count());
    let first: Vec<Result<(units::ProcessScan, Option<T>)>> = procs
        .par_iter()
        .enumerate()
        .map(|(i, p)| {
            if !wanted[i] {
                return Ok((units::scan_process(p)?, None));
            }
            let loaded = p.load(LOAD_MAX_BYTES)?;
            let src = loaded.as_ref().unwrap_or(p);
            let scan = units::scan_process(src)?;
            if units::inherits(procs, i, &scan) {
                return Ok((scan, None));
            }
            let t = split(i, src, &scan)?;
            opts.inc();
            Ok((scan, Some(t)))
        })
        .collect();
    let mut scans = Vec::with_capacity(procs.len());
    let mut done = Vec::with_capacity(procs.len());
    for r in first {
        let (scan, t) = r?;
        scans.push(scan);
        done.push(t);
    }
    units::inherit(procs, &mut scans);
    let waiting: Vec<usize> = (0..procs.len())
        .filter(|&i| wanted[i] && done[i].is_none())
        .collect();
    let later: Vec<Result<T>> = waiting
        .par_iter()
        .map(|&i| {
            let t = split(i, procs[i], &scans[i]);
            opts.inc();
            t
        })
        .collect();
    opts.finish();
    for (i, t) in waiting.into_iter().zip(later) {
        done[i] = Some(t?);
    }
    Ok(done)
}

/// The names of one process's book, as [`merge_names`] gives them, each C address
/// resolved once over every call given the same `resolved` (a shard names each of its
/// processes apart, and its processes share their programs' addresses).
pub(crate) fn book_names(
    book: &NameBook,
    resolved: &mut crate::hash::FxMap<crate::symbolize::CSym, String>,
) -> BTreeMap<u64, String> {
    let mut r = ElfResolver;
    book.names
        .iter()
        .map(|(k, v)| {
            let n = match v {
                NameSrc::Text(s) => s.clone(),
                NameSrc::C(c) => match resolved.get(c) {
                    Some(n) => n.clone(),
                    None => {
                        let n = r.resolve(c);
                        resolved.insert(c.clone(), n.clone());
                        n
                    }
                },
            };
            (*k, n)
        })
        .collect()
}

pub(crate) fn merge_names(books: &[&NameBook]) -> BTreeMap<u64, String> {
    let mut all: BTreeMap<u64, &NameSrc> = BTreeMap::new();
    for b in books {
        for (k, v) in &b.names {
            all.entry(*k).or_insert(v);
        }
    }
    let mut r = ElfResolver;
    all.into_iter()
        .map(|(k, v)| {
            let n = match v {
                NameSrc::Text(s) => s.clone(),
                NameSrc::C(c) => r.resolve(c),
            };
            (k, n)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode;
    use crate::trees::{self, TreeOptions};
    use crate::units::ProcessUnits;

    /// What a process's units are, comparably: each unit's info and its tree's nodes.
    fn units_of(u: &ProcessUnits) -> Vec<(units::UnitInfo, Vec<(u64, trees::TreeNode)>)> {
        u.units
            .iter()
            .map(|u| {
                let mut nodes: Vec<_> = u.tree.nodes.iter().map(|(k, n)| (*k, *n)).collect();
                nodes.sort_by_key(|n| n.0);
                (u.info.clone(), nodes)
            })
            .collect()
    }

    #[test]
    fn both_passes_read_a_process_once_and_forked_children_wait_for_their_parent() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("h");
        let (procs, _) = units::tests_groups::parent_and_forked_child();
        decode::write_trace_dir(&dir, "h", &procs).unwrap();
        let set = TraceSet::open(&[dir]).unwrap();
        let procs = sorted_processes(std::slice::from_ref(&set));
        let opts = Options::default();
        let tree = TreeOptions::default();
        // Loading reads every record (none if they do not fit).
        assert!(procs[0].load(0).unwrap().is_none());
        let loaded = procs[0].load(LOAD_MAX_BYTES).unwrap().unwrap();
        assert!(matches!(
            loaded.threads[0].source,
            decode::ThreadSource::Loaded(_)
        ));
        // The reference: every pass 1, inheritance, then every pass 2, from disk.
        let scans = scan_all(&procs, &opts).unwrap();
        let want: Vec<_> = procs
            .iter()
            .zip(&scans)
            .map(|(p, s)| units_of(&units::split_process(p, s, &tree).unwrap()))
            .collect();
        let got = scan_and_split(&procs, &opts, "test", |i, p, s| {
            let memory = matches!(p.threads[0].source, decode::ThreadSource::Loaded(_));
            let u = units::split_process(p, s, &tree)?;
            Ok((units::inherits(&procs, i, s), memory, units_of(&u)))
        })
        .unwrap();
        // The parent is split from memory at once; the child, which inherits, later (from
        // disk) — and with what it inherited: its reads are handlers.
        assert_eq!((got[0].0, got[0].1), (false, true));
        assert_eq!((got[1].0, got[1].1), (true, false));
        let handlers = |u: &[(units::UnitInfo, _)]| {
            u.iter()
                .filter(|(i, _)| i.kind == units::UnitKind::Handler)
                .count()
        };
        assert_eq!(handlers(&got[1].2), 3);
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(&g.2, w);
        }
    }
}
