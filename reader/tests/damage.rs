//! Damage costs only itself (issue 18): a trace directory with a damaged, missing or
//! bogus part opens, reads everything else, and says exactly what it skipped; `strict`
//! makes the same damage an error; `repair_dir` recovers what can be, idempotently.

mod common;

use bufpool::disk::{self, ChunkHeader, CHUNK_HEADER_SIZE};
use bufpool::format::{encode_fn, Kind};
use bufpool::{Pool, PoolConfig, WriterState};
use reader::{OpenOptions, ReaderOptions, TraceDir};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

const ENTRIES: u64 = 2000;

/// A complete trace of one thread: several sub-buffers in one chunk file.
fn good_trace(tmp: &Path) -> (PathBuf, PathBuf) {
    common::good_trace(tmp, 16, ENTRIES)
}

fn quiet() -> OpenOptions {
    OpenOptions {
        quiet: true,
        ..Default::default()
    }
}

fn strict() -> OpenOptions {
    OpenOptions {
        strict: true,
        ..Default::default()
    }
}

fn entries(t: &TraceDir) -> u64 {
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

/// Offsets and sizes of the records of a chunk file.
fn records(chunk: &Path) -> Vec<(usize, usize, u64)> {
    let b = std::fs::read(chunk).unwrap();
    disk::records(&b)
        .map(|r| r.unwrap())
        .map(|r| {
            let n = disk::RECORD_FIXED_SIZE + r.data.len();
            (r.offset as usize, n, r.data.len() as u64 / 20)
        })
        .collect()
}

#[test]
fn one_damaged_record_costs_only_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, chunk) = good_trace(tmp.path());
    let recs = records(&chunk);
    assert!(recs.len() >= 4, "{recs:?}");
    let (off, _, lost) = recs[1];
    // A flipped data byte of the second record: a checksum mismatch.
    let mut b = std::fs::read(&chunk).unwrap();
    b[off + disk::RECORD_FIXED_SIZE + 7] ^= 0x10;
    std::fs::write(&chunk, &b).unwrap();
    for lazy in [false, true] {
        let t = TraceDir::open_with(&dir, OpenOptions { lazy, ..quiet() }).unwrap();
        assert_eq!(entries(&t), ENTRIES - lost, "lazy: {lazy}");
        let d = t.damage();
        let file = d
            .iter()
            .find(|d| d.path == chunk)
            .expect("the file is named");
        assert_eq!((file.records, file.offset), (1, Some(off as u64)), "{file}");
        assert!(file.to_string().contains("checksum mismatch"), "{file}");
        assert_eq!(file.threads.len(), 1);
    }
    let e = TraceDir::open_with(&dir, strict()).unwrap_err().to_string();
    assert!(
        e.contains("checksum mismatch") && e.contains("--strict"),
        "{e}"
    );

    // A broken record magic: the lengths cannot be trusted, the scan resynchronizes on
    // the next record and reads on.
    let mut b = std::fs::read(&chunk).unwrap();
    b[off + disk::RECORD_FIXED_SIZE + 7] ^= 0x10;
    b[off] ^= 0xff;
    std::fs::write(&chunk, &b).unwrap();
    let t = TraceDir::open_with(&dir, quiet()).unwrap();
    assert_eq!(entries(&t), ENTRIES - lost);
    let text: Vec<String> = t.damage().iter().map(|d| d.to_string()).collect();
    assert!(text[0].contains("bad record magic"), "{text:?}");
    assert!(
        text.iter().any(|l| l.contains("missing from the sequence")),
        "the hole in the seqs is reported: {text:?}"
    );
}

/// Rewrites `chunk` as two chunk files: its first `k` records, and the rest.
fn split(chunk: &Path, k: usize) -> PathBuf {
    let b = std::fs::read(chunk).unwrap();
    let recs: Vec<_> = disk::records(&b).map(|r| r.unwrap()).collect();
    let mut first = bytemuck::bytes_of(&ChunkHeader::new(1, 1)).to_vec();
    let mut rest = first.clone();
    for (i, r) in recs.iter().enumerate() {
        disk::encode_record(&r.info, r.data, if i < k { &mut first } else { &mut rest });
    }
    let other = chunk.with_file_name("1-0-1.chunk");
    std::fs::write(chunk, &rest).unwrap();
    std::fs::write(&other, &first).unwrap();
    other
}

