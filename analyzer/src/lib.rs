//! `analyzer` — Culprit's offline analysis: learn a model of normal behaviour from traces,
//! then rank the execution units of a faulty run by suspicion (Maruyama & Matsuoka,
//! *Model-Based Fault Localization in Large-Scale Computing Systems*, IPDPS 2008).
//!
//! The pipeline is a chain of named stages, each a module joined to the next by a named type:
//!
//! | stage | module | input → output |
//! |-------|--------|----------------|
//! | 1 decode | [`decode`] | trace chunks → per-thread [`decode::Event`] streams |
//! | 2 symbolize | [`symbolize`] | addresses, Python indices → stable keys and names |
//! | 3 units | [`units`] | events → [`units::Unit`]s (initializer, handler, loop, finalizer) |
//! | 4 trees | [`trees`] | a unit's calls → its [`trees::CallTree`] |
//! | 5 connections | [`connections`] | setup calls → [`connections::ConnKey`] per descriptor |
//! | 6 models | [`model`] | units → process models → the global [`model::Model`] |
//! | 7 scores | [`score`] | unit + model → [`score::UnitScore`] (§6 of the paper) |
//! | 8 report | [`report`] | scores → ranked [`report::RankedUnit`]s (text, JSON, HTML) |
//!
//! [`learn`] and [`rank`] run the whole chain over processes in parallel (rayon); their
//! results do not depend on the number of threads.
//!
//! ```
//! use analyzer::decode::{TraceBuilder, TraceSet};
//! use bufpool::format::{LibFn, LibOpts};
//!
//! // A tiny event-driven process: set up a listening socket, then loop on poll + recv.
//! fn run(recv_ret: i64) -> TraceSet {
//!     let mut t = TraceBuilder::new("node1", 10, 10);
//!     let o = |fd: i32, ret: i64, len: u64| LibOpts { fd: Some(fd), ret: Some(ret), len: Some(len), ..Default::default() };
//!     t.lib(0x100, LibFn::Socket, LibOpts { ret: Some(3), ..Default::default() });
//!     t.lib(0x110, LibFn::Bind, o(3, 0, 0));
//!     t.lib(0x120, LibFn::Listen, o(3, 0, 0));
//!     t.lib(0x130, LibFn::Accept, o(3, 4, 0));
//!     for _ in 0..5 {
//!         t.lib(0x200, LibFn::Poll, o(-1, 1, 0));
//!         t.lib(0x210, LibFn::Recv, o(4, recv_ret, 8));
//!         t.lib(0x220, LibFn::Send, o(4, 8, 8));
//!     }
//!     TraceSet { processes: vec![t.finish()] }
//! }
//! let opts = analyzer::Options::default();
//! let model = analyzer::learn(&[run(8)], &opts).unwrap().model;
//! let report = analyzer::rank(&model, &run(3), &opts).unwrap();
//! // Short receives were never seen in normal runs: the handler units rank first.
//! assert_eq!(report.units[0].info.kind, analyzer::units::UnitKind::Handler);
//! assert!(report.units[0].score > 0.3);
//! ```
#![deny(missing_docs)]

pub mod error;
pub mod hash;
pub mod localize;
pub mod report;
pub mod synth;
pub mod trace;

/// Everything an analysis needs to read traces, under one name (`analyzer::decode::TraceSet`,
/// `ProcessTrace`, `Event`, `TraceBuilder`…): [`trace::load`], [`trace::decode`] and
/// [`trace::builder`] together.
pub mod decode {
    pub use crate::trace::builder::*;
    pub use crate::trace::decode::*;
    pub use crate::trace::load::*;
}

pub use error::{Error, Result};
pub use localize::learn::{learn, Learned, ProcessSummary};
pub use localize::options::{Options, Progress};
pub use localize::rank::rank;
use localize::ranking;
pub use localize::show::{show, Shown};
pub use localize::{connections, model, score, trees, units};
pub use trace::symbolize;
