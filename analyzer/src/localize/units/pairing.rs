//! Pairing: the entry and exit of each library call joined into one event (arguments
//! from the entry, results from the exit), fault-injection records held until the call
//! they describe completes.

use super::keys::is_exit;
use crate::decode::{
    CallExtra, CallKind, CallOpts, DecodeStats, Event, LibEvent, ThreadTrace, Visit,
};
use crate::error::Result;
use crate::trees::Outcome;
use bufpool::format::{LibFn, Meta};

/// Merges the entry's arguments into the exit (fd and length are often only on the entry).
#[inline(always)]
pub(super) fn merge_enter(enter: &LibEvent, exit: &mut LibEvent) {
    merge_enter_opts(&enter.opts, &mut exit.opts);
    if let Some(ee) = &enter.extra {
        merge_extra(ee, &mut exit.extra);
    }
}

/// [`merge_enter`] on the scalar options.
#[inline(always)]
pub(super) fn merge_enter_opts(e: &CallOpts, x: &mut CallOpts) {
    x.fd = x.fd.or(e.fd);
    x.len = x.len.or(e.len);
    x.fd2 = x.fd2.or(e.fd2);
    x.flags = x.flags.or(e.flags);
    x.is_socket = x.is_socket.or(e.is_socket);
}

#[cold]
pub(super) fn merge_extra(ee: &CallExtra, x: &mut Option<Box<CallExtra>>) {
    let xx = x.get_or_insert_with(Default::default);
    if xx.stack.is_empty() {
        xx.stack = ee.stack.clone();
    }
    xx.local = xx.local.or(ee.local);
    xx.peer = xx.peer.or(ee.peer);
}

/// Receives a thread's events with its library calls paired (see [`for_each_paired`]).
pub(super) trait PairSink {
    /// An event other than a library call.
    fn event(&mut self, e: &Event);
    /// A library call: its exit with the entry's arguments merged in (or an entry that
    /// never returned), and its outcome.
    fn call(&mut self, l: &LibEvent, o: Outcome);
    /// The exit handed to the next [`PairSink::call`] was paired with an entry at TSC
    /// `tsc` (the call's duration is the exit's TSC minus this). Not called for an entry
    /// that never returned or an exit without its entry.
    #[inline]
    fn entered_at(&mut self, tsc: u64) {
        let _ = tsc;
    }
    /// Does it look at the options of calls of `func` (see [`Visit::wants_opts`])?
    #[inline]
    fn wants_opts(&self, func: LibFn) -> bool {
        let _ = func;
        true
    }
}

/// Pairs the entry and exit of each library call, holding fault-injection records until
/// the call they describe completes.
///
/// The common calls (scalar options, [`Visit::lib_scalars`]) are decoded in place: an
/// entry into `pending`, an exit into `cur` over its entry's arguments. Events are never
/// built elsewhere and copied in: a whole-struct copy of an event just built field by field
/// stalls on store forwarding.
pub(super) struct Pairer<'s, S> {
    s: &'s mut S,
    /// The entry waiting for its exit, if `has_pending`.
    pending: LibEvent,
    has_pending: bool,
    /// Where an exit decoded in place is built.
    cur: LibEvent,
    // Fault-injection records wait for the library call they describe: the injector
    // writes one before that call's entry (a skipped call: errno, eof…) or between its
    // entry and exit (short, corrupt…), and it belongs to the unit that call is part of.
    held: Vec<Event>,
}

/// A placeholder library event (the slots of [`Pairer`]).
pub(super) fn blank_lib() -> LibEvent {
    LibEvent {
        tsc: 0,
        exit: false,
        site: 0,
        func: LibFn::Socket,
        opts: CallOpts::default(),
        extra: None,
    }
}

impl<'s, S: PairSink> Pairer<'s, S> {
    fn new(s: &'s mut S) -> Self {
        Pairer {
            s,
            pending: blank_lib(),
            has_pending: false,
            cur: blank_lib(),
            held: Vec::new(),
        }
    }

    #[inline]
    fn flush(&mut self) {
        if self.has_pending {
            self.has_pending = false;
            self.s.call(&self.pending, Outcome::Unfinished);
        }
    }

    #[cold]
    fn release(&mut self) {
        for h in self.held.drain(..) {
            self.s.event(&h);
        }
    }

    fn finish(mut self) {
        self.flush();
        self.release();
    }
}

