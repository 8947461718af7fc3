//! Culprit on a shared node (issue 27): what another local user can do to a recording run
//! by root — plant code in the Python cache, plant links in an output directory, hand
//! over or shrink a pool, read what is recorded — is refused or survived.
//!
//! The hostile user is `nobody`, through `runuser`; the tests run as root (as in CI) and
//! skip with a `TEST: SKIPPED` line otherwise. Each works under its own temporary
//! directory holding a `tmp/` made like `/tmp` (root's, mode 1777), never in the real
//! `/tmp` or `/dev/shm`.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tests::*;

const DEADLINE: Duration = Duration::from_secs(120);
const NOBODY: u32 = 65534;

fn root_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        skip(
            test,
            "the other-user cases",
            "not root (runuser needs root)",
        );
    }
    root
}

/// A temporary directory (mode 0755) holding `tmp/`, root's and mode 1777 like `/tmp`.
fn node() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let tmp = t.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
    (t, tmp)
}

/// Runs `script` with `sh -c` as `nobody`; panics unless it succeeds.
fn as_nobody(script: &str) {
    let r = run_with_deadline(
        Command::new("runuser").args(["-u", "nobody", "--", "sh", "-c", script]),
        DEADLINE,
    );
    r.assert_success(&format!("as nobody: {script}"));
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

fn culprit_cmd() -> Command {
    let mut c = Command::new(culprit());
    c.env_remove("CULPRIT_POOL").env_remove("LD_PRELOAD");
    c
}

fn python() -> Option<PathBuf> {
    ["/usr/bin/python3", "/usr/local/bin/python3"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// Defect 1: with `HOME` unset, root's Python cache went to `/tmp/culprit-cache-0`
/// whatever its owner, and root ran the `sitecustomize.py` another user planted there.
#[test]
fn a_planted_python_cache_is_not_run_by_root() {
    let test = "a_planted_python_cache_is_not_run_by_root";
    if !root_or_skip(test) {
        return;
    }
    let Some(py) = python() else {
        skip(test, "all", "no /usr/bin/python3");
        return;
    };
    let (t, tmp) = node();
    let planted = tmp.join("culprit-cache-0");
    let boot = planted.join(format!("python/{}/boot", python_hook::sources::key()));
    let pwned = tmp.join("PWNED");
    as_nobody(&format!(
        "mkdir -p {b} {b}/../ext {b}/../src && echo 'open(\"{p}\",\"w\").write(str(__import__(\"os\").getuid()))' > {b}/sitecustomize.py",
        b = boot.display(),
        p = pwned.display()
    ));
    let r = run_with_deadline(
        culprit_cmd()
            .arg("record")
            .arg("-o")
            .arg(t.path().join("out"))
            .arg("--")
            .arg(&py)
            .args(["-c", "pass"])
            .env_remove("HOME")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("CULPRIT_CACHE_DIR")
            .env_remove("PYTHONPATH")
            .env("TMPDIR", &tmp),
        DEADLINE,
    );
    r.assert_success("culprit record with HOME unset");
    assert!(
        !pwned.exists(),
        "root ran the planted sitecustomize.py: {}\n{}",
        std::fs::read_to_string(&pwned).unwrap_or_default(),
        r.stderr
    );
    assert!(
        r.stderr.contains(&format!(
            "{}: not used: owned by uid {NOBODY}",
            planted.display()
        )),
        "{}",
        r.stderr
    );
}

/// Defect 1, the other side: a daemon's user with `HOME=/root` (not its own) gets a
/// private cache instead of "cannot create /root/.cache/culprit".
#[test]
fn a_home_of_another_user_is_not_the_cache() {
    let test = "a_home_of_another_user_is_not_the_cache";
    if !root_or_skip(test) {
        return;
    }
    let Some(py) = python() else {
        skip(test, "all", "no /usr/bin/python3");
        return;
    };
    let (_t, tmp) = node();
    let out = tmp.join("out");
    let script = format!(
        "cd {tmp} && HOME=/root TMPDIR={tmp} CULPRIT_PY_AUTO=1 {culprit} record -o {out} -- {py} -c pass",
        tmp = tmp.display(),
        culprit = culprit().display(),
        out = out.display(),
        py = py.display()
    );
    let r = run_with_deadline(
        Command::new("runuser")
            .args(["-u", "nobody", "--", "sh", "-c", &script])
            .env_remove("XDG_CACHE_HOME")
            .env_remove("CULPRIT_CACHE_DIR")
            .env_remove("PYTHONPATH"),
        DEADLINE,
    );
    r.assert_success("culprit record as nobody with HOME=/root");
    assert!(!r.stderr.contains("cannot create"), "{}", r.stderr);
    let cache = tmp.join(format!("culprit-cache-{NOBODY}"));
    let m = std::fs::metadata(&cache).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o777), (NOBODY, 0o700));
}

/// Defect 2: `record -o` into a directory another user made (mode 777, with links to
/// root's files planted in it) wrote through the links.
#[test]
fn an_output_directory_of_another_user_is_refused() {
    let test = "an_output_directory_of_another_user_is_refused";
    if !root_or_skip(test) {
        return;
    }
    let (t, tmp) = node();
    let secret = t.path().join("secret");
    std::fs::write(&secret, "root's\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let rootdir = t.path().join("rootdir");
    std::fs::create_dir(&rootdir).unwrap();
    let out = tmp.join("out");
    as_nobody(&format!(
        "mkdir {o} && chmod 777 {o} && ln -s {s} {o}/cpu.tsv && ln -s {d} {o}/chunks",
        o = out.display(),
        s = secret.display(),
        d = rootdir.display()
    ));
    let record = |out: &Path| {
        run_with_deadline(
            culprit_cmd()
                .arg("record")
                .arg("-o")
                .arg(out)
                .args(["--", "sleep", "0.3"]),
            DEADLINE,
        )
    };
    let r = record(&out);
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "{}: not used: owned by uid {NOBODY}",
            out.display()
        )),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root's\n");
    assert_eq!(std::fs::read_dir(&rootdir).unwrap().count(), 0);
    // Root's own directory, but writable by every user: refused too.
    std::os::unix::fs::chown(&out, Some(0), Some(0)).unwrap();
    let r = record(&out);
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("mode 0777"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root's\n");
    // Below a directory another user owns: refused (they could swap it for a link).
    let theirs = tmp.join("theirs");
    as_nobody(&format!("mkdir -m 755 {}", theirs.display()));
    let r = record(&theirs.join("t"));
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("above it"), "{}", r.stderr);
}

