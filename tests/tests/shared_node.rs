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
        skip(test, "the other-user cases", "not root (runuser needs root)");
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
    assert!(wait_until(DEADLINE, || started.exists()), "the program never started");
    as_nobody(&format!("truncate -s 0 {}", pool.display()));
    std::fs::write(&flag, "").unwrap();
    let status = child.wait_for(DEADLINE).expect("the program ends");
    let stderr = std::fs::read_to_string(&err_file).unwrap();
    let mut stdout = String::new();
    use std::io::Read;
    child.child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    assert!(
        status.success() && stdout.contains("alive 50"),
        "{status} {stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("tracing disabled") && stderr.contains(&format!("owned by uid {NOBODY}")),
        "{stderr}"
    );
}
