//! The `culprit messages` summary, as JSON and as text.
//!
//! JSON contract (other scripts read it): an object with
//! - `connections`: each with `a`, `b` (endpoints: `host pid fd address peer origin`; `b`
//!   is null when the other end was not traced), `bytes_a_to_b`, `bytes_b_to_a` (bytes
//!   written in that direction as recorded by the sender, or as received when the sender
//!   was not traced), `matched_bytes` (bytes attributed to a send and a receive, both
//!   directions), `unmatched_bytes` (sent or received bytes not matched, each side counted:
//!   `sent + received = 2 × matched + unmatched`), `messages` (send → receive flows: one
//!   per pair of calls that share bytes), and besides: `kind`, `unmatched` (bytes by
//!   reason), `latency`, `reset`, `gaps`, `resynced`, `peeked_bytes`, `order_inferred_bytes`
//!   (bytes of sends that overlapped a send of another thread on the same socket, whose
//!   place in the stream is inferred: see `stream`), and for datagrams
//!   `reordered`, `lost`, `duplicated` (datagram counts);
//! - `totals`: `sent_bytes`, `received_bytes`, `matched_bytes`, `unmatched_bytes`,
//!   `messages` over all connections;
//! - `processes` (waits per peer, thread states), `clock_offsets`, `violations` (one-host
//!   receives that ended before their send began) with `violating_flows` (the first
//!   [`MAX_VIOLATIONS_LISTED`] of them: both calls, their times and the bytes), `lamport_max`,
//!   `broken_edges`.

use super::ops::NO_SOCK;
use super::stats::{self, Latency, PeerWait, ThreadStates};
use super::stream::Direction;
use super::{ConnKind, Messages};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One end of a connection.
#[derive(Clone, Debug, Serialize)]
pub struct Endpoint {
    /// Host.
    pub host: String,
    /// Process id (of the process that created or first used the socket).
    pub pid: u32,
    /// Descriptor there.
    pub fd: i32,
    /// Local address, if recorded.
    pub address: Option<String>,
    /// Peer address, if recorded.
    pub peer: Option<String>,
    /// How the socket came to be known.
    pub origin: super::sockets::Origin,
}

/// One connection in the summary.
#[derive(Clone, Debug, Serialize)]
pub struct ConnSummary {
    /// Kind.
    pub kind: ConnKind,
    /// First end.
    pub a: Endpoint,
    /// Other end (null: not traced).
    pub b: Option<Endpoint>,
    /// Bytes a → b.
    pub bytes_a_to_b: u64,
    /// Bytes b → a.
    pub bytes_b_to_a: u64,
    /// Sends a → b, b → a.
    pub sends: (u64, u64),
    /// Matched bytes (both directions).
    pub matched_bytes: u64,
    /// Unmatched bytes (both directions, both sides).
    pub unmatched_bytes: u64,
    /// Flows.
    pub messages: u64,
    /// Unmatched bytes by reason.
    pub unmatched: BTreeMap<String, u64>,
    /// Request/response latency (at `a`).
    pub latency: Latency,
    /// Reset seen.
    pub reset: bool,
    /// Lost-entries gaps met.
    pub gaps: u32,
    /// Gaps resynchronized.
    pub resynced: u32,
    /// Bytes peeked.
    pub peeked_bytes: u64,
    /// Bytes of sends that overlapped in time a send of another thread on the same
    /// socket: matched in the inferred order ([`super::stream`]), not a recorded one.
    pub order_inferred_bytes: u64,
    /// Datagrams received out of order.
    pub reordered: u64,
    /// Datagrams sent and never received.
    pub lost: u64,
    /// Datagrams received again.
    pub duplicated: u64,
}

/// Totals over all connections.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Totals {
    /// Bytes sent.
    pub sent_bytes: u64,
    /// Bytes received.
    pub received_bytes: u64,
    /// Bytes matched.
    pub matched_bytes: u64,
    /// Bytes unmatched.
    pub unmatched_bytes: u64,
    /// Flows.
    pub messages: u64,
}

