//! The demand stage on hand-built traces: request types found from behaviour keep each
//! type's demand whatever the mix, where one service per port drifts with it.

use super::*;
use crate::decode::TraceBuilder;
use bufpool::format::{Addr, LibFn, LibOpts, MapRecord, Meta, ProcReason, ProcRecord};

const MS: u64 = 1_000_000;
/// Address of the two handlers' functions in `/usr/bin/app` (mapped at 0x40_0000).
const FN_LIST: u64 = 0x40_1000;
const FN_SAVE: u64 = 0x40_2000;

fn o(fd: i32, ret: i64) -> LibOpts {
    LibOpts {
        fd: Some(fd),
        ret: Some(ret),
        len: Some(ret.max(0) as u64),
        ..Default::default()
    }
}

/// The share of `list` requests (type A) in second `j`: the mix changes every 15 s.
fn share_a(j: usize) -> u64 {
    [80, 20, 80, 50][(j / 15) % 4]
}

/// A worker of `/usr/bin/app` serving port 8080 for `seconds`: type A (`list`, request
/// 100 B, reply 500 B) burns 2 ms; type B (`save`, request 2000 B) burns 3 ms, queries
/// the database on port 5432 (5 ms there, not its own), burns 6 ms more and replies
/// 4000 B: 9 ms of its own.
fn worker(pid: u32, seconds: usize, slow_b_from: Option<usize>) -> crate::decode::ProcessTrace {
    let mut t = TraceBuilder::new("h", pid, pid);
    let exe = b"/usr/bin/app".to_vec();
    t.meta(&Meta::Proc(ProcRecord {
        reason: ProcReason::Start,
        pid,
        ppid: 1,
        start_ticks: 0,
        exe: exe.clone(),
        argv: vec![exe.clone()],
    }));
    t.meta(&Meta::Map(MapRecord {
        start: 0x40_0000,
        end: 0x41_0000,
        offset: 0,
        prot: 5,
        path: exe,
    }));
    let local = Some(Addr::new(2, 8080, &[127, 0, 0, 1]));
    let db = Some(Addr::new(2, 5432, &[127, 0, 0, 1]));
    t.lib(0x40_0010, LibFn::Accept, LibOpts { local, ..o(3, 4) });
    t.lib(
        0x40_0020,
        LibFn::Connect,
        LibOpts {
            peer: db,
            ..o(5, 0)
        },
    );
    for j in 0..seconds {
        let start = t.now();
        let n = 8 + (j * 7 + pid as usize) % 11;
        for i in 0..n {
            let a = (((i * 37 + j * 11) % 100) as u64) < share_a(j);
            // ±10 % around the mean, balanced over three requests.
            let jitter = |d: u64| d + d * (i as u64 % 3) / 10 - d / 10;
            if a {
                t.lib(0x40_0030, LibFn::Recv, o(4, 100));
                t.enter(0x40_0040, FN_LIST);
                t.wait(jitter(2 * MS));
                t.exit(FN_LIST);
                t.lib(0x40_0050, LibFn::Send, o(4, 500));
            } else {
                t.lib(0x40_0030, LibFn::Recv, o(4, 2000));
                t.enter(0x40_0060, FN_SAVE);
                t.wait(jitter(3 * MS));
                t.lib(0x40_0070, LibFn::Send, o(5, 80));
                t.wait(5 * MS);
                t.lib(0x40_0080, LibFn::Recv, o(5, 1900));
                let slow = slow_b_from.is_some_and(|f| j >= f);
                t.wait(jitter(if slow { 18 * MS } else { 6 * MS }));
                t.exit(FN_SAVE);
                t.lib(0x40_0050, LibFn::Send, o(4, 4000));
            }
            t.wait(MS);
        }
        let used = t.now() - start;
        t.wait(1_000 * MS - used);
    }
    t.finish()
}

fn run(mode: ServiceMode, slow_b_from: Option<usize>) -> DemandReport {
    let set = TraceSet {
        processes: vec![worker(100, 60, slow_b_from), worker(101, 60, slow_b_from)],
    };
    let opts = Options {
        services: mode,
        ..Default::default()
    };
    analyze(&set, &opts).unwrap()
}

