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

/// The real Python interpreter (not a wrapper script such as a pyenv shim, whose shells
/// would be traced too), checked to have the `culprit_trace` shim installed.
pub fn python() -> PathBuf {
    let r = tests::run_with_deadline(
        Command::new("python3").args([
            "-c",
            "import sys, culprit_trace._native; print(sys.executable)",
        ]),
        Duration::from_secs(60),
    );
    assert!(
        r.status.success() && !r.timed_out,
        "python3 with the culprit_trace shim is needed (run ./scripts/setup.sh, or \
         `pip install ./python-hook`): {}\n{}",
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
