//! Python tracing with nothing installed (issue 17): `culprit record` prepares the shim in a
//! per-user cache (`python_hook`), and every CPython process of the traced tree — in a fresh
//! virtualenv, started through a shell that `culprit` cannot see through, or an interpreter
//! too old to trace — records its functions or says in one line why not. The program's own
//! `sitecustomize` still runs, and its `sys.path` is its own.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Counts its own `fib` calls and says whether the bootstrap directory shows on sys.path.
const FIB: &str = r#"
import sys
calls = 0
def fib(n):
    global calls
    calls += 1
    return n if n < 2 else fib(n - 1) + fib(n - 2)
fib(12)
print("calls", calls)
print("bootstrap on sys.path", any("culprit" in p for p in sys.path))
"#;

/// `culprit record -o DIR -- CMD…` with a private cache and no Python variables inherited.
fn record(cache: &Path, out: &Path, cmd: &[&std::ffi::OsStr]) -> tests::RunOutput {
    let mut c = Command::new(tests::culprit());
    c.arg("record")
        .arg("-o")
        .arg(out)
        .arg("--")
        .args(cmd)
        .env("CULPRIT_CACHE_DIR", cache)
        .env("PYTHONNOUSERSITE", "1")
        .env_remove("PYTHONPATH")
        .env_remove("PYTHONUSERBASE")
        .env_remove("CULPRIT_PY_MODE")
        .env_remove("LD_PRELOAD");
    tests::run_with_deadline(&mut c, Duration::from_secs(120))
}

/// The `py_call` entries of the trace named `name`.
fn py_calls(trace: &Path, name: &str) -> usize {
    let dump = tests::run_with_deadline(
        Command::new(tests::culprit())
            .arg("dump")
            .arg("--json")
            .arg(trace),
        Duration::from_secs(60),
    );
    dump.assert_success("culprit dump");
    tests::parse_json_lines(&dump.stdout)
        .iter()
        .filter(|v| v["kind"] == "py_call" && v["name"] == name)
        .count()
}

fn program_calls(stdout: &str) -> usize {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("calls "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("the program printed no count: {stdout}"))
}

#[test]
fn a_fresh_virtualenv_records_every_fib_call_by_name_with_nothing_installed() {
    if tests::libtrace_or_skip("python_noinstall (fresh virtualenv)").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("venv");
    let made = tests::run_with_deadline(
        Command::new("python3")
            .args(["-m", "venv", "--without-pip"])
            .arg(&venv),
        Duration::from_secs(60),
    );
    made.assert_success("python3 -m venv");
    // The virtualenv's own sitecustomize, which the bootstrap must not hide.
    let site = tests::run_with_deadline(
        Command::new(venv.join("bin/python")).args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ]),
        Duration::from_secs(30),
    );
    site.assert_success("venv python");
    let purelib = PathBuf::from(site.stdout.trim());
    std::fs::write(
        purelib.join("sitecustomize.py"),
        "import sys\nsys.stderr.write('own sitecustomize ran\\n')\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("fib.py"), FIB).unwrap();
    let out = dir.path().join("trace");
    let cache = dir.path().join("cache");
    let python = venv.join("bin/python");
    let r = record(
        &cache,
        &out,
        &[python.as_os_str(), dir.path().join("fib.py").as_os_str()],
    );
    r.assert_success("culprit record -- $VENV/bin/python fib.py");
    let n = program_calls(&r.stdout);
    assert_eq!(n, 465, "fib(12) makes 465 calls");
    assert_eq!(py_calls(&out, "__main__.fib"), n, "{}", r.stderr);
    assert!(
        r.stdout.contains("bootstrap on sys.path False"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("own sitecustomize ran"),
        "the program's own sitecustomize must run:\n{}",
        r.stderr
    );
    // The summary lists the process with its Python functions counted.
    let line = r
        .stderr
        .lines()
        .find(|l| l.contains("python") && l.contains(" / "))
        .unwrap_or_else(|| panic!("no per-process line:\n{}", r.stderr));
    let py: u64 = line
        .rsplit(" / ")
        .next()
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(py >= n as u64, "{line}");
    assert!(!line.contains("no Python function"), "{line}");
    // Nothing was installed: the extension is in the private cache, built for this ABI.
    let built: Vec<_> = walk(&cache)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("_native"))
        })
        .collect();
    assert_eq!(built.len(), 1, "{built:?}");
}

fn walk(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(d) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// The newest pyenv interpreter of version `v` (3.X), if the machine has one.
fn pyenv_python(v: &str) -> Option<PathBuf> {
    let root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pyenv")))?;
    let mut c: Vec<(u32, PathBuf)> = std::fs::read_dir(root.join("versions"))
        .ok()?
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let patch = n.strip_prefix(&format!("{v}."))?.parse().ok()?;
            let exe = e.path().join("bin").join(format!("python{v}"));
            exe.is_file().then_some((patch, exe))
        })
        .collect();
    c.sort();
    c.pop().map(|(_, p)| p)
}

#[test]
fn an_interpreter_started_through_a_shell_builds_its_extension_inside_the_tree() {
    if tests::libtrace_or_skip("python_noinstall (late interpreter)").is_none() {
        return;
    }
    let Some(python) = ["3.13", "3.12", "3.10", "3.9"]
        .iter()
        .find_map(|v| pyenv_python(v))
    else {
        eprintln!("python_noinstall: SKIPPED the late-interpreter test: no pyenv CPython 3.9/3.10/3.12/3.13");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fib.py"), FIB).unwrap();
    let out = dir.path().join("trace");
    // `culprit record -- sh -c …`: culprit cannot tell which interpreter will run.
    let script = format!(
        "exec {} {}",
        python.display(),
        dir.path().join("fib.py").display()
    );
    let r = record(
        &dir.path().join("cache"),
        &out,
        &["sh".as_ref(), "-c".as_ref(), script.as_ref()],
    );
    r.assert_success("culprit record -- sh -c 'exec python fib.py'");
    let n = program_calls(&r.stdout);
    assert_eq!(py_calls(&out, "__main__.fib"), n, "{}", r.stderr);
}

#[test]
fn an_interpreter_too_old_to_trace_says_why_in_one_line_and_runs_unchanged() {
    if tests::libtrace_or_skip("python_noinstall (old interpreter)").is_none() {
        return;
    }
    let Some(python) = pyenv_python("3.8") else {
        eprintln!("python_noinstall: SKIPPED the old-interpreter test: no pyenv CPython 3.8");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("trace");
    let r = record(
        &dir.path().join("cache"),
        &out,
        &[python.as_os_str(), "-c".as_ref(), "print('ran')".as_ref()],
    );
    r.assert_success("culprit record -- python3.8 -c …");
    assert_eq!(r.stdout, "ran\n");
    let said: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("Python functions not traced"))
        .collect();
    assert_eq!(said.len(), 1, "{}", r.stderr);
    assert!(
        said[0].contains(&*python.to_string_lossy()) && said[0].contains("3.8"),
        "{}",
        said[0]
    );
    assert!(
        r.stderr.contains("no Python function"),
        "the summary must point at the untraced Python process:\n{}",
        r.stderr
    );
}
