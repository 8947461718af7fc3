//! Final IO counters of exiting processes from the kernel's taskstats generic-netlink
//! interface: resolve the `TASKSTATS` family, register a cpumask of every possible CPU
//! (`TASKSTATS_CMD_ATTR_REGISTER_CPUMASK`, which needs CAP_NET_ADMIN), then receive one
//! `TASKSTATS_TYPE_AGGR_PID` message per exiting task. A receiving thread sums the per-task
//! counters by thread group, so a process that lived a millisecond between two samples
//! still has its bytes.
//!
//! Precision: the kernel rounds `rchar`, `wchar`, `syscr` and `syscw` of a taskstats record
//! down to a multiple of 1024 (`xacct_add_tsk`'s `KB_MASK`), so an exited process's
//! character counts are exact to within 1 KiB per task (the sampler keeps the larger of
//! that and the process's last sample); `read_bytes`, `write_bytes` and
//! `cancelled_write_bytes` are exact.
//!
//! `struct taskstats` (`linux/taskstats.h`) is read at fixed offsets, checked against the
//! message's own pid attribute; the thread-group id (`ac_tgid`, version ≥ 13) groups
//! threads, and older kernels fall back to the task id.

use super::format::Counters;
use super::netlink::{self, recv, send};
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const NETLINK_GENERIC: i32 = 16;
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const TASKSTATS_CMD_GET: u8 = 1;
const TASKSTATS_CMD_ATTR_REGISTER_CPUMASK: u16 = 3;
const TASKSTATS_TYPE_PID: u16 = 1;
const TASKSTATS_TYPE_STATS: u16 = 3;
const TASKSTATS_TYPE_AGGR_PID: u16 = 4;
const NLA_TYPE_MASK: u16 = 0x3fff;

// Offsets in `struct taskstats` (stable since version 1; `ac_tgid` since 13).
const OFF_VERSION: usize = 0;
const OFF_COMM: usize = 80;
const OFF_PID: usize = 128;
const OFF_PPID: usize = 132;
const OFF_READ_CHAR: usize = 216;
const OFF_TGID: usize = 368;

/// Final counters of one exited thread group, summed over its tasks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupExit {
    /// Thread-group id (the process id).
    pub tgid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// `comm`.
    pub comm: String,
    /// Sum of the counters of every task of the group that exited so far.
    pub counters: Counters,
    /// Whether the group leader (the task whose id is the pid) has exited.
    pub leader_exited: bool,
}

/// Exit notifications collected by the receiving thread.
#[derive(Default)]
pub struct Exits {
    /// By thread-group id.
    pub groups: HashMap<u32, GroupExit>,
}

