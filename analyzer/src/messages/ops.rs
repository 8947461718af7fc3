//! Collecting a process's communication events (**ops**): one [`Op`] per recorded library
//! call that moves bytes, sets up or ends a descriptor, waits in a multiplexer or forks,
//! plus one per lost-entries gap. These are 004's events: what the Lamport clocks stamp and
//! the streams match. Everything else (function entries, metadata) is skipped on the
//! decoder's fast path.
//!
//! A call is one `LibEnter` + one `LibExit` on the same thread (the tracer's reentrancy
//! guard means a thread's calls never nest): the op keeps the entry's TSC as its start and
//! the exit's as its end. A call whose exit never came (the process died in it) is kept
//! with start = end = its entry, and `ret` unknown (`i64::MIN`).

use crate::decode::{CallOpts, Event, LibEvent, ProcessTrace, Visit};
use crate::error::Result;
use crate::hash::FxMap;
use bufpool::format::{Addr, LibFn, LibOpts, Meta, ProcReason};

/// `ret` of a call whose exit was not recorded.
pub const NO_RET: i64 = i64::MIN;
/// [`Op::sock`] of an op on no known socket.
pub const NO_SOCK: u32 = u32::MAX;
/// `MSG_PEEK`.
pub const MSG_PEEK: u32 = 0x2;

/// What an op does (a coarser view of its [`LibFn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Bytes written (`send*`, `write*`).
    Send,
    /// Bytes read (`recv*`, `read*`).
    Recv,
    /// `MSG_PEEK` receive: looks, consumes nothing.
    Peek,
    /// `connect`.
    Connect,
    /// `accept`/`accept4`: `ret` is the new descriptor.
    Accept,
    /// `socket`: `ret` is the descriptor, `aux` the type.
    Socket,
    /// `socketpair`: `fd`, `aux` = the second end.
    Pair,
    /// `bind`, `listen`.
    Bind,
    /// `close`.
    Close,
    /// `shutdown`.
    Shutdown,
    /// `dup*`, `fcntl(F_DUPFD*)`: `ret` is the new descriptor (`aux` the dup2 target).
    Dup,
    /// A multiplexer wait (ready descriptors in [`ProcOps::ready`]).
    Mux,
    /// `fork`/`vfork`: `ret` is the child pid in the parent.
    Fork,
    /// Entries were lost here (`aux` = how many): the byte offsets of every stream this
    /// process uses are unknown from here on.
    Gap,
    /// Any other recorded call (exec, exit, epoll_ctl…): an event, nothing more.
    Other,
    /// Not a call: the tracer met descriptor `fd` already open (inherited across `exec`, or
    /// the trace began late) and described it on the entry of its first data call (the
    /// op after this one): its addresses are in [`ProcOps::addrs`], `ret` = bytes the
    /// process had read on the connection ([`NO_RET`] if unknown), `aux` = bytes it had
    /// written (`u64::MAX` if unknown). `start` = `end` = that entry's TSC.
    Adopt,
}

/// One event of a process.
#[derive(Clone, Copy, Debug)]
pub struct Op {
    /// TSC of the call's entry.
    pub start: u64,
    /// TSC of its exit.
    pub end: u64,
    /// Thread.
    pub tid: u32,
    /// The function (`Other` ops keep theirs; gaps say `Close`, unused).
    pub func: LibFn,
    /// What it does.
    pub kind: OpKind,
    /// Descriptor argument (-1 if none).
    pub fd: i32,
    /// Return value ([`NO_RET`] if the exit was not recorded).
    pub ret: i64,
    /// errno of a failed call (0 otherwise).
    pub errno: i32,
    /// Flags argument (send/recv flags, socket type…).
    pub flags: u32,
    /// Kind-specific: see [`OpKind`].
    pub aux: u64,
    /// Did a fault injection change its result?
    pub injected: bool,
    /// The socket it used ([`NO_SOCK`] if none), set by [`super::sockets`].
    pub sock: u32,
}

