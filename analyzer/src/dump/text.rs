//! An entry as one text line (`culprit dump`).

use super::line::{kind_name, lossy, reason, Line};
use crate::error::Error;
use bufpool::format::{EntryRef, Kind, LibOpts, Meta};
use bufpool::inject::errno_name;

impl Line<'_> {
    /// The entry as a text line (without its newline).
    pub(super) fn text(&self, e: &EntryRef<'_>, depth: u32) -> Result<String, Error> {
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
            Kind::PyReturn => format!(
                "← {}{}",
                self.name(e),
                if e.aux == 2 { " (suspended)" } else { "" }
            ),
            Kind::PyCReturn => format!(
                "← {}{}",
                self.name(e),
                match e.aux {
                    0 => "",
                    2 => " (suspended)",
                    _ => " (raised)",
                }
            ),
            Kind::PyExc => format!("! {} raised {}", self.name(e), self.syms.py_name(e.caller)),
            Kind::LibEnter | Kind::LibExit => {
                let o = self.opts(e)?;
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
            _ => match self.meta(e)? {
                Some(m) => meta_text(&m),
                None => kind_name(e.kind).to_string(),
            },
        };
        Ok(format!("{t} {who:>13} {depth:>3} {ind}{body}"))
    }
}

/// The options of a library call as `key=value, …`.
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

/// A metadata record as a `# …` line.
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
        Meta::Inject(i) if i.func == bufpool::inject::PY_FUNC_ID => format!(
            "# injected by rule {} ({}): the Python function raised instead of running",
            i.rule,
            lossy(&i.spec)
        ),
        Meta::Inject(i) => format!(
            "# injected by rule {} ({}): {}",
            i.rule,
            lossy(&i.spec),
            injected(i)
        ),
        Meta::Filter(f) => format!(
            "# filters: depth ≤ {}, excluded {:?}",
            f.depth_limit,
            lossy(&f.excluded)
        ),
    }
}

/// What an injection did to the call, as its rule's effect says: a call that was not made
/// has no real result to show (the record's `original_ret` is -1 then).
fn injected(i: &bufpool::format::InjectRecord) -> String {
    use bufpool::inject::Effect;
    let errno = |e: i32| match bufpool::inject::errno_name(e) {
        Some(n) => format!("{n} ({e})"),
        None => format!("errno {e}"),
    };
    let effect = std::str::from_utf8(&i.spec)
        .ok()
        .and_then(|s| bufpool::inject::parse_spec(s).ok())
        .map(|s| s.effect);
    let fd = i.fd;
    match effect {
        Some(Effect::Errno(_)) => format!(
            "fd {fd} failed with {} without the call being made",
            errno(i.forced_errno)
        ),
        Some(Effect::Close) => format!(
            "fd {fd} shut down; the call failed with {} without being made",
            errno(i.forced_errno)
        ),
        Some(Effect::Eof) => format!("fd {fd} saw end of stream (0) without the call being made"),
        Some(Effect::Signal(sig)) => {
            format!("signal {sig} sent to the process at a call on fd {fd}")
        }
        Some(Effect::Delay(ns)) => format!(
            "fd {fd} delayed {:.3} s, then the call returned {}",
            ns as f64 / 1e9,
            i.forced_ret
        ),
        Some(Effect::Corrupt(_)) => format!(
            "fd {fd} returned {}, its first bytes inverted",
            i.forced_ret
        ),
        _ => {
            let instead = if i.forced_ret == i.original_ret {
                String::new()
            } else {
                format!(" instead of {}", i.original_ret)
            };
            let err = if i.forced_errno != 0 {
                format!(", {}", errno(i.forced_errno))
            } else {
                String::new()
            };
            format!("fd {fd} returned {}{instead}{err}", i.forced_ret)
        }
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

    /// A call the injection did not let happen shows no real result ("returned -1
    /// instead of -1" said the opposite); one it changed shows both.
    #[test]
    fn an_injection_says_whether_the_call_was_made() {
        let rec = |spec: &str, original_ret: i64, forced_ret: i64, forced_errno: i32| {
            injected(&bufpool::format::InjectRecord {
                rule: 0,
                func: bufpool::format::LibFn::Recv.id() as u16,
                fd: 5,
                original_ret,
                forced_ret,
                forced_errno,
                spec: spec.as_bytes().to_vec(),
            })
        };
        assert_eq!(
            rec("recv:errno=ECONNRESET,nth=3", -1, -1, 104),
            "fd 5 failed with ECONNRESET (104) without the call being made"
        );
        assert_eq!(
            rec("recv:eof,nth=3", -1, 0, 0),
            "fd 5 saw end of stream (0) without the call being made"
        );
        assert_eq!(
            rec("recv:short=10,nth=3", 300, 10, 0),
            "fd 5 returned 10 instead of 300"
        );
        assert_eq!(
            rec("recv:corrupt=4,nth=3", 300, 300, 0),
            "fd 5 returned 300, its first bytes inverted"
        );
        assert_eq!(
            rec("recv:delay=2s,nth=3", 300, 300, 0),
            "fd 5 delayed 2.000 s, then the call returned 300"
        );
        // A rule this build cannot read: the values as recorded.
        assert_eq!(
            rec("recv:new-effect", -1, -1, 11),
            "fd 5 returned -1, EAGAIN (11)"
        );
    }
}
