//! Sharded ranking (`culprit rank --shard K/N` then `--merge`) gives exactly the JSON of one
//! ranking over every process: for synthetic faulty rings of 3–9 processes on 1–4 hosts,
//! every shard count from 1 to one more than the processes (whole hosts per shard, then
//! processes), both the default score (consequences filed across processes) and the
//! paper's, part files going through their binary encoding. Also: a missing or repeated
//! shard, or a part of another run, is an error naming the file.

use analyzer::decode::TraceSet;
use analyzer::evidence::ScoreKind;
use analyzer::partial::{merge_parts, rank_shard, PartFile, Shard};
use analyzer::synth::{ring, Fault, Functions, Ring};
use proptest::prelude::*;
use std::path::PathBuf;

fn set(
    processes: usize,
    hosts: usize,
    iterations: usize,
    fault: Option<Fault>,
    seed: u64,
) -> TraceSet {
    let mut procs = ring(&Ring {
        processes,
        iterations,
        functions: Functions::C,
        fault,
        seed,
    });
    for (i, p) in procs.iter_mut().enumerate() {
        p.host = format!("h{}", i % hosts);
    }
    TraceSet { processes: procs }
}

fn parts(
    model: &analyzer::model::Model,
    trial: &TraceSet,
    opts: &analyzer::Options,
    n: usize,
) -> Vec<(PathBuf, PartFile)> {
    (1..=n)
        .map(|k| {
            let p = rank_shard(model, trial, opts, Shard { k, n }).unwrap();
            // Through the file's binary encoding, as `--merge` reads it.
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join(format!("part-{k}"));
            p.save(&file).unwrap();
            let back = PartFile::load(&file).unwrap();
            (PathBuf::from(format!("part-{k}.json")), back)
        })
        .collect()
}