impl Op {
    /// Bytes moved (0 for failed calls and non-transfers).
    #[inline]
    pub fn bytes(&self) -> u64 {
        match self.kind {
            OpKind::Send | OpKind::Recv | OpKind::Peek
                if self.ret > 0 && !matches!(self.func, LibFn::Sendmmsg | LibFn::Recvmmsg) =>
            {
                self.ret as u64
            }
            _ => 0,
        }
    }
}

/// A process's ops, in TSC order, with what is known about the process.
#[derive(Clone, Debug, Default)]
pub struct ProcOps {
    /// Host.
    pub host: String,
    /// Where its loopback and UNIX socket addresses are meant (`ProcessTrace::socket_scope`).
    pub scope: String,
    /// Process id.
    pub pid: u32,
    /// Start ticks (identity with `pid`).
    pub start_ticks: u64,
    /// Parent pid, if a process record said.
    pub ppid: Option<u32>,
    /// Was it forked from a traced parent (its descriptors are the parent's)?
    pub forked: bool,
    /// Executable.
    pub exe: String,
    /// `argv[0]` of its last process record (see [`crate::procname::started_name`]).
    pub argv0: Option<String>,
    /// TSC → wall clock.
    pub calib: bufpool::Calibration,
    /// The ops, by end TSC (then thread).
    pub ops: Vec<Op>,
    /// Local and peer address recorded by a setup op (`connect`, `accept`, `bind`), or by a
    /// datagram call (`sendto`/`sendmsg`: peer = destination, local = the socket's address
    /// once; `recvfrom`/`recvmsg`: peer = source), by op index.
    pub addrs: FxMap<u32, (Option<Addr>, Option<Addr>)>,
    /// Ready descriptors of multiplexer ops: (op index, fd), by op index.
    pub ready: Vec<(u32, i32)>,
    /// Injected faults: (TSC, rule, function, fd, spec).
    pub injections: Vec<(u64, u32, u16, i32, String)>,
    /// Thread names.
    pub threads: Vec<(u32, String)>,
    /// Entries decoded.
    pub entries: u64,
}

impl ProcOps {
    /// Wall-clock ns of a TSC value.
    #[inline]
    pub fn ns(&self, tsc: u64) -> i64 {
        self.calib.tsc_to_unix_ns(tsc) as i64
    }

    /// `host:pid`.
    pub fn name(&self) -> String {
        format!("{}:{}", self.host, self.pid)
    }

    /// How the process is named in the views: as it was started, with its listening and
    /// connected ports ([`crate::procname`]), from its ops.
    pub fn label(&self) -> crate::procname::ProcLabel {
        use crate::procname::{inet_port, main_comm, started_name, ProcLabel};
        let comm = main_comm(self.pid, &self.threads);
        let mut bound = FxMap::default();
        let mut listened = std::collections::BTreeSet::new();
        let mut l = ProcLabel {
            name: started_name(self.argv0.as_deref(), &self.exe, comm),
            ..Default::default()
        };
        for (i, op) in self.ops.iter().enumerate() {
            let (local, peer) = self.addrs.get(&(i as u32)).copied().unwrap_or_default();
            match (op.kind, op.func) {
                (OpKind::Bind, LibFn::Bind) if op.ret >= 0 => {
                    if let Some(p) = inet_port(local) {
                        bound.insert(op.fd, p);
                    }
                }
                (OpKind::Bind, LibFn::Listen) if op.ret >= 0 => {
                    listened.insert(op.fd);
                }
                (OpKind::Accept, _) if op.ret >= 0 => l.listens.extend(inet_port(local)),
                (OpKind::Connect, _) => l.connects.extend(inet_port(peer)),
                _ => {}
            }
        }
        for (fd, p) in bound {
            if listened.contains(&fd) {
                l.listens.insert(p);
            }
        }
        l.connects = l.connects.difference(&l.listens).copied().collect();
        l
    }
}

