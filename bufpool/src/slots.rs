//! The handoff protocol: one atomic state word per sub-buffer.
//!
//! Free and written sub-buffers are not kept in linked queues but in a table of state
//! words, one `u64` per sub-buffer, in the shared region. Every transition of a
//! sub-buffer is a **single compare-and-swap on its own word**, so a process killed at
//! any instruction leaves every word in a well-defined state: there is no multi-word
//! invariant that a half-finished operation could break, and no slot that the living
//! must wait on. A word names its holder (pid and a start-time tag), so a repair pass
//! can tell when the holder is gone and move the sub-buffer on ([`crate::salvage`](mod@crate::salvage)).
//! Taking a free or written sub-buffer is a scan from a rotating cursor: O(n) over a
//! few hundred words, once per sub-buffer filled — never per entry.
//!
//! ```text
//!            acquire (writer CAS)                    publish (writer CAS)
//!   FREE ─────────────────────────► OWNED(w) ───────────────────────────► WRITTEN
//!    ▲                                 │  w dead: salvage CAS                │  ▲
//!    │ release (reader store)          ▼                                     │  │ r dead:
//!    │                           SALVAGING(s) ── bytes > 0 ──► WRITTEN       │  │
//!    │                                 │ bytes == 0 ──► FREE                 ▼  │ requeue
//!    └──────────────────────────────────────────────────────────────── READING(r)
//!                                                     take (reader CAS)
//!   READING(r), r dead ──seize──► SALVAGING(s) ── bytes > 0 ──► WRITTEN, else FREE
//!   SALVAGING(s), s dead ──seize──► SALVAGING(s') (the repair is redone)
//!   SALVAGING(s) ──give_back──► OWNED(w)  (seized by mistake: the owner thread lives)
//! ```
//!
//! Word layout: bits 0..3 state, bits 3..25 pid (Linux pids are < 2²², `PID_MAX_LIMIT`),
//! bits 25..64 the low 39 bits of the holder's start time in clock ticks
//! (`/proc/PID/stat` field 22). `FREE` and `WRITTEN` carry no holder.
//!
//! Memory ordering: a holder's plain writes to the sub-buffer (header fields and data)
//! happen before its releasing transition (`publish` and `release` are `Release`), and
//! the next holder's acquiring CAS (`acquire`, `take`, salvage) is `AcqRel`, so it sees
//! them. For a holder that died, the salvager does not rely on the state word but on
//! the `bytes_used` field of the sub-buffer header (see [`crate::layout::SubBufHeader`]).

use crate::sync::{AtomicU64, Ordering};

/// State of a sub-buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// In the free set: any writer may take it.
    Free = 0,
    /// Held by a writer thread of `holder`.
    Owned = 1,
    /// Filled (or flushed) and waiting for a reader.
    Written = 2,
    /// Held by a reader process `holder`.
    Reading = 3,
    /// Being repaired by process `holder` after its owner died.
    Salvaging = 4,
}

/// A process identity robust to pid reuse: pid plus start time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Holder {
    /// Process id.
    pub pid: u32,
    /// Start time tag (low 39 bits of the start time in clock ticks).
    pub tag: u64,
}

/// Mask of the start-time tag.
pub const TAG_MASK: u64 = (1 << 39) - 1;
const PID_MASK: u64 = (1 << 22) - 1;

impl Holder {
    /// A holder from a pid and a full start time (in clock ticks).
    pub fn new(pid: u32, start_ticks: u64) -> Holder {
        Holder {
            pid,
            tag: start_ticks & TAG_MASK,
        }
    }
}

/// A decoded state word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Word {
    /// State.
    pub state: State,
    /// Holder, for `Owned`, `Reading` and `Salvaging`.
    pub holder: Option<Holder>,
}

impl Word {
    /// Packs a word.
    pub fn pack(state: State, holder: Option<Holder>) -> u64 {
        let h = holder.map_or(0, |h| {
            ((h.pid as u64 & PID_MASK) << 3) | ((h.tag & TAG_MASK) << 25)
        });
        state as u64 | h
    }

