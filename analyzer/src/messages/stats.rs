//! Statistics: request/response latencies per connection, time each process spent waiting
//! in receives and multiplexers per peer, and per-thread process states.
//!
//! - **Latency** is measured at the connecting end `a` (the client): a *request* is a run
//!   of sends after a receive (or at the start), its *response* the first receive after
//!   it; the latency is from the start of the request's first send to the end of the
//!   response's first receive.
//! - **Waits**: a receive's (or `accept`'s) duration is time waiting for the peer of its
//!   socket; a multiplexer's duration is shared equally by the peers of the descriptors it
//!   returned ready (`(timeout)` when none was); a send's duration is time blocked sending
//!   to that peer.
//! - **States** of a thread: from its first to its last op, *waiting* in receives and
//!   multiplexers, *blocked* in sends, *running* otherwise.

use super::ops::{OpKind, NO_SOCK};
use super::sockets::{ItemKind, OpRef};
use super::Messages;
use serde::Serialize;
use std::collections::BTreeMap;

/// Latencies of a connection's request/response pairs, ns.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    /// Pairs.
    pub count: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Median.
    pub p50_ns: i64,
    /// 99th percentile.
    pub p99_ns: i64,
    /// Largest.
    pub max_ns: i64,
}

/// Request/response latencies of connection `c`.
pub fn latency(m: &Messages, c: usize) -> Latency {
    let conn = &m.conns[c];
    let s = &m.sockets[conn.a as usize];
    let mut v = Vec::new();
    let mut req_start: Option<i64> = None;
    let mut in_request = false;
    for it in &s.items {
        match it.kind {
            ItemKind::Send if !in_request => {
                req_start = Some(m.op_ns(it.op).0);
                in_request = true;
            }
            ItemKind::Recv => {
                if let (true, Some(t0)) = (in_request, req_start) {
                    v.push((m.op_ns(it.op).1 - t0).max(0));
                }
                in_request = false;
            }
            _ => {}
        }
    }
    if v.is_empty() || conn.kind == super::ConnKind::Datagram {
        return Latency::default();
    }
    v.sort_unstable();
    let n = v.len();
    Latency {
        count: n as u64,
        mean_ns: v.iter().map(|&x| x as f64).sum::<f64>() / n as f64,
        p50_ns: v[n / 2],
        p99_ns: v[((n * 99) / 100).min(n - 1)],
        max_ns: v[n - 1],
    }
}

/// Time a process spent, per peer.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PeerWait {
    /// Waiting in receives (and `accept`), ns.
    pub receive_ns: i64,
    /// Waiting in multiplexers, ns (shared among the ready peers).
    pub multiplexer_ns: f64,
    /// Blocked in sends, ns.
    pub send_ns: i64,
}

/// The peer name of a socket as seen from process `from`: `host:pid` of the other end's
/// process, or the peer address when that end was not traced.
pub fn peer_name(m: &Messages, sock: u32) -> String {
    if sock == NO_SOCK {
        return "(unknown)".into();
    }
    let s = &m.sockets[sock as usize];
    match s.partner {
        Some(p) => m.procs[m.sockets[p as usize].proc as usize].name(),
        None => match s.peer {
            Some(a) => format!("{} (untraced)", a.to_display()),
            None => "(unknown)".into(),
        },
    }
}

/// Waits of process `p`, by peer name.
pub fn waits(m: &Messages, p: usize) -> BTreeMap<String, PeerWait> {
    let pr = &m.procs[p];
    let mut out: BTreeMap<String, PeerWait> = BTreeMap::new();
    let mut ri = 0usize;
    for (i, o) in pr.ops.iter().enumerate() {
        let dur = pr.ns(o.end) - pr.ns(o.start);
        match o.kind {
            OpKind::Recv | OpKind::Peek | OpKind::Accept => {
                out.entry(peer_name(m, o.sock)).or_default().receive_ns += dur;
            }
            OpKind::Send => {
                out.entry(peer_name(m, o.sock)).or_default().send_ns += dur;
            }
            OpKind::Mux => {
                while ri < pr.ready.len() && (pr.ready[ri].0 as usize) < i {
                    ri += 1;
                }
                let mut peers = Vec::new();
                let mut k = ri;
                while k < pr.ready.len() && pr.ready[k].0 as usize == i {
                    let fd = pr.ready[k].1;
                    let sock = socket_of_fd(m, p, i, fd);
                    peers.push(peer_name(m, sock));
                    k += 1;
                }
                if peers.is_empty() {
                    peers.push("(timeout)".into());
                }
                let share = dur as f64 / peers.len() as f64;
                for pn in peers {
                    out.entry(pn).or_default().multiplexer_ns += share;
                }
            }
            _ => {}
        }
    }
    out
}

/// The socket descriptor `fd` of process `p` referred to around op `i` (the socket of the
/// nearest op on that descriptor).
fn socket_of_fd(m: &Messages, p: usize, i: usize, fd: i32) -> u32 {
    let ops = &m.procs[p].ops;
    let after = ops[i..]
        .iter()
        .take(64)
        .find(|o| o.fd == fd && o.sock != NO_SOCK);
    let before = ops[..i]
        .iter()
        .rev()
        .take(256)
        .find(|o| o.fd == fd && o.sock != NO_SOCK);
    after.or(before).map_or(NO_SOCK, |o| o.sock)
}

/// States of one thread.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ThreadStates {
    /// Thread id.
    pub tid: u32,
    /// First op start, ns.
    pub start_ns: i64,
    /// Last op end, ns.
    pub end_ns: i64,
    /// Running, ns.
    pub running_ns: i64,
    /// Waiting in receives (and accept), ns.
    pub receive_ns: i64,
    /// Waiting in multiplexers, ns.
    pub multiplexer_ns: i64,
    /// Blocked in sends, ns.
    pub send_ns: i64,
}

/// What a thread is doing during an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// In a receive or accept.
    Receive,
    /// In a multiplexer.
    Multiplexer,
    /// In a send.
    Send,
}

/// The state an op puts its thread in, if it is a wait.
pub fn state_of(k: OpKind) -> Option<State> {
    match k {
        OpKind::Recv | OpKind::Peek | OpKind::Accept => Some(State::Receive),
        OpKind::Mux => Some(State::Multiplexer),
        OpKind::Send => Some(State::Send),
        _ => None,
    }
}

/// States of every thread of process `p`.
pub fn states(m: &Messages, p: usize) -> Vec<ThreadStates> {
    let pr = &m.procs[p];
    let mut by: BTreeMap<u32, ThreadStates> = BTreeMap::new();
    for o in &pr.ops {
        let (s, e) = (pr.ns(o.start), pr.ns(o.end));
        let t = by.entry(o.tid).or_insert_with(|| ThreadStates {
            tid: o.tid,
            start_ns: s,
            end_ns: e,
            ..Default::default()
        });
        t.start_ns = t.start_ns.min(s);
        t.end_ns = t.end_ns.max(e);
        match state_of(o.kind) {
            Some(State::Receive) => t.receive_ns += e - s,
            Some(State::Multiplexer) => t.multiplexer_ns += e - s,
            Some(State::Send) => t.send_ns += e - s,
            None => {}
        }
    }
    by.into_values()
        .map(|mut t| {
            t.running_ns =
                (t.end_ns - t.start_ns - t.receive_ns - t.multiplexer_ns - t.send_ns).max(0);
            t
        })
        .collect()
}

/// The op that ended waiting: used by views.
pub fn is_wait(m: &Messages, r: OpRef) -> bool {
    state_of(m.op(r).kind).is_some()
}
