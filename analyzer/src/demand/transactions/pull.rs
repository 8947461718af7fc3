//! **Pulled requests**: jobs a process is handed on a connection it opened itself.
//!
//! A worker of a job queue — a RabbitMQ consumer, a beanstalkd, Celery, Sidekiq, RQ or
//! Gearman worker, a Kafka consumer — connects *out* to its broker and is handed its jobs on
//! that client-side connection; it answers (a reply, an ack) on the same connection. It
//! serves requests as surely as a server that accepted them, and a CPU taken from it
//! slows its tier. On a connection the process opened, an **exchange** is a pulled request
//! of the process's service `pull peer:PORT` when:
//!
//! 1. it **begins with a receive the process did not ask for on behalf of a request**: the
//!    connection's latest call (send) was made for no served request (a served request of
//!    the thread made it: its reply, however late, is the request's; a pulled request made
//!    it and is still unanswered: it is that request's downstream reply), the receiving
//!    thread serves no other request that is still unanswered, and is not an event loop;
//!    and it is a **new arrival**: the first receive on the connection since the process
//!    last sent on it, or one the thread waited for (a readiness wait since its previous
//!    socket call), not more bytes of one the thread is reading;
//! 2. its **handling does the thread's work for it**: while it is the thread's request, the
//!    thread made at least one downstream call or connection (a query to its database, a
//!    call to another service), which are its calls as a served request's are;
//! 3. it **ends with a send back** on that connection by the same thread (the reply, the
//!    ack: every send until the next pulled request begins).
//!
//! A receive that begins an exchange but is followed by a send back with no downstream
//! call in between (the steps of a protocol's handshake, a ping answered) is no request:
//! the send is a call as before. So is an exchange the thread leaves for a request it
//! accepted. The replies of an application server's database connection answer queries it
//! sent for the requests it serves (1.), so such a connection never serves: the rule
//! follows who asked, not how long the peer took.
//!
//! Only a connection the process made itself (`connect`) can serve so: one it inherited
//! from its parent is not known to be its own.
//!
//! A connection whose two ends are both the process's (connected to its own listener: the
//! "self-pipe" some libraries make over loopback TCP to wake their event loop, as pika
//! does) is neither served nor called: its bytes are the process talking to itself.

use super::{Conn, Finish};
use std::collections::{HashMap, HashSet};

/// The key, among a process's connections, of the pulled request open on client
/// descriptor `fd` (a descriptor is ≥ 0; keys of pulled requests are below every one).
pub(super) fn key(fd: i32) -> i32 {
    -(1 << 20) - fd
}

/// Is `k` the key of a pulled request ([`key`])?
pub(super) fn is_key(k: i32) -> bool {
    k <= -(1 << 20)
}

/// Is a receive on `c` (a client connection; `new`: a new arrival) the reply to a call
/// made on behalf of a request: of a served request, always; of an open and unanswered
/// pulled request, while the call awaits its reply or the thread reads on without waiting.
fn asked(conns: &HashMap<i32, Conn>, c: &Conn, new: bool) -> bool {
    match c.parent {
        None => false,
        Some(p) if is_key(p) => {
            let awaits = c.open.is_some() && !c.answered;
            (awaits || !new)
                && conns.get(&p).is_some_and(|r| {
                    r.open.is_some() && r.open == c.parent_open && r.last_send.is_none()
                })
        }
        Some(_) => true,
    }
}

/// Does thread `tid` serve a request it accepted (or inherited) that is still unanswered?
fn serving_other(conns: &HashMap<i32, Conn>, serving: &HashMap<u32, i32>, tid: u32) -> bool {
    serving
        .get(&tid)
        .filter(|k| !is_key(**k))
        .and_then(|k| conns.get(k))
        .is_some_and(|o| o.open.is_some() && o.last_send.is_none())
}

/// What a receive on a client connection is to the pulled-request rule.
pub(super) struct Arrival {
    pub fd: i32,
    pub tid: u32,
    /// Its return and the entry of its call (unix ns).
    pub t: i64,
    pub edge: i64,
    pub n: u64,
    /// The thread waited for readiness since its previous socket call.
    pub waited: bool,
    /// `--services auto`: give the request a shape.
    pub auto: bool,
}

