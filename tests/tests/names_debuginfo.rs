//! Function names that are true (issue 28): a stripped program gets its names and lines
//! back from its separate debug file — found by build ID under a debug root, or by
//! `.gnu_debuglink` — and without it its call sites are `file+0xoffset`, never the nearest
//! symbol; a model learned without debug symbols still matches once they are installed (the
//! key is the address within the file, the name only a label); and a daemon whose middle
//! process exited before it (a double fork) is named from the recorded maps, not by raw
//! addresses.
//!
//! The debug roots searched are set with `CULPRIT_DEBUG_ROOT` (a temporary directory), so
//! nothing is written under the real `/usr/lib/debug`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tests::*;

const DEADLINE: Duration = Duration::from_secs(60);

/// `talk` is static: a stripped program keeps no symbol of it.
const TALKER: &str = r#"
#include <sys/socket.h>
#include <unistd.h>
__attribute__((noinline)) static int talk(int n, int odd) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return -1;
    char b[4] = "abc";
    for (int i = 0; i < n; i++) {
        if (write(sv[0], b, 3) != 3) return -1; /* WRITE_LINE */
        if (read(sv[1], b, 3) != 3) return -1;
    }
    if (odd && (write(sv[0], b, 1) != 1 || read(sv[1], b, 1) != 1)) return -1;
    close(sv[0]);
    close(sv[1]);
    return 0;
}
__attribute__((noinline)) int exported_helper(int x) { return x * 3; }
int main(int argc, char **argv) {
    (void)argv;
    return talk(3, argc > 1) + exported_helper(0);
}
"#;

fn write_line() -> u32 {
    TALKER
        .lines()
        .position(|l| l.contains("WRITE_LINE"))
        .unwrap() as u32
}

fn sh(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn build_id(exe: &Path) -> String {
    let notes = sh(Command::new("readelf").arg("-n").arg(exe), "readelf -n");
    notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("the program has a build ID")
        .trim()
        .to_string()
}

/// The program, stripped, and its debug file split off beside it (`talker.debug`).
fn stripped_talker() -> (CProgram, PathBuf) {
    let prog = compile_c("talker", TALKER, &["-Wl,--build-id"]);
    let debug = prog.dir.path().join("talker.debug");
    sh(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&prog.path)
            .arg(&debug),
        "objcopy --only-keep-debug",
    );
    sh(
        Command::new("strip").arg("--strip-all").arg(&prog.path),
        "strip",
    );
    (prog, debug)
}

fn record(prog: &Path, out: &Path) {
    record_args(prog, out, &[]);
}

fn record_args(prog: &Path, out: &Path, args: &[&str]) {
    run_with_deadline(
        Command::new(culprit())
            .args(["record", "--subbufs", "16", "--subbuf-size", "64K", "-o"])
            .arg(out)
            .arg("--")
            .arg(prog)
            .args(args),
        DEADLINE,
    )
    .assert_success("culprit record");
}

/// `culprit dump --json` with `CULPRIT_DEBUG_ROOT=root`.
fn dump(trace: &Path, root: &Path) -> Vec<serde_json::Value> {
    let d = run_with_deadline(
        Command::new(culprit())
            .env("CULPRIT_DEBUG_ROOT", root)
            .args(["dump", "--json"])
            .arg(trace),
        DEADLINE,
    );
    d.assert_success("culprit dump --json");
    parse_json_lines(&d.stdout)
}

/// The `caller_name` of the program's first `write`.
fn write_caller(lines: &[serde_json::Value]) -> String {
    lines
        .iter()
        .find(|l| l["kind"] == "lib_enter" && l["name"] == "write")
        .and_then(|l| l["caller_name"].as_str())
        .unwrap_or_else(|| panic!("no write with a caller name in {lines:?}"))
        .to_string()
}

#[test]
fn a_stripped_program_gets_its_names_back_from_its_build_id_debug_file() {
    if libtrace_or_skip("names_debuginfo").is_none() {
        return;
    }
    let (prog, debug) = stripped_talker();
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t");
    record(&prog.path, &trace);
    let root = tmp.path().join("debug");
    std::fs::create_dir_all(&root).unwrap();

    // No debug file: the static function has no symbol left, and the address is not
    // given to the nearest symbol below it.
    let before = write_caller(&dump(&trace, &root));
    assert!(before.starts_with("talker+0x"), "{before}");

    let id = build_id(&prog.path);
    let at = root
        .join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::copy(&debug, &at).unwrap();
    let after = write_caller(&dump(&trace, &root));
    assert_eq!(
        after,
        format!("talk (talker.c:{})", write_line() + 1),
        "named from {}",
        at.display()
    );
}

