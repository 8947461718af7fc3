//! Execution units and messages: for each unit, where what it received came from (process,
//! unit) and where what it sent went; and happens-before between two units — what the
//! ranked report and the localizer use to follow a fault across processes.
//!
//! A unit is given as a [`UnitSpan`] (its id, thread and TSC interval), so this module
//! depends on nothing but the unit's public fields. An op belongs to the unit of its
//! thread whose interval holds the op's start.

use super::sockets::OpRef;
use super::Messages;
use crate::hash::FxMap;
use serde::Serialize;
use std::collections::BTreeMap;

/// Where and when a unit ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitSpan {
    /// Unit id (`host:pid:tid:index`).
    pub id: String,
    /// Host.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Start TSC.
    pub tsc_start: u64,
    /// End TSC.
    pub tsc_end: u64,
}

impl UnitSpan {
    /// From an analyzer unit.
    pub fn of(u: &crate::units::UnitInfo) -> UnitSpan {
        UnitSpan {
            id: u.id.clone(),
            host: u.host.clone(),
            pid: u.pid,
            tid: u.tid,
            tsc_start: u.tsc_start,
            tsc_end: u.tsc_end,
        }
    }
}

/// One peer of a unit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UnitPeer {
    /// `host:pid` of the other process.
    pub process: String,
    /// The other unit's id, when the op there falls in a known unit.
    pub unit: Option<String>,
    /// Bytes.
    pub bytes: u64,
    /// Flows.
    pub messages: u64,
}

/// Where a unit's bytes came from and went.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UnitLinks {
    /// Sources of what it received.
    pub received_from: Vec<UnitPeer>,
    /// Destinations of what it sent.
    pub sent_to: Vec<UnitPeer>,
}

/// Finds the unit of each op.
pub struct UnitIndex<'a> {
    units: &'a [UnitSpan],
    /// (host, pid, tid) → unit indices sorted by start.
    by_thread: FxMap<(&'a str, u32, u32), Vec<usize>>,
}

impl<'a> UnitIndex<'a> {
    /// Indexes units.
    pub fn new(units: &'a [UnitSpan]) -> UnitIndex<'a> {
        let mut by_thread: FxMap<(&str, u32, u32), Vec<usize>> = FxMap::default();
        for (i, u) in units.iter().enumerate() {
            by_thread
                .entry((u.host.as_str(), u.pid, u.tid))
                .or_default()
                .push(i);
        }
        for v in by_thread.values_mut() {
            v.sort_by_key(|&i| units[i].tsc_start);
        }
        UnitIndex { units, by_thread }
    }

    /// The unit holding op `r`.
    pub fn unit_of(&self, m: &Messages, r: OpRef) -> Option<usize> {
        let p = &m.procs[r.proc as usize];
        let o = &p.ops[r.idx as usize];
        self.unit_at(&p.host, p.pid, o.tid, o.start)
    }

    /// The unit of thread `tid` of process `pid` on `host` running at TSC `tsc`.
    pub fn unit_at(&self, host: &str, pid: u32, tid: u32, tsc: u64) -> Option<usize> {
        let v = self.by_thread.get(&(host, pid, tid))?;
        let k = v.partition_point(|&i| self.units[i].tsc_start <= tsc);
        let i = *v.get(k.checked_sub(1)?)?;
        (tsc <= self.units[i].tsc_end).then_some(i)
    }
}

/// Every unit's sources and destinations, by unit id (units with none are left out).
pub fn unit_links(m: &Messages, units: &[UnitSpan]) -> BTreeMap<String, UnitLinks> {
    unit_links_of(m, units, &|_| true)
}

/// The sources and destinations of the units `wanted` says yes to (by index in `units`),
/// by unit id: what `culprit rank` prints under the units it lists. The other end is named
/// by its unit among all of `units`; names are made once per (unit, peer), not per flow.
pub fn unit_links_of(
    m: &Messages,
    units: &[UnitSpan],
    wanted: &dyn Fn(usize) -> bool,
) -> BTreeMap<String, UnitLinks> {
    let idx = UnitIndex::new(units);
    let mut acc = LinkAcc::default();
    for f in m.flows() {
        let (su, ru) = (idx.unit_of(m, f.send), idx.unit_of(m, f.recv));
        acc.add(su, ru, f.send.proc, f.recv.proc, f.bytes, wanted);
    }
    acc.finish(units, |p| m.procs[p as usize].name())
}

/// [`unit_links_of`] from the flows of the bounded-memory pass ([`super::streamed`],
/// its temporary files in `spill_dir`) instead of the whole stage: what `culprit rank`
/// prints under the units it lists. The same links where no entry was lost (after a gap
/// that pass draws fewer flows, never others).
pub fn unit_links_streamed(
    set: &crate::decode::TraceSet,
    units: &[UnitSpan],
    wanted: &dyn Fn(usize) -> bool,
    spill_dir: &std::path::Path,
) -> crate::error::Result<BTreeMap<String, UnitLinks>> {
    let idx = UnitIndex::new(units);
    let tids: Vec<Vec<u32>> = set
        .processes
        .iter()
        .map(|p| p.threads.iter().map(|t| t.tid).collect())
        .collect();
    let unit = |c: super::streamed::CallKey| {
        let p = &set.processes[c.proc as usize];
        idx.unit_at(
            &p.host,
            p.pid,
            tids[c.proc as usize][c.thread as usize],
            c.start,
        )
    };
    let mut acc = LinkAcc::default();
    super::streamed::stream_flows(set, spill_dir, |f| {
        acc.add(
            unit(f.send),
            unit(f.recv),
            f.send.proc,
            f.recv.proc,
            f.bytes,
            wanted,
        )
    })?;
    Ok(acc.finish(units, |p| {
        let p = &set.processes[p as usize];
        format!("{}:{}", p.host, p.pid)
    }))
}

/// Bytes and flows per (unit, peer process, peer unit), each way.
#[derive(Default)]
struct LinkAcc {
    recv: FxMap<(usize, u32, Option<usize>), (u64, u64)>,
    sent: FxMap<(usize, u32, Option<usize>), (u64, u64)>,
}

impl LinkAcc {
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        su: Option<usize>,
        ru: Option<usize>,
        sp: u32,
        rp: u32,
        bytes: u64,
        wanted: &dyn Fn(usize) -> bool,
    ) {
        if let Some(r) = ru.filter(|&r| wanted(r)) {
            let e = self.recv.entry((r, sp, su)).or_default();
            e.0 += bytes;
            e.1 += 1;
        }
        if let Some(s) = su.filter(|&s| wanted(s)) {
            let e = self.sent.entry((s, rp, ru)).or_default();
            e.0 += bytes;
            e.1 += 1;
        }
    }

