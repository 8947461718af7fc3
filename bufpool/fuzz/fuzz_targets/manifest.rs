//! Fuzz target: parsing `manifest.json` never panics, and a manifest that parses writes
//! back to JSON that parses to the same manifest.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz/manifest.json");
    if let Ok(m) = reader::Manifest::parse(path, data) {
        let text = serde_json::to_vec(&m).expect("a parsed manifest serializes");
        let again = reader::Manifest::parse(path, &text).expect("and parses again");
        assert_eq!(again, m);
    }
});