#[test]
fn types_found_from_behaviour_keep_their_demands_whatever_the_mix() {
    let r = run(ServiceMode::Auto, None);
    assert_eq!(r.processes.len(), 2, "{:?}", r.skipped);
    let ids: Vec<Vec<&str>> = r
        .processes
        .iter()
        .map(|p| p.services.iter().map(|s| s.id.as_str()).collect())
        .collect();
    // The two workers of one program share their types.
    assert_eq!(ids[0], ids[1]);
    assert_eq!(ids[0].len(), 2, "{:?}", r.processes[0].services);
    for p in &r.processes {
        for s in &p.services {
            let name = s.name.as_deref().unwrap();
            let truth = if name.contains("peer:5432") {
                0.009
            } else {
                0.002
            };
            let err = (s.demand_s - truth).abs() / truth;
            assert!(err < 0.10, "{name}: {} s against {truth} s", s.demand_s);
            assert!(
                name.starts_with("port:8080: handler calls `app+0x"),
                "{name}"
            );
        }
        assert!(p.alarms.is_empty(), "{:?}", p.alarms);
    }
    let names: Vec<&str> = r.processes[0]
        .services
        .iter()
        .map(|s| s.name.as_deref().unwrap())
        .collect();
    assert!(
        names
            .iter()
            .any(|n| n.contains("→ 1× peer:5432 (2.0 KB reply)")),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n.contains("no downstream call")),
        "{names:?}"
    );
}

/// The lowest and highest demand re-estimated over windows of a process (per column).
fn drift(p: &ProcessDemand, col: usize) -> (f64, f64) {
    p.intervals
        .iter()
        .filter_map(|r| r.demand_s.as_ref().map(|d| d[col]))
        .fold((f64::MAX, 0f64), |(lo, hi), d| (lo.min(d), hi.max(d)))
}

#[test]
fn one_service_per_port_drifts_with_the_mix() {
    // The same run with one service per port: its demand, re-estimated over 20-s windows,
    // moves with the mix (3.4 ms per request at 80 % of A, 7.6 ms at 20 %),
    // the types' demands stay put, and the residual's σ̂ takes in
    // the mix.
    let port = run(ServiceMode::Port, None);
    let auto = run(ServiceMode::Auto, None);
    for (p, a) in port.processes.iter().zip(&auto.processes) {
        let (lo, hi) = drift(p, 0);
        assert!(hi > 1.5 * lo, "port: {lo}..{hi}");
        for k in 0..a.services.len() {
            let (lo, hi) = drift(a, k);
            assert!(hi < 1.1 * lo, "auto {}: {lo}..{hi}", a.services[k].id);
        }
        assert!(
            p.sigma_s > 5.0 * a.sigma_s,
            "σ̂ {} vs {}",
            p.sigma_s,
            a.sigma_s
        );
    }
}

#[test]
fn a_slower_type_alarms_with_types_found_from_behaviour() {
    let r = run(ServiceMode::Auto, Some(40));
    for p in &r.processes {
        assert!(!p.alarms.is_empty(), "{}: no alarm", p.pid);
        let first = p.alarms[0].first_violation_unix_ns;
        // The fault starts at second 40 (of the worker's clock, from 1.7e18 ns).
        assert!(first >= r.t0_unix_ns + 39_000_000_000, "{first}");
    }
}

