//! The fast scalar reader and writer ([`ScalarOpts`]) against the full option codec
//! ([`LibOpts`]): the writer's bytes are the full encoder's, and the reader takes only
//! blocks the checking parser reads the same way — every block of scalars (with a ready set
//! or a string or not), never one with an address or a call stack.

use bufpool::format::{
    Addr, LibOpts, ReadyItem, ReadySet, ScalarOpts, MAX_OPTS, MAX_READY_ITEMS, MAX_SCALAR_BYTES,
};
use proptest::collection::vec;
use proptest::prelude::*;

fn scalars() -> impl Strategy<Value = ScalarOpts> {
    (
        (
            any::<Option<i32>>(),
            any::<Option<i32>>(),
            any::<Option<u64>>(),
            any::<Option<i64>>(),
            any::<Option<i32>>(),
        ),
        (
            any::<Option<u32>>(),
            any::<Option<u64>>(),
            any::<Option<u64>>(),
            any::<Option<u32>>(),
            any::<Option<bool>>(),
        ),
    )
        .prop_map(
            |((fd, fd2, len, ret, errno), (flags, arg, arg2, inject, is_socket))| ScalarOpts {
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
            },
        )
}

/// Scalars in a full `LibOpts`, with what the fast reader skips (a ready set, a string) or
/// refuses (addresses, a call stack) now and then.
fn opts() -> impl Strategy<Value = LibOpts> {
    (
        scalars(),
        proptest::option::of(vec((any::<u32>(), any::<u16>()), 0..=MAX_READY_ITEMS)),
        proptest::option::of(vec(any::<u8>(), 0..=40)),
        0..8u8,
    )
        .prop_map(|(s, ready, string, rare)| {
            let mut o = LibOpts::from(s);
            o.ready = ready.map(|items| {
                let mut r = ReadySet::default();
                for (id, events) in items {
                    r.push(ReadyItem { id, events });
                }
                r
            });
            if let Some(b) = string {
                o.set_str(&b);
            }
            match rare {
                0 => o.peer = Some(Addr::new(2, 80, &[10, 0, 0, 1])),
                1 => o.local = Some(Addr::new(1, 0, b"/tmp/s")),
                2 => o.set_stack(&[0x1000, 0x2000]),
                _ => {}
            }
            o
        })
}

fn encode(o: &LibOpts) -> Vec<u8> {
    let mut out = [0u8; MAX_OPTS];
    let n = o.encode(&mut out);
    out[..n].to_vec()
}

/// What the fast reader must say of `block`: the scalars of the checking parser's reading,
/// or a refusal where that reading has an address or a stack or fails. It may also refuse
/// an odd block of scalars (a call stack later superseded by an empty one: the checking
/// decoder then reads it, with the same result), but never the block the tracer writes
/// for those scalars.
fn check(block: &[u8]) -> Result<Option<ScalarOpts>, TestCaseError> {
    let fast = ScalarOpts::parse(block);
    match (LibOpts::parse(block), fast) {
        (Ok(full), Some(s)) => {
            prop_assert_eq!(s, ScalarOpts::of(&full), "{:02x?}", block);
            prop_assert!(full.local.is_none() && full.peer.is_none() && full.stack_len == 0);
        }
        (Ok(full), None) => {
            if full.local.is_none() && full.peer.is_none() && full.stack_len == 0 {
                let canon = encode(&full);
                prop_assert!(
                    ScalarOpts::parse(&canon).is_some(),
                    "a block of scalars refused: {:02x?} (written for {:02x?})",
                    canon,
                    block
                );
            }
        }
        (Err(e), Some(s)) => prop_assert!(false, "{block:02x?} taken as {s:?}, but: {e:?}"),
        (Err(_), None) => {}
    }
    Ok(fast)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn the_scalar_writer_writes_what_the_full_encoder_writes(s in scalars()) {
        let full = encode(&LibOpts::from(s));
        let mut out = [0xaau8; 3 + MAX_SCALAR_BYTES];
        let end = s.encode_into(&mut out, 3);
        prop_assert_eq!(&out[3..end], &full[..]);
        prop_assert_eq!(ScalarOpts::parse(&full), Some(s));
    }

    #[test]
    fn the_scalar_reader_agrees_with_the_full_parser(o in opts()) {
        let block = encode(&o);
        // `check` asks the fast reader to take it exactly when it has no address or stack
        // (the encoder may have left some out for room).
        prop_assert!(LibOpts::parse(&block).is_ok());
        check(&block)?;
    }

    #[test]
    fn damaged_blocks_are_refused_or_read_as_the_full_parser_reads_them(
        o in opts(),
        cut in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        v in prop_oneof![Just(0u8), 1..=0x0fu8, any::<u8>()],
    ) {
        let block = encode(&o);
        if !block.is_empty() {
            check(&block[..cut.index(block.len())])?;
            let mut d = block.clone();
            d[at.index(block.len())] = v;
            check(&d)?;
        }
    }

    #[test]
    fn any_bytes_are_refused_or_read_as_the_full_parser_reads_them(b in vec(any::<u8>(), 0..=MAX_OPTS)) {
        check(&b)?;
    }
}

