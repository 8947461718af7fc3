//! A damaged trace directory opened strictly (`--strict`) gives an error naming the file
//! and the problem (and the byte offset inside a chunk file), never a panic or garbage.
//! (Opened normally, the damage is skipped with a warning: `tests/damage.rs`.)

mod common;

use reader::TraceDir;
use std::path::{Path, PathBuf};

/// A complete trace of one thread: several sub-buffers in one chunk file.
fn good_trace(tmp: &Path) -> (PathBuf, PathBuf) {
    common::good_trace(tmp, 8, 1000)
}

/// Opens with every damage an error (`--strict`), checksums at index time.
fn strict(dir: &Path) -> reader::Result<TraceDir> {
    TraceDir::open_with(
        dir,
        reader::OpenOptions {
            strict: true,
            ..Default::default()
        },
    )
}

/// Opens with every damage an error, checksums at first read.
fn strict_lazy(dir: &Path) -> reader::Result<TraceDir> {
    TraceDir::open_with(
        dir,
        reader::OpenOptions {
            strict: true,
            lazy: true,
            ..Default::default()
        },
    )
}

/// Cuts the last `by` bytes off `file`, in place; returns its length before.
fn cut_short(file: &Path, by: u64) -> u64 {
    let len = std::fs::metadata(file).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
    f.set_len(len - by).unwrap();
    len
}

fn open_err(dir: &Path) -> String {
    let e = strict(dir).unwrap_err();
    format!("{e}")
}

fn count_entries(dir: &Path) -> usize {
    count_entries_of(&strict(dir).unwrap())
}

fn count_entries_of(t: &TraceDir) -> usize {
    let mut n = 0;
    for k in t.threads().collect::<Vec<_>>() {
        t.for_each_entry(k, |_, _| {
            n += 1;
            Ok(())
        })
        .unwrap();
    }
    n
}

#[test]
fn the_good_trace_reads_back() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = good_trace(tmp.path());
    assert_eq!(count_entries(&dir), 1000);
}

#[test]
fn a_truncated_chunk_is_reported_with_file_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, chunk) = good_trace(tmp.path());
    let len = cut_short(&chunk, 100);
    let e = open_err(&dir);
    assert!(e.contains(&chunk.display().to_string()), "{e}");
    assert!(
        e.contains("record truncated") && e.contains("at byte offset"),
        "{e}"
    );
    // A reader resuming the directory cuts the torn tail; what is left reads back.
    let cut = reader::repair(&dir).unwrap();
    assert_eq!(cut.len(), 1);
    assert!(cut[0].new_len < len - 100);
    // The record cut off is missing from the manifest's count: reported, and skipped.
    let e = strict(&dir).unwrap_err().to_string();
    assert!(e.contains("1 sub-buffer record(s) missing"), "{e}");
    let n = count_entries_of(&TraceDir::open(&dir).unwrap());
    assert!(n > 0 && n < 1000, "{n}");
}

#[test]
fn a_chunk_cut_short_after_indexing_fails_the_read_that_misses_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, chunk) = good_trace(tmp.path());
    let t = strict_lazy(&dir).unwrap();
    cut_short(&chunk, 100);
    for e in [visit_all(&t), load_all(&t)] {
        let e = e.unwrap_err().to_string();
        assert!(e.contains(&chunk.display().to_string()), "{e}");
    }
}

#[test]
fn a_flipped_byte_is_a_checksum_error_and_is_not_cut_away() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, chunk) = good_trace(tmp.path());
    let mut b = std::fs::read(&chunk).unwrap();
    let at = bufpool::disk::CHUNK_HEADER_SIZE + bufpool::disk::RECORD_FIXED_SIZE + 5;
    b[at] ^= 0x40;
    std::fs::write(&chunk, &b).unwrap();
    let e = open_err(&dir);
    assert!(e.contains(&chunk.display().to_string()), "{e}");
    assert!(
        e.contains("checksum mismatch")
            && e.contains(&format!(
                "at byte offset {}",
                bufpool::disk::CHUNK_HEADER_SIZE
            )),
        "{e}"
    );
    // Damage that is not a torn tail is never "repaired" away.
    assert!(reader::repair(&dir).unwrap().is_empty());
    assert_eq!(std::fs::read(&chunk).unwrap(), b);
}