    /// Unpacks a word; `None` for an invalid state value.
    pub fn unpack(w: u64) -> Option<Word> {
        let state = match w & 7 {
            0 => State::Free,
            1 => State::Owned,
            2 => State::Written,
            3 => State::Reading,
            4 => State::Salvaging,
            _ => return None,
        };
        let holder = match state {
            State::Free | State::Written => None,
            _ => Some(Holder {
                pid: ((w >> 3) & PID_MASK) as u32,
                tag: (w >> 25) & TAG_MASK,
            }),
        };
        Some(Word { state, holder })
    }
}

/// The state table: a view over `n` words in the shared region (or in a `Vec` under loom).
pub struct Slots<'a> {
    words: &'a [AtomicU64],
}

impl<'a> Slots<'a> {
    /// A view over the given words.
    pub fn new(words: &'a [AtomicU64]) -> Self {
        Slots { words }
    }

    /// Number of sub-buffers.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// True if there are no sub-buffers.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The current word of slot `i` (a snapshot).
    pub fn load(&self, i: usize) -> Option<Word> {
        Word::unpack(self.words[i].load(Ordering::Acquire))
    }

    fn cas(&self, i: usize, from: u64, to: u64) -> bool {
        // AcqRel: Acquire pairs with the Release of the previous holder's transition
        // (publish/release/requeue) so its writes to the sub-buffer are visible to us;
        // Release orders our own earlier writes (e.g. a salvager's header fix-up) before
        // the next holder's Acquire.
        self.words[i]
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Scans from `start` for a slot in `from` state and moves it to `to` with holder
    /// `h`. Returns the slot index.
    fn claim(&self, start: usize, from: State, to: State, h: Option<Holder>) -> Option<usize> {
        self.claim_in(0..self.words.len(), start, from, to, h)
    }

    /// [`Slots::claim`] among the slots of `range` only (`start` is taken modulo it).
    fn claim_in(
        &self,
        range: core::ops::Range<usize>,
        start: usize,
        from: State,
        to: State,
        h: Option<Holder>,
    ) -> Option<usize> {
        let n = range.len();
        let want = Word::pack(from, None);
        let new = Word::pack(to, h);
        for k in 0..n {
            let i = range.start + (start + k) % n;
            if self.words[i].load(Ordering::Relaxed) == want && self.cas(i, want, new) {
                return Some(i);
            }
        }
        None
    }

    /// Writer: take a free sub-buffer. `start` is a hint (a rotating cursor).
    pub fn acquire(&self, start: usize, me: Holder) -> Option<usize> {
        self.claim(start, State::Free, State::Owned, Some(me))
    }

    /// Writer: take a free sub-buffer among `range` (the entry sub-buffers, or the
    /// metadata area: `crate::Pool::meta_area`), scanning from `start` (a hint, taken
    /// modulo the range's length). The same transition as [`Slots::acquire`].
    pub fn acquire_in(
        &self,
        range: core::ops::Range<usize>,
        start: usize,
        me: Holder,
    ) -> Option<usize> {
        self.claim_in(range, start, State::Free, State::Owned, Some(me))
    }

    /// Writer: hand a held sub-buffer to the readers. Fails only if the slot is not held
    /// by `me` (which would mean a repair pass wrongly judged us dead).
    pub fn publish(&self, i: usize, me: Holder) -> bool {
        self.cas(
            i,
            Word::pack(State::Owned, Some(me)),
            Word::pack(State::Written, None),
        )
    }

    /// Writer: give back a held sub-buffer that holds no entry.
    pub fn abandon(&self, i: usize, me: Holder) -> bool {
        self.cas(
            i,
            Word::pack(State::Owned, Some(me)),
            Word::pack(State::Free, None),
        )
    }

    /// Reader: take a written sub-buffer.
    pub fn take(&self, start: usize, me: Holder) -> Option<usize> {
        self.claim(start, State::Written, State::Reading, Some(me))
    }

    /// Reader: return a drained sub-buffer to the free set.
    pub fn release(&self, i: usize, me: Holder) -> bool {
        self.cas(
            i,
            Word::pack(State::Reading, Some(me)),
            Word::pack(State::Free, None),
        )
    }

    /// Reader: put a taken sub-buffer back (it could not be saved).
    pub fn requeue(&self, i: usize, me: Holder) -> bool {
        self.cas(
            i,
            Word::pack(State::Reading, Some(me)),
            Word::pack(State::Written, None),
        )
    }

    /// Repair: move a slot whose holder is dead from `seen` (an `Owned`, `Reading` or
    /// `Salvaging` word read earlier) to `Salvaging(me)`. Returns true on success; the
    /// caller then finishes with [`Slots::finish_salvage`] (or [`Slots::give_back`]).
    /// Fails if the word changed since `seen` (someone else moved it on).
    pub fn seize(&self, i: usize, seen: Word, me: Holder) -> bool {
        if !matches!(seen.state, State::Owned | State::Reading | State::Salvaging) {
            return false;
        }
        self.cas(
            i,
            Word::pack(seen.state, seen.holder),
            Word::pack(State::Salvaging, Some(me)),
        )
    }

    /// Repair: undo a [`Slots::seize`] of an `Owned` slot that turned out to belong to a
    /// live owner (the ABA case of a thread death, see `crate::salvage`): hand it back
    /// to `owner` untouched.
    pub fn give_back(&self, i: usize, me: Holder, owner: Holder) -> bool {
        self.cas(
            i,
            Word::pack(State::Salvaging, Some(me)),
            Word::pack(State::Owned, Some(owner)),
        )
    }

    /// Repair: finish a salvage started by [`Slots::seize`].
    pub fn finish_salvage(&self, i: usize, me: Holder, publish: bool) -> bool {
        let to = if publish { State::Written } else { State::Free };
        self.cas(
            i,
            Word::pack(State::Salvaging, Some(me)),
            Word::pack(to, None),
        )
    }

    /// Counts slots per state: `[free, owned, written, reading, salvaging]`.
    pub fn census(&self) -> [usize; 5] {
        let mut c = [0usize; 5];
        for w in self.words {
            if let Some(w) = Word::unpack(w.load(Ordering::Relaxed)) {
                c[w.state as usize] += 1;
            }
        }
        c
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn table(n: usize) -> Vec<AtomicU64> {
        (0..n).map(|_| AtomicU64::new(0)).collect()
    }

    #[test]
    fn word_round_trips_with_max_pid_and_tag() {
        let h = Holder {
            pid: (1 << 22) - 1,
            tag: TAG_MASK,
        };
        for s in [State::Owned, State::Reading, State::Salvaging] {
            let w = Word::unpack(Word::pack(s, Some(h))).unwrap();
            assert_eq!(
                w,
                Word {
                    state: s,
                    holder: Some(h)
                }
            );
        }
        assert_eq!(
            Word::unpack(Word::pack(State::Free, None)).unwrap().holder,
            None
        );
        assert!(Word::unpack(7).is_none());
    }

    #[test]
    fn full_cycle_and_ownership_checks() {
        let t = table(2);
        let s = Slots::new(&t);
        let w = Holder::new(10, 1);
        let r = Holder::new(20, 2);
        let a = s.acquire(0, w).unwrap();
        let b = s.acquire(0, w).unwrap();
        assert_ne!(a, b);
        assert_eq!(s.acquire(0, w), None, "no free slot left");
        assert!(!s.publish(a, r), "only the owner publishes");
        assert!(s.publish(a, w));
        assert_eq!(s.take(0, r), Some(a));
        assert_eq!(s.take(0, r), None);
        assert!(!s.release(a, w), "only the reader releases");
        assert!(s.release(a, r));
        assert_eq!(s.census(), [1, 1, 0, 0, 0]);
    }

    #[test]
    fn seize_dead_holders() {
        let t = table(2);
        let s = Slots::new(&t);
        let w = Holder::new(10, 1);
        let rep = Holder::new(30, 3);
        let a = s.acquire(0, w).unwrap();
        let seen = s.load(a).unwrap();
        assert!(s.seize(a, seen, rep));
        // A stale view no longer matches: nobody seizes twice.
        assert!(!s.seize(a, seen, rep));
        assert!(!s.publish(a, w), "a seized owner can no longer publish");
        assert!(s.finish_salvage(a, rep, true));
        let r = Holder::new(20, 2);
        assert_eq!(s.take(0, r), Some(a));
        let seen = s.load(a).unwrap();
        assert!(s.seize(a, seen, rep), "dead reader: seized");
        assert!(s.finish_salvage(a, rep, true));
        assert_eq!(s.load(a).unwrap().state, State::Written);
        // Free and written words are never seized.
        assert!(!s.seize(a, s.load(a).unwrap(), rep));
    }

    #[test]
    fn give_back_restores_the_owner() {
        let t = table(1);
        let s = Slots::new(&t);
        let w = Holder::new(10, 1);
        let rep = Holder::new(30, 3);
        let a = s.acquire(0, w).unwrap();
        assert!(s.seize(a, s.load(a).unwrap(), rep));
        assert!(!s.give_back(a, w, w), "only the seizer gives back");
        assert!(s.give_back(a, rep, w));
        assert!(
            s.publish(a, w),
            "the owner publishes as if nothing happened"
        );
    }
}

/// Model check of the handoff protocol with loom (`bufpool/loom.sh`).
///
/// One sub-buffer, three threads: a writer (two rounds of acquire → fill → publish), a
/// reader (take → read → reset → release, twice) and a repair pass; the writer and the
/// reader may each "die" after any step (they stop, and a flag says so — read
/// `Relaxed`, so death itself synchronizes nothing, as with a SIGKILLed process whose
/// stores the survivors only see through the protocol). The payload lives in loom
/// `UnsafeCell`s, so any access not ordered by the protocol (double ownership, a read
/// racing a write) fails the model; values read are checked (visibility). After every
/// execution a final repair pass and drain must leave the slot FREE and every committed
/// entry seen — exactly once, unless the reader died after saving and before releasing.
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::{AtomicBool, AtomicU32};
    use loom::sync::Arc;

    const W: Holder = Holder { pid: 10, tag: 1 };
    const R: Holder = Holder { pid: 20, tag: 2 };
    const S: Holder = Holder { pid: 30, tag: 3 };
    const M: Holder = Holder { pid: 40, tag: 4 };
    /// Writer steps when it lives to the end.
    const WRITER_STEPS: usize = 9;
    /// Reader steps per round (take, read, reset, release); it does two rounds.
    const READER_STEPS: usize = 8;

    struct Shared {
        words: Vec<AtomicU64>,
        /// Header: round of the current contents (1 or 2) and committed entries.
        round: AtomicU32,
        used: AtomicU32,
        data: [UnsafeCell<u64>; 2],
        writer_dead: AtomicBool,
        reader_dead: AtomicBool,
        /// How often entry (round r, index i) was saved: `seen[(r-1)*2+i]`.
        seen: [AtomicU32; 4],
        /// Entries the writer committed, as `seen` indices (bit set).
        committed: AtomicU32,
    }

    fn value(round: u32, i: usize) -> u64 {
        (round as u64) << 8 | i as u64
    }

    impl Shared {
        fn slots(&self) -> Slots<'_> {
            Slots::new(&self.words)
        }

        /// Reads the committed entries of the slot just taken or seized, checks them and
        /// counts them as saved.
        fn save(&self) -> usize {
            let round = self.round.load(Ordering::Relaxed);
            let n = self.used.load(Ordering::Acquire) as usize;
            for i in 0..n {
                // SAFETY (model): the protocol gives us the slot; loom checks it.
                let v = self.data[i].with(|p| unsafe { *p });
                assert_eq!(v, value(round, i), "payload visible");
                self.seen[(round as usize - 1) * 2 + i].fetch_add(1, Ordering::Relaxed);
            }
            n
        }

        fn reset(&self) {
            self.used.store(0, Ordering::Relaxed);
            self.round.store(0, Ordering::Relaxed);
        }

        /// The writer, stopping after `steps` steps.
        fn writer(&self, steps: usize) {
            let mut step = 0;
            let mut go = || {
                step += 1;
                step <= steps
            };
            for round in 1..=2u32 {
                if !go() {
                    break;
                }
                let Some(i) = self.slots().acquire(0, W) else {
                    break;
                };
                if !go() {
                    break;
                }
                self.round.store(round, Ordering::Relaxed);
                self.used.store(0, Ordering::Release);
                let entries = if round == 1 { 2 } else { 1 };
                let mut died = false;
                for k in 0..entries {
                    if !go() {
                        died = true;
                        break;
                    }
                    // SAFETY (model): we own the slot.
                    self.data[k].with_mut(|p| unsafe { *p = value(round, k) });
                    self.used.store(k as u32 + 1, Ordering::Release);
                    self.committed
                        .fetch_or(1 << ((round as usize - 1) * 2 + k), Ordering::Relaxed);
                }
                if died || !go() {
                    break;
                }
                assert!(self.slots().publish(i, W), "nobody seizes a live writer");
            }
            if steps < WRITER_STEPS {
                self.writer_dead.store(true, Ordering::Relaxed);
            }
        }

        /// The reader, stopping after `steps` steps.
        fn reader(&self, steps: usize) {
            let mut step = 0;
            'rounds: for _ in 0..2 {
                for phase in 0..4 {
                    step += 1;
                    if step > steps {
                        break 'rounds;
                    }
                    match phase {
                        0 => {
                            if self.slots().take(0, R).is_none() {
                                // Nothing yet: count the remaining steps of this round
                                // as done.
                                step += 3;
                                continue 'rounds;
                            }
                        }
                        1 => {
                            self.save();
                        }
                        2 => self.reset(),
                        _ => assert!(self.slots().release(0, R)),
                    }
                }
            }
            if steps < READER_STEPS {
                self.reader_dead.store(true, Ordering::Relaxed);
            }
        }