/// Takes a library event, its extra options moved out (the calls [`Visit::lib`] gets are
/// the rare ones: descriptor-creating calls and entries the checking decoder read).
#[inline(always)]
pub(super) fn take_lib(l: &mut LibEvent) -> LibEvent {
    LibEvent {
        tsc: l.tsc,
        exit: l.exit,
        site: l.site,
        func: l.func,
        opts: l.opts,
        extra: l.extra.take(),
    }
}

/// Clears the options in place.
#[inline(always)]
pub(super) fn clear_opts(o: &mut CallOpts) {
    o.fd = None;
    o.fd2 = None;
    o.len = None;
    o.ret = None;
    o.errno = None;
    o.flags = None;
    o.arg = None;
    o.arg2 = None;
    o.inject = None;
    o.is_socket = None;
}

impl<S: PairSink> Visit for Pairer<'_, S> {
    #[inline]
    fn wants_opts(&self, func: LibFn) -> bool {
        self.s.wants_opts(func)
    }

    // The events handed over own nothing: `ManuallyDrop` spares the out-of-line drop of
    // an `Event` the compiler otherwise calls after each.
    #[inline]
    fn call(&mut self, tsc: u64, kind: CallKind, site: u64, callee: u64) {
        self.flush();
        self.s.event(&std::mem::ManuallyDrop::new(Event::Call {
            tsc,
            kind,
            site,
            callee,
        }));
    }

    #[inline]
    fn ret(&mut self, tsc: u64, kind: CallKind, callee: u64) {
        self.flush();
        self.s.event(&std::mem::ManuallyDrop::new(Event::Return {
            tsc,
            kind,
            callee,
        }));
    }

    /// What [`Visit::lib`] does, with the event decoded where it is kept.
    #[inline(always)]
    fn lib_scalars(&mut self, tsc: u64, exit: bool, site: u64, func: LibFn, body: &[u8]) -> bool {
        let wants = self.s.wants_opts(func);
        if !exit {
            self.flush();
            if is_exit(func) || func.is_exec() {
                return self.lib_rare(tsc, site, func, body, wants);
            }
            let d = &mut self.pending;
            d.tsc = tsc;
            d.exit = false;
            d.site = site;
            d.func = func;
            clear_opts(&mut d.opts);
            d.extra = None;
            if wants && !d.opts.parse_into(body) {
                return false;
            }
            self.has_pending = true;
        } else {
            let paired = self.has_pending && self.pending.func == func;
            let d = &mut self.cur;
            d.tsc = tsc;
            d.exit = true;
            d.site = site;
            d.func = func;
            let o = &mut d.opts;
            // The entry's arguments, then the exit's own over them: what `merge_enter`
            // gives.
            if paired {
                let e = &self.pending.opts;
                o.fd = e.fd;
                o.fd2 = e.fd2;
                o.len = e.len;
                o.ret = None;
                o.errno = None;
                o.flags = e.flags;
                o.arg = None;
                o.arg2 = None;
                o.inject = None;
                o.is_socket = e.is_socket;
            } else {
                clear_opts(o);
            }
            d.extra = None;
            if wants && !d.opts.parse_into(body) {
                return false;
            }
            if paired {
                if let Some(ee) = &self.pending.extra {
                    merge_extra(ee, &mut self.cur.extra);
                }
            }
            if self.has_pending {
                self.has_pending = false;
                if !paired {
                    self.s.call(&self.pending, Outcome::Unfinished);
                }
            }
            let oc = Outcome::of(func, &self.cur.opts);
            if paired {
                self.s.entered_at(self.pending.tsc);
            }
            self.s.call(&self.cur, oc);
            if !self.held.is_empty() {
                self.release();
            }
        }
        true
    }

    #[inline]
    fn lib(&mut self, l: &mut LibEvent) {
        if !l.exit {
            self.flush();
            if is_exit(l.func) || l.func.is_exec() {
                self.s.call(l, Outcome::Unfinished);
            } else {
                self.pending = take_lib(l);
                self.has_pending = true;
            }
        } else {
            if self.has_pending {
                self.has_pending = false;
                if self.pending.func == l.func {
                    merge_enter(&self.pending, l);
                    self.s.entered_at(self.pending.tsc);
                } else {
                    self.s.call(&self.pending, Outcome::Unfinished);
                }
            }
            let o = Outcome::of(l.func, &l.opts);
            self.s.call(l, o);
            if !self.held.is_empty() {
                self.release();
            }
        }
    }

    fn other(&mut self, e: Event) {
        match e {
            Event::Lib(mut l) => self.lib(&mut l),
            Event::Meta {
                meta: Meta::Inject(_),
                ..
            } => self.held.push(e),
            // Other metadata (a code record, the map after dlopen) says nothing about calls:
            // it never ends a pending library call.
            meta @ Event::Meta { .. } => self.s.event(&meta),
            other => {
                self.flush();
                self.s.event(&other)
            }
        }
    }
}