    fn finish(
        self,
        units: &[UnitSpan],
        name: impl Fn(u32) -> String,
    ) -> BTreeMap<String, UnitLinks> {
        let mut out: BTreeMap<String, UnitLinks> = BTreeMap::new();
        for (received, acc) in [(true, self.recv), (false, self.sent)] {
            for ((u, p, pu), (bytes, messages)) in acc {
                let peer = UnitPeer {
                    process: name(p),
                    unit: pu.map(|x| units[x].id.clone()),
                    bytes,
                    messages,
                };
                let l = out.entry(units[u].id.clone()).or_default();
                if received {
                    l.received_from.push(peer);
                } else {
                    l.sent_to.push(peer);
                }
            }
        }
        for l in out.values_mut() {
            for v in [&mut l.received_from, &mut l.sent_to] {
                v.sort_by(|a, b| (&a.process, &a.unit).cmp(&(&b.process, &b.unit)));
            }
        }
        out
    }
}

/// Did unit `x` receive bytes sent by unit `y`?
pub fn received_from(m: &Messages, units: &[UnitSpan], x: &str, y: &str) -> bool {
    let idx = UnitIndex::new(units);
    m.flows().any(|f| {
        idx.unit_of(m, f.recv).is_some_and(|u| units[u].id == x)
            && idx.unit_of(m, f.send).is_some_and(|u| units[u].id == y)
    })
}

/// Does unit `x` happen before unit `y`: is there a chain of process order and messages
/// from an event of `x` to an event of `y`? False when either unit holds no event.
pub fn unit_happens_before(
    m: &Messages,
    causality: &super::clocks::OutEdges,
    x: &UnitSpan,
    y: &UnitSpan,
) -> bool {
    let find = |u: &UnitSpan| {
        m.procs
            .iter()
            .position(|p| p.host == u.host && p.pid == u.pid)
            .map(|p| p as u32)
    };
    let (Some(px), Some(py)) = (find(x), find(y)) else {
        return false;
    };
    let ops_x = &m.procs[px as usize].ops;
    let Some(first) = ops_x
        .iter()
        .position(|o| o.tid == x.tid && o.start >= x.tsc_start && o.start <= x.tsc_end)
    else {
        return false;
    };
    let ops_y = &m.procs[py as usize].ops;
    let Some(last) = ops_y
        .iter()
        .rposition(|o| o.tid == y.tid && o.start >= y.tsc_start && o.start <= y.tsc_end)
    else {
        return false;
    };
    causality.happens_before(
        OpRef {
            proc: px,
            idx: first as u32,
        },
        OpRef {
            proc: py,
            idx: last as u32,
        },
    )
}

/// The lines `culprit rank` prints under a unit: where what it received came from and
/// where what it sent went (at most `max` of each, most bytes first).
pub fn lines(l: &UnitLinks, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut put = |arrow: &str, v: &[UnitPeer]| {
        let mut v: Vec<&UnitPeer> = v.iter().collect();
        v.sort_by_key(|p| std::cmp::Reverse(p.bytes));
        for p in v.iter().take(max) {
            out.push(format!(
                "{arrow} {} {} ({} bytes in {} messages)",
                p.process,
                p.unit.as_deref().unwrap_or("(no unit)"),
                p.bytes,
                p.messages
            ));
        }
        if v.len() > max {
            out.push(format!("{arrow} … and {} more", v.len() - max));
        }
    };
    put("received from", &l.received_from);
    put("sent to", &l.sent_to);
    out
}

/// Adds `received_from` and `sent_to` to each unit object (with an `id`) of a
/// `culprit rank --json` array.
pub fn annotate_json(units: &mut serde_json::Value, links: &BTreeMap<String, UnitLinks>) {
    let Some(a) = units.as_array_mut() else {
        return;
    };
    for u in a {
        let Some(id) = u.get("id").and_then(|v| v.as_str()).map(str::to_owned) else {
            continue;
        };
        let l = links.get(&id).cloned().unwrap_or_default();
        u["received_from"] = serde_json::to_value(&l.received_from).unwrap_or_default();
        u["sent_to"] = serde_json::to_value(&l.sent_to).unwrap_or_default();
    }
}
