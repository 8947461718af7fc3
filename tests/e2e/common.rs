//! Helpers of the end-to-end stories (`tests/tests/e2e_*.rs`, included with `#[path]`):
//! record runs with `culprit record`, learn, rank, read the trace manifest, and check the
//! properties issue 5 asks of a ranking.
//!
//! The story: record normal runs of a ring, learn a model, record a run in which ONE
//! receive on the ring is disturbed (`--inject`), rank its units. The ranking must put
//! first a unit on the node whose connection broke or on its peer, and the earliest
//! high-scoring unit of those two nodes must say why: the close / the reset.
//!
//! "High-scoring" is measured, not guessed: a further normal run (not learned from) is
//! ranked against the same model, and its highest unit score is the noise floor. A unit
//! of the faulty run is high-scoring when it scores above that floor.

#![allow(dead_code)]

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The workspace root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// `libtrace.so`; the stories cannot be told without it.
pub fn libtrace() -> PathBuf {
    tests::libtrace().unwrap_or_else(|| {
        panic!(
            "libtrace.so not found in {}: run `cargo build --workspace` first (same profile \
             and CARGO_TARGET_DIR as the tests)",
            tests::profile_dir().display()
        )
    })
}

/// The `culprit` command with `libtrace.so` named explicitly.
pub fn culprit() -> Command {
    let mut c = Command::new(tests::culprit());
    c.env(tests::LIBTRACE_ENV, libtrace());
    c
}

/// Runs `culprit ARGS…` (bounded by `deadline`) and returns what it did.
pub fn run_culprit(args: &[&str], deadline: Duration) -> tests::RunOutput {
    tests::run_with_deadline(culprit().args(args), deadline)
}

/// Runs `culprit COMMAND DIR EXTRA… -o OUT` (a command writing one file: `export`,
/// `timeline`), bounded by four minutes, and checks that it succeeded.
pub fn culprit_writes(command: &str, dir: &Path, extra: &[&str], out: &Path) {
    let mut args = vec![command, dir.to_str().expect("utf-8")];
    args.extend_from_slice(extra);
    args.extend(["-o", out.to_str().expect("utf-8")]);
    run_culprit(&args, Duration::from_secs(240))
        .assert_success(&format!("culprit {command} {}", extra.join(" ")));
}

/// The real Python interpreter (not a wrapper script such as a pyenv shim, whose shells
/// would be traced too). Nothing needs installing into it: `culprit record` brings the
/// `culprit_trace` shim (issue 17).
pub fn python() -> PathBuf {
    let r = tests::run_with_deadline(
        Command::new("python3").args(["-c", "import sys; print(sys.executable)"]),
        Duration::from_secs(60),
    );
    assert!(
        r.status.success() && !r.timed_out,
        "python3 is needed (run ./scripts/setup.sh): {}\n{}",
        r.status,
        r.stderr
    );
    PathBuf::from(r.stdout.trim())
}

/// `culprit record -o OUT [--inject SPEC]… -- CMD…`, bounded by `deadline`.
pub fn record(out: &Path, inject: &[&str], cmd: &[&str], deadline: Duration) -> tests::RunOutput {
    let mut c = culprit();
    c.arg("record").arg("-o").arg(out);
    for s in inject {
        c.args(["--inject", s]);
    }
    c.arg("--").args(cmd);
    tests::run_with_deadline(&mut c, deadline)
}

/// `culprit learn DIRS… -o MODEL [EXTRA…]`; panics unless it succeeds.
pub fn learn(dirs: &[PathBuf], model: &Path, extra: &[&str]) -> tests::RunOutput {
    let mut c = culprit();
    c.arg("learn").args(dirs).arg("-o").arg(model).args(extra);
    let r = tests::run_with_deadline(&mut c, Duration::from_secs(240));
    r.assert_success("culprit learn");
    assert!(
        model.is_file(),
        "culprit learn wrote no {}",
        model.display()
    );
    r
}