        /// A repair pass by `me`, judging deaths by the flags.
        fn repair(&self, me: Holder) {
            let slots = self.slots();
            let Some(w) = slots.load(0) else { return };
            let dead = match w.holder {
                Some(h) if h == W => self.writer_dead.load(Ordering::Relaxed),
                Some(h) if h == R => self.reader_dead.load(Ordering::Relaxed),
                _ => false,
            };
            if !dead || !slots.seize(0, w, me) {
                return;
            }
            // Entries are only read by whoever takes the slot afterwards; a repair pass
            // only needs the committed length (Acquire pairs with the writer's Release).
            if self.used.load(Ordering::Acquire) > 0 {
                assert!(slots.finish_salvage(0, me, true));
            } else {
                self.reset();
                assert!(slots.finish_salvage(0, me, false));
            }
        }
    }

    fn run(writer_steps: usize, reader_steps: usize) {
        // No preemption bound (unless LOOM_MAX_PREEMPTIONS is set): the model is small
        // enough for loom to explore every interleaving, in about two seconds in all.
        let b = loom::model::Builder::new();
        b.check(move || {
            let sh = Arc::new(Shared {
                words: vec![AtomicU64::new(0)],
                round: AtomicU32::new(0),
                used: AtomicU32::new(0),
                data: [UnsafeCell::new(0), UnsafeCell::new(0)],
                writer_dead: AtomicBool::new(false),
                reader_dead: AtomicBool::new(false),
                seen: Default::default(),
                committed: AtomicU32::new(0),
            });
            let w = {
                let sh = sh.clone();
                loom::thread::spawn(move || sh.writer(writer_steps))
            };
            let r = {
                let sh = sh.clone();
                loom::thread::spawn(move || sh.reader(reader_steps))
            };
            sh.repair(S);
            w.join().unwrap();
            r.join().unwrap();
            // Everyone is done: a final repair pass and drain.
            sh.repair(S);
            let slots = sh.slots();
            while slots.take(0, M).is_some() {
                sh.save();
                sh.reset();
                assert!(slots.release(0, M));
            }
            assert_eq!(slots.census(), [1, 0, 0, 0, 0], "the slot ends up free");
            let committed = sh.committed.load(Ordering::Relaxed);
            let reread_ok = reader_steps < READER_STEPS && reader_steps % 4 >= 2;
            for (e, seen) in sh.seen.iter().enumerate() {
                let n = seen.load(Ordering::Relaxed);
                if committed & (1 << e) == 0 {
                    assert_eq!(n, 0, "entry {e} was never committed");
                } else if reread_ok {
                    assert!((1..=2).contains(&n), "entry {e} seen {n} times");
                } else {
                    assert_eq!(n, 1, "entry {e} seen {n} times");
                }
            }
        });
    }

    #[test]
    fn loom_handoff_survives_any_writer_and_reader_death() {
        for w in 1..=WRITER_STEPS {
            for r in [1, 2, 3, 5, 6, 7, READER_STEPS] {
                run(w, r);
            }
        }
    }
}