#[test]
fn a_deleted_chunk_file_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, chunk) = good_trace(tmp.path());
    let lost: u64 = records(&chunk)[..2].iter().map(|r| r.2).sum();
    let first = split(&chunk, 2);
    assert_eq!(
        entries(&TraceDir::open_with(&dir, strict()).unwrap()),
        ENTRIES
    );
    std::fs::remove_file(&first).unwrap();
    let t = TraceDir::open_with(&dir, quiet()).unwrap();
    assert_eq!(entries(&t), ENTRIES - lost);
    let text: Vec<String> = t.damage().iter().map(|d| d.to_string()).collect();
    assert!(
        text.iter()
            .any(|l| l.contains("2 sub-buffer record(s) missing") && l.contains("seq 0..=1")),
        "{text:?}"
    );
    assert!(text.iter().any(|l| l.contains("manifest.json")), "{text:?}");
    assert!(TraceDir::open_with(&dir, strict()).is_err());
}

#[test]
fn a_chunk_cut_at_a_record_boundary_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, chunk) = good_trace(tmp.path());
    let recs = records(&chunk);
    let (off, _, _) = recs[recs.len() - 1];
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&chunk)
        .unwrap();
    f.set_len(off as u64).unwrap();
    let t = TraceDir::open_with(&dir, quiet()).unwrap();
    assert_eq!(entries(&t), ENTRIES - recs[recs.len() - 1].2);
    let d = t.damage();
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(
        d[0].to_string().contains("manifest counts") && d[0].records == 1,
        "{}",
        d[0]
    );
    let e = TraceDir::open_with(&dir, strict()).unwrap_err().to_string();
    assert!(e.contains("1 sub-buffer record(s) missing"), "{e}");
}

#[test]
fn a_fifo_named_chunk_does_not_hang_and_a_device_manifest_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, chunk) = good_trace(tmp.path());
    let fifo = chunk.with_file_name("2-0-2.chunk");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    std::fs::create_dir(chunk.with_file_name("3-0-3.chunk")).unwrap();
    let t0 = Instant::now();
    let t = TraceDir::open_with(&dir, quiet()).unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(entries(&t), ENTRIES);
    let text: Vec<String> = t.damage().iter().map(|d| d.to_string()).collect();
    assert!(
        text.iter()
            .any(|l| l.contains("2-0-2.chunk") && l.contains("a FIFO")),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|l| l.contains("3-0-3.chunk") && l.contains("a directory")),
        "{text:?}"
    );
    // Repairs never open them either.
    assert!(reader::repair(&dir).unwrap().is_empty());
    reader::repair_dir(&dir).unwrap();

    let m = dir.join("manifest.json");
    std::fs::remove_file(&m).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &m).unwrap();
    // Never read, and damage like any other: the chunks are read without it (strict: an
    // error).
    let strict = OpenOptions {
        strict: true,
        ..quiet()
    };
    let e = TraceDir::open_with(&dir, strict).unwrap_err().to_string();
    assert!(
        e.contains("manifest.json") && e.contains("a character device, not a regular file"),
        "{e}"
    );
    let t = TraceDir::open_with(&dir, quiet()).unwrap();
    let d = t.damage();
    assert!(
        d.iter()
            .any(|d| d.path == m && d.why.contains("a character device, not a regular file")),
        "{d:?}"
    );
}

#[test]
fn a_huge_manifest_is_refused_without_reading_it_all() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = good_trace(tmp.path());
    let m = dir.join("manifest.json");
    let f = std::fs::OpenOptions::new().write(true).open(&m).unwrap();
    f.set_len(reader::safefile::MAX_MANIFEST_BYTES + 1).unwrap();
    let strict = OpenOptions {
        strict: true,
        ..quiet()
    };
    let e = TraceDir::open_with(&dir, strict).unwrap_err().to_string();
    assert!(
        e.contains("manifest.json") && e.contains("larger than"),
        "{e}"
    );
    // Not strict: damage, the chunks read without it.
    let t = TraceDir::open_with(&dir, quiet()).unwrap();
    assert_eq!(entries(&t), ENTRIES);
    assert!(t.damage().iter().any(|d| d.why.contains("larger than")));
}

