//! Function names on Debian's stripped daemons are true (issue 28): `redis-server`,
//! `nginx` and `memcached` (installed by `scripts/setup.d/daemons.sh`, run here on
//! 127.0.0.1 as the user would, never as services) are recorded serving a few requests, and
//! every call site `culprit dump --json` names with a function is checked against the
//! module's own symbol table (`nm`): the function's extent must hold the address. Call sites
//! no symbol holds are written `file+0xoffset`.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tests::*;

const DEADLINE: Duration = Duration::from_secs(60);

/// A code symbol of a module: start and size (0 when `nm` gives none).
type Syms = HashMap<String, Vec<(u64, u64)>>;

/// The module's symbols (`.symtab` and `.dynsym`), by name.
fn symbols(module: &Path) -> Syms {
    let mut out: Syms = HashMap::new();
    for dynamic in [false, true] {
        let mut c = Command::new("nm");
        c.args(["-S", "--defined-only"]);
        if dynamic {
            c.arg("-D");
        }
        let Ok(o) = c.arg(module).output() else {
            continue;
        };
        for l in String::from_utf8_lossy(&o.stdout).lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (addr, size, name) = match f.len() {
                4 => (f[0], f[1], f[3]),
                3 => (f[0], "0", f[2]),
                _ => continue,
            };
            let name = name.split('@').next().unwrap_or(name).to_string();
            let (Ok(a), Ok(s)) = (u64::from_str_radix(addr, 16), u64::from_str_radix(size, 16))
            else {
                continue;
            };
            out.entry(name).or_default().push((a, s));
        }
    }
    out
}

/// The lowest loaded virtual address of a module, to a page (what a base-relative offset
/// is counted from).
fn load_bias(module: &Path) -> u64 {
    let o = Command::new("readelf")
        .args(["-lW"])
        .arg(module)
        .output()
        .expect("readelf");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .filter_map(|l| {
            let v = l.split_whitespace().nth(2)?;
            u64::from_str_radix(v.trim_start_matches("0x"), 16).ok()
        })
        .min()
        .unwrap_or(0)
        & !0xfff
}

/// Checks every named call site of the trace against its module's symbols. Returns
/// `(named, marked)`: how many call sites had a function name, how many `file+0x…`.
fn check_names(trace: &Path, what: &str) -> (usize, usize) {
    let d = run_with_deadline(
        Command::new(culprit())
            .env("CULPRIT_DEBUG_ROOT", trace)
            .args(["dump", "--json"])
            .arg(trace),
        DEADLINE,
    );
    d.assert_success("culprit dump --json");
    let mut tables: HashMap<String, (Syms, u64)> = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    let (mut named, mut marked) = (0, 0);
    for l in parse_json_lines(&d.stdout) {
        let (Some(name), Some(module), Some(off)) = (
            l["caller_name"].as_str(),
            l["caller_module"].as_str(),
            l["caller_offset"].as_str(),
        ) else {
            continue;
        };
        if !seen.insert((module.to_string(), off.to_string())) {
            continue;
        }
        if name.contains("+0x") {
            marked += 1;
            continue;
        }
        named += 1;
        let function = name.split(" (").next().unwrap();
        let (syms, bias) = tables.entry(module.to_string()).or_insert_with(|| {
            let p = PathBuf::from(module);
            (symbols(&p), load_bias(&p))
        });
        let addr = u64::from_str_radix(off.trim_start_matches("0x"), 16).unwrap() + *bias;
        let all: Vec<(u64, u64)> = syms.values().flatten().copied().collect();
        let holds = syms.get(function).is_some_and(|v| {
            v.iter().any(|&(start, size)| {
                start <= addr
                    && if size > 0 {
                        addr < start + size
                    } else {
                        // Unsized: no other symbol between it and the address.
                        !all.iter().any(|&(s, _)| s > start && s <= addr)
                    }
            })
        });
        assert!(
            holds,
            "{what}: {name} names {module}+{off} (0x{addr:x}), which no symbol of that name holds"
        );
    }
    eprintln!("{what}: {named} named call sites checked, {marked} marked file+0x…");
    (named, marked)
}

