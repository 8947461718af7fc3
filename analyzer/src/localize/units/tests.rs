//! Tests of both passes (lean scan and split), loops, handlers and size classes, on
//! hand-built traces (process groups and fork inheritance: `tests_groups.rs`).

use super::scan::*;
use super::split::*;
use super::*;
use crate::decode::ProcessTrace;
use crate::decode::TraceBuilder;
use crate::trees::{NodeKind, Outcome, TreeOptions};
use bufpool::format::LibOpts;
use bufpool::format::{LibFn, Meta};

pub(crate) fn o(fd: i32, ret: i64, len: u64) -> LibOpts {
    LibOpts {
        fd: Some(fd),
        ret: Some(ret),
        len: Some(len),
        ..Default::default()
    }
}

fn kinds(p: &ProcessUnits) -> Vec<(UnitKind, Option<i32>)> {
    p.units.iter().map(|u| (u.info.kind, u.info.fd)).collect()
}

/// No function entries at all: the loop is the thread; accept and receives start
/// handlers; consecutive receives on one fd are one; a multiplexer call ends a handler.
/// Splits every chunk of `p` into chunks of about `size` bytes at entry boundaries
/// (entries near chunk ends take the checking decoder's path), marking some entries
/// lost before every seventh chunk.
fn rechunk(p: &ProcessTrace, size: usize) -> ProcessTrace {
    use crate::decode::{Chunk, ThreadSource};
    let mut q = p.clone();
    for t in &mut q.threads {
        let ThreadSource::Memory(chunks) = &t.source else {
            panic!("synthetic traces are in memory")
        };
        let all: Vec<u8> = chunks
            .iter()
            .flat_map(|c| c.bytes.iter().copied())
            .collect();
        let mut out = Vec::new();
        let (mut start, mut at) = (0, 0);
        for e in bufpool::format::Decoder::new(&all) {
            let e = e.expect("synthetic entries decode");
            at += e.size;
            if at - start >= size {
                // Every 7th chunk starts after a loss: counted in its header and in a
                // `Lost` entry that starts it, as a writer does.
                let lost_before = if out.len() % 7 == 6 { 3 } else { 0 };
                let mut bytes = Vec::new();
                if lost_before > 0 {
                    let m = bufpool::format::encode_lost(e.tsc, lost_before);
                    bytes.extend_from_slice(m.as_bytes());
                }
                bytes.extend_from_slice(&all[start..at]);
                out.push(Chunk {
                    lost_before,
                    name: std::sync::Arc::new(format!("chunk {}", out.len()).into()),
                    bytes: std::sync::Arc::new(bytes),
                });
                start = at;
            }
        }
        out.push(Chunk {
            lost_before: 0,
            name: std::sync::Arc::new("last".into()),
            bytes: std::sync::Arc::new(all[start..].to_vec()),
        });
        t.source = ThreadSource::Memory(out);
    }
    q
}

