//! Processes named as started, and as they renamed themselves (issue 28): a program started
//! through a symbolic link (`myserver` → the Python interpreter) that renames itself while
//! it runs (`/proc/self/comm`, as `prctl(PR_SET_NAME)` and `setproctitle` do) is named
//! `myserver (renamed-srv) [python3.x] :PORT` — `argv[0]`'s base name, its `comm` where it
//! differs, the executable where it differs, its port — and named so, through one function,
//! in every view: `record`'s closing table, `rank` (text, JSON and its page), `show`, `messages`, `demand`, the timeline page
//! (read from the DOM headless Chromium renders) and the Perfetto export (decoded with the
//! official schema).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tests::*;

const DEADLINE: Duration = Duration::from_secs(120);

/// Listens, connects to itself, exchanges a few requests and answers, renames itself and
/// exits normally.
const PROGRAM: &str = r#"
import socket
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
c = socket.create_connection(srv.getsockname())
a, _ = srv.accept()
for i in range(30):
    c.sendall(b"ping")
    a.recv(4)
    a.sendall(b"pong")
    c.recv(4)
with open("/proc/self/comm", "w") as f:
    f.write("renamed-srv")
c.close()
a.close()
srv.close()
"#;

fn culprit_ok(args: &[&str], what: &str) -> RunOutput {
    let r = run_with_deadline(Command::new(culprit()).args(args), DEADLINE);
    r.assert_success(what);
    r
}

/// The interpreter's real executable (not a pyenv shim).
fn python() -> PathBuf {
    let r = run_with_deadline(
        Command::new("python3").args([
            "-c",
            "import os, sys; print(os.path.realpath(sys.executable))",
        ]),
        DEADLINE,
    );
    r.assert_success("python3");
    PathBuf::from(r.stdout.trim())
}

/// Process names of a Perfetto file's process tracks, one per line.
fn perfetto_process_names(file: &Path) -> Vec<String> {
    let script = r#"
import sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
t = pb.Trace()
t.ParseFromString(open(sys.argv[1], 'rb').read())
for p in t.packet:
    if p.HasField('track_descriptor') and p.track_descriptor.HasField('process'):
        print(p.track_descriptor.process.process_name)
"#;
    let r = run_with_deadline(
        Command::new("python3").args(["-c", script, file.to_str().unwrap()]),
        DEADLINE,
    );
    r.assert_success(
        "decode the Perfetto trace with perfetto_trace_pb2 (scripts/setup.d/perfetto.sh)",
    );
    r.stdout.lines().map(str::to_owned).collect()
}

#[test]
fn a_renamed_process_is_named_as_started_and_as_renamed_in_every_view() {
    if libtrace_or_skip("names_renamed").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let py = python();
    let link = dir.join("myserver");
    std::os::unix::fs::symlink(&py, &link).unwrap();
    let prog = dir.join("prog.py");
    std::fs::write(&prog, PROGRAM).unwrap();
    let trace = dir.join("t");
    let t = trace.to_str().unwrap();
    let rec = culprit_ok(
        &[
            "record",
            "-o",
            t,
            "--",
            link.to_str().unwrap(),
            prog.to_str().unwrap(),
        ],
        "culprit record",
    );
    let exe_base = py.file_name().unwrap().to_str().unwrap();
    let name = format!("myserver (renamed-srv) [{exe_base}]");
    // record's closing table.
    assert!(rec.stderr.contains(&name), "{}", rec.stderr);

    // rank: the JSON's "process", and the text's.
    let model = dir.join("m.model");
    culprit_ok(
        &["learn", "-o", model.to_str().unwrap(), t],
        "culprit learn",
    );
    let m = model.to_str().unwrap();
    let j = culprit_ok(&["rank", "--json", "--model", m, t], "culprit rank --json").stdout;
    let j: serde_json::Value = serde_json::from_str(&j).unwrap();
    let units = j.as_array().unwrap();
    let unit = units
        .iter()
        .find(|u| u["process"].as_str().is_some_and(|p| p.starts_with(&name)))
        .unwrap_or_else(|| panic!("no unit of {name:?}: {j:#}"));
    // The label: the name, then the port it listens on.
    let label = unit["process"].as_str().unwrap().to_string();
    assert!(
        label.len() > name.len() + 2 && label[name.len()..].starts_with(" :"),
        "{label:?}"
    );
    let text = culprit_ok(&["rank", "--top", "1000", "--model", m, t], "culprit rank").stdout;
    assert!(text.contains(&format!("({label})")), "{text}");
    let report = dir.join("report.html");
    culprit_ok(
        &["rank", "--model", m, t, "--html", report.to_str().unwrap()],
        "culprit rank --html",
    );

    // show: the unit's header line and JSON.
    let id = unit["id"].as_str().unwrap();
    let shown = culprit_ok(&["show", "--model", m, t, "--unit", id], "culprit show").stdout;
    assert!(
        shown
            .lines()
            .next()
            .unwrap_or("")
            .contains(&format!("({label})")),
        "{shown}"
    );
    let shown = culprit_ok(
        &["show", "--json", "--model", m, t, "--unit", id],
        "culprit show --json",
    )
    .stdout;
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["process"], label.as_str());

    // messages: the JSON's processes and the text's waits.
    let msg = culprit_ok(&["messages", "--json", t], "culprit messages --json").stdout;
    let msg: serde_json::Value = serde_json::from_str(&msg).unwrap();
    let procs: Vec<&str> = msg["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["process"].as_str())
        .collect();
    assert!(procs.contains(&label.as_str()), "{procs:?}");
    let msg = culprit_ok(&["messages", t], "culprit messages").stdout;
    assert!(msg.contains(&label), "{msg}");

    // demand: the process is reported or left out, named the same way.
    let dem = culprit_ok(&["demand", "--json", t], "culprit demand --json").stdout;
    let dem: serde_json::Value = serde_json::from_str(&dem).unwrap();
    let named: Vec<&str> = ["processes", "skipped"]
        .iter()
        .flat_map(|k| dem[k].as_array().into_iter().flatten())
        .filter_map(|p| p["process"].as_str())
        .collect();
    assert!(named.contains(&label.as_str()), "{named:?}");

    // The timeline page, as Chromium renders it.
    let page = dir.join("page.html");
    culprit_ok(
        &["timeline", "-o", page.to_str().unwrap(), t],
        "culprit timeline",
    );
    if chromium_or_skip_page() {
        let r = tests::browser::render(&page).expect("chromium");
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        let dom = r.dom.replace("&gt;", ">").replace("&lt;", "<");
        assert!(dom.contains(&label), "the timeline does not show {label:?}");
        let r = tests::browser::render(&report).expect("chromium");
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert!(
            r.dom.contains(&format!("({label})</title>")),
            "the ranking page does not name {label:?}"
        );
    }

    // The Perfetto export's process track.
    let pf = dir.join("t.perfetto");
    culprit_ok(
        &[
            "export",
            "--format",
            "perfetto",
            "-o",
            pf.to_str().unwrap(),
            t,
        ],
        "culprit export",
    );
    let names = perfetto_process_names(&pf);
    assert!(
        names.iter().any(|n| n.ends_with(&format!(" {label}"))),
        "{label:?} not among the Perfetto process names {names:?}"
    );
}

fn chromium_or_skip_page() -> bool {
    tests::browser::chromium_or_skip("names_renamed").is_some()
}
