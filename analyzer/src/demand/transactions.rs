//! **Transactions**: the requests a process served and the calls it made, with their times.
//!
//! 003 needs, per process, each request received from a parent with the time it arrived
//! and the time its reply left, and each request sent to a child with the time it left
//! and the time its reply came back. [`TransactionSource`] is the interface the rest of
//! the demand stage sees; [`ByteFlow`] implements it from the per-connection byte flow of
//! one process alone, so that cross-process message matching can replace it later without
//! touching busy time, estimation or reports.
//!
//! The byte-flow rule, per connection (a socket descriptor from the `accept` or `connect`
//! that made it to its `close`):
//! - **served** (an accepted, server-side connection): a request begins with the first
//!   receive of bytes after the process last sent on that connection (or the first one),
//!   its reply is every byte sent back before the next request begins, and it ends with
//!   the last of those sends. A request never answered (the peer closed, the trace ended)
//!   is not a transaction.
//! - **called** (a connected, client-side connection): a call leaves with the last send of
//!   a burst of bytes sent after the process last received on that connection, and its
//!   reply arrives with the first receive after it.
//! - **pulled** (a job handed on a connection the process opened, as to a queue's worker):
//!   served, under the service `pull peer:PORT`, by the rule of `transactions/pull.rs`; a
//!   connection between two of the process's own descriptors is neither served nor called.
//! - **waiting for a connection**: a connection carries one call at a time. When a call
//!   on it is made for a request that arrived while the connection's previous call, made
//!   for another request, was still out (a pool of connections to a downstream tier
//!   shared by the threads of a broker or a server), that request waited for the
//!   downstream: from its arrival if the connection was held then (in a call, or being
//!   handed from one waiting request to the next; however many calls of other requests
//!   followed on it before this one's turn), else from the previous call's departure, to
//!   its own call, it is in the count as a call ([`Role::Called`], service `wait peer:…`), not busy
//!   (003: time waiting on a child is not the process's own). A queue in front of a slow
//!   tier does not make the queue's process slower.
//!
//! Only successful transfers count (a result > 0); a receive of 0 bytes ends the
//! connection's current exchange. A descriptor the process did not accept or connect
//! itself (inherited at a fork: PostgreSQL's backends, pre-forked workers) is taken on its
//! first transfer, served if it is a receive, under the service [`INHERITED`]. A receive
//! counts at its return (the bytes are in the process), a send at its entry (the bytes leave the process's hands; on a busy machine
//! the return of a send on loopback can come only after the woken peer ran).
//!
//! The **service** of a served request is named by [`ServiceMode`]: the listening port
//! (`port:8080`, or `unix:/path`), or the port and the listening socket's setup call-site
//! (`conn`), which tells apart two listeners of one port reached by different code.

use super::shape::{self, FnName, FnTable, OpenShape, Pending, RawFn, Shape};
use super::waits::{self, ThreadWaits};

mod pull;
use super::ServiceMode;
use crate::decode::{Event, ProcessTrace};
use crate::error::Result;
use crate::symbolize::ProcessSymbols;
use bufpool::format::{Addr, LibFn, Meta};
use std::collections::HashMap;

/// Which way a transaction goes, seen from the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// A request received from a parent and answered.
    Served,
    /// A request sent to a child, and its reply.
    Called,
}

/// One request and its reply, seen from one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transaction {
    /// Served or called.
    pub role: Role,
    /// The service (request type): for a served request, what [`ServiceMode`] names; for
    /// a call, the peer it went to.
    pub service: String,
    /// Served: when the request arrived; called: when the request left (unix ns).
    pub start_ns: i64,
    /// Served: when the reply left; called: when the reply arrived (unix ns).
    pub end_ns: i64,
    /// Served, with `--services auto`: what serving it involved ([`shape`]).
    pub shape: Option<Box<Shape>>,
    /// Which connection it went over and which request made it, for matching a served
    /// request with the call of another process that sent it ([`super::callers`]).
    pub link: Link,
}

/// Where a transaction sits among the process's connections and requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Link {
    /// The connection's (local, peer) ports, where the tracer recorded both (TCP).
    pub ports: Option<(u16, u16)>,
    /// The connection, numbered in the process (0: none).
    pub conn: u32,
    /// Called: the served request that made the call, as (its connection, its arrival).
    pub parent: Option<(u32, i64)>,
    /// Served: the type of the request of another process whose call this request
    /// answers, and which of that request's calls to this peer it was
    /// (`port:80#1a2b3c4d/0`), once the caller's program has its types.
    pub caller: Option<String>,
    /// Served: the entry of the receive whose return began the request (unix ns): the
    /// process was in the call from then on ([`super::arrival`]).
    pub recv_enter_ns: Option<i64>,
    /// Called: the return of the request's last send (unix ns): its bytes were with the
    /// peer by then ([`super::arrival`]).
    pub sent_end_ns: Option<i64>,
}

