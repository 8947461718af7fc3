//! Issue 5's end-to-end story on a C program compiled with `-finstrument-functions`: the
//! C version of the MPD-like ring (`tests/e2e/ring_node.c`: select loop, 8-byte header
//! read with one `recv` whose short result closes the ring connection), traced by
//! `libtrace.so` (C function entries and library calls). In the faulty run the `recv(8)`
//! of job 4's header on node 2 returns 3 bytes: node 2 closes its lhs connection, node 1
//! gets the reset, the ring hangs. `culprit rank` must put a unit of node 2 or 1 first,
//! and the earliest high-scoring one there must tell the close/reset.

#[path = "../e2e/common.rs"]
mod common;

use common::*;

#[test]
fn a_partial_header_recv_on_the_instrumented_c_ring_is_ranked_first() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let (model, faulty, units, _prog) = c_ring_story(
        &CRingStory {
            name: "C ring (-finstrument-functions)",
            // What `culprit cc` adds. Without frame pointers libtrace.so's stack walk past
            // main() records argv bytes as return addresses, so the setup-call signatures
            // (and process groups) change with the command line: see the e2e report.
            cflags: &["-finstrument-functions", "-fno-omit-frame-pointer"],
            fault: "recv:short=3,argv=--id 2 --nodes,nth=11",
            broken: 2,
            peer: 1,
            fn_entries: true,
        },
        tmp.path(),
    );
    // The C function names reach the report: the close happens in handle_lhs_input.
    let top_why = why(&units[0]).join("\n");
    assert!(
        units.iter().take(3).any(|u| why(u)
            .iter()
            .any(|w| w.contains("handle_lhs_input") || w.contains("handle_rhs_input"))),
        "no C handler named in the top units' why:\n{top_why}"
    );
    check_html(&model, &faulty, &tmp.path().join("report.html"), &units);

    // The decentralized step: a model learned per run and merged ranks the faulty run
    // exactly as the model learned from all runs at once.
    let mut parts = Vec::new();
    for i in 0..3 {
        let m = tmp.path().join(format!("part{i}.model"));
        learn(&[tmp.path().join(format!("normal{i}"))], &m, &[]);
        parts.push(m);
    }
    let merged = tmp.path().join("merged.model");
    let mut args: Vec<&str> = vec!["merge"];
    args.extend(parts.iter().map(|p| p.to_str().expect("utf-8")));
    args.extend(["-o", merged.to_str().expect("utf-8")]);
    run_culprit(&args, std::time::Duration::from_secs(120)).assert_success("culprit merge");
    let by_merged = rank_json(&merged, &faulty);
    let key = |us: &[serde_json::Value]| -> Vec<(String, String)> {
        us.iter()
            .map(|u| (u["id"].to_string(), format!("{:.9}", score(u))))
            .collect()
    };
    assert_eq!(
        key(&by_merged),
        key(&units),
        "merged per-run models rank differently from the model learned at once"
    );
    check_show(&model, &faulty, &units[0]);
}
