//! The live data path: entries of a sub-buffer its writer is still filling reach the
//! trace directory (as pieces), each exactly once and in order, across reader restarts and
//! a reader killed in the middle of writing a piece.

use bufpool::format::{encode_fn, Kind};
use bufpool::{Pool, PoolConfig, WriterState};
use reader::{ReaderOptions, TraceDir};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A pool with the default 256 KiB sub-buffers.
fn pool(tmp: &Path) -> Pool {
    Pool::create(
        tmp.join("pool"),
        &PoolConfig {
            n_subbufs: 8,
            calibration: Duration::from_millis(1),
            ..Default::default()
        },
    )
    .unwrap()
}

/// One drain thread, no CPU sampling, the default live interval.
fn quiet_reader() -> ReaderOptions {
    ReaderOptions {
        workers: 1,
        cpu_sample_interval: None,
        ..Default::default()
    }
}

fn append(pool: &Pool, w: &mut WriterState, range: std::ops::Range<u64>) {
    for i in range {
        assert!(w.append(pool, encode_fn(Kind::FnEnter, i + 1, i, 0x4000).as_bytes()));
    }
}

/// The callers (`0..n` in order) of every entry of the one thread of `dir`, read quietly
/// (a directory being written may end in a record being written).
fn callers(dir: &Path) -> Option<Vec<u64>> {
    let t = TraceDir::open_with(
        dir,
        reader::OpenOptions {
            quiet: true,
            ..Default::default()
        },
    )
    .ok()?;
    let mut out = Vec::new();
    for k in t.threads().collect::<Vec<_>>() {
        t.for_each_entry(k, |_, e| {
            out.push(e.caller);
            Ok(())
        })
        .ok()?;
    }
    Some(out)
}

fn wait_for(dir: &Path, n: u64) -> Vec<u64> {
    let t0 = Instant::now();
    loop {
        if let Some(c) = callers(dir) {
            if c.len() as u64 >= n || t0.elapsed() > Duration::from_secs(20) {
                return c;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn entries_reach_the_disk_while_the_sub_buffer_fills_each_once() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path());
    let out = tmp.path().join("trace");
    let stop = AtomicBool::new(false);
    let opts = ReaderOptions {
        workers: 1,
        live_interval: Some(Duration::from_millis(20)),
        cpu_sample_interval: None,
        ..Default::default()
    };
    let mut w = WriterState::for_this_thread(&pool);
    let rep = std::thread::scope(|s| {
        let r = s.spawn(|| reader::run(&pool, &out, &opts, &stop));
        // Three bursts into one 256 KiB sub-buffer, none of which fills it: each is on
        // disk before the next is written.
        append(&pool, &mut w, 0..10);
        assert_eq!(wait_for(&out, 10), (0..10).collect::<Vec<_>>());
        append(&pool, &mut w, 10..11);
        assert_eq!(wait_for(&out, 11), (0..11).collect::<Vec<_>>());
        append(&pool, &mut w, 11..500);
        assert_eq!(wait_for(&out, 500), (0..500).collect::<Vec<_>>());
        // The rest, then the hand-over: only what the pieces did not hold is saved.
        append(&pool, &mut w, 500..600);
        w.flush(&pool, bufpool::layout::FLAG_THREAD_EXIT);
        stop.store(true, Ordering::Release);
        r.join().unwrap().unwrap()
    });
    assert!(rep.live_pieces >= 3, "{} pieces", rep.live_pieces);
    let t = TraceDir::open(&out).unwrap();
    assert_eq!(t.duplicates(), 0);
    assert_eq!(callers(&out).unwrap(), (0..600).collect::<Vec<_>>());
    let m = t.manifest();
    assert_eq!(m.totals.subbufs, 1, "pieces of one sub-buffer count once");
    assert_eq!(m.totals.entries, 600);
    assert!(t.records() > 1);
    let last = t.infos(t.threads().next().unwrap()).last().unwrap();
    assert_ne!(last.flags & bufpool::layout::FLAG_THREAD_EXIT, 0);
    assert_eq!(last.flags & bufpool::layout::FLAG_LIVE, 0);
}

#[test]
fn a_resumed_reader_continues_after_the_pieces_on_disk_even_a_torn_one() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path());
    let out = tmp.path().join("trace");
    let opts = quiet_reader();
    let mut w = WriterState::for_this_thread(&pool);
    // Reader 1 stops while the writer still holds its sub-buffer: its last pass saves
    // the committed prefix.
    append(&pool, &mut w, 0..100);
    let rep = reader::run(&pool, &out, &opts, &AtomicBool::new(true)).unwrap();
    assert_eq!(rep.live_pieces, 1);
    assert_eq!(rep.left_owned, 1);
    // Reader 2 (another directory state: a piece torn by a kill is cut at resume).
    append(&pool, &mut w, 100..150);
    let rep = reader::run(&pool, &out, &opts, &AtomicBool::new(true)).unwrap();
    assert_eq!(rep.live_pieces, 1);
    let files = reader::tracedir::chunk_files(&out).unwrap();
    let last = files.last().unwrap();
    let len = std::fs::metadata(last).unwrap().len();
    // Simulate a reader killed in the middle of writing that piece.
    std::fs::OpenOptions::new()
        .write(true)
        .open(last)
        .unwrap()
        .set_len(len - 30)
        .unwrap();
    append(&pool, &mut w, 150..170);
    w.flush(&pool, 0);
    let rep = reader::run(&pool, &out, &opts, &AtomicBool::new(true)).unwrap();
    assert_eq!(rep.repaired.len(), 1, "the torn piece was cut");
    assert_eq!(rep.saved, 1);
    let t = TraceDir::open(&out).unwrap();
    assert!(t.damage().is_empty(), "{:?}", t.damage());
    assert_eq!(t.duplicates(), 0, "nothing saved twice");
    assert_eq!(callers(&out).unwrap(), (0..170).collect::<Vec<_>>());
    assert_eq!(t.manifest().totals.subbufs, 1);
    assert_eq!(t.manifest().totals.entries, 170);
}

