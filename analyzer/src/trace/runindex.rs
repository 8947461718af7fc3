//! The **run index** (`culprit rank --write-index FILE`): every trace directory of a run,
//! its host, the clock its times are converted by and the processes it holds, made once
//! so that each shard of `culprit rank --shard K/N --index FILE` reads a small part of one
//! file instead of finding every directory and reading every manifest of the run.
//!
//! What it holds is exactly what [`TraceSet::open_selected`] works out from the manifests
//! (the run's outline, [`RunOutline`]: its hosts in ranking order, its size and identity;
//! each process's place in the order one [`TraceSet::open`] lists them; each recording's
//! clock chosen from all the manifests by `super::clock`), so a shard that opens its hosts
//! from the index converts, numbers and names them as one `culprit rank --no-messages` over
//! every directory does. A shard still checks that the records of each directory it opens
//! hold the processes the index lists.
//!
//! **Layout** (little-endian): `CULPRIDX` (8 bytes), version `u32` ([`INDEX_VERSION`]), the
//! head's length `u64`, the **head**, the CRC-32 (IEEE) of the head (`u32`), then one
//! **section** per host, in the head's order. The head: the run's processes `u32`, its
//! identity (`u64`, [`RunOutline::run`]), its recordings `u32`, the number of hosts `u32`,
//! and per host, sorted by name: its name (bytes, `u32` length first), the place of its
//! first process in ranking order `u32`, its processes `u32`, and where its section is —
//! offset from the file's start `u64`, length `u64`, CRC-32 `u32`. A host's section: the
//! number of its recordings `u32`, then per recording, in discovery order, its directory
//! (bytes, `u32` length first), its rank in discovery order among all recordings `u32`,
//! the place of its first process in the order one `TraceSet::open` lists the run's
//! processes `u32`, its calibration (six `u64`: `tsc0`, `realtime0_ns`, `monotonic0_ns`,
//! `tsc1`, `realtime1_ns`, `monotonic1_ns`) and its processes (`u32` count, then per
//! process `pid` `u32` and `start_ticks` `u64`, sorted).
//!
//! A shard reads the head and its own hosts' sections only (each checked by its CRC): what
//! it reads grows with the run's hosts and its own processes, not with the run. Version 3
//! (this layout); version 2 was one body of every recording under one checksum, which
//! every shard read whole; version 1 named each recording's host in full and ended with an
//! FNV checksum. The merge of the shards checks that their parts name one run (the run's
//! identity: `crate::partial`), whether they were ranked from an index or not.

#[cfg(doc)]
use super::load::TraceSet;
use super::load::{host_of, open_dir, process_threads};
use super::outline::{HostSpan, RunOutline};
use super::select::{Named, ProcId, Selected};
use crate::error::{Error, Result};
use bufpool::Calibration;
use std::collections::BTreeSet;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The magic bytes an index file begins with.
pub const INDEX_MAGIC: &[u8; 8] = b"CULPRIDX";
/// The version of the layout this culprit writes and reads.
pub const INDEX_VERSION: u32 = 3;
/// Magic, version and the head's length.
const PREFIX: usize = 20;

/// One trace directory of the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedRecording {
    /// The trace directory.
    pub dir: PathBuf,
    /// Its host, named as `trace::load` names the hosts of a trace directory.
    pub host: String,
    /// The clock its times are converted by.
    pub calib: Calibration,
    /// Its processes (pid, start time), sorted.
    pub processes: Vec<(u32, u64)>,
}

/// A run's index: its recordings in discovery order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunIndex {
    /// The recordings.
    pub recordings: Vec<IndexedRecording>,
}

/// One host's section as the head places it.
struct SectionAt {
    span: HostSpan,
    at: u64,
    len: u64,
    crc: u32,
}

/// A recording as a section holds it.
struct SectionRecording {
    rec: IndexedRecording,
    /// Its rank in discovery order.
    order: u32,
    /// The place of its first process in the order `TraceSet::open` lists them.
    place: u32,
}

