//! A sparse chunk file (issue 27, defect 8): 10 GB long, 200 KB of records and a hole.
//! Reading the directory skips the hole without reading it — measured by the bytes this
//! thread read (`/proc/thread-self/io`), not by time.

mod common;

use reader::{OpenOptions, TraceDir};

fn read_bytes() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_hole_in_a_chunk_is_skipped_without_reading_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, chunk) = common::good_trace(tmp.path(), 32, 12_000);
    let len = std::fs::metadata(&chunk).unwrap().len();
    assert!(len > 100_000, "{len}");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&chunk)
        .unwrap();
    f.set_len(len + (10 << 30)).unwrap();
    drop(f);
    let before = read_bytes();
    let t = TraceDir::open_with(
        &dir,
        OpenOptions {
            quiet: true,
            ..Default::default()
        },
    )
    .unwrap();
    let read = read_bytes() - before;
    assert!(
        read < 64 << 20,
        "read {read} bytes of a file holding {len} bytes of records"
    );
    // The records are all there; the hole is the damage said.
    assert!(t.records() > 0);
    let d = t.damage();
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].offset, Some(len), "{d:?}");
    assert_eq!(d[0].bytes, 10 << 30, "{d:?}");
}
