//! `culprit reader` and `culprit dump` on entries written through the pool API: the
//! standalone reader (stopped by SIGTERM, or by itself once no traced process maps the
//! pool), `--create`'s environment line, and every field of `culprit dump --json`.

use bufpool::format::{
    self, CodeKind, CodeRecord, Kind, LibFn, LibOpts, Meta, ProcReason, ProcRecord,
};
use bufpool::{Pool, WriterState};

use std::process::{Command, Stdio};
use std::time::Duration;
use tests::*;

const ROLE_ENV: &str = "CULPRIT_E2E_ROLE";

fn attach(pool: &Pool) -> WriterState {
    let me = pool.holder();
    let mut w = WriterState::new();
    w.attach(
        pool,
        me.pid,
        bufpool::sys::proc_stat(me.pid).unwrap().2,
        bufpool::sys::gettid(),
    );
    w
}

fn tsc() -> u64 {
    bufpool::sys::rdtsc() & format::TSC_MASK
}

fn meta(w: &mut WriterState, pool: &Pool, m: &Meta) {
    let mut buf = [0u8; format::META_BUF];
    let n = format::encode_meta(tsc(), m, &mut buf);
    assert!(w.append(pool, &buf[..n]));
}

fn lib(w: &mut WriterState, pool: &Pool, kind: Kind, f: LibFn, o: &LibOpts) {
    assert!(w.append(
        pool,
        format::encode_lib(kind, tsc(), 0x401234, f, o).as_bytes()
    ));
}

/// What the "program" below did: one process record, a code record, a Python call and
/// return, a C call and return, a recv of 42 of 100 bytes on fd 5, a refused connect on fd 6.
fn write_program(pool: &Pool) {
    let mut w = attach(pool);
    let me = std::process::id();
    meta(
        &mut w,
        pool,
        &Meta::Proc(ProcRecord {
            reason: ProcReason::Start,
            pid: me,
            ppid: 1,
            start_ticks: 0,
            exe: b"/usr/bin/demo".to_vec(),
            argv: vec![b"demo".to_vec(), b"--port=7000".to_vec()],
        }),
    );
    meta(
        &mut w,
        pool,
        &Meta::Code(CodeRecord {
            index: 3,
            kind: CodeKind::PyCode,
            first_line: 12,
            name: b"server.handle".to_vec(),
            file: b"/srv/server.py".to_vec(),
        }),
    );
    assert!(w.append(
        pool,
        format::encode_fn(Kind::PyCall, tsc(), format::py_site(3, 4), 3).as_bytes()
    ));
    assert!(w.append(
        pool,
        format::encode_fn(Kind::FnEnter, tsc(), 0x1111, 0x2222).as_bytes()
    ));
    let recv_in = LibOpts {
        fd: Some(5),
        len: Some(100),
        ..Default::default()
    };
    lib(&mut w, pool, Kind::LibEnter, LibFn::Recv, &recv_in);
    let recv_out = LibOpts {
        ret: Some(42),
        ..recv_in
    };
    lib(&mut w, pool, Kind::LibExit, LibFn::Recv, &recv_out);
    let conn = LibOpts {
        fd: Some(6),
        ret: Some(-1),
        errno: Some(libc::ECONNREFUSED),
        ..Default::default()
    };
    lib(&mut w, pool, Kind::LibExit, LibFn::Connect, &conn);
    assert!(w.append(
        pool,
        format::encode_ret(Kind::FnExit, tsc(), 0x2222, 0).as_bytes()
    ));
    assert!(w.append(
        pool,
        format::encode_ret(Kind::PyReturn, tsc(), 3, 0).as_bytes()
    ));
    w.flush(pool, 0);
}

fn sigterm(pid: u32) {
    // SAFETY: kill(2) on a child we have not reaped (its pid cannot be reused yet).
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
}

