//! `culprit watch` reads only what was written since its last poll (each thread from a
//! few units before its last, within a record): a program with small sub-buffers (many
//! per thread)
//! runs an event loop for a few seconds and, once, handles a message differently (a
//! UDP datagram sent to 127.0.0.1's discard port after its `recv`). The watch, live, reports that unit — with the
//! `id` a whole ranking gives it — and exactly the units a watch that ranks the whole
//! finished directory reports (`--whole`): nothing is lost or made up at the suffixes'
//! seams.

use std::process::Command;
use std::time::{Duration, Instant};
use tests::*;

/// `argv[1]` messages through a socket pair, each `poll`ed for then received; after
/// message `argv[2]`, a datagram goes to 127.0.0.1:9 (loopback only). A pause every 5 000 messages makes it run for
/// a while under the watch.
const ODD_ONE: &str = r#"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int sv[2];
    if (argc < 3 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 2;
    long n = atol(argv[1]), odd = atol(argv[2]);
    int udp = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(9)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char buf[64] = {0};
    for (long i = 0; i < n; i++) {
        if (send(sv[0], buf, sizeof buf, 0) != (ssize_t)sizeof buf) return 3;
        struct pollfd p = {.fd = sv[1], .events = POLLIN};
        if (poll(&p, 1, 1000) != 1) return 4;
        if (recv(sv[1], buf, sizeof buf, 0) != (ssize_t)sizeof buf) return 5;
        if (i == odd && sendto(udp, buf, 8, 0, (struct sockaddr *)&to, sizeof to) != 8)
            return 6;
        if (i % 5000 == 0) usleep(50000);
    }
    return 0;
}
"#;

/// The units reported, by id (wall-clock times may move by microseconds between a live
/// reading and the finished one: the final conversion has the last clock snapshot).
fn ids(reports: &[serde_json::Value]) -> Vec<String> {
    let mut v: Vec<_> = reports
        .iter()
        .map(|r| r["id"].as_str().unwrap_or("").to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn an_incremental_watch_reports_what_a_whole_ranking_does() {
    if libtrace_or_skip("an_incremental_watch").is_none() {
        return;
    }
    let prog = compile_c("odd_one", ODD_ONE, &[]);
    let tmp = tempfile::tempdir().unwrap();
    let normal = tmp.path().join("normal");
    run_with_deadline(
        Command::new(culprit())
            .args(["record", "-o"])
            .arg(&normal)
            .arg("--")
            .arg(&prog.path)
            .args(["3000", "-1"]),
        Duration::from_secs(120),
    )
    .assert_success("culprit record (normal)");
    let model = tmp.path().join("m.cpm");
    run_with_deadline(
        Command::new(culprit())
            .arg("learn")
            .arg(&normal)
            .arg("-o")
            .arg(&model),
        Duration::from_secs(120),
    )
    .assert_success("culprit learn");
    // 8 KiB sub-buffers: a few hundred per thread, so the watch's suffixes move.
    let live = tmp.path().join("live");
    let mut rec = Guarded::spawn(
        Command::new(culprit())
            .args(["record", "--subbuf-size", "8K", "-o"])
            .arg(&live)
            .arg("--")
            .arg(&prog.path)
            .args(["60000", "40000"]),
    );
    let mut watch = Guarded::spawn(
        Command::new(culprit())
            .args([
                "watch",
                "--incremental",
                "--json",
                "--interval",
                "100ms",
                "--threshold",
                "0.79",
            ])
            .arg("--model")
            .arg(&model)
            .arg(&live)
            .stdout(std::process::Stdio::piped()),
    );
    let mut stdout = watch.child.stdout.take().unwrap();
    let reading = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).unwrap();
        s
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = rec.wait_for(Duration::from_millis(100)) {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "recording did not end"
        );
    };
    assert!(status.success(), "culprit record: {status:?}");
    let ended = watch.wait_for(Duration::from_secs(120));
    assert!(ended.is_some_and(|s| s.success()), "watch: {ended:?}");
    let live_reports = parse_json_lines(&reading.join().unwrap());
    // A call never seen in normal runs scores just under the default threshold (0.8).
    let odd: Vec<_> = live_reports
        .iter()
        .filter(|r| r["why"].to_string().contains("sendto"))
        .collect();
    assert_eq!(
        odd.len(),
        1,
        "the odd message's unit, once: {live_reports:?}"
    );
    let whole = run_with_deadline(
        Command::new(culprit())
            .args([
                "watch",
                "--json",
                "--whole",
                "--threshold",
                "0.79",
                "--model",
            ])
            .arg(&model)
            .arg(&live),
        Duration::from_secs(120),
    );
    whole.assert_success("culprit watch --whole");
    let whole_reports = parse_json_lines(&whole.stdout);
    assert_eq!(
        ids(&live_reports),
        ids(&whole_reports),
        "live (incremental) and whole watches differ"
    );
}