impl RunIndex {
    /// Indexes the run under `dirs`: the processes of each directory from its manifest
    /// (from its records where the manifest is missing, damaged or not final), the clocks
    /// from all the manifests. A directory that holds no process is left out: no shard
    /// has anything to rank there.
    pub fn build(dirs: &[PathBuf], quiet: bool) -> Result<RunIndex> {
        let named = Named::find(dirs, quiet)?;
        Ok(RunIndex {
            recordings: named
                .found
                .into_iter()
                .zip(named.hosts)
                .zip(named.clocks)
                .zip(named.ids)
                .filter(|(_, processes)| !processes.is_empty())
                .map(|(((dir, host), calib), processes)| IndexedRecording {
                    dir,
                    host,
                    calib,
                    processes,
                })
                .collect(),
        })
    }

    /// Every process of the run, in the order [`TraceSet::open`] lists them.
    pub fn processes(&self) -> Vec<ProcId> {
        self.recordings
            .iter()
            .flat_map(|r| {
                r.processes.iter().map(|&(pid, start_ticks)| ProcId {
                    host: r.host.clone(),
                    pid,
                    start_ticks,
                })
            })
            .collect()
    }

    /// The run's outline (of the recordings that hold processes).
    pub fn outline(&self) -> RunOutline {
        let recordings = self
            .recordings
            .iter()
            .filter(|r| !r.processes.is_empty())
            .count();
        RunOutline::of(&self.processes(), recordings)
    }

