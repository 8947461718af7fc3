//! Repair passes on hand-made situations: pid reuse, a thread that died holding a
//! sub-buffer, the ABA case of a sibling thread re-acquiring the same sub-buffer, dead
//! readers (before and during release), torn tails; and the lost-entry accounting of a
//! writer that runs out of sub-buffers.

mod common;

use bufpool::format::{decode_all, encode_fn, Entry, Kind};
use bufpool::layout::FLAG_SALVAGED;
use bufpool::sys::{self, Liveness};
use bufpool::{
    salvage, Consumer, Holder, LivenessOracle, Pool, PoolConfig, ProcOracle, State, WriterState,
};
use std::cell::RefCell;
use std::sync::atomic::Ordering;

fn pool(n: u32) -> (tempfile::TempDir, Pool) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = PoolConfig {
        n_subbufs: n,
        subbuf_size: 8192,
        retry_after: 4,
        calibration: std::time::Duration::from_millis(1),
        ..Default::default()
    };
    let p = Pool::create(dir.path().join("pool"), &cfg).unwrap();
    (dir, p)
}

fn entry(k: u64) -> bufpool::format::EntryBuf {
    encode_fn(Kind::FnEnter, k, 1, k)
}

/// A repairer identity that is not this process (so it does not skip our holders).
fn other() -> Holder {
    Holder { pid: 1, tag: 12345 }
}

/// A pid that is certainly dead: a child that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

fn my_start() -> u64 {
    sys::proc_stat(sys::getpid()).unwrap().2
}