/// A broker: two threads serve requests (port 9000) and share one connection to a worker
/// (port 7000). The second request arrives while the first one's call is out and waits
/// for the connection. Request 1 works 1 ms before and after its call, request 2 1 ms
/// after. With `third`, a third thread's request arrives at 2 ms (every later time then
/// moves by 0.9 ms) and waits behind both calls: it gets the connection at 23 ms, works
/// 1 ms after its reply.
fn broker(third: bool) -> crate::decode::ProcessTrace {
    let mut t = TraceBuilder::new("h", 200, 200);
    let exe = b"/usr/bin/broker".to_vec();
    t.meta(&Meta::Proc(ProcRecord {
        reason: ProcReason::Start,
        pid: 200,
        ppid: 1,
        start_ticks: 0,
        exe: exe.clone(),
        argv: vec![exe],
    }));
    let local = Some(Addr::new(2, 9000, &[127, 0, 0, 1]));
    let worker = Some(Addr::new(2, 7000, &[127, 0, 0, 1]));
    t.lib(
        0x10,
        LibFn::Connect,
        LibOpts {
            peer: worker,
            ..o(5, 0)
        },
    );
    t.lib(0x20, LibFn::Accept, LibOpts { local, ..o(3, 4) });
    t.lib(0x20, LibFn::Accept, LibOpts { local, ..o(3, 6) });
    if third {
        t.lib(0x20, LibFn::Accept, LibOpts { local, ..o(3, 7) });
    }
    // Thread 200: request 1 arrives at 0, calls at 1 ms.
    t.lib(0x30, LibFn::Recv, o(4, 100));
    t.wait(MS);
    t.lib(0x40, LibFn::Send, o(5, 50));
    // Thread 201: request 2 arrives at 1.1 ms; the connection is out.
    t.thread(201);
    t.wait(MS / 10);
    t.lib(0x30, LibFn::Recv, o(6, 100));
    if third {
        t.thread(202);
        t.wait(9 * MS / 10);
        t.lib(0x30, LibFn::Recv, o(7, 100));
    }
    // Thread 200: the reply at 10 ms, 1 ms of work, the answer.
    t.thread(200);
    t.wait(9 * MS);
    t.lib(0x50, LibFn::Recv, o(5, 60));
    t.wait(MS);
    t.lib(0x60, LibFn::Send, o(4, 80));
    // Thread 201 gets the connection at 11.5 ms; its reply at 20.5, the answer at 21.5.
    t.thread(201);
    t.wait(MS / 2);
    t.lib(0x40, LibFn::Send, o(5, 50));
    t.wait(9 * MS);
    t.lib(0x50, LibFn::Recv, o(5, 60));
    t.wait(MS);
    t.lib(0x60, LibFn::Send, o(6, 80));
    if third {
        // Thread 202 gets the connection at 22 ms, behind request 2's call.
        t.thread(202);
        t.wait(MS / 2);
        t.lib(0x40, LibFn::Send, o(5, 50));
        t.wait(9 * MS);
        t.lib(0x50, LibFn::Recv, o(5, 60));
        t.wait(MS);
        t.lib(0x60, LibFn::Send, o(7, 80));
    }
    t.finish()
}

/// The busy time of a process's transactions over its whole span, in ms (1-s intervals).
fn busy_ms(pt: &ProcessTransactions) -> f64 {
    let span = pt.span_ns.unwrap();
    let grid = Grid {
        t0_ns: span.0,
        len_ns: 1_000 * MS as i64,
    };
    let iv = busy::intervals(grid, span, &pt.transactions, &pt.idle_ns);
    iv.busy_s.iter().sum::<f64>() * 1e3
}

#[test]
fn waiting_for_a_shared_connection_to_a_slow_tier_is_not_busy() {
    use transactions::Role;
    let p = broker(false);
    let pt = ByteFlow.transactions(&p, ServiceMode::Port).unwrap();
    let served = pt
        .transactions
        .iter()
        .filter(|t| t.role == Role::Served)
        .count();
    assert_eq!(served, 2, "{:?}", pt.transactions);
    let waits: Vec<&transactions::Transaction> = pt
        .transactions
        .iter()
        .filter(|t| t.service.starts_with("wait "))
        .collect();
    assert_eq!(waits.len(), 1, "{:?}", pt.transactions);
    assert_eq!(waits[0].service, "wait peer:7000");
    // From request 2's arrival to its call: 10.4 ms (and a few entries' ticks).
    let w = (waits[0].end_ns - waits[0].start_ns) as f64 / MS as f64;
    assert!((w - 10.4).abs() < 0.2, "{w} ms");
    // Own work only: 3 ms (12.4 ms counting the wait).
    let b = busy_ms(&pt);
    assert!((b - 3.0).abs() < 0.2, "busy {b} ms");
}

#[test]
fn a_request_queued_behind_several_calls_waits_from_its_arrival() {
    let p = broker(true);
    let pt = ByteFlow.transactions(&p, ServiceMode::Port).unwrap();
    let mut waits: Vec<f64> = pt
        .transactions
        .iter()
        .filter(|t| t.service.starts_with("wait "))
        .map(|t| (t.end_ns - t.start_ns) as f64 / MS as f64)
        .collect();
    waits.sort_by(f64::total_cmp);
    // Request 2 from 1.1 to 12.5 ms; request 3 from its arrival at 2 ms to 23 ms (not from
    // request 2's call at 12.5 ms: the connection was held for others all along).
    assert_eq!(waits.len(), 2, "{:?}", pt.transactions);
    assert!((waits[0] - 11.4).abs() < 0.3, "{waits:?}");
    assert!((waits[1] - 21.0).abs() < 0.3, "{waits:?}");
    // Own work only: 2 + 1 + 1 ms.
    let b = busy_ms(&pt);
    assert!((b - 4.0).abs() < 0.3, "busy {b} ms");
}

