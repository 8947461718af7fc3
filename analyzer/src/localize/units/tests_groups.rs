//! Tests of process groups (signatures per program, forked processes) and of what a
//! forked child inherits from its parent, and of how a process's trace ends, on hand-built
//! traces.

use super::scan::*;
use super::split::*;
use super::tests::o;
use super::*;
use crate::decode::ProcessTrace;
use crate::decode::TraceBuilder;
use crate::trees::TreeOptions;
use bufpool::format::LibOpts;
use bufpool::format::{LibFn, Meta, ProcReason};

/// Helper processes with no setup call at all (a shell wrapper, `basename`) used to share
/// the empty signature, so their models were merged and each was scored against the
/// other's calls ("`write` expected", "`fork` never seen here"). The program is part of the
/// signature: they form one group per program and score 0 against their own runs.
#[test]
fn programs_without_setup_calls_group_per_program() {
    use bufpool::format::ProcRecord;
    let helper = |pid: u32, exe: &str, calls: &[(u64, LibFn)]| {
        let mut t = TraceBuilder::new("h", pid, pid);
        t.meta(&Meta::Proc(ProcRecord {
            reason: ProcReason::Start,
            pid,
            ppid: 1,
            start_ticks: 0,
            exe: exe.as_bytes().to_vec(),
            argv: vec![exe.as_bytes().to_vec()],
        }));
        for &(site, f) in calls {
            t.lib(site, f, o(1, 0, 0));
        }
        t.finish()
    };
    let run = |base: u32| crate::decode::TraceSet {
        processes: vec![
            helper(
                base,
                "/bin/bash",
                &[(0x10, LibFn::Fork), (0x20, LibFn::Close)],
            ),
            helper(base + 1, "/usr/bin/basename", &[(0x30, LibFn::Write)]),
        ],
    };
    let opts = crate::Options::default();
    let learned = crate::learn(&[run(100), run(200)], &opts).unwrap();
    assert_eq!(learned.model.groups.len(), 2, "one group per program");
    let rep = crate::rank(&learned.model, &run(300), &opts).unwrap();
    assert_eq!(rep.units.len(), 2);
    for u in &rep.units {
        assert_eq!(u.score, 0.0, "{} {:?}", u.info.id, u.why);
    }
    // A forked child that did not exec runs its parent's program.
    assert_eq!(
        program_key("/usr/bin/basename"),
        program_key("/bin/basename")
    );
    assert_ne!(program_key("/bin/bash"), program_key("/usr/bin/basename"));
}

/// A child `pid` of `parent` (pid `ppid`, host "h"), forked now without exec: its
/// builder, with the fork's process record written, and the fork's TSC.
fn forked(parent: &TraceBuilder, ppid: u32, pid: u32) -> (TraceBuilder, u64) {
    use bufpool::format::ProcRecord;
    let at = parent.now();
    let mut child = TraceBuilder::new("h", pid, pid);
    child.wait(at - child.now());
    child.meta(&Meta::Proc(ProcRecord {
        reason: ProcReason::Fork,
        pid,
        ppid,
        start_ticks: 0,
        exe: Vec::new(),
        argv: Vec::new(),
    }));
    (child, at)
}

