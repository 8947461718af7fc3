//! Causal order: Lamport clocks for every op, vector clocks on request, happens-before.
//!
//! The events are the ops of [`super::ops`]; a process's ops are totally ordered by TSC
//! (the threads of one process share memory, so nothing finer can be proved from the
//! trace), and a process is one component of 004's event id `(host, pid, lamport)`. The
//! cross-process edges are: every [`super::Flow`] (send → receive), `connect` → the
//! `accept` it was paired with, and a `fork` → the child's first op.
//!
//! Lamport times are assigned in one sweep over the processes: each process advances while
//! the senders of its next op are stamped; since every edge goes forward in real causality
//! this always finishes on a consistent trace. A cycle (a damaged or wrongly matched trace)
//! is broken by stamping the blocked op without its unstamped senders, and counted.

use super::sockets::OpRef;

/// Cross-process edges into ops, in compressed form.
#[derive(Clone, Debug, Default)]
pub struct Edges {
    /// Per process, per op: start index into `from` (len ops + 1).
    pub start: Vec<Vec<u32>>,
    /// Sources.
    pub from: Vec<OpRef>,
}

impl Edges {
    /// Builds from (source, target) pairs; `lens` are the processes' op counts.
    pub fn build(lens: &[usize], mut pairs: Vec<(OpRef, OpRef)>) -> Edges {
        pairs.sort_unstable_by_key(|p| (p.1, p.0));
        pairs.dedup();
        let mut start: Vec<Vec<u32>> = lens.iter().map(|&n| vec![0u32; n + 1]).collect();
        for (_, t) in &pairs {
            start[t.proc as usize][t.idx as usize + 1] += 1;
        }
        // Targets are sorted by process, then op: each process's offsets follow the last.
        let mut base = 0u32;
        for s in &mut start {
            s[0] = base;
            for i in 1..s.len() {
                s[i] += s[i - 1];
            }
            base = *s.last().unwrap_or(&base);
        }
        Edges {
            start,
            from: pairs.into_iter().map(|p| p.0).collect(),
        }
    }

    /// Sources of op `t`.
    #[inline]
    pub fn into(&self, t: OpRef) -> &[OpRef] {
        let s = &self.start[t.proc as usize];
        &self.from[s[t.idx as usize] as usize..s[t.idx as usize + 1] as usize]
    }
}

/// Lamport times, per process per op; and how many edges had to be ignored.
pub fn lamport(lens: &[usize], edges: &Edges) -> (Vec<Vec<u64>>, u64) {
    let mut lt: Vec<Vec<u64>> = lens.iter().map(|&n| Vec::with_capacity(n)).collect();
    let mut broken = 0u64;
    let mut remaining: usize = lens.iter().sum();
    while remaining > 0 {
        let mut progress = false;
        for p in 0..lens.len() {
            loop {
                let i = lt[p].len();
                if i >= lens[p] {
                    break;
                }
                let mut t = lt[p].last().map_or(1, |&x| x + 1);
                let mut ready = true;
                for f in edges.into(OpRef {
                    proc: p as u32,
                    idx: i as u32,
                }) {
                    match lt[f.proc as usize].get(f.idx as usize) {
                        Some(&x) => t = t.max(x + 1),
                        None => {
                            ready = false;
                            break;
                        }
                    }
                }
                if !ready {
                    break;
                }
                lt[p].push(t);
                remaining -= 1;
                progress = true;
            }
        }
        if !progress {
            // A cycle: stamp the first blocked op with what is known.
            for p in 0..lens.len() {
                let i = lt[p].len();
                if i < lens[p] {
                    let mut t = lt[p].last().map_or(1, |&x| x + 1);
                    for f in edges.into(OpRef {
                        proc: p as u32,
                        idx: i as u32,
                    }) {
                        match lt[f.proc as usize].get(f.idx as usize) {
                            Some(&x) => t = t.max(x + 1),
                            None => broken += 1,
                        }
                    }
                    lt[p].push(t);
                    remaining -= 1;
                    break;
                }
            }
        }
    }
    (lt, broken)
}

/// Vector clocks of every op (component `q` = how many ops of process `q` happened
/// before or at it). Memory is ops × processes × 4 bytes: for small traces, or a few
/// processes.
pub fn vector_clocks(lens: &[usize], edges: &Edges, lamport: &[Vec<u64>]) -> Vec<Vec<Vec<u32>>> {
    let np = lens.len();
    let mut vc: Vec<Vec<Vec<u32>>> = lens.iter().map(|&n| Vec::with_capacity(n)).collect();
    // Process ops in Lamport order: every source has a smaller Lamport time.
    let mut all: Vec<(u64, u32, u32)> = Vec::new();
    for (p, l) in lamport.iter().enumerate() {
        for (i, &t) in l.iter().enumerate() {
            all.push((t, p as u32, i as u32));
        }
    }
    all.sort_unstable();
    let mut placed: Vec<Vec<Option<Vec<u32>>>> = lens.iter().map(|&n| vec![None; n]).collect();
    for (_, p, i) in all {
        let mut v = if i == 0 {
            vec![0u32; np]
        } else {
            placed[p as usize][i as usize - 1]
                .clone()
                .unwrap_or_else(|| vec![0u32; np])
        };
        v[p as usize] = i + 1;
        for f in edges.into(OpRef { proc: p, idx: i }) {
            if let Some(fv) = &placed[f.proc as usize][f.idx as usize] {
                for q in 0..np {
                    v[q] = v[q].max(fv[q]);
                }
            }
        }
        placed[p as usize][i as usize] = Some(v);
    }
    for (p, row) in placed.into_iter().enumerate() {
        vc[p] = row.into_iter().map(|v| v.unwrap_or_default()).collect();
    }
    vc
}

/// Out-edges, for reachability queries: per process, (source op index, target), sorted.
#[derive(Clone, Debug, Default)]
pub struct OutEdges {
    by_proc: Vec<Vec<(u32, OpRef)>>,
}

impl OutEdges {
    /// From the in-edges.
    pub fn new(lens: &[usize], e: &Edges) -> OutEdges {
        let mut by_proc: Vec<Vec<(u32, OpRef)>> = vec![Vec::new(); lens.len()];
        for (p, s) in e.start.iter().enumerate() {
            for i in 0..s.len().saturating_sub(1) {
                for f in &e.from[s[i] as usize..s[i + 1] as usize] {
                    by_proc[f.proc as usize].push((
                        f.idx,
                        OpRef {
                            proc: p as u32,
                            idx: i as u32,
                        },
                    ));
                }
            }
        }
        for v in &mut by_proc {
            v.sort_unstable();
        }
        OutEdges { by_proc }
    }

    /// The earliest op of each process that `a` happens before or at (`u32::MAX`: none).
    pub fn reach(&self, a: OpRef) -> Vec<u32> {
        let mut first = vec![u32::MAX; self.by_proc.len()];
        first[a.proc as usize] = a.idx;
        let mut work = vec![a.proc];
        while let Some(p) = work.pop() {
            let from = first[p as usize];
            let v = &self.by_proc[p as usize];
            let k = v.partition_point(|e| e.0 < from);
            for &(_, t) in &v[k..] {
                if t.idx < first[t.proc as usize] {
                    first[t.proc as usize] = t.idx;
                    work.push(t.proc);
                }
            }
        }
        first
    }

    /// Does `a` happen before `b` (a chain of process order and messages from `a` to `b`,
    /// or `a` = `b`)?
    pub fn happens_before(&self, a: OpRef, b: OpRef) -> bool {
        self.reach(a)[b.proc as usize] <= b.idx
    }
}
