//! The **outline of a run**: what a shard of `culprit rank --shard K/N` must know of the
//! processes it does not open — how many there are, the run's identity, and where each
//! host's processes fall in **ranking order** (sorted by host, pid and start time) — in
//! a size that grows with the hosts, not with the processes.
//!
//! A shard that names the run from every manifest makes the outline from the processes
//! found ([`RunOutline::of`]); the run's index (`crate::runindex`) holds it, worked out
//! once, so that a shard reading it touches only its own hosts' part. Both give the same
//! outline for the same run: the shards of one run agree on every process's place and on
//! the run's hash whichever way each was made.

use super::select::ProcId;

/// One host of a run, in ranking order: its processes are the places
/// `first..first + count` of the run's processes in ranking order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSpan {
    /// The host's name.
    pub host: String,
    /// The place of its first process in ranking order.
    pub first: u32,
    /// How many processes it has (at least one).
    pub count: u32,
}

/// A run's hosts in ranking order (sorted by name, each once), its size and its identity.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunOutline {
    /// The hosts, sorted by name; their spans follow each other from 0 to `total`.
    pub hosts: Vec<HostSpan>,
    /// The run's processes.
    pub total: u32,
    /// The run's identity: a hash of every process (host, pid, start time) in ranking
    /// order ([`run_hash`]); the merge of a ranking's parts refuses parts of two runs.
    pub run: u64,
    /// The trace directories the run was found in.
    pub recordings: usize,
}

impl RunOutline {
    /// The outline of the run whose processes are `all` (any order), found in
    /// `recordings` trace directories.
    pub fn of(all: &[ProcId], recordings: usize) -> RunOutline {
        let sorted: Vec<&ProcId> = ranking_perm(all)
            .into_iter()
            .map(|i| &all[i as usize])
            .collect();
        Self::of_sorted(&sorted, recordings)
    }

    /// [`RunOutline::of`] given the run's processes in ranking order.
    pub fn of_sorted(sorted: &[&ProcId], recordings: usize) -> RunOutline {
        let mut hosts: Vec<HostSpan> = Vec::new();
        for (i, p) in sorted.iter().enumerate() {
            match hosts.last_mut() {
                Some(h) if h.host == p.host => h.count += 1,
                _ => hosts.push(HostSpan {
                    host: p.host.clone(),
                    first: i as u32,
                    count: 1,
                }),
            }
        }
        RunOutline {
            hosts,
            total: sorted.len() as u32,
            run: run_hash(sorted),
            recordings,
        }
    }
}

/// The identity of a run of processes `sorted` (in ranking order).
pub fn run_hash(sorted: &[&ProcId]) -> u64 {
    let mut h = crate::hash::mix(0x0072_756e, sorted.len() as u64);
    for p in sorted {
        h = crate::hash::mix(h, crate::hash::str_hash(p.host.as_bytes()));
        h = crate::hash::mix(h, p.pid as u64);
        h = crate::hash::mix(h, p.start_ticks);
    }
    h
}

/// The places in `all` of its processes in ranking order (sorted by host, pid and start
/// time). The hosts are ranked first (each name compared once, not in every comparison
/// of the sort).
pub fn ranking_perm(all: &[ProcId]) -> Vec<u32> {
    let mut rank: crate::hash::FxMap<&str, u32> = Default::default();
    for p in all {
        let n = rank.len() as u32;
        rank.entry(p.host.as_str()).or_insert(n);
    }
    let mut hosts: Vec<(&str, u32)> = rank.iter().map(|(&h, &i)| (h, i)).collect();
    hosts.sort_unstable();
    let mut of = vec![0u32; hosts.len()];
    for (r, (_, i)) in hosts.iter().enumerate() {
        of[*i as usize] = r as u32;
    }
    let mut keyed: Vec<((u32, u32, u64), u32)> = all
        .iter()
        .enumerate()
        .map(|(i, p)| {
            (
                (of[rank[p.host.as_str()] as usize], p.pid, p.start_ticks),
                i as u32,
            )
        })
        .collect();
    keyed.sort_unstable_by_key(|k| k.0);
    keyed.into_iter().map(|(_, i)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(host: &str, pid: u32, start_ticks: u64) -> ProcId {
        ProcId {
            host: host.into(),
            pid,
            start_ticks,
        }
    }

    #[test]
    fn hosts_follow_each_other_in_ranking_order() {
        let all = [
            id("b", 7, 1),
            id("a", 9, 0),
            id("b", 3, 5),
            id("a", 9, 2),
            id("c", 1, 1),
        ];
        let o = RunOutline::of(&all, 4);
        let spans: Vec<(&str, u32, u32)> = o
            .hosts
            .iter()
            .map(|h| (h.host.as_str(), h.first, h.count))
            .collect();
        assert_eq!(spans, [("a", 0, 2), ("b", 2, 2), ("c", 4, 1)]);
        assert_eq!((o.total, o.recordings), (5, 4));
        // The identity is of the processes, not of the order they were found in.
        let mut shuffled = all.clone();
        shuffled.reverse();
        assert_eq!(RunOutline::of(&shuffled, 4).run, o.run);
        shuffled[0].start_ticks += 1;
        assert_ne!(RunOutline::of(&shuffled, 4).run, o.run);
        assert_eq!(RunOutline::of(&[], 0).hosts, []);
    }
}
