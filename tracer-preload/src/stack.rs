//! Call sites and short native call stacks.
//!
//! The call site of a wrapped call is the wrapper's return address. Stable Rust has no
//! `__builtin_return_address`, so every exported wrapper is a two-instruction naked
//! thunk (`exports.rs`) that loads `[rsp]` — the return address — into the next free
//! argument register and jumps to the Rust implementation. The thunks of
//! `bind connect listen accept accept4` also pass the caller's frame pointer, from which
//! [`walk`] follows the frame-pointer chain for a few frames.
//!
//! Code built without frame pointers uses `rbp` as a general register, so nothing about
//! the chain is trusted: each frame pointer must be 8-aligned, above the current stack
//! pointer, below it by at most 8 MiB, strictly increasing, and is read with
//! `process_vm_readv`, which fails instead of faulting on unmapped memory. A bad link
//! ends the walk; it never crashes. A return address must also lie in an executable
//! mapping ([`note_code_range`], fed from the memory map the tracer records at start,
//! exec and `dlopen`): without frame pointers `rbp` can point at argv bytes or stack
//! slots, and such "frames" would make connection and process signatures differ from
//! run to run.

use bufpool::format::MAX_STACK;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const MAX_STACK_SPAN: usize = 8 << 20;

/// Most executable ranges remembered; later ones are ignored (the walk then accepts
/// addresses outside the known ranges only while the table is empty).
const MAX_CODE_RANGES: usize = 512;

/// Executable mappings, `[start, end)` pairs. Insert-only: a slot is reserved with a
/// `fetch_add` on `CODE_LEN`, then its end and start are stored (`Release`); a reader
/// that sees start 0 skips the slot (not written yet). Ranges of unmapped libraries stay:
/// a stale range only accepts an address that cannot occur any more.
static CODE_START: [AtomicU64; MAX_CODE_RANGES] = [const { AtomicU64::new(0) }; MAX_CODE_RANGES];
static CODE_END: [AtomicU64; MAX_CODE_RANGES] = [const { AtomicU64::new(0) }; MAX_CODE_RANGES];
static CODE_LEN: AtomicUsize = AtomicUsize::new(0);

/// Remembers an executable mapping (called for each `x` line of `/proc/self/maps`).
pub fn note_code_range(start: u64, end: u64) {
    let n = CODE_LEN.load(Ordering::Acquire).min(MAX_CODE_RANGES);
    if (0..n).any(|i| CODE_START[i].load(Ordering::Acquire) == start) {
        return;
    }
    let i = CODE_LEN.fetch_add(1, Ordering::AcqRel);
    if i >= MAX_CODE_RANGES {
        CODE_LEN.store(MAX_CODE_RANGES, Ordering::Release);
        return;
    }
    CODE_END[i].store(end, Ordering::Release);
    // Release: the end above is visible to whoever sees this start.
    CODE_START[i].store(start, Ordering::Release);
}

/// True if `addr` lies in a remembered executable mapping, or if none is known.
fn in_code(addr: u64) -> bool {
    let n = CODE_LEN.load(Ordering::Acquire).min(MAX_CODE_RANGES);
    if n == 0 {
        return true;
    }
    (0..n).any(|i| {
        let s = CODE_START[i].load(Ordering::Acquire);
        s != 0 && addr >= s && addr < CODE_END[i].load(Ordering::Acquire)
    })
}

/// Fills `out` with `site` and the return addresses of up to `MAX_STACK - 1` callers
/// reached from frame pointer `fp`. Returns the number of frames.
#[inline(never)]
pub fn walk(site: usize, fp: usize, out: &mut [u64; MAX_STACK]) -> usize {
    out[0] = site as u64;
    let mut n = 1;
    let here = &n as *const usize as usize;
    let mut fp = fp;
    while n < MAX_STACK {
        if !fp.is_multiple_of(8) || fp <= here || fp - here > MAX_STACK_SPAN {
            break;
        }
        let Some([next, ret]) = crate::sysx::peek16(fp) else {
            break;
        };
        if ret < 4096 || !in_code(ret) {
            break;
        }
        out[n] = ret;
        n += 1;
        if next as usize <= fp {
            break;
        }
        fp = next as usize;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_a_fake_chain_and_stops_at_garbage() {
        // A fake chain on this stack: frame a -> frame b -> garbage (points downward).
        let mut frames = [0u64; 6];
        let base = frames.as_mut_ptr() as usize;
        frames[0] = (base + 16) as u64; // a.next = b
        frames[1] = 0x401111; // a.ret
        frames[2] = 1; // b.next: below b → end
        frames[3] = 0x402222; // b.ret
        std::hint::black_box(&frames);
        // The two fake return addresses are "code"; 0x7ff0_0000_0000 (a stack-like
        // address) is not.
        note_code_range(0x400000, 0x403000);
        let mut out = [0u64; MAX_STACK];
        let n = walk(0x400000, base, &mut out);
        assert_eq!(&out[..n], &[0x400000, 0x401111, 0x402222]);
        // Garbage frame pointers never crash.
        for fp in [0usize, 1, 8, usize::MAX - 7, 0xdead_beef_0000] {
            assert_eq!(walk(0x1000, fp, &mut out), 1);
        }
        // A link whose return address is not in executable memory ends the walk there.
        frames[3] = 0x7ff0_0000_0000;
        std::hint::black_box(&frames);
        let n = walk(0x400000, base, &mut out);
        assert_eq!(&out[..n], &[0x400000, 0x401111]);
    }
}
