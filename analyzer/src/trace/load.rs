//! Per-process loading: a [`TraceSet`] opened from trace directories (every record indexed
//! by its header), each process's threads as sequences of chunks, read from disk when
//! decoded or read into memory once ([`ProcessTrace::load`], bounded) for a stage that goes
//! over a process twice.

use crate::error::{Error, Result};
use bufpool::Calibration;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// All the traces one analysis looks at (one or many directories, from several hosts).
#[derive(Clone, Debug, Default)]
pub struct TraceSet {
    /// Processes, in any order (stages sort what they output).
    pub processes: Vec<ProcessTrace>,
}

/// The traces of one process.
#[derive(Clone, Debug)]
pub struct ProcessTrace {
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks (with `pid`, a pid-reuse-proof identity).
    pub start_ticks: u64,
    /// TSC ↔ clock calibration of its clock domain (`super::clock`: one for every
    /// recording of one boot of one host).
    pub calib: Calibration,
    /// The recording it came from.
    pub recording: Arc<Recording>,
    /// Threads, in any order.
    pub threads: Vec<ThreadTrace>,
}

/// Where a process's trace was recorded (empty for hand-built traces).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recording {
    /// The trace directory.
    pub dir: PathBuf,
    /// The host's boot id ("" if not recorded).
    pub boot_id: String,
    /// The recorder's network namespace ("" if not recorded).
    pub net_ns: String,
    /// The Slurm task that recorded it, `job.step.task`, if any.
    pub task: Option<String>,
}

/// The chunks of one thread.
#[derive(Clone, Debug)]
pub struct ThreadTrace {
    /// Thread id.
    pub tid: u32,
    /// Where its chunks are.
    pub source: ThreadSource,
}

/// Where a thread's chunks are.
#[derive(Clone, Debug)]
pub enum ThreadSource {
    /// In memory (hand-built traces), in order.
    Memory(Vec<Chunk>),
    /// In a trace directory, read one chunk at a time (each record's checksum verified
    /// the first time it is read).
    Dir {
        /// The open directory.
        dir: Arc<reader::TraceDir>,
        /// The thread.
        key: reader::ThreadKey,
    },
    /// Read from a trace directory into memory, every record at once (see
    /// [`ProcessTrace::load`]).
    Loaded(Arc<LoadedThread>),
    /// The end of a thread in a trace directory ([`reader::TraceDir::restrict`]), after
    /// `context`: what the records left out said about the process and its descriptors
    /// (`culprit watch`, [`reader::tracedir::kept_entries`]), read before the first record
    /// that is not a flight recorder's compacted one.
    Suffix {
        /// The open (restricted) directory.
        dir: Arc<reader::TraceDir>,
        /// The thread.
        key: reader::ThreadKey,
        /// Entries kept from the records left out.
        context: Arc<Chunk>,
        /// The suffix begins at this offset of the data of this record, if it is its
        /// first (not compacted) record: what the entries before say is at the end of
        /// `context` ([`reader::tracedir::kept_before`]).
        skip: Option<(reader::rotated::RecordKey, usize)>,
    },
}

/// A thread's records, read into one buffer ([`ProcessTrace::load`]).
#[derive(Debug)]
pub struct LoadedThread {
    /// The records, each its fixed part then its data.
    pub(super) bytes: Vec<u8>,
    /// Where each record's data is in `bytes`, in order.
    pub(super) records: Vec<reader::LoadedRecord>,
    /// The directory they were read from (damage found in them is reported there).
    pub(super) dir: Arc<reader::TraceDir>,
    /// The thread.
    pub(super) key: reader::ThreadKey,
}

impl ThreadTrace {
    /// True if a flight recorder rotated entries of this thread away (`rotated.json`):
    /// its trace begins mid-run, at its window ([`reader::rotated`]).
    /// (or `culprit watch` read the records before its suffix on an earlier poll).
    pub fn begins_mid_run(&self) -> bool {
        match &self.source {
            ThreadSource::Dir { dir, key } | ThreadSource::Suffix { dir, key, .. } => {
                dir.begins_mid_run(*key)
            }
            ThreadSource::Loaded(l) => l.dir.begins_mid_run(l.key),
            ThreadSource::Memory(_) => false,
        }
    }
}

impl ProcessTrace {
    /// Where its loopback addresses and UNIX socket names mean the same socket: its boot
    /// and network namespace when recorded (nodes that share a kernel and a network
    /// namespace — containers, or Slurm nodes in UTS namespaces — talk over loopback),
    /// else its host.
    pub fn socket_scope(&self) -> String {
        let r = &self.recording;
        if r.boot_id.is_empty() || r.net_ns.is_empty() {
            self.host.clone()
        } else {
            format!("{}/{}", r.boot_id, r.net_ns)
        }
    }

