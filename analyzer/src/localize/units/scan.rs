//! Pass 1 — the event-loop scan: symbols, descriptor history and each thread's event loop,
//! decoding only what it needs.

use super::keys::{is_exit, raw_step, RAW_ROOT};
#[cfg(test)]
use super::pairing::for_each_paired;
use super::pairing::{merge_enter, PairSink};
use super::{DeferredLoop, LoopSpec, ProcessScan, ThreadScan};
use crate::connections::{self, FdTable, SetupCall};
use crate::decode::{CallKind, DecodeStats, Event, LibEvent, ProcessTrace, ThreadTrace};
use crate::error::Result;
use crate::hash::{FxSet, IdMap};
use crate::symbolize::ProcessSymbols;
use crate::trees::Outcome;
use bufpool::format::{quick_visit, LibFn, Meta, ProcReason, QuickVisit, ScalarOpts};

pub(super) struct P1Frame {
    kind: CallKind,
    site: u64,
    callee: u64,
    /// Raw path hash, computed when first needed ([`ThreadScanner::path_of`]): only frames
    /// that held loop-like calls need one, so most never have it.
    path: Option<u64>,
    waits: Waits,
}

/// The waits and receives an activation of a frame (or the thread) made.
#[derive(Clone, Copy, Default)]
pub(super) struct Waits {
    /// Multiplexer calls.
    mux: u64,
    /// Possible socket receives and accepts (a read of a descriptor of unknown kind
    /// counts: a multiplexer loop needs multiplexer calls too).
    recv: u64,
    /// Receives and accepts surely on a socket (recorded so, a `recv*` call, or a socket
    /// the thread made): what a receive loop, which has no multiplexer, is judged by.
    sure: u64,
}

impl Waits {
    fn add(&mut self, o: Waits) {
        self.mux += o.mux;
        self.recv += o.recv;
        self.sure += o.sure;
    }
}

#[derive(Clone, Debug)]
pub(super) struct RawSetup {
    pub(super) call: SetupCall,
    pub(super) frames: Vec<(CallKind, u64, u64)>,
    pub(super) ev: LibEvent,
}

#[derive(Default)]
pub(super) struct Candidates {
    by_path: IdMap<LoopSpec>,
    /// Receive-loop candidates (see [`LoopSpec::by_receive`]): used only when no frame
    /// of the thread is a multiplexer loop candidate.
    by_recv: IdMap<LoopSpec>,
    /// Receive-loop candidates by possible receives (reads of descriptors the thread did
    /// not make): judged once the process's descriptor history is known
    /// ([`DeferredLoop`]).
    by_maybe: IdMap<LoopSpec>,
}

impl Candidates {
    /// Do these counts make a frame a candidate (of any kind)?
    #[inline]
    fn counts(w: Waits) -> bool {
        Candidates::mux_loop(w) || w.recv >= 2
    }

    #[inline]
    fn mux_loop(w: Waits) -> bool {
        w.mux >= 2 && w.recv >= 1
    }

    fn consider(&mut self, path: u64, depth: usize, w: Waits) {
        let (map, waits, by_receive) = if Candidates::mux_loop(w) {
            (&mut self.by_path, w.mux, false)
        } else if w.sure >= 2 {
            (&mut self.by_recv, w.sure, true)
        } else if w.recv >= 2 {
            (&mut self.by_maybe, w.recv, true)
        } else {
            return;
        };
        let c = map.entry(path).or_insert(LoopSpec {
            depth,
            path,
            mux_calls: 0,
            busiest: 0,
            by_receive,
        });
        c.mux_calls += waits;
        c.busiest = c.busiest.max(waits);
    }

    /// The loop: among the frames whose busiest activation holds at least half as many
    /// multiplexer calls as the busiest activation of any frame, the deepest.
    ///
    /// Activations, not totals: a function called once per message that waits before each
    /// of its two receives (CPython's `sock.recv` on a socket with a timeout polls first)
    /// holds, summed over its thousand calls, as many multiplexer calls as the loop that
    /// calls it — but two per activation, where the loop holds them all in one. The splitter
    /// ends the loop at its frame's first return, so only a frame whose single activation
    /// holds the waits can be the loop.
    ///
    /// A thread with no multiplexer loop that answers more than it asks ([`FirstMoves`])
    /// gets its receive loop, chosen alike among the frames by the receives of their
    /// busiest activation.
    fn choose(&self, answers: bool) -> Option<LoopSpec> {
        let cands = match (self.by_path.is_empty(), answers) {
            (false, _) => &self.by_path,
            (true, true) => &self.by_recv,
            (true, false) => return None,
        };
        Candidates::deepest_busy(cands)
    }

