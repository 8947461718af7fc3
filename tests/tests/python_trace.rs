//! The Python tracing shim (`python-hook/`, package `culprit_trace`) end to end: real
//! Python processes — with nested calls, exceptions caught and uncaught, generators,
//! `asyncio` coroutines, a thread, a socket, an `os.fork` child, a `subprocess` child and
//! a `multiprocessing` spawn child — record exactly the expected events, names resolved.
//!
//! The shim is built from this checkout into a private *user site* (`PYTHONUSERBASE`),
//! so its `culprit_trace.pth` start-up hook is processed exactly as after
//! `pip install ./python-hook`, without touching the machine's site-packages.
//!
//! Two recording back ends run the same checks:
//! - the stand-in libtrace (`python-hook/tests/standin.c`: the C ABI of
//!   `tracer-preload/include/culprit.h`, writing bufpool entries into per-thread mapped
//!   files), always;
//! - the real `libtrace.so` with a real pool (drained with bufpool's consumer after
//!   salvaging the dead writers' sub-buffers), when it is built.
//!
//! Both are decoded with bufpool's decoder. Requires `python3` (3.11) with setuptools and a C
//! compiler. The same scenario then runs with every CPython 3.9–3.13 of the machine through the
//! no-install bootstrap copy (`python_hook`), in each mode of that version (issue 17); the
//! versions the machine lacks are printed as SKIPPED (and named by `scripts/test.sh`).

use bufpool::format::{decode_all, CodeKind, Entry, Kind, Meta};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A private user site holding the shim built from this checkout.
struct Shim {
    _dir: tempfile::TempDir,
    userbase: PathBuf,
}

fn shim() -> &'static Shim {
    static S: OnceLock<Shim> = OnceLock::new();
    S.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let userbase = dir.path().join("userbase");
        let site = Command::new("python3")
            .env("PYTHONUSERBASE", &userbase)
            .args(["-c", "import site; print(site.getusersitepackages())"])
            .output()
            .expect("run python3");
        assert!(site.status.success(), "python3 -c site: {site:?}");
        let site = PathBuf::from(String::from_utf8_lossy(&site.stdout).trim());
        std::fs::create_dir_all(&site).expect("mkdir user site");
        let tmp = dir.path().join("build-temp");
        let out = Command::new("python3")
            .current_dir(repo().join("python-hook"))
            .args(["setup.py", "-q", "build_py", "--build-lib"])
            .arg(&site)
            .args(["build_ext", "--build-lib"])
            .arg(&site)
            .arg("--build-temp")
            .arg(&tmp)
            .output()
            .expect("run python3 setup.py");
        assert!(
            out.status.success(),
            "building culprit_trace failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            site.join("culprit_trace.pth").is_file(),
            "the .pth hook was not built"
        );
        Shim {
            _dir: dir,
            userbase,
        }
    })
}

/// The stand-in libtrace, compiled once.
fn standin() -> &'static Path {
    static S: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &S.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let so = dir.path().join("libstandin.so");
        let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
            .args(["-O2", "-shared", "-fPIC", "-pthread", "-I"])
            .arg(repo().join("tracer-preload/include"))
            .arg(repo().join("python-hook/tests/standin.c"))
            .arg("-o")
            .arg(&so)
            .output()
            .expect("run cc");
        assert!(
            out.status.success(),
            "standin.c: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        (dir, so)
    })
    .1
}

/// Decoded trace of a run: entries per (pid, tid) in order, code records per (pid, index).
#[derive(Default)]
struct Trace {
    streams: BTreeMap<(u32, u32), Vec<Entry>>,
    codes: HashMap<(u32, u32), (CodeKind, String)>,
}

impl Trace {
    fn add(&mut self, pid: u32, tid: u32, data: &[u8]) {
        let entries = decode_all(data).unwrap_or_else(|e| panic!("decode {pid}.{tid}: {e:?}"));
        for e in entries {
            if let Entry::Meta {
                meta: Meta::Code(c),
                ..
            } = &e
            {
                let name = String::from_utf8_lossy(&c.name).into_owned();
                let prev = self.codes.insert((pid, c.index), (c.kind, name.clone()));
                if let Some((_, p)) = prev {
                    assert_eq!(
                        p, name,
                        "index {} of pid {pid} named twice differently",
                        c.index
                    );
                }
            }
            self.streams.entry((pid, tid)).or_default().push(e);
        }
    }

