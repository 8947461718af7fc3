//! **Consequences** filed under their root: a ranking shows the earliest anomaly of a process
//! and, right after it, the units it caused, instead of letting its consequences outrank it.
//!
//! Measured on the fault suite (`bench/localize/`) and on the Python cluster of issue 13:
//! ~100 ms after a connection reset, a daemon reconnects; the units on the new connection
//! have no model (the paper's rule: "no model → 1"), so dozens of units, all later than the
//! root and all caused by it, outrank it; and the peer that saw the connection break, the
//! client whose request failed, score as high as the unit where it broke. So:
//!
//! 1. **Roots.** In each process the root is the earliest unit that was scored against a
//!    model and reached [`ROOT_MIN`] — the first thing the process did that its model calls
//!    abnormal.
//! 2. **Consequences in the process.** A later unit of the same process that reached
//!    [`ROOT_MIN`] too (but not more than [`STRONGER`] above the process's root), or that
//!    has no model (its class never occurred in normal runs) and is on a connection whose
//!    first unit started after the root began (a reconnect, a new client retrying), is a
//!    consequence of the root — when a path from the root to it is seen (`reached`): it
//!    is on the root's connection or, for a root that is an initializer or a finalizer,
//!    in the root's thread (program order: a thread that serves messages in turn — an
//!    event loop, a receive loop — runs other connections' units as other tasks, not as
//!    the root's continuation) — except for the loop that called a root handler, which
//!    acts on what the handler returned or raised before it runs the next one (a client's
//!    loop that logs the failed step: `returned_to`) —, on a connection the process made
//!    after the root (a connection a peer opened is the peer's act — in a server with a
//!    connection per request every request comes on a new one — and counts only through
//!    the next path: `made_by_itself`), or on
//!    a connection whose other end had an anomaly after the root began (a peer that
//!    reacted). An earlier anomaly on another connection, in another thread, with no peer
//!    in between, did not cause it: a rare path at start-up in one worker thread does not
//!    make a reset in another worker's connection its consequence. A root that is a
//!    **call too long** acts through time only: its later anomalies are its consequences
//!    when on its own connection, while the call lasted, or on a connection whose other
//!    end had an anomaly after the call began (a peer that timed out) — not an anomaly on
//!    another connection after the call returned, from a peer that met nothing
//!    (`delay_reached`).
//! 3. **Consequences across processes**, by **happens-before**. An anomaly is filed under
//!    an earlier one only when the earlier one could have reached it: a unit of the later
//!    process on a TCP connection to the earlier one (its peer address is a local address
//!    of the other: the same connection seen from both ends, or the listening address of
//!    the process that accepted it) started — a receive returned: something was sent —
//!    after the earlier root and before the later one; or the later root is on the very
//!    connection whose other end holds the earlier root (it saw that connection fail: a
//!    reset, a close, a reply that never came); or the end that closed a connection is
//!    linked to the end that saw it closed; or the earlier root holds a call too long (a
//!    delay reaches its peers by the reply it withholds: they time out with no message in
//!    between), to the processes at the other end of its connections; or a [`CauseSource`]
//!    (message matching: *this unit received what that unit sent*) says a unit of one
//!    received from a unit of the other; or a **relay** with no root of its own between them
//!    (a router, a proxy, a server between clients) first heard from the earlier after its
//!    root, and the later heard from the relay once from then to its own root
//!    (`relayed`). Processes that merely talk to each other are not linked: chatter before
//!    the anomaly carries nothing of it. A process with no root of
//!    its own born after a root (a respawned worker, a reconnecting client) goes with the
//!    incident of the earliest root before its birth unless linked otherwise. The
//!    incident whose root is earlier takes the other: its root, and everything under it,
//!    becomes a consequence of the earlier root. A process with no root of its own files
//!    its anomalous and unmodelled units under the incident of the process at the other end
//!    of their connection, if that one's root began before them (the peer that reconnects
//!    after the root broke their connection), and so are its units scoring at least
//!    [`TOLD_MIN`] on a connection to that incident after its root (a backend told of a
//!    timeout by the proxy closing its connection).
//! 4. **Which root comes first.** Between two linked incidents the earlier root comes first,
//!    with two exceptions. *Who closed first*: what one end of a connection saw — end of
//!    stream, a reset, a broken pipe ([`CloseRole::Observed`]) — was done by the other end
//!    ([`CloseRole::Acted`]: a `close`/`shutdown` never seen in
//!    normal runs), so the acting end's incident comes first whenever its act may have
//!    begun before the observation — however the two reactions' stamps fall (the end woken
//!    by the close often runs before the closing call returns). *Clearly stronger*: a later
//!    root more than [`STRONGER`] above the earlier one takes it, as within a process (an
//!    earlier, weak root — a never-seen call in a class learned from three units — is more
//!    likely noise than the cause of a call that no normal unit came near); a process's
//!    later anomalies are then filed under the incident's root when within [`STRONGER`] of
//!    it. Both compare what each unit shows on its own (`strength`: the score without what
//!    a persistent run of [`crate::weigh`] added, the row's shared `run_added`): a client that
//!    reconnects every 20 ms after the reset it was told of makes a run of units that each
//!    show "never in 1 080 normal units", but repeating a reaction is not evidence of a
//!    cause of its own — the run's first unit, and its members, are as strong as that unit
//!    alone.
//!
//! A consequence ranks right after its root — its score becomes the root's times
//! [`CONSEQUENCE_FACTOR`] — and names it (`caused_by`). The root keeps its own score: an
//! incident ranks by the evidence of the unit where it began.

use crate::hash::FxMap;
use crate::report::{ConnRow, Row, RowExtra, RowRef, SharedScore};
use crate::score::Verdict;
use crate::symbolize::key_lib;
use crate::trees::{NodeKey, NodeKind, Outcome};
use bufpool::format::LibFn;
use within::{delay_reached, reached, returned_to, RootAt, RootPlace};

mod within;

/// The least score of a root (an anomaly that can have consequences).
pub const ROOT_MIN: f64 = 0.65;

/// A later anomaly whose `strength` is more than its own process's root's plus this is not
/// filed under that root's incident: an anomaly clearly stronger than its process's first
/// one has evidence of its own (a process whose first anomaly is noise — a rare
/// initialization learned from three runs — must not hide the fault that comes later).
pub const STRONGER: f64 = 0.1;

/// The least score of a unit of a process with no root of its own that is filed under an
/// incident at the other end of its connection (step 3 of the module's documentation).
pub const TOLD_MIN: f64 = 0.5;

/// A consequence ranks right after its root: its score is the root's times this.
pub const CONSEQUENCE_FACTOR: f64 = 0.999_999;

/// A process's root: the index of its row, and when its anomaly happened (ns).
type Root = (u32, i64);

/// A unit, as a [`CauseSource`] names it: host, pid, thread and index (its id's parts).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UnitRef {
    /// Host.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Index of the unit in its thread.
    pub index: u32,
}

/// Cross-process causes: which units sent what a unit received. Implemented by message
/// matching (send → receive, byte-level) when it is available; the consequence step works
/// without it, from what one process's trace tells.
pub trait CauseSource: Send + Sync {
    /// The units that sent what `unit` received (any order; unknown units are ignored).
    fn received_from(&self, unit: &UnitRef) -> Vec<UnitRef>;
}

