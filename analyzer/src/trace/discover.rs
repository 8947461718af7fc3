//! Finding the trace directories under the directories a user names: a directory holding
//! a manifest is a trace; any other is searched, down to [`MAX_DEPTH`] levels, for the
//! traces under it — a cluster recording's tree `DIR/<host>/<job.step.task>/`
//! (`culprit record` under Slurm) is named by its root.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// How deep under a named directory traces are looked for (`DIR/<host>/<task>/` is 2).
pub const MAX_DEPTH: usize = 3;

/// The trace directories `dirs` name, in the order given and, under one directory, in
/// path order; each once. A directory with no trace under it is given as it is, so that
/// opening it says why it is not a trace.
pub fn trace_dirs(dirs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for d in dirs {
        let mut found = Vec::new();
        search(d, 0, &mut found)?;
        if found.is_empty() {
            found.push(d.clone());
        }
        for f in found {
            if seen.insert(f.clone()) {
                out.push(f);
            }
        }
    }
    Ok(out)
}

fn is_trace(d: &Path) -> bool {
    d.join(bufpool::disk::MANIFEST_FILE).is_file()
}

fn search(d: &Path, depth: usize, found: &mut Vec<PathBuf>) -> Result<()> {
    if is_trace(d) {
        found.push(d.to_path_buf());
        return Ok(());
    }
    if depth >= MAX_DEPTH || !d.is_dir() {
        return Ok(());
    }
    let io = |source| Error::Io {
        path: d.to_path_buf(),
        what: "list directory",
        source,
    };
    let mut subs = Vec::new();
    for e in std::fs::read_dir(d).map_err(io)? {
        let e = e.map_err(io)?;
        // Real directories only: a symbolic link is not followed into a loop.
        if e.file_type().map_err(io)?.is_dir() {
            subs.push(e.path());
        }
    }
    subs.sort();
    for s in subs {
        search(&s, depth + 1, found)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_of_hosts_and_tasks_is_found_in_path_order() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        for d in [
            "n2/7.0.1",
            "n1/7.0.0",
            "n1/7.0.2",
            "n1/7.0.2/chunks",
            "n3/empty",
        ] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        for d in ["n2/7.0.1", "n1/7.0.0", "n1/7.0.2"] {
            std::fs::write(r.join(d).join("manifest.json"), "{}").unwrap();
        }
        let got = trace_dirs(&[r.to_path_buf(), r.join("n1/7.0.0")]).unwrap();
        let want: Vec<PathBuf> = ["n1/7.0.0", "n1/7.0.2", "n2/7.0.1"]
            .iter()
            .map(|d| r.join(d))
            .collect();
        assert_eq!(got, want);
        // Nothing under it: given as it is (opening it says why).
        assert_eq!(trace_dirs(&[r.join("n3")]).unwrap(), vec![r.join("n3")]);
    }
}
