//! What lazy opens found in each chunk file, remembered between opens
//! (`reader::scanned`, as `culprit watch` does): every open reads what an open that
//! remembers nothing reads, as the files grow, are deleted and are replaced.

mod common;

use bufpool::format::Kind;
use reader::chunkfile::ChunkWriter;
use reader::{Chunk, OpenOptions, TraceDir};
use std::path::Path;

/// The records of one thread: function entries (caller = their index) over several
/// sub-buffers, and the manifest's path.
fn records(tmp: &Path) -> (std::path::PathBuf, Vec<Chunk>) {
    let (out, chunks) = common::thread_chunks(tmp, &[]);
    (out.join("manifest.json"), chunks)
}

/// The callers of the function entries a reading of `dir` sees: lazy (remembering what
/// earlier lazy opens found) or eager (every record read and checked: remembers nothing).
fn callers(dir: &Path, lazy: bool) -> Vec<u64> {
    let t = TraceDir::open_with(
        dir,
        OpenOptions {
            lazy,
            quiet: true,
            ..Default::default()
        },
    )
    .unwrap();
    let mut out = Vec::new();
    for k in t.threads().collect::<Vec<_>>() {
        t.for_each_entry(k, |_, e| {
            if e.kind == Kind::FnEnter {
                out.push(e.caller);
            }
            Ok(())
        })
        .unwrap();
    }
    out
}

#[test]
fn remembered_scans_read_what_a_fresh_scan_reads() {
    reader::scanned::remember();
    let tmp = tempfile::tempdir().unwrap();
    let (manifest, c) = records(tmp.path());
    let d = tmp.path().join("d");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::copy(&manifest, d.join("manifest.json")).unwrap();
    let same = |what: &str| {
        let lazy = callers(&d, true);
        assert_eq!(lazy, callers(&d, false), "{what}");
        lazy
    };
    // A file growing: each open sees the records appended since.
    let mut a = ChunkWriter::create(&d, 1, 1, 0).unwrap();
    a.sync().unwrap();
    assert!(same("no record yet").is_empty());
    for x in &c[..2] {
        a.append_piece(&x.info, 0, &x.data).unwrap();
    }
    a.sync().unwrap();
    let n = same("two records").len();
    assert!(n > 0);
    for x in &c[2..c.len() - 1] {
        a.append_piece(&x.info, 0, &x.data).unwrap();
    }
    a.sync().unwrap();
    let grown = same("grown");
    assert!(grown.len() > n);
    // Opened again unchanged: the same.
    assert_eq!(same("unchanged"), grown);
    drop(a);
    // The file replaced by another at the same path (a segment rotated away, a new one
    // made): the new file's records only.
    let path = reader::tracedir::chunk_files(&d).unwrap().remove(0);
    std::fs::remove_file(&path).unwrap();
    let mut b = ChunkWriter::create(&d, 1, 1, 0).unwrap();
    let last = c.last().unwrap();
    b.append_piece(&last.info, 0, &last.data).unwrap();
    b.sync().unwrap();
    assert_eq!(
        reader::tracedir::chunk_files(&d).unwrap(),
        vec![path.clone()]
    );
    let replaced = same("replaced");
    assert!(!replaced.is_empty() && replaced.len() < grown.len());
    // Cut shorter than what was scanned (a torn tail cut by a reader starting again),
    // then grown past it with other records: scanned again from the start.
    drop(b);
    std::fs::remove_file(&path).unwrap();
    let mut e = ChunkWriter::create(&d, 1, 1, 0).unwrap();
    for x in &c[1..3] {
        e.append_piece(&x.info, 0, &x.data).unwrap();
    }
    e.sync().unwrap();
    assert!(!same("rewritten").is_empty());
    // Deleted: nothing.
    drop(e);
    std::fs::remove_file(&path).unwrap();
    assert!(same("deleted").is_empty());
}