    /// A stream rendered as "kind name" lines, keeping only the Python entries whose
    /// name passes `keep`. Panics on an index used without a code record in its process.
    fn render(&self, key: (u32, u32), keep: &dyn Fn(&str) -> bool) -> Vec<String> {
        let name = |idx: u64| -> String {
            match self.codes.get(&(key.0, idx as u32)) {
                Some((_, n)) => n.clone(),
                None => panic!("pid {} uses index {idx} that has no code record", key.0),
            }
        };
        let mut out = Vec::new();
        for e in &self.streams[&key] {
            let (label, n) = match *e {
                Entry::Fn { kind, callee, .. } => match kind {
                    Kind::PyCall => ("call", name(callee)),
                    Kind::PyCCall => ("c_call", name(callee)),
                    Kind::PyExc => ("exception", name(callee)),
                    _ => continue,
                },
                Entry::Ret {
                    kind, callee, aux, ..
                } => match (kind, aux) {
                    (Kind::PyReturn, 0) => ("return", name(callee)),
                    (Kind::PyReturn, 2) => ("suspend", name(callee)),
                    (Kind::PyCReturn, 2) => ("c_suspend", name(callee)),
                    (Kind::PyReturn, _) => ("unwind", name(callee)),
                    (Kind::PyCReturn, 0) => ("c_return", name(callee)),
                    (Kind::PyCReturn, _) => ("c_raise", name(callee)),
                    _ => continue,
                },
                _ => continue,
            };
            if keep(&n) {
                out.push(format!("{label} {n}"));
            }
        }
        out
    }
}

fn read_standin(dir: &Path) -> Trace {
    let mut files: Vec<(u32, u32, u64, PathBuf)> = std::fs::read_dir(dir)
        .expect("read trace dir")
        .map(|e| e.expect("dir entry").path())
        .map(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            let v: Vec<u64> = n
                .split('.')
                .map(|x| x.parse().expect("pid.tid.seq"))
                .collect();
            (v[0] as u32, v[1] as u32, v[2], p)
        })
        .collect();
    files.sort();
    let mut t = Trace::default();
    for (pid, tid, _, p) in files {
        let b = std::fs::read(&p).expect("read segment");
        let used = u32::from_le_bytes(b[..4].try_into().unwrap()) as usize;
        t.add(pid, tid, &b[64..64 + used]);
    }
    t
}

fn read_pool(pool: &bufpool::Pool) -> Trace {
    bufpool::salvage_dead(pool);
    let c = bufpool::Consumer::new(pool);
    let mut subs = Vec::new();
    while let Some(s) = c.take() {
        let i = s.info();
        subs.push((i.pid, i.tid, i.seq, s.data().to_vec()));
        s.release();
    }
    subs.sort_by_key(|s| (s.0, s.1, s.2));
    let mut t = Trace::default();
    for (pid, tid, _, d) in subs {
        t.add(pid, tid, &d);
    }
    t
}

#[derive(Clone, Copy, Debug)]
enum Backend {
    Standin,
    Real,
}

/// Runs `python3 ARGS` in `cwd` under tracing with `backend`; returns its output and trace.
fn traced(backend: Backend, cwd: &Path, args: &[&str], preload: bool) -> (tests::RunOutput, Trace) {
    traced_mode(backend, "profile", cwd, args, preload)
}

/// As [`traced`], in the shim's mode `mode` (`CULPRIT_PY_MODE`: profile or frames).
fn traced_mode(
    backend: Backend,
    mode: &str,
    cwd: &Path,
    args: &[&str],
    preload: bool,
) -> (tests::RunOutput, Trace) {
    let shim = shim();
    let mut cmd = Command::new("python3");
    cmd.env("PYTHONUSERBASE", &shim.userbase)
        .env_remove("PYTHONNOUSERSITE");
    traced_cmd(backend, cmd, mode, cwd, args, preload)
}

/// Runs `cmd` (an interpreter that finds the shim one way or another) with `args` in `cwd`
/// under tracing with `backend`, the shim in mode `mode` (empty: its default).
fn traced_cmd(
    backend: Backend,
    mut cmd: Command,
    mode: &str,
    cwd: &Path,
    args: &[&str],
    preload: bool,
) -> (tests::RunOutput, Trace) {
    let out_dir = tempfile::tempdir().expect("tempdir");
    cmd.current_dir(cwd)
        .args(args)
        .env("CULPRIT_PY_MODE", mode)
        .env_remove("LD_PRELOAD");
    let deadline = Duration::from_secs(60);
    match backend {
        Backend::Standin => {
            let lib = standin();
            cmd.env("STANDIN_OUT", out_dir.path())
                .env("CULPRIT_POOL", out_dir.path().join("pool"))
                .env("CULPRIT_LIBTRACE", lib);
            if preload {
                cmd.env("LD_PRELOAD", lib);
            }
            let r = tests::run_with_deadline(&mut cmd, deadline);
            let t = read_standin(out_dir.path());
            (r, t)
        }
        Backend::Real => {
            let lib = tests::libtrace().expect("libtrace.so");
            let pool = tests::temp_pool(256, 1 << 20);
            cmd.env(bufpool::POOL_ENV, &pool.path)
                .env("CULPRIT_LIBTRACE", &lib);
            if preload {
                cmd.env("LD_PRELOAD", &lib);
            }
            let r = tests::run_with_deadline(&mut cmd, deadline);
            let t = read_pool(&pool.pool);
            (r, t)
        }
    }
}