/// Per-thread collector.
struct Collector<'a> {
    tid: u32,
    ops: &'a mut Vec<Op>,
    addrs: &'a mut FxMap<u32, (Option<Addr>, Option<Addr>)>,
    /// Multiplexer ready sets, raw ids (resolved through epoll_ctl later): (op index, id, epoll?).
    ready: &'a mut Vec<(u32, u32, bool)>,
    /// epoll_ctl registrations: (TSC, epfd, fd, data).
    epoll: &'a mut Vec<(u64, i32, i32, u32)>,
    meta: &'a mut Vec<(u64, Meta)>,
    /// The last entry not yet matched by its exit: (func, TSC, fd, flags).
    pending: Option<(LibFn, u64, Option<i32>, Option<u32>)>,
}

fn kind_of(func: LibFn, flags: u32) -> OpKind {
    use LibFn::*;
    match func {
        f if f.is_send() => OpKind::Send,
        f if f.is_receive() => {
            if flags & MSG_PEEK != 0 && !matches!(f, Read | Readv) {
                OpKind::Peek
            } else {
                OpKind::Recv
            }
        }
        Connect => OpKind::Connect,
        Accept | Accept4 => OpKind::Accept,
        Socket => OpKind::Socket,
        Socketpair => OpKind::Pair,
        Bind | Listen => OpKind::Bind,
        Close => OpKind::Close,
        Shutdown => OpKind::Shutdown,
        Dup | Dup2 | Dup3 => OpKind::Dup,
        Fcntl if matches!(flags, 0 | 1030) => OpKind::Dup,
        f if f.is_multiplexer() => OpKind::Mux,
        Fork | Vfork => OpKind::Fork,
        _ => OpKind::Other,
    }
}

impl Collector<'_> {
    #[inline(always)]
    fn call(&mut self, tsc: u64, exit: bool, func: LibFn, o: &CallOpts) {
        if !exit {
            if let Some((pf, pt, pfd, pfl)) = self.pending.take() {
                // An entry whose exit never came: the call did not return (exit, exec).
                self.push_op(pf, pt, pt, pfd, pfl, None, o, true);
            }
            self.pending = Some((func, tsc, o.fd, o.flags));
            return;
        }
        let (start, efd, efl) = match self.pending.take() {
            Some((pf, pt, pfd, pfl)) if pf == func => (pt, pfd, pfl),
            Some((pf, pt, pfd, pfl)) => {
                self.push_op(pf, pt, pt, pfd, pfl, None, o, true);
                (tsc, None, None)
            }
            None => (tsc, None, None),
        };
        self.push_op(func, start, tsc, efd, efl, o.ret, o, false);
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn push_op(
        &mut self,
        func: LibFn,
        start: u64,
        end: u64,
        efd: Option<i32>,
        efl: Option<u32>,
        ret: Option<i64>,
        o: &CallOpts,
        unfinished: bool,
    ) {
        let (fd, flags, errno, injected, fd2) = if unfinished {
            (efd, efl, None, false, None)
        } else {
            (
                o.fd.or(efd),
                efl.or(o.flags),
                o.errno,
                o.inject.is_some(),
                o.fd2,
            )
        };
        let flags = flags.unwrap_or(0);
        let kind = kind_of(func, flags);
        let ret = ret.unwrap_or(NO_RET);
        let aux = match kind {
            OpKind::Pair => fd2.map_or(u64::MAX, |f| f as u32 as u64),
            OpKind::Dup => fd2.map_or(u64::MAX, |f| f as u32 as u64),
            OpKind::Socket => flags as u64,
            _ => 0,
        };
        self.ops.push(Op {
            start,
            end,
            tid: self.tid,
            func,
            kind,
            fd: fd.unwrap_or(-1),
            ret,
            errno: errno.unwrap_or(0),
            flags,
            aux,
            injected,
            sock: NO_SOCK,
        });
    }
}

