//! **An event loop waiting for readiness is not busy.**
//!
//! 003 counts a process busy while one of its served requests is open and not waiting on
//! a child. A thread that serves requests one at a time blocks in the call that waits
//! (a receive on the child's connection), which the count sees. An event loop does not:
//! it hands every descriptor to one readiness wait (`epoll_wait`, `poll`, `select`) and
//! returns to it whenever no connection has anything to do — while one request waits for
//! the rest of a downstream reply, for a connection to complete, or for its client's
//! next bytes. A request of an event loop is in service from the read of its bytes to the
//! write of its reply, but the loop works for it only outside those waits: the process is
//! idle whenever **every** event-loop thread is inside a readiness wait (or not yet, or no
//! longer, running), whatever requests are open.
//!
//! Event-loop threads are told by the byte flow ([`super::transactions`]): a thread that
//! receives a request on one connection while it has another request open and unanswered.
//! Threads that serve one request at a time keep 003's count unchanged (a Python socket
//! with a timeout polls before each receive: that poll is its blocking receive).

/// The readiness waits of one thread, and the span of its events (unix ns).
#[derive(Clone, Debug, Default)]
pub struct ThreadWaits {
    /// First and last event of the thread.
    pub span: (i64, i64),
    /// `[entry, return)` of each readiness wait, in time order.
    pub waits: Vec<(i64, i64)>,
}

/// Is `f` a call that blocks until one of several descriptors is ready?
pub fn is_readiness_wait(f: bufpool::format::LibFn) -> bool {
    use bufpool::format::LibFn::*;
    matches!(
        f,
        Select | Pselect | Poll | Ppoll | EpollWait | EpollPwait | EpollPwait2
    )
}

/// Where a thread is waiting: its waits, and all time outside its span.
fn waiting(t: &ThreadWaits) -> Vec<(i64, i64)> {
    let mut v = vec![(i64::MIN, t.span.0)];
    v.extend(t.waits.iter().copied().filter(|w| w.0 < w.1));
    v.push((t.span.1, i64::MAX));
    v
}

/// Intersection of two sorted lists of disjoint `[a, b)` stretches.
fn intersect(x: &[(i64, i64)], y: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < x.len() && j < y.len() {
        let a = x[i].0.max(y[j].0);
        let b = x[i].1.min(y[j].1);
        if a < b {
            out.push((a, b));
        }
        if x[i].1 < y[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// The stretches (unix ns, sorted, disjoint, finite) in which every thread of `loops` is
/// waiting for readiness or not running, within the span of their events; empty without
/// event-loop threads.
pub fn all_waiting(loops: &[&ThreadWaits]) -> Vec<(i64, i64)> {
    let Some(first) = loops.first() else {
        return Vec::new();
    };
    let mut acc = waiting(first);
    for t in &loops[1..] {
        acc = intersect(&acc, &waiting(t));
    }
    let lo = loops.iter().map(|t| t.span.0).min().unwrap_or(0);
    let hi = loops.iter().map(|t| t.span.1).max().unwrap_or(0);
    acc.into_iter()
        .map(|(a, b)| (a.max(lo), b.min(hi)))
        .filter(|(a, b)| a < b)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_waits_only_where_every_loop_thread_waits() {
        let a = ThreadWaits {
            span: (0, 100),
            waits: vec![(10, 30), (50, 80)],
        };
        let b = ThreadWaits {
            span: (20, 90),
            waits: vec![(25, 60)],
        };
        // a's wait 10..30 counts where b is absent (10..20) or waiting (25..30); after
        // b ends (90), a runs until its own end.
        assert_eq!(all_waiting(&[&a, &b]), vec![(10, 20), (25, 30), (50, 60)]);
        assert_eq!(all_waiting(&[&a]), vec![(10, 30), (50, 80)]);
        assert!(all_waiting(&[]).is_empty());
    }
}
