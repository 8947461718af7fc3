//! SIGKILL torture, bounded (issue 18): the traced program, `culprit record`, standalone
//! `culprit reader`s, or a reader and the program together are SIGKILLed at a random
//! point of a run; a fresh `culprit reader` then drains what the pool kept. Every trial
//! checks the exact call/return sequence of each writer thread — no entry duplicated,
//! reordered or corrupted, every hole accounted for by a `Lost` marker — and, when the
//! program exited normally, the exact loss accounting: recorded + lost markers +
//! `lost_unreported` = produced.
//!
//! The program is this test executable re-run as a writer (`TORTURE_ROLE=writer`): two
//! threads append `FnEnter(i)` / `FnExit(i)` pairs through `bufpool::WriterState` into the
//! pool named by `CULPRIT_POOL`, pacing themselves so a run lasts about a second, and write
//! how many events they produced when they exit normally. Under `culprit record` it runs
//! as `sh -c 'exec env -u LD_PRELOAD …'`, so only its own writer threads write entries of
//! these kinds. The kill delays are random (the seed is printed); each trial takes a few
//! seconds at most. Two trials kill the reader while it copies the committed prefix of
//! sub-buffers the writers still fill, every millisecond (the live data path): what it
//! saved stays, what it was writing is saved again by the next reader, nothing twice.

use bufpool::format::{Decoder, Kind};
use bufpool::{Pool, WriterState};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tests::*;

const ROLE_ENV: &str = "TORTURE_ROLE";
const OUT_ENV: &str = "TORTURE_OUT";
/// Call/return pairs per writer thread.
const PAIRS: u64 = 40_000;
/// Marker in the caller field of the writer's entries.
const MARK: u64 = 0x7e57_0000;
/// The pool of every trial: small enough that writers drop under the readers' kills.
const TINY_POOL: [&str; 6] = [
    "--subbufs",
    "8",
    "--subbuf-size",
    "8K",
    "--retry-after",
    "16",
];

/// Not a test of its own: the body of the writer process (does nothing otherwise).
#[test]
fn torture_writer_role() {
    if std::env::var(ROLE_ENV).as_deref() != Ok("writer") {
        return;
    }
    let pool = Pool::open(std::env::var("CULPRIT_POOL").unwrap()).unwrap();
    let out = PathBuf::from(std::env::var(OUT_ENV).unwrap());
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (pool, out) = (&pool, &out);
            s.spawn(move || {
                let me = pool.holder();
                let ticks = bufpool::sys::proc_stat(me.pid).unwrap().2;
                let tid = bufpool::sys::gettid();
                let mut w = WriterState::new();
                w.attach(pool, me.pid, ticks, tid);
                for i in 0..PAIRS {
                    let tsc = bufpool::sys::rdtsc();
                    w.append_fn(pool, Kind::FnEnter, tsc, MARK + t, i);
                    w.append_ret(pool, Kind::FnExit, tsc + 1, i, 0);
                    if i % 400 == 0 {
                        std::thread::sleep(Duration::from_millis(8));
                    }
                }
                w.flush(pool, 0);
                std::fs::write(out.join(format!("{tid}")), format!("{}", 2 * PAIRS)).unwrap();
            });
        }
    });
}

fn writer<'a>(cmd: &'a mut Command, pool: &Path, out: &Path) -> &'a mut Command {
    cmd.env(ROLE_ENV, "writer")
        .env("CULPRIT_POOL", pool)
        .env(OUT_ENV, out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
}

fn spawn_writer(pool: &Path, out: &Path) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "torture_writer_role", "--test-threads=1"]);
    writer(&mut c, pool, out).spawn().unwrap()
}

fn culprit_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(culprit());
    c.args(args).stdout(Stdio::null()).stderr(Stdio::piped());
    c
}

/// A standalone reader on an existing pool; stops once no other process maps it.
fn reader_proc(pool: &Path, dir: &Path) -> Child {
    culprit_cmd(&["reader", "--pool", s(pool), "-o", s(dir)])
        .spawn()
        .unwrap()
}