/// An event loop of `/usr/sbin/lb` on one thread (no program functions recorded), two
/// connections open at once every time: a short request answered with 100 B and one
/// answered with 5 000 B; a file write falls between them in every third round,
/// attributed to whichever request the thread last read.
fn event_loop(seconds: usize) -> crate::decode::ProcessTrace {
    let mut t = TraceBuilder::new("h", 300, 300);
    let exe = b"/usr/sbin/lb".to_vec();
    t.meta(&Meta::Proc(ProcRecord {
        reason: ProcReason::Start,
        pid: 300,
        ppid: 1,
        start_ticks: 0,
        exe: exe.clone(),
        argv: vec![exe],
    }));
    let local = Some(Addr::new(2, 8080, &[127, 0, 0, 1]));
    let file = LibOpts {
        is_socket: Some(false),
        ..o(9, 40)
    };
    for j in 0..seconds {
        let start = t.now();
        for i in 0..10 {
            t.lib(0x20, LibFn::Accept, LibOpts { local, ..o(3, 4) });
            t.lib(0x20, LibFn::Accept, LibOpts { local, ..o(3, 6) });
            t.lib(0x30, LibFn::Recv, o(4, 100));
            t.lib(0x30, LibFn::Recv, o(6, 100));
            t.wait(MS);
            if (i + j) % 3 == 0 {
                t.lib(0x70, LibFn::Write, file);
            }
            t.lib(0x40, LibFn::Send, o(4, 100));
            t.wait(2 * MS);
            t.lib(0x40, LibFn::Send, o(6, 5000));
            t.lib(0x50, LibFn::Close, o(4, 0));
            t.lib(0x50, LibFn::Close, o(6, 0));
            t.wait(MS);
        }
        let used = t.now() - start;
        t.wait(1_000 * MS - used);
    }
    t.finish()
}

#[test]
fn an_event_loops_requests_are_typed_by_calls_and_sizes_not_by_what_the_thread_ran() {
    let p = event_loop(20);
    let pt = ByteFlow.transactions(&p, ServiceMode::Auto).unwrap();
    let shapes: Vec<&shape::Shape> = pt
        .transactions
        .iter()
        .filter_map(|t| t.shape.as_deref())
        .collect();
    assert_eq!(shapes.len(), 400);
    assert!(shapes.iter().all(|s| s.interleaved));
    let set = TraceSet { processes: vec![p] };
    let r = analyze(&set, &Options::default()).unwrap();
    let names: Vec<&str> = r.processes[0]
        .services
        .iter()
        .map(|s| s.name.as_deref().unwrap())
        .collect();
    // Two types, told apart by their replies' sizes; the write does not make more.
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().all(|n| !n.contains("write")), "{names:?}");
    assert!(
        r.processes[0]
            .services
            .iter()
            .all(|s| s.merged_signatures.is_none()),
        "{names:?}"
    );
}

/// A front (`/usr/bin/app`, port 8080) and its database (`/usr/bin/db`, port 5432) on one
/// connection: the front's `list` and `save` handlers each send one query of 80 B and get
/// 300 B back, but the database spends 1 ms on a list's query and 6 ms on a save's — by its
/// own bytes and calls it has one type. The mix changes every 15 s.
fn front_and_db(seconds: usize) -> Vec<crate::decode::ProcessTrace> {
    let proc_meta = |t: &mut TraceBuilder, pid: u32, exe: &[u8]| {
        t.meta(&Meta::Proc(ProcRecord {
            reason: ProcReason::Start,
            pid,
            ppid: 1,
            start_ticks: 0,
            exe: exe.to_vec(),
            argv: vec![exe.to_vec()],
        }));
        t.meta(&Meta::Map(MapRecord {
            start: 0x40_0000,
            end: 0x41_0000,
            offset: 0,
            prot: 5,
            path: exe.to_vec(),
        }));
    };
    let (mut f, mut d) = (
        TraceBuilder::new("h", 200, 200),
        TraceBuilder::new("h", 300, 300),
    );
    proc_meta(&mut f, 200, b"/usr/bin/app");
    proc_meta(&mut d, 300, b"/usr/bin/db");
    let addr = |port| Some(Addr::new(2, port, &[127, 0, 0, 1]));
    f.lib(
        0x40_0010,
        LibFn::Accept,
        LibOpts {
            local: addr(8080),
            ..o(3, 4)
        },
    );
    f.lib(
        0x40_0020,
        LibFn::Connect,
        LibOpts {
            local: addr(40000),
            peer: addr(5432),
            ..o(5, 0)
        },
    );
    d.lib(
        0x40_0010,
        LibFn::Accept,
        LibOpts {
            local: addr(5432),
            peer: addr(40000),
            ..o(3, 4)
        },
    );
    let until = |t: &mut TraceBuilder, at: u64| {
        let now = t.now();
        t.wait(at.saturating_sub(now));
    };
    for j in 0..seconds {
        let start = f.now();
        let n = 10 + (j * 7) % 9;
        for i in 0..n {
            let list = (((i * 37 + j * 11) % 100) as u64) < share_a(j);
            let jitter = |x: u64| x + x * (i as u64 % 3) / 10 - x / 10;
            let (func, req) = if list {
                (FN_LIST, 100)
            } else {
                (FN_SAVE, 2000)
            };
            f.lib(0x40_0030, LibFn::Recv, o(4, req));
            f.enter(0x40_0040, func);
            f.wait(MS);
            f.lib(0x40_0070, LibFn::Send, o(5, 80));
            until(&mut d, f.now() + 20_000);
            d.lib(0x40_0030, LibFn::Recv, o(4, 80));
            d.wait(jitter(if list { MS } else { 6 * MS }));
            d.lib(0x40_0050, LibFn::Send, o(4, 300));
            until(&mut f, d.now() + 20_000);
            f.lib(0x40_0080, LibFn::Recv, o(5, 300));
            f.wait(MS);
            f.exit(func);
            f.lib(0x40_0050, LibFn::Send, o(4, 500));
            f.wait(MS);
        }
        let used = f.now() - start;
        f.wait(1_000 * MS - used);
    }
    vec![f.finish(), d.finish()]
}

