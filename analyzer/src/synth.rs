//! Synthetic traces of a **ring of event-driven daemons** (the MPD case study's shape), for
//! tests and benchmarks.
//!
//! Each process listens, connects to its right neighbour, accepts its left neighbour, then
//! loops on `select`: a job message from the left is read with `recv(8)` (the header) and a
//! second `recv` (the body), processed and forwarded to the right with `send`; now and then
//! `select` times out and timers are checked. The optional [`Fault`] is the MPD bug: one
//! header `recv` returns 3 bytes, the handler treats it as an error and closes the ring
//! connection; its left neighbour then reads end-of-stream on its right connection and
//! closes it too, and the ring hangs (only timeouts from then on).
//!
//! Traces can be written with C function entries (gcc hooks), Python calls (code table,
//! builtins, exceptions), or library calls only (`LD_PRELOAD`); addresses are shifted per
//! process (ASLR) and Python code indices are numbered in a different order per process,
//! so models must rely on stable keys.

use crate::decode::{ProcessTrace, TraceBuilder};
use bufpool::format::{
    py_site, Addr, CodeKind, CodeRecord, LibFn, LibOpts, MapRecord, Meta, ProcReason, ProcRecord,
    ReadyItem, ReadySet,
};

/// What the traced processes record besides library calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Functions {
    /// C function entries and exits (`-finstrument-functions`).
    C,
    /// Python calls, returns, builtins and exceptions.
    Python,
    /// Library calls only (`LD_PRELOAD` on an unmodified binary).
    None,
}

/// The injected bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Which process reads 3 bytes of a header.
    pub process: usize,
    /// At which message.
    pub iteration: usize,
}

/// A ring to generate.
#[derive(Clone, Copy, Debug)]
pub struct Ring {
    /// Number of processes (≥ 2).
    pub processes: usize,
    /// Messages each process handles (before a fault stops the ring).
    pub iterations: usize,
    /// What is recorded.
    pub functions: Functions,
    /// The bug, if any.
    pub fault: Option<Fault>,
    /// Varies pids, load addresses, code numbering and timer phases between runs.
    pub seed: u64,
}

const EXE: &str = "/opt/ring/ringd";
const PYSOCK: &str = "/usr/lib/python3/lib-dynload/_socket.so";
const AF_INET: u16 = 2;

// Function offsets in the executable.
const F_MAIN: u64 = 0x1000;
const F_INIT: u64 = 0x1100;
const F_RUN: u64 = 0x1200;
const F_LHS: u64 = 0x1300;
const F_RECV_MSG: u64 = 0x1400;
const F_PROCESS: u64 = 0x1500;
const F_FORWARD: u64 = 0x1600;
const F_TIMERS: u64 = 0x1700;
const F_ERR_CLOSE: u64 = 0x1800;
const F_RHS: u64 = 0x1900;

// Python code objects (index order is shuffled per process).
const PY_NAMES: [&str; 10] = [
    "ringd.<module>",
    "ringd.Ring.init",
    "ringd.Ring.run",
    "ringd.Ring.handle_lhs_input",
    "ringd.recv_dict_msg",
    "ringd.Ring.process_msg",
    "ringd.Ring.forward",
    "ringd.Ring.check_timers",
    "ringd.Ring.error_close",
    "ringd.Ring.handle_rhs_input",
];
const PY_BUILTINS: [&str; 7] = [
    "socket.socket.bind",
    "socket.socket.listen",
    "socket.socket.connect",
    "socket.socket.accept",
    "select.select",
    "socket.socket.recv",
    "socket.socket.sendall",
];

fn addr(port: u16, host: u8) -> Addr {
    Addr::new(AF_INET, port, &[10, 0, 0, host])
}

struct Gen {
    t: TraceBuilder,
    f: Functions,
    exe: u64,
    sock: u64,
    code: [u32; 10],
    builtin: [u32; 7],
    stack: Vec<usize>,
}

impl Gen {
    /// Enters function `i` (index into the tables) from call-site offset `off` of the current function.
    fn enter(&mut self, i: usize, off: u64) {
        let fns = [
            F_MAIN,
            F_INIT,
            F_RUN,
            F_LHS,
            F_RECV_MSG,
            F_PROCESS,
            F_FORWARD,
            F_TIMERS,
            F_ERR_CLOSE,
            F_RHS,
        ];
        let caller = self.stack.last().copied();
        match self.f {
            Functions::C => {
                let site = caller.map_or(0x0800, |c| fns[c] + off);
                self.t.enter(self.exe + site, self.exe + fns[i]);
            }
            Functions::Python => {
                let site = caller.map_or(0, |c| py_site(self.code[c], off as u32));
                self.t.py_call(site, self.code[i]);
            }
            Functions::None => {}
        }
        self.stack.push(i);
    }