    /// This process with the records of its threads read from their trace directory into
    /// memory, each read and checked once, for a stage that goes over them more than once
    /// (the two passes of `units`): `None` if they come to more than `max_bytes` (such a
    /// process is read from disk, chunk by chunk, in each pass). Threads already in memory
    /// stay as they are.
    pub fn load(&self, max_bytes: u64) -> Result<Option<ProcessTrace>> {
        let total: u64 = self
            .threads
            .iter()
            .map(|t| match &t.source {
                ThreadSource::Dir { dir, key } => dir.thread_bytes(*key),
                _ => 0,
            })
            .sum();
        if total > max_bytes {
            return Ok(None);
        }
        let mut threads = Vec::with_capacity(self.threads.len());
        for t in &self.threads {
            let source = match &t.source {
                ThreadSource::Dir { dir, key } => {
                    let mut bytes = Vec::new();
                    let records = dir.load_thread(*key, &mut bytes).map_err(Error::Reader)?;
                    ThreadSource::Loaded(Arc::new(LoadedThread {
                        bytes,
                        records,
                        dir: dir.clone(),
                        key: *key,
                    }))
                }
                other => other.clone(),
            };
            threads.push(ThreadTrace { tid: t.tid, source });
        }
        Ok(Some(ProcessTrace {
            host: self.host.clone(),
            pid: self.pid,
            start_ticks: self.start_ticks,
            calib: self.calib,
            recording: self.recording.clone(),
            threads,
        }))
    }
}

/// Per thread, what the records a suffix leaves out said, and where in its first record
/// it begins ([`ThreadSource::Suffix`], [`TraceSet::open_suffixes`]).
pub type Contexts = std::collections::HashMap<
    reader::ThreadKey,
    (Arc<Chunk>, Option<(reader::rotated::RecordKey, usize)>),
>;

/// One hand-built chunk.
#[derive(Clone, Debug)]
pub struct Chunk {
    /// Entries lost just before this chunk.
    pub lost_before: u64,
    /// A name standing for the file in error messages.
    pub name: Arc<PathBuf>,
    /// The entries.
    pub bytes: Arc<Vec<u8>>,
}

impl TraceSet {
    /// Opens trace directories (written by `culprit record` / `culprit reader`), one or
    /// many, from one host or several. Chunks are indexed by their record headers, their
    /// data not read: decoding streams them, and the first read of a record verifies its
    /// checksum (`reader::TraceDir::open_lazy`). Every stage reads its data through
    /// [`ThreadTrace::raw_chunks`], which goes through that check: a damaged record, or
    /// the rest of a record from an entry that does not decode, is skipped with one
    /// warning naming the chunk file and offset (an error with `--strict`).
    ///
    /// A directory that is not itself a trace is searched for the traces under it
    /// (`super::discover`: a cluster recording's `DIR/<host>/<job.step.task>/`). Every
    /// recording of one boot of one host is converted by one clock (`super::clock`).
    pub fn open(dirs: &[PathBuf]) -> Result<TraceSet> {
        Self::open_quiet(dirs, false)
    }

    /// [`TraceSet::open`], without printing warnings when `quiet` (a directory still
    /// being written, opened again and again by `culprit watch`, ends in a record being
    /// written and has sub-buffers still in the pool).
    pub fn open_quiet(dirs: &[PathBuf], quiet: bool) -> Result<TraceSet> {
        Self::open_suffixes(dirs, quiet, &mut |_, _| Default::default())
    }

    /// [`TraceSet::open_quiet`], each directory handed to `suffix` before it is read: it
    /// may [restrict](reader::TraceDir::restrict) threads to their end and give, per
    /// thread, what the records left out said ([`ThreadSource::Suffix`]).
    pub fn open_suffixes(
        dirs: &[PathBuf],
        quiet: bool,
        suffix: &mut dyn FnMut(&Path, &mut reader::TraceDir) -> Contexts,
    ) -> Result<TraceSet> {
        let mut set = TraceSet::default();
        let mut opened = Vec::new();
        let mut contexts = Vec::new();
        for d in super::discover::trace_dirs(dirs)? {
            let mut t = open_dir(&d, quiet)?;
            contexts.push(suffix(&d, &mut t));
            opened.push((Arc::new(t), d));
        }
        let manifests: Vec<&reader::Manifest> = opened.iter().map(|(t, _)| t.manifest()).collect();
        let clocks = super::clock::domain_calibrations(&manifests);
        for (((dir, d), calib), context) in opened.iter().zip(clocks).zip(contexts) {
            set.add_recording_with(dir, d, calib, &context);
        }
        Ok(set)
    }