impl Visit for Collector<'_> {
    #[inline(always)]
    fn call(&mut self, _: u64, _: crate::decode::CallKind, _: u64, _: u64) {}
    #[inline(always)]
    fn ret(&mut self, _: u64, _: crate::decode::CallKind, _: u64) {}

    fn lib(&mut self, l: &mut LibEvent) {
        let tsc = l.tsc;
        if l.exit
            && matches!(
                l.func,
                LibFn::Connect
                    | LibFn::Accept
                    | LibFn::Accept4
                    | LibFn::Bind
                    | LibFn::Sendto
                    | LibFn::Sendmsg
                    | LibFn::Recvfrom
                    | LibFn::Recvmsg
            )
        {
            let idx = self.ops.len() as u32 + self.pending_unfinished(l.func) as u32;
            if l.local().is_some() || l.peer().is_some() {
                self.addrs.insert(idx, (l.local(), l.peer()));
            }
        }
        self.call(tsc, l.exit, l.func, &l.opts);
        if !l.exit && l.opts.is_socket == Some(true) && (l.local().is_some() || l.peer().is_some())
        {
            // The tracer's first sight of a descriptor it did not see made.
            self.addrs
                .insert(self.ops.len() as u32, (l.local(), l.peer()));
            self.ops.push(Op {
                start: tsc,
                end: tsc,
                tid: self.tid,
                func: l.func,
                kind: OpKind::Adopt,
                fd: l.opts.fd.unwrap_or(-1),
                ret: l.opts.arg.map_or(NO_RET, |v| v as i64),
                errno: 0,
                flags: 0,
                aux: l.opts.arg2.unwrap_or(u64::MAX),
                injected: false,
                sock: NO_SOCK,
            });
        }
    }

    fn other(&mut self, e: Event) {
        match e {
            Event::Lost { tsc, count } if count > 0 => self.ops.push(Op {
                start: tsc,
                end: tsc,
                tid: self.tid,
                func: LibFn::Close,
                kind: OpKind::Gap,
                fd: -1,
                ret: 0,
                errno: 0,
                flags: 0,
                aux: count,
                injected: false,
                sock: NO_SOCK,
            }),
            Event::Meta { tsc, meta } => match meta {
                Meta::Proc(_) | Meta::Thread(_) | Meta::Inject(_) => self.meta.push((tsc, meta)),
                _ => {}
            },
            _ => {}
        }
    }

    #[inline(always)]
    fn lib_scalars(&mut self, tsc: u64, exit: bool, _site: u64, func: LibFn, body: &[u8]) -> bool {
        if func.is_multiplexer() || func == LibFn::EpollCtl {
            let Ok(o) = LibOpts::parse(body) else {
                return false;
            };
            if exit && func.is_multiplexer() {
                let idx = self.ops.len() as u32 + self.pending_unfinished(func) as u32;
                let epoll = !matches!(
                    func,
                    LibFn::Select | LibFn::Pselect | LibFn::Poll | LibFn::Ppoll
                );
                if let Some(r) = &o.ready {
                    for it in r.items() {
                        self.ready.push((idx, it.id, epoll));
                    }
                }
            }
            if !exit && func == LibFn::EpollCtl {
                if let (Some(ep), Some(fd), Some(data)) = (o.fd, o.fd2, o.arg2) {
                    self.epoll.push((tsc, ep, fd, data as u32));
                }
            }
            let co = CallOpts::of(&o);
            self.call(tsc, exit, func, &co);
            return true;
        }
        let mut o = CallOpts::default();
        if !o.parse_into(body) {
            return false;
        }
        self.call(tsc, exit, func, &o);
        true
    }
}

impl<'a> Collector<'a> {
    fn new(
        tid: u32,
        ops: &'a mut Vec<Op>,
        addrs: &'a mut FxMap<u32, (Option<Addr>, Option<Addr>)>,
        ready: &'a mut Vec<(u32, u32, bool)>,
        epoll: &'a mut Vec<(u64, i32, i32, u32)>,
        meta: &'a mut Vec<(u64, Meta)>,
    ) -> Self {
        Collector {
            tid,
            ops,
            addrs,
            ready,
            epoll,
            meta,
            pending: None,
        }
    }