/// What one process did, as the demand stage needs it.
#[derive(Clone, Debug, Default)]
pub struct ProcessTransactions {
    /// Executable (from its last process record), or empty.
    pub exe: String,
    /// First and last event time (unix ns), if it has events.
    pub span_ns: Option<(i64, i64)>,
    /// Did it use any socket at all?
    pub sockets: bool,
    /// Transactions, by end time.
    pub transactions: Vec<Transaction>,
    /// Names of the functions the shapes of served requests hold, by stable key
    /// (`--services auto`).
    pub names: HashMap<u64, FnName>,
    /// Where every event-loop thread of the process waited for readiness (unix ns,
    /// sorted, disjoint): not busy ([`super::waits`]).
    pub idle_ns: Vec<(i64, i64)>,
}

/// Where transactions come from. Implemented by [`ByteFlow`]; matched cross-process
/// messages can implement it too.
pub trait TransactionSource: Sync {
    /// The transactions of one process.
    fn transactions(&self, p: &ProcessTrace, mode: ServiceMode) -> Result<ProcessTransactions>;
}

/// Transactions from each connection's byte flow in one process (see the module doc).
#[derive(Clone, Copy, Debug, Default)]
pub struct ByteFlow;

/// The calls the byte-flow rule looks at, taken from every thread and sorted by time.
#[derive(Clone, Debug)]
struct Step {
    tsc: u64,
    tid: u32,
    what: StepKind,
}

#[derive(Clone, Debug)]
enum StepKind {
    /// A descriptor now is a listening socket bound to `local`.
    Bound {
        fd: i32,
        local: Option<Addr>,
        site: u64,
    },
    /// `accept` on `listen_fd` made `fd`.
    Accepted {
        listen_fd: i32,
        fd: i32,
        local: Option<Addr>,
        peer: Option<Addr>,
        site: u64,
    },
    /// `connect` on `fd` to `peer` (from `local`).
    Connected {
        fd: i32,
        local: Option<Addr>,
        peer: Option<Addr>,
    },
    /// The tracer described `fd`, met already open (inherited), on its first use.
    Seen {
        fd: i32,
        local: Option<Addr>,
        peer: Option<Addr>,
    },
    /// `fd` received `n` bytes (0: end of stream), in a call entered at TSC `enter`; the
    /// thread `waited` for the readiness of any of several descriptors since its
    /// previous socket call.
    Recv {
        fd: i32,
        n: i64,
        enter: u64,
        waited: bool,
    },
    /// `fd` sent `n` bytes, in a call that returned at TSC `exit`.
    Sent { fd: i32, n: i64, exit: u64 },
    /// The thread ran these functions since its last socket call; the next one is a send
    /// (`before_send`) or not.
    Ran { fns: Pending, before_send: bool },
    /// `fd` is closed.
    Closed { fd: i32 },
    /// `fd2` is now a copy of `fd`.
    Dup { fd: i32, fd2: i32 },
}

fn is_recv(f: LibFn) -> bool {
    matches!(
        f,
        LibFn::Recv | LibFn::Recvfrom | LibFn::Recvmsg | LibFn::Read | LibFn::Readv
    )
}

fn is_send(f: LibFn) -> bool {
    matches!(
        f,
        LibFn::Send | LibFn::Sendto | LibFn::Sendmsg | LibFn::Write | LibFn::Writev
    )
}

/// Names an address for a service id.
fn addr_name(a: &Option<Addr>) -> Option<String> {
    let a = a.as_ref()?;
    // Linux address families.
    const AF_UNIX: u16 = 1;
    const AF_INET: u16 = 2;
    const AF_INET6: u16 = 10;
    match a.family {
        AF_INET | AF_INET6 => Some(format!("port:{}", a.port)),
        AF_UNIX => {
            let b = a.bytes();
            let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
            let path = String::from_utf8_lossy(&b[..end]);
            Some(if path.is_empty() {
                "unix:(abstract)".to_string()
            } else {
                format!("unix:{path}")
            })
        }
        _ => None,
    }
}

