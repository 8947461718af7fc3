//! `culprit rank --html` groups consequences under their root: rendered in headless
//! Chromium, the detail of a consequence names and links its root (`caused by`), and the
//! detail of the root lists its consequences. The ranking is the analyzer's default (the
//! evidence score) on the synthetic faulty ring, where the peer's reconnection has no model
//! and is filed under a root.

use analyzer::decode::TraceSet;
use analyzer::synth::{ring, Fault, Functions, Ring};
use std::fs;

fn page() -> String {
    let normal: Vec<TraceSet> = (1..=2)
        .map(|seed| TraceSet {
            processes: ring(&Ring {
                processes: 4,
                iterations: 30 + seed as usize * 5,
                functions: Functions::C,
                fault: None,
                seed,
            }),
        })
        .collect();
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
    let opts = analyzer::Options {
        score: analyzer::evidence::ScoreKind::Evidence,
        ..Default::default()
    };
    let model = analyzer::learn(&normal, &opts).unwrap().model;
    let rep = analyzer::rank(&model, &trial, &opts).unwrap();
    assert!(
        rep.iter().any(|u| u.caused_by.is_some()),
        "no consequence in the ranking"
    );
    rep.html()
}

#[test]
fn a_consequence_links_its_root_and_the_root_lists_it() {
    let Some(_) = tests::browser::chromium_or_skip("rank_consequences_page") else {
        return;
    };
    let html = page();
    let dir = tempfile::tempdir().unwrap();
    // The page shows its top unit; these show the first consequence, then its root.
    let consequence = dir.path().join("consequence.html");
    fs::write(
        &consequence,
        html.replace(
            "</body>",
            "<script>show(U.findIndex(v => v.caused_by));</script></body>",
        ),
    )
    .unwrap();
    let r = tests::browser::render(&consequence).unwrap();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let at = r.dom.find("class=\"caused\"").expect("no `caused by` line");
    let line = &r.dom[at..at + 300];
    assert!(
        line.contains("caused by <a class=\"go\" onclick=\"show("),
        "{line}"
    );

    let root = dir.path().join("root.html");
    fs::write(
        &root,
        html.replace(
            "</body>",
            "<script>show(U.findIndex(v => v.id === U.find(x => x.caused_by).caused_by));</script></body>",
        ),
    )
    .unwrap();
    let r = tests::browser::render(&root).unwrap();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert!(r.dom.contains("<h4>consequences ("), "no consequence list");
    assert!(r
        .dom
        .contains("<ul class=\"consequences\"><li><a class=\"go\""));
}
