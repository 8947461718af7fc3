//! `culprit dump` — print every recorded entry of a trace directory, thread by thread,
//! in order: wall-clock time, pid/tid, call depth, function name, arguments, result.
//!
//! Names: library calls by their fixed id; Python code and builtins from the `Meta::Code`
//! records of the trace; C addresses through `analyzer::symbolize` — the recorded memory
//! map (`Meta::Map`) places an address in its file, whose ELF symbols and DWARF give
//! `function (file:line)`; else `file+0xoffset`, or the raw address outside every mapping.

use analyzer::symbolize::{CSym, ElfResolver, ProcessSymbols};
use bufpool::format::{CodeKind, EntryRef, Kind, LibFn, LibOpts, Meta, ProcReason, ADDR_MASK};
use bufpool::inject::errno_name;
use bufpool::Calibration;
use reader::{ThreadKey, TraceDir};
use serde_json::{json, Map, Value};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `culprit dump`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The trace directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Only this process (repeatable).
    #[arg(long, value_name = "PID")]
    pub pid: Vec<u32>,
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
    /// Any damaged or missing part of a trace is an error (by default it is skipped
    /// with one warning line per file).
    #[arg(long)]
    pub strict: bool,
}

/// Runs `culprit dump`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    reader::tracedir::set_strict_default(args.strict);
    let trace = TraceDir::open(&args.dir)?;
    if !trace.manifest().complete {
        eprintln!(
            "culprit: warning: {}: the reader did not finish; the trace may be incomplete",
            args.dir.display()
        );
    }
    if let Some(&missing) = args.pid.iter().find(|p| !trace.pids().contains(p)) {
        anyhow::bail!(
            "{}: no process {missing} in this trace (processes: {})",
            args.dir.display(),
            trace
                .pids()
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    let calib = trace.calibration();
    let syms = process_symbols(&trace)?;
    let namer = Namer::default();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for k in trace.threads().collect::<Vec<_>>() {
        if !args.pid.is_empty() && !args.pid.contains(&k.pid) {
            continue;
        }
        let proc_syms = syms.get(&(k.pid, k.start_ticks));
        if !args.json {
            writeln!(out, "# pid {} tid {}", k.pid, k.tid)?;
        }
        let mut depth: u32 = 0;
        for c in trace.chunks(k) {
            let c = c?;
            for e in c.entries() {
                let e = e?;
                // The tables of the program image the process ran then (it may have exec'd).
                let symbols = Symbols {
                    ps: proc_syms.map(|p| p.at(e.tsc)),
                    namer: &namer,
                };
                let line = Line {
                    key: k,
                    seq: c.info.seq,
                    calib: &calib,
                    syms: &symbols,
                };
                if matches!(e.kind, Kind::FnExit | Kind::PyReturn | Kind::PyCReturn) {
                    depth = depth.saturating_sub(1);
                }
                if args.json {
                    serde_json::to_writer(&mut out, &line.json(&e, depth)?)
                        .map_err(std::io::Error::from)?;
                    writeln!(out)?;
                } else {
                    writeln!(out, "{}", line.text(&e, depth)?)?;
                }
                if e.kind.is_call_shaped() && e.kind != Kind::PyExc {
                    depth += 1;
                }
            }
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The symbol tables of every process, from the `Meta::Map`, `Meta::Code` and `Meta::Proc`
/// records of all its threads, one table per program image (an exec starts a new one). A
/// forked child records no memory map of its own until it execs (it runs its parent's image
/// as it was at the fork), so that image starts from its parent's tables.
fn process_symbols(trace: &TraceDir) -> anyhow::Result<HashMap<(u32, u64), ProcessSymbols>> {
    struct Found {
        metas: Vec<(u64, Meta)>,
        forked_from: Option<(u32, u64)>,
    }
    let mut found: BTreeMap<(u64, u32), Found> = BTreeMap::new();
    for k in trace.threads().collect::<Vec<_>>() {
        let f = found.entry((k.start_ticks, k.pid)).or_insert(Found {
            metas: Vec::new(),
            forked_from: None,
        });
        trace.for_each_entry(k, |_, e| {
            if matches!(e.kind, Kind::MetaMap | Kind::MetaCode | Kind::MetaProc) {
                match e.meta() {
                    Ok(Some(Meta::Proc(p)))
                        if p.reason == ProcReason::Fork && f.forked_from.is_none() =>
                    {
                        f.forked_from = Some((p.ppid, e.tsc));
                    }
                    Ok(Some(m)) => f.metas.push((e.tsc, m)),
                    _ => {}
                }
            }
            Ok(())
        })?;
    }
    // Parents start before their children: build in start-time order.
    let mut latest: HashMap<u32, (u64, u32)> = HashMap::new();
    let mut out: HashMap<(u32, u64), ProcessSymbols> = HashMap::new();
    for ((start, pid), mut f) in found {
        // Threads were read one after another: the exec record must come before the new
        // image's records, as it did in time.
        f.metas.sort_by_key(|(tsc, _)| *tsc);
        let mut ps = ProcessSymbols::default();
        for (tsc, m) in &f.metas {
            ps.add_at(m, *tsc);
        }
        if let Some((ppid, at)) = f.forked_from {
            if let Some(parent) = latest.get(&ppid).and_then(|&(s, p)| out.get(&(p, s))) {
                ps.inherit(parent.at(at));
            }
        }
        out.insert((pid, start), ps);
        latest.insert(pid, (start, pid));
    }
    Ok(out)
}

/// Resolves C addresses through ELF symbols and DWARF, with one cache for the whole run.
#[derive(Default)]
struct Namer {
    elf: RefCell<ElfResolver>,
    cache: RefCell<HashMap<CSym, String>>,
}

/// Names in one process: its tables (if any were recorded) and the shared resolver.
/// C addresses become `function (file:line)` from the ELF symbol tables and DWARF of the
/// recorded mappings (or `file+0xoffset` when the file has no symbols or is gone);
/// Python indices their `module.qualname` from the `Meta::Code` records.
struct Symbols<'a> {
    ps: Option<&'a ProcessSymbols>,
    namer: &'a Namer,
}

impl Symbols<'_> {
    /// The name of a C address.
    fn c_name(&self, addr: u64) -> String {
        let Some(ps) = self.ps else {
            return format!("0x{addr:x}");
        };
        let sym = ps.name_c(addr);
        if let Some(n) = self.namer.cache.borrow().get(&sym) {
            return n.clone();
        }
        let n = self.namer.elf.borrow_mut().resolve(&sym);
        self.namer.cache.borrow_mut().insert(sym, n.clone());
        n
    }

    fn code(&self, index: u64) -> Option<&bufpool::format::CodeRecord> {
        self.ps.and_then(|p| p.code(index as u32))
    }

    /// `module.qualname`, or `py#N` when the index was never named.
    fn py_name(&self, index: u64) -> String {
        match self.code(index) {
            Some(c) => String::from_utf8_lossy(&c.name).into_owned(),
            None => format!("py#{index}"),
        }
    }

    /// `file:line` of a Python code object, if known.
    fn py_where(&self, index: u64) -> Option<String> {
        match self.code(index) {
            Some(c) if c.kind == CodeKind::PyCode && !c.file.is_empty() => Some(format!(
                "{}:{}",
                String::from_utf8_lossy(&c.file),
                c.first_line
            )),
            _ => None,
        }
    }

    fn py_site(&self, site: u64) -> String {
        let (code, off) = bufpool::format::py_site_parts(site);
        format!("{}+{}", self.py_name(code as u64), off * 2)
    }
}

struct Line<'a> {
    key: ThreadKey,
    seq: u64,
    calib: &'a Calibration,
    syms: &'a Symbols<'a>,
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::FnEnter => "fn_enter",
        Kind::FnExit => "fn_exit",
        Kind::PyCall => "py_call",
        Kind::PyReturn => "py_return",
        Kind::PyExc => "py_exception",
        Kind::PyCCall => "py_ccall",
        Kind::PyCReturn => "py_creturn",
        Kind::LibEnter => "lib_enter",
        Kind::LibExit => "lib_exit",
        Kind::Lost => "lost",
        Kind::MetaProc => "meta_proc",
        Kind::MetaThread => "meta_thread",
        Kind::MetaMap => "meta_map",
        Kind::MetaCode => "meta_code",
        Kind::MetaClock => "meta_clock",
        Kind::MetaInject => "meta_inject",
        Kind::MetaFilter => "meta_filter",
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Bytes actually moved by a send or receive that returned `ret`.
fn moved_bytes(f: LibFn, o: &LibOpts) -> Option<u64> {
    if f.is_send() || f.is_receive() {
        o.ret.filter(|&r| r >= 0).map(|r| r as u64)
    } else {
        None
    }
}

impl Line<'_> {
    fn name(&self, e: &EntryRef<'_>) -> String {
        match e.kind {
            Kind::FnEnter | Kind::FnExit => self.syms.c_name(e.callee),
            Kind::PyCall | Kind::PyReturn | Kind::PyCCall | Kind::PyCReturn | Kind::PyExc => {
                self.syms.py_name(e.callee)
            }
            Kind::LibEnter | Kind::LibExit => e
                .lib_fn()
                .map_or_else(|| format!("lib#{}", e.callee), |f| f.name().to_string()),
            k => kind_name(k).to_string(),
        }
    }

    fn json(&self, e: &EntryRef<'_>, depth: u32) -> anyhow::Result<Value> {
        let mut o = Map::new();
        o.insert(
            "t_unix_ns".into(),
            json!(self.calib.tsc_to_unix_ns(e.tsc) as i64),
        );
        o.insert("tsc".into(), json!(e.tsc));
        o.insert("pid".into(), json!(self.key.pid));
        o.insert("tid".into(), json!(self.key.tid));
        o.insert("seq".into(), json!(self.seq));
        o.insert("depth".into(), json!(depth));
        o.insert("kind".into(), json!(kind_name(e.kind)));
        o.insert("name".into(), json!(self.name(e)));
        match e.kind {
            Kind::FnEnter => {
                o.insert("callee".into(), json!(format!("0x{:x}", e.callee)));
                o.insert("caller".into(), json!(format!("0x{:x}", e.caller)));
                o.insert("caller_name".into(), json!(self.syms.c_name(e.caller)));
            }
            Kind::FnExit => {
                o.insert("callee".into(), json!(format!("0x{:x}", e.callee)));
            }
            Kind::PyCall | Kind::PyCCall | Kind::PyExc => {
                o.insert("index".into(), json!(e.callee));
                if let Some(w) = self.syms.py_where(e.callee) {
                    o.insert("where".into(), json!(w));
                }
                if e.kind == Kind::PyExc {
                    o.insert("exception".into(), json!(self.syms.py_name(e.caller)));
                } else {
                    o.insert("caller".into(), json!(self.syms.py_site(e.caller)));
                }
            }
            Kind::PyReturn | Kind::PyCReturn => {
                o.insert("index".into(), json!(e.callee));
                if e.kind == Kind::PyCReturn {
                    o.insert("raised".into(), json!(e.aux != 0));
                }
            }
            Kind::LibEnter | Kind::LibExit => {
                let opts = e.opts()?;
                o.insert(
                    "caller".into(),
                    json!(format!("0x{:x}", e.caller & ADDR_MASK)),
                );
                if e.caller != 0 {
                    o.insert("caller_name".into(), json!(self.syms.c_name(e.caller)));
                }
                lib_json(&mut o, e.lib_fn(), &opts);
            }
            Kind::Lost => {
                o.insert("count".into(), json!(e.lost));
            }
            _ => {
                if let Some(m) = e.meta()? {
                    meta_json(&mut o, &m);
                }
            }
        }
        Ok(Value::Object(o))
    }

    fn text(&self, e: &EntryRef<'_>, depth: u32) -> anyhow::Result<String> {
        let t = fmt_time(self.calib.tsc_to_unix_ns(e.tsc));
        let ind = "  ".repeat(depth.min(64) as usize);
        let who = format!("{}/{}", self.key.pid, self.key.tid);
        let body = match e.kind {
            Kind::FnEnter => format!("→ {} (from {})", self.name(e), self.syms.c_name(e.caller)),
            Kind::FnExit => format!("← {}", self.name(e)),
            Kind::PyCall | Kind::PyCCall => {
                let w = self
                    .syms
                    .py_where(e.callee)
                    .map(|w| format!(" [{w}]"))
                    .unwrap_or_default();
                format!(
                    "→ {}{w} (from {})",
                    self.name(e),
                    self.syms.py_site(e.caller)
                )
            }
            Kind::PyReturn => format!("← {}", self.name(e)),
            Kind::PyCReturn => format!(
                "← {}{}",
                self.name(e),
                if e.aux != 0 { " (raised)" } else { "" }
            ),
            Kind::PyExc => format!("! {} raised {}", self.name(e), self.syms.py_name(e.caller)),
            Kind::LibEnter | Kind::LibExit => {
                let o = e.opts()?;
                let args = lib_text(&o);
                if e.kind == Kind::LibEnter {
                    format!("⇢ {}({args})", self.name(e))
                } else {
                    let ret = o.ret.map_or_else(|| "?".into(), |r| r.to_string());
                    let err = match o.errno {
                        Some(n) => format!(" {} ({n})", errno_name(n).unwrap_or("errno")),
                        None => String::new(),
                    };
                    format!("⇠ {}({args}) = {ret}{err}", self.name(e))
                }
            }
            Kind::Lost => format!("!! {} entries lost (pool full)", e.lost),
            _ => match e.meta()? {
                Some(m) => meta_text(&m),
                None => kind_name(e.kind).to_string(),
            },
        };
        Ok(format!("{t} {who:>13} {depth:>3} {ind}{body}"))
    }
}

fn lib_json(o: &mut Map<String, Value>, f: Option<LibFn>, p: &LibOpts) {
    let mut put = |k: &str, v: Value| {
        o.insert(k.into(), v);
    };
    if let Some(v) = p.fd {
        put("fd", json!(v));
    }
    if let Some(v) = p.fd2 {
        put("fd2", json!(v));
    }
    if let Some(v) = p.len {
        put("len", json!(v));
    }
    if let Some(v) = p.ret {
        put("ret", json!(v));
    }
    if let Some(v) = p.errno {
        put("errno", json!(v));
        if let Some(n) = errno_name(v) {
            put("errno_name", json!(n));
        }
    }
    if let Some(b) = f.and_then(|f| moved_bytes(f, p)) {
        put("bytes", json!(b));
    }
    if let Some(v) = p.flags {
        put("flags", json!(v));
    }
    if let Some(a) = &p.local {
        put("local", json!(a.to_display()));
    }
    if let Some(a) = &p.peer {
        put("peer", json!(a.to_display()));
    }
    if let Some(r) = &p.ready {
        let items: Vec<Value> = r
            .items()
            .iter()
            .map(|i| json!({"id": i.id, "events": i.events}))
            .collect();
        put("ready", Value::Array(items));
        put("ready_truncated", json!(r.truncated));
    }
    if p.stack_len > 0 {
        let st: Vec<Value> = p
            .stack()
            .iter()
            .map(|a| json!(format!("0x{a:x}")))
            .collect();
        put("stack", Value::Array(st));
    }
    if let Some(s) = p.str_bytes() {
        put("str", json!(lossy(s)));
    }
    if let Some(v) = p.arg {
        put("arg", json!(v));
    }
    if let Some(v) = p.arg2 {
        put("arg2", json!(v));
    }
    if let Some(v) = p.inject {
        put("inject_rule", json!(v));
    }
    if let Some(v) = p.is_socket {
        put("is_socket", json!(v));
    }
}

fn lib_text(p: &LibOpts) -> String {
    let mut a: Vec<String> = Vec::new();
    if let Some(v) = p.fd {
        a.push(format!("fd={v}"));
    }
    if let Some(v) = p.fd2 {
        a.push(format!("fd2={v}"));
    }
    if let Some(v) = p.len {
        a.push(format!("len={v}"));
    }
    if let Some(v) = p.flags {
        a.push(format!("flags=0x{v:x}"));
    }
    if let Some(x) = &p.local {
        a.push(format!("local={}", x.to_display()));
    }
    if let Some(x) = &p.peer {
        a.push(format!("peer={}", x.to_display()));
    }
    if let Some(r) = &p.ready {
        let items: Vec<String> = r
            .items()
            .iter()
            .map(|i| format!("{}:{:#x}", i.id, i.events))
            .collect();
        a.push(format!(
            "ready=[{}{}]",
            items.join(" "),
            if r.truncated { " …" } else { "" }
        ));
    }
    if let Some(s) = p.str_bytes() {
        a.push(format!("{:?}", lossy(s)));
    }
    if let Some(v) = p.arg {
        a.push(format!("arg={v}"));
    }
    if let Some(v) = p.arg2 {
        a.push(format!("arg2={v}"));
    }
    if let Some(v) = p.inject {
        a.push(format!("INJECTED by rule {v}"));
    }
    if p.stack_len > 0 {
        let st: Vec<String> = p.stack().iter().map(|x| format!("0x{x:x}")).collect();
        a.push(format!("stack=[{}]", st.join(" ")));
    }
    a.join(", ")
}

fn reason(r: ProcReason) -> &'static str {
    match r {
        ProcReason::Start => "start",
        ProcReason::Fork => "fork",
        ProcReason::Exec => "exec",
    }
}

