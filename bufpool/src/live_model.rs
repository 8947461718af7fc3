//! Model check of the live data path (`crate::live`, FORMAT.md §4.6) with loom
//! (`bufpool/loom.sh`).
//!
//! One sub-buffer and four parties: a writer (two incarnations: acquire → identity →
//! Release fence → entries with a Release store of `used` each → publish; it may die after
//! any step), a live reader that peeks twice (the sequence-lock copy of `crate::live::peek`:
//! word, identity, `used` with Acquire, copy, Acquire fence, identity and word again), a
//! drain that takes, saves the rest after what the live reader saved, resets and releases,
//! twice, and at the end a repair pass and a final drain. The live reader and the drain
//! share their bookkeeping (incarnation → bytes saved) under one lock, as `reader::live`
//! does. The data cells are atomics read `Relaxed`: the live copy is a sequence-lock read,
//! so a torn read is possible by design and the validation must discard it — checked by
//! asserting that every entry a validated copy keeps holds its incarnation's value.
//!
//! After every execution each committed entry was saved exactly once (by a piece or by the
//! rest), in order within its incarnation, and the slot is free.

use crate::slots::{Holder, Slots, State};
use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use loom::sync::{Arc, Mutex};

const W: Holder = Holder { pid: 10, tag: 1 };
const R: Holder = Holder { pid: 20, tag: 2 };
const S: Holder = Holder { pid: 30, tag: 3 };
/// Writer steps when it lives to the end: per incarnation acquire, identity, its entries,
/// publish (2 + 2 and 1 + 1 entries).
const WRITER_STEPS: usize = 7;

struct Shared {
    words: Vec<AtomicU64>,
    /// Header identity: the incarnation (1 or 2; 0 after a reset).
    ident: AtomicU32,
    used: AtomicU32,
    data: [AtomicU64; 2],
    writer_dead: AtomicBool,
    /// Reader bookkeeping, shared by the live reader and the drain: bytes (entries)
    /// saved per incarnation, `saved[ident]`.
    saved: Mutex<[u32; 3]>,
    /// How often entry (incarnation r, index i) was saved: `seen[(r-1)*2+i]`.
    seen: [AtomicU32; 4],
    /// Entries the writer committed (bit per `seen` index).
    committed: AtomicU32,
}

fn value(ident: u32, i: usize) -> u64 {
    (ident as u64) << 8 | i as u64
}

