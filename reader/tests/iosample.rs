//! The IO sampler on real processes: a process that lives about a millisecond between two
//! samples keeps its bytes (taskstats), new children are picked up, and the file reads
//! back while it is cut short.

use reader::iosample::{self, SampleLog, SamplerOptions, Selection};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Samples into `file` until `child` exits.
fn sample_until_exit(
    file: &std::path::Path,
    opts: SamplerOptions,
    child: &mut std::process::Child,
) -> iosample::SamplerReport {
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let file2 = file.to_path_buf();
    let t = std::thread::spawn(move || iosample::run(&file2, &opts, &stop2, || false));
    child.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap().unwrap()
}

/// Records of hand-written sample files: samples every 100 ns from mono 1 000, processes
/// with only `wchar` counted.
mod records {
    use reader::iosample::format::{
        Counters, ExitRecord, ExitSource, ProcRecord, Record, SampleRecord,
    };

    pub fn w(wchar: u64) -> Counters {
        Counters {
            wchar,
            ..Default::default()
        }
    }

    pub fn mono(seq: u64) -> u64 {
        1_000 + seq * 100
    }

    pub fn sample(seq: u64, changed: Vec<(u32, Counters)>) -> Record {
        Record::Sample(SampleRecord {
            seq,
            mono_ns: mono(seq),
            deadline_mono_ns: mono(seq),
            changed,
            ..Default::default()
        })
    }

    pub fn proc_(pid: u32, ppid: u32, comm: &str) -> Record {
        Record::Proc(ProcRecord {
            pid,
            ppid,
            comm: comm.into(),
            ..Default::default()
        })
    }

    /// A taskstats exit notification read at sample `seq`.
    pub fn exit(pid: u32, ppid: u32, seq: u64, wchar: u64, comm: &str) -> Record {
        Record::Exit(ExitRecord {
            pid,
            ppid,
            source: ExitSource::Taskstats,
            mono_ns: mono(seq),
            unix_ns: 0,
            counters: w(wchar),
            comm: comm.into(),
        })
    }
}

#[test]
fn a_process_living_between_two_samples_keeps_its_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("io.cios");
    let out = tmp.path().join("out.bin");
    // A parent that stays, and a child that writes 123 456 bytes and exits at once.
    let mut root = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "sleep 0.35; head -c 123456 /dev/zero > {}; sleep 0.6",
            out.display()
        ))
        .spawn()
        .unwrap();
    let opts = SamplerOptions {
        interval: Duration::from_millis(250),
        selection: Selection::Pids(vec![root.id()]),
        ..Default::default()
    };
    let report = sample_until_exit(&file, opts, &mut root);
    assert!(report.samples >= 3, "{report:?}");
    let log = SampleLog::open(&file).unwrap();
    assert_eq!(log.tail.damaged_at, None);
    assert!(log.end.is_some());
    let head = log
        .processes
        .iter()
        .find(|p| p.comm == "head")
        .unwrap_or_else(|| panic!("head is missing: {:#?}", log.processes));
    let last = log.samples.len() - 1;
    let c = head.at(&log.samples, last).unwrap();
    if report.taskstats == "on" {
        // Exact to the KiB: taskstats rounds wchar down to a multiple of 1024.
        assert!(c.wchar <= 123_456 && c.wchar > 123_456 - 1024, "{head:?}");
        assert!(head.exit.is_some());
    } else {
        // Without CAP_NET_ADMIN the file says so, and the sampler told why.
        assert!(log
            .notes
            .iter()
            .any(|n| n.contains("taskstats unavailable")));
        eprintln!(
            "taskstats off ({}): exact exit counters not checked",
            report.taskstats
        );
    }
    // The root was sampled from the start and its exit noticed.
    let sh = log.processes.iter().find(|p| p.pid == root.id()).unwrap();
    assert!(sh.exit.is_some(), "{sh:?}");
}

#[test]
fn a_file_cut_while_written_reads_back_up_to_the_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("io.cios");
    let opts = SamplerOptions {
        interval: Duration::from_millis(20),
        selection: Selection::Pids(vec![std::process::id()]),
        servers: vec!["no-such-server".into()],
        ..Default::default()
    };
    let stop = AtomicBool::new(false);
    let mut n = 0;
    iosample::run(&file, &opts, &stop, || {
        n += 1;
        n > 5
    })
    .unwrap();
    let bytes = std::fs::read(&file).unwrap();
    let whole = SampleLog::open(&file).unwrap();
    let cut = tmp.path().join("cut.cios");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    let part = SampleLog::open(&cut).unwrap();
    assert_eq!(part.tail.why.as_deref(), Some("truncated record"));
    assert_eq!(part.samples, whole.samples, "only the END record was cut");
    assert!(part.end.is_none() && whole.end.is_some());
}