/// Defect 3: a pool another user owns was mapped, and its owner killed the traced
/// program with SIGBUS by truncating it. Now the program runs untraced, and lives.
#[test]
fn a_pool_of_another_user_is_not_mapped() {
    let test = "a_pool_of_another_user_is_not_mapped";
    if !root_or_skip(test) {
        return;
    }
    let Some(lib) = libtrace_or_skip(test) else {
        return;
    };
    let (_t, tmp) = node();
    let pool = tmp.join("nob.pool");
    {
        let cfg = bufpool::PoolConfig {
            n_subbufs: 8,
            subbuf_size: 8192,
            calibration: Duration::from_millis(1),
            ..Default::default()
        };
        bufpool::Pool::create(&pool, &cfg).unwrap();
    }
    std::os::unix::fs::chown(&pool, Some(NOBODY), Some(NOBODY)).unwrap();
    let flag = tmp.join("truncated");
    let started = tmp.join("started");
    // Writes (traced calls) until told the pool was truncated, then 50 more.
    let prog = compile_c(
        "writer",
        r#"
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open("/dev/null", O_WRONLY);
    int after = -1;
    for (int i = 0; i < 20000 && after < 50; i++) {
        if (write(fd, "x", 1) != 1) return 3;
        if (i == 0) close(open(argv[2], O_CREAT | O_WRONLY, 0600));
        if (after >= 0) after++;
        else if (access(argv[1], F_OK) == 0) after = 0;
        usleep(1000);
    }
    printf("alive %d\n", after);
    return 0;
}
"#,
        &[],
    );
    let err_file = tmp.join("stderr");
    let mut child = Guarded::spawn(
        Command::new(&prog.path)
            .arg(&flag)
            .arg(&started)
            .env("LD_PRELOAD", &lib)
            .env("CULPRIT_POOL", &pool)
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&err_file).unwrap()),
    );
    assert!(
        wait_until(DEADLINE, || started.exists()),
        "the program never started"
    );
    as_nobody(&format!("truncate -s 0 {}", pool.display()));
    std::fs::write(&flag, "").unwrap();
    let status = child.wait_for(DEADLINE).expect("the program ends");
    let stderr = std::fs::read_to_string(&err_file).unwrap();
    let mut stdout = String::new();
    use std::io::Read;
    child
        .child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert!(
        status.success() && stdout.contains("alive 50"),
        "{status} {stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("tracing disabled") && stderr.contains(&format!("owned by uid {NOBODY}")),
        "{stderr}"
    );
}

