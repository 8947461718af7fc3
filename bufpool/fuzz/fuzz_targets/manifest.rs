//! Fuzz target: parsing `manifest.json` never panics, and a manifest that parses writes
//! back to JSON that parses to the same manifest. A manifest that does not parse, next to
//! a chunk file, is stood in for (`Manifest::read_or_recover`): the directory still opens,
//! with the damage reported.
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
    let dir = std::env::temp_dir().join(format!("culprit-fuzz-manifest-{}", std::process::id()));
    if !dir.join("chunks").is_dir() {
        std::fs::create_dir_all(&dir).unwrap();
        let mut w = reader::ChunkWriter::create(&dir, 1, 0, 1).unwrap();
        let e = bufpool::format::encode_fn(bufpool::format::Kind::FnEnter, 5, 0x10, 0x20);
        let info = bufpool::SubBufInfo {
            magic: bufpool::layout::SUBBUF_MAGIC,
            pid: 9,
            tid: 9,
            first_tsc: 5,
            last_tsc: 5,
            bytes_used: e.as_bytes().len() as u32,
            data_size: 64,
            owner_start_ticks: 1,
            ..Default::default()
        };
        w.append(&info, e.as_bytes()).unwrap();
        w.sync().unwrap();
    }
    std::fs::write(dir.join("manifest.json"), data).unwrap();
    let quiet = reader::OpenOptions {
        quiet: true,
        ..Default::default()
    };
    match reader::TraceDir::open_with(&dir, quiet) {
        Ok(t) => {
            let stood_in = t.manifest_is_stand_in();
            assert_eq!(stood_in, reader::Manifest::parse(path, data).is_err());
            assert_eq!(t.threads().count(), 1);
        }
        // Only a manifest of another format or version is refused.
        Err(e) => assert!(matches!(e, reader::Error::Manifest { .. }), "{e}"),
    }
});
