//! `culprit timeline`: 004's time–process diagram and process-state diagram as one
//! self-contained HTML page (no network, no library).
//!
//! - **Time–process diagram**: a lane per process, a sub-lane per thread; each thread's
//!   waits drawn as a strip (receive, multiplexer, send); an arrow per matched message
//!   from its send to its receive; execution units as bars under their thread, coloured by
//!   suspect score when a model was given (grey otherwise); injected faults marked.
//!   Times of other hosts are corrected by their estimated clock offsets.
//! - **Zoom and pan**: the wheel zooms around the pointer, dragging pans, double-click
//!   resets; `page.html#0.5,0.75` opens on that part of the run. **Decimation**: only what falls in the visible window is drawn, and at most
//!   [`MAX_ARROWS`] arrows (one per source lane, destination lane and pixel column; the
//!   count drawn and hidden is shown), state strips merged below a pixel — so a run with
//!   a million messages stays responsive.
//! - **Process-state diagram**: per process, the share of its lifetime spent running,
//!   waiting in receives, in multiplexers, blocked in sends.
//!
//! The data is embedded as JSON (flat arrays, times in ns from the earliest event).

use super::stats::{self, State};
use super::Messages;
use crate::error::{Error, Result};
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// Arrows drawn at most at any zoom.
pub const MAX_ARROWS: usize = 4000;

/// A unit to draw, with its score when a model was given.
#[derive(Clone, Debug)]
pub struct TimelineUnit {
    /// Where and when.
    pub span: super::links::UnitSpan,
    /// Suspect score in [0, 1].
    pub score: Option<f64>,
}

#[derive(Serialize)]
struct Lane {
    proc: String,
    tid: u32,
    first: bool,
}

#[derive(Serialize)]
struct ProcState {
    name: String,
    running: i64,
    receive: i64,
    multiplexer: i64,
    send: i64,
}

#[derive(Serialize)]
struct Data {
    lanes: Vec<Lane>,
    /// lane, start, end, state (0 receive, 1 multiplexer, 2 send), flat.
    states: Vec<i64>,
    /// send lane, send time, receive lane, receive time, bytes, flat; by send time.
    msgs: Vec<i64>,
    /// lane, start, end, score × 1000 (−1: none), flat.
    units: Vec<i64>,
    unit_ids: Vec<String>,
    /// lane, time, flat.
    injections: Vec<i64>,
    injection_names: Vec<String>,
    procs: Vec<ProcState>,
    span: i64,
    t0_unix_ns: i64,
    max_arrows: usize,
    window: Option<(f64, f64)>,
}

/// What the page holds.
#[derive(Clone, Copy, Debug, Default)]
pub struct TimelineStats {
    /// Lanes (threads).
    pub lanes: usize,
    /// Messages (arrows before decimation).
    pub messages: usize,
    /// Units.
    pub units: usize,
}