fn backends() -> Vec<Backend> {
    let mut v = vec![Backend::Standin];
    if tests::libtrace_or_skip("python_trace (real libtrace.so)").is_some() {
        v.push(Backend::Real);
    }
    v
}

const SCENARIO: &str = r#"
import asyncio
import os
import socket
import subprocess
import sys
import threading


def leaf(x):
    return x + 1


def fails():
    raise KeyError("k")


def catcher():
    try:
        fails()
    except KeyError:
        pass
    return leaf(1)


def gen(n):
    for i in range(n):
        yield leaf(i)


async def co_inner():
    await asyncio.sleep(0)
    return 1


async def co_main():
    return await co_inner()


def in_thread():
    catcher()


def child_work():
    leaf(5)


def uncaught():
    fails()


def main():
    catcher()
    sum(gen(2))
    asyncio.run(co_main())
    a, b = socket.socketpair()
    a.send(b"x")
    b.recv(1)
    a.close()
    b.close()
    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    pid = os.fork()
    if pid == 0:
        child_work()
        os._exit(0)
    os.waitpid(pid, 0)
    subprocess.run([sys.executable, __file__, "child"], check=True)
    uncaught()


if __name__ == "__main__":
    if sys.argv[1:] == ["child"]:
        child_work()
    else:
        main()
"#;

fn lines(s: &str) -> Vec<String> {
    s.lines()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// The main thread of the scenario's first process.
const MAIN: &str = "
    call __main__.<module>
    call __main__.main
    call __main__.catcher
    call __main__.fails
    exception __main__.fails
    unwind __main__.fails
    call __main__.leaf
    return __main__.leaf
    return __main__.catcher
    call __main__.gen
    call __main__.leaf
    return __main__.leaf
    return __main__.gen
    call __main__.gen
    call __main__.leaf
    return __main__.leaf
    return __main__.gen
    call __main__.gen
    return __main__.gen
    call __main__.co_main
    call __main__.co_inner
    return __main__.co_inner
    return __main__.co_main
    call __main__.co_main
    call __main__.co_inner
    return __main__.co_inner
    return __main__.co_main
    c_call _socket.socket.send
    c_return _socket.socket.send
    c_call _socket.socket.recv
    c_return _socket.socket.recv
    call __main__.uncaught
    call __main__.fails
    exception __main__.fails
    unwind __main__.fails
    exception __main__.uncaught
    unwind __main__.uncaught
    exception __main__.main
    unwind __main__.main
    exception __main__.<module>
    unwind __main__.<module>
";

const THREAD: &str = "
    call __main__.in_thread
    call __main__.catcher
    call __main__.fails
    exception __main__.fails
    unwind __main__.fails
    call __main__.leaf
    return __main__.leaf
    return __main__.catcher
    return __main__.in_thread
";

const FORK_CHILD: &str = "
    call __main__.child_work
    call __main__.leaf
    return __main__.leaf
    return __main__.child_work
";

const SUBPROCESS: &str = "
    call __main__.<module>
    call __main__.child_work
    call __main__.leaf
    return __main__.leaf
    return __main__.child_work
    return __main__.<module>
";

fn keep_scenario(n: &str) -> bool {
    n.starts_with("__main__.") || n == "_socket.socket.recv" || n == "_socket.socket.send"
}

/// Checks the four streams of the scenario: exactly these, with exactly these events.
/// In frames mode builtins are not recorded, so the expected lists lose their `c_` lines.
fn check_scenario(backend: Backend, how: &str, r: &tests::RunOutput, t: &Trace) {
    check_scenario_mode(backend, "profile", how, r, t)
}

fn check_scenario_mode(backend: Backend, mode: &str, how: &str, r: &tests::RunOutput, t: &Trace) {
    let how = &format!("{how} [{mode}]");
    assert!(!r.timed_out, "{backend:?} {how}: timed out\n{}", r.stderr);
    assert_eq!(
        r.status.code(),
        Some(1),
        "{backend:?} {how}: the uncaught KeyError must end the program with status 1\n{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("KeyError: 'k'") && r.stderr.contains("in uncaught"),
        "{backend:?} {how}: the traceback must be Python's own:\n{}",
        r.stderr
    );
    assert!(
        !r.stderr.contains("culprit_trace"),
        "{backend:?} {how}: the shim must not show in the program's traceback:\n{}",
        r.stderr
    );
    let mut got: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut other = Vec::new();
    for &key in t.streams.keys() {
        let ev = t.render(key, &keep_scenario);
        if ev.is_empty() {
            continue;
        }
        let role = if ev.first().map(String::as_str) == Some("call __main__.in_thread") {
            "thread"
        } else if ev.first().map(String::as_str) == Some("call __main__.child_work") {
            "fork child"
        } else if ev.iter().any(|e| e == "call __main__.main") {
            "main"
        } else if ev.iter().any(|e| e == "call __main__.child_work") {
            "subprocess"
        } else {
            other.push((key, ev));
            continue;
        };
        assert!(
            got.insert(role, ev).is_none(),
            "{backend:?} {how}: two streams look like the {role}"
        );
    }
    assert!(
        other.is_empty(),
        "{backend:?} {how}: unexpected streams {other:#?}"
    );
    for (role, want) in [
        ("main", MAIN),
        ("thread", THREAD),
        ("fork child", FORK_CHILD),
        ("subprocess", SUBPROCESS),
    ] {
        let g = got
            .get(role)
            .unwrap_or_else(|| panic!("{backend:?} {how}: no {role} stream; got {got:#?}"));
        let mut want = lines(want);
        if mode == "frames" || mode == "monitor" {
            want.retain(|l| !l.starts_with("c_"));
        }
        assert_eq!(g, &want, "{backend:?} {how}: the {role}'s events");
    }
}

#[test]
fn frames_mode_records_the_same_python_events_and_the_exception_types() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("scenario.py"), SCENARIO).unwrap();
    for b in backends() {
        for args in [
            &["scenario.py"][..],
            &["-m", "culprit_trace", "scenario.py"][..],
        ] {
            let (r, t) = traced_mode(b, "frames", dir.path(), args, args.len() == 1);
            check_scenario_mode(b, "frames", &args.join(" "), &r, &t);
            // Every exception entry of the script's functions names the exception type.
            let mut types = Vec::new();
            for (&(pid, _), entries) in &t.streams {
                for e in entries {
                    if let Entry::Fn {
                        kind: Kind::PyExc,
                        caller,
                        callee,
                        ..
                    } = *e
                    {
                        let callee = &t.codes[&(pid, callee as u32)].1;
                        if callee.starts_with("__main__.") {
                            let (k, n) = &t.codes[&(pid, caller as u32)];
                            assert_eq!(*k, CodeKind::PyExcType);
                            types.push(n.clone());
                        }
                    }
                }
            }
            // Main thread: fails() caught (1), then uncaught through fails, uncaught, main
            // and <module> (4); the thread: fails() caught (1).
            assert_eq!(types.len(), 6, "{b:?} {args:?}: {types:?}");
            assert!(types.iter().all(|n| n == "builtins.KeyError"), "{types:?}");
        }
    }
}

