//! **Callers across processes**: which call of another traced process each served request
//! answers, so that a tier's request types follow the types of the requests that sent
//! them ([`super::types`]: a database cannot tell a report's query from a lookup's by its
//! bytes, but the application's handler that sent it can).
//!
//! Matching, per host (one clock):
//! 1. **By connection**: a served request on a connection whose (local, peer) ports the
//!    tracer recorded is answered for the call on the connection with the reverse ports
//!    that left last before the request arrived, if the call's reply had not begun
//!    arriving by then (a call leaves with its last send's entry, a request arrives with
//!    its first receive's return: the call is always first).
//! 2. **By timing, per connection**, for served connections whose ports are unknown (a
//!    descriptor inherited from a parent the tracer did not describe, such as a forked
//!    database backend's): among the callers' connections not matched by ports, the one
//!    one of whose calls was open at the arrival of most of the connection's requests —
//!    at least half of them, and more than any other: a connection carries one exchange at
//!    a time, so the connection that sent them is open at every arrival, another only by
//!    chance. Each request is then matched to that connection's call open at its arrival.
//!    (Served connections with ports whose caller was not found by them are tried so
//!    too: a caller whose `connect` did not record its local port.)
//!
//! A request is left without a caller when no call fits (its client was not traced).

use super::transactions::{ProcessTransactions, Role, Transaction};
use std::collections::{BTreeMap, HashMap, HashSet};

/// A transaction: (index of the process in the slice given, index of the transaction).
pub type TxRef = (usize, usize);

/// A call: (departure, first reply bytes, the call), sorted by departure.
type Calls = Vec<(i64, i64, TxRef)>;

fn is_call(t: &Transaction) -> bool {
    t.role == Role::Called && t.link.conn != 0 && !t.service.starts_with("wait ")
}

/// The call in flight at `at` among `calls` (sorted by start): the last one that left at
/// or before `at`, if its reply had not begun arriving before `at`.
fn open_at(calls: &[(i64, i64, TxRef)], at: i64) -> Option<TxRef> {
    let k = calls.partition_point(|c| c.0 <= at);
    let c = calls.get(k.checked_sub(1)?)?;
    (at <= c.1).then_some(c.2)
}