/// Writes the page.
/// `window`: the part of the run the page opens on, as fractions `(from, to)` of its span
/// (the whole run when None; `page.html#from,to` overrides it).
pub fn write(
    m: &Messages,
    units: &[TimelineUnit],
    window: Option<(f64, f64)>,
    path: &Path,
) -> Result<TimelineStats> {
    // Host clock corrections (offset and drift).
    let corr: std::collections::HashMap<&str, &super::offsets::HostOffset> =
        m.offsets.iter().map(|h| (h.host.as_str(), h)).collect();
    let pns = |p: usize, tsc: u64| {
        let pr = &m.procs[p];
        let t = pr.ns(tsc);
        t + corr.get(pr.host.as_str()).map_or(0, |h| h.correction_ns(t))
    };
    // Lanes: (proc, tid) in process order, threads by first op.
    let mut lanes = Vec::new();
    let mut lane_of: std::collections::HashMap<(usize, u32), usize> = Default::default();
    let mut t0 = i64::MAX;
    let mut t1 = i64::MIN;
    for (pi, p) in m.procs.iter().enumerate() {
        let mut tids: Vec<u32> = Vec::new();
        for o in &p.ops {
            if !tids.contains(&o.tid) {
                tids.push(o.tid);
            }
        }
        if let (Some(a), Some(b)) = (p.ops.first(), p.ops.last()) {
            t0 = t0.min(pns(pi, a.start.min(a.end)));
            t1 = t1.max(pns(pi, b.end));
        }
        let label = format!("{} {}", p.name(), p.label().text());
        for (k, t) in tids.into_iter().enumerate() {
            lane_of.insert((pi, t), lanes.len());
            lanes.push(Lane {
                proc: label.clone(),
                tid: t,
                first: k == 0,
            });
        }
    }
    if t0 == i64::MAX {
        t0 = 0;
        t1 = 1;
    }
    let mut states = Vec::new();
    for (pi, p) in m.procs.iter().enumerate() {
        for o in &p.ops {
            if let Some(s) = stats::state_of(o.kind) {
                let l = lane_of[&(pi, o.tid)] as i64;
                let code = match s {
                    State::Receive => 0,
                    State::Multiplexer => 1,
                    State::Send => 2,
                };
                states.extend([l, pns(pi, o.start) - t0, pns(pi, o.end) - t0, code]);
            }
        }
    }
    let mut msgs: Vec<[i64; 5]> = m
        .flows()
        .map(|f| {
            let (sp, rp) = (f.send.proc as usize, f.recv.proc as usize);
            let so = m.op(f.send);
            let ro = m.op(f.recv);
            [
                lane_of[&(sp, so.tid)] as i64,
                pns(sp, so.start) - t0,
                lane_of[&(rp, ro.tid)] as i64,
                pns(rp, ro.end) - t0,
                f.bytes as i64,
            ]
        })
        .collect();
    msgs.sort_unstable_by_key(|x| x[1]);
    let n_msgs = msgs.len();
    let mut uflat = Vec::new();
    let mut unit_ids = Vec::new();
    for u in units {
        let Some(pi) = m
            .procs
            .iter()
            .position(|p| p.host == u.span.host && p.pid == u.span.pid)
        else {
            continue;
        };
        let Some(&l) = lane_of.get(&(pi, u.span.tid)) else {
            continue;
        };
        uflat.extend([
            l as i64,
            pns(pi, u.span.tsc_start) - t0,
            pns(pi, u.span.tsc_end) - t0,
            u.score.map_or(-1, |s| (s * 1000.0).round() as i64),
        ]);
        unit_ids.push(u.span.id.clone());
    }
    let mut inj = Vec::new();
    let mut inj_names = Vec::new();
    for (pi, p) in m.procs.iter().enumerate() {
        for (tsc, rule, _func, fd, spec) in &p.injections {
            // The thread: the op nearest in time.
            let tid = p
                .ops
                .iter()
                .min_by_key(|o| o.end.abs_diff(*tsc))
                .map_or(p.pid, |o| o.tid);
            if let Some(&l) = lane_of.get(&(pi, tid)) {
                inj.extend([l as i64, pns(pi, *tsc) - t0]);
                inj_names.push(format!("inject #{rule} fd {fd}: {spec}"));
            }
        }
    }
    let procs = (0..m.procs.len())
        .map(|p| {
            let th = stats::states(m, p);
            ProcState {
                name: m.procs[p].name(),
                running: th.iter().map(|t| t.running_ns).sum(),
                receive: th.iter().map(|t| t.receive_ns).sum(),
                multiplexer: th.iter().map(|t| t.multiplexer_ns).sum(),
                send: th.iter().map(|t| t.send_ns).sum(),
            }
        })
        .collect();
    let st = TimelineStats {
        lanes: lanes.len(),
        messages: n_msgs,
        units: unit_ids.len(),
    };
    let data = Data {
        lanes,
        states,
        msgs: msgs.into_iter().flatten().collect(),
        units: uflat,
        unit_ids,
        injections: inj,
        injection_names: inj_names,
        procs,
        span: (t1 - t0).max(1),
        t0_unix_ns: t0,
        max_arrows: MAX_ARROWS,
        window: window.filter(|w| w.1 > w.0),
    };
    let io = |what| {
        move |source| Error::Io {
            path: path.to_path_buf(),
            what,
            source,
        }
    };
    let f = reader::safefile::create_output(path).map_err(io("create"))?;
    let mut w = std::io::BufWriter::new(f);
    w.write_all(HEAD.as_bytes()).map_err(io("write"))?;
    // `</` cannot appear in the JSON's strings unescaped inside a script element.
    let json = serde_json::to_string(&data)
        .map_err(|e| io("encode")(std::io::Error::other(e)))?
        .replace("</", "<\\/");
    w.write_all(json.as_bytes()).map_err(io("write"))?;
    w.write_all(TAIL.as_bytes()).map_err(io("write"))?;
    w.flush().map_err(io("write"))?;
    Ok(st)
}

