//! Property tests of the entry format: encode → decode is the identity for every kind,
//! option and metadata record; the decoder never panics on arbitrary or truncated input
//! and its errors name the offset of the bad entry.

use bufpool::format::{
    decode_all, encode_fn, encode_lib, encode_lost, encode_meta, encode_ret, Addr, ClockSample,
    CodeKind, CodeRecord, DecodeErrorKind, Decoder, Entry, FilterRecord, InjectRecord, Kind, LibFn,
    LibOpts, MapRecord, Meta, ProcReason, ProcRecord, ReadyItem, ReadySet, ThreadRecord, ADDR_MASK,
    MAX_ENTRY, MAX_META_BODY, MAX_OPTS, MAX_READY_ITEMS, MAX_STACK, META_BUF, MIN_ENTRY, TSC_MASK,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::ValueTree;

/// Encodes one owned entry the way the tracer does.
fn encode(e: &Entry) -> Vec<u8> {
    match e {
        Entry::Fn {
            kind,
            tsc,
            caller,
            callee,
        } => encode_fn(*kind, *tsc, *caller, *callee).as_bytes().to_vec(),
        Entry::Ret {
            kind,
            tsc,
            callee,
            aux,
        } => encode_ret(*kind, *tsc, *callee, *aux).as_bytes().to_vec(),
        Entry::Lib {
            kind,
            tsc,
            caller,
            func,
            opts,
        } => encode_lib(*kind, *tsc, *caller, *func, opts)
            .as_bytes()
            .to_vec(),
        Entry::Lost { tsc, count } => encode_lost(*tsc, *count).as_bytes().to_vec(),
        Entry::Meta { tsc, meta } => {
            let mut b = [0u8; META_BUF];
            let n = encode_meta(*tsc, meta, &mut b);
            b[..n].to_vec()
        }
    }
}

fn tsc() -> impl Strategy<Value = u64> {
    any::<u64>().prop_map(|t| t & TSC_MASK)
}

fn addr48() -> impl Strategy<Value = u64> {
    any::<u64>().prop_map(|a| a & ADDR_MASK)
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..=max)
}

fn sockaddr() -> impl Strategy<Value = Addr> {
    prop_oneof![
        (any::<u16>(), any::<[u8; 4]>()).prop_map(|(p, a)| Addr::new(2, p, &a)),
        (any::<u16>(), any::<[u8; 16]>()).prop_map(|(p, a)| Addr::new(10, p, &a)),
        bytes(108).prop_map(|path| Addr::new(1, 0, &path)),
        (any::<u16>(), any::<u16>(), bytes(30)).prop_map(|(f, p, b)| Addr::new(f, p, &b)),
    ]
}

fn ready() -> impl Strategy<Value = ReadySet> {
    (
        any::<bool>(),
        vec((any::<u32>(), any::<u16>()), 0..=MAX_READY_ITEMS + 3),
    )
        .prop_map(|(t, items)| {
            let mut r = ReadySet::default();
            r.truncated = t;
            for (id, events) in items {
                r.push(ReadyItem { id, events });
            }
            r
        })
}

/// Any options, including combinations too large for one entry.
fn opts() -> impl Strategy<Value = LibOpts> {
    (
        (
            any::<Option<i32>>(),
            any::<Option<i32>>(),
            any::<Option<u64>>(),
            any::<Option<i64>>(),
            any::<Option<i32>>(),
            any::<Option<u32>>(),
            any::<Option<u64>>(),
            any::<Option<u64>>(),
        ),
        (
            any::<Option<u32>>(),
            any::<Option<bool>>(),
            proptest::option::of(sockaddr()),
            proptest::option::of(sockaddr()),
            proptest::option::of(ready()),
            vec(addr48(), 0..=MAX_STACK + 2),
            proptest::option::of(bytes(120)),
        ),
    )
        .prop_map(
            |(
                (fd, fd2, len, ret, errno, flags, arg, arg2),
                (inject, is_socket, local, peer, ready, stack, s),
            )| {
                let mut o = LibOpts {
                    fd,
                    fd2,
                    len,
                    ret,
                    errno,
                    flags,
                    arg,
                    arg2,
                    inject,
                    is_socket,
                    local,
                    peer,
                    ready,
                    ..Default::default()
                };
                o.set_stack(&stack);
                if let Some(s) = s {
                    o.set_str(&s);
                }
                o
            },
        )
}

