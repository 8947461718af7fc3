//! Damage found inside a record's entries (an entry that does not decode, a header that
//! disagrees with its data): reported once per record, however many passes decode it.

use super::{Chunk, RecordLoc, ThreadKey, TraceDir};
use crate::error::{Error, Result};
use bufpool::disk::RECORD_FIXED_SIZE;
use bufpool::format::{DecodeError, Decoder, EntryRef};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

impl TraceDir {
    /// The record of thread `key` whose data starts at file offset `data_offset` holds an
    /// entry that does not decode (`err`, at a file offset inside that data; `data_len`:
    /// the record's data bytes): the rest of the record from that entry on is skipped,
    /// reported once as damage (every decoding of the record stops at the same entry, so
    /// every pass over it sees the same entries). An error when strict.
    pub fn skip_undecodable(
        &self,
        key: ThreadKey,
        data_offset: u64,
        data_len: u64,
        err: &DecodeError,
    ) -> Result<()> {
        let path = self.record_path(key, data_offset);
        if self.opts.strict {
            return Err(Error::Decode {
                path,
                err: err.clone(),
            });
        }
        let end = data_offset + data_len;
        let skipped = end.saturating_sub(err.offset);
        self.note_record(
            key,
            data_offset,
            crate::damage::Damage {
                path,
                offset: Some(err.offset),
                bytes: skipped,
                records: 0,
                threads: vec![key],
                why: format!(
                    "an entry that does not decode ({}): the rest of its record is skipped",
                    err.kind
                ),
                repairable: false,
            },
        );
        Ok(())
    }

    /// The record of thread `key` whose data starts at `data_offset` is readable but
    /// inconsistent (`why`: its header disagrees with its entries); nothing of it is
    /// skipped. Reported once as damage; an error when strict.
    pub fn note_inconsistent(&self, key: ThreadKey, data_offset: u64, why: String) -> Result<()> {
        let path = self.record_path(key, data_offset);
        let record = data_offset.saturating_sub(RECORD_FIXED_SIZE as u64);
        if self.opts.strict {
            return Err(Error::Damaged {
                dir: self.dir.clone(),
                first: format!("{}: record at byte offset {record}: {why}", path.display()),
            });
        }
        self.note_record(
            key,
            data_offset,
            crate::damage::Damage {
                path,
                offset: Some(record),
                bytes: 0,
                records: 0,
                threads: vec![key],
                why,
                repairable: false,
            },
        );
        Ok(())
    }

    /// The indexed record of `key` whose data starts at `data_offset`.
    fn record_at(&self, key: ThreadKey, data_offset: u64) -> Option<&RecordLoc> {
        self.threads
            .get(&key)?
            .iter()
            .find(|l| l.offset + RECORD_FIXED_SIZE as u64 == data_offset)
    }

    /// The chunk file of the record of `key` at `data_offset` (the directory if unknown).
    fn record_path(&self, key: ThreadKey, data_offset: u64) -> PathBuf {
        match self.record_at(key, data_offset) {
            Some(l) => self.files[l.file as usize].0.as_ref().clone(),
            None => self.dir.clone(),
        }
    }

    /// Reports `d`, found in the entries of a record, once per record.
    fn note_record(&self, key: ThreadKey, data_offset: u64, d: crate::damage::Damage) {
        if let Some(loc) = self.record_at(key, data_offset) {
            // Relaxed: see `RecordLoc::noted`.
            if loc.noted.swap(true, Ordering::Relaxed) {
                return;
            }
        }
        self.note_damage(d);
    }

    /// The entries of `c`, a record of thread `key` read by [`TraceDir::chunks`], decoded
    /// up to the first one that does not: that one and the rest of the record are skipped
    /// as [`TraceDir::skip_undecodable`] says (an error only when strict).
    pub fn entries<'c>(
        &'c self,
        key: ThreadKey,
        c: &'c Chunk,
    ) -> impl Iterator<Item = Result<EntryRef<'c>>> + 'c {
        let mut d = Decoder::with_base(&c.data, c.data_offset);
        std::iter::from_fn(move || match d.next()? {
            Ok(e) => Some(Ok(e)),
            Err(err) => self
                .skip_undecodable(key, c.data_offset, c.data.len() as u64, &err)
                .err()
                .map(Err),
        })
    }
}
