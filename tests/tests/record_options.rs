//! Options are options (issue 28): before `--`, an unknown `--flag` of a subcommand that
//! runs a command is refused with clap's suggestion, never taken for the command; and a
//! command that cannot start leaves no trace directory behind.

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tests::*;

const DEADLINE: Duration = Duration::from_secs(60);

fn culprit_in(dir: &Path, args: &[&str]) -> RunOutput {
    run_with_deadline(
        Command::new(culprit()).current_dir(dir).args(args),
        DEADLINE,
    )
}

/// The entries of `dir` (sorted names).
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_mistyped_record_option_is_an_error_with_a_suggestion() {
    let tmp = tempfile::tempdir().unwrap();
    let mark = tmp.path().join("ran");
    let mark = mark.to_str().unwrap();
    let r = culprit_in(
        tmp.path(),
        &["record", "--readrs", "4", "--", "touch", mark],
    );
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("unexpected argument '--readrs'") && r.stderr.contains("--readers"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("command not found"), "{}", r.stderr);
    // Nothing ran, nothing was made.
    assert!(entries(tmp.path()).is_empty(), "{:?}", entries(tmp.path()));
    // Without `--`, the same.
    let r = culprit_in(tmp.path(), &["record", "--readrs", "4", "touch", mark]);
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("--readers"), "{}", r.stderr);
    assert!(entries(tmp.path()).is_empty(), "{:?}", entries(tmp.path()));
}

#[test]
fn a_command_s_own_options_are_still_its_own() {
    // After the command's first word, everything is the command's, with or without `--`.
    let tmp = tempfile::tempdir().unwrap();
    let mark = tmp.path().join("a-mark");
    for (i, sep) in [true, false].into_iter().enumerate() {
        let out = format!("t{i}");
        let mut args = vec![
            "record",
            "-o",
            &out,
            "--subbufs",
            "16",
            "--subbuf-size",
            "64K",
        ];
        if sep {
            args.push("--");
        }
        args.extend(["touch", "-c", "--no-dereference", mark.to_str().unwrap()]);
        let r = culprit_in(tmp.path(), &args);
        assert_eq!(r.status.code(), Some(0), "{}", r.stderr);
        // `-c`: touch creates nothing, so the options reached touch.
        assert!(!mark.exists());
    }
}

#[test]
fn a_command_that_cannot_start_leaves_no_directory() {
    let tmp = tempfile::tempdir().unwrap();
    for cmd in ["culprit-no-such-command-28", "./no-such-file"] {
        let r = culprit_in(tmp.path(), &["record", "--", cmd, "x"]);
        assert_eq!(r.status.code(), Some(127), "{}", r.stderr);
        assert!(
            r.stderr.contains("command not found") || r.stderr.contains("no such file"),
            "{}",
            r.stderr
        );
        assert!(entries(tmp.path()).is_empty(), "{:?}", entries(tmp.path()));
    }
}

#[test]
fn a_mistyped_iosample_option_is_an_error_with_a_suggestion() {
    let tmp = tempfile::tempdir().unwrap();
    let r = culprit_in(
        tmp.path(),
        &["iosample", "--intervl", "10ms", "-o", "s.tsv", "--", "true"],
    );
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("unexpected argument '--intervl'") && r.stderr.contains("--interval"),
        "{}",
        r.stderr
    );
    assert!(entries(tmp.path()).is_empty(), "{:?}", entries(tmp.path()));
}
