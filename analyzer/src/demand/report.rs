//! **Report** of the demand stage: a text table per process, the alarms; JSON (the
//! [`DemandReport`] itself); and an HTML page with 003's two charts per process —
//! the demand estimates over time, and the residual with its ±3σ̂ limits, alarms marked —
//! drawn as inline SVG (no script).

use super::{DemandReport, ProcessDemand};
use std::fmt::Write as _;

/// Seconds in a readable unit.
pub fn secs(s: f64) -> String {
    let a = s.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1.0 {
        format!("{s:.3} s")
    } else if a >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

/// Unix ns as seconds from the start of the run.
fn rel(r: &DemandReport, t: i64) -> f64 {
    (t - r.t0_unix_ns) as f64 * 1e-9
}

/// The text report.
pub fn text(r: &DemandReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "service demand: {} intervals of {} s; trained on the {}; estimator {:?}; services by {:?}",
        r.intervals, r.interval_s, r.train, r.estimator, r.services_mode
    );
    for p in &r.processes {
        let _ = writeln!(o);
        let _ = writeln!(o, "{} pid {} {}", p.host, p.pid, p.process);
        let _ = writeln!(
            o,
            "  {:<28} {:>9} {:>24} {:>12}",
            "service", "requests", "demand (95% CI)", "own busy"
        );
        for s in &p.services {
            let ci = if s.ci95_s >= 1e6 {
                "±∞".to_string()
            } else {
                format!("±{}", secs(s.ci95_s))
            };
            let _ = writeln!(
                o,
                "  {:<28} {:>9} {:>24} {:>12}",
                s.id,
                s.requests,
                format!("{} {}", secs(s.demand_s), ci),
                secs(s.own_busy_s)
            );
            if let Some(n) = &s.name {
                let _ = writeln!(o, "      {n}");
            }
            if let Some(c) = s.cpu_demand_s {
                let _ = writeln!(o, "      CPU {} per request", secs(c));
            }
            if let (Some(k), Some(m)) = (s.merged_signatures, s.merged_requests) {
                let _ = writeln!(
                    o,
                    "      (with {k} rarer signature(s) merged in: {m} requests, too few to estimate apart)"
                );
            }
        }
        let cpu = match p.cpu_s {
            Some(c) => format!(
                "CPU {} (CPU/busy {:.2}, per-interval correlation {:.2} over {} intervals)",
                secs(c),
                p.cpu_agreement.cpu_over_busy,
                p.cpu_agreement.correlation,
                p.cpu_agreement.intervals
            ),
            None => "CPU not sampled".into(),
        };
        let wait = p
            .wait_s
            .map_or(String::new(), |w| format!(", run-queue wait {}", secs(w)));
        let _ = writeln!(o, "  busy {}, {}{}", secs(p.busy_s), cpu, wait);
        if let Some(c) = p.condition_index {
            let _ = writeln!(
                o,
                "  training: {} intervals, condition index of the type counts {}",
                p.train_intervals,
                if c >= 1e9 {
                    "∞".to_string()
                } else {
                    format!("{c:.1}")
                }
            );
        }
        let _ = writeln!(
            o,
            "  σ̂ {}, limit ±{}; {} calls to other processes while serving, {} spontaneous (not counted)",
            secs(p.sigma_s),
            secs(p.limit_s),
            p.calls,
            p.spontaneous_calls
        );
        if let Some(n) = &p.note {
            let _ = writeln!(o, "  note: {n}");
        }
    }
    // Processes left out: those that used sockets one by one, the others counted.
    let (socket_users, quiet): (Vec<_>, Vec<_>) =
        r.skipped.iter().partition(|s| s.why != "used no sockets");
    if !socket_users.is_empty() || !quiet.is_empty() {
        let _ = writeln!(o);
    }
    for s in &socket_users {
        let _ = writeln!(
            o,
            "left out: {} pid {} {}: {}",
            s.host, s.pid, s.process, s.why
        );
    }
    if !quiet.is_empty() {
        let _ = writeln!(
            o,
            "left out: {} processes that used no sockets",
            quiet.len()
        );
    }
    let alarms: Vec<(&ProcessDemand, &super::chart::Alarm)> = r
        .processes
        .iter()
        .flat_map(|p| p.alarms.iter().map(move |a| (p, a)))
        .collect();
    let _ = writeln!(o);
    let starved: Vec<(&ProcessDemand, &super::chart::Alarm)> = r
        .processes
        .iter()
        .flat_map(|p| p.starved.iter().map(move |a| (p, a)))
        .collect();
    if !starved.is_empty() {
        let _ = writeln!(
            o,
            "starved (busy beyond 3σ̂ on 3 intervals, same CPU per request, explained by waiting for a CPU: other processes took it; not a slowdown of the process):"
        );
        for (p, a) in &starved {
            let _ = writeln!(
                o,
                "  {:>9.1}  {:<28} residual {}, run-queue wait +{}",
                rel(r, a.t_unix_ns),
                format!("{}:{} {}", p.host, p.pid, p.process),
                secs(a.residual_s),
                secs(a.wait_excess_s.unwrap_or(0.0))
            );
        }
        let _ = writeln!(o);
    }
    if alarms.is_empty() {
        let _ = writeln!(o, "no alarms");
    } else {
        let _ = writeln!(
            o,
            "alarms (residual > 3σ̂ on 3 consecutive intervals: slower):"
        );
        let _ = writeln!(
            o,
            "  {:>9}  {:<28} {:>12} {:>12}  why (where CPU was sampled)",
            "t (s)", "process", "residual", "limit"
        );
        for (p, a) in alarms {
            let why = match a.kind.as_deref() {
                Some("cpu") => format!(
                    "more CPU per request (CPU +{})",
                    secs(a.cpu_residual_s.unwrap_or(0.0))
                ),
                Some("off-cpu") => "waited off the CPU (disk, lock, an untraced process)".into(),
                Some("starved-alone") => format!(
                    "starved of CPU while its peers on the host were not: CPU taken from it (run-queue wait +{})",
                    secs(a.wait_excess_s.unwrap_or(0.0))
                ),
                Some(k) => k.to_string(),
                None => String::new(),
            };
            let _ = writeln!(
                o,
                "  {:>9.1}  {:<28} {:>12} {:>12}  {}",
                rel(r, a.t_unix_ns),
                format!("{}:{} {}", p.host, p.pid, p.process),
                secs(a.residual_s),
                format!("±{}", secs(a.limit_s)),
                why
            );
        }
    }
    o
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const W: f64 = 720.0;
const H: f64 = 220.0;
const PAD: f64 = 48.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// A chart frame: maps (x seconds, y) to pixels.
struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Frame {
    fn x(&self, x: f64) -> f64 {
        PAD + (x - self.x0) / (self.x1 - self.x0).max(1e-12) * (W - 2.0 * PAD)
    }
    fn y(&self, y: f64) -> f64 {
        H - PAD + -(y - self.y0) / (self.y1 - self.y0).max(1e-300) * (H - 2.0 * PAD)
    }
    fn axes(&self, o: &mut String, ylabel: &str, scale: f64, unit: &str) {
        let _ = write!(
            o,
            r##"<line x1="{p}" y1="{b}" x2="{r}" y2="{b}" stroke="#444"/><line x1="{p}" y1="{t}" x2="{p}" y2="{b}" stroke="#444"/>"##,
            p = PAD,
            b = H - PAD,
            r = W - PAD,
            t = PAD
        );
        for k in 0..=4 {
            let v = self.y0 + (self.y1 - self.y0) * k as f64 / 4.0;
            let _ = write!(
                o,
                r#"<text x="{}" y="{:.1}" font-size="10" text-anchor="end">{:.3}</text>"#,
                PAD - 4.0,
                self.y(v) + 3.0,
                v * scale
            );
            let xv = self.x0 + (self.x1 - self.x0) * k as f64 / 4.0;
            let _ = write!(
                o,
                r#"<text x="{:.1}" y="{}" font-size="10" text-anchor="middle">{:.0}</text>"#,
                self.x(xv),
                H - PAD + 14.0,
                xv
            );
        }
        let _ = write!(
            o,
            r#"<text x="{}" y="{}" font-size="11">{} ({})</text><text x="{}" y="{}" font-size="11" text-anchor="end">time (s)</text>"#,
            PAD,
            PAD - 8.0,
            esc(ylabel),
            unit,
            W - PAD,
            H - 12.0
        );
    }
}

fn polyline(o: &mut String, f: &Frame, pts: &[(f64, f64)], color: &str, dash: bool, class: &str) {
    if pts.is_empty() {
        return;
    }
    let d: Vec<String> = pts
        .iter()
        .map(|&(x, y)| format!("{:.1},{:.1}", f.x(x), f.y(y)))
        .collect();
    let _ = write!(
        o,
        r#"<polyline class="{class}" fill="none" stroke="{color}" stroke-width="1.5"{} points="{}"/>"#,
        if dash {
            r#" stroke-dasharray="5,4""#
        } else {
            ""
        },
        d.join(" ")
    );
}

/// The HTML page.
pub fn html(r: &DemandReport) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<!DOCTYPE html><html><head><meta charset="utf-8"><title>Culprit — service demand</title>
<style>body{{font-family:sans-serif;margin:1.5em;color:#222}} table{{border-collapse:collapse}} td,th{{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}} td:first-child,th:first-child{{text-align:left}} .alarm{{color:#b00}} section{{margin-bottom:2em}}</style></head><body>
<h1>Service demand and residual control chart</h1>
<p>{} intervals of {} s; trained on the {}; estimator {:?}; services by {:?}.</p>"#,
        r.intervals,
        r.interval_s,
        esc(&r.train),
        r.estimator,
        r.services_mode
    );
    let total: usize = r.processes.iter().map(|p| p.alarms.len()).sum();
    let _ = write!(o, r#"<p id="alarm-count">{total} alarm(s)</p>"#);
    for p in &r.processes {
        process_html(&mut o, r, p);
    }
    if !r.skipped.is_empty() {
        let _ = write!(o, "<h2>Left out</h2><ul>");
        for s in &r.skipped {
            let _ = write!(
                o,
                "<li>{} pid {} {}: {}</li>",
                esc(&s.host),
                s.pid,
                esc(&s.process),
                esc(&s.why)
            );
        }
        let _ = write!(o, "</ul>");
    }
    o.push_str("</body></html>\n");
    o
}

fn process_html(o: &mut String, r: &DemandReport, p: &ProcessDemand) {
    let _ = write!(
        o,
        r#"<section class="process" data-pid="{}"><h2>{} pid {} <small>{}</small></h2><table class="services"><tr><th>service</th><th>requests</th><th>demand</th><th>95% CI ±</th><th>own busy</th></tr>"#,
        p.pid,
        esc(&p.host),
        p.pid,
        esc(&p.process)
    );
    for s in &p.services {
        let _ = write!(
            o,
            "<tr><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&s.id),
            match (&s.name, s.merged_requests) {
                (Some(n), Some(m)) => format!(
                    "<br><small>{} (with {m} requests of rarer signatures)</small>",
                    esc(n)
                ),
                (Some(n), None) => format!("<br><small>{}</small>", esc(n)),
                _ => String::new(),
            },
            s.requests,
            secs(s.demand_s),
            if s.ci95_s >= 1e6 {
                "∞".into()
            } else {
                secs(s.ci95_s)
            },
            secs(s.own_busy_s)
        );
    }
    let _ = write!(
        o,
        "</table><p>busy {}, CPU {}; σ̂ {}; {} alarm(s), {} starved{}</p>",
        secs(p.busy_s),
        p.cpu_s.map_or("not sampled".into(), secs),
        secs(p.sigma_s),
        p.alarms.len(),
        p.starved.len(),
        p.note
            .as_ref()
            .map_or(String::new(), |n| format!("; {}", esc(n)))
    );
    let xs: Vec<f64> = p
        .intervals
        .iter()
        .map(|iv| rel(r, iv.t_unix_ns) + r.interval_s)
        .collect();
    let (x0, x1) = (
        xs.first().copied().unwrap_or(0.0) - r.interval_s,
        xs.last().copied().unwrap_or(1.0),
    );
    // Chart 1: demand estimates over time.
    let ymax = p
        .intervals
        .iter()
        .filter_map(|iv| iv.demand_s.as_ref())
        .flatten()
        .chain(p.services.iter().map(|s| &s.demand_s))
        .fold(0.0f64, |m, &v| m.max(v))
        .max(1e-9)
        * 1.1;
    let f = Frame {
        x0,
        x1,
        y0: 0.0,
        y1: ymax,
    };
    let _ = write!(
        o,
        r#"<svg class="demand-chart" width="{W}" height="{H}" viewBox="0 0 {W} {H}">"#
    );
    f.axes(o, "demand per request", 1e3, "ms");
    for (k, s) in p.services.iter().enumerate() {
        let c = COLORS[k % COLORS.len()];
        let pts: Vec<(f64, f64)> = p
            .intervals
            .iter()
            .zip(&xs)
            .filter_map(|(iv, &x)| iv.demand_s.as_ref().map(|d| (x, d[k])))
            .collect();
        polyline(o, &f, &pts, c, false, "demand");
        polyline(
            o,
            &f,
            &[(x0, s.demand_s), (x1, s.demand_s)],
            c,
            true,
            "trained",
        );
        let _ = write!(
            o,
            r#"<text x="{}" y="{}" font-size="10" fill="{c}">{}</text>"#,
            W - PAD - 140.0,
            PAD + 12.0 * k as f64,
            esc(&s.id)
        );
    }
    o.push_str("</svg>");
    // Chart 2: residual with ±3σ̂, alarms marked.
    let rmax = p
        .intervals
        .iter()
        .filter_map(|iv| iv.residual_s)
        .fold(p.limit_s, |m, v| m.max(v.abs()))
        .max(1e-9)
        * 1.1;
    let f = Frame {
        x0,
        x1,
        y0: -rmax,
        y1: rmax,
    };
    let _ = write!(
        o,
        r#"<svg class="residual-chart" width="{W}" height="{H}" viewBox="0 0 {W} {H}">"#
    );
    f.axes(o, "residual", 1e3, "ms");
    for l in [p.limit_s, -p.limit_s] {
        polyline(o, &f, &[(x0, l), (x1, l)], "#b00", true, "limit");
    }
    polyline(o, &f, &[(x0, 0.0), (x1, 0.0)], "#999", false, "zero");
    let pts: Vec<(f64, f64)> = p
        .intervals
        .iter()
        .zip(&xs)
        .filter_map(|(iv, &x)| iv.residual_s.map(|v| (x, v)))
        .collect();
    polyline(o, &f, &pts, "#1f77b4", false, "residual");
    for a in &p.alarms {
        let x = rel(r, a.t_unix_ns);
        let _ = write!(
            o,
            r##"<circle class="alarm-mark" cx="{:.1}" cy="{:.1}" r="5" fill="#b00"><title>alarm at {:.1} s: residual {}, limit ±{}</title></circle>"##,
            f.x(x),
            f.y(a.residual_s.clamp(-rmax, rmax)),
            x,
            secs(a.residual_s),
            secs(a.limit_s)
        );
    }
    o.push_str("</svg>");
    if !p.alarms.is_empty() {
        let _ = write!(o, r#"<ul class="alarms">"#);
        for a in &p.alarms {
            let _ = write!(
                o,
                r#"<li class="alarm">t = {:.1} s: residual {} beyond ±{}</li>"#,
                rel(r, a.t_unix_ns),
                secs(a.residual_s),
                secs(a.limit_s)
            );
        }
        o.push_str("</ul>");
    }
    o.push_str("</section>");
}
