//! Units as the splitter lends them: [`UnitHead`] (a unit without its strings),
//! [`UnitView`] (head, tree and context, borrowed) and unit ids.

use super::{Injection, Signature, Unit, UnitInfo, UnitKind};
use crate::connections::ConnKey;
use crate::trees::TreeBuf;

/// Appends a number in decimal without the formatting machinery.
fn push_decimal(s: &mut String, mut v: u32) {
    let mut buf = [0u8; 10];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    s.extend(buf[i..].iter().map(|&b| b as char));
}

/// A connection as reports show it: identity, local and peer address.
pub type ConnRow = (ConnKey, Option<String>, Option<String>);

/// What selects a unit's model inside its process ([`UnitView::class_key`]): its
/// [`UnitClass`](super::UnitClass) with the connection as an index in the process's
/// connections instead of a key (cheaper to hash; equal connections may have several).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClassKey {
    /// Unit kind.
    pub kind: UnitKind,
    /// Main thread (true) or another thread of the process.
    pub main_thread: bool,
    /// For handler units, the index of the connection in [`UnitView::conns`]; 0 otherwise.
    pub conn: u32,
}

/// A unit as the splitter closes it: what a [`UnitInfo`] holds, without its strings (the id,
/// the host, the connection's addresses), which only reports need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitHead {
    /// Kind.
    pub kind: UnitKind,
    /// Thread id.
    pub tid: u32,
    /// Is this the process's main thread?
    pub main_thread: bool,
    /// Index of the unit in its thread.
    pub index: u32,
    /// Descriptor the handler received from (or accepted on).
    pub fd: Option<i32>,
    /// Index of its connection in [`UnitView::conns`] (0: none — the empty connection).
    pub conn: u32,
    /// Start, TSC.
    pub tsc_start: u64,
    /// End, TSC.
    pub tsc_end: u64,
    /// Start, wall clock (ns since the epoch).
    pub t_start_unix_ns: i64,
    /// End, wall clock.
    pub t_end_unix_ns: i64,
    /// Entries lost inside the unit.
    pub lost: u64,
    /// Faults injected inside the unit.
    pub injections: Vec<Injection>,
    /// Cut short by the end of the trace: the last unit of a thread whose trace ended while
    /// it was still in its event loop (the process was killed — a hung daemon ended by a
    /// timeout — or recording stopped). It is scored on what it did
    /// ([`crate::score::score_tree_as`]).
    pub cut: bool,
    /// Cut at the start of the trace: the first unit of a thread whose earlier records a
    /// flight recorder rotated away (`culprit record --keep`), so that its beginning is
    /// not in the trace. It is not scored ([`crate::score::Verdict::BeganBeforeWindow`]).
    pub cut_at_start: bool,
}

/// A closed unit, lent to the callback of [`split_process_each`](super::split::split_process_each) (its tree is a buffer
/// the splitter reuses for the next unit).
pub struct UnitView<'a> {
    /// Host.
    pub host: &'a str,
    /// Process id.
    pub pid: u32,
    /// The unit.
    pub head: &'a UnitHead,
    /// Its call tree.
    pub tree: &'a TreeBuf,
    /// The process's connections so far (`head.conn` indexes it).
    pub conns: &'a [ConnRow],
    /// The process's signature, once it is final: from the unit that closes the
    /// initializer of the process's last thread on (the signature is made of the setup
    /// calls of initializer units and of the program).
    pub signature: Option<&'a Signature>,
}

impl UnitView<'_> {
    /// The unit's connection (identity and addresses).
    pub fn conn(&self) -> &ConnRow {
        &self.conns[self.head.conn as usize]
    }

    /// What selects the unit's model inside a process: kind, main thread, and for handlers
    /// the index of the connection (equal connections may have several indices; see
    /// [`UnitView::class`]).
    pub fn class_key(&self) -> ClassKey {
        ClassKey {
            kind: self.head.kind,
            main_thread: self.head.main_thread,
            conn: if self.head.kind == UnitKind::Handler {
                self.head.conn
            } else {
                0
            },
        }
    }

    /// The unit's class (which model it is compared with).
    pub fn class(&self) -> super::UnitClass {
        super::UnitClass {
            kind: self.head.kind,
            main_thread: self.head.main_thread,
            conn: if self.head.kind == UnitKind::Handler {
                self.conn().0.clone()
            } else {
                ConnKey::default()
            },
        }
    }

    /// `host:pid:tid:index`.
    pub fn id(&self) -> String {
        unit_id(self.host, self.pid, self.head.tid, self.head.index)
    }

    /// The whole [`UnitInfo`].
    pub fn info(&self) -> UnitInfo {
        let h = self.head;
        let (conn, local, peer) = self.conn().clone();
        UnitInfo {
            id: self.id(),
            host: self.host.to_string(),
            pid: self.pid,
            tid: h.tid,
            main_thread: h.main_thread,
            index: h.index,
            kind: h.kind,
            fd: h.fd,
            conn,
            local,
            peer,
            tsc_start: h.tsc_start,
            tsc_end: h.tsc_end,
            t_start_unix_ns: h.t_start_unix_ns,
            t_end_unix_ns: h.t_end_unix_ns,
            lost: h.lost,
            injections: h.injections.clone(),
            cut: h.cut,
            cut_at_start: h.cut_at_start,
        }
    }

    /// An owned [`Unit`].
    pub fn to_unit(&self) -> Unit {
        Unit {
            info: self.info(),
            tree: self.tree.to_tree(),
        }
    }
}

/// The id of a unit: `host:pid:tid:index`.
pub fn unit_id(host: &str, pid: u32, tid: u32, index: u32) -> String {
    let mut id = String::with_capacity(host.len() + 24);
    id.push_str(host);
    for v in [pid, tid] {
        id.push(':');
        push_decimal(&mut id, v);
    }
    id.push(':');
    push_decimal(&mut id, index);
    id
}