/// Records `cmd` (a daemon in the foreground) while `client` talks to it on `port`; the
/// client must make it exit.
fn record_daemon(cmd: &[&str], port: u16, client: impl FnOnce(u16), out: &Path) {
    let mut rec = Guarded::spawn(
        Command::new(culprit())
            .args(["record", "-o"])
            .arg(out)
            .arg("--")
            .args(cmd)
            .stdout(std::process::Stdio::null()),
    );
    assert!(
        wait_until(DEADLINE, || TcpStream::connect(("127.0.0.1", port)).is_ok()),
        "{} did not listen on {port}",
        cmd[0]
    );
    client(port);
    let st = rec.wait_for(DEADLINE);
    assert!(st.is_some(), "{} did not stop", cmd[0]);
}

/// Sends `req` and reads until the reply contains `until`.
fn ask(port: u16, req: &[u8], until: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(req).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains(until) {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

fn installed(test: &str, exe: &str) -> bool {
    if Path::new(exe).exists() {
        return true;
    }
    skip(
        test,
        "the whole test",
        &format!("{exe} is not installed (scripts/setup.d/daemons.sh)"),
    );
    false
}

#[test]
fn redis_names_are_true() {
    if libtrace_or_skip("names_daemons").is_none() || !installed("redis", "/usr/bin/redis-server") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let port = free_tcp_port();
    let p = port.to_string();
    let dir = tmp.path().to_str().unwrap();
    record_daemon(
        &[
            "redis-server",
            "--port",
            &p,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            dir,
            "--logfile",
            "",
        ],
        port,
        |port| {
            assert!(ask(port, b"PING\r\n", "PONG").contains("PONG"));
            assert!(ask(port, b"SET k v\r\nGET k\r\n", "v\r\n").contains('v'));
            ask(port, b"SHUTDOWN NOSAVE\r\n", "\n");
        },
        &tmp.path().join("t"),
    );
    let (named, marked) = check_names(&tmp.path().join("t"), "redis-server");
    assert!(named + marked > 0, "no call site recorded");
}

#[test]
fn memcached_names_are_true() {
    if libtrace_or_skip("names_daemons").is_none() || !installed("memcached", "/usr/bin/memcached")
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let port = free_tcp_port();
    let p = port.to_string();
    record_daemon(
        &[
            "memcached",
            "-l",
            "127.0.0.1",
            "-p",
            &p,
            "-U",
            "0",
            "-u",
            "root",
            "-A",
            "-t",
            "2",
        ],
        port,
        |port| {
            assert!(ask(port, b"set k 0 0 1\r\nx\r\nget k\r\n", "END").contains("END"));
            ask(port, b"shutdown\r\n", "\n");
        },
        &tmp.path().join("t"),
    );
    let (named, marked) = check_names(&tmp.path().join("t"), "memcached");
    assert!(named + marked > 0, "no call site recorded");
}

#[test]
fn nginx_names_are_true() {
    if libtrace_or_skip("names_daemons").is_none() || !installed("nginx", "/usr/sbin/nginx") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let port = free_tcp_port();
    let d = tmp.path().display();
    let conf = tmp.path().join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 64; }}\n\
             http {{ access_log off; client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
             server {{ listen 127.0.0.1:{port}; location / {{ return 200 \"ok\\n\"; }} }} }}\n"
        ),
    )
    .unwrap();
    let prefix = format!("{d}/");
    let conf_s = conf.to_str().unwrap().to_string();
    let quit = {
        let (prefix, conf_s) = (prefix.clone(), conf_s.clone());
        move |port: u16| {
            let r = ask(
                port,
                b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                "ok",
            );
            assert!(r.contains("200"), "{r}");
            Command::new("/usr/sbin/nginx")
                .args(["-p", &prefix, "-c", &conf_s, "-s", "quit"])
                .status()
                .expect("nginx -s quit");
        }
    };
    record_daemon(
        &[
            "/usr/sbin/nginx",
            "-p",
            &prefix,
            "-c",
            &conf_s,
            "-g",
            "daemon off;",
        ],
        port,
        quit,
        &tmp.path().join("t"),
    );
    let (named, marked) = check_names(&tmp.path().join("t"), "nginx");
    assert!(named + marked > 0, "no call site recorded");
}
