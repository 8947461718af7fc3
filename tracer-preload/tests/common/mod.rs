//! Test harness: build a C program, run it under `libtrace.so` with a fresh pool, drain
//! the pool (salvage included) and give the entries back per process and thread.
#![allow(dead_code)]

use bufpool::format::{Decoder, Entry, Kind, LibFn, LibOpts, Meta, ProcReason, ProcRecord};
use bufpool::{Consumer, Pool, PoolConfig};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `target/<profile>/libtrace.so`, next to this test binary's `deps/` directory, built
/// (or brought up to date) once per test binary: `cargo test` does not rebuild a
/// `cdylib` for integration tests.
pub fn libtrace() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().unwrap();
            let profile_dir = exe.parent().unwrap().parent().unwrap();
            let target_dir = profile_dir.parent().unwrap();
            let mut c = Command::new(option_env!("CARGO").unwrap_or("cargo"));
            c.args(["build", "--quiet", "-p", "tracer-preload", "--lib"])
                .env("CARGO_TARGET_DIR", target_dir)
                .current_dir(env!("CARGO_MANIFEST_DIR"));
            if profile_dir.file_name() == Some(std::ffi::OsStr::new("release")) {
                c.arg("--release");
            }
            let st = c.status().expect("running cargo build -p tracer-preload");
            assert!(st.success(), "cargo build -p tracer-preload failed");
            let so = profile_dir.join("libtrace.so");
            assert!(so.exists(), "{} is missing", so.display());
            so
        })
        .clone()
}

/// Compiles `src` (C) into `dir/name` (`-O1`, frame pointers kept, pthreads).
pub fn cc(dir: &Path, name: &str, src: &str) -> PathBuf {
    cc_with(dir, name, src, &[])
}

/// [`cc`] with extra compiler flags.
pub fn cc_with(dir: &Path, name: &str, src: &str, flags: &[&str]) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let out = dir.join(name);
    let st = Command::new("cc")
        .args(flags)
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-pthread", "-o"])
        .arg(&out)
        .arg(&c)
        .status()
        .expect("cc");
    assert!(st.success(), "cc failed for {name}");
    out
}

/// A pool in a temporary directory.
pub struct TestPool {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
    pub pool: Pool,
}

pub fn pool() -> TestPool {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pool");
    let cfg = PoolConfig {
        n_subbufs: 64,
        subbuf_size: 64 * 1024,
        calibration: Duration::from_millis(1),
        ..Default::default()
    };
    let pool = Pool::create(&path, &cfg).unwrap();
    TestPool { dir, path, pool }
}

