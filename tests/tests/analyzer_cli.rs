//! `culprit learn / merge / rank / show` on trace directories of a synthetic faulty ring
//! (written with the reader's on-disk format): the flags scripts rely on, the JSON fields,
//! the HTML page, associativity of `merge`, and clear errors on bad input.

use analyzer::decode::write_trace_dir;
use analyzer::synth::{ring, Fault, Functions, Ring};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const N: usize = 5;
const FAULTY: usize = 2;

fn culprit(args: &[&str]) -> tests::RunOutput {
    let mut c = Command::new(tests::culprit());
    c.args(args);
    tests::run_with_deadline(&mut c, Duration::from_secs(120))
}

fn write_run(root: &Path, cfg: &Ring) -> Vec<String> {
    ring(cfg)
        .into_iter()
        .map(|p| {
            let dir = root.join(&p.host);
            write_trace_dir(&dir, &p.host.clone(), &[p]).unwrap();
            dir.to_str().unwrap().to_string()
        })
        .collect()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn learn_merge_rank_show() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let runs: Vec<Vec<String>> = (1..=2)
        .map(|seed| {
            write_run(
                &t.join(format!("normal{seed}")),
                &Ring {
                    processes: N,
                    iterations: 40 + 5 * seed as usize,
                    functions: Functions::Python,
                    fault: None,
                    seed,
                },
            )
        })
        .collect();
    let faulty = write_run(
        &t.join("faulty"),
        &Ring {
            processes: N,
            iterations: 50,
            functions: Functions::Python,
            fault: Some(Fault {
                process: FAULTY,
                iteration: 20,
            }),
            seed: 5,
        },
    );
    let (all, m1, m2, m12) = (
        t.join("all.model"),
        t.join("1.model"),
        t.join("2.model"),
        t.join("12.model"),
    );

    // learn over both runs; learn each, then merge.
    let mut args = vec!["learn"];
    args.extend(runs.iter().flatten().map(String::as_str));
    args.extend(["-o", s(&all), "--threads", "2"]);
    let r = culprit(&args);
    r.assert_success("culprit learn");
    assert!(r.stderr.contains("1 process group(s)"), "{}", r.stderr);
    assert!(r.stderr.contains("process model size"), "{}", r.stderr);
    for (run, out) in runs.iter().zip([&m1, &m2]) {
        let mut args = vec!["learn"];
        args.extend(run.iter().map(String::as_str));
        args.extend(["-o", s(out)]);
        culprit(&args).assert_success("culprit learn (one run)");
    }
    culprit(&["merge", s(&m1), s(&m2), "-o", s(&m12)]).assert_success("culprit merge");

    // rank --json with both models: same units, same order, same scores.
    let rank = |model: &Path, extra: &[&str]| -> Vec<Value> {
        let mut args = vec!["rank", "--model", s(model), "--json"];
        args.extend(faulty.iter().map(String::as_str));
        args.extend(extra);
        let r = culprit(&args);
        r.assert_success("culprit rank --json");
        serde_json::from_str::<Value>(&r.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    };
    let a = rank(&all, &["--threads", "1"]);
    let b = rank(&m12, &[]);
    assert!(!a.is_empty());
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x["id"], y["id"]);
        let (sx, sy) = (x["score"].as_f64().unwrap(), y["score"].as_f64().unwrap());
        assert!((sx - sy).abs() < 1e-9, "{sx} vs {sy}");
    }
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
        assert!(a[0].get(k).is_some(), "no {k} in {}", a[0]);
    }
    let scores: Vec<f64> = a.iter().map(|u| u["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "not sorted");
    let top_host = a[0]["host"].as_str().unwrap();
    assert!(
        top_host == format!("node{FAULTY}") || top_host == format!("node{}", FAULTY - 1),
        "{}",
        a[0]
    );
    let why = a[0]["why"].to_string();
    assert!(why.contains("close"), "{why}");

    // --top, text output, --html.
    let html = t.join("report.html");
    let mut args = vec!["rank", "--model", s(&all), "--top", "3", "--html", s(&html)];
    args.extend(faulty.iter().map(String::as_str));
    let r = culprit(&args);
    r.assert_success("culprit rank --html");
    assert!(
        r.stdout.contains(a[0]["id"].as_str().unwrap()),
        "{}",
        r.stdout
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("<script>") && page.contains("function show"));
    assert_eq!(
        page.matches("http").count(),
        page.matches("http://www.w3.org/2000/svg").count(),
        "external assets in the page"
    );

    // show: the top unit's tree next to its model.
    let id = a[0]["id"].as_str().unwrap();
    let dir = faulty
        .iter()
        .find(|d| PathBuf::from(d).ends_with(top_host))
        .unwrap();
    let r = culprit(&["show", "--model", s(&all), dir, "--unit", id]);
    r.assert_success("culprit show");
    assert!(
        r.stdout.contains("why:") && r.stdout.contains("call tree"),
        "{}",
        r.stdout
    );
    let r = culprit(&["show", "--model", s(&all), dir, "--unit", "nohost:1:1:1"]);
    assert!(!r.status.success());
    assert!(r.stderr.contains("no unit nohost:1:1:1"), "{}", r.stderr);
}

#[test]
fn bad_input_gets_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let bad = t.join("bad.model");
    std::fs::write(&bad, "{\"magic\": \"nope\"}").unwrap();
    let dirs = write_run(
        &t.join("run"),
        &Ring {
            processes: 2,
            iterations: 5,
            functions: Functions::C,
            fault: None,
            seed: 1,
        },
    );
    let r = culprit(&["rank", "--model", s(&bad), &dirs[0]]);
    assert_eq!(r.status.code(), Some(2));
    assert!(
        r.stderr.contains("bad.model") && r.stderr.contains("magic"),
        "{}",
        r.stderr
    );
    let r = culprit(&["learn", s(&t.join("missing")), "-o", s(&t.join("m"))]);
    assert_eq!(r.status.code(), Some(2));
    assert!(r.stderr.contains("missing"), "{}", r.stderr);
    // A damaged chunk file: the error names the file.
    let chunks = PathBuf::from(&dirs[0]).join("chunks");
    let f = std::fs::read_dir(&chunks)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&f).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&f, bytes).unwrap();
    // By default the damaged record is skipped with a warning naming the file; with
    // --strict it is an error naming the file.
    let name = f.file_name().unwrap().to_str().unwrap();
    let r = culprit(&["learn", &dirs[0], "-o", s(&t.join("m"))]);
    assert_eq!(r.status.code(), Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains("warning") && r.stderr.contains(name),
        "{}",
        r.stderr
    );
    let r = culprit(&["learn", "--strict", &dirs[0], "-o", s(&t.join("m"))]);
    assert_eq!(r.status.code(), Some(2));
    assert!(r.stderr.contains(name), "{}", r.stderr);
}