/// The size the option block would have if nothing had to be cut.
fn full_opts_size(o: &LibOpts) -> usize {
    let fixed = [
        o.fd.map(|_| 5),
        o.fd2.map(|_| 5),
        o.len.map(|_| 9),
        o.ret.map(|_| 9),
        o.errno.map(|_| 5),
        o.flags.map(|_| 5),
        o.arg.map(|_| 9),
        o.arg2.map(|_| 9),
        o.inject.map(|_| 5),
        o.is_socket.map(|_| 2),
        o.ready.map(|r| 3 + 6 * r.items().len()),
        o.local.map(|a| 6 + a.bytes().len()),
        o.peer.map(|a| 6 + a.bytes().len()),
        (o.stack_len > 0).then(|| 2 + 6 * o.stack_len as usize),
        o.str_bytes().map(|s| 2 + s.len()),
    ];
    fixed.iter().flatten().sum()
}

fn meta() -> impl Strategy<Value = Meta> {
    prop_oneof![
        (
            0..3u8,
            any::<u32>(),
            any::<u32>(),
            any::<u64>(),
            bytes(200),
            vec(bytes(40), 0..8)
        )
            .prop_map(
                |(r, pid, ppid, start_ticks, exe, argv)| Meta::Proc(ProcRecord {
                    reason: [ProcReason::Start, ProcReason::Fork, ProcReason::Exec][r as usize],
                    pid,
                    ppid,
                    start_ticks,
                    exe,
                    argv,
                })
            ),
        (any::<u32>(), any::<u32>(), bytes(16))
            .prop_map(|(tid, pid, name)| Meta::Thread(ThreadRecord { tid, pid, name })),
        (any::<u64>(), any::<u64>(), any::<u64>(), 0..8u8, bytes(200)).prop_map(
            |(start, end, offset, prot, path)| Meta::Map(MapRecord {
                start,
                end,
                offset,
                prot,
                path
            })
        ),
        (any::<u32>(), 0..3u8, any::<u32>(), bytes(100), bytes(100)).prop_map(
            |(index, k, first_line, name, file)| Meta::Code(CodeRecord {
                index,
                kind: [CodeKind::PyCode, CodeKind::PyBuiltin, CodeKind::PyExcType][k as usize],
                first_line,
                name,
                file
            })
        ),
        (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(tsc, realtime_ns, monotonic_ns)| {
            Meta::Clock(ClockSample {
                tsc,
                realtime_ns,
                monotonic_ns,
            })
        }),
        (
            any::<u32>(),
            any::<u16>(),
            any::<i32>(),
            any::<i64>(),
            any::<i64>(),
            any::<i32>(),
            bytes(80)
        )
            .prop_map(
                |(rule, func, fd, original_ret, forced_ret, forced_errno, spec)| {
                    Meta::Inject(InjectRecord {
                        rule,
                        func,
                        fd,
                        original_ret,
                        forced_ret,
                        forced_errno,
                        spec,
                    })
                }
            ),
        (any::<u32>(), any::<u8>(), bytes(200)).prop_map(|(depth_limit, clock_mode, excluded)| {
            Meta::Filter(FilterRecord {
                depth_limit,
                clock_mode,
                excluded,
            })
        }),
    ]
}

/// Options that always fit one entry (so they must round-trip exactly).
fn fitting_opts() -> impl Strategy<Value = LibOpts> {
    opts().prop_filter("fits one entry", |o| full_opts_size(o) <= MAX_OPTS)
}

fn entry_with(o: BoxedStrategy<LibOpts>) -> impl Strategy<Value = Entry> {
    let call = [Kind::FnEnter, Kind::PyCall, Kind::PyCCall, Kind::PyExc];
    let ret = [Kind::FnExit, Kind::PyReturn, Kind::PyCReturn];
    prop_oneof![
        (0..call.len(), tsc(), addr48(), addr48()).prop_map(move |(k, tsc, caller, callee)| {
            Entry::Fn {
                kind: call[k],
                tsc,
                caller,
                callee,
            }
        }),
        (0..ret.len(), tsc(), addr48(), any::<u16>()).prop_map(move |(k, tsc, callee, aux)| {
            Entry::Ret {
                kind: ret[k],
                tsc,
                callee,
                aux,
            }
        }),
        (any::<bool>(), tsc(), addr48(), 0..LibFn::ALL.len(), o).prop_map(
            |(exit, tsc, caller, f, opts)| Entry::Lib {
                kind: if exit { Kind::LibExit } else { Kind::LibEnter },
                tsc,
                caller,
                func: LibFn::ALL[f],
                opts: Box::new(opts),
            }
        ),
        (tsc(), any::<u64>()).prop_map(|(tsc, count)| Entry::Lost { tsc, count }),
        (tsc(), meta()).prop_map(|(tsc, meta)| Entry::Meta { tsc, meta }),
    ]
}