    /// The end of the thread's trace: an entry still waiting for its exit is a call that
    /// never returned.
    fn finish(&mut self) {
        if let Some((pf, pt, pfd, pfl)) = self.pending.take() {
            self.push_op(pf, pt, pt, pfd, pfl, None, &CallOpts::default(), true);
        }
    }

    /// 1 if the pending entry is of another function (it will be pushed as unfinished
    /// before the exit's op), else 0.
    #[inline]
    fn pending_unfinished(&self, func: LibFn) -> usize {
        match self.pending {
            Some((pf, ..)) if pf != func => 1,
            _ => 0,
        }
    }
}

/// Reads one process's ops (every thread, merged by TSC).
pub fn collect(p: &ProcessTrace) -> Result<ProcOps> {
    let mut out = ProcOps {
        host: p.host.clone(),
        scope: p.socket_scope(),
        pid: p.pid,
        start_ticks: p.start_ticks,
        calib: p.calib,
        ..Default::default()
    };
    let mut epoll = Vec::new();
    let mut meta = Vec::new();
    let mut runs: Vec<Vec<Op>> = Vec::with_capacity(p.threads.len());
    let mut run_addrs = Vec::new();
    let mut run_ready = Vec::new();
    for t in &p.threads {
        let mut ops = Vec::new();
        let mut addrs = FxMap::default();
        let mut ready = Vec::new();
        let mut c = Collector::new(
            t.tid, &mut ops, &mut addrs, &mut ready, &mut epoll, &mut meta,
        );
        let st = t.visit(&mut c)?;
        c.finish();
        out.entries += st.entries;
        runs.push(ops);
        run_addrs.push(addrs);
        run_ready.push(ready);
    }
    // Merge the threads' runs by (end TSC, tid) in place: each op carries its index in the
    // concatenation (in `sock`, unused until the sockets are resolved) so that the side
    // tables can be remapped; one copy of the ops is ever held.
    let mut base = Vec::with_capacity(runs.len());
    let total: usize = runs.iter().map(|r| r.len()).sum();
    out.ops.reserve_exact(total);
    for r in runs {
        base.push(out.ops.len() as u32);
        for mut o in r {
            o.sock = out.ops.len() as u32;
            out.ops.push(o);
        }
    }
    // A stable sort: each thread's run is already in order (merged, not re-sorted).
    out.ops.sort_by_key(|o| (o.end, o.tid));
    let mut newidx = vec![0u32; total];
    for (n, o) in out.ops.iter_mut().enumerate() {
        newidx[o.sock as usize] = n as u32;
        o.sock = NO_SOCK;
    }
    let remap = |ri: usize, i: u32| newidx.get((base[ri] + i) as usize).copied();
    for (ri, a) in run_addrs.into_iter().enumerate() {
        for (i, v) in a {
            if let Some(n) = remap(ri, i) {
                out.addrs.insert(n, v);
            }
        }
    }
    // Ready ids → fds (epoll data through the epoll_ctl registrations before the wait).
    epoll.sort_unstable_by_key(|e| e.0);
    for (ri, r) in run_ready.into_iter().enumerate() {
        for (i, id, is_epoll) in r {
            let Some(n) = remap(ri, i) else {
                continue;
            };
            let fd = if is_epoll {
                let op = &out.ops[n as usize];
                let epfd = op.fd;
                epoll
                    .iter()
                    .rev()
                    .find(|e| e.0 <= op.end && e.1 == epfd && e.3 == id)
                    .map_or(id as i32, |e| e.2)
            } else {
                id as i32
            };
            out.ready.push((n, fd));
        }
    }
    out.ready.sort_unstable();
    meta.sort_by_key(|m| m.0);
    for (tsc, m) in meta {
        match m {
            Meta::Proc(r) if r.pid == p.pid => {
                out.ppid = Some(r.ppid);
                if r.reason == ProcReason::Fork {
                    out.forked = true;
                }
                out.exe = String::from_utf8_lossy(&r.exe).into_owned();
                out.argv0 = r
                    .argv
                    .first()
                    .map(|a| String::from_utf8_lossy(a).into_owned());
            }
            Meta::Thread(t) => out
                .threads
                .push((t.tid, String::from_utf8_lossy(&t.name).into_owned())),
            Meta::Inject(i) => out.injections.push((
                tsc,
                i.rule,
                i.func,
                i.fd,
                String::from_utf8_lossy(&i.spec).into_owned(),
            )),
            _ => {}
        }
    }
    Ok(out)
}