fn callees(data: &[u8]) -> Vec<u64> {
    decode_all(data)
        .unwrap()
        .iter()
        .map(|e| match e {
            Entry::Fn { callee, .. } => *callee,
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

#[test]
fn a_reused_pid_does_not_keep_a_dead_writers_sub_buffer() {
    let (_d, pool) = pool(4);
    let me = sys::getpid();
    // The "dead" writer had our pid but another start time: the pid was reused by us.
    let mut dead = WriterState::new();
    dead.attach(&pool, me, my_start() + 1, sys::gettid());
    for k in 0..5 {
        assert!(dead.append(&pool, entry(k).as_bytes()));
    }
    // A live writer with the true identity, on this (live) thread.
    let mut live = WriterState::new();
    live.attach(&pool, me, my_start(), sys::gettid());
    assert!(live.append(&pool, entry(100).as_bytes()));

    let rep = salvage(&pool, other(), &ProcOracle);
    assert_eq!(rep.published, 1, "{rep:?}");
    assert_eq!(
        pool.slots().census(),
        [2 + pool.meta_area().len(), 1, 1, 0, 0],
        "the live writer keeps its own"
    );
    let c = Consumer::new(&pool);
    let t = c.take().unwrap();
    assert_eq!(t.info().flags & FLAG_SALVAGED, FLAG_SALVAGED);
    assert_eq!(callees(t.data()), vec![0, 1, 2, 3, 4]);
    t.release();
    // The live writer is unaffected and publishes normally.
    live.flush(&pool, 0);
    let t = c.take().unwrap();
    assert_eq!(callees(t.data()), vec![100]);
    assert_eq!(t.info().flags & FLAG_SALVAGED, 0);
}

#[test]
fn a_dead_thread_of_a_live_process_is_salvaged() {
    let (_d, pool) = pool(4);
    let (pid, start) = (sys::getpid(), my_start());
    let tid = std::thread::scope(|s| {
        s.spawn(|| {
            let mut w = WriterState::new();
            w.attach(&pool, pid, start, sys::gettid());
            for k in 0..10 {
                w.append(&pool, entry(k).as_bytes());
            }
            sys::gettid() // exits without flushing
        })
        .join()
        .unwrap()
    });
    let mut live = WriterState::new();
    live.attach(&pool, pid, start, sys::gettid());
    live.append(&pool, entry(7).as_bytes());
    // `join` returns when the thread's tid word is cleared, which the kernel does before
    // the task has left /proc: wait (bounded) until it has.
    let gone = (0..500).any(|_| {
        let alive = sys::thread_alive(pid, tid);
        if alive {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        !alive
    });
    assert!(gone, "thread {tid} still in /proc after 5 s");
    let rep = salvage(&pool, other(), &ProcOracle);
    assert_eq!((rep.published, rep.freed), (1, 0), "{rep:?}");
    let c = Consumer::new(&pool);
    let t = c.take().unwrap();
    assert_eq!(t.info().tid, tid);
    assert_eq!(callees(t.data()), (0..10).collect::<Vec<_>>());
    t.release();
    assert_eq!(
        pool.slots().census()[State::Owned as usize],
        1,
        "the live thread's stays"
    );
}

/// An oracle that says process holders are alive and thread `dead` is gone, and runs
/// `meanwhile` (once) while it is being asked — between the repair pass's load of the
/// word and its seize.
struct Racing<'a> {
    dead: u32,
    meanwhile: RefCell<Option<Box<dyn FnOnce() + 'a>>>,
}

impl LivenessOracle for Racing<'_> {
    fn process(&self, _: Holder) -> Liveness {
        Liveness::Alive
    }
    fn thread(&self, _pid: u32, tid: u32) -> bool {
        if let Some(f) = self.meanwhile.borrow_mut().take() {
            f();
        }
        tid != self.dead
    }
}

#[test]
fn a_sibling_that_reacquired_the_dead_threads_sub_buffer_keeps_it() {
    let (_d, pool) = pool(1);
    let (pid, start) = (sys::getpid(), my_start());
    let (t1, t2) = (900_001, 900_002);
    let mut w1 = WriterState::new();
    w1.attach(&pool, pid, start, t1);
    w1.append(&pool, entry(1).as_bytes());
    let mut w2 = WriterState::new();
    w2.attach(&pool, pid, start, t2);
    let w2 = RefCell::new(w2);
    let oracle = Racing {
        dead: t1,
        meanwhile: RefCell::new(Some(Box::new(|| {
            // Another repair pass salvages t1's sub-buffer, a reader drains it, and
            // sibling t2 acquires the very same sub-buffer: the word is the same again.
            let quick = Racing {
                dead: t1,
                meanwhile: RefCell::new(None),
            };
            assert_eq!(
                salvage(&pool, Holder { pid: 2, tag: 2 }, &quick).published,
                1
            );
            Consumer::new(&pool).take().unwrap().release();
            assert!(w2.borrow_mut().append(&pool, entry(2).as_bytes()));
        }))),
    };
    let rep = salvage(&pool, other(), &oracle);
    drop(oracle);
    assert_eq!(
        rep,
        Default::default(),
        "nothing taken from the live sibling"
    );
    let w = pool.slots().load(0).unwrap();
    assert_eq!(w.state, State::Owned);
    assert_eq!(w.holder, Some(Holder::new(pid, start)));
    // t2 goes on appending and publishes normally.
    let mut w2 = w2.into_inner();
    assert!(w2.append(&pool, entry(3).as_bytes()));
    w2.flush(&pool, 0);
    let c = Consumer::new(&pool);
    let t = c.take().unwrap();
    assert_eq!(t.info().tid, t2);
    assert_eq!(t.info().flags & FLAG_SALVAGED, 0);
    assert_eq!(callees(t.data()), vec![2, 3]);
}

#[test]
fn dead_readers_buffers_are_read_again_or_freed_if_already_released_halfway() {
    let (_d, pool) = pool(4);
    let (pid, start) = (sys::getpid(), my_start());
    let mut w = WriterState::new();
    w.attach(&pool, pid, start, sys::gettid());
    for k in 0..2 {
        w.append(&pool, entry(k).as_bytes());
        w.flush(&pool, 0);
    }
    let dead = Holder::new(dead_pid(), 1);
    let c = Consumer::with_holder(&pool, dead);
    let a = c.take().unwrap();
    let b = c.take().unwrap();
    let (sa, sb) = (a.slot(), b.slot());
    // `b`'s reader died inside release, after resetting bytes_used.
    pool.subbuf_header(sb)
        .bytes_used
        .store(0, Ordering::Relaxed);
    std::mem::forget(a);
    std::mem::forget(b);
    assert_eq!(pool.slots().census()[State::Reading as usize], 2);
    let rep = salvage(&pool, other(), &ProcOracle);
    assert_eq!((rep.requeued, rep.freed), (1, 1), "{rep:?}");
    assert_eq!(pool.slots().load(sb).unwrap().state, State::Free);
    let c = Consumer::new(&pool);
    let t = c.take().unwrap();
    assert_eq!(t.slot(), sa);
    assert_eq!(callees(t.data()), vec![0]);
    t.release();
    assert_eq!(pool.slots().census(), [pool.n_subbufs(), 0, 0, 0, 0]);
}

#[test]
fn a_dead_writers_torn_tail_is_cut_at_the_last_whole_entry() {
    let (_d, pool) = pool(2);
    let mut w = WriterState::new();
    w.attach(&pool, dead_pid(), 1, 4242);
    for k in 0..3 {
        w.append(&pool, entry(k).as_bytes());
    }
    // Pretend the length covered half of the third entry (cannot happen with this
    // writer, but a repair pass must not trust it blindly).
    let h = pool.subbuf_header(w.slot as usize);
    h.bytes_used.store(50, Ordering::Release);
    // And a dead repairer had already seized it: the next pass redoes the repair.
    let seen = pool.slots().load(w.slot as usize).unwrap();
    assert!(pool
        .slots()
        .seize(w.slot as usize, seen, Holder::new(dead_pid(), 1)));
    let rep = salvage(&pool, other(), &ProcOracle);
    assert_eq!(rep.published, 1);
    let c = Consumer::new(&pool);
    let t = c.take().unwrap();
    assert_eq!(t.info().bytes_used, 40);
    assert_eq!(callees(t.data()), vec![0, 1]);
}

#[test]
fn a_dead_writer_that_committed_nothing_frees_its_sub_buffer() {
    let (_d, pool) = pool(2);
    let mut w = WriterState::new();
    w.attach(&pool, dead_pid(), 1, 4242);
    w.append(&pool, entry(0).as_bytes());
    pool.subbuf_header(w.slot as usize)
        .bytes_used
        .store(0, Ordering::Release);
    let rep = salvage(&pool, other(), &ProcOracle);
    assert_eq!((rep.published, rep.freed), (0, 1));
    assert_eq!(pool.slots().census(), [pool.n_subbufs(), 0, 0, 0, 0]);
    let h = pool.subbuf_info(0);
    assert_eq!(
        (h.pid, h.tid, h.seq, h.bytes_used),
        (0, 0, 0, 0),
        "header reset"
    );
}

/// A writer with two sub-buffers and a reader that only comes by now and then: drops
/// happen, `Lost` markers report them, and recorded + lost = produced exactly —
/// including drops still pending at the final flush (written into the metadata area
/// when no entry sub-buffer is free, reported as `lost_unreported` when that area is
/// full too).
#[test]
fn recorded_plus_lost_equals_produced_under_overload() {
    for (starve_at_exit, area_full) in [(false, false), (true, false), (true, true)] {
        let (_d, pool) = pool(2);
        let (pid, start, tid) = (sys::getpid(), my_start(), sys::gettid());
        let mut w = WriterState::new();
        w.attach(&pool, pid, start, tid);
        let produced = 20_000u64;
        let mut saved = Vec::new();
        for k in 0..produced {
            w.append(&pool, common::entry_for(k).as_bytes());
            if k % 1500 == 0 && (!starve_at_exit || k < produced / 2) {
                saved.extend(common::drain(&pool));
            }
        }
        assert!(w.lost_total > 0, "the pool overflowed");
        if starve_at_exit {
            assert!(!w.holds() && w.lost > 0, "still dropping at the end");
        } else {
            // A reader comes by just before the exit: the final flush finds room for
            // its Lost marker.
            saved.extend(common::drain(&pool));
        }
        if area_full {
            for _ in pool.meta_area() {
                assert!(pool
                    .slots()
                    .acquire_in(pool.meta_area(), 0, pool.holder())
                    .is_some());
            }
        }
        w.flush(&pool, 0);
        saved.extend(common::drain(&pool));
        let unreported = pool.shared().lost_unreported.load(Ordering::Relaxed);
        assert_eq!(unreported > 0, area_full);
        let known = [common::Known {
            pid,
            tid,
            produced,
            pending_lost: 0,
        }];
        let t = common::check(&saved, &known, true, unreported);
        assert_eq!(t.lost + unreported, w.lost_total);
        assert_eq!(t.recorded + t.lost + unreported, produced);
    }
}