/// Which side of a connection the process is on, and where the exchange is.
#[derive(Clone, Debug)]
struct Conn {
    served: bool,
    service: String,
    /// Served: arrival of the current request; called: departure of the current call.
    open: Option<i64>,
    /// Served: last send of the reply so far; called: last send of the request so far.
    last_send: Option<i64>,
    /// Called: the reply has begun arriving.
    answered: bool,
    /// Served, `--services auto`: the shape of the current request.
    shape: Option<OpenShape>,
    /// Called: the served connection whose request made the current call.
    parent: Option<i32>,
    /// Called: the arrival of that request (with `parent`, the request's identity).
    parent_open: Option<i64>,
    /// Called: when the reply of the current call began arriving.
    answered_at: Option<i64>,
    /// Called: the spans in which the connection was held, oldest first (at most
    /// [`RECENT`]): from a call's departure to its reply's first byte, extended over the
    /// reply of every later call made for a request that waited for it (handed over
    /// without being free): was the connection held when a request arrived?
    recent: std::collections::VecDeque<(i64, i64)>,
    /// Called: the current call was made for a request that waited for the connection.
    handed: bool,
    /// (local, peer) ports, where recorded.
    ports: Option<(u16, u16)>,
    /// The connection's number in the process.
    id: u32,
    /// Called: the parent request's connection number.
    parent_id: Option<u32>,
    /// Served: the thread that received the current request.
    tid: u32,
    /// Served: connections and calls attributed to the current request so far.
    claimed: u32,
    /// Called: the request (served descriptor, arrival) the connection was made for.
    made_for: Option<(i32, i64)>,
    /// Served: the entry of the receive that began the current request; called: the
    /// return of the current call's last send.
    edge: Option<i64>,
    /// Called: the process received on it since it last sent on it ([`pull`]).
    recv_since_send: bool,
    /// The process connected it itself (not inherited, not accepted).
    opened: bool,
}

impl Conn {
    /// A connection the process got from its parent (a pre-forked worker's or a
    /// per-connection backend's: PostgreSQL's postmaster accepts, its child answers): its
    /// side is told by the first transfer — a receive first means it is served.
    fn inherited(served: bool) -> Conn {
        Conn {
            served,
            service: if served {
                INHERITED.to_string()
            } else {
                "peer:inherited".to_string()
            },
            open: None,
            last_send: None,
            answered: false,
            shape: None,
            parent: None,
            parent_open: None,
            answered_at: None,
            recent: Default::default(),
            handed: false,
            ports: None,
            id: 0,
            parent_id: None,
            tid: 0,
            claimed: 0,
            made_for: None,
            edge: None,
            recv_since_send: false,
            opened: false,
        }
    }
}

/// The (local, peer) ports of a TCP connection, where both addresses were recorded.
fn ports_of(local: &Option<Addr>, peer: &Option<Addr>) -> Option<(u16, u16)> {
    const AF_INET: u16 = 2;
    const AF_INET6: u16 = 10;
    let (l, p) = (local.as_ref()?, peer.as_ref()?);
    let inet = |a: &Addr| (a.family == AF_INET || a.family == AF_INET6) && a.port != 0;
    (inet(l) && inet(p)).then_some((l.port, p.port))
}

fn next_id(n: &mut u32) -> u32 {
    *n += 1;
    *n
}

/// The service of requests on a connection the process inherited.
pub const INHERITED: &str = "inherited";