/// `culprit rank --model MODEL DIR --json`: the units, highest score first.
pub fn rank_json(model: &Path, dir: &Path) -> Vec<Value> {
    let mut c = culprit();
    c.arg("rank")
        .arg("--model")
        .arg(model)
        .arg(dir)
        .arg("--json");
    let r = tests::run_with_deadline(&mut c, Duration::from_secs(240));
    r.assert_success("culprit rank --json");
    let v: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("culprit rank --json printed no JSON ({e}):\n{}", r.stdout));
    let units = v
        .as_array()
        .expect("culprit rank --json prints an array")
        .clone();
    for u in &units {
        for k in [
            "score",
            "host",
            "pid",
            "tid",
            "kind",
            "fd",
            "local",
            "peer",
            "t_start_unix_ns",
            "t_end_unix_ns",
            "why",
        ] {
            assert!(u.get(k).is_some(), "unit without `{k}`: {u}");
        }
    }
    let scores: Vec<f64> = units.iter().map(score).collect();
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]),
        "units are not sorted by decreasing score: {scores:?}"
    );
    assert!(scores.iter().all(|s| (0.0..=1.0).contains(s)), "{scores:?}");
    units
}

/// A unit's score.
pub fn score(u: &Value) -> f64 {
    u["score"].as_f64().expect("numeric score")
}

/// A unit's pid.
pub fn pid(u: &Value) -> u64 {
    u["pid"].as_u64().expect("numeric pid")
}

