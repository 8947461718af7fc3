//! `manifest.json`: what a trace directory holds, in JSON (the schema is owned here; the
//! rest of the on-disk layout by `bufpool::disk`).
//!
//! Written when a reader starts (`complete: false`) and rewritten atomically — written to
//! `manifest.json.tmp`, then renamed — when it finishes, with the per-process information
//! and totals computed from the chunk files themselves (deduplicated), so the numbers are
//! right even when several readers, or a killed and restarted reader, wrote the directory.

use crate::error::{Error, Result};
use bufpool::Calibration;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Value of [`Manifest::format`].
pub const MANIFEST_FORMAT: &str = "culprit-trace";
/// Value of [`Manifest::version`].
pub const MANIFEST_VERSION: u32 = 1;

/// The manifest of a trace directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`MANIFEST_FORMAT`].
    pub format: String,
    /// [`MANIFEST_VERSION`].
    pub version: u32,
    /// Host the pool was created on.
    pub host: String,
    /// The boot of that host (`/proc/sys/kernel/random/boot_id`): recordings with one boot
    /// id read one TSC ("" in traces made before it was recorded).
    #[serde(default)]
    pub boot_id: String,
    /// The recorder's network namespace (`/proc/self/ns/net`, e.g. `net:[4026531840]`):
    /// with the boot id, where loopback addresses and UNIX sockets are one ("" if unknown).
    #[serde(default)]
    pub net_ns: String,
    /// The Slurm task that recorded it (`SLURM_JOB_ID`, `SLURM_STEP_ID`, `SLURM_PROCID`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmTask>,
    /// The recorded command (empty for a standalone reader).
    pub command: Vec<String>,
    /// When recording started (`CLOCK_REALTIME` ns).
    pub start_unix_ns: u64,
    /// When the last reader finished, if one did.
    pub end_unix_ns: Option<u64>,
    /// True once a reader finished and wrote the totals.
    pub complete: bool,
    /// TSC ↔ clock calibration of the pool (converts entry timestamps to wall time).
    pub calibration: CalibrationJson,
    /// TSC against both clocks at the start, every second and at the end of recording
    /// (`crate::clocksnap`), in TSC order; empty in traces made before they were recorded.
    #[serde(default)]
    pub clock_snapshots: Vec<ClockSnapshot>,
    /// Geometry of the pool.
    pub pool: PoolGeometry,
    /// Every process seen in the trace, by pid then start time.
    pub processes: Vec<ProcessInfo>,
    /// Totals over the directory.
    pub totals: Totals,
    /// Set in a copy made by `culprit snapshot` (or SIGUSR1) while the recording ran:
    /// when (`CLOCK_REALTIME` ns). Such a copy is incomplete by design.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_unix_ns: Option<u64>,
}

/// [`bufpool::Calibration`] in JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CalibrationJson {
    /// TSC at the first reading.
    pub tsc0: u64,
    /// `CLOCK_REALTIME` ns at the first reading.
    pub realtime0_ns: u64,
    /// `CLOCK_MONOTONIC` ns at the first reading.
    pub monotonic0_ns: u64,
    /// TSC at the second reading.
    pub tsc1: u64,
    /// `CLOCK_REALTIME` ns at the second reading.
    pub realtime1_ns: u64,
    /// `CLOCK_MONOTONIC` ns at the second reading.
    pub monotonic1_ns: u64,
}

impl From<Calibration> for CalibrationJson {
    fn from(c: Calibration) -> Self {
        CalibrationJson {
            tsc0: c.tsc0,
            realtime0_ns: c.realtime0_ns,
            monotonic0_ns: c.monotonic0_ns,
            tsc1: c.tsc1,
            realtime1_ns: c.realtime1_ns,
            monotonic1_ns: c.monotonic1_ns,
        }
    }
}

impl From<CalibrationJson> for Calibration {
    fn from(c: CalibrationJson) -> Self {
        Calibration {
            tsc0: c.tsc0,
            realtime0_ns: c.realtime0_ns,
            monotonic0_ns: c.monotonic0_ns,
            tsc1: c.tsc1,
            realtime1_ns: c.realtime1_ns,
            monotonic1_ns: c.monotonic1_ns,
        }
    }
}

/// The TSC and both clocks read at one moment ([`crate::clocksnap::take`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockSnapshot {
    /// TSC (the middle of the two reads around the clock reads).
    pub tsc: u64,
    /// `CLOCK_REALTIME`, ns.
    pub realtime_ns: u64,
    /// `CLOCK_MONOTONIC`, ns.
    pub monotonic_ns: u64,
    /// TSC ticks between the two reads around the clock reads (the reading's uncertainty).
    pub window_ticks: u64,
}

/// The Slurm task a recording was made by (from its `SLURM_*` environment).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlurmTask {
    /// `SLURM_JOB_ID`.
    pub job: String,
    /// `SLURM_STEP_ID` ("" outside a step).
    pub step: String,
    /// `SLURM_PROCID`, the task's rank in the step.
    pub task: String,
}