fn check(processes: usize, hosts: usize, seed: u64, score: ScoreKind) {
    let normal: Vec<TraceSet> = (1..=2)
        .map(|s| set(processes, hosts, 20 + s * 5, None, seed + s as u64))
        .collect();
    let fault = Some(Fault {
        process: (seed as usize) % processes,
        iteration: 12,
    });
    let trial = set(processes, hosts, 30, fault, seed + 100);
    let opts = analyzer::Options {
        score,
        ..Default::default()
    };
    let model = analyzer::learn(&normal, &opts).unwrap().model;
    let whole = analyzer::rank(&model, &trial, &opts).unwrap();
    let want = serde_json::to_string_pretty(&whole.json(usize::MAX)).unwrap();
    let text = whole.text_with(10, false, &|_| Vec::new());
    for n in 1..=processes + 1 {
        let merged = merge_parts(parts(&model, &trial, &opts, n), &opts).unwrap();
        let got = serde_json::to_string_pretty(&merged.json(usize::MAX)).unwrap();
        assert!(
            got == want,
            "{n} shards of {processes} processes on {hosts} hosts ({score}):\n{got}\n---\n{want}"
        );
        assert_eq!(merged.text_with(10, false, &|_| Vec::new()), text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    #[test]
    fn sharded_ranking_is_the_whole_ranking(
        processes in 3usize..=9, hosts in 1usize..=4, seed in 0u64..1000, paper in any::<bool>()
    ) {
        let score = if paper { ScoreKind::Paper } else { ScoreKind::Evidence };
        check(processes, hosts.min(processes), seed, score);
    }
}

#[test]
fn every_process_is_ranked_by_exactly_one_shard() {
    let hosts = ["a", "a", "a", "b", "c", "c"];
    let all: Vec<analyzer::decode::ProcId> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| analyzer::decode::ProcId {
            host: h.to_string(),
            pid: i as u32,
            start_ticks: 0,
        })
        .collect();
    let outline = analyzer::decode::RunOutline::of(&all, 6);
    for n in 1..=8 {
        let mut count = [0; 6];
        for k in 1..=n {
            let w = (Shard { k, n }).processes(&hosts);
            // The hosts it opens, from the run's outline: those of the processes it ranks.
            let opens: std::collections::BTreeSet<String> = hosts
                .iter()
                .zip(&w)
                .filter(|(_, &w)| w)
                .map(|(h, _)| h.to_string())
                .collect();
            assert_eq!(Shard { k, n }.hosts_of(&outline), opens, "{k}/{n}");
            for (i, w) in w.into_iter().enumerate() {
                count[i] += w as usize;
            }
        }
        assert_eq!(count, [1; 6], "{n} shards");
    }
    // No more shards than hosts: whole hosts.
    let w: Vec<Vec<bool>> = (1..=3)
        .map(|k| Shard { k, n: 3 }.processes(&hosts))
        .collect();
    assert_eq!(w[0], [true, true, true, false, false, false]);
    assert_eq!(w[2], [false, false, false, false, true, true]);
}

#[test]
fn missing_repeated_or_foreign_parts_are_errors() {
    let normal = vec![set(4, 2, 20, None, 1)];
    let trial = set(
        4,
        2,
        20,
        Some(Fault {
            process: 1,
            iteration: 8,
        }),
        2,
    );
    let opts = analyzer::Options::default();
    let model = analyzer::learn(&normal, &opts).unwrap().model;
    let mut p = parts(&model, &trial, &opts, 3);
    let last = p.pop().unwrap();
    let e = merge_parts(p, &opts).unwrap_err().to_string();
    assert!(e.contains("shard 3/3 is missing"), "{e}");
    let mut p = parts(&model, &trial, &opts, 2);
    p.push((
        PathBuf::from("again.json"),
        parts(&model, &trial, &opts, 2).remove(0).1,
    ));
    let e = merge_parts(p, &opts).unwrap_err().to_string();
    assert!(
        e.starts_with("again.json") && e.contains("given twice"),
        "{e}"
    );
    let other = set(5, 2, 20, None, 3);
    let mut p = parts(&model, &trial, &opts, 3);
    p[2] = (
        PathBuf::from("other.json"),
        parts(&model, &other, &opts, 3).remove(2).1,
    );
    let e = merge_parts(p, &opts).unwrap_err().to_string();
    assert!(
        e.starts_with("other.json") && e.contains("another run"),
        "{e}"
    );
    drop(last);
    // Damaged, cut short, of the version before: refused, naming the file.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("part-1");
    rank_shard(&model, &trial, &opts, Shard { k: 1, n: 2 })
        .unwrap()
        .save(&file)
        .unwrap();
    let good = std::fs::read(&file).unwrap();
    let bad = dir.path().join("bad-part");
    let refused = |bytes: &[u8], want: &str| {
        std::fs::write(&bad, bytes).unwrap();
        let e = PartFile::load(&bad).unwrap_err().to_string();
        assert!(e.contains("bad-part") && e.contains(want), "{e}");
    };
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x10;
    refused(&flipped, "checksum");
    refused(&good[..good.len() - 1], "cut short");
    let mut v3 = good.clone();
    v3[8] = 3;
    refused(&v3, "version 3");
    assert!("0/3".parse::<Shard>().is_err() && "4/3".parse::<Shard>().is_err());
    assert_eq!("2/3".parse::<Shard>(), Ok(Shard { k: 2, n: 3 }));
}

/// A shard's model read from its file, hashed from the file's bytes
/// (`Model::load_hashed`): the hash of the model's encoding, so its parts are those of the
/// model in memory.
#[test]
fn a_model_file_hashes_as_its_encoding() {
    let normal = vec![set(5, 2, 20, None, 4)];
    let opts = analyzer::Options::default();
    let model = analyzer::learn(&normal, &opts).unwrap().model;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ring.model");
    model.save(&file).unwrap();
    let (read, hash) = analyzer::model::Model::load_hashed(&file).unwrap();
    assert_eq!(hash, analyzer::partial::model_hash(&model));
    assert_eq!(read.to_json(), model.to_json());
}
