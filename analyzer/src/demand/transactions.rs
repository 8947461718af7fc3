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

use super::ServiceMode;
use crate::decode::{Event, ProcessTrace};
use crate::error::Result;
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
        site: u64,
    },
    /// `connect` on `fd` to `peer`.
    Connected { fd: i32, peer: Option<Addr> },
    /// `fd` received `n` bytes (0: end of stream).
    Recv { fd: i32, n: i64 },
    /// `fd` sent `n` bytes.
    Sent { fd: i32 },
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
        }
    }
}

/// The service of requests on a connection the process inherited.
pub const INHERITED: &str = "inherited";

impl TransactionSource for ByteFlow {
    fn transactions(&self, p: &ProcessTrace, mode: ServiceMode) -> Result<ProcessTransactions> {
        let conv = p.calib.converter();
        let mut out = ProcessTransactions::default();
        let mut steps: Vec<Step> = Vec::new();
        let (mut first, mut last) = (u64::MAX, 0u64);
        for t in &p.threads {
            let tid = t.tid;
            // TSC of the thread's last send entry: a reply leaves when the process hands
            // it to the kernel, not when the send returns (the return may come after the
            // woken peer ran, on a busy machine).
            let mut send_enter = 0u64;
            t.for_each(|e| {
                let tsc = e.tsc();
                if let Event::Lib(l) = e {
                    if !l.exit && is_send(l.func) {
                        send_enter = tsc;
                    }
                }
                first = first.min(tsc);
                last = last.max(tsc);
                match e {
                    Event::Meta {
                        meta: Meta::Proc(r),
                        ..
                    } if !r.exe.is_empty() => {
                        out.exe = String::from_utf8_lossy(&r.exe).into_owned();
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
                                        site: l.site,
                                    }),
                                    _ => None,
                                }
                            }
                            // A non-blocking connect fails with EINPROGRESS and connects.
                            LibFn::Connect => {
                                out.sockets = true;
                                o.fd.map(|fd| StepKind::Connected { fd, peer: l.peer() })
                            }
                            f if is_recv(f) && o.is_socket != Some(false) => match (o.fd, o.ret) {
                                (Some(fd), Some(n)) if n >= 0 => Some(StepKind::Recv { fd, n }),
                                _ => None,
                            },
                            f if is_send(f) && o.is_socket != Some(false) => match (o.fd, o.ret) {
                                (Some(fd), Some(n)) if n > 0 => Some(StepKind::Sent { fd }),
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
                            steps.push(Step { tsc, tid, what });
                        }
                    }
                    _ => {}
                }
            })?;
        }
        if first <= last {
            out.span_ns = Some((conv.unix_ns(first) as i64, conv.unix_ns(last) as i64));
        }
        steps.sort_by_key(|s| (s.tsc, s.tid));
        let mut listeners: HashMap<i32, String> = HashMap::new();
        let mut conns: HashMap<i32, Conn> = HashMap::new();
        let tx = &mut out.transactions;
        for s in &steps {
            let t = conv.unix_ns(s.tsc) as i64;
            match &s.what {
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
                    close(tx, &mut conns, *fd);
                    conns.insert(
                        *fd,
                        Conn {
                            served: true,
                            service,
                            open: None,
                            last_send: None,
                            answered: false,
                        },
                    );
                }
                StepKind::Connected { fd, peer } => {
                    close(tx, &mut conns, *fd);
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
                        },
                    );
                }
                StepKind::Recv { fd, n } => {
                    if *n > 0 && !conns.contains_key(fd) && !listeners.contains_key(fd) {
                        conns.insert(*fd, Conn::inherited(true));
                    }
                    let Some(c) = conns.get_mut(fd) else { continue };
                    if *n == 0 {
                        end_exchange(tx, c);
                        continue;
                    }
                    if c.served {
                        if c.open.is_none() || c.last_send.is_some() {
                            end_exchange(tx, c);
                            c.open = Some(t);
                        }
                    } else if let (Some(_), false) = (c.open, c.answered) {
                        // The first bytes of the reply: the call is over.
                        c.answered = true;
                        tx.push(Transaction {
                            role: Role::Called,
                            service: c.service.clone(),
                            start_ns: c.last_send.unwrap_or(t),
                            end_ns: t,
                        });
                    }
                }
                StepKind::Sent { fd, .. } => {
                    if !conns.contains_key(fd) && !listeners.contains_key(fd) {
                        conns.insert(*fd, Conn::inherited(false));
                    }
                    let Some(c) = conns.get_mut(fd) else { continue };
                    if c.served {
                        if c.open.is_some() {
                            c.last_send = Some(t);
                        }
                    } else {
                        if c.answered || c.open.is_none() {
                            c.open = Some(t);
                            c.answered = false;
                        }
                        c.last_send = Some(t);
                    }
                }
                StepKind::Closed { fd } => {
                    close(tx, &mut conns, *fd);
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
            close(tx, &mut conns, fd);
        }
        tx.sort_by_key(|t| (t.end_ns, t.start_ns));
        Ok(out)
    }
}

/// Ends the current exchange of a connection: a served request with a reply becomes a
/// transaction.
fn end_exchange(tx: &mut Vec<Transaction>, c: &mut Conn) {
    if c.served {
        if let (Some(start), Some(end)) = (c.open, c.last_send) {
            tx.push(Transaction {
                role: Role::Served,
                service: c.service.clone(),
                start_ns: start,
                end_ns: end.max(start),
            });
        }
    }
    c.open = None;
    c.last_send = None;
    c.answered = false;
}

fn close(tx: &mut Vec<Transaction>, conns: &mut HashMap<i32, Conn>, fd: i32) {
    if let Some(mut c) = conns.remove(&fd) {
        end_exchange(tx, &mut c);
    }
}
