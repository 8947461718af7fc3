//! Which processes load a shared file server (SPEC §9; Saeki, *Estimating per-process
//! network IO load*, 2010): from an IO-sample file (`culprit iosample`), estimate for each
//! client process the share β ∈ [0, 1] of its IO that reaches the server, by regressing the
//! server's own counter on the processes' counters, interval by interval:
//! `Δy_server = Σᵢ βᵢ Δxᵢ`.
//!
//! | stage | module | in → out |
//! |---|---|---|
//! | 0 clients | [`clients`] | which processes are candidate clients: connected to the server, or every one |
//! | 1 series | [`series`] | [`reader::iosample::SampleLog`] → [`series::Series`] (y, X per interval) |
//! | 1′ load | [`load`] | the server's load: its counter, + its backlog's change, or its intake (bytes it read) + the backlog's change |
//! | 2a regression | [`regression`] | sliding-window bounded least squares, lag, collinearity |
//! | 2b single variation | [`single`] | the thesis's one-change-at-a-time estimator |
//! | 2a′ change points | [`breaks`], [`segments`] | where each share jumps or bends; segments constant or drifting between; windows that respect them |
//! | 2a‴ trend filter | [`trend`] | every share over the run, penalised jumps and bends (from 8 processes, in place of 2a′) |
//! | 2a″ selection | [`select`] | window and prior weight by cross-validation |
//! | 2c baseline | [`regression`] (unbounded) | plain least squares, for comparison |
//! | 3 truth | [`truth`] | trace directories → bytes each process sent to the server |
//! | 4 report | [`report`], [`html`] | [`report::IoShareReport`] → text, JSON, HTML |
//!
//! The solvers are nalgebra's SVD inside an active-set loop ([`bvls`]).

pub mod breaks;
pub mod bvls;
pub mod clients;
pub mod html;
pub mod load;
pub mod regression;
pub mod report;
pub mod segments;
pub mod select;
pub mod series;
pub mod single;
pub mod trend;
pub mod truth;

pub use report::{analyze, IoShareOptions, IoShareReport, Method};

/// State of an estimator at one interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// No process wrote and the server was idle.
    Idle,
    /// Estimated.
    Ok,
    /// Fewer intervals in the window than unknowns.
    Insufficient,
    /// Estimated, but some processes' IO moved together: their individual β are unreliable.
    Collinear,
    /// Single variation: no one-β change explains the interval.
    Transition,
}

/// One estimator's output: β per client column per interval, with an uncertainty.
#[derive(Clone, Debug)]
pub struct Estimate {
    /// `regression`, `single`, `least_squares`.
    pub name: &'static str,
    /// `beta[column][interval]`; `None` where the process did no IO or nothing was estimated.
    pub beta: Vec<Vec<Option<f64>>>,
    /// Standard error (regression) or resolution (single variation) of each β.
    pub err: Vec<Vec<Option<f64>>>,
    /// Per interval.
    pub status: Vec<Status>,
    /// Write-back lag fraction chosen per interval (regression).
    pub lag: Vec<Option<f64>>,
}

impl Estimate {
    /// The estimate over coarser intervals of `step` fine ones (`coarse` built from the
    /// same file with that step): in each, β = the byte-weighted mean of the fine β (Σ β·x /
    /// the process's bytes, so within the fine β's range), the uncertainty likewise, the
    /// status the worst seen.
    pub fn coarsen(&self, fine: &series::Series, coarse: &series::Series, step: usize) -> Estimate {
        let p = coarse.columns.len();
        let n = coarse.y.len();
        let mut out = Estimate::new(self.name, p, n);
        let rank = |s: Status| match s {
            Status::Idle => 0,
            Status::Ok => 1,
            Status::Insufficient => 2,
            Status::Collinear => 3,
            Status::Transition => 4,
        };
        for t in 0..n {
            let fine_t: Vec<usize> = (t * step..((t + 1) * step).min(fine.y.len())).collect();
            out.status[t] = fine_t
                .iter()
                .map(|&k| self.status[k])
                .max_by_key(|s| rank(*s))
                .unwrap_or(Status::Idle);
            for c in 0..p {
                let x: f64 = fine_t.iter().map(|&k| fine.columns[c].x[k]).sum();
                if x <= 0.0 || fine_t.iter().all(|&k| self.beta[c][k].is_none()) {
                    continue;
                }
                // β·x of each fine interval, without the lagged part: the lag says when the
                // server writes a process's bytes, not which share of them, and the lagged
                // bytes of the interval before a step's first would count twice (β > 1).
                let ex: f64 = fine_t
                    .iter()
                    .map(|&k| self.beta[c][k].unwrap_or(0.0) * fine.columns[c].x[k])
                    .sum();
                let err: f64 = fine_t
                    .iter()
                    .map(|&k| self.err[c][k].unwrap_or(0.0) * fine.columns[c].x[k])
                    .sum::<f64>();
                out.beta[c][t] = Some(ex / x);
                out.err[c][t] = Some(err / x);
            }
        }
        out
    }

    fn new(name: &'static str, columns: usize, intervals: usize) -> Estimate {
        Estimate {
            name,
            beta: vec![vec![None; intervals]; columns],
            err: vec![vec![None; intervals]; columns],
            status: vec![Status::Idle; intervals],
            lag: vec![None; intervals],
        }
    }

    /// Server bytes this estimate explains per column per interval (β·x; the lagged part
    /// included when a lag was fitted).
    pub fn explained(&self, s: &series::Series, c: usize, t: usize) -> f64 {
        let Some(b) = self.beta[c][t] else {
            return 0.0;
        };
        let x = &s.columns[c].x;
        let l = self.lag[t].unwrap_or(0.0);
        let prev = if t > 0 { x[t - 1] } else { 0.0 };
        b * ((1.0 - l) * x[t] + l * prev)
    }
}
