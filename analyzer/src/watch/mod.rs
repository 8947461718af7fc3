//! `culprit watch`: score the execution units of a recording while it runs, and report
//! each anomalous unit once, soon after it ends.
//!
//! Every poll opens the trace directories again (the reader's live data path puts entries
//! on disk within its `--live-interval`), ranks them against the model as `culprit rank`
//! does, and reports the units that are complete (the thread went on past them: not `cut`
//! by the end of what is on disk), score at or above the threshold, and were not reported
//! before. A unit's identity is its host, process (pid and start time), thread and first
//! timestamp: indices within a thread move when a flight recorder rotates the oldest units
//! away.
//!
//! Each poll reads only the end of each thread (incremental): from the start of the
//! [`CONTEXT_UNITS`]th unit before the thread's last unit of the previous poll (that unit
//! may have gone on; the units before it are where the scan finds the event loop again).
//! The records (whole sub-buffers, or pieces the live copier saved) wholly before that
//! point are left out; of the entries before it in the first record read, only what later
//! entries need is read (found once, `Trim`). The
//! records left out were read on an earlier poll, which kept what later entries need
//! from them — metadata and the calls that say what each descriptor is
//! ([`reader::tracedir::kept_entries`]) — and hands it to the ranking before the suffix
//! ([`crate::decode::ThreadSource::Suffix`]); the first unit of a suffix is cut at its
//! start and not scored (it was scored whole on the poll before). A poll so costs what
//! was written since the last one plus, per thread, the context units (and a light
//! reading of the entries before them in their record), not the whole window.
//! Units keep the numbers (`id`) a reading of the whole directory gives them: each suffix
//! is numbered from a unit the previous poll numbered.
//!
//! A directory being written has *holes* ([`reader::TraceDir::holes`]): the drain
//! threads and the live copier save a thread's sub-buffers in no common order, so a poll
//! may find a sub-buffer on disk while one before it (or the rest of one before it) is
//! still in flight. Every poll, whole or incremental, reads each thread only up to its
//! first hole (for up to [`HOLE_PATIENCE`]; a hole that lasts longer is a loss, read
//! past). Read past, a unit that spans a hole would be scored without the entries in
//! flight, and an incremental poll would number the units after it from a count that
//! lacks the hole's units and move its suffix past the hole for good, so that the units
//! it reported kept numbers a whole reading does not give them.
//!
//! A unit with **no model** (its process matches no process group, or its kind on its kind
//! of connection never occurred in normal runs) is reported once per process or connection
//! kind, and a unit whose strongest evidence repeats one reported in its process once per
//! evidence; the later ones are counted in that report, not reported ([`fold`]).

pub mod fold;
pub mod timing;

use crate::localize::options::Options;
use crate::model::Model;
use crate::trace::load::{Chunk, Contexts, ThreadSource, TraceSet};
use crate::Result;
use reader::rotated::RecordKey;
use reader::ThreadKey;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use timing::PollTimes;

/// How long a poll waits for a hole in a thread's records to be filled: a sub-buffer in
/// flight reaches the disk within a drain (milliseconds, seconds on a loaded machine); a
/// hole that lasts longer is a loss (a chunk file damaged or deleted), read past as a
/// whole reading does.
pub const HOLE_PATIENCE: Duration = Duration::from_secs(10);

/// How `culprit watch` reports.
#[derive(Clone)]
pub struct WatchOptions {
    /// Report units scoring at least this.
    pub threshold: f64,
    /// The ranking's options (score kind, threads).
    pub rank: Options,
    /// Read each thread's end only (see the [module documentation](self)); `false`
    /// ranks the whole directory on every poll.
    pub incremental: bool,
}

/// One report: a unit of `culprit rank --json`'s shape, and when it was reported.
#[derive(Clone, Debug)]
pub struct Alert {
    /// The unit, as `culprit rank --json` gives it, plus `reported_unix_ns`.
    pub json: serde_json::Value,
    /// Its first line of *why*, for the text output.
    pub text: String,
    /// The unit's end (ns since the epoch).
    pub end_unix_ns: i64,
    /// When this poll reported it.
    pub reported_unix_ns: i64,
}

