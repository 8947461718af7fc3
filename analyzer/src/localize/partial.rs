//! Ranking in shards: `culprit rank --shard K/N` ranks the K-th of N shards of a run's
//! processes into a **part file**, and `culprit rank --merge` makes the whole ranking from
//! the N part files — exactly the ranking one `culprit rank` over all the traces gives
//! (without the messages pass: `--no-messages`).
//!
//! What is sharded is what costs: both passes over each process's trace and the scoring of
//! its units (`rank::score_processes`). A part file holds, per process of its
//! shard, what that gives — the compact rows, the scores they share, the extras, the
//! connections, the decoding counts, the names resolved, and the process's best units with
//! their trees already annotated. The merge then does what needs every process at once
//! (`rank::assemble`, the same code `rank` runs): consequences filed across
//! processes, the rows ordered, the first made whole.
//!
//! **Shards** ([`Shard::processes`]): the run's processes sorted by host, pid and start
//! time; with no more shards than hosts, each shard is a run of whole hosts (host `h` of
//! `H` in shard `⌊h·N/H⌋`); with more, each a run of `⌈P/N⌉` or `⌊P/N⌋` processes. A shard
//! scans (pass 1) the other processes of its hosts too, since forked children inherit from
//! their parents on the same host; every process is ranked by exactly one shard. A shard
//! opens only its hosts' trace directories ([`crate::decode::TraceSet::open_selected`]);
//! of the rest of the run it needs only its **outline** ([`RunOutline`]: the hosts in
//! ranking order with their processes' count, the run's size and identity), and the merge
//! checks that every part outlined the run alike. The processes' labels and what is not
//! recorded of them come from the shard that ranked them.
//!
//! A shard outlines the run either from every manifest of the run or from the run's
//! index (`culprit rank --write-index`, [`crate::runindex`]), made once for every shard,
//! of which it reads only the head and its own hosts' part. A part file carries only its
//! own processes (their place in the run, host and pid) and the run's identity, which the
//! merge checks.
//!
//! Part files are binary: [`PART_MAGIC`], the version [`PART_VERSION`] (`u32`,
//! little-endian), the body's length (`u64`), the body — the [`PartFile`] in `bincode`'s
//! variable-length integer encoding, floats bit for bit — and the CRC-32 (IEEE) of the
//! body (`u32`). Every string the part's processes use (hosts, names of key parts, names
//! and call sites of annotated trees) is in one table of the part, once (the crate-private
//! `interned` module); processes refer to it by index. Version 4 (this layout); version 3
//! held each process's own names and trees' strings and an FNV checksum.

use super::interned::{InternedLines, LineRef, Strings};
use super::options::Options;
use super::pipeline::{book_names, sorted_processes};
use super::rank::{assemble, score_processes, Heavy, HeavyLines, ProcessNames, ProcessRanking};
pub use crate::decode::RunOutline;
use crate::decode::{DecodeStats, Selected, TraceSet};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::report::{self, ConnRow, Report, Row, RowExtra, SharedScore};
use crate::score::UnitScore;
pub use crate::trace::outline::ranking_perm;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Value of [`PartFile::format`].
pub const PART_FORMAT: &str = "culprit-rank-part";
/// Value of [`PartFile::version`].
pub const PART_VERSION: u32 = 4;
/// The magic bytes a part file begins with.
pub const PART_MAGIC: &[u8; 8] = b"CULPRPRT";