/// A registered listener with its receiving thread.
pub struct Listener {
    fd: Arc<OwnedFd>,
    /// Collected exits (drained by the sampler).
    pub exits: Arc<Mutex<Exits>>,
    /// Notifications lost to a full socket buffer (`ENOBUFS`).
    pub overruns: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    /// Set by the receiving thread between a `recv` and the end of its bookkeeping.
    holding: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn put_attr(out: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    out.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(payload);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

fn message(ty: u16, flags: u16, seq: u32, cmd: u8, attrs: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(20 + attrs.len());
    m.extend_from_slice(&((20 + attrs.len()) as u32).to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&[cmd, 1, 0, 0]);
    m.extend_from_slice(attrs);
    m
}

/// Netlink messages in a datagram: (type, payload after the 16-byte header).
fn messages(buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 16 <= buf.len() {
        let len = u32::from_ne_bytes(buf[at..at + 4].try_into().expect("4 bytes")) as usize;
        let ty = u16::from_ne_bytes(buf[at + 4..at + 6].try_into().expect("2 bytes"));
        if len < 16 || at + len > buf.len() {
            break;
        }
        out.push((ty, &buf[at + 16..at + len]));
        at += (len + 3) & !3;
    }
    out
}

/// Attributes in a byte range: (type, payload).
fn attrs(mut b: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let len = u16::from_ne_bytes([b[0], b[1]]) as usize;
        let ty = u16::from_ne_bytes([b[2], b[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > b.len() {
            break;
        }
        out.push((ty, &b[4..len]));
        b = &b[((len + 3) & !3).min(b.len())..];
    }
    out
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// One task's exit, from a `TASKSTATS_TYPE_STATS` payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskExit {
    /// Task id.
    pub pid: u32,
    /// Thread-group id (= `pid` on kernels without `ac_tgid`).
    pub tgid: u32,
    /// Parent.
    pub ppid: u32,
    /// `comm`.
    pub comm: String,
    /// The task's counters.
    pub counters: Counters,
}

/// Decodes a `struct taskstats`; `None` if it is too short or its pid disagrees with `pid`.
pub fn parse_stats(pid: u32, s: &[u8]) -> Option<TaskExit> {
    let version = u16::from_ne_bytes(s.get(OFF_VERSION..OFF_VERSION + 2)?.try_into().ok()?);
    if u32_at(s, OFF_PID)? != pid {
        return None;
    }
    let mut a = [0u64; 7];
    for (i, x) in a.iter_mut().enumerate() {
        *x = u64_at(s, OFF_READ_CHAR + 8 * i)?;
    }
    let comm = s.get(OFF_COMM..OFF_COMM + 32)?;
    let end = comm.iter().position(|&c| c == 0).unwrap_or(32);
    let tgid = if version >= 13 {
        u32_at(s, OFF_TGID).filter(|&t| t != 0).unwrap_or(pid)
    } else {
        pid
    };
    Some(TaskExit {
        pid,
        tgid,
        ppid: u32_at(s, OFF_PPID)?,
        comm: String::from_utf8_lossy(&comm[..end]).into_owned(),
        counters: Counters::from_array(a),
    })
}

fn possible_cpus() -> String {
    std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            format!("0-{}", n.saturating_sub(1))
        })
}

/// A generic-netlink socket with 8 MiB buffers, and the id of the `TASKSTATS` family.
fn open_family() -> io::Result<(OwnedFd, u16)> {
    // SAFETY: plain socket(2) call; the result is checked.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_GENERIC,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let size: libc::c_int = 8 << 20;
    // SAFETY: `size` is a readable c_int of the length passed. SO_*BUFFORCE (needs
    // CAP_NET_ADMIN, which registering and queries need anyway) may fail: SO_*BUF is the
    // fallback.
    unsafe {
        let p = (&size as *const libc::c_int).cast();
        let l = std::mem::size_of::<libc::c_int>() as u32;
        for (force, plain) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        ] {
            if libc::setsockopt(raw, libc::SOL_SOCKET, force, p, l) != 0 {
                libc::setsockopt(raw, libc::SOL_SOCKET, plain, p, l);
            }
        }
    }
    let mut buf = vec![0u8; 64 << 10];
    let mut a = Vec::new();
    put_attr(&mut a, CTRL_ATTR_FAMILY_NAME, b"TASKSTATS\0");
    send(
        &fd,
        &message(GENL_ID_CTRL, NLM_F_REQUEST, 1, CTRL_CMD_GETFAMILY, &a),
    )?;
    let reply = wait_ack(&fd, 1, &mut buf)?;
    let family = attrs(reply.get(4..).unwrap_or(&[]))
        .into_iter()
        .find(|(t, _)| *t == CTRL_ATTR_FAMILY_ID)
        .and_then(|(_, p)| Some(u16::from_ne_bytes(p.get(..2)?.try_into().ok()?)))
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no TASKSTATS family"))?;
    Ok((fd, family))
}

/// Counters of live tasks by `TASKSTATS_CMD_GET` (needs CAP_NET_ADMIN): every request of a
/// batch in one `sendto`, the replies read by `recvmmsg`. Measured against `pread` of
/// `/proc/[pid]/io` by `bench/src/bin/ioshare.rs` and not used by the sampler: it answers
/// per task (a process's other threads, the exited ones and the children it reaped are
/// not in its leader's answer; `TASKSTATS_CMD_ATTR_TGID` adds no live thread's IO), and
/// the kernel rounds `rchar wchar syscr syscw` down to multiples of 1024 in it.
pub struct Query {
    fd: OwnedFd,
    family: u16,
    bufs: Vec<Vec<u8>>,
}

const TASKSTATS_CMD_ATTR_PID: u16 = 1;

impl Query {
    /// Opens the socket and resolves the family.
    pub fn open() -> io::Result<Query> {
        let (fd, family) = open_family()?;
        let tv = libc::timeval {
            tv_sec: 1,
            tv_usec: 0,
        };
        // SAFETY: `tv` is a readable timeval of the length passed.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            );
        }
        Ok(Query {
            fd,
            family,
            bufs: vec![vec![0u8; 1024]; 256],
        })
    }

