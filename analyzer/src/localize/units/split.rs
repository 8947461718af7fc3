//! Pass 2 — the splitter: cuts every thread of a process into initializer, handler, loop
//! and finalizer units with their call trees.

use super::keys::{
    frame_key, frame_node, is_exit, is_library_frame, lib_key, raw_step, setup_stack_key, RAW_ROOT,
};
use super::memo::{memo_image, Memo, MemoVal, MEMO_EXC, MEMO_FRAME, MEMO_LIB};
use super::pairing::{for_each_paired, PairSink};
use super::scan::{is_socket_receive, scan_process};
use super::view::{ConnRow, UnitHead, UnitView};
use super::{
    program_key, Injection, LoopSpec, NameBook, NameSrc, ProcessScan, ProcessUnits, Signature,
    UnitKind, FORKED_KEY,
};
use crate::connections::{self, ConnKey};
use crate::decode::{CallKind, Event, LibEvent, ProcessTrace};
use crate::error::Result;
use crate::hash::FxMap;
use crate::symbolize::key_lib;
use crate::trees::{child_id, NodeKey, NodeKind, Outcome, TreeBuf, TreeOptions, ROOT};
use bufpool::format::Meta;
use std::collections::BTreeSet;

// ---------------------------------------------------------------- pass 2

pub(super) struct P2Frame {
    kind: CallKind,
    /// Index of the unit that was current when the frame was entered.
    unit: u32,
    raw_callee: u64,
    /// Raw path hash (computed before the loop is entered only: it serves to recognize
    /// the loop frame).
    raw_path: u64,
    key: NodeKey,
    /// `key.hash()`.
    key_hash: u64,
    abs: u64,
    rel: u64,
    /// A library frame (see [`frame_node`]).
    pub(super) lib: bool,
    /// Has a node of its own (else `rel` is its parent's).
    node: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Before,
    In,
    After,
}

/// What the splitters of a process's threads share: names, the signature, the connections
/// seen, and the stable keys already computed.
pub(super) struct ProcCtx {
    names: NameBook,
    signature: BTreeSet<u64>,
    /// Connections, distinct by value; 0 is "none".
    conns: Vec<ConnRow>,
    /// Index in `conns` of each connection state seen, by its `ConnInfo`'s address
    /// (formatting addresses for every handler unit was a tenth of the splitting time).
    conn_by_ptr: FxMap<usize, u32>,
    conn_by_value: FxMap<ConnRow, u32>,
    /// Node keys by raw parts: symbolizing a raw address or Python index (a search of the
    /// memory map, string hashes) is done once per process, and so is naming.
    memo: Memo,
    /// The signature, once final (see [`UnitView::signature`]).
    final_sig: Option<Signature>,
}

impl ProcCtx {
    fn new() -> ProcCtx {
        let none: ConnRow = (ConnKey::default(), None, None);
        let mut conn_by_value = FxMap::default();
        conn_by_value.insert(none.clone(), 0);
        ProcCtx {
            names: NameBook::default(),
            signature: BTreeSet::new(),
            conns: vec![none],
            conn_by_ptr: FxMap::default(),
            conn_by_value,
            memo: Memo::default(),
            final_sig: None,
        }
    }

    /// The process's signature: the setup calls' stack keys and the program.
    fn signature(&self, scan: &ProcessScan) -> Signature {
        let mut s = self.signature.clone();
        if !scan.exe.is_empty() {
            s.insert(program_key(&scan.exe));
        }
        if scan.forked_from.is_some() {
            s.insert(FORKED_KEY);
        }
        Signature(s.into_iter().collect())
    }

    fn conn_index(&mut self, ci: &std::sync::Arc<connections::ConnInfo>) -> u32 {
        let ptr = std::sync::Arc::as_ptr(ci) as usize;
        if let Some(&i) = self.conn_by_ptr.get(&ptr) {
            return i;
        }
        // Addresses as the other end sees them: an IPv4-mapped IPv6 address (a JVM's dual-
        // stack socket) is the IPv4 address its IPv4 peers connect to.
        let show = |a: bufpool::format::Addr| crate::messages::sockets::normalize(&a).to_display();
        let row: ConnRow = (ci.key(), ci.local.map(show), ci.peer.map(show));
        let i = match self.conn_by_value.get(&row) {
            Some(&i) => i,
            None => {
                let i = self.conns.len() as u32;
                self.conns.push(row.clone());
                self.conn_by_value.insert(row, i);
                i
            }
        };
        self.conn_by_ptr.insert(ptr, i);
        i
    }
}

