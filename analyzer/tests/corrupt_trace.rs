//! Read strictly (`--strict`), a damaged record of a trace directory fails the analysis
//! with an error naming the chunk file and the record's offset (by default it is skipped
//! with a warning: `damaged_trace_skipped.rs`). `TraceSet::open` reads only the record headers, so the
//! damage is found by the first stage that reads the record's data, before any result.

mod common;

use analyzer::decode::TraceSet;
use std::path::{Path, PathBuf};

/// Flips a data byte of the last record of `dir`'s chunk file; returns the file and the
/// record's offset.
fn damage_last_record(dir: &Path) -> (PathBuf, u64) {
    let files = reader::tracedir::chunk_files(dir).unwrap();
    let chunk = files.last().unwrap().clone();
    let mut b = std::fs::read(&chunk).unwrap();
    let last = bufpool::disk::records(&b).last().unwrap().unwrap();
    let (offset, len) = (last.offset, last.data.len());
    assert!(len > 0);
    let at = offset as usize + bufpool::disk::RECORD_FIXED_SIZE + len / 2;
    b[at] ^= 0x40;
    std::fs::write(&chunk, &b).unwrap();
    (chunk, offset)
}

fn assert_names(e: &str, chunk: &Path, offset: u64) {
    assert!(e.contains(&chunk.display().to_string()), "{e}");
    assert!(
        e.contains("checksum mismatch") && e.contains(&format!("at byte offset {offset}")),
        "{e}"
    );
}

#[test]
fn learn_and_rank_fail_on_a_damaged_record_naming_file_and_offset() {
    // The only test of this binary: the process-wide `--strict` switch is safe to set.
    reader::tracedir::set_strict_default(true);
    let tmp = tempfile::tempdir().unwrap();
    let opts = analyzer::Options::default();
    let normal = common::record_ring(tmp.path(), "normal");
    let model = analyzer::learn(&[TraceSet::open(&normal).unwrap()], &opts)
        .unwrap()
        .model;

    let trial = common::record_ring(tmp.path(), "trial");
    let (chunk, offset) = damage_last_record(&trial[1]);
    // Opening reads headers only: the damage is not seen yet.
    let set = TraceSet::open(&trial).unwrap();
    let e = analyzer::rank(&model, &set, &opts).unwrap_err().to_string();
    assert_names(&e, &chunk, offset);
    let e = analyzer::learn(&[set], &opts).unwrap_err().to_string();
    assert_names(&e, &chunk, offset);
}