fn meta_json(o: &mut Map<String, Value>, m: &Meta) {
    let v = match m {
        Meta::Proc(p) => json!({"reason": reason(p.reason), "proc_pid": p.pid, "ppid": p.ppid,
            "start_ticks": p.start_ticks, "exe": lossy(&p.exe),
            "argv": p.argv.iter().map(|a| lossy(a)).collect::<Vec<_>>()}),
        Meta::Thread(t) => {
            json!({"thread_tid": t.tid, "thread_pid": t.pid, "thread_name": lossy(&t.name)})
        }
        Meta::Map(r) => {
            json!({"start": format!("0x{:x}", r.start), "end": format!("0x{:x}", r.end),
            "offset": r.offset, "prot": r.prot, "path": lossy(&r.path)})
        }
        Meta::Code(c) => json!({"index": c.index, "code_kind": format!("{:?}", c.kind),
            "code_name": lossy(&c.name), "file": lossy(&c.file), "first_line": c.first_line}),
        Meta::Clock(c) => json!({"clock_tsc": c.tsc, "realtime_ns": c.realtime_ns,
            "monotonic_ns": c.monotonic_ns}),
        Meta::Inject(i) => json!({"rule": i.rule,
            "func": LibFn::from_id(i.func as u64).map(|f| f.name()), "fd": i.fd,
            "original_ret": i.original_ret, "forced_ret": i.forced_ret,
            "forced_errno": i.forced_errno, "spec": lossy(&i.spec)}),
        Meta::Filter(f) => json!({"depth_limit": f.depth_limit, "clock_mode": f.clock_mode,
            "excluded": lossy(&f.excluded)}),
    };
    if let Value::Object(m) = v {
        o.extend(m);
    }
}

