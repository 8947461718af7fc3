//! The reader's half of the live data path (`bufpool::live`): every `live_interval` the
//! reader copies the newly committed prefix of each sub-buffer a writer still owns into a
//! *piece* record, and when it later takes the published sub-buffer it saves only the
//! rest — so each committed entry reaches the directory once, within about one poll of
//! being written, however slowly its thread fills its sub-buffer.
//!
//! [`LiveSaved`] is the memory that makes it exactly once: per sub-buffer incarnation
//! (pid, start time, tid, seq, first TSC), how many of its data bytes are on disk. The
//! poll and the drain threads share it under one lock, held from the copy to the write of
//! the piece and from the take's lookup to the write of the rest, so a piece and the rest
//! never overlap. A reader that resumes a directory rebuilds it from the pieces the
//! previous reader left on disk ([`LiveSaved::from_dir`]): the prefix a killed reader
//! saved is not saved again, and a piece it was writing when killed (cut off by the
//! repair) is.

use crate::chunkfile::ChunkWriter;
use crate::error::Result;
use bufpool::format::Decoder;
use bufpool::layout::FLAG_LIVE;
use bufpool::live::{peek, Incarnation, Piece};
use bufpool::{Pool, State, SubBufInfo};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

/// What the reader saved of each sub-buffer a writer still owns: incarnation → bytes of
/// its data area on disk (from offset 0).
#[derive(Debug, Default)]
pub struct LiveSaved {
    saved: Mutex<HashMap<Incarnation, u32>>,
}

/// What one [`LiveSaved::poll`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Polled {
    /// Pieces saved.
    pub pieces: u64,
    /// Data bytes saved.
    pub bytes: u64,
}

impl LiveSaved {
    /// Nothing saved yet.
    pub fn new() -> LiveSaved {
        LiveSaved::default()
    }