#[test]
fn scenario_under_preload_is_traced_exactly_in_every_process_and_thread() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("scenario.py"), SCENARIO).unwrap();
    for b in backends() {
        // `python3 scenario.py` under LD_PRELOAD + CULPRIT_POOL: the .pth hook traces.
        let (r, t) = traced(b, dir.path(), &["scenario.py"], true);
        check_scenario(b, "python3 scenario.py", &r, &t);
        // `python3 -m culprit_trace scenario.py` without LD_PRELOAD: the shim re-executes
        // the interpreter with libtrace preloaded.
        let (r, t) = traced(
            b,
            dir.path(),
            &["-m", "culprit_trace", "scenario.py"],
            false,
        );
        check_scenario(b, "python3 -m culprit_trace scenario.py", &r, &t);
    }
}

const SPAWNER: &str = r#"
import multiprocessing as mp
import sys


def square(x):
    return x * x


def work(q):
    q.put(square(3))


if __name__ == "__main__":
    mp.set_start_method(sys.argv[1])
    q = mp.Queue()
    p = mp.Process(target=work, args=(q,))
    p.start()
    assert q.get(timeout=30) == 9
    p.join(30)
    assert p.exitcode == 0
"#;

#[test]
fn multiprocessing_children_are_traced_with_every_start_method() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("spawner.py"), SPAWNER).unwrap();
    for (b, method) in backends()
        .into_iter()
        .flat_map(|b| ["spawn", "fork", "forkserver"].map(|m| (b, m)))
    {
        let (r, t) = traced(b, dir.path(), &["spawner.py", method], true);
        r.assert_success(&format!("{b:?} spawner.py {method}"));
        // Under fork the child runs the parent's __main__ module; otherwise __mp_main__.
        let m = if method == "fork" {
            "__main__"
        } else {
            "__mp_main__"
        };
        let keep = |n: &str| n == format!("{m}.work") || n == format!("{m}.square");
        let mut with_work = Vec::new();
        for &key in t.streams.keys() {
            let ev = t.render(key, &keep);
            if !ev.is_empty() {
                with_work.push(ev);
            }
        }
        assert_eq!(
            with_work,
            vec![lines(&format!(
                "call {m}.work
                 call {m}.square
                 return {m}.square
                 return {m}.work"
            ))],
            "{b:?} {method}: the child's events"
        );
    }
}

const SHOW_ENV: &str = r#"
print(sorted(k for k in globals() if k.startswith("__")))
import sys
print(repr(sys.argv))
print(repr(sys.path[0]))
print(__name__, __file__, __spec__ is None, type(__loader__).__name__, __package__)
print(sys.modules["__main__"] is sys.modules[__name__])
"#;