    fn exit(&mut self) {
        let fns = [
            F_MAIN,
            F_INIT,
            F_RUN,
            F_LHS,
            F_RECV_MSG,
            F_PROCESS,
            F_FORWARD,
            F_TIMERS,
            F_ERR_CLOSE,
            F_RHS,
        ];
        let Some(i) = self.stack.pop() else { return };
        match self.f {
            Functions::C => self.t.exit(self.exe + fns[i]),
            Functions::Python => self.t.py_return(self.code[i]),
            Functions::None => {}
        }
    }

    /// A library call from call-site offset `off` of the current function; in Python
    /// through builtin `b`.
    fn lib(&mut self, off: u64, b: Option<usize>, func: LibFn, opts: LibOpts) {
        let fns = [
            F_MAIN,
            F_INIT,
            F_RUN,
            F_LHS,
            F_RECV_MSG,
            F_PROCESS,
            F_FORWARD,
            F_TIMERS,
            F_ERR_CLOSE,
            F_RHS,
        ];
        match self.f {
            Functions::Python if b.is_none() => {
                // Called by the interpreter itself (object finalization, constructors).
                self.t.lib(self.sock + 0x1000 + off, func, opts);
            }
            Functions::Python => {
                let cur = self.stack.last().copied().unwrap_or(0);
                let b = b.unwrap_or(4);
                self.t
                    .py_ccall(py_site(self.code[cur], off as u32), self.builtin[b]);
                self.t.lib(self.sock + 0x2000 + 0x10 * b as u64, func, opts);
                self.t.py_creturn(self.builtin[b]);
            }
            _ => {
                let cur = self.stack.last().copied().unwrap_or(0);
                self.t.lib(self.exe + fns[cur] + off, func, opts);
            }
        }
    }
}

fn o(fd: i32, ret: i64, len: u64) -> LibOpts {
    LibOpts {
        fd: Some(fd),
        ret: Some(ret),
        len: Some(len),
        ..Default::default()
    }
}

fn ready(fds: &[i32]) -> LibOpts {
    let mut r = ReadySet::default();
    for &fd in fds {
        r.push(ReadyItem {
            id: fd as u32,
            events: 1,
        });
    }
    LibOpts {
        ret: Some(fds.len() as i64),
        len: Some(6),
        ready: Some(r),
        ..Default::default()
    }
}

/// Writes a fault-free ring of `processes` C processes (three iterations) under `root` as
/// the trace directories of a Slurm job's tasks: process `i` on host `h<i % hosts>`, in
/// `root/h<i % hosts>/1.0.<i>/`. Returns the processes written.
pub fn write_task_tree(
    root: &std::path::Path,
    processes: usize,
    hosts: usize,
) -> crate::error::Result<Vec<ProcessTrace>> {
    let procs = ring(&Ring {
        processes,
        iterations: 3,
        functions: Functions::C,
        fault: None,
        seed: 1,
    });
    for (i, p) in procs.iter().enumerate() {
        let host = format!("h{}", i % hosts.max(1));
        let dir = root.join(&host).join(format!("1.0.{i}"));
        crate::decode::write_trace_dir(&dir, &host, std::slice::from_ref(p))?;
    }
    Ok(procs)
}