impl SlurmTask {
    /// The task of this process's environment, if it runs under Slurm.
    pub fn from_env() -> Option<SlurmTask> {
        let v = |k: &str| std::env::var(k).ok().filter(|s| !s.is_empty());
        Some(SlurmTask {
            job: v("SLURM_JOB_ID")?,
            step: v("SLURM_STEP_ID").unwrap_or_default(),
            task: v("SLURM_PROCID").unwrap_or_default(),
        })
    }

    /// `job.step.task`, the name of the task's directory under its host's.
    pub fn dir_name(&self) -> String {
        format!("{}.{}.{}", self.job, self.step, self.task)
    }
}

/// The pool that was drained.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolGeometry {
    /// Path of the pool file.
    pub path: String,
    /// Number of sub-buffers for entries (`--subbufs`).
    pub n_subbufs: u32,
    /// Sub-buffers of the pool's metadata area, besides those (0 in traces of pools
    /// made before it existed).
    #[serde(default)]
    pub meta_subbufs: u32,
    /// Size of a sub-buffer, header included.
    pub subbuf_size: u32,
    /// Events a writer drops before trying again to get a sub-buffer.
    pub retry_after: u32,
    /// When the pool was created (`CLOCK_REALTIME` ns).
    pub created_unix_ns: u64,
}

/// One traced process.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks since boot (with `pid`, a unique identity).
    pub start_ticks: u64,
    /// Parent pid (0 if no process record was seen).
    pub ppid: u32,
    /// How the tracer first saw it: `start`, `fork`, `exec`, or `unknown`.
    pub origin: String,
    /// Executable (the last one, after any exec), lossily UTF-8.
    pub exe: String,
    /// Command line (the last one), lossily UTF-8.
    pub argv: Vec<String>,
    /// Number of execs recorded.
    pub execs: u32,
    /// Thread ids that wrote entries.
    pub threads: Vec<u32>,
    /// Sub-buffers saved.
    pub subbufs: u64,
    /// Trace entries (metadata records and lost markers excluded).
    pub entries: u64,
    /// Metadata records.
    pub meta_records: u64,
    /// Bytes of entry data.
    pub bytes: u64,
    /// Entries dropped because the pool was full.
    pub lost: u64,
}

/// Totals over a trace directory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Processes.
    pub processes: u64,
    /// Threads.
    pub threads: u64,
    /// Distinct sub-buffers saved.
    pub subbufs: u64,
    /// Of which published by a repair pass after their writer died.
    pub salvaged: u64,
    /// Trace entries.
    pub entries: u64,
    /// Metadata records.
    pub meta_records: u64,
    /// Bytes of entry data.
    pub bytes: u64,
    /// Entries dropped because the pool was full (including `lost_unreported`).
    pub lost: u64,
    /// Of `lost`, drops no thread could write a marker for (counted in the pool header).
    #[serde(default)]
    pub lost_unreported: u64,
    /// Sub-buffers found saved twice (a reader died between saving and releasing).
    pub duplicates: u64,
    /// Records whose entries could not all be decoded.
    pub undecodable: u64,
    /// Times a writer found no free sub-buffer (the pool header's counter). Non-zero
    /// means entries were dropped: counted in `lost` by threads that lived to count them,
    /// uncounted for processes killed before they could (see `bufpool/FORMAT.md`,
    /// "Guarantees").
    #[serde(default)]
    pub acquire_failures: u64,
    /// Metadata records a writer could not keep until a sub-buffer was free (the pool
    /// header's `meta_dropped`; normally 0).
    #[serde(default)]
    pub meta_dropped: u64,
}

impl Manifest {
    /// A fresh, incomplete manifest for a pool.
    pub fn for_pool(pool: &bufpool::Pool, command: Vec<String>, start_unix_ns: u64) -> Manifest {
        let info = pool.info();
        Manifest {
            format: MANIFEST_FORMAT.into(),
            version: MANIFEST_VERSION,
            host: pool.hostname(),
            boot_id: crate::clocksnap::boot_id(),
            net_ns: crate::clocksnap::net_ns(),
            slurm: SlurmTask::from_env(),
            command,
            start_unix_ns,
            end_unix_ns: None,
            complete: false,
            calibration: crate::clocksnap::reported_calibration(info.calib).into(),
            clock_snapshots: Vec::new(),
            pool: PoolGeometry {
                path: pool.path().display().to_string(),
                n_subbufs: info.n_subbufs - info.meta_subbufs,
                meta_subbufs: info.meta_subbufs,
                subbuf_size: info.subbuf_size,
                retry_after: info.retry_after,
                created_unix_ns: info.created_unix_ns,
            },
            processes: Vec::new(),
            totals: Totals::default(),
            snapshot_unix_ns: None,
        }
    }

    /// The calibration as the pool type.
    pub fn calibration(&self) -> Calibration {
        self.calibration.into()
    }

