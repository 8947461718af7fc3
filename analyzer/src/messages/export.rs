//! `culprit export`: the traces with their matched messages, for Perfetto
//! ([`super::perfetto`]) or any tool that reads Chrome's JSON ([`super::chrome`]).

use super::links::UnitSpan;
use super::slices;
use super::streamed::FlowEnds;
use crate::decode::{ProcessTrace, TraceSet};
use crate::error::{Error, Result};
use rayon::prelude::*;
use std::path::Path;

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Perfetto protobuf.
    Perfetto,
    /// Chrome JSON trace events.
    Chrome,
}

/// What an export wrote.
#[derive(Clone, Debug, Default)]
pub struct Exported {
    /// Slices (library calls, function calls, units).
    pub slices: u64,
    /// Flows (matched messages).
    pub flows: u64,
    /// Bytes of the file.
    pub bytes: u64,
    /// One line per process of which something is not recorded
    /// ([`crate::procname::unseen_notes`]).
    pub unseen: Vec<String>,
    /// The hosts' clock corrections applied ([`super::align`]; empty on one host).
    pub offsets: Vec<super::offsets::HostOffset>,
}

/// The execution units of every process (the analyzer's units stage, no model needed).
pub fn units_of(set: &TraceSet) -> Result<Vec<UnitSpan>> {
    let per: Vec<Vec<UnitSpan>> = set
        .processes
        .par_iter()
        .map(process_units)
        .collect::<Result<_>>()?;
    Ok(per.into_iter().flatten().collect())
}

/// The execution units of one process.
pub fn process_units(p: &ProcessTrace) -> Result<Vec<UnitSpan>> {
    let opts = crate::trees::TreeOptions::default();
    let pu = crate::units::process_units(p, &opts)?;
    Ok(pu.units.iter().map(|u| UnitSpan::of(&u.info)).collect())
}

/// Writes `set` to `path`: the flows are found first by the bounded-memory pass of
/// [`super::streamed`] (its sorted runs spilled beside `path`), then every thread is
/// decoded again and streamed to the writer with the flow ids read back in order, with
/// its process's execution units when `units` is set (computed one process at a time).
/// With several hosts, every host's times are corrected to the reference host's clock
/// ([`super::align`], from the flows between hosts).
pub fn export(set: &TraceSet, units: bool, format: Format, path: &Path) -> Result<Exported> {
    let io = |what| {
        move |source| Error::Io {
            path: path.to_path_buf(),
            what,
            source,
        }
    };
    let file = reader::safefile::create_output(path).map_err(io("create"))?;
    let spill_dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    // Beside the output if a file can be made there (not, say, for `-o /dev/null`).
    let spill_dir = if tempfile::tempfile_in(&spill_dir).is_ok() {
        spill_dir
    } else {
        std::env::temp_dir()
    };
    let mut flows = FlowEnds::build(set, &spill_dir)?;
    // Every host on the reference host's clock (the flows are keyed by TSC: unchanged).
    let aligned;
    let set = if flows.offsets.is_empty() {
        set
    } else {
        aligned = super::align::corrected(set, &flows.offsets);
        &aligned
    };
    let mut names = std::mem::take(&mut flows.names);
    // Processes named as they were started, with their ports.
    let labels = crate::procname::labels(set)?;
    for (n, l) in names.iter_mut().zip(&labels) {
        n.label = l.text();
    }
    let out = std::io::BufWriter::with_capacity(1 << 20, file);
    let rewrap = |e: Error| match e {
        Error::Io { what, source, .. } => Error::Io {
            path: path.to_path_buf(),
            what,
            source,
        },
        e => e,
    };
    let mut per_process = process_units;
    let units: Option<slices::UnitsOf<'_>> = if units { Some(&mut per_process) } else { None };
    let slices = match format {
        Format::Perfetto => {
            let mut w = super::perfetto::PerfettoWriter::new(out);
            let n = slices::walk(set, &names, &mut flows, units, &mut w).map_err(rewrap)?;
            w.finish().map_err(io("write"))?;
            n
        }
        Format::Chrome => {
            let mut w = super::chrome::ChromeWriter::new(out).map_err(io("write"))?;
            let n = slices::walk(set, &names, &mut flows, units, &mut w).map_err(rewrap)?;
            w.finish().map_err(io("write"))?;
            n
        }
    };
    let bytes = std::fs::metadata(path).map_err(io("stat"))?.len();
    Ok(Exported {
        slices,
        flows: flows.flows,
        bytes,
        unseen: crate::procname::unseen_notes(set, &labels),
        offsets: flows.offsets,
    })
}
