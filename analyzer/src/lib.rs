//! `analyzer` — Culprit's offline analysis: learn a model of normal behaviour from traces,
//! then rank the execution units of a faulty run by suspicion (Maruyama & Matsuoka,
//! *Model-Based Fault Localization in Large-Scale Computing Systems*, IPDPS 2008).
//!
//! The folders follow the pipeline: [`trace`] loads traces for every analysis, [`localize`]
//! is the paper's method, [`report`] renders its result. Each stage is a module joined to
//! the next by a named type (the old flat names — `analyzer::decode`, `analyzer::units`… —
//! are kept as re-exports):
//!
//! | stage | module | input → output |
//! |-------|--------|----------------|
//! | 1 load | [`trace::load`] | trace directories → [`decode::TraceSet`] (processes, threads, chunks) |
//! | 2 decode | [`trace::decode`] | chunks → per-thread [`decode::Event`] streams (through `bufpool::format`) |
//! | 3 symbolize | [`trace::symbolize`] | addresses, Python indices → stable keys and names |
//! | 4 units | [`localize::units`] | events → [`units::Unit`]s: pass 1 ([`units::scan_process`]: event loops, descriptors), fork inheritance ([`units::inherit`]), pass 2 ([`units::split_process`]: initializer, handler, loop, finalizer) |
//! | 5 trees | [`localize::trees`] | a unit's calls → its [`trees::CallTree`] |
//! | 6 connections | [`localize::connections`] | setup calls → [`connections::ConnKey`] per descriptor |
//! | 7 models | [`localize::model`] | units → process models → the global [`model::Model`] |
//! | 8 scores | [`localize::score`] | unit + model → [`score::UnitScore`] (§6 of the paper) |
//! | 9 ranking | `localize::ranking`, `localize::rows` | scores → compact rows in ranking order |
//! | 10 report | [`report`] | rows → ranked [`report::RankedUnit`]s (text, JSON, HTML) |
//!
//! [`learn`], [`rank`] and [`show`] ([`localize::learn`], [`localize::rank`],
//! [`localize::show`]) run the chain over processes in parallel (rayon,
//! `localize::pipeline`); their results do not depend on the number of threads.
//!
//! The other analyses read the same traces through [`trace`]:
//!
//! | analysis | module | what it answers |
//! |----------|--------|-----------------|
//! | messages | [`messages`] | who sent which bytes to whom, in what causal order (Niigaki et al.); timeline, Perfetto and Chrome exports |
//! | demand | [`demand`] | each process's service demand per request type, and which process's residual left its control limits (Kato et al.) |
//! | IO share | [`ioshare`] | which process's writes load a shared file server, from `culprit iosample` files (Saeki) |
//! | dump | [`dump`] | every recorded entry, named |
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

pub mod demand;
pub mod dump;
pub mod error;
pub mod hash;
pub mod ioshare;
pub mod localize;
pub mod messages;
pub mod report;
pub mod synth;
pub mod trace;
pub mod watch;

/// Everything an analysis needs to read traces, under one name (`analyzer::decode::TraceSet`,
/// `ProcessTrace`, `Event`, `TraceBuilder`…): [`trace::load`], [`trace::decode`] and
/// [`trace::builder`] together.
pub mod decode {
    pub use crate::trace::builder::*;
    pub use crate::trace::decode::*;
    pub use crate::trace::load::*;
    pub use crate::trace::outline::{HostSpan, RunOutline};
    pub use crate::trace::select::{ProcId, Selected};
}

pub use error::{Error, Result};
pub use localize::learn::{learn, Learned, ProcessSummary};
pub use localize::options::{Options, Progress};
pub use localize::rank::rank;
use localize::ranking;
pub use localize::show::{show, Shown};
pub use localize::{
    baselines, consequence, durations, ending, evidence, model_check, narrative, sizes, weigh,
};
pub use localize::{connections, model, partial, score, trees, units};
pub use trace::{procname, recorded, runindex, symbolize, unseen};