fn meta_text(m: &Meta) -> String {
    match m {
        Meta::Proc(p) => format!(
            "# process {} ({}, parent {}): {} {:?}",
            p.pid,
            reason(p.reason),
            p.ppid,
            lossy(&p.exe),
            p.argv.iter().map(|a| lossy(a)).collect::<Vec<_>>()
        ),
        Meta::Thread(t) => format!("# thread {} of {} {:?}", t.tid, t.pid, lossy(&t.name)),
        Meta::Map(r) => format!(
            "# map 0x{:x}-0x{:x} +0x{:x} {}",
            r.start,
            r.end,
            r.offset,
            lossy(&r.path)
        ),
        Meta::Code(c) => format!(
            "# code {} = {} ({}:{})",
            c.index,
            lossy(&c.name),
            lossy(&c.file),
            c.first_line
        ),
        Meta::Clock(c) => format!("# clock tsc {} = {} ns", c.tsc, c.realtime_ns),
        Meta::Inject(i) => format!(
            "# injected by rule {} ({}): fd {} returned {} instead of {}, errno {}",
            i.rule,
            lossy(&i.spec),
            i.fd,
            i.forced_ret,
            i.original_ret,
            i.forced_errno
        ),
        Meta::Filter(f) => format!(
            "# filters: depth ≤ {}, excluded {:?}",
            f.depth_limit,
            lossy(&f.excluded)
        ),
    }
}

