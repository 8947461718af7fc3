//! Damage costs only itself in the analyzer (issue 18): a damaged record of one trace
//! directory is skipped where `TraceSet` reads it — `learn` and `rank` finish on the
//! rest, and the directory's `damage()` names the file and the record.

mod common;

use analyzer::decode::{ThreadSource, TraceSet};

#[test]
fn learn_and_rank_skip_a_damaged_record_and_say_so() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = analyzer::Options::default();
    let normal = common::record_ring(tmp.path(), "normal");
    let good = analyzer::learn(&[TraceSet::open(&normal).unwrap()], &opts).unwrap();

    let trial = common::record_ring(tmp.path(), "trial");
    let chunk = reader::tracedir::chunk_files(&trial[1]).unwrap()[0].clone();
    let mut b = std::fs::read(&chunk).unwrap();
    let first = bufpool::disk::records(&b).next().unwrap().unwrap().offset;
    let at = first as usize + bufpool::disk::RECORD_FIXED_SIZE + 3;
    b[at] ^= 0x40;
    std::fs::write(&chunk, &b).unwrap();

    let set = TraceSet::open(&trial).unwrap();
    let rep = analyzer::rank(&good.model, &set, &opts).unwrap();
    assert!(!rep.units.is_empty());
    let learned = analyzer::learn(std::slice::from_ref(&set), &opts).unwrap();
    assert!(
        learned.stats.entries < good.stats.entries,
        "the damaged record is left out"
    );
    assert!(learned.stats.entries > 0, "the rest is read");
    let dir = set
        .processes
        .iter()
        .flat_map(|p| &p.threads)
        .find_map(|t| match &t.source {
            ThreadSource::Dir { dir, .. } if dir.path() == trial[1] => Some(dir.clone()),
            _ => None,
        })
        .unwrap();
    let d = dir.damage();
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].path, chunk);
    assert_eq!((d[0].records, d[0].offset), (1, Some(first)));
}
