//! The repair pass: finds sub-buffers whose holder died and moves them on.
//!
//! Run by readers, periodically and before they exit. For each slot:
//! - `Owned` by a dead process (or by a thread that no longer exists in a live one):
//!   seize it (`Salvaging`), publish the entries its writer had committed (flagged
//!   [`FLAG_SALVAGED`]), or free it if it holds none;
//! - `Salvaging` by a dead repairer: seize it and redo the (idempotent) repair;
//! - `Reading` by a dead reader: put it back on the written set (or free it if the reader
//!   died while resetting it for release). The dead reader may have saved it already;
//!   output is keyed by (pid, tid, seq) so it is stored once.
//!
//! Holders are processes; a thread death inside a live process is judged from the
//! header's `tid`, which is checked again after the seize to rule out the ABA case of a
//! sibling thread having acquired the same sub-buffer meanwhile (see `bufpool/FORMAT.md` §5).
//!
//! Deaths are judged by pid *and* start time ([`crate::sys::holder_liveness`]), so a
//! recycled pid never keeps a dead writer's sub-buffer alive, and a live process is
//! never mistaken for a dead one.

use crate::format::Decoder;
use crate::layout::FLAG_SALVAGED;
use crate::pool::Pool;
use crate::slots::{Holder, State};
use crate::sys::{self, Liveness};
use core::sync::atomic::Ordering;

/// What a repair pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SalvageReport {
    /// Sub-buffers of dead writers published for the readers.
    pub published: usize,
    /// Sub-buffers that held no entry (of dead writers, or of dead readers that had
    /// begun releasing them), returned to the free set.
    pub freed: usize,
    /// Sub-buffers of dead readers put back on the written set.
    pub requeued: usize,
}

/// How the repair pass decides who is alive (injectable for tests).
pub trait LivenessOracle {
    /// Is this process alive?
    fn process(&self, h: Holder) -> Liveness;
    /// Does this thread of a live process still exist?
    fn thread(&self, pid: u32, tid: u32) -> bool;
}

/// The real oracle: `kill(pid, 0)`, `/proc/PID/stat` start time, `/proc/PID/task/TID`.
pub struct ProcOracle;

impl LivenessOracle for ProcOracle {
    fn process(&self, h: Holder) -> Liveness {
        sys::holder_liveness(h)
    }
    fn thread(&self, pid: u32, tid: u32) -> bool {
        sys::thread_alive(pid, tid)
    }
}

/// Runs one repair pass as `me`.
pub fn salvage(pool: &Pool, me: Holder, oracle: &dyn LivenessOracle) -> SalvageReport {
    let slots = pool.slots();
    let mut rep = SalvageReport::default();
    for i in 0..slots.len() {
        let Some(w) = slots.load(i) else { continue };
        let Some(h) = w.holder else { continue };
        if h == me {
            continue;
        }
        // For an `Owned` slot of a live process, the thread named in the header (read
        // after the word, so it is the tid of that word's owner or 0 if not yet set).
        let mut dead_thread = None;
        let dead = match w.state {
            State::Owned => {
                oracle.process(h) == Liveness::Dead || {
                    let tid = pool.subbuf_header(i).tid.load(Ordering::Acquire);
                    let gone = tid != 0 && !oracle.thread(h.pid, tid);
                    if gone {
                        dead_thread = Some(tid);
                    }
                    gone
                }
            }
            State::Reading | State::Salvaging => oracle.process(h) == Liveness::Dead,
            State::Free | State::Written => false,
        };
        if !dead || !slots.seize(i, w, me) {
            continue;
        }
        if let Some(tid) = dead_thread {
            // ABA: the word names a process, not a thread. Between our load and the seize,
            // the dead thread's sub-buffer may have been salvaged by another pass, freed,
            // and acquired by a live sibling thread (same word). The CAS made every header
            // store before that acquisition visible (the header is reset before FREE), so
            // the tid is the dead thread's only if the sub-buffer is still its own.
            if pool.subbuf_header(i).tid.load(Ordering::Relaxed) != tid {
                slots.give_back(i, me, h);
                continue;
            }
        }
        if w.state == State::Reading {
            // A dead reader: read it again, unless it died while resetting it for
            // release (bytes_used is reset first), in which case it was saved already.
            let used = pool.subbuf_header(i).bytes_used.load(Ordering::Acquire);
            if used > 0 {
                slots.finish_salvage(i, me, true);
                rep.requeued += 1;
            } else {
                pool.reset_header(i);
                slots.finish_salvage(i, me, false);
                rep.freed += 1;
            }
        } else if repair(pool, i) {
            slots.finish_salvage(i, me, true);
            pool.shared().salvaged.fetch_add(1, Ordering::Relaxed);
            rep.published += 1;
        } else {
            pool.reset_header(i);
            slots.finish_salvage(i, me, false);
            rep.freed += 1;
        }
    }
    rep
}

/// Runs one repair pass with the real oracle.
pub fn salvage_dead(pool: &Pool) -> SalvageReport {
    salvage(pool, pool.holder(), &ProcOracle)
}

/// Fixes up a seized sub-buffer's header. Returns false if it holds no entry.
fn repair(pool: &Pool, i: usize) -> bool {
    let h = pool.subbuf_header(i);
    // Acquire pairs with the writer's Release store after each committed entry.
    let used = (h.bytes_used.load(Ordering::Acquire) as usize).min(pool.data_size());
    if used == 0 {
        return false;
    }
    // SAFETY: we hold the slot in Salvaging state; its writer is dead.
    let data = unsafe { core::slice::from_raw_parts(pool.subbuf_data(i), used) };
    // The committed prefix is whole entries by construction; stay defensive anyway and
    // cut at the first undecodable byte.
    let mut last = h.first_tsc.load(Ordering::Relaxed);
    let mut good = 0usize;
    for e in Decoder::new(data) {
        match e {
            Ok(e) => {
                last = last.max(e.tsc);
                good = e.offset as usize + e.size;
            }
            Err(_) => break,
        }
    }
    if good == 0 {
        return false;
    }
    h.bytes_used.store(good as u32, Ordering::Relaxed);
    h.last_tsc.store(last, Ordering::Relaxed);
    h.flags.fetch_or(FLAG_SALVAGED, Ordering::Relaxed);
    true
}
