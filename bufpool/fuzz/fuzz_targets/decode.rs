//! Fuzz target: the entry decoder, option parser and metadata parser must never panic,
//! must tile the input with entries up to the first error, and the error must name the
//! offset where the next entry would start. The fast paths must agree with them: an entry
//! `quick_entry` takes is the decoder's entry, and an option block `ScalarOpts::parse`
//! takes is read the same by `LibOpts::parse` and has no address or call stack.
#![no_main]

use bufpool::format::{quick_entry, Decoder, Kind, LibOpts, QuickEntry, ScalarOpts};
use libfuzzer_sys::fuzz_target;

/// The fast option reader against the checking parser, on one block.
fn scalars_agree(block: &[u8]) {
    let full = LibOpts::parse(block);
    match (ScalarOpts::parse(block), &full) {
        (Some(s), Ok(f)) => {
            assert_eq!(s, ScalarOpts::of(f), "{block:02x?}");
            assert!(f.local.is_none() && f.peer.is_none() && f.stack_len == 0);
        }
        (Some(s), Err(e)) => panic!("{block:02x?} taken as {s:?}, but: {e:?}"),
        (None, Ok(f)) => {
            // The fast path may refuse an odd block the checking parser reads as scalars
            // (a call stack later superseded by an empty one): the entry then goes through
            // the checking decoder, with the same result. What it must take is every block
            // of scalars as the tracer writes them.
            if f.local.is_none() && f.peer.is_none() && f.stack_len == 0 {
                let mut canon = [0u8; bufpool::format::MAX_OPTS];
                let n = f.encode(&mut canon);
                assert!(
                    ScalarOpts::parse(&canon[..n]).is_some(),
                    "a block of scalars refused: {:02x?} (written for {block:02x?})",
                    &canon[..n]
                );
            }
        }
        (None, Err(_)) => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let mut next = 0u64;
    for r in Decoder::new(data) {
        let q = quick_entry(data, next as usize);
        match r {
            Ok(e) => {
                assert_eq!(e.offset, next);
                if let Some(q) = q {
                    assert_eq!(q.size(), e.size);
                    let same = match q {
                        QuickEntry::Call { kind, tsc, site, callee } => {
                            (kind.call_kind(), tsc, site, callee) == (e.kind, e.tsc, e.caller, e.callee)
                        }
                        QuickEntry::Return { kind, tsc, callee } => {
                            (kind.return_kind(), tsc, callee) == (e.kind, e.tsc, e.callee)
                        }
                        QuickEntry::Lib { exit, tsc, site, func, body } => {
                            let kind = if exit { Kind::LibExit } else { Kind::LibEnter };
                            (kind, tsc, site, Some(func), body)
                                == (e.kind, e.tsc, e.caller, e.lib_fn(), e.body)
                        }
                    };
                    assert!(same, "{q:?} vs {e:?}");
                }
                if matches!(e.kind, Kind::LibEnter | Kind::LibExit) {
                    scalars_agree(e.body);
                }
                next += e.size as u64;
                assert!(next <= data.len() as u64);
                // Parse the option block / metadata body too (they are parsed lazily).
                let _ = e.to_owned();
            }
            Err(err) => {
                assert_eq!(err.offset, next);
                assert!(q.is_none(), "taken by quick_entry, refused by the decoder: {q:?}");
                return;
            }
        }
    }
    assert_eq!(next, data.len() as u64);
    // The option parsers on their own, on any bytes.
    scalars_agree(&data[..data.len().min(127)]);
});
