//! The live data path in the benchmarks' in-process readers (`--live MS` of `hooks` and
//! `preload`): every MS the reader copies the newly committed prefix of each sub-buffer a
//! writer still fills (`bufpool::live::peek`), as `culprit reader` does every
//! `--live-interval`, and saves only the rest when it takes the published sub-buffer — so
//! the writers' cost can be measured with and without a reader polling their sub-buffers.

use bufpool::live::{peek, Incarnation};
use bufpool::{Pool, SubBufInfo};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A reader's live copies: per incarnation, the bytes copied so far.
pub struct Live {
    every: Duration,
    last: Instant,
    copied: HashMap<Incarnation, Vec<u8>>,
    buf: Vec<u8>,
    /// Pieces copied.
    pub pieces: u64,
    /// Time spent in the polls (reader thread, wall ns).
    pub poll_ns: u128,
}

impl Live {
    /// Polls every `every`.
    pub fn new(every: Duration) -> Live {
        Live {
            every,
            last: Instant::now(),
            copied: HashMap::new(),
            buf: Vec::new(),
            pieces: 0,
            poll_ns: 0,
        }
    }

    /// Copies the new prefixes if the interval has passed.
    pub fn tick(&mut self, pool: &Pool) {
        if self.last.elapsed() < self.every {
            return;
        }
        let t = Instant::now();
        self.last = t;
        for i in 0..pool.n_subbufs() {
            let copied = &self.copied;
            let from = |inc: &Incarnation| copied.get(inc).map_or(0, |v| v.len() as u32);
            if let Some(p) = peek(pool, i, from, &mut self.buf) {
                self.copied
                    .entry(Incarnation::of(&p.info))
                    .or_default()
                    .extend_from_slice(&self.buf);
                self.pieces += 1;
            }
        }
        self.poll_ns += t.elapsed().as_nanos();
    }

    /// The whole data of a taken sub-buffer: what was copied live, then the rest.
    pub fn whole(&mut self, info: &SubBufInfo, data: &[u8]) -> Vec<u8> {
        let mut d = self
            .copied
            .remove(&Incarnation::of(info))
            .unwrap_or_default();
        let from = d.len().min(data.len());
        d.extend_from_slice(&data[from..]);
        d
    }

    /// Bytes of a taken sub-buffer not copied live (what is left to save).
    pub fn rest_len(&mut self, info: &SubBufInfo, data: &[u8]) -> usize {
        let from = self
            .copied
            .remove(&Incarnation::of(info))
            .map_or(0, |v| v.len());
        data.len().saturating_sub(from)
    }
}