#[test]
fn a_foreign_file_among_the_chunks_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, chunk) = good_trace(tmp.path());
    let bogus = chunk.with_file_name("0-0-0.chunk");
    std::fs::write(&bogus, b"#!/bin/sh\necho this is not a chunk file\n").unwrap();
    let e = open_err(&dir);
    assert!(
        e.contains("0-0-0.chunk") && e.contains("not a Culprit chunk file"),
        "{e}"
    );
}

#[test]
fn garbage_or_missing_manifests_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = good_trace(tmp.path());
    let m = dir.join("manifest.json");
    std::fs::write(&m, b"{\"format\": \"culprit-trace\", \"version\": ").unwrap();
    let e = open_err(&dir);
    assert!(
        e.contains("manifest.json") && e.contains("bad manifest"),
        "{e}"
    );

    std::fs::write(&m, b"\x00\xff garbage").unwrap();
    assert!(open_err(&dir).contains("bad manifest"));

    let text = serde_json::json!({"format": "something-else", "version": 1});
    std::fs::write(&m, text.to_string()).unwrap();
    let e = open_err(&dir);
    assert!(e.contains("bad manifest"), "{e}");

    std::fs::remove_file(&m).unwrap();
    let e = open_err(&dir);
    assert!(
        e.contains("not a Culprit trace directory") && e.contains("no manifest.json"),
        "{e}"
    );

    let e = open_err(&tmp.path().join("does-not-exist"));
    assert!(
        e.contains("does-not-exist") && e.contains("No such file"),
        "{e}"
    );
    let e = open_err(&tmp.path().join("pool"));
    assert!(e.contains("not a directory"), "{e}");
}

#[test]
fn an_undecodable_entry_names_the_file_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, chunk) = good_trace(tmp.path());
    // Rewrite the first record with a bad entry type byte and a valid checksum: the
    // chunk layer accepts it, the entry decoder reports where.
    let b = std::fs::read(&chunk).unwrap();
    let recs: Vec<_> = bufpool::disk::records(&b).map(|r| r.unwrap()).collect();
    let mut out = b[..bufpool::disk::CHUNK_HEADER_SIZE].to_vec();
    for (i, r) in recs.iter().enumerate() {
        let mut data = r.data.to_vec();
        if i == 0 {
            data[20] = 0xee; // the type byte of the second entry
        }
        bufpool::disk::encode_record(&r.info, &data, &mut out);
    }
    std::fs::write(&chunk, &out).unwrap();
    let t = strict(&dir).unwrap();
    let k = t.threads().next().unwrap();
    let e = t.for_each_entry(k, |_, _| Ok(())).unwrap_err().to_string();
    let want = bufpool::disk::CHUNK_HEADER_SIZE + bufpool::disk::RECORD_FIXED_SIZE + 20;
    assert!(e.contains(&chunk.display().to_string()), "{e}");
    assert!(
        e.contains(&format!("at byte offset {want}")) && e.contains("unknown entry type 0xee"),
        "{e}"
    );
}

/// Flips one bit of byte `at` of `file`, in place (the inode a `TraceDir` holds open).
fn flip(file: &Path, at: usize) {
    let mut b = std::fs::read(file).unwrap();
    b[at] ^= 0x40;
    std::fs::write(file, &b).unwrap();
}

/// Every record's data, in order, as `visit_chunks` lends it.
fn visit_all(t: &TraceDir) -> reader::Result<Vec<Vec<u8>>> {
    let mut v = Vec::new();
    for k in t.threads().collect::<Vec<_>>() {
        t.visit_chunks(k, |c| {
            v.push(c.data.to_vec());
            Ok::<_, reader::Error>(())
        })?;
    }
    Ok(v)
}

/// Every record's data, in order, as `load_thread` reads it into one buffer (which already
/// holds some bytes, to check that records land after them).
fn load_all(t: &TraceDir) -> reader::Result<Vec<Vec<u8>>> {
    let mut v = Vec::new();
    for k in t.threads().collect::<Vec<_>>() {
        let mut buf = b"before".to_vec();
        let recs = t.load_thread(k, &mut buf)?;
        assert_eq!(&buf[..6], b"before");
        assert_eq!(buf.len() as u64, 6 + t.thread_bytes(k));
        for r in recs {
            assert_eq!(
                r.path.as_ref(),
                &reader::tracedir::chunk_files(t.path()).unwrap()[0]
            );
            v.push(buf[r.at..r.at + r.info.bytes_used as usize].to_vec());
        }
    }
    Ok(v)
}

