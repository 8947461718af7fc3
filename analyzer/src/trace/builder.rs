//! Traces built by hand (tests, benchmarks): [`TraceBuilder`] writes entries with
//! `bufpool`'s encoders, [`write_trace_dir`] saves hand-built processes as a trace
//! directory the way `culprit reader` does.

use super::decode::first_tsc;
use super::load::{Chunk, ProcessTrace, ThreadSource, ThreadTrace};
use crate::error::{Error, Result};
use bufpool::format::{
    self, encode_fn, encode_lib, encode_meta, encode_ret, Kind, LibFn, LibOpts, Meta, META_BUF,
};
use bufpool::Calibration;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Builds traces by hand with `bufpool`'s encoders (tests and benchmarks).
///
/// ```
/// use analyzer::decode::TraceBuilder;
/// use bufpool::format::{LibFn, LibOpts};
/// let mut t = TraceBuilder::new("host", 100, 100);
/// t.enter(0x1000, 0x2000);
/// t.lib(0x2010, LibFn::Socket, LibOpts { ret: Some(3), ..Default::default() });
/// t.exit(0x2000);
/// let p = t.finish();
/// assert_eq!(p.threads.len(), 1);
/// ```
pub struct TraceBuilder {
    host: String,
    pid: u32,
    tid: u32,
    tsc: u64,
    chunk_size: usize,
    cur: Vec<u8>,
    chunks: Vec<Chunk>,
    lost: u64,
    threads: Vec<ThreadTrace>,
    calib: Calibration,
}

impl TraceBuilder {
    /// A process `pid` on `host`, writing thread `tid` first. The TSC runs at 1 GHz from
    /// 1 000 000 ticks, and wall-clock time starts at 1.7e18 ns.
    pub fn new(host: &str, pid: u32, tid: u32) -> TraceBuilder {
        TraceBuilder {
            host: host.to_string(),
            pid,
            tid,
            tsc: 1_000_000,
            chunk_size: 64 * 1024,
            cur: Vec::new(),
            chunks: Vec::new(),
            lost: 0,
            threads: Vec::new(),
            calib: Calibration {
                tsc0: 1_000_000,
                realtime0_ns: 1_700_000_000_000_000_000,
                monotonic0_ns: 1_000_000,
                tsc1: 2_001_000_000,
                realtime1_ns: 1_700_000_002_000_000_000,
                monotonic1_ns: 2_001_000_000,
            },
        }
    }

    /// Sets the chunk size (entries are split into chunks of at most this many bytes).
    pub fn chunk_size(mut self, n: usize) -> Self {
        self.chunk_size = n.max(256);
        self
    }

    /// Advances the clock by `ticks` (every entry also advances it by 100).
    pub fn wait(&mut self, ticks: u64) {
        self.tsc += ticks;
    }

    /// The current TSC.
    pub fn now(&self) -> u64 {
        self.tsc
    }

    fn push(&mut self, b: &[u8]) {
        if self.cur.len() + b.len() > self.chunk_size {
            self.cut();
        }
        self.cur.extend_from_slice(b);
        self.tsc += 100;
    }

    fn cut(&mut self) {
        if self.cur.is_empty() {
            return;
        }
        let name = format!(
            "<memory {}:{}/{} chunk {}>",
            self.host,
            self.pid,
            self.tid,
            self.chunks.len()
        );
        self.chunks.push(Chunk {
            lost_before: std::mem::take(&mut self.lost),
            name: Arc::new(PathBuf::from(name)),
            bytes: Arc::new(std::mem::take(&mut self.cur)),
        });
    }

    /// Appends raw bytes as they are (to test corrupt input).
    pub fn raw(&mut self, b: &[u8]) {
        self.cur.extend_from_slice(b);
    }

    /// A C function entry.
    pub fn enter(&mut self, site: u64, callee: u64) {
        let e = encode_fn(Kind::FnEnter, self.tsc, site, callee);
        self.push(e.as_bytes());
    }