/// What one poll saw.
#[derive(Clone, Debug, Default)]
pub struct Poll {
    /// New reports, highest score first.
    pub alerts: Vec<Alert>,
    /// Units ranked in this poll.
    pub units: usize,
    /// Processes found.
    pub processes: usize,
}

/// How long a thread's last unit waits for the thread's next unit before it is taken as
/// complete (the thread idle, or gone): until the next unit begins, more entries may still
/// belong to the unit — a process's first unit ends in `execve`, and what the new program
/// does next reaches the disk in a later sub-buffer (read without it, the unit reads as
/// an `execve` that never returned). Units of a finished recording do not wait.
pub const LAST_UNIT_GRACE: Duration = Duration::from_millis(500);

/// The state of a watch over some trace directories.
pub struct Watcher {
    model: Model,
    dirs: Vec<PathBuf>,
    opts: WatchOptions,
    reported: HashSet<(String, u32, u32, u64)>,
    /// Per trace directory and thread, what earlier polls read.
    threads: HashMap<(PathBuf, ThreadKey), ThreadState>,
    /// Per host, pid and thread: how its units are numbered.
    numbers: HashMap<(String, u32, u32), Numbering>,
    /// Holes seen (directory, thread, the record after the hole) and when first seen.
    holes: Holes,
    /// Units with no model, reported once per process or connection kind ([`fold`]).
    folds: fold::Folds,
    /// Where the delays went ([`timing`]).
    timing: timing::Timing,
    /// Units above the threshold not reported: they ended after their recording was
    /// asked to stop ([`reader::stopmark`]).
    after_stop: u64,
}

/// Holes in threads' records, by directory, thread and the first record after the hole,
/// and when each was first seen.
type Holes = HashMap<(PathBuf, ThreadKey, RecordKey), Instant>;

/// How the units of a thread read from a suffix are numbered (see [`Watcher::number`]).
#[derive(Default)]
struct Numbering {
    /// Added to the index within the suffix.
    offset: i64,
    /// The number of each unit of the last poll, by its start (TSC).
    at: BTreeMap<u64, u32>,
}

/// Per host, pid and thread: its units as (index, start TSC, cut at start), in order.
type ThreadUnits = HashMap<(String, u32, u32), Vec<(u32, u64, bool)>>;

/// What a watch keeps of one thread between polls.
#[derive(Default)]
struct ThreadState {
    /// Its records at or before this key were read on an earlier poll.
    after: Option<RecordKey>,
    /// What they said that later entries need, per record.
    context: BTreeMap<RecordKey, Vec<u8>>,
    /// `context` (then `trim`'s) as one chunk, made again when either changes.
    chunk: Option<Arc<Chunk>>,
    /// The entries of the first record read that precede the suffix.
    trim: Option<Trim>,
}

/// The entries of a suffix's first record that precede the suffix (the start of its
/// [`CONTEXT_UNITS`]th unit before the last): they are read only as context. Kept between
/// polls, so that as the suffix's start moves on within the record, only the entries
/// between the old start and the new one are looked at again.
#[derive(Default)]
struct Trim {
    /// The record.
    key: RecordKey,
    /// The suffix begins at the record's first entry at or after this TSC.
    from_tsc: u64,
    /// That entry's offset in the record's data.
    at: usize,
    /// What the entries before it say that later entries need
    /// ([`reader::tracedir::kept_before`]).
    kept: Vec<u8>,
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

impl Watcher {
    /// A watch of `dirs` against `model`.
    pub fn new(model: Model, dirs: Vec<PathBuf>, opts: WatchOptions) -> Watcher {
        Watcher {
            model,
            dirs,
            opts,
            reported: HashSet::new(),
            threads: HashMap::new(),
            numbers: HashMap::new(),
            holes: HashMap::new(),
            folds: fold::Folds::default(),
            timing: timing::Timing::default(),
            after_stop: 0,
        }
    }

    /// Units reported so far.
    pub fn reported(&self) -> usize {
        self.reported.len()
    }

    /// The folds: units with no model counted in the report of the first one of their
    /// process or connection kind ([`fold`]).
    pub fn folds(&self) -> &fold::Folds {
        &self.folds
    }

    /// Where the delays of the units found complete went so far ([`timing`]).
    pub fn timing(&self) -> &timing::Timing {
        &self.timing
    }

