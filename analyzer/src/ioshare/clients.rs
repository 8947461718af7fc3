//! Which processes get a column: the server's clients, told apart from its neighbours by
//! the connections the sampler saw.
//!
//! A process can load a network file server only through a connection to it. `culprit
//! iosample` lists the descriptors of every process that did IO (at its first sighting,
//! at the first sample it moved, then every `--fd-every` samples): TCP sockets by peer
//! address, listening ones as `listen ADDR`. A process that held a TCP connection to an
//! address a server process listened on (same port; the same IP, or any IP when the server
//! listened on the unspecified one) is a **client**; one whose descriptors were listed
//! and never showed such a connection is a **neighbour** — its share is 0 by
//! construction, whatever its IO does — and so is one never listed (it lived between two
//! listings without doing IO at a sample, e.g. a process that lived a few milliseconds:
//! its counters come from its exit). On a machine where other jobs write, the neighbours'
//! bursts would otherwise be columns: they take the server's load in the windows where
//! they happen to coincide with it, widen every window (two rows per column), make the
//! fits collinear, mark intervals unsure when they are read quietly, and their bytes,
//! large against the clients', push the clients under the small-writer cut-off.
//!
//! Where no process was seen connected (clients on other machines, a file without
//! listings, a server reached through a mount), every process that wrote is a candidate,
//! as before ([`ClientChoice::All`]), and the report says why.

use reader::iosample::format::FdClass;
use reader::iosample::SampleLog;
use std::collections::BTreeSet;
use std::net::SocketAddr;

/// `--clients`: which processes are the server's candidate clients.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ClientChoice {
    /// Those seen connected to the server; every process when none was.
    #[default]
    Auto,
    /// Every process that wrote (and is not a server process).
    All,
    /// These pids.
    Pids(Vec<u32>),
}

impl ClientChoice {
    /// Parses `auto`, `all` or a comma-separated list of pids.
    pub fn parse(s: &str) -> Result<ClientChoice, String> {
        match s {
            "auto" => Ok(ClientChoice::Auto),
            "all" => Ok(ClientChoice::All),
            _ => s
                .split(',')
                .map(|p| p.trim().parse::<u32>())
                .collect::<Result<Vec<u32>, _>>()
                .map(ClientChoice::Pids)
                .map_err(|_| format!("{s:?}: expected auto, all or PID,PID,…")),
        }
    }
}

/// Why a process is, or is not, a candidate client.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum Evidence {
    /// It held a connection to this server address.
    Connected(String),
    /// Its descriptors were listed and none was a connection to the server.
    NoConnection,
    /// Its descriptors were never listed.
    NeverListed,
    /// Named by `--clients PID,…`.
    Given,
    /// Not named by `--clients PID,…`.
    NotGiven,
    /// `--clients all`, or no process was seen connected: every process is a candidate.
    Everyone,
}

impl Evidence {
    /// Whether this makes the process a column.
    pub fn is_client(&self) -> bool {
        matches!(
            self,
            Evidence::Connected(_) | Evidence::Given | Evidence::Everyone
        )
    }

    /// In words, for the report.
    pub fn describe(&self) -> String {
        match self {
            Evidence::Connected(a) => format!("connected to {a}"),
            Evidence::NoConnection => "no connection to the server".into(),
            Evidence::NeverListed => "descriptors never listed".into(),
            Evidence::Given => "named by --clients".into(),
            Evidence::NotGiven => "not named by --clients".into(),
            Evidence::Everyone => "every process a candidate".into(),
        }
    }
}

/// How the candidates were chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SelectedBy {
    /// Connections to the server.
    Connections,
    /// Every process (asked, or nothing seen connected).
    All,
    /// The pids given.
    Given,
}

