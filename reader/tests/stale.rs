//! A record outside its thread's window that the flight recorder has not compacted yet (it
//! sits in another drain thread's segment, rotated later): readers see what its compacted
//! copy will hold — its metadata — and none of its other entries.

mod common;

use bufpool::format::{encode_meta, Kind, Meta, ThreadRecord, META_BUF};
use reader::chunkfile::ChunkWriter;
use reader::rotated::{record_key, Rotated};
use reader::{Chunk, OpenOptions, TraceDir};
use std::path::Path;

/// The records of a thread whose first sub-buffer begins with a thread record named
/// "first", then holds function entries (caller = their index) over several sub-buffers.
fn records(tmp: &Path) -> (std::path::PathBuf, Vec<Chunk>) {
    let mut buf = [0u8; META_BUF];
    let meta = Meta::Thread(ThreadRecord {
        tid: 1,
        pid: 1,
        name: b"first".to_vec(),
    });
    let n = encode_meta(1, &meta, &mut buf);
    common::thread_chunks(tmp, &buf[..n])
}

/// The thread names and the callers of the function entries a reading of `dir` sees.
fn read(dir: &Path, lazy: bool) -> (Vec<String>, Vec<u64>) {
    let t = TraceDir::open_with(
        dir,
        OpenOptions {
            lazy,
            quiet: true,
            ..Default::default()
        },
    )
    .unwrap();
    let (mut names, mut callers) = (Vec::new(), Vec::new());
    for k in t.threads().collect::<Vec<_>>() {
        t.for_each_entry(k, |_, e| {
            match e.kind {
                Kind::FnEnter => callers.push(e.caller),
                Kind::MetaThread => {
                    if let Ok(Some(Meta::Thread(r))) = e.meta() {
                        names.push(String::from_utf8_lossy(&r.name).into_owned());
                    }
                }
                _ => {}
            }
            Ok(())
        })
        .unwrap();
    }
    (names, callers)
}

#[test]
fn an_uncompacted_record_before_the_window_is_read_as_its_compacted_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let (good, c) = records(tmp.path());
    let d = tmp.path().join("d");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::copy(good.join("manifest.json"), d.join("manifest.json")).unwrap();
    // Drain thread 2's segment, not rotated yet: the first sub-buffer (with the metadata).
    let mut b = ChunkWriter::create(&d, 1, 2, 0).unwrap();
    b.append_piece(&c[0].info, 0, &c[0].data).unwrap();
    b.sync().unwrap();
    // Drain thread 1's segment held the second and was rotated (nothing of it kept: no
    // metadata); the third and later are in its next segment.
    let mut a = ChunkWriter::create(&d, 1, 1, 1).unwrap();
    for x in &c[2..] {
        a.append_piece(&x.info, 0, &x.data).unwrap();
    }
    a.sync().unwrap();
    let key = reader::ThreadKey::of(&c[1].info);
    let mut rot = Rotated::new(1 << 20, None);
    rot.note(key, record_key(&c[1].info, 0), 100, c[1].info.first_tsc);
    rot.write(&d).unwrap();
    // What a reading of the window alone would show: the entries of the third sub-buffer on.
    let mut after = Vec::new();
    for x in &c[2..] {
        for e in x.entries() {
            let e = e.unwrap();
            if e.kind == Kind::FnEnter {
                after.push(e.caller);
            }
        }
    }
    for lazy in [true, false] {
        let (names, callers) = read(&d, lazy);
        // The thread record of the first sub-buffer is there, as its compacted copy will
        // hold it; its function entries (and the second sub-buffer's) are not.
        assert_eq!(names, vec!["first".to_string()], "lazy: {lazy}");
        assert_eq!(callers, after, "lazy: {lazy}");
    }
}
