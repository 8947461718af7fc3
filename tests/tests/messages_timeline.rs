//! `culprit timeline` in a real headless Chromium (Debian's `chromium`): the page of a
//! recorded C ring renders a lane per process, an arrow per matched message (decimated to
//! the visible ones), units coloured by score under a model, the process-state diagram —
//! and no script error. `CULPRIT_UPDATE_SCREENSHOT=1` rewrites `docs/timeline.png`.

#[path = "../e2e/common.rs"]
mod common;

use common::*;
use std::time::Duration;

#[test]
fn timeline_of_the_c_ring_renders_lanes_arrows_units_and_states() {
    let Some(_) = tests::browser::chromium_or_skip("messages_timeline") else {
        return;
    };
    let prog = compile_ring(&[]);
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dir = tmp.path().join("ring");
    let cmd = c_ring_cmd(&prog.path, "30");
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    record(&dir, &[], &cmd, Duration::from_secs(120)).assert_success("record the C ring");
    let model = tmp.path().join("m.model");
    learn(std::slice::from_ref(&dir), &model, &[]);
    let page = tmp.path().join("t.html");
    let d = dir.to_str().unwrap();
    let m = model.to_str().unwrap();
    culprit_writes("timeline", &dir, &["--model", m], &page);
    let r = tests::browser::render(&page).expect("chromium");
    assert!(r.errors.is_empty(), "script errors: {:?}", r.errors);
    let dom = &r.dom;
    // A lane per process: the launcher and 5 nodes.
    let lanes = dom.matches("<g class=\"lane").count();
    assert_eq!(lanes, 6, "{dom}");
    let arrows = dom.matches("class=\"arrow\"").count();
    assert!(arrows > 0, "no arrow drawn");
    assert!(arrows <= 4000);
    // Drawn + hidden = the matched messages.
    let j = run_culprit(&["messages", d, "--json"], Duration::from_secs(60));
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    let msgs = v["totals"]["messages"].as_u64().unwrap();
    let info = format!("{msgs} messages ({arrows} drawn, ");
    assert!(dom.contains(&info), "{info} not in the header");
    // Units, coloured by score (not the grey of unscored units), and the state diagram.
    let units = dom.matches("class=\"unit\"").count();
    assert!(units > 0);
    assert!(
        dom.contains("class=\"unit\"") && dom.contains("fill=\"rgb("),
        "units not coloured"
    );
    assert_eq!(dom.matches("class=\"pstate\"").count(), 6);
    assert!(dom.contains("class=\"state-multiplexer\""));

    // The ranked report follows messages across processes: a handler lists the unit of
    // another process it received from, and `culprit show` says the same.
    let units = rank_json(&model, &dir);
    let ids: std::collections::BTreeSet<&str> =
        units.iter().filter_map(|u| u["id"].as_str()).collect();
    let linked = units
        .iter()
        .find(|u| {
            u["received_from"]
                .as_array()
                .is_some_and(|a| a.iter().any(|p| p["unit"].is_string()))
        })
        .expect("no unit says where its bytes came from");
    let src = &linked["received_from"][0];
    assert_ne!(
        src["process"],
        format!("{}:{}", linked["host"].as_str().unwrap(), linked["pid"])
    );
    if let Some(sid) = src["unit"].as_str() {
        assert!(ids.contains(sid), "{sid} is not a ranked unit");
    }
    let id = linked["id"].as_str().unwrap();
    let show = run_culprit(
        &["show", "--model", model.to_str().unwrap(), d, "--unit", id],
        Duration::from_secs(120),
    );
    show.assert_success("culprit show");
    assert!(show.stdout.contains("received from "), "{}", show.stdout);
    // `rank` links the units it lists, `show` the one it shows (both from the export's
    // bounded-memory matching, which the stage's tests compare with the whole stage): the
    // same sources and destinations.
    let sj = run_culprit(
        &["show", "--model", m, d, "--unit", id, "--json"],
        Duration::from_secs(120),
    );
    sj.assert_success("culprit show --json");
    let sv: serde_json::Value = serde_json::from_str(&sj.stdout).expect("JSON");
    for k in ["received_from", "sent_to"] {
        assert_eq!(sv[k], linked[k], "{k} of {id}");
    }

    let png = if std::env::var_os("CULPRIT_UPDATE_SCREENSHOT").is_some() {
        repo().join("docs/timeline.png")
    } else {
        tmp.path().join("timeline.png")
    };
    let zoomed = tmp.path().join("zoomed.html");
    culprit_writes(
        "timeline",
        &dir,
        &["--model", m, "--window", "0.75,1"],
        &zoomed,
    );
    assert!(tests::browser::screenshot(&zoomed, &png, 1400, 520));
    assert!(std::fs::metadata(&png).unwrap().len() > 10_000);
}

/// A run with many messages: the page draws at most 4 000 arrows, says how many it hid,
/// and renders without a script error.
#[test]
fn timeline_decimates_a_hundred_thousand_messages() {
    use analyzer::decode::{write_trace_dir, TraceBuilder};
    use bufpool::format::{Addr, LibFn, LibOpts};
    let Some(_) = tests::browser::chromium_or_skip("messages_timeline") else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temporary directory");
    let (ca, sa) = (
        Addr::new(2, 40000, &[127, 0, 0, 1]),
        Addr::new(2, 7000, &[127, 0, 0, 1]),
    );
    let mut c = TraceBuilder::new("h", 10, 10);
    let mut s = TraceBuilder::new("h", 20, 20);
    let at = |b: &mut TraceBuilder, t: u64| {
        let now = b.now();
        if t > now {
            b.wait(t - now);
        }
    };
    let lib =
        |b: &mut TraceBuilder, f: LibFn, fd: i32, ret: i64, l: Option<Addr>, p: Option<Addr>| {
            b.lib(
                0x10,
                f,
                LibOpts {
                    fd: Some(fd),
                    ret: Some(ret),
                    local: l,
                    peer: p,
                    ..Default::default()
                },
            )
        };
    at(&mut c, 2_000_000);
    lib(&mut c, LibFn::Connect, 3, 0, Some(ca), Some(sa));
    at(&mut s, 2_100_000);
    lib(&mut s, LibFn::Accept, 5, 6, Some(sa), Some(ca));
    const N: u64 = 100_000;
    for k in 0..N {
        let t = 3_000_000 + k * 1_000;
        at(&mut c, t);
        lib(&mut c, LibFn::Send, 3, 16, None, None);
        at(&mut s, t + 400);
        lib(&mut s, LibFn::Recv, 6, 16, None, None);
    }
    let dir = tmp.path().join("big");
    write_trace_dir(&dir, "h", &[c.finish(), s.finish()]).expect("write trace");
    let page = tmp.path().join("big.html");
    culprit_writes("timeline", &dir, &["--no-units"], &page);
    let r = tests::browser::render(&page).expect("chromium");
    assert!(r.errors.is_empty(), "script errors: {:?}", r.errors);
    let arrows = r.dom.matches("class=\"arrow\"").count();
    assert!(arrows > 0 && arrows <= 4000, "{arrows} arrows drawn");
    assert!(
        r.dom.contains(&format!("{N} messages ({arrows} drawn, ")),
        "header"
    );
    assert_eq!(r.dom.matches("<g class=\"lane").count(), 2);
}