/// Defect 13: the pool and the trace were created 0644 (any user read what root's
/// programs recorded). Now 0600 / 0700, or 0640 / 0750 with `--shared-group`.
#[test]
fn pool_and_trace_are_private_unless_shared() {
    let test = "pool_and_trace_are_private_unless_shared";
    if !root_or_skip(test) {
        return;
    }
    if libtrace_or_skip(test).is_none() {
        return;
    }
    let (t, tmp) = node();
    for (shared, fmode, dmode) in [(false, 0o600, 0o700), (true, 0o640, 0o750)] {
        let pool = tmp.join(format!("p{shared}.pool"));
        let out = t.path().join(format!("rec{shared}"));
        let mut c = culprit_cmd();
        c.arg("record")
            .arg("--keep-pool")
            .arg("--pool")
            .arg(&pool)
            .arg("-o")
            .arg(&out);
        if shared {
            c.arg("--shared-group");
        }
        let r = run_with_deadline(
            c.args(["--", "sh", "-c", "echo hi > /dev/null; sleep 0.3"]),
            DEADLINE,
        );
        r.assert_success("culprit record");
        assert_eq!(mode(&pool), fmode, "pool (shared: {shared})");
        assert_eq!(mode(&out), dmode, "trace directory (shared: {shared})");
        let chunks = out.join("chunks");
        assert_eq!(mode(&chunks), dmode, "chunks/ (shared: {shared})");
        let mut files = vec![out.join("manifest.json")];
        files.extend(
            std::fs::read_dir(&chunks)
                .unwrap()
                .map(|e| e.unwrap().path()),
        );
        if out.join("cpu.tsv").exists() {
            files.push(out.join("cpu.tsv"));
        }
        assert!(files.len() >= 2, "{files:?}");
        for f in &files {
            assert_eq!(mode(f), fmode, "{} (shared: {shared})", f.display());
        }
        if !shared {
            // And another user indeed cannot read it.
            let r = run_with_deadline(
                Command::new("runuser")
                    .args(["-u", "nobody", "--", "cat"])
                    .arg(&files[0]),
                DEADLINE,
            );
            assert!(!r.status.success(), "nobody read {}", files[0].display());
        }
        let _ = std::fs::remove_file(&pool);
    }
}

