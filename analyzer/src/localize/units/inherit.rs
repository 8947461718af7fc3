//! Fork inheritance: what a forked child did not record again (its parent's symbol
//! tables, program and descriptors at the fork) is given to it once every pass 1 is done.

use super::ProcessScan;
use crate::decode::ProcessTrace;

/// The index in `procs` of the parent `ppid` of `procs[i]` (same host), if it was traced.
pub(super) fn parent_of(procs: &[&ProcessTrace], i: usize, ppid: u32) -> Option<usize> {
    (0..procs.len()).find(|&j| j != i && procs[j].host == procs[i].host && procs[j].pid == ppid)
}

/// Would [`inherit`] change `scan`, the scan of `procs[i]`? Only for a forked child whose
/// parent is in `procs`; the scan of any other process is final after its own pass 1.
pub fn inherits(procs: &[&ProcessTrace], i: usize, scan: &ProcessScan) -> bool {
    [scan.symbols.forked_from(), scan.forked_from]
        .into_iter()
        .flatten()
        .any(|(ppid, _)| parent_of(procs, i, ppid).is_some())
}

/// Gives forked children what they inherited and did not record again: the parent's symbol
/// tables (memory map, Python code table) at the fork — for a child that exec'd since, to
/// what it ran before its exec — and, to children that did not exec, the parent's program
/// and descriptors at the fork. `scans[i]` belongs to `procs[i]`; parents are found by host
/// and pid.
pub fn inherit(procs: &[&ProcessTrace], scans: &mut [ProcessScan]) {
    let parent_of = |i: usize, ppid: u32| parent_of(procs, i, ppid);
    // Symbols first. Grandchildren need their parent to have inherited first: a few rounds
    // suffice.
    let mut resymbolized = vec![false; scans.len()];
    for _ in 0..4 {
        let mut changed = false;
        for i in 0..scans.len() {
            let Some((ppid, at)) = scans[i].symbols.forked_from() else {
                continue;
            };
            let Some(j) = parent_of(i, ppid) else {
                continue;
            };
            let parent_syms = scans[j].symbols.at(at).clone();
            let parent_exe = scans[j].exe.clone();
            let parent_command = scans[j].command.clone();
            let c = &mut scans[i];
            if c.symbols.inherit(&parent_syms) {
                resymbolized[i] = true;
                changed = true;
            }
            // A child that did not exec runs its parent's program.
            if c.forked_from.is_some() && c.exe.is_empty() && !parent_exe.is_empty() {
                c.exe = parent_exe;
                c.command = parent_command;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    // The stack keys of a child's own setup calls (a pre-forked worker's `accept`) are made
    // of its frames' keys: made again with the symbols it inherited, they are the same from
    // run to run (raw addresses are not: ASLR). A child that did not exec starts from its
    // parent's descriptors at the fork, so parents are done before their children. One that
    // exec'd since runs its own program; which descriptors survived the exec (close-on-exec)
    // is not known: it keeps its own record of them.
    let parent: Vec<Option<(usize, u64)>> = (0..scans.len())
        .map(|i| {
            let (ppid, at) = scans[i].forked_from?;
            Some((parent_of(i, ppid)?, at))
        })
        .collect();
    let depth = |i: usize| {
        let (mut d, mut k) = (0, i);
        while let Some((j, _)) = parent[k] {
            d += 1;
            k = j;
            if d > scans.len() {
                break; // a cycle of pids (reuse): stop anywhere
            }
        }
        d
    };
    let mut order: Vec<usize> = (0..scans.len()).collect();
    order.sort_by_key(|&i| depth(i));
    for i in order {
        match parent[i] {
            Some((j, at)) => {
                let from = scans[j].fds.clone();
                scans[i].build_fds(Some((&from, at)));
                scans[i].inherited_fds = Some((from, at));
                scans[i].resolve_loops();
            }
            None if resymbolized[i] => scans[i].build_fds(None),
            None => {}
        }
    }
}