#[test]
fn a_tiers_requests_take_the_types_of_the_requests_that_sent_them() {
    let set = TraceSet {
        processes: front_and_db(60),
    };
    let r = analyze(&set, &Options::default()).unwrap();
    let db = r
        .processes
        .iter()
        .find(|p| p.pid == 300)
        .expect("the database");
    let front = r
        .processes
        .iter()
        .find(|p| p.pid == 200)
        .expect("the front");
    // One type per calling handler, named by the caller's type.
    assert_eq!(db.services.len(), 2, "{:?}", db.services);
    for s in &db.services {
        let name = s.name.as_deref().unwrap();
        assert!(name.contains("call 1 of a `port:8080#"), "{name}");
        let caller = front
            .services
            .iter()
            .find(|c| name.contains(&format!("`{}`", c.id)))
            .unwrap_or_else(|| panic!("{name}: no such front type"));
        // As many queries as the calling type had requests; the demand its handler costs
        // there, whatever the mix.
        assert_eq!(s.requests, caller.requests, "{name}");
        let cname = caller.name.as_deref().unwrap();
        let truth = if cname.contains("request ~2.0 KB") {
            0.006
        } else {
            0.001
        };
        let err = (s.demand_s - truth).abs() / truth;
        assert!(err < 0.10, "{name}: {} s against {truth} s", s.demand_s);
    }
    assert!(db.alarms.is_empty(), "{:?}", db.alarms);
    // By port, the database has one service, whose demand moves with the mix.
    let opts = Options {
        services: ServiceMode::Port,
        ..Default::default()
    };
    let r = analyze(&set, &opts).unwrap();
    let db = r.processes.iter().find(|p| p.pid == 300).unwrap();
    assert_eq!(db.services.len(), 1, "{:?}", db.services);
}