#[test]
fn python_m_culprit_trace_sets_argv_main_and_path_like_python() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("show.py"), SHOW_ENV).unwrap();
    std::fs::write(sub.join("__init__.py"), "").unwrap();
    let plain = |args: &[&str]| {
        let mut c = Command::new("python3");
        c.current_dir(dir.path()).args(args);
        let r = tests::run_with_deadline(&mut c, Duration::from_secs(30));
        r.assert_success("plain python3");
        r.stdout
    };
    for b in backends() {
        let command = "import sys, __main__; print(sorted(vars(__main__)), __main__.__loader__, \
                       sys.argv, repr(sys.path[0]), __name__)";
        for args in [
            vec!["sub/show.py", "a", "b c"],
            vec!["-m", "sub.show", "x", "-m"],
            vec!["-c", command, "y", "-c"],
        ] {
            let want = plain(&args);
            let mut shim_args = vec!["-m", "culprit_trace"];
            shim_args.extend(&args);
            let (r, t) = traced(b, dir.path(), &shim_args, false);
            r.assert_success(&format!("{b:?} {shim_args:?}"));
            assert_eq!(r.stdout, want, "{b:?} {args:?}: what the program sees");
            assert!(
                t.streams
                    .keys()
                    .any(|&k| !t.render(k, &|n: &str| n == "__main__.<module>").is_empty()),
                "{b:?} {args:?}: the program's module body was not traced"
            );
        }
    }
}

#[test]
fn without_libtrace_the_shim_says_why_and_runs_nothing() {
    let shim = shim();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.py"), "print('ran')\n").unwrap();
    let mut c = Command::new("python3");
    c.current_dir(dir.path())
        .args(["-m", "culprit_trace", "p.py"])
        .env("PYTHONUSERBASE", &shim.userbase)
        .env("CULPRIT_BIN", "")
        .env_remove("CULPRIT_POOL")
        .env_remove("LD_PRELOAD");
    let r = tests::run_with_deadline(&mut c, Duration::from_secs(30));
    assert_eq!(r.status.code(), Some(2), "{r:?}");
    assert!(r.stderr.contains("CULPRIT_POOL is unset"), "{}", r.stderr);
    assert!(!r.stdout.contains("ran"));
    // Not under `culprit record`: an ordinary python3 run is untouched by the .pth hook.
    let mut c = Command::new("python3");
    c.current_dir(dir.path())
        .args(["-c", "import sys; print('culprit_trace' in sys.modules)"])
        .env("PYTHONUSERBASE", &shim.userbase)
        .env_remove("CULPRIT_POOL");
    let r = tests::run_with_deadline(&mut c, Duration::from_secs(30));
    r.assert_success("plain python3 with the shim installed");
    assert_eq!(r.stdout.trim(), "False");
}

/// A program using `sys.setprofile` / `threading.setprofile` itself (and a profile
/// function that raises): it sees exactly what it sees without the shim, and the shim
/// records on.
const OWN_PROFILER: &str = r#"
import sys, threading
seen = []
def prof(frame, event, arg):
    if frame.f_code.co_name in ("work", "inner") or event.startswith("c_") and getattr(arg, "__name__", "") == "abs":
        seen.append((threading.current_thread().name, event, frame.f_code.co_name))
def inner(x):
    return abs(x)
def work():
    return inner(-1)
def boom(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "inner":
        raise RuntimeError("profiler failed")
sys.setprofile(prof)
print(sys.getprofile() is prof)
work()
threading.setprofile(prof)
t = threading.Thread(target=work, name="T"); t.start(); t.join()
sys.setprofile(None)
print(sys.getprofile())
work()
sys.setprofile(boom)
try:
    work()
except RuntimeError as e:
    print("raised:", e, sys.getprofile())
work()
for s in seen:
    print(s)
"#;

#[test]
fn the_programs_own_profile_function_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("prof.py"), OWN_PROFILER).unwrap();
    let mut c = Command::new("python3");
    c.current_dir(dir.path()).arg("prof.py");
    let plain = tests::run_with_deadline(&mut c, Duration::from_secs(30));
    plain.assert_success("plain prof.py");
    assert!(
        plain.stdout.contains("raised: profiler failed None"),
        "{}",
        plain.stdout
    );
    for b in backends() {
        let (r, t) = traced(b, dir.path(), &["prof.py"], true);
        r.assert_success(&format!("{b:?} prof.py"));
        assert_eq!(
            r.stdout, plain.stdout,
            "{b:?}: what the program's profiler saw"
        );
        let keep = |n: &str| n == "__main__.work";
        let per_thread: Vec<usize> = t
            .streams
            .keys()
            .map(|&k| t.render(k, &keep).len())
            .filter(|&n| n > 0)
            .collect();
        // Main thread: work() 4 times (call + return or exception + unwind each, the third
        // one raising); thread T: once.
        let mut got = per_thread.clone();
        got.sort();
        assert_eq!(got, vec![2, 9], "{b:?}: {per_thread:?}");
    }
}