    /// Units above the threshold not reported because they ended after their recording
    /// was asked to stop ([`reader::stopmark`]).
    pub fn after_stop(&self) -> u64 {
        self.after_stop
    }

    /// Ranks what the directories hold now and returns the units not reported before.
    /// A directory that is not (yet) a trace is an error the caller may wait out.
    pub fn poll(&mut self) -> Result<Poll> {
        let (threads, holes) = (&mut self.threads, &mut self.holes);
        let incremental = self.opts.incremental;
        let now = Instant::now();
        let mut times = PollTimes {
            start: now_ns(),
            ..Default::default()
        };
        let mut seen = HashSet::new();
        let mut finished_dirs = HashSet::new();
        let set = TraceSet::open_suffixes(&self.dirs, true, &mut |d, t| {
            if t.manifest().complete {
                finished_dirs.insert(d.to_path_buf());
            }
            let contexts = if incremental {
                suffixes(threads, d, t)
            } else {
                Default::default()
            };
            cut_holes(holes, &mut seen, now, d, t);
            contexts
        });
        // Holes not seen this time were filled (or rotated away).
        holes.retain(|k, _| seen.contains(k));
        let set = set?;
        let processes = set.processes.len();
        if processes == 0 {
            return Ok(Poll::default());
        }
        times.read = now.elapsed().as_nanos() as i64;
        let rep = crate::rank(&self.model, &set, &self.opts.rank)?;
        times.rank = now.elapsed().as_nanos() as i64 - times.read;
        self.timing.poll(times);
        let mut poll = Poll {
            units: rep.len(),
            processes,
            ..Default::default()
        };
        // Per host, pid and thread: its units (index, start, cut at start), in order.
        let mut heads = rep.heads();
        heads.sort_unstable_by(|a, b| {
            (a.host, a.pid, a.tid, a.tsc_start).cmp(&(b.host, b.pid, b.tid, b.tsc_start))
        });
        let stops = stop_marks(&set);
        // Per thread (its units in order): the units found complete for the first time,
        // and the stages of their delays; the units as `number` takes them.
        let mut stages = HashMap::new();
        let mut waiting = HashSet::new();
        let finished: HashSet<(&str, u32)> = set
            .processes
            .iter()
            .filter(|p| finished_dirs.contains(&p.recording.dir))
            .map(|p| (p.host.as_str(), p.pid))
            .collect();
        let mut threads: ThreadUnits = HashMap::new();
        let mut rest = &heads[..];
        while let Some(h0) = rest.first() {
            let thread = (h0.host, h0.pid, h0.tid);
            let n = rest.partition_point(|h| (h.host, h.pid, h.tid) == thread);
            let (units, after) = rest.split_at(n);
            rest = after;
            let key = (h0.host.to_string(), h0.pid, h0.tid);
            let mut until = self.timing.complete_until(&key);
            for (i, h) in units.iter().enumerate() {
                if h.cut || h.cut_at_start || until.is_some_and(|u| h.tsc_start <= u) {
                    continue;
                }
                let next = units.get(i + 1).map(|n| n.t_start_unix_ns);
                if next.is_none()
                    && !finished.contains(&(h.host, h.pid))
                    && times.start - h.t_end_unix_ns < LAST_UNIT_GRACE.as_nanos() as i64
                {
                    // Its thread's last unit, just ended: not known complete yet.
                    waiting.insert((h.pid, h.tid, h.tsc_start));
                    continue;
                }
                until = Some(h.tsc_start);
                let s = self.timing.stages(&times, h.t_end_unix_ns, next);
                self.timing.unit(&s);
                if h.score >= self.opts.threshold {
                    stages.insert((h.pid, h.tid, h.tsc_start), s);
                }
            }
            if let Some(u) = until {
                self.timing.set_complete_until(key.clone(), u);
            }
            threads.insert(
                key,
                units
                    .iter()
                    .map(|h| (h.index, h.tsc_start, h.cut_at_start))
                    .collect(),
            );
        }
        drop(heads);
        self.number(&set, &mut threads);
        for u in rep.iter() {
            if u.score < self.opts.threshold {
                // Ranked highest first: nothing below is above the threshold.
                break;
            }
            if u.info.cut {
                continue;
            }
            let key = (
                u.info.host.clone(),
                u.info.pid,
                u.info.tid,
                u.info.tsc_start,
            );
            if self.reported.contains(&key) || waiting.contains(&(key.1, key.2, key.3)) {
                continue;
            }
            if let Some(stop) = stops.get(&(u.info.host.clone(), u.info.pid)) {
                if u.info.t_end_unix_ns >= stop.unix_ns {
                    // The recording is ending: its programs are being stopped.
                    self.reported.insert(key);
                    self.after_stop += 1;
                    continue;
                }
            }
            let offset = self
                .numbers
                .get(&(u.info.host.clone(), u.info.pid, u.info.tid))
                .map_or(0, |n| n.offset);
            let id = crate::units::unit_id(
                &u.info.host,
                u.info.pid,
                u.info.tid,
                (i64::from(u.info.index) + offset).max(0) as u32,
            );
            let folded = match self.folds.fold(&u, &id) {
                fold::Decision::Own => None,
                fold::Decision::First => Some(fold::sentence(match u.verdict {
                    crate::score::Verdict::NoProcessGroup => "process",
                    crate::score::Verdict::NoUnitModel => "connection",
                    _ => "repeat",
                })),
                fold::Decision::Folded | fold::Decision::Seen => continue,
            };
            let delay = stages
                .get(&(key.1, key.2, key.3))
                .copied()
                .unwrap_or_else(|| {
                    // Found complete by an earlier poll (ranked again by `--whole`).
                    self.timing.stages(&times, u.info.t_end_unix_ns, None)
                });
            self.reported.insert(key);
            let reported_unix_ns = now_ns();
            let mut json = rep.unit_json(&u);
            json["reported_unix_ns"] = serde_json::json!(reported_unix_ns);
            json["delay_ns"] = delay.json();
            json["id"] = serde_json::json!(id);
            if let Some(f) = &folded {
                json["fold"] = serde_json::json!(f);
            }
            let text = format!(
                "{:.3} {} {} {}{}",
                u.score,
                id,
                u.info.kind.name(),
                json["why"].get(0).and_then(|w| w.as_str()).unwrap_or(""),
                if folded.is_some() {
                    " (later units like it are counted here, not reported)"
                } else {
                    ""
                }
            );
            poll.alerts.push(Alert {
                json,
                text,
                end_unix_ns: u.info.t_end_unix_ns,
                reported_unix_ns,
            });
        }
        if self.opts.incremental {
            self.advance(&set, &threads)?;
        }
        Ok(poll)
    }

