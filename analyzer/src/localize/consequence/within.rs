//! Paths **within a process** from its root to a later anomaly of the same process
//! (step 2 of [`super`]'s documentation): the root's connection, its thread's program
//! order for an initializer or a finalizer, the loop a root handler returned to, a
//! connection the process made after the root, a peer that reacted — and, for a call too
//! long, the ways a delay acts through time.

use super::Root;
use crate::hash::FxMap;
use crate::report::{ConnRow, Row};

/// The connections of `first` (each connection's process and first unit's start) that
/// their process **made itself**, others None. A connection the process accepted is its
/// peer's act: a new connection from a peer after the root is not the root's doing
/// unless the peer reacted to it ([`reached`] asks that separately). A connection is
/// taken as accepted when its local address is that of another connection of its process
/// too (the listening address accepted connections share; a connection the process made
/// has a port of its own). A process that accepted a single connection cannot be told
/// from one that made it: that connection counts as made.
pub(super) fn made_by_itself(
    first: &[Option<(usize, i64)>],
    conns: &[ConnRow],
) -> Vec<Option<(usize, i64)>> {
    let mut locals: FxMap<(usize, &str), u32> = FxMap::default();
    for (c, f) in first.iter().enumerate() {
        if let (Some((b, _)), Some((_, Some(l), Some(_)))) = (f, conns.get(c)) {
            *locals.entry((*b, l.as_str())).or_default() += 1;
        }
    }
    first
        .iter()
        .enumerate()
        .map(|(c, f)| {
            let (b, t) = (*f)?;
            let accepted = match conns.get(c) {
                Some((_, Some(l), Some(_))) => locals.get(&(b, l.as_str())).is_some_and(|&n| n > 1),
                _ => false,
            };
            (!accepted).then_some((b, t))
        })
        .collect()
}

/// Can the root of a process, when it is a call too long (`delay`: when the call began
/// and ended, and the root's connection), have caused a later anomaly `r` of the same
/// process at `at`? A delay acts through time: on its own connection (what came after
/// the withheld reply), on what ran while it lasted, and through the peers that waited
/// for it — a later anomaly on a connection whose other end had an anomaly of its own
/// after the delay began (a client that timed out, then closed or resent). A structural
/// anomaly on another connection, after the call returned, from a peer that met nothing,
/// is not the delay's doing: a `write` slowed 40 ms by a loaded machine does not make a
/// later request on another connection arrive short. A root that is not a delay may
/// have caused any later anomaly of its process (`delay` None).
pub(super) fn delay_reached(
    delay: Option<(i64, i64, u32)>,
    r: &Row,
    at: i64,
    conns: &[ConnRow],
    by_addr: &FxMap<(&str, &str), Vec<usize>>,
    roots: &[Option<Root>],
) -> bool {
    let Some((began, ended, conn)) = delay else {
        return true;
    };
    let on_conn = |c: u32| matches!(conns.get(c as usize), Some((_, Some(_), Some(_))));
    (r.conn == conn && on_conn(conn))
        || at <= ended
        || peer_reacted(r.conn, began, at, conns, by_addr, roots)
}

/// Did the other end of connection `conn` have an anomaly (a root) between `from` and
/// `to`?
pub(super) fn peer_reacted(
    conn: u32,
    from: i64,
    to: i64,
    conns: &[ConnRow],
    by_addr: &FxMap<(&str, &str), Vec<usize>>,
    roots: &[Option<Root>],
) -> bool {
    match conns.get(conn as usize) {
        Some((_, Some(l), Some(p))) => by_addr
            .get(&(p.as_str(), l.as_str()))
            .into_iter()
            .flatten()
            .any(|&a| roots[a].is_some_and(|(_, ta)| ta >= from && ta <= to)),
        _ => false,
    }
}

/// A process's root as [`reached`] needs it (None: the process has no root).
pub(super) type RootAt = Option<RootPlace>;

/// Where a process's root is, as [`reached`] needs it.
#[derive(Clone, Copy, Debug)]
pub(super) struct RootPlace {
    /// Its connection.
    pub(super) conn: u32,
    /// Its thread, when program order carries it (an initializer's or finalizer's; None
    /// for a handler or loop unit).
    pub(super) thread: Option<u32>,
    /// When its anomaly happened.
    pub(super) at: i64,
    /// For a handler root, the loop it returned to ([`returned_to`]).
    pub(super) returned_to: Option<Return>,
}

/// Where a handler's outcome went: the thread whose loop called it, from when its
/// anomaly happened to the next unit that thread began.
#[derive(Clone, Copy, Debug)]
pub(super) struct Return {
    tid: u32,
    /// When the handler's anomaly happened.
    at: i64,
    /// When the thread's next handler (or other unit that is not its loop) began after
    /// that; `i64::MAX` if none.
    next: i64,
}

/// The loop a handler unit whose anomaly happened `at` returned to (None for any other
/// kind of unit): a handler runs as a call from its thread's loop, which gets its outcome
/// — the value it returned, the exception it raised — and acts on it before it runs the
/// next handler. What the loop does differently in that gap (logs a failure, reconnects,
/// gives up) is the handler's doing, in program order, whatever connection it is on.
pub(super) fn returned_to(rows: &[Row], root: &Row, at: i64) -> Option<Return> {
    if root.kind != crate::units::UnitKind::Handler {
        return None;
    }
    let next = rows
        .iter()
        .filter(|r| {
            r.tid == root.tid
                && r.kind != crate::units::UnitKind::Loop
                && r.t_start_unix_ns > at
                && r.index != root.index
        })
        .map(|r| r.t_start_unix_ns)
        .min()
        .unwrap_or(i64::MAX);
    Some(Return {
        tid: root.tid,
        at,
        next,
    })
}

/// Is a path seen from a process's root (`root`) to a later anomaly `r` of the same
/// process at `at`? Step 2 of the module's documentation: `r` is on the root's connection
/// or in its thread (program order, from an initializer or a finalizer only), on a connection first seen at or after the root
/// (`first`: each connection's first unit, for the connections the process made:
/// [`made_by_itself`]), or on a
/// connection whose other end had an anomaly between the root and `r` (a peer that
/// reacted). Threads of one process share memory the trace does not see, so this is the
/// part of causality the trace shows; an anomaly with none of these paths is weighed on
/// its own.
pub(super) fn reached(
    root: RootAt,
    r: &Row,
    at: i64,
    first: &[Option<(usize, i64)>],
    conns: &[ConnRow],
    by_addr: &FxMap<(&str, &str), Vec<usize>>,
    roots: &[Option<Root>],
) -> bool {
    let Some(RootPlace {
        conn,
        thread,
        at: t0,
        returned_to,
    }) = root
    else {
        return true;
    };
    let on_conn = |c: u32| matches!(conns.get(c as usize), Some((_, Some(_), Some(_))));
    if (r.conn == conn && on_conn(conn)) || thread == Some(r.tid) {
        return true;
    }
    // The loop that called the root handler, acting on its outcome right after it.
    if let Some(ret) = returned_to {
        let caller = r.kind == crate::units::UnitKind::Loop
            && r.tid == ret.tid
            && r.t_start_unix_ns <= ret.at
            && r.t_end_unix_ns >= ret.at;
        if caller && at >= ret.at && at <= ret.next {
            return true;
        }
    }
    first
        .get(r.conn as usize)
        .copied()
        .flatten()
        .is_some_and(|(_, f)| f >= t0)
        || peer_reacted(r.conn, t0, at, conns, by_addr, roots)
}