impl Shared {
    fn slots(&self) -> Slots<'_> {
        Slots::new(&self.words)
    }

    fn count(&self, ident: u32, i: usize) {
        self.seen[(ident as usize - 1) * 2 + i].fetch_add(1, Ordering::Relaxed);
    }

    fn writer(&self, steps: usize) {
        let mut step = 0;
        let mut go = || {
            step += 1;
            step <= steps
        };
        'rounds: for ident in 1..=2u32 {
            if !go() {
                break;
            }
            let Some(i) = self.slots().acquire(0, W) else {
                break;
            };
            // The identity, then a Release fence before any entry byte (writer::obtain).
            self.ident.store(ident, Ordering::Relaxed);
            self.used.store(0, Ordering::Release);
            fence(Ordering::Release);
            let entries = if ident == 1 { 2 } else { 1 };
            for k in 0..entries {
                if !go() {
                    break 'rounds;
                }
                self.data[k].store(value(ident, k), Ordering::Relaxed);
                self.used.store(k as u32 + 1, Ordering::Release);
                self.committed
                    .fetch_or(1 << ((ident as usize - 1) * 2 + k), Ordering::Relaxed);
            }
            if !go() {
                break;
            }
            assert!(self.slots().publish(i, W), "nobody seizes a live writer");
        }
        if steps < WRITER_STEPS {
            self.writer_dead.store(true, Ordering::Relaxed);
        }
    }

    /// One live copy (`crate::live::peek` and `reader::live::LiveSaved::poll`).
    fn peek(&self) {
        let mut saved = self.saved.lock().unwrap();
        let slots = self.slots();
        let Some(w1) = slots.load(0) else { return };
        if w1.state != State::Owned {
            return;
        }
        let id1 = self.ident.load(Ordering::Relaxed);
        if id1 == 0 {
            return;
        }
        let from = saved[id1 as usize];
        let used = self.used.load(Ordering::Acquire);
        if used <= from {
            return;
        }
        let copy: Vec<u64> = (from..used)
            .map(|k| self.data[k as usize].load(Ordering::Relaxed))
            .collect();
        fence(Ordering::Acquire);
        let id2 = self.ident.load(Ordering::Relaxed);
        let w2 = slots.load(0);
        if id2 != id1 || w2 != Some(w1) {
            return;
        }
        for (k, v) in (from..used).zip(copy) {
            assert_eq!(v, value(id1, k as usize), "a validated copy is never torn");
            self.count(id1, k as usize);
        }
        saved[id1 as usize] = used;
    }

    /// Saves the slot just taken or seized: what follows the live copies.
    fn save_rest(&self) {
        let mut saved = self.saved.lock().unwrap();
        let ident = self.ident.load(Ordering::Relaxed);
        let used = self.used.load(Ordering::Acquire);
        let from = std::mem::take(&mut saved[ident as usize]).min(used);
        for k in from..used {
            let v = self.data[k as usize].load(Ordering::Relaxed);
            assert_eq!(v, value(ident, k as usize), "payload visible");
            self.count(ident, k as usize);
        }
    }

    fn reset(&self) {
        self.used.store(0, Ordering::Relaxed);
        self.ident.store(0, Ordering::Relaxed);
    }

    fn drain(&self, me: Holder) {
        let slots = self.slots();
        if slots.take(0, me).is_some() {
            self.save_rest();
            self.reset();
            assert!(slots.release(0, me));
        }
    }

    fn repair(&self) {
        let slots = self.slots();
        let Some(w) = slots.load(0) else { return };
        if w.holder != Some(W) || !self.writer_dead.load(Ordering::Relaxed) {
            return;
        }
        if !slots.seize(0, w, S) {
            return;
        }
        if self.used.load(Ordering::Acquire) > 0 {
            assert!(slots.finish_salvage(0, S, true));
        } else {
            self.reset();
            assert!(slots.finish_salvage(0, S, false));
        }
    }
}

fn run(writer_steps: usize) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(move || {
        let sh = Arc::new(Shared {
            words: vec![AtomicU64::new(0)],
            ident: AtomicU32::new(0),
            used: AtomicU32::new(0),
            data: [AtomicU64::new(0), AtomicU64::new(0)],
            writer_dead: AtomicBool::new(false),
            saved: Mutex::new([0; 3]),
            seen: Default::default(),
            committed: AtomicU32::new(0),
        });
        let w = {
            let sh = sh.clone();
            loom::thread::spawn(move || sh.writer(writer_steps))
        };
        let l = {
            let sh = sh.clone();
            loom::thread::spawn(move || {
                sh.peek();
                sh.peek();
            })
        };
        sh.drain(R);
        sh.drain(R);
        w.join().unwrap();
        l.join().unwrap();
        // Everyone is done: a final repair pass and drain.
        sh.repair();
        sh.drain(R);
        let census = sh.slots().census();
        assert_eq!(census, [1, 0, 0, 0, 0], "the slot ends up free");
        let committed = sh.committed.load(Ordering::Relaxed);
        for (e, seen) in sh.seen.iter().enumerate() {
            let n = seen.load(Ordering::Relaxed);
            let want = u32::from(committed & (1 << e) != 0);
            assert_eq!(n, want, "entry {e} saved {n} times");
        }
    });
}

#[test]
fn loom_live_copies_and_drain_save_each_committed_entry_once() {
    for w in 1..=WRITER_STEPS {
        run(w);
    }
}