pub(super) struct Splitter<'a> {
    p: &'a ProcessTrace,
    /// The process's TSC calibration, ready for conversions.
    clock: bufpool::layout::TscToUnix,
    /// The clock's rate, for durations (one multiplication per library call).
    ns_per_tick: f64,
    scan: &'a ProcessScan,
    opts: TreeOptions,
    tid: u32,
    event_loop: Option<LoopSpec>,
    frames: Vec<P2Frame>,
    phase: Phase,
    base: usize,
    /// The current unit and its tree.
    head: UnitHead,
    tree: TreeBuf,
    /// The tree of the unit being closed (kept to reuse its allocations).
    spare: TreeBuf,
    /// Nodes moving from a loop unit to the handler after it (kept for its allocation).
    moved: Vec<(u64, crate::trees::TreeNode)>,
    last_tsc: u64,
    /// Receives each unit as it is closed.
    sink: &'a mut dyn FnMut(UnitView<'_>),
    anchor: Option<usize>,
    /// A multiplexer (or, in a receive loop, a send on a socket) since the last receive:
    /// the next receive begins a new message.
    mux_since_recv: bool,
    /// TSC of the entry of the call [`PairSink::call`] gets next (0: not paired).
    entered: u64,
    ctx: &'a mut ProcCtx,
    /// Is this the process's last thread (whose initializer completes the signature)?
    last_thread: bool,
}

