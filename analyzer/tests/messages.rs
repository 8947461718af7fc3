//! The messages stage on hand-built traces: stream matching (partial transfers, peeks,
//! resets, gaps, reused four-tuples, untraced peers), datagrams, Lamport clocks,
//! happens-before, clock offsets — and a property test that every byte is attributed once
//! or reported, never wrongly.

use analyzer::decode::{TraceBuilder, TraceSet};
use analyzer::messages::{self, sockets::OpRef, summary, ConnKind, Messages, Reason};
use bufpool::format::{Addr, LibFn, LibOpts};
use proptest::prelude::*;

fn v4(port: u16) -> Addr {
    Addr::new(2, port, &[127, 0, 0, 1])
}

/// A process on a shared clock: events are placed at absolute TSC values.
struct P(TraceBuilder);

impl P {
    fn new(host: &str, pid: u32) -> P {
        P(TraceBuilder::new(host, pid, pid))
    }
    fn at(&mut self, t: u64) -> &mut Self {
        let now = self.0.now();
        if t > now {
            self.0.wait(t - now);
        }
        self
    }
    fn connect(&mut self, fd: i32, local: Addr, peer: Addr) {
        self.0.lib(
            0x10,
            LibFn::Connect,
            LibOpts {
                fd: Some(fd),
                ret: Some(0),
                local: Some(local),
                peer: Some(peer),
                ..Default::default()
            },
        );
    }
    fn accept(&mut self, lfd: i32, fd: i32, local: Addr, peer: Addr) {
        self.0.lib(
            0x20,
            LibFn::Accept,
            LibOpts {
                fd: Some(lfd),
                ret: Some(fd as i64),
                local: Some(local),
                peer: Some(peer),
                ..Default::default()
            },
        );
    }
    fn io(&mut self, f: LibFn, fd: i32, len: u64, ret: i64, flags: u32, errno: Option<i32>) {
        self.0.lib(
            0x30,
            f,
            LibOpts {
                fd: Some(fd),
                len: Some(len),
                ret: Some(ret),
                flags: Some(flags),
                errno,
                ..Default::default()
            },
        );
    }
    /// A datagram call whose exit carries addresses (a send's destination or a receive's
    /// source as `peer`; a send's socket address once as `local`).
    fn dgram(&mut self, f: LibFn, fd: i32, n: i64, local: Option<Addr>, peer: Addr) {
        self.0.lib(
            0x38,
            f,
            LibOpts {
                fd: Some(fd),
                len: Some(n.max(0) as u64),
                ret: Some(n),
                local,
                peer: Some(peer),
                ..Default::default()
            },
        );
    }
    fn send(&mut self, fd: i32, n: i64) {
        self.io(LibFn::Send, fd, n as u64, n, 0, None)
    }
    fn recv(&mut self, fd: i32, n: i64) {
        self.io(LibFn::Recv, fd, 4096, n, 0, None)
    }
    fn close(&mut self, fd: i32) {
        self.0.lib(
            0x40,
            LibFn::Close,
            LibOpts {
                fd: Some(fd),
                ret: Some(0),
                ..Default::default()
            },
        );
    }
}

fn run(ps: Vec<P>) -> Messages {
    let set = TraceSet {
        processes: ps.into_iter().map(|p| p.0.finish()).collect(),
    };
    let m = messages::analyze(&set).expect("analyze");
    streamed_flows_agree(&set, &m);
    m
}

/// The bounded-memory pass of the export finds the flows of the stage: all of them
/// where no entry was lost, a subset (never another flow) where some were.
fn streamed_flows_agree(set: &TraceSet, m: &Messages) {
    use analyzer::messages::streamed::{stream_flows, CallKey, StreamFlow};
    let mut got = std::collections::BTreeSet::new();
    stream_flows(set, &std::env::temp_dir(), |f| {
        assert!(got.insert(f), "flow twice: {f:?}");
    })
    .expect("streamed pass");
    let key = |r: OpRef| {
        let o = m.op(r);
        let threads = &set.processes[r.proc as usize].threads;
        CallKey {
            proc: r.proc,
            thread: threads.iter().position(|t| t.tid == o.tid).expect("thread") as u32,
            start: o.start,
        }
    };
    let want: std::collections::BTreeSet<StreamFlow> = m
        .conns
        .iter()
        .flat_map(|c| c.flows())
        .map(|f| StreamFlow {
            send: key(f.send),
            recv: key(f.recv),
            offset: f.offset,
            bytes: f.bytes,
            recv_end_ns: m.op_ns(f.recv).1,
        })
        .collect();
    let gaps = m
        .procs
        .iter()
        .any(|p| p.ops.iter().any(|o| o.kind == messages::ops::OpKind::Gap));
    if gaps {
        assert!(got.is_subset(&want), "streamed {got:?}\nstage {want:?}");
    } else {
        assert_eq!(got, want);
    }
}

fn client_server() -> (P, P) {
    let mut c = P::new("h", 10);
    let mut s = P::new("h", 20);
    s.at(1_000_000);
    c.at(2_000_000).connect(3, v4(40000), v4(7000));
    s.at(2_100_000).accept(5, 6, v4(7000), v4(40000));
    (c, s)
}

/// A request of 100 bytes from the client and a reply of 7 from the server.
fn request_reply() -> (P, P) {
    let (mut c, mut s) = client_server();
    c.at(3_000_000).send(3, 100);
    s.at(3_200_000).recv(6, 100);
    s.at(3_300_000).send(6, 7);
    c.at(3_500_000).recv(3, 7);
    (c, s)
}

/// A unit of process `pid` (its main thread) on host `h` from TSC `a` to `b`.
fn span(id: &str, pid: u32, a: u64, b: u64) -> analyzer::messages::links::UnitSpan {
    analyzer::messages::links::UnitSpan {
        id: id.into(),
        host: "h".into(),
        pid,
        tid: pid,
        tsc_start: a,
        tsc_end: b,
    }
}

/// The units of [`request_reply`]: the client's request and reply units, the server's
/// handler.
fn request_reply_units() -> Vec<analyzer::messages::links::UnitSpan> {
    vec![
        span("req", 10, 2_900_000, 3_099_999),
        span("handler", 20, 3_200_000, 3_399_999),
        span("reply", 10, 3_400_000, 3_600_000),
    ]
}

