//! The measurement behind the default of `TreeOptions::outcome_aware` (see MODEL.md): on
//! the synthetic faulty ring, for each way of recording, the separation between the best
//! unit on the faulty node and the best unit on nodes other than it and its peer — with and without
//! outcome-aware nodes. Outcome-aware nodes must never separate worse, and must separate
//! strictly better somewhere, or the default is wrong.

use analyzer::decode::TraceSet;
use analyzer::synth::{ring, Fault, Functions, Ring};
use analyzer::trees::TreeOptions;

struct Measure {
    /// Best score on the faulty node (its peer's unit has no model and scores 1 anyway).
    culprit: f64,
    /// Best score elsewhere.
    elsewhere: f64,
    /// Rank (0-based) of the first culprit unit.
    rank: usize,
}

fn measure(functions: Functions, outcome_aware: bool) -> Measure {
    let n = 6;
    let normal: Vec<TraceSet> = (1..=3)
        .map(|seed| TraceSet {
            processes: ring(&Ring {
                processes: n,
                iterations: 50 + 7 * seed as usize,
                functions,
                fault: None,
                seed,
            }),
        })
        .collect();
    let fault = Fault {
        process: 4,
        iteration: 25,
    };
    let trial = TraceSet {
        processes: ring(&Ring {
            processes: n,
            iterations: 60,
            functions,
            fault: Some(fault),
            seed: 11,
        }),
    };
    let opts = analyzer::Options {
        tree: TreeOptions {
            outcome_aware,
            ..TreeOptions::default()
        },
        ..Default::default()
    };
    let model = analyzer::learn(&normal, &opts).unwrap().model;
    let rep = analyzer::rank(&model, &trial, &opts).unwrap();
    let hosts = [
        format!("node{}", fault.process),
        format!("node{}", fault.process - 1),
    ];
    let is_culprit = |h: &str| hosts.iter().any(|x| x == h);
    let m = Measure {
        culprit: rep
            .iter()
            .filter(|u| u.info.host == hosts[0])
            .map(|u| u.score)
            .fold(0.0, f64::max),
        elsewhere: rep
            .iter()
            .filter(|u| !is_culprit(&u.info.host))
            .map(|u| u.score)
            .fold(0.0, f64::max),
        rank: rep
            .iter()
            .position(|u| is_culprit(&u.info.host))
            .unwrap_or(usize::MAX),
    };
    m
}

#[test]
fn outcome_aware_nodes_separate_at_least_as_well() {
    let mut better = false;
    println!("| recording | outcome-aware | faulty node's best score | best elsewhere | margin | first unit on faulty node or peer at rank |");
    println!("|---|---|---|---|---|---|");
    for f in [Functions::C, Functions::Python, Functions::None] {
        let on = measure(f, true);
        let off = measure(f, false);
        for (name, m) in [("yes", &on), ("no", &off)] {
            println!(
                "| {f:?} | {name} | {:.3} | {:.3} | {:+.3} | {} |",
                m.culprit,
                m.elsewhere,
                m.culprit - m.elsewhere,
                m.rank
            );
        }
        let (a, b) = (on.culprit - on.elsewhere, off.culprit - off.elsewhere);
        assert!(
            a >= b - 1e-9,
            "{f:?}: outcome-aware separates worse ({a} < {b})"
        );
        assert_eq!(
            on.rank, 0,
            "{f:?}: outcome-aware ranking does not put a culprit first"
        );
        better |= a > b + 1e-9;
    }
    assert!(
        better,
        "outcome-aware nodes never helped: the default should be off"
    );
}