impl Splitter<'_> {
    fn unix(&self, tsc: u64) -> i64 {
        let v = self.clock.unix_ns(tsc);
        v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    fn new_head(&self, kind: UnitKind, tsc: u64, index: u32) -> UnitHead {
        let t = self.unix(tsc);
        UnitHead {
            kind,
            tid: self.tid,
            main_thread: self.tid == self.p.pid,
            index,
            fd: None,
            conn: 0,
            tsc_start: tsc,
            tsc_end: tsc,
            t_start_unix_ns: t,
            t_end_unix_ns: t,
            lost: 0,
            injections: Vec::new(),
            cut: false,
            cut_at_start: false,
        }
    }

    /// The node key of a function frame at `tsc` (with its hash, and whether its names were
    /// noted).
    #[inline]
    fn frame_key(&mut self, kind: CallKind, site: u64, callee: u64, tsc: u64) -> MemoVal {
        let (image, sy) = self.scan.symbols.image_at(tsc);
        let raw = (MEMO_FRAME | memo_image(image) | kind as u64, site, callee);
        match self.ctx.memo.get(raw) {
            Some(v) => v,
            None => {
                let k = frame_key(sy, kind, site, callee);
                let lib = is_library_frame(sy, &self.opts, kind, callee);
                self.ctx.memo.insert(raw, k, lib)
            }
        }
    }

    /// Notes the names of a frame's parts (once per process).
    #[cold]
    fn name_frame(&mut self, kind: CallKind, site: u64, callee: u64, key: &NodeKey, tsc: u64) {
        let (image, sy) = self.scan.symbols.image_at(tsc);
        let names = &mut self.ctx.names.names;
        names.entry(key.site).or_insert_with(|| match kind {
            CallKind::C => NameSrc::C(sy.name_c(site)),
            _ => NameSrc::Text(sy.name_py_site(site)),
        });
        names.entry(key.callee).or_insert_with(|| match kind {
            CallKind::C => NameSrc::C(sy.name_c(callee)),
            _ => NameSrc::Text(sy.name_py(callee)),
        });
        self.ctx
            .memo
            .set_named((MEMO_FRAME | memo_image(image) | kind as u64, site, callee));
    }

    /// Closes the current unit at `tsc` and opens a new one.
    fn start(&mut self, kind: UnitKind, tsc: u64, fd: Option<i32>) {
        let index = self.head.index + 1;
        let next = self.new_head(kind, tsc, index);
        let mut old = std::mem::replace(&mut self.head, next);
        std::mem::swap(&mut self.tree, &mut self.spare);
        // A handler takes from the loop unit before it the calls that led to its first
        // receive: the frames under the loop frame entered during that loop unit (e.g.
        // `handle_lhs_input`, entered after `select`), with everything they called. They
        // belong to the handling of this message, not to the loop's own work.
        let mut moved = std::mem::take(&mut self.moved);
        moved.clear();
        if kind == UnitKind::Handler && old.kind == UnitKind::Loop {
            let base = self.event_loop.map_or(0, |l| l.depth);
            if let Some(f) = self
                .frames
                .iter()
                .skip(base)
                .find(|f| f.unit == old.index && f.node)
            {
                self.spare.take_subtree_into(f.rel, &mut moved);
            }
            // And the code-level injections made since those frames were entered (a Python
            // function made to raise in them): they go with the calls they disturbed. (A
            // libc injection stays with the unit of its call.)
            if let (Some(&(_, n)), false) = (moved.first(), old.injections.is_empty()) {
                let since = self.unix(n.first_tsc);
                let py = bufpool::inject::record_func_name(bufpool::inject::PY_FUNC_ID);
                let (went, stay) = std::mem::take(&mut old.injections)
                    .into_iter()
                    .partition(|i| i.func == py && i.unix_ns >= since);
                old.injections = stay;
                self.head.injections = went;
            }
        }
        self.close_spare(old, tsc);
        for &(id, n) in &moved {
            self.tree.insert(id, n);
        }
        self.moved = moved;
        let base = match kind {
            UnitKind::Initializer | UnitKind::Finalizer => 0,
            _ => self.event_loop.map_or(0, |l| l.depth),
        };
        if base != self.base {
            self.base = base;
            let mut rel = ROOT;
            for f in self.frames.iter_mut().skip(base) {
                if f.node {
                    rel = child_id(rel, f.key_hash);
                }
                f.rel = rel;
            }
        }
        let mut parent = ROOT;
        for f in self.frames.iter().skip(self.base).filter(|f| f.node) {
            parent = self.tree.add_new_h(parent, f.key, f.key_hash, tsc).0;
        }
        self.anchor = None;
        if kind == UnitKind::Handler {
            if let Some(fd) = fd {
                self.head.fd = Some(fd);
                if let Some(ci) = self.scan.fd_at(fd, tsc) {
                    self.head.conn = self.ctx.conn_index(ci);
                }
            }
            if self.frames.len() > self.base
                && matches!(self.frames[self.base].kind, CallKind::C | CallKind::Py)
            {
                self.anchor = Some(self.base);
            }
        }
        self.mux_since_recv = false;
    }

    /// Hands the unit `head`, whose tree is in `spare`, to the sink; empties `spare`.
    fn close_spare(&mut self, mut head: UnitHead, tsc: u64) {
        head.tsc_end = tsc.max(head.tsc_start);
        head.t_end_unix_ns = self.unix(head.tsc_end);
        let keep = !self.spare.is_empty()
            || !head.injections.is_empty()
            || matches!(head.kind, UnitKind::Initializer | UnitKind::Handler);
        if head.kind == UnitKind::Initializer && self.last_thread && self.ctx.final_sig.is_none() {
            self.ctx.final_sig = Some(self.ctx.signature(self.scan));
        }
        if keep {
            (self.sink)(UnitView {
                host: &self.p.host,
                pid: self.p.pid,
                head: &head,
                tree: &self.spare,
                conns: &self.ctx.conns,
                signature: self.ctx.final_sig.as_ref(),
            });
        }
        self.spare.clear();
    }

    fn top_rel(&self) -> u64 {
        if self.frames.len() > self.base {
            self.frames.last().map_or(ROOT, |f| f.rel)
        } else {
            ROOT
        }
    }

    /// Sets the first unit's start at the thread's first event.
    #[inline]
    fn first(&mut self, tsc: u64) {
        if self.head.tsc_start == 0 && self.head.index == 0 {
            self.head.tsc_start = tsc;
            self.head.t_start_unix_ns = self.unix(tsc);
        }
    }

    fn after_pop(&mut self, tsc: u64) {
        if self.phase == Phase::In {
            if let Some(l) = self.event_loop {
                if l.depth > 0 && self.frames.len() < l.depth {
                    self.phase = Phase::After;
                    self.start(UnitKind::Finalizer, tsc, None);
                    return;
                }
            }
            if self.head.kind == UnitKind::Handler {
                if let Some(a) = self.anchor {
                    if self.frames.len() <= a {
                        self.start(UnitKind::Loop, tsc, None);
                    }
                }
            }
        }
    }

    fn anchor_active(&self) -> bool {
        self.anchor.is_some_and(|a| self.frames.len() > a)
    }

    /// Is the call's descriptor a socket (as recorded, else as the connections know it)?
    fn is_socket(&self, l: &LibEvent, tsc: u64) -> bool {
        match l.opts.is_socket {
            Some(b) => b,
            None => l
                .opts
                .fd
                .is_some_and(|fd| self.scan.fd_at(fd, tsc).is_some()),
        }
    }

    fn on_injection(&mut self, tsc: u64, r: &bufpool::format::InjectRecord) {
        let inj = Injection {
            unix_ns: self.unix(tsc),
            func: bufpool::inject::record_func_name(r.func),
            fd: r.fd,
            forced_ret: r.forced_ret,
            forced_errno: r.forced_errno,
            spec: String::from_utf8_lossy(&r.spec).into_owned(),
        };
        // The call's own `inject` option may already have noted it (as "rule N"): the
        // record, which has the rule's text, replaces that note.
        let note = format!("rule {}", r.rule);
        let injections = &mut self.head.injections;
        match injections
            .iter_mut()
            .find(|i| i.spec == note && i.func == inj.func && i.fd == inj.fd)
        {
            Some(i) => *i = inj,
            None => injections.push(inj),
        }
    }
}

