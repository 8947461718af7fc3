//! Stage 5 (first half) — **connections**: which connection a descriptor is, at any time.
//!
//! A connection is identified by the **set of call stacks** of the calls that made it
//! (`socket` is not one; `bind connect listen accept`, and `socketpair`), never by addresses
//! or ports (§4, 000 §2.3), so models carry over between nodes and runs. A descriptor
//! returned by `accept` inherits the listening socket's stacks plus the accept's own.
//! [`FdTable`] replays a process's setup calls (from every thread, in TSC order), following
//! descriptors through `dup`/`dup2`/`dup3`/`fcntl(F_DUPFD)` and `close`, and answers "what
//! was fd N at time T".

use bufpool::format::{Addr, LibFn};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The identity of a connection: the sorted set of its setup call-stack keys.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ConnKey(pub Vec<u64>);

/// What is known about a descriptor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnInfo {
    /// Stack keys of the calls that set it up.
    pub stacks: BTreeSet<u64>,
    /// Local address, if recorded.
    pub local: Option<Addr>,
    /// Peer address, if recorded.
    pub peer: Option<Addr>,
}

impl ConnInfo {
    /// The connection's identity.
    pub fn key(&self) -> ConnKey {
        ConnKey(self.stacks.iter().copied().collect())
    }
}

/// One recorded setup or descriptor-lifetime call, ready to replay.
#[derive(Clone, Debug)]
pub struct SetupCall {
    /// TSC of the call's return.
    pub tsc: u64,
    /// Thread (only to order calls of equal TSC).
    pub tid: u32,
    /// The function.
    pub func: LibFn,
    /// The fd argument.
    pub fd: Option<i32>,
    /// The second fd (dup2/dup3 target, socketpair's second end).
    pub fd2: Option<i32>,
    /// Return value.
    pub ret: Option<i64>,
    /// `fcntl` command.
    pub flags: Option<u32>,
    /// Stable key of the call stack (for setup calls).
    pub stack: u64,
    /// Local address option.
    pub local: Option<Addr>,
    /// Peer address option.
    pub peer: Option<Addr>,
}

/// Is this call replayed by [`FdTable`]?
pub fn is_tracked(f: LibFn) -> bool {
    f.describes_descriptor()
}

/// Does this call count as a connection-establishing call (its stack joins the key)?
pub fn is_setup(f: LibFn) -> bool {
    f.is_connection_setup() || f == LibFn::Socketpair
}

const F_DUPFD: u32 = 0;
const F_DUPFD_CLOEXEC: u32 = 1030;

/// The states of one descriptor: from this TSC on, this connection (None: closed).
type History = Vec<(u64, Option<Arc<ConnInfo>>)>;

/// The history of every descriptor of one process.
#[derive(Clone, Debug, Default)]
pub struct FdTable {
    hist: crate::hash::FxMap<i32, History>,
}

impl FdTable {
    /// Replays setup calls (any order; they are sorted by TSC, then thread).
    pub fn build(calls: Vec<SetupCall>) -> FdTable {
        FdTable::build_from(None, calls)
    }