/// A process in the summary.
#[derive(Clone, Debug, Serialize)]
pub struct ProcSummary {
    /// Host.
    pub host: String,
    /// Pid.
    pub pid: u32,
    /// Executable.
    pub exe: String,
    /// How the process is named in every view: as it was started, with its ports
    /// ([`crate::procname::ProcLabel::text`]).
    pub process: String,
    /// Events (ops).
    pub events: u64,
    /// Waits by peer.
    pub waits: BTreeMap<String, PeerWait>,
    /// Thread states.
    pub threads: Vec<ThreadStates>,
}

/// Violations listed in full in [`Summary::violating_flows`].
pub const MAX_VIOLATIONS_LISTED: usize = 20;

/// One call of a flow, as a violation lists it.
#[derive(Clone, Debug, Serialize)]
pub struct CallRef {
    /// Host.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Descriptor.
    pub fd: i32,
    /// The function.
    pub func: String,
    /// Entry, wall-clock ns.
    pub start_ns: i64,
    /// Exit, wall-clock ns.
    pub end_ns: i64,
    /// Entry TSC.
    pub start_tsc: u64,
    /// Exit TSC.
    pub end_tsc: u64,
}

/// A matched receive that ended before its send began (one host).
#[derive(Clone, Debug, Serialize)]
pub struct ViolationSummary {
    /// Index of the connection in `connections`.
    pub connection: Option<usize>,
    /// The send.
    pub send: CallRef,
    /// The receive.
    pub recv: CallRef,
    /// Offset of the flow's first byte in the stream.
    pub offset: u64,
    /// Bytes of the flow.
    pub bytes: u64,
    /// By how much the receive ended before the send began, ns.
    pub by_ns: i64,
}

fn call_ref(m: &Messages, r: super::sockets::OpRef) -> CallRef {
    let p = &m.procs[r.proc as usize];
    let o = &p.ops[r.idx as usize];
    CallRef {
        host: p.host.clone(),
        pid: p.pid,
        tid: o.tid,
        fd: o.fd,
        func: o.func.name().to_string(),
        start_ns: p.ns(o.start),
        end_ns: p.ns(o.end),
        start_tsc: o.start,
        end_tsc: o.end,
    }
}

/// The whole summary.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Connections.
    pub connections: Vec<ConnSummary>,
    /// Totals.
    pub totals: Totals,
    /// Processes.
    pub processes: Vec<ProcSummary>,
    /// Clock offsets.
    pub clock_offsets: Vec<super::offsets::HostOffset>,
    /// One-host causality violations.
    pub violations: u64,
    /// Cross-host receives that end before their send began once every host's clock is
    /// corrected (`clock_offsets`).
    pub aligned_violations: u64,
    /// The controlled logical clock pass run where the corrections leave receives before
    /// their sends ([`super::logical`]): how many, how many ops it moved and by how much
    /// at most.
    pub logical_clock: super::logical::LogicalClock,
    /// The first [`MAX_VIOLATIONS_LISTED`] violations in full.
    pub violating_flows: Vec<ViolationSummary>,
    /// Largest Lamport time.
    pub lamport_max: u64,
    /// Causal edges ignored to break cycles.
    pub broken_edges: u64,
}

fn endpoint(m: &Messages, s: u32) -> Endpoint {
    let so = &m.sockets[s as usize];
    let p = &m.procs[so.proc as usize];
    Endpoint {
        host: p.host.clone(),
        pid: p.pid,
        fd: so.fd,
        address: so.local.map(|a| a.to_display()),
        peer: so.peer.map(|a| a.to_display()),
        origin: so.origin,
    }
}

fn reasons(d: &Direction, out: &mut BTreeMap<String, u64>) -> u64 {
    let mut n = 0;
    for u in &d.unmatched {
        *out.entry(u.reason.name().to_string()).or_default() += u.bytes;
        n += u.bytes;
    }
    n
}

