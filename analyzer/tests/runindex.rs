//! The run index (`culprit rank --write-index`, `analyzer::runindex`): it names and opens
//! a run's processes as the manifests do, and a damaged index, or one that no longer
//! matches the traces, is refused with an error naming it.

use analyzer::decode::{RunOutline, TraceSet};
use analyzer::runindex::RunIndex;
use std::collections::BTreeSet;

#[test]
fn an_index_names_and_opens_the_run_as_the_manifests_do_and_bad_ones_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let procs = analyzer::synth::write_task_tree(tmp.path(), 6, 3).unwrap();
    let root = vec![tmp.path().to_path_buf()];
    let index = RunIndex::build(&root, true).unwrap();
    let file = tmp.path().join("run.index");
    index.save(&file).unwrap();
    assert_eq!(RunIndex::load(&file).unwrap(), index);
    // What the manifests give: the same outline, the same processes at the same places,
    // the same clocks.
    let pick = |_: &RunOutline| -> BTreeSet<String> { ["h1".to_string()].into() };
    let by_dirs = TraceSet::open_selected(&root, true, pick).unwrap();
    let by_index = RunIndex::open_selected(&file, true, pick).unwrap();
    assert_eq!(by_index.outline, by_dirs.outline);
    let whole = TraceSet::open(&root).unwrap().ids();
    assert_eq!(by_index.outline, RunOutline::of(&whole, 6));
    assert_eq!(index.outline(), by_index.outline);
    assert_eq!((by_index.outline.recordings, by_index.opened), (6, 2));
    assert_eq!(by_index.set.ids(), by_dirs.set.ids());
    assert_eq!(by_index.places, by_dirs.places);
    for (a, b) in by_index.set.processes.iter().zip(&by_dirs.set.processes) {
        assert_eq!(a.calib, b.calib);
        assert_eq!(a.recording, b.recording);
    }
    // Damaged, cut short, not an index, of another version: errors naming the file.
    let good = std::fs::read(&file).unwrap();
    let bad = tmp.path().join("bad.index");
    let refused = |bytes: &[u8], want: &str| {
        std::fs::write(&bad, bytes).unwrap();
        let e = RunIndex::load(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.index") && e.contains(want), "{e}");
    };
    let mut flipped = good.clone();
    flipped[40] ^= 1;
    refused(&flipped, "checksum of its head");
    let mut flipped = good.clone();
    let n = flipped.len();
    flipped[n - 3] ^= 1;
    refused(&flipped, "checksum of the section of host h2");
    refused(&good[..good.len() - 3], "cut short");
    refused(b"{\"format\": \"culprit-rank-part\"}", "CULPRIDX");
    let mut v2 = good.clone();
    v2[8] = 2;
    refused(
        &v2,
        "version 2, this culprit reads version 3: write the index again",
    );
    // A shard reads the head and its own hosts' sections only: a damaged section of
    // another host does not stop it, its own does.
    std::fs::write(&bad, &flipped).unwrap();
    let h1 = RunIndex::open_selected(&bad, true, pick).unwrap();
    assert_eq!(h1.set.ids(), by_dirs.set.ids());
    let e = RunIndex::open_selected(&bad, true, |_| ["h2".to_string()].into()).unwrap_err();
    assert!(
        e.to_string().contains("bad.index") && e.to_string().contains("host h2"),
        "{e}"
    );
    // A directory changed since the index was written: refused, naming the index and
    // the directory.
    let d = tmp.path().join("h1/1.0.1");
    std::fs::remove_dir_all(&d).unwrap();
    analyzer::decode::write_trace_dir(&d, "h1", std::slice::from_ref(&procs[0])).unwrap();
    let e = RunIndex::open_selected(&file, true, pick)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("run.index") && e.contains("1.0.1") && e.contains("does not match"),
        "{e}"
    );
    // Hosts not chosen are not opened: a gone directory of h2 does not matter to h1.
    std::fs::remove_dir_all(tmp.path().join("h2")).unwrap();
    let e = RunIndex::open_selected(&file, true, |_| ["h2".to_string()].into());
    assert!(e
        .unwrap_err()
        .to_string()
        .contains("no trace directory there"));
}
