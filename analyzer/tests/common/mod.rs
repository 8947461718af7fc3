//! Helpers shared by the analyzer's integration tests.

use analyzer::decode::write_trace_dir;
use analyzer::synth::{ring, Functions, Ring};
use std::path::{Path, PathBuf};

/// A normal run of a synthetic three-process C ring written as trace directories (one per
/// process) under `root/name`; returns the directories.
pub fn record_ring(root: &Path, name: &str) -> Vec<PathBuf> {
    let cfg = Ring {
        processes: 3,
        iterations: 20,
        functions: Functions::C,
        fault: None,
        seed: 1,
    };
    ring(&cfg)
        .into_iter()
        .map(|p| {
            let dir = root.join(name).join(&p.host);
            write_trace_dir(&dir, &p.host.clone(), &[p]).unwrap();
            dir
        })
        .collect()
}
