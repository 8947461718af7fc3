//! A process that dies or stops mid-run (issue 31, class 6): two traced C echo servers and
//! a client that alternates between them, learned from normal runs in which both servers
//! are SIGTERMed at the end (killed in their event loops, as daemons are); then one server
//! is SIGKILLed (or SIGSTOPped) by `culprit record --inject '…:kill=…'` at its 40th
//! receive while the other goes on serving. `culprit rank` must put the dead server's last
//! unit — the one holding the injection — first, say how it ended (`ending` in `--json`,
//! the *why*), and file what the client met on its connection to it under it; a
//! fault-free run, SIGTERMed at the end like the normal ones, must have no unit flagged
//! for its ending.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// An echo server: binds 127.0.0.1 on an ephemeral port, writes the port to the file named
/// by its second argument, then echoes on every connection until it is killed.
const SERVER: &str = r#"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a; memset(&a, 0, sizeof a);
    a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(INADDR_LOOPBACK); a.sin_port = 0;
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 16)) return 1;
    socklen_t al = sizeof a; getsockname(ls, (struct sockaddr *)&a, &al);
    char tmp[256]; snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
    FILE *f = fopen(tmp, "w"); if (!f) return 1;
    fprintf(f, "%d\n", ntohs(a.sin_port)); fclose(f); rename(tmp, argv[2]);
    struct pollfd fds[32]; int n = 1;
    fds[0].fd = ls; fds[0].events = POLLIN;
    for (;;) {
        if (poll(fds, n, -1) < 0) continue;
        for (int i = n - 1; i >= 0; i--) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            if (i == 0) {
                int c = accept(ls, 0, 0);
                if (c >= 0 && n < 32) { fds[n].fd = c; fds[n].events = POLLIN; n++; }
                else if (c >= 0) close(c);
                continue;
            }
            char b[64];
            ssize_t r = recv(fds[i].fd, b, sizeof b, 0);
            if (r <= 0) { close(fds[i].fd); fds[i] = fds[--n]; continue; }
            send(fds[i].fd, b, (size_t)r, 0);
        }
    }
}
"#;

/// The client: one connection to each server (ports read from the two files), `count`
/// requests alternating between them, each reply waited for with `poll` (300 ms); a server
/// that fails (timeout, end of stream, reset) is dropped and the rest go to the other.
const CLIENT: &str = r#"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
static int port_of(const char *path) {
    for (int i = 0; i < 500; i++) {
        FILE *f = fopen(path, "r");
        if (f) { int p = 0; int ok = fscanf(f, "%d", &p); fclose(f); if (ok == 1) return p; }
        usleep(10000);
    }
    return -1;
}
static int dial(int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a; memset(&a, 0, sizeof a);
    a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(INADDR_LOOPBACK); a.sin_port = htons(port);
    if (connect(s, (struct sockaddr *)&a, sizeof a)) { close(s); return -1; }
    return s;
}
int main(int argc, char **argv) {
    if (argc < 4) return 2;
    int s[2] = {dial(port_of(argv[1])), dial(port_of(argv[2]))};
    int count = atoi(argv[3]), ok = 0, failed = 0;
    for (int i = 0; i < count; i++) {
        int k = i % 2;
        if (s[k] < 0) k = 1 - k;
        if (s[k] < 0) break;
        char b[64];
        snprintf(b, sizeof b, "ping %d\n", i);
        ssize_t n = strlen(b);
        struct pollfd p = {s[k], POLLIN, 0};
        if (send(s[k], b, (size_t)n, MSG_NOSIGNAL) != n || poll(&p, 1, 300) != 1
            || recv(s[k], b, sizeof b, 0) <= 0) {
            close(s[k]); s[k] = -1; failed++;
        } else {
            ok++;
        }
        usleep(2000);
    }
    printf("client: %d ok, %d failed\n", ok, failed);
    return 0;
}
"#;

/// Starts both servers, runs the client, then SIGTERMs the servers (and continues them: a
/// stopped one dies of the pending SIGTERM) and waits for them.
const LAUNCH: &str = r#"
rm -f alpha.port beta.port
"$SRV" alpha alpha.port & A=$!
"$SRV" beta beta.port & B=$!
"$CLI" alpha.port beta.port 300
sleep 0.2
kill -TERM $A $B 2>/dev/null
kill -CONT $A $B 2>/dev/null
wait $A $B
exit 0
"#;

struct Programs {
    server: tests::CProgram,
    client: tests::CProgram,
}

fn programs() -> Programs {
    Programs {
        server: tests::compile_c("srv", SERVER, &[]),
        client: tests::compile_c("cli", CLIENT, &[]),
    }
}

