//! `culprit merge` is associative and commutative bit for bit: per-process models of
//! synthetic rings (C and Python recordings, several runs), merged along random binary
//! trees over random orders, always give the byte-identical model file — the one learning
//! every process at once gives (how the groups' processes ended aside: that is learned
//! against the rest of each run, and runs learned apart merge to the same bytes too).

use analyzer::decode::TraceSet;
use analyzer::model::Model;
use analyzer::synth::{ring, Functions, Ring};
use proptest::prelude::*;
use std::sync::OnceLock;

/// One model per process (3 runs of a 5-process ring), and the model of all at once.
fn leaves(functions: Functions) -> (Vec<Model>, Model) {
    let opts = analyzer::Options::default();
    let runs: Vec<TraceSet> = (1..=3u64)
        .map(|seed| TraceSet {
            processes: ring(&Ring {
                processes: 5,
                iterations: 15 + seed as usize * 7,
                functions,
                fault: None,
                seed,
            }),
        })
        .collect();
    let all = analyzer::learn(&runs, &opts).unwrap().model;
    let per = runs
        .iter()
        .flat_map(|r| r.processes.iter())
        .map(|p| {
            let one = TraceSet {
                processes: vec![p.clone()],
            };
            analyzer::learn(&[one], &opts).unwrap().model
        })
        .collect();
    (per, all)
}

fn cached(python: bool) -> &'static (Vec<Model>, Model) {
    static C: OnceLock<(Vec<Model>, Model)> = OnceLock::new();
    static P: OnceLock<(Vec<Model>, Model)> = OnceLock::new();
    if python {
        P.get_or_init(|| leaves(Functions::Python))
    } else {
        C.get_or_init(|| leaves(Functions::C))
    }
}

/// Merges `models` along the binary tree `cuts` describes (each cut splits a range).
fn merge_tree(models: &[&Model], cuts: &mut impl Iterator<Item = usize>) -> Model {
    if models.len() == 1 {
        return models[0].clone();
    }
    let at = 1 + cuts.next().unwrap_or(0) % (models.len() - 1);
    let mut left = merge_tree(&models[..at], cuts);
    let right = merge_tree(&models[at..], cuts);
    left.merge(&right).unwrap();
    left
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn any_merge_tree_gives_the_same_bytes(
        python in any::<bool>(),
        order in Just((0..15usize).collect::<Vec<_>>()).prop_shuffle(),
        cuts in proptest::collection::vec(any::<usize>(), 15),
    ) {
        let (leaves, all) = cached(python);
        let models: Vec<&Model> = order.iter().map(|&i| &leaves[i]).collect();
        let merged = merge_tree(&models, &mut cuts.into_iter());
        prop_assert!(classes(&merged) == classes(all), "merged along a tree ≠ learned at once");
    }
}

/// A model's bytes without how its groups' processes ended: that is learned against the
/// rest of each run (`analyzer::ending`), which a model of one process alone does not see.
fn classes(m: &Model) -> String {
    let mut m = m.clone();
    for g in &mut m.groups {
        g.ending = None;
    }
    m.to_json()
}

/// Learned per run and merged in any order, the model — endings included — is the one
/// learning every run at once gives.
#[test]
fn runs_learned_apart_and_merged_give_the_same_bytes_endings_included() {
    for functions in [Functions::C, Functions::Python] {
        let opts = analyzer::Options::default();
        let runs: Vec<TraceSet> = (1..=3u64)
            .map(|seed| TraceSet {
                processes: ring(&Ring {
                    processes: 5,
                    iterations: 15 + seed as usize * 7,
                    functions,
                    fault: None,
                    seed,
                }),
            })
            .collect();
        let all = analyzer::learn(&runs, &opts).unwrap().model;
        assert!(all.groups.iter().all(|g| g.ending.is_some()));
        let per: Vec<Model> = runs
            .iter()
            .map(|r| {
                analyzer::learn(std::slice::from_ref(r), &opts)
                    .unwrap()
                    .model
            })
            .collect();
        for order in [[0, 1, 2], [2, 0, 1], [1, 2, 0], [2, 1, 0]] {
            let mut m = per[order[0]].clone();
            m.merge(&per[order[1]]).unwrap();
            m.merge(&per[order[2]]).unwrap();
            assert!(m.to_json() == all.to_json(), "order {order:?}");
        }
    }
}