/// Files consequences under their roots (see the module's documentation): changes the
/// scores of the consequences in `blocks` (one vector of rows per process, whose process
/// is `procs[row.proc_]`; `conns` are the connections the rows refer to), adding the
/// shared scores they now use to `shared`, and returns each consequence's root.
pub(crate) fn file_consequences(
    blocks: &mut [Vec<Row>],
    shared: &mut Vec<SharedScore>,
    extras: &FxMap<RowRef, RowExtra>,
    procs: &[(String, u32)],
    conns: &[ConnRow],
    causes: Option<&dyn CauseSource>,
) -> FxMap<RowRef, RowRef> {
    let verdict = |r: &Row, shared: &[SharedScore]| shared[r.shared as usize].verdict;
    let anomaly = |r: &Row, shared: &[SharedScore]| {
        r.score >= ROOT_MIN && verdict(r, shared) == Verdict::Scored
    };
    // When a unit's anomaly happened: a handler's when the message it handles arrived (its
    // start: whatever it did differently was a reaction to it) — unless it waited again
    // before its first call never seen in normal runs (a client's handler sends the next
    // request and waits for the reply with a timeout: what it did differently was a
    // reaction to that wait, not to the message it began with); another unit's (a loop, an
    // initializer or finalizer that may span the whole run) and such a handler's when its
    // first call never seen in normal runs was made, else (only calls missing, which tells
    // at its end) its end. A unit with a call too long ([`crate::durations`]): when that
    // call began — the delayed call is what made its peers wait and time out, whatever
    // they did then.
    let when = |b: usize, i: usize, r: &Row| {
        let x = (r.flags & Row::EXTRA != 0)
            .then(|| extras.get(&(b as u32, i as u32)))
            .flatten();
        // A send of a size never sent there ([`crate::sizes`]): when its node was first
        // called in the unit, as a call never seen.
        let slow = [
            x.and_then(|x| x.slow.as_ref()).map(|s| s.began_ns),
            x.and_then(|x| x.odd.as_ref()).map(|o| o.at_ns),
        ]
        .into_iter()
        .flatten()
        .min();
        if r.kind == crate::units::UnitKind::Handler && !x.is_some_and(|x| x.waited) {
            // Calls a handler unit holds may precede the receive its span starts at (a
            // client's step that raised before it sent anything): never later than them.
            let start = x
                .and_then(|x| x.anomaly_ns)
                .map_or(r.t_start_unix_ns, |a| a.min(r.t_start_unix_ns));
            return slow.map_or(start, |s| s.min(start));
        }
        let t = x.and_then(|x| x.anomaly_ns).unwrap_or(r.t_end_unix_ns);
        slow.map_or(t, |s| s.min(t))
    };
    // 1. Each process's own root: (row, when).
    let roots: Vec<Option<Root>> = blocks
        .iter()
        .enumerate()
        .map(|(b, rows)| {
            rows.iter()
                .enumerate()
                .filter(|(_, r)| anomaly(r, shared))
                .map(|(i, r)| (when(b, i, r), i))
                .min()
                .map(|(t, i)| (i as u32, t))
        })
        .collect();
    let mut caused_by: FxMap<RowRef, RowRef> = FxMap::default();
    if roots.iter().all(Option::is_none) {
        return caused_by;
    }
    // When each connection was first seen (its first unit's start); connections are per
    // process, so this also tells the process each belongs to.
    let mut first: Vec<Option<(usize, i64)>> = vec![None; conns.len()];
    for (b, rows) in blocks.iter().enumerate() {
        for r in rows {
            if let Some(f) = first.get_mut(r.conn as usize) {
                match f {
                    Some((_, t)) => *t = (*t).min(r.t_start_unix_ns),
                    None => *f = Some((b, r.t_start_unix_ns)),
                }
            }
        }
    }
    // When each class of unmodelled units (connection, thread, kind) first occurred.
    let mut first_class: FxMap<(u32, u8, u8), i64> = FxMap::default();
    for rows in blocks.iter() {
        for r in rows {
            if verdict(r, shared) == Verdict::NoUnitModel {
                let t = first_class.entry(class_key(r)).or_insert(r.t_start_unix_ns);
                *t = (*t).min(r.t_start_unix_ns);
            }
        }
    }
    // The processes with a root, by the addresses of their connections.
    let mut by_addr: FxMap<(&str, &str), Vec<usize>> = FxMap::default();
    for (c, f) in first.iter().enumerate() {
        if let (Some((b, _)), (_, Some(l), Some(p))) = (f, &conns[c]) {
            if roots[*b].is_some() {
                by_addr
                    .entry((l.as_str(), p.as_str()))
                    .or_default()
                    .push(*b);
            }
        }
    }
    // The processes with a root, by the local addresses of their connections: a
    // connection's peer address is the local address of the process at its other end
    // (the listening address of the one that accepted it), even where the other end's own
    // record of the connection is missing or its ports were not recorded alike.
    let mut by_local: FxMap<&str, Vec<usize>> = FxMap::default();
    for ((l, _), v) in &by_addr {
        by_local.entry(l).or_default().extend(v);
    }
    // A root that saw its peer close the connection dates no earlier than the peer's act
    // that closed it (step 3 of the module's documentation: who closed first).
    let (roots, closed) = date_by_closes(blocks, shared, extras, conns, &by_local, procs, roots);
    // 2. Happens-before: (process with a root, process it reached after its root). A
    // handler unit starts when a receive returns, so a unit of `b` on a connection whose
    // other end is in `a` is something `a` sent that reached `b` then: `a`'s anomaly may
    // have caused `b`'s only if such a unit falls between `a`'s root and `b`'s (or, for a
    // process with no root, after `a`'s root). Processes merely connected to each other
    // are not linked: chatter before the anomaly carries nothing of it.
    let mut links: Vec<(usize, usize)> = happened_before(blocks, conns, &by_local, &roots);
    // A call too long reaches its peers by what it withholds: a reply that does not come
    // makes them time out with no message in between. A root holding one is linked to
    // the processes at the other end of any of its process's connections, when their
    // anomalies came after it began — and, like the end that closed a connection, it
    // comes first: the timeout it caused is louder (an exception, a reconnection) than
    // the delay, never stronger evidence of its own.
    let mut withheld: Vec<(usize, usize)> = Vec::new();
    for (c, f) in first.iter().enumerate() {
        if let (Some((b, _)), (_, Some(_), Some(p))) = (f, &conns[c]) {
            for &a in by_local.get(p.as_str()).into_iter().flatten() {
                let Some((ri, ta)) = roots[a] else { continue };
                let slow = (blocks[a][ri as usize].flags & Row::EXTRA != 0)
                    && extras
                        .get(&(a as u32, ri))
                        .is_some_and(|x| x.slow.is_some());
                if a != *b && slow && roots[*b].is_none_or(|(_, tb)| ta <= tb) {
                    withheld.push((a, *b));
                }
            }
        }
    }
    withheld.sort_unstable();
    withheld.dedup();
    links.extend(withheld.iter().copied());
    // The end that closed a connection reached the end that saw it fail.
    links.extend(closed.iter().copied());
    // A process with no root of its own born after a root (a respawned worker, a
    // reconnecting client) did not cause it: it goes with the incident of the earliest
    // root before its birth, unless a message links it to one.
    let births: Vec<Option<i64>> = blocks
        .iter()
        .map(|rows| rows.iter().map(|r| r.t_start_unix_ns).min())
        .collect();
    let earliest = (0..blocks.len())
        .filter_map(|a| roots[a].map(|(_, t)| (t, a)))
        .min();
    if let Some((t0, a)) = earliest {
        for (b, birth) in births.iter().enumerate() {
            let unlinked = roots[b].is_none() && !links.iter().any(|l| l.1 == b);
            if b != a && unlinked && birth.is_some_and(|t| t > t0) {
                links.push((a, b));
            }
        }
    }
    if let Some(src) = causes {
        let mut by_ref: FxMap<UnitRef, usize> = FxMap::default();
        for (b, rows) in blocks.iter().enumerate() {
            if roots[b].is_some() {
                for r in rows {
                    by_ref.insert(unit_ref(procs, r), b);
                }
            }
        }
        for (b, rows) in blocks.iter().enumerate() {
            for r in rows {
                if anomaly(r, shared) || verdict(r, shared) == Verdict::NoUnitModel {
                    for from in src.received_from(&unit_ref(procs, r)) {
                        if let Some(&a) = by_ref.get(&from) {
                            if a != b {
                                links.push((a, b));
                            }
                        }
                    }
                }
            }
        }
    }
    links.extend(relayed(blocks, conns, &first, &by_local, &roots));
    links.sort_unstable();
    links.dedup();
    // 3. Incidents: processes with roots that talk to each other are one, rooted at the
    // earliest root (ties: the lower process index); a process without a root goes with
    // the incident of the earliest root it talks to. Two exceptions: the end that closed
    // a connection comes before the end that saw it closed ([`date_by_closes`]), and a
    // later root clearly stronger than the earlier one ([`STRONGER`]) is not taken by it
    // but takes it — as in a process, an anomaly clearly stronger than the first one
    // has evidence of its own, and the weaker, earlier one is more likely noise (a rare
    // class learned from three units) than its cause.
    let t_root = |b: usize| roots[b].map(|r| (r.1, b));
    let score_of =
        |b: usize| roots[b].map_or(0.0, |(i, _)| strength(&blocks[b][i as usize], shared));
    // Does incident `ra` (met through process `a`) come before incident `rb` (through `b`)?
    let before = |a: usize, ra: usize, b: usize, rb: usize| {
        if closed.contains(&(a, b)) || withheld.binary_search(&(a, b)).is_ok() {
            return true;
        }
        if closed.contains(&(b, a)) || withheld.binary_search(&(b, a)).is_ok() {
            return false;
        }
        let (early, late) = if t_root(ra) <= t_root(rb) {
            (ra, rb)
        } else {
            (rb, ra)
        };
        let first = if score_of(late) > score_of(early) + STRONGER {
            late
        } else {
            early
        };
        first == ra
    };
    let mut parent: Vec<usize> = (0..blocks.len()).collect();
    fn find(parent: &mut [usize], mut b: usize) -> usize {
        while parent[b] != b {
            parent[b] = parent[parent[b]];
            b = parent[b];
        }
        b
    }
    for &(a, b) in &links {
        if roots[b].is_none() {
            continue;
        }
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        if ra != rb {
            if before(a, ra, b, rb) {
                parent[rb] = ra;
            } else {
                parent[ra] = rb;
            }
        }
    }
    let mut top: Vec<Option<usize>> = (0..blocks.len())
        .map(|b| roots[b].is_some().then(|| find(&mut parent, b)))
        .collect();
    for &(a, b) in &links {
        if roots[b].is_none() {
            let ta = find(&mut parent, a);
            if top[b].is_none_or(|tb| t_root(ta) < t_root(tb)) {
                top[b] = Some(ta);
            }
        }
    }
    // The incident of each process with a root.
    let incident: Vec<Option<usize>> = (0..blocks.len())
        .map(|b| roots[b].is_some().then(|| find(&mut parent, b)))
        .collect();
    // 4. What each incident's root caused in each process: the later anomalies, and the
    // unmodelled units on connections first seen after it.
    let root_score: Vec<f64> = roots
        .iter()
        .enumerate()
        .map(|(b, r)| r.map_or(0.0, |(i, _)| blocks[b][i as usize].score))
        .collect();
    // How strong each root's evidence is, for [`STRONGER`] ([`strength`]).
    let root_strength: Vec<f64> = roots
        .iter()
        .enumerate()
        .map(|(b, r)| r.map_or(0.0, |(i, _)| strength(&blocks[b][i as usize], shared)))
        .collect();
    // Each root that holds a call too long: when the call began and ended, and the root's
    // connection.
    let delays: Vec<Option<(i64, i64, u32)>> = roots
        .iter()
        .enumerate()
        .map(|(b, r)| {
            let (i, _) = (*r)?;
            let row = &blocks[b][i as usize];
            let x = (row.flags & Row::EXTRA != 0)
                .then(|| extras.get(&(b as u32, i)))
                .flatten()?;
            let s = x.slow.as_ref()?;
            Some((s.began_ns, s.began_ns + s.dur_ns as i64, row.conn))
        })
        .collect();
    // Where each root is: its connection, the thread whose program order carries it, and
    // when it happened. A handler or loop unit's thread serves messages in turn (an event
    // loop, a receive loop): the units it runs later for other connections are other
    // tasks, not the root's continuation, so program order carries only an initializer's
    // or a finalizer's anomaly (what a thread set up or tore down affects all it does).
    let root_at: Vec<RootAt> = roots
        .iter()
        .enumerate()
        .map(|(b, r)| {
            r.map(|(i, t)| {
                let row = &blocks[b][i as usize];
                let serves = matches!(
                    row.kind,
                    crate::units::UnitKind::Handler | crate::units::UnitKind::Loop
                );
                RootPlace {
                    conn: row.conn,
                    thread: (!serves).then_some(row.tid),
                    at: t,
                    returned_to: returned_to(&blocks[b], row, t),
                }
            })
        })
        .collect();
    // The connections each process made itself ([`within::made_by_itself`]).
    let first_made = within::made_by_itself(&first, conns);
    // (shared score, consequence score) → the shared score of such consequences.
    let mut demoted: FxMap<(u32, u64), u32> = FxMap::default();
    for (b, rows) in blocks.iter_mut().enumerate() {
        let Some(t) = top[b] else { continue };
        let Some((root_i, t0)) = roots[t] else {
            continue;
        };
        let root = (t as u32, root_i);
        // Right after the root: lower for an unmodelled unit (1), higher for a weaker
        // anomaly it caused — either way next to it.
        let score = root_score[t] * CONSEQUENCE_FACTOR;
        for (i, r) in rows.iter_mut().enumerate() {
            if (b as u32, i as u32) == root {
                continue;
            }
            let v = shared[r.shared as usize].verdict;
            let at = when(b, i, r);
            let later_anomaly = r.score >= ROOT_MIN
                && roots[b].is_none_or(|_| {
                    strength(r, shared) <= root_strength[b].max(root_strength[t]) + STRONGER
                })
                && v == Verdict::Scored
                && at >= t0
                && (b != t
                    || (delay_reached(delays[t], r, at, conns, &by_addr, &roots)
                        && reached(root_at[t], r, at, &first_made, conns, &by_addr, &roots)));
            let new_class = (v == Verdict::NoUnitModel
                && r.t_start_unix_ns >= t0
                && first_class.get(&class_key(r)).is_some_and(|&f| f >= t0))
                // A process that matches no group, born after the root.
                || (v == Verdict::NoProcessGroup && births[b].is_some_and(|t| t >= t0));
            // In a process with no anomaly of its own: a weaker one, after the root, on a
            // connection whose other end is in the incident (a peer told of what the root
            // did: a timed-out backend seeing its connection closed).
            let told = roots[b].is_none()
                && v == Verdict::Scored
                && r.score >= TOLD_MIN
                && r.t_start_unix_ns >= t0
                && match &conns[r.conn as usize] {
                    (_, Some(l), Some(p)) => by_addr
                        .get(&(p.as_str(), l.as_str()))
                        .into_iter()
                        .flatten()
                        .any(|&a| incident[a] == Some(t)),
                    _ => false,
                };
            if !(later_anomaly || new_class || told) {
                continue;
            }
            let k = (r.shared, score.to_bits());
            let s = *demoted.entry(k).or_insert_with(|| {
                let mut s = shared[r.shared as usize].clone();
                s.score = score;
                shared.push(s);
                shared.len() as u32 - 1
            });
            r.score = score;
            r.shared = s;
            caused_by.insert((b as u32, i as u32), root);
        }
    }
    caused_by
}