impl PairSink for Splitter<'_> {
    #[inline]
    fn entered_at(&mut self, tsc: u64) {
        self.entered = tsc;
    }

    fn event(&mut self, e: &Event) {
        let tsc = e.tsc();
        self.first(tsc);
        self.last_tsc = self.last_tsc.max(tsc);
        match e {
            Event::Call {
                kind, site, callee, ..
            } => {
                let m = self.frame_key(*kind, *site, *callee, tsc);
                let (abs_parent, raw_parent, rel_parent) = match self.frames.last() {
                    Some(f) => (f.abs, f.raw_path, self.top_rel()),
                    None => (ROOT, RAW_ROOT, ROOT),
                };
                let lib = m.lib;
                let node = frame_node(lib, self.frames.last());
                let in_unit = self.frames.len() >= self.base;
                let (rel, new) = if !node {
                    (rel_parent, false)
                } else if in_unit {
                    self.tree.add_new_h(rel_parent, m.key, m.hash, tsc)
                } else {
                    (child_id(rel_parent, m.hash), false)
                };
                if new && !m.named {
                    self.name_frame(*kind, *site, *callee, &m.key, tsc);
                }
                let raw_path = if self.phase == Phase::Before {
                    raw_step(raw_parent, *kind, *site, *callee)
                } else {
                    0
                };
                self.frames.push(P2Frame {
                    kind: *kind,
                    unit: self.head.index,
                    raw_callee: *callee,
                    raw_path,
                    key: m.key,
                    key_hash: m.hash,
                    abs: child_id(abs_parent, m.hash),
                    rel,
                    lib,
                    node,
                });
            }
            Event::Return { kind, callee, .. } => {
                if let Some(i) = self
                    .frames
                    .iter()
                    .rposition(|f| f.raw_callee == *callee && f.kind == *kind)
                {
                    while self.frames.len() > i {
                        self.frames.pop();
                        self.after_pop(tsc);
                    }
                }
            }
            Event::Exception { code, exc_type, .. } => {
                let (image, sy) = self.scan.symbols.image_at(tsc);
                let raw = (MEMO_EXC | memo_image(image), *code, *exc_type);
                let m = match self.ctx.memo.get(raw) {
                    Some(m) => m,
                    None => {
                        let key = NodeKey {
                            kind: NodeKind::Exception,
                            site: sy.key_py(*code),
                            callee: sy.key_py(*exc_type),
                            outcome: Outcome::Any,
                        };
                        self.ctx.memo.insert(raw, key, false)
                    }
                };
                let key = m.key;
                let (_, new) = self.tree.add_new_h(self.top_rel(), key, m.hash, tsc);
                if new && !m.named {
                    let (n1, n2) = (sy.name_py(*code), sy.name_py(*exc_type));
                    let names = &mut self.ctx.names.names;
                    names.entry(key.site).or_insert(NameSrc::Text(n1));
                    names.entry(key.callee).or_insert(NameSrc::Text(n2));
                    self.ctx.memo.set_named(raw);
                }
            }
            Event::Lost { count, .. } => self.head.lost = self.head.lost.saturating_add(*count),
            Event::Meta {
                meta: Meta::Inject(r),
                ..
            } => self.on_injection(tsc, r),
            Event::Meta { .. } | Event::Lib(_) => {}
        }
    }

    fn call(&mut self, l: &LibEvent, outcome: Outcome) {
        let tsc = l.tsc;
        let entered = std::mem::take(&mut self.entered);
        // Multiplexers wait for whatever comes next: their durations are never learned.
        let dur_ns = if entered != 0 && entered <= tsc && l.exit && !l.func.is_multiplexer() {
            ((tsc - entered) as f64 * self.ns_per_tick) as u64
        } else {
            0
        };
        self.first(tsc);
        self.last_tsc = self.last_tsc.max(tsc);
        let by_receive = self.event_loop.is_some_and(|lp| lp.by_receive);
        let receive = is_socket_receive(l, |fd| self.scan.fd_at(fd, tsc).is_some());
        let waits = if by_receive {
            receive
        } else {
            l.func.is_multiplexer()
        };
        if self.phase == Phase::Before && waits {
            if let Some(lp) = self.event_loop {
                let on_path = self.frames.len() >= lp.depth
                    && (lp.depth == 0 || self.frames[lp.depth - 1].raw_path == lp.path);
                if on_path {
                    // The initializer runs on through the loop's first iteration up to
                    // the first receive: a first "loop" unit would always be a truncated
                    // iteration (it starts at the multiplexer, after what precedes it in
                    // later iterations) and rank as an anomaly in every run.
                    self.phase = Phase::In;
                }
            }
        }
        let mut dur_ns = dur_ns;
        if self.phase == Phase::In {
            if is_exit(l.func) {
                self.phase = Phase::After;
                self.start(UnitKind::Finalizer, tsc, None);
            } else if l.func.is_multiplexer() {
                if self.head.kind == UnitKind::Handler && !self.anchor_active() {
                    self.start(UnitKind::Loop, tsc, None);
                }
                self.mux_since_recv = true;
            } else if receive {
                let fd = l.opts.fd;
                let same = self.head.kind == UnitKind::Handler
                    && self.head.fd == fd
                    && !self.mux_since_recv;
                if !same {
                    self.start(UnitKind::Handler, tsc, fd);
                    // In a receive loop the receive that begins a handler is the loop's
                    // wait for the next message: like a multiplexer's, its duration is
                    // idle time, never learned.
                    if by_receive {
                        dur_ns = 0;
                    }
                }
                self.mux_since_recv = false;
            } else if by_receive && l.exit && l.func.is_send() && self.is_socket(l, tsc) {
                // A receive loop has no multiplexer between messages: its handler's reply
                // (a send on a socket) ends a message, so the next receive begins another.
                self.mux_since_recv = true;
            }
        }
        let (image, sy) = self.scan.symbols.image_at(tsc);
        if self.head.kind == UnitKind::Initializer && connections::is_setup(l.func) {
            let top_abs = self.frames.last().map_or(ROOT, |f| f.abs);
            self.ctx.signature.insert(setup_stack_key(sy, top_abs, l));
        }
        let o = if self.opts.outcome_aware {
            outcome
        } else {
            Outcome::Any
        };
        let raw = (
            MEMO_LIB | memo_image(image),
            l.site,
            (key_lib(l.func) << 32) | o.code() as u32 as u64,
        );
        let m = match self.ctx.memo.get(raw) {
            Some(m) => m,
            None => {
                let k = lib_key(sy, l, o);
                self.ctx.memo.insert(raw, k, false)
            }
        };
        let key = m.key;
        // A send on a socket that moved data: the size class of what the program asked to
        // send (a short transfer moved what the peer's window let through; what was asked
        // is the program's choice).
        let size = match l.opts.ret {
            Some(r) if r > 0 && l.exit && l.func.is_send() && self.is_socket(l, tsc) => {
                crate::trees::size_class(l.opts.len.filter(|&n| n > 0).unwrap_or(r as u64))
            }
            _ => 0,
        };
        let (_, new) = self
            .tree
            .add_call(self.top_rel(), key, m.hash, tsc, dur_ns, size);
        if new && !m.named {
            let site = sy.name_c(l.site);
            let names = &mut self.ctx.names.names;
            names.entry(key.site).or_insert(NameSrc::C(site));
            names
                .entry(key.callee)
                .or_insert_with(|| NameSrc::Text(l.func.name().to_string()));
            self.ctx.memo.set_named(raw);
        }
        if let Some(rule) = l.opts.inject {
            // Covered by a Meta::Inject record when the injector writes one; note it anyway.
            if self.head.injections.is_empty() {
                let inj = Injection {
                    unix_ns: self.unix(tsc),
                    func: l.func.name().to_string(),
                    fd: l.opts.fd.unwrap_or(-1),
                    forced_ret: l.opts.ret.unwrap_or(0),
                    forced_errno: l.opts.errno.unwrap_or(0),
                    spec: format!("rule {rule}"),
                };
                self.head.injections.push(inj);
            }
        }
    }
}

