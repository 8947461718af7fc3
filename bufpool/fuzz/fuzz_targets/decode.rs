//! Fuzz target: the entry decoder, option parser and metadata parser must never panic,
//! must tile the input with entries up to the first error, and the error must name the
//! offset where the next entry would start.
#![no_main]

use bufpool::format::{Decoder, LibOpts};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut next = 0u64;
    for r in Decoder::new(data) {
        match r {
            Ok(e) => {
                assert_eq!(e.offset, next);
                next += e.size as u64;
                assert!(next <= data.len() as u64);
                // Parse the option block / metadata body too (they are parsed lazily).
                let _ = e.to_owned();
            }
            Err(err) => {
                assert_eq!(err.offset, next);
                return;
            }
        }
    }
    assert_eq!(next, data.len() as u64);
    // The option parser on its own, on any bytes.
    let _ = LibOpts::parse(&data[..data.len().min(127)]);
});