#[test]
fn reader_stops_on_sigterm_and_dump_json_has_every_field() {
    let tp = temp_pool(8, 8192);
    write_program(&tp.pool);
    let out = tp.dir.path().join("trace");
    let mut r = Guarded::spawn(
        Command::new(culprit())
            .arg("reader")
            .arg("--pool")
            .arg(&tp.path)
            .arg("-o")
            .arg(&out)
            .stderr(Stdio::piped()),
    );
    // It drains what is there; this process still maps the pool, so it runs until told.
    assert!(wait_until(Duration::from_secs(30), || {
        tp.pool.slots().census()[bufpool::State::Free as usize] == tp.pool.n_subbufs()
    }));
    sigterm(r.pid());
    let st = r
        .wait_for(Duration::from_secs(30))
        .expect("reader exits on SIGTERM");
    assert!(st.success(), "{st}");

    let d = run_with_deadline(
        Command::new(culprit()).arg("dump").arg("--json").arg(&out),
        Duration::from_secs(30),
    );
    d.assert_success("culprit dump --json");
    let lines = parse_json_lines(&d.stdout);
    assert_eq!(lines.len(), 9, "{}", d.stdout);
    let me = std::process::id() as u64;
    let created = tp.pool.info().created_unix_ns as i64;
    let now = bufpool::sys::clock_ns(libc::CLOCK_REALTIME) as i64;
    for l in &lines {
        assert_eq!(l["pid"], me);
        assert_eq!(l["tid"], bufpool::sys::gettid() as u64);
        let t = l["t_unix_ns"].as_i64().unwrap();
        assert!(
            t >= created - 1_000_000_000 && t <= now,
            "{t} not in [{created}, {now}]"
        );
    }
    let kinds: Vec<&str> = lines.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "meta_proc",
            "meta_code",
            "py_call",
            "fn_enter",
            "lib_enter",
            "lib_exit",
            "lib_exit",
            "fn_exit",
            "py_return"
        ]
    );
    let depths: Vec<u64> = lines.iter().map(|l| l["depth"].as_u64().unwrap()).collect();
    assert_eq!(depths, [0, 0, 0, 1, 2, 2, 2, 1, 0]);
    assert_eq!(lines[0]["exe"], "/usr/bin/demo");
    assert_eq!(lines[0]["argv"][1], "--port=7000");
    assert_eq!(lines[2]["name"], "server.handle");
    assert_eq!(lines[2]["where"], "/srv/server.py:12");
    assert_eq!(lines[3]["name"], "0x2222");
    let recv = &lines[5];
    assert_eq!(recv["name"], "recv");
    assert_eq!(
        (recv["fd"].as_i64(), recv["len"].as_u64()),
        (Some(5), Some(100))
    );
    assert_eq!(
        (recv["ret"].as_i64(), recv["bytes"].as_u64()),
        (Some(42), Some(42))
    );
    assert!(recv.get("errno").is_none());
    let conn = &lines[6];
    assert_eq!(conn["name"], "connect");
    assert_eq!(conn["fd"], 6);
    assert_eq!(conn["ret"], -1);
    assert_eq!(conn["errno"], libc::ECONNREFUSED);
    assert_eq!(conn["errno_name"], "ECONNREFUSED");
    // Times are in order within the thread.
    let ts: Vec<i64> = lines
        .iter()
        .map(|l| l["t_unix_ns"].as_i64().unwrap())
        .collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{ts:?}");

    let t = run_with_deadline(
        Command::new(culprit()).arg("dump").arg(&out),
        Duration::from_secs(30),
    );
    t.assert_success("culprit dump");
    assert!(
        t.stdout.contains("recv(fd=5, len=100) = 42"),
        "{}",
        t.stdout
    );
    assert!(
        t.stdout.contains("connect(fd=6) = -1 ECONNREFUSED"),
        "{}",
        t.stdout
    );
    assert!(
        t.stdout.contains("→ server.handle [/srv/server.py:12]"),
        "{}",
        t.stdout
    );

    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["complete"], true);
    assert_eq!(manifest["totals"]["entries"], 7);
    assert_eq!(manifest["totals"]["meta_records"], 2);
    assert_eq!(manifest["processes"][0]["exe"], "/usr/bin/demo");
    assert_eq!(manifest["processes"][0]["origin"], "start");
}

#[test]
fn dump_rejects_a_missing_dir_a_garbage_manifest_and_an_unknown_pid() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope");
    let r = run_with_deadline(
        Command::new(culprit()).arg("dump").arg(&missing),
        Duration::from_secs(30),
    );
    assert_eq!(r.status.code(), Some(2));
    assert!(
        r.stderr.contains(&missing.display().to_string()),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);

    std::fs::write(tmp.path().join("manifest.json"), "not json").unwrap();
    let r = run_with_deadline(
        Command::new(culprit()).arg("dump").arg(tmp.path()),
        Duration::from_secs(30),
    );
    assert_eq!(r.status.code(), Some(2));
    assert!(
        r.stderr.contains("manifest.json: bad manifest"),
        "{}",
        r.stderr
    );

    // A good, empty trace: unknown pid is an error naming it.
    let tp = temp_pool(4, 8192);
    let out = tp.dir.path().join("t");
    let mut rd = Guarded::spawn(
        Command::new(culprit())
            .args(["reader", "--pool"])
            .arg(&tp.path)
            .arg("-o")
            .arg(&out)
            .stderr(Stdio::null()),
    );
    assert!(wait_until(Duration::from_secs(30), || out
        .join("manifest.json")
        .exists()));
    sigterm(rd.pid());
    assert!(rd.wait_for(Duration::from_secs(30)).unwrap().success());
    let r = run_with_deadline(
        Command::new(culprit())
            .args(["dump", "--pid", "4194999"])
            .arg(&out),
        Duration::from_secs(30),
    );
    assert_eq!(r.status.code(), Some(2));
    assert!(r.stderr.contains("no process 4194999"), "{}", r.stderr);
}