    /// Adds the processes of an opened trace directory `d`, converted by `calib`.
    pub(super) fn add_recording(
        &mut self,
        dir: &Arc<reader::TraceDir>,
        d: &std::path::Path,
        calib: Calibration,
    ) {
        self.add_recording_with(dir, d, calib, &Contexts::default())
    }

    /// [`TraceSet::add_recording`], the threads `context` names read as suffixes
    /// ([`ThreadSource::Suffix`]).
    pub(super) fn add_recording_with(
        &mut self,
        dir: &Arc<reader::TraceDir>,
        d: &std::path::Path,
        calib: Calibration,
        context: &Contexts,
    ) {
        let m = dir.manifest();
        let recording = Arc::new(Recording {
            dir: d.to_path_buf(),
            boot_id: m.boot_id.clone(),
            net_ns: m.net_ns.clone(),
            task: m.slurm.as_ref().map(|t| t.dir_name()),
        });
        let host = host_of(m, d);
        for ((pid, start_ticks), threads) in process_threads(dir, context) {
            self.processes.push(ProcessTrace {
                host: host.clone(),
                pid,
                start_ticks,
                calib,
                recording: recording.clone(),
                threads,
            });
        }
    }

    /// What the set holds, for a user: hosts, recordings, Slurm tasks and processes.
    pub fn found(&self) -> Found {
        let mut hosts = std::collections::BTreeSet::new();
        let mut recordings = std::collections::BTreeSet::new();
        let mut tasks = std::collections::BTreeSet::new();
        for p in &self.processes {
            hosts.insert(p.host.clone());
            recordings.insert(p.recording.dir.clone());
            if let Some(t) = &p.recording.task {
                tasks.insert((p.host.clone(), t.clone()));
            }
        }
        Found {
            hosts: hosts.into_iter().collect(),
            recordings: recordings.len(),
            tasks: tasks.into_iter().map(|(h, t)| format!("{h}/{t}")).collect(),
            processes: self.processes.len(),
        }
    }
}

/// Opens one trace directory lazily (record headers indexed, data read when decoded).
pub(super) fn open_dir(d: &std::path::Path, quiet: bool) -> Result<reader::TraceDir> {
    reader::TraceDir::open_with(
        d,
        reader::OpenOptions {
            lazy: true,
            quiet,
            ..Default::default()
        },
    )
    .map_err(Error::Reader)
}

/// The host a recording names (its directory's path when it names none).
pub(super) fn host_of(m: &reader::Manifest, d: &std::path::Path) -> String {
    if m.host.is_empty() {
        d.display().to_string()
    } else {
        m.host.clone()
    }
}

/// The threads of an opened directory by process (pid, start time), in that order.
pub(super) fn process_threads(
    dir: &Arc<reader::TraceDir>,
    context: &Contexts,
) -> std::collections::BTreeMap<(u32, u64), Vec<ThreadTrace>> {
    let mut by_proc: std::collections::BTreeMap<(u32, u64), Vec<ThreadTrace>> = Default::default();
    for key in dir.threads() {
        by_proc
            .entry((key.pid, key.start_ticks))
            .or_default()
            .push(ThreadTrace {
                tid: key.tid,
                source: match context.get(&key) {
                    Some((c, skip)) => ThreadSource::Suffix {
                        dir: dir.clone(),
                        key,
                        context: c.clone(),
                        skip: *skip,
                    },
                    None => ThreadSource::Dir {
                        dir: dir.clone(),
                        key,
                    },
                },
            });
    }
    by_proc
}

/// What a [`TraceSet`] holds ([`TraceSet::found`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Found {
    /// Host names, in order.
    pub hosts: Vec<String>,
    /// Trace directories.
    pub recordings: usize,
    /// Slurm tasks as `host/job.step.task`, in order.
    pub tasks: Vec<String>,
    /// Processes.
    pub processes: usize,
}

impl std::fmt::Display for Found {
    /// `3 processes in 2 recordings on 2 hosts (n1, n2); Slurm tasks: n1/7.0.0, n2/7.0.1`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = |n: usize, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
        let es = if self.processes == 1 { "" } else { "es" };
        write!(
            f,
            "{} process{es} in {} on {} ({})",
            self.processes,
            plural(self.recordings, "recording"),
            plural(self.hosts.len(), "host"),
            self.hosts.join(", ")
        )?;
        if !self.tasks.is_empty() {
            write!(f, "; Slurm tasks: {}", self.tasks.join(", "))?;
        }
        Ok(())
    }
}