impl<S: PairSink> Pairer<'_, S> {
    /// The entry of a call that never returns (`exit`, `exec`), handed over at once.
    #[cold]
    fn lib_rare(&mut self, tsc: u64, site: u64, func: LibFn, body: &[u8], wants: bool) -> bool {
        let mut opts = CallOpts::default();
        if wants && !opts.parse_into(body) {
            return false;
        }
        let l = LibEvent {
            tsc,
            exit: false,
            site,
            func,
            opts,
            extra: None,
        };
        self.s.call(&l, Outcome::Unfinished);
        true
    }
}

/// Iterates a thread's library calls, paired, with the other events in between.
pub(super) fn for_each_paired<S: PairSink>(t: &ThreadTrace, s: &mut S) -> Result<DecodeStats> {
    let mut p = Pairer::new(s);
    let st = t.visit(&mut p)?;
    p.finish();
    Ok(st)
}

#[cfg(test)]
mod pairer_tests {
    use super::*;
    use crate::decode::TraceBuilder;
    use crate::units::tests::o;
    use bufpool::format::{encode_lib, InjectRecord, Kind, LibOpts};

    /// Records what a [`Pairer`] hands over.
    #[derive(Default)]
    struct Record(Vec<String>);

    impl PairSink for Record {
        fn event(&mut self, e: &Event) {
            self.0.push(format!("{e:?}"));
        }
        fn call(&mut self, l: &LibEvent, o: Outcome) {
            self.0.push(format!("{l:?} {o:?}"));
        }
        fn entered_at(&mut self, tsc: u64) {
            self.0.push(format!("entered at {tsc}"));
        }
    }

    #[test]
    fn a_paired_call_tells_its_entry_time_and_an_unpaired_one_does_not() {
        let mut t = TraceBuilder::new("h", 7, 7);
        let fd_len = LibOpts {
            fd: Some(10),
            len: Some(8),
            ..Default::default()
        };
        let enter = t.now();
        let e = encode_lib(Kind::LibEnter, enter, 0x900, LibFn::Recv, &fd_len);
        t.raw(e.as_bytes());
        let exit = enter + 1_000_000;
        let ret = LibOpts {
            ret: Some(8),
            ..Default::default()
        };
        let e = encode_lib(Kind::LibExit, exit, 0x900, LibFn::Recv, &ret);
        t.raw(e.as_bytes());
        // An exit without its entry.
        let e = encode_lib(Kind::LibExit, exit + 5, 0x900, LibFn::Send, &ret);
        t.raw(e.as_bytes());
        let p = t.finish();
        let (fast, slow) = both(&p.threads[0]);
        assert_eq!(fast, slow);
        assert_eq!(fast.len(), 3, "{fast:?}");
        assert_eq!(fast[0], format!("entered at {enter}"));
        assert!(fast[1].contains(&format!("tsc: {exit}")), "{}", fast[1]);
        assert!(fast[2].contains("Send"), "{}", fast[2]);
    }

    /// The paired events of a thread as `for_each_paired` gives them (library calls decoded
    /// in place), and as whole events handed to the pairer one by one.
    fn both(t: &ThreadTrace) -> (Vec<String>, Vec<String>) {
        let mut fast = Record::default();
        let st = for_each_paired(t, &mut fast).unwrap();
        let mut slow = Record::default();
        let mut p = Pairer::new(&mut slow);
        let st2 = t.for_each_owned(|e| p.other(e)).unwrap();
        p.finish();
        assert_eq!(st, st2);
        (fast.0, slow.0)
    }