#[test]
fn lean_pass_1_finds_what_the_paired_events_give() {
    use crate::synth::{ring, Fault, Functions, Ring};
    for functions in [Functions::C, Functions::Python, Functions::None] {
        for fault in [
            None,
            Some(Fault {
                process: 1,
                iteration: 9,
            }),
        ] {
            let procs = ring(&Ring {
                processes: 3,
                iterations: 30,
                functions,
                fault,
                seed: 5,
            });
            for p in &procs {
                for size in [usize::MAX, 300, 64] {
                    let p = if size == usize::MAX {
                        p.clone()
                    } else {
                        rechunk(p, size)
                    };
                    let lean = scan_process(&p).unwrap();
                    let full = scan_process_reference(&p).unwrap();
                    let what = format!("{functions:?} {fault:?} pid {} chunks of {size}", p.pid);
                    let loops = |s: &ProcessScan| {
                        s.threads
                            .iter()
                            .map(|t| (t.tid, t.event_loop))
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(loops(&lean), loops(&full), "{what}");
                    assert!(loops(&lean).iter().all(|l| l.1.is_some()), "{what}");
                    assert_eq!(lean.stats, full.stats, "{what}");
                    assert_eq!(lean.exe, full.exe, "{what}");
                    assert_eq!(lean.forked_from, full.forked_from, "{what}");
                    for fd in 0..12 {
                        for tsc in (0..4_000_000u64).step_by(9_973) {
                            assert_eq!(
                                lean.fd_at(fd, tsc).map(|c| c.key()),
                                full.fd_at(fd, tsc).map(|c| c.key()),
                                "{what}: fd {fd} at {tsc}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn lean_pass_1_pairs_entries_and_exits_like_the_paired_events() {
    use bufpool::format::{encode_lib, Kind};
    // As the tracer writes them: the descriptor on the entry only, the result on the
    // exit; reads on a descriptor known from accept; calls cut by others.
    let mut t = TraceBuilder::new("h", 7, 7);
    let exit = |t: &mut TraceBuilder, func: LibFn, ret: i64| {
        let x = LibOpts {
            ret: Some(ret),
            ..Default::default()
        };
        let e = encode_lib(Kind::LibExit, t.now(), 0x900, func, &x);
        t.raw(e.as_bytes());
    };
    t.lib(
        0x100,
        LibFn::Socket,
        LibOpts {
            ret: Some(3),
            ..Default::default()
        },
    );
    t.lib(0x110, LibFn::Listen, o(3, 0, 0));
    t.lib(0x210, LibFn::Accept, o(3, 10, 0));
    t.lib(0x210, LibFn::Accept, o(3, 12, 0));
    // The only receives of the loop are the reads: pairing decides that there is one.
    t.enter(0x1000, 0x2000);
    for _ in 0..6 {
        t.lib_enter(0x200, LibFn::Poll, LibOpts::default());
        exit(&mut t, LibFn::Poll, 1);
        t.enter(0x1010, 0x3000);
        t.lib_enter(
            0x220,
            LibFn::Read,
            LibOpts {
                fd: Some(10),
                len: Some(8),
                ..Default::default()
            },
        );
        exit(&mut t, LibFn::Read, 8);
        t.exit(0x3000);
    }
    t.exit(0x2000);
    // A read cut short by a send (a signal handler), then its exit.
    t.lib_enter(
        0x230,
        LibFn::Read,
        LibOpts {
            fd: Some(12),
            len: Some(8),
            ..Default::default()
        },
    );
    t.lib_enter(
        0x240,
        LibFn::Send,
        LibOpts {
            fd: Some(12),
            len: Some(2),
            ..Default::default()
        },
    );
    exit(&mut t, LibFn::Send, 2);
    exit(&mut t, LibFn::Read, 8);
    let p = t.finish();
    for size in [usize::MAX, 90, 40] {
        let p = if size == usize::MAX {
            p.clone()
        } else {
            rechunk(&p, size)
        };
        let lean = scan_process(&p).unwrap();
        let full = scan_process_reference(&p).unwrap();
        assert_eq!(full.threads[0].event_loop.map(|l| l.depth), Some(1));
        assert_eq!(
            lean.threads[0].event_loop, full.threads[0].event_loop,
            "chunks of {size}"
        );
        assert_eq!(lean.stats, full.stats);
    }
}

#[test]
fn lean_pass_1_stops_at_corrupt_entries_like_the_decoder() {
    let mut t = TraceBuilder::new("h", 1, 1);
    t.lib(0x10, LibFn::Recv, o(4, 8, 8));
    t.enter(0x20, 0x30);
    t.raw(&[0x7f; 12]);
    let p = t.finish();
    // The rest of the chunk is skipped (with a warning); both passes take the same
    // entries before it.
    let lean = scan_process(&p).expect("the bad tail is skipped");
    let full = scan_process_reference(&p).expect("the bad tail is skipped");
    assert_eq!(lean.stats, full.stats);
    assert_eq!(lean.stats.entries, 3);
    assert_eq!(lean.threads[0].receives, full.threads[0].receives);
}

#[test]
fn library_calls_only() {
    use UnitKind::*;
    let mut t = TraceBuilder::new("h", 7, 7);
    t.lib(0x10, LibFn::Socket, o(-1, 3, 0));
    t.lib(0x20, LibFn::Bind, o(3, 0, 0));
    t.lib(0x30, LibFn::Listen, o(3, 0, 0));
    t.lib(0x40, LibFn::Poll, o(-1, 1, 0));
    t.lib(0x50, LibFn::Accept, o(3, 4, 0));
    t.lib(0x40, LibFn::Poll, o(-1, 1, 0));
    t.lib(0x60, LibFn::Recv, o(4, 8, 8));
    t.lib(0x61, LibFn::Recv, o(4, 100, 100));
    t.lib(0x70, LibFn::Send, o(4, 108, 108));
    t.lib(0x40, LibFn::Poll, o(-1, 1, 0));
    t.lib(0x60, LibFn::Recv, o(4, 0, 8));
    t.lib(0x80, LibFn::Close, o(4, 0, 0));
    t.lib(0x40, LibFn::Poll, o(-1, 0, 0));
    t.lib_enter(0x90, LibFn::Exit, LibOpts::default());
    let p = t.finish();
    let u = process_units(&p, &TreeOptions::default()).unwrap();
    assert_eq!(
        kinds(&u),
        vec![
            (Initializer, None),
            (Handler, Some(3)),
            (Loop, None),
            (Handler, Some(4)),
            (Loop, None),
            (Handler, Some(4)),
            (Loop, None),
            (Finalizer, None)
        ]
    );
    // The accept handler's connection is the listening socket's (bind + listen); the
    // receives' adds the accept's stack.
    assert_eq!(u.units[1].info.conn.0.len(), 2);
    assert_eq!(u.units[3].info.conn.0.len(), 3);
    assert_eq!(u.units[3].info.conn, u.units[5].info.conn);
    assert_eq!(u.signature.0.len(), 2, "bind and listen in the initializer");
    // Both receives and the send are in one unit; the EOF one is distinct (outcome).
    assert_eq!(u.units[3].tree.nodes.len(), 3);
    let eof = u.units[5]
        .tree
        .nodes
        .values()
        .find(|n| n.key.callee == LibFn::Recv.id())
        .unwrap();
    assert_eq!(eof.key.outcome, Outcome::Eof);
    let off = process_units(
        &p,
        &TreeOptions {
            outcome_aware: false,
            ..TreeOptions::default()
        },
    )
    .unwrap();
    let any = off.units[5]
        .tree
        .nodes
        .values()
        .find(|n| n.key.callee == LibFn::Recv.id())
        .unwrap();
    assert_eq!(any.key.outcome, Outcome::Any);
}

/// An injection record written between a call's entry and exit (a short read) or
/// before its entry (a skipped call) belongs to that call's unit, once, and never
/// ends the call (it used to show as "`recv → unfinished`" and be counted twice).
#[test]
fn injection_records_belong_to_the_call_they_describe() {
    use bufpool::format::{encode_lib, InjectRecord, Kind};
    let inj = |rule: u32, forced_ret: i64, forced_errno: i32, spec: &str| {
        Meta::Inject(InjectRecord {
            rule,
            func: LibFn::Recv.id() as u16,
            fd: 3,
            original_ret: -1,
            forced_ret,
            forced_errno,
            spec: spec.as_bytes().to_vec(),
        })
    };
    let exit = |t: &mut TraceBuilder, ret: i64, errno: Option<i32>, rule: u32| {
        let opts = LibOpts {
            fd: Some(3),
            ret: Some(ret),
            errno,
            inject: Some(rule),
            ..Default::default()
        };
        let e = encode_lib(Kind::LibExit, t.now(), 0x60, LibFn::Recv, &opts);
        t.raw(e.as_bytes());
    };
    let enter = LibOpts {
        fd: Some(3),
        len: Some(8),
        ..Default::default()
    };
    let mut t = TraceBuilder::new("h", 7, 7);
    t.lib(0x10, LibFn::Socket, o(-1, 3, 0));
    t.lib(0x20, LibFn::Connect, o(3, 0, 0));
    t.lib(0x40, LibFn::Poll, o(-1, 1, 0));
    t.lib(0x60, LibFn::Recv, o(3, 8, 8));
    t.lib(0x40, LibFn::Poll, o(-1, 1, 0));
    // Short read: entry, injection record, exit.
    t.lib_enter(0x60, LibFn::Recv, enter);
    t.meta(&inj(0, 3, 0, "recv:short=3"));
    exit(&mut t, 3, None, 0);
    t.lib(0x40, LibFn::Poll, o(-1, 1, 0));
    // Skipped call: injection record, entry, exit.
    t.meta(&inj(1, -1, 104, "recv:errno=ECONNRESET"));
    t.lib_enter(0x60, LibFn::Recv, enter);
    exit(&mut t, -1, Some(104), 1);
    t.lib(0x80, LibFn::Close, o(3, 0, 0));
    t.lib(0x40, LibFn::Poll, o(-1, 0, 0));
    let u = process_units(&t.finish(), &TreeOptions::default()).unwrap();
    let with: Vec<&Unit> = u
        .units
        .iter()
        .filter(|u| !u.info.injections.is_empty())
        .collect();
    assert_eq!(with.len(), 2, "one unit per injection: {:?}", kinds(&u));
    for (unit, spec, outcome) in [
        (with[0], "recv:short=3", Outcome::Short),
        (with[1], "recv:errno=ECONNRESET", Outcome::Errno(104)),
    ] {
        assert_eq!(unit.info.kind, UnitKind::Handler);
        let specs: Vec<&str> = unit
            .info
            .injections
            .iter()
            .map(|i| i.spec.as_str())
            .collect();
        assert_eq!(
            specs,
            vec![spec],
            "the record's text replaces the rule-id note"
        );
        let recvs: Vec<Outcome> = unit
            .tree
            .nodes
            .values()
            .filter(|n| n.key.callee == LibFn::Recv.id())
            .map(|n| n.key.outcome)
            .collect();
        assert_eq!(
            recvs,
            vec![outcome],
            "the injected call is one finished call"
        );
    }
}

/// A code-level injection (a Python function made to raise) recorded after the loop unit
/// entered the frame that goes on to start a handler: it goes with that frame to the
/// handler (it used to stay in the loop unit, which lost its tree and was dropped — the
/// injection with it).
#[test]
fn a_code_injection_goes_with_the_frames_a_handler_takes_from_the_loop_unit() {
    use bufpool::format::InjectRecord;
    let (main, run, handle) = (0x1000, 0x1200, 0x1300);
    let mut t = TraceBuilder::new("h", 5, 5);
    t.enter(0, main);
    t.enter(main + 8, run);
    for i in 0..10 {
        t.lib(run + 4, LibFn::Select, o(-1, 1, 0));
        t.enter(run + 8, handle);
        if i == 6 {
            t.meta(&Meta::Inject(InjectRecord {
                rule: 0,
                func: bufpool::inject::PY_FUNC_ID,
                fd: -1,
                original_ret: 0,
                forced_ret: 0,
                forced_errno: 0,
                spec: b"py:m:f:raise=TimeoutError,nth=7".to_vec(),
            }));
        }
        t.lib(handle + 4, LibFn::Recv, o(4, 8, 8));
        t.exit(handle);
    }
    let p = t.finish();
    let u = process_units(&p, &TreeOptions::default()).unwrap();
    let handlers: Vec<&Unit> = u
        .units
        .iter()
        .filter(|u| u.info.kind == UnitKind::Handler)
        .collect();
    assert_eq!(handlers.len(), 10);
    let with: Vec<usize> = handlers
        .iter()
        .enumerate()
        .filter(|(_, u)| !u.info.injections.is_empty())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(with, vec![6], "{:?}", kinds(&u));
    assert!(u
        .units
        .iter()
        .filter(|u| u.info.kind != UnitKind::Handler)
        .all(|u| u.info.injections.is_empty()));
}

/// redis-like: the loop frame is `aeMain`; handlers are anchored at `aeProcessEvents`,
/// so the replies and closes deferred to `beforeSleep` form a loop unit of their own.
#[test]
fn deferred_work_goes_to_a_loop_unit_when_handlers_are_anchored() {
    use UnitKind::*;
    let (main, ae_main, before_sleep, process_events, read_query) =
        (0x1000, 0x1100, 0x1200, 0x1300, 0x1400);
    let mut t = TraceBuilder::new("h", 9, 9);
    t.enter(0x10, main);
    t.lib(main + 4, LibFn::Socket, o(-1, 3, 0));
    t.lib(main + 8, LibFn::Listen, o(3, 0, 0));
    t.enter(main + 0x10, ae_main);
    for i in 0..3 {
        t.enter(ae_main + 4, before_sleep);
        if i > 0 {
            let mut w = o(5, 10, 10);
            w.is_socket = Some(true);
            t.lib(before_sleep + 4, LibFn::Write, w);
            t.lib(before_sleep + 8, LibFn::Close, o(6, 0, 0));
        }
        t.exit(before_sleep);
        t.enter(ae_main + 8, process_events);
        t.lib(process_events + 4, LibFn::EpollWait, o(-1, 2, 0));
        for fd in [5, 6] {
            t.enter(process_events + 8, read_query);
            let mut r = o(fd, 10, 100);
            r.is_socket = Some(true);
            t.lib(read_query + 4, LibFn::Read, r);
            t.exit(read_query);
        }
        t.exit(process_events);
    }
    t.exit(ae_main);
    t.exit(main);
    let p = t.finish();
    let scan = scan_process(&p).unwrap();
    assert_eq!(scan.threads[0].event_loop.unwrap().depth, 2, "aeMain");
    let u = split_process(&p, &scan, &TreeOptions::default()).unwrap();
    let k = kinds(&u);
    assert_eq!(k[0], (Initializer, None));
    assert_eq!(
        &k[1..4],
        &[(Handler, Some(5)), (Handler, Some(6)), (Loop, None)]
    );
    assert_eq!(*k.last().unwrap(), (Finalizer, None));
    // The loop unit after the first iteration holds beforeSleep's write and close.
    let lp = &u.units[3];
    let libs: Vec<u64> = lp
        .tree
        .nodes
        .values()
        .filter(|n| n.key.kind == NodeKind::Lib)
        .map(|n| n.key.callee)
        .collect();
    assert!(libs.contains(&LibFn::Write.id()) && libs.contains(&LibFn::Close.id()));
    // Handler trees start under the loop frame: aeProcessEvents → readQuery → read.
    assert_eq!(u.units[1].tree.nodes.len(), 3);
}

/// Of nested frames holding the same multiplexer calls, the innermost is the loop.
#[test]
fn innermost_loop_is_chosen() {
    let (main, init, run, handle) = (0x1000, 0x1100, 0x1200, 0x1300);
    let mut t = TraceBuilder::new("h", 5, 5);
    t.enter(0, main);
    t.enter(main + 4, init);
    // A wait in the initializer (connect with poll): also a multiplexer call.
    t.lib(init + 4, LibFn::Poll, o(-1, 1, 0));
    t.exit(init);
    t.enter(main + 8, run);
    for _ in 0..10 {
        t.lib(run + 4, LibFn::Select, o(-1, 1, 0));
        t.enter(run + 8, handle);
        t.lib(handle + 4, LibFn::Recv, o(4, 8, 8));
        t.exit(handle);
    }
    let p = t.finish();
    let scan = scan_process(&p).unwrap();
    let l = scan.threads[0].event_loop.unwrap();
    assert_eq!(l.depth, 2);
    assert_eq!(l.mux_calls, 10);
    let u = split_process(&p, &scan, &TreeOptions::default()).unwrap();
    // Initializer (with its poll), then loop/handler pairs; the trace ends in the loop.
    assert_eq!(u.units[0].info.kind, UnitKind::Initializer);
    assert_eq!(
        u.units
            .iter()
            .filter(|u| u.info.kind == UnitKind::Handler)
            .count(),
        10
    );
    assert!(u.units.iter().all(|u| u.info.kind != UnitKind::Finalizer));
}

/// A Python server whose sockets have a timeout: CPython polls before every `recv` and
/// `send`, so the function that reads one message (header, then body) holds two waits and
/// two receives in each of its activations, and — summed over its hundred activations — as
/// many waits as the loop calling it. The loop is the frame whose single activation holds
/// the waits (`loop`, with one `epoll_wait` per iteration), not the per-message function:
/// taken as the loop, that function's first return would end the loop, and everything
/// after it would be one finalizer.
#[test]
fn the_loop_holds_the_waits_in_one_activation() {
    let (main, lp, select, handle, recv_msg) = (0x1000, 0x1100, 0x1200, 0x1300, 0x1400);
    let mut t = TraceBuilder::new("h", 5, 5);
    t.enter(0, main);
    t.enter(main + 4, lp);
    let mut accept = o(3, 5, 0);
    accept.is_socket = Some(true);
    t.lib(lp + 2, LibFn::Accept4, accept);
    for _ in 0..100 {
        t.enter(lp + 4, select);
        t.lib(select + 4, LibFn::EpollWait, o(4, 1, 0));
        t.exit(select);
        t.enter(lp + 8, handle);
        t.enter(handle + 4, recv_msg);
        for _ in 0..2 {
            t.lib(recv_msg + 4, LibFn::Poll, o(-1, 1, 0));
            let mut r = o(5, 8, 8);
            r.is_socket = Some(true);
            t.lib(recv_msg + 8, LibFn::Recv, r);
        }
        t.exit(recv_msg);
        t.lib(handle + 8, LibFn::Poll, o(-1, 1, 0));
        t.lib(handle + 12, LibFn::Send, o(5, 8, 8));
        t.exit(handle);
    }
    let p = t.finish();
    let scan = scan_process(&p).unwrap();
    let l = scan.threads[0].event_loop.unwrap();
    assert_eq!((l.depth, l.busiest), (2, 400), "the loop frame");
    let u = split_process(&p, &scan, &TreeOptions::default()).unwrap();
    let handlers = u
        .units
        .iter()
        .filter(|u| u.info.kind == UnitKind::Handler)
        .count();
    assert!(handlers >= 100, "{handlers} handler units");
    assert!(u.units.iter().all(|u| u.info.kind != UnitKind::Finalizer));
}

/// Sends on sockets keep the size class of what they asked to send (the requested length,
/// not what a short transfer moved); writes to other descriptors and failed sends keep none.
#[test]
fn sends_on_sockets_keep_their_size_classes() {
    let mut t = TraceBuilder::new("h", 5, 5);
    let sent = |fd: i32, ret: i64, len: u64, socket: Option<bool>| {
        let mut w = o(fd, ret, len);
        w.is_socket = socket;
        w
    };
    t.lib(0x10, LibFn::Write, sent(4, 17, 17, Some(true)));
    t.lib(0x10, LibFn::Write, sent(4, 9, 9, Some(true)));
    // A short transfer of a 300-byte reply: class of 300, not of 100.
    t.lib(0x20, LibFn::Send, sent(4, 100, 300, Some(true)));
    // A log line to a file.
    t.lib(0x30, LibFn::Write, sent(2, 40, 40, Some(false)));
    let mut failed = sent(4, -1, 50, Some(true));
    failed.errno = Some(32);
    t.lib(0x40, LibFn::Send, failed);
    let u = process_units(&t.finish(), &TreeOptions::default()).unwrap();
    let mut sizes: Vec<(u64, Option<(u8, u8)>)> = u.units[0]
        .tree
        .nodes
        .values()
        .map(|n| (n.key.callee, n.tally.sizes()))
        .collect();
    sizes.sort();
    let (w, snd) = (LibFn::Write.id(), LibFn::Send.id());
    let mut want = vec![
        (w, Some((4, 5))),
        (w, None),
        (snd, Some((9, 9))),
        (snd, None),
    ];
    want.sort();
    assert_eq!(sizes, want);
}

#[test]
fn thread_without_a_loop_is_one_initializer() {
    let mut t = TraceBuilder::new("h", 5, 5);
    t.lib(0x10, LibFn::Socket, o(-1, 3, 0));
    t.lib(0x20, LibFn::Connect, o(3, 0, 0));
    t.lib(0x30, LibFn::Send, o(3, 10, 10));
    t.lib(0x40, LibFn::Recv, o(3, 10, 10));
    let u = process_units(&t.finish(), &TreeOptions::default()).unwrap();
    assert_eq!(kinds(&u), vec![(UnitKind::Initializer, None)]);
    assert_eq!(u.units[0].tree.nodes.len(), 4);
}

/// A server whose threads share its listening socket (haproxy: which thread accepts a
/// connection is scheduling). In the normal runs a worker thread took every connection; in
/// the trial the main thread did, exactly as the worker did. The main thread's handler classes
/// have no model: the paper's score calls them "no model → 1", the evidence score compares
/// them with the same classes on the other threads and finds nothing abnormal.
#[test]
fn a_handler_class_new_to_its_thread_kind_is_scored_against_the_other_threads() {
    let server = |pid: u32, handler_tid: u32| {
        let mut t = TraceBuilder::new("h", pid, pid);
        t.lib(0x10, LibFn::Socket, o(-1, 3, 0));
        t.lib(0x20, LibFn::Bind, o(3, 0, 0));
        t.lib(0x30, LibFn::Listen, o(3, 0, 0));
        for tid in [pid, pid + 1] {
            if tid != pid {
                t.thread(tid);
            }
            t.lib(0x40, LibFn::EpollWait, o(-1, 1, 0));
            if tid != handler_tid {
                t.lib(0x40, LibFn::EpollWait, o(-1, 0, 0));
                continue;
            }
            for c in 0..40 {
                let fd = 5 + c % 3;
                t.lib(0x50, LibFn::Accept4, o(3, fd.into(), 0));
                t.lib(0x40, LibFn::EpollWait, o(-1, 1, 0));
                let mut r = o(fd, 8, 64);
                r.is_socket = Some(true);
                t.lib(0x60, LibFn::Recv, r);
                let mut w = o(fd, 12, 12);
                w.is_socket = Some(true);
                t.lib(0x70, LibFn::Send, w);
                t.lib(0x40, LibFn::EpollWait, o(-1, 1, 0));
                t.lib(0x80, LibFn::Close, o(fd, 0, 0));
                t.lib(0x40, LibFn::EpollWait, o(-1, 1, 0));
            }
        }
        crate::decode::TraceSet {
            processes: vec![t.finish()],
        }
    };
    let opts = crate::Options::default();
    let normal = [server(100, 101), server(200, 201), server(300, 301)];
    let learned = crate::learn(&normal, &opts).unwrap();
    let trial = server(400, 400);
    let rep = crate::rank(&learned.model, &trial, &opts).unwrap();
    let main_handlers: Vec<_> = rep
        .units
        .iter()
        .filter(|u| u.info.kind == UnitKind::Handler && u.info.main_thread)
        .collect();
    assert!(!main_handlers.is_empty());
    for u in &rep.units {
        assert!(u.score < 0.5, "{} {} {:?}", u.info.id, u.score, u.why);
    }
    // The paper's score is the paper's: no model, 1.
    let paper = crate::Options {
        score: crate::evidence::ScoreKind::Paper,
        ..crate::Options::default()
    };
    let rep = crate::rank(&learned.model, &trial, &paper).unwrap();
    assert!(rep
        .units
        .iter()
        .any(|u| u.info.kind == UnitKind::Handler && u.info.main_thread && u.score == 1.0));
}

/// A server whose threads share its listening socket, as above. In the normal runs the main
/// thread took one plain connection per run (its handler class is learned from three units)
/// and a worker thread took 40, one in five of which it shut down before closing. In the trial
/// the main thread takes six, two of them shut down as the worker's are, and on one more its
/// `recv` fails with `ECONNRESET` (never seen on either thread). Scored against the main
/// thread's own class only, the shut-down connections are "`shutdown` never seen in 3 normal
/// units" (0.8) and the earliest of them is its process's root; scored also against the same
/// class on the worker threads (the lesser counts), they are a rare variant, and the reset,
/// abnormal on every thread, is first.
#[test]
fn a_handler_is_also_scored_against_its_class_on_the_other_threads() {
    let server = |pid: u32, on_main: &[u8], on_worker: &[u8]| {
        let mut t = TraceBuilder::new("h", pid, pid);
        t.lib(0x10, LibFn::Socket, o(-1, 3, 0));
        t.lib(0x20, LibFn::Bind, o(3, 0, 0));
        t.lib(0x30, LibFn::Listen, o(3, 0, 0));
        for (tid, conns) in [(pid, on_main), (pid + 1, on_worker)] {
            if tid != pid {
                t.thread(tid);
            }
            t.lib(0x40, LibFn::EpollWait, o(-1, 1, 0));
            for (c, &how) in conns.iter().enumerate() {
                let fd = 5 + (c % 3) as i32;
                t.lib(0x50, LibFn::Accept4, o(3, fd.into(), 0));
                t.lib(0x40, LibFn::EpollWait, o(-1, 1, 0));
                let mut r = o(fd, 8, 64);
                r.is_socket = Some(true);
                if how == b'r' {
                    r.ret = Some(-1);
                    r.errno = Some(104);
                }
                t.lib(0x60, LibFn::Recv, r);
                if how != b'r' {
                    let mut w = o(fd, 12, 12);
                    w.is_socket = Some(true);
                    t.lib(0x70, LibFn::Send, w);
                }
                if how == b's' {
                    t.lib(0x78, LibFn::Shutdown, o(fd, 0, 0));
                }
                t.lib(0x40, LibFn::EpollWait, o(-1, 1, 0));
                t.lib(0x80, LibFn::Close, o(fd, 0, 0));
                t.lib(0x40, LibFn::EpollWait, o(-1, 1, 0));
            }
            t.lib(0x40, LibFn::EpollWait, o(-1, 0, 0));
        }
        crate::decode::TraceSet {
            processes: vec![t.finish()],
        }
    };
    let worker: Vec<u8> = (0..40)
        .map(|c| if c % 5 == 2 { b's' } else { b'p' })
        .collect();
    let opts = crate::Options::default();
    let normal = [
        server(100, b"p", &worker),
        server(200, b"p", &worker),
        server(300, b"p", &worker),
    ];
    let learned = crate::learn(&normal, &opts).unwrap();
    let trial = server(400, b"pspsrp", &worker);
    let rep = crate::rank(&learned.model, &trial, &opts).unwrap();
    let top = &rep.units[0];
    // A failure never seen, but in a class learned from three units: a root, not more.
    assert!(
        top.info.main_thread && top.score > crate::consequence::ROOT_MIN,
        "{} {} {:?}",
        top.info.id,
        top.score,
        top.why
    );
    assert!(top.why[0].contains("ECONNRESET"), "{:?}", top.why);
    let on_main = rep
        .units
        .iter()
        .filter(|u| u.info.main_thread && u.info.kind == UnitKind::Handler)
        .count();
    assert!(on_main >= 6, "{on_main}");
    // The shut-down connections of the main thread are a variant its thread-mates make.
    for u in &rep.units[1..] {
        assert!(
            u.score < crate::consequence::ROOT_MIN || u.caused_by.is_some(),
            "{} {} {:?}",
            u.info.id,
            u.score,
            u.why
        );
    }
}

fn socket_call(fd: i32, n: i64) -> LibOpts {
    let mut r = o(fd, n, n as u64);
    r.is_socket = Some(true);
    r
}

/// A UDP receiver with no multiplexer (Kamailio's `udp_rcv_loop`: `recvfrom` blocks, the
/// message is forwarded with `sendto`, and again): the frame that receives again and again
/// is a receive loop, and each message a handler — not one initializer for the thread's
/// whole life. Its first move on the socket was a receive: it answers.
#[test]
fn a_blocking_receiver_has_a_receive_loop() {
    use UnitKind::*;
    let (main, rcv_loop, receive_msg) = (0x1000, 0x1100, 0x1200);
    let mut t = TraceBuilder::new("h", 5, 5);
    t.enter(0, main);
    t.lib(main + 4, LibFn::Socket, o(-1, 4, 0));
    t.lib(main + 8, LibFn::Bind, o(4, 0, 0));
    t.enter(main + 0x10, rcv_loop);
    for _ in 0..5 {
        t.lib(rcv_loop + 4, LibFn::Recvfrom, socket_call(4, 300));
        t.enter(rcv_loop + 8, receive_msg);
        t.lib(receive_msg + 4, LibFn::Sendto, socket_call(4, 300));
        t.exit(receive_msg);
    }
    let p = t.finish();
    let scan = scan_process(&p).unwrap();
    let l = scan.threads[0].event_loop.unwrap();
    assert!(l.by_receive);
    assert_eq!((l.depth, l.busiest), (2, 5), "rcv_loop, five receives");
    let u = split_process(&p, &scan, &TreeOptions::default()).unwrap();
    let k = kinds(&u);
    assert_eq!(k[0], (Initializer, None));
    assert_eq!(&k[1..], &[(Handler, Some(4)); 5], "a handler per message");
    // The receive that begins a handler is the loop's wait: its duration is not learned
    // (the send's is).
    let dur = |f: LibFn| {
        u.units[1]
            .tree
            .nodes
            .values()
            .find(|n| n.key.kind == NodeKind::Lib && n.key.callee == f.id())
            .map(|n| n.dur.ns())
    };
    assert_eq!(dur(LibFn::Recvfrom), Some(0));
    assert!(dur(LibFn::Sendto).unwrap() > 0);
}

/// A client that sends its request and blocks in `recv` for the reply, again and again,
/// waits for its own replies, not for work: its first move on the socket was a send, so it
/// has no receive loop (one initializer, as before).
#[test]
fn a_client_waiting_for_its_replies_has_no_receive_loop() {
    use UnitKind::*;
    let (main, run) = (0x1000, 0x1100);
    let mut t = TraceBuilder::new("h", 5, 5);
    t.enter(0, main);
    t.lib(main + 4, LibFn::Socket, o(-1, 4, 0));
    t.lib(main + 8, LibFn::Connect, o(4, 0, 0));
    t.enter(main + 0x10, run);
    for _ in 0..5 {
        t.lib(run + 4, LibFn::Send, socket_call(4, 100));
        t.lib(run + 8, LibFn::Recv, socket_call(4, 100));
    }
    let p = t.finish();
    let scan = scan_process(&p).unwrap();
    assert_eq!(scan.threads[0].event_loop, None);
    let u = split_process(&p, &scan, &TreeOptions::default()).unwrap();
    assert_eq!(kinds(&u), vec![(Initializer, None)]);
}

#[test]
fn an_ipv4_mapped_connection_is_shown_as_its_ipv4_peers_see_it() {
    // A JVM's dual-stack socket accepts an IPv4 client: its addresses are IPv4-mapped IPv6,
    // while the client's own record names them in IPv4. The connection's row must use the
    // IPv4 form, or no peer ever finds the process at the other end.
    let mapped = |port: u16| {
        let mut b = [0u8; 16];
        b[10] = 0xff;
        b[11] = 0xff;
        b[12..].copy_from_slice(&[127, 0, 0, 1]);
        bufpool::format::Addr::new(10, port, &b)
    };
    let mut t = TraceBuilder::new("h", 7, 7);
    t.lib(0x10, LibFn::Socket, o(-1, 3, 0));
    t.lib(0x20, LibFn::Bind, o(3, 0, 0));
    t.lib(0x30, LibFn::Listen, o(3, 0, 0));
    let mut accept = o(3, 4, 0);
    accept.local = Some(mapped(7000));
    accept.peer = Some(mapped(50000));
    t.lib(0x50, LibFn::Accept, accept);
    t.lib(0x60, LibFn::Recv, o(4, 8, 8));
    t.lib(0x70, LibFn::Send, o(4, 8, 8));
    t.lib(0x60, LibFn::Recv, o(4, 0, 8));
    t.lib_enter(0x90, LibFn::Exit, LibOpts::default());
    let p = t.finish();
    let u = process_units(&p, &TreeOptions::default()).unwrap();
    let rows: Vec<(Option<&str>, Option<&str>)> = u
        .conns
        .iter()
        .map(|(_, l, p)| (l.as_deref(), p.as_deref()))
        .collect();
    assert!(
        rows.contains(&(Some("127.0.0.1:7000"), Some("127.0.0.1:50000"))),
        "{rows:?}"
    );
}

/// A thread per connection (a JVM server: HSQLDB's, `HttpServer`'s workers): the acceptor
/// thread accepts, a worker thread reads the connection with `read` — no `recv`, no socket
/// flag, no descriptor it made itself — and answers with `write`. Pass 1 reads one thread at
/// a time; the process's descriptor history tells that what the worker reads is the
/// accepted socket, so it has a receive loop and a handler per request, on that
/// connection — not one initializer unit with no connection.
#[test]
fn a_worker_thread_reading_a_connection_its_acceptor_accepted_has_a_receive_loop() {
    use UnitKind::*;
    let mut t = TraceBuilder::new("h", 5, 5);
    t.lib(0x10, LibFn::Socket, o(-1, 4, 0));
    t.lib(0x14, LibFn::Bind, o(4, 0, 0));
    t.lib(0x18, LibFn::Listen, o(4, 0, 0));
    t.lib(0x1c, LibFn::Accept, o(4, 7, 0));
    t.thread(6);
    for _ in 0..5 {
        t.lib(0x40, LibFn::Read, o(7, 41, 16384));
        t.lib(0x44, LibFn::Write, o(7, 74, 74));
    }
    t.lib(0x48, LibFn::Close, o(7, 0, 0));
    // A thread that reads a descriptor no thread of the process made a socket: no loop.
    t.thread(8);
    for _ in 0..5 {
        t.lib(0x60, LibFn::Read, o(9, 41, 16384));
        t.lib(0x64, LibFn::Write, o(9, 74, 74));
    }
    let p = t.finish();
    let scan = scan_process(&p).unwrap();
    let worker = scan.threads.iter().find(|t| t.tid == 6).unwrap();
    let l = worker.event_loop.expect("the worker's receive loop");
    assert!(l.by_receive);
    assert_eq!(l.busiest, 5);
    let other = scan.threads.iter().find(|t| t.tid == 8).unwrap();
    assert_eq!(other.event_loop, None);
    let u = split_process(&p, &scan, &TreeOptions::default()).unwrap();
    let worker: Vec<_> = u
        .units
        .iter()
        .filter(|u| u.info.tid == 6)
        .map(|u| (u.info.kind, u.info.fd))
        .collect();
    assert_eq!(worker[0], (Initializer, None));
    assert_eq!(
        &worker[1..6],
        &[(Handler, Some(7)); 5],
        "a handler per request"
    );
    assert!(u
        .units
        .iter()
        .filter(|u| u.info.tid == 8)
        .all(|u| u.info.kind == Initializer));
}