#[test]
fn partial_transfers_match_many_to_many_in_byte_offsets() {
    let (mut c, mut s) = client_server();
    c.at(3_000_000).send(3, 100);
    c.at(3_100_000).send(3, 50);
    s.at(3_200_000).recv(6, 30);
    s.at(3_300_000).recv(6, 120);
    s.at(3_400_000).send(6, 10);
    c.at(3_500_000).recv(3, 10);
    let m = run(vec![c, s]);
    assert_eq!(m.conns.len(), 1);
    let conn = &m.conns[0];
    assert_eq!(conn.kind, ConnKind::Tcp);
    assert_eq!(conn.ab.sent, 150);
    assert_eq!(conn.ab.matched, 150);
    assert_eq!(conn.ab.flows.len(), 3, "{:?}", conn.ab.flows);
    let bytes: Vec<u64> = conn.ab.flows.iter().map(|f| f.bytes).collect();
    assert_eq!(bytes, vec![30, 70, 50]);
    assert_eq!(conn.ba.matched, 10);
    assert!(conn.ab.unmatched.is_empty() && conn.ba.unmatched.is_empty());
    // Causality: every receive after its send, in Lamport time and on the one host's clock.
    assert!(m.violations.is_empty());
    for f in m.flows() {
        let (_, _, ls) = m.event_id(f.send);
        let (_, _, lr) = m.event_id(f.recv);
        assert!(lr > ls);
    }
    let hb = m.causality();
    let f0 = conn.ab.flows[0];
    assert!(hb.happens_before(f0.send, f0.recv));
    assert!(!hb.happens_before(f0.recv, f0.send));
    let sum = summary::summarize(&m);
    assert_eq!(sum.totals.sent_bytes, 160);
    assert_eq!(sum.totals.matched_bytes, 160);
    assert_eq!(sum.totals.unmatched_bytes, 0);
    assert_eq!(sum.totals.messages, 4);
    assert_eq!(sum.connections[0].latency.count, 1);
    let text = summary::text(&sum);
    assert!(text.contains("h:10 fd 3 127.0.0.1:40000"), "{text}");
}

#[test]
fn peeks_consume_nothing_and_resets_lose_bytes_in_flight() {
    let (mut c, mut s) = client_server();
    c.at(3_000_000).send(3, 100);
    s.at(3_100_000).io(LibFn::Recv, 6, 100, 20, 0x2, None); // MSG_PEEK
    s.at(3_200_000).recv(6, 40);
    s.at(3_300_000).io(LibFn::Recv, 6, 100, -1, 0, Some(104)); // ECONNRESET
    let m = run(vec![c, s]);
    let d = &m.conns[0].ab;
    assert_eq!(d.peeked, 20);
    assert_eq!(d.matched, 40);
    assert_eq!(d.unmatched.len(), 1);
    assert_eq!(d.unmatched[0].bytes, 60);
    assert_eq!(d.unmatched[0].reason, Reason::LostInFlight);
    assert!(m.conns[0].reset);
}

#[test]
fn a_sender_gap_is_resynchronized_at_end_of_stream() {
    let (mut c, mut s) = client_server();
    c.at(3_000_000).send(3, 100);
    c.0.lose(3); // a send of 25 bytes was lost with two other entries
    c.at(3_200_000).send(3, 50);
    c.at(3_250_000).close(3);
    s.at(3_300_000).recv(6, 100);
    s.at(3_400_000).recv(6, 75);
    s.at(3_500_000).recv(6, 0);
    let m = run(vec![c, s]);
    let d = &m.conns[0].ab;
    assert_eq!(d.resynced, 1);
    assert_eq!(d.matched, 150);
    // The receive of 75 holds 25 bytes of the lost send and 50 of the recorded one.
    let gap: u64 = d
        .unmatched
        .iter()
        .filter(|u| u.reason == Reason::Gap)
        .map(|u| u.bytes)
        .sum();
    assert_eq!(gap, 25);
    let last = d.flows.last().unwrap();
    assert_eq!((last.offset, last.bytes), (125, 50));
}

#[test]
fn an_unresolved_gap_is_reported_never_guessed() {
    let (mut c, mut s) = client_server();
    c.at(3_000_000).send(3, 100);
    c.0.lose(3);
    c.at(3_200_000).send(3, 50);
    s.at(3_300_000).recv(6, 100);
    s.at(3_400_000).recv(6, 60); // no end of stream: the shift is unknown
    let m = run(vec![c, s]);
    let d = &m.conns[0].ab;
    assert_eq!(d.matched, 100);
    assert_eq!(d.flows.len(), 1);
    let gap: u64 = d
        .unmatched
        .iter()
        .filter(|u| u.reason == Reason::Gap)
        .map(|u| u.bytes)
        .sum();
    assert_eq!(gap, 110);
}

#[test]
fn reused_four_tuples_pair_in_time_order_and_untraced_peers_are_reported() {
    let mut c = P::new("h", 10);
    let mut s = P::new("h", 20);
    for k in 0..3u64 {
        let t = 1_000_000 + k * 1_000_000;
        c.at(t).connect(3, v4(40000), v4(7000));
        s.at(t + 10_000).accept(5, 6, v4(7000), v4(40000));
        c.at(t + 20_000).send(3, 10 + k as i64);
        s.at(t + 30_000).recv(6, 10 + k as i64);
        c.at(t + 40_000).close(3);
        s.at(t + 50_000).close(6);
    }
    // A connection to a server that was not traced.
    c.at(9_000_000).connect(4, v4(40001), v4(9999));
    c.at(9_100_000).send(4, 77);
    let m = run(vec![c, s]);
    let paired: Vec<_> = m.conns.iter().filter(|c| c.b.is_some()).collect();
    assert_eq!(paired.len(), 3);
    for (k, p) in paired.iter().enumerate() {
        assert_eq!(p.ab.matched, 10 + k as u64);
        assert!(p.ab.unmatched.is_empty());
    }
    let lone = m.conns.iter().find(|c| c.b.is_none()).unwrap();
    assert_eq!(lone.ab.unmatched[0].reason, Reason::PeerUntraced);
    assert_eq!(lone.ab.unmatched[0].bytes, 77);
}

#[test]
fn a_descriptor_without_setup_is_unmatched_with_the_reason() {
    let mut c = P::new("h", 10);
    c.at(1_000_000).send(8, 5);
    let m = run(vec![c]);
    assert_eq!(m.conns[0].ab.unmatched[0].reason, Reason::NoSetup);
}