    /// The counters of each task of `pids` that still exists (per task, see [`Query`]).
    pub fn get(&mut self, pids: &[u32]) -> io::Result<Vec<(u32, Counters)>> {
        let mut req = Vec::with_capacity(pids.len() * 28);
        for (i, &pid) in pids.iter().enumerate() {
            let mut a = Vec::with_capacity(8);
            put_attr(&mut a, TASKSTATS_CMD_ATTR_PID, &pid.to_ne_bytes());
            req.extend(message(
                self.family,
                NLM_F_REQUEST,
                i as u32,
                TASKSTATS_CMD_GET,
                &a,
            ));
        }
        send(&self.fd, &req)?;
        let mut out = Vec::with_capacity(pids.len());
        let mut left = pids.len();
        while left > 0 {
            let want = left.min(self.bufs.len());
            let mut bufs: Vec<&mut [u8]> =
                self.bufs[..want].iter_mut().map(|b| &mut b[..]).collect();
            let got = netlink::recv_batch(&self.fd, &mut bufs, 0)?;
            if got.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "taskstats: no answer",
                ));
            }
            for (k, r) in got.iter().enumerate() {
                let len = r.len.min(self.bufs[k].len());
                out.extend(
                    tasks(&self.bufs[k][..len])
                        .into_iter()
                        .map(|t| (t.pid, t.counters)),
                );
            }
            left -= got.len();
        }
        Ok(out)
    }
}

/// Waits for the acknowledgement of request `seq`: Ok, or the kernel's error.
fn wait_ack(fd: &OwnedFd, seq: u32, buf: &mut [u8]) -> io::Result<Vec<u8>> {
    for _ in 0..16 {
        let n = recv(fd, buf)?;
        for (ty, p) in messages(&buf[..n]) {
            if ty == NLMSG_ERROR {
                let err = i32::from_ne_bytes(p.get(..4).unwrap_or(&[0; 4]).try_into().expect("4"));
                let for_seq = u32_at(p, 4 + 8).unwrap_or(seq);
                if for_seq != seq {
                    continue;
                }
                return if err == 0 {
                    Ok(Vec::new())
                } else {
                    Err(io::Error::from_raw_os_error(-err))
                };
            }
            return Ok(p.to_vec());
        }
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        "no answer from the kernel",
    ))
}

impl Listener {
    /// Opens the socket, registers for every possible CPU and starts the receiving thread.
    /// Errors say why (EPERM: no CAP_NET_ADMIN; ENOENT: kernel without taskstats).
    pub fn start() -> io::Result<Listener> {
        let (fd, family) = open_family()?;
        let raw = fd.as_raw_fd();
        let mut buf = vec![0u8; 64 << 10];

        let mut mask = possible_cpus().into_bytes();
        mask.push(0);
        let mut a = Vec::new();
        put_attr(&mut a, TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, &mask);
        send(
            &fd,
            &message(family, NLM_F_REQUEST | NLM_F_ACK, 2, TASKSTATS_CMD_GET, &a),
        )?;
        wait_ack(&fd, 2, &mut buf)?;

        // A receive timeout lets the thread notice `stop`.
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 200_000,
        };
        // SAFETY: `tv` is a readable timeval of the length passed.
        unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            );
        }
        let fd = Arc::new(fd);
        let exits = Arc::new(Mutex::new(Exits::default()));
        let overruns = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let holding = Arc::new(AtomicBool::new(false));
        let thread = {
            let (fd, exits, overruns, stop, holding) = (
                fd.clone(),
                exits.clone(),
                overruns.clone(),
                stop.clone(),
                holding.clone(),
            );
            std::thread::Builder::new()
                .name("taskstats".into())
                .spawn(move || receive_loop(&fd, &exits, &overruns, &stop, &holding, buf))?
        };
        Ok(Listener {
            fd,
            exits,
            overruns,
            stop,
            holding,
            thread: Some(thread),
        })
    }

    /// Takes the thread groups collected so far whose exits are complete or whose pids
    /// `still_alive` does not vouch for; groups with a live leader stay.
    ///
    /// The notifications already queued on the socket are read first, in the caller's
    /// thread: the kernel queues a task's notification when it exits, before its parent
    /// can reap it, so every child whose counters a parent's `/proc/[pid]/io` read before
    /// this call included is among the exits taken now (the receiving thread, at normal
    /// priority, may lag behind a real-time sampler on a loaded machine).
    pub fn take(&self, mut still_alive: impl FnMut(u32) -> bool) -> Vec<GroupExit> {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            // SAFETY: `buf` is writable for its whole length; MSG_DONTWAIT never blocks.
            let r = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                absorb(&buf[..r as usize], &self.exits);
                continue;
            }
            if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOBUFS) {
                self.overruns.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            break;
        }
        // A datagram the receiving thread holds is in `exits` within microseconds, unless
        // that thread was preempted: wait a little, not more.
        for _ in 0..40 {
            if !self.holding.load(Ordering::SeqCst) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        let mut g = self.exits.lock().unwrap_or_else(|e| e.into_inner());
        let done: Vec<u32> = g
            .groups
            .iter()
            .filter(|(tgid, e)| e.leader_exited || !still_alive(**tgid))
            .map(|(t, _)| *t)
            .collect();
        done.into_iter()
            .filter_map(|t| g.groups.remove(&t))
            .collect()
    }

    /// Stops the receiving thread; what it collected stays in [`Listener::exits`].
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = &self.fd;
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop();
    }
}

