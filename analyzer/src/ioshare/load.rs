//! Which measure of the server's load the regression fits: its own counter, the counter
//! plus the change of its backlog (bytes delivered to it and not read yet), or its intake
//! (bytes it read from its sockets) plus the backlog's change — each where the sample file
//! measured it and the clients' IO explains it better.

use super::regression::{self, RegressionOptions};
use super::series::Series;
use super::Estimate;
use serde::Serialize;

/// Robust spread of an estimate's residuals: 1.4826 × the median |r| over busy intervals.
pub fn noise(s: &Series, e: &Estimate) -> f64 {
    let mut r: Vec<f64> = (0..s.y.len())
        .filter(|&t| s.y[t] > 0.0 && s.usable(t))
        .map(|t| {
            let ex: f64 = (0..s.columns.len()).map(|c| e.explained(s, c, t)).sum();
            (s.y[t] - ex).abs()
        })
        .collect();
    if r.is_empty() {
        return 0.0;
    }
    r.sort_by(f64::total_cmp);
    1.4826 * r[r.len() / 2]
}

/// When the server's intake is the load (`--intake`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IntakeChoice {
    /// Where the clients' IO explains it better than the counter (with or without the
    /// backlog, as chosen) over the same intervals.
    Auto,
    /// Wherever measured.
    Always,
    /// Never: the counter (with or without the backlog).
    Never,
}

impl IntakeChoice {
    /// Parses `auto`, `always`, `never`.
    pub fn parse(s: &str) -> Result<IntakeChoice, String> {
        match s {
            "auto" => Ok(IntakeChoice::Auto),
            "always" => Ok(IntakeChoice::Always),
            "never" => Ok(IntakeChoice::Never),
            _ => Err(format!("{s:?}: expected auto, always or never")),
        }
    }
}

/// The server's backlog in a report.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct BacklogInfo {
    /// The sample file measured it.
    pub measured: bool,
    /// `load` includes its change.
    pub used: bool,
    /// Robust spread (1.4826 × median |residual|, bytes per interval) of least-squares
    /// windows on the server's counter alone and on the counter plus the backlog's change:
    /// the backlog is used where it lowers it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub residual_spread: Option<[f64; 2]>,
    /// Largest backlog at an interval boundary (bytes).
    pub max_bytes: f64,
}

/// The server's intake in a report.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct IntakeInfo {
    /// The sample file measured it.
    pub measured: bool,
    /// `load` is the intake plus the backlog's change.
    pub used: bool,
    /// Robust spread of least-squares windows on the counter-based load (as chosen for
    /// the backlog) and on the intake plus the backlog's change, over the same intervals
    /// (those in which no server socket closed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub residual_spread: Option<[f64; 2]>,
    /// Intervals at the sampling resolution in which a server socket closed (unsure
    /// when the intake is used: that socket's last reads are not seen).
    pub closing_intervals: usize,
    /// Bytes the server read from its sockets over the run.
    pub total_bytes: f64,
}