impl TransactionSource for ByteFlow {
    fn transactions(&self, p: &ProcessTrace, mode: ServiceMode) -> Result<ProcessTransactions> {
        let conv = p.calib.converter();
        let mut out = ProcessTransactions::default();
        let mut steps: Vec<Step> = Vec::new();
        let (mut first, mut last) = (u64::MAX, 0u64);
        let auto = mode == ServiceMode::Auto;
        let mut table = FnTable::default();
        let mut symbols = ProcessSymbols::default();
        // Readiness waits per thread, and the thread's span.
        let mut thread_waits: Vec<(u32, ThreadWaits)> = Vec::new();
        let ns = |x: u64| conv.unix_ns(x) as i64;
        for t in &p.threads {
            let tid = t.tid;
            let (mut t_first, mut t_last) = (u64::MAX, 0u64);
            let mut waits: Vec<(u64, u64)> = Vec::new();
            let mut wait_enter: Option<u64> = None;
            // What the thread ran since its last socket call (`--services auto`).
            let mut ran = Pending::default();
            // TSC of the thread's last send entry: a reply leaves when the process hands
            // it to the kernel, not when the send returns (the return may come after the
            // woken peer ran, on a busy machine).
            let mut send_enter = 0u64;
            // TSC of the thread's last receive entry: a delay before the bytes are read
            // (the call sat on data it had) lies between it and the return.
            let mut recv_enter = 0u64;
            // A readiness wait on several descriptors returned since the thread's last
            // socket call ([`pull`]), and whether the current wait is on one only.
            let mut waited = false;
            let mut one_fd = false;
            t.for_each(|e| {
                let tsc = e.tsc();
                if let Event::Lib(l) = e {
                    if !l.exit && is_send(l.func) {
                        send_enter = tsc;
                    }
                    if !l.exit && is_recv(l.func) {
                        recv_enter = tsc;
                    }
                }
                first = first.min(tsc);
                last = last.max(tsc);
                t_first = t_first.min(tsc);
                t_last = t_last.max(tsc);
                if let Event::Lib(l) = e {
                    if waits::is_readiness_wait(l.func) {
                        if !l.exit {
                            wait_enter = Some(tsc);
                            // A poll of one descriptor is a receive with a timeout.
                            one_fd = matches!(l.func, LibFn::Poll | LibFn::Ppoll)
                                && l.opts.arg == Some(1);
                        } else if let Some(a) = wait_enter.take() {
                            waits.push((a, tsc));
                            waited |= !one_fd;
                        }
                    }
                }
                if auto {
                    match e {
                        Event::Call { kind, callee, .. } => {
                            ran.add(table.id(shape::raw_of(*kind, *callee), tsc), false)
                        }
                        Event::Lib(l) if !l.exit => {
                            ran.add(table.id(RawFn::Lib(l.func), tsc), true)
                        }
                        Event::Meta { meta, .. } => symbols.add_at(meta, tsc),
                        _ => {}
                    }
                }
                match e {
                    Event::Meta {
                        meta: Meta::Proc(r),
                        ..
                    } if !r.exe.is_empty() => {
                        out.exe = String::from_utf8_lossy(&r.exe).into_owned();
                    }
                    // The tracer's first sight of a descriptor it did not see made
                    // (inherited): its addresses, on the entry of its first call.
                    Event::Lib(l)
                        if !l.exit
                            && l.opts.is_socket == Some(true)
                            && l.local().is_some()
                            && l.peer().is_some() =>
                    {
                        if let Some(fd) = l.opts.fd {
                            steps.push(Step {
                                tsc,
                                tid,
                                what: StepKind::Seen {
                                    fd,
                                    local: l.local(),
                                    peer: l.peer(),
                                },
                            });
                        }
                    }
                    Event::Lib(l) if l.exit => {
                        let o = &l.opts;
                        let ok = o.ret.is_some_and(|r| r >= 0);
                        let what = match l.func {
                            LibFn::Socket | LibFn::Socketpair if ok => {
                                out.sockets = true;
                                None
                            }
                            LibFn::Bind | LibFn::Listen if ok => o.fd.map(|fd| StepKind::Bound {
                                fd,
                                local: l.local(),
                                site: l.site,
                            }),
                            LibFn::Accept | LibFn::Accept4 if ok => {
                                out.sockets = true;
                                match (o.fd, o.ret) {
                                    (Some(lfd), Some(fd)) => Some(StepKind::Accepted {
                                        listen_fd: lfd,
                                        fd: fd as i32,
                                        local: l.local(),
                                        peer: l.peer(),
                                        site: l.site,
                                    }),
                                    _ => None,
                                }
                            }
                            // A non-blocking connect fails with EINPROGRESS and connects.
                            LibFn::Connect => {
                                out.sockets = true;
                                o.fd.map(|fd| StepKind::Connected {
                                    fd,
                                    local: l.local(),
                                    peer: l.peer(),
                                })
                            }
                            f if is_recv(f) && o.is_socket != Some(false) => match (o.fd, o.ret) {
                                (Some(fd), Some(n)) if n >= 0 => Some(StepKind::Recv {
                                    fd,
                                    n,
                                    enter: if recv_enter != 0 { recv_enter } else { tsc },
                                    waited: std::mem::take(&mut waited),
                                }),
                                _ => None,
                            },
                            f if is_send(f) && o.is_socket != Some(false) => match (o.fd, o.ret) {
                                (Some(fd), Some(n)) if n > 0 => {
                                    waited = false;
                                    Some(StepKind::Sent { fd, n, exit: tsc })
                                }
                                _ => None,
                            },
                            LibFn::Close => o.fd.map(|fd| StepKind::Closed { fd }),
                            LibFn::Dup | LibFn::Dup2 | LibFn::Dup3 if ok => match (o.fd, o.ret) {
                                (Some(fd), Some(r)) => Some(StepKind::Dup { fd, fd2: r as i32 }),
                                _ => None,
                            },
                            _ => None,
                        };
                        if let Some(what) = what {
                            let tsc = match what {
                                StepKind::Sent { .. } if send_enter != 0 => send_enter,
                                _ => tsc,
                            };
                            if !ran.is_empty() {
                                let before_send = matches!(what, StepKind::Sent { .. });
                                steps.push(Step {
                                    tsc,
                                    tid,
                                    what: StepKind::Ran {
                                        fns: std::mem::take(&mut ran),
                                        before_send,
                                    },
                                });
                            }
                            steps.push(Step { tsc, tid, what });
                        }
                    }
                    _ => {}
                }
            })?;
            if t_first <= t_last {
                thread_waits.push((
                    tid,
                    ThreadWaits {
                        span: (ns(t_first), ns(t_last)),
                        waits: waits.into_iter().map(|(a, b)| (ns(a), ns(b))).collect(),
                    },
                ));
            }
        }
        if first <= last {
            out.span_ns = Some((conv.unix_ns(first) as i64, conv.unix_ns(last) as i64));
        }
        // Stable sort: a thread's `Ran` stays before the socket call that followed it.
        steps.sort_by_key(|s| (s.tsc, s.tid));
        let keys = if auto {
            table.resolve(&symbols)
        } else {
            Vec::new()
        };
        let mut listeners: HashMap<i32, String> = HashMap::new();
        let mut conns: HashMap<i32, Conn> = HashMap::new();
        // Addresses the tracer gave of inherited descriptors, and the connections' numbers.
        let mut seen: HashMap<i32, Option<(u16, u16)>> = HashMap::new();
        let mut conn_no = 0u32;
        // The served connection each thread last received a request on.
        let mut serving: HashMap<u32, i32> = HashMap::new();
        // Threads that received a request while another of theirs was unanswered.
        let mut loops: std::collections::HashSet<u32> = Default::default();
        // Both ends of connections the process made to itself ([`pull`]).
        let mut internal: std::collections::HashSet<i32> = Default::default();
        let mut tx = Vec::new();
        let mut fin = Finish {
            tx: &mut tx,
            keys: &keys,
            intern: Default::default(),
        };
        for s in &steps {
            let t = conv.unix_ns(s.tsc) as i64;
            match &s.what {
                StepKind::Ran { fns, before_send } => {
                    let Some(c) = serving.get(&s.tid).and_then(|fd| conns.get_mut(fd)) else {
                        continue;
                    };
                    if let (Some(_), Some(sh)) = (c.open, c.shape.as_mut()) {
                        if *before_send || c.last_send.is_none() {
                            sh.absorb(fns);
                        }
                    }
                }
                StepKind::Bound { fd, local, site } => {
                    if let Some(name) = addr_name(local) {
                        let name = match mode {
                            ServiceMode::Conn => format!("{name}@{site:#x}"),
                            _ => name,
                        };
                        listeners.insert(*fd, name);
                    }
                }
                StepKind::Accepted {
                    listen_fd,
                    fd,
                    local,
                    peer,
                    site,
                } => {
                    let service = match listeners.get(listen_fd) {
                        Some(s) => s.clone(),
                        None => {
                            // A listener inherited from a parent: its address is the
                            // accepted connection's local one.
                            let base = addr_name(local).unwrap_or_else(|| "port:?".into());
                            match mode {
                                ServiceMode::Conn => format!("{base}@{site:#x}"),
                                _ => base,
                            }
                        }
                    };
                    fin.close(&mut conns, *fd);
                    internal.remove(fd);
                    if let Some(other) = pull::own_end(&conns, ports_of(local, peer)) {
                        // The process's own pipe: neither served nor called.
                        fin.close(&mut conns, other);
                        internal.extend([other, *fd]);
                        continue;
                    }
                    conns.insert(
                        *fd,
                        Conn {
                            served: true,
                            service,
                            open: None,
                            last_send: None,
                            answered: false,
                            shape: None,
                            parent: None,
                            parent_open: None,
                            answered_at: None,
                            recent: Default::default(),
                            handed: false,
                            ports: ports_of(local, peer),
                            id: next_id(&mut conn_no),
                            parent_id: None,
                            tid: 0,
                            claimed: 0,
                            made_for: None,
                            edge: None,
                            recv_since_send: false,
                            opened: false,
                        },
                    );
                }
                StepKind::Seen { fd, local, peer } => {
                    seen.insert(*fd, ports_of(local, peer));
                    if let Some(c) = conns.get_mut(fd).filter(|c| c.ports.is_none()) {
                        c.ports = ports_of(local, peer);
                    }
                }
                StepKind::Connected { fd, local, peer } => {
                    fin.close(&mut conns, *fd);
                    internal.remove(fd);
                    let made_for = parent_of(&conns, &serving, &loops, s.tid);
                    if let Some(c) = made_for.and_then(|(p, _)| conns.get_mut(&p)) {
                        c.claimed += 1;
                    }
                    let service = addr_name(peer)
                        .map(|n| n.replacen("port:", "peer:", 1))
                        .unwrap_or_else(|| "peer:?".into());
                    conns.insert(
                        *fd,
                        Conn {
                            served: false,
                            service,
                            open: None,
                            last_send: None,
                            answered: false,
                            shape: None,
                            parent: None,
                            parent_open: None,
                            answered_at: None,
                            recent: Default::default(),
                            handed: false,
                            ports: ports_of(local, peer),
                            id: next_id(&mut conn_no),
                            parent_id: None,
                            tid: 0,
                            claimed: 0,
                            made_for,
                            edge: None,
                            recv_since_send: false,
                            opened: true,
                        },
                    );
                }
                StepKind::Recv {
                    fd,
                    n,
                    enter,
                    waited,
                } => {
                    if internal.contains(fd) {
                        continue;
                    }
                    if *n > 0 && !conns.contains_key(fd) && !listeners.contains_key(fd) {
                        let mut c = Conn::inherited(true);
                        c.ports = seen.get(fd).copied().flatten();
                        c.id = next_id(&mut conn_no);
                        conns.insert(*fd, c);
                    }
                    let Some(c) = conns.get_mut(fd) else { continue };
                    if *n == 0 {
                        fin.end_exchange(c);
                        continue;
                    }
                    if c.served {
                        if c.open.is_none() || c.last_send.is_some() {
                            fin.end_exchange(c);
                            c.open = Some(t);
                            c.edge = Some((conv.unix_ns(*enter) as i64).min(t));
                            c.claimed = 0;
                            if auto {
                                c.shape = Some(OpenShape::default());
                            }
                        }
                        if let Some(sh) = c.shape.as_mut() {
                            sh.shape.req_bytes += *n as u64;
                        }
                        c.tid = s.tid;
                        let before = serving.insert(s.tid, *fd);
                        if let Some(b) = before.filter(|b| pull::is_key(*b)) {
                            // The thread leaves a pulled exchange for a request it accepted.
                            if conns.get(&b).is_some_and(|o| o.last_send.is_none()) {
                                pull::abandon(&mut conns, &mut serving, &mut fin, b);
                            }
                        } else if let Some(b) = before.filter(|b| b != fd) {
                            // Two requests open on one thread at once: both interleaved.
                            let waiting = conns
                                .get(&b)
                                .is_some_and(|o| o.open.is_some() && o.last_send.is_none());
                            if waiting {
                                loops.insert(s.tid);
                                for f in [b, *fd] {
                                    if let Some(sh) =
                                        conns.get_mut(&f).and_then(|o| o.shape.as_mut())
                                    {
                                        sh.shape.interleaved = true;
                                    }
                                }
                            }
                        }
                        continue;
                    }
                    let arrival = pull::Arrival {
                        fd: *fd,
                        tid: s.tid,
                        t,
                        edge: conv.unix_ns(*enter) as i64,
                        n: *n as u64,
                        waited: *waited,
                        auto,
                    };
                    pull::received(
                        &mut conns,
                        &mut serving,
                        &loops,
                        &mut fin,
                        &mut conn_no,
                        arrival,
                    );
                    let Some(c) = conns.get_mut(fd) else { continue };
                    // A reply to a call: its bytes go to the request that made it.
                    let (peer, parent) = (c.service.clone(), c.parent);
                    let first = matches!((c.open, c.answered), (Some(_), false));
                    if first {
                        // The first bytes of the reply: the call is over.
                        c.answered = true;
                        c.answered_at = Some(t);
                        if c.handed && !c.recent.is_empty() {
                            if let Some(span) = c.recent.back_mut() {
                                span.1 = t;
                            }
                        } else if let Some(left) = c.open {
                            if c.recent.len() == RECENT {
                                c.recent.pop_front();
                            }
                            c.recent.push_back((left, t));
                        }
                        fin.tx.push(Transaction {
                            role: Role::Called,
                            service: c.service.clone(),
                            start_ns: c.last_send.unwrap_or(t),
                            end_ns: t,
                            shape: None,
                            link: Link {
                                ports: c.ports,
                                conn: c.id,
                                parent: c.parent_id.zip(c.parent_open),
                                caller: None,
                                recv_enter_ns: None,
                                sent_end_ns: c.edge,
                            },
                        });
                    }
                    if let Some(sh) = parent
                        .and_then(|p| conns.get_mut(&p))
                        .and_then(|p| p.shape.as_mut())
                    {
                        if first {
                            sh.shape.add_call(&peer);
                        }
                        sh.shape.add_call_bytes(&peer, *n as u64);
                    }
                }
                StepKind::Sent { fd, n, exit } => {
                    if internal.contains(fd) {
                        continue;
                    }
                    // The reply of a pulled request ([`pull`]) is no call.
                    if conns.get(fd).is_some_and(|c| !c.served)
                        && pull::sent(&mut conns, &mut serving, &mut fin, *fd, s.tid, t, *n as u64)
                    {
                        continue;
                    }
                    if !conns.contains_key(fd) && !listeners.contains_key(fd) {
                        let mut c = Conn::inherited(false);
                        c.ports = seen.get(fd).copied().flatten();
                        c.id = next_id(&mut conn_no);
                        conns.insert(*fd, c);
                    }
                    // A new call's request: the one its connection was made for, if that
                    // request is still open and this is the connection's first call; else
                    // the thread's (see `parent_of`).
                    let new_call = conns
                        .get(fd)
                        .is_some_and(|c| !c.served && (c.answered || c.open.is_none()));
                    let first_call = conns.get(fd).is_some_and(|c| c.parent_id.is_none());
                    let made_for = conns.get(fd).and_then(|c| c.made_for).filter(|(p, at)| {
                        first_call && conns.get(p).is_some_and(|c| c.open == Some(*at))
                    });
                    let parent = match made_for {
                        Some((p, _)) => Some(p),
                        None if new_call => {
                            let p = parent_of(&conns, &serving, &loops, s.tid);
                            if let Some(c) = p.and_then(|(p, _)| conns.get_mut(&p)) {
                                c.claimed += 1;
                            }
                            p.map(|(p, _)| p)
                        }
                        None => serving.get(&s.tid).copied(),
                    }
                    .filter(|p| conns.get(p).is_some_and(|c| c.open.is_some()));
                    let parent_open = parent.and_then(|p| conns.get(&p)).and_then(|c| c.open);
                    let parent_id = parent.and_then(|p| conns.get(&p)).map(|c| c.id);
                    let Some(c) = conns.get_mut(fd) else { continue };
                    if c.served {
                        if c.open.is_some() {
                            c.last_send = Some(t);
                            if let Some(sh) = c.shape.as_mut() {
                                sh.shape.reply_bytes += *n as u64;
                            }
                        }
                    } else {
                        if c.answered || c.open.is_none() {
                            let waited = waited_for(c, parent, parent_open);
                            if let Some(w) = waited.and_then(|a| queued(c, a, t)) {
                                fin.tx.push(w);
                            }
                            c.handed = waited.is_some();
                            c.open = Some(t);
                            c.answered = false;
                            c.parent = parent;
                            c.parent_open = parent_open;
                            c.parent_id = parent_id;
                        }
                        c.last_send = Some(t);
                        c.edge = Some((conv.unix_ns(*exit) as i64).max(t));
                    }
                }
                StepKind::Closed { fd } => {
                    fin.close(&mut conns, *fd);
                    internal.remove(fd);
                    seen.remove(fd);
                    listeners.remove(fd);
                }
                StepKind::Dup { fd, fd2 } => {
                    if let Some(l) = listeners.get(fd).cloned() {
                        listeners.insert(*fd2, l);
                    }
                }
            }
        }
        let fds: Vec<i32> = conns.keys().copied().collect();
        for fd in fds {
            fin.close(&mut conns, fd);
        }
        tx.sort_by_key(|t| (t.end_ns, t.start_ns));
        out.transactions = tx;
        let loop_waits: Vec<&ThreadWaits> = thread_waits
            .iter()
            .filter(|(tid, _)| loops.contains(tid))
            .map(|(_, w)| w)
            .collect();
        out.idle_ns = waits::all_waiting(&loop_waits);
        if auto {
            let mut used: Vec<u64> = out
                .transactions
                .iter()
                .filter_map(|t| t.shape.as_ref())
                .flat_map(|s| s.funcs.iter().chain(s.libs.iter()).copied())
                .collect();
            used.sort_unstable();
            used.dedup();
            for (k, name) in keys.into_iter().flatten() {
                if used.binary_search(&k).is_ok() {
                    out.names.entry(k).or_insert(name);
                }
            }
        }
        Ok(out)
    }
}