#[test]
fn a_quiet_process_is_read_less_often_and_its_late_change_is_spread() {
    // Sampled every 50 ms, quiet after 4 unchanged reads — 40 once it has moved. It
    // writes 1 000 bytes (it has moved), pauses 1 s (20 samples: still read at every
    // sample), writes 300 000 bytes, pauses 3 s (quiet: read every 4th sample), writes
    // 200 000 bytes, and exits 0.6 s later.
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("io.cios");
    let out = tmp.path().join("out.bin");
    let mut py = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import os, time\ntime.sleep(0.3)\nfd = os.open({:?}, os.O_WRONLY | os.O_CREAT)\n\
             os.write(fd, b'x' * 1000)\ntime.sleep(1.0)\nos.write(fd, b'x' * 300000)\n\
             time.sleep(3.0)\nos.write(fd, b'x' * 200000)\ntime.sleep(0.6)",
            out.display()
        ))
        .spawn()
        .unwrap();
    let opts = SamplerOptions {
        interval: Duration::from_millis(50),
        selection: Selection::Pids(vec![py.id()]),
        quiet_every: 4,
        ..Default::default()
    };
    let report = sample_until_exit(&file, opts, &mut py);
    let log = SampleLog::open(&file).unwrap();
    let p = log.processes.iter().find(|p| p.pid == py.id()).unwrap();
    if report.taskstats != "on" {
        // Without taskstats every process is read at every sample (an exit keeps the last
        // read): nothing is quiet.
        assert_eq!(report.late, 0, "{report:?}");
        eprintln!(
            "taskstats off ({}): quiet reads not checked",
            report.taskstats
        );
        return;
    }
    // Fewer reads than processes × samples, and the change found late is marked.
    assert!(
        report.reads < report.samples * report.processes,
        "{report:?}"
    );
    assert!(report.late >= 1 && !p.spans.is_empty(), "{report:?} {p:?}");
    let &(found, since) = p.spans.last().unwrap();
    assert!(since < found && found - since <= 4, "{:?}", p.spans);
    // Nothing lost: the last counters hold the writes; the counters in between grow with
    // time from the quiet read to the read that found the change.
    let last = log.samples.len() - 1;
    let w = |j: usize| p.at(&log.samples, j).unwrap().wchar;
    assert!(w(last) >= 500_000, "{p:?}");
    assert!(w(found) - w(since) >= 200_000);
    for j in since..found {
        assert!(w(j) <= w(j + 1));
    }
    if found - since >= 2 {
        assert!(
            w(since) < w(since + 1) && w(since + 1) < w(found),
            "{:?}",
            p.spans
        );
    }
    // The write after the 1-s pause — the process had moved, so it was still read at
    // every sample — is seen whole between two consecutive samples, in no span.
    let whole = (p.first_sample..last).find(|&j| w(j + 1) - w(j) >= 300_000);
    assert!(whole.is_some(), "{:?}", p.spans);
    let j = whole.unwrap();
    assert!(
        p.spans.iter().all(|&(f, s)| !(s <= j && j < f)),
        "{j} {:?}",
        p.spans
    );
}

#[test]
fn after_a_pid_wrap_a_child_listed_before_its_parent_is_still_its_child() {
    use reader::iosample::format::{Meta, Record, SampleWriter};
    use records::{exit, sample, w};
    // A daemon (32621) forks a session (32761), whose worker got pid 300 after a wrap; both
    // first seen in the same sample, the worker first (pid order). The worker writes 5 MB
    // and exits; the session reaps it, exits, and the daemon reaps the session: the
    // daemon's /proc/[pid]/io then holds the worker's 5 MB, which are not its own.
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("io.cios");
    let proc_ = |pid, ppid| records::proc_(pid, ppid, "vsftpd");
    let exit = |pid, ppid, seq, wchar| exit(pid, ppid, seq, wchar, "vsftpd");
    let mut out = SampleWriter::create(&file).unwrap();
    out.write(&[
        Record::Meta(Meta::default()),
        proc_(32621, 1),
        sample(0, vec![(32621, w(0))]),
        proc_(300, 32761),
        proc_(32761, 32621),
        sample(1, vec![(300, w(1_000_000))]),
        sample(2, vec![(300, w(5_000_000))]),
        // The daemon's read already holds the worker's bytes; the notifications of the
        // exits are read one sample later.
        sample(3, vec![(32621, w(5_000_000))]),
        exit(300, 32761, 4, 5_000_000),
        exit(32761, 32621, 4, 0),
        sample(4, vec![]),
    ])
    .unwrap();
    drop(out);
    let log = SampleLog::open(&file).unwrap();
    let idx = |pid| log.processes.iter().position(|p| p.pid == pid).unwrap();
    let (daemon, session, worker) = (idx(32621), idx(32761), idx(300));
    assert_eq!(log.children[session], vec![worker]);
    assert_eq!(log.children[daemon], vec![session]);
    let own = |i, j| log.own(i, j).unwrap().wchar;
    for j in 0..5 {
        assert_eq!(own(daemon, j), 0, "sample {j}");
    }
    assert_eq!(own(worker, 4), 5_000_000);
    assert_eq!(own(session, 4), 0);
}