#[test]
fn clock_offsets_across_hosts_are_bounded_by_messages() {
    // Host b's clock is 1 ms ahead; messages take 50 µs one way.
    let mut c = P::new("a", 10);
    let mut s = P::new("b", 20);
    let skew = 1_000_000u64;
    let ca = Addr::new(2, 40000, &[10, 0, 0, 1]);
    let sa = Addr::new(2, 7000, &[10, 0, 0, 2]);
    c.at(2_000_000).connect(3, ca, sa);
    s.at(2_050_000 + skew).accept(5, 6, sa, ca);
    for k in 0..5u64 {
        let t = 3_000_000 + k * 1_000_000;
        c.at(t).send(3, 10);
        s.at(t + 50_000 + skew).recv(6, 10);
        s.at(t + 60_000 + skew).send(6, 10);
        c.at(t + 110_000).recv(3, 10);
    }
    let m = run(vec![c, s]);
    assert_eq!(m.conns[0].ab.matched, 50);
    let b = m.offsets.iter().find(|h| h.host == "b").unwrap();
    assert_eq!(b.reference, "a");
    // θ ≈ −1 ms within the uncertainty.
    assert!(
        (b.offset_ns + skew as f64).abs() <= b.uncertainty_ns + 1.0,
        "{b:?}"
    );
    assert!(b.uncertainty_ns < 100_000.0, "{b:?}");
}

#[test]
fn receives_the_line_leaves_before_their_sends_are_moved_by_the_logical_clock() {
    // Host b's clock is 1 ms ahead, then steps 0.4 ms further (no line fits both halves);
    // messages take 50 µs one way.
    let mut c = P::new("a", 10);
    let mut s = P::new("b", 20);
    let ca = Addr::new(2, 40000, &[10, 0, 0, 1]);
    let sa = Addr::new(2, 7000, &[10, 0, 0, 2]);
    let skew = |k: u64| if k < 5 { 1_000_000u64 } else { 1_400_000 };
    c.at(2_000_000).connect(3, ca, sa);
    s.at(2_050_000 + skew(0)).accept(5, 6, sa, ca);
    for k in 0..10u64 {
        let t = 3_000_000 + k * 1_000_000;
        c.at(t).send(3, 10);
        s.at(t + 50_000 + skew(k)).recv(6, 10);
        s.at(t + 60_000 + skew(k)).send(6, 10);
        c.at(t + 110_000).recv(3, 10);
    }
    let m = run(vec![c, s]);
    let b = m.offsets.iter().find(|h| h.host == "b").unwrap();
    assert!(b.inconsistent, "{b:?}");
    assert!(m.aligned_violations > 0, "the line leaves violations");
    let lc = &m.logical;
    assert_eq!(lc.violations_before, m.aligned_violations, "{lc:?}");
    assert_eq!(lc.violations_after, 0, "{lc:?}");
    assert!(lc.moved > 0 && lc.max_shift_ns > 0, "{lc:?}");
    // No more than the step (and the least latency) is ever added.
    assert!(lc.max_shift_ns <= 400_000 + lc.min_latency_ns, "{lc:?}");
    // Each process's ops keep their order, and at least KEEP of every interval.
    let corr = |h: &str, t: i64| {
        t + m
            .offsets
            .iter()
            .find(|o| o.host == h)
            .map_or(0, |o| o.correction_ns(t))
    };
    for (pi, p) in m.procs.iter().enumerate() {
        let ends: Vec<i64> = p
            .ops
            .iter()
            .enumerate()
            .map(|(i, o)| corr(&p.host, p.ns(o.end)) + lc.shift_ns[pi][i])
            .collect();
        for (i, w) in ends.windows(2).enumerate() {
            let gap = corr(&p.host, p.ns(p.ops[i + 1].end)) - corr(&p.host, p.ns(p.ops[i].end));
            let kept = (messages::logical::KEEP * gap as f64) as i64 - 1;
            assert!(w[1] - w[0] >= kept, "{}: op {i}: {w:?}", p.host);
        }
    }
    // Said in the summary.
    let sm = summary::summarize(&m);
    let text = summary::text(&sm);
    assert!(text.contains("logical clock:"), "{text}");
    let j = serde_json::to_value(&sm).unwrap();
    assert_eq!(j["logical_clock"]["violations_after"], 0, "{j:#}");
    assert!(j["logical_clock"]["moved"].as_u64().unwrap() > 0);
}

#[test]
fn socketpair_across_fork_and_datagrams_by_size_and_order() {
    let (mut par, kids) = socketpair_and_forks(1);
    let mut child = kids.into_iter().next().expect("one child");
    child.at(1_300_000).send(4, 42);
    par.at(1_400_000).recv(3, 42);
    // UDP: connected sender → bound receiver; one datagram lost, two reordered.
    let ua = Addr::new(2, 5000, &[127, 0, 0, 1]);
    let ub = Addr::new(2, 6000, &[127, 0, 0, 1]);
    par.at(2_000_000).0.lib(
        0x70,
        LibFn::Socket,
        LibOpts {
            flags: Some(2),
            ret: Some(7),
            ..Default::default()
        },
    );
    par.at(2_100_000).connect(7, ua, ub);
    child.at(2_000_000).0.lib(
        0x70,
        LibFn::Socket,
        LibOpts {
            flags: Some(2),
            ret: Some(8),
            ..Default::default()
        },
    );
    child.at(2_050_000).0.lib(
        0x80,
        LibFn::Bind,
        LibOpts {
            fd: Some(8),
            ret: Some(0),
            local: Some(ub),
            ..Default::default()
        },
    );
    for (k, n) in [10, 20, 30, 40].iter().enumerate() {
        par.at(3_000_000 + k as u64 * 100_000)
            .io(LibFn::Sendto, 7, *n, *n as i64, 0, None);
    }
    for (k, n) in [10, 30, 20].iter().enumerate() {
        child
            .at(4_000_000 + k as u64 * 100_000)
            .io(LibFn::Recvfrom, 8, 100, *n, 0, None);
    }
    let m = run(vec![par, child]);
    let pair = m.conns.iter().find(|c| c.kind == ConnKind::Pair).unwrap();
    assert_eq!(pair.ba.matched + pair.ab.matched, 42);
    let dg = m
        .conns
        .iter()
        .find(|c| c.kind == ConnKind::Datagram && c.b.is_some())
        .unwrap();
    assert_eq!(dg.ab.flows.len(), 3);
    assert_eq!(dg.reordered, 1);
    let lost: Vec<_> = dg
        .ab
        .unmatched
        .iter()
        .map(|u| (u.reason, u.bytes))
        .collect();
    assert_eq!(lost, vec![(Reason::DatagramLost, 40)]);
    // The fork edge orders the child's first event after the fork.
    let hb = m.causality();
    let fork = OpRef { proc: 0, idx: 1 };
    let child_proc = m.procs.iter().position(|p| p.pid == 11).unwrap() as u32;
    let parent_proc = m.procs.iter().position(|p| p.pid == 10).unwrap() as u32;
    assert!(hb.happens_before(
        OpRef {
            proc: parent_proc,
            idx: fork.idx
        },
        OpRef {
            proc: child_proc,
            idx: 0
        }
    ));
    assert!(m.violations.is_empty());
    assert_eq!(m.broken_edges, 0);
}