fn receive_loop(
    fd: &OwnedFd,
    exits: &Mutex<Exits>,
    overruns: &AtomicU64,
    stop: &AtomicBool,
    holding: &AtomicBool,
    mut buf: Vec<u8>,
) {
    while !stop.load(Ordering::Relaxed) {
        let n = match recv(fd, &mut buf) {
            Ok(n) => n,
            Err(e) => match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => continue,
                Some(libc::ENOBUFS) => {
                    overruns.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                _ => return,
            },
        };
        holding.store(true, Ordering::SeqCst);
        absorb(&buf[..n], exits);
        holding.store(false, Ordering::SeqCst);
    }
}

/// Adds the exit notifications of one datagram to `exits`.
fn absorb(datagram: &[u8], exits: &Mutex<Exits>) {
    for task in tasks(datagram) {
        let mut g = exits.lock().unwrap_or_else(|e| e.into_inner());
        let e = g.groups.entry(task.tgid).or_insert_with(|| GroupExit {
            tgid: task.tgid,
            ..Default::default()
        });
        let mut sum = e.counters.to_array();
        for (s, v) in sum.iter_mut().zip(task.counters.to_array()) {
            *s += v;
        }
        e.counters = Counters::from_array(sum);
        if task.pid == task.tgid {
            e.leader_exited = true;
            e.ppid = task.ppid;
            e.comm = task.comm;
        } else if e.comm.is_empty() {
            e.ppid = task.ppid;
            e.comm = task.comm;
        }
    }
}

/// The tasks of the `TASKSTATS_TYPE_AGGR_PID` answers in a datagram (exit notifications
/// and query replies alike); errors and malformed parts are skipped.
fn tasks(datagram: &[u8]) -> Vec<TaskExit> {
    let mut out = Vec::new();
    for (ty, p) in messages(datagram) {
        if ty == NLMSG_ERROR || p.len() < 4 {
            continue;
        }
        for (t, nested) in attrs(&p[4..]) {
            if t != TASKSTATS_TYPE_AGGR_PID {
                continue;
            }
            let inner = attrs(nested);
            let pid = inner
                .iter()
                .find(|(t, _)| *t == TASKSTATS_TYPE_PID)
                .and_then(|(_, p)| u32_at(p, 0));
            let stats = inner.iter().find(|(t, _)| *t == TASKSTATS_TYPE_STATS);
            if let (Some(pid), Some((_, s))) = (pid, stats) {
                out.extend(parse_stats(pid, s));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_answers_per_task_rounded_to_the_kib() {
        let mut q = match Query::open() {
            Ok(q) => q,
            Err(e) => {
                eprintln!("taskstats queries unavailable here ({e}): not checked");
                return;
            }
        };
        let me = std::process::id();
        let proc_io = super::super::procfs::IoFile::open(me).unwrap();
        let before = proc_io.read().unwrap();
        // A pid that does not exist gives an error answer, not a hang.
        let got = match q.get(&[me, u32::MAX >> 2]) {
            Ok(g) => g,
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => return,
            Err(e) => panic!("{e}"),
        };
        let after = proc_io.read().unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        let (pid, c) = got[0];
        assert_eq!(pid, me);
        assert_eq!(c.wchar % 1024, 0);
        assert_eq!(c.syscr % 1024, 0, "syscall counts are rounded too");
        // The leader's own counters, at most the whole process's.
        assert!(c.rchar <= after.rchar && c.wchar <= after.wchar.max(before.wchar));
    }
}