/// `HH:MM:SS.nnnnnnnnn` (UTC) of a Unix time in ns.
fn fmt_time(ns: i128) -> String {
    let ns = ns.max(0) as u128;
    let secs = (ns / 1_000_000_000) as u64;
    let frac = (ns % 1_000_000_000) as u64;
    let day = secs % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{frac:09}",
        day / 3600,
        day % 3600 / 60,
        day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_of_day_is_utc() {
        // 2026-11-22T13:37:01.000000042Z
        assert_eq!(fmt_time(1_795_354_621_000_000_042), "13:37:01.000000042");
        assert_eq!(fmt_time(-5), "00:00:00.000000000");
    }

    #[test]
    fn c_addresses_are_named_by_file_and_offset() {
        let mut ps = ProcessSymbols::default();
        ps.add(&Meta::Map(bufpool::format::MapRecord {
            start: 0x5000,
            end: 0x9000,
            offset: 0x1000,
            prot: 5,
            path: b"/usr/bin/demo".to_vec(),
        }));
        let namer = Namer::default();
        let s = Symbols {
            ps: Some(&ps),
            namer: &namer,
        };
        assert_eq!(s.c_name(0x5010), "demo+0x1010");
        assert_eq!(s.c_name(0x9000), "0x9000");
        assert_eq!(s.py_name(3), "py#3");
    }
}
