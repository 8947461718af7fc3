//! The reader saves every committed entry exactly once: writer threads and writer
//! processes fill a small pool while a reader drains it, including a reader process
//! SIGKILLed mid-drain and restarted, and writer processes SIGKILLed mid-run.
//!
//! Child processes are this test executable re-run with `READER_TEST_ROLE` set (see
//! `child_role`), so no helper binary is needed.

use bufpool::format::{encode_fn, Kind};
use bufpool::{Pool, PoolConfig, WriterState};
use reader::{ReaderOptions, TraceDir};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const ROLE_ENV: &str = "READER_TEST_ROLE";

fn pool(dir: &Path, n: u32) -> Pool {
    Pool::create(
        dir.join("pool"),
        &PoolConfig {
            n_subbufs: n,
            subbuf_size: 8192,
            retry_after: 4,
            calibration: Duration::from_millis(1),
            ..Default::default()
        },
    )
    .unwrap()
}

/// Writes `count` entries from the calling thread: caller = 1, 2, 3…, callee = `id`.
/// Returns how many were dropped.
fn write_entries(pool: &Pool, id: u64, count: u64, pace_every: u64) -> u64 {
    let me = pool.holder();
    let mut w = WriterState::new();
    let start = bufpool::sys::proc_stat(me.pid).unwrap().2;
    w.attach(pool, me.pid, start, bufpool::sys::gettid());
    for i in 1..=count {
        let e = encode_fn(Kind::FnEnter, bufpool::sys::rdtsc(), i, id);
        w.append(pool, e.as_bytes());
        if pace_every > 0 && i % pace_every == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    w.flush(pool, 0);
    w.lost_total
}

/// Per writer id (callee): the sequence of callers recorded, and the lost count.
#[derive(Default, Debug)]
struct Seen {
    callers: Vec<u64>,
    lost: u64,
}

fn collect(dir: &Path) -> (TraceDir, BTreeMap<u64, Seen>) {
    let trace = TraceDir::open(dir).unwrap();
    let mut by_id: BTreeMap<u64, Seen> = BTreeMap::new();
    for t in trace.threads().collect::<Vec<_>>() {
        let mut id_of_thread = None;
        let mut lost = 0;
        trace
            .for_each_entry(t, |_, e| {
                match e.kind {
                    Kind::FnEnter => {
                        id_of_thread = Some(e.callee);
                        by_id.entry(e.callee).or_default().callers.push(e.caller);
                    }
                    Kind::Lost => lost += e.lost,
                    k => panic!("unexpected entry {k:?}"),
                }
                Ok(())
            })
            .unwrap();
        if let Some(id) = id_of_thread {
            by_id.entry(id).or_default().lost += lost;
        }
    }
    (trace, by_id)
}

/// Every id wrote callers 1..=count: each recorded one appears once, in order, and
/// recorded + lost (markers + unreported) = count.
fn check_exactly_once(by_id: &BTreeMap<u64, Seen>, ids: &[u64], count: u64, unreported: u64) {
    let mut lost_total = 0;
    for id in ids {
        // A thread that ran only while the pool was full recorded nothing; its drops
        // are then all in the pool's `lost_unreported`.
        let none = Seen::default();
        let s = by_id.get(id).unwrap_or(&none);
        assert!(
            s.callers.windows(2).all(|w| w[0] < w[1]),
            "writer {id}: entries duplicated or out of order"
        );
        assert!(s.callers.iter().all(|&c| (1..=count).contains(&c)));
        assert!(
            s.callers.len() as u64 + s.lost <= count,
            "writer {id}: {s:?}"
        );
        lost_total += count - s.callers.len() as u64 - s.lost;
    }
    assert_eq!(
        lost_total, unreported,
        "entries neither recorded nor counted"
    );
}

#[test]
fn threads_fill_a_small_pool_while_the_reader_drains_it() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path(), 8);
    let out = tmp.path().join("trace");
    let stop = AtomicBool::new(false);
    let (threads, count) = (4u64, 20_000u64);
    let report = std::thread::scope(|s| {
        let r = s.spawn(|| reader::run(&pool, &out, &ReaderOptions::default(), &stop));
        let ws: Vec<_> = (0..threads)
            .map(|id| {
                let pool = &pool;
                s.spawn(move || write_entries(pool, 100 + id, count, 500))
            })
            .collect();
        for w in ws {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Release);
        r.join().unwrap().unwrap()
    });
    let (trace, by_id) = collect(&out);
    let ids: Vec<u64> = (0..threads).map(|i| 100 + i).collect();
    let unreported = pool.shared().lost_unreported.load(Ordering::Relaxed);
    check_exactly_once(&by_id, &ids, count, unreported);
    let m = trace.manifest();
    assert!(m.complete);
    let recorded: u64 = by_id.values().map(|s| s.callers.len() as u64).sum();
    let lost: u64 = by_id.values().map(|s| s.lost).sum();
    assert_eq!(m.totals.entries, recorded);
    assert_eq!(m.totals.lost, lost + unreported);
    assert_eq!(m.totals.threads, threads);
    assert_eq!(m.totals.processes, 1);
    assert_eq!(trace.duplicates(), 0);
    assert_eq!(report.saved, m.totals.subbufs);
    assert!(recorded > 0);
    assert_eq!(m.calibration(), pool.info().calib);
}