#[test]
fn a_reader_restarted_without_its_memory_saves_again_and_readers_keep_each_entry_once() {
    // Pieces [0, a) and [a, b) on disk, then a reader that knows nothing of them (another
    // directory holding the pieces is merged in) saves the whole sub-buffer: the index keeps
    // the whole copy and drops the covered pieces as duplicates.
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path());
    let out = tmp.path().join("trace");
    let opts = quiet_reader();
    let mut w = WriterState::for_this_thread(&pool);
    append(&pool, &mut w, 0..40);
    reader::run(&pool, &out, &opts, &AtomicBool::new(true)).unwrap();
    append(&pool, &mut w, 40..80);
    reader::run(&pool, &out, &opts, &AtomicBool::new(true)).unwrap();
    // Move the pieces aside, save the whole sub-buffer, bring the pieces back.
    let aside = tmp.path().join("aside");
    std::fs::rename(out.join("chunks"), &aside).unwrap();
    append(&pool, &mut w, 80..90);
    w.flush(&pool, 0);
    reader::run(&pool, &out, &opts, &AtomicBool::new(true)).unwrap();
    for f in std::fs::read_dir(&aside).unwrap() {
        let f = f.unwrap().path();
        std::fs::rename(&f, out.join("chunks").join(f.file_name().unwrap())).unwrap();
    }
    let t = TraceDir::open(&out).unwrap();
    assert_eq!(t.duplicates(), 2);
    assert_eq!(callers(&out).unwrap(), (0..90).collect::<Vec<_>>());
}

#[test]
fn a_piece_overlapping_another_in_part_is_reported_and_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path());
    let out = tmp.path().join("trace");
    let mut w = WriterState::for_this_thread(&pool);
    append(&pool, &mut w, 0..10);
    reader::run(&pool, &out, &quiet_reader(), &AtomicBool::new(true)).unwrap();
    // A foreign piece of the same sub-buffer at bytes 100..300: half of it overlaps.
    let t = TraceDir::open(&out).unwrap();
    let info = *t.infos(t.threads().next().unwrap()).next().unwrap();
    let data: Vec<u8> = (100..110u64)
        .flat_map(|i| {
            encode_fn(Kind::FnEnter, i + 1, i, 0x4000)
                .as_bytes()
                .to_vec()
        })
        .collect();
    let mut cw = reader::ChunkWriter::create(&out, 1, 99, 1).unwrap();
    cw.append_piece(&info, 100, &data).unwrap();
    let t = TraceDir::open_with(
        &out,
        reader::OpenOptions {
            quiet: true,
            ..Default::default()
        },
    )
    .unwrap();
    let d = t.damage();
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].why.contains("overlaps"), "{}", d[0].why);
    assert_eq!(callers(&out).unwrap(), (0..10).collect::<Vec<_>>());
}

/// A flight recorder reserves what the live copier will write before it polls; the traced
/// thread goes on meanwhile. A poll given less room than is committed writes a piece cut
/// at a whole entry within that room, and the next poll continues where it stopped.
#[test]
fn a_poll_writes_no_more_than_its_room_and_the_next_one_continues() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path());
    let dir = tmp.path().join("trace");
    std::fs::create_dir(&dir).unwrap();
    let mut w = WriterState::for_this_thread(&pool);
    append(&pool, &mut w, 0..100);
    let live = reader::live::LiveSaved::new();
    let entry = encode_fn(Kind::FnEnter, 1, 0, 0x4000).as_bytes().len() as u64;
    let fixed = bufpool::disk::RECORD_FIXED_SIZE as u64;
    let due = live.due(&pool);
    assert_eq!(due, fixed + 100 * entry);
    let mut out = None;
    let open = || reader::ChunkWriter::create(&dir, 1, 0, 1);
    let mut buf = Vec::new();
    // Room for 10 entries and a half: 10 are written.
    let room = fixed + 10 * entry + entry / 2;
    let p = live
        .poll(&pool, &mut out, open, &mut buf, Some(room))
        .unwrap();
    assert_eq!((p.pieces, p.bytes), (1, 10 * entry));
    assert_eq!(out.as_ref().unwrap().len() - 32, fixed + 10 * entry);
    assert_eq!(live.due(&pool), fixed + 90 * entry);
    // Room for less than one entry: nothing is written, nothing is remembered.
    let p = live
        .poll(&pool, &mut out, open, &mut buf, Some(fixed + entry - 1))
        .unwrap();
    assert_eq!(p.pieces, 0);
    // The thread goes on; an unlimited poll takes all the rest.
    append(&pool, &mut w, 100..150);
    let p = live.poll(&pool, &mut out, open, &mut buf, None).unwrap();
    assert_eq!((p.pieces, p.bytes), (1, 140 * entry));
    out.as_ref().unwrap().sync().unwrap();
    w.flush(&pool, bufpool::layout::FLAG_THREAD_EXIT);
    let c = bufpool::Consumer::new(&pool);
    let t = c.take().unwrap();
    live.save_taken(t.info(), t.data(), out.as_mut().unwrap())
        .unwrap();
    t.release();
    assert_eq!(callers(&dir).unwrap(), (0..150).collect::<Vec<_>>());
}
