//! Lost counts come from the files, so a damaged or hostile trace must not make them wrap
//! (issue 27: two record headers with `lost_before` = 2⁶³ and a valid checksum made
//! `learn` report "0 lost"), and a loss is counted once: a writer writes it twice, in the
//! sub-buffer header and in the `Lost` entry that starts the data (FORMAT.md §2), and a
//! header that disagrees with its data is reported as damage.

use analyzer::decode::{write_trace_dir, ThreadSource, TraceBuilder, TraceSet};
use bufpool::format::{LibFn, LibOpts};
use std::path::Path;

/// A process whose thread loses `losses` (each before a chunk of its own), between calls.
fn trace(dir: &Path, losses: &[u64]) {
    let mut t = TraceBuilder::new("h", 7, 7);
    let call = |t: &mut TraceBuilder| {
        t.enter(0x10, 0x20);
        t.lib(
            0x30,
            LibFn::Write,
            LibOpts {
                fd: Some(1),
                ret: Some(3),
                ..Default::default()
            },
        );
        t.exit(0x20);
    };
    call(&mut t);
    for &n in losses {
        t.lose(n);
        call(&mut t);
    }
    write_trace_dir(dir, "h", &[t.finish()]).unwrap();
}

fn lost_learned(set: &TraceSet) -> u64 {
    analyzer::learn(std::slice::from_ref(set), &analyzer::Options::default())
        .unwrap()
        .stats
        .lost
}

fn trace_dir(set: &TraceSet) -> std::sync::Arc<reader::TraceDir> {
    match &set.processes[0].threads[0].source {
        ThreadSource::Dir { dir, .. } => dir.clone(),
        _ => unreachable!(),
    }
}

#[test]
fn lost_counts_saturate_instead_of_wrapping_and_count_each_loss_once() {
    let tmp = tempfile::tempdir().unwrap();
    // Each loss once (not once for the header and once more for the `Lost` entry).
    let small = tmp.path().join("small");
    trace(&small, &[2, 3]);
    assert_eq!(
        lost_learned(&TraceSet::open(std::slice::from_ref(&small)).unwrap()),
        5
    );
    let s = reader::summarize(&reader::TraceDir::open(&small).unwrap()).unwrap();
    assert_eq!(s.totals.lost, 5);

    // 2⁶³ twice, header and marker agreeing: as many as can be told, not 0.
    let huge = tmp.path().join("huge");
    trace(&huge, &[1 << 63, 1 << 63]);
    let set = TraceSet::open(std::slice::from_ref(&huge)).unwrap();
    assert_eq!(lost_learned(&set), u64::MAX);
    assert!(trace_dir(&set).damage().is_empty());
    let s = reader::summarize(&reader::TraceDir::open(&huge).unwrap()).unwrap();
    assert_eq!(s.totals.lost, u64::MAX);
}

#[test]
fn a_header_lost_count_its_data_does_not_carry_is_damage_and_not_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    trace(&dir, &[4]);
    // The first record (no loss before it) gets a header claiming 2⁶³ lost, its checksum
    // recomputed with bufpool's encoder: its data has no `Lost` entry.
    let chunk = reader::tracedir::chunk_files(&dir).unwrap()[0].clone();
    let mut b = std::fs::read(&chunk).unwrap();
    let r = bufpool::disk::records(&b).next().unwrap().unwrap();
    let (off, piece, mut info, data) = (r.offset as usize, r.piece, r.info, r.data.to_vec());
    info.lost_before = 1 << 63;
    let mut rec = Vec::new();
    bufpool::disk::encode_piece(&info, piece, &data, &mut rec);
    b[off..off + rec.len()].copy_from_slice(&rec);
    std::fs::write(&chunk, &b).unwrap();

    let set = TraceSet::open(std::slice::from_ref(&dir)).unwrap();
    assert_eq!(
        lost_learned(&set),
        4,
        "the marker-less header is not counted"
    );
    let d = trace_dir(&set).damage();
    assert_eq!(d.len(), 1, "reported once, however many passes: {d:?}");
    assert_eq!((d[0].path.clone(), d[0].offset), (chunk, Some(off as u64)));
    assert!(
        d[0].why.contains("9223372036854775808") && d[0].why.contains("no `Lost` marker"),
        "{}",
        d[0].why
    );
    let s = reader::summarize(&reader::TraceDir::open(&dir).unwrap()).unwrap();
    assert_eq!(s.totals.lost, 4);
    // `--strict` makes it an error.
    let strict = reader::TraceDir::open_with(
        &dir,
        reader::OpenOptions {
            strict: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(reader::summarize(&strict).is_err());
}
