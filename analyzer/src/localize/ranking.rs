//! The ranking order of units — score (highest first), then the larger incident, then the
//! better-backed evidence ([`tie`]), start time, then id — and the choice of each
//! process's best units in that order, without building id strings.
//!
//! An id is `host:pid:tid:index`. Ids of one process share the `host:pid:` part, so within
//! a process they compare as their `tid:index` tails ([`id_tail`]); across processes, as
//! the rank of the `host:pid:` prefix and then the tail ([`IdOrder`]).

use super::rows::{Row, RowRef, SharedScore};
use crate::hash::FxMap;
use std::cmp::Ordering;

/// The bytes of `tid:index` (decimal), zero-padded: byte-wise, these compare as the tails of
/// the ids of one process compare as strings (a shorter string that is a prefix of a longer
/// one is padded with zeros, which sort before any character).
pub(crate) fn id_tail(tid: u32, index: u32) -> [u8; 24] {
    let mut out = [0u8; 24];
    let n = put_decimal(&mut out, 0, tid);
    out[n] = b':';
    put_decimal(&mut out, n + 1, index);
    out
}

/// Writes `v` in decimal at `out[at..]`; returns where it ends.
fn put_decimal(out: &mut [u8; 24], at: usize, mut v: u32) -> usize {
    let mut d = [0u8; 10];
    let mut i = d.len();
    loop {
        i -= 1;
        d[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let len = d.len() - i;
    out[at..at + len].copy_from_slice(&d[i..]);
    at + len
}

/// The order of unit ids across processes, without their strings.
pub(crate) struct IdOrder<'a> {
    procs: &'a [(String, u32)],
    /// Rank of each process's `host:pid:` prefix among all (equal prefixes, equal ranks);
    /// None when one prefix is a proper prefix of another (a host name with a `:` in it),
    /// where only whole ids compare right.
    ranks: Option<Vec<u32>>,
}

impl<'a> IdOrder<'a> {
    pub(crate) fn new(procs: &'a [(String, u32)]) -> IdOrder<'a> {
        let prefixes: Vec<String> = procs.iter().map(|(h, p)| format!("{h}:{p}:")).collect();
        let mut sorted: Vec<&str> = prefixes.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        sorted.dedup();
        // In sorted order, a prefix of another string is followed by a string it prefixes.
        let nested = sorted.windows(2).any(|w| w[1].starts_with(w[0]));
        let ranks = (!nested).then(|| {
            prefixes
                .iter()
                .map(|p| sorted.binary_search(&p.as_str()).unwrap_or(0) as u32)
                .collect()
        });
        IdOrder { procs, ranks }
    }

    /// The id of a row.
    fn id(&self, r: &Row) -> String {
        let (host, pid) = &self.procs[r.proc_ as usize];
        crate::units::unit_id(host, *pid, r.tid, r.index)
    }

    /// Compares the ids of two rows.
    pub(crate) fn cmp(&self, a: &Row, b: &Row) -> Ordering {
        match &self.ranks {
            Some(rk) => (rk[a.proc_ as usize], id_tail(a.tid, a.index))
                .cmp(&(rk[b.proc_ as usize], id_tail(b.tid, b.index))),
            None => self.id(a).cmp(&self.id(b)),
        }
    }

    /// The rank of a row's process's `host:pid:` prefix (0 for all when only whole ids
    /// compare right).
    fn proc_rank(&self, r: &Row) -> u32 {
        self.ranks.as_ref().map_or(0, |rk| rk[r.proc_ as usize])
    }

    /// Sorts rows of equal [`IdOrder::proc_rank`] by id; `keyed` is scratch space.
    fn sort_same_rank(&self, run: &mut [Entry], blocks: &[Vec<Row>], keyed: &mut Vec<TailKey>) {
        let row = |e: &Entry| &blocks[e.3 .0 as usize][e.3 .1 as usize];
        if self.ranks.is_some() {
            keyed.clear();
            keyed.extend(run.iter().map(|e| {
                let r = row(e);
                (id_tail(r.tid, r.index), *e)
            }));
            // Ids are unique (but for a pid reused on one host, whose rows then keep the
            // order of the input, itself deterministic).
            keyed.sort_unstable_by_key(|k| k.0);
            for (to, k) in run.iter_mut().zip(keyed.iter()) {
                *to = k.1;
            }
        } else {
            run.sort_by_cached_key(|e| self.id(row(e)));
        }
    }
}

/// A row in the making of the ranking: [`tie`], start time, [`IdOrder::proc_rank`], where
/// it is.
type Entry = (u64, i64, u32, RowRef);

/// How two rows of equal score are ordered before their start times (smaller first): the
/// root of the larger incident first (the number of other processes whose units were filed
/// under it, [`Row::incident`] — an anomaly with consequences across processes is stronger
/// evidence than an isolated one), then the evidence backed by more normal units (its
/// model's units: a call never seen in 634 normal units before one never seen in 4). Time
/// alone does not break such ties: rare harmless paths earlier in the run would win them.
pub(crate) fn tie(r: &Row, shared: &[SharedScore]) -> u64 {
    let support = shared
        .get(r.shared as usize)
        .map_or(0, |s| s.model_units.min(u32::MAX as u64) as u32);
    (u64::from(u16::MAX - r.incident) << 32) | u64::from(u32::MAX - support)
}

/// An [`Entry`] with its id's tail ([`id_tail`]).
type TailKey = ([u8; 24], Entry);

/// The ranking order of two rows: score (highest first), [`tie`], start time, then id.
pub(crate) fn cmp_rows(a: &Row, b: &Row, shared: &[SharedScore], ids: &IdOrder<'_>) -> Ordering {
    b.score
        .total_cmp(&a.score)
        .then(tie(a, shared).cmp(&tie(b, shared)))
        .then(a.t_start_unix_ns.cmp(&b.t_start_unix_ns))
        .then_with(|| ids.cmp(a, b))
}

/// The first `limit` rows (all of them with `usize::MAX`) of all rows (vector after vector)
/// in the ranking order of [`cmp_rows`]; `shared` are the scores the rows refer to.
///
/// Scores repeat (the units of equal trees share one), so the rows are first dealt into
/// one bucket per distinct score, highest first (through the shared score each refers to); each bucket is then sorted by start time
/// with a stable sort, which takes whole the runs already in time order (each thread's rows
/// come in the order its units closed), and runs of one start time by id. A general sort
/// of (score, start, id) keys was a twelfth of ranking's time. Only the buckets that hold
/// the first `limit` rows are filled and sorted: the highest-ranked units cost a pass over
/// the rows, not the sort of all of them.
pub(crate) fn ranking_order(
    blocks: &[Vec<Row>],
    shared: &[SharedScore],
    ids: &IdOrder<'_>,
    limit: usize,
) -> Vec<RowRef> {
    let total: usize = blocks.iter().map(Vec::len).sum();
    // The bucket of each shared score: the rank of its score among the distinct ones.
    let mut distinct: Vec<u64> = shared.iter().map(|s| s.score.to_bits()).collect();
    distinct.sort_unstable_by(|a, b| f64::from_bits(*b).total_cmp(&f64::from_bits(*a)));
    distinct.dedup();
    let rank: FxMap<u64, u32> = distinct
        .iter()
        .enumerate()
        .map(|(i, &b)| (b, i as u32))
        .collect();
    let bucket: Vec<u32> = shared
        .iter()
        .map(|s| rank.get(&s.score.to_bits()).copied().unwrap_or(0))
        .collect();
    // Rows per bucket, then where each bucket is filled next.
    let mut next = vec![0usize; distinct.len()];
    for r in blocks.iter().flatten() {
        next[bucket[r.shared as usize] as usize] += 1;
    }
    // The buckets needed: those up to the one that holds row `limit - 1`.
    let mut needed = 0;
    let mut at = 0;
    while needed < next.len() && at < limit.min(total) {
        at += next[needed];
        needed += 1;
    }
    next.truncate(needed);
    let sizes = next.clone();
    let mut at = 0;
    for n in &mut next {
        let size = *n;
        *n = at;
        at += size;
    }
    let mut order: Vec<Entry> = vec![(0, 0, 0, (0, 0)); at];
    for (b, rows) in blocks.iter().enumerate() {
        for (i, r) in rows.iter().enumerate() {
            let k = bucket[r.shared as usize] as usize;
            if k < needed {
                let p = &mut next[k];
                order[*p] = (
                    tie(r, shared),
                    r.t_start_unix_ns,
                    ids.proc_rank(r),
                    (b as u32, i as u32),
                );
                *p += 1;
            }
        }
    }
    let mut keyed = Vec::new();
    let mut start = 0;
    for &n in &sizes {
        let bucket = &mut order[start..start + n];
        bucket.sort_by_key(|e| (e.0, e.1, e.2));
        // Runs of one tie, start time and process prefix: rows of one process (or of a pid
        // reused on a host), or of any process when only whole ids compare right.
        let mut i = 0;
        while i < bucket.len() {
            let (k, t, pr) = (bucket[i].0, bucket[i].1, bucket[i].2);
            let j = i + bucket[i..]
                .iter()
                .take_while(|e| e.0 == k && e.1 == t && e.2 == pr)
                .count();
            if j - i > 1 {
                ids.sort_same_rank(&mut bucket[i..j], blocks, &mut keyed);
            }
            i = j;
        }
        start += n;
    }
    order.truncate(limit);
    order.into_iter().map(|e| e.3).collect()
}

/// A unit's place in the ranking order within its process: score, start, thread and index.
pub(crate) type UnitKey = (f64, i64, u32, u32);

/// The ranking order of two units of one process (see [`cmp_rows`]).
pub(crate) fn cmp_unit_keys(a: &UnitKey, b: &UnitKey) -> Ordering {
    b.0.total_cmp(&a.0)
        .then(a.1.cmp(&b.1))
        .then_with(|| id_tail(a.2, a.3).cmp(&id_tail(b.2, b.3)))
}

/// The `n` best units of a process in the ranking order, with what each keeps (its tree),
/// chosen as they come without keeping everyone's: a unit worse than the `n`-th best of
/// a set seen earlier cannot be among the `n` best, so it is turned away at once; the
/// candidates are cut back to `n` whenever they reach `2n`.
pub(crate) struct BestUnits<T> {
    n: usize,
    cands: Vec<(UnitKey, usize, T)>,
    /// The worst key kept at the last cut.
    bar: Option<UnitKey>,
}

impl<T> BestUnits<T> {
    pub(crate) fn new(n: usize) -> Self {
        BestUnits {
            n,
            cands: Vec::new(),
            bar: None,
        }
    }

    /// Offers unit `row` with key `key`; `keep` makes what it keeps if it is taken.
    pub(crate) fn offer(&mut self, key: UnitKey, row: usize, keep: impl FnOnce() -> T) {
        if self.n == 0 {
            return;
        }
        if let Some(bar) = &self.bar {
            if cmp_unit_keys(&key, bar) == Ordering::Greater {
                return;
            }
        }
        self.cands.push((key, row, keep()));
        if self.cands.len() >= 2 * self.n {
            self.cut();
        }
    }

    fn cut(&mut self) {
        self.cands.sort_by(|a, b| cmp_unit_keys(&a.0, &b.0));
        self.cands.truncate(self.n);
        if self.cands.len() == self.n {
            self.bar = self.cands.last().map(|c| c.0);
        }
    }

    /// The best `n` (row, kept), best first.
    pub(crate) fn finish(mut self) -> Vec<(usize, T)> {
        self.cut();
        self.cands.into_iter().map(|(_, r, t)| (r, t)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{unit_id, UnitKind};

    fn row(proc_: u32, tid: u32, index: u32, score: f64, t: i64) -> Row {
        Row {
            score,
            t_start_unix_ns: t,
            t_end_unix_ns: t,
            tsc_start: 0,
            tsc_end: 0,
            proc_,
            conn: 0,
            tid,
            index,
            shared: 0,
            fd: 0,
            kind: UnitKind::Handler,
            flags: 0,
            incident: 0,
        }
    }

    fn by_strings(a: &Row, b: &Row, shared: &[SharedScore], procs: &[(String, u32)]) -> Ordering {
        let id = |r: &Row| {
            let (h, p) = &procs[r.proc_ as usize];
            unit_id(h, *p, r.tid, r.index)
        };
        let support = |r: &Row| shared[r.shared as usize].model_units;
        b.score
            .total_cmp(&a.score)
            .then(b.incident.cmp(&a.incident))
            .then(support(b).cmp(&support(a)))
            .then(a.t_start_unix_ns.cmp(&b.t_start_unix_ns))
            .then_with(|| id(a).cmp(&id(b)))
    }

    #[test]
    fn id_tails_compare_as_the_id_strings() {
        let vals = [0u32, 1, 2, 9, 10, 11, 19, 99, 100, 101, 1000, 4_294_967_295];
        for &(t1, i1) in &[
            (1u32, 0u32),
            (10, 5),
            (1, 10),
            (9, 9),
            (4_294_967_295, 4_294_967_295),
        ] {
            for &t2 in &vals {
                for &i2 in &vals {
                    assert_eq!(
                        id_tail(t1, i1).cmp(&id_tail(t2, i2)),
                        unit_id("h", 1, t1, i1).cmp(&unit_id("h", 1, t2, i2)),
                        "{t1}:{i1} vs {t2}:{i2}"
                    );
                }
            }
        }
    }

    #[test]
    fn ranking_order_is_the_order_of_the_id_strings() {
        // Hosts and pids whose prefixes collide in the first characters ("n1:10:" vs
        // "n10:"), a repeated (host, pid), and, in a second run, a host with a colon, where
        // only whole ids compare right.
        for procs in [
            vec![("n1", 10), ("n2", 9), ("n10", 10), ("n1", 10)],
            vec![("n1", 10), ("n1:10", 2), ("n", 1)],
        ] {
            let procs: Vec<(String, u32)> =
                procs.into_iter().map(|(h, p)| (h.to_string(), p)).collect();
            let scores = [0.0, -0.0, 0.5, 1.0, 0.25, f64::NAN, 0.5, 1e-300];
            let mut blocks: Vec<Vec<Row>> = Vec::new();
            for p in 0..procs.len() as u32 {
                let mut rows = Vec::new();
                // Two threads, each in time order, with start times that collide across
                // threads and processes.
                for tid in [9u32, 10] {
                    for i in 0..60u32 {
                        let k = (i * 7 + p * 3 + tid) as usize;
                        let s = k % scores.len();
                        let mut r = row(p, tid, i, scores[s], (i / 3) as i64);
                        r.shared = s as u32;
                        // Roots of incidents of several sizes among equal scores.
                        r.incident = ((k / 5) % 3) as u16;
                        rows.push(r);
                    }
                }
                blocks.push(rows);
            }
            blocks.push(Vec::new());
            // Equal scores (0.5 twice) backed by different numbers of normal units.
            let shared: Vec<SharedScore> = scores
                .iter()
                .enumerate()
                .map(|(i, &score)| SharedScore {
                    score,
                    verdict: crate::score::Verdict::Scored,
                    effective: Box::new([]),
                    model_units: (i as u64 * 37) % 5,
                    run_added: 0.0,
                })
                .collect();
            let ids = IdOrder::new(&procs);
            let got = ranking_order(&blocks, &shared, &ids, usize::MAX);
            let at = |r: &RowRef| &blocks[r.0 as usize][r.1 as usize];
            let mut want: Vec<RowRef> = blocks
                .iter()
                .enumerate()
                .flat_map(|(b, rows)| (0..rows.len()).map(move |i| (b as u32, i as u32)))
                .collect();
            want.sort_by(|a, b| by_strings(at(a), at(b), &shared, &procs));
            assert_eq!(got, want);
            // The first rows alone, cut anywhere (inside a bucket, at its end, past all).
            for limit in [0, 1, 7, 8, 9, 100, 239, want.len(), want.len() + 5] {
                let head = ranking_order(&blocks, &shared, &ids, limit);
                assert_eq!(head, want[..limit.min(want.len())], "limit {limit}");
            }
            let mut again = want.clone();
            again.sort_by(|a, b| cmp_rows(at(a), at(b), &shared, &ids));
            assert_eq!(again, want);
        }
    }

    #[test]
    fn ties_go_to_the_larger_incident_then_the_better_backed_evidence_not_the_earlier() {
        let procs = vec![("h".to_string(), 1)];
        let sh = |units| SharedScore {
            score: 0.9,
            verdict: crate::score::Verdict::Scored,
            effective: Box::new([]),
            model_units: units,
            run_added: 0.0,
        };
        // A rare harmless path never seen in 4 normal units, early; the fault, never seen
        // in 634, later; the root of an incident across two other processes, last.
        let shared = vec![sh(4), sh(634), sh(634)];
        let mut rows = vec![
            row(0, 1, 0, 0.9, 10),
            row(0, 1, 1, 0.9, 20),
            row(0, 1, 2, 0.9, 30),
        ];
        for (i, r) in rows.iter_mut().enumerate() {
            r.shared = i as u32;
        }
        let blocks = vec![rows];
        let ids = IdOrder::new(&procs);
        let order = |blocks: &[Vec<Row>]| -> Vec<u32> {
            ranking_order(blocks, &shared, &ids, usize::MAX)
                .into_iter()
                .map(|r| r.1)
                .collect()
        };
        assert_eq!(order(&blocks), vec![1, 2, 0]);
        let mut blocks = blocks;
        blocks[0][2].incident = 2;
        assert_eq!(order(&blocks), vec![2, 1, 0]);
    }

    #[test]
    fn best_units_keeps_exactly_the_n_best() {
        let key = |score: f64, t: i64, i: u32| (score, t, 1, i);
        let mut all = Vec::new();
        let mut b = BestUnits::new(5);
        for i in 0..200u32 {
            // Scores repeat, so ties are decided by start time and then by id.
            let k = key(((i * 37) % 11) as f64 / 10.0, ((i * 13) % 7) as i64, i);
            all.push((k, i as usize));
            b.offer(k, i as usize, || i);
        }
        all.sort_by(|a, c| cmp_unit_keys(&a.0, &c.0));
        let want: Vec<usize> = all.iter().take(5).map(|x| x.1).collect();
        let got: Vec<usize> = b.finish().into_iter().map(|(r, _)| r).collect();
        assert_eq!(got, want);
    }
}
