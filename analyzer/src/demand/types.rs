//! **Request types found from behaviour** (`--services auto`, the default): the served
//! requests of every process running one program are grouped by what serving them
//! involved ([`Shape`]), into types that keep their identity across intervals, runs and
//! the processes of a worker pool.
//!
//! The grouping follows the structure of the requests, not fitted thresholds:
//!
//! 1. **Signature**: the port (or socket path) the request came in on, the set of program
//!    functions the serving thread ran (C or Python; the set of libc calls for a program
//!    that recorded none; none for an event loop, whose threads juggle several requests
//!    at once, so that what a thread ran is not one request's), and the downstream calls by peer (1, 2, 3, 4 calls exactly;
//!    more on a log₂ scale). Peers the program uses **interchangeably** are one peer, a
//!    pool (`pools`): where requests alike in every other part of their signature call
//!    different peers served by processes running one executable (a proxy's round-robin
//!    over its backends, a broker's free worker), which member answered does not make
//!    another type.
//!    Where the request was sent by a traced request of another program
//!    ([`super::callers`]), the signature holds that request's type and which of its calls
//!    to this port it was, and programs are typed callers first: a tier's types follow the
//!    front tier's. The libc calls made are then left out (they stand in for functions a
//!    program did not record; the caller's type says more).
//! 2. **Size classes**, per signature: request sizes sorted on a log scale and cut where
//!    two neighbours differ by more than a factor of two (a gap no size lies in); then the
//!    reply sizes within each request class, the same way. A class is named by its median's
//!    nearest power of two, so that it keeps its name from run to run.
//! 3. **Rare types merged**: a type whose requests are too few to estimate its demand —
//!    completed in fewer than [`MIN_INTERVALS`] intervals, or fewer than 1 % of the
//!    requests of its port — joins the type of its port nearest to it (functions
//!    differing, calls differing, size classes apart), and the report says how many
//!    requests it took in. At most [`MAX_TYPES`] types are kept per port (the most
//!    frequent): every type is one more unknown for the regression.
//!
//! A type's id is `port:8080#` and a hash of its signature and size classes (stable keys
//! only: module+offset or Python module.qualname, libc ids, peer ports), its name says what
//! tells it apart from the program's other types: "calls `list_view` → 1× peer:5432 (1.9 KB
//! reply); request 128 B, reply 2 KB".

use super::busy::Grid;
use super::shape::{FnName, Shape};
use super::transactions::{ProcessTransactions, Role};
use crate::hash::{mix, str_hash};
use crate::symbolize::ElfResolver;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

/// A type must complete in at least this many intervals to have its demand estimated.
pub const MIN_INTERVALS: usize = 5;
/// At most this many types per port of a program.
pub const MAX_TYPES: usize = 8;

/// What the report says about one request type.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TypeInfo {
    /// What tells it apart from the program's other types.
    pub name: String,
    /// Rarer signatures merged into it.
    pub merged_signatures: u64,
    /// Their requests.
    pub merged_requests: u64,
    /// Typed as an event loop's (by calls and sizes only): a request it sends says no
    /// more of its type than the bytes its callee sees itself.
    #[serde(skip)]
    pub event_loop: bool,
}

/// The structural part of a signature.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Sig {
    port: String,
    /// The type of the traced request whose call this request answers, and which of its
    /// calls to this port it was ([`super::callers`]).
    caller: Option<String>,
    funcs: std::sync::Arc<[u64]>,
    calls: Vec<(String, u32)>,
}

/// A type before merging: signature and size classes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Key {
    sig: Sig,
    req: i32,
    reply: i32,
}

fn count_class(n: u32) -> u32 {
    if n <= 4 {
        n
    } else {
        4 + (n as f64).log2().floor() as u32 - 1
    }
}

fn log2(b: u64) -> f64 {
    (b.max(1) as f64).log2()
}

/// Cuts sorted log-sizes where neighbours are more than a factor of two apart; returns the
/// class label (log₂ of the median, rounded) of each input, in input order.
fn size_classes(sizes: &[u64]) -> Vec<i32> {
    let mut idx: Vec<usize> = (0..sizes.len()).collect();
    idx.sort_by_key(|&i| sizes[i]);
    let mut out = vec![0i32; sizes.len()];
    let mut start = 0;
    for k in 1..=idx.len() {
        let cut = k == idx.len() || log2(sizes[idx[k]]) - log2(sizes[idx[k - 1]]) > 1.0;
        if cut {
            let med = sizes[idx[start + (k - start) / 2]];
            let label = log2(med).round() as i32;
            for &i in &idx[start..k] {
                out[i] = label;
            }
            start = k;
        }
    }
    out
}

