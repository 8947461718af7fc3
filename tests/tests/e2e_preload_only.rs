//! Issue 5's end-to-end story with an `LD_PRELOAD`-only trace of an unmodified C server:
//! the C ring (`tests/e2e/ring_node.c`) compiled WITHOUT `-finstrument-functions`, its
//! header read with `read(2)` (`-DHEADER_READ`), so the trace holds library calls keyed by
//! call site and no function entry at all. In the faulty run the `read` of job 4's header
//! on node 2 fails with ECONNRESET: node 2 closes its lhs connection with data unread, node
//! 1 gets the reset, the ring hangs. The ranking must localize it from library calls alone.

#[path = "../e2e/common.rs"]
mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[test]
fn a_reset_header_read_in_an_uninstrumented_c_ring_is_ranked_first() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let (model, faulty, units, _prog) = c_ring_story(
        &CRingStory {
            name: "C ring (LD_PRELOAD only)",
            // Frame pointers: without them libtrace.so records stack addresses as return
            // addresses and the launcher's signature changes from run to run (see the
            // e2e report); still no instrumentation.
            cflags: &["-DHEADER_READ", "-fno-omit-frame-pointer"],
            // Node 2's reads: the hello header, then one header per job: the 6th is job 4's.
            fault: "read:errno=ECONNRESET,argv=--id 2 --nodes,nth=6",
            broken: 2,
            peer: 1,
            fn_entries: false,
        },
        tmp.path(),
    );
    check_show(&model, &faulty, &units[0]);
}

/// The load address of bash in a trace directory (from its first recorded mapping).
fn bash_base(dir: &Path) -> String {
    let r = run_culprit(
        &["dump", "--json", dir.to_str().expect("UTF-8 path")],
        Duration::from_secs(60),
    );
    r.assert_success("culprit dump --json");
    tests::parse_json_lines(&r.stdout)
        .into_iter()
        .find(|e| e["kind"] == "meta_map" && e["path"] == "/usr/bin/bash")
        .and_then(|e| e["start"].as_str().map(String::from))
        .unwrap_or_else(|| panic!("no map of /usr/bin/bash in {}", dir.display()))
}

/// A helper made by fork + exec (bash forks, the child execs `readlink`) runs bash's code
/// between the fork and the exec, in its parent's image, whose map it never records. ASLR
/// puts bash elsewhere in every run: those calls must be keyed through the parent's map,
/// or the helper scores "`fork` never seen here" against a model of the same command.
#[test]
fn a_fork_exec_helper_scores_0_against_a_model_of_the_same_command() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let cmd = ["bash", "-c", "readlink /proc/self/exe; true"];
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("run{i}"))).collect();
    for d in &dirs {
        record(d, &[], &cmd, Duration::from_secs(60)).assert_success("culprit record");
    }
    assert_ne!(
        bash_base(&dirs[0]),
        bash_base(&dirs[1]),
        "bash was loaded at the same address twice: no ASLR here, nothing to test"
    );
    let model = tmp.path().join("bash.model");
    learn(&dirs[..1], &model, &[]);
    let units = rank_json(&model, &dirs[1]);
    assert_eq!(units.len(), 2, "bash and readlink: {units:?}");
    for u in &units {
        assert_eq!(score(u), 0.0, "{u}");
    }
}