    /// Reads the head of the index file `path` and the sections of the hosts `choose`
    /// picks from the run's outline, and opens their directories, each converted by its
    /// indexed clock. Every error names `path`: a damaged part read, a directory that is
    /// gone, or whose records hold other processes than the index lists.
    pub fn open_selected(
        path: &Path,
        quiet: bool,
        choose: impl FnOnce(&RunOutline) -> BTreeSet<String>,
    ) -> Result<Selected> {
        let bad = |why: String| Error::BadTrace {
            path: path.to_path_buf(),
            why: format!("not a usable run index of `culprit rank --write-index`: {why}"),
        };
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            what: "read run index",
            source,
        };
        let f = reader::safefile::open_regular(path).map_err(Error::Reader)?;
        let size = f.metadata().map_err(io)?.len();
        let (outline, sections) = read_head(&f, size).map_err(|e| match e {
            Read::Io(e) => io(e),
            Read::Bad(why) => bad(why),
        })?;
        let hosts = choose(&outline);
        let mut sel = Selected {
            outline,
            ..Default::default()
        };
        let mut dirs: crate::hash::FxSet<PathBuf> = Default::default();
        for s in sections.iter().filter(|s| hosts.contains(&s.span.host)) {
            let recs = read_section(&f, s, sel.outline.recordings).map_err(|e| match e {
                Read::Io(e) => io(e),
                Read::Bad(why) => bad(why),
            })?;
            for r in recs {
                if !dirs.insert(r.rec.dir.clone()) {
                    return Err(bad(format!("{} listed twice", r.rec.dir.display())));
                }
                sel.add_indexed(path, &r.rec, r.place as u64, quiet)?;
            }
        }
        Ok(sel)
    }

    /// The encoded file (of the recordings that hold processes: [`RunIndex::build`]).
    pub fn encode(&self) -> Vec<u8> {
        let kept: Vec<&IndexedRecording> = self
            .recordings
            .iter()
            .filter(|r| !r.processes.is_empty())
            .collect();
        let outline = self.outline();
        // Each recording's place in the order `TraceSet::open` lists the processes.
        let mut places = Vec::with_capacity(kept.len());
        let mut place = 0u32;
        for r in &kept {
            places.push(place);
            place += r.processes.len() as u32;
        }
        let mut by_host: std::collections::HashMap<&str, Vec<usize>> = Default::default();
        for (i, r) in kept.iter().enumerate() {
            by_host.entry(&r.host).or_default().push(i);
        }
        let mut sections = Vec::with_capacity(outline.hosts.len());
        for h in &outline.hosts {
            let mut b = Vec::new();
            let recs = &by_host[h.host.as_str()];
            put_u32(&mut b, recs.len() as u32);
            for &i in recs {
                let r = kept[i];
                put_bytes(&mut b, r.dir.as_os_str().as_bytes());
                put_u32(&mut b, i as u32);
                put_u32(&mut b, places[i]);
                let c = &r.calib;
                for v in [
                    c.tsc0,
                    c.realtime0_ns,
                    c.monotonic0_ns,
                    c.tsc1,
                    c.realtime1_ns,
                    c.monotonic1_ns,
                ] {
                    b.extend_from_slice(&v.to_le_bytes());
                }
                put_u32(&mut b, r.processes.len() as u32);
                for &(pid, start) in &r.processes {
                    put_u32(&mut b, pid);
                    b.extend_from_slice(&start.to_le_bytes());
                }
            }
            sections.push(b);
        }
        let head_len = 4
            + 8
            + 4
            + 4
            + outline
                .hosts
                .iter()
                .map(|h| 4 + h.host.len() + 4 + 4 + 8 + 8 + 4)
                .sum::<usize>();
        let mut at = (PREFIX + head_len + 4) as u64;
        let mut head = Vec::with_capacity(head_len);
        put_u32(&mut head, outline.total);
        head.extend_from_slice(&outline.run.to_le_bytes());
        put_u32(&mut head, kept.len() as u32);
        put_u32(&mut head, outline.hosts.len() as u32);
        for (h, b) in outline.hosts.iter().zip(&sections) {
            put_bytes(&mut head, h.host.as_bytes());
            put_u32(&mut head, h.first);
            put_u32(&mut head, h.count);
            head.extend_from_slice(&at.to_le_bytes());
            head.extend_from_slice(&(b.len() as u64).to_le_bytes());
            put_u32(&mut head, crc32fast::hash(b));
            at += b.len() as u64;
        }
        debug_assert_eq!(head.len(), head_len);
        let mut out = Vec::with_capacity(at as usize);
        out.extend_from_slice(INDEX_MAGIC);
        put_u32(&mut out, INDEX_VERSION);
        out.extend_from_slice(&(head.len() as u64).to_le_bytes());
        out.extend_from_slice(&head);
        put_u32(&mut out, crc32fast::hash(&head));
        for b in &sections {
            out.extend_from_slice(b);
        }
        out
    }

    /// Writes the index file.
    pub fn save(&self, path: &Path) -> Result<()> {
        std::fs::write(path, self.encode()).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            what: "write run index",
            source,
        })
    }

    /// Reads and checks a whole index file (every error names it).
    pub fn load(path: &Path) -> Result<RunIndex> {
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            what: "read run index",
            source,
        })?;
        Self::decode(&bytes).map_err(|why| Error::BadTrace {
            path: path.to_path_buf(),
            why: format!("not a usable run index of `culprit rank --write-index`: {why}"),
        })
    }

    /// Decodes a whole index file's bytes: every section, the recordings back in
    /// discovery order.
    pub fn decode(bytes: &[u8]) -> std::result::Result<RunIndex, String> {
        let (outline, sections) = read_head(bytes, bytes.len() as u64).map_err(Read::text)?;
        let mut found: Vec<Option<SectionRecording>> =
            (0..outline.recordings).map(|_| None).collect();
        for s in &sections {
            for r in read_section(bytes, s, outline.recordings).map_err(Read::text)? {
                let i = r.order as usize;
                if found[i].is_some() {
                    return Err(format!("recording {i} listed twice"));
                }
                found[i] = Some(r);
            }
        }
        let mut recordings = Vec::with_capacity(found.len());
        let mut place = 0u32;
        for (i, r) in found.into_iter().enumerate() {
            let Some(r) = r else {
                return Err(format!("recording {i} is in no host's section"));
            };
            if r.place != place {
                return Err(format!(
                    "recording {i} ({}): its processes placed at {}, after {place} processes",
                    r.rec.dir.display(),
                    r.place
                ));
            }
            place += r.rec.processes.len() as u32;
            recordings.push(r.rec);
        }
        let index = RunIndex { recordings };
        if index.outline() != outline {
            return Err("its head does not outline the processes of its sections".into());
        }
        Ok(index)
    }
}

