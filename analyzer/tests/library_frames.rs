//! Python library frames are collapsed like libc is for C (`TreeOptions::collapse_library`):
//! a chain of standard-library frames and builtins is one node, the outermost, called from
//! user code or from the thread root; what is recorded beneath it — library calls, and user
//! functions called back from library code — stays visible, attached to the nearest frame
//! above with a node.

use analyzer::decode::{ProcessTrace, TraceBuilder};
use analyzer::symbolize::is_stdlib_file;
use analyzer::trees::{CallTree, TreeOptions, ROOT};
use analyzer::units::{process_units, NameSrc, ProcessUnits, UnitKind};
use bufpool::format::{py_site, CodeKind, CodeRecord, LibFn, LibOpts, Meta};
use std::collections::BTreeSet;

const MAIN: u32 = 1;
const RUN_FOREVER: u32 = 2;
const RUN_ONCE: u32 = 3;
const HANDLE_RUN: u32 = 4;
const ON_DATA: u32 = 5;
const RECV: u32 = 6;
const FIND_AND_LOAD: u32 = 7;
const FIND_SPEC: u32 = 8;
const STAT: u32 = 9;
const POLL: u32 = 10;
const THIRD_PARTY: u32 = 11;

fn code(t: &mut TraceBuilder, index: u32, kind: CodeKind, name: &str, file: &str) {
    t.meta(&Meta::Code(CodeRecord {
        index,
        kind,
        first_line: if kind == CodeKind::PyCode { 10 } else { 0 },
        name: name.as_bytes().to_vec(),
        file: file.as_bytes().to_vec(),
    }));
}

fn code_table(t: &mut TraceBuilder) {
    use CodeKind::*;
    let lib = "/usr/lib/python3.12/asyncio/";
    code(t, MAIN, PyCode, "app.main", "/srv/app.py");
    let run_forever = format!("{lib}base_events.py");
    code(t, RUN_FOREVER, PyCode, "asyncio.run_forever", &run_forever);
    code(t, RUN_ONCE, PyCode, "asyncio._run_once", &run_forever);
    code(
        t,
        HANDLE_RUN,
        PyCode,
        "asyncio.Handle._run",
        &format!("{lib}events.py"),
    );
    code(t, ON_DATA, PyCode, "app.on_data", "/srv/app.py");
    code(t, RECV, PyBuiltin, "_socket.socket.recv", "");
    code(
        t,
        FIND_AND_LOAD,
        PyCode,
        "importlib._bootstrap._find_and_load",
        "<frozen importlib._bootstrap>",
    );
    code(
        t,
        FIND_SPEC,
        PyCode,
        "importlib._bootstrap._find_spec",
        "<frozen importlib._bootstrap>",
    );
    code(t, STAT, PyBuiltin, "posix.stat", "");
    code(t, POLL, PyBuiltin, "select.epoll.poll", "");
    code(
        t,
        THIRD_PARTY,
        PyCode,
        "vendored.find_spec",
        "/usr/lib/python3.12/site-packages/vendored/__init__.py",
    );
}

fn o(fd: i32, ret: i64, len: u64) -> LibOpts {
    LibOpts {
        fd: Some(fd),
        ret: Some(ret),
        len: Some(len),
        ..Default::default()
    }
}