/// A proxy's event loop (`/usr/sbin/px`, one thread) in rounds of two clients: it reads
/// request A (fd 4) and then request B (fd 6) before it processes either, connects to a
/// backend for A (fd 7) and then for B (fd 8), sends both, and waits in `epoll_wait`; A's
/// backend replies in two parts (the loop waits 4 ms between them), B's in one.
fn proxy_loop(rounds: usize) -> crate::decode::ProcessTrace {
    let mut t = TraceBuilder::new("h", 400, 400);
    let exe = b"/usr/sbin/px".to_vec();
    t.meta(&Meta::Proc(ProcRecord {
        reason: ProcReason::Start,
        pid: 400,
        ppid: 1,
        start_ticks: 0,
        exe: exe.clone(),
        argv: vec![exe],
    }));
    let local = Some(Addr::new(2, 8080, &[127, 0, 0, 1]));
    let backend = Some(Addr::new(2, 9000, &[127, 0, 0, 1]));
    let wait = |t: &mut TraceBuilder, ms: u64| {
        t.lib_enter(0x90, LibFn::EpollWait, o(5, 0));
        t.wait(ms * MS);
        t.lib_exit(0x90, LibFn::EpollWait, o(5, 1));
    };
    for _ in 0..rounds {
        t.lib(0x20, LibFn::Accept, LibOpts { local, ..o(3, 4) });
        t.lib(0x20, LibFn::Accept, LibOpts { local, ..o(3, 6) });
        t.lib(0x30, LibFn::Recv, o(4, 100));
        t.lib(0x30, LibFn::Recv, o(6, 100));
        for fd in [7, 8] {
            t.lib(
                0x60,
                LibFn::Connect,
                LibOpts {
                    peer: backend,
                    ..o(fd, 0)
                },
            );
        }
        t.wait(MS / 10);
        t.lib(0x40, LibFn::Send, o(7, 100));
        t.lib(0x40, LibFn::Send, o(8, 100));
        wait(&mut t, 10);
        t.lib(0x30, LibFn::Recv, o(8, 50));
        t.lib(0x30, LibFn::Recv, o(7, 100));
        wait(&mut t, 4);
        t.lib(0x30, LibFn::Recv, o(7, 900));
        t.wait(MS / 10);
        t.lib(0x40, LibFn::Send, o(4, 1000));
        t.lib(0x40, LibFn::Send, o(6, 50));
        for fd in [4, 6, 7, 8] {
            t.lib(0x50, LibFn::Close, o(fd, 0));
        }
        wait(&mut t, 20);
    }
    t.finish()
}

#[test]
fn an_event_loop_is_not_busy_in_its_readiness_waits_and_calls_go_to_requests_in_order() {
    let p = proxy_loop(50);
    let pt = ByteFlow.transactions(&p, ServiceMode::Auto).unwrap();
    // Each request made one call, A's with A's 1 000 B reply, B's with 50 B (by the last
    // request read, both calls would be B's and A would make none).
    let shapes: Vec<&shape::Shape> = pt
        .transactions
        .iter()
        .filter_map(|t| t.shape.as_deref())
        .collect();
    assert_eq!(shapes.len(), 100);
    for s in &shapes {
        assert_eq!(s.calls.len(), 1, "{:?}", s.calls);
        let want = if s.reply_bytes == 1000 { 1000 } else { 50 };
        assert_eq!(s.calls[0].2, want, "{:?}", s.calls);
    }
    // Busy: the loop's own 0.2 ms a round, not the 4 ms it waited for the rest of A's
    // reply while no call was open.
    let per_round = busy_ms(&pt) / 50.0;
    assert!(
        (per_round - 0.2).abs() < 0.05,
        "busy {per_round} ms a round"
    );
}

/// CPU samples of `pid` every 250 ms for `seconds`: 0.1 s of CPU a second and
/// `wait(j)` s of run-queue wait in second `j`.
fn samples(
    pid: u32,
    seconds: usize,
    wait: impl Fn(usize) -> f64,
) -> Vec<reader::cpustat::CpuSample> {
    let (mut cpu, mut waited) = (0u64, 0u64);
    (0..=seconds * 4)
        .map(|k| {
            let s = reader::cpustat::CpuSample {
                t_unix_ns: 1_700_000_000_000_000_000 + k as u64 * 250 * MS,
                pid,
                start_ticks: 0,
                stat_cpu_ns: cpu,
                sched_cpu_ns: cpu,
                threads: 1,
                sched_wait_ns: waited,
                sched_slices: k as u64 * 10,
            };
            cpu += 25 * MS;
            waited += (wait(k / 4) * 0.25e9) as u64;
            s
        })
        .collect()
}

#[test]
fn a_worker_starved_while_its_peers_are_not_is_alarmed_a_starved_machine_is_not() {
    let set = TraceSet {
        processes: vec![
            worker(100, 60, None),
            worker(101, 60, None),
            worker(102, 60, None),
        ],
    };
    // 20 ms of run-queue wait a second ±10 %; the whole machine ×50 in seconds 25–29;
    // worker 101 alone ×30 from second 45 on (when `alone`).
    let run = |alone: bool| {
        let mut cpu = Vec::new();
        for pid in [100u32, 101, 102] {
            cpu.extend(samples(pid, 60, |j| {
                let noise = 1.0 + 0.1 * (((j * 7 + pid as usize * 3) % 5) as f64 - 2.0) / 2.0;
                let machine = if (25..30).contains(&j) { 50.0 } else { 1.0 };
                let own = if (alone && pid == 101) && j >= 45 {
                    30.0
                } else {
                    1.0
                };
                0.02 * noise * machine * own
            }));
        }
        let opts = Options {
            cpu,
            ..Default::default()
        };
        analyze(&set, &opts).unwrap()
    };
    let lone = |r: &DemandReport, pid: u32| -> Vec<chart::Alarm> {
        let p = r.processes.iter().find(|p| p.pid == pid).unwrap();
        p.alarms
            .iter()
            .filter(|a| a.kind.as_deref() == Some("starved-alone"))
            .cloned()
            .collect()
    };
    let r = run(true);
    let a = lone(&r, 101);
    assert_eq!(a.len(), 1, "{a:?}");
    let t0 = 1_700_000_000_000_000_000i64;
    assert_eq!(a[0].first_violation_unix_ns, t0 + 45_000_000_000, "{a:?}");
    assert_eq!(a[0].chart.as_deref(), Some("run-queue"));
    assert!(lone(&r, 100).is_empty() && lone(&r, 102).is_empty());
    // The machine starved alone (seconds 25–29, every worker): no alarm on anyone.
    let r = run(false);
    for pid in [100, 101, 102] {
        assert!(lone(&r, pid).is_empty(), "{pid}: {:?}", lone(&r, pid));
    }
}

