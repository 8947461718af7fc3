//! `culprit export`: the traces with their matched messages, for Perfetto
//! ([`super::perfetto`]) or any tool that reads Chrome's JSON ([`super::chrome`]).

use super::links::UnitSpan;
use super::slices::{self, FlowIndex};
use super::Messages;
use crate::decode::TraceSet;
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
#[derive(Clone, Copy, Debug, Default)]
pub struct Exported {
    /// Slices (library calls, function calls, units).
    pub slices: u64,
    /// Flows (matched messages).
    pub flows: u64,
    /// Bytes of the file.
    pub bytes: u64,
}

/// The execution units of every process (the analyzer's units stage, no model needed).
pub fn units_of(set: &TraceSet) -> Result<Vec<UnitSpan>> {
    let opts = crate::trees::TreeOptions::default();
    let per: Vec<Vec<UnitSpan>> = set
        .processes
        .par_iter()
        .map(|p| {
            let pu = crate::units::process_units(p, &opts)?;
            Ok(pu.units.iter().map(|u| UnitSpan::of(&u.info)).collect())
        })
        .collect::<Result<_>>()?;
    Ok(per.into_iter().flatten().collect())
}

/// Writes `set` (analyzed as `m`) to `path`. `m` is dropped once its flows are indexed,
/// before the traces are read again.
pub fn export(
    set: &TraceSet,
    m: Messages,
    units: &[UnitSpan],
    format: Format,
    path: &Path,
) -> Result<Exported> {
    let io = |what| {
        move |source| Error::Io {
            path: path.to_path_buf(),
            what,
            source,
        }
    };
    let file = std::fs::File::create(path).map_err(io("create"))?;
    let out = std::io::BufWriter::with_capacity(1 << 20, file);
    let flows = FlowIndex::new(&m);
    let names = slices::ProcNames::of(&m);
    drop(m);
    let rewrap = |e: Error| match e {
        Error::Io { what, source, .. } => Error::Io {
            path: path.to_path_buf(),
            what,
            source,
        },
        e => e,
    };
    let slices = match format {
        Format::Perfetto => {
            let mut w = super::perfetto::PerfettoWriter::new(out);
            let n = slices::walk(set, &names, &flows, units, &mut w).map_err(rewrap)?;
            w.finish().map_err(io("write"))?;
            n
        }
        Format::Chrome => {
            let mut w = super::chrome::ChromeWriter::new(out).map_err(io("write"))?;
            let n = slices::walk(set, &names, &flows, units, &mut w).map_err(rewrap)?;
            w.finish().map_err(io("write"))?;
            n
        }
    };
    let bytes = std::fs::metadata(path).map_err(io("stat"))?.len();
    Ok(Exported {
        slices,
        flows: flows.flows,
        bytes,
    })
}
