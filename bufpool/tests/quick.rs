//! The fast entry reader ([`quick_entry`]) against the checking [`Decoder`]: every entry it
//! takes, the decoder reads the same (kind, TSC, fields, option block, size), on streams the
//! encoders write and on damaged ones; and it takes every function entry, return and
//! library call that has 21 bytes from its start.

use bufpool::format::{
    encode_fn, encode_lib, encode_ret, quick_entry, Decoder, Kind, LibFn, LibOpts, QuickEntry,
    ADDR_MASK, LIB_ENTRY_FIXED, TSC_MASK,
};
use proptest::collection::vec;
use proptest::prelude::*;

/// Checks `quick_entry` at every offset of `bytes` where the decoder starts an entry (and
/// at the others: it must not panic).
fn check(bytes: &[u8]) -> Result<usize, TestCaseError> {
    for p in 0..bytes.len() {
        let _ = quick_entry(bytes, p);
    }
    let mut taken = 0;
    let mut p = 0;
    for r in Decoder::new(bytes) {
        let q = quick_entry(bytes, p);
        let Ok(e) = r else {
            prop_assert!(q.is_none(), "taken at {p}, refused by the decoder: {q:?}");
            break;
        };
        if let Some(q) = q {
            taken += 1;
            prop_assert_eq!(q.size(), e.size);
            match q {
                QuickEntry::Call {
                    kind,
                    tsc,
                    site,
                    callee,
                } => {
                    prop_assert_eq!(
                        (kind.call_kind(), tsc, site, callee),
                        (e.kind, e.tsc, e.caller, e.callee)
                    );
                }
                QuickEntry::Return { kind, tsc, callee } => {
                    prop_assert_eq!((kind.return_kind(), tsc, callee), (e.kind, e.tsc, e.callee));
                }
                QuickEntry::Lib {
                    exit,
                    tsc,
                    site,
                    func,
                    body,
                } => {
                    let kind = if exit { Kind::LibExit } else { Kind::LibEnter };
                    prop_assert_eq!(
                        (kind, tsc, site, Some(func), body),
                        (e.kind, e.tsc, e.caller, e.lib_fn(), e.body)
                    );
                }
            }
        } else if bytes.len() - p >= LIB_ENTRY_FIXED {
            prop_assert!(
                !matches!(
                    e.kind,
                    Kind::FnEnter
                        | Kind::PyCall
                        | Kind::PyCCall
                        | Kind::FnExit
                        | Kind::PyReturn
                        | Kind::PyCReturn
                        | Kind::LibEnter
                        | Kind::LibExit
                ),
                "a common entry left to the decoder at {}",
                p
            );
        }
        p += e.size;
    }
    Ok(taken)
}

#[derive(Debug, Clone)]
enum Ent {
    Call(u8, u64, u64, u64),
    Ret(u8, u64, u64, u16),
    Lib(bool, u64, u64, u8, Option<i32>, Option<i64>),
}

fn ent() -> impl Strategy<Value = Ent> {
    let t = any::<u64>().prop_map(|t| t & TSC_MASK);
    let a = any::<u64>().prop_map(|a| a & ADDR_MASK);
    prop_oneof![
        (0..4u8, t.clone(), a.clone(), a.clone()).prop_map(|(k, t, s, c)| Ent::Call(k, t, s, c)),
        (0..3u8, t.clone(), a.clone(), any::<u16>()).prop_map(|(k, t, c, x)| Ent::Ret(k, t, c, x)),
        (
            any::<bool>(),
            t,
            a,
            0..40u8,
            any::<Option<i32>>(),
            any::<Option<i64>>()
        )
            .prop_map(|(x, t, s, f, fd, r)| Ent::Lib(x, t, s, f, fd, r)),
    ]
}

fn encode(es: &[Ent]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in es {
        match *e {
            Ent::Call(k, t, s, c) => {
                let k = [Kind::FnEnter, Kind::PyCall, Kind::PyCCall, Kind::PyExc][k as usize];
                out.extend_from_slice(encode_fn(k, t, s, c).as_bytes());
            }
            Ent::Ret(k, t, c, x) => {
                let k = [Kind::FnExit, Kind::PyReturn, Kind::PyCReturn][k as usize];
                out.extend_from_slice(encode_ret(k, t, c, x).as_bytes());
            }
            Ent::Lib(exit, t, s, f, fd, ret) => {
                let func = LibFn::from_id(f as u64).unwrap_or(LibFn::Recv);
                let k = if exit { Kind::LibExit } else { Kind::LibEnter };
                let o = LibOpts {
                    fd,
                    ret,
                    ..Default::default()
                };
                out.extend_from_slice(encode_lib(k, t, s, func, &o).as_bytes());
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn quick_entries_are_the_decoders(es in vec(ent(), 0..40)) {
        let bytes = encode(&es);
        check(&bytes)?;
    }

    #[test]
    fn damaged_streams_are_read_as_the_decoder_reads_them(
        es in vec(ent(), 1..20),
        at in any::<prop::sample::Index>(),
        v in any::<u8>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = encode(&es);
        let i = at.index(bytes.len());
        bytes[i] = v;
        check(&bytes)?;
        check(&bytes[..cut.index(bytes.len())])?;
    }

    #[test]
    fn any_bytes_are_read_as_the_decoder_reads_them(b in vec(any::<u8>(), 0..400)) {
        check(&b)?;
    }
}
