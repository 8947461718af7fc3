//! The **run index** (`culprit rank --write-index FILE`): every trace directory of a run,
//! its host, the clock its times are converted by and the processes it holds, made once
//! so that each shard of `culprit rank --shard K/N --index FILE` reads a small file
//! instead of finding every directory and reading every manifest of the run.
//!
//! What it holds is exactly what [`TraceSet::open_selected`] works out from the manifests
//! (the processes named in the order one [`TraceSet::open`] lists them, each recording's
//! clock chosen from all the manifests by `super::clock`), so a shard that opens its hosts
//! from the index converts and numbers them as one `culprit rank --no-messages` over every
//! directory does. A shard still checks that the records of each directory it opens hold
//! the processes the index lists.
//!
//! **Layout** (little-endian): `CULPRIDX` (8 bytes), version `u32` ([`INDEX_VERSION`]),
//! body length `u64`, the body, then the CRC-32 (IEEE) of the body (`u32`). The body: the
//! number of hosts `u32` and each host's name (bytes, `u32` length first), each once; the
//! number of recordings `u32`; per recording its directory (bytes, `u32` length first),
//! its host (`u32`, an index in the hosts), its calibration (six `u64`: `tsc0`,
//! `realtime0_ns`, `monotonic0_ns`, `tsc1`, `realtime1_ns`, `monotonic1_ns`) and its
//! processes (`u32` count, then per process `pid` `u32` and `start_ticks` `u64`, sorted).
//! Version 2 (this layout); version 1 named each recording's host in full and ended with
//! an FNV checksum. The merge of the shards checks that their parts name one run (a hash
//! of every process: `crate::partial`), whether they were ranked from an index or not.

use super::load::{host_of, open_dir, process_threads, TraceSet};
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
pub const INDEX_VERSION: u32 = 2;

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
    /// The CRC-32 of the encoded body.
    pub checksum: u32,
}

impl RunIndex {
    /// Indexes the run under `dirs`: the processes of each directory from its manifest
    /// (from its records where the manifest is missing, damaged or not final), the clocks
    /// from all the manifests.
    pub fn build(dirs: &[PathBuf], quiet: bool) -> Result<RunIndex> {
        let named = Named::find(dirs, quiet)?;
        let mut index = RunIndex {
            recordings: named
                .found
                .into_iter()
                .zip(named.hosts)
                .zip(named.clocks)
                .zip(named.ids)
                .map(|(((dir, host), calib), processes)| IndexedRecording {
                    dir,
                    host,
                    calib,
                    processes,
                })
                .collect(),
            checksum: 0,
        };
        index.checksum = crc32fast::hash(&index.body());
        Ok(index)
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

    /// Opens the directories of the hosts `choose` picks from the run's processes, each
    /// converted by its indexed clock. `path` (the index file) is named in errors: a
    /// directory that is gone, or whose records hold other processes than the index lists.
    pub fn open_selected(
        &self,
        path: &Path,
        quiet: bool,
        choose: impl FnOnce(&[ProcId]) -> BTreeSet<String>,
    ) -> Result<Selected> {
        let all = self.processes();
        let hosts = choose(&all);
        let mut set = TraceSet::default();
        let mut opened = 0;
        for r in &self.recordings {
            if !hosts.contains(&r.host) {
                continue;
            }
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
            set.add_recording(&dir, &r.dir, r.calib);
            opened += 1;
        }
        Ok(Selected {
            set,
            all,
            recordings: self.recordings.len(),
            opened,
        })
    }

    fn body(&self) -> Vec<u8> {
        let mut hosts: Vec<&str> = Vec::new();
        let mut host_of: std::collections::HashMap<&str, u32> = Default::default();
        for r in &self.recordings {
            host_of.entry(&r.host).or_insert_with(|| {
                hosts.push(&r.host);
                hosts.len() as u32 - 1
            });
        }
        let mut b = Vec::new();
        put_u32(&mut b, hosts.len() as u32);
        for h in &hosts {
            put_bytes(&mut b, h.as_bytes());
        }
        put_u32(&mut b, self.recordings.len() as u32);
        for r in &self.recordings {
            put_bytes(&mut b, r.dir.as_os_str().as_bytes());
            put_u32(&mut b, host_of[r.host.as_str()]);
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
        b
    }

    /// The encoded file.
    pub fn encode(&self) -> Vec<u8> {
        let body = self.body();
        let mut out = Vec::with_capacity(body.len() + 24);
        out.extend_from_slice(INDEX_MAGIC);
        put_u32(&mut out, INDEX_VERSION);
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&body);
        put_u32(&mut out, crc32fast::hash(&body));
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

    /// Reads and checks an index file (every error names it).
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

    /// Decodes an index file's bytes.
    pub fn decode(bytes: &[u8]) -> std::result::Result<RunIndex, String> {
        let mut r = Reader { b: bytes, at: 0 };
        if r.take(8).ok() != Some(INDEX_MAGIC.as_slice()) {
            return Err("it does not begin with CULPRIDX".into());
        }
        let version = r.u32()?;
        if version != INDEX_VERSION {
            return Err(format!(
                "version {version}, this culprit reads version {INDEX_VERSION}"
            ));
        }
        let len = r.u64()?;
        let body_at = r.at;
        if (bytes.len() - body_at) as u64 != len.saturating_add(4) {
            return Err(format!(
                "its body is said to be {len} bytes, the file holds {} after the header \
                 (cut short or appended to)",
                bytes.len() - body_at
            ));
        }
        let body = &bytes[body_at..body_at + len as usize];
        let mut tail = Reader {
            b: bytes,
            at: body_at + len as usize,
        };
        let sum = tail.u32()?;
        let checksum = crc32fast::hash(body);
        if sum != checksum {
            return Err("its checksum does not match its contents (damaged)".into());
        }
        let mut r = Reader { b: body, at: 0 };
        let n = r.u32()? as usize;
        let mut hosts = Vec::with_capacity(n.min(body.len() / 4));
        for i in 0..n {
            hosts.push(r.string(i, "host")?);
        }
        let n = r.u32()? as usize;
        let mut recordings = Vec::with_capacity(n.min(body.len() / 64 + 1));
        let mut dirs: crate::hash::FxSet<&[u8]> = Default::default();
        for i in 0..n {
            let n = r.u32()? as usize;
            let raw = r.take(n)?;
            let dir = PathBuf::from(std::ffi::OsString::from_vec(raw.to_vec()));
            let h = r.u32()? as usize;
            let Some(host) = hosts.get(h).cloned() else {
                return Err(format!(
                    "recording {i} ({}): host {h} of {}",
                    dir.display(),
                    hosts.len()
                ));
            };
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
                return Err(format!("recording {i}: {np} processes, past the end"));
            }
            let mut processes = Vec::with_capacity(np);
            for _ in 0..np {
                processes.push((r.u32()?, r.u64()?));
            }
            if processes.windows(2).any(|w| w[0] >= w[1]) {
                return Err(format!(
                    "recording {i} ({}): processes not sorted",
                    dir.display()
                ));
            }
            if !dirs.insert(raw) {
                return Err(format!("recording {i} ({}): listed twice", dir.display()));
            }
            recordings.push(IndexedRecording {
                dir,
                host,
                calib,
                processes,
            });
        }
        if r.at != body.len() {
            return Err(format!(
                "{} bytes after the last recording",
                body.len() - r.at
            ));
        }
        Ok(RunIndex {
            recordings,
            checksum,
        })
    }
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