fn proc_start(t: &mut TraceBuilder, pid: u32, exe: &[u8]) {
    t.meta(&Meta::Proc(ProcRecord {
        reason: ProcReason::Start,
        pid,
        ppid: 1,
        start_ticks: 0,
        exe: exe.to_vec(),
        argv: vec![exe.to_vec()],
    }));
}

fn lo(port: u16) -> Option<Addr> {
    Some(Addr::new(2, port, &[127, 0, 0, 1]))
}

/// A receive with a timeout: a poll of the one descriptor `fd`.
fn poll_one(t: &mut TraceBuilder, fd: i32) {
    let one = LibOpts {
        arg: Some(1),
        ..o(fd, 1)
    };
    t.lib_enter(0x27, LibFn::Poll, one);
    t.lib_exit(0x27, LibFn::Poll, one);
}

/// A client's persistent connection `fd` to a database on port 3306, made at start: the
/// server's greeting, the login, its OK.
fn db_login(t: &mut TraceBuilder, fd: i32) {
    t.lib(
        0x10,
        LibFn::Connect,
        LibOpts {
            local: lo(40000 + fd as u16),
            peer: lo(3306),
            ..o(fd, 0)
        },
    );
    t.wait(MS / 10);
    t.lib(0x11, LibFn::Recv, o(fd, 100));
    t.lib(0x12, LibFn::Send, o(fd, 120));
    t.wait(MS / 10);
    poll_one(t, fd);
    t.lib(0x11, LibFn::Recv, o(fd, 11));
}

/// A pull worker of `/usr/bin/worker`: its database connection (fd 3, [`db_login`]); a
/// loopback connection to itself to wake its loop (fd 5 to its listener, accepted as 6,
/// one byte through it); its broker connection (fd 7, port 5672: three handshake steps,
/// each a send and its answer); then `jobs` jobs handed on fd 7: it waits for readiness,
/// receives the job (200 B), works 2 ms, queries the database (1 ms there), works 1 ms,
/// publishes the reply (300 B), waits for the socket to be writable and acks (20 B). Its
/// database client polls the one connection before each receive (a socket timeout). With
/// `merged`, the last handshake step's answer comes with the first job, in one receive.
fn pull_worker(jobs: usize, merged: bool) -> crate::decode::ProcessTrace {
    let mut t = TraceBuilder::new("h", 400, 400);
    proc_start(&mut t, 400, b"/usr/bin/worker");
    db_login(&mut t, 3);
    t.lib(
        0x20,
        LibFn::Bind,
        LibOpts {
            local: lo(50000),
            ..o(4, 0)
        },
    );
    t.lib(
        0x10,
        LibFn::Connect,
        LibOpts {
            local: lo(47000),
            peer: lo(50000),
            ..o(5, 0)
        },
    );
    t.lib(
        0x21,
        LibFn::Accept,
        LibOpts {
            local: lo(50000),
            peer: lo(47000),
            ..o(4, 6)
        },
    );
    t.lib(
        0x10,
        LibFn::Connect,
        LibOpts {
            local: lo(48000),
            peer: lo(5672),
            ..o(7, 0)
        },
    );
    t.lib(0x22, LibFn::Send, o(5, 1));
    t.lib(0x23, LibFn::EpollWait, o(8, 1));
    t.lib(0x24, LibFn::Recv, o(6, 1));
    for k in 0..3 {
        t.lib(0x25, LibFn::Send, o(7, 30));
        if !(merged && k == 2) {
            t.lib(0x23, LibFn::EpollWait, o(8, 1));
            t.wait(MS / 5);
            t.lib(0x26, LibFn::Recv, o(7, 20));
        }
    }
    for _ in 0..jobs {
        t.wait(50 * MS);
        t.lib(0x23, LibFn::EpollWait, o(8, 1));
        t.lib(0x26, LibFn::Recv, o(7, 200));
        t.wait(2 * MS);
        t.lib(0x12, LibFn::Send, o(3, 60));
        t.wait(MS);
        poll_one(&mut t, 3);
        t.lib(0x11, LibFn::Recv, o(3, 200));
        t.wait(MS);
        t.lib(0x25, LibFn::Send, o(7, 300));
        t.lib(0x23, LibFn::EpollWait, o(8, 1));
        t.lib(0x25, LibFn::Send, o(7, 20));
    }
    t.finish()
}