    /// Like [`FdTable::build`], starting from the descriptors of `inherited` at a TSC (what a
    /// forked child had from its parent): an `accept` on an inherited listening socket gets
    /// that socket's setup stacks, a `dup` or `close` of an inherited descriptor is followed.
    /// The history holds the child's own changes only (lookups fall back to the parent's).
    pub fn build_from(inherited: Option<(&FdTable, u64)>, mut calls: Vec<SetupCall>) -> FdTable {
        calls.sort_by_key(|c| (c.tsc, c.tid));
        let mut t = FdTable::default();
        let mut cur: crate::hash::FxMap<i32, Arc<ConnInfo>> = Default::default();
        if let Some((parent, at)) = inherited {
            for &fd in parent.hist.keys() {
                if let Some(ci) = parent.at(fd, at) {
                    cur.insert(fd, ci.clone());
                }
            }
        }
        for c in &calls {
            let ok = c.ret.is_none_or(|r| r >= 0);
            let tsc = c.tsc;
            let set = |fd: i32,
                       v: Option<Arc<ConnInfo>>,
                       t: &mut FdTable,
                       cur: &mut crate::hash::FxMap<i32, Arc<ConnInfo>>| {
                match &v {
                    Some(v) => cur.insert(fd, v.clone()),
                    None => cur.remove(&fd),
                };
                t.hist.entry(fd).or_default().push((tsc, v));
            };
            use LibFn::*;
            match c.func {
                Socket if ok => {
                    if let Some(r) = c.ret {
                        set(
                            r as i32,
                            Some(Arc::new(ConnInfo::default())),
                            &mut t,
                            &mut cur,
                        );
                    }
                }
                Socketpair if ok => {
                    for fd in [c.fd, c.fd2].into_iter().flatten() {
                        let mut ci = ConnInfo::default();
                        ci.stacks.insert(c.stack);
                        set(fd, Some(Arc::new(ci)), &mut t, &mut cur);
                    }
                }
                Bind | Listen | Connect => {
                    if let Some(fd) = c.fd {
                        let mut ci = cur.get(&fd).map(|a| (**a).clone()).unwrap_or_default();
                        ci.stacks.insert(c.stack);
                        if c.local.is_some() {
                            ci.local = c.local;
                        }
                        if c.peer.is_some() {
                            ci.peer = c.peer;
                        }
                        set(fd, Some(Arc::new(ci)), &mut t, &mut cur);
                    }
                }
                Accept | Accept4 if ok => {
                    if let (Some(fd), Some(r)) = (c.fd, c.ret) {
                        let l = cur.get(&fd).map(|a| (**a).clone()).unwrap_or_default();
                        let mut ci = ConnInfo {
                            stacks: l.stacks,
                            local: c.local.or(l.local),
                            peer: c.peer,
                        };
                        ci.stacks.insert(c.stack);
                        set(r as i32, Some(Arc::new(ci)), &mut t, &mut cur);
                    }
                }
                Dup | Fcntl if ok => {
                    let dups =
                        c.func == Dup || matches!(c.flags, Some(F_DUPFD) | Some(F_DUPFD_CLOEXEC));
                    if let (true, Some(fd), Some(r)) = (dups, c.fd, c.ret) {
                        if let Some(v) = cur.get(&fd).cloned() {
                            set(r as i32, Some(v), &mut t, &mut cur);
                        }
                    }
                }
                Dup2 | Dup3 if ok => {
                    if let Some(fd) = c.fd {
                        let target = c.fd2.or(c.ret.map(|r| r as i32));
                        if let Some(target) = target {
                            let v = cur.get(&fd).cloned();
                            set(target, v, &mut t, &mut cur);
                        }
                    }
                }
                Close => {
                    if let Some(fd) = c.fd {
                        if cur.contains_key(&fd) {
                            set(fd, None, &mut t, &mut cur);
                        }
                    }
                }
                _ => {}
            }
        }
        t
    }

    /// What `fd` was at `tsc` (None: not a known socket then).
    pub fn at(&self, fd: i32, tsc: u64) -> Option<&Arc<ConnInfo>> {
        self.state(fd, tsc).flatten()
    }

    /// Like [`FdTable::at`], telling apart "no recorded history before `tsc`" (None) from
    /// "known closed or not a socket" (Some(None)).
    pub fn state(&self, fd: i32, tsc: u64) -> Option<Option<&Arc<ConnInfo>>> {
        let h = self.hist.get(&fd)?;
        let i = h.partition_point(|(t, _)| *t <= tsc);
        if i == 0 {
            return None;
        }
        Some(h[i - 1].1.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tsc: u64, func: LibFn, fd: Option<i32>, ret: i64, stack: u64) -> SetupCall {
        SetupCall {
            tsc,
            tid: 1,
            func,
            fd,
            fd2: None,
            ret: Some(ret),
            flags: None,
            stack,
            local: None,
            peer: None,
        }
    }

    #[test]
    fn accept_inherits_listen_stacks_and_dup_close_are_followed() {
        let t = FdTable::build(vec![
            call(1, LibFn::Socket, None, 3, 0),
            call(2, LibFn::Bind, Some(3), 0, 10),
            call(3, LibFn::Listen, Some(3), 0, 11),
            call(5, LibFn::Accept, Some(3), 4, 12),
            call(6, LibFn::Dup, Some(4), 7, 0),
            call(8, LibFn::Close, Some(4), 0, 0),
            call(4, LibFn::Socket, None, 5, 0),
            call(4, LibFn::Connect, Some(5), 0, 20),
        ]);
        assert_eq!(t.at(3, 4).unwrap().key(), ConnKey(vec![10, 11]));
        assert_eq!(t.at(4, 5).unwrap().key(), ConnKey(vec![10, 11, 12]));
        assert_eq!(t.at(7, 9).unwrap().key(), ConnKey(vec![10, 11, 12]));
        assert!(t.at(4, 9).is_none(), "closed");
        assert!(t.at(4, 4).is_none(), "not yet accepted");
        assert_eq!(t.at(5, 100).unwrap().key(), ConnKey(vec![20]));
        assert!(t.at(9, 1).is_none());
    }
}
