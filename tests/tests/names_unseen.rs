//! Saying what cannot be seen (issue 28): a static C program (LD_PRELOAD never applies)
//! and a Go program (Go makes its system calls itself) are named, with their reason, in
//! `culprit record`'s summary and in the headers of `rank`, `timeline` and `export`.
//!
//! The Go program is built by Debian's `golang-go` (`scripts/setup.d/go.sh`) into a
//! temporary build cache: about 4 s on a busy 2-core machine.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tests::*;

const DEADLINE: Duration = Duration::from_secs(120);

/// Talks to itself over a socketpair: every call a raw system call once static.
const STATIC_C: &str = r#"
#include <sys/socket.h>
#include <unistd.h>
int main(void) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 1;
    char b[3] = "ab";
    if (write(sv[0], b, 2) != 2 || read(sv[1], b, 2) != 2) return 2;
    return 0;
}
"#;

/// Listens, connects to itself, echoes five bytes.
const GO_NET: &str = r#"package main

import (
	"fmt"
	"net"
)

func main() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		c, err := l.Accept()
		if err == nil {
			buf := make([]byte, 5)
			n, _ := c.Read(buf)
			c.Write(buf[:n])
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		panic(err)
	}
	c.Write([]byte("hello"))
	buf := make([]byte, 5)
	n, _ := c.Read(buf)
	fmt.Println(string(buf[:n]))
}
"#;

/// The Go program built in `dir`, or `None` (skipped) without `go`.
fn build_go(dir: &Path) -> Option<PathBuf> {
    let go = ["/usr/bin/go", "/usr/lib/go/bin/go"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(go) = go else {
        skip(
            "names_unseen",
            "the Go program",
            "go is not installed (scripts/setup.d/go.sh)",
        );
        return None;
    };
    std::fs::write(dir.join("main.go"), GO_NET).unwrap();
    let out = dir.join("gonet");
    let r = run_with_deadline(
        Command::new(go)
            .current_dir(dir)
            .env("GOCACHE", dir.join("cache"))
            .env("GOPATH", dir.join("gopath"))
            .env("HOME", dir)
            .env("GOFLAGS", "-mod=mod")
            .env("GOTOOLCHAIN", "local")
            .args(["build", "-o"])
            .arg(&out)
            .arg("main.go"),
        DEADLINE,
    );
    r.assert_success("go build");
    Some(out)
}

fn culprit_ok(args: &[&str], what: &str) -> RunOutput {
    let r = run_with_deadline(Command::new(culprit()).args(args), DEADLINE);
    r.assert_success(what);
    r
}

#[test]
fn a_static_command_is_named_with_its_reason() {
    if libtrace_or_skip("names_unseen").is_none() {
        return;
    }
    let prog = compile_c("static_talk", STATIC_C, &["-static"]);
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("t");
    let r = culprit_ok(
        &[
            "record",
            "-o",
            t.to_str().unwrap(),
            "--",
            prog.path.to_str().unwrap(),
        ],
        "culprit record -- static",
    );
    assert!(
        r.stderr
            .contains("static_talk: not recorded: a static executable: LD_PRELOAD"),
        "{}",
        r.stderr
    );
}

#[test]
fn go_and_static_programs_are_named_with_their_reasons_everywhere() {
    if libtrace_or_skip("names_unseen").is_none() {
        return;
    }
    let prog = compile_c("static_talk", STATIC_C, &["-static"]);
    let tmp = tempfile::tempdir().unwrap();
    let Some(go) = build_go(tmp.path()) else {
        return;
    };
    let t = tmp.path().join("t");
    let t = t.to_str().unwrap();
    // sh forks and execs each: the static one from a traced child, the Go one (cgo:
    // dynamically linked) traced but silent.
    let script = format!("{} && {} && echo done", prog.path.display(), go.display());
    let r = culprit_ok(
        &["record", "-o", t, "--", "sh", "-c", &script],
        "culprit record -- sh -c 'static && go'",
    );
    assert!(
        r.stdout.contains("hello") && r.stdout.contains("done"),
        "{}",
        r.stdout
    );
    let static_why = "a static executable: LD_PRELOAD does not apply to it, so nothing after the exec is recorded";
    let go_why = "a Go program: Go makes its system calls itself, not through libc";
    assert!(r.stderr.contains(static_why), "{}", r.stderr);
    assert!(r.stderr.contains(go_why), "{}", r.stderr);

    // The analyses' headers say the same.
    let page = tmp.path().join("p.html");
    let tl = culprit_ok(
        &["timeline", "-o", page.to_str().unwrap(), t],
        "culprit timeline",
    );
    let json = tmp.path().join("x.json");
    let ex = culprit_ok(
        &[
            "export",
            "--format",
            "chrome",
            "-o",
            json.to_str().unwrap(),
            t,
        ],
        "culprit export",
    );
    let model = tmp.path().join("model");
    culprit_ok(
        &["learn", "-o", model.to_str().unwrap(), t],
        "culprit learn",
    );
    let rank = culprit_ok(
        &["rank", "--model", model.to_str().unwrap(), t],
        "culprit rank",
    );
    for (what, text) in [
        ("timeline", &tl.stderr),
        ("export", &ex.stderr),
        ("rank", &rank.stdout),
    ] {
        assert!(text.contains(static_why), "{what}: {text}");
        assert!(
            text.contains(go_why) && text.contains("gonet"),
            "{what}: {text}"
        );
    }
}