/// How strong a unit's evidence is, as [`STRONGER`] compares it: its score without what a
/// persistent run added ([`SharedScore::run_added`]). A client that reconnects every 20 ms after
/// the reset it was told of makes a run of units that each show "never in 1 080 normal
/// units"; the run raises its first unit to `0.8 · run + 0.2 · own` (0.84 → 0.97), but
/// repeating a reaction is not evidence of a cause of its own: the first unit and the
/// run's members weigh as that unit alone, against the reset (0.84) that began it all.
pub(crate) fn strength(r: &Row, shared: &[SharedScore]) -> f64 {
    r.score - shared[r.shared as usize].run_added
}

/// Links through a **relay**: a process with no root of its own between two that have
/// one (a proxy, a router, a broker, a server between clients). The relay `m` first heard
/// from `a` after `a`'s root at `told` (its first unit on a connection to `a` that was
/// still running then); `b` is linked to `a` when, from `told` to `b`'s root, `b` heard
/// from `m` once — a single unit of `b` on a connection to `m` began before its root and
/// ended after `told` (the root itself aside): what `m` passed on right after it heard
/// from `a` is what `b` reacted to. The client whose request failed behind the router
/// right after the worker behind the router failed is linked to the worker; a client that
/// went on talking to the router many times between the two is not — what it reacted to
/// came later than what the relay heard.
fn relayed(
    blocks: &[Vec<Row>],
    conns: &[ConnRow],
    first: &[Option<(usize, i64)>],
    by_local: &FxMap<&str, Vec<usize>>,
    roots: &[Option<Root>],
) -> Vec<(usize, usize)> {
    let peer = |r: &Row| match conns.get(r.conn as usize) {
        Some((_, _, Some(p))) => Some(p.as_str()),
        _ => None,
    };
    // When each process with no root first heard from a root after it, and from which.
    let mut told: Vec<Option<(i64, usize)>> = vec![None; blocks.len()];
    for (m, rows) in blocks.iter().enumerate() {
        if roots[m].is_some() {
            continue;
        }
        for r in rows {
            let Some(p) = peer(r) else { continue };
            for &a in by_local.get(p).into_iter().flatten() {
                let Some((_, ta)) = roots[a] else { continue };
                let t = r.t_start_unix_ns.max(ta);
                if a != m && r.t_end_unix_ns >= ta && told[m].is_none_or(|x| (t, a) < x) {
                    told[m] = Some((t, a));
                }
            }
        }
    }
    // The relays by the local addresses of their connections.
    let mut relays: FxMap<&str, Vec<usize>> = FxMap::default();
    for (c, f) in first.iter().enumerate() {
        if let (Some((m, _)), (_, Some(l), _)) = (f, &conns[c]) {
            if told[*m].is_some() && !relays.get(l.as_str()).is_some_and(|v| v.contains(m)) {
                relays.entry(l.as_str()).or_default().push(*m);
            }
        }
    }
    let mut out = Vec::new();
    if relays.is_empty() {
        return out;
    }
    for (b, rows) in blocks.iter().enumerate() {
        let Some((root_i, tb)) = roots[b] else {
            continue;
        };
        // Per relay: the units of `b` that heard from it between its `told` and `b`'s root.
        let mut heard: FxMap<usize, u32> = FxMap::default();
        for (i, r) in rows.iter().enumerate() {
            if i as u32 == root_i || r.t_start_unix_ns > tb {
                continue;
            }
            let Some(p) = peer(r) else { continue };
            for &m in relays.get(p).into_iter().flatten() {
                if let Some((t, _)) = told[m] {
                    if m != b && r.t_end_unix_ns >= t {
                        *heard.entry(m).or_default() += 1;
                    }
                }
            }
        }
        // The root itself on a connection to the relay, after it was told, is what it
        // heard when no other unit did.
        let on_root = peer(&rows[root_i as usize]);
        for &m in on_root.and_then(|p| relays.get(p)).into_iter().flatten() {
            if told[m].is_some_and(|(t, _)| rows[root_i as usize].t_end_unix_ns >= t) {
                heard.entry(m).or_insert(1);
            }
        }
        for (m, n) in heard {
            if let Some((_, a)) = told[m] {
                if n == 1 && a != b {
                    out.push((a, b));
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The happens-before links of step 2 of [`file_consequences`]: (a, b) when a unit of
/// `b` on a connection whose peer address is a local address of `a` (something `a` sent,
/// received by `b`) started at or after `a`'s root and at or before `b`'s root (any time
/// after `a`'s root when `b` has none); or when `b`'s root is on the very connection whose
/// other end holds `a`'s earlier root (`b` saw that connection fail: a reset, a close, a
/// reply that never came). Sorted, without repeats.
fn happened_before(
    blocks: &[Vec<Row>],
    conns: &[ConnRow],
    by_local: &FxMap<&str, Vec<usize>>,
    roots: &[Option<Root>],
) -> Vec<(usize, usize)> {
    let mut links: crate::hash::FxSet<(usize, usize)> = Default::default();
    // The processes with a root at the other end of each connection (looked up once per
    // connection, not per unit), and the earliest of their roots.
    let ends: Vec<(&[usize], i64)> = conns
        .iter()
        .map(|c| match c {
            (_, Some(_), Some(p)) => {
                let v = by_local.get(p.as_str()).map_or(&[][..], |v| &v[..]);
                let t = v.iter().filter_map(|&a| roots[a].map(|r| r.1)).min();
                (v, t.unwrap_or(i64::MAX))
            }
            _ => (&[][..], i64::MAX),
        })
        .collect();
    for (b, rows) in blocks.iter().enumerate() {
        let until = roots[b].map_or(i64::MAX, |(_, t)| t);
        for r in rows {
            let Some(&(procs, earliest)) = ends.get(r.conn as usize) else {
                continue;
            };
            if r.t_start_unix_ns > until || r.t_start_unix_ns < earliest {
                continue;
            }
            for &a in procs {
                if a != b && roots[a].is_some_and(|(_, t)| t <= r.t_start_unix_ns) {
                    links.insert((a, b));
                }
            }
        }
    }
    // The very connection: both roots on its two ends.
    let ends: Vec<Option<(&str, &str, i64)>> = (0..blocks.len())
        .map(|b| {
            let (i, t) = roots[b]?;
            match conns.get(blocks[b][i as usize].conn as usize) {
                Some((_, Some(l), Some(p))) => Some((l.as_str(), p.as_str(), t)),
                _ => None,
            }
        })
        .collect();
    for (a, ea) in ends.iter().enumerate() {
        let Some((la, pa, ta)) = ea else { continue };
        for (b, eb) in ends.iter().enumerate() {
            if let Some((lb, pb, tb)) = eb {
                if a != b && la == pb && pa == lb && ta <= tb {
                    links.insert((a, b));
                }
            }
        }
    }
    let mut v: Vec<_> = links.into_iter().collect();
    v.sort_unstable();
    v
}

/// Did a wait of `tree` — a multiplexer call — return at or before `tsc` (the time of its
/// first call never seen in normal runs)? Nodes keep their first call's time, so the
/// earliest wait of each place counts.
pub fn waited_by(tree: &crate::trees::CallTree, tsc: u64) -> bool {
    tree.nodes.values().any(|n| {
        n.key.kind == NodeKind::Lib
            && n.first_tsc <= tsc
            && LibFn::from_id(n.key.callee).is_some_and(LibFn::is_multiplexer)
    })
}

/// What a unit's first anomaly did to its connection, as far as the unit tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CloseRole {
    /// It acted: its first call never seen in normal runs closed or shut down a
    /// descriptor. (The trace's records of faults the tracer injected are not read: a real
    /// fault leaves none, and a ranking that used them would be judged on what it was told.)
    Acted,
    /// It saw its peer close the connection: its first call never seen in normal runs was
    /// a receive that reached end of stream, or a call that failed with `ECONNRESET` or
    /// `EPIPE` — what one end of a connection sees when the *other* end closed it.
    Observed,
}

/// The [`CloseRole`] of a unit whose first call never seen in normal runs has key
/// `first_new`.
pub fn close_role(first_new: Option<NodeKey>) -> Option<CloseRole> {
    let k = first_new.filter(|k| k.kind == NodeKind::Lib)?;
    if k.callee == key_lib(LibFn::Close) || k.callee == key_lib(LibFn::Shutdown) {
        return Some(CloseRole::Acted);
    }
    // Linux errno values: ECONNRESET 104, EPIPE 32.
    matches!(k.outcome, Outcome::Eof | Outcome::Errno(104 | 32)).then_some(CloseRole::Observed)
}

/// **Who closed first.** When a connection breaks both ends react, and which reaction the
/// trace dates first is a race of microseconds (the peer woken by the close may run before
/// the closing call returns and is recorded). What one end *saw* — end of stream, a reset,
/// a broken pipe — was caused by the other end's *act* on the connection; so a process's
/// root that is such an observation ([`CloseRole::Observed`]) dates the root of the
/// process at the other end just before it, when that process holds an anomaly that acted
/// ([`CloseRole::Acted`]) on a connection to it and could have begun before the
/// observation: the act's call began after its thread's previous unit ended (the bound the
/// trace gives, whatever its own stamps say), and that bound precedes the observation.
/// On one host, whose processes share one clock, the act's own call bounds it better: it
/// was entered no earlier than its return minus the longest such call of the unit, and an
/// act entered after the observing call returned did not cause what it saw (a peer that
/// closes its end after being told of the break, not the end that broke it).
/// Returns the roots, re-dated, and the pairs (process that acted, process that saw it).
fn date_by_closes(
    blocks: &[Vec<Row>],
    shared: &[SharedScore],
    extras: &FxMap<RowRef, RowExtra>,
    conns: &[ConnRow],
    by_local: &FxMap<&str, Vec<usize>>,
    procs: &[(String, u32)],
    mut roots: Vec<Option<Root>>,
) -> (Vec<Option<Root>>, Vec<(usize, usize)>) {
    let host = |b: usize| {
        blocks[b]
            .first()
            .and_then(|r| procs.get(r.proc_ as usize))
            .map(|p| p.0.as_str())
    };
    let role = |b: usize, i: usize| {
        (blocks[b][i].flags & Row::EXTRA != 0)
            .then(|| extras.get(&(b as u32, i as u32)))
            .flatten()
            .and_then(|x| x.close)
    };
    // Per process: when its root saw its peer close, and the processes at the other end
    // of the root's connection (when it has one).
    let observed: Vec<Option<(i64, &[usize])>> = roots
        .iter()
        .enumerate()
        .map(|(b, r)| {
            let (i, t) = (*r)?;
            let peers = match &conns[blocks[b][i as usize].conn as usize] {
                (_, Some(_), Some(p)) => by_local.get(p.as_str()).map_or(&[][..], |v| &v[..]),
                _ => &[],
            };
            (role(b, i as usize) == Some(CloseRole::Observed)).then_some((t, peers))
        })
        .collect();
    let mut closed = Vec::new();
    if observed.iter().all(Option::is_none) {
        return (roots, closed);
    }
    for (y, rows) in blocks.iter().enumerate() {
        if roots[y].is_none() {
            continue;
        }
        for (i, r) in rows.iter().enumerate() {
            let acted = r.flags & Row::EXTRA != 0
                && role(y, i) == Some(CloseRole::Acted)
                && r.score >= ROOT_MIN
                && shared[r.shared as usize].verdict == Verdict::Scored;
            if !acted {
                continue;
            }
            // The processes at the other end of the act's connection; for an act on no
            // connection (a fault injected in a unit that spans many: a loop, a
            // finalizer), those whose observation was on a connection to this process.
            let peers: &[usize] = match &conns[r.conn as usize] {
                (_, Some(_), Some(p)) => by_local.get(p.as_str()).map_or(&[][..], |v| &v[..]),
                _ => &[],
            };
            // When the act's call was entered, at the earliest (its clock is its host's).
            let entered = extras
                .get(&(y as u32, i as u32))
                .and_then(|x| Some(x.anomaly_ns? - x.anomaly_dur_ns as i64));
            let seen: Vec<(i64, usize)> = (0..blocks.len())
                .filter(|&x| x != y)
                .filter_map(|x| {
                    let (t, theirs) = observed[x]?;
                    if entered.is_some_and(|e| e > t) && host(x).is_some() && host(x) == host(y) {
                        return None;
                    }
                    let linked = if peers.is_empty() {
                        theirs.contains(&y)
                    } else {
                        peers.contains(&x)
                    };
                    linked.then_some((t, x))
                })
                .collect();
            let Some(&(latest, _)) = seen.iter().max() else {
                continue;
            };
            // The act began after the previous unit of its thread began: a unit starts
            // at a call's return (a receive, a multiplexer's), so the act's call was entered
            // after it (acts are few: looked up only for one that may explain an
            // observation).
            let began = rows
                .iter()
                .filter(|p| p.tid == r.tid && p.index < r.index)
                .max_by_key(|p| p.index)
                .map_or(r.t_start_unix_ns, |p| {
                    p.t_start_unix_ns.min(r.t_start_unix_ns)
                });
            if began > latest {
                continue;
            }
            // The observations it may have caused.
            for (t_x, x) in seen.into_iter().filter(|&(t, _)| began <= t) {
                if let Some((_, t_y)) = &mut roots[y] {
                    *t_y = (*t_y).min(t_x - 1);
                }
                closed.push((y, x));
            }
        }
    }
    closed.sort_unstable();
    closed.dedup();
    (roots, closed)
}

/// The class of an unmodelled unit, as far as rows tell: connection, main thread or not,
/// kind.
fn class_key(r: &Row) -> (u32, u8, u8) {
    (r.conn, r.flags & Row::MAIN_THREAD, r.kind as u8)
}

/// The wall-clock time of a call a unit holds that may have been made before the unit's
/// span begins (a handler unit opens when a receive returns; what its thread did before
/// that, since the previous unit, is in its tree too): extrapolated from the unit's own
/// rate of TSC ticks to nanoseconds below its start, interpolated inside it
/// ([`tsc_to_ns`]).
pub(crate) fn tsc_at(tsc: u64, h: &crate::units::UnitHead) -> i64 {
    let span = h.tsc_end.saturating_sub(h.tsc_start);
    if tsc >= h.tsc_start || span == 0 {
        return tsc_to_ns(tsc, h);
    }
    let per_tick = (h.t_end_unix_ns - h.t_start_unix_ns) as f64 / span as f64;
    h.t_start_unix_ns - ((h.tsc_start - tsc) as f64 * per_tick) as i64
}

/// The wall-clock time of a TSC inside a unit (interpolated between its start and end).
pub(crate) fn tsc_to_ns(tsc: u64, h: &crate::units::UnitHead) -> i64 {
    let span = h.tsc_end.saturating_sub(h.tsc_start);
    if span == 0 {
        return h.t_start_unix_ns;
    }
    let f = (tsc.saturating_sub(h.tsc_start) as f64 / span as f64).clamp(0.0, 1.0);
    h.t_start_unix_ns + (f * (h.t_end_unix_ns - h.t_start_unix_ns) as f64) as i64
}

fn unit_ref(procs: &[(String, u32)], r: &Row) -> UnitRef {
    let (host, pid) = &procs[r.proc_ as usize];
    UnitRef {
        host: host.clone(),
        pid: *pid,
        tid: r.tid,
        index: r.index,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::UnitKind;

    fn row(proc_: u32, index: u32, t: i64, conn: u32, score: f64, shared: u32) -> Row {
        Row {
            score,
            t_start_unix_ns: t,
            t_end_unix_ns: t + 1,
            tsc_start: 0,
            tsc_end: 0,
            proc_,
            conn,
            tid: 1,
            index,
            shared,
            fd: 0,
            kind: UnitKind::Handler,
            flags: 0,
            incident: 0,
        }
    }

    fn shared(score: f64, verdict: Verdict) -> SharedScore {
        SharedScore {
            score,
            verdict,
            effective: Box::new([]),
            model_units: 0,
            run_added: 0.0,
        }
    }

    fn conns() -> Vec<ConnRow> {
        let c = |l: &str, p: &str| (Default::default(), Some(l.to_string()), Some(p.to_string()));
        vec![
            (Default::default(), None, None),
            c("a:1", "b:2"),
            c("a:1", "b:3"),
            // Made by the process (a port of its own), where 1–2 and 5 were accepted on
            // its listening address.
            c("a:9", "b:4"),
            // The other end of connection 1.
            c("b:2", "a:1"),
            c("a:1", "b:5"),
        ]
    }

    /// `file_consequences` with no row extras and the test connections.
    fn file(
        blocks: &mut [Vec<Row>],
        sh: &mut Vec<SharedScore>,
        procs: &[(String, u32)],
        causes: Option<&dyn CauseSource>,
    ) -> FxMap<RowRef, RowRef> {
        file_consequences(blocks, sh, &FxMap::default(), procs, &conns(), causes)
    }

    /// Shared scores of scored units.
    fn scored(scores: &[f64]) -> Vec<SharedScore> {
        scores.iter().map(|&s| shared(s, Verdict::Scored)).collect()
    }

    /// `file` for two processes, what it filed in order.
    fn filed_in_two(blocks: &mut [Vec<Row>], sh: &mut Vec<SharedScore>) -> Vec<(RowRef, RowRef)> {
        let procs = vec![("h".to_string(), 1), ("h".to_string(), 2)];
        let mut got: Vec<_> = file(blocks, sh, &procs, None).into_iter().collect();
        got.sort();
        got
    }

    #[test]
    fn a_root_reaches_through_a_process_with_none_to_the_root_it_passed_it_to() {
        // A worker (0) behind a router (1) that a client (2) talks to: the worker's root,
        // then the router hears from the worker, then the client's (slightly louder) root
        // on its connection to the router.
        let c = |l: &str, p: &str| (Default::default(), Some(l.to_string()), Some(p.to_string()));
        let conns: Vec<ConnRow> = vec![
            (Default::default(), None, None),
            c("w:1", "r:5"), // 1: the worker's end of the router's connection
            c("r:5", "w:1"), // 2: the router's end of it
            c("r:1", "c:7"), // 3: the router's end of the client's connection
            c("c:7", "r:1"), // 4: the client's end of it
        ];
        let run = |router_heard_at: i64, client_heard_at: &[i64]| {
            let mut sh = scored(&[0.1, 0.8, 0.82]);
            let mut blocks = vec![
                vec![row(0, 0, 10, 1, 0.1, 0), row(0, 1, 20, 1, 0.8, 1)],
                vec![
                    row(1, 0, 12, 3, 0.1, 0),
                    row(1, 1, router_heard_at, 2, 0.1, 0),
                ],
                vec![row(2, 0, 11, 4, 0.1, 0)],
            ];
            for &t in client_heard_at {
                let i = blocks[2].len() as u32;
                blocks[2].push(row(2, i, t, 4, 0.1, 0));
            }
            let i = blocks[2].len() as u32;
            blocks[2].push(row(2, i, 40, 4, 0.82, 2));
            let procs: Vec<(String, u32)> = (1..=3).map(|p| ("h".to_string(), p)).collect();
            let mut got: Vec<_> = file_consequences(
                &mut blocks,
                &mut sh,
                &FxMap::default(),
                &procs,
                &conns,
                None,
            )
            .into_iter()
            .collect();
            got.sort();
            got
        };
        assert_eq!(run(25, &[]), vec![((2, 1), (0, 1))]);
        assert_eq!(run(25, &[30]), vec![((2, 2), (0, 1))]);
        // The router heard from the worker only before its root: nothing passed on.
        assert_eq!(run(15, &[]), vec![]);
        // The client heard from the router twice since: what it reacted to came later.
        assert_eq!(run(25, &[30, 35]), vec![]);
    }

    #[test]
    fn later_anomalies_and_units_on_connections_made_after_the_root_are_filed_under_it() {
        // Shared scores: 0 normal, 1 the anomaly, 2 no unit model.
        let mut sh = vec![
            shared(0.1, Verdict::Scored),
            shared(0.8, Verdict::Scored),
            shared(1.0, Verdict::NoUnitModel),
        ];
        let mut blocks = vec![vec![
            row(0, 0, 10, 1, 0.1, 0),
            // Unmodelled, on a connection older than the root: not a consequence.
            row(0, 1, 15, 2, 1.0, 2),
            row(0, 2, 20, 1, 0.8, 1),
            row(0, 3, 25, 2, 1.0, 2),
            // On connection 3, first seen after the root: consequences.
            row(0, 4, 30, 3, 1.0, 2),
            row(0, 5, 40, 3, 1.0, 2),
            // A later anomaly of the process.
            row(0, 6, 50, 1, 0.8, 1),
            row(0, 7, 60, 1, 0.1, 0),
        ]];
        let procs = vec![("h".to_string(), 7)];
        let c = file(&mut blocks, &mut sh, &procs, None);
        let mut got: Vec<_> = c.into_iter().collect();
        got.sort();
        assert_eq!(
            got,
            vec![((0, 4), (0, 2)), ((0, 5), (0, 2)), ((0, 6), (0, 2))]
        );
        let rows = &blocks[0];
        assert!(rows[4].score < 0.8 && rows[4].score > 0.799);
        assert_eq!(sh[rows[4].shared as usize].score, rows[4].score);
        assert_eq!(sh[rows[4].shared as usize].verdict, Verdict::NoUnitModel);
        assert_eq!(rows[4].shared, rows[5].shared);
        assert_eq!(
            (rows[1].score, rows[3].score, rows[2].score),
            (1.0, 1.0, 0.8)
        );
    }

    #[test]
    fn a_later_anomaly_is_filed_in_its_process_only_along_a_path_from_the_root() {
        // One process, three worker threads. The root (t 20) is on connection 1 in thread
        // 1; later anomalies: in thread 2 on connection 2 (older than the root, no peer
        // anomaly: no path), in thread 1 on connection 2 (program order, from an
        // initializer only), in thread 3 on
        // connection 1 (the root's connection) and in thread 3 on connection 3 (first seen
        // after the root).
        let mut sh = scored(&[0.1, 0.8]);
        let at = |index: u32, t: i64, conn: u32, tid: u32, shared: u32| {
            let mut r = row(0, index, t, conn, [0.1, 0.8][shared as usize], shared);
            r.tid = tid;
            r
        };
        let mut blocks = vec![vec![
            at(0, 10, 2, 2, 0),
            at(1, 20, 1, 1, 1),
            at(2, 30, 2, 2, 1),
            at(3, 40, 2, 1, 1),
            at(4, 50, 1, 3, 1),
            at(5, 60, 3, 3, 1),
            // On connection 5, first seen after the root but accepted: a peer's new
            // request, not the root's doing.
            at(6, 70, 5, 4, 1),
        ]];
        // The root is a handler: its thread serves messages in turn, so the anomaly in
        // thread 1 on connection 2 is another task, not the root's continuation; the one
        // on connection 5 came with a connection a peer opened.
        let procs = vec![("h".to_string(), 7)];
        let pristine = blocks.clone();
        let mut got: Vec<_> = file(&mut blocks, &mut sh, &procs, None)
            .into_iter()
            .collect();
        got.sort();
        assert_eq!(got, vec![((0, 4), (0, 1)), ((0, 5), (0, 1))]);
        assert_eq!(blocks[0][2].score, 0.8, "no path: weighed on its own");
        assert_eq!(
            blocks[0][3].score, 0.8,
            "a handler's thread: no program order"
        );
        assert_eq!(blocks[0][6].score, 0.8, "accepted after the root: no path");
        // The same with the root an initializer: what a thread set up affects all it does
        // later, so program order carries it to thread 1's unit on connection 2.
        let mut sh = scored(&[0.1, 0.8]);
        let mut blocks = pristine;
        blocks[0][1].kind = UnitKind::Initializer;
        let mut got: Vec<_> = file(&mut blocks, &mut sh, &procs, None)
            .into_iter()
            .collect();
        got.sort();
        assert_eq!(
            got,
            vec![((0, 3), (0, 1)), ((0, 4), (0, 1)), ((0, 5), (0, 1))]
        );
        assert_eq!(blocks[0][2].score, 0.8, "no path: weighed on its own");
        // The same anomaly after a peer's anomaly on its connection (process 1, at the
        // other end of connection 2's address b:3, an anomaly at t 25): filed.
        let mut sh = scored(&[0.1, 0.8]);
        let mut blocks = vec![
            vec![at(0, 10, 2, 2, 0), at(1, 20, 1, 1, 1), at(2, 30, 2, 2, 1)],
            vec![{
                let mut r = row(1, 0, 25, 6, 0.8, 1);
                r.tid = 9;
                r
            }],
        ];
        let procs = vec![("h".to_string(), 7), ("h".to_string(), 8)];
        let mut cs = conns();
        // Connection 6: process 1's end of connection 2 (b:3 ⇄ a:1).
        cs.push((Default::default(), Some("b:3".into()), Some("a:1".into())));
        let filed = file_consequences(&mut blocks, &mut sh, &FxMap::default(), &procs, &cs, None);
        assert_eq!(filed.get(&(0, 2)), Some(&(0, 1)), "{filed:?}");
    }

    #[test]
    fn the_other_end_of_a_connection_joins_the_earlier_incident() {
        let mut sh = vec![shared(0.8, Verdict::Scored), shared(0.9, Verdict::Scored)];
        // Process 0's root at t 10 on a:1 ⇄ b:2; process 1's, stronger, at t 12 on the
        // other end of that connection: one incident, rooted at the earlier one.
        let mut blocks = vec![
            vec![row(0, 0, 10, 1, 0.8, 0)],
            vec![row(1, 0, 12, 4, 0.9, 1)],
        ];
        let procs = vec![("h".to_string(), 1), ("h".to_string(), 2)];
        let c = file(&mut blocks, &mut sh, &procs, None);
        assert_eq!(c.len(), 1);
        assert_eq!(c.get(&(1, 0)), Some(&(0, 0)));
        assert!((blocks[1][0].score - 0.8 * CONSEQUENCE_FACTOR).abs() < 1e-12);
        // The other way round in time: process 1's root came first.
        let mut blocks = vec![
            vec![row(0, 0, 14, 1, 0.8, 0)],
            vec![row(1, 0, 12, 4, 0.9, 1)],
        ];
        let c = file(&mut blocks, &mut sh, &procs, None);
        assert_eq!(c.get(&(0, 0)), Some(&(1, 0)));
    }

    #[test]
    fn a_peer_without_anomalies_of_its_own_files_what_it_was_told_under_the_root() {
        let mut sh = scored(&[0.9, 0.55, 0.4]);
        // Process 0's root at t 10 on a:1 ⇄ b:2. Process 1, with no root, on the other end:
        // a weak anomaly after it (filed), a weaker one (not), one before the root (not).
        let mut blocks = vec![
            vec![row(0, 0, 10, 1, 0.9, 0)],
            vec![
                row(1, 0, 5, 4, 0.55, 1),
                row(1, 1, 20, 4, 0.55, 1),
                row(1, 2, 30, 4, 0.4, 2),
            ],
        ];
        let got = filed_in_two(&mut blocks, &mut sh);
        assert_eq!(got, vec![((1, 1), (0, 0))]);
        assert!((blocks[1][1].score - 0.9 * CONSEQUENCE_FACTOR).abs() < 1e-12);
        assert_eq!((blocks[1][0].score, blocks[1][2].score), (0.55, 0.4));
    }

    #[test]
    fn a_later_root_clearly_stronger_than_the_earlier_one_roots_the_incident() {
        let mut sh = scored(&[0.7, 0.95, 1.0]);
        // Process 0's root (0.7, t 10) is followed by process 1's (0.95, t 12) at the other
        // end of a connection, then by a stronger anomaly of process 0 (1.0, t 20).
        let mut blocks = vec![
            vec![row(0, 0, 10, 1, 0.7, 0), row(0, 1, 20, 1, 1.0, 2)],
            vec![row(1, 0, 12, 4, 0.95, 1)],
        ];
        let got = filed_in_two(&mut blocks, &mut sh);
        // The weak, earlier root is left alone (before the incident's root); the later
        // anomaly, within STRONGER of the incident's root, is filed under it.
        assert_eq!(got, vec![((0, 1), (1, 0))]);
        assert_eq!(blocks[0][0].score, 0.7);
        assert!((blocks[0][1].score - 0.95 * CONSEQUENCE_FACTOR).abs() < 1e-12);
    }

    #[test]
    fn a_later_anomaly_stronger_only_by_a_runs_raise_is_filed_under_the_incident() {
        // Process 0's root (0.84, t 10) reaches process 1 on the other end of its
        // connection (t 12, 0.84); process 1 then reconnects again and again: a run that
        // raised its first unit from 0.84 to 0.97 (t 14). Not clearly stronger: filed
        // under the root.
        let mut sh = scored(&[0.84, 0.84, 0.97]);
        sh[2].run_added = 0.97 - 0.84;
        let mut blocks = vec![
            vec![row(0, 0, 10, 1, 0.84, 0)],
            vec![row(1, 0, 12, 4, 0.84, 1), row(1, 1, 14, 4, 0.97, 2)],
        ];
        let got = filed_in_two(&mut blocks, &mut sh);
        assert_eq!(got, vec![((1, 0), (0, 0)), ((1, 1), (0, 0))]);
        assert!((blocks[1][1].score - 0.84 * CONSEQUENCE_FACTOR).abs() < 1e-12);
        // The same score on its own (no run): clearly stronger, weighed on its own.
        let mut sh = scored(&[0.84, 0.84, 0.97]);
        let mut blocks = vec![
            vec![row(0, 0, 10, 1, 0.84, 0)],
            vec![row(1, 0, 12, 4, 0.84, 1), row(1, 1, 14, 4, 0.97, 2)],
        ];
        let got = filed_in_two(&mut blocks, &mut sh);
        assert_eq!(got, vec![((1, 0), (0, 0))]);
        assert_eq!(blocks[1][1].score, 0.97);
    }

    /// Process 0 saw its peer close the connection (its root, t 10, on b:2 ⇄ a:1); process
    /// 1, at the other end, holds the act that closed it (an injected fault), recorded as
    /// returning later (t 12) although its call began after its thread's previous unit
    /// began (`before`).
    fn closed_under(before: i64, role: CloseRole) -> FxMap<RowRef, RowRef> {
        let mut sh = scored(&[0.9, 0.95, 0.1]);
        let mut blocks = vec![
            vec![row(0, 0, 10, 4, 0.9, 0)],
            vec![row(1, 0, before, 0, 0.1, 2), row(1, 1, 12, 1, 0.95, 1)],
        ];
        blocks[0][0].flags |= Row::EXTRA;
        blocks[1][1].flags |= Row::EXTRA;
        let mut extras = FxMap::default();
        let extra = |close| RowExtra {
            close: Some(close),
            ..Default::default()
        };
        extras.insert((0, 0), extra(CloseRole::Observed));
        extras.insert((1, 1), extra(role));
        let procs = vec![("h".to_string(), 1), ("h".to_string(), 2)];
        file_consequences(&mut blocks, &mut sh, &extras, &procs, &conns(), None)
    }

    #[test]
    fn the_end_that_closed_a_connection_roots_what_the_other_end_saw() {
        // The act's call began before the observation: it roots the incident.
        let c = closed_under(8, CloseRole::Acted);
        assert_eq!(c.get(&(0, 0)), Some(&(1, 1)));
        assert_eq!(c.len(), 1);
        // It began after the observation (its thread's previous unit began later): the
        // observation came first and roots the incident, as the times say.
        let c = closed_under(11, CloseRole::Acted);
        assert_eq!(c.get(&(1, 1)), Some(&(0, 0)));
        // Two observations: the earlier roots the incident.
        let c = closed_under(8, CloseRole::Observed);
        assert_eq!(c.get(&(1, 1)), Some(&(0, 0)));
    }

    /// [`closed_under`] with the calls' own times: the observation returned at t 10, the
    /// act returned at t 12 after at most `act_dur`; the acting process on another host
    /// when `other_host`.
    fn closed_under_timed(act_dur: u64, other_host: bool) -> FxMap<RowRef, RowRef> {
        let mut sh = scored(&[0.9, 0.95, 0.1]);
        let mut blocks = vec![
            vec![row(0, 0, 10, 4, 0.9, 0)],
            vec![row(1, 0, 8, 0, 0.1, 2), row(1, 1, 12, 1, 0.95, 1)],
        ];
        blocks[0][0].flags |= Row::EXTRA;
        blocks[1][1].flags |= Row::EXTRA;
        let mut extras = FxMap::default();
        extras.insert(
            (0, 0),
            RowExtra {
                close: Some(CloseRole::Observed),
                anomaly_ns: Some(10),
                ..Default::default()
            },
        );
        extras.insert(
            (1, 1),
            RowExtra {
                close: Some(CloseRole::Acted),
                anomaly_ns: Some(12),
                anomaly_dur_ns: act_dur,
                ..Default::default()
            },
        );
        let second = if other_host { "g" } else { "h" };
        let procs = vec![("h".to_string(), 1), (second.to_string(), 2)];
        file_consequences(&mut blocks, &mut sh, &extras, &procs, &conns(), None)
    }

    #[test]
    fn an_act_entered_after_the_observation_returned_did_not_cause_it() {
        // The close may have been entered at t 7, before the observation (t 10): it may
        // have caused it, and roots the incident.
        let c = closed_under_timed(5, false);
        assert_eq!(c.get(&(0, 0)), Some(&(1, 1)));
        // Entered at t 11 at the earliest, after the observation returned: the peer
        // closed its end after the break it had nothing to do with.
        let c = closed_under_timed(1, false);
        assert_eq!(c.get(&(1, 1)), Some(&(0, 0)));
        // On two hosts the clocks are not one: the thread's bound decides, as before.
        let c = closed_under_timed(1, true);
        assert_eq!(c.get(&(0, 0)), Some(&(1, 1)));
    }

    /// A client's handler (process 0, on a:1 ⇄ b:2) began at t 10 with the reply it
    /// received, sent the next request and waited; its first anomaly (a timeout) came at
    /// t 40. The server (process 1, at the other end) read that request at t 12 in a call
    /// that took far too long. `waited`: did the client's wait return before its anomaly?
    fn timed_out_client(waited: bool) -> FxMap<RowRef, RowRef> {
        timed_out_client_scoring(waited, 0.9, 0.9)
    }

    /// [`timed_out_client`], the client's unit scoring `client`, the server's `server`.
    fn timed_out_client_scoring(waited: bool, client: f64, server: f64) -> FxMap<RowRef, RowRef> {
        let mut sh = scored(&[client, server]);
        let mut blocks = vec![
            vec![row(0, 0, 10, 1, client, 0)],
            vec![row(1, 0, 30, 4, server, 1)],
        ];
        blocks[0][0].flags |= Row::EXTRA;
        blocks[1][0].flags |= Row::EXTRA;
        let mut extras = FxMap::default();
        extras.insert(
            (0, 0),
            RowExtra {
                anomaly_ns: Some(40),
                waited,
                ..Default::default()
            },
        );
        extras.insert(
            (1, 0),
            RowExtra {
                slow: Some(crate::durations::SlowCall {
                    key: NodeKey {
                        kind: NodeKind::Lib,
                        site: 1,
                        callee: key_lib(LibFn::Read),
                        outcome: Outcome::Ok,
                    },
                    dur_ns: 18,
                    began_ns: 12,
                    normal_max_ns: 1,
                    normal_calls: 100,
                    normal_units: 100,
                }),
                ..Default::default()
            },
        );
        let procs = vec![("h".to_string(), 1), ("h".to_string(), 2)];
        file_consequences(&mut blocks, &mut sh, &extras, &procs, &conns(), None)
    }

    #[test]
    fn a_handler_that_waited_before_its_anomaly_dates_from_the_anomaly() {
        // It waited: its timeout (t 40) came after the server's slow read began (t 12).
        let c = timed_out_client(true);
        assert_eq!(c.get(&(0, 0)), Some(&(1, 0)));
        assert_eq!(c.len(), 1);
        // It did not: what it did differently answered the message it began with (t 10).
        let c = timed_out_client(false);
        assert_eq!(c.get(&(1, 0)), Some(&(0, 0)));
    }

    #[test]
    fn a_timeout_louder_than_the_delay_that_caused_it_is_filed_under_the_delay() {
        // The client's timeout (an exception, a reconnection: 0.9) scores more than
        // STRONGER above the server's slow read (0.7995), which began before it.
        let c = timed_out_client_scoring(true, 0.9, 0.7995);
        assert_eq!(c.get(&(0, 0)), Some(&(1, 0)));
    }

    /// A server (process 0, a:1) whose first anomaly is a call too long (t 10 to 15) on
    /// its connection to b:2, then anomalies on the connection it made (from a:7) to b:3
    /// (a peer that met nothing: process 1) at t 12 and t 100, to b:2 at t 120, and to
    /// b:4 (a peer that timed out at t 50: process 2) at t 100. `slow`: is the root a
    /// delay?
    fn after_a_delay(slow: bool) -> FxMap<RowRef, RowRef> {
        let c = |l: &str, p: &str| (Default::default(), Some(l.to_string()), Some(p.to_string()));
        let conns: Vec<ConnRow> = vec![
            (Default::default(), None, None),
            c("a:1", "b:2"),
            c("a:7", "b:3"),
            c("a:1", "b:4"),
            c("b:3", "a:7"),
            c("b:4", "a:1"),
        ];
        let mut sh = scored(&[0.1, 0.8]);
        let mut blocks = vec![
            vec![
                row(0, 0, 10, 1, 0.8, 1),
                row(0, 1, 100, 2, 0.8, 1),
                row(0, 2, 120, 1, 0.8, 1),
                row(0, 3, 12, 2, 0.8, 1),
                row(0, 4, 100, 3, 0.8, 1),
            ],
            vec![row(1, 0, 5, 4, 0.1, 0), row(1, 1, 90, 4, 0.1, 0)],
            vec![row(2, 0, 5, 5, 0.1, 0), row(2, 1, 50, 5, 0.8, 1)],
        ];
        blocks[0][0].flags |= Row::EXTRA;
        let mut extras = FxMap::default();
        let delay = crate::durations::SlowCall {
            key: NodeKey {
                kind: NodeKind::Lib,
                site: 1,
                callee: key_lib(LibFn::Write),
                outcome: Outcome::Ok,
            },
            dur_ns: 5,
            began_ns: 10,
            normal_max_ns: 1,
            normal_calls: 100,
            normal_units: 100,
        };
        extras.insert(
            (0, 0),
            RowExtra {
                slow: slow.then_some(delay),
                ..Default::default()
            },
        );
        let procs: Vec<(String, u32)> = (1..=3).map(|p| ("h".to_string(), p)).collect();
        file_consequences(&mut blocks, &mut sh, &extras, &procs, &conns, None)
    }

    #[test]
    fn a_delay_causes_in_its_process_only_what_it_could_reach() {
        let c = after_a_delay(true);
        // Another connection, after the call returned, from a peer that met nothing.
        assert_eq!(c.get(&(0, 1)), None);
        // Its own connection; what ran while it lasted; a peer that timed out since.
        assert_eq!(c.get(&(0, 2)), Some(&(0, 0)));
        assert_eq!(c.get(&(0, 3)), Some(&(0, 0)));
        assert_eq!(c.get(&(0, 4)), Some(&(0, 0)));
        // A root that is not a delay may have caused any later anomaly of its process.
        let c = after_a_delay(false);
        assert_eq!(c.get(&(0, 1)), Some(&(0, 0)));
    }

    #[test]
    fn waits_before_the_first_anomaly_are_found_in_the_tree() {
        let mut t = crate::trees::CallTree::default();
        let lib = |f: LibFn, outcome| NodeKey {
            kind: NodeKind::Lib,
            site: 1,
            callee: key_lib(f),
            outcome,
        };
        t.add(crate::trees::ROOT, lib(LibFn::Send, Outcome::Ok), 10);
        t.add(crate::trees::ROOT, lib(LibFn::Poll, Outcome::Ok), 20);
        t.add(crate::trees::ROOT, lib(LibFn::Recv, Outcome::Eof), 30);
        assert!(waited_by(&t, 30));
        assert!(
            waited_by(&t, 20),
            "a wait that is itself the anomaly (a timeout)"
        );
        assert!(!waited_by(&t, 15));
    }

    #[test]
    fn close_roles_come_from_the_first_call_never_seen_or_an_injection() {
        let k = |f: LibFn, outcome| NodeKey {
            kind: NodeKind::Lib,
            site: 1,
            callee: key_lib(f),
            outcome,
        };
        let (observed, acted) = (Some(CloseRole::Observed), Some(CloseRole::Acted));
        let cases = [
            (LibFn::Recv, Outcome::Eof, observed),
            (LibFn::Read, Outcome::Errno(104), observed),
            (LibFn::Send, Outcome::Errno(32), observed),
            (LibFn::Close, Outcome::Ok, acted),
            (LibFn::Shutdown, Outcome::Ok, acted),
            (LibFn::Recv, Outcome::Errno(11), None),
        ];
        for (f, outcome, role) in cases {
            assert_eq!(close_role(Some(k(f, outcome))), role, "{f:?} {outcome:?}");
        }
        assert_eq!(close_role(None), None);
        let frame = NodeKey {
            kind: NodeKind::C,
            ..k(LibFn::Recv, Outcome::Eof)
        };
        assert_eq!(close_role(Some(frame)), None);
    }

    struct Matched(Vec<(UnitRef, UnitRef)>);

    #[test]
    fn an_anomaly_is_filed_under_an_earlier_one_only_if_something_sent_after_it_arrived() {
        // Process 0's weak root at t 10 on a:1 ⇄ b:2; process 1's at t 30, on no
        // connection (its event loop). Process 1 received from process 0 at t 5 (before
        // 0's anomaly) and, in the second run, also at t 20 (after it, before its own).
        let procs = vec![("h".to_string(), 1), ("h".to_string(), 2)];
        for (receipt, linked) in [(None, false), (Some(20), true)] {
            let mut sh = scored(&[0.7, 0.75, 0.1]);
            let mut b1 = vec![row(1, 0, 5, 4, 0.1, 2), row(1, 1, 30, 0, 0.75, 1)];
            if let Some(t) = receipt {
                b1.insert(1, row(1, 2, t, 4, 0.1, 2));
            }
            let mut blocks = vec![vec![row(0, 0, 0, 1, 0.1, 2), row(0, 1, 10, 1, 0.7, 0)], b1];
            let c = file(&mut blocks, &mut sh, &procs, None);
            let root_of_1 = blocks[1].iter().position(|r| r.index == 1).unwrap() as u32;
            assert_eq!(
                c.get(&(1, root_of_1)) == Some(&(0, 1)),
                linked,
                "{receipt:?}"
            );
            assert_eq!(blocks[1][root_of_1 as usize].score == 0.75, !linked);
        }
    }

    #[test]
    fn units_of_a_process_with_no_group_born_after_the_root_are_filed_under_it() {
        // Process 0's root at t 10; process 1 (no group: a respawned worker) starts at t 50
        // on a connection of its own, every unit scoring 1.
        let mut sh = vec![
            shared(0.9, Verdict::Scored),
            shared(1.0, Verdict::NoProcessGroup),
        ];
        let mut blocks = vec![
            vec![row(0, 0, 10, 1, 0.9, 0)],
            (0..5)
                .map(|i| row(1, i, 50 + i as i64, 3, 1.0, 1))
                .collect(),
        ];
        let procs = vec![("h".to_string(), 1), ("h".to_string(), 2)];
        let c = file(&mut blocks, &mut sh, &procs, None);
        assert_eq!(c.len(), 5);
        assert!(blocks[1].iter().all(|r| r.score < 0.9));
    }

    impl CauseSource for Matched {
        fn received_from(&self, unit: &UnitRef) -> Vec<UnitRef> {
            self.0
                .iter()
                .filter(|(to, _)| to == unit)
                .map(|(_, from)| from.clone())
                .collect()
        }
    }

    #[test]
    fn a_cause_source_joins_incidents_of_processes_with_no_connection_in_common() {
        let mut sh = vec![shared(0.9, Verdict::Scored), shared(0.8, Verdict::Scored)];
        let mut blocks = vec![
            vec![row(0, 0, 10, 2, 0.9, 0)],
            vec![row(1, 0, 20, 3, 0.8, 1)],
        ];
        // Both processes ran from the start (a normal unit at t 0).
        sh.push(shared(0.1, Verdict::Scored));
        blocks[0].push(row(0, 1, 0, 2, 0.1, 2));
        blocks[1].push(row(1, 1, 0, 3, 0.1, 2));
        let procs = vec![("h".to_string(), 1), ("h".to_string(), 2)];
        let none = file(&mut blocks.clone(), &mut sh.clone(), &procs, None);
        assert!(none.is_empty());
        let r = |pid, index| UnitRef {
            host: "h".into(),
            pid,
            tid: 1,
            index,
        };
        let src = Matched(vec![(r(2, 0), r(1, 0))]);
        let c = file(&mut blocks, &mut sh, &procs, Some(&src));
        assert_eq!(c.len(), 1);
        assert_eq!(c.get(&(1, 0)), Some(&(0, 0)));
        assert!((blocks[1][0].score - 0.9 * CONSEQUENCE_FACTOR).abs() < 1e-12);
    }

    #[test]
    fn the_loop_that_called_a_root_handler_acts_on_its_outcome() {
        // Thread 1 of one process: its loop unit (index 0, t 0..300) runs a step that raises
        // at t 100 — the handler unit holding it (index 1) opens at t 200, when the next
        // step's receive returned — and logs the failure at t 105, as its own first call
        // never seen. The raise is the root (it happened first, though its unit's span
        // starts later), and the loop's log is its consequence: the loop got the exception.
        let run = |log_at: i64, kind: UnitKind| {
            let mut sh = scored(&[0.89, 0.82]);
            let mut looped = row(0, 0, 0, 0, 0.89, 0);
            looped.kind = kind;
            looped.t_end_unix_ns = 300;
            let mut handler = row(0, 1, 200, 1, 0.82, 1);
            handler.t_end_unix_ns = 210;
            let next = row(0, 2, 250, 1, 0.1, 0);
            let mut blocks = vec![vec![looped, handler, next]];
            blocks[0][0].flags |= Row::EXTRA;
            blocks[0][1].flags |= Row::EXTRA;
            let mut extras = FxMap::default();
            let at = |t, waited| RowExtra {
                anomaly_ns: Some(t),
                waited,
                ..Default::default()
            };
            // (A unit that waited is dated by its anomaly whatever its kind.)
            extras.insert((0, 0), at(log_at, true));
            extras.insert((0, 1), at(100, false));
            let procs = vec![("h".to_string(), 1)];
            file_consequences(&mut blocks, &mut sh, &extras, &procs, &conns(), None)
        };
        assert_eq!(run(105, UnitKind::Loop).get(&(0, 0)), Some(&(0, 1)));
        // What the loop did after the next handler began is not the root's doing.
        assert_eq!(run(260, UnitKind::Loop).get(&(0, 0)), None);
        // Nor is another handler's anomaly in the same thread, at the same time: no call
        // returns to it.
        assert_eq!(run(105, UnitKind::Handler).get(&(0, 0)), None);
    }
}