    /// A C function exit.
    pub fn exit(&mut self, callee: u64) {
        let e = encode_ret(Kind::FnExit, self.tsc, callee, 0);
        self.push(e.as_bytes());
    }

    /// A Python call (`site` from [`format::py_site`]).
    pub fn py_call(&mut self, site: u64, code: u32) {
        let e = encode_fn(Kind::PyCall, self.tsc, site, code as u64);
        self.push(e.as_bytes());
    }

    /// A Python return.
    pub fn py_return(&mut self, code: u32) {
        let e = encode_ret(Kind::PyReturn, self.tsc, code as u64, 0);
        self.push(e.as_bytes());
    }

    /// A call of a builtin from Python.
    pub fn py_ccall(&mut self, site: u64, builtin: u32) {
        let e = encode_fn(Kind::PyCCall, self.tsc, site, builtin as u64);
        self.push(e.as_bytes());
    }

    /// The return of a builtin called from Python.
    pub fn py_creturn(&mut self, builtin: u32) {
        let e = encode_ret(Kind::PyCReturn, self.tsc, builtin as u64, 0);
        self.push(e.as_bytes());
    }

    /// A Python exception raised in frame `code`.
    pub fn py_exc(&mut self, code: u32, exc_type: u32) {
        let e = encode_fn(Kind::PyExc, self.tsc, exc_type as u64, code as u64);
        self.push(e.as_bytes());
    }

    /// A library call: a `LibEnter` with the arguments (fd, len) and a `LibExit` with
    /// all of `opts`.
    pub fn lib(&mut self, site: u64, func: LibFn, opts: LibOpts) {
        let enter = LibOpts {
            fd: opts.fd,
            len: opts.len,
            ..Default::default()
        };
        let e = encode_lib(Kind::LibEnter, self.tsc, site, func, &enter);
        self.push(e.as_bytes());
        let e = encode_lib(Kind::LibExit, self.tsc, site, func, &opts);
        self.push(e.as_bytes());
    }

    /// Only the `LibEnter` of a call that never returns (exit, exec) or is still blocked.
    pub fn lib_enter(&mut self, site: u64, func: LibFn, opts: LibOpts) {
        let e = encode_lib(Kind::LibEnter, self.tsc, site, func, &opts);
        self.push(e.as_bytes());
    }

    /// Only the `LibExit` of a call (after a [`TraceBuilder::lib_enter`]).
    pub fn lib_exit(&mut self, site: u64, func: LibFn, opts: LibOpts) {
        let e = encode_lib(Kind::LibExit, self.tsc, site, func, &opts);
        self.push(e.as_bytes());
    }

    /// A metadata record.
    pub fn meta(&mut self, m: &Meta) {
        let mut out = [0u8; META_BUF];
        let n = encode_meta(self.tsc, m, &mut out);
        self.push(&out[..n]);
    }

    /// Starts writing another thread of the same process.
    pub fn thread(&mut self, tid: u32) {
        self.cut();
        let chunks = std::mem::take(&mut self.chunks);
        if !chunks.is_empty() {
            self.threads.push(ThreadTrace {
                tid: self.tid,
                source: ThreadSource::Memory(chunks),
            });
        }
        self.tid = tid;
    }

    /// Marks `n` entries lost before the next chunk (cuts the current one), as a writer
    /// does (FORMAT.md §2): in the next chunk's `lost_before` and in a `Lost` entry that
    /// starts it.
    pub fn lose(&mut self, n: u64) {
        self.cut();
        self.lost += n;
        let m = format::encode_lost(self.tsc, self.lost);
        self.cur.extend_from_slice(m.as_bytes());
    }

    /// The finished process trace.
    pub fn finish(mut self) -> ProcessTrace {
        self.thread(0);
        ProcessTrace {
            host: self.host,
            pid: self.pid,
            start_ticks: 0,
            calib: self.calib,
            recording: Default::default(),
            threads: self.threads,
        }
    }
}