/// A parent that made a socketpair (fds 3 and 4) and forked `kids` children (pids 11…),
/// which inherit both ends: the children, returned after the parent.
fn socketpair_and_forks(kids: u32) -> (P, Vec<P>) {
    let mut par = P::new("h", 10);
    par.at(1_000_000).0.lib(
        0x50,
        LibFn::Socketpair,
        LibOpts {
            fd: Some(3),
            fd2: Some(4),
            flags: Some(1),
            ret: Some(0),
            ..Default::default()
        },
    );
    let mut children = Vec::new();
    for k in 0..kids {
        let pid = 11 + k;
        par.at(1_100_000 + k as u64 * 10_000).0.lib(
            0x60,
            LibFn::Fork,
            LibOpts {
                ret: Some(pid as i64),
                ..Default::default()
            },
        );
        let mut c = P::new("h", pid);
        c.at(1_200_000 + k as u64 * 10_000)
            .0
            .meta(&bufpool::format::Meta::Proc(bufpool::format::ProcRecord {
                reason: bufpool::format::ProcReason::Fork,
                pid,
                ppid: 10,
                start_ticks: 0,
                exe: b"/bin/x".to_vec(),
                argv: vec![],
            }));
        children.push(c);
    }
    (par, children)
}

impl P {
    /// A call from entry `t0` to exit `t1` (the thread is inside it in between).
    fn call(&mut self, f: LibFn, fd: i32, n: i64, t0: u64, t1: u64) {
        let o = LibOpts {
            fd: Some(fd),
            len: Some(n.max(0) as u64),
            ..Default::default()
        };
        self.at(t0).0.lib_enter(0x90, f, o);
        let o = LibOpts {
            fd: Some(fd),
            ret: Some(n),
            ..Default::default()
        };
        self.at(t1).0.lib_exit(0x90, f, o);
    }
}

/// The flow of the racing-writers workload (tests/tests/messages_cluster.rs) that ended
/// before its send began, as recorded (times shifted): worker B's send handed its 8 bytes
/// to the kernel and was preempted before its exit was stamped; the parent's receive read
/// them; worker A sent its 8 bytes, entry and exit, while B was still inside its send. In
/// exit order A's send came first and the receive was matched to it — a send that began
/// after the receive ended. A send may not take bytes a receive read before it began: B.
#[test]
fn a_send_never_takes_bytes_read_before_it_began() {
    let (mut par, mut kids) = socketpair_and_forks(2);
    par.call(LibFn::Recv, 3, 8, 1_900_000, 2_100_000);
    kids[0].call(LibFn::Send, 4, 8, 2_000_000, 2_600_000); // B
    kids[1].call(LibFn::Send, 4, 8, 2_300_000, 2_400_000); // A
    par.call(LibFn::Recv, 3, 8, 2_450_000, 2_700_000);
    let m = run(vec![par, kids.remove(0), kids.remove(0)]);
    assert!(m.violations.is_empty(), "{:?}", m.violations);
    assert_eq!(
        senders_by_receive(&m),
        vec![(1_900_000, 11), (2_450_000, 12)]
    );
    // Both sends overlapped: their order is inferred, and said so.
    let pair = m.conns.iter().find(|c| c.kind == ConnKind::Pair).unwrap();
    assert_eq!(pair.ab.order_inferred + pair.ba.order_inferred, 16);
    let sum = summary::summarize(&m);
    let c = sum
        .connections
        .iter()
        .find(|c| c.kind == ConnKind::Pair)
        .unwrap();
    assert_eq!(c.order_inferred_bytes, 16);
    let text = summary::text(&sum);
    assert!(
        text.contains("16 bytes sent by threads whose sends overlapped"),
        "{text}"
    );
}

/// Overlapping sends that no receive constrains keep their exit order (on racing
/// writers, the order that most often matches what the receiver really read): A entered
/// first, B entered later and exited first; the receive ended after both.
#[test]
fn overlapping_sends_keep_their_exit_order_where_causality_allows() {
    let (mut par, mut kids) = socketpair_and_forks(2);
    kids[0].call(LibFn::Send, 4, 8, 2_000_000, 2_500_000); // A
    kids[1].call(LibFn::Send, 4, 8, 2_100_000, 2_200_000); // B
    par.call(LibFn::Recv, 3, 8, 1_900_000, 2_300_000);
    par.call(LibFn::Recv, 3, 8, 2_600_000, 2_700_000);
    let m = run(vec![par, kids.remove(0), kids.remove(0)]);
    assert!(m.violations.is_empty(), "{:?}", m.violations);
    assert_eq!(
        senders_by_receive(&m),
        vec![(1_900_000, 12), (2_600_000, 11)]
    );
}