/// An application server of `/usr/bin/app`: logs in to its database at start
/// ([`db_login`], fd 3), then serves `requests` requests on port 8080 (fd 5), each
/// working 1 ms, querying the database (1 ms there) and replying after 1 ms more; between
/// two requests, the database sends 30 B nobody asked for (a notice).
fn app_with_db(requests: usize) -> crate::decode::ProcessTrace {
    let mut t = TraceBuilder::new("h", 500, 500);
    proc_start(&mut t, 500, b"/usr/bin/app");
    db_login(&mut t, 3);
    t.lib(
        0x20,
        LibFn::Bind,
        LibOpts {
            local: lo(8080),
            ..o(4, 0)
        },
    );
    for k in 0..requests {
        t.wait(50 * MS);
        t.lib(
            0x21,
            LibFn::Accept,
            LibOpts {
                local: lo(8080),
                ..o(4, 5)
            },
        );
        t.lib(0x30, LibFn::Recv, o(5, 100));
        t.wait(MS);
        t.lib(0x12, LibFn::Send, o(3, 60));
        t.wait(MS);
        t.lib(0x11, LibFn::Recv, o(3, 200));
        t.wait(MS);
        t.lib(0x31, LibFn::Send, o(5, 500));
        t.lib(0x32, LibFn::Close, o(5, 0));
        if k % 2 == 1 {
            t.wait(MS);
            t.lib(0x23, LibFn::Poll, o(3, 1));
            t.lib(0x11, LibFn::Recv, o(3, 30));
        }
    }
    t.finish()
}

#[test]
fn jobs_a_worker_pulls_on_a_connection_it_opened_are_served_requests() {
    for merged in [false, true] {
        pulled_jobs(&pull_worker(40, merged));
    }
}

fn pulled_jobs(p: &crate::decode::ProcessTrace) {
    use transactions::Role;
    let pt = ByteFlow.transactions(p, ServiceMode::Port).unwrap();
    let served: Vec<&transactions::Transaction> = pt
        .transactions
        .iter()
        .filter(|t| t.role == Role::Served)
        .collect();
    // Every job, nothing else: not the handshakes' answers, not the database's replies,
    // not the byte the worker sent itself.
    assert_eq!(served.len(), 40, "{:?}", pt.transactions);
    assert!(
        served.iter().all(|t| t.service == "pull peer:5672"),
        "{served:?}"
    );
    // From the job's arrival to its ack: 2 + 1 + 1 ms (and a few entries' ticks).
    for t in &served {
        let ms = (t.end_ns - t.start_ns) as f64 / MS as f64;
        assert!((ms - 4.0).abs() < 0.1, "{ms} ms");
    }
    // The worker's own time: 3 ms a job, the database's not.
    let b = busy_ms(&pt);
    assert!((b - 120.0).abs() < 2.0, "busy {b} ms");
    // Its queries are its jobs' calls.
    let calls = pt
        .transactions
        .iter()
        .filter(|t| t.role == Role::Called && t.service == "peer:3306" && t.link.parent.is_some())
        .count();
    assert_eq!(calls, 40, "{:?}", pt.transactions);
}

#[test]
fn an_application_servers_database_connection_serves_nothing() {
    use transactions::Role;
    let pt = ByteFlow
        .transactions(&app_with_db(40), ServiceMode::Port)
        .unwrap();
    let served: Vec<&str> = pt
        .transactions
        .iter()
        .filter(|t| t.role == Role::Served)
        .map(|t| t.service.as_str())
        .collect();
    assert_eq!(served.len(), 40, "{served:?}");
    assert!(served.iter().all(|s| *s == "port:8080"), "{served:?}");
}