#[test]
fn the_pure_python_fallback_records_the_same_calls_and_says_it_is_used() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("scenario.py"), SCENARIO).unwrap();
    let shim = shim();
    let out_dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("python3");
    cmd.current_dir(dir.path())
        .arg("scenario.py")
        .env("PYTHONUSERBASE", &shim.userbase)
        .env("CULPRIT_PY_FALLBACK", "1")
        .env("STANDIN_OUT", out_dir.path())
        .env("CULPRIT_POOL", out_dir.path().join("pool"))
        .env("LD_PRELOAD", standin());
    let r = tests::run_with_deadline(&mut cmd, Duration::from_secs(120));
    assert_eq!(r.status.code(), Some(1), "{r:?}");
    assert!(
        r.stderr.contains("traced by the pure-Python fallback"),
        "the fallback must say it is used:\n{}",
        r.stderr
    );
    let t = read_standin(out_dir.path());
    // sys.setprofile cannot tell an exception exit from a return: no `exception` entries,
    // `return` instead of `unwind`; builtins are not compared (named after the class they
    // were looked up on).
    let fallback = |want: &str| -> Vec<String> {
        lines(want)
            .into_iter()
            .filter(|l| !l.starts_with("exception") && !l.starts_with("c_"))
            .map(|l| l.replace("unwind ", "return "))
            .collect()
    };
    let keep = |n: &str| n.starts_with("__main__.");
    let mut got: Vec<Vec<String>> = t
        .streams
        .keys()
        .map(|&k| t.render(k, &keep))
        .filter(|v| !v.is_empty())
        .collect();
    got.sort();
    let mut want = vec![
        fallback(MAIN),
        fallback(THREAD),
        fallback(FORK_CHILD),
        fallback(SUBPROCESS),
    ];
    want.sort();
    assert_eq!(got, want);
}

/// Standalone `python3 -m culprit_trace prog.py` (no `culprit record` around it): the shim
/// re-executes itself under `culprit record`, and the trace directory holds the program.
#[test]
fn standalone_python_m_culprit_trace_records_through_culprit_record() {
    if tests::libtrace_or_skip("standalone_python_m_culprit_trace").is_none() {
        return;
    }
    let culprit = tests::culprit();
    let shim = shim();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("p.py"),
        "import os\ndef hello():\n    print('ran', '_CULPRIT_TRACE_REEXEC' in os.environ)\nhello()\n",
    )
    .unwrap();
    let mut c = Command::new("python3");
    c.current_dir(dir.path())
        .args(["-m", "culprit_trace", "p.py"])
        .env("PYTHONUSERBASE", &shim.userbase)
        .env("CULPRIT_BIN", &culprit)
        .env_remove("CULPRIT_POOL")
        .env_remove("LD_PRELOAD");
    let r = tests::run_with_deadline(&mut c, Duration::from_secs(60));
    r.assert_success("python3 -m culprit_trace p.py (standalone)");
    assert!(r.stdout.contains("ran False"), "{}", r.stdout);
    let trace = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.is_dir()
                && p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("culprit-")
        })
        .unwrap_or_else(|| panic!("no trace directory written: {r:?}"));
    let dump = tests::run_with_deadline(
        Command::new(&culprit).arg("dump").arg("--json").arg(&trace),
        Duration::from_secs(60),
    );
    dump.assert_success("culprit dump");
    let calls: Vec<String> = tests::parse_json_lines(&dump.stdout)
        .into_iter()
        .filter(|v| v["kind"] == "py_call")
        .map(|v| v["name"].as_str().unwrap_or("").to_string())
        .filter(|n| n.starts_with("__main__."))
        .collect();
    assert_eq!(
        calls,
        vec!["__main__.<module>", "__main__.hello"],
        "{trace:?}"
    );
}

/// A program that raises the recursion limit and recurses deeply, in the main thread and in
/// a thread with a 1 MiB stack: in frames mode (calls recurse in C) it must get
/// RecursionError, never a crash; in profile mode it runs exactly as untraced.
const DEEP: &str = r#"
import sys, threading
sys.setrecursionlimit(1000000)
def r(n):
    return 0 if n == 0 else 1 + r(n - 1)
def probe():
    for d in (10000, 50000, 200000):
        try:
            print(d, r(d), flush=True)
        except RecursionError as e:
            print(d, "RecursionError", e, flush=True)
probe()
threading.stack_size(1 << 20)
t = threading.Thread(target=probe); t.start(); t.join()
print(r(100))
"#;

#[test]
fn deep_recursion_never_crashes_the_program() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("deep.py"), DEEP).unwrap();
    let mut c = Command::new("python3");
    c.current_dir(dir.path()).arg("deep.py");
    let plain = tests::run_with_deadline(&mut c, Duration::from_secs(60));
    plain.assert_success("plain deep.py");
    for mode in ["profile", "frames"] {
        let (r, _t) = traced_mode(Backend::Standin, mode, dir.path(), &["deep.py"], true);
        r.assert_success(&format!("deep.py [{mode}]"));
        assert!(r.stdout.ends_with("100\n"), "{mode}: {}", r.stdout);
        if mode == "profile" {
            assert_eq!(r.stdout, plain.stdout, "profile mode changes nothing");
        } else {
            assert!(r.stdout.starts_with("10000 10000\n"), "{}", r.stdout);
        }
    }
}