/// Model check of the metadata area with loom (`bufpool/loom.sh`): one entry sub-buffer
/// (slot 0) and a metadata area of one (slot 1). An entry writer takes the entry slot
/// and keeps it (an idle process, or one that floods it) and keeps trying to acquire
/// entry slots; a metadata writer finds no entry slot, takes the area slot, writes a
/// record (a loom `UnsafeCell`, so an access the protocol does not order fails the
/// model), publishes it, and does so twice; a reader drains everything. In every
/// interleaving the entry writer never gets the area slot, the metadata writer's second
/// record waits only for the reader (never for the entry writer), and the reader sees
/// both records.
#[cfg(all(test, loom))]
mod loom_meta_area {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::AtomicU32;
    use loom::sync::Arc;

    const E: Holder = Holder { pid: 10, tag: 1 };
    const MW: Holder = Holder { pid: 11, tag: 1 };
    const R: Holder = Holder { pid: 20, tag: 2 };

    struct Shared {
        words: Vec<AtomicU64>,
        used: AtomicU32,
        record: UnsafeCell<u64>,
        /// Records the reader saw (bit per record number).
        seen: AtomicU32,
    }

    #[test]
    fn loom_metadata_waits_only_for_the_readers() {
        loom::model(|| {
            let sh = Arc::new(Shared {
                words: vec![AtomicU64::new(0), AtomicU64::new(0)],
                used: AtomicU32::new(0),
                record: UnsafeCell::new(0),
                seen: AtomicU32::new(0),
            });
            let entries = {
                let sh = sh.clone();
                loom::thread::spawn(move || {
                    let s = Slots::new(&sh.words);
                    let mine = s.acquire_in(0..1, 0, E);
                    // It keeps what it got, and asks again (a flood: every request fails).
                    assert!(s.acquire_in(0..1, 0, E).is_none());
                    mine
                })
            };
            let meta = {
                let sh = sh.clone();
                loom::thread::spawn(move || {
                    let s = Slots::new(&sh.words);
                    for k in 1..=2u64 {
                        let i = loop {
                            if let Some(i) = s.acquire_in(1..2, 0, MW) {
                                break i;
                            }
                            // The area is WRITTEN or being read: only the reader frees it.
                            loom::thread::yield_now();
                        };
                        assert_eq!(i, 1, "the area is slot 1");
                        // SAFETY (model): we own slot 1; loom checks the accesses.
                        sh.record.with_mut(|p| unsafe { *p = k });
                        sh.used.store(1, Ordering::Release);
                        assert!(s.publish(i, MW));
                    }
                })
            };
            let s = Slots::new(&sh.words);
            while sh.seen.load(Ordering::Relaxed) != 0b110 {
                match s.take(0, R) {
                    Some(1) => {
                        assert_eq!(sh.used.load(Ordering::Acquire), 1);
                        // SAFETY (model): the take gave us slot 1.
                        let k = sh.record.with(|p| unsafe { *p });
                        assert!(k == 1 || k == 2, "record visible: {k}");
                        sh.seen.fetch_or(1 << k, Ordering::Relaxed);
                        sh.used.store(0, Ordering::Relaxed);
                        assert!(s.release(1, R));
                    }
                    Some(i) => panic!("slot {i} was published by nobody"),
                    None => loom::thread::yield_now(),
                }
            }
            meta.join().unwrap();
            let held = entries.join().unwrap();
            assert_eq!(held, Some(0), "the entry writer holds the entry slot");
            assert_eq!(s.load(0).unwrap().state, State::Owned);
            assert_eq!(s.load(1).unwrap().state, State::Free);
        });
    }
}
