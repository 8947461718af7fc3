//! The cluster analysis as plain commands, on a tree of trace directories laid out as a
//! Slurm job records them (`ROOT/<host>/<job.step.task>/`, written with the reader's
//! on-disk format from a synthetic faulty ring): `learn` and `rank` take the tree's root
//! and say which hosts and tasks they found; `rank --shard K/N -o part-K` for every K
//! (naming the run's processes from the trace directories, or from the run's index of
//! `rank --write-index`) and `rank --merge part-* --json` print exactly what one `rank
//! --json --no-messages` over the whole tree prints; a damaged index, one that no longer
//! matches the traces and parts of two runs are refused, naming the file; `merge` of per-host models in two groupings gives
//! byte-identical models, equal to the model learned at once; `culprit cluster learn` and
//! `culprit cluster rank` (their steps run here, `--local`) give that model and ranking.

use analyzer::decode::write_trace_dir;
use analyzer::synth::{ring, Fault, Functions, Ring};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn culprit(args: &[&str]) -> tests::RunOutput {
    let mut c = Command::new(tests::culprit());
    c.args(args);
    let r = tests::run_with_deadline(&mut c, Duration::from_secs(120));
    r.assert_success(&format!("culprit {}", args.join(" ")));
    r
}

/// Writes the ring as `root/<host>/<job>.0.<rank>/` (host `node{i}`); returns each dir.
fn write_job(root: &Path, job: u32, cfg: &Ring) -> Vec<String> {
    ring(cfg)
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let dir = root.join(&p.host).join(format!("{job}.0.{i}"));
            write_trace_dir(&dir, &p.host.clone(), &[p]).unwrap();
            // As `srun culprit record` writes it: the task in the manifest.
            let m = dir.join("manifest.json");
            let mut v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
            v["slurm"] =
                serde_json::json!({"job": job.to_string(), "step": "0", "task": i.to_string()});
            std::fs::write(&m, v.to_string()).unwrap();
            dir.to_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn shards_and_merges_give_the_whole_analysis() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let cfg = |iterations, fault, seed| Ring {
        processes: 6,
        iterations,
        functions: Functions::C,
        fault,
        seed,
    };
    let normal = t.join("normal");
    let per_task = write_job(&normal, 11, &cfg(40, None, 1));
    let faulty = t.join("faulty");
    write_job(
        &faulty,
        12,
        &cfg(
            50,
            Some(Fault {
                process: 2,
                iteration: 25,
            }),
            7,
        ),
    );
    // The whole tree at once: says what it found.
    let model = s(&t.join("all.model"));
    let r = culprit(&["learn", &s(&normal), "-o", &model]);
    assert!(
        r.stderr
            .contains("found 6 processes in 6 recordings on 6 hosts"),
        "{}",
        r.stderr
    );
    // Per-task models merged in two groupings, and in one go: the same bytes.
    let mut leaves = Vec::new();
    for (i, d) in per_task.iter().enumerate() {
        let m = s(&t.join(format!("task{i}.model")));
        culprit(&["learn", d, "-o", &m]);
        leaves.push(m);
    }
    let (a, b, c) = (
        s(&t.join("a.model")),
        s(&t.join("b.model")),
        s(&t.join("c.model")),
    );
    culprit(&["merge", &leaves[0], &leaves[1], &leaves[2], "-o", &a]);
    culprit(&["merge", &leaves[3], &leaves[4], &leaves[5], "-o", &b]);
    culprit(&["merge", &b, &a, "-o", &c]);
    let flat = s(&t.join("flat.model"));
    let mut args = vec!["merge"];
    args.extend(leaves.iter().rev().map(|l| l.as_str()));
    args.extend(["-o", &flat]);
    culprit(&args);
    let bytes = |p: &str| std::fs::read(p).unwrap();
    assert!(
        bytes(&c) == bytes(&flat),
        "two merge trees gave different models"
    );
    assert!(
        without_endings(&c) == without_endings(&model),
        "merged ≠ learned at once"
    );
    // One ranking over the tree, and the same from shards.
    let whole = culprit(&[
        "rank",
        "--model",
        &model,
        &s(&faulty),
        "--json",
        "--no-messages",
    ]);
    assert!(
        whole.stderr.contains("Slurm tasks: node0/12.0.0"),
        "{}",
        whole.stderr
    );
    // The run's index, written once.
    let index = s(&t.join("run.index"));
    let r = culprit(&["rank", "--write-index", &index, &s(&faulty)]);
    assert!(
        r.stderr
            .contains("indexed 6 processes in 6 recordings on 6 hosts"),
        "{}",
        r.stderr
    );
    for n in [1, 4, 6, 8] {
        let mut parts = Vec::new();
        for k in 1..=n {
            let part = s(&t.join(format!("part-{k}-of-{n}")));
            let shard = format!("{k}/{n}");
            let mut a = vec!["rank", "--model", &model, "--shard", &shard, "-o", &part];
            // Odd shards from the index, even ones from the directories: parts of one run
            // either way.
            if k % 2 == 1 {
                a.extend(["--index", &index]);
            } else {
                a.push(faulty.to_str().unwrap());
            }
            let r = culprit(&a);
            if k % 2 == 1 {
                assert!(
                    r.stderr.contains("found 6 processes in 6 recordings"),
                    "{}",
                    r.stderr
                );
            }
            parts.push(part);
        }
        let mut args = vec!["rank", "--merge"];
        args.extend(parts.iter().map(|p| p.as_str()));
        args.push("--json");
        let merged = culprit(&args);
        assert!(
            merged.stdout == whole.stdout,
            "{n} shards: the merged ranking differs"
        );
        let mut text = args.clone();
        text.pop();
        text.extend(["--top", "3"]);
        let top3 = culprit(&text);
        let whole3 = culprit(&[
            "rank",
            "--model",
            &model,
            &s(&faulty),
            "--top",
            "3",
            "--no-messages",
        ]);
        assert_eq!(top3.stdout, whole3.stdout);
    }
    refused_inputs(t, &model, &index, &faulty);
    // The same steps as `culprit cluster` runs them (here: --local): the same model and
    // ranking.
    let cl = s(&t.join("cluster.model"));
    let w = s(&t.join("work"));
    let r = culprit(&[
        "cluster",
        "learn",
        "--local",
        "--work",
        &w,
        "-o",
        &cl,
        &s(&normal),
    ]);
    assert!(r.stderr.contains("merge tree of depth 3"), "{}", r.stderr);
    assert!(
        without_endings(&cl) == without_endings(&model),
        "cluster learn ≠ learn"
    );
    let r = culprit(&[
        "cluster",
        "rank",
        "--local",
        "--work",
        &w,
        "--model",
        &cl,
        "--shards",
        "3",
        "--json",
        &s(&faulty),
    ]);
    assert!(r.stdout == whole.stdout, "cluster rank ≠ rank");
    assert!(t.join("work/ranking.json").is_file());
}