    /// The thread's receive loop if its possible receives turn out to be on sockets:
    /// chosen among those candidates alike.
    fn deferred(&self) -> Option<LoopSpec> {
        if !self.by_path.is_empty() {
            return None;
        }
        Candidates::deepest_busy(&self.by_maybe)
    }

    fn deepest_busy(cands: &IdMap<LoopSpec>) -> Option<LoopSpec> {
        let max = cands.values().map(|c| c.busiest).max()?;
        cands
            .values()
            .filter(|c| c.busiest * 2 >= max)
            .max_by_key(|c| (c.depth, c.busiest, std::cmp::Reverse(c.path)))
            .copied()
    }
}

pub(super) fn is_socket_receive(l: &LibEvent, known: impl Fn(i32) -> bool) -> bool {
    is_socket_receive_parts(l.func, l.opts.is_socket, l.opts.fd, known)
}

#[inline]
pub(super) fn is_socket_receive_parts(
    func: LibFn,
    is_socket: Option<bool>,
    fd: Option<i32>,
    known: impl Fn(i32) -> bool,
) -> bool {
    use LibFn::*;
    if func.is_accept() {
        return true;
    }
    if !func.is_receive() {
        return false;
    }
    match is_socket {
        Some(b) => b,
        None => matches!(func, Recv | Recvfrom | Recvmsg | Recvmmsg) || fd.is_some_and(known),
    }
}

/// Which side opened the conversation on each of a thread's descriptors: its first move on
/// a socket was a receive (or an `accept`: the thread answers) or a send (it asks).
///
/// A thread that answers more conversations than it opens — a UDP receiver, a thread per
/// connection, an accept loop — and waits in no multiplexer has a receive loop; a client
/// blocked in `recv` for the reply to its own request does not: its receive waits for
/// that reply, not for work.
#[derive(Default)]
pub(super) struct FirstMoves {
    seen: FxSet<i32>,
    answered: u64,
    asked: u64,
    /// First moves on descriptors of unknown kind (made by another thread: a connection
    /// the acceptor thread handed over), `(fd, tsc, receive)`, judged with the process's
    /// descriptor history ([`DeferredLoop`]).
    others: Vec<(i32, u64, bool)>,
}

impl FirstMoves {
    #[inline]
    fn note_other(&mut self, fd: Option<i32>, tsc: u64, receive: bool) {
        if let Some(fd) = fd {
            if self.seen.insert(fd) {
                self.others.push((fd, tsc, receive));
            }
        }
    }

    #[inline]
    fn note(&mut self, fd: Option<i32>, receive: bool) {
        if let Some(fd) = fd {
            if self.seen.insert(fd) {
                if receive {
                    self.answered += 1;
                } else {
                    self.asked += 1;
                }
            }
        }
    }

    /// Does the thread answer at least as many conversations as it opens (and some)?
    pub(super) fn answers(&self) -> bool {
        self.answered > 0 && self.answered >= self.asked
    }
}

/// Is this call a send on a socket (as recorded; else by the function, or by what the
/// thread opened)?
#[inline]
fn is_socket_send(
    func: LibFn,
    is_socket: Option<bool>,
    fd: Option<i32>,
    known: impl Fn(i32) -> bool,
) -> bool {
    use LibFn::*;
    func.is_send()
        && match is_socket {
            Some(b) => b,
            None => matches!(func, Send | Sendto | Sendmsg | Sendmmsg) || fd.is_some_and(known),
        }
}

/// Pass 1 over one thread: its frames (with the multiplexer and receive calls each
/// activation contained), the loop candidates, and what the process-wide scan collects.
pub(super) struct ThreadScanner<'a> {
    tid: u32,
    frames: Vec<P1Frame>,
    /// Multiplexer and receive calls made outside any frame.
    root: Waits,
    cands: Candidates,
    sockets: FxSet<i32>,
    moves: FirstMoves,
    raw_setups: &'a mut Vec<RawSetup>,
    symbols: &'a mut ProcessSymbols,
    exe: &'a mut String,
    command: &'a mut Vec<String>,
    forked: &'a mut Option<(u32, u64)>,
}