impl Selected {
    /// Opens the indexed recording `r` (of the index file `path`), whose first process is
    /// at `place`, checking that its records hold what the index lists.
    fn add_indexed(
        &mut self,
        path: &Path,
        r: &IndexedRecording,
        place: u64,
        quiet: bool,
    ) -> Result<()> {
        let mismatch = |why: String| Error::BadTrace {
            path: path.to_path_buf(),
            why: format!(
                "the run index does not match {}: {why}; write the index again \
                 (`culprit rank --write-index`)",
                r.dir.display()
            ),
        };
        if !r.dir.join("manifest.json").is_file() {
            return Err(mismatch("no trace directory there".into()));
        }
        let dir = Arc::new(open_dir(&r.dir, quiet)?);
        let got: Vec<(u32, u64)> = process_threads(&dir, &Default::default())
            .into_keys()
            .collect();
        let host = host_of(dir.manifest(), &r.dir);
        if host != r.host || got != r.processes {
            return Err(mismatch(format!(
                "its records hold {} processes of host {host}, the index lists {} of host {}",
                got.len(),
                r.processes.len(),
                r.host
            )));
        }
        self.add(&dir, &r.dir, r.calib, place);
        Ok(())
    }
}

/// What reading part of an index gave instead of its contents.
enum Read {
    Io(std::io::Error),
    Bad(String),
}

impl Read {
    fn text(self) -> String {
        match self {
            Read::Io(e) => e.to_string(),
            Read::Bad(why) => why,
        }
    }
}

impl From<String> for Read {
    fn from(why: String) -> Read {
        Read::Bad(why)
    }
}

/// Where an index's bytes come from: a file read at offsets, or the bytes in memory.
trait Source {
    /// `len` bytes at `at`; fewer only at the end of the file.
    fn bytes_at(&self, at: u64, len: usize) -> std::result::Result<Vec<u8>, Read>;
}

impl Source for std::fs::File {
    fn bytes_at(&self, at: u64, len: usize) -> std::result::Result<Vec<u8>, Read> {
        use std::os::unix::fs::FileExt as _;
        let mut b = vec![0; len];
        let mut got = 0;
        while got < len {
            match self.read_at(&mut b[got..], at + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Read::Io(e)),
            }
        }
        b.truncate(got);
        Ok(b)
    }
}

impl Source for [u8] {
    fn bytes_at(&self, at: u64, len: usize) -> std::result::Result<Vec<u8>, Read> {
        let from = (at as usize).min(self.len());
        Ok(self[from..(from + len).min(self.len())].to_vec())
    }
}

/// The head of an index of `size` bytes: the run's outline and where each host's section
/// is, checked against each other and against the file's size.
fn read_head<S: Source + ?Sized>(
    src: &S,
    size: u64,
) -> std::result::Result<(RunOutline, Vec<SectionAt>), Read> {
    let prefix = src.bytes_at(0, PREFIX)?;
    let mut r = Reader { b: &prefix, at: 0 };
    if r.take(8).ok() != Some(INDEX_MAGIC.as_slice()) {
        return Err("it does not begin with CULPRIDX".to_string().into());
    }
    let version = r.u32()?;
    if version != INDEX_VERSION {
        return Err(format!(
            "version {version}, this culprit reads version {INDEX_VERSION}: write the index \
             again with this culprit (`culprit rank --write-index`)"
        )
        .into());
    }
    let len = r.u64()?;
    if len.saturating_add(PREFIX as u64 + 4) > size {
        return Err(format!(
            "its head is said to be {len} bytes, the file holds {} after the prefix \
             (cut short)",
            size - PREFIX as u64
        )
        .into());
    }
    let bytes = src.bytes_at(PREFIX as u64, len as usize + 4)?;
    let (head, sum) = bytes.split_at(len as usize);
    if crc32fast::hash(head).to_le_bytes() != sum {
        return Err(
            "the checksum of its head does not match its contents (damaged)"
                .to_string()
                .into(),
        );
    }
    let mut r = Reader { b: head, at: 0 };
    let total = r.u32()?;
    let run = r.u64()?;
    let recordings = r.u32()? as usize;
    let n = r.u32()? as usize;
    let mut outline = RunOutline {
        hosts: Vec::with_capacity(n.min(head.len() / 32)),
        total,
        run,
        recordings,
    };
    let mut sections = Vec::with_capacity(outline.hosts.capacity());
    let mut next = (PREFIX + head.len() + 4) as u64;
    for i in 0..n {
        let host = r.string(i, "host")?;
        let (first, count) = (r.u32()?, r.u32()?);
        let (at, len, crc) = (r.u64()?, r.u64()?, r.u32()?);
        if let Some(h) = outline.hosts.last() {
            if h.host >= host {
                return Err(format!("host {i} ({host}): hosts not sorted").into());
            }
        }
        let placed = outline.hosts.last().map_or(0, |h| h.first + h.count);
        if first != placed || count == 0 || at != next {
            return Err(format!("host {i} ({host}): its processes or section misplaced").into());
        }
        next = at.saturating_add(len);
        let span = HostSpan { host, first, count };
        outline.hosts.push(span.clone());
        sections.push(SectionAt { span, at, len, crc });
    }
    if r.at != head.len() {
        return Err(format!(
            "{} bytes after the last host of its head",
            head.len() - r.at
        )
        .into());
    }
    let placed = outline.hosts.last().map_or(0, |h| h.first + h.count);
    if placed != total {
        return Err(format!("its hosts hold {placed} processes, its head says {total}").into());
    }
    if next != size {
        return Err(format!(
            "its sections end at byte {next}, the file at {size} (cut short or appended to)"
        )
        .into());
    }
    Ok((outline, sections))
}

