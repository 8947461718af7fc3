//! Exact shares for traced processes: when the same run was recorded by `culprit record`,
//! the bytes each process wrote to connections whose peer is the server (the `ret` of every
//! `write`/`writev`/`send*` exit on a descriptor whose `connect` named a server address,
//! until its `close`) are the true numerators of its share.

use crate::decode::{Event, TraceSet};
use bufpool::format::LibFn;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::PathBuf;

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// A server address: an IP, optionally with a port or a port range.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ServerAddr {
    /// The IP.
    pub ip: IpAddr,
    /// Ports (inclusive); `None`: any port.
    pub ports: Option<(u16, u16)>,
}

impl ServerAddr {
    /// Parses `127.0.0.1`, `127.0.0.1:21`, `127.0.0.1:30000-30100`, `::1`, `[::1]:21`.
    pub fn parse(s: &str) -> Result<ServerAddr, String> {
        let bad = || format!("{s:?}: expected IP, IP:PORT or IP:LO-HI (IPv6 in brackets)");
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(ServerAddr { ip, ports: None });
        }
        let (ip, ports) = if let Some(rest) = s.strip_prefix('[') {
            let (ip, p) = rest.split_once("]:").ok_or_else(bad)?;
            (ip, p)
        } else {
            s.rsplit_once(':').ok_or_else(bad)?
        };
        let ip: IpAddr = ip.parse().map_err(|_| bad())?;
        let (lo, hi) = match ports.split_once('-') {
            Some((a, b)) => (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?),
            None => {
                let p = ports.parse().map_err(|_| bad())?;
                (p, p)
            }
        };
        Ok(ServerAddr {
            ip,
            ports: Some((lo, hi)),
        })
    }

    fn matches(&self, a: &bufpool::format::Addr) -> bool {
        let ip = match a.bytes() {
            b if a.family == AF_INET && b.len() == 4 => IpAddr::from([b[0], b[1], b[2], b[3]]),
            b if a.family == AF_INET6 && b.len() == 16 => {
                let mut x = [0u8; 16];
                x.copy_from_slice(b);
                IpAddr::from(x)
            }
            _ => return false,
        };
        ip == self.ip
            && self
                .ports
                .is_none_or(|(lo, hi)| (lo..=hi).contains(&a.port))
    }
}

/// Bytes each traced process sent to the server, by time.
#[derive(Clone, Debug, Default)]
pub struct Truth {
    /// The trace directories.
    pub dirs: Vec<PathBuf>,
    /// pid → (unix ns, bytes) of every send to the server.
    pub sends: HashMap<u32, Vec<(i128, u64)>>,
    /// Traced pids (a traced process that sent nothing has a true share of 0).
    pub traced: Vec<u32>,
}

impl Truth {
    /// Reads the traces.
    pub fn load(dirs: &[PathBuf], server: &[ServerAddr]) -> crate::Result<Truth> {
        let set = TraceSet::open(dirs)?;
        let mut out = Truth {
            dirs: dirs.to_vec(),
            ..Default::default()
        };
        for p in &set.processes {
            out.traced.push(p.pid);
            let conv = p.calib.converter();
            // (tsc, func, fd, ret, peer) of every exit, all threads, then in time order.
            let mut ev: Vec<(u64, LibFn, i32, i64, Option<bufpool::format::Addr>)> = Vec::new();
            for t in &p.threads {
                t.for_each(|e| {
                    if let Event::Lib(l) = e {
                        if l.exit {
                            if let (Some(fd), Some(ret)) = (l.opts.fd, l.opts.ret) {
                                ev.push((l.tsc, l.func, fd, ret, l.peer()));
                            }
                        }
                    }
                })?;
            }
            ev.sort_by_key(|e| e.0);
            let mut to_server: BTreeMap<i32, bool> = BTreeMap::new();
            let sends = out.sends.entry(p.pid).or_default();
            for (tsc, f, fd, ret, peer) in ev {
                match f {
                    LibFn::Connect => {
                        if let Some(a) = peer {
                            to_server.insert(fd, server.iter().any(|s| s.matches(&a)));
                        }
                    }
                    LibFn::Close => {
                        to_server.remove(&fd);
                    }
                    f if f.is_send() && ret > 0 && to_server.get(&fd) == Some(&true) => {
                        sends.push((conv.unix_ns(tsc), ret as u64));
                    }
                    _ => {}
                }
            }
        }
        Ok(out)
    }

    /// Bytes sent to the server by `pid` in each interval `[start, end)`.
    pub fn per_interval(&self, pid: u32, start: &[u64], end: &[u64]) -> Option<Vec<f64>> {
        if !self.traced.contains(&pid) {
            return None;
        }
        let mut out = vec![0.0; start.len()];
        for &(t, b) in self.sends.get(&pid).into_iter().flatten() {
            let i = end.partition_point(|&e| (e as i128) <= t);
            if i < out.len() && t >= start[i] as i128 {
                out[i] += b as f64;
            }
        }
        Some(out)
    }
}

/// Server addresses seen in the sample file: every IP a server process listened on (any
/// port: FTP data connections, for one, go to ports opened per transfer).
pub fn addrs_from_log(log: &reader::iosample::SampleLog, server: &str) -> Vec<ServerAddr> {
    let servers = super::series::server_processes(log, server);
    let mut out: Vec<ServerAddr> = Vec::new();
    for a in super::clients::listen_addrs(log, &servers) {
        let a = ServerAddr {
            ip: a.ip(),
            ports: None,
        };
        if !out.contains(&a) {
            out.push(a);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse() {
        let a = ServerAddr::parse("127.0.0.1:30000-30100").unwrap();
        assert_eq!(a.ports, Some((30000, 30100)));
        assert_eq!(ServerAddr::parse("[::1]:21").unwrap().ports, Some((21, 21)));
        assert_eq!(ServerAddr::parse("10.0.0.1").unwrap().ports, None);
        assert!(ServerAddr::parse("nope:1").is_err());
        let m = bufpool::format::Addr::new(AF_INET, 30001, &[127, 0, 0, 1]);
        assert!(a.matches(&m));
    }
}