impl ThreadScanner<'_> {
    /// The raw path hash of frame `i`, computed (and kept) with those of its ancestors
    /// that have none yet.
    fn path_of(&mut self, i: usize) -> u64 {
        let mut j = i + 1;
        let mut path = RAW_ROOT;
        while j > 0 {
            if let Some(p) = self.frames[j - 1].path {
                path = p;
                break;
            }
            j -= 1;
        }
        for f in &mut self.frames[j..=i] {
            path = raw_step(path, f.kind, f.site, f.callee);
            f.path = Some(path);
        }
        path
    }

    fn pop(&mut self) {
        let Some(f) = self.frames.last() else {
            return;
        };
        // A frame is a loop candidate only with these counts: its path is needed then.
        let path = if Candidates::counts(f.waits) {
            self.path_of(self.frames.len() - 1)
        } else {
            0
        };
        if let Some(f) = self.frames.pop() {
            self.cands.consider(path, self.frames.len() + 1, f.waits);
            match self.frames.last_mut() {
                Some(p) => p.waits.add(f.waits),
                None => self.root.add(f.waits),
            }
        }
    }

    #[inline]
    fn push_frame(&mut self, kind: CallKind, site: u64, callee: u64) {
        self.frames.push(P1Frame {
            kind,
            site,
            callee,
            path: None,
            waits: Waits::default(),
        });
    }

    /// A return of `callee`: pops frames down to its activation (none if it has none).
    #[inline]
    fn pop_frames(&mut self, kind: CallKind, callee: u64) {
        if let Some(i) = self
            .frames
            .iter()
            .rposition(|f| f.callee == callee && f.kind == kind)
        {
            while self.frames.len() > i {
                self.pop();
            }
        }
    }

    /// The thread's event loop, once every event was seen (or the receive loop it has if
    /// its possible receives are on sockets), and its number of socket receives and
    /// accepts.
    fn finish(mut self) -> (Option<LoopSpec>, Option<DeferredLoop>, u64) {
        while !self.frames.is_empty() {
            self.pop();
        }
        self.cands.consider(RAW_ROOT, 0, self.root);
        let chosen = self.cands.choose(self.moves.answers());
        let deferred = match (chosen, self.cands.deferred()) {
            (None, Some(spec)) if !self.moves.others.is_empty() => Some(DeferredLoop {
                spec,
                answered: self.moves.answered,
                asked: self.moves.asked,
                others: std::mem::take(&mut self.moves.others),
            }),
            _ => None,
        };
        (chosen, deferred, self.root.recv)
    }
}

impl PairSink for ThreadScanner<'_> {
    /// Pass 1 looks at multiplexers (none of their options), receives and accepts (the
    /// descriptor and whether it is a socket), `socket` (the descriptor it returns) and
    /// `close`; descriptor-creating calls always have their options.
    #[inline]
    fn wants_opts(&self, func: LibFn) -> bool {
        func.is_receive() || func.is_accept() || matches!(func, LibFn::Socket | LibFn::Close)
    }

    fn event(&mut self, e: &Event) {
        match e {
            Event::Call {
                kind, site, callee, ..
            } => self.push_frame(*kind, *site, *callee),
            Event::Return { kind, callee, .. } => self.pop_frames(*kind, *callee),
            Event::Meta { meta, .. } => {
                self.symbols.add_at(meta, e.tsc());
                if let Meta::Proc(pr) = meta {
                    if pr.reason != ProcReason::Fork || self.exe.is_empty() {
                        *self.exe = String::from_utf8_lossy(&pr.exe).into_owned();
                        *self.command = pr
                            .argv
                            .iter()
                            .skip(1)
                            .map(|a| String::from_utf8_lossy(a).into_owned())
                            .collect();
                    }
                    *self.forked = match pr.reason {
                        ProcReason::Fork => Some((pr.ppid, e.tsc())),
                        ProcReason::Exec => None,
                        ProcReason::Start => *self.forked,
                    };
                }
            }
            _ => {}
        }
    }

    fn call(&mut self, l: &LibEvent, _o: Outcome) {
        self.lean_call(l.func, l.tsc, l.opts.fd, l.opts.is_socket);
        let ret_fd = l.opts.ret.filter(|r| *r >= 0).map(|r| r as i32);
        match l.func {
            LibFn::Socket | LibFn::Accept | LibFn::Accept4 => {
                self.sockets.extend(ret_fd);
            }
            LibFn::Close => {
                if let Some(fd) = l.opts.fd {
                    self.sockets.remove(&fd);
                    self.moves.seen.remove(&fd);
                }
            }
            _ => {}
        }
        if connections::is_tracked(l.func) {
            self.raw_setups.push(RawSetup {
                call: SetupCall {
                    tsc: l.tsc,
                    tid: self.tid,
                    func: l.func,
                    fd: l.opts.fd,
                    fd2: l.opts.fd2,
                    ret: l.opts.ret,
                    flags: l.opts.flags,
                    stack: 0,
                    local: l.local(),
                    peer: l.peer(),
                },
                frames: self
                    .frames
                    .iter()
                    .map(|f| (f.kind, f.site, f.callee))
                    .collect(),
                ev: l.clone(),
            });
        }
    }
}

