//! Options of the learn / rank / show pipeline, and the progress receiver long stages
//! report to.

use super::{consequence, evidence};
use crate::trees::TreeOptions;
use std::sync::Arc;

/// Receives progress of long stages (the CLI shows bars with it).
pub trait Progress: Send + Sync {
    /// A stage with `total` steps begins.
    fn start(&self, stage: &str, total: u64);
    /// `n` more steps are done.
    fn inc(&self, n: u64);
    /// The stage is over.
    fn finish(&self);
}

/// Options of [`learn`](crate::learn) and [`rank`](crate::rank). Every default is documented at its field.
#[derive(Clone)]
pub struct Options {
    /// How trees are built (learning; ranking always uses the model's own options).
    /// Default: [`TreeOptions::default`] (outcome-aware nodes).
    pub tree: TreeOptions,
    /// Sentences of *why* per unit. Default 3.
    pub why: usize,
    /// Units whose *why* is written out by [`rank`](crate::rank) (the highest-ranked); the others'
    /// is made when printed ([`Report::why_of`](crate::report::Report::why_of)), which keeps a large ranking small
    /// in memory. Default 100.
    pub why_units: usize,
    /// Effective nodes kept per ranked unit. Default 16.
    pub effective_kept: usize,
    /// Units whose annotated call tree is kept (the highest-ranked). Default 200.
    pub trees_kept: usize,
    /// Lines of an annotated tree. Default 400.
    pub tree_lines: usize,
    /// Units of a ranking kept whole in [`Report::units`](crate::report::Report::units) (the highest-ranked); the others
    /// are kept compact (~170 bytes each) and made whole when listed ([`Report::iter`](crate::report::Report::iter)).
    /// Default 1000.
    pub units_kept: usize,
    /// Progress receiver. Default none.
    pub progress: Option<Arc<dyn Progress>>,
    /// The score units are ranked by ([`evidence::ScoreKind`]). Default: the evidence score,
    /// with consequences filed under their root.
    pub score: evidence::ScoreKind,
    /// Cross-process causes (a unit received what another unit sent), used to file
    /// consequences under their root across processes. Default none.
    pub causes: Option<Arc<dyn consequence::CauseSource>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            tree: TreeOptions::default(),
            why: 3,
            why_units: 100,
            effective_kept: 16,
            trees_kept: 200,
            tree_lines: 400,
            units_kept: 1000,
            progress: None,
            score: evidence::ScoreKind::default(),
            causes: None,
        }
    }
}

impl Options {
    pub(crate) fn start(&self, stage: &str, total: usize) {
        if let Some(p) = &self.progress {
            p.start(stage, total as u64);
        }
    }
    pub(crate) fn inc(&self) {
        if let Some(p) = &self.progress {
            p.inc(1);
        }
    }
    pub(crate) fn finish(&self) {
        if let Some(p) = &self.progress {
            p.finish();
        }
    }
}