    /// Reads and checks `DIR/manifest.json`.
    pub fn read(dir: &Path) -> Result<Manifest> {
        let path = dir.join(bufpool::disk::MANIFEST_FILE);
        let text = match crate::safefile::read_bounded(&path, crate::safefile::MAX_MANIFEST_BYTES) {
            Ok(t) => t,
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotATrace {
                    path: dir.to_path_buf(),
                    why: format!("no {} in it", bufpool::disk::MANIFEST_FILE),
                })
            }
            Err(e) => return Err(e),
        };
        Self::parse(&path, &text)
    }

    /// Reads `DIR/manifest.json`, or, when it is damaged (empty, cut short, not JSON, a
    /// field missing or of the wrong type, not a regular file, deleted) but `DIR` holds
    /// chunk files, a stand-in for it: the fields of the damaged file that still parse
    /// (host, command, times, calibration, pool), counts unknown and `complete: false`,
    /// with the reason it was needed. The chunk files are the trace; the manifest only
    /// describes them, so losing it must not lose them (`culprit repair DIR` rewrites it
    /// from them). A manifest of another format or version is an error, not damage.
    pub fn read_or_recover(dir: &Path) -> Result<(Manifest, Option<String>)> {
        let path = dir.join(bufpool::disk::MANIFEST_FILE);
        let err = match Self::read(dir) {
            Ok(m) => return Ok((m, None)),
            Err(e) => e,
        };
        let has_chunks = crate::tracedir::chunk_files(dir).is_ok_and(|c| !c.is_empty());
        if !has_chunks {
            return Err(err);
        }
        let text = match &err {
            Error::Manifest { .. } => {
                crate::safefile::read_bounded(&path, crate::safefile::MAX_MANIFEST_BYTES).ok()
            }
            Error::NotATrace { .. }
            | Error::Io { .. }
            | Error::NotRegular { .. }
            | Error::TooLarge { .. } => None,
            _ => return Err(err),
        };
        let value: Option<serde_json::Value> =
            text.as_deref().and_then(|t| serde_json::from_slice(t).ok());
        let field = |k: &str| value.as_ref().and_then(|v| v.get(k)).cloned();
        let format = field("format").and_then(|f| f.as_str().map(str::to_string));
        let version = field("version").and_then(|v| v.as_u64());
        if format.as_deref().is_some_and(|f| f != MANIFEST_FORMAT)
            || version.is_some_and(|v| v != u64::from(MANIFEST_VERSION))
        {
            return Err(err);
        }
        fn get<T: serde::de::DeserializeOwned + Default>(v: Option<serde_json::Value>) -> T {
            v.and_then(|v| serde_json::from_value(v).ok())
                .unwrap_or_default()
        }
        let why = match err {
            Error::NotATrace { .. } => "missing".to_string(),
            e => {
                let t = e.to_string();
                let prefix = format!("{}: ", path.display());
                t.strip_prefix(&prefix).unwrap_or(&t).to_string()
            }
        };
        let m = Manifest {
            format: MANIFEST_FORMAT.into(),
            version: MANIFEST_VERSION,
            host: get(field("host")),
            boot_id: get(field("boot_id")),
            net_ns: get(field("net_ns")),
            slurm: get(field("slurm")),
            clock_snapshots: get(field("clock_snapshots")),
            command: get(field("command")),
            start_unix_ns: get(field("start_unix_ns")),
            end_unix_ns: get(field("end_unix_ns")),
            complete: false,
            calibration: get(field("calibration")),
            pool: get(field("pool")),
            processes: Vec::new(),
            totals: Totals::default(),
            snapshot_unix_ns: get(field("snapshot_unix_ns")),
        };
        Ok((m, Some(why)))
    }

    /// Parses and checks the bytes of a manifest file (`path` names it in errors).
    pub fn parse(path: &Path, text: &[u8]) -> Result<Manifest> {
        let path = path.to_path_buf();
        let m: Manifest = serde_json::from_slice(text).map_err(|e| Error::Manifest {
            path: path.clone(),
            why: e.to_string(),
        })?;
        if m.format != MANIFEST_FORMAT {
            return Err(Error::Manifest {
                path,
                why: format!("format is {:?}, expected {MANIFEST_FORMAT:?}", m.format),
            });
        }
        if m.version != MANIFEST_VERSION {
            return Err(Error::Manifest {
                path,
                why: format!(
                    "version {} (this build reads version {MANIFEST_VERSION})",
                    m.version
                ),
            });
        }
        Ok(m)
    }

    /// Writes `DIR/manifest.json` atomically (temporary file, fsync, rename).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(bufpool::disk::MANIFEST_FILE);
        let mut text = serde_json::to_vec_pretty(self).map_err(|e| Error::Manifest {
            path: path.clone(),
            why: e.to_string(),
        })?;
        text.push(b'\n');
        // Never written through a link planted at the temporary name.
        crate::safefile::write_atomic(dir, bufpool::disk::MANIFEST_FILE, &text)
    }
}
