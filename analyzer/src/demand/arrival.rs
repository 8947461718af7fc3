//! **Arrival**: when a served request began, from the call of another traced process that
//! sent it.
//!
//! The byte flow of one process ([`super::transactions`]) dates a request from the
//! return of the receive that read its first bytes: the bytes are in the process then.
//! But a server can sit in a receive on bytes that were already there — a read delayed
//! before it copies (an injected delay, a slow socket layer, a lock inside the call) — and
//! that time is the request's, not idle. A blocking server, on the other hand, enters its
//! receive long before the next request comes (a thread per connection waiting for the
//! next command), so the receive's entry alone is not the arrival either.
//!
//! Where the request is matched to the call that sent it ([`super::callers`]: by the
//! connection's ports or by timing, same host, one clock), it begins at the later of the
//! receive's entry and the return of the sender's last send of the request — the instant
//! the bytes were there and the server was in the call — and never after the receive's
//! return. A request whose sender was not traced keeps the receive's return.

use super::callers::{self, TxRef};
use super::transactions::ProcessTransactions;

/// The start of a served request whose first receive was entered at `enter` and returned
/// at `returned`, sent by a call whose last send returned at `sent`.
pub fn start(enter: i64, sent: i64, returned: i64) -> i64 {
    enter.max(sent).min(returned)
}

/// Moves the start of every served request of `procs` (host, transactions) matched to the
/// call that sent it to [`start`]; the transactions stay sorted by (end, start). Returns
/// how many requests now start earlier.
pub fn apply(hosts: &[&str], procs: &mut [&mut ProcessTransactions]) -> usize {
    let matched: Vec<(TxRef, TxRef)> = {
        let view: Vec<(&str, &ProcessTransactions)> = hosts
            .iter()
            .zip(procs.iter())
            .map(|(h, p)| (*h, &**p))
            .collect();
        let mut m: Vec<(TxRef, TxRef)> = callers::match_calls(&view).into_iter().collect();
        m.sort_unstable();
        m
    };
    let mut moved: Vec<(TxRef, i64)> = Vec::new();
    for (r, c) in matched {
        let call = &procs[c.0].transactions[c.1];
        let sent = call.link.sent_end_ns.unwrap_or(call.start_ns);
        let t = &procs[r.0].transactions[r.1];
        if let Some(enter) = t.link.recv_enter_ns {
            let s = start(enter, sent, t.start_ns);
            if s < t.start_ns {
                moved.push((r, s));
            }
        }
    }
    let n = moved.len();
    let mut touched: Vec<usize> = Vec::new();
    for ((i, k), s) in moved {
        procs[i].transactions[k].start_ns = s;
        touched.push(i);
    }
    touched.sort_unstable();
    touched.dedup();
    for i in touched {
        procs[i]
            .transactions
            .sort_by_key(|t| (t.end_ns, t.start_ns));
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demand::transactions::{Link, Role, Transaction};

    fn tx(role: Role, a: i64, b: i64, ports: (u16, u16), link: Link) -> Transaction {
        Transaction {
            role,
            service: if role == Role::Served {
                "port:3306".into()
            } else {
                "peer:3306".into()
            },
            start_ns: a,
            end_ns: b,
            shape: None,
            link: Link {
                ports: Some(ports),
                conn: 1,
                ..link
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
    fn the_later_of_entry_and_send_never_after_the_return() {
        // Delayed read: in the call at 100, the bytes there at 101, read at 103.
        assert_eq!(start(100, 101, 103), 101);
        // Blocking read entered long before the bytes came.
        assert_eq!(start(0, 101, 103), 101);
        // Non-blocking read of bytes that were there: from its entry.
        assert_eq!(start(102, 90, 103), 102);
        // A send that returned only after the peer ran: the return bounds it.
        assert_eq!(start(100, 105, 103), 103);
    }

    #[test]
    fn a_matched_request_starts_when_its_bytes_were_there_and_the_server_in_the_call() {
        // Client: a call leaves at 1_000 (send entry), its send returns at 1_010, its
        // reply arrives at 9_000. Server: in its receive from 500 (blocked, idle) — a
        // delay held the read until 4_000 — reply at 8_900.
        let call = tx(
            Role::Called,
            1_000,
            9_000,
            (40000, 3306),
            Link {
                sent_end_ns: Some(1_010),
                ..Link::default()
            },
        );
        let served = tx(
            Role::Served,
            4_000,
            8_900,
            (3306, 40000),
            Link {
                recv_enter_ns: Some(500),
                ..Link::default()
            },
        );
        // A request whose sender was not traced keeps its receive's return.
        let untraced = tx(
            Role::Served,
            20_000,
            21_000,
            (3306, 40001),
            Link {
                recv_enter_ns: Some(10_000),
                ..Link::default()
            },
        );
        let mut client = proc(vec![call]);
        let mut server = proc(vec![served, untraced]);
        let n = apply(&["h", "h"], &mut [&mut client, &mut server]);
        assert_eq!(n, 1);
        assert_eq!(server.transactions[0].start_ns, 1_010);
        assert_eq!(server.transactions[1].start_ns, 20_000);
        // The caller's own call is left as it was.
        assert_eq!(client.transactions[0].start_ns, 1_000);
        // Another host's call does not date it.
        let mut server2 = proc(vec![tx(
            Role::Served,
            4_000,
            8_900,
            (3306, 40000),
            Link {
                recv_enter_ns: Some(500),
                ..Link::default()
            },
        )]);
        let n = apply(&["a", "b"], &mut [&mut client, &mut server2]);
        assert_eq!(n, 0);
        assert_eq!(server2.transactions[0].start_ns, 4_000);
    }
}
