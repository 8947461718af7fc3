//! Per-process information and totals of a trace directory, computed from the chunks
//! themselves (what the final manifest holds).

use crate::error::Result;
use crate::manifest::{ProcessInfo, Totals};
use crate::tracedir::TraceDir;
use bufpool::format::{Kind, Meta, ProcReason};
use bufpool::layout::FLAG_SALVAGED;
use std::collections::BTreeMap;

/// What [`summarize`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// One per process, ordered by pid then start time.
    pub processes: Vec<ProcessInfo>,
    /// Totals.
    pub totals: Totals,
    /// The first decode error met, if any (the rest of that sub-buffer is not counted).
    pub first_decode_error: Option<String>,
}

/// Decodes every saved sub-buffer once and counts.
pub fn summarize(trace: &TraceDir) -> Result<Summary> {
    let mut procs: BTreeMap<(u32, u64), ProcessInfo> = BTreeMap::new();
    let mut s = Summary::default();
    for key in trace.threads().collect::<Vec<_>>() {
        let p = procs
            .entry((key.pid, key.start_ticks))
            .or_insert_with(|| ProcessInfo {
                pid: key.pid,
                start_ticks: key.start_ticks,
                origin: "unknown".into(),
                ..Default::default()
            });
        p.threads.push(key.tid);
        s.totals.threads += 1;
        let mut prev = None;
        for c in trace.chunks(key) {
            let c = c?;
            // The pieces of one sub-buffer (the live data path) count once.
            let sb = Some((c.info.seq, c.info.first_tsc));
            if sb != prev {
                prev = sb;
                s.totals.subbufs += 1;
                p.subbufs += 1;
            }
            // Salvaged: the published header (the last piece) says so.
            if c.info.flags & FLAG_SALVAGED != 0 {
                s.totals.salvaged += 1;
            }
            p.bytes += c.data.len() as u64;
            // A loss is counted once: by the `Lost` entries of the data, plus what only
            // the header says (FORMAT.md §2); saturating, since the counts come from the
            // files.
            match bufpool::format::header_lost(c.info.lost_before, &c.data) {
                Ok(n) => p.lost = p.lost.saturating_add(n),
                Err(m) => trace.note_inconsistent(key, c.data_offset, m.to_string())?,
            }
            for e in c.entries() {
                let e = match e.and_then(|e| {
                    e.check().map_err(|err| crate::Error::Decode {
                        path: c.path.as_ref().clone(),
                        err,
                    })?;
                    Ok(e)
                }) {
                    Ok(e) => e,
                    Err(err) => {
                        s.totals.undecodable += 1;
                        s.first_decode_error.get_or_insert_with(|| err.to_string());
                        if let crate::Error::Decode { err, .. } = &err {
                            trace.skip_undecodable(key, c.data_offset, c.data.len() as u64, err)?;
                        }
                        break;
                    }
                };
                match e.kind {
                    Kind::Lost => p.lost = p.lost.saturating_add(e.lost),
                    k if k.is_meta() => {
                        p.meta_records += 1;
                        if let Ok(Some(Meta::Proc(r))) = e.meta() {
                            if p.origin == "unknown" {
                                p.origin = match r.reason {
                                    ProcReason::Start => "start",
                                    ProcReason::Fork => "fork",
                                    ProcReason::Exec => "exec",
                                }
                                .into();
                                p.ppid = r.ppid;
                            }
                            if r.reason == ProcReason::Exec {
                                p.execs += 1;
                            }
                            p.exe = String::from_utf8_lossy(&r.exe).into_owned();
                            p.argv = r
                                .argv
                                .iter()
                                .map(|a| String::from_utf8_lossy(a).into_owned())
                                .collect();
                        }
                    }
                    _ => p.entries += 1,
                }
            }
        }
    }
    for p in procs.values_mut() {
        p.threads.sort_unstable();
        p.threads.dedup();
        s.totals.entries += p.entries;
        s.totals.meta_records += p.meta_records;
        s.totals.bytes += p.bytes;
        s.totals.lost = s.totals.lost.saturating_add(p.lost);
    }
    s.totals.processes = procs.len() as u64;
    s.totals.duplicates = trace.duplicates();
    s.processes = procs.into_values().collect();
    Ok(s)
}
