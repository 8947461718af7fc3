//! A stand-in for a damaged or missing `manifest.json`: what the chunks can tell of it.

use super::TraceDir;
use bufpool::disk;
use bufpool::format::Decoder;
use bufpool::Calibration;
use std::os::unix::fs::FileExt;

impl TraceDir {
    /// Completes a stand-in manifest from the chunks (calibration from their clock
    /// records, start time from their file headers) and reports the damage.
    pub(super) fn adopt_recovered_manifest(&mut self, why: String) {
        self.stand_in = true;
        let mut lost = Vec::new();
        if self.manifest.calibration().ticks_per_ns() == 0.0 {
            match self.clock_calibration() {
                Some(c) => self.manifest.calibration = c.into(),
                None => lost.push("wall-clock times (fewer than two clock records)"),
            }
        }
        if self.manifest.start_unix_ns == 0 {
            self.manifest.start_unix_ns = self
                .files
                .iter()
                .filter_map(|(_, f)| {
                    let mut head = [0u8; disk::CHUNK_HEADER_SIZE];
                    f.read_exact_at(&mut head, 0).ok()?;
                    disk::parse_chunk_header(&head)
                        .ok()
                        .map(|h| h.created_unix_ns)
                })
                .min()
                .unwrap_or(0);
        }
        self.note_damage(crate::damage::Damage {
            path: self.dir.join(disk::MANIFEST_FILE),
            offset: None,
            bytes: 0,
            records: 0,
            threads: Vec::new(),
            why: format!(
                "{why}: the chunk files are read without it{} (`culprit repair DIR` \
                 rewrites it from them)",
                if lost.is_empty() {
                    String::new()
                } else {
                    format!("; unknown: {}", lost.join(", "))
                }
            ),
            repairable: false,
        });
    }

    /// True if [`TraceDir::manifest`] stands in for a damaged or missing `manifest.json`
    /// (already reported as damage): whether the recording finished is not known.
    pub fn manifest_is_stand_in(&self) -> bool {
        self.stand_in
    }

    /// The pool's calibration told again from the clock records the tracer writes when a
    /// process starts (TSC, `CLOCK_REALTIME`, `CLOCK_MONOTONIC`): the earliest and the
    /// latest. `None` with fewer than two distinct.
    fn clock_calibration(&self) -> Option<Calibration> {
        let mut samples: Vec<bufpool::format::ClockSample> = Vec::new();
        // Written when a process image starts: in its first sub-buffers (seq 0 or 1 in
        // the low 32 bits), or in the metadata area.
        let starts = self.threads.values().flatten().filter(|l| {
            l.info.seq & 0xffff_ffff <= 1 || l.info.flags & bufpool::layout::FLAG_META_AREA != 0
        });
        for loc in starts {
            let Ok(c) = self.read(loc) else { continue };
            for e in Decoder::new(&c.data).map_while(|e| e.ok()) {
                if let Ok(Some(bufpool::format::Meta::Clock(s))) = e.meta() {
                    samples.push(s);
                }
            }
        }
        let first = samples.iter().min_by_key(|s| s.tsc)?;
        let last = samples.iter().max_by_key(|s| s.tsc)?;
        if last.tsc <= first.tsc || last.monotonic_ns <= first.monotonic_ns {
            return None;
        }
        Some(Calibration {
            tsc0: first.tsc,
            realtime0_ns: first.realtime_ns,
            monotonic0_ns: first.monotonic_ns,
            tsc1: last.tsc,
            realtime1_ns: last.realtime_ns,
            monotonic1_ns: last.monotonic_ns,
        })
    }
}
