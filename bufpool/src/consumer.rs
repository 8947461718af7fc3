//! The reader side: take written sub-buffers, copy them out, give them back.

use crate::layout::SubBufInfo;
use crate::pool::Pool;
use crate::slots::Holder;
use core::sync::atomic::Ordering;

/// A reader process's handle on the pool.
pub struct Consumer<'p> {
    pool: &'p Pool,
    me: Holder,
}

impl<'p> Consumer<'p> {
    /// A consumer identified as the calling process.
    pub fn new(pool: &'p Pool) -> Self {
        Consumer {
            pool,
            me: pool.holder(),
        }
    }

    /// A consumer with an explicit identity (tests).
    pub fn with_holder(pool: &'p Pool, me: Holder) -> Self {
        Consumer { pool, me }
    }

    /// This consumer's identity.
    pub fn holder(&self) -> Holder {
        self.me
    }

    /// Takes one written sub-buffer, if any.
    pub fn take(&self) -> Option<Taken<'_, 'p>> {
        let shared = self.pool.shared();
        let n = self.pool.n_subbufs();
        let start = shared.take_cursor.load(Ordering::Relaxed) as usize % n;
        let i = self.pool.slots().take(start, self.me)?;
        shared
            .take_cursor
            .store(((i + 1) % n) as u32, Ordering::Relaxed);
        let info = self.pool.subbuf_info(i);
        let len = (info.bytes_used as usize).min(self.pool.data_size());
        // SAFETY: we hold slot `i` in Reading state: no writer touches it until we
        // release it, and the AcqRel CAS in `take` made the writer's bytes visible.
        let data = unsafe { core::slice::from_raw_parts(self.pool.subbuf_data(i), len) };
        Some(Taken {
            consumer: self,
            slot: i,
            info,
            data,
            done: false,
        })
    }
}

/// A sub-buffer held by a reader. Dropping it without [`Taken::release`] puts it back
/// on the written set (nothing is lost if saving failed).
pub struct Taken<'c, 'p> {
    consumer: &'c Consumer<'p>,
    slot: usize,
    info: SubBufInfo,
    data: &'p [u8],
    done: bool,
}

impl Taken<'_, '_> {
    /// The slot index.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The header, as it was when taken.
    pub fn info(&self) -> &SubBufInfo {
        &self.info
    }

    /// The committed entries.
    pub fn data(&self) -> &[u8] {
        self.data
    }

    /// Saved: reset the header and return the sub-buffer to the free set.
    pub fn release(mut self) {
        self.consumer.pool.reset_header(self.slot);
        self.consumer
            .pool
            .slots()
            .release(self.slot, self.consumer.me);
        self.done = true;
    }

    /// Not saved: put it back on the written set.
    pub fn requeue(mut self) {
        self.consumer
            .pool
            .slots()
            .requeue(self.slot, self.consumer.me);
        self.done = true;
    }
}

impl Drop for Taken<'_, '_> {
    fn drop(&mut self) {
        if !self.done {
            self.consumer
                .pool
                .slots()
                .requeue(self.slot, self.consumer.me);
        }
    }
}
