//! **What serving a request involved** (its *shape*), gathered while the transactions of a
//! process are replayed, for `--services auto` ([`super::types`]).
//!
//! Per served request: the functions the serving thread ran while the request was in
//! service (C functions of `-finstrument-functions` and the program's own Python
//! functions — the standard library's are left out as call trees leave them out; where a
//! process recorded neither, the libc calls it made), the downstream requests it sent and
//! to whom, with the bytes of their replies, and the bytes of the request and of its reply.
//!
//! Functions are gathered per thread between two socket calls and given to the request the
//! thread is serving (the served connection it last received a request on): the work
//! before each send of the reply, and before each further receive of the request, belongs
//! to it; what a thread does after the last send of a reply (logging, waiting for the next
//! request) is no request's. A function is held by a **stable key** ([`ProcessSymbols`]:
//! module and offset, Python module.qualname and file, a libc function's id), so that the
//! same code has the same key in every process and run of a program.

use crate::hash::mix;
use crate::symbolize::{CSym, ProcessSymbols};
use bufpool::format::{CallKind, LibFn};
use std::collections::HashMap;
use std::sync::Arc;

/// Function sets shared by the shapes that have them (a program serves many requests with
/// few distinct sets): one allocation per distinct set.
pub type Interner = HashMap<Vec<u64>, Arc<[u64]>>;

/// How one served request was served.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// Program functions (C or Python) run while it was in service: stable keys, sorted,
    /// distinct.
    pub funcs: Arc<[u64]>,
    /// libc functions called while it was in service: stable keys, sorted, distinct.
    pub libs: Arc<[u64]>,
    /// Downstream requests: (peer, number of calls, bytes of their replies), by peer.
    pub calls: Vec<(String, u32, u64)>,
    /// Bytes of the request.
    pub req_bytes: u64,
    /// Bytes of the reply.
    pub reply_bytes: u64,
    /// The serving thread turned to another connection's request while this one was
    /// received and not yet answered (an event loop): what it ran is not this request's
    /// alone.
    pub interleaved: bool,
}

impl Shape {
    /// Counts a downstream call to `peer`.
    pub fn add_call(&mut self, peer: &str) {
        match self.calls.iter_mut().find(|c| c.0 == peer) {
            Some(c) => c.1 += 1,
            None => self.calls.push((peer.to_string(), 1, 0)),
        }
    }

    /// Counts reply bytes of a downstream call to `peer`.
    pub fn add_call_bytes(&mut self, peer: &str, n: u64) {
        if let Some(c) = self.calls.iter_mut().find(|c| c.0 == peer) {
            c.2 += n;
        }
    }
}

/// A function as the trace names it, before symbolization.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RawFn {
    /// A C function's address.
    C(u64),
    /// A Python code index.
    Py(u64),
    /// A libc function.
    Lib(LibFn),
}

/// How a person reads a function's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FnName {
    /// A C function: its file and offset (resolved through ELF when printed).
    C(CSym),
    /// A Python function: `module.qualname`.
    Py(String),
    /// A libc function.
    Lib(&'static str),
}

/// The functions a process ran, numbered in the order first met.
#[derive(Default)]
pub struct FnTable {
    ids: HashMap<RawFn, u32>,
    /// Each function and the TSC it was first met at (for the image in force then).
    pub list: Vec<(RawFn, u64)>,
}

impl FnTable {
    /// The number of `f`, met at `tsc`.
    pub fn id(&mut self, f: RawFn, tsc: u64) -> u32 {
        let n = self.list.len() as u32;
        *self.ids.entry(f).or_insert_with(|| {
            self.list.push((f, tsc));
            n
        })
    }

    /// Stable keys and names of every function (by number); library Python code (the
    /// standard library, builtins) gets `None`: it is not the program's.
    pub fn resolve(&self, sym: &ProcessSymbols) -> Vec<Option<(u64, FnName)>> {
        self.list
            .iter()
            .map(|&(f, tsc)| {
                let s = sym.at(tsc);
                match f {
                    RawFn::C(a) => Some((s.key_c(a), FnName::C(s.name_c(a)))),
                    RawFn::Py(i) => (!s.is_library_py(i)).then(|| {
                        let name = s.name_py(i);
                        let short = name.split(" (").next().unwrap_or(&name).to_string();
                        (mix(s.key_py(i), 0x7079), FnName::Py(short))
                    }),
                    RawFn::Lib(l) => Some((
                        mix(crate::symbolize::key_lib(l), 0x11b),
                        FnName::Lib(l.name()),
                    )),
                }
            })
            .collect()
    }
}

/// What a thread ran since its last socket call: numbers in a [`FnTable`].
#[derive(Clone, Debug, Default)]
pub struct Pending {
    /// Program functions.
    pub funcs: Vec<u32>,
    /// libc functions.
    pub libs: Vec<u32>,
}

impl Pending {
    /// Adds one function (kept distinct, bounded by the number of distinct functions).
    pub fn add(&mut self, id: u32, lib: bool) {
        let v = if lib { &mut self.libs } else { &mut self.funcs };
        if v.last() != Some(&id) {
            v.push(id);
            if v.len() >= 512 && v.len().is_power_of_two() {
                v.sort_unstable();
                v.dedup();
            }
        }
    }

    /// Is nothing pending?
    pub fn is_empty(&self) -> bool {
        self.funcs.is_empty() && self.libs.is_empty()
    }
}

/// A served request's shape while it is open: function numbers not yet resolved.
#[derive(Clone, Debug, Default)]
pub struct OpenShape {
    /// Function numbers, as [`Pending`].
    pub fns: Pending,
    /// The rest, final.
    pub shape: Shape,
}

impl OpenShape {
    /// Takes in what a thread ran.
    pub fn absorb(&mut self, p: &Pending) {
        self.fns.funcs.extend_from_slice(&p.funcs);
        self.fns.libs.extend_from_slice(&p.libs);
        for v in [&mut self.fns.funcs, &mut self.fns.libs] {
            if v.len() >= 512 {
                v.sort_unstable();
                v.dedup();
            }
        }
    }

    /// The final shape, its functions given their stable keys by `keys`, each set shared
    /// through `intern`.
    pub fn finish(self, keys: &[Option<(u64, FnName)>], intern: &mut Interner) -> Shape {
        let mut key = |v: &[u32]| -> Arc<[u64]> {
            let mut k: Vec<u64> = v
                .iter()
                .filter_map(|&i| keys.get(i as usize).and_then(|k| k.as_ref()).map(|k| k.0))
                .collect();
            k.sort_unstable();
            k.dedup();
            intern
                .entry(k)
                .or_insert_with_key(|k| Arc::from(k.as_slice()))
                .clone()
        };
        let mut s = self.shape;
        s.funcs = key(&self.fns.funcs);
        s.libs = key(&self.fns.libs);
        s.calls.sort();
        s
    }
}

/// The kind of function a call entry is about.
pub fn raw_of(kind: CallKind, callee: u64) -> RawFn {
    match kind {
        CallKind::C => RawFn::C(callee),
        CallKind::Py | CallKind::PyBuiltin => RawFn::Py(callee),
    }
}