fn entry() -> impl Strategy<Value = Entry> {
    entry_with(fitting_opts().boxed())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn streams_round_trip(entries in vec(entry(), 0..40)) {
        let mut buf = Vec::new();
        let mut offsets = Vec::new();
        for e in &entries {
            let b = encode(e);
            if !matches!(e, Entry::Meta { .. }) {
                prop_assert!((MIN_ENTRY..=MAX_ENTRY).contains(&b.len()), "size {}", b.len());
            }
            offsets.push(buf.len() as u64);
            buf.extend_from_slice(&b);
        }
        prop_assert_eq!(&decode_all(&buf).unwrap(), &entries);
        let seen: Vec<u64> = Decoder::new(&buf).map(|e| e.unwrap().offset).collect();
        prop_assert_eq!(seen, offsets);
    }

    #[test]
    fn oversized_options_are_cut_stably(o in opts()) {
        let mut a = [0u8; MAX_OPTS];
        let n = o.encode(&mut a);
        prop_assert!(n <= MAX_OPTS);
        let parsed = LibOpts::parse(&a[..n]).unwrap();
        let mut b = [0u8; MAX_OPTS];
        let m = parsed.encode(&mut b);
        prop_assert_eq!(&a[..n], &b[..m], "re-encoding what was decoded changes nothing");
        // The small fixed-size options are always kept.
        prop_assert_eq!((parsed.fd, parsed.ret, parsed.errno, parsed.len), (o.fd, o.ret, o.errno, o.len));
        if full_opts_size(&o) <= MAX_OPTS {
            prop_assert_eq!(parsed, o);
        }
    }

    #[test]
    fn oversized_metadata_is_cut_to_fit(
        big in bytes(9000), argv in vec(bytes(1500), 0..6), tsc in tsc(),
    ) {
        for m in [
            Meta::Proc(ProcRecord { reason: ProcReason::Exec, pid: 1, ppid: 2, start_ticks: 3,
                                    exe: big.clone(), argv: argv.clone() }),
            Meta::Proc(ProcRecord { reason: ProcReason::Start, pid: 1, ppid: 2, start_ticks: 3,
                                    exe: b"/bin/x".to_vec(), argv: argv.clone() }),
            Meta::Code(CodeRecord { index: 7, kind: CodeKind::PyCode, first_line: 9,
                                    name: big.clone(), file: big.clone() }),
            Meta::Map(MapRecord { start: 1, end: 2, offset: 3, prot: 5, path: big.clone() }),
            Meta::Filter(FilterRecord { depth_limit: 1, clock_mode: 0, excluded: big.clone() }),
        ] {
            let mut b = [0u8; META_BUF];
            let n = encode_meta(tsc, &m, &mut b);
            prop_assert!(n <= 10 + MAX_META_BODY);
            let d = decode_all(&b[..n]).unwrap();
            prop_assert_eq!(d.len(), 1);
            let Entry::Meta { meta, .. } = &d[0] else { panic!("not metadata") };
            prop_assert_eq!(meta.kind(), m.kind());
            if let (Meta::Proc(got), Meta::Proc(want)) = (meta, &m) {
                // Whole argv entries are dropped from the end, never cut.
                prop_assert!(got.argv.len() <= want.argv.len());
                prop_assert_eq!(&got.argv[..], &want.argv[..got.argv.len()]);
                prop_assert!(want.exe.starts_with(&got.exe));
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_errors_name_the_entry(data in bytes(600)) {
        check_decoder(&data);
    }

    #[test]
    fn mutated_streams_never_panic(
        entries in vec(entry_with(opts().boxed()), 1..10),
        flips in vec((any::<usize>(), any::<u8>()), 1..8),
    ) {
        let mut buf: Vec<u8> = entries.iter().flat_map(encode).collect();
        for (at, x) in flips {
            let i = at % buf.len();
            buf[i] ^= x;
        }
        check_decoder(&buf);
    }
}

/// Decodes `data` completely (options and metadata too): entries tile the buffer from
/// offset 0, and an error, if any, sits exactly where the next entry would start.
fn check_decoder(data: &[u8]) {
    let mut next = 0u64;
    for r in Decoder::new(data) {
        match r {
            Ok(e) => {
                assert_eq!(e.offset, next);
                assert!(e.size >= MIN_ENTRY.min(10));
                next += e.size as u64;
                let _ = e.to_owned();
            }
            Err(err) => {
                assert_eq!(err.offset, next, "the error names the bad entry: {err}");
                assert!(err.to_string().contains(&format!("offset {next}")));
                return;
            }
        }
    }
    assert_eq!(
        next,
        data.len() as u64,
        "no error means every byte was decoded"
    );
}

/// Cutting a valid stream at every byte position yields the entries before the cut and a
/// `Truncated` error at the entry that was cut.
#[test]
fn truncation_at_every_byte_is_a_typed_error() {
    let mut o = LibOpts {
        fd: Some(3),
        ret: Some(-1),
        errno: Some(111),
        peer: Some(Addr::new(2, 7000, &[127, 0, 0, 1])),
        ..Default::default()
    };
    let mut r = ReadySet::default();
    r.push(ReadyItem { id: 4, events: 1 });
    o.ready = Some(r);
    o.set_stack(&[0x401000, 0x402000]);
    o.set_str(b"/usr/bin/true");
    let entries = vec![
        Entry::Fn {
            kind: Kind::FnEnter,
            tsc: 1,
            caller: 2,
            callee: 3,
        },
        Entry::Lib {
            kind: Kind::LibExit,
            tsc: 4,
            caller: 5,
            func: LibFn::Connect,
            opts: Box::new(o),
        },
        Entry::Ret {
            kind: Kind::FnExit,
            tsc: 6,
            callee: 3,
            aux: 0,
        },
        Entry::Lost { tsc: 7, count: 99 },
        Entry::Meta {
            tsc: 8,
            meta: Meta::Thread(ThreadRecord {
                tid: 9,
                pid: 10,
                name: b"worker".to_vec(),
            }),
        },
    ];
    let mut buf = Vec::new();
    let mut starts = Vec::new();
    for e in &entries {
        starts.push(buf.len());
        buf.extend(encode(e));
    }
    for cut in 0..=buf.len() {
        let whole = starts.iter().filter(|&&s| s < cut).count();
        let cut_inside = !starts.contains(&cut) && cut < buf.len();
        let got: Vec<_> = Decoder::new(&buf[..cut]).collect();
        let oks = got.iter().filter(|r| r.is_ok()).count();
        if cut_inside {
            assert_eq!(oks, whole - 1, "cut at {cut}");
            let err = got.last().unwrap().as_ref().unwrap_err();
            assert_eq!(err.offset as usize, starts[whole - 1], "cut at {cut}");
            assert!(
                matches!(err.kind, DecodeErrorKind::Truncated { .. }),
                "cut at {cut}: {err}"
            );
        } else {
            assert_eq!(oks, whole, "cut at {cut}");
            assert_eq!(got.len(), whole);
            assert_eq!(decode_all(&buf[..cut]).unwrap(), entries[..whole]);
        }
    }
}

#[test]
fn malformed_blocks_name_the_entry_and_the_position() {
    // A LibExit whose option block has an unknown tag at +5.
    let o = LibOpts {
        fd: Some(1),
        ..Default::default()
    };
    let mut b = encode_lib(Kind::LibExit, 1, 2, LibFn::Recv, &o)
        .as_bytes()
        .to_vec();
    b[20] += 1;
    b.push(0xee);
    let mut stream = encode_lost(0, 1).as_bytes().to_vec();
    stream.extend(&b);
    let err = decode_all(&stream).unwrap_err();
    assert_eq!(err.offset, 16);
    assert_eq!(
        err.kind,
        DecodeErrorKind::Malformed {
            what: "option block",
            at: 5,
            msg: "unknown option tag"
        }
    );
    // An unknown library function id.
    let mut b = encode_lib(Kind::LibEnter, 1, 2, LibFn::Recv, &o)
        .as_bytes()
        .to_vec();
    b[14] = 0xff;
    b[15] = 0x0f;
    let err = decode_all(&b).unwrap_err();
    assert!(matches!(err.kind, DecodeErrorKind::UnknownLibFn(_)));
    // Metadata with trailing bytes.
    let mut m = [0u8; META_BUF];
    let n = encode_meta(
        0,
        &Meta::Clock(ClockSample {
            tsc: 1,
            realtime_ns: 2,
            monotonic_ns: 3,
        }),
        &mut m,
    );
    let mut b = m[..n].to_vec();
    b[8] += 1;
    b.push(0);
    let err = decode_all(&b).unwrap_err();
    assert!(err.to_string().contains("trailing bytes"), "{err}");
}

/// Writes a few valid entry streams as seeds for the fuzzer (`bufpool/fuzz/run.sh`
/// runs this with `CULPRIT_FUZZ_SEED_DIR` set).
#[test]
#[ignore = "writes fuzz seeds; run by bufpool/fuzz/run.sh"]
fn write_fuzz_seeds() {
    let Some(dir) = std::env::var_os("CULPRIT_FUZZ_SEED_DIR") else {
        eprintln!("CULPRIT_FUZZ_SEED_DIR is not set: nothing to write");
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strat = vec(entry(), 1..12);
    for i in 0..64 {
        let entries = strat.new_tree(&mut runner).unwrap().current();
        let buf: Vec<u8> = entries.iter().flat_map(encode).collect();
        std::fs::write(dir.join(format!("seed{i:02}")), buf).unwrap();
    }
}