/// How far apart two types are, for merging: functions not shared (Jaccard), calls not
/// shared, size classes apart (factors of two).
fn distance(a: &Key, b: &Key) -> f64 {
    let fa: HashSet<&u64> = a.sig.funcs.iter().collect();
    let fb: HashSet<&u64> = b.sig.funcs.iter().collect();
    let uni = fa.union(&fb).count();
    let jac = if uni == 0 {
        0.0
    } else {
        1.0 - fa.intersection(&fb).count() as f64 / uni as f64
    };
    let mut calls = 0.0;
    let peers: HashSet<&String> = a
        .sig
        .calls
        .iter()
        .chain(&b.sig.calls)
        .map(|c| &c.0)
        .collect();
    for p in peers {
        let ca = a.sig.calls.iter().find(|c| &c.0 == p).map_or(0, |c| c.1) as f64;
        let cb = b.sig.calls.iter().find(|c| &c.0 == p).map_or(0, |c| c.1) as f64;
        calls += (ca - cb).abs() / ca.max(cb);
    }
    let port = if a.sig.port == b.sig.port { 0.0 } else { 100.0 };
    let caller = if a.sig.caller == b.sig.caller {
        0.0
    } else {
        1.0
    };
    port + caller + jac + calls + 0.25 * ((a.req - b.req).abs() + (a.reply - b.reply).abs()) as f64
}

fn bytes(label: i32) -> String {
    let b = 2f64.powi(label);
    if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} KB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

/// Which peers one program uses interchangeably. `sigs` are the signatures of its served
/// requests with calls counted exactly (`(peer, calls)`, sorted by peer), `peer_exe` the
/// executable serving each peer (`peer:PORT`) where a recorded process serves it.
///
/// Two peers are one pool when both are served by one executable and two signatures that
/// are the same once each peer is replaced by its executable call them at the same place;
/// pools are closed under that (union–find). Each member maps to the pool's label
/// `pool(peer:A, peer:B…)`; peers in no pool are not in the map.
fn pools(sigs: &[Sig], peer_exe: &HashMap<String, String>) -> HashMap<String, String> {
    // (signature with executables for peers, executable) -> the peers met there.
    let mut seen: BTreeMap<(Sig, String), Vec<String>> = BTreeMap::new();
    for s in sigs {
        let mut abs = s.clone();
        for c in abs.calls.iter_mut() {
            if let Some(e) = peer_exe.get(&c.0) {
                c.0 = format!("exe:{e}");
            }
        }
        abs.calls.sort();
        for c in &s.calls {
            if let Some(e) = peer_exe.get(&c.0) {
                seen.entry((abs.clone(), e.clone()))
                    .or_default()
                    .push(c.0.clone());
            }
        }
    }
    let mut parent: HashMap<String, String> = HashMap::new();
    fn root(parent: &mut HashMap<String, String>, p: &str) -> String {
        let mut r = p.to_string();
        while let Some(q) = parent.get(&r).filter(|q| **q != r) {
            r = q.clone();
        }
        parent.insert(p.to_string(), r.clone());
        r
    }
    for peers in seen.values() {
        let mut ps = peers.clone();
        ps.sort();
        ps.dedup();
        if ps.len() < 2 {
            continue;
        }
        let r0 = root(&mut parent, &ps[0]);
        for p in &ps[1..] {
            let r = root(&mut parent, p);
            if r != r0 {
                parent.insert(r, r0.clone());
            }
        }
    }
    let members: Vec<String> = parent.keys().cloned().collect();
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in members {
        let r = root(&mut parent, &m);
        groups.entry(r).or_default().push(m);
    }
    let mut out = HashMap::new();
    for (_, mut g) in groups {
        if g.len() < 2 {
            continue;
        }
        g.sort();
        let label = format!("pool({})", g.join(", "));
        for m in g {
            out.insert(m, label.clone());
        }
    }
    out
}

/// The calls of a shape with pool members as their pool, calls to one pool added up,
/// sorted by peer: (peer, calls, reply bytes).
fn pooled(calls: &[(String, u32, u64)], pool: &HashMap<String, String>) -> Vec<(String, u32, u64)> {
    let mut out: Vec<(String, u32, u64)> = Vec::new();
    for (p, n, b) in calls {
        let p = pool.get(p).unwrap_or(p);
        match out.iter_mut().find(|c| &c.0 == p) {
            Some(c) => {
                c.1 += n;
                c.2 += b;
            }
            None => out.push((p.clone(), *n, *b)),
        }
    }
    out.sort();
    out
}