/// A library call's entry waiting for its exit in pass 1.
pub(super) enum Pending1 {
    None,
    /// A call pass 1 reads nothing of but its function, time, descriptor and socket flag.
    Lean {
        func: LibFn,
        tsc: u64,
        fd: Option<i32>,
        is_socket: Option<bool>,
    },
    /// A descriptor-creating call (or one whose options needed the checking decoder).
    Full(LibEvent),
}

impl ThreadScanner<'_> {
    /// What [`PairSink::call`] does with a call that creates no descriptor: count it.
    #[inline]
    fn lean_call(&mut self, func: LibFn, tsc: u64, fd: Option<i32>, is_socket: Option<bool>) {
        let sockets = &self.sockets;
        // Descriptors inherited at fork are not known yet here: a read on a descriptor of
        // unknown kind counts as a possible receive (the loop also needs multiplexer calls).
        let recv =
            is_socket_receive_parts(func, is_socket, fd, |fd| sockets.contains(&fd) || fd > 2);
        let sure = recv && is_socket_receive_parts(func, is_socket, fd, |fd| sockets.contains(&fd));
        let w = match self.frames.last_mut() {
            Some(f) => &mut f.waits,
            None => &mut self.root,
        };
        w.mux += func.is_multiplexer() as u64;
        w.recv += recv as u64;
        w.sure += sure as u64;
        if sure {
            self.moves.note(fd, true);
        } else if recv {
            self.moves.note_other(fd, tsc, true);
        } else if is_socket_send(func, is_socket, fd, |fd| sockets.contains(&fd)) {
            self.moves.note(fd, false);
        } else if is_socket_send(func, is_socket, fd, |fd| fd > 2) {
            self.moves.note_other(fd, tsc, false);
        }
    }

    #[inline(always)]
    fn flush1(&mut self, pending: &mut Pending1) {
        if !matches!(pending, Pending1::None) {
            self.flush1_some(pending);
        }
    }

    #[inline(never)]
    fn flush1_some(&mut self, pending: &mut Pending1) {
        match std::mem::replace(pending, Pending1::None) {
            Pending1::None => {}
            Pending1::Lean {
                func,
                tsc,
                fd,
                is_socket,
            } => self.lean_call(func, tsc, fd, is_socket),
            Pending1::Full(l) => self.call(&l, Outcome::Unfinished),
        }
    }

    /// A library entry or exit decoded in full.
    fn full_lib(&mut self, pending: &mut Pending1, mut l: LibEvent) {
        if !l.exit {
            self.flush1(pending);
            if is_exit(l.func) || l.func.is_exec() {
                self.call(&l, Outcome::Unfinished);
            } else {
                *pending = Pending1::Full(l);
            }
            return;
        }
        match std::mem::replace(pending, Pending1::None) {
            Pending1::None => {}
            Pending1::Full(p) if p.func == l.func => merge_enter(&p, &mut l),
            Pending1::Lean {
                func,
                fd,
                is_socket,
                ..
            } if func == l.func => {
                l.opts.fd = l.opts.fd.or(fd);
                l.opts.is_socket = l.opts.is_socket.or(is_socket);
            }
            other => {
                *pending = other;
                self.flush1(pending);
            }
        }
        self.call(&l, Outcome::Unfinished);
    }

    /// Pass 1 over one thread: the same as pairing its library calls and handing everything
    /// to [`PairSink`] (`for_each_paired`), decoding only what pass 1 reads: library calls
    /// that create no descriptor are reduced to their function and, for receives, their
    /// descriptor and socket flag.
    fn scan_thread(&mut self, t: &ThreadTrace) -> Result<DecodeStats> {
        use crate::decode::{entry_at, RawChunk};
        let mut st = DecodeStats::default();
        let mut pending = Pending1::None;
        t.raw_chunks(|c: RawChunk<'_>| {
            if c.lost_before > 0 {
                st.lost = st.lost.saturating_add(c.lost_before);
                self.flush1(&mut pending);
            }
            let bytes = c.bytes;
            st.bytes += bytes.len() as u64;
            let n = bytes.len();
            let mut p = 0usize;
            // Counted here, added to `st` at the end or at an entry that does not decode
            // (the entries before it were taken: the rest of the chunk is skipped).
            let mut entries = 0u64;
            let r = (|| {
                while p < n {
                    let size = quick_visit(
                        bytes,
                        p,
                        &mut Lean {
                            s: &mut *self,
                            pending: &mut pending,
                        },
                    );
                    if size > 0 {
                        entries += 1;
                        p += size;
                        continue;
                    }
                    let Some(e) = entry_at(&c, p)? else { break };
                    let ev = crate::decode::convert(&e)
                        .map_err(|source| crate::decode::entry_error(c.path, source))?;
                    // Metadata and Lost markers are not entries (as in the manifest).
                    if !e.kind.is_meta() && e.kind != bufpool::format::Kind::Lost {
                        entries += 1;
                    }
                    p += e.size;
                    match ev {
                        Event::Lib(l) => self.full_lib(&mut pending, l),
                        // Injection records say nothing pass 1 reads.
                        Event::Meta {
                            meta: Meta::Inject(_),
                            ..
                        } => {}
                        Event::Meta { .. } => self.event(&ev),
                        Event::Lost { count, .. } => {
                            st.lost = st.lost.saturating_add(count);
                            self.flush1(&mut pending);
                        }
                        other => {
                            self.flush1(&mut pending);
                            self.event(&other);
                        }
                    }
                }
                Ok(())
            })();
            st.entries += entries;
            r
        })?;
        self.flush1(&mut pending);
        Ok(st)
    }
}