/// Generates the traces of every process of the ring (host `node<i>`).
pub fn ring(cfg: &Ring) -> Vec<ProcessTrace> {
    let n = cfg.processes.max(2);
    // The fault's consequences: the faulty process stops at `k`, its left neighbour sees
    // end-of-stream after its own message `k`; the others stop after `k` too.
    let stop = cfg.fault.map(|f| f.iteration.min(cfg.iterations));
    (0..n)
        .map(|i| {
            let seed = cfg.seed.wrapping_mul(0x9e37_79b9).wrapping_add(i as u64);
            let pid = 1000 + (seed % 50_000) as u32;
            let mut g = Gen {
                t: TraceBuilder::new(&format!("node{i}"), pid, pid),
                f: cfg.functions,
                exe: 0x5555_0000_0000 + ((seed % 4096) << 20),
                sock: 0x7f00_0000_0000 + ((seed % 1024) << 24),
                code: [0; 10],
                builtin: [0; 7],
                stack: Vec::new(),
            };
            // Metadata: process, map, and the Python code table in a per-process order.
            g.t.meta(&Meta::Proc(ProcRecord {
                reason: ProcReason::Start,
                pid,
                ppid: 1,
                start_ticks: 0,
                exe: EXE.as_bytes().to_vec(),
                argv: vec![EXE.as_bytes().to_vec()],
            }));
            for (start, len, path) in [(g.exe, 0x10000, EXE), (g.sock, 0x10000, PYSOCK)] {
                g.t.meta(&Meta::Map(MapRecord {
                    start,
                    end: start + len,
                    offset: 0,
                    prot: 5,
                    path: path.as_bytes().to_vec(),
                }));
            }
            let rot = (seed % 10) as u32;
            for (k, name) in PY_NAMES.iter().enumerate() {
                let index = (k as u32 + rot) % 10 + 1;
                g.code[k] = index;
                g.t.meta(&Meta::Code(CodeRecord {
                    index,
                    kind: CodeKind::PyCode,
                    first_line: 10 * k as u32 + 1,
                    name: name.as_bytes().to_vec(),
                    file: b"/opt/ring/ringd.py".to_vec(),
                }));
            }
            for (k, name) in PY_BUILTINS.iter().enumerate() {
                let index = 100 + (k as u32 + rot) % 7;
                g.builtin[k] = index;
                g.t.meta(&Meta::Code(CodeRecord {
                    index,
                    kind: CodeKind::PyBuiltin,
                    first_line: 0,
                    name: name.as_bytes().to_vec(),
                    file: Vec::new(),
                }));
            }
            g.t.meta(&Meta::Code(CodeRecord {
                index: 200,
                kind: CodeKind::PyExcType,
                first_line: 0,
                name: b"ConnectionError".to_vec(),
                file: Vec::new(),
            }));
            let me = (i + 1) as u8;
            let right = ((i + 1) % n + 1) as u8;
            let left = ((i + n - 1) % n + 1) as u8;
            // Initializer.
            g.enter(0, 0);
            g.enter(1, 0x10);
            g.lib(
                0x20,
                None,
                LibFn::Socket,
                LibOpts {
                    ret: Some(3),
                    ..Default::default()
                },
            );
            let mut b = o(3, 0, 0);
            b.local = Some(addr(7000, me));
            g.lib(0x24, Some(0), LibFn::Bind, b);
            g.lib(0x28, Some(1), LibFn::Listen, o(3, 0, 0));
            g.lib(
                0x30,
                None,
                LibFn::Socket,
                LibOpts {
                    ret: Some(4),
                    ..Default::default()
                },
            );
            let mut c = o(4, 0, 0);
            c.local = Some(addr(40000 + (seed % 1000) as u16, me));
            c.peer = Some(addr(7000, right));
            g.lib(0x34, Some(2), LibFn::Connect, c);
            let mut a = o(3, 5, 0);
            a.local = Some(addr(7000, me));
            a.peer = Some(addr(41000 + (seed % 997) as u16, left));
            g.lib(0x38, Some(3), LibFn::Accept, a);
            g.exit();
            // The event loop.
            g.enter(2, 0x14);
            let timer_phase = (seed % 5) as usize;
            let mut dead = false;
            let mut was_notified = false;
            let total = cfg.iterations + stop.map_or(0, |_| 20);
            for it in 0..total {
                if it % 16 == timer_phase || dead {
                    g.lib(0x20, Some(4), LibFn::Select, ready(&[]));
                    g.enter(7, 0x24);
                    g.exit();
                    g.t.wait(50_000);
                    continue;
                }
                let waits_for_eof =
                    !was_notified && cfg.fault.is_some_and(|f| (f.process + n - 1) % n == i);
                let late = stop.is_some_and(|s| it > s) && !waits_for_eof;
                if late || it >= cfg.iterations {
                    dead = true;
                    continue;
                }
                let faulty = cfg
                    .fault
                    .is_some_and(|f| f.process == i && f.iteration == it);
                let notified = !was_notified
                    && cfg
                        .fault
                        .is_some_and(|f| (f.process + n - 1) % n == i && it >= f.iteration);
                g.lib(0x20, Some(4), LibFn::Select, ready(&[5]));
                g.enter(3, 0x28);
                g.enter(4, 0x10);
                if faulty {
                    g.lib(0x20, Some(5), LibFn::Recv, o(5, 3, 8));
                    if cfg.functions == Functions::Python {
                        g.t.py_exc(g.code[4], 200);
                    }
                    g.exit();
                    g.enter(8, 0x30);
                    g.lib(0x10, None, LibFn::Close, o(5, 0, 0));
                    g.exit();
                    g.exit();
                    dead = true;
                    continue;
                }
                g.lib(0x20, Some(5), LibFn::Recv, o(5, 8, 8));
                g.lib(0x28, Some(5), LibFn::Recv, o(5, 120, 120));
                g.exit();
                g.enter(5, 0x34);
                g.exit();
                g.enter(6, 0x38);
                g.lib(0x10, Some(6), LibFn::Send, o(4, 128, 128));
                g.exit();
                g.exit();
                g.t.wait(20_000);
                if notified {
                    // The right neighbour closed: select reports fd 4, recv reads EOF.
                    g.lib(0x20, Some(4), LibFn::Select, ready(&[4]));
                    g.enter(9, 0x2c);
                    g.lib(0x10, Some(5), LibFn::Recv, o(4, 0, 8));
                    g.lib(0x18, None, LibFn::Close, o(4, 0, 0));
                    g.exit();
                    dead = true;
                    was_notified = true;
                }
            }
            g.t.finish()
        })
        .collect()
}