/// A parent (pid 10) that accepts a connection on descriptor 4, and a child forked
/// after it (no exec, no code table of its own) that polls and reads descriptor 4 three
/// times in `d.handle`: it knows 4 as a socket, and its code, only through its parent.
/// Also the fork's TSC.
pub(crate) fn parent_and_forked_child() -> (Vec<ProcessTrace>, u64) {
    use bufpool::format::{py_site, CodeKind, CodeRecord};
    let code = |index, name: &str| {
        Meta::Code(CodeRecord {
            index,
            kind: CodeKind::PyCode,
            first_line: 1,
            name: name.as_bytes().to_vec(),
            file: b"/srv/d.py".to_vec(),
        })
    };
    let mut parent = TraceBuilder::new("h", 10, 10);
    parent.meta(&code(1, "d.serve"));
    parent.meta(&code(2, "d.handle"));
    parent.lib(0x10, LibFn::Socket, o(-1, 3, 0));
    parent.lib(0x20, LibFn::Listen, o(3, 0, 0));
    parent.lib(0x30, LibFn::Accept, o(3, 4, 0));
    parent.wait(1000);
    let (mut child, fork_at) = forked(&parent, 10, 11);
    child.py_call(0, 1);
    for _ in 0..3 {
        child.lib(0x40, LibFn::Poll, o(-1, 1, 0));
        child.py_call(py_site(1, 4), 2);
        let mut r = o(4, 10, 10);
        r.is_socket = None;
        child.lib(0x50, LibFn::Read, r);
        child.py_return(2);
    }
    (vec![parent.finish(), child.finish()], fork_at)
}

/// A forked child records neither the code table nor the accept of the descriptor it
/// serves: it inherits both from its parent.
#[test]
fn forked_child_inherits_code_table_and_descriptors() {
    let (procs, fork_at) = parent_and_forked_child();
    let refs: Vec<&ProcessTrace> = procs.iter().collect();
    let mut scans: Vec<ProcessScan> = refs.iter().map(|p| scan_process(p).unwrap()).collect();
    assert_eq!(scans[1].forked_from, Some((10, fork_at)));
    inherit(&refs, &mut scans);
    let u = split_process(&procs[1], &scans[1], &TreeOptions::default()).unwrap();
    let handlers: Vec<&Unit> = u
        .units
        .iter()
        .filter(|u| u.info.kind == UnitKind::Handler)
        .collect();
    // read(4) is known as a socket only through the parent's accept.
    assert_eq!(handlers.len(), 3);
    assert_eq!(handlers[0].info.conn.0.len(), 2, "listen + accept stacks");
    let names: Vec<String> = u
        .names
        .names
        .values()
        .filter_map(|n| match n {
            NameSrc::Text(t) => Some(t.clone()),
            NameSrc::C(_) => None,
        })
        .collect();
    assert!(names.iter().any(|n| n.starts_with("d.handle")), "{names:?}");
}

/// A pre-forking server: the parent listens, its forked workers (no exec, so no map of
/// their own) accept. A worker's accept is keyed through the map it inherited, so its
/// connection is the same in a run where ASLR moved the program.
#[test]
fn a_forked_workers_connections_keep_their_keys_when_aslr_moves_the_program() {
    use bufpool::format::MapRecord;
    let conn_of_worker = |base: u64| {
        let mut parent = TraceBuilder::new("h", 10, 10);
        parent.meta(&Meta::Map(MapRecord {
            start: base,
            end: base + 0x10000,
            offset: 0,
            prot: 5,
            path: b"/nonexistent/sbin/prefork".to_vec(),
        }));
        parent.lib(base + 0x10, LibFn::Socket, o(-1, 3, 0));
        parent.lib(base + 0x20, LibFn::Bind, o(3, 0, 0));
        parent.lib(base + 0x30, LibFn::Listen, o(3, 0, 0));
        parent.wait(1000);
        let (mut worker, _) = forked(&parent, 10, 11);
        worker.lib(base + 0x40, LibFn::Accept, o(3, 4, 0));
        for _ in 0..3 {
            worker.lib(base + 0x50, LibFn::Poll, o(-1, 1, 0));
            worker.lib(base + 0x60, LibFn::Recv, o(4, 10, 10));
        }
        let procs = [parent.finish(), worker.finish()];
        let refs: Vec<&ProcessTrace> = procs.iter().collect();
        let mut scans: Vec<ProcessScan> = refs.iter().map(|p| scan_process(p).unwrap()).collect();
        inherit(&refs, &mut scans);
        let u = split_process(&procs[1], &scans[1], &TreeOptions::default()).unwrap();
        let h: Vec<&Unit> = u
            .units
            .iter()
            .filter(|u| u.info.kind == UnitKind::Handler)
            .collect();
        assert!(!h.is_empty());
        assert_eq!(
            h[0].info.conn.0.len(),
            3,
            "bind + listen + the worker's accept"
        );
        h[0].info.conn.clone()
    };
    assert_eq!(
        conn_of_worker(0x5555_0000_0000),
        conn_of_worker(0x5602_1234_0000)
    );
}