#[test]
fn a_debuglink_finds_the_debug_file_in_dot_debug() {
    if libtrace_or_skip("names_debuginfo").is_none() {
        return;
    }
    let (prog, debug) = stripped_talker();
    sh(
        Command::new("objcopy")
            .arg(format!("--add-gnu-debuglink={}", debug.display()))
            .arg(&prog.path),
        "objcopy --add-gnu-debuglink",
    );
    let dot = prog.dir.path().join(".debug");
    std::fs::create_dir_all(&dot).unwrap();
    std::fs::rename(&debug, dot.join("talker.debug")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t");
    record(&prog.path, &trace);
    let name = write_caller(&dump(&trace, tmp.path()));
    assert_eq!(name, format!("talk (talker.c:{})", write_line() + 1));
}

/// Every `"score"` number in a JSON value, in order.
fn scores(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                if k.contains("score") && x.is_number() {
                    out.push(x.to_string());
                }
                scores(x, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| scores(x, out)),
        _ => {}
    }
}

#[test]
fn a_model_learned_before_the_debug_symbols_still_matches_after() {
    if libtrace_or_skip("names_debuginfo").is_none() {
        return;
    }
    let (prog, debug) = stripped_talker();
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    record(&prog.path, &a);
    // The second run makes one more write and read, from new call sites in `talk`.
    record_args(&prog.path, &b, &["odd"]);
    let (none, root) = (tmp.path().join("none"), tmp.path().join("debug"));
    std::fs::create_dir_all(&none).unwrap();
    let model = tmp.path().join("model");
    run_with_deadline(
        Command::new(culprit())
            .env("CULPRIT_DEBUG_ROOT", &none)
            .args(["learn", "-o"])
            .arg(&model)
            .arg(&a),
        DEADLINE,
    )
    .assert_success("culprit learn");
    let id = build_id(&prog.path);
    let at = root.join(".build-id").join(&id[..2]);
    std::fs::create_dir_all(&at).unwrap();
    std::fs::copy(&debug, at.join(format!("{}.debug", &id[2..]))).unwrap();
    let rank = |r: &Path| {
        let o = run_with_deadline(
            Command::new(culprit())
                .env("CULPRIT_DEBUG_ROOT", r)
                .args(["rank", "--json", "--model"])
                .arg(&model)
                .arg(&b),
            DEADLINE,
        );
        o.assert_success("culprit rank");
        let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        let mut s = Vec::new();
        scores(&v, &mut s);
        (s, o.stdout)
    };
    let (s_before, text_before) = rank(&none);
    let (s_after, text_after) = rank(&root);
    assert!(s_before.iter().any(|s| s != "0.0"), "{text_before}");
    assert_eq!(s_before, s_after, "{text_before}\n---\n{text_after}");
    assert!(!text_before.contains("talk ("), "{text_before}");
    assert!(text_after.contains("talk (talker.c:"), "{text_after}");
}

/// A daemon made by a double fork whose middle process exits at once: the grandchild's
/// call sites are named from the maps, never a raw address.
const DOUBLE_FORK: &str = r#"
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
__attribute__((noinline)) static void daemon_body(void) {
    usleep(200000); /* the middle process is gone: re-parented */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) _exit(1);
    if (write(sv[0], "x", 1) != 1) _exit(1);
    char c;
    if (read(sv[1], &c, 1) != 1) _exit(1);
    _exit(0);
}
int main(void) {
    pid_t p = fork();
    if (p == 0) {
        if (fork() == 0) daemon_body();
        _exit(0);
    }
    waitpid(p, NULL, 0);
    return 0;
}
"#;

#[test]
fn a_double_forked_daemon_is_named_from_the_maps() {
    if libtrace_or_skip("names_debuginfo").is_none() {
        return;
    }
    let prog = compile_c("dfork", DOUBLE_FORK, &[]);
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t");
    record(&prog.path, &trace);
    let lines = dump(&trace, tmp.path());
    let w = lines
        .iter()
        .find(|l| l["kind"] == "lib_enter" && l["name"] == "write")
        .unwrap_or_else(|| panic!("the daemon's write was recorded: {lines:?}"));
    let name = w["caller_name"].as_str().unwrap();
    assert!(name.starts_with("daemon_body"), "{name}");
    assert!(w["caller_module"].as_str().unwrap().ends_with("/dfork"));
}