/// The addresses the server processes listened on during the run.
pub fn listen_addrs(log: &SampleLog, servers: &BTreeSet<usize>) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for &i in servers {
        let p = &log.processes[i];
        for g in p.fds_seen.iter().chain(&p.fds) {
            if let Some(a) = g
                .place
                .strip_prefix("listen ")
                .and_then(|a| a.parse::<SocketAddr>().ok())
            {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
    }
    out
}

/// The server address `peer` reaches, if any: same port, and the same IP or a server
/// listening on the unspecified address.
fn reaches(peer: &str, listen: &[SocketAddr]) -> Option<SocketAddr> {
    let peer: SocketAddr = peer.parse().ok()?;
    listen
        .iter()
        .find(|l| l.port() == peer.port() && (l.ip().is_unspecified() || l.ip() == peer.ip()))
        .map(|_| peer)
}

/// What the descriptors of process `i` say about it, against the server's `listen`
/// addresses.
pub fn evidence(log: &SampleLog, i: usize, listen: &[SocketAddr]) -> Evidence {
    let p = &log.processes[i];
    if !p.fds_listed && p.fds.is_empty() {
        return Evidence::NeverListed;
    }
    p.fds_seen
        .iter()
        .chain(&p.fds)
        .filter(|g| g.class == FdClass::Socket && !g.place.starts_with("listen "))
        .find_map(|g| reaches(&g.place, listen))
        .map_or(Evidence::NoConnection, |a| {
            Evidence::Connected(a.to_string())
        })
}

/// The evidence for each of `procs` (indices into the log; the server's processes already
/// left out) under `choice`, and how the candidates were chosen.
pub fn classify(
    log: &SampleLog,
    servers: &BTreeSet<usize>,
    procs: &[usize],
    choice: &ClientChoice,
) -> (Vec<Evidence>, SelectedBy) {
    match choice {
        ClientChoice::All => (vec![Evidence::Everyone; procs.len()], SelectedBy::All),
        ClientChoice::Pids(pids) => (
            procs
                .iter()
                .map(|&i| {
                    if pids.contains(&log.processes[i].pid) {
                        Evidence::Given
                    } else {
                        Evidence::NotGiven
                    }
                })
                .collect(),
            SelectedBy::Given,
        ),
        ClientChoice::Auto => {
            let listen = listen_addrs(log, servers);
            let ev: Vec<Evidence> = procs.iter().map(|&i| evidence(log, i, &listen)).collect();
            if ev.iter().any(Evidence::is_client) {
                (ev, SelectedBy::Connections)
            } else {
                (vec![Evidence::Everyone; procs.len()], SelectedBy::All)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reader::iosample::format::FdGroup;
    use reader::iosample::ProcSeries;

    fn group(class: FdClass, place: &str) -> FdGroup {
        FdGroup {
            class,
            shared: class == FdClass::Socket,
            place: place.into(),
            count: 1,
        }
    }

    fn proc(pid: u32, listed: bool, seen: Vec<FdGroup>) -> ProcSeries {
        ProcSeries {
            pid,
            comm: format!("p{pid}"),
            fds_listed: listed,
            fds_seen: seen,
            ..Default::default()
        }
    }

    fn log(processes: Vec<ProcSeries>) -> SampleLog {
        SampleLog {
            processes,
            ..Default::default()
        }
    }

    #[test]
    fn clients_are_the_processes_connected_to_the_server() {
        let l = log(vec![
            proc(
                1,
                true,
                vec![group(FdClass::Socket, "listen 127.0.0.1:2121")],
            ),
            // A client: its control connection (closed before the last listing: only in
            // the union) and a local file.
            proc(
                2,
                true,
                vec![
                    group(FdClass::Socket, "127.0.0.1:2121"),
                    group(FdClass::File, "/ (ext4)"),
                ],
            ),
            // A neighbour with a connection elsewhere and a file.
            proc(
                3,
                true,
                vec![
                    group(FdClass::Socket, "127.0.0.1:5432"),
                    group(FdClass::File, "/ (ext4)"),
                ],
            ),
            // A neighbour never listed.
            proc(4, false, vec![]),
            // A neighbour listening on the same port number on another address.
            proc(
                5,
                true,
                vec![group(FdClass::Socket, "listen 127.0.0.2:2121")],
            ),
        ]);
        let servers: BTreeSet<usize> = [0].into();
        let (ev, by) = classify(&l, &servers, &[1, 2, 3, 4], &ClientChoice::Auto);
        assert_eq!(by, SelectedBy::Connections);
        assert_eq!(ev[0], Evidence::Connected("127.0.0.1:2121".into()));
        assert_eq!(ev[1], Evidence::NoConnection);
        assert_eq!(ev[2], Evidence::NeverListed);
        assert_eq!(ev[3], Evidence::NoConnection);
        assert_eq!(
            ev.iter().filter(|e| e.is_client()).count(),
            1,
            "only the connected process is a column"
        );
    }

    #[test]
    fn a_server_on_every_address_is_reached_through_any() {
        let l = log(vec![
            proc(1, true, vec![group(FdClass::Socket, "listen [::]:8080")]),
            proc(2, true, vec![group(FdClass::Socket, "[::1]:8080")]),
            proc(3, true, vec![group(FdClass::Socket, "[::1]:8081")]),
        ]);
        let servers: BTreeSet<usize> = [0].into();
        let (ev, _) = classify(&l, &servers, &[1, 2], &ClientChoice::Auto);
        assert!(ev[0].is_client());
        assert!(!ev[1].is_client());
    }

    #[test]
    fn nobody_seen_connected_makes_everyone_a_candidate() {
        let l = log(vec![
            proc(
                1,
                true,
                vec![group(FdClass::Socket, "listen 127.0.0.1:2121")],
            ),
            proc(2, true, vec![group(FdClass::File, "/mnt (nfs)")]),
            proc(3, false, vec![]),
        ]);
        let servers: BTreeSet<usize> = [0].into();
        let (ev, by) = classify(&l, &servers, &[1, 2], &ClientChoice::Auto);
        assert_eq!(by, SelectedBy::All);
        assert!(ev.iter().all(Evidence::is_client));
    }

    #[test]
    fn given_pids_and_all() {
        let l = log(vec![proc(1, true, vec![]), proc(2, true, vec![])]);
        let servers = BTreeSet::new();
        let (ev, by) = classify(&l, &servers, &[0, 1], &ClientChoice::Pids(vec![2]));
        assert_eq!(by, SelectedBy::Given);
        assert_eq!(ev, vec![Evidence::NotGiven, Evidence::Given]);
        let (ev, _) = classify(&l, &servers, &[0, 1], &ClientChoice::All);
        assert!(ev.iter().all(Evidence::is_client));
        assert_eq!(
            ClientChoice::parse("12, 13"),
            Ok(ClientChoice::Pids(vec![12, 13]))
        );
        assert!(ClientChoice::parse("x").is_err());
    }
}