/// Local and peer address of a setup op or a datagram call (see [`ProcOps::addrs`]).
pub type OpAddrs = (Option<Addr>, Option<Addr>);

/// A slice of one thread's ops, as [`stream_thread`] hands them over.
#[derive(Debug, Default)]
pub struct OpBatch {
    /// Ops in the thread's order.
    pub ops: Vec<Op>,
    /// Addresses of setup ops: (index in `ops`, addresses), by index.
    pub addrs: Vec<(u32, OpAddrs)>,
    /// Process, thread and injection records met since the last batch, by TSC.
    pub meta: Vec<(u64, Meta)>,
}

/// Decodes one thread and hands its ops to `f` in batches of about `n` (the last one
/// possibly empty, with the records seen last), keeping only `keep` ops: what a consumer
/// that holds a window of the trace, not all of it, needs ([`super::streamed`]). `f`
/// returns false to stop early.
pub fn stream_thread(
    t: &crate::decode::ThreadTrace,
    n: usize,
    keep: impl Fn(&Op) -> bool,
    mut f: impl FnMut(OpBatch) -> bool,
) -> Result<()> {
    struct Batcher<'a, K, F> {
        c: Collector<'a>,
        n: usize,
        keep: K,
        f: F,
        open: bool,
    }
    impl<K: Fn(&Op) -> bool, F: FnMut(OpBatch) -> bool> Batcher<'_, K, F> {
        /// Hands over the ops collected so far (every address key is below `ops.len()`
        /// between events).
        fn flush(&mut self, last: bool) {
            if !self.open || (!last && self.c.ops.len() < self.n) {
                return;
            }
            let mut b = OpBatch {
                ops: Vec::with_capacity(self.c.ops.len()),
                addrs: Vec::new(),
                meta: std::mem::take(self.c.meta),
            };
            for (i, o) in self.c.ops.drain(..).enumerate() {
                if (self.keep)(&o) {
                    if let Some(a) = self.c.addrs.remove(&(i as u32)) {
                        b.addrs.push((b.ops.len() as u32, a));
                    }
                    b.ops.push(o);
                }
            }
            self.c.addrs.clear();
            self.c.ready.clear();
            self.c.epoll.clear();
            self.open = (self.f)(b);
        }
    }
    impl<K: Fn(&Op) -> bool, F: FnMut(OpBatch) -> bool> Visit for Batcher<'_, K, F> {
        #[inline(always)]
        fn call(&mut self, _: u64, _: crate::decode::CallKind, _: u64, _: u64) {}
        #[inline(always)]
        fn ret(&mut self, _: u64, _: crate::decode::CallKind, _: u64) {}
        fn lib(&mut self, l: &mut LibEvent) {
            self.c.lib(l);
            self.flush(false);
        }
        fn other(&mut self, e: Event) {
            self.c.other(e);
            self.flush(false);
        }
        #[inline(always)]
        fn lib_scalars(&mut self, tsc: u64, exit: bool, site: u64, func: LibFn, b: &[u8]) -> bool {
            let ok = self.c.lib_scalars(tsc, exit, site, func, b);
            self.flush(false);
            ok
        }
    }
    let (mut ops, mut addrs, mut ready, mut epoll, mut meta) = Default::default();
    let mut b = Batcher {
        c: Collector::new(
            t.tid, &mut ops, &mut addrs, &mut ready, &mut epoll, &mut meta,
        ),
        n,
        keep,
        f: &mut f,
        open: true,
    };
    t.visit(&mut b)?;
    b.c.finish();
    b.flush(true);
    Ok(())
}