/// Gives every served request of `procs` (the processes running one program) its type,
/// and returns what the report says about each type, by id. `peer_exe`: the executable
/// serving each peer (`peer:PORT`), for `pools`.
pub fn assign(
    procs: &mut [&mut ProcessTransactions],
    grid: Grid,
    peer_exe: &HashMap<String, String>,
) -> HashMap<String, TypeInfo> {
    // Program functions where the program recorded any, else libc calls.
    let program = procs.iter().any(|p| {
        p.transactions
            .iter()
            .any(|t| t.shape.as_ref().is_some_and(|s| !s.funcs.is_empty()))
    });
    let served: Vec<(usize, usize)> = procs
        .iter()
        .enumerate()
        .flat_map(|(i, p)| {
            p.transactions
                .iter()
                .enumerate()
                .filter(|(_, t)| t.role == Role::Served && t.shape.is_some())
                .map(move |(k, _)| (i, k))
        })
        .collect();
    if served.is_empty() {
        return HashMap::new();
    }
    let shape =
        |&(i, k): &(usize, usize)| -> &Shape { procs[i].transactions[k].shape.as_deref().unwrap() };
    // An event loop (a thread with several requests open at once): what a thread ran
    // between two socket calls belongs to whichever requests it was juggling, so its
    // requests are told apart by their calls and sizes only.
    let event_loop = served.iter().any(|r| shape(r).interleaved);
    let no_funcs: std::sync::Arc<[u64]> = std::sync::Arc::from(Vec::new());
    let exact = |r: &(usize, usize), pool: &HashMap<String, String>| -> Sig {
        let s = shape(r);
        let t = &procs[r.0].transactions[r.1];
        let caller = t.link.caller.clone();
        Sig {
            port: t.service.clone(),
            // The libc calls a request made are a stand-in for the program's functions;
            // the type of the request that sent it, where known, is a better one.
            funcs: if event_loop || (!program && caller.is_some()) {
                no_funcs.clone()
            } else if program {
                s.funcs.clone()
            } else {
                s.libs.clone()
            },
            caller,
            calls: pooled(&s.calls, pool)
                .into_iter()
                .map(|c| (c.0, c.1))
                .collect(),
        }
    };
    let none = HashMap::new();
    let exact_sigs: Vec<Sig> = served.iter().map(|r| exact(r, &none)).collect();
    let pool = pools(&exact_sigs, peer_exe);
    drop(exact_sigs);
    let sigs: Vec<Sig> = served
        .iter()
        .map(|r| {
            let mut s = exact(r, &pool);
            for c in s.calls.iter_mut() {
                c.1 = count_class(c.1);
            }
            s
        })
        .collect();
    // Size classes per signature: requests, then replies within each request class.
    let mut by_sig: BTreeMap<&Sig, Vec<usize>> = BTreeMap::new();
    for (n, s) in sigs.iter().enumerate() {
        by_sig.entry(s).or_default().push(n);
    }
    let mut keys: Vec<Option<Key>> = vec![None; served.len()];
    for (sig, members) in &by_sig {
        let req = size_classes(
            &members
                .iter()
                .map(|&n| shape(&served[n]).req_bytes)
                .collect::<Vec<_>>(),
        );
        let mut by_req: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
        for (m, &n) in members.iter().enumerate() {
            by_req.entry(req[m]).or_default().push(n);
        }
        for (rq, ms) in by_req {
            let rep = size_classes(
                &ms.iter()
                    .map(|&n| shape(&served[n]).reply_bytes)
                    .collect::<Vec<_>>(),
            );
            for (m, &n) in ms.iter().enumerate() {
                keys[n] = Some(Key {
                    sig: (*sig).clone(),
                    req: rq,
                    reply: rep[m],
                });
            }
        }
    }
    let keys: Vec<Key> = keys
        .into_iter()
        .map(|k| k.expect("every request classed"))
        .collect();
    // Requests and intervals per key.
    let mut stats: BTreeMap<&Key, (u64, HashSet<i64>)> = BTreeMap::new();
    for (n, k) in keys.iter().enumerate() {
        let (i, t) = served[n];
        let e = stats.entry(k).or_default();
        e.0 += 1;
        e.1.insert(grid.index(procs[i].transactions[t].end_ns));
    }
    let mut ranked: Vec<(&Key, u64, usize)> =
        stats.iter().map(|(k, v)| (*k, v.0, v.1.len())).collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    // Per port (one program may serve several, as several tiers): the types frequent
    // enough to estimate, at most MAX_TYPES, and at least the most frequent one.
    let mut port_total: HashMap<&str, u64> = HashMap::new();
    for r in &ranked {
        *port_total.entry(r.0.sig.port.as_str()).or_default() += r.1;
    }
    let mut kept: Vec<&Key> = Vec::new();
    for r in &ranked {
        let port = r.0.sig.port.as_str();
        let have = kept.iter().filter(|k| k.sig.port == port).count();
        let estimable = r.2 >= MIN_INTERVALS && r.1 * 100 >= port_total[port];
        if have == 0 || (estimable && have < MAX_TYPES) {
            kept.push(r.0);
        }
    }
    // Each key to a kept type.
    let mut to: HashMap<&Key, usize> = HashMap::new();
    let mut infos: Vec<TypeInfo> = vec![
        TypeInfo {
            event_loop,
            ..Default::default()
        };
        kept.len()
    ];
    for r in &ranked {
        let t = match kept.iter().position(|k| *k == r.0) {
            Some(t) => t,
            None => {
                let t = (0..kept.len())
                    .filter(|&x| kept[x].sig.port == r.0.sig.port)
                    .min_by(|&x, &y| distance(r.0, kept[x]).total_cmp(&distance(r.0, kept[y])))
                    .expect("a kept type");
                infos[t].merged_signatures += 1;
                infos[t].merged_requests += r.1;
                t
            }
        };
        to.insert(r.0, t);
    }
    let ids: Vec<String> = kept.iter().map(|k| type_id(k)).collect();
    // Names: what tells a type apart from the others of its port.
    let mut names: HashMap<u64, &FnName> = HashMap::new();
    for p in procs.iter() {
        for (k, n) in &p.names {
            names.entry(*k).or_insert(n);
        }
    }
    let mut elf = ElfResolver;
    for (t, k) in kept.iter().enumerate() {
        let others: Vec<&&Key> = kept
            .iter()
            .filter(|o| o.sig.port == k.sig.port && *o != k)
            .collect();
        infos[t].name = describe(
            k, &others, &names, &mut elf, program, &served, &keys, procs, &pool,
        );
    }
    for (n, k) in keys.iter().enumerate() {
        let (i, t) = served[n];
        procs[i].transactions[t].service = ids[to[k]].clone();
    }
    ids.into_iter().zip(infos).collect()
}