/// A sender that stayed in its send longer than `IN_FLIGHT_NS` after the receive that read
/// its bytes ended is not waited for (the bounded-memory pass could not): exit order, and
/// the receive that then precedes its send is reported as a violation, not hidden.
#[test]
fn a_sender_stuck_beyond_the_in_flight_bound_is_reported() {
    let stuck = analyzer::messages::stream::IN_FLIGHT_NS as u64 + 1_000_000;
    let (mut par, mut kids) = socketpair_and_forks(2);
    par.call(LibFn::Recv, 3, 8, 1_900_000, 2_100_000);
    kids[0].call(LibFn::Send, 4, 8, 2_000_000, 2_100_000 + stuck); // B
    kids[1].call(LibFn::Send, 4, 8, 2_300_000, 2_400_000); // A
    par.call(
        LibFn::Recv,
        3,
        8,
        2_100_000 + stuck + 1000,
        2_100_000 + stuck + 2000,
    );
    let m = run(vec![par, kids.remove(0), kids.remove(0)]);
    assert_eq!(m.violations.len(), 1, "{:?}", m.violations);
    assert_eq!(senders_by_receive(&m)[0], (1_900_000, 12));
    // The summary lists it in full: both calls, their times, by how much.
    let sum = summary::summarize(&m);
    assert_eq!(sum.violations, 1);
    let v = &sum.violating_flows[0];
    assert_eq!((v.send.pid, v.recv.pid, v.bytes, v.offset), (12, 10, 8, 0));
    assert_eq!((v.send.start_tsc, v.recv.end_tsc), (2_300_000, 2_100_000));
    assert_eq!(v.by_ns, 200_000);
    assert_eq!(v.send.func, "send");
    let c = v.connection.expect("its connection");
    assert_eq!(sum.connections[c].kind, ConnKind::Pair);
    let text = summary::text(&sum);
    assert!(
        text.contains(&format!(
            "violation on #{c}: 8 bytes at offset 0 sent by h:12/12 send(fd 4)"
        )),
        "{text}"
    );
    assert!(
        text.contains("the receive ended 200000 ns before the send began"),
        "{text}"
    );
    let json = serde_json::to_value(&sum).unwrap();
    assert_eq!(json["violating_flows"][0]["by_ns"], 200_000);
}

/// (entry of the receive, pid of the sender) of every flow of the socketpair, by receive.
fn senders_by_receive(m: &Messages) -> Vec<(u64, u32)> {
    let pair = m.conns.iter().find(|c| c.kind == ConnKind::Pair).unwrap();
    let mut got: Vec<(u64, u32)> = pair
        .flows()
        .map(|f| (m.op(f.recv).start, m.procs[f.send.proc as usize].pid))
        .collect();
    got.sort_unstable();
    got
}

/// Writers sharing one socket end, their calls overlapping at random: what is generated.
#[derive(Clone, Debug)]
struct Shared {
    /// Per message, in the kernel's order: (writer, size, entry slack, exit slack).
    msgs: Vec<(u8, u16, u32, u32)>,
    /// Sizes the reader asks for, with the slack of each receive before and after the
    /// instant it took its bytes.
    reads: Vec<(u16, u32, u32)>,
}

fn shared() -> impl Strategy<Value = Shared> {
    (
        prop::collection::vec((0u8..4, 1u16..60, 0u32..20_000, 100u32..20_000), 1..40),
        prop::collection::vec((1u16..90, 0u32..20_000, 100u32..20_000), 1..80),
    )
        .prop_map(|(msgs, reads)| Shared { msgs, reads })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]
    /// Several forked writers on one end of a socketpair, one reader on the other: each
    /// message enters the stream at an instant between its send's entry and exit, each
    /// receive takes its bytes at an instant between its entry and exit, both orders
    /// consistent with what really happened; the calls overlap at random (a writer
    /// preempted inside a send). Then no receive is matched to a send that began after
    /// it ended, every byte is matched once, and where no two writers' sends overlap in
    /// time (their order is known) every byte is attributed to the send that wrote it.
    #[test]
    fn no_receive_is_matched_to_a_send_that_began_after_it_ended(c in shared()) {
        const GAP: u64 = 10_000;
        let (mut par, mut kids) = socketpair_and_forks(4);
        let t_of = |k: usize| 2_000_000 + GAP * k as u64;
        // Each message's call: entry ≤ its instant ≤ exit, a writer's calls in sequence.
        let mut calls: Vec<(u64, u64)> = Vec::new();
        let mut last_exit = [0u64; 4];
        let mut last_at = [0u64; 4];
        for (k, &(w, _, a, b)) in c.msgs.iter().enumerate() {
            let (w, t) = (w as usize, t_of(k));
            // Leave room after the writer's previous exit (entries advance the clock).
            let lo = last_exit[w].max(last_at[w]) + 300;
            let t0 = t.saturating_sub(a as u64).max(lo).min(t);
            let t1 = t + b as u64;
            calls.push((t0, t1));
            last_exit[w] = t1;
            last_at[w] = t;
        }
        // The writer's next call cannot begin before this one ended: where the slack
        // would make them overlap, the earlier exit is moved back (still after the instant).
        for w in 0..4u8 {
            let ks: Vec<usize> = (0..c.msgs.len()).filter(|&k| c.msgs[k].0 == w).collect();
            for p in ks.windows(2) {
                let (k1, k2) = (p[0], p[1]);
                if calls[k1].1 + 300 > calls[k2].0 {
                    calls[k1].1 = t_of(k1) + 100;
                    calls[k2].0 = calls[k2].0.max(calls[k1].1 + 300).min(t_of(k2));
                }
            }
        }
        // Ground truth: the stream's bytes in the kernel's order.
        let mut owner: Vec<usize> = Vec::new();
        for (k, m) in c.msgs.iter().enumerate() {
            owner.extend(std::iter::repeat_n(k, m.1 as usize));
        }
        let total = owner.len();
        let mut per_writer: Vec<Vec<usize>> = vec![Vec::new(); 4];
        for (k, m) in c.msgs.iter().enumerate() {
            per_writer[m.0 as usize].push(k);
        }
        for (w, ks) in per_writer.iter().enumerate() {
            for &k in ks {
                kids[w].call(LibFn::Send, 4, c.msgs[k].1 as i64, calls[k].0, calls[k].1);
            }
        }
        // The reader: each receive takes its bytes once the last of them is in, after
        // the previous receive ended.
        let mut at = 0usize;
        let mut prev_exit = 1_900_000u64;
        let mut reads: Vec<(u64, usize, usize)> = Vec::new(); // (entry, offset, len)
        for &(n, a, b) in &c.reads {
            if at >= total {
                break;
            }
            let n = (n as usize).min(total - at);
            let ready = t_of(owner[at + n - 1]) + 1;
            let u = ready.max(prev_exit + 600);
            let r0 = u.saturating_sub(a as u64).max(prev_exit + 300);
            let r1 = u + b as u64;
            par.call(LibFn::Recv, 3, n as i64, r0, r1);
            reads.push((r0, at, n));
            prev_exit = r1;
            at += n;
        }
        let received = at;
        let mut ps = vec![par];
        ps.append(&mut kids);
        let m = run(ps);
        prop_assert!(m.violations.is_empty(), "{:?}", m.violations);
        let pair = m.conns.iter().find(|x| x.kind == ConnKind::Pair).expect("the pair");
        prop_assert_eq!(pair.ab.matched + pair.ba.matched, received as u64);
        // Where the writers' calls never overlap, the order is known: every byte exact.
        let overlap = (0..calls.len()).any(|i| {
            (0..calls.len()).any(|j| {
                c.msgs[i].0 != c.msgs[j].0 && calls[i].0 < calls[j].1 && calls[j].0 < calls[i].1
            })
        });
        // The bytes whose order is inferred: those of sends overlapping another writer's.
        let inferred: u64 = (0..calls.len())
            .filter(|&i| {
                (0..calls.len()).any(|j| {
                    c.msgs[i].0 != c.msgs[j].0
                        && calls[i].0 < calls[j].1
                        && calls[j].0 < calls[i].1
                })
            })
            .map(|i| c.msgs[i].1 as u64)
            .sum();
        prop_assert_eq!(pair.ab.order_inferred + pair.ba.order_inferred, inferred);
        prop_assert_eq!(inferred > 0, overlap);
        if !overlap {
            for f in pair.flows() {
                let o = m.op(f.send);
                let w = (m.procs[f.send.proc as usize].pid - 11) as usize;
                let k = *per_writer[w]
                    .iter()
                    .find(|&&k| calls[k].0 == o.start)
                    .expect("the send");
                let &(_, roff, rlen) = reads
                    .iter()
                    .find(|r| r.0 == m.op(f.recv).start)
                    .expect("the receive");
                let truly = (roff..roff + rlen).filter(|&x| owner[x] == k).count();
                prop_assert_eq!(truly as u64, f.bytes, "flow {:?}", f);
            }
        }
    }
}