/// The nodes of a tree as paths of callee names from the unit's root (`a/b/c`).
fn paths(u: &ProcessUnits, t: &CallTree) -> BTreeSet<String> {
    let name = |k: u64| match u.names.names.get(&k) {
        Some(NameSrc::Text(s)) => s.split(" (").next().unwrap_or(s).to_string(),
        _ => format!("#{k:x}"),
    };
    t.nodes
        .keys()
        .map(|&id| {
            let mut parts = Vec::new();
            let mut at = id;
            while at != ROOT {
                let n = &t.nodes[&at];
                parts.push(name(n.key.callee));
                at = n.parent;
            }
            parts.reverse();
            parts.join("/")
        })
        .collect()
}

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// One thread, no event loop: `app.main` imports a module (the import machinery calls a
/// third-party finder back) and runs an asyncio-like loop whose callback receives.
fn one_thread() -> ProcessTrace {
    let mut t = TraceBuilder::new("h", 3, 3);
    code_table(&mut t);
    t.py_call(0, MAIN);
    // import: _find_and_load → _find_spec → posix.stat (→ a libc read, say), and a finder
    // from site-packages called back from _find_spec.
    t.py_call(py_site(MAIN, 2), FIND_AND_LOAD);
    t.py_call(py_site(FIND_AND_LOAD, 7), FIND_SPEC);
    t.py_ccall(py_site(FIND_SPEC, 3), STAT);
    t.lib(0x50, LibFn::Read, o(7, 10, 10));
    t.py_creturn(STAT);
    t.py_call(py_site(FIND_SPEC, 9), THIRD_PARTY);
    t.py_return(THIRD_PARTY);
    t.py_return(FIND_SPEC);
    t.py_return(FIND_AND_LOAD);
    // run_forever → _run_once → Handle._run → app.on_data → recv (builtin → libc).
    t.py_call(py_site(MAIN, 4), RUN_FOREVER);
    t.py_call(py_site(RUN_FOREVER, 5), RUN_ONCE);
    t.lib(0x60, LibFn::Close, o(9, 0, 0));
    t.py_call(py_site(RUN_ONCE, 8), HANDLE_RUN);
    t.py_call(py_site(HANDLE_RUN, 1), ON_DATA);
    t.py_ccall(py_site(ON_DATA, 6), RECV);
    t.lib(0x70, LibFn::Recv, o(4, 8, 8));
    t.py_creturn(RECV);
    t.py_return(ON_DATA);
    t.py_return(HANDLE_RUN);
    t.py_return(RUN_ONCE);
    t.py_return(RUN_FOREVER);
    t.py_return(MAIN);
    t.finish()
}

#[test]
fn library_chains_collapse_and_what_they_record_stays_visible() {
    let p = one_thread();
    let u = process_units(&p, &TreeOptions::default()).unwrap();
    assert_eq!(u.units.len(), 1);
    assert_eq!(u.units[0].info.kind, UnitKind::Initializer);
    assert_eq!(
        paths(&u, &u.units[0].tree),
        set(&[
            "app.main",
            // The import chain is one node; the read made deep inside it attaches to it,
            // and the third-party finder it called back stays visible under it.
            "app.main/importlib._bootstrap._find_and_load",
            "app.main/importlib._bootstrap._find_and_load/read",
            "app.main/importlib._bootstrap._find_and_load/vendored.find_spec",
            // run_forever → _run_once → Handle._run → on_data becomes run_forever → on_data;
            // _run_once's close attaches to run_forever.
            "app.main/asyncio.run_forever",
            "app.main/asyncio.run_forever/close",
            "app.main/asyncio.run_forever/app.on_data",
            // A builtin called from user code is a node; libc's recv under it.
            "app.main/asyncio.run_forever/app.on_data/_socket.socket.recv",
            "app.main/asyncio.run_forever/app.on_data/_socket.socket.recv/recv",
        ])
    );

    // Without collapsing, every frame has its node.
    let full = process_units(
        &p,
        &TreeOptions {
            collapse_library: false,
            ..TreeOptions::default()
        },
    )
    .unwrap();
    let all = paths(&full, &full.units[0].tree);
    assert_eq!(all.len(), 13, "{all:#?}");
    assert!(all.contains(
        "app.main/asyncio.run_forever/asyncio._run_once/asyncio.Handle._run/app.on_data"
    ));
    assert!(all.contains(
        "app.main/importlib._bootstrap._find_and_load/importlib._bootstrap._find_spec/\
         posix.stat/read"
    ));
}