fn spawn_role(role: &str, pool: &Path, extra: &[(&str, String)]) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
        .env(ROLE_ENV, role)
        .env("READER_TEST_POOL", pool);
    for (k, v) in extra {
        c.env(k, v);
    }
    c.spawn().unwrap()
}

/// Not a test of its own: the body of the child processes (does nothing otherwise).
#[test]
fn child_role() {
    let Ok(role) = std::env::var(ROLE_ENV) else {
        return;
    };
    let pool = Pool::open(std::env::var("READER_TEST_POOL").unwrap()).unwrap();
    match role.as_str() {
        "writer" => {
            let id: u64 = std::env::var("WRITER_ID").unwrap().parse().unwrap();
            let count: u64 = std::env::var("WRITER_COUNT").unwrap().parse().unwrap();
            std::thread::scope(|s| {
                for t in 0..2 {
                    let pool = &pool;
                    s.spawn(move || write_entries(pool, id * 10 + t, count, 200));
                }
            });
        }
        "reader" => {
            let out = std::env::var("READER_OUT").unwrap();
            let stop = AtomicBool::new(false);
            let opts = ReaderOptions {
                idle_sleep: Duration::from_micros(200),
                ..Default::default()
            };
            reader::run(&pool, Path::new(&out), &opts, &stop).unwrap();
        }
        // A reader that stops on SIGTERM, as `culprit reader` does.
        "reader-sigterm" => {
            let out = std::env::var("READER_OUT").unwrap();
            reader::signals::install(&[libc::SIGTERM]).unwrap();
            let opts = ReaderOptions {
                idle_sleep: Duration::from_micros(500),
                ..Default::default()
            };
            reader::run(&pool, Path::new(&out), &opts, reader::signals::stop_flag()).unwrap();
        }
        // A reader killed after saving a sub-buffer but before releasing it: take one,
        // save it, and wait to be killed.
        "reader-stall" => {
            let out = std::env::var("READER_OUT").unwrap();
            let c = bufpool::Consumer::new(&pool);
            let mut w =
                reader::ChunkWriter::create(Path::new(&out), std::process::id(), 0, 1).unwrap();
            let t = loop {
                if let Some(t) = c.take() {
                    break t;
                }
                std::thread::sleep(Duration::from_millis(1));
            };
            w.append(t.info(), t.data()).unwrap();
            println!("saved");
            std::mem::forget(t);
            std::thread::sleep(Duration::from_secs(60));
        }
        // A reader killed in the middle of writing a record: half of it reaches the file.
        "reader-torn" => {
            use std::io::Write;
            let out = std::env::var("READER_OUT").unwrap();
            let c = bufpool::Consumer::new(&pool);
            let w = reader::ChunkWriter::create(Path::new(&out), std::process::id(), 0, 2).unwrap();
            let t = loop {
                if let Some(t) = c.take() {
                    break t;
                }
                std::thread::sleep(Duration::from_millis(1));
            };
            let mut rec = Vec::new();
            bufpool::disk::encode_record(t.info(), t.data(), &mut rec);
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(w.path())
                .unwrap();
            f.write_all(&rec[..rec.len() / 2]).unwrap();
            println!("saved");
            std::mem::forget(t);
            std::thread::sleep(Duration::from_secs(60));
        }
        // A reader whose files cannot grow past 100 KB (RLIMIT_FSIZE): its writes fail.
        "reader-fsize" => {
            let out = std::env::var("READER_OUT").unwrap();
            // SAFETY: ignoring SIGXFSZ (so write returns EFBIG) and lowering this
            // process's own file size limit touch no memory of ours.
            unsafe {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                let lim = libc::rlimit {
                    rlim_cur: 100_000,
                    rlim_max: 100_000,
                };
                assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
            }
            let stop = AtomicBool::new(true);
            match reader::run(&pool, Path::new(&out), &ReaderOptions::default(), &stop) {
                Ok(_) => println!("unexpectedly saved everything"),
                Err(e) => println!("failed: {e}"),
            }
        }
        r => panic!("unknown role {r}"),
    }
    std::process::exit(0);
}