/// Shard `k` (1 to `n`) of `n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Which, from 1.
    pub k: usize,
    /// Of how many.
    pub n: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;
    /// `K/N`, 1 ≤ K ≤ N.
    fn from_str(s: &str) -> std::result::Result<Shard, String> {
        let bad = || format!("{s:?} is not a shard K/N with 1 ≤ K ≤ N (e.g. 3/8)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (k, n): (usize, usize) = (
            k.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if k == 0 || k > n {
            return Err(bad());
        }
        Ok(Shard { k, n })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

impl Shard {
    /// The hosts whose trace directories this shard opens, of the run's processes `all`
    /// (any order): those of the processes it ranks.
    pub fn hosts(&self, all: &[crate::decode::ProcId]) -> std::collections::BTreeSet<String> {
        self.hosts_of(&RunOutline::of(all, 0))
    }

    /// The hosts whose trace directories this shard opens, of the run outlined by `o`:
    /// those of the processes it ranks.
    pub fn hosts_of(&self, o: &RunOutline) -> std::collections::BTreeSet<String> {
        o.hosts
            .iter()
            .enumerate()
            .filter(|&(h, s)| (s.first..s.first + s.count).any(|i| self.ranks(o, h, i)))
            .map(|(_, s)| s.host.clone())
            .collect()
    }

    /// Whether this shard ranks the process at place `i` in ranking order, of the `h`-th
    /// host of the run outlined by `o` (as [`Shard::processes`] says).
    fn ranks(&self, o: &RunOutline, h: usize, i: u32) -> bool {
        let hosts = o.hosts.len();
        if self.n <= hosts {
            h * self.n / hosts == self.k - 1
        } else {
            i as usize * self.n / o.total as usize == self.k - 1
        }
    }

    /// Which of the processes (their hosts, in sorted order) this shard ranks.
    pub fn processes(&self, hosts: &[&str]) -> Vec<bool> {
        let p = hosts.len();
        let mut host_of = Vec::with_capacity(p);
        let mut h = 0usize;
        for i in 0..p {
            if i > 0 && hosts[i] != hosts[i - 1] {
                h += 1;
            }
            host_of.push(h);
        }
        let n_hosts = if p == 0 { 0 } else { h + 1 };
        let k = self.k - 1;
        (0..p)
            .map(|i| {
                if self.n <= n_hosts {
                    host_of[i] * self.n / n_hosts == k
                } else {
                    i * self.n / p == k
                }
            })
            .collect()
    }
}

/// The processes `all` in ranking order: sorted by host, pid and start time.
pub fn ranking_order(all: &[crate::decode::ProcId]) -> Vec<&crate::decode::ProcId> {
    ranking_perm(all)
        .into_iter()
        .map(|i| &all[i as usize])
        .collect()
}

/// A part file: one shard's scored processes.
#[derive(Debug, Serialize, Deserialize)]
pub struct PartFile {
    /// Always [`PART_FORMAT`].
    pub format: String,
    /// [`PART_VERSION`].
    pub version: u32,
    /// The shard.
    pub shard: Shard,
    /// The score (`--score`).
    pub score: String,
    /// Hash of the model's encoding: every part of one ranking used one model.
    pub model_hash: u64,
    /// Process groups of the model.
    pub groups: usize,
    /// Processes the model was learned from.
    #[serde(default)]
    pub normal_processes: u64,
    /// The model's names of key parts.
    pub model_names: BTreeMap<u64, String>,
    /// The run: a hash of every process of it (host, pid, start time, in ranking order);
    /// the merge refuses parts of two runs.
    pub run: u64,
    /// The run's processes.
    pub total: u32,
    /// Every string its processes use, each once ([`super::interned`]).
    strings: Vec<String>,
    /// The names of key parts its processes use: each (key, name) pair once, the name an
    /// index in `strings`.
    names: Vec<(u64, u32)>,
    /// The processes this shard ranked.
    pub processes: Vec<PartProcess>,
    /// Processes named as they were started (`crate::procname`): host, pid, label.
    #[serde(default)]
    pub labels: Vec<(String, u32, String)>,
    /// What is not recorded of some of the processes it ranked
    /// (`crate::procname::unseen_notes`), each with its process's place in the order
    /// one `TraceSet::open` lists the run's processes (the merge says them in that order).
    #[serde(default)]
    pub unseen: Vec<(u64, String)>,
}

/// One process's scored units, as a part file holds them.
#[derive(Debug, Serialize, Deserialize)]
pub struct PartProcess {
    /// Its place among the run's processes, in ranking order (sorted by host, pid, start).
    pub index: u32,
    /// Its host: an index in the part's strings.
    host: u32,
    /// Its pid.
    pub pid: u32,
    rows: Vec<Row>,
    shared: Vec<SharedScore>,
    extras: Vec<(u32, RowExtra)>,
    group: Option<u32>,
    conns: Vec<ConnRow>,
    heavy: Vec<PartHeavy>,
    stats: DecodeStats,
    /// The names of key parts its units use: indices in the part's names, in key order.
    names: Vec<u32>,
    unmatched: bool,
    /// How its group's normal processes ended ([`crate::ending`]).
    #[serde(default)]
    ending: Option<crate::ending::EndingModel>,
}

/// One of a process's best units: its tree annotated, its score.
#[derive(Debug, Serialize, Deserialize)]
struct PartHeavy {
    row: usize,
    lines: Vec<LineRef>,
    score: UnitScore,
}

/// Ranks shard `shard` of the processes of `set` against `model`.
pub fn rank_shard(model: &Model, set: &TraceSet, opts: &Options, shard: Shard) -> Result<PartFile> {
    rank_shard_of(model, set, &set.ids(), opts, shard)
}

/// Ranks shard `shard` of the run whose processes are `all` (any order), of which `set`
/// holds at least those of the shard's hosts ([`Shard::hosts`]; any others are not read).
pub fn rank_shard_of(
    model: &Model,
    set: &TraceSet,
    all: &[crate::decode::ProcId],
    opts: &Options,
    shard: Shard,
) -> Result<PartFile> {
    let outline = RunOutline::of(all, 0);
    let ours = shard.hosts_of(&outline);
    let hash = model_hash(model);
    Ok(rank_shard_outlined(model, hash, set, &ours, &outline, opts, shard)?.0)
}

/// The hash of a model that a part file carries ([`PartFile::model_hash`]): of its
/// encoding, as `culprit learn` writes it (a model file's bytes, its last newline left
/// out, hash alike: [`crate::model::Model::load_hashed`]).
pub fn model_hash(model: &Model) -> u64 {
    crate::hash::str_hash(model.to_json().as_bytes())
}

/// Ranks shard `shard` of the run outlined in `sel` (its hosts' directories opened,
/// [`Shard::hosts_of`]) against `model`, whose hash is `model_hash` ([`model_hash`]): the
/// part file, with the labels of the processes it ranks and what is not recorded of them.
pub fn rank_selected(
    model: &Model,
    model_hash: u64,
    sel: &Selected,
    opts: &Options,
    shard: Shard,
) -> Result<PartFile> {
    let ours = shard.hosts_of(&sel.outline);
    let (mut part, ranked) = rank_shard_outlined(
        model,
        model_hash,
        &sel.set,
        &ours,
        &sel.outline,
        opts,
        shard,
    )?;
    let ranked: crate::hash::FxSet<*const crate::decode::ProcessTrace> =
        ranked.into_iter().map(std::ptr::from_ref).collect();
    // In the set's order, each with its place in the order one `TraceSet::open` lists
    // the run's processes.
    let mine: Vec<(&crate::decode::ProcessTrace, u64)> = sel
        .set
        .processes
        .iter()
        .zip(&sel.places)
        .filter(|(p, _)| ranked.contains(&std::ptr::from_ref(*p)))
        .map(|(p, &at)| (p, at))
        .collect();
    use rayon::prelude::*;
    let labels: Vec<crate::procname::ProcLabel> = mine
        .par_iter()
        .map(|(p, _)| crate::procname::label_of(p))
        .collect::<Result<_>>()?;
    for ((p, at), l) in mine.iter().zip(&labels) {
        part.labels.push((p.host.clone(), p.pid, l.text()));
        if let Some(note) = crate::procname::unseen_note(p, l) {
            part.unseen.push((*at, note));
        }
    }
    part.labels.sort();
    part.unseen.sort();
    Ok(part)
}

/// Ranks shard `shard`, whose hosts are `ours`, of the run outlined by `outline`, of
/// which `set` holds at least the processes of `ours` (any others are not read): the part
/// file and the processes of `set` it ranked.
fn rank_shard_outlined<'a>(
    model: &Model,
    model_hash: u64,
    set: &'a TraceSet,
    ours: &std::collections::BTreeSet<String>,
    outline: &RunOutline,
    opts: &Options,
    shard: Shard,
) -> Result<(PartFile, Vec<&'a crate::decode::ProcessTrace>)> {
    // The shard's processes and the other processes of their hosts (pass 1 only), in
    // ranking order: host by host, each at its host's places.
    let sub: Vec<&crate::decode::ProcessTrace> = sorted_processes(std::slice::from_ref(set))
        .into_iter()
        .filter(|p| ours.contains(&p.host))
        .collect();
    let mut global = Vec::with_capacity(sub.len());
    let mut wanted = Vec::with_capacity(sub.len());
    let mut hosts = Vec::with_capacity(sub.len());
    for (h, s) in outline.hosts.iter().enumerate() {
        if !ours.contains(&s.host) {
            continue;
        }
        for i in s.first..s.first + s.count {
            global.push(i as usize);
            wanted.push(shard.ranks(outline, h, i));
            hosts.push(s.host.as_str());
        }
    }
    let same = sub.len() == global.len() && sub.iter().zip(&hosts).all(|(p, &h)| p.host == h);
    if !same {
        return Err(Error::BadTrace {
            path: sub
                .first()
                .map_or_else(|| PathBuf::from("--shard"), |p| p.recording.dir.clone()),
            why: format!(
                "shard {shard}: the traces of its hosts hold {} processes, the run's list names {}",
                sub.len(),
                global.len()
            ),
        });
    }
    let total = outline.total as usize;
    let scored = score_processes(model, &sub, &wanted, total, opts, |j| global[j])?;
    let mut processes = Vec::new();
    let mut table = Table::default();
    let mut resolved = crate::hash::FxMap::default();
    let mut ranked = Vec::new();
    for (j, pr) in scored.into_iter().enumerate() {
        let Some(pr) = pr else { continue };
        let p = sub[j];
        ranked.push(p);
        processes.push(part_process(
            model,
            (global[j] as u32, &p.host, p.pid),
            pr,
            opts,
            (&mut table, &mut resolved),
        ));
    }
    let part = PartFile {
        format: PART_FORMAT.into(),
        version: PART_VERSION,
        shard,
        score: opts.score.name().into(),
        model_hash,
        groups: model.groups.len(),
        normal_processes: super::rank::normal_processes(model),
        model_names: model.names.clone(),
        run: outline.run,
        total: outline.total,
        strings: table.strings.into_vec(),
        names: table.names,
        processes,
        labels: Vec::new(),
        unseen: Vec::new(),
    };
    Ok((part, ranked))
}

/// The strings and names of key parts of a part file under construction.
#[derive(Default)]
struct Table {
    strings: Strings,
    /// (key, name) pairs, each once.
    names: Vec<(u64, u32)>,
    index: crate::hash::FxMap<(u64, u32), u32>,
}

impl Table {
    /// The index of the pair (`key`, `name`) in the part's names, added if new.
    fn name(&mut self, key: u64, name: &str) -> u32 {
        let pair = (key, self.strings.of(name));
        *self.index.entry(pair).or_insert_with(|| {
            self.names.push(pair);
            self.names.len() as u32 - 1
        })
    }
}

/// A scored process as a part file holds it: names resolved, best trees annotated (with
/// the model's names first, then the process's, as the whole ranking names them), its
/// strings in the part's `table`.
fn part_process(
    model: &Model,
    (index, host, pid): (u32, &str, u32),
    pr: ProcessRanking,
    opts: &Options,
    (table, resolved): (
        &mut Table,
        &mut crate::hash::FxMap<crate::symbolize::CSym, String>,
    ),
) -> PartProcess {
    let names = match pr.names {
        ProcessNames::Book(b) => book_names(&b, resolved),
        ProcessNames::Resolved(r) => r,
    };
    let mut all = model.names.clone();
    for (k, v) in &names {
        all.entry(*k).or_insert_with(|| v.clone());
    }
    let heavy = pr
        .heavy
        .into_iter()
        .map(|h| {
            let lines = match h.lines {
                HeavyLines::Tree(tree, class) => {
                    let m = pr
                        .group
                        .and_then(|g| model.groups.get(g as usize)?.class(&class));
                    report::annotate(&tree, m, &h.score.effective, &all, opts.tree_lines)
                }
                HeavyLines::Interned(l) => l.expand(),
            };
            PartHeavy {
                row: h.row,
                lines: lines
                    .iter()
                    .map(|l| LineRef::of(l, &mut table.strings))
                    .collect(),
                score: h.score,
            }
        })
        .collect();
    PartProcess {
        index,
        host: table.strings.of(host),
        pid,
        rows: pr.rows,
        shared: pr.shared,
        extras: pr.extras,
        group: pr.group,
        conns: pr.conns,
        heavy,
        stats: pr.stats,
        names: names.iter().map(|(&k, v)| table.name(k, v)).collect(),
        unmatched: pr.unmatched,
        ending: pr.ending,
    }
}

impl PartFile {
    /// Writes the part file: encoded once, straight into one buffer of its exact size (no
    /// intermediate copy of the body, no growing vector: every page touched once).
    pub fn save(&self, path: &Path) -> Result<()> {
        use bincode::Options as _;
        let cannot = |e: bincode::Error| Error::BadTrace {
            path: path.to_path_buf(),
            why: format!("cannot encode the part file: {e}"),
        };
        let len = bincode::options().serialized_size(self).map_err(cannot)?;
        let mut out = Vec::with_capacity(len as usize + 24);
        out.extend_from_slice(PART_MAGIC);
        out.extend_from_slice(&PART_VERSION.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        bincode::options()
            .serialize_into(&mut out, self)
            .map_err(cannot)?;
        let crc = crc32fast::hash(&out[20..]);
        out.extend_from_slice(&crc.to_le_bytes());
        std::fs::write(path, out).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            what: "write part file",
            source,
        })
    }

    /// Reads and checks a part file.
    pub fn load(path: &Path) -> Result<PartFile> {
        Self::load_with(path, &mut Vec::new())
    }

    /// Reads and checks a part file, its bytes read into `buf` (its contents replaced): a
    /// merge reading many part files reads them all into one buffer, whose pages the
    /// kernel gives (zeroed) once instead of once a file.
    pub fn load_with(path: &Path, buf: &mut Vec<u8>) -> Result<PartFile> {
        let bad = |why: String| Error::BadTrace {
            path: path.to_path_buf(),
            why,
        };
        buf.clear();
        let read = |buf: &mut Vec<u8>| -> std::io::Result<()> {
            use std::io::Read as _;
            let mut f = std::fs::File::open(path)?;
            let size = f.metadata().map_or(0, |m| m.len() as usize);
            buf.reserve(size.saturating_add(1));
            f.read_to_end(buf)?;
            Ok(())
        };
        read(buf).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            what: "read part file",
            source,
        })?;
        let bytes: &[u8] = buf;
        let body = part_body(bytes).map_err(|why| {
            bad(format!(
                "not a usable part file of `culprit rank --shard`: {why}"
            ))
        })?;
        use bincode::Options as _;
        let p: PartFile = bincode::options()
            .with_limit(body.len() as u64)
            .deserialize(body)
            .map_err(|e| bad(format!("a part file whose contents do not decode: {e}")))?;
        if p.format != PART_FORMAT || p.version != PART_VERSION {
            return Err(bad(format!(
                "format {:?} version {}, this culprit reads {PART_FORMAT:?} version {PART_VERSION}",
                p.format, p.version
            )));
        }
        let n = p.total;
        let strings = p.strings.len();
        if p.names.iter().any(|&(_, s)| s as usize >= strings) {
            return Err(bad(format!(
                "shard {}: a name out of its table of strings",
                p.shard
            )));
        }
        for q in &p.processes {
            let rows = q.rows.len();
            let bad_row = q.rows.iter().any(|r| {
                r.proc_ != q.index
                    || r.shared as usize >= q.shared.len()
                    || r.conn as usize >= q.conns.len().max(1)
            });
            if q.index >= n
                || bad_row
                || q.extras.iter().any(|(i, _)| *i as usize >= rows)
                || q.heavy.iter().any(|h| h.row >= rows)
                || q.group.is_some_and(|g| g as usize >= p.groups)
                || q.host as usize >= strings
                || q.names.iter().any(|&i| i as usize >= p.names.len())
                || q.heavy
                    .iter()
                    .any(|h| h.lines.iter().any(|l| !l.fits(strings)))
            {
                return Err(bad(format!(
                    "process {} of shard {}: indices out of range",
                    q.index, p.shard
                )));
            }
        }
        Ok(p)
    }
}

