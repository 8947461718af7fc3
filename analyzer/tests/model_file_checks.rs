//! A model file is range- and order-checked when it is read (issue 18, defect 8): a
//! `p_sum` out of range, zero counts, unsorted keys, a group listed twice — each is refused
//! with an error naming the file, so neither `rank` nor `merge` ever uses or propagates it.

use analyzer::decode::{write_trace_dir, TraceSet};
use analyzer::model::Model;
use analyzer::synth::{ring, Functions, Ring};
use serde_json::Value;
use std::path::Path;

fn model_json(root: &Path) -> Value {
    let cfg = Ring {
        processes: 3,
        iterations: 10,
        functions: Functions::C,
        fault: None,
        seed: 1,
    };
    let dirs: Vec<_> = ring(&cfg)
        .into_iter()
        .map(|p| {
            let dir = root.join(&p.host);
            write_trace_dir(&dir, &p.host.clone(), &[p]).unwrap();
            dir
        })
        .collect();
    let set = TraceSet::open(&dirs).unwrap();
    let m = analyzer::learn(&[set], &analyzer::Options::default())
        .unwrap()
        .model;
    serde_json::from_str(&m.to_json()).unwrap()
}

fn load(root: &Path, v: &Value) -> Result<Model, String> {
    let p = root.join("m.model");
    std::fs::write(&p, v.to_string()).unwrap();
    Model::load(&p).map_err(|e| e.to_string())
}

/// An edit of a model file's JSON.
type Change = Box<dyn Fn(&mut Value)>;

/// The first node of the first class of the first group.
fn node(v: &mut Value) -> &mut Vec<Value> {
    v["groups"][0]["classes"][0][1]["nodes"][0]
        .as_array_mut()
        .unwrap()
}

#[test]
fn model_files_are_range_and_order_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let good = model_json(tmp.path());
    load(tmp.path(), &good).expect("a learned model loads");

    let cases: Vec<(&str, Change, &str)> = vec![
        (
            "huge p_sum",
            Box::new(|v| node(v)[5] = 1e308.into()),
            "\"p_sum\" is",
        ),
        (
            "negative p_sum",
            Box::new(|v| node(v)[5] = (-5.0).into()),
            "\"p_sum\" is -5",
        ),
        (
            "zero node models",
            Box::new(|v| node(v)[6] = 0.into()),
            "\"models\" is 0",
        ),
        (
            "zero units",
            Box::new(|v| v["groups"][0]["classes"][0][1]["units"] = 0.into()),
            "\"units\" is 0",
        ),
        (
            "unsorted keys",
            Box::new(|v| {
                let k = v["keys"].as_array_mut().unwrap();
                k.swap(0, 1);
            }),
            "strictly ascending",
        ),
        (
            "duplicated group",
            Box::new(|v| {
                let g = v["groups"][0].clone();
                v["groups"].as_array_mut().unwrap().push(g);
            }),
            "same signature",
        ),
    ];
    for (what, change, want) in cases {
        let mut v = good.clone();
        change(&mut v);
        let e = load(tmp.path(), &v).expect_err(what);
        assert!(e.contains("m.model") && e.contains(want), "{what}: {e}");
    }
}

#[test]
fn a_model_that_is_not_a_regular_file_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Model::load(Path::new("/dev/zero")).unwrap_err().to_string();
    assert!(e.contains("not a regular file"), "{e}");
    let fifo = tmp.path().join("fifo.model");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success());
    let e = Model::load(&fifo).unwrap_err().to_string();
    assert!(e.contains("a FIFO"), "{e}");
}

/// Writes seed inputs for the `model` and `manifest` fuzz targets (`bufpool/fuzz/run.sh`)
/// into `$CULPRIT_FUZZ_SEED_DIR/{model,manifest}/`.
#[test]
#[ignore = "run by bufpool/fuzz/run.sh to seed its corpora"]
fn write_fuzz_seeds() {
    let Some(out) = std::env::var_os("CULPRIT_FUZZ_SEED_DIR") else {
        return;
    };
    let out = std::path::PathBuf::from(out);
    let tmp = tempfile::tempdir().unwrap();
    let v = model_json(tmp.path());
    std::fs::create_dir_all(out.join("model")).unwrap();
    std::fs::write(out.join("model/learned.model"), v.to_string()).unwrap();
    std::fs::create_dir_all(out.join("manifest")).unwrap();
    let dir = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("manifest.json").is_file())
        .unwrap();
    std::fs::copy(
        dir.join("manifest.json"),
        out.join("manifest/synthetic.json"),
    )
    .unwrap();
}
