//! Parser and matcher tests.

use super::*;
use proptest::prelude::*;

fn ok(s: &str) -> Spec {
    parse_spec(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

/// The error for `s`: (column, expected substring check, found).
fn err(s: &str) -> SpecError {
    match parse_spec(s) {
        Ok(spec) => panic!("{s:?} parsed: {spec:?}"),
        Err(e) => e,
    }
}

#[track_caller]
fn err_at(s: &str, column: usize, expected_has: &str, found: &str) {
    let e = err(s);
    assert_eq!(e.column, column, "{s:?}: {e}");
    assert!(e.expected.contains(expected_has), "{s:?}: {e}");
    assert_eq!(e.found, found, "{s:?}: {e}");
}

#[test]
fn the_issue_examples_parse() {
    let s = ok("recv:short=3,nth=17");
    assert_eq!(s.funcs, vec![LibFn::Recv]);
    assert_eq!(s.effect, Effect::Short(3));
    assert_eq!(s.nth, Some(17));
    assert_eq!(s.count, 0);
    assert_eq!(s.text, "recv:short=3,nth=17");

    let s = ok("read:errno=ECONNRESET,peer-port=7000,after=600,count=1");
    assert_eq!(s.effect, Effect::Errno(libc::ECONNRESET));
    assert_eq!(s.peer_port, Some(7000));
    assert_eq!(s.after, Some(600));
    assert_eq!(s.count, 1);

    let s = ok("send|write:delay=20ms,prob=0.05,seed=7");
    assert_eq!(s.funcs, vec![LibFn::Send, LibFn::Write]);
    assert_eq!(s.effect, Effect::Delay(20_000_000));
    assert_eq!(s.seed, 7);
    let t = s.prob_threshold.unwrap();
    assert!((t as f64 / 2f64.powi(64) - 0.05).abs() < 1e-12);
}

#[test]
fn every_effect_parses() {
    assert_eq!(ok("recv:short=1").effect, Effect::Short(1));
    assert_eq!(ok("writev:short=4096").effect, Effect::Short(4096));
    assert_eq!(
        ok("connect:errno=ECONNREFUSED").effect,
        Effect::Errno(libc::ECONNREFUSED)
    );
    assert_eq!(
        ok("epoll_wait:errno=EINTR").effect,
        Effect::Errno(libc::EINTR)
    );
    assert_eq!(
        ok("accept:errno=EAGAIN").effect,
        Effect::Errno(libc::EAGAIN)
    );
    assert_eq!(ok("send:errno=EPIPE").effect, Effect::Errno(libc::EPIPE));
    assert_eq!(
        ok("recv:errno=ETIMEDOUT").effect,
        Effect::Errno(libc::ETIMEDOUT)
    );
    assert_eq!(ok("recv:errno=104").effect, Effect::Errno(104));
    assert_eq!(ok("recv|read|readv:eof").effect, Effect::Eof);
    assert_eq!(ok("recvfrom:corrupt=8").effect, Effect::Corrupt(8));
    assert_eq!(ok("send:close").effect, Effect::Close);
    assert_eq!(ok("recvmsg:close").effect, Effect::Close);
    for (d, ns) in [
        ("100ns", 100u64),
        ("3us", 3_000),
        ("20ms", 20_000_000),
        ("2s", 2_000_000_000),
        ("1.5s", 1_500_000_000),
        ("0.25ms", 250_000),
        ("1.0005ms", 1_000_500),
        ("7.000ns", 7),
        ("0s", 0),
    ] {
        assert_eq!(
            ok(&format!("close:delay={d}")).effect,
            Effect::Delay(ns),
            "{d}"
        );
    }
}

#[test]
fn every_key_parses() {
    let s = ok("recv:eof,pid=42,exe=python3*,argv=mpd.py --ring,local-port=1,peer-port=65535,nth=1,after=0,count=5,prob=1,seed=18446744073709551615");
    assert_eq!(s.pid, Some(42));
    assert_eq!(s.exe.as_deref(), Some("python3*"));
    assert_eq!(s.argv.as_deref(), Some("mpd.py --ring"));
    assert_eq!(s.local_port, Some(1));
    assert_eq!(s.peer_port, Some(65535));
    assert_eq!(s.nth, Some(1));
    assert_eq!(s.after, Some(0));
    assert_eq!(s.count, 5);
    assert_eq!(s.prob_threshold, Some(u64::MAX));
    assert_eq!(s.seed, u64::MAX);
    assert_eq!(ok("recv:eof,prob=0").prob_threshold, Some(0));
    assert_eq!(ok("recv:eof,prob=0.5").prob_threshold, Some(1 << 63));
    assert_eq!(ok("recv:eof,count=0").count, 0);
    // Values may hold any character but ',' (and newline): ':', '|', '=', ';', spaces, UTF-8.
    let s = ok("read:eof,argv=a:b|c=d;e f é,exe=/opt/x y/bin");
    assert_eq!(s.argv.as_deref(), Some("a:b|c=d;e f é"));
    assert_eq!(s.exe.as_deref(), Some("/opt/x y/bin"));
}

#[test]
fn function_errors_name_the_column() {
    err_at("", 1, "a function name", "end of rule");
    err_at(":eof", 1, "a function name", "`:eof`");
    err_at(
        "recvv:eof",
        1,
        "the name of a function libtrace.so wraps",
        "`recvv`",
    );
    err_at("recv|:eof", 6, "a function name", "`:eof`");
    err_at("recv|recv:eof", 6, "each function at most once", "`recv`");
    err_at("recv", 5, "`|` and another function, or `:`", "end of rule");
    err_at("recv;eof", 5, "`|` and another function, or `:`", "`;eof`");
    err_at(
        "recv|send|bogus:eof",
        11,
        "the name of a function",
        "`bogus`",
    );
    // The function does not take the effect: the column of the function.
    err_at(
        "send|connect:short=3",
        6,
        "a function `short` applies to",
        "`connect`",
    );
    err_at(
        "recv|send:eof",
        6,
        "a function `eof` applies to (recv, recvfrom",
        "`send`",
    );
    err_at("send:corrupt=2", 1, "`corrupt` applies to", "`send`");
    err_at("connect:close", 1, "`close` applies to", "`connect`");
    err_at("fork:errno=EAGAIN", 1, "`errno` applies to", "`fork`");
    err_at("exit:delay=1s", 1, "`delay` applies to", "`exit`");
    // Calls libtrace.so does not route through its injection seam are refused.
    err_at(
        "shutdown:errno=EPIPE",
        1,
        "`errno` applies to",
        "`shutdown`",
    );
    err_at(
        "recv|epoll_ctl:delay=1s",
        6,
        "`delay` applies to",
        "`epoll_ctl`",
    );
}

#[test]
fn effect_errors_name_the_column() {
    err_at(
        "recv:",
        6,
        "an effect: short=N, errno=NAME, eof",
        "end of rule",
    );
    err_at("recv:shrt=3", 6, "an effect", "`shrt`");
    err_at("recv:short", 11, "`=` after `short`", "end of rule");
    err_at(
        "recv:short=",
        12,
        "a byte count (decimal digits)",
        "end of rule",
    );
    err_at("recv:short=x", 12, "a byte count", "`x`");
    err_at("recv:short=0", 12, "at least 1", "`0`");
    err_at("recv:short=3x", 13, "`,` or the end of the rule", "`x`");
    err_at(
        "recv:short=99999999999999999999",
        12,
        "below 2^64",
        "`99999999999999999999`",
    );
    err_at("recv:corrupt=0", 14, "at least 1", "`0`");
    err_at("recv:errno=", 12, "an errno name", "end of rule");
    err_at(
        "recv:errno=ECONRESET",
        12,
        "an errno name (ECONNRESET",
        "`ECONRESET`",
    );
    err_at("recv:errno=0", 12, "a number from 1 to 4095", "`0`");
    err_at("recv:errno=EINTR!", 17, "`,` or the end", "`!`");
    err_at("recv:eofx", 6, "an effect", "`eofx`");
    err_at("recv:eof=1", 9, "`,` or the end of the rule", "`=1`");
    err_at("recv:close,", 12, "a key: pid, exe", "end of rule");
    err_at(
        "recv:delay=20",
        14,
        "a duration unit: ns, us, ms or s",
        "end of rule",
    );
    err_at("recv:delay=20m", 14, "a duration unit", "`m`");
    err_at("recv:delay=ms", 12, "a duration (e.g. 20ms", "`ms`");
    err_at(
        "recv:delay=1.ms",
        14,
        "digits after the decimal point",
        "`ms`",
    );
    err_at(
        "recv:delay=1.0001us",
        12,
        "a whole number of nanoseconds",
        "`1.0001us`",
    );
    err_at(
        "recv:delay=99999999999s",
        12,
        "below 584 years",
        "`99999999999s`",
    );
    err_at("recv:delay=20ms5", 16, "`,` or the end", "`5`");
}

#[test]
fn key_errors_name_the_column() {
    err_at("recv:eof,", 10, "a key", "end of rule");
    err_at(
        "recv:eof,nht=3",
        10,
        "a key: pid, exe, argv, local-port, peer-port, nth, after, count, prob, seed, at or after-s",
        "`nht`",
    );
    err_at("recv:eof, nth=3", 10, "a key", "` nth`");
    err_at("recv:eof,nth", 13, "`=` after `nth`", "end of rule");
    err_at("recv:eof,nth=", 14, "a call number", "end of rule");
    err_at("recv:eof,nth=0", 14, "nth is 1-based", "`0`");
    err_at("recv:eof,nth=1,nth=2", 16, "each key at most once", "`nth`");
    err_at("recv:eof,after=-1", 16, "a call count", "`-1`");
    err_at("recv:eof,count=many", 16, "an injection count", "`many`");
    err_at("recv:eof,pid=0", 14, "a process id from 1", "`0`");
    err_at(
        "recv:eof,pid=4294967295",
        14,
        "a process id from 1",
        "`4294967295`",
    );
    err_at(
        "recv:eof,exe=",
        14,
        "a non-empty exe pattern",
        "end of rule",
    );
    err_at(
        "recv:eof,argv=,nth=1",
        15,
        "a non-empty argv pattern",
        "`,nth`",
    );
    err_at(
        "recv:eof,local-port=0",
        21,
        "a port number from 1 to 65535",
        "`0`",
    );
    err_at(
        "recv:eof,peer-port=65536",
        20,
        "a port number from 1 to 65535",
        "`65536`",
    );
    err_at("recv:eof,peer-port=70x", 22, "`,` or the end", "`x`");
    err_at(
        "recv:eof,prob=1.5",
        15,
        "a probability from 0 to 1",
        "`1.5`",
    );
    err_at("recv:eof,prob=2", 15, "a probability from 0 to 1", "`2`");
    err_at("recv:eof,prob=.5", 15, "a probability", "`.5`");
    err_at(
        "recv:eof,prob=0.",
        17,
        "digits after the decimal point",
        "end of rule",
    );
    err_at("recv:eof,seed=0x10", 16, "`,` or the end", "`x10`");
    err_at(
        "recv:eof,seed=18446744073709551616",
        15,
        "below 2^64",
        "`18446744073709551616`",
    );
}

#[test]
fn columns_count_characters_not_bytes() {
    // 'é' is two bytes; the error after it is at character column 19.
    err_at("recv:eof,argv=é,x=1", 17, "a key", "`x`");
}

#[test]
fn errors_display_with_position_and_caret() {
    let e = err("recv:short=3,nht=17");
    assert_eq!(
        e.to_string(),
        "column 14: expected a key: pid, exe, argv, local-port, peer-port, nth, after, count, \
         prob, seed, at or after-s, found `nht`"
    );
    assert_eq!(
        e.caret("recv:short=3,nht=17"),
        "  recv:short=3,nht=17\n               ^"
    );
}

#[test]
fn env_value_round_trips_and_reports_the_line() {
    let specs = [
        "recv:short=3,nth=17",
        "read:eof,argv=a;b c",
        "send|write:delay=20ms,prob=0.05,seed=7",
    ];
    let v = encode_env(&specs).unwrap();
    assert_eq!(v.matches(RULE_SEPARATOR).count(), 2);
    let parsed = parse_rules(&v).unwrap();
    assert_eq!(parsed.len(), 3);
    for (p, s) in parsed.iter().zip(specs) {
        assert_eq!(p.text, s);
        assert_eq!(p, &ok(s));
    }
    // Empty lines (a trailing newline) are ignored.
    assert_eq!(parse_rules(&format!("\n{v}\n\n")).unwrap(), parsed);
    assert!(parse_rules("").unwrap().is_empty());

    let e = encode_env(&["recv:eof", "recv:eof,nth=0"]).unwrap_err();
    assert_eq!((e.line, e.column), (Some(2), 14));
    assert!(e.to_string().starts_with("line 2, column 14: expected"));
    let e = parse_rules("recv:eof\n\nsend:eof").unwrap_err();
    assert_eq!((e.line, e.column), (Some(3), 1));
    let e = encode_env(&["recv:eof,argv=x\nsend:eof"]).unwrap_err();
    assert_eq!((e.line, e.column), (Some(1), 16));
}

fn proc(pid: u32) -> ProcessInfo {
    ProcessInfo {
        pid,
        exe: b"/usr/bin/python3.11".to_vec(),
        argv: vec![b"python3".to_vec(), b"server.py".to_vec()],
    }
}

fn set(specs: &[&str], pid: u32) -> RuleSet {
    let r = RuleSet::new(specs.iter().map(|s| ok(s)).collect());
    r.bind(&proc(pid));
    r
}

/// Runs `n` calls of `f` and returns the 1-based numbers of the injected ones.
fn injected(r: &RuleSet, f: LibFn, n: u64, ports: KnownPorts) -> Vec<u64> {
    (1..=n)
        .filter(|_| r.check(f, &mut ports.clone()).is_some())
        .collect()
}

#[test]
fn nth_injects_exactly_that_call_of_that_function() {
    let r = set(&["recv:short=3,nth=17"], 1);
    assert!(r.wants(LibFn::Recv));
    assert!(!r.wants(LibFn::Send));
    // Calls of other functions do not count.
    for _ in 0..5 {
        assert!(r.check(LibFn::Send, &mut NoPorts).is_none());
    }
    assert_eq!(
        injected(&r, LibFn::Recv, 100, KnownPorts::default()),
        vec![17]
    );
    let h = {
        r.on_fork(2);
        (1..=17)
            .find_map(|_| r.check(LibFn::Recv, &mut NoPorts))
            .unwrap()
    };
    assert_eq!(
        h,
        Hit {
            rule: 0,
            effect: Effect::Short(3),
            spec: "recv:short=3,nth=17",
            call: 17
        }
    );
}

#[test]
fn after_and_count() {
    let r = set(&["read:errno=ECONNRESET,after=600,count=1"], 1);
    assert_eq!(
        injected(&r, LibFn::Read, 1000, KnownPorts::default()),
        vec![601]
    );
    let r = set(&["read:eof,after=3,count=2"], 1);
    assert_eq!(
        injected(&r, LibFn::Read, 10, KnownPorts::default()),
        vec![4, 5]
    );
    let r = set(&["read:eof,after=3"], 1);
    assert_eq!(
        injected(&r, LibFn::Read, 6, KnownPorts::default()),
        vec![4, 5, 6]
    );
    let r = set(&["read:eof,count=0"], 1);
    assert_eq!(
        injected(&r, LibFn::Read, 3, KnownPorts::default()),
        vec![1, 2, 3]
    );
    let r = set(&["read:eof,nth=5,after=5"], 1);
    assert!(injected(&r, LibFn::Read, 10, KnownPorts::default()).is_empty());
}

#[test]
fn port_filters_are_asked_lazily_and_only_count_matching_sockets() {
    struct Counting {
        asked: u32,
        peer: Option<u16>,
    }
    impl PortSource for Counting {
        fn local_port(&mut self) -> Option<u16> {
            self.asked += 1;
            Some(5555)
        }
        fn peer_port(&mut self) -> Option<u16> {
            self.asked += 1;
            self.peer
        }
    }
    let r = set(&["recv:eof,nth=2", "send:close"], 1);
    let mut c = Counting {
        asked: 0,
        peer: None,
    };
    r.check(LibFn::Recv, &mut c);
    r.check(LibFn::Send, &mut c);
    assert_eq!(c.asked, 0, "no port key: ports never asked");

    let r = set(&["read:errno=ECONNRESET,peer-port=7000,nth=2"], 1);
    let mut other = Counting {
        asked: 0,
        peer: Some(7001),
    };
    let mut unix = Counting {
        asked: 0,
        peer: None,
    };
    let mut mine = Counting {
        asked: 0,
        peer: Some(7000),
    };
    assert!(r.check(LibFn::Read, &mut other).is_none());
    assert!(r.check(LibFn::Read, &mut unix).is_none());
    assert!(r.check(LibFn::Read, &mut mine).is_none());
    assert!(r.check(LibFn::Read, &mut other).is_none());
    assert!(
        r.check(LibFn::Read, &mut mine).is_some(),
        "second call on port 7000"
    );
    assert_eq!(r.rules()[0].seen(), 2);
    assert!(mine.asked >= 2 && other.asked >= 2);

    let r = set(&["recv:eof,local-port=5555,peer-port=7000"], 1);
    let ports = |l, p| KnownPorts { local: l, peer: p };
    assert!(r
        .check(LibFn::Recv, &mut ports(Some(5555), Some(7000)))
        .is_some());
    assert!(r
        .check(LibFn::Recv, &mut ports(Some(5556), Some(7000)))
        .is_none());
    assert!(r.check(LibFn::Recv, &mut ports(Some(5555), None)).is_none());
}

#[test]
fn process_filters_are_evaluated_at_bind_and_fork() {
    let r = RuleSet::new(vec![
        ok("recv:eof,pid=10"),
        ok("recv:eof,exe=python3*"),
        ok("recv:eof,exe=nginx"),
        ok("recv:eof,argv=server.py"),
        ok("recv:eof,argv=client.py"),
    ]);
    assert!(
        r.rules().iter().all(|x| !x.applies()),
        "nothing applies before bind"
    );
    assert!(r.check(LibFn::Recv, &mut NoPorts).is_none());
    r.bind(&proc(10));
    let applies: Vec<bool> = r.rules().iter().map(|x| x.applies()).collect();
    assert_eq!(applies, [true, true, false, true, false]);
    r.on_fork(11);
    let applies: Vec<bool> = r.rules().iter().map(|x| x.applies()).collect();
    assert_eq!(applies, [false, true, false, true, false]);
}

#[test]
fn counters_are_per_process_and_restart_after_fork() {
    let r = set(&["recv:eof,nth=3"], 1);
    assert_eq!(injected(&r, LibFn::Recv, 5, KnownPorts::default()), vec![3]);
    r.on_fork(2);
    assert_eq!(r.rules()[0].seen(), 0);
    assert_eq!(injected(&r, LibFn::Recv, 5, KnownPorts::default()), vec![3]);
}

#[test]
fn first_rule_wins_and_later_rules_still_count() {
    let r = set(
        &["recv:eof,nth=2", "recv:short=1,nth=2", "recv:short=2,nth=3"],
        1,
    );
    assert!(r.check(LibFn::Recv, &mut NoPorts).is_none());
    let h = r.check(LibFn::Recv, &mut NoPorts).unwrap();
    assert_eq!((h.rule, h.effect), (0, Effect::Eof));
    let h = r.check(LibFn::Recv, &mut NoPorts).unwrap();
    assert_eq!((h.rule, h.effect), (2, Effect::Short(2)));
    assert_eq!(r.rules()[1].fired(), 0);
    assert_eq!(r.rules()[1].seen(), 3);
}

#[test]
fn prob_is_deterministic_and_close_to_p() {
    let spec = "send|write:delay=20ms,prob=0.05,seed=7";
    let a = set(&[spec], 1);
    let b = set(&[spec], 99);
    let ia = injected(&a, LibFn::Write, 20_000, KnownPorts::default());
    let ib = injected(&b, LibFn::Write, 20_000, KnownPorts::default());
    assert_eq!(ia, ib, "same spec and seed: same calls");
    let rate = ia.len() as f64 / 20_000.0;
    assert!((0.04..0.06).contains(&rate), "rate {rate}");
    // Exactly the calls whose splitmix64 output is below the threshold.
    let t = ok(spec).prob_threshold.unwrap();
    let expect: Vec<u64> = (1..=20_000).filter(|&c| splitmix64_nth(7, c) < t).collect();
    assert_eq!(ia, expect);
    // Another seed picks other calls.
    let c = set(&["send|write:delay=20ms,prob=0.05,seed=8"], 1);
    assert_ne!(
        injected(&c, LibFn::Write, 20_000, KnownPorts::default()),
        ia
    );
    // send and write share the rule's counter.
    let d = set(&[spec], 1);
    let mixed: Vec<u64> = (1..=20_000u64)
        .filter(|&i| {
            let f = if i % 2 == 0 {
                LibFn::Send
            } else {
                LibFn::Write
            };
            d.check(f, &mut NoPorts).is_some()
        })
        .collect();
    assert_eq!(mixed, ia);
    // prob=0 never, prob=1 always.
    assert!(injected(
        &set(&["recv:eof,prob=0"], 1),
        LibFn::Recv,
        1000,
        KnownPorts::default()
    )
    .is_empty());
    assert_eq!(
        injected(
            &set(&["recv:eof,prob=1"], 1),
            LibFn::Recv,
            1000,
            KnownPorts::default()
        )
        .len(),
        1000
    );
}

#[test]
fn splitmix64_matches_the_reference_stream() {
    // Reference: x = seed; x += 0x9E3779B97F4A7C15; mix(x) — first outputs for seed 0.
    assert_eq!(splitmix64_nth(0, 1), 0xE220_A839_7B1D_CDAF);
    assert_eq!(splitmix64_nth(0, 2), 0x6E78_9E6A_A1B9_65F4);
}

#[test]
fn threads_share_the_counters_and_count_each_call_once() {
    let r = std::sync::Arc::new(set(&["recv:eof,after=1000,count=7"], 1));
    let hits: usize = (0..4)
        .map(|_| {
            let r = r.clone();
            std::thread::spawn(move || {
                (0..1000)
                    .filter(|_| r.check(LibFn::Recv, &mut NoPorts).is_some())
                    .count()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .sum();
    assert_eq!(hits, 7);
    assert_eq!(r.rules()[0].seen(), 4000);
    assert_eq!(r.rules()[0].fired(), 7);
}

#[test]
fn fd_ports_reads_real_sockets() {
    use std::os::fd::AsRawFd;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut p = FdPorts::new(c.as_raw_fd());
    assert_eq!(p.peer_port(), Some(port));
    assert_eq!(p.local_port(), Some(c.local_addr().unwrap().port()));
    let (u, _) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut p = FdPorts::new(u.as_raw_fd());
    assert_eq!((p.local_port(), p.peer_port()), (None, None));
    let mut p = FdPorts::new(-1);
    assert_eq!(p.peer_port(), None);
    // Why a lookup failed: the caller tells "not connected (any more)" from the rest.
    let t = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    assert_eq!(socket_port(t.as_raw_fd(), true), Err(libc::ENOTCONN));
    assert_eq!(
        socket_port(t.as_raw_fd(), false),
        Ok(Some(t.local_addr().unwrap().port()))
    );
    assert_eq!(socket_port(-1, true), Err(libc::EBADF));
    let f = std::fs::File::open("/proc/self/stat").unwrap();
    assert_eq!(socket_port(f.as_raw_fd(), false), Err(libc::ENOTSOCK));
}

#[test]
fn a_rule_set_says_whether_it_has_port_keys() {
    assert!(!set(&["recv:eof,nth=2", "send:short=1"], 1).has_port_keys());
    assert!(set(&["recv:eof", "send:short=1,local-port=5"], 1).has_port_keys());
    assert!(set(&["recv:eof,peer-port=7000"], 1).has_port_keys());
}

proptest! {
    #[test]
    fn parser_never_panics_and_errors_point_inside(s in "[a-z_|:=,0-9.A-Z-]{0,40}") {
        match parse_spec(&s) {
            Ok(spec) => prop_assert_eq!(spec.text, s),
            Err(e) => prop_assert!(e.column >= 1 && e.column <= s.chars().count() + 1, "{}", e),
        }
    }

    #[test]
    fn generated_rules_parse_to_what_was_written(
        f in prop::sample::select(vec!["recv", "read", "recvfrom", "readv", "recvmsg"]),
        n in 1u64..100_000,
        nth in prop::option::of(1u64..1_000_000),
        after in prop::option::of(0u64..1_000_000),
        count in 0u64..100,
        port in 1u16..=65535,
        seed in any::<u64>(),
        permille in 0u32..=1000,
    ) {
        let mut s = format!("{f}:short={n},peer-port={port},count={count},seed={seed}");
        if let Some(v) = nth { s.push_str(&format!(",nth={v}")); }
        if let Some(v) = after { s.push_str(&format!(",after={v}")); }
        s.push_str(&format!(",prob={}.{:03}", permille / 1000, permille % 1000));
        let spec = parse_spec(&s).unwrap();
        prop_assert_eq!(spec.effect, Effect::Short(n));
        prop_assert_eq!(spec.funcs, vec![LibFn::from_name(f).unwrap()]);
        prop_assert_eq!(spec.nth, nth);
        prop_assert_eq!(spec.after, after);
        prop_assert_eq!(spec.count, count);
        prop_assert_eq!(spec.peer_port, Some(port));
        prop_assert_eq!(spec.seed, seed);
        let t = spec.prob_threshold.unwrap();
        if permille == 1000 { prop_assert_eq!(t, u64::MAX); }
        else { prop_assert!(((t as f64) / 2f64.powi(64) - permille as f64 / 1000.0).abs() < 1e-9); }
    }

    #[test]
    fn a_corrupted_rule_is_rejected_at_or_before_the_damage(
        cut in 0usize..40, junk in prop::sample::select(vec!['!', ' ', '#', '@'])
    ) {
        let good = "read:errno=ECONNRESET,peer-port=7000,after=600,count=1";
        let cut = cut.min(good.len());
        let bad = format!("{}{}{}", &good[..cut], junk, &good[cut..]);
        let e = parse_spec(&bad).unwrap_err();
        prop_assert!(e.column <= cut + 1, "{} for {:?}", e, bad);
    }
}

#[test]
fn help_names_every_function_effect_and_key_and_its_examples_parse() {
    for k in KEYS {
        assert!(HELP.contains(&format!("{k}=")), "{k}");
    }
    for e in [
        "short=N",
        "errno=NAME",
        "eof",
        "corrupt=N",
        "delay=DURATION",
        "close",
        "kill=SIGNAL",
        "py:MODULE:QUALNAME:raise=EXCEPTION",
    ] {
        assert!(HELP.contains(e), "{e}");
    }
    let mut all = FnSet::EMPTY;
    for e in [Effect::Short(1), Effect::Errno(1), Effect::Delay(1)] {
        all.union_with(&e.applicable());
    }
    for f in all.iter() {
        assert!(
            HELP.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|w| w == f.name()),
            "{}",
            f.name()
        );
    }
    let examples: Vec<&str> = HELP
        .lines()
        .skip_while(|l| !l.ends_with("Examples:"))
        .skip(1)
        .collect();
    assert_eq!(examples.len(), 4);
    for ex in examples {
        ok(ex.trim());
    }
    assert!(HELP.lines().all(|l| l.chars().count() <= 80));
}

#[test]
fn kill_parses_names_and_numbers_and_applies_to_every_seamed_call() {
    assert_eq!(
        ok("recv:kill=SIGKILL,nth=3").effect,
        Effect::Signal(libc::SIGKILL)
    );
    assert_eq!(
        ok("accept|close:kill=SIGSTOP").effect,
        Effect::Signal(libc::SIGSTOP)
    );
    assert_eq!(ok("epoll_wait:kill=15").effect, Effect::Signal(15));
    err_at("recv:kill=SIGFOO", 11, "a signal name", "`SIGFOO`");
    err_at("recv:kill=0", 11, "a signal name", "`0`");
    err_at("recv:kill", 10, "`=` after `kill`", "end of rule");
    err_at(
        "fork:kill=SIGKILL",
        1,
        "a function `kill` applies to",
        "`fork`",
    );
}

#[test]
fn py_rules_parse_with_their_keys_and_match_no_libc_call() {
    let s = ok("py:pkg.module:Class.method:raise=TimeoutError,nth=5");
    assert!(s.funcs.is_empty());
    assert_eq!(s.effect, Effect::Raise);
    assert_eq!(s.nth, Some(5));
    let t = s.py.as_ref().unwrap();
    assert_eq!(
        (t.module.as_str(), t.qualname.as_str(), t.exception.as_str()),
        ("pkg.module", "Class.method", "TimeoutError")
    );
    let s =
        ok("py:m:f:raise=socket.timeout,after=2,count=1,prob=0.5,seed=3,argv=srv.py,exe=python3*");
    assert_eq!(s.py.unwrap().exception, "socket.timeout");
    assert_eq!((s.after, s.count, s.seed), (Some(2), 1, 3));
    err_at("py::f:raise=E", 4, "a dotted module name", "`:f`");
    err_at("py:m.1x:f:raise=E", 4, "a dotted module name", "`m.1x`");
    err_at("py:m:f:errno=EAGAIN", 8, "raise=EXCEPTION", "`errno`");
    err_at("py:m:f", 7, "`:` and an effect", "end of rule");
    err_at(
        "py:m:f:raise=E,peer-port=80",
        16,
        "a Python function has no socket",
        "`peer-port`",
    );
    err_at("py:m:f:raise=E,bogus=1", 16, "a key", "`bogus`");
    // libtrace.so's matcher never fires a py: rule, and a lib rule after it keeps its index.
    let r = set(&["py:m:f:raise=E", "recv:eof,nth=1"], 7);
    let hit = r.check(LibFn::Recv, &mut NoPorts).unwrap();
    assert_eq!(hit.rule, 1);
    assert_eq!(record_func_name(PY_FUNC_ID), "python");
    assert_eq!(record_func_name(LibFn::Recv.id() as u16), "recv");
}

#[test]
fn time_keys_parse_to_nanoseconds() {
    let s = ok("recv|read:delay=5ms,at=1795862400.25,local-port=5432");
    assert_eq!(s.at_ns, Some(1_795_862_400_250_000_000));
    assert_eq!(s.after_s_ns, None);
    assert_eq!(ok("recv:eof,after-s=30").after_s_ns, Some(30_000_000_000));
    assert_eq!(ok("recv:eof,after-s=0.000000001").after_s_ns, Some(1));
    assert_eq!(
        ok("py:m:f:raise=TimeoutError,at=10,after-s=2").at_ns,
        Some(10_000_000_000)
    );
    err_at("recv:eof,at=", 13, "a UNIX time in seconds", "end of rule");
    err_at("recv:eof,at=-5", 13, "a UNIX time in seconds", "`-5`");
    err_at("recv:eof,after-s=1.5s", 21, "`,` or the end", "`s`");
    err_at(
        "recv:eof,at=1.0000000001",
        13,
        "a whole number of nanoseconds",
        "`1.0000000001`",
    );
    err_at(
        "recv:eof,at=99999999999",
        13,
        "below 584 years",
        "`99999999999`",
    );
    err_at("recv:eof,at=1,at=2", 15, "each key at most once", "`at`");
}

/// Runs `n` calls of `f` at the times `t(i)` (i = 1..=n) and returns the injected ones.
fn injected_at(r: &RuleSet, f: LibFn, n: u64, t: impl Fn(u64) -> u64) -> Vec<u64> {
    (1..=n)
        .filter(|&i| r.check_with_clock(f, &mut NoPorts, || t(i)).is_some())
        .collect()
}

#[test]
fn at_opens_the_rule_at_its_instant_and_earlier_calls_are_not_counted() {
    let r = RuleSet::new(vec![ok("read:delay=1ms,at=100,nth=2")]);
    r.bind(&proc(1));
    // Calls 1..=5 at 96..100 s are before the instant: not counted; from call 5 (t = 100 s)
    // on they match, so nth=2 is call 6.
    let t = |i: u64| (95 + i) * 1_000_000_000;
    assert_eq!(injected_at(&r, LibFn::Read, 10, t), vec![6]);
    assert_eq!(r.rules()[0].seen(), 6);
    // Once open, a clock stepped back does not close it.
    assert!(r
        .check_with_clock(LibFn::Read, &mut NoPorts, || 0)
        .is_none());
    assert_eq!(r.rules()[0].seen(), 7, "counted though the clock reads 0");
}

#[test]
fn after_s_counts_from_the_process_start_and_again_from_a_fork() {
    let r = set(&["recv:eof,after-s=2.5,count=2", "recv:eof,at=50"], 1);
    r.restart(1, 10_000_000_000);
    let t = |i: u64| 10_000_000_000 + i * 1_000_000_000; // 11, 12, … s
                                                         // after-s opens at 12.5 s: calls 3 (13 s) and 4; count=2 stops it; rule 1 opens at 50 s
                                                         // (call 40) and takes every call from there on.
    let got = injected_at(&r, LibFn::Recv, 42, t);
    assert_eq!(got, vec![3, 4, 40, 41, 42]);
    // A child forked at 100 s waits until 102.5 s; rule 1's instant has passed.
    r.restart(2, 100_000_000_000);
    let hits: Vec<u32> = [101, 102, 103]
        .iter()
        .filter_map(|&s| {
            r.check_with_clock(LibFn::Recv, &mut NoPorts, || s * 1_000_000_000)
                .map(|h| h.rule)
        })
        .collect();
    assert_eq!(hits, vec![1, 1, 0]);
}

#[test]
fn a_rule_without_time_keys_never_reads_the_clock() {
    let r = set(&["recv:eof,nth=2", "send:close"], 1);
    let clock = || -> u64 { panic!("clock read") };
    assert!(r
        .check_with_clock(LibFn::Recv, &mut NoPorts, clock)
        .is_none());
    assert!(r
        .check_with_clock(LibFn::Recv, &mut NoPorts, clock)
        .is_some());
}