#[test]
fn a_parent_that_reaps_while_quiet_takes_none_of_its_childs_bytes() {
    use reader::iosample::format::{Meta, Record, SampleWriter, SpanRecord};
    use records::{exit, sample, w};
    // A job's parent (50) forks a worker (51) and waits, quiet: the sampler reads it
    // every 4th sample. The worker writes 5 MB and exits; the parent reaps it, and its
    // next read (sample 8, after a quiet read at 4) holds the worker's bytes — a change
    // found late, spread over samples 4‥8 — while the exit notification is read one
    // sample later.
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("io.cios");
    let proc_ = |pid, ppid| records::proc_(pid, ppid, "job");
    let mut out = SampleWriter::create(&file).unwrap();
    out.write(&[
        Record::Meta(Meta::default()),
        proc_(50, 1),
        sample(0, vec![(50, w(0))]),
        proc_(51, 50),
        sample(1, vec![(51, w(1_000_000))]),
        sample(2, vec![(51, w(3_000_000))]),
        sample(3, vec![(51, w(5_000_000))]),
        sample(4, vec![]),
        sample(5, vec![]),
        sample(6, vec![]),
        sample(7, vec![]),
        sample(8, vec![(50, w(5_000_000))]),
        Record::Span(SpanRecord {
            seq: 8,
            since: vec![(50, 4)],
        }),
        exit(51, 50, 9, 5_000_000, "job"),
        sample(9, vec![]),
    ])
    .unwrap();
    drop(out);
    let log = SampleLog::open(&file).unwrap();
    let idx = |pid| log.processes.iter().position(|p| p.pid == pid).unwrap();
    let (parent, worker) = (idx(50), idx(51));
    assert_eq!(log.children[parent], vec![worker]);
    for j in 0..10 {
        assert_eq!(log.own(parent, j).unwrap().wchar, 0, "sample {j}");
    }
    assert_eq!(log.own(worker, 9).unwrap().wchar, 5_000_000);
}

#[test]
fn a_stalled_servers_backlog_is_recorded_and_read_back() {
    use std::io::{BufRead, Write};
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("io.cios");
    // A server that accepts one connection, does not read for 1 s (descheduled, as it
    // were), then reads everything and stays 0.5 s more.
    let script = "import socket, time\n\
        l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(1)\n\
        print(l.getsockname()[1], flush=True)\n\
        c, _ = l.accept(); time.sleep(1.0)\n\
        while c.recv(1 << 16): pass\n\
        time.sleep(0.5)\n";
    let mut server = Command::new("python3")
        .args(["-c", script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut port = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    let port: u16 = port.trim().parse().unwrap();
    let opts = SamplerOptions {
        interval: Duration::from_millis(100),
        selection: Selection::Pids(vec![server.id()]),
        servers: vec![server.id().to_string()],
        ..Default::default()
    };
    // The client writes what the kernel takes without blocking (the server's receive
    // queue, then its own send queue once the window is full), then closes.
    let client = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(250));
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_nonblocking(true).unwrap();
        let chunk = [3u8; 65536];
        let mut total = 0u64;
        loop {
            match c.write(&chunk) {
                Ok(n) => total += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        total
    });
    let report = sample_until_exit(&file, opts, &mut server);
    let written = client.join().unwrap();
    assert_eq!(report.backlog, "on", "{report:?}");
    let log = SampleLog::open(&file).unwrap();
    assert!(log.backlog_measured);
    let p = log.processes.iter().find(|p| p.server).unwrap();
    // While it slept, everything the client wrote was received or unsent — counted once.
    let max = (0..log.samples.len())
        .map(|j| p.backlog_at(j))
        .max()
        .unwrap();
    assert!(written > 0);
    assert_eq!(max, written, "{:?}", p.backlog);
    assert_eq!(report.backlog_max, written);
    // Once it read, nothing is left.
    assert_eq!(p.backlog_at(log.samples.len() - 1), 0, "{:?}", p.backlog);
}