/// Output files the user names (`iosample -o`, `learn -o`, `--html`…) in a directory
/// others can write: a link or a file another user planted at the name is refused, never
/// written through (it would overwrite what the link points to, or hand them the output).
#[test]
fn a_planted_output_file_is_not_written_through() {
    let test = "a_planted_output_file_is_not_written_through";
    if !root_or_skip(test) {
        return;
    }
    let (t, tmp) = node();
    let secret = t.path().join("secret");
    std::fs::write(&secret, "root's\n").unwrap();
    let link = tmp.join("io.cios");
    let theirs = tmp.join("theirs.cios");
    as_nobody(&format!(
        "ln -s {} {} && touch {}",
        secret.display(),
        link.display(),
        theirs.display()
    ));
    for (out, why) in [
        (&link, "a symbolic link owned by uid"),
        (&theirs, "owned by uid"),
    ] {
        let r = run_with_deadline(
            culprit_cmd()
                .args(["iosample", "-o"])
                .arg(out)
                .args(["--", "true"]),
            DEADLINE,
        );
        assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
        assert!(
            r.stderr.contains(&out.display().to_string()) && r.stderr.contains(why),
            "{}",
            r.stderr
        );
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root's\n");
    assert_eq!(std::fs::metadata(&theirs).unwrap().len(), 0);
    // The user's own file and /dev/null are written as before.
    let mine = tmp.join("mine.cios");
    std::fs::write(&mine, "old").unwrap();
    for out in [&mine, &PathBuf::from("/dev/null")] {
        let r = run_with_deadline(
            culprit_cmd()
                .args(["iosample", "-o"])
                .arg(out)
                .args(["--", "true"]),
            DEADLINE,
        );
        r.assert_success("iosample into the user's own file");
    }
    assert!(std::fs::read(&mine).unwrap().starts_with(b"CULPIOS"));
}

/// `culprit repair` truncates and removes chunk files: in a trace directory another user
/// controls, a `chunks` linked to root's directory made root remove its small `*.chunk`
/// files. Now repair refuses a directory (or `chunks/`) another user controls.
#[test]
fn repair_refuses_a_directory_another_user_controls() {
    let test = "repair_refuses_a_directory_another_user_controls";
    if !root_or_skip(test) {
        return;
    }
    let (t, tmp) = node();
    let their = tmp.join("t");
    let r = run_with_deadline(
        culprit_cmd()
            .arg("record")
            .arg("-o")
            .arg(&their)
            .args(["--", "true"]),
        DEADLINE,
    );
    r.assert_success("record");
    let rootdir = t.path().join("rootdir");
    std::fs::create_dir(&rootdir).unwrap();
    let victim = rootdir.join("victim.chunk");
    std::fs::write(&victim, b"abc").unwrap();
    // The trace becomes nobody's, and nobody links chunks/ to root's directory.
    let st = Command::new("chown")
        .args(["-R", "nobody"])
        .arg(&their)
        .status()
        .unwrap();
    assert!(st.success());
    as_nobody(&format!(
        "rm -rf {t}/chunks && ln -s {d} {t}/chunks",
        t = their.display(),
        d = rootdir.display()
    ));
    let r = run_with_deadline(culprit_cmd().arg("repair").arg(&their), DEADLINE);
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("owned by uid {NOBODY}")),
        "{}",
        r.stderr
    );
    assert!(victim.exists(), "root's file was removed");
}

/// A project directory the group can write (mode 2770, as on cluster file systems): a
/// trace below it is refused (a group member could swap it for a link) unless the user
/// trusts the group with `--shared-group`, which also makes the trace group-readable.
#[test]
fn a_group_writable_parent_needs_shared_group() {
    let test = "a_group_writable_parent_needs_shared_group";
    if !root_or_skip(test) {
        return;
    }
    let (t, _tmp) = node();
    let proj = t.path().join("proj");
    std::fs::create_dir(&proj).unwrap();
    std::fs::set_permissions(&proj, std::fs::Permissions::from_mode(0o2770)).unwrap();
    let out = proj.join("t");
    let record = |shared: bool| {
        let mut c = culprit_cmd();
        c.arg("record").arg("-o").arg(&out);
        if shared {
            c.arg("--shared-group");
        }
        run_with_deadline(c.args(["--", "true"]), DEADLINE)
    };
    let r = record(false);
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("--shared-group accepts"), "{}", r.stderr);
    assert!(!out.exists(), "a refused run leaves its directory behind");
    let r = record(true);
    r.assert_success("record --shared-group below a group-writable directory");
    // (The set-group-id bit comes from the parent, as for any directory made there.)
    assert_eq!(mode(&out) & 0o777, 0o750);
}