/// A subshell (forked, no exec) is not grouped with the script it was forked from, nor
/// with a child that exec'd the same program.
#[test]
fn processes_forked_without_exec_are_marked_in_their_signature() {
    use bufpool::format::ProcRecord;
    let proc_rec = |t: &mut TraceBuilder, reason, pid, ppid| {
        t.meta(&Meta::Proc(ProcRecord {
            reason,
            pid,
            ppid,
            start_ticks: 0,
            exe: b"/usr/bin/bash".to_vec(),
            argv: Vec::new(),
        }))
    };
    let mut script = TraceBuilder::new("h", 20, 20);
    proc_rec(&mut script, ProcReason::Start, 20, 1);
    script.lib(0x10, LibFn::Fork, o(-1, 21, 0));
    let mut subshell = TraceBuilder::new("h", 21, 21);
    proc_rec(&mut subshell, ProcReason::Fork, 21, 20);
    subshell.lib_enter(0x20, LibFn::Exit, LibOpts::default());
    let mut execd = TraceBuilder::new("h", 22, 22);
    proc_rec(&mut execd, ProcReason::Fork, 22, 20);
    proc_rec(&mut execd, ProcReason::Exec, 22, 20);
    execd.lib_enter(0x20, LibFn::Exit, LibOpts::default());
    let procs = [script.finish(), subshell.finish(), execd.finish()];
    let refs: Vec<&ProcessTrace> = procs.iter().collect();
    let mut scans: Vec<ProcessScan> = refs.iter().map(|p| scan_process(p).unwrap()).collect();
    inherit(&refs, &mut scans);
    let sig = |i: usize| {
        split_process(&procs[i], &scans[i], &TreeOptions::default())
            .unwrap()
            .signature
    };
    let (script, subshell, execd) = (sig(0), sig(1), sig(2));
    assert!(subshell.0.contains(&FORKED_KEY));
    assert!(!script.0.contains(&FORKED_KEY) && !execd.0.contains(&FORKED_KEY));
    assert_ne!(subshell, script);
    assert_eq!(script, execd, "the same program, started afresh");
}

/// A daemon killed in its event loop (a hang ended by a timeout): its last unit was cut
/// by the end of the trace, not ended; one that exits ends with a finalizer.
#[test]
fn the_last_unit_of_a_thread_killed_in_its_loop_is_cut() {
    let run = |exits: bool| {
        let mut t = TraceBuilder::new("h", 1, 1);
        t.lib(0x10, LibFn::Socket, o(-1, 3, 0));
        t.lib(0x20, LibFn::Listen, o(3, 0, 0));
        t.lib(0x30, LibFn::Accept, o(3, 4, 0));
        for _ in 0..4 {
            t.lib(0x40, LibFn::Poll, o(-1, 1, 0));
            t.lib(0x50, LibFn::Recv, o(4, 8, 8));
        }
        if exits {
            t.lib_enter(0x60, LibFn::Exit, LibOpts::default());
        } else {
            t.lib_enter(0x40, LibFn::Poll, o(-1, 0, 0));
        }
        process_units(&t.finish(), &TreeOptions::default()).unwrap()
    };
    let killed = run(false);
    let last = killed.units.last().unwrap();
    assert_eq!(last.info.kind, UnitKind::Loop);
    assert!(last.info.cut);
    assert!(killed.units[..killed.units.len() - 1]
        .iter()
        .all(|u| !u.info.cut));
    let exited = run(true);
    assert_eq!(exited.units.last().unwrap().info.kind, UnitKind::Finalizer);
    assert!(exited.units.iter().all(|u| !u.info.cut));
}