#[test]
fn a_header_cut_chunk_from_a_full_disk_is_skipped_then_repaired_idempotently() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, chunk) = good_trace(tmp.path());
    let empty = chunk.with_file_name("4194301-0-4.chunk");
    std::fs::write(&empty, b"").unwrap();
    let torn = chunk.with_file_name("4194302-0-5.chunk");
    std::fs::write(
        &torn,
        &bytemuck::bytes_of(&ChunkHeader::new(5, 5))[..CHUNK_HEADER_SIZE - 7],
    )
    .unwrap();
    let t = TraceDir::open_with(&dir, quiet()).unwrap();
    assert_eq!(entries(&t), ENTRIES);
    let d = t.damage();
    assert_eq!(d.len(), 2, "{d:?}");
    assert!(d.iter().all(|d| d.repairable), "{d:?}");
    assert!(d[0].to_string().contains("culprit repair"), "{}", d[0]);

    let r = reader::repair_dir(&dir).unwrap();
    assert_eq!(r.removed.len(), 2);
    assert!(r.left.is_empty(), "{:?}", r.left);
    assert!(!empty.exists() && !torn.exists());
    let manifest = std::fs::read(dir.join("manifest.json")).unwrap();
    let again = reader::repair_dir(&dir).unwrap();
    assert!(again.removed.is_empty() && again.cut.is_empty());
    assert_eq!(std::fs::read(dir.join("manifest.json")).unwrap(), manifest);
    assert!(TraceDir::open_with(&dir, strict())
        .unwrap()
        .damage()
        .is_empty());
}

#[test]
fn repair_completes_the_manifest_a_killed_reader_left() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, chunk) = good_trace(tmp.path());
    let recs = records(&chunk);
    // The reader was killed in the middle of writing its last record, before it wrote
    // the final manifest.
    let (off, n, lost) = recs[recs.len() - 1];
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&chunk)
        .unwrap();
    f.set_len((off + n / 2) as u64).unwrap();
    let m = dir.join("manifest.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&m).unwrap()).unwrap();
    v["complete"] = false.into();
    v["totals"]["entries"] = 0.into();
    std::fs::write(&m, v.to_string()).unwrap();

    let r = reader::repair_dir(&dir).unwrap();
    assert_eq!(r.cut.len(), 1);
    assert_eq!(r.cut[0].2, off as u64);
    let man = r.manifest.unwrap();
    assert!(man.complete);
    assert_eq!(man.totals.entries, ENTRIES - lost);
    let again = reader::repair_dir(&dir).unwrap();
    assert!(again.cut.is_empty() && again.removed.is_empty());
    let t = TraceDir::open_with(&dir, strict()).unwrap();
    assert_eq!(entries(&t), ENTRIES - lost);
}

#[test]
fn loss_of_a_killed_writer_is_said_by_the_acquire_failure_count() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = Pool::create(
        tmp.path().join("pool"),
        &PoolConfig {
            n_subbufs: 2,
            subbuf_size: 8192,
            retry_after: 8,
            calibration: Duration::from_millis(1),
            ..Default::default()
        },
    )
    .unwrap();
    let me = pool.holder();
    let mut w = WriterState::new();
    w.attach(
        &pool,
        me.pid,
        bufpool::sys::proc_stat(me.pid).unwrap().2,
        777,
    );
    // No reader runs: the pool fills, entries are dropped, and the writer "dies" with
    // its drop count (it never flushes).
    let mut dropped = 0;
    for i in 0..2000 {
        if !w.append(&pool, encode_fn(Kind::FnEnter, i, i, 0x4000).as_bytes()) {
            dropped += 1;
        }
    }
    assert!(dropped > 0);
    w.forget();
    let out = tmp.path().join("trace");
    let rep = reader::run(
        &pool,
        &out,
        &ReaderOptions::default(),
        &AtomicBool::new(true),
    )
    .unwrap();
    let t = &rep.manifest.totals;
    assert_eq!(t.lost, 0, "nobody lived to count the drops");
    assert!(
        t.acquire_failures > 0,
        "but the trace says the pool was full"
    );
    let again = reader::Manifest::read(&out).unwrap();
    assert_eq!(again.totals.acquire_failures, t.acquire_failures);
}