/// Pass 1's reading of the common entries, in place ([`quick_visit`]): frames, and library
/// calls that create no descriptor reduced to their function and, for receives, their
/// descriptor and socket flag. A block the quick parser refuses goes to the checking
/// decoder.
struct Lean<'s, 'a> {
    s: &'s mut ThreadScanner<'a>,
    pending: &'s mut Pending1,
}

impl QuickVisit<'_> for Lean<'_, '_> {
    #[inline(always)]
    fn call(&mut self, kind: CallKind, _tsc: u64, site: u64, callee: u64) -> bool {
        self.s.flush1(self.pending);
        self.s.push_frame(kind, site, callee);
        true
    }

    #[inline(always)]
    fn ret(&mut self, kind: CallKind, _tsc: u64, callee: u64) -> bool {
        self.s.flush1(self.pending);
        self.s.pop_frames(kind, callee);
        true
    }

    #[inline(always)]
    fn lib(&mut self, exit: bool, tsc: u64, _site: u64, func: LibFn, body: &[u8]) -> bool {
        let (s, pending) = (&mut *self.s, &mut *self.pending);
        // Receives and sends need their descriptor and socket flag (sends for
        // [`FirstMoves`]); other calls that create no descriptor, nothing.
        let lean = if connections::is_tracked(func) {
            None
        } else if func.is_receive() || func.is_send() {
            ScalarOpts::parse(body).map(|o| (o.fd, o.is_socket))
        } else {
            Some((None, None))
        };
        let Some((fd, is_socket)) = lean else {
            return false;
        };
        if !exit {
            s.flush1(pending);
            if !(is_exit(func) || func.is_exec()) {
                *pending = Pending1::Lean {
                    func,
                    tsc,
                    fd,
                    is_socket,
                };
            }
        } else {
            // The entry's fields are read in place (moving the whole pending entry out
            // cost more than the rest).
            let entry = match &*pending {
                Pending1::Lean {
                    func: f,
                    fd: efd,
                    is_socket: es,
                    ..
                } if *f == func => Some((*efd, *es)),
                Pending1::Full(e) if e.func == func => Some((e.opts.fd, e.opts.is_socket)),
                _ => None,
            };
            let (mut fd, mut is_socket) = (fd, is_socket);
            match entry {
                Some((efd, es)) => {
                    fd = fd.or(efd);
                    is_socket = is_socket.or(es);
                    *pending = Pending1::None;
                }
                None => s.flush1(pending),
            }
            s.lean_call(func, tsc, fd, is_socket);
        }
        true
    }
}