    /// Numbers the units of each thread the watch reads a suffix of as a reading of the
    /// whole thread would: the first unit after the suffix's first (cut at its start)
    /// began where a unit of the previous poll began, whose number is known.
    fn number(&mut self, set: &TraceSet, threads: &mut ThreadUnits) {
        for p in &set.processes {
            for t in &p.threads {
                let key = (p.host.clone(), p.pid, t.tid);
                let Some(units) = threads.get_mut(&key) else {
                    continue;
                };
                units.sort_unstable();
                let n = self.numbers.entry(key).or_default();
                if matches!(t.source, ThreadSource::Suffix { .. }) {
                    if let Some(off) = units
                        .iter()
                        .filter(|u| !u.2)
                        .find_map(|u| n.at.get(&u.1).map(|&i| i64::from(i) - i64::from(u.0)))
                    {
                        n.offset = off;
                    }
                } else {
                    n.offset = 0;
                }
                n.at = units
                    .iter()
                    .map(|u| (u.1, (i64::from(u.0) + n.offset).max(0) as u32))
                    .collect();
            }
        }
    }

    /// Moves each thread's suffix up to the start of the [`CONTEXT_UNITS`]th unit before
    /// its last: the records wholly before it are left out ([`suffix_start`]), keeping
    /// what they say; of the entries before it in the first record kept, what they say
    /// is kept too ([`Trim`]), and the suffix reads that record from there on
    /// ([`ThreadSource::Suffix`]'s `skip`).
    fn advance(&mut self, set: &TraceSet, threads: &ThreadUnits) -> Result<()> {
        // Per host, pid and thread: where its suffix begins next.
        let last: HashMap<&(String, u32, u32), u64> = threads
            .iter()
            .filter_map(|(k, v)| context_start(v).map(|m| (k, m)))
            .collect();
        for p in &set.processes {
            for t in &p.threads {
                let (dir, key) = match &t.source {
                    ThreadSource::Dir { dir, key } | ThreadSource::Suffix { dir, key, .. } => {
                        (dir, *key)
                    }
                    _ => continue,
                };
                let Some(&start) = last.get(&(p.host.clone(), p.pid, t.tid)) else {
                    continue;
                };
                let ids = dir.record_ids(key);
                let after = suffix_start(&ids, start);
                let st = self
                    .threads
                    .entry((dir.path().to_path_buf(), key))
                    .or_default();
                if st.after.is_none() && after.is_none() {
                    // Nothing left out yet: the thread is read whole (from its beginning).
                    continue;
                }
                if let Some(after) = after.filter(|&a| st.after.is_none_or(|s| s < a)) {
                    let (from, context, trim) = (st.after, &mut st.context, &st.trim);
                    let mut changed = false;
                    dir.visit_chunks_where(
                        key,
                        |info, piece| {
                            let k = reader::rotated::record_key(info, piece);
                            info.flags & bufpool::layout::FLAG_COMPACTED == 0
                                && k <= after
                                && from.is_none_or(|f| k > f)
                        },
                        |c| {
                            let k = reader::rotated::record_key(c.info, c.piece);
                            // The suffix's first record: what its entries before `trim.at`
                            // keep was found already.
                            let (mut kept, at) = match trim {
                                Some(t) if t.key == k => (t.kept.clone(), t.at),
                                _ => (Vec::new(), 0),
                            };
                            let data = &c.data[at.min(c.data.len())..];
                            reader::tracedir::kept_before(data, u64::MAX, &mut kept);
                            if !kept.is_empty() {
                                context.insert(k, kept);
                                changed = true;
                            }
                            Ok::<(), reader::Error>(())
                        },
                    )
                    .map_err(crate::Error::Reader)?;
                    st.after = Some(after);
                    if changed {
                        st.chunk = None;
                    }
                }
                // The first record the suffix keeps, and its entries before `start`.
                let Some(after) = st.after else { continue };
                let Some(first) = ids
                    .iter()
                    .find(|r| !r.compacted && r.key > after)
                    .map(|r| r.key)
                else {
                    continue;
                };
                let mut trim = match st.trim.take() {
                    Some(t) if t.key == first && t.from_tsc >= start => {
                        st.trim = Some(t);
                        continue;
                    }
                    Some(t) if t.key == first => t,
                    _ => Trim {
                        key: first,
                        ..Default::default()
                    },
                };
                dir.visit_chunks_where(
                    key,
                    |info, piece| reader::rotated::record_key(info, piece) == first,
                    |c| {
                        let from = trim.at.min(c.data.len());
                        let n =
                            reader::tracedir::kept_before(&c.data[from..], start, &mut trim.kept);
                        trim.at = from + n;
                        Ok::<(), reader::Error>(())
                    },
                )
                .map_err(crate::Error::Reader)?;
                trim.from_tsc = start;
                st.trim = Some(trim);
                st.chunk = None;
            }
        }
        Ok(())
    }
}

/// What the files under `dirs` are (names, sizes, modification times, three levels
/// deep), as one number: a watch that finds the same number as on its last poll has
/// nothing new to rank. An unreadable directory counts as empty.
pub fn fingerprint(dirs: &[PathBuf]) -> u64 {
    use std::hash::{Hash, Hasher};
    fn walk(d: &Path, depth: u32, h: &mut impl Hasher) {
        let Ok(rd) = std::fs::read_dir(d) else {
            return;
        };
        let mut ents: Vec<_> = rd.flatten().collect();
        ents.sort_by_key(|e| e.file_name());
        for e in ents {
            let Ok(m) = e.metadata() else { continue };
            e.file_name().hash(h);
            if m.is_dir() {
                if depth > 0 {
                    walk(&e.path(), depth - 1, h);
                }
                continue;
            }
            m.len().hash(h);
            m.modified().ok().hash(h);
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for d in dirs {
        d.hash(&mut h);
        walk(d, 2, &mut h);
    }
    h.finish()
}

/// Per host and pid: when the recording the process was read from was asked to stop
/// (`stop.json`, [`reader::stopmark`]), for the processes of recordings that were.
fn stop_marks(set: &TraceSet) -> HashMap<(String, u32), reader::stopmark::StopMark> {
    let mut dirs: HashMap<&Path, Option<reader::stopmark::StopMark>> = HashMap::new();
    let mut out = HashMap::new();
    for p in &set.processes {
        let dir = p.recording.dir.as_path();
        let mark = *dirs
            .entry(dir)
            .or_insert_with(|| reader::stopmark::read(dir));
        if let Some(m) = mark {
            out.insert((p.host.clone(), p.pid), m);
        }
    }
    out
}

/// How many units before its last one a thread's suffix begins with: the units the
/// scan of a suffix finds the thread's event loop in, besides what was written since (a
/// redis server's loop iteration writes a few hundred bytes). They were scored on earlier
/// polls; the first is cut at its start, the second numbers the suffix
/// (`Watcher::number`).
pub const CONTEXT_UNITS: usize = 128;

/// Where a thread's next suffix begins, given its units of this poll (index, start TSC,
/// cut at start): the start of the [`CONTEXT_UNITS`]th unit before its last, or of its
/// first unit not cut at its start when it has fewer (`None`: it has none).
fn context_start(units: &[(u32, u64, bool)]) -> Option<u64> {
    let mut starts: Vec<u64> = units.iter().filter(|u| !u.2).map(|u| u.1).collect();
    starts.sort_unstable();
    let i = starts.len().saturating_sub(CONTEXT_UNITS + 1);
    starts.get(i).copied()
}

/// The key up to which a thread's records (`ids`, in order) can be left out when its
/// suffix begins at TSC `start` (`None`: nothing to leave out): the record before the
/// first that may hold an entry at or after `start` — the sub-buffer holding `start`
/// (the last whose first TSC is not later), or of its pieces the first whose last TSC is
/// not known to be earlier ([`reader::tracedir::RecordId::last_tsc`]).
fn suffix_start(ids: &[reader::tracedir::RecordId], start: u64) -> Option<RecordKey> {
    let recs: Vec<&reader::tracedir::RecordId> = ids.iter().filter(|r| !r.compacted).collect();
    let i = recs.iter().rposition(|r| r.key.0 <= start)?;
    // The first piece of the sub-buffer (first TSC, seq) of record `i`.
    let sub = |r: &reader::tracedir::RecordId| (r.key.0, r.key.1);
    let mut j = i;
    while j > 0 && sub(recs[j - 1]) == sub(recs[i]) {
        j -= 1;
    }
    // Its pieces that end before `start`.
    while j < i && recs[j].last_tsc >= recs[j].key.0 && recs[j].last_tsc < start {
        j += 1;
    }
    Some(recs[j.checked_sub(1)?].key)
}

/// Leaves out of directory `t` (at `d`), unless its recording finished, what follows
/// each thread's first hole that was first seen less than [`HOLE_PATIENCE`] before `now`
/// (older holes are losses, read past). Notes in `seen` the holes found.
fn cut_holes(
    holes: &mut Holes,
    seen: &mut HashSet<(PathBuf, ThreadKey, RecordKey)>,
    now: Instant,
    d: &Path,
    t: &mut reader::TraceDir,
) {
    if t.manifest().complete {
        return;
    }
    let mut cut = BTreeMap::new();
    let keys: Vec<ThreadKey> = t.threads().collect();
    for key in keys {
        for at in t.holes(key) {
            let id = (d.to_path_buf(), key, at);
            let since = *holes.entry(id.clone()).or_insert(now);
            seen.insert(id);
            if now.duration_since(since) < HOLE_PATIENCE {
                cut.entry(key).or_insert(at);
            }
        }
    }
    t.cut_from(&cut);
}

/// Restricts directory `t` (at `d`) to each thread's suffix and gives each restricted
/// thread what its left-out records said. What a flight recorder rotated away since is in
/// its compacted records now: dropped from what the watch keeps.
fn suffixes(
    threads: &mut HashMap<(PathBuf, ThreadKey), ThreadState>,
    d: &Path,
    t: &mut reader::TraceDir,
) -> Contexts {
    let windows = t.rotated().map(|r| r.windows()).unwrap_or_default();
    let mut after = BTreeMap::new();
    let mut contexts = Contexts::new();
    for ((dir, key), st) in threads.iter_mut() {
        if dir != d {
            continue;
        }
        let Some(a) = st.after else { continue };
        if let Some(until) = windows.get(key) {
            let before = st.context.len();
            st.context.retain(|k, _| k > until);
            if st.trim.as_ref().is_some_and(|t| t.key <= *until) {
                st.trim = None;
            }
            if st.context.len() != before || st.trim.is_none() {
                st.chunk = None;
            }
        }
        after.insert(*key, a);
        let trim = &st.trim;
        let chunk = st.chunk.get_or_insert_with(|| {
            let mut bytes: Vec<u8> = st.context.values().flatten().copied().collect();
            bytes.extend(trim.iter().flat_map(|t| &t.kept));
            Arc::new(Chunk {
                lost_before: 0,
                name: Arc::new(d.join("(what culprit watch read before)")),
                bytes: Arc::new(bytes),
            })
        });
        contexts.insert(*key, (chunk.clone(), trim.as_ref().map(|t| (t.key, t.at))));
    }
    t.restrict(&after);
    contexts
}

#[cfg(test)]
mod tests {
    use super::{context_start, suffix_start, CONTEXT_UNITS};
    use reader::tracedir::RecordId;

    /// Records (key, last TSC).
    fn ids(recs: &[((u64, u64, u32), u64)]) -> Vec<RecordId> {
        recs.iter()
            .map(|&(key, last_tsc)| RecordId {
                key,
                compacted: false,
                last_tsc,
            })
            .collect()
    }

    #[test]
    fn a_suffix_leaves_out_the_sub_buffers_before_its_start() {
        // Whole sub-buffers (first TSC, seq): (10,1) .. (40,4), each ending before the
        // next begins.
        let whole = |t: u64, s: u64| ((t, s, 0), t + 9);
        let r = ids(&[whole(10, 1), whole(20, 2), whole(30, 3), whole(40, 4)]);
        assert_eq!(suffix_start(&r, 45), Some((30, 3, 0)));
        assert_eq!(suffix_start(&r, 35), Some((20, 2, 0)));
        assert_eq!(suffix_start(&r, 15), None);
        assert_eq!(suffix_start(&r, 5), None);
        // Compacted records (a flight recorder's) are never the boundary.
        let mut c = r.clone();
        c[0].compacted = true;
        assert_eq!(suffix_start(&c, 25), None);
        assert_eq!(suffix_start(&c, 35), Some((20, 2, 0)));
    }

    #[test]
    fn a_suffix_begins_at_the_piece_that_holds_its_start() {
        // Sub-buffer (10,1) whole, then (20,2) in live pieces at 0, 100, 200, 300 (last
        // TSCs 24, 26, 28, 29) and its rest at 400 (published at 31).
        let mut v = vec![((10, 1, 0), 19)];
        for (k, last) in [(0, 24), (100, 26), (200, 28), (300, 29)] {
            v.push(((20, 2, k), last));
        }
        v.push(((20, 2, 400), 31));
        let r = ids(&v);
        assert_eq!(suffix_start(&r, 27), Some((20, 2, 100)));
        assert_eq!(suffix_start(&r, 30), Some((20, 2, 300)));
        assert_eq!(suffix_start(&r, 22), Some((10, 1, 0)));
        // A piece whose last TSC is unknown (less than its first) may hold any entry.
        let mut u = v.clone();
        u[2].1 = 0;
        assert_eq!(suffix_start(&ids(&u), 30), Some((20, 2, 0)));
    }

    #[test]
    fn the_context_is_the_units_before_the_last() {
        let n = CONTEXT_UNITS as u64;
        // The first unit cut at its start (a suffix's), then units starting at 10, 20, ...
        let mut units = vec![(0, 5, true)];
        units.extend((1..=n + 10).map(|i| (i as u32, i * 10, false)));
        // The last starts at (n + 10) * 10: the context begins n units before it.
        assert_eq!(context_start(&units), Some(100));
        // Fewer units: from the first not cut at its start.
        assert_eq!(context_start(&units[..5]), Some(10));
        assert_eq!(context_start(&units[..1]), None);
    }
}