/// Builds the summary.
pub fn summarize(m: &Messages) -> Summary {
    let mut totals = Totals::default();
    let mut connections = Vec::new();
    for (ci, c) in m.conns.iter().enumerate() {
        let mut unmatched = BTreeMap::new();
        let un = reasons(&c.ab, &mut unmatched) + reasons(&c.ba, &mut unmatched);
        let dir_bytes = |d: &Direction, sender_traced: bool| {
            if sender_traced {
                d.sent
            } else {
                d.received
            }
        };
        let s = ConnSummary {
            kind: c.kind,
            a: endpoint(m, c.a),
            b: c.b.map(|b| endpoint(m, b)),
            bytes_a_to_b: dir_bytes(&c.ab, true),
            bytes_b_to_a: dir_bytes(&c.ba, c.b.is_some()),
            sends: (c.ab.sends, c.ba.sends),
            matched_bytes: c.ab.matched + c.ba.matched,
            unmatched_bytes: un,
            messages: (c.ab.flows.len() + c.ba.flows.len()) as u64,
            unmatched,
            latency: stats::latency(m, ci),
            reset: c.reset,
            gaps: c.ab.gaps + c.ba.gaps,
            resynced: c.ab.resynced + c.ba.resynced,
            peeked_bytes: c.ab.peeked + c.ba.peeked,
            order_inferred_bytes: c.ab.order_inferred + c.ba.order_inferred,
            reordered: c.reordered,
            lost: c.lost,
            duplicated: c.duplicated,
        };
        totals.sent_bytes += c.ab.sent + c.ba.sent;
        totals.received_bytes += c.ab.received + c.ba.received;
        totals.matched_bytes += s.matched_bytes;
        totals.unmatched_bytes += s.unmatched_bytes;
        totals.messages += s.messages;
        connections.push(s);
    }
    let processes = (0..m.procs.len())
        .map(|p| {
            let pr = &m.procs[p];
            ProcSummary {
                host: pr.host.clone(),
                pid: pr.pid,
                exe: pr.exe.clone(),
                process: pr.label().text(),
                events: pr.ops.len() as u64,
                waits: stats::waits(m, p),
                threads: stats::states(m, p),
            }
        })
        .collect();
    Summary {
        connections,
        totals,
        processes,
        clock_offsets: m.offsets.clone(),
        violations: m.violations.len() as u64,
        aligned_violations: m.aligned_violations,
        logical_clock: m.logical.clone(),
        violating_flows: m
            .violations
            .iter()
            .take(MAX_VIOLATIONS_LISTED)
            .map(|v| ViolationSummary {
                connection: m.conns.iter().position(|c| c.flows().any(|f| f == &v.flow)),
                send: call_ref(m, v.flow.send),
                recv: call_ref(m, v.flow.recv),
                offset: v.flow.offset,
                bytes: v.flow.bytes,
                by_ns: v.by_ns,
            })
            .collect(),
        lamport_max: m
            .lamport
            .iter()
            .filter_map(|l| l.last().copied())
            .max()
            .unwrap_or(0),
        broken_edges: m.broken_edges,
    }
}

fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

fn ep(e: &Endpoint) -> String {
    format!(
        "{}:{} fd {} {}",
        e.host,
        e.pid,
        e.fd,
        e.address.as_deref().unwrap_or("(no address)")
    )
}