/// A unit's `why` lines.
pub fn why(u: &Value) -> Vec<String> {
    u["why"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|w| w.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The processes of a trace directory (from its `manifest.json`): pid → argv.
pub fn processes(dir: &Path) -> BTreeMap<u64, Vec<String>> {
    let m = std::fs::read_to_string(dir.join("manifest.json"))
        .unwrap_or_else(|e| panic!("{}/manifest.json: {e}", dir.display()));
    let m: Value = serde_json::from_str(&m).expect("manifest.json is JSON");
    m["processes"]
        .as_array()
        .expect("manifest.json has processes")
        .iter()
        .map(|p| {
            let argv = p["argv"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            (p["pid"].as_u64().expect("pid"), argv)
        })
        .collect()
}

/// Ring node ids of the traced processes: pid → the value after `--id` in its argv.
pub fn ring_ids(dir: &Path) -> BTreeMap<u64, u32> {
    processes(dir)
        .into_iter()
        .filter_map(|(pid, argv)| {
            let i = argv.iter().position(|a| a == "--id")?;
            Some((pid, argv.get(i + 1)?.parse().ok()?))
        })
        .collect()
}

/// The highest unit score of a normal run: the noise floor above which a unit is
/// "high-scoring".
pub fn noise_floor(units: &[Value]) -> f64 {
    units.iter().map(score).fold(0.0, f64::max)
}

/// One line per unit, for failure messages.
pub fn describe(units: &[Value], ids: &BTreeMap<u64, u32>, n: usize) -> String {
    units
        .iter()
        .take(n)
        .map(|u| {
            format!(
                "  {:.3} node {} pid {} {} fd {} t {} why {:?}",
                score(u),
                ids.get(&pid(u)).map_or("?".into(), |i| i.to_string()),
                pid(u),
                u["kind"],
                u["fd"],
                u["t_start_unix_ns"],
                why(u)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// True if a `why` line reports the close or the reset as something that happened (not
/// as something expected that did not).
pub fn tells_close_or_reset(w: &str) -> bool {
    let l = w.to_ascii_lowercase();
    !l.starts_with("expected")
        && (l.contains("close") || l.contains("econnreset") || l.contains("reset"))
}

/// What the ranking says about the faulty run.
#[derive(Debug)]
pub struct Verdict {
    /// Node id of the top unit.
    pub top_node: u32,
    /// The earliest high-scoring unit on the broken node or its peer.
    pub earliest: Value,
    /// 1-based rank of the first unit on the broken node or its peer whose `why` tells
    /// the close or the reset (None: no such unit).
    pub rank_of_close: Option<usize>,
}

/// Checks issue 5's properties of `units` (a faulty run in which node `broken` lost its
/// connection to node `peer`), with `floor` the noise floor of a normal run. Returns the
/// verdict, or a message saying which property failed.
pub fn check_story(
    units: &[Value],
    ids: &BTreeMap<u64, u32>,
    broken: u32,
    peer: u32,
    floor: f64,
) -> Result<Verdict, String> {
    let ctx = || {
        format!(
            "(broken node {broken}, peer {peer}, noise floor {floor:.3}; top units:\n{})",
            describe(units, ids, 12)
        )
    };
    let on_pair = |u: &Value| ids.get(&pid(u)).is_some_and(|&i| i == broken || i == peer);
    let top = units
        .first()
        .ok_or_else(|| format!("no unit ranked {}", ctx()))?;
    let top_node = *ids
        .get(&pid(top))
        .ok_or_else(|| format!("the top unit is not on a ring node {}", ctx()))?;
    if top_node != broken && top_node != peer {
        return Err(format!("the top unit is on node {top_node} {}", ctx()));
    }
    if score(top) <= floor {
        return Err(format!(
            "the top unit ({:.3}) does not score above the normal run's highest unit {}",
            score(top),
            ctx()
        ));
    }
    let earliest = units
        .iter()
        .filter(|u| on_pair(u) && score(u) > floor)
        .min_by_key(|u| u["t_start_unix_ns"].as_i64().unwrap_or(i64::MAX))
        .expect("the top unit qualifies")
        .clone();
    if !why(&earliest).iter().any(|w| tells_close_or_reset(w)) {
        return Err(format!(
            "the earliest high-scoring unit on nodes {broken}/{peer} does not tell the \
             close/reset: {earliest} {}",
            ctx()
        ));
    }
    let rank_of_close = units
        .iter()
        .position(|u| on_pair(u) && why(u).iter().any(|w| tells_close_or_reset(w)))
        .map(|i| i + 1);
    Ok(Verdict {
        top_node,
        earliest,
        rank_of_close,
    })
}

/// Checks `culprit rank --html FILE`: a self-contained page (inline SVG, no external
/// asset) with one point per unit.
pub fn check_html(model: &Path, dir: &Path, html: &Path, units: &[Value]) {
    let mut c = culprit();
    c.arg("rank")
        .arg("--model")
        .arg(model)
        .arg(dir)
        .arg("--top")
        .arg("5")
        .arg("--html")
        .arg(html);
    let r = tests::run_with_deadline(&mut c, Duration::from_secs(240));
    r.assert_success("culprit rank --html");
    let page = std::fs::read_to_string(html)
        .unwrap_or_else(|e| panic!("culprit rank --html wrote no {}: {e}", html.display()));
    let lower = page.to_ascii_lowercase();
    assert!(
        lower.contains("<html") && lower.contains("<svg"),
        "not an HTML page with SVG"
    );
    for external in [
        "src=\"http",
        "href=\"http",
        "src='http",
        "<link ",
        "@import",
        "url(http",
    ] {
        assert!(
            !lower.contains(external),
            "the page loads an external asset ({external})"
        );
    }
    let top_id = units[0]["id"].as_str().expect("unit id");
    assert!(
        page.contains(top_id),
        "the page does not mention the top unit {top_id}"
    );
    // The text table names the same top unit.
    let first = r
        .stdout
        .lines()
        .nth(1)
        .unwrap_or_else(|| panic!("culprit rank printed no table:\n{}", r.stdout));
    assert!(
        first.contains(top_id),
        "table's first unit is not {top_id}:\n{}",
        r.stdout
    );
}

/// Checks `culprit show` on a unit: its call tree next to the model, with its `why`.
pub fn check_show(model: &Path, dir: &Path, unit: &Value) {
    let id = unit["id"].as_str().expect("unit id");
    let mut c = culprit();
    c.arg("show")
        .arg("--model")
        .arg(model)
        .arg(dir)
        .arg("--unit")
        .arg(id);
    let r = tests::run_with_deadline(&mut c, Duration::from_secs(240));
    r.assert_success("culprit show");
    assert!(r.stdout.starts_with(&format!("unit {id}")), "{}", r.stdout);
    for w in why(unit) {
        assert!(
            r.stdout.contains(&w),
            "culprit show does not say why `{w}`:\n{}",
            r.stdout
        );
    }
    assert!(
        r.stdout.lines().count() > 2 + why(unit).len(),
        "culprit show printed no tree:\n{}",
        r.stdout
    );
}

/// How a C ring story is told.
pub struct CRingStory<'a> {
    /// Name of the story (in messages).
    pub name: &'a str,
    /// Compiler flags beyond `-O1 -g -Wall -pthread`.
    pub cflags: &'a [&'a str],
    /// The fault, one `--inject` SPEC that hits node `broken`.
    pub fault: &'a str,
    /// The node whose connection the fault breaks, and its peer on that connection.
    pub broken: u32,
    /// See `broken`.
    pub peer: u32,
    /// Whether the trace must hold C function entries (compiled with
    /// -finstrument-functions) or must hold none (LD_PRELOAD only).
    pub fn_entries: bool,
}

/// Compiles `tests/e2e/ring_node.c`.
pub fn compile_ring(cflags: &[&str]) -> tests::CProgram {
    let src = std::fs::read_to_string(repo().join("tests/e2e/ring_node.c"))
        .expect("tests/e2e/ring_node.c");
    let mut flags = vec!["-Wextra", "-Werror"];
    flags.extend_from_slice(cflags);
    tests::compile_c("ring_node", &src, &flags)
}

/// The C ring's launcher command.
pub fn c_ring_cmd(exe: &Path, timeout: &str) -> Vec<String> {
    let e = exe.to_str().expect("utf-8 path").to_string();
    [
        e.as_str(),
        "launch",
        "--nodes",
        "5",
        "--jobs",
        "20",
        "--timeout",
        timeout,
        "--base-port",
        &tests::free_port_range(5).to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Counts the C function entries (`fn_enter`) per pid in a trace.
pub fn fn_entries_per_pid(dir: &Path) -> BTreeMap<u64, usize> {
    let dump = run_culprit(
        &["dump", "--json", dir.to_str().expect("utf-8")],
        Duration::from_secs(240),
    );
    dump.assert_success("culprit dump --json");
    let mut n = BTreeMap::new();
    for l in dump.stdout.lines() {
        if l.contains("\"fn_enter\"") {
            let v: Value = serde_json::from_str(l).expect("JSON line");
            if v["kind"] == "fn_enter" {
                *n.entry(v["pid"].as_u64().expect("pid")).or_insert(0) += 1;
            }
        }
    }
    n
}

/// Records 4 normal runs of a 5-node, 20-job ring launched by `cmd` into `tmp/normal0..3`
/// (3 to learn from, 1 held out for the noise floor), checking that each completed its
/// jobs and that its trace holds the 5 daemons. `what` names the story in failures.
pub fn record_normal_runs(tmp: &Path, cmd: &[&str], what: &str) -> Vec<PathBuf> {
    (0..4)
        .map(|i| {
            let d = tmp.join(format!("normal{i}"));
            let r = record(&d, &[], cmd, Duration::from_secs(120));
            r.assert_success(&format!("{what}: normal run {i}"));
            assert!(
                r.stdout.contains("20 jobs went round a ring of 5 nodes"),
                "{}",
                r.stdout
            );
            let ids = ring_ids(&d);
            assert_eq!(
                ids.values()
                    .copied()
                    .collect::<std::collections::BTreeSet<_>>(),
                (0..5).collect(),
                "{what}: the trace of normal run {i} does not hold the 5 daemons: {ids:?}"
            );
            d
        })
        .collect()
}

/// Issue 5's story on the C ring: 3 normal runs learned, 1 held out (noise floor), one
/// faulty run; checks the ranking. Returns the model, the faulty trace and its units for
/// further checks, and the program (keep it: symbolization reads its file).
pub fn c_ring_story(s: &CRingStory, tmp: &Path) -> (PathBuf, PathBuf, Vec<Value>, tests::CProgram) {
    let prog = compile_ring(s.cflags);
    let normal = c_ring_cmd(&prog.path, "60");
    let normal: Vec<&str> = normal.iter().map(String::as_str).collect();
    let dirs = record_normal_runs(tmp, &normal, s.name);
    let ids = ring_ids(&dirs[0]);
    let entries = fn_entries_per_pid(&dirs[0]);
    for (pid, id) in &ids {
        let n = entries.get(pid).copied().unwrap_or(0);
        if s.fn_entries {
            assert!(
                n > 100,
                "{}: node {id} (pid {pid}) recorded {n} C function entries: are libtrace.so's \
                 -finstrument-functions hooks active?",
                s.name
            );
        } else {
            assert_eq!(n, 0, "{}: node {id} has function entries", s.name);
        }
    }

    let model = tmp.join("ring.model");
    learn(&dirs[..3], &model, &[]);
    let floor = noise_floor(&rank_json(&model, &dirs[3]));

    let faulty = tmp.join("faulty");
    let cmd = c_ring_cmd(&prog.path, "5");
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let r = record(&faulty, &[s.fault], &cmd, Duration::from_secs(120));
    assert_eq!(
        r.status.code(),
        Some(3),
        "{}: the faulty run did not hang: {}\n{}",
        s.name,
        r.stdout,
        r.stderr
    );
    let lost = format!("ring node {}: lost the lhs connection", s.broken);
    assert!(
        r.stderr.contains(&lost),
        "{}: {lost}? \n{}",
        s.name,
        r.stderr
    );
    let ids = ring_ids(&faulty);
    let units = rank_json(&model, &faulty);
    let v = check_story(&units, &ids, s.broken, s.peer, floor)
        .unwrap_or_else(|e| panic!("{}: {e}", s.name));
    eprintln!(
        "{}: top unit on node {} (score {:.3}, noise floor {floor:.3}); earliest \
         high-scoring unit {}; first unit telling the close/reset ranked {:?}",
        s.name,
        v.top_node,
        score(&units[0]),
        v.earliest["id"],
        v.rank_of_close
    );
    check_injected(&units, &ids, s.broken);
    (model, faulty, units, prog)
}

/// The injection is the ground truth: `culprit rank` lists it in units of node `broken`
/// only (in one unit; in two when the analyzer also lists it in the unit before the call,
/// which it does for an injected errno: see the e2e report).
pub fn check_injected(units: &[Value], ids: &BTreeMap<u64, u32>, broken: u32) {
    let injected: Vec<&Value> = units
        .iter()
        .filter(|u| u["injections"].as_array().is_some_and(|a| !a.is_empty()))
        .collect();
    assert!(
        injected.len() == 1,
        "{} units list the injection (want exactly the unit of the injected call):\n{}",
        injected.len(),
        describe(units, ids, 10)
    );
    for u in injected {
        assert_eq!(ids.get(&pid(u)), Some(&broken), "injection listed in {u}");
    }
}

/// The base port a ring launcher printed (`run_ring: base port N`).
pub fn base_port(stdout: &str) -> u16 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("run_ring: base port "))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no base port in the launcher's output:\n{stdout}"))
}

/// The top unit is a handler of the broken connection: node `broken`'s listening port
/// (base + broken) is one end of it (its local address on node `broken`, which accepted
/// the connection; its peer address on the node that connected to it).
pub fn check_broken_connection(top: &Value, base: u16, broken: u32) {
    assert_eq!(
        top["kind"], "handler",
        "the top unit is not a handler: {top}"
    );
    let port = format!("127.0.0.1:{}", base as u32 + broken);
    assert!(
        top["local"].as_str() == Some(&port) || top["peer"].as_str() == Some(&port),
        "the top unit is not on the connection to {port}: {top}"
    );
}

/// Checks that `culprit messages --json` (`v`) found no one-host causality violation (a
/// matched receive that ended before its send began). On one, keeps `tmp` — the trace in
/// it can then be examined — and fails naming the directory and every violating flow
/// (both calls with their times).
pub fn assert_no_violations(v: &Value, tmp: &mut tempfile::TempDir) {
    if v["violations"] == 0 {
        return;
    }
    tmp.disable_cleanup(true);
    panic!(
        "{} one-host causality violations; the trace is kept in {}\n{:#}",
        v["violations"],
        tmp.path().display(),
        v["violating_flows"]
    );
}