fn kill9(c: &mut Child) {
    // SAFETY: kill(2) on our own child's pid, which it has not been reaped yet, so
    // the pid cannot name another process.
    unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
    c.wait().unwrap();
}

#[test]
fn a_reader_killed_mid_drain_and_restarted_loses_and_duplicates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path(), 16);
    let out = tmp.path().join("trace");
    let count = 30_000u64;
    let writers: Vec<u64> = (1..=3).collect();
    let mut ws: Vec<Child> = writers
        .iter()
        .map(|id| {
            spawn_role(
                "writer",
                pool.path(),
                &[
                    ("WRITER_ID", id.to_string()),
                    ("WRITER_COUNT", count.to_string()),
                ],
            )
        })
        .collect();
    // Kill and restart the reader process a few times while the writers run.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut kills = 0;
    for role in ["reader-stall", "reader-torn"] {
        let mut c = Command::new(std::env::current_exe().unwrap());
        c.args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
            .env(ROLE_ENV, role)
            .env("READER_TEST_POOL", pool.path())
            .env("READER_OUT", &out)
            .stdout(std::process::Stdio::piped());
        let mut r = c.spawn().unwrap();
        // The test harness prints its own lines first; wait for ours.
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(r.stdout.take().unwrap()));
        let saw = lines.any(|l| l.is_ok_and(|l| l.contains("saved")));
        assert!(saw, "{role}: the child never saved a sub-buffer");
        kill9(&mut r);
        kills += 1;
    }
    // The torn record is there, and detected.
    let torn = reader::tracedir::chunk_files(&out)
        .unwrap()
        .iter()
        .filter_map(|f| reader::tracedir::scan_chunk_file(f, |_, _, _| Ok(())).err())
        .map(|e| e.to_string())
        .collect::<Vec<_>>();
    assert_eq!(torn.len(), 1, "{torn:?}");
    assert!(torn[0].contains("record truncated"), "{torn:?}");
    for round in 0..6u64 {
        let mut r = spawn_role(
            "reader",
            pool.path(),
            &[("READER_OUT", out.display().to_string())],
        );
        std::thread::sleep(Duration::from_millis(30 + 17 * round));
        kill9(&mut r);
        kills += 1;
        // Let the writers make progress with no reader (the pool fills and they drop).
        std::thread::sleep(Duration::from_millis(5));
        assert!(Instant::now() < deadline, "test took too long");
    }
    for w in &mut ws {
        let st = w.wait().unwrap();
        assert!(st.success(), "writer failed: {st}");
    }
    // A final reader in this process drains everything and indexes the directory.
    let stop = AtomicBool::new(true);
    reader::run(&pool, &out, &ReaderOptions::default(), &stop).unwrap();
    let (trace, by_id) = collect(&out);
    eprintln!(
        "killed reader {kills} times: {} duplicate record(s), {} lost, {} records",
        trace.duplicates(),
        trace.manifest().totals.lost,
        trace.records()
    );
    let ids: Vec<u64> = writers.iter().flat_map(|w| [w * 10, w * 10 + 1]).collect();
    let unreported = pool.shared().lost_unreported.load(Ordering::Relaxed);
    check_exactly_once(&by_id, &ids, count, unreported);
    assert_eq!(kills, 8);
    assert!(
        trace.duplicates() >= 1,
        "the stalled reader's sub-buffer was saved twice"
    );
    assert_eq!(trace.manifest().totals.processes, 3);
    assert_eq!(trace.manifest().totals.duplicates, trace.duplicates());
    assert_eq!(
        pool.slots().census()[0],
        pool.n_subbufs(),
        "every sub-buffer free at the end"
    );
}