/// The body of a part file's bytes, its header and checksum checked.
fn part_body(bytes: &[u8]) -> std::result::Result<&[u8], String> {
    if bytes.len() < 24 || &bytes[..8] != PART_MAGIC {
        return Err("it does not begin with CULPRPRT".into());
    }
    let word = |at: usize, n: usize| {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&bytes[at..at + n]);
        u64::from_le_bytes(b)
    };
    let version = word(8, 4) as u32;
    if version != PART_VERSION {
        return Err(format!(
            "version {version}, this culprit reads version {PART_VERSION}"
        ));
    }
    let len = word(12, 8);
    if (bytes.len() - 20) as u64 != len.saturating_add(4) {
        return Err(format!(
            "its body is said to be {len} bytes, the file holds {} after the header \
             (cut short or appended to)",
            bytes.len() - 20
        ));
    }
    let body = &bytes[20..20 + len as usize];
    if word(20 + len as usize, 4) != crc32fast::hash(body) as u64 {
        return Err("its checksum does not match its contents (damaged)".into());
    }
    Ok(body)
}

/// A part file's names of key parts — (key, index into its strings) — and those strings.
type PartNames = (Vec<(u64, u32)>, Arc<[String]>);

/// The whole ranking from the part files of every shard (each named by its path in
/// errors): they must be the N shards of one run, ranked against one model with one score.
pub fn merge_parts(parts: Vec<(PathBuf, PartFile)>, opts: &Options) -> Result<Report> {
    let Some((first_path, first)) = parts.first() else {
        return Err(Error::BadTrace {
            path: PathBuf::from("--merge"),
            why: "no part file given".into(),
        });
    };
    let first_path = first_path.clone();
    let (groups, normal_processes, model_names, run, total) = (
        first.groups,
        first.normal_processes,
        first.model_names.clone(),
        first.run,
        first.total,
    );
    let (model_hash, score_name) = (first.model_hash, first.score.clone());
    let n = first.shard.n;
    let mut seen = vec![false; n];
    for (path, p) in &parts {
        let bad = |why: String| Error::BadTrace {
            path: path.clone(),
            why,
        };
        if p.shard.n != n {
            return Err(bad(format!(
                "shard {} of {}, but {} is of {n}",
                p.shard,
                p.shard.n,
                first_path.display()
            )));
        }
        if p.model_hash != model_hash || p.score != score_name {
            return Err(bad(format!(
                "ranked against another model or score than {}",
                first_path.display()
            )));
        }
        if p.run != run || p.total != total {
            return Err(bad(format!(
                "a shard of another run than {}",
                first_path.display()
            )));
        }
        if std::mem::replace(&mut seen[p.shard.k - 1], true) {
            return Err(bad(format!("shard {} given twice", p.shard)));
        }
    }
    if let Some(k) = seen.iter().position(|s| !s) {
        return Err(Error::BadTrace {
            path: first_path.clone(),
            why: format!("shard {}/{n} is missing", k + 1),
        });
    }
    let score: crate::evidence::ScoreKind =
        score_name.parse().map_err(|e: String| Error::BadTrace {
            path: first_path.clone(),
            why: e,
        })?;
    let mut per: Vec<Option<ProcessRanking>> = (0..total).map(|_| None).collect();
    let mut procs: Vec<(String, u32)> = vec![(String::new(), 0); total as usize];
    // Each process's names of key parts: its part and its pairs there.
    let mut tables: Vec<PartNames> = Vec::with_capacity(parts.len());
    let mut named: Vec<Option<(usize, Vec<u32>)>> = (0..total).map(|_| None).collect();
    for (path, p) in parts {
        let strings: Arc<[String]> = p.strings.into();
        let t = tables.len();
        for q in p.processes {
            let i = q.index as usize;
            procs[i] = (strings[q.host as usize].clone(), q.pid);
            if per[i].is_some() {
                return Err(Error::BadTrace {
                    path,
                    why: format!("process {} is in two shards", i),
                });
            }
            named[i] = Some((t, q.names));
            per[i] = Some(ProcessRanking {
                rows: q.rows,
                shared: q.shared,
                extras: q.extras,
                group: q.group,
                conns: q.conns,
                heavy: q
                    .heavy
                    .into_iter()
                    .map(|h| Heavy {
                        row: h.row,
                        lines: HeavyLines::Interned(InternedLines {
                            lines: h.lines,
                            strings: strings.clone(),
                        }),
                        score: h.score,
                    })
                    .collect(),
                stats: q.stats,
                // Named below, for every process at once.
                names: ProcessNames::Resolved(BTreeMap::new()),
                unmatched: q.unmatched,
                ending: q.ending,
            });
        }
        tables.push((p.names, strings));
    }
    if let Some(i) = per.iter().position(|p| p.is_none()) {
        return Err(Error::BadTrace {
            path: first_path.clone(),
            why: format!("no shard ranked process {i} of {total}"),
        });
    }
    // The model's names, then the first process (in ranking order) naming a key names it,
    // as `assemble` names them from every process's own names: a pair already seen in
    // its part changes nothing.
    let mut names = model_names;
    let mut seen: Vec<Vec<bool>> = tables.iter().map(|t| vec![false; t.0.len()]).collect();
    for (t, pairs) in named.into_iter().flatten() {
        let (table, strings) = &tables[t];
        for j in pairs {
            if !std::mem::replace(&mut seen[t][j as usize], true) {
                let (key, name) = table[j as usize];
                names
                    .entry(key)
                    .or_insert_with(|| strings[name as usize].clone());
            }
        }
    }
    let mut opts = opts.clone();
    opts.score = score;
    Ok(assemble(
        groups,
        normal_processes,
        &names,
        None,
        procs,
        per.into_iter().flatten().collect(),
        &opts,
    ))
}