/// One simulated direction: the sender writes random chunks, some lost from the trace; the
/// receiver reads random sizes, some peeks; the stream may end by EOF or reset.
#[derive(Clone, Debug)]
struct Case {
    sends: Vec<(u16, bool)>,
    reads: Vec<(u16, bool)>,
    recv_gap_at: Option<usize>,
    end: u8,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((1u16..300, prop::bool::weighted(0.1)), 1..30),
        prop::collection::vec((1u16..400, prop::bool::weighted(0.1)), 1..40),
        prop::option::weighted(0.2, 0usize..40),
        0u8..3,
    )
        .prop_map(|(sends, reads, recv_gap_at, end)| Case {
            sends,
            reads,
            recv_gap_at,
            end,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]
    #[test]
    fn every_byte_is_attributed_once_or_reported_never_wrongly(c in case()) {
        let (mut cl, mut sv) = client_server();
        let mut t = 3_000_000u64;
        // Ground truth: byte offset → (true send number); recorded sends' op indices.
        let mut owner: Vec<usize> = Vec::new();
        let mut send_op: Vec<Option<u32>> = Vec::new();
        let mut op_idx = 1u32; // op 0 is connect
        let mut pending_loss = false;
        for (k, &(n, lost)) in c.sends.iter().enumerate() {
            owner.extend(std::iter::repeat_n(k, n as usize));
            if lost {
                pending_loss = true;
                send_op.push(None);
                continue;
            }
            if pending_loss {
                cl.0.lose(2);
                op_idx += 1; // the gap is an op
                pending_loss = false;
            }
            cl.at(t).send(3, n as i64);
            send_op.push(Some(op_idx));
            op_idx += 1;
            t += 1000;
        }
        if pending_loss {
            // The tracer writes the count of a trailing loss when the thread flushes.
            cl.0.lose(2);
            cl.at(t).close(3);
        }
        let total = owner.len();
        // Receiver: reads consume the stream after all sends (simple timing).
        let mut at = 0usize;
        let mut rt = t + 1_000_000;
        let mut recv_ops: Vec<(u32, usize, usize)> = Vec::new(); // (op idx, offset, len)
        let mut rop = 1u32; // op 0 is accept
        let mut rgap_pending = false;
        for (k, &(n, peek)) in c.reads.iter().enumerate() {
            if at >= total { break; }
            let n = (n as usize).min(total - at);
            if c.recv_gap_at == Some(k) {
                // This read is lost from the trace.
                at += n;
                rgap_pending = true;
                continue;
            }
            if rgap_pending {
                sv.0.lose(2);
                rop += 1;
                rgap_pending = false;
            }
            if peek {
                sv.at(rt).io(LibFn::Recv, 6, 4096, n as i64, 0x2, None);
            } else {
                sv.at(rt).recv(6, n as i64);
                recv_ops.push((rop, at, n));
                at += n;
            }
            rop += 1;
            rt += 1000;
        }
        if rgap_pending {
            sv.0.lose(2);
        }
        match c.end {
            0 if at == total => { sv.at(rt).recv(6, 0); }
            1 => { sv.at(rt).io(LibFn::Recv, 6, 10, -1, 0, Some(104)); }
            _ => { sv.at(rt).close(6); }
        }
        let m = run(vec![cl, sv]);
        let conn = m.conns.iter().find(|x| x.b.is_some()).expect("paired");
        let d = &conn.ab;
        // Never wrong: each flow's bytes really went from that send to that receive.
        let client = m.procs.iter().position(|p| p.pid == 10).unwrap() as u32;
        for f in &d.flows {
            prop_assert_eq!(f.send.proc, client);
            let (_, roff, rlen) = *recv_ops.iter().find(|r| r.0 == f.recv.idx).expect("recv op");
            // The flow's bytes, in the receiver's true offsets: find them from the receive.
            let send_no = send_op.iter().position(|s| *s == Some(f.send.idx)).expect("send op");
            let truly: usize = (roff..roff + rlen).filter(|&o| owner[o] == send_no).count();
            prop_assert_eq!(truly as u64, f.bytes, "flow {:?}", f);
        }
        // Once: per op, matched + reported = its bytes.
        let mut per: std::collections::HashMap<(bool, u32), u64> = Default::default();
        for f in &d.flows {
            *per.entry((true, f.send.idx)).or_default() += f.bytes;
            *per.entry((false, f.recv.idx)).or_default() += f.bytes;
        }
        for u in &d.unmatched {
            *per.entry((u.sent, u.op.idx)).or_default() += u.bytes;
        }
        for (k, s) in send_op.iter().enumerate() {
            if let Some(i) = s {
                prop_assert_eq!(per.get(&(true, *i)).copied().unwrap_or(0), c.sends[k].0 as u64);
            }
        }
        for &(i, _, n) in &recv_ops {
            prop_assert_eq!(per.get(&(false, i)).copied().unwrap_or(0), n as u64);
        }
        prop_assert!(m.violations.is_empty());
    }
}