/// A library frame at the thread root (the tracer started inside the import machinery) is
/// kept: it is the outermost of its chain.
#[test]
fn a_library_frame_at_the_root_is_kept() {
    let mut t = TraceBuilder::new("h", 3, 3);
    code_table(&mut t);
    t.py_call(py_site(MAIN, 1), FIND_AND_LOAD);
    t.py_call(py_site(FIND_AND_LOAD, 7), FIND_SPEC);
    t.lib(0x50, LibFn::Read, o(7, 10, 10));
    t.py_return(FIND_SPEC);
    t.py_return(FIND_AND_LOAD);
    let p = t.finish();
    let u = process_units(&p, &TreeOptions::default()).unwrap();
    assert_eq!(
        paths(&u, &u.units[0].tree),
        set(&[
            "importlib._bootstrap._find_and_load",
            "importlib._bootstrap._find_and_load/read",
        ])
    );
}

/// An asyncio-like event loop in library code: the loop frame is `run_forever`; handler
/// units start under it, where `_run_once` and `Handle._run` have no node, so the user
/// callback is at the top of each handler's tree, and the loop units keep the wait.
#[test]
fn handlers_of_a_library_event_loop_start_at_the_user_callback() {
    let mut t = TraceBuilder::new("h", 3, 3);
    code_table(&mut t);
    t.py_call(0, MAIN);
    t.lib(0x10, LibFn::Socket, o(-1, 4, 0));
    t.lib(0x20, LibFn::Connect, o(4, 0, 0));
    t.py_call(py_site(MAIN, 4), RUN_FOREVER);
    for _ in 0..4 {
        t.py_call(py_site(RUN_FOREVER, 5), RUN_ONCE);
        t.py_ccall(py_site(RUN_ONCE, 2), POLL);
        t.lib(0x30, LibFn::EpollWait, o(3, 1, 0));
        t.py_creturn(POLL);
        t.py_call(py_site(RUN_ONCE, 8), HANDLE_RUN);
        t.py_call(py_site(HANDLE_RUN, 1), ON_DATA);
        t.py_ccall(py_site(ON_DATA, 6), RECV);
        t.lib(0x70, LibFn::Recv, o(4, 8, 8));
        t.py_creturn(RECV);
        t.py_return(ON_DATA);
        t.py_return(HANDLE_RUN);
        t.py_return(RUN_ONCE);
    }
    t.py_return(RUN_FOREVER);
    t.py_return(MAIN);
    let p = t.finish();
    let u = process_units(&p, &TreeOptions::default()).unwrap();
    let handlers: Vec<_> = u
        .units
        .iter()
        .filter(|x| x.info.kind == UnitKind::Handler)
        .collect();
    // Every receive starts a handler (the first one ends the initializer).
    assert_eq!(handlers.len(), 4);
    for h in &handlers {
        assert_eq!(
            paths(&u, &h.tree),
            set(&[
                "app.on_data",
                "app.on_data/_socket.socket.recv",
                "app.on_data/_socket.socket.recv/recv",
            ])
        );
    }
    for l in u.units.iter().filter(|x| x.info.kind == UnitKind::Loop) {
        assert_eq!(paths(&u, &l.tree), set(&["epoll_wait"]));
    }
}

#[test]
fn standard_library_files() {
    for f in [
        "<frozen importlib._bootstrap>",
        "<frozen os>",
        "/usr/lib/python3.12/asyncio/base_events.py",
        "/usr/lib64/python3.9/socket.py",
        "/root/.pyenv/versions/3.11.7/lib/python3.11/json/decoder.py",
        "/opt/py/lib/python3.13t/selectors.py",
    ] {
        assert!(is_stdlib_file(f.as_bytes()), "{f}");
    }
    for f in [
        "",
        "<string>",
        "/srv/app.py",
        "/usr/lib/python3.12/site-packages/requests/api.py",
        "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/_distutils_hack/__init__.py",
        "/usr/lib/python3/dist-packages/yaml/__init__.py",
        "/home/u/venv/lib/python3.12/site-packages/x.py",
        "/home/u/mylib/python3.12/x.py",
        "/home/u/lib/python/x.py",
        "/home/u/lib/pythonic/x.py",
    ] {
        assert!(!is_stdlib_file(f.as_bytes()), "{f}");
    }
}
