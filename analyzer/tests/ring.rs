//! A synthetic ring of event-driven daemons, written as trace directories on disk: learn
//! from normal runs, inject the MPD bug (a 3-byte header `recv` followed by `close`), and
//! check that the ranking puts the faulty unit or its peer first, above the noise floor (the
//! best score of a held-out normal run), and that the earliest unit above it on those two
//! nodes has the close / reset in its *why* — with C function entries, Python calls, and
//! library calls only.

use analyzer::decode::{write_trace_dir, TraceSet};
use analyzer::synth::{ring, Fault, Functions, Ring};
use analyzer::units::UnitKind;
use std::path::{Path, PathBuf};

const N: usize = 6;

fn record(root: &Path, name: &str, cfg: &Ring) -> Vec<PathBuf> {
    ring(cfg)
        .into_iter()
        .map(|p| {
            let dir = root.join(name).join(&p.host);
            write_trace_dir(&dir, &p.host.clone(), &[p]).unwrap();
            dir
        })
        .collect()
}

fn check(functions: Functions) {
    let tmp = tempfile::tempdir().unwrap();
    let mut normal = Vec::new();
    for seed in 1..=3 {
        let cfg = Ring {
            processes: N,
            iterations: 60 + 10 * seed as usize,
            functions,
            fault: None,
            seed,
        };
        normal.push(TraceSet::open(&record(tmp.path(), &format!("normal{seed}"), &cfg)).unwrap());
    }
    let opts = analyzer::Options::default();
    let learned = analyzer::learn(&normal, &opts).unwrap();
    assert_eq!(learned.model.groups.len(), 1, "ring members form one group");
    assert!(learned.processes.iter().all(|p| p.model_bytes < 43_500));
    let fault = Fault {
        process: 3,
        iteration: 40,
    };
    let cfg = Ring {
        processes: N,
        iterations: 80,
        functions,
        fault: Some(fault),
        seed: 9,
    };
    let trial = TraceSet::open(&record(tmp.path(), "faulty", &cfg)).unwrap();
    let rep = analyzer::rank(&learned.model, &trial, &opts).unwrap();
    // The noise floor: the best score of a normal run that was not learned from.
    let held_out = Ring {
        processes: N,
        iterations: 75,
        functions,
        fault: None,
        seed: 4,
    };
    let held_out = TraceSet::open(&record(tmp.path(), "held_out", &held_out)).unwrap();
    let floor = analyzer::rank(&learned.model, &held_out, &opts)
        .unwrap()
        .units[0]
        .score;
    let top = &rep.units[0];
    let faulty_host = format!("node{}", fault.process);
    let peer_host = format!("node{}", (fault.process + N - 1) % N);
    assert!(
        top.info.host == faulty_host || top.info.host == peer_host,
        "{functions:?}: top unit {} is on neither the faulty node nor its peer\n{}",
        top.info.id,
        rep.text(5, false)
    );
    assert_eq!(top.info.kind, UnitKind::Handler);
    assert!(top.score > floor, "{floor}\n{}", rep.text(5, false));
    // Normal handlers score low.
    let normal_handlers: Vec<f64> = rep
        .iter()
        .filter(|u| u.info.kind == UnitKind::Handler && u.info.host == "node0")
        .map(|u| u.score)
        .collect();
    assert!(!normal_handlers.is_empty());
    assert!(
        normal_handlers.iter().all(|&s| s < 0.2),
        "{normal_handlers:?}"
    );
    // The earliest of the faulty node's / peer's high-scoring units explains the close.
    let earliest = rep
        .iter()
        .filter(|u| u.score > floor && (u.info.host == faulty_host || u.info.host == peer_host))
        .min_by_key(|u| u.info.t_start_unix_ns)
        .unwrap();
    let why = earliest.why.join("\n");
    assert!(
        why.contains("close") || why.contains("end of stream"),
        "{functions:?}: why of {}: {why}\n{}",
        earliest.info.id,
        earliest
            .annotated
            .as_ref()
            .map(|l| analyzer::report::tree_text(l))
            .unwrap_or_default()
    );
}

#[test]
fn ring_with_c_functions() {
    check(Functions::C);
}

#[test]
fn ring_with_python_calls() {
    check(Functions::Python);
}

#[test]
fn ring_with_library_calls_only() {
    check(Functions::None);
}