fn record(p: &Programs, dir: &Path, name: &str, inject: Option<&str>) -> std::path::PathBuf {
    let out = dir.join(name);
    let work = dir.join(format!("{name}.work"));
    std::fs::create_dir_all(&work).unwrap();
    let mut c = Command::new(tests::culprit());
    c.arg("record").arg("-o").arg(&out);
    if let Some(i) = inject {
        c.arg("--inject").arg(i);
    }
    c.arg("--")
        .args(["sh", "-c", LAUNCH])
        .env("SRV", &p.server.path)
        .env("CLI", &p.client.path)
        .current_dir(&work);
    let r = tests::run_with_deadline(&mut c, Duration::from_secs(120));
    r.assert_success("culprit record");
    assert!(r.stdout.contains("client:"), "{}\n{}", r.stdout, r.stderr);
    out
}

fn culprit(args: &[&std::ffi::OsStr]) -> String {
    let r = tests::run_with_deadline(
        Command::new(tests::culprit()).args(args),
        Duration::from_secs(300),
    );
    r.assert_success("culprit");
    r.stdout
}

/// Learns from two normal runs; returns the model's path.
fn learn(p: &Programs, dir: &Path) -> std::path::PathBuf {
    let n1 = record(p, dir, "normal1", None);
    let n2 = record(p, dir, "normal2", None);
    let model = dir.join("model.cpm");
    culprit(&[
        "learn".as_ref(),
        n1.as_os_str(),
        n2.as_os_str(),
        "-o".as_ref(),
        model.as_os_str(),
    ]);
    model
}

fn rank(model: &Path, trial: &Path) -> Vec<serde_json::Value> {
    let out = culprit(&[
        "rank".as_ref(),
        "--model".as_ref(),
        model.as_os_str(),
        trial.as_os_str(),
        "--json".as_ref(),
    ]);
    serde_json::from_str(&out).expect("rank --json is a JSON array")
}

fn has_injection(u: &serde_json::Value) -> bool {
    u["injections"].as_array().is_some_and(|a| !a.is_empty())
}

/// The trial with `rule` injected: its first unit is the one holding the injection, it
/// carries an `ending`, and a *why* saying so; when the server was killed, the client's
/// failed receive on its connection to it (the kernel closed the server's sockets) is
/// filed under it. (A stopped server closes nothing: the client's wait times out inside
/// the unit of its previous reply, from the other server.)
fn dead_server_first(sig: &str) {
    if tests::libtrace_or_skip(&format!("rank_ending ({sig})")).is_none() {
        return;
    }
    let p = programs();
    let d = tempfile::tempdir().unwrap();
    let model = learn(&p, d.path());
    let rule = format!("recv:kill={sig},argv=alpha alpha.port,nth=40");
    let trial = record(&p, d.path(), "trial", Some(&rule));
    let units = rank(&model, &trial);
    let first = &units[0];
    assert!(
        has_injection(first),
        "the dead server's last unit is not first: {:#}",
        serde_json::Value::Array(units.iter().take(3).cloned().collect())
    );
    assert!(first["cut"].as_bool().unwrap_or(false), "{first:#}");
    let ending = &first["ending"];
    assert_eq!(ending["kind"], "no_exit_in_loop", "{first:#}");
    assert!(ending["silent_share"].as_f64().unwrap() > 0.3, "{first:#}");
    assert!(
        first["why"][0]
            .as_str()
            .is_some_and(|w| w.contains("with no exit (killed or stopped)")),
        "{first:#}"
    );
    // What the client met on its connection to it is filed under it.
    let root = first["id"].as_str().unwrap();
    let killed = sig == "SIGKILL";
    let filed: Vec<&serde_json::Value> = units
        .iter()
        .filter(|u| u["caused_by"].as_str() == Some(root) && u["pid"] != first["pid"])
        .collect();
    assert!(
        !killed || !filed.is_empty(),
        "{:#}",
        serde_json::Value::Array(units.iter().take(4).cloned().collect())
    );
    assert!(
        !killed || ending["peer_units"].as_u64().unwrap() >= 1,
        "{first:#}"
    );
    // Only one unit of the run says its process ended abnormally.
    assert_eq!(
        units.iter().filter(|u| u.get("ending").is_some()).count(),
        1
    );

    // A fault-free run, SIGTERMed at the end like the normal ones: no ending flagged.
    let control = record(&p, d.path(), "control", None);
    let units = rank(&model, &control);
    assert!(
        units.iter().all(|u| u.get("ending").is_none()),
        "{:#}",
        serde_json::Value::Array(units.iter().take(3).cloned().collect())
    );
}

#[test]
fn a_server_sigkilled_mid_run_has_its_last_unit_ranked_first() {
    dead_server_first("SIGKILL");
}

#[test]
fn a_server_sigstopped_mid_run_has_its_last_unit_ranked_first() {
    dead_server_first("SIGSTOP");
}