#[test]
fn units_know_where_their_bytes_came_from_and_went() {
    use analyzer::messages::links;
    let (c, s) = request_reply();
    let m = run(vec![c, s]);
    let mut units = request_reply_units();
    units.push(span("idle", 20, 1_000_000, 1_100_000));
    let l = links::unit_links(&m, &units);
    // What `culprit rank` computes for the units it lists: the same, for those only.
    let listed = links::unit_links_of(&m, &units, &|i| i < 2);
    assert_eq!(listed.len(), 2, "{listed:?}");
    for id in ["req", "handler"] {
        assert_eq!(listed[id], l[id], "{id}");
    }
    assert_eq!(l["handler"].received_from[0].unit.as_deref(), Some("req"));
    assert_eq!(l["handler"].received_from[0].bytes, 100);
    assert_eq!(l["handler"].sent_to[0].unit.as_deref(), Some("reply"));
    assert_eq!(l["req"].sent_to[0].process, "h:20");
    assert!(links::received_from(&m, &units, "handler", "req"));
    assert!(!links::received_from(&m, &units, "req", "handler"));
    let hb = m.causality();
    assert!(links::unit_happens_before(&m, &hb, &units[0], &units[2]));
    assert!(links::unit_happens_before(&m, &hb, &units[0], &units[1]));
    assert!(!links::unit_happens_before(&m, &hb, &units[1], &units[0]));
    let text = links::lines(&l["handler"], 3).join("\n");
    assert!(
        text.contains("received from h:10 req (100 bytes in 1 messages)"),
        "{text}"
    );
    // Vector clocks agree with happens-before.
    let vc = m.vector_clocks();
    let f = m.conns[0].ab.flows[0];
    let (s_vc, r_vc) = (
        &vc[f.send.proc as usize][f.send.idx as usize],
        &vc[f.recv.proc as usize][f.recv.idx as usize],
    );
    assert!(s_vc.iter().zip(r_vc).all(|(a, b)| a <= b) && s_vc != r_vc);
}

/// What `culprit show` computes for the one unit it shows: the links of that unit only,
/// from the bounded-memory pass, equal to the whole stage's (the other end named by its
/// unit among all).
#[test]
fn one_unit_is_linked_alone_from_the_streamed_flows() {
    use analyzer::messages::links;
    let (c, s) = request_reply();
    let set = TraceSet {
        processes: vec![c.0.finish(), s.0.finish()],
    };
    let m = messages::analyze(&set).expect("analyze");
    let units = request_reply_units();
    let all = links::unit_links(&m, &units);
    let wanted = |i: usize| units[i].id == "handler";
    let one = links::unit_links_streamed(&set, &units, &wanted, &std::env::temp_dir())
        .expect("streamed pass");
    assert_eq!(one.keys().collect::<Vec<_>>(), vec!["handler"]);
    assert_eq!(one["handler"], all["handler"]);
    assert_eq!(one["handler"].received_from[0].unit.as_deref(), Some("req"));
    assert_eq!(one["handler"].sent_to[0].unit.as_deref(), Some("reply"));
}

#[test]
fn unix_stream_sockets_pair_by_path_in_accept_order() {
    let path = Addr::new(1, 0, b"/tmp/x.sock");
    let unnamed = Addr::new(1, 0, &[]);
    let mut c1 = P::new("h", 10);
    let mut c2 = P::new("h", 11);
    let mut s = P::new("h", 20);
    c1.at(1_000_000).connect(3, unnamed, path);
    c2.at(1_100_000).connect(3, unnamed, path);
    s.0.wait(1_200_000 - s.0.now());
    for fd in [6, 7] {
        s.0.lib(
            0x20,
            LibFn::Accept,
            LibOpts {
                fd: Some(5),
                ret: Some(fd as i64),
                local: Some(path),
                ..Default::default()
            },
        );
    }
    c1.at(2_000_000).send(3, 11);
    c2.at(2_000_000).send(3, 22);
    s.at(3_000_000).recv(6, 11);
    s.at(3_100_000).recv(7, 22);
    let m = run(vec![c1, c2, s]);
    let unix: Vec<_> = m
        .conns
        .iter()
        .filter(|c| c.kind == ConnKind::Unix)
        .collect();
    assert_eq!(unix.len(), 2);
    for c in unix {
        assert!(c.b.is_some());
        assert_eq!(c.ab.matched, c.ab.sent);
        assert!(c.ab.unmatched.is_empty());
    }
}

