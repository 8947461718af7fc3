//! Golden files: the ranking of a small synthetic faulty ring (and the learned model's
//! shape), for each way of recording, compared with `tests/data/*.golden`. Each case runs
//! with 1 worker thread and with 4: the outputs must be identical (and the model files
//! byte-identical). Regenerate with `BLESS=1 cargo test -p analyzer --test golden`.
//! `ring_*.golden` rank with the paper's score (`--score paper`, unchanged since it was
//! the default); `ring_*_evidence.golden` with the default score.

use analyzer::decode::TraceSet;
use analyzer::evidence::ScoreKind;
use analyzer::synth::{ring, Fault, Functions, Ring};
use std::fmt::Write as _;
use std::path::PathBuf;

fn run(functions: Functions, score: ScoreKind) -> (String, String) {
    let normal: Vec<TraceSet> = (1..=2)
        .map(|seed| TraceSet {
            processes: ring(&Ring {
                processes: 4,
                iterations: 30 + seed as usize * 5,
                functions,
                fault: None,
                seed,
            }),
        })
        .collect();
    let trial = TraceSet {
        processes: ring(&Ring {
            processes: 4,
            iterations: 40,
            functions,
            fault: Some(Fault {
                process: 2,
                iteration: 20,
            }),
            seed: 7,
        }),
    };
    let opts = analyzer::Options {
        score,
        ..Default::default()
    };
    let learned = analyzer::learn(&normal, &opts).unwrap();
    let rep = analyzer::rank(&learned.model, &trial, &opts).unwrap();
    let mut s = String::new();
    let m = &learned.model;
    writeln!(
        s,
        "model: {} group(s), {} nodes",
        m.groups.len(),
        m.node_count()
    )
    .unwrap();
    for g in &m.groups {
        for (c, t) in &g.classes {
            writeln!(
                s,
                "  {:?} main={} conn={} units={} models={} nodes={}",
                c.kind,
                c.main_thread,
                c.conn.0.len(),
                t.units,
                t.models,
                t.nodes.len()
            )
            .unwrap();
        }
    }
    writeln!(s, "ranking ({} units):", rep.units.len()).unwrap();
    for u in rep.units.iter().take(8) {
        writeln!(
            s,
            "{:.6} {} {} fd={:?} {:?} ⇄ {:?} t={}",
            u.score,
            u.info.id,
            u.info.kind.name(),
            u.info.fd,
            u.info.local,
            u.info.peer,
            u.info.t_start_unix_ns
        )
        .unwrap();
        if let Some(c) = &u.caused_by {
            writeln!(s, "    caused by {c}").unwrap();
        }
        for w in &u.why {
            writeln!(s, "    {w}").unwrap();
        }
    }
    (s, m.to_json())
}

fn check(name: &str, functions: Functions, score: ScoreKind) {
    let pool = |n| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    };
    let (one, model1) = pool(1).install(|| run(functions, score));
    let (four, model4) = pool(4).install(|| run(functions, score));
    assert_eq!(one, four, "results depend on the number of threads");
    assert_eq!(model1, model4, "model depends on the number of threads");
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(format!("{name}.golden"));
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, &one).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with BLESS=1 to create)", path.display()));
    assert_eq!(one, want, "{} differs (BLESS=1 to accept)", path.display());
}

#[test]
fn golden_ring_c() {
    check("ring_c", Functions::C, ScoreKind::Paper);
}

#[test]
fn golden_ring_python() {
    check("ring_python", Functions::Python, ScoreKind::Paper);
}

#[test]
fn golden_ring_preload_only() {
    check("ring_preload", Functions::None, ScoreKind::Paper);
}

#[test]
fn golden_ring_c_evidence() {
    check("ring_c_evidence", Functions::C, ScoreKind::Evidence);
}

#[test]
fn golden_ring_python_evidence() {
    check(
        "ring_python_evidence",
        Functions::Python,
        ScoreKind::Evidence,
    );
}

#[test]
fn golden_ring_preload_only_evidence() {
    check(
        "ring_preload_evidence",
        Functions::None,
        ScoreKind::Evidence,
    );
}

/// Units below `units_kept` are kept compact: listing them gives the same units, in the
/// same order, as keeping every unit whole.
#[test]
fn compact_units_list_the_same() {
    let normal = TraceSet {
        processes: ring(&Ring {
            processes: 4,
            iterations: 30,
            functions: Functions::C,
            fault: None,
            seed: 1,
        }),
    };
    let trial = TraceSet {
        processes: ring(&Ring {
            processes: 4,
            iterations: 40,
            functions: Functions::C,
            fault: Some(Fault {
                process: 2,
                iteration: 20,
            }),
            seed: 7,
        }),
    };
    let opts = analyzer::Options::default();
    let model = analyzer::learn(&[normal], &opts).unwrap().model;
    let whole = analyzer::rank(&model, &trial, &opts).unwrap();
    let small = analyzer::Options {
        units_kept: 5,
        ..Default::default()
    };
    let compact = analyzer::rank(&model, &trial, &small).unwrap();
    assert_eq!(compact.units.len(), 5);
    assert_eq!(compact.len(), whole.len());
    assert_eq!(compact.json(usize::MAX), whole.json(usize::MAX));
    assert_eq!(compact.text(1000, true), whole.text(1000, true));
    assert_eq!(compact.html(), whole.html());
}