    /// What the chunk files of `dir` already hold of sub-buffers whose last piece is not
    /// there yet (every record of them is a [`FLAG_LIVE`] piece): a resuming reader
    /// continues after it. Damaged files count for what is readable in them.
    pub fn from_dir(dir: &Path) -> Result<LiveSaved> {
        let mut ends: HashMap<Incarnation, u32> = HashMap::new();
        let mut whole: std::collections::HashSet<Incarnation> = Default::default();
        let mut damage = Vec::new();
        for path in crate::tracedir::chunk_files(dir)? {
            let add = |_off, piece: u32, info: &SubBufInfo| {
                let inc = Incarnation::of(info);
                if info.flags & FLAG_LIVE == 0 {
                    whole.insert(inc);
                } else {
                    let e = ends.entry(inc).or_default();
                    *e = (*e).max(piece + info.bytes_used);
                }
            };
            crate::damage::scan_tolerant(&path, false, add, &mut damage);
        }
        ends.retain(|inc, _| !whole.contains(inc));
        Ok(LiveSaved {
            saved: Mutex::new(ends),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Incarnation, u32>> {
        self.saved.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sub-buffers with pieces on disk whose rest is not saved yet.
    pub fn pending(&self) -> usize {
        self.lock().len()
    }

    /// About how many bytes the next [`LiveSaved::poll`] writes: the committed data not yet
    /// saved of every sub-buffer a writer owns, plus a record header each (what writers
    /// commit in between comes on top). For a flight recorder's reservation.
    pub fn due(&self, pool: &Pool) -> u64 {
        let slots = pool.slots();
        let saved = self.lock();
        let mut n = 0;
        for i in 0..pool.n_subbufs() {
            if slots.load(i).map(|w| w.state) != Some(State::Owned) {
                continue;
            }
            let used = u64::from(
                pool.subbuf_header(i)
                    .bytes_used
                    .load(std::sync::atomic::Ordering::Acquire),
            )
            .min(pool.data_size() as u64);
            let from = u64::from(
                saved
                    .get(&Incarnation::of(&pool.subbuf_info(i)))
                    .copied()
                    .unwrap_or(0),
            );
            if used > from {
                n += used - from + bufpool::disk::RECORD_FIXED_SIZE as u64;
            }
        }
        n
    }

    /// Copies the newly committed prefix of every sub-buffer a writer owns to `out` (one
    /// piece record each), at most `room` bytes of records in all (`None`: no limit; a
    /// flight recorder passes what it reserved): a piece that does not fit is cut at its
    /// last whole entry that does, and the rest waits for the next poll. `out` is created
    /// by `open` on first use. On a write error the piece is not remembered (it is copied
    /// again at the next poll).
    pub fn poll(
        &self,
        pool: &Pool,
        out: &mut Option<ChunkWriter>,
        open: impl Fn() -> Result<ChunkWriter>,
        buf: &mut Vec<u8>,
        mut room: Option<u64>,
    ) -> Result<Polled> {
        let mut done = Polled::default();
        let slots = pool.slots();
        for i in 0..pool.n_subbufs() {
            // A cheap look first: most slots are free or written.
            if slots.load(i).map(|w| w.state) != Some(State::Owned) {
                continue;
            }
            let mut saved = self.lock();
            let from = |inc: &Incarnation| saved.get(inc).copied().unwrap_or(0);
            let Some(mut p) = peek(pool, i, from, buf) else {
                continue;
            };
            if let Some(room) = &mut room {
                let fixed = bufpool::disk::RECORD_FIXED_SIZE as u64;
                let fits = room.saturating_sub(fixed);
                if !cut(&mut p, buf, fits) {
                    continue;
                }
                *room -= fixed + buf.len() as u64;
            }
            if out.is_none() {
                *out = Some(open()?);
            }
            let w = out.as_mut().expect("opened above");
            w.append_piece(&p.info, p.from, buf)
                .map_err(crate::error::io(w.path(), "write"))?;
            saved.insert(Incarnation::of(&p.info), p.end());
            done.pieces += 1;
            done.bytes += buf.len() as u64;
        }
        self.prune(pool);
        Ok(done)
    }

    /// Forgets incarnations no slot holds any more (taken by another reader process, or
    /// whose writer's repair freed them): once there are more than slots, keep only those
    /// some header still names. A sub-buffer a drain thread is saving still has its
    /// header (it is reset after the save), so its entry stays until the drain removes it.
    fn prune(&self, pool: &Pool) {
        let mut saved = self.lock();
        if saved.len() <= pool.n_subbufs() {
            return;
        }
        let present: std::collections::HashSet<Incarnation> = (0..pool.n_subbufs())
            .map(|i| Incarnation::of(&pool.subbuf_info(i)))
            .collect();
        saved.retain(|inc, _| present.contains(inc));
    }

    /// Saves a sub-buffer taken from the pool (`info`, `data`: its header and committed
    /// entries) to `w`: whole, or only what follows the pieces already saved.
    pub fn save_taken(
        &self,
        info: &SubBufInfo,
        data: &[u8],
        w: &mut ChunkWriter,
    ) -> std::io::Result<()> {
        let mut saved = self.lock();
        let inc = Incarnation::of(info);
        let from = saved.get(&inc).copied().unwrap_or(0).min(data.len() as u32);
        let mut info = *info;
        if from > 0 {
            info.lost_before = 0;
        }
        w.append_piece(&info, from, &data[from as usize..])?;
        saved.remove(&inc);
        Ok(())
    }
}

/// Cuts piece `p` (its entries in `buf`) after its last whole entry that ends within
/// `max` bytes. False if not even its first entry fits (nothing to write).
fn cut(p: &mut Piece, buf: &mut Vec<u8>, max: u64) -> bool {
    if buf.len() as u64 <= max {
        return true;
    }
    let mut dec = Decoder::new(buf);
    let (mut end, mut last_tsc) = (0, None);
    while let Some(Ok(e)) = dec.next() {
        if dec.position() as u64 > max {
            break;
        }
        end = dec.position();
        last_tsc = Some(e.tsc);
    }
    if end == 0 {
        return false;
    }
    buf.truncate(end);
    p.info.bytes_used = end as u32;
    p.info.last_tsc = last_tsc.unwrap_or(p.info.first_tsc);
    true
}