/// For every served request of `procs` (host, transactions) that a call of another of
/// them sent: that call.
pub fn match_calls(procs: &[(&str, &ProcessTransactions)]) -> HashMap<TxRef, TxRef> {
    // Calls by (host, local port, peer port), and by connection.
    let mut by_ports: HashMap<(&str, u16, u16), Calls> = HashMap::new();
    let mut by_conn: BTreeMap<(usize, u32), Calls> = BTreeMap::new();
    for (j, (host, pt)) in procs.iter().enumerate() {
        for (m, t) in pt.transactions.iter().enumerate() {
            if !is_call(t) {
                continue;
            }
            let c = (t.start_ns, t.end_ns, (j, m));
            if let Some((l, p)) = t.link.ports {
                by_ports.entry((host, l, p)).or_default().push(c);
            }
            by_conn.entry((j, t.link.conn)).or_default().push(c);
        }
    }
    for v in by_ports.values_mut().chain(by_conn.values_mut()) {
        v.sort_by_key(|c| (c.0, c.1));
    }
    let mut out = HashMap::new();
    // Caller connections matched by ports: not candidates for timing.
    let mut matched_conns: HashSet<(usize, u32)> = HashSet::new();
    // Served connections without ports: their requests (arrival, transaction).
    let mut unported: BTreeMap<(usize, u32), Vec<(i64, TxRef)>> = BTreeMap::new();
    for (i, (host, pt)) in procs.iter().enumerate() {
        for (k, t) in pt.transactions.iter().enumerate() {
            if t.role != Role::Served || t.link.conn == 0 {
                continue;
            }
            match t.link.ports {
                Some((l, p)) => {
                    let found = by_ports
                        .get(&(*host, p, l))
                        .and_then(|calls| open_at(calls, t.start_ns))
                        .filter(|c| c.0 != i);
                    match found {
                        Some(c) => {
                            matched_conns.insert((c.0, procs[c.0].1.transactions[c.1].link.conn));
                            out.insert((i, k), c);
                        }
                        None => unported
                            .entry((i, t.link.conn))
                            .or_default()
                            .push((t.start_ns, (i, k))),
                    }
                }
                None => unported
                    .entry((i, t.link.conn))
                    .or_default()
                    .push((t.start_ns, (i, k))),
            }
        }
    }
    // Timing, per served connection without ports: candidates by their first departure,
    // with their last reply and the port they called (where known).
    let mut candidates: Vec<(i64, i64, usize, Option<u16>, &Calls)> = by_conn
        .iter()
        .filter(|(k, _)| !matched_conns.contains(k))
        .map(|(k, calls)| {
            let last = calls.iter().map(|c| c.1).max().unwrap_or(i64::MIN);
            let t = &procs[k.0].1.transactions[calls[0].2 .1];
            (calls[0].0, last, k.0, t.link.ports.map(|p| p.1), calls)
        })
        .collect();
    candidates.sort_by_key(|c| (c.0, c.1, c.2));
    for ((i, _), mut reqs) in unported {
        reqs.sort_unstable();
        let host = procs[i].0;
        let port = procs[reqs[0].1 .0].1.transactions[reqs[0].1 .1]
            .link
            .ports
            .map(|p| p.0);
        let (lo, hi) = (reqs[0].0, reqs[reqs.len() - 1].0);
        let mut best: Option<(usize, &Calls)> = None;
        let mut second = 0;
        let upto = candidates.partition_point(|c| c.0 <= hi);
        for &(_, last, j, peer, calls) in &candidates[..upto] {
            if j == i || procs[j].0 != host || last < lo {
                continue;
            }
            // Both ends know their ports: the call went to another port.
            if matches!((port, peer), (Some(a), Some(b)) if a != b) {
                continue;
            }
            let hits = reqs
                .iter()
                .filter(|r| open_at(calls, r.0).is_some())
                .count();
            match best {
                Some(b) if hits <= b.0 => second = second.max(hits),
                _ => {
                    second = best.map_or(0, |b| b.0);
                    best = Some((hits, calls));
                }
            }
        }
        let Some((hits, calls)) = best else { continue };
        // Half of the arrivals at least, and no other connection as good (a connection
        // of one request, among several open at once, is not told apart).
        if hits * 2 < reqs.len() || hits == 0 || hits == second {
            continue;
        }
        for (at, r) in reqs {
            if let Some(c) = open_at(calls, at) {
                out.insert(r, c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demand::transactions::Link;

    fn tx(role: Role, a: i64, b: i64, ports: Option<(u16, u16)>, conn: u32) -> Transaction {
        Transaction {
            role,
            service: if role == Role::Served {
                "port:5432".into()
            } else {
                "peer:5432".into()
            },
            start_ns: a,
            end_ns: b,
            shape: None,
            link: Link {
                ports,
                conn,
                parent: None,
                caller: None,
                ..Link::default()
            },
        }
    }

    fn proc(tx: Vec<Transaction>) -> ProcessTransactions {
        ProcessTransactions {
            transactions: tx,
            ..Default::default()
        }
    }

    #[test]
    fn served_requests_take_the_call_of_their_connection() {
        // Two callers on ports 1001 and 1002, both with calls open at overlapping times.
        let a = proc(vec![
            tx(Role::Called, 10, 50, Some((1001, 5432)), 1),
            tx(Role::Called, 100, 150, Some((1001, 5432)), 1),
        ]);
        let b = proc(vec![
            tx(Role::Called, 12, 60, Some((1002, 5432)), 1),
            tx(Role::Called, 98, 160, Some((1002, 5432)), 1),
        ]);
        // The server knows its ports: exact.
        let s = proc(vec![
            tx(Role::Served, 20, 40, Some((5432, 1002)), 1),
            tx(Role::Served, 110, 140, Some((5432, 1001)), 2),
            // Arrived after its connection's call was answered: no caller.
            tx(Role::Served, 170, 180, Some((5432, 1001)), 2),
        ]);
        let m = match_calls(&[("h", &a), ("h", &b), ("h", &s)]);
        assert_eq!(m.get(&(2, 0)), Some(&(1, 0)));
        assert_eq!(m.get(&(2, 1)), Some(&(0, 1)));
        assert_eq!(m.get(&(2, 2)), None);
        // Another host's server never matches these callers.
        let m = match_calls(&[("h", &a), ("h", &b), ("other", &s)]);
        assert!(m.is_empty(), "{m:?}");
    }

    #[test]
    fn an_inherited_connection_takes_the_caller_open_at_most_arrivals() {
        // Caller a's connection carries every request of backend 1; b's is open at one
        // of them by chance.
        let a = proc(vec![
            tx(Role::Called, 10, 30, Some((1001, 5432)), 1),
            tx(Role::Called, 40, 60, Some((1001, 5432)), 1),
            tx(Role::Called, 70, 90, Some((1001, 5432)), 1),
        ]);
        let b = proc(vec![tx(Role::Called, 35, 80, Some((1002, 5432)), 1)]);
        let s = proc(vec![
            tx(Role::Served, 15, 25, None, 1),
            tx(Role::Served, 45, 55, None, 1),
            tx(Role::Served, 75, 85, None, 1),
        ]);
        let m = match_calls(&[("h", &a), ("h", &b), ("h", &s)]);
        assert_eq!(m.get(&(2, 0)), Some(&(0, 0)));
        assert_eq!(m.get(&(2, 1)), Some(&(0, 1)));
        assert_eq!(m.get(&(2, 2)), Some(&(0, 2)));
    }
}