/// Chooses the load of `fine` (the series at the sampling resolution) and makes `coarse`
/// (the series reported per step) follow the same choice. `plain`: the least-squares
/// windows that judge each candidate.
pub fn choose(
    fine: &mut Series,
    coarse: &mut Series,
    backlog: bool,
    intake: IntakeChoice,
    plain: &RegressionOptions,
) -> (BacklogInfo, IntakeInfo) {
    // The backlog, where measured, is added to the counter if the load it gives is the
    // one the clients' IO explains better (least-squares windows, the robust spread of
    // their residuals): a server that fell behind needs it; on a server that keeps up it
    // is small, and its measurement's own error (a write in progress, the moment of the
    // socket dump) would only add noise.
    let mut backlog_spread = None;
    if backlog && fine.backlog.is_some() {
        let mut with = fine.clone();
        with.add_backlog();
        let without_spread = noise(fine, &regression::estimate(fine, plain).0);
        let with_spread = noise(&with, &regression::estimate(&with, plain).0);
        if with_spread < without_spread {
            *fine = with;
            coarse.add_backlog();
        }
        backlog_spread = Some([without_spread, with_spread]);
    }
    let backlog_info = BacklogInfo {
        measured: fine.backlog.is_some(),
        used: fine.backlog_added,
        residual_spread: backlog_spread,
        max_bytes: fine.backlog_max,
    };
    // The intake: what the server took in, whatever it holds before writing it. Judged
    // against the counter-based load over the same intervals (the intake's are those in
    // which no server socket closed).
    let mut intake_spread = None;
    if intake != IntakeChoice::Never && fine.intake.is_some() {
        let mut with = fine.clone();
        with.use_intake();
        let mut counter = fine.clone();
        counter.unsure.clone_from(&with.unsure);
        let counter_spread = noise(&counter, &regression::estimate(&counter, plain).0);
        let with_spread = noise(&with, &regression::estimate(&with, plain).0);
        if intake == IntakeChoice::Always || with_spread < counter_spread {
            *fine = with;
            coarse.use_intake();
        }
        intake_spread = Some([counter_spread, with_spread]);
    }
    let intake_info = IntakeInfo {
        measured: fine.intake.is_some(),
        used: fine.intake_used,
        residual_spread: intake_spread,
        closing_intervals: fine.intake_closes.iter().filter(|&&c| c).count(),
        total_bytes: fine.intake.as_ref().map_or(0.0, |i| i.iter().sum()),
    };
    (backlog_info, intake_info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ioshare::series::Column;

    /// Two clients with shares 0.3 and 0.7 over 300 intervals; the server takes in what
    /// they send. `hold`: the server writes in blocks of that many bytes (0: at once).
    fn server(hold: f64) -> Series {
        let n = 300;
        let mut state = 12345u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as f64 / (1u64 << 31) as f64
        };
        let x1: Vec<f64> = (0..n).map(|_| 20_000.0 + 60_000.0 * next()).collect();
        let x2: Vec<f64> = (0..n).map(|_| 10_000.0 + 80_000.0 * next()).collect();
        let intake: Vec<f64> = (0..n).map(|t| 0.3 * x1[t] + 0.7 * x2[t]).collect();
        // The counter: what was taken in, written in whole blocks of `hold` bytes.
        let mut taken = 0.0;
        let mut written = 0.0;
        let mut y = Vec::new();
        for d in &intake {
            taken += d;
            let now = if hold > 0.0 {
                (taken / hold).floor() * hold
            } else {
                taken
            };
            y.push(now - written);
            written = now;
        }
        let col = |pid, x: Vec<f64>| Column {
            pid,
            exe: String::new(),
            comm: String::new(),
            x,
        };
        Series {
            t_end: (1..=n as u64).collect(),
            t_start: (0..n as u64).collect(),
            y,
            columns: vec![col(1, x1), col(2, x2)],
            server: Vec::new(),
            small_bytes: 0.0,
            backlog: Some(vec![0.0; n]),
            backlog_max: 0.0,
            backlog_added: false,
            intake: Some(intake),
            intake_closes: (0..n).map(|t| t % 10 == 3).collect(),
            intake_used: false,
            unsure: vec![false; n],
        }
    }

    fn chosen(hold: f64, how: IntakeChoice) -> (Series, IntakeInfo) {
        let mut fine = server(hold);
        let mut coarse = fine.clone();
        let plain = RegressionOptions {
            bounded: false,
            lag: false,
            robust: false,
            ..Default::default()
        };
        let (_, info) = choose(&mut fine, &mut coarse, true, how, &plain);
        assert_eq!(fine.y, coarse.y);
        (fine, info)
    }

    #[test]
    fn a_server_that_holds_what_it_read_is_regressed_on_its_intake() {
        let (s, info) = chosen(48_000.0, IntakeChoice::Auto);
        assert!(info.used && s.intake_used, "{info:?}");
        let [counter, intake] = info.residual_spread.unwrap();
        assert!(intake < 0.01 * counter, "{counter} {intake}");
        // The intervals with a socket closing are left out of the fits.
        assert_eq!(info.closing_intervals, 30);
        assert!((0..300).all(|t| s.usable(t) == (t % 10 != 3)));
        assert_eq!(Some(&s.y), s.intake.as_ref());
    }

    #[test]
    fn a_server_that_writes_at_once_keeps_its_counter_unless_told() {
        let (s, info) = chosen(0.0, IntakeChoice::Auto);
        assert!(!info.used && !s.intake_used, "{info:?}");
        assert!(s.unsure.iter().all(|u| !u));
        let (s, info) = chosen(0.0, IntakeChoice::Always);
        assert!(info.used && s.intake_used);
        let (s, info) = chosen(48_000.0, IntakeChoice::Never);
        assert!(!info.used && info.residual_spread.is_none() && !s.intake_used);
    }

    #[test]
    fn the_intake_load_adds_the_backlog_change_and_never_the_backlog_twice() {
        let mut s = server(0.0);
        s.backlog = Some(
            (0..300)
                .map(|t| if t % 2 == 0 { 5.0 } else { -5.0 })
                .collect(),
        );
        let want: Vec<f64> = (0..300)
            .map(|t| s.intake.as_ref().unwrap()[t] + s.backlog.as_ref().unwrap()[t])
            .collect();
        s.use_intake();
        assert_eq!(s.y, want);
        s.add_backlog();
        s.use_intake();
        assert_eq!(s.y, want);
    }
}