/// The three layouts read whole (descriptor and length, the same and the result, a length
/// alone) are the ones the encoder writes for them.
#[test]
fn the_common_layouts_read_whole_are_the_encoders() {
    let cases = [
        ScalarOpts {
            fd: Some(7),
            len: Some(1 << 40),
            ..Default::default()
        },
        ScalarOpts {
            fd: Some(-1),
            len: Some(8),
            ret: Some(-5),
            ..Default::default()
        },
        ScalarOpts {
            len: Some(3),
            ..Default::default()
        },
    ];
    for (s, size) in cases.into_iter().zip([14, 23, 9]) {
        let mut out = [0u8; MAX_SCALAR_BYTES];
        let n = s.encode_into(&mut out, 0);
        assert_eq!(n, size);
        assert_eq!(ScalarOpts::parse(&out[..n]), Some(s));
        // In place, over other values: only what the block has is set.
        let mut over = ScalarOpts {
            errno: Some(4),
            ..Default::default()
        };
        assert!(over.parse_into(&out[..n]));
        assert_eq!(over.errno, Some(4));
        assert_eq!((over.fd, over.len, over.ret), (s.fd, s.len, s.ret));
    }
}

/// Found by the fuzzer: a seven-frame call stack superseded by an empty one is read by the
/// checking parser as scalars only; the fast reader refuses it (the entry then takes the
/// checking path), and takes the block the tracer writes for the same options.
#[test]
fn a_superseded_call_stack_is_left_to_the_checking_parser() {
    let block: [u8; 65] = [
        0x02, 0xaa, 0x6f, 0x8e, 0x7d, 0x05, 0x0f, 0x25, 0x74, 0x20, 0x06, 0xaf, 0x5b, 0x75, 0xc8,
        0x0f, 0x00, 0x0a, 0x07, 0x64, 0x30, 0x1d, 0x37, 0x33, 0x11, 0x3e, 0x8f, 0x3d, 0x1f, 0x06,
        0x0a, 0x07, 0x64, 0x6e, 0x1d, 0x7f, 0x33, 0x11, 0x3e, 0x8f, 0x3d, 0x1f, 0x00, 0x00, 0x00,
        0x41, 0x02, 0xaa, 0x6f, 0x8e, 0x7d, 0x05, 0x0f, 0x25, 0x74, 0x20, 0x06, 0xaf, 0x5b, 0x75,
        0xc8, 0x0f, 0x00, 0x0a, 0x00,
    ];
    let full = LibOpts::parse(&block).unwrap();
    assert_eq!(full.stack_len, 0);
    assert!(ScalarOpts::parse(&block).is_none());
    check(&block).unwrap();
}