/// Nanoseconds per TSC tick of a clock (0 when it does not advance: no durations).
fn ns_per_tick(c: &bufpool::layout::TscToUnix) -> f64 {
    const SPAN: u64 = 1 << 40;
    let d = c.unix_ns(SPAN) - c.unix_ns(0);
    (d as f64 / SPAN as f64).max(0.0)
}

/// Pass 2: cuts every thread of a process into units with their call trees.
pub fn split_process(
    p: &ProcessTrace,
    scan: &ProcessScan,
    opts: &TreeOptions,
) -> Result<ProcessUnits> {
    let mut units = Vec::new();
    let mut pu = split_process_each(p, scan, opts, |u| units.push(u.to_unit()))?;
    pu.units = units;
    Ok(pu)
}

/// Like [`split_process`], lending each unit to `on_unit` as soon as it is closed (by thread,
/// then time) instead of collecting them: the returned [`ProcessUnits`] has no units.
pub fn split_process_each(
    p: &ProcessTrace,
    scan: &ProcessScan,
    opts: &TreeOptions,
    mut on_unit: impl FnMut(UnitView<'_>),
) -> Result<ProcessUnits> {
    let mut ctx = ProcCtx::new();
    let n_threads = p.threads.len();
    for (i, (t, ts)) in p.threads.iter().zip(&scan.threads).enumerate() {
        let mut s = Splitter {
            p,
            clock: p.calib.converter(),
            ns_per_tick: ns_per_tick(&p.calib.converter()),
            scan,
            opts: *opts,
            tid: t.tid,
            event_loop: ts.event_loop,
            frames: Vec::new(),
            phase: Phase::Before,
            base: 0,
            head: UnitHead {
                kind: UnitKind::Initializer,
                tid: t.tid,
                main_thread: false,
                index: 0,
                fd: None,
                conn: 0,
                tsc_start: 0,
                tsc_end: 0,
                t_start_unix_ns: 0,
                t_end_unix_ns: 0,
                lost: 0,
                injections: Vec::new(),
                cut: false,
                cut_at_start: false,
            },
            tree: TreeBuf::default(),
            spare: TreeBuf::default(),
            moved: Vec::new(),
            last_tsc: 0,
            sink: &mut on_unit,
            anchor: None,
            mux_since_recv: false,
            entered: 0,
            ctx: &mut ctx,
            last_thread: i + 1 == n_threads,
        };
        s.head = s.new_head(UnitKind::Initializer, 0, 0);
        // A flight recorder rotated the thread's beginning away: its first unit starts at
        // the window, not where it began.
        s.head.cut_at_start = t.begins_mid_run();
        for_each_paired(t, &mut s)?;
        let end = s.last_tsc;
        let placeholder = s.new_head(UnitKind::Loop, end, 0);
        let mut last = std::mem::replace(&mut s.head, placeholder);
        // Still in the loop when the trace ended: it did not end, it was cut.
        last.cut = s.phase == Phase::In;
        std::mem::swap(&mut s.tree, &mut s.spare);
        s.close_spare(last, end);
    }
    let signature = ctx.signature(scan);
    Ok(ProcessUnits {
        host: p.host.clone(),
        pid: p.pid,
        start_ticks: p.start_ticks,
        exe: scan.exe.clone(),
        command: scan.command.clone(),
        signature,
        units: Vec::new(),
        names: ctx.names,
        conns: ctx.conns,
        stats: scan.stats,
    })
}

/// Both passes.
pub fn process_units(p: &ProcessTrace, opts: &TreeOptions) -> Result<ProcessUnits> {
    let scan = scan_process(p)?;
    split_process(p, &scan, opts)
}