/// Pass 1: symbols, descriptor history and event loops of one process.
pub fn scan_process(p: &ProcessTrace) -> Result<ProcessScan> {
    scan_process_with(p, |s, t| s.scan_thread(t))
}

/// Pass 1 as a reference for tests: every event decoded and paired as pass 2 sees them,
/// instead of [`scan_process`]'s own lean decoding.
#[cfg(test)]
pub(super) fn scan_process_reference(p: &ProcessTrace) -> Result<ProcessScan> {
    scan_process_with(p, |s, t| for_each_paired(t, s))
}

/// Pass 1 over every thread of `p`, each read by `scan_thread`.
fn scan_process_with(
    p: &ProcessTrace,
    mut scan_thread: impl FnMut(&mut ThreadScanner<'_>, &ThreadTrace) -> Result<DecodeStats>,
) -> Result<ProcessScan> {
    let mut symbols = ProcessSymbols::default();
    let mut exe = String::new();
    let mut command = Vec::new();
    let mut forked: Option<(u32, u64)> = None;
    let mut raw_setups = Vec::new();
    let mut threads = Vec::new();
    let mut stats = DecodeStats::default();
    for t in &p.threads {
        let mut s = ThreadScanner {
            tid: t.tid,
            frames: Vec::new(),
            root: Waits::default(),
            cands: Candidates::default(),
            sockets: FxSet::default(),
            moves: FirstMoves::default(),
            raw_setups: &mut raw_setups,
            symbols: &mut symbols,
            exe: &mut exe,
            command: &mut command,
            forked: &mut forked,
        };
        stats += scan_thread(&mut s, t)?;
        let (event_loop, deferred, receives) = s.finish();
        threads.push(ThreadScan {
            tid: t.tid,
            event_loop,
            deferred,
            receives,
        });
    }
    let mut scan = ProcessScan {
        symbols,
        threads,
        fds: FdTable::default(),
        exe,
        command,
        stats,
        forked_from: forked,
        inherited_fds: None,
        setups: raw_setups,
    };
    scan.build_fds(None);
    scan.resolve_loops();
    Ok(scan)
}

#[cfg(test)]
mod pass1_tests {
    use super::*;

    #[test]
    fn lazy_frame_paths_are_the_eager_chain() {
        let (mut setups, mut symbols, mut exe, mut command, mut forked) = (
            Vec::new(),
            ProcessSymbols::default(),
            String::new(),
            Vec::new(),
            None,
        );
        let mut s = ThreadScanner {
            tid: 1,
            frames: Vec::new(),
            root: Waits::default(),
            cands: Candidates::default(),
            sockets: FxSet::default(),
            moves: FirstMoves::default(),
            raw_setups: &mut setups,
            symbols: &mut symbols,
            exe: &mut exe,
            command: &mut command,
            forked: &mut forked,
        };
        let calls = [
            (CallKind::C, 0x10, 0x100),
            (CallKind::Py, 0x20, 7),
            (CallKind::PyBuiltin, 0x30, 3),
            (CallKind::C, 0x40, 0x400),
            (CallKind::C, 0x50, 0x500),
        ];
        let mut eager = Vec::new();
        let mut path = RAW_ROOT;
        for &(k, site, callee) in &calls {
            s.push_frame(k, site, callee);
            path = raw_step(path, k, site, callee);
            eager.push(path);
        }
        // Some computed first (a middle one, then the top), the rest from them.
        assert_eq!(s.path_of(2), eager[2]);
        assert!(s.frames[3].path.is_none());
        assert_eq!(s.path_of(4), eager[4]);
        for (i, &p) in eager.iter().enumerate() {
            assert_eq!(s.path_of(i), p, "frame {i}");
            assert_eq!(s.frames[i].path, Some(p));
        }
    }
}