const GREENLETS: &str = r#"
import greenlet

def child(n):
    inner(n)
    return n

def inner(n):
    main.switch(n)
    leaf()

def leaf():
    pass

main = greenlet.getcurrent()

def run():
    a, b = greenlet.greenlet(child), greenlet.greenlet(child)
    print(a.switch(1), b.switch(2), a.switch(), b.switch(), flush=True)

run()
"#;

/// Greenlets swap the thread's Python stack with no profile event: the shim reports each
/// switch as the suspension of the greenlet switched out (its open calls return with aux 2)
/// and the resumption of the one switched in (its calls made again), so a thread's entries
/// nest whatever the greenlets do.
#[test]
fn greenlet_switches_are_suspensions_and_resumptions() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gl.py"), GREENLETS).unwrap();
    let own = |n: &str| n.starts_with("__main__.") && n != "__main__.<module>";
    let (s, r, c, g) = ("suspend", "return", "call", "__main__.");
    let step = |label: &str, f: &str| format!("{label} {g}{f}");
    let resume = |fs: &[&str]| fs.iter().map(|f| step(c, f)).collect::<Vec<_>>();
    let suspend = |fs: &[&str]| fs.iter().map(|f| step(s, f)).collect::<Vec<_>>();
    let finish = [
        step(c, "leaf"),
        step(r, "leaf"),
        step(r, "inner"),
        step(r, "child"),
    ];
    let mut want = vec![step(c, "run")];
    for _ in 0..2 {
        // a.switch(1) / b.switch(2): run suspended, the child starts and switches back.
        want.extend(suspend(&["run"]));
        want.extend(resume(&["child", "inner"]));
        want.extend(suspend(&["inner", "child"]));
        want.extend(resume(&["run"]));
    }
    for _ in 0..2 {
        // a.switch() / b.switch(): the child resumed where it was, ends, back to run.
        want.extend(suspend(&["run"]));
        want.extend(resume(&["child", "inner"]));
        want.extend(finish.iter().cloned());
        want.extend(resume(&["run"]));
    }
    want.push(step(r, "run"));
    for mode in ["profile", "frames"] {
        let (out, t) = traced_mode(Backend::Real, mode, dir.path(), &["gl.py"], true);
        out.assert_success(&format!("gl.py [{mode}]"));
        assert_eq!(
            out.stdout, "1 2 1 2\n",
            "{mode}: the program runs as untraced"
        );
        // The script's thread (the interpreter may be started through shims of pyenv).
        let main = *t
            .streams
            .keys()
            .find(|&&k| !t.render(k, &own).is_empty())
            .unwrap_or_else(|| panic!("{mode}: no thread ran the script"));
        let got = t.render(main, &own);
        assert_eq!(got, want, "{mode}: the script's entries");
        // Every entry of the thread nests, the greenlet's C calls included.
        let all = t.render(main, &|_| true);
        let mut open: Vec<&str> = Vec::new();
        for l in &all {
            let (label, name) = l.split_once(' ').unwrap();
            match label {
                "call" | "c_call" => open.push(name),
                "exception" => {}
                _ => {
                    if let Some(top) = open.pop() {
                        assert_eq!(top, name, "{mode}: {l} closes {top}");
                    }
                }
            }
        }
    }
}

// ---- every CPython of the machine, through the no-install bootstrap (issue 17) --------

/// The CPython 3.9–3.13 interpreters of this machine (pyenv's, else `python3.X` on `PATH`),
/// by version; the versions it lacks are printed as skipped.
fn interpreters() -> Vec<(String, PathBuf)> {
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pyenv")))
        .map(|r| r.join("versions"));
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    for minor in 9..=13 {
        let v = format!("3.{minor}");
        let from_pyenv = pyenv.as_ref().and_then(|d| {
            let mut c: Vec<(u32, PathBuf)> = std::fs::read_dir(d)
                .ok()?
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    let patch = n.strip_prefix(&format!("{v}."))?.parse().ok()?;
                    let exe = e.path().join("bin").join(format!("python{v}"));
                    exe.is_file().then_some((patch, exe))
                })
                .collect();
            c.sort();
            c.pop().map(|(_, p)| p)
        });
        let from_path = || {
            std::env::split_paths(&std::env::var_os("PATH")?)
                .map(|d| d.join(format!("python{v}")))
                .find(|p| p.is_file())
        };
        match from_pyenv.or_else(from_path) {
            Some(p) => found.push((v, p)),
            None => skipped.push(v),
        }
    }
    if !skipped.is_empty() {
        eprintln!(
            "python_trace: SKIPPED CPython {} (not on this machine)",
            skipped.join(", ")
        );
    }
    found
}