/// Offset of the first record, and of its 6th data byte.
const FIRST_RECORD: usize = bufpool::disk::CHUNK_HEADER_SIZE;
const IN_FIRST_DATA: usize = FIRST_RECORD + bufpool::disk::RECORD_FIXED_SIZE + 5;

#[test]
fn the_good_trace_reads_back_when_opened_lazily() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = good_trace(tmp.path());
    let lazy = strict_lazy(&dir).unwrap();
    let eager = strict(&dir).unwrap();
    assert_eq!(lazy.records(), eager.records());
    assert_eq!(lazy.threads().count(), 1);
    assert_eq!(count_entries_of(&lazy), 1000);
    assert_eq!(visit_all(&lazy).unwrap(), visit_all(&eager).unwrap());
    let fresh = strict_lazy(&dir).unwrap();
    assert_eq!(load_all(&fresh).unwrap(), visit_all(&eager).unwrap());
}

#[test]
fn a_flipped_byte_opens_lazily_and_fails_the_first_read() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, chunk) = good_trace(tmp.path());
    flip(&chunk, IN_FIRST_DATA);
    let want = |e: &str| {
        assert!(e.contains(&chunk.display().to_string()), "{e}");
        assert!(
            e.contains("checksum mismatch")
                && e.contains(&format!("at byte offset {FIRST_RECORD}")),
            "{e}"
        );
    };
    // The eager open checks every record up front.
    want(&open_err(&dir));
    // The lazy open reads only the headers: it opens and lists the thread...
    let t = strict_lazy(&dir).unwrap();
    let k = t.threads().next().unwrap();
    assert_eq!(t.threads().count(), 1);
    assert!(t.infos(k).count() > 1);
    // ...and the first read of the damaged record is the error, by either read path.
    want(&visit_all(&t).unwrap_err().to_string());
    want(&load_all(&t).unwrap_err().to_string());
    let first = t.chunks(k).next().unwrap();
    want(&first.unwrap_err().to_string());
    want(&t.for_each_entry(k, |_, _| Ok(())).unwrap_err().to_string());
}

#[test]
fn a_record_verified_once_is_not_checksummed_again() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, chunk) = good_trace(tmp.path());
    let t = strict_lazy(&dir).unwrap();
    let before = visit_all(&t).unwrap();
    // Data bytes changed after the record was verified go unnoticed: the checksum is not
    // computed again, and the read hands over the changed bytes.
    flip(&chunk, IN_FIRST_DATA);
    let after = visit_all(&t).unwrap();
    assert_eq!(after[0][5], before[0][5] ^ 0x40);
    assert_eq!(after[1..], before[1..]);
    // A directory opened afresh checks the record again and finds the damage.
    let fresh = strict_lazy(&dir).unwrap();
    let e = visit_all(&fresh).unwrap_err().to_string();
    assert!(e.contains("checksum mismatch"), "{e}");
    // A changed sub-buffer header is still caught, by the header consistency check.
    let last_tsc = FIRST_RECORD + bufpool::disk::RECORD_HEADER_SIZE + 32;
    flip(&chunk, last_tsc);
    for e in [visit_all(&t), load_all(&t)] {
        let e = e.unwrap_err().to_string();
        assert!(e.contains(&chunk.display().to_string()), "{e}");
        assert!(
            e.contains(&format!("at byte offset {FIRST_RECORD}"))
                && e.contains("the record changed since the directory was indexed"),
            "{e}"
        );
    }
}

#[test]
fn a_lazy_open_makes_every_check_but_the_checksum() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, chunk) = good_trace(tmp.path());
    // A bad record magic (the first byte of the second record's header) fails the open.
    let b = std::fs::read(&chunk).unwrap();
    let second = bufpool::disk::records(&b).nth(1).unwrap().unwrap().offset as usize;
    flip(&chunk, second);
    let e = strict_lazy(&dir).unwrap_err().to_string();
    assert!(e.contains(&chunk.display().to_string()), "{e}");
    assert!(
        e.contains("bad record magic") && e.contains(&format!("at byte offset {second}")),
        "{e}"
    );
    assert_eq!(e, open_err(&dir));
    // So does a truncated last record, as for the eager open.
    flip(&chunk, second);
    let len = std::fs::metadata(&chunk).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&chunk)
        .unwrap();
    f.set_len(len - 100).unwrap();
    let e = strict_lazy(&dir).unwrap_err().to_string();
    assert!(e.contains("record truncated"), "{e}");
    assert_eq!(e, open_err(&dir));
}
