//! The ranking's compact rows: one per ranked unit (72 bytes, plain data), with the scores
//! the rows of equal trees share. [`rank`](crate::rank) makes them, [`super::ranking`]
//! orders them, [`crate::report`] makes the listed ones whole.

use crate::score::{Effective, Verdict};

/// A ranked unit below the first [`crate::Options::units_kept`], kept compact (72 bytes,
/// plain data): the process, the connection and the score's verdict and effective nodes
/// are indices into tables of the [`Report`] (the units of equal trees share one score),
/// and what few units have — lost entries, injected faults, their own effective nodes and
/// annotated tree — is in [`Report::extras`]. Made into a
/// [`RankedUnit`](crate::report::RankedUnit) when listed ([`Report::unit`]).
///
/// [`Report`]: crate::report::Report
/// [`Report::extras`]: crate::report::Report::extras
/// [`Report::unit`]: crate::report::Report::unit
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Row {
    pub score: f64,
    pub t_start_unix_ns: i64,
    pub t_end_unix_ns: i64,
    pub tsc_start: u64,
    pub tsc_end: u64,
    /// Index in `Report::procs`.
    pub proc_: u32,
    /// Index in `Report::conns`.
    pub conn: u32,
    pub tid: u32,
    pub index: u32,
    /// Index in `Report::shared`: verdict and effective nodes.
    pub shared: u32,
    /// Descriptor (if [`Row::FD`] is set).
    pub fd: i32,
    pub kind: crate::units::UnitKind,
    /// [`Row::MAIN_THREAD`], [`Row::CUT`], [`Row::FD`], [`Row::EXTRA`],
    /// [`Row::CUT_AT_START`].
    pub flags: u8,
    /// For the root of an incident: the other processes whose units were filed under it
    /// ([`crate::consequence`]); ties of score are ordered by it
    /// ([`tie`](super::ranking::tie)).
    pub incident: u16,
}

impl Row {
    /// The unit ran on its process's main thread.
    pub const MAIN_THREAD: u8 = 1;
    /// See [`crate::units::UnitHead::cut`].
    pub const CUT: u8 = 2;
    /// `fd` holds the unit's descriptor.
    pub const FD: u8 = 4;
    /// The unit has an entry in [`Report::extras`](crate::report::Report::extras).
    pub const EXTRA: u8 = 8;
    /// See [`crate::units::UnitHead::cut_at_start`].
    pub const CUT_AT_START: u8 = 16;
}

/// A score with its verdict and light effective nodes, shared by the rows of equal trees
/// (a row's `score` is its shared score's).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct SharedScore {
    pub score: f64,
    pub verdict: Verdict,
    pub effective: Box<[Effective]>,
    /// Units the unit's model was learned from (0: no model).
    pub model_units: u64,
    /// What a persistent run ([`crate::weigh`]) added to `score`: [`crate::consequence`]
    /// leaves it out when it asks whether one anomaly is clearly stronger than another
    /// (its `strength`) — a run of repeated reactions weighs as its first unit alone. 0 for
    /// every other unit.
    #[serde(default)]
    pub run_added: f64,
}

/// Where a compact unit is: (vector, index) in `Report::rest`.
pub(crate) type RowRef = (u32, u32);
