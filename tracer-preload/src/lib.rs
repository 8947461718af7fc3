//! `libtrace.so` — Culprit's `LD_PRELOAD` library. It records the socket, event and
//! process calls of an unmodified program into the shared-memory pool named by
//! `CULPRIT_POOL` (see `README.md` for the environment and the C ABI).
//!
//! Three layers, one direction (as in bytehound's preload):
//!
//! 1. **hooks** — [`exports`] is the single list of interposed libc symbols: naked thunks
//!    that pass the call site to thin wrappers in [`wrap`]; [`abi`] is the C ABI used by
//!    the gcc hooks and the Python shim (`include/culprit.h`).
//! 2. **recording** — [`record`] encodes entries ([`entry`], [`metabody`]) and appends
//!    them to the calling thread's writer ([`tls`]), under a reentrancy guard, never
//!    allocating or locking on the hot path.
//! 3. **pool** — `bufpool`'s writer, mapped once by the constructor ([`lifecycle`],
//!    [`global`]).
//!
//! Support: [`real`] (the real functions, resolved lazily), [`fdtab`] (which fds are
//! sockets), [`stack`] (call stacks), [`procinfo`] (`/proc/self`), [`envp`] (the
//! environment copied at load and re-injected at exec), [`sysx`] (raw system calls),
//! [`inject`] (the fault-injection seam).
//!
//! Only x86-64 Linux with glibc is supported (the thunks are x86-64 assembly).
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]
// The constructor and the C-called handlers are only referenced from the ELF sections
// the test harness leaves out.
#![cfg_attr(test, allow(dead_code))]

pub mod abi;
pub mod entry;
pub mod envp;
pub mod exports;
pub mod fdtab;
pub mod global;
pub mod inject;
pub mod lifecycle;
pub mod metabody;
pub mod procinfo;
pub mod real;
pub mod record;
pub mod stack;
pub mod sysx;
pub mod tls;
pub mod wrap;
