//! `culprit cc` as `CC=` of a make build: flags added, arguments passed through, exit
//! status preserved, and the instrumented program runs unchanged without the tracer.

mod common;

use common::*;
use std::process::Command;

fn culprit() -> std::path::PathBuf {
    artifact("culprit", "CULPRIT_BIN")
}

const MAKEFILE: &str = "\
prog: main.o lib.o
\t$(CC) $(CFLAGS) -o $@ main.o lib.o
%.o: %.c
\t$(CC) $(CFLAGS) -c -o $@ $<
";

#[test]
fn builds_a_make_project_with_instrumentation() {
    let d = tempdir();
    std::fs::write(d.path().join("Makefile"), MAKEFILE).unwrap();
    std::fs::write(
        d.path().join("main.c"),
        "#include <stdio.h>\nint twice(int);\nint main(void) { printf(\"%d\\n\", twice(21)); return 0; }\n",
    )
    .unwrap();
    std::fs::write(
        d.path().join("lib.c"),
        "int twice(int x) { return 2 * x; }\n",
    )
    .unwrap();
    let cc = format!("{} cc", culprit().display());
    let out = Command::new("make")
        .arg(format!("CC={cc}"))
        .arg("CFLAGS=-O1")
        .current_dir(d.path())
        .env_remove("CULPRIT_REAL_CC")
        .output()
        .expect("run make");
    assert!(
        out.status.success(),
        "make failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The program calls the hooks (glibc's no-ops here) and has debug info.
    let nm = Command::new("nm")
        .arg("prog")
        .current_dir(d.path())
        .output()
        .unwrap();
    let nm = String::from_utf8_lossy(&nm.stdout);
    assert!(nm.contains("U __cyg_profile_func_enter"), "{nm}");
    assert!(nm.contains("U __cyg_profile_func_exit"), "{nm}");
    let sections = Command::new("objdump")
        .args(["-h", "prog"])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&sections.stdout).contains(".debug_info"));
    // Not preloaded: runs unchanged.
    let run = Command::new(d.path().join("prog"))
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    assert!(run.status.success());
    assert_eq!(String::from_utf8_lossy(&run.stdout), "42\n");

    // A compile error: make fails, with the compiler's message.
    std::fs::write(
        d.path().join("lib.c"),
        "int twice(int x) { return 2 * ; }\n",
    )
    .unwrap();
    let out = Command::new("make")
        .arg(format!("CC={cc}"))
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("error"));
}

#[test]
fn passes_every_argument_and_the_exit_status() {
    let d = tempdir();
    let log = d.path().join("args");
    let fake = d.path().join("fakecc");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> '{}'; done\nexit 42\n",
            log.display()
        ),
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&fake).status().unwrap();
    let st = Command::new(culprit())
        .args([
            "cc",
            "-c",
            "a file.c",
            "-o",
            "x.o",
            "-DX=\"1 2\"",
            "--",
            "-h",
        ])
        .env("CULPRIT_REAL_CC", format!("{} --first", fake.display()))
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(42), "the compiler's status");
    let got = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        got,
        "--first\n-finstrument-functions\n-g\n-fno-omit-frame-pointer\n-c\na file.c\n-o\nx.o\n-DX=\"1 2\"\n--\n-h\n"
    );
    // Queries go through with nothing added.
    std::fs::remove_file(&log).unwrap();
    let st = Command::new(culprit())
        .args(["cc", "-dumpversion"])
        .env("CULPRIT_REAL_CC", fake.as_os_str())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(42));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "-dumpversion\n");
    // A real compiler that leads back to `culprit cc`: an error, not an endless loop.
    let out = Command::new(culprit())
        .args(["cc", "-c", "x.c"])
        .env("CULPRIT_REAL_CC", format!("{} cc", culprit().display()))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("runs `culprit cc` again"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A compiler that does not exist: an error, not a hang or a silent success.
    let out = Command::new(culprit())
        .args(["cc", "-c", "x.c"])
        .env("CULPRIT_REAL_CC", d.path().join("no-such-cc"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot run the compiler"));
}
