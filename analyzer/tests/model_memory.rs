//! Reading a model takes memory of the order of its file (issue 27, defect 7: an 87 MB
//! model peaked at 1.1 GB, parsed into a generic JSON tree before the typed model).
//!
//! A child process (this test binary again) loads a generated model under a data-size
//! limit (`ulimit -d`, `RLIMIT_DATA`) of a few times the file; a second child parses the
//! same file into `serde_json::Value` under the same limit and must run out of memory, so
//! the limit is one that the generic-tree path cannot pass (the test can fail). No timing.

use analyzer::model::{GroupModel, Model, ModelNode, TreeModel};
use analyzer::trees::{NodeKey, NodeKind, Outcome, TreeOptions, ROOT};
use analyzer::units::{Signature, UnitClass, UnitKind};
use std::path::Path;
use std::process::Command;

/// Set in the children: the model file to read.
const FILE_ENV: &str = "CULPRIT_MODEL_MEMORY_FILE";
/// Set in the children: `typed` (`Model::load`) or `value` (`serde_json::Value`).
const MODE_ENV: &str = "CULPRIT_MODEL_MEMORY_MODE";

/// A model of about `bytes` bytes of JSON: one class of a wide tree of library-call
/// nodes over a few thousand call sites (as learned models are: many nodes, few keys).
pub fn big_model(bytes: usize) -> Model {
    let mut nodes: Vec<ModelNode> = Vec::new();
    // About 33 bytes per node in the file.
    let n = bytes / 33;
    for i in 0..n {
        // The first 1 000 under the root, then 8 children per node.
        let parent = if i < 1000 {
            ROOT
        } else {
            nodes[(i - 1000) / 8].id
        };
        let key = NodeKey {
            kind: if i % 3 == 0 {
                NodeKind::Lib
            } else {
                NodeKind::C
            },
            site: 0x40_0000 + (i as u64 % 4093) * 16,
            callee: 0x50_0000 + (i as u64 % 997) * 32,
            outcome: Outcome::Any,
        };
        nodes.push(ModelNode {
            id: key.child_of(parent),
            parent,
            key,
            p_sum: (i % 7 + 1) as f64 / 8.0,
            models: 1,
        });
    }
    let mut m = Model::new(TreeOptions::default());
    m.add_group(&GroupModel {
        signature: Signature(vec![1, 2, 3]),
        processes: vec!["h:1".into()],
        exes: vec!["/usr/bin/big".into()],
        commands: Vec::new(),
        classes: vec![(
            UnitClass {
                kind: UnitKind::Handler,
                main_thread: true,
                conn: Default::default(),
            },
            TreeModel::from_nodes(64, 1, nodes),
        )],
        ending: None,
    });
    m
}

/// Writes a model of `CULPRIT_BIG_MODEL_MB` (87) MB to `$CULPRIT_BIG_MODEL` (for the
/// figures of bench/RESULTS.md: `/usr/bin/time -v culprit rank --model` on it).
#[test]
#[ignore = "writes a large model for a measurement"]
fn write_big_model() {
    let Some(out) = std::env::var_os("CULPRIT_BIG_MODEL") else {
        return;
    };
    let mb: usize = std::env::var("CULPRIT_BIG_MODEL_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(87);
    big_model(mb << 20).save(Path::new(&out)).unwrap();
}

/// The child: reads the file as told, exits 0 if it could.
#[test]
fn child_reads_model() {
    let (Some(file), Ok(mode)) = (std::env::var_os(FILE_ENV), std::env::var(MODE_ENV)) else {
        return; // not a child
    };
    let path = Path::new(&file);
    match mode.as_str() {
        "typed" => {
            let m = Model::load(path).expect("the model loads");
            assert!(m.node_count() > 0);
        }
        "value" => {
            let text = std::fs::read_to_string(path).unwrap();
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert!(v.is_object());
        }
        _ => panic!("{MODE_ENV}={mode}"),
    }
}

/// Runs [`child_reads_model`] under a data-size limit of `limit_kb`.
fn child(file: &Path, mode: &str, limit_kb: u64) -> std::process::Output {
    let me = std::env::current_exe().unwrap();
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -d {limit_kb} && exec \"$0\" --exact child_reads_model --test-threads=1"
        ))
        .arg(me)
        .env(FILE_ENV, file)
        .env(MODE_ENV, mode)
        .output()
        .unwrap()
}

#[test]
fn a_model_is_read_in_a_few_times_its_size() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("big.model");
    big_model(32 << 20).save(&file).unwrap();
    let size = std::fs::metadata(&file).unwrap().len();
    assert!(size > 24 << 20, "the model is {size} bytes");
    // Five times the file, and 48 MB for the test harness itself.
    let limit_kb = (5 * size + (48 << 20)) >> 10;
    let typed = child(&file, "typed", limit_kb);
    assert!(
        typed.status.success(),
        "a {size}-byte model could not be read within {limit_kb} KiB of data: {}{}",
        String::from_utf8_lossy(&typed.stdout),
        String::from_utf8_lossy(&typed.stderr)
    );
    // The generic JSON tree does not fit: the limit tells the two paths apart.
    let value = child(&file, "value", limit_kb);
    assert!(
        !value.status.success(),
        "a generic JSON tree of the model fits in {limit_kb} KiB: the limit proves nothing"
    );
}