#[test]
fn writers_killed_mid_run_keep_what_they_committed() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path(), 64);
    let out = tmp.path().join("trace");
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let r = s.spawn(|| reader::run(&pool, &out, &ReaderOptions::default(), &stop));
        let mut w = spawn_role(
            "writer",
            pool.path(),
            &[
                ("WRITER_ID", "7".into()),
                ("WRITER_COUNT", "100000000".into()),
            ],
        );
        // Wait until it has published something, then kill it mid-run.
        let t0 = Instant::now();
        while pool.shared().published.load(Ordering::Relaxed) < 3 {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "writer never published"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        kill9(&mut w);
        stop.store(true, Ordering::Release);
        r.join().unwrap().unwrap();
    });
    let (trace, by_id) = collect(&out);
    assert!(by_id.contains_key(&70) || by_id.contains_key(&71));
    for (&id, s) in &by_id {
        assert!(id == 70 || id == 71, "unexpected writer {id}");
        // A prefix 1..=n, every entry once, nothing after a gap except counted drops.
        assert!(s.callers.windows(2).all(|w| w[0] < w[1]));
        let last = *s.callers.last().unwrap();
        assert_eq!(s.callers.len() as u64 + s.lost, last, "writer {id}");
    }
    assert!(
        trace.manifest().totals.salvaged >= 1,
        "the killed writers' buffers were salvaged"
    );
    assert_eq!(pool.slots().census()[0], pool.n_subbufs());
}

#[test]
fn a_reader_that_cannot_write_leaves_everything_in_the_pool() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path(), 64);
    let count = 20_000u64; // 400 KB of entries: more than the 100 KB the reader may write
    write_entries(&pool, 5, count, 0);
    let out = tmp.path().join("trace");
    let r = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
        .env(ROLE_ENV, "reader-fsize")
        .env("READER_TEST_POOL", pool.path())
        .env("READER_OUT", &out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(text.contains("failed: saving to"), "{text}");
    assert!(text.contains("File too large"), "{text}");
    assert!(text.contains("left in the pool"), "{text}");
    let written = pool.slots().census()[bufpool::State::Written as usize];
    assert!(
        written > 0,
        "the unsaved sub-buffers stay written in the pool"
    );
    // A reader that can write then saves the rest: every entry exactly once.
    reader::run(
        &pool,
        &out,
        &ReaderOptions::default(),
        &AtomicBool::new(true),
    )
    .unwrap();
    let (_, by_id) = collect(&out);
    assert_eq!(by_id[&5].callers, (1..=count).collect::<Vec<_>>());
    assert_eq!(by_id[&5].lost, 0);
}

#[test]
fn two_reader_processes_share_one_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path(), 16);
    let out = tmp.path().join("trace");
    let out_s = out.display().to_string();
    let mut readers: Vec<Child> = (0..2)
        .map(|_| {
            spawn_role(
                "reader-sigterm",
                pool.path(),
                &[("READER_OUT", out_s.clone())],
            )
        })
        .collect();
    // Both readers have the pool mapped (they are draining) before the writers start.
    let t0 = Instant::now();
    for r in &readers {
        let maps = format!("/proc/{}/maps", r.id());
        while !std::fs::read_to_string(&maps)
            .unwrap_or_default()
            .contains(&pool.path().display().to_string())
        {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "reader never started"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let count = 20_000u64;
    let mut ws: Vec<Child> = (1..=2u64)
        .map(|id| {
            spawn_role(
                "writer",
                pool.path(),
                &[
                    ("WRITER_ID", id.to_string()),
                    ("WRITER_COUNT", count.to_string()),
                ],
            )
        })
        .collect();
    for w in &mut ws {
        assert!(w.wait().unwrap().success());
    }
    // Let the readers catch up, then stop them one after the other.
    let t0 = Instant::now();
    while pool.slots().census()[bufpool::State::Written as usize] > 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "readers never drained the pool"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    for r in &mut readers {
        // SAFETY: kill(2) on our own unreaped child.
        unsafe { libc::kill(r.id() as i32, libc::SIGTERM) };
        assert!(r.wait().unwrap().success());
    }
    let files = reader::tracedir::chunk_files(&out).unwrap();
    let pids: std::collections::BTreeSet<&str> = files
        .iter()
        .filter_map(|f| f.file_name()?.to_str()?.split('-').next())
        .collect();
    assert_eq!(pids.len(), 2, "both readers saved something: {files:?}");
    let (trace, by_id) = collect(&out);
    let unreported = pool.shared().lost_unreported.load(Ordering::Relaxed);
    check_exactly_once(&by_id, &[10, 11, 20, 21], count, unreported);
    let m = trace.manifest();
    assert!(m.complete);
    let recorded: u64 = by_id.values().map(|s| s.callers.len() as u64).sum();
    assert_eq!(
        m.totals.entries, recorded,
        "the last reader to finish counted everything"
    );
}
