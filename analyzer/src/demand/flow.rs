//! **Where a process's steady request flow starts**: the default training window begins
//! there, not at the recording's start.
//!
//! A recording often begins before the load: a database creates its tables, loads rows
//! and builds its indexes, a server warms up, or nothing happens at all for a while. Those
//! seconds are not the normal the chart should learn: a few statements that keep the
//! process busy for a second each widen σ̂ (and so the control limit) by an order of
//! magnitude, and give a request type a demand that no request of the load has. The
//! steady flow starts after the first interval from which the process completes requests at
//! a rate comparable to its usual one — at least a quarter of the median count of its
//! intervals with requests — for [`RUN`] intervals in a row. The requests counted are
//! those a traced tier's requests sent, where any were (a tier behind another: the set-up
//! script's `CREATE`/`INSERT` statements, 8–25 a second, come as fast as the load's);
//! else every request. Read from the process's own counts; no time is given per system.
//! A process that never keeps such a rate (a tier called now and then) keeps its first
//! interval.

/// Consecutive intervals at the usual rate that start the steady flow.
pub const RUN: usize = 5;

/// Fraction of the median count of the active intervals below which an interval is not
/// part of the steady flow.
pub const SHARE: f64 = 0.25;

/// The first interval of the steady request flow of a process whose requests completed per
/// interval are `counts` (0 when there is none).
pub fn start(counts: &[f64]) -> usize {
    let mut active: Vec<f64> = counts.iter().copied().filter(|&c| c > 0.0).collect();
    if active.is_empty() {
        return 0;
    }
    active.sort_by(f64::total_cmp);
    let median = active[active.len() / 2];
    let floor = (SHARE * median).max(1.0);
    let mut run = 0;
    for (j, &c) in counts.iter().enumerate() {
        if c >= floor {
            run += 1;
            if run == RUN {
                // The flow began somewhere inside its first interval, which also holds
                // whatever came before it: the steady flow's first whole interval is the
                // next one.
                return j + 2 - RUN;
            }
        } else {
            run = 0;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_up_and_idle_seconds_before_the_load_are_left_out() {
        // Two set-up statements, 10 idle seconds, then the load (20 ± 8 a second).
        let mut c = vec![1.0, 2.0];
        c.extend([0.0; 10]);
        c.extend((0..100).map(|j| 20.0 + (j % 5) as f64 * 4.0 - 8.0));
        assert_eq!(start(&c), 13);
        // Set-up seconds right before the load: left out too.
        let mut d = vec![1.0, 3.0, 2.0];
        d.extend(std::iter::repeat_n(20.0, 50));
        assert_eq!(start(&d), 4);
        // A load from the first interval: only that interval left out.
        assert_eq!(start(&[20.0; 30]), 1);
        // A short stall in the first seconds of the load moves the start past it.
        let mut e = vec![20.0, 20.0, 0.0];
        e.extend(std::iter::repeat_n(20.0, 30));
        assert_eq!(start(&e), 4);
        // A tier called now and then, or never: its first interval.
        let sparse: Vec<f64> = (0..60).map(|j| (j % 3 == 0) as u8 as f64).collect();
        assert_eq!(start(&sparse), 0);
        assert_eq!(start(&[0.0; 10]), 0);
    }
}