/// A bootstrap copy of the shim in a private cache (what `culprit record` prepares).
fn boot() -> &'static (tempfile::TempDir, python_hook::Prepared) {
    static B: OnceLock<(tempfile::TempDir, python_hook::Prepared)> = OnceLock::new();
    B.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = python_hook::cache::prepare_in(dir.path()).expect("prepare the bootstrap copy");
        (dir, p)
    })
}

/// `python` finding the shim through the bootstrap copy on `PYTHONPATH`, nothing installed.
fn boot_cmd(python: &Path) -> Command {
    let mut c = Command::new(python);
    c.envs(boot().1.env(None))
        .env("PYTHONNOUSERSITE", "1")
        .env_remove("PYTHONUSERBASE");
    c
}

/// The exception types of the PyExc entries of the script's own functions.
fn exception_types(t: &Trace) -> Vec<String> {
    let mut types = Vec::new();
    for (&(pid, _), entries) in &t.streams {
        for e in entries {
            if let Entry::Fn {
                kind: Kind::PyExc,
                caller,
                callee,
                ..
            } = *e
            {
                if t.codes[&(pid, callee as u32)].1.starts_with("__main__.") {
                    let (k, n) = t.codes.get(&(pid, caller as u32)).cloned().unwrap_or((
                        CodeKind::PyExcType,
                        format!("<index {caller} without a record>"),
                    ));
                    assert_eq!(k, CodeKind::PyExcType);
                    types.push(n);
                }
            }
        }
    }
    types
}

#[test]
fn every_cpython_records_the_exact_scenario_in_each_of_its_modes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("scenario.py"), SCENARIO).unwrap();
    let b = *backends().last().unwrap();
    for (v, python) in interpreters() {
        let minor: u32 = v[2..].parse().unwrap();
        // The prebuild `culprit record` does, outside the traced tree.
        let ext = boot()
            .1
            .prebuild(&python)
            .unwrap_or_else(|e| panic!("{v}: {e}"));
        assert!(ext.is_file(), "{v}: {ext:?}");
        let mut modes = vec!["profile"];
        match minor {
            11 => modes.push("frames"),
            12.. => modes.push("monitor"),
            _ => {}
        }
        for mode in modes {
            let (r, t) = traced_cmd(
                b,
                boot_cmd(&python),
                mode,
                dir.path(),
                &["scenario.py"],
                true,
            );
            let how = format!("CPython {v} scenario.py");
            check_scenario_mode(b, mode, &how, &r, &t);
            let types = exception_types(&t);
            // Profile mode cannot see the exception in flight (index 0, no record).
            if mode != "profile" {
                // Main thread: fails() caught (1), then uncaught through fails, uncaught,
                // main and <module> (4); the thread: fails() caught (1).
                assert_eq!(types.len(), 6, "{how} [{mode}]: {types:?}");
                assert!(
                    types.iter().all(|n| n == "builtins.KeyError"),
                    "{how}: {types:?}"
                );
            }
        }
        // The default mode, launched as `python -m culprit_trace`.
        let (r, t) = traced_cmd(
            b,
            boot_cmd(&python),
            "",
            dir.path(),
            &["-m", "culprit_trace", "scenario.py"],
            false,
        );
        let default = if minor >= 12 {
            "monitor"
        } else if minor == 11 {
            "frames"
        } else {
            "profile"
        };
        check_scenario_mode(b, default, &format!("CPython {v} -m culprit_trace"), &r, &t);
    }
}

/// `CULPRIT_CLOCK=sampled` (the gcc hooks' sampled clock, honoured by the shim): the same
/// exact events, and every thread's Python timestamps strictly increasing.
#[test]
fn the_sampled_clock_keeps_the_events_and_strictly_increasing_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("scenario.py"), SCENARIO).unwrap();
    let b = *backends().last().unwrap();
    let mut cmd = boot_cmd(Path::new("python3"));
    cmd.env("CULPRIT_CLOCK", "sampled:8");
    let (r, t) = traced_cmd(b, cmd, "profile", dir.path(), &["scenario.py"], true);
    check_scenario_mode(b, "profile", "CULPRIT_CLOCK=sampled:8", &r, &t);
    let mut interpolated = 0;
    for (key, entries) in &t.streams {
        let ts: Vec<u64> = entries
            .iter()
            .filter_map(|e| match *e {
                Entry::Fn { tsc, kind, .. } | Entry::Ret { tsc, kind, .. }
                    if matches!(
                        kind,
                        Kind::PyCall
                            | Kind::PyReturn
                            | Kind::PyExc
                            | Kind::PyCCall
                            | Kind::PyCReturn
                    ) =>
                {
                    Some(tsc)
                }
                _ => None,
            })
            .collect();
        assert!(
            ts.windows(2).all(|w| w[0] < w[1]),
            "{key:?}: timestamps not strictly increasing"
        );
        interpolated += ts.windows(2).filter(|w| w[1] == w[0] + 1).count();
    }
    // Sampled: most entries carry the previous stamp + 1 instead of a reading.
    assert!(interpolated > 100, "{interpolated} interpolated timestamps");
}