fn type_id(k: &Key) -> String {
    let mut h = str_hash(k.sig.port.as_bytes());
    if let Some(c) = &k.sig.caller {
        h = mix(h, str_hash(c.as_bytes()));
    }
    for f in k.sig.funcs.iter() {
        h = mix(h, *f);
    }
    for (p, c) in &k.sig.calls {
        h = mix(mix(h, str_hash(p.as_bytes())), *c as u64);
    }
    h = mix(mix(h, k.req as u64), k.reply as u64);
    format!("{}#{:08x}", k.sig.port, (h ^ (h >> 32)) as u32)
}

#[allow(clippy::too_many_arguments)]
fn describe(
    k: &Key,
    others: &[&&Key],
    names: &HashMap<u64, &FnName>,
    elf: &mut ElfResolver,
    program: bool,
    served: &[(usize, usize)],
    keys: &[Key],
    procs: &[&mut ProcessTransactions],
    pool: &HashMap<String, String>,
) -> String {
    let mut parts = Vec::new();
    if let Some(c) = k
        .sig
        .caller
        .as_deref()
        .filter(|_| others.iter().any(|o| o.sig.caller != k.sig.caller))
    {
        let (ty, n) = c.rsplit_once('/').unwrap_or((c, "0"));
        let n: usize = n.parse().unwrap_or(0);
        parts.push(format!("call {} of a `{ty}` request", n + 1));
    }
    // Functions of this type missing from the most other types.
    let mut own: Vec<(usize, u64)> = k
        .sig
        .funcs
        .iter()
        .map(|f| {
            (
                others
                    .iter()
                    .filter(|o| o.sig.funcs.binary_search(f).is_ok())
                    .count(),
                *f,
            )
        })
        .filter(|(n, _)| *n < others.len())
        .collect();
    own.sort();
    let fname = |f: u64, elf: &mut ElfResolver| -> Option<String> {
        Some(match names.get(&f)? {
            FnName::C(s) => elf
                .resolve(s)
                .split(" (")
                .next()
                .unwrap_or_default()
                .to_string(),
            FnName::Py(s) => s.clone(),
            FnName::Lib(s) => s.to_string(),
        })
    };
    let shown: Vec<String> = own
        .iter()
        .take(2)
        .filter_map(|(_, f)| fname(*f, elf))
        .map(|n| format!("`{n}`"))
        .collect();
    if !shown.is_empty() {
        let more = own.len().saturating_sub(shown.len());
        parts.push(format!(
            "{} {}{}",
            if program { "handler calls" } else { "calls" },
            shown.join(", "),
            if more > 0 {
                format!(" (+{more} more)")
            } else {
                String::new()
            }
        ));
    }
    // Downstream calls, with the mean reply size of those of this key.
    let mut reply_bytes: HashMap<String, (u64, u64)> = HashMap::new();
    for (n, key) in keys.iter().enumerate() {
        if key != k {
            continue;
        }
        let (i, t) = served[n];
        if let Some(s) = procs[i].transactions[t].shape.as_deref() {
            for c in pooled(&s.calls, pool) {
                let e = reply_bytes.entry(c.0).or_default();
                e.0 += c.2;
                e.1 += c.1 as u64;
            }
        }
    }
    for (peer, c) in &k.sig.calls {
        let n = match c {
            0..=4 => c.to_string(),
            5 => "5–7".to_string(),
            _ => format!("{}–{}", 1u64 << (c - 3), (1u64 << (c - 2)) - 1),
        };
        let rb = reply_bytes
            .get(peer.as_str())
            .map(|&(b, m)| b / m.max(1))
            .unwrap_or(0);
        parts.push(format!(
            "→ {n}× {peer} ({} reply)",
            bytes(log2(rb).round() as i32)
        ));
    }
    if k.sig.calls.is_empty() && others.iter().any(|o| !o.sig.calls.is_empty()) {
        parts.push("no downstream call".into());
    }
    parts.push(format!(
        "request ~{}, reply ~{}",
        bytes(k.req),
        bytes(k.reply)
    ));
    format!("{}: {}", k.sig.port, parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(port: &str, funcs: &[u64], calls: &[(&str, u32)]) -> Sig {
        Sig {
            port: port.into(),
            caller: None,
            funcs: funcs.into(),
            calls: calls.iter().map(|c| (c.0.to_string(), c.1)).collect(),
        }
    }

    #[test]
    fn peers_used_interchangeably_by_one_executable_are_one_pool() {
        let exe: HashMap<String, String> = [
            ("peer:1", "app"),
            ("peer:2", "app"),
            ("peer:3", "app"),
            ("peer:7", "app"),
            ("peer:5", "db"),
            ("peer:6", "cache"),
        ]
        .iter()
        .map(|(p, e)| (p.to_string(), e.to_string()))
        .collect();
        let sigs = vec![
            // Round-robin: the same request to 1, 2 or 3; a heavier one to 1 or 2 only.
            sig("port:80", &[1], &[("peer:1", 1)]),
            sig("port:80", &[1], &[("peer:2", 1)]),
            sig("port:80", &[2], &[("peer:3", 1)]),
            sig("port:80", &[2], &[("peer:1", 1)]),
            // One database and one cache: different executables, never a pool.
            sig("port:80", &[3], &[("peer:5", 1)]),
            sig("port:80", &[3], &[("peer:6", 1)]),
            // 7 runs the same executable but is never called in another's place.
            sig("port:80", &[4], &[("peer:7", 2)]),
            sig("port:80", &[5], &[("peer:1", 2)]),
        ];
        let p = pools(&sigs, &exe);
        let pool = "pool(peer:1, peer:2, peer:3)";
        for m in ["peer:1", "peer:2", "peer:3"] {
            assert_eq!(p.get(m).map(String::as_str), Some(pool), "{p:?}");
        }
        assert!(!p.contains_key("peer:5") && !p.contains_key("peer:6"));
        assert!(!p.contains_key("peer:7"), "{p:?}");
        // Calls to members of one pool add up.
        let c = pooled(
            &[
                ("peer:1".into(), 1, 10),
                ("peer:2".into(), 2, 30),
                ("peer:5".into(), 1, 5),
            ],
            &p,
        );
        assert_eq!(c, vec![("peer:5".into(), 1, 5), (pool.into(), 3, 40)]);
    }

    #[test]
    fn sizes_are_cut_at_gaps_of_more_than_a_factor_two() {
        let c = size_classes(&[100, 110, 120, 1000, 1100, 105]);
        assert_eq!(c[0], c[1]);
        assert_eq!(c[0], c[5]);
        assert_eq!(c[3], c[4]);
        assert_ne!(c[0], c[3]);
        assert_eq!(c[3], 10);
    }
}