/// The served request (descriptor, arrival) a thread's new call or connection is for: the
/// request it last received, except on an **event loop** thread (one that received a
/// request while another of its requests was unanswered), which reads every ready
/// connection before it processes any: there the earliest-arrived request of the thread
/// still unanswered and with no connection or call attributed to it yet, if any.
fn parent_of(
    conns: &HashMap<i32, Conn>,
    serving: &HashMap<u32, i32>,
    loops: &std::collections::HashSet<u32>,
    tid: u32,
) -> Option<(i32, i64)> {
    let open = |fd: &i32| conns.get(fd).and_then(|c| c.open.map(|o| (*fd, o)));
    if loops.contains(&tid) {
        let waiting = conns
            .iter()
            .filter(|(_, c)| c.served && c.tid == tid && c.claimed == 0 && c.last_send.is_none())
            .filter_map(|(fd, c)| c.open.map(|o| (o, *fd)))
            .min();
        if let Some((o, fd)) = waiting {
            return Some((fd, o));
        }
    }
    serving.get(&tid).and_then(open)
}

/// Calls remembered per client connection (for [`queued`]).
const RECENT: usize = 64;

/// The wait of a request that arrived at `arrived`, waited for the connection `c`
/// ([`waited_for`]) and makes its call on it at `t` (see the module documentation). If
/// the connection was held at the arrival — in a call, or being handed from one request
/// that waited for it to the next (`recent`) — the request waited from its arrival: the
/// calls of other requests may follow one another on it before this one's turn, and one
/// of them may even have arrived later and taken the connection first (a thread woken for
/// a free connection runs only after a newer one took it). Else it waited from the
/// previous call's departure: until then the connection was free and the request was at
/// its own work.
fn queued(c: &Conn, arrived: i64, t: i64) -> Option<Transaction> {
    let prev_left = c.open?;
    let held = c.recent.iter().any(|&(d, e)| d <= arrived && arrived < e);
    let start = if held {
        arrived
    } else {
        arrived.max(prev_left)
    };
    (start < t).then(|| Transaction {
        role: Role::Called,
        service: format!("wait {}", c.service),
        start_ns: start,
        end_ns: t,
        shape: None,
        link: Link::default(),
    })
}