/// Runs `culprit ARGS`, which must fail; its standard error.
fn culprit_fails(args: &[&str]) -> String {
    let mut c = Command::new(tests::culprit());
    c.args(args);
    let r = tests::run_with_deadline(&mut c, Duration::from_secs(120));
    assert!(
        !r.status.success() && !r.timed_out,
        "culprit {} succeeded",
        args.join(" ")
    );
    r.stderr
}

/// Copies the directory `from` to `to`, with everything under it.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for f in std::fs::read_dir(from).unwrap() {
        let f = f.unwrap().path();
        let dest = to.join(f.file_name().unwrap());
        if f.is_dir() {
            copy_tree(&f, &dest);
        } else {
            std::fs::copy(&f, dest).unwrap();
        }
    }
}

/// A damaged index, one that no longer matches the traces and parts of two runs: refused
/// with an error naming the file.
fn refused_inputs(t: &Path, model: &str, index: &str, faulty: &Path) {
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let shard = |index: &str, part: &str| {
        culprit_fails(&[
            "rank", "--model", model, "--index", index, "--shard", "1/2", "-o", part,
        ])
    };
    let part = s(&t.join("refused-part"));
    let mut bytes = std::fs::read(index).unwrap();
    let bad = s(&t.join("damaged.index"));
    // Its head: every shard reads it.
    bytes[24] ^= 0x40;
    std::fs::write(&bad, &bytes).unwrap();
    let e = shard(&bad, &part);
    assert!(e.contains("damaged.index") && e.contains("checksum"), "{e}");
    // Its last host's section: read by the shard of that host.
    bytes[24] ^= 0x40;
    let n = bytes.len();
    bytes[n - 2] ^= 0x40;
    std::fs::write(&bad, &bytes).unwrap();
    let e = culprit_fails(&[
        "rank", "--model", model, "--index", &bad, "--shard", "2/2", "-o", &part,
    ]);
    assert!(e.contains("damaged.index") && e.contains("checksum"), "{e}");
    std::fs::write(&bad, b"not an index").unwrap();
    let e = shard(&bad, &part);
    assert!(e.contains("damaged.index") && e.contains("CULPRIDX"), "{e}");
    // A copy of the run with one process left out: the index of the whole run no longer
    // matches it.
    let copy = t.join("copy");
    let mut dirs = vec![];
    for h in std::fs::read_dir(faulty).unwrap() {
        let h = h.unwrap().path();
        for d in std::fs::read_dir(&h).unwrap() {
            dirs.push(d.unwrap().path());
        }
    }
    dirs.sort();
    for d in &dirs[1..] {
        copy_tree(d, &copy.join(d.strip_prefix(faulty).unwrap()));
    }
    let other = s(&t.join("copy.index"));
    culprit(&["rank", "--write-index", &other, &s(&copy)]);
    // The copy's index, its directories then replaced by the whole run's: refused.
    let moved = t.join("faulty-moved");
    std::fs::rename(&copy, &moved).unwrap();
    std::fs::create_dir_all(&copy).unwrap();
    for d in &dirs {
        copy_tree(d, &copy.join(d.strip_prefix(faulty).unwrap()));
    }
    std::fs::remove_dir_all(copy.join(dirs[2].strip_prefix(faulty).unwrap())).unwrap();
    let e = culprit_fails(&[
        "rank", "--model", model, "--index", &other, "--shard", "1/1", "-o", &part,
    ]);
    assert!(
        e.contains("copy.index") && e.contains("does not match"),
        "{e}"
    );
    // Parts of two runs (the whole run's and the copy's): refused by the merge.
    std::fs::remove_dir_all(&copy).unwrap();
    std::fs::rename(&moved, &copy).unwrap();
    let (a, b) = (s(&t.join("two-1")), s(&t.join("two-2")));
    culprit(&[
        "rank", "--model", model, "--index", index, "--shard", "1/2", "-o", &a,
    ]);
    culprit(&[
        "rank", "--model", model, "--index", &other, "--shard", "2/2", "-o", &b,
    ]);
    let e = culprit_fails(&["rank", "--merge", &a, &b, "--json"]);
    assert!(e.contains("two-2") && e.contains("another run"), "{e}");
    // A part file that is not one.
    let e = culprit_fails(&["rank", "--merge", index, "--json"]);
    assert!(e.contains("run.index") && e.contains("CULPRPRT"), "{e}");
}

/// A model file's JSON with the groups' `ending` left out: how a group's processes ended is
/// learned against the rest of each run, so a model learned per host (or per part) and
/// merged knows only each host's processes there (analyzer/MODEL.md, `ending`); every other
/// part of it must be the model learned at once.
fn without_endings(path: &str) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).unwrap()).expect("a model is JSON");
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(o) => {
                o.remove("ending");
                o.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}
