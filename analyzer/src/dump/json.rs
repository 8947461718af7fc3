//! An entry as one JSON object (`culprit dump --json`).

use super::line::{kind_name, lossy, moved_bytes, reason, Line};
use crate::error::Error;
use bufpool::format::{EntryRef, Kind, LibFn, LibOpts, Meta, ADDR_MASK};
use bufpool::inject::errno_name;
use serde_json::{json, Map, Value};

impl Line<'_> {
    /// The entry as a JSON object.
    pub(super) fn json(&self, e: &EntryRef<'_>, depth: u32) -> Result<Value, Error> {
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
                    o.insert("raised".into(), json!(e.aux != 0 && e.aux != 2));
                }
                if e.aux == 2 {
                    // A greenlet switched out: its open calls are reported as returns.
                    o.insert("suspended".into(), json!(true));
                }
            }
            Kind::LibEnter | Kind::LibExit => {
                let opts = self.opts(e)?;
                o.insert(
                    "caller".into(),
                    json!(format!("0x{:x}", e.caller & ADDR_MASK)),
                );
                if e.caller != 0 {
                    o.insert("caller_name".into(), json!(self.syms.c_name(e.caller)));
                    if let Some((module, rel)) = self.syms.c_place(e.caller & ADDR_MASK) {
                        o.insert("caller_module".into(), json!(module));
                        o.insert("caller_offset".into(), json!(format!("0x{rel:x}")));
                    }
                }
                lib_json(&mut o, e.lib_fn(), &opts);
            }
            Kind::Lost => {
                o.insert("count".into(), json!(e.lost));
            }
            _ => {
                if let Some(m) = self.meta(e)? {
                    meta_json(&mut o, &m);
                }
            }
        }
        Ok(Value::Object(o))
    }
}

/// The options of a library call as fields of `o`.
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

/// The fields of a metadata record, into `o`.
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
            "func": bufpool::inject::record_func_name(i.func), "fd": i.fd,
            "original_ret": i.original_ret, "forced_ret": i.forced_ret,
            "forced_errno": i.forced_errno, "spec": lossy(&i.spec)}),
        Meta::Filter(f) => json!({"depth_limit": f.depth_limit, "clock_mode": f.clock_mode,
            "excluded": lossy(&f.excluded)}),
    };
    if let Value::Object(m) = v {
        o.extend(m);
    }
}
