//! Fuzz target: an IO-sample file (`culprit iosample`'s `.cios`) of any bytes. Parsing
//! never panics and ends (the search for the next record after damage is bounded); a
//! damaged record costs only itself: every record the parser keeps frames and checks,
//! and what it skipped adds up with what it kept to the file. Then the sample log built
//! from it (`SampleLog::open`) must not panic either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok((records, tail)) = reader::iosample::format::parse_records(Path::new("fuzz.cios"), data)
    else {
        return;
    };
    let kept: usize = records.iter().map(|r| reader::iosample::format::frame(r).len()).sum();
    assert!(kept as u64 + tail.ignored_bytes <= data.len() as u64);
    assert_eq!(tail.damaged_at.is_some(), tail.parts > 0);
    let path = std::env::temp_dir().join(format!("culprit-fuzz-{}.cios", std::process::id()));
    std::fs::write(&path, data).unwrap();
    if let Ok(log) = reader::iosample::SampleLog::open(&path) {
        let _ = log.tail.describe();
    }
    let _ = std::fs::remove_file(&path);
});