/// The recordings of one host's section, checked: by its CRC, and against the head (its
/// host, its processes' count) and the run's `recordings`.
fn read_section<S: Source + ?Sized>(
    src: &S,
    s: &SectionAt,
    recordings: usize,
) -> std::result::Result<Vec<SectionRecording>, Read> {
    let host = &s.span.host;
    let b = src.bytes_at(s.at, s.len as usize)?;
    if b.len() as u64 != s.len {
        return Err(format!("the section of host {host} is cut short").into());
    }
    if crc32fast::hash(&b) != s.crc {
        return Err(format!(
            "the checksum of the section of host {host} does not match its contents (damaged)"
        )
        .into());
    }
    let mut r = Reader { b: &b, at: 0 };
    let n = r.u32()? as usize;
    let mut out = Vec::with_capacity(n.min(b.len() / 64 + 1));
    let mut count = 0u64;
    for i in 0..n {
        let len = r.u32()? as usize;
        let dir = PathBuf::from(std::ffi::OsString::from_vec(r.take(len)?.to_vec()));
        let (order, place) = (r.u32()?, r.u32()?);
        if order as usize >= recordings {
            return Err(format!(
                "host {host}, recording {i} ({}): recording {order} of {recordings}",
                dir.display()
            )
            .into());
        }
        let mut v = [0u64; 6];
        for x in &mut v {
            *x = r.u64()?;
        }
        let calib = Calibration {
            tsc0: v[0],
            realtime0_ns: v[1],
            monotonic0_ns: v[2],
            tsc1: v[3],
            realtime1_ns: v[4],
            monotonic1_ns: v[5],
        };
        let np = r.u32()? as usize;
        if np.saturating_mul(12) > r.b.len() - r.at {
            return Err(format!("host {host}, recording {i}: {np} processes, past the end").into());
        }
        let mut processes = Vec::with_capacity(np);
        for _ in 0..np {
            processes.push((r.u32()?, r.u64()?));
        }
        if processes.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!(
                "host {host}, recording {i} ({}): processes not sorted",
                dir.display()
            )
            .into());
        }
        count += np as u64;
        out.push(SectionRecording {
            rec: IndexedRecording {
                dir,
                host: host.clone(),
                calib,
                processes,
            },
            order,
            place,
        });
    }
    if r.at != b.len() {
        return Err(format!(
            "{} bytes after the last recording of host {host}",
            b.len() - r.at
        )
        .into());
    }
    if count != s.span.count as u64 {
        return Err(format!(
            "host {host}: its section lists {count} processes, the head {}",
            s.span.count
        )
        .into());
    }
    Ok(out)
}

fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(b: &mut Vec<u8>, s: &[u8]) {
    put_u32(b, s.len() as u32);
    b.extend_from_slice(s);
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return Err(format!("cut short at byte {}", self.at));
        };
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> std::result::Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().unwrap_or_default(),
        ))
    }
    fn u64(&mut self) -> std::result::Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().unwrap_or_default(),
        ))
    }
    fn string(&mut self, i: usize, what: &str) -> std::result::Result<String, String> {
        let n = self.u32()? as usize;
        let s = self.take(n)?;
        String::from_utf8(s.to_vec()).map_err(|_| format!("{what} {i} is not UTF-8"))
    }
}
