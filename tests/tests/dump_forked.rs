//! `culprit dump` names the C functions of forked children that never exec'd — which
//! record no memory map of their own — from their parent's image at the fork (the
//! analyzer's fork inheritance), grandchildren included, in text and JSON alike.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;
use tests::*;

const FORKY: &str = r#"
#include <stdio.h>
#include <unistd.h>
#include <sys/wait.h>
static int work(int n) { int s = 0; for (int i = 0; i < n; i++) s += i; return s; }
static void grandchild_body(void) { work(3); }
static void child_body(void) {
    work(10);
    pid_t g = fork();
    if (g == 0) { grandchild_body(); _exit(0); }
    waitpid(g, NULL, 0);
}
int main(void) {
    pid_t p = fork();
    if (p == 0) { child_body(); _exit(0); }
    waitpid(p, NULL, 0);
    printf("%d\n", work(7));
    return 0;
}
"#;

#[test]
fn forked_children_are_named_from_their_parents_image() {
    let Some(lib) = libtrace_or_skip("dump_forked") else {
        return;
    };
    let prog = compile_c(
        "forky",
        FORKY,
        &["-O0", "-finstrument-functions", "-fno-omit-frame-pointer"],
    );
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    run_with_deadline(
        Command::new(culprit())
            .env(LIBTRACE_ENV, &lib)
            .arg("record")
            .arg("-o")
            .arg(&out)
            .arg("--")
            .arg(&prog.path),
        Duration::from_secs(60),
    )
    .assert_success("culprit record -- forky");

    let dump = |json: bool| {
        let mut c = Command::new(culprit());
        c.arg("dump").arg(&out);
        if json {
            c.arg("--json");
        }
        let r = run_with_deadline(&mut c, Duration::from_secs(60));
        r.assert_success("culprit dump");
        r.stdout
    };
    // Per pid: its fork parent (if forked), and the C functions it entered.
    let mut parent: BTreeMap<u64, u64> = BTreeMap::new();
    let mut entered: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for v in parse_json_lines(&dump(true)) {
        let pid = v["pid"].as_u64().unwrap();
        if v["kind"] == "meta_proc" && v["reason"] == "fork" {
            parent.insert(pid, v["ppid"].as_u64().unwrap());
        }
        if v["kind"] == "fn_enter" {
            entered
                .entry(pid)
                .or_default()
                .push(v["name"].as_str().unwrap().to_string());
        }
    }
    let child = *parent
        .keys()
        .find(|p| !parent.contains_key(&parent[p]))
        .unwrap_or_else(|| panic!("no forked child in the trace: {parent:?}"));
    let grandchild = parent
        .iter()
        .find(|(_, pp)| **pp == child)
        .map(|(p, _)| *p)
        .unwrap_or_else(|| panic!("no grandchild in the trace: {parent:?}"));
    let names = |pid: u64| entered.get(&pid).cloned().unwrap_or_default();
    let starts = |pid: u64, f: &str| {
        names(pid)
            .iter()
            .any(|n| n.starts_with(&format!("{f} (forky.c:")))
    };
    assert!(
        starts(child, "child_body"),
        "child {child}: {:?}",
        names(child)
    );
    assert!(starts(child, "work"), "child {child}: {:?}", names(child));
    assert!(
        starts(grandchild, "grandchild_body"),
        "grandchild {grandchild}: {:?}",
        names(grandchild)
    );
    // The text rendering names them the same way.
    let text = dump(false);
    assert!(
        text.lines()
            .any(|l| l.contains(&format!(" {grandchild}/{grandchild} "))
                && l.contains("→ grandchild_body (forky.c:")),
        "{text}"
    );
}