const HEAD: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>culprit timeline</title>
<style>
body{font:12px system-ui,sans-serif;margin:0;background:#fafafa;color:#222}
header{padding:6px 10px;background:#263238;color:#eee}
header b{font-size:14px}
#info{margin-left:16px;color:#b0bec5}
#wrap{position:relative;overflow:hidden;border-bottom:1px solid #ccc;cursor:grab;user-select:none}
svg text{font-size:11px}
.lanebg{fill:#fff;stroke:#e0e0e0}
.lane.alt .lanebg{fill:#f5f7fa}
.st0{fill:#42a5f5}.st1{fill:#ffb300}.st2{fill:#e53935}
.arrow{stroke:#37474f;stroke-width:1;opacity:.7}
.unit{stroke:#0003;stroke-width:.5}
.inj{fill:#d50000}
.legend span{display:inline-block;width:10px;height:10px;margin:0 3px 0 10px;vertical-align:middle}
#states{padding:8px 10px}
.bar{display:flex;height:14px;width:600px;border:1px solid #ccc}
.bar div{height:100%}
table{border-collapse:collapse}td{padding:1px 6px}
</style></head><body>
<header><b>culprit timeline</b><span id="info"></span>
<span class="legend"><span class="st0" style="background:#42a5f5"></span>receive
<span style="background:#ffb300"></span>multiplexer<span style="background:#e53935"></span>send
<span style="background:#37474f;height:2px"></span>message</span></header>
<div id="wrap"><svg id="tp" xmlns="http://www.w3.org/2000/svg"></svg></div>
<div id="states"><b>Process states</b> (share of each process's time: running / waiting in receive / in a multiplexer / blocked in send)<table id="pst"></table></div>
<script id="data" type="application/json">"#;

const TAIL: &str = r#"</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById('data').textContent);
const NS = 'http://www.w3.org/2000/svg';
const LH = 22, LEFT = 220, TOP = 18;
const svg = document.getElementById('tp');
const wrap = document.getElementById('wrap');
let W = Math.max(600, (wrap.clientWidth || 1200));
const H = TOP + D.lanes.length * LH + 10;
svg.setAttribute('width', W); svg.setAttribute('height', H);
let v0 = 0, v1 = D.span;
if (D.window) { v0 = D.span * D.window[0]; v1 = D.span * D.window[1]; }
// `#a,b`: open on that window, as fractions of the run (for links and screenshots).
const hw = location.hash.match(/^#([0-9.]+),([0-9.]+)$/);
if (hw && +hw[2] > +hw[1]) { v0 = D.span * +hw[1]; v1 = D.span * +hw[2]; }
function el(tag, attrs, parent) {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  parent.appendChild(e); return e;
}
function x(t) { return LEFT + (t - v0) / (v1 - v0) * (W - LEFT - 10); }
function fmt(ns) { return ns >= 1e9 ? (ns/1e9).toFixed(3)+' s' : ns >= 1e6 ? (ns/1e6).toFixed(3)+' ms' : (ns/1e3).toFixed(1)+' µs'; }
function lower(arr, stride, off, t) { // first record with arr[i*stride+off] >= t
  let lo = 0, hi = arr.length / stride;
  while (lo < hi) { const m = (lo + hi) >> 1; if (arr[m*stride+off] < t) lo = m + 1; else hi = m; }
  return lo;
}
function score_color(s) {
  if (s < 0) return '#b0bec5';
  const r = Math.round(255 * Math.min(1, s/500)), g = Math.round(200 * Math.min(1, (1000-s)/500));
  return 'rgb(' + r + ',' + g + ',60)';
}
const defs = el('defs', {}, svg);
const mk = el('marker', {id:'ah', viewBox:'0 0 6 6', refX:'6', refY:'3', markerWidth:'6', markerHeight:'6', orient:'auto'}, defs);
el('path', {d:'M0,0 L6,3 L0,6 z', fill:'#37474f'}, mk);
const clip = el('rect', {x: LEFT, y: 0, width: W - LEFT, height: H}, el('clipPath', {id: 'plot'}, defs));
let drawn = 0, hidden = 0;
function render() {
  while (svg.lastChild !== defs) svg.removeChild(svg.lastChild);
  const lanes = el('g', {id:'lanes'}, svg);
  let procIdx = -1, g = null;
  D.lanes.forEach((l, i) => {
    if (l.first) {
      procIdx++;
      g = el('g', {class: 'lane' + (procIdx % 2 ? ' alt' : ''), 'data-proc': l.proc}, lanes);
    }
    const y = TOP + i * LH;
    el('rect', {class:'lanebg', x:0, y:y, width:W, height:LH}, g);
    const t = el('text', {class:'sublane', x:4, y:y+14}, g);
    t.textContent = (l.first ? l.proc : '') + '  tid ' + l.tid;
  });
  // Time axis.
  const ax = el('g', {id:'axis'}, svg);
  for (let k = 0; k <= 5; k++) {
    const t = v0 + (v1 - v0) * k / 5;
    const tx = el('text', {x: x(t), y: 12}, ax); tx.textContent = fmt(t);
  }
  // States, merged below half a pixel.
  const sg = el('g', {id:'statestrips', 'clip-path': 'url(#plot)'}, svg);
  const S = D.states, px = (v1 - v0) / (W - LEFT);
  let last = [];
  for (let i = 0; i < S.length; i += 4) {
    if (S[i+2] < v0 || S[i+1] > v1) continue;
    const l = S[i], a = Math.max(S[i+1], v0), b = Math.min(S[i+2], v1);
    if (b - a < px / 2) continue;
    el('rect', {class:'st' + S[i+3], x: x(a), y: TOP + l*LH + 3, width: Math.max(1, x(b) - x(a)), height: 6}, sg);
  }
  // Units.
  const ug = el('g', {id:'units', 'clip-path': 'url(#plot)'}, svg);
  const U = D.units;
  for (let i = 0, k = 0; i < U.length; i += 4, k++) {
    if (U[i+2] < v0 || U[i+1] > v1) continue;
    const a = Math.max(U[i+1], v0), b = Math.min(U[i+2], v1);
    const r = el('rect', {class:'unit', x: x(a), y: TOP + U[i]*LH + 12, width: Math.max(1, x(b) - x(a)), height: 7, fill: score_color(U[i+3])}, ug);
    const ti = el('title', {}, r); ti.textContent = D.unit_ids[k] + (U[i+3] >= 0 ? ' score ' + (U[i+3]/1000).toFixed(3) : '');
  }
  // Messages: visible ones, at most one per (src lane, dst lane, pixel column), capped.
  const ag = el('g', {id:'arrows', 'clip-path': 'url(#plot)'}, svg);
  const M = D.msgs;
  drawn = 0; hidden = 0;
  const seen = new Set();
  // Messages sent before the window may be received in it: look back by the longest
  // plausible flight (the whole window).
  let i0 = lower(M, 5, 1, v0 - (v1 - v0)), i1 = lower(M, 5, 1, v1 + 1);
  for (let i = i0; i < i1; i++) {
    const o = i * 5;
    if (M[o+3] < v0) continue;
    const key = M[o] * 1e9 + M[o+2] * 1e5 + Math.round(x(M[o+1]));
    if (seen.has(key) || drawn >= D.max_arrows) { hidden++; continue; }
    seen.add(key);
    const ln = el('line', {class:'arrow', x1: x(M[o+1]), y1: TOP + M[o]*LH + LH/2, x2: x(M[o+3]), y2: TOP + M[o+2]*LH + LH/2, 'marker-end': 'url(#ah)'}, ag);
    const ti = el('title', {}, ln); ti.textContent = M[o+4] + ' bytes';
    drawn++;
  }
  // Injected faults.
  const ig = el('g', {id:'injections', 'clip-path': 'url(#plot)'}, svg);
  for (let i = 0, k = 0; i < D.injections.length; i += 2, k++) {
    const t = D.injections[i+1]; if (t < v0 || t > v1) continue;
    const cx = x(t), cy = TOP + D.injections[i]*LH + LH/2;
    const p = el('path', {class:'inj', d: 'M'+cx+','+(cy-7)+' l6,7 l-6,7 l-6,-7 z'}, ig);
    const ti = el('title', {}, p); ti.textContent = D.injection_names[k];
  }
  document.getElementById('info').textContent =
    D.lanes.length + ' threads, ' + (D.msgs.length/5) + ' messages (' + drawn + ' drawn, ' + hidden +
    ' hidden at this zoom), window ' + fmt(v0) + ' – ' + fmt(v1);
}
let pending = false;
function again() { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; render(); }); } }
wrap.addEventListener('wheel', e => {
  e.preventDefault();
  const r = svg.getBoundingClientRect();
  const t = v0 + (e.clientX - r.left - LEFT) / (W - LEFT - 10) * (v1 - v0);
  const f = e.deltaY < 0 ? 0.8 : 1.25;
  v0 = t - (t - v0) * f; v1 = t + (v1 - t) * f;
  if (v1 - v0 < 100) v1 = v0 + 100;
  again();
}, {passive: false});
let drag = null;
wrap.addEventListener('mousedown', e => { drag = {x: e.clientX, v0, v1}; wrap.style.cursor = 'grabbing'; });
window.addEventListener('mouseup', () => { drag = null; wrap.style.cursor = 'grab'; });
window.addEventListener('mousemove', e => {
  if (!drag) return;
  const dt = (e.clientX - drag.x) / (W - LEFT - 10) * (drag.v1 - drag.v0);
  v0 = drag.v0 - dt; v1 = drag.v1 - dt; again();
});
wrap.addEventListener('dblclick', () => { v0 = 0; v1 = D.span; again(); });
window.addEventListener('resize', () => { W = Math.max(600, wrap.clientWidth || 1200); svg.setAttribute('width', W); clip.setAttribute('width', W - LEFT); again(); });
render();
// Process-state diagram.
const pst = document.getElementById('pst');
for (const p of D.procs) {
  const tot = Math.max(1, p.running + p.receive + p.multiplexer + p.send);
  const tr = document.createElement('tr'); tr.className = 'pstate';
  const td0 = document.createElement('td'); td0.textContent = p.name; tr.appendChild(td0);
  const td1 = document.createElement('td'); const bar = document.createElement('div'); bar.className = 'bar';
  for (const [k, c] of [['running','#90a4ae'],['receive','#42a5f5'],['multiplexer','#ffb300'],['send','#e53935']]) {
    const d = document.createElement('div'); d.className = 'state-' + k;
    d.style.width = (100 * p[k] / tot) + '%'; d.style.background = c; d.title = k + ' ' + fmt(p[k]);
    bar.appendChild(d);
  }
  td1.appendChild(bar); tr.appendChild(td1);
  const td2 = document.createElement('td');
  td2.textContent = 'running ' + fmt(p.running) + ', receive ' + fmt(p.receive) + ', multiplexer ' + fmt(p.multiplexer) + ', send ' + fmt(p.send);
  tr.appendChild(td2); pst.appendChild(tr);
}
</script></body></html>
"#;