/// The arrival of the request (`parent`, arrived at `parent_open`) about to make a call on
/// `c`, if it waited for the connection: `c`'s previous call was made for another request
/// and its reply began only after this request arrived.
fn waited_for(c: &Conn, parent: Option<i32>, parent_open: Option<i64>) -> Option<i64> {
    let (p, arrived) = (parent?, parent_open?);
    let prev_answered = c.answered_at?;
    let same = c.parent == Some(p) && c.parent_open == Some(arrived);
    (!same && prev_answered > arrived).then_some(arrived)
}

/// Where finished transactions go, and the stable keys of the functions their shapes hold.
struct Finish<'a> {
    tx: &'a mut Vec<Transaction>,
    keys: &'a [Option<(u64, FnName)>],
    intern: shape::Interner,
}

impl Finish<'_> {
    /// Ends the current exchange of a connection: a served request with a reply becomes
    /// a transaction.
    fn end_exchange(&mut self, c: &mut Conn) {
        let shape = c.shape.take();
        if c.served {
            if let (Some(start), Some(end)) = (c.open, c.last_send) {
                self.tx.push(Transaction {
                    role: Role::Served,
                    service: c.service.clone(),
                    start_ns: start,
                    end_ns: end.max(start),
                    shape: shape.map(|s| Box::new(s.finish(self.keys, &mut self.intern))),
                    link: Link {
                        ports: c.ports,
                        conn: c.id,
                        parent: None,
                        caller: None,
                        recv_enter_ns: c.edge,
                        sent_end_ns: None,
                    },
                });
            }
        }
        c.open = None;
        c.last_send = None;
        c.answered = false;
    }

    fn close(&mut self, conns: &mut HashMap<i32, Conn>, fd: i32) {
        if let Some(mut c) = conns.remove(&fd) {
            self.end_exchange(&mut c);
        }
        if !pull::is_key(fd) {
            self.close(conns, pull::key(fd));
        }
    }
}
