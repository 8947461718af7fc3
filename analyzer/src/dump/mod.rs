//! `culprit dump`'s rendering: every recorded entry of a trace directory, thread by
//! thread, in order — wall-clock time, pid/tid, call depth, function name, arguments,
//! result — as text lines or one JSON object per line.
//!
//! Names: library calls by their fixed id; Python code and builtins from the `Meta::Code`
//! records of the trace; C addresses through [`crate::symbolize`] — the recorded memory
//! map (`Meta::Map`) places an address in its file, whose ELF symbols and DWARF give
//! `function (file:line)`; else `file+0xoffset`, or the raw address outside every mapping.
//! The symbol tables are the analyzer's own ([`symbols::process_symbols`]): pass 1 of
//! every process, then the fork inheritance of [`crate::units::inherit`], so a forked
//! child's calls are named from its parent's image as `culprit rank` names them.
//!
//! - [`symbols`]: the per-process tables and the name cache.
//! - `line`: one entry as a text line or a JSON object (`text`, `json`: their option
//!   and metadata fields).

mod json;
mod line;
pub mod symbols;
mod text;

use crate::error::Error;
use bufpool::format::Kind;
use line::Line;
use reader::TraceDir;
use std::io::Write;
use std::sync::Arc;
use symbols::{Namer, Symbols};

/// What [`dump`] prints.
#[derive(Clone, Debug, Default)]
pub struct DumpOptions {
    /// Only these processes (all if empty).
    pub pids: Vec<u32>,
    /// One JSON object per line instead of text.
    pub json: bool,
}

/// Why [`dump`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// The trace cannot be read or decoded (the error names the file).
    #[error(transparent)]
    Trace(#[from] Error),
    /// Writing the output failed (a closed pipe, a full disk).
    #[error(transparent)]
    Write(#[from] std::io::Error),
}

/// Checks that every pid of `pids` is in `trace`: the error lists the ones that are.
pub fn check_pids(trace: &TraceDir, pids: &[u32]) -> Result<(), Error> {
    if let Some(&missing) = pids.iter().find(|p| !trace.pids().contains(p)) {
        return Err(Error::BadTrace {
            path: trace.path().to_path_buf(),
            why: format!(
                "no process {missing} in this trace (processes: {})",
                trace
                    .pids()
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        });
    }
    Ok(())
}

/// Writes every entry of `trace` (of the processes in `opts.pids`, if any) to `out`, thread
/// by thread in the order of [`TraceDir::threads`], each thread's entries in recorded order.
/// Text: a `# pid P tid T` line per thread, then `HH:MM:SS.nnnnnnnnn  pid/tid depth body`
/// per entry; JSON: one object per entry, with `t_unix_ns`, `tsc`, `pid`, `tid`, `seq`,
/// `depth`, `kind`, `name` and the fields of its kind.
pub fn dump(
    trace: &Arc<TraceDir>,
    opts: &DumpOptions,
    out: &mut dyn Write,
) -> Result<(), DumpError> {
    check_pids(trace, &opts.pids)?;
    let calib = crate::trace::clock::recording_calibration(trace.manifest());
    let syms = symbols::process_symbols(trace)?;
    let namer = Namer::default();
    for k in trace.threads().collect::<Vec<_>>() {
        if !opts.pids.is_empty() && !opts.pids.contains(&k.pid) {
            continue;
        }
        let proc_syms = syms.get(&(k.pid, k.start_ticks));
        if !opts.json {
            writeln!(out, "# pid {} tid {}", k.pid, k.tid)?;
        }
        let mut depth: u32 = 0;
        for c in trace.chunks(k) {
            let c = c.map_err(Error::from)?;
            for e in trace.entries(k, &c) {
                let e = e.map_err(Error::from)?;
                // The tables of the program image the process ran then (it may have exec'd).
                let symbols = Symbols {
                    ps: proc_syms.map(|p| p.at(e.tsc)),
                    namer: &namer,
                };
                let line = Line {
                    key: k,
                    seq: c.info.seq,
                    calib: &calib,
                    syms: &symbols,
                    chunk: &c,
                };
                if matches!(e.kind, Kind::FnExit | Kind::PyReturn | Kind::PyCReturn) {
                    depth = depth.saturating_sub(1);
                }
                if opts.json {
                    serde_json::to_writer(&mut *out, &line.json(&e, depth)?)
                        .map_err(std::io::Error::from)?;
                    writeln!(out)?;
                } else {
                    writeln!(out, "{}", line.text(&e, depth)?)?;
                }
                if e.kind.is_call_shaped() && e.kind != Kind::PyExc {
                    depth += 1;
                }
            }
        }
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{write_trace_dir, TraceBuilder};

    #[test]
    fn an_unknown_pid_is_an_error_listing_the_processes() {
        let mut p = TraceBuilder::new("h", 7, 7);
        p.enter(0x10, 0x20);
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t");
        write_trace_dir(&dir, "h", &[p.finish()]).unwrap();
        let trace = Arc::new(TraceDir::open(&dir).unwrap());
        let opts = DumpOptions {
            pids: vec![8],
            json: false,
        };
        let e = dump(&trace, &opts, &mut Vec::new())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no process 8 in this trace (processes: 7)"),
            "{e}"
        );
    }
}