/// A receive of `a.n` bytes on the client connection `a.fd`: begins a pulled request,
/// continues the one it belongs to, or is a reply (rule 1 of the module doc). Ends an
/// unanswered pulled request of the connection that had no downstream call when the
/// receive is not one.
pub(super) fn received(
    conns: &mut HashMap<i32, Conn>,
    serving: &mut HashMap<u32, i32>,
    loops: &HashSet<u32>,
    fin: &mut Finish,
    conn_no: &mut u32,
    a: Arrival,
) {
    let Some(c) = conns.get(&a.fd).filter(|c| c.opened) else {
        return;
    };
    let new = !c.recv_since_send || a.waited;
    // Not asked for a request, on a thread free to serve it.
    let free =
        !asked(conns, c, new) && !serving_other(conns, serving, a.tid) && !loops.contains(&a.tid);
    // A call of the process awaits its reply there: the receive answers it unless the
    // thread waited for whichever of its descriptors came first.
    let awaits = c.open.is_some() && !c.answered;
    let begins = free && new && (!awaits || a.waited);
    let (service, ports) = (format!("pull {}", c.service), c.ports);
    if let Some(c) = conns.get_mut(&a.fd) {
        c.recv_since_send = true;
    }
    let k = key(a.fd);
    let cur = conns
        .get(&k)
        .filter(|p| p.open.is_some() && p.tid == a.tid)
        .map(|p| (p.last_send.is_some(), p.claimed));
    match cur {
        // More bytes of the request the thread is reading, or a message that came while
        // it was working for one: the same request.
        Some((false, claimed)) if free && (!new || claimed > 0) => {
            if let Some(sh) = conns.get_mut(&k).and_then(|p| p.shape.as_mut()) {
                sh.shape.req_bytes += a.n;
            }
            return;
        }
        Some((false, 0)) if !begins => abandon(conns, serving, fin, k),
        _ => {}
    }
    if !begins {
        return;
    }
    if let Some(p) = conns.get_mut(&k) {
        let old = p.tid;
        fin.end_exchange(p);
        if old != a.tid && serving.get(&old) == Some(&k) {
            serving.remove(&old);
        }
    }
    let mut p = Conn::inherited(true);
    p.service = service;
    p.ports = ports;
    p.id = super::next_id(conn_no);
    p.open = Some(a.t);
    p.edge = Some(a.edge.min(a.t));
    p.tid = a.tid;
    if a.auto {
        let mut sh = super::OpenShape::default();
        sh.shape.req_bytes = a.n;
        p.shape = Some(sh);
    }
    conns.insert(k, p);
    serving.insert(a.tid, k);
}

/// A send of `n` bytes on the client connection `fd` by thread `tid` at `t`: true if it is
/// (part of) the reply of the thread's pulled request on that connection (rules 2 and 3),
/// false if it is a call. A pulled request the send finds with no downstream call is no
/// request: it is ended unanswered.
pub(super) fn sent(
    conns: &mut HashMap<i32, Conn>,
    serving: &mut HashMap<u32, i32>,
    fin: &mut Finish,
    fd: i32,
    tid: u32,
    t: i64,
    n: u64,
) -> bool {
    let k = key(fd);
    if let Some(c) = conns.get_mut(&fd) {
        c.recv_since_send = false;
    }
    let Some(p) = conns.get_mut(&k).filter(|p| p.open.is_some()) else {
        return false;
    };
    if serving.get(&tid) == Some(&k) && (p.last_send.is_some() || p.claimed > 0) {
        p.last_send = Some(t);
        if let Some(sh) = p.shape.as_mut() {
            sh.shape.reply_bytes += n;
        }
        return true;
    }
    if p.last_send.is_none() {
        abandon(conns, serving, fin, k);
    }
    false
}

/// Ends the unanswered pulled request `k` (no transaction) and frees its thread.
pub(super) fn abandon(
    conns: &mut HashMap<i32, Conn>,
    serving: &mut HashMap<u32, i32>,
    fin: &mut Finish,
    k: i32,
) {
    if let Some(p) = conns.get_mut(&k) {
        let tid = p.tid;
        fin.end_exchange(p);
        if serving.get(&tid) == Some(&k) {
            serving.remove(&tid);
        }
    }
}

/// Is the connection accepted with ports `(local, peer)` the other end of one the process
/// connected itself (see the module doc)? Its client descriptor, if so.
pub(super) fn own_end(conns: &HashMap<i32, Conn>, ports: Option<(u16, u16)>) -> Option<i32> {
    let (l, p) = ports?;
    conns
        .iter()
        .find(|(fd, c)| !c.served && !is_key(**fd) && c.ports == Some((p, l)))
        .map(|(fd, _)| *fd)
}