/// How many live pieces (sub-buffer prefixes copied while their writer still owned them)
/// the trace directory holds; 0 while it cannot be read yet.
fn live_pieces(dir: &Path) -> usize {
    let Ok(t) = reader::TraceDir::open_lazy(dir) else {
        return 0;
    };
    t.threads()
        .flat_map(|k| t.infos(k).cloned().collect::<Vec<_>>())
        .filter(|i| i.flags & bufpool::layout::FLAG_LIVE != 0)
        .count()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn kill9(c: &mut Child) {
    // SAFETY: kill has no memory effects; the pid is our child's.
    unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
    let _ = c.wait();
}

fn wait_ok(c: &mut Child, what: &str) {
    let t0 = Instant::now();
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            assert!(st.success(), "{what}: {st}");
            return;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            kill9(c);
            panic!("{what}: still running after 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A tiny xorshift generator (the seed is printed so a failing trial can be rerun).
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Checks every writer thread's recorded sequence; returns (events recorded, lost-marker
/// counts) per thread.
fn check_sequences(dir: &Path) -> BTreeMap<u32, (u64, u64)> {
    let t = reader::TraceDir::open_with(
        dir,
        reader::OpenOptions {
            quiet: true,
            ..Default::default()
        },
    )
    .unwrap();
    let mut out = BTreeMap::new();
    for key in t.threads().collect::<Vec<_>>() {
        // Event k of a thread: FnEnter(k/2) for even k, FnExit(k/2) for odd k.
        let mut next = 0u64;
        let (mut recorded, mut lost, mut mine) = (0u64, 0u64, false);
        for c in t.chunks(key) {
            let c = c.unwrap();
            for e in Decoder::new(&c.data) {
                let e = e.unwrap_or_else(|err| panic!("{}: corrupt entry: {err}", key.tid));
                let k = match e.kind {
                    Kind::Lost => {
                        next += e.lost;
                        lost += e.lost;
                        continue;
                    }
                    Kind::FnEnter if e.caller & !1 == MARK => 2 * e.callee,
                    Kind::FnExit => 2 * e.callee + 1,
                    _ => continue,
                };
                mine = true;
                assert_eq!(
                    k, next,
                    "thread {}: event {k} where {next} was due (duplicate, reordered or an \
                     unaccounted hole)",
                    key.tid
                );
                next += 1;
                recorded += 1;
            }
        }
        if mine {
            out.insert(key.tid, (recorded, lost));
        }
    }
    out
}

/// When the writer exited normally: recorded + lost = produced, exactly.
fn check_accounting(
    dir: &Path,
    out: &Path,
    seqs: &BTreeMap<u32, (u64, u64)>,
    only_writer: bool,
    what: &str,
) {
    let m = reader::Manifest::read(dir).unwrap();
    let mut produced = 0;
    let mut counted = 0;
    for (tid, (rec, lost)) in seqs {
        let p: u64 = std::fs::read_to_string(out.join(tid.to_string()))
            .unwrap_or_else(|_| panic!("{what}: thread {tid} did not report"))
            .parse()
            .unwrap();
        produced += p;
        counted += rec + lost;
    }
    let reported = std::fs::read_dir(out).unwrap().count();
    assert_eq!(reported, 2, "{what}: both writer threads exited normally");
    assert_eq!(
        seqs.len(),
        2,
        "{what}: both writer threads are in the trace: {seqs:?}"
    );
    let unreported = m.totals.lost_unreported;
    if only_writer {
        assert_eq!(
            counted + unreported,
            produced,
            "{what}: recorded + lost markers + lost_unreported = produced ({seqs:?}, \
             unreported {unreported})"
        );
    } else {
        // `lost_unreported` is pool-wide: the traced shell adds its own drops to it.
        assert!(
            counted <= produced && produced <= counted + unreported,
            "{what}: recorded + lost markers ({counted}) + at most lost_unreported \
             ({unreported}) = produced ({produced}): {seqs:?}"
        );
    }
}

#[derive(Clone, Copy, Debug)]
enum Kill {
    Program,
    Reader,
    Both,
    Recorder,
    /// The reader, while it copies the committed prefix of 256 KiB sub-buffers the
    /// writers are still filling every millisecond (the live data path): most kills land
    /// in the middle of a live copy or of writing its piece.
    LiveReader,
    /// The reader in the middle of live copies, and the program.
    LiveBoth,
}

fn trial(kill: Kill, rng: &mut Rng, root: &Path, n: usize) {
    if matches!(kill, Kill::Recorder) && libtrace().is_none() {
        eprintln!("torture: recorder trial skipped: libtrace.so not built");
        return;
    }
    let base = root.join(format!("trial{n}"));
    let pool = base.join("pool");
    let dir = base.join("trace");
    let out = base.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let delay = Duration::from_millis(150 + rng.below(700));
    let what = format!("trial {n} ({kill:?} killed after {delay:?})");
    eprintln!("torture: {what}");
    let mut writer_done = true;
    match kill {
        Kill::Recorder => {
            let exe = std::env::current_exe().unwrap();
            let inner = format!(
                "exec env -u LD_PRELOAD {} --exact torture_writer_role --test-threads=1",
                exe.display()
            );
            let mut args = vec!["record"];
            args.extend(TINY_POOL);
            args.extend(["--pool", s(&pool), "-o", s(&dir), "--", "sh", "-c", &inner]);
            let mut rec = culprit_cmd(&args);
            rec.env(ROLE_ENV, "writer").env(OUT_ENV, &out);
            let mut rec = rec.spawn().unwrap();
            std::thread::sleep(delay);
            kill9(&mut rec);
            // The program runs on, orphaned, into the kept pool; a reader drains it.
            assert!(wait_until(Duration::from_secs(10), || pool.exists()));
            let mut r = reader_proc(&pool, &dir);
            wait_ok(&mut r, &what);
            assert!(
                wait_until(Duration::from_secs(30), || std::fs::read_dir(&out)
                    .unwrap()
                    .count()
                    == 2),
                "{what}: the program did not finish"
            );
            let mut r = reader_proc(&pool, &dir);
            wait_ok(&mut r, &what);
        }
        _ => {
            let live = matches!(kill, Kill::LiveReader | Kill::LiveBoth);
            let mut args = vec!["reader", "--create", "--keep-pool"];
            if live {
                // Large sub-buffers copied every millisecond: most of what the writer
                // records reaches the disk as live pieces before the kill.
                args.extend([
                    "--live-interval",
                    "1ms",
                    "--subbufs",
                    "8",
                    "--subbuf-size",
                    "256K",
                    "--retry-after",
                    "16",
                ]);
            } else {
                args.extend(["--live-interval", "100ms"]);
                args.extend(TINY_POOL);
            }
            args.extend(["--pool", s(&pool), "-o", s(&dir)]);
            let mut c = culprit_cmd(&args);
            let mut r = c.spawn().unwrap();
            assert!(wait_until(Duration::from_secs(10), || pool.exists()));
            std::thread::sleep(Duration::from_millis(50));
            let mut w = spawn_writer(&pool, &out);
            std::thread::sleep(delay);
            if live {
                // Kill in the middle of the copies, not before the first: on a loaded
                // machine the writer may not have recorded anything yet after `delay`.
                assert!(
                    wait_until(Duration::from_secs(20), || live_pieces(&dir) > 0),
                    "{what}: no live piece saved within 20 s"
                );
            }
            if matches!(
                kill,
                Kill::Reader | Kill::Both | Kill::LiveReader | Kill::LiveBoth
            ) {
                kill9(&mut r);
            }
            if matches!(kill, Kill::Program | Kill::Both | Kill::LiveBoth) {
                kill9(&mut w);
                writer_done = false;
            } else {
                // Let the writers run on a while with no reader, then drain.
                std::thread::sleep(Duration::from_millis(rng.below(400)));
            }
            if matches!(kill, Kill::Program) {
                wait_ok(&mut r, &what);
            } else {
                let mut r2 = reader_proc(&pool, &dir);
                if writer_done {
                    wait_ok(&mut w, &what);
                }
                wait_ok(&mut r2, &what);
            }
            // Both were reaped above (a reaped child's status is kept): no zombie.
            let _ = r.wait();
            let _ = w.wait();
        }
    }
    let seqs = check_sequences(&dir);
    assert!(!seqs.is_empty(), "{what}: nothing recorded");
    if matches!(kill, Kill::LiveReader | Kill::LiveBoth) {
        // The trial did exercise the live path: pieces of sub-buffers were saved.
        let t = reader::TraceDir::open(&dir).unwrap();
        let pieces = live_pieces(&dir);
        eprintln!(
            "torture: {what}: {pieces} live pieces, {} duplicates",
            t.duplicates()
        );
        assert!(pieces > 0, "{what}: no live piece saved");
    }
    if writer_done {
        check_accounting(&dir, &out, &seqs, !matches!(kill, Kill::Recorder), &what);
    }
    let _ = std::fs::remove_file(&pool);
}

#[test]
fn sigkill_trials_keep_the_sequence_exact_and_the_loss_counted() {
    if std::env::var(ROLE_ENV).is_ok() {
        return;
    }
    let seed = std::env::var("TORTURE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| bufpool::sys::clock_ns(libc::CLOCK_REALTIME) | 1);
    eprintln!("torture: seed {seed} (TORTURE_SEED={seed} reruns these trials)");
    let mut rng = Rng(seed);
    let tmp = tempfile::tempdir().unwrap();
    let kills = [
        Kill::Program,
        Kill::Reader,
        Kill::Both,
        Kill::Recorder,
        Kill::Reader,
        Kill::Program,
        Kill::LiveReader,
        Kill::LiveBoth,
    ];
    for (n, k) in kills.into_iter().enumerate() {
        trial(k, &mut rng, tmp.path(), n);
    }
}