/// Writes hand-built processes (all of one host) as a trace directory, the way
/// `culprit reader` does: chunk files of checksummed records and a manifest. Used by tests
/// and benchmarks to exercise the on-disk path end to end.
pub fn write_trace_dir(dir: &Path, host: &str, processes: &[ProcessTrace]) -> Result<()> {
    let io = |what| {
        move |source| Error::Io {
            path: dir.to_path_buf(),
            what,
            source,
        }
    };
    std::fs::create_dir_all(dir).map_err(io("create trace directory"))?;
    let start = processes.first().map_or(0, |p| p.calib.realtime0_ns);
    let mut w =
        reader::ChunkWriter::create(dir, std::process::id(), 0, start).map_err(Error::Reader)?;
    let mut infos = Vec::new();
    for p in processes {
        let mut pinfo = reader::ProcessInfo {
            pid: p.pid,
            start_ticks: p.start_ticks,
            origin: "start".into(),
            ..Default::default()
        };
        for t in &p.threads {
            pinfo.threads.push(t.tid);
            let ThreadSource::Memory(chunks) = &t.source else {
                continue;
            };
            for (seq, c) in chunks.iter().enumerate() {
                let mut last = first_tsc(&c.bytes);
                let (mut n, mut meta) = (0u64, 0u64);
                for e in format::Decoder::new(&c.bytes).flatten() {
                    last = e.tsc;
                    // Counted as the reader counts them: metadata records apart, `Lost`
                    // markers not at all.
                    match e.kind {
                        k if k.is_meta() => meta += 1,
                        format::Kind::Lost => {}
                        _ => n += 1,
                    }
                }
                let info = bufpool::SubBufInfo {
                    magic: bufpool::layout::SUBBUF_MAGIC,
                    flags: 0,
                    pid: p.pid,
                    tid: t.tid,
                    seq: seq as u64,
                    first_tsc: first_tsc(&c.bytes),
                    last_tsc: last,
                    lost_before: c.lost_before,
                    bytes_used: c.bytes.len() as u32,
                    data_size: c.bytes.len() as u32,
                    owner_start_ticks: p.start_ticks,
                };
                w.append(&info, &c.bytes).map_err(io("write chunk"))?;
                pinfo.subbufs += 1;
                pinfo.entries += n;
                pinfo.meta_records += meta;
                pinfo.bytes += c.bytes.len() as u64;
                pinfo.lost = pinfo.lost.saturating_add(c.lost_before);
            }
        }
        infos.push(pinfo);
    }
    w.sync().map_err(Error::Reader)?;
    let calib = processes.first().map(|p| p.calib).unwrap_or_default();
    let m = reader::Manifest {
        format: reader::manifest::MANIFEST_FORMAT.into(),
        version: reader::manifest::MANIFEST_VERSION,
        host: host.into(),
        boot_id: String::new(),
        net_ns: String::new(),
        slurm: None,
        command: vec!["(synthetic)".into()],
        start_unix_ns: start,
        end_unix_ns: Some(start),
        complete: true,
        calibration: calib.into(),
        clock_snapshots: Vec::new(),
        pool: Default::default(),
        totals: reader::Totals {
            processes: infos.len() as u64,
            threads: infos.iter().map(|p| p.threads.len() as u64).sum(),
            subbufs: infos.iter().map(|p| p.subbufs).sum(),
            entries: infos.iter().map(|p| p.entries).sum(),
            meta_records: infos.iter().map(|p| p.meta_records).sum(),
            bytes: infos.iter().map(|p| p.bytes).sum(),
            lost: infos.iter().fold(0u64, |a, p| a.saturating_add(p.lost)),
            ..Default::default()
        },
        processes: infos,
        snapshot_unix_ns: None,
    };
    m.write(dir).map_err(Error::Reader)
}
