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
//! ends the walk; it never crashes.

use bufpool::format::MAX_STACK;

const MAX_STACK_SPAN: usize = 8 << 20;

/// Fills `out` with `site` and the return addresses of up to `MAX_STACK - 1` callers
/// reached from frame pointer `fp`. Returns the number of frames.
#[inline(never)]
pub fn walk(site: usize, fp: usize, out: &mut [u64; MAX_STACK]) -> usize {
    out[0] = site as u64;
    let mut n = 1;
    let here = &n as *const usize as usize;
    let mut fp = fp;
    while n < MAX_STACK {
        if fp % 8 != 0 || fp <= here || fp - here > MAX_STACK_SPAN {
            break;
        }
        let Some([next, ret]) = crate::sysx::peek16(fp) else {
            break;
        };
        if ret < 4096 {
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
        let mut out = [0u64; MAX_STACK];
        let n = walk(0x400000, base, &mut out);
        assert_eq!(&out[..n], &[0x400000, 0x401111, 0x402222]);
        // Garbage frame pointers never crash.
        for fp in [0usize, 1, 8, usize::MAX - 7, 0xdead_beef_0000] {
            assert_eq!(walk(0x1000, fp, &mut out), 1);
        }
    }
}