/// Unconnected UDP: two senders that never bound (their ports recorded on their first
/// `sendto`) and one untraced source send to one bound receiver; matched by source,
/// destination, size and order, with reordering, a duplicate and a loss counted per pair.
#[test]
fn unconnected_datagrams_by_source_destination_size_and_order() {
    let rx = v4(7000);
    let (a_addr, b_addr) = (Addr::new(2, 4001, &[0; 4]), Addr::new(2, 4002, &[0; 4]));
    let socket = |p: &mut P, fd: i64| {
        p.0.lib(
            0x70,
            LibFn::Socket,
            LibOpts {
                flags: Some(2),
                ret: Some(fd),
                ..Default::default()
            },
        )
    };
    let mut r = P::new("h", 30);
    let mut a = P::new("h", 31);
    let mut b = P::new("h", 32);
    r.at(1_000_000);
    socket(&mut r, 5);
    r.0.lib(
        0x80,
        LibFn::Bind,
        LibOpts {
            fd: Some(5),
            ret: Some(0),
            local: Some(rx),
            ..Default::default()
        },
    );
    a.at(1_100_000);
    socket(&mut a, 3);
    b.at(1_100_000);
    socket(&mut b, 3);
    // A: 10, 20, 30; B: 50, 50 (the same sizes: only the sources tell them apart).
    a.at(2_000_000)
        .dgram(LibFn::Sendto, 3, 10, Some(a_addr), rx);
    a.at(2_100_000).dgram(LibFn::Sendto, 3, 20, None, rx);
    a.at(2_200_000).dgram(LibFn::Sendmsg, 3, 30, None, rx);
    b.at(2_050_000)
        .dgram(LibFn::Sendto, 3, 50, Some(b_addr), rx);
    b.at(2_150_000).dgram(LibFn::Sendto, 3, 50, None, rx);
    let from_a = v4(4001);
    let from_b = v4(4002);
    // 20 before 10 (reordered), 50 from B, 30, 20 again (a duplicate), then 50 from a
    // source never traced.
    r.at(3_000_000).dgram(LibFn::Recvfrom, 5, 20, None, from_a);
    r.at(3_100_000).dgram(LibFn::Recvfrom, 5, 10, None, from_a);
    r.at(3_200_000).dgram(LibFn::Recvmsg, 5, 50, None, from_b);
    r.at(3_300_000).dgram(LibFn::Recvfrom, 5, 30, None, from_a);
    r.at(3_400_000).dgram(LibFn::Recvfrom, 5, 20, None, from_a);
    r.at(3_500_000)
        .dgram(LibFn::Recvfrom, 5, 50, None, v4(4999));
    let m = run(vec![r, a, b]);
    let pair = |pid: u32| {
        m.conns
            .iter()
            .find(|c| {
                c.kind == ConnKind::Datagram
                    && c.b.is_some()
                    && m.procs[m.sockets[c.a as usize].proc as usize].pid == pid
            })
            .unwrap_or_else(|| panic!("no pair from {pid}"))
    };
    let pa = pair(31);
    assert_eq!(pa.ab.flows.len(), 3);
    assert_eq!((pa.reordered, pa.duplicated, pa.lost), (1, 1, 0));
    assert_eq!(pa.ab.matched, 60);
    let dup: Vec<_> = pa
        .ab
        .unmatched
        .iter()
        .map(|u| (u.reason, u.bytes))
        .collect();
    assert_eq!(dup, vec![(Reason::Duplicated, 20)]);
    let pb = pair(32);
    assert_eq!(pb.ab.flows.len(), 1);
    assert_eq!((pb.reordered, pb.duplicated, pb.lost), (0, 0, 1));
    let lost: Vec<_> = pb
        .ab
        .unmatched
        .iter()
        .map(|u| (u.reason, u.bytes))
        .collect();
    assert_eq!(lost, vec![(Reason::DatagramLost, 50)]);
    // The receive from the untraced source is reported with its reason.
    let untraced: u64 = m
        .conns
        .iter()
        .filter(|c| c.b.is_none())
        .flat_map(|c| c.ba.unmatched.iter().chain(c.ab.unmatched.iter()))
        .filter(|u| u.reason == Reason::PeerUntraced && !u.sent)
        .map(|u| u.bytes)
        .sum();
    assert_eq!(untraced, 50);
}

/// Ends met already open (the tracer's first-sight record: `IsSocket`, addresses, TCP byte
/// counts on the first data call's entry): two facing adopted ends pair and align by
/// their counts (bytes below the other side's base are `before_trace`); a second
/// descriptor of an accepted end (same addresses, same orientation) never pairs with it;
/// an adopted end without counts is never aligned.
#[test]
fn ends_met_mid_stream_pair_by_facing_addresses_and_align_by_their_counts() {
    let first_sight =
        |p: &mut P, fd: i32, f: LibFn, n: i64, l: Addr, pe: Addr, base: Option<(u64, u64)>| {
            p.0.lib_enter(
                0x90,
                f,
                LibOpts {
                    fd: Some(fd),
                    len: Some(n as u64),
                    is_socket: Some(true),
                    local: Some(l),
                    peer: Some(pe),
                    arg: base.map(|b| b.0),
                    arg2: base.map(|b| b.1),
                    ..Default::default()
                },
            );
            p.0.lib_exit(
                0x90,
                f,
                LibOpts {
                    fd: Some(fd),
                    ret: Some(n),
                    ..Default::default()
                },
            );
        };
    let (x, y) = (v4(6000), v4(7000));
    // U wrote 9 and read 4 before its trace began; V read 7 (2 of U's bytes still queued)
    // and wrote 4.
    let mut u = P::new("h", 42);
    let mut v = P::new("h", 43);
    u.at(1_000_000);
    first_sight(&mut u, 3, LibFn::Send, 20, x, y, Some((4, 9)));
    v.at(2_000_000);
    first_sight(&mut v, 5, LibFn::Recv, 22, y, x, Some((7, 4)));
    v.at(2_100_000).send(5, 6);
    u.at(2_200_000).recv(3, 6);
    // An accepted end (its client untraced) and a second descriptor of it met in another
    // process: same key, same orientation.
    let (srv, cli) = (v4(80), v4(5000));
    let mut s = P::new("h", 44);
    let mut t = P::new("h", 45);
    s.at(1_000_000).accept(3, 4, srv, cli);
    s.at(1_100_000).send(4, 10);
    t.at(1_500_000);
    first_sight(&mut t, 7, LibFn::Send, 5, srv, cli, Some((0, 10)));
    // Facing ends, one without counts.
    let (a, b) = (v4(8000), v4(9000));
    let mut w = P::new("h", 46);
    let mut z = P::new("h", 47);
    w.at(1_000_000);
    first_sight(&mut w, 3, LibFn::Send, 8, a, b, None);
    z.at(1_200_000);
    first_sight(&mut z, 3, LibFn::Recv, 8, b, a, Some((0, 0)));
    let m = run(vec![u, v, s, t, w, z]);
    let by_pid = |pid: u32| {
        m.conns
            .iter()
            .find(|c| {
                [Some(c.a), c.b]
                    .iter()
                    .flatten()
                    .any(|&e| m.procs[m.sockets[e as usize].proc as usize].pid == pid)
            })
            .unwrap_or_else(|| panic!("no connection of {pid}"))
    };
    let c = by_pid(42);
    assert!(c.b.is_some());
    let (uv, vu) = if m.procs[m.sockets[c.a as usize].proc as usize].pid == 42 {
        (&c.ab, &c.ba)
    } else {
        (&c.ba, &c.ab)
    };
    assert_eq!((uv.matched, vu.matched), (20, 6));
    let before: Vec<_> = uv
        .unmatched
        .iter()
        .map(|u| (u.reason, u.bytes, u.sent))
        .collect();
    assert_eq!(before, vec![(Reason::BeforeTrace, 2, false)]);
    assert!(vu.unmatched.is_empty());
    // The two descriptors of one end stay apart.
    assert!(by_pid(44).b.is_none());
    assert!(by_pid(45).b.is_none());
    // Paired, never aligned.
    let c = by_pid(46);
    assert!(c.b.is_some());
    assert_eq!(c.ab.matched + c.ba.matched, 0);
    assert_eq!(c.flows().count(), 0);
    let un: u64 =
        c.ab.unmatched
            .iter()
            .chain(c.ba.unmatched.iter())
            .filter(|u| u.reason == Reason::OffsetsUnknown)
            .map(|u| u.bytes)
            .sum();
    assert_eq!(un, 16);
}