    #[test]
    fn pairer_decodes_in_place_like_whole_events() {
        use crate::synth::{ring, Fault, Functions, Ring};
        for functions in [Functions::C, Functions::Python, Functions::None] {
            let procs = ring(&Ring {
                processes: 2,
                iterations: 12,
                functions,
                fault: Some(Fault {
                    process: 1,
                    iteration: 5,
                }),
                seed: 3,
            });
            for p in &procs {
                for t in &p.threads {
                    let (fast, slow) = both(t);
                    assert!(fast.len() > 50);
                    assert_eq!(fast, slow, "{functions:?}");
                }
            }
        }
        // Entries and exits as the tracer writes them, calls cut by others, exits without
        // entries, options that are not all scalars, calls that never return, injections.
        let mut t = TraceBuilder::new("h", 7, 7);
        let raw = |t: &mut TraceBuilder, kind: Kind, func: LibFn, o: &LibOpts| {
            let e = encode_lib(kind, t.now(), 0x900, func, o);
            t.raw(e.as_bytes());
        };
        let fd_len = |fd: i32, len: u64| LibOpts {
            fd: Some(fd),
            len: Some(len),
            ..Default::default()
        };
        let ret = |r: i64| LibOpts {
            ret: Some(r),
            ..Default::default()
        };
        t.lib(0x100, LibFn::Socket, ret(3));
        t.lib(0x210, LibFn::Accept, o(3, 10, 0));
        t.enter(0x1000, 0x2000);
        raw(&mut t, Kind::LibEnter, LibFn::Read, &fd_len(10, 8));
        raw(&mut t, Kind::LibExit, LibFn::Read, &ret(8));
        raw(&mut t, Kind::LibEnter, LibFn::Read, &fd_len(10, 8));
        raw(&mut t, Kind::LibEnter, LibFn::Send, &fd_len(10, 2));
        raw(&mut t, Kind::LibExit, LibFn::Send, &ret(2));
        raw(&mut t, Kind::LibExit, LibFn::Read, &ret(3));
        raw(&mut t, Kind::LibExit, LibFn::Recv, &ret(0));
        raw(&mut t, Kind::LibEnter, LibFn::Recv, &fd_len(10, 8));
        t.exit(0x2000);
        raw(&mut t, Kind::LibExit, LibFn::Recv, &ret(-1));
        let exit_fd = LibOpts {
            fd: Some(11),
            ret: Some(5),
            errno: Some(4),
            is_socket: Some(true),
            ..Default::default()
        };
        raw(&mut t, Kind::LibEnter, LibFn::Recv, &fd_len(10, 8));
        raw(&mut t, Kind::LibExit, LibFn::Recv, &exit_fd);
        // A peer address: not scalars.
        let peer = LibOpts {
            fd: Some(10),
            len: Some(4),
            peer: Some(bufpool::format::Addr::new(2, 80, &[10, 0, 0, 1])),
            ..Default::default()
        };
        raw(&mut t, Kind::LibEnter, LibFn::Sendto, &peer);
        raw(&mut t, Kind::LibExit, LibFn::Sendto, &ret(4));
        raw(&mut t, Kind::LibEnter, LibFn::Recvfrom, &fd_len(10, 8));
        raw(&mut t, Kind::LibExit, LibFn::Recvfrom, &peer);
        t.meta(&Meta::Inject(InjectRecord {
            rule: 0,
            func: LibFn::Recv.id() as u16,
            fd: 10,
            original_ret: -1,
            forced_ret: 3,
            forced_errno: 0,
            spec: b"recv:short=3".to_vec(),
        }));
        raw(&mut t, Kind::LibEnter, LibFn::Recv, &fd_len(10, 8));
        raw(&mut t, Kind::LibExit, LibFn::Recv, &ret(3));
        raw(&mut t, Kind::LibEnter, LibFn::Poll, &LibOpts::default());
        t.lib_enter(0x300, LibFn::Execve, LibOpts::default());
        t.lib_enter(0x300, LibFn::Exit, fd_len(0, 0));
        raw(&mut t, Kind::LibEnter, LibFn::Read, &fd_len(10, 8));
        let p = t.finish();
        let (fast, slow) = both(&p.threads[0]);
        // 20 events, 8 of them calls paired with their entry (each told its entry time).
        assert_eq!(fast.len(), 28);
        assert_eq!(
            fast.iter().filter(|e| e.starts_with("entered at")).count(),
            8
        );
        assert_eq!(fast, slow);
    }
}

// ---------------------------------------------------------------- pass 1