/// Child process body: opens the pool named by CULPRIT_POOL, writes entries, exits.
#[test]
fn child_role() {
    let Ok(role) = std::env::var(ROLE_ENV) else {
        return;
    };
    assert_eq!(role, "writer");
    let pool = Pool::open(std::env::var(bufpool::POOL_ENV).unwrap()).unwrap();
    let mut w = attach(&pool);
    for i in 0..5000u64 {
        w.append(
            &pool,
            format::encode_fn(Kind::FnEnter, tsc(), i, 0x77).as_bytes(),
        );
    }
    w.flush(&pool, 0);
    std::process::exit(0);
}

#[test]
fn reader_create_prints_the_env_line_and_exits_when_the_traced_process_is_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = tmp.path().join("p.pool");
    let out = tmp.path().join("trace");
    let mut r = Guarded::spawn(
        Command::new(culprit())
            .args([
                "reader",
                "--create",
                "--subbufs",
                "64",
                "--subbuf-size",
                "8K",
                "--pool",
            ])
            .arg(&pool)
            .arg("-o")
            .arg(&out)
            .env(LIBTRACE_ENV, "/bin/true")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(r.child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let lib = std::fs::canonicalize("/bin/true").unwrap();
    let want = format!(
        "LD_PRELOAD={} CULPRIT_POOL={}\n",
        lib.display(),
        pool.display()
    );
    assert_eq!(line, want);
    // A "traced program": a process that maps the pool, writes, and exits.
    let w = run_with_deadline(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_role", "--test-threads=1"])
            .env(ROLE_ENV, "writer")
            .env(bufpool::POOL_ENV, &pool),
        Duration::from_secs(60),
    );
    w.assert_success("writer child");
    let st = r
        .wait_for(Duration::from_secs(30))
        .expect("the reader exits by itself once no process maps the pool");
    assert!(st.success(), "{st}");
    assert!(
        !pool.exists(),
        "a pool made with --create is deleted at the end"
    );
    let d = run_with_deadline(
        Command::new(culprit()).args(["dump", "--json"]).arg(&out),
        Duration::from_secs(30),
    );
    d.assert_success("dump");
    let lines = parse_json_lines(&d.stdout);
    assert_eq!(lines.len(), 5000);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["kind"], "fn_enter");
        assert_eq!(l["caller"], format!("0x{i:x}"));
    }
}

#[test]
fn dump_names_c_functions_from_the_recorded_map_and_the_elf_file() {
    let prog = compile_c(
        "named",
        "int culprit_target_fn(int x) {\n  return x * 3;\n}\nint main(void) { return culprit_target_fn(0); }\n",
        &[],
    );
    let nm = Command::new("nm").arg(&prog.path).output().expect("run nm");
    let nm = String::from_utf8_lossy(&nm.stdout).into_owned();
    let sym = nm
        .lines()
        .find(|l| l.ends_with(" culprit_target_fn"))
        .and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok())
        .unwrap_or_else(|| panic!("no culprit_target_fn in nm output:\n{nm}"));
    let tp = temp_pool(4, 8192);
    {
        let mut w = attach(&tp.pool);
        let base = 0x5555_5555_0000u64;
        meta(
            &mut w,
            &tp.pool,
            &Meta::Map(format::MapRecord {
                start: base,
                end: base + 0x10_0000,
                offset: 0,
                prot: 5,
                path: prog.path.to_str().unwrap().as_bytes().to_vec(),
            }),
        );
        let e = format::encode_fn(Kind::FnEnter, tsc(), base + sym + 1, base + sym);
        assert!(w.append(&tp.pool, e.as_bytes()));
        w.flush(&tp.pool, 0);
    }
    let out = tp.dir.path().join("trace");
    let mut r = Guarded::spawn(
        Command::new(culprit())
            .args(["reader", "--pool"])
            .arg(&tp.path)
            .arg("-o")
            .arg(&out)
            .stderr(Stdio::null()),
    );
    assert!(wait_until(Duration::from_secs(30), || {
        tp.pool.slots().census()[bufpool::State::Free as usize] == tp.pool.n_subbufs()
    }));
    sigterm(r.pid());
    assert!(r.wait_for(Duration::from_secs(30)).unwrap().success());
    let d = run_with_deadline(
        Command::new(culprit()).args(["dump", "--json"]).arg(&out),
        Duration::from_secs(30),
    );
    d.assert_success("dump");
    let lines = parse_json_lines(&d.stdout);
    let f = lines.iter().find(|l| l["kind"] == "fn_enter").unwrap();
    let name = f["name"].as_str().unwrap();
    assert!(name.starts_with("culprit_target_fn (named.c:"), "{name}");
    assert!(f["caller_name"]
        .as_str()
        .unwrap()
        .starts_with("culprit_target_fn"));
}