/// What a traced run printed.
pub struct Output {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// A command with `LD_PRELOAD` and `CULPRIT_POOL` set.
pub fn traced(pool: &Path, prog: &Path) -> Command {
    let mut c = Command::new(prog);
    c.env("LD_PRELOAD", libtrace())
        .env(bufpool::POOL_ENV, pool)
        .env_remove("CULPRIT_WARNED")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Runs to completion (killed after 60 s).
pub fn run(mut c: Command) -> Output {
    let mut child = c.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("traced program timed out");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    Output {
        status,
        stdout,
        stderr,
    }
}

/// One thread's entries, in order.
#[derive(Debug, Default)]
pub struct ThreadTrace {
    pub pid: u32,
    pub tid: u32,
    pub entries: Vec<Entry>,
    /// Sequence numbers of its sub-buffers, in order.
    pub seqs: Vec<u64>,
    pub lost: u64,
}

/// Everything drained from a pool.
#[derive(Debug, Default)]
pub struct Trace {
    pub threads: BTreeMap<(u32, u32), ThreadTrace>,
    pub salvaged: usize,
}

/// A wrapped call: its `LibEnter` options and, if recorded, its `LibExit` options.
#[derive(Debug, Clone)]
pub struct Call {
    pub func: LibFn,
    pub site: u64,
    pub enter: Option<LibOpts>,
    pub exit: Option<LibOpts>,
}

/// Salvages and drains every sub-buffer; panics on a duplicate or undecodable one.
pub fn drain(p: &TestPool) -> Trace {
    let rep = bufpool::salvage_dead(&p.pool);
    let c = Consumer::new(&p.pool);
    let mut bufs: BTreeMap<(u32, u32, u64), (Vec<u8>, u64)> = BTreeMap::new();
    while let Some(t) = c.take() {
        let i = *t.info();
        let key = (i.pid, i.tid, i.seq);
        assert!(
            bufs.insert(key, (t.data().to_vec(), i.lost_before))
                .is_none(),
            "sub-buffer {key:?} drained twice"
        );
        t.release();
    }
    let census = p.pool.slots().census();
    assert_eq!(census[1], 0, "a sub-buffer is still owned: {census:?}");
    let mut tr = Trace {
        salvaged: rep.published,
        ..Default::default()
    };
    for ((pid, tid, seq), (data, lost)) in bufs {
        let th = tr.threads.entry((pid, tid)).or_insert_with(|| ThreadTrace {
            pid,
            tid,
            ..Default::default()
        });
        th.seqs.push(seq);
        th.lost += lost;
        for e in Decoder::new(&data) {
            let e = e.unwrap_or_else(|e| panic!("pid {pid} tid {tid} seq {seq}: {e}"));
            th.entries.push(e.to_owned().unwrap());
        }
    }
    tr
}

impl ThreadTrace {
    /// Library calls, pairing each `LibExit` with the innermost open `LibEnter` of the
    /// same function (a signal handler's calls nest inside the interrupted one).
    pub fn calls(&self) -> Vec<Call> {
        let mut out: Vec<Call> = Vec::new();
        let mut open: Vec<usize> = Vec::new();
        for e in &self.entries {
            if let Entry::Lib {
                kind,
                caller,
                func,
                opts,
                ..
            } = e
            {
                if *kind == Kind::LibEnter {
                    out.push(Call {
                        func: *func,
                        site: *caller,
                        enter: Some(**opts),
                        exit: None,
                    });
                    open.push(out.len() - 1);
                    continue;
                }
                match open.last() {
                    Some(&i) if out[i].func == *func => {
                        out[i].exit = Some(**opts);
                        open.pop();
                    }
                    _ => out.push(Call {
                        func: *func,
                        site: *caller,
                        enter: None,
                        exit: Some(**opts),
                    }),
                }
            }
        }
        out
    }

    pub fn metas(&self) -> Vec<Meta> {
        self.entries
            .iter()
            .filter_map(|e| match e {
                Entry::Meta { meta, .. } => Some(meta.clone()),
                _ => None,
            })
            .collect()
    }
}

impl Trace {
    pub fn pids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.threads.keys().map(|k| k.0).collect();
        v.dedup();
        v
    }

    /// Calls of one process, thread by thread (main thread first).
    pub fn calls(&self, pid: u32) -> Vec<Call> {
        self.threads
            .values()
            .filter(|t| t.pid == pid)
            .flat_map(|t| t.calls())
            .collect()
    }

    pub fn calls_of(&self, pid: u32, f: LibFn) -> Vec<Call> {
        self.calls(pid)
            .into_iter()
            .filter(|c| c.func == f)
            .collect()
    }

    pub fn metas(&self, pid: u32) -> Vec<Meta> {
        self.threads
            .values()
            .filter(|t| t.pid == pid)
            .flat_map(|t| t.metas())
            .collect()
    }

    pub fn procs(&self, pid: u32) -> Vec<ProcRecord> {
        self.metas(pid)
            .into_iter()
            .filter_map(|m| match m {
                Meta::Proc(p) => Some(p),
                _ => None,
            })
            .collect()
    }

    pub fn proc_reason(&self, pid: u32) -> Vec<ProcReason> {
        self.procs(pid).iter().map(|p| p.reason).collect()
    }

    pub fn lost(&self) -> u64 {
        self.threads.values().map(|t| t.lost).sum()
    }
}

impl Call {
    pub fn ret(&self) -> i64 {
        self.exit
            .as_ref()
            .and_then(|o| o.ret)
            .expect("call has a result")
    }
    pub fn errno(&self) -> Option<i32> {
        self.exit.as_ref().and_then(|o| o.errno)
    }
    pub fn fd(&self) -> i32 {
        self.enter
            .as_ref()
            .and_then(|o| o.fd)
            .or_else(|| self.exit.as_ref().and_then(|o| o.fd))
            .expect("call has an fd")
    }
}

/// Parses `key=value` lines the test programs print.
pub fn kv(out: &str) -> BTreeMap<String, String> {
    out.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

pub fn num(m: &BTreeMap<String, String>, k: &str) -> i64 {
    m.get(k)
        .unwrap_or_else(|| panic!("program did not print {k}"))
        .parse()
        .unwrap()
}
