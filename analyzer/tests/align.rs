//! The localizer's causality on hosts whose clocks disagree: a synthetic faulty ring on
//! four hosts, two of them put 50 ms behind and 100 ppm drifting (their calibrations made to
//! lie), ranked as recorded files the fault's consequences differently from the same run on
//! true clocks; ranked through `messages::align::corrected` (the hosts' offsets and drifts
//! folded into the calibrations) it files them exactly as on true clocks.

use analyzer::decode::TraceSet;
use analyzer::messages::align;
use analyzer::messages::offsets::HostOffset;
use analyzer::synth::{ring, Fault, Functions, Ring};

fn set(iterations: usize, fault: Option<Fault>, seed: u64) -> TraceSet {
    TraceSet {
        processes: ring(&Ring {
            processes: 4,
            iterations,
            functions: Functions::C,
            fault,
            seed,
        }),
    }
}

/// The first unit of the ranking, and every unit filed under another with that other.
/// (Units of equal score are otherwise ordered by time, which no estimate of the clocks
/// recovers closer than its uncertainty.)
fn filing(r: &analyzer::report::Report) -> (String, Vec<(String, String)>) {
    let v = r.json(usize::MAX);
    let units = v.as_array().unwrap();
    let mut filed: Vec<(String, String)> = units
        .iter()
        .filter(|u| !u["caused_by"].is_null())
        .map(|u| (u["id"].to_string(), u["caused_by"].to_string()))
        .collect();
    filed.sort();
    (units[0]["id"].to_string(), filed)
}

/// `set` with the clocks of `hosts` read `offset_ns` off and `ppm` fast.
fn skewed(set: &TraceSet, hosts: &[&str], offset_ns: i64, ppm: f64) -> TraceSet {
    let mut s = set.clone();
    for p in &mut s.processes {
        if hosts.contains(&p.host.as_str()) {
            let c = &mut p.calib;
            c.realtime0_ns = (c.realtime0_ns as i64 + offset_ns) as u64;
            let span = c.monotonic1_ns - c.monotonic0_ns;
            c.monotonic1_ns = c.monotonic0_ns + (span as f64 * (1.0 + ppm * 1e-6)) as u64;
        }
    }
    s
}

#[test]
fn consequences_are_filed_on_aligned_clocks() {
    let normal: Vec<TraceSet> = (1..=2).map(|s| set(20 + s * 5, None, s as u64)).collect();
    let opts = analyzer::Options::default();
    let model = analyzer::learn(&normal, &opts).unwrap().model;
    let trial = set(
        30,
        Some(Fault {
            process: 1,
            iteration: 12,
        }),
        100,
    );
    let hosts: Vec<String> = trial.processes.iter().map(|p| p.host.clone()).collect();
    assert!(hosts.len() == 4 && hosts[0] != hosts[1], "{hosts:?}");
    let truth = filing(&analyzer::rank(&model, &trial, &opts).unwrap());
    assert!(
        !truth.1.is_empty(),
        "the fault has consequences on true clocks: {truth:?}"
    );
    // The processes downstream of the fault read their clocks 50 ms early: their
    // consequences of the fault seem to come before it.
    let off = skewed(&trial, &[&hosts[0], &hosts[2]], -50_000_000, 100.0);
    let raw = filing(&analyzer::rank(&model, &off, &opts).unwrap());
    assert_ne!(raw, truth, "the skew should change what is filed where");
    // The synthetic ring's ends do not pair (its traces carry no matched messages to fit
    // the lines to: `tests/tests/clocks_hosts.rs` checks the fit on real recordings), so
    // the corrections are the skews' inverses, as the fit reports them.
    let skewed_calib = off
        .processes
        .iter()
        .find(|p| p.host == hosts[0])
        .unwrap()
        .calib;
    let b = 100e-6;
    let offsets: Vec<HostOffset> = hosts
        .iter()
        .map(|h| {
            let on = h == &hosts[0] || h == &hosts[2];
            HostOffset {
                host: h.clone(),
                reference: hosts[1].clone(),
                offset_ns: if on { 50e6 } else { 0.0 },
                uncertainty_ns: 0.0,
                bounds_ns: (0.0, 0.0),
                at_ns: skewed_calib.realtime0_ns as i64,
                drift_ppm: if on { -b / (1.0 + b) * 1e6 } else { 0.0 },
                drift_uncertainty_ppm: 0.0,
                messages: 1,
                inconsistent: false,
            }
        })
        .collect();
    let fixed = align::corrected(&off, &offsets);
    let got = filing(&analyzer::rank(&model, &fixed, &opts).unwrap());
    assert_eq!(got, truth);
}