/// The text form.
pub fn text(s: &Summary) -> String {
    let mut o = String::new();
    let t = &s.totals;
    let _ = writeln!(
        o,
        "{} connections: {} bytes sent, {} received, {} matched, {} unmatched, {} messages",
        s.connections.len(),
        t.sent_bytes,
        t.received_bytes,
        t.matched_bytes,
        t.unmatched_bytes,
        t.messages
    );
    for (i, c) in s.connections.iter().enumerate() {
        let b =
            c.b.as_ref()
                .map(ep)
                .unwrap_or_else(|| format!("(not traced: {})", c.a.peer.as_deref().unwrap_or("?")));
        let _ = writeln!(o, "\n#{i} {:?}  {}  <->  {}", c.kind, ep(&c.a), b);
        let _ = writeln!(
            o,
            "   a->b {} bytes in {} sends, b->a {} bytes in {} sends; {} messages",
            c.bytes_a_to_b, c.sends.0, c.bytes_b_to_a, c.sends.1, c.messages
        );
        let _ = write!(
            o,
            "   matched {} bytes, unmatched {}",
            c.matched_bytes, c.unmatched_bytes
        );
        if !c.unmatched.is_empty() {
            let r: Vec<String> = c
                .unmatched
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            let _ = write!(o, " ({})", r.join(", "));
        }
        let _ = writeln!(o);
        let mut flags = Vec::new();
        if c.reset {
            flags.push("reset".to_string());
        }
        if c.gaps > 0 {
            flags.push(format!(
                "{} lost-entries gaps ({} resynchronized)",
                c.gaps, c.resynced
            ));
        }
        if c.peeked_bytes > 0 {
            flags.push(format!("{} bytes peeked", c.peeked_bytes));
        }
        if c.order_inferred_bytes > 0 {
            flags.push(format!(
                "{} bytes sent by threads whose sends overlapped (their order inferred)",
                c.order_inferred_bytes
            ));
        }
        if c.lost > 0 {
            flags.push(format!("{} datagrams lost", c.lost));
        }
        if c.duplicated > 0 {
            flags.push(format!("{} datagrams duplicated", c.duplicated));
        }
        if c.reordered > 0 {
            flags.push(format!("{} datagrams reordered", c.reordered));
        }
        if !flags.is_empty() {
            let _ = writeln!(o, "   {}", flags.join("; "));
        }
        if c.latency.count > 0 {
            let l = &c.latency;
            let _ = writeln!(
                o,
                "   request/response: {} pairs, mean {}, p50 {}, p99 {}, max {}",
                l.count,
                ms(l.mean_ns),
                ms(l.p50_ns as f64),
                ms(l.p99_ns as f64),
                ms(l.max_ns as f64)
            );
        }
    }
    let _ = writeln!(
        o,
        "\nwaiting per process and peer (receive / multiplexer / send):"
    );
    for p in &s.processes {
        if p.waits.is_empty() {
            continue;
        }
        let _ = writeln!(o, "  {}:{} {}", p.host, p.pid, p.process);
        for (peer, w) in &p.waits {
            let _ = writeln!(
                o,
                "    {:<32} {:>12} {:>12} {:>12}",
                peer,
                ms(w.receive_ns as f64),
                ms(w.multiplexer_ns),
                ms(w.send_ns as f64)
            );
        }
    }
    if s.clock_offsets.len() > 1 {
        let _ = writeln!(
            o,
            "\nclock offsets (add to a host's times to get the reference's):"
        );
        for h in &s.clock_offsets {
            let _ = writeln!(
                o,
                "  {:<24} {:+.0} ns ± {:.0} ns, drift {:+.2} ppm ± {:.2} (from {} messages{})",
                h.host,
                h.offset_ns,
                h.uncertainty_ns,
                h.drift_ppm,
                h.drift_uncertainty_ppm,
                h.messages,
                if h.inconsistent { ", inconsistent" } else { "" }
            );
        }
    }
    let _ = writeln!(
        o,
        "\ncausality: Lamport times up to {}; {} one-host violations; {} edges ignored",
        s.lamport_max, s.violations, s.broken_edges
    );
    let lc = &s.logical_clock;
    if lc.violations_before > 0 {
        let _ = writeln!(
            o,
            "logical clock: {} receives before their sends once the clocks were corrected;              {} ops moved forward, at most {} ns (receives held to {} ns after their send);              {} left",
            lc.violations_before, lc.moved, lc.max_shift_ns, lc.min_latency_ns, lc.violations_after
        );
    }
    let call = |c: &CallRef| {
        format!(
            "{}:{}/{} {}(fd {}) [{} .. {}] ns",
            c.host, c.pid, c.tid, c.func, c.fd, c.start_ns, c.end_ns
        )
    };
    for v in &s.violating_flows {
        let conn = v.connection.map_or("?".to_string(), |c| format!("#{c}"));
        let _ = writeln!(
            o,
            "  violation on {conn}: {} bytes at offset {} sent by {} received by {}: the \
             receive ended {} ns before the send began",
            v.bytes,
            v.offset,
            call(&v.send),
            call(&v.recv),
            v.by_ns
        );
    }
    let _ = NO_SOCK;
    o
}
