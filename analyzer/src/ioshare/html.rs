//! The `--html` page of `culprit ioshare`: the server's load and each process's β over
//! time as inline SVG (no script, no network), one chart per process with the truth where
//! traces were given.

use super::report::{IoShareReport, TimeSeries};
use std::fmt::Write;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const W: f64 = 720.0;
const H: f64 = 160.0;
const COLORS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#7f7f7f"];

fn path(series: &TimeSeries, t0: u64, t1: u64, ymax: f64) -> String {
    let span = (t1.saturating_sub(t0)).max(1) as f64;
    let mut d = String::new();
    for (i, (t, v)) in series.iter().enumerate() {
        let x = (t.saturating_sub(t0)) as f64 / span * W;
        let y = H - (v / ymax).clamp(0.0, 1.05) * H;
        let _ = write!(d, "{}{:.1},{:.1} ", if i == 0 { 'M' } else { 'L' }, x, y);
    }
    d
}

/// What the regression found of one share's course, drawn under its lines: change points
/// (`[t_unix_ns]`) and drifting segments (`[from, to]`).
#[derive(Clone, Copy, Default)]
struct Course<'a> {
    marks: &'a [u64],
    bands: &'a [[u64; 2]],
}

fn chart(
    title: &str,
    class: &str,
    lines: &[(&str, &TimeSeries)],
    (t0, t1): (u64, u64),
    (ymax, ylabel): (f64, &str),
    Course { marks, bands }: Course,
) -> String {
    let mut s = format!(
        "<section class=\"{class}\"><h3>{}</h3><svg viewBox=\"-50 -10 {} {}\" width=\"{}\" height=\"{}\" role=\"img\">",
        esc(title),
        W + 60.0,
        H + 30.0,
        W + 60.0,
        H + 30.0
    );
    let _ = write!(
        s,
        "<rect x=\"0\" y=\"0\" width=\"{W}\" height=\"{H}\" fill=\"none\" stroke=\"#ccc\"/><text x=\"-45\" y=\"10\" font-size=\"10\">{}</text><text x=\"-45\" y=\"{H}\" font-size=\"10\">0</text><text x=\"{}\" y=\"{}\" font-size=\"10\">{:.0} s</text>",
        esc(ylabel),
        W - 30.0,
        H + 15.0,
        (t1.saturating_sub(t0)) as f64 / 1e9
    );
    // Segments across which the regression found the share to drift: shaded bands;
    // change points found by the regression: dashed vertical lines.
    let span = (t1.saturating_sub(t0)).max(1) as f64;
    for &[a, b] in bands {
        let (xa, xb) = (
            (a.saturating_sub(t0)) as f64 / span * W,
            (b.saturating_sub(t0)) as f64 / span * W,
        );
        let _ = write!(
            s,
            "<rect class=\"drift\" x=\"{xa:.1}\" y=\"0\" width=\"{:.1}\" height=\"{H}\" fill=\"#eee\"/>",
            (xb - xa).max(0.5)
        );
    }
    for &m in marks {
        let x = (m.saturating_sub(t0)) as f64 / span * W;
        let _ = write!(
            s,
            "<line class=\"change\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"0\" y2=\"{H}\" stroke=\"#999\" stroke-dasharray=\"3,3\"/>"
        );
    }
    for (i, (name, ser)) in lines.iter().enumerate() {
        let _ = write!(
            s,
            "<path class=\"line\" data-name=\"{}\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>",
            esc(name),
            path(ser, t0, t1, ymax),
            COLORS[i % COLORS.len()]
        );
    }
    s.push_str("</svg><p class=\"legend\">");
    for (i, (name, _)) in lines.iter().enumerate() {
        let _ = write!(
            s,
            "<span style=\"color:{}\">■ {}</span> ",
            COLORS[i % COLORS.len()],
            esc(name)
        );
    }
    if !marks.is_empty() {
        s.push_str("<span style=\"color:#999\">┆ change points found</span> ");
    }
    if !bands.is_empty() {
        s.push_str("<span style=\"color:#bbb\">▒ share drifting</span>");
    }
    s.push_str("</p></section>");
    s
}

/// Renders the report as a self-contained HTML page.
pub fn render(r: &IoShareReport) -> String {
    let t0 = r.server.load.first().map_or(0, |l| l.0);
    let t1 = r.server.load.last().map_or(1, |l| l.0);
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>ioshare: {}</title><style>body{{font:14px sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}}.warn{{color:#a00}}</style></head><body><h1>Which processes load the server</h1><p>{} — server <b>{}</b> ({} processes), {:.1} MB over {} intervals of {:.3} s; metric {:?}; sampling jitter p50 {:.1} µs, p99 {:.1} µs.</p>",
        esc(&r.file),
        esc(&r.file),
        esc(&r.server.names.join(", ")),
        r.server.pids.len(),
        r.server.total_bytes / 1e6,
        r.server.load.len(),
        r.step_ns as f64 / 1e9,
        r.metric,
        r.jitter.p50_ns as f64 / 1e3,
        r.jitter.p99_ns as f64 / 1e3,
    );
    o.push_str("<table id=\"shares\"><tr><th>pid</th><th>process</th><th>MB</th>");
    let names: Vec<String> = r
        .processes
        .first()
        .map(|p| p.estimators.keys().cloned().collect())
        .unwrap_or_default();
    for n in &names {
        let _ = write!(o, "<th>{}</th>", esc(n));
    }
    o.push_str("<th>truth</th></tr>");
    let pct = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{:.1}%", v * 100.0));
    for p in &r.processes {
        let _ = write!(
            o,
            "<tr class=\"process\" data-pid=\"{}\"><td>{}</td><td style=\"text-align:left\">{}</td><td>{:.1}</td>",
            p.pid,
            p.pid,
            esc(&p.exe),
            p.total_bytes / 1e6
        );
        for n in &names {
            let _ = write!(o, "<td>{}</td>", pct(p.estimators[n].overall));
        }
        let _ = write!(o, "<td>{}</td></tr>", pct(p.truth_overall));
    }
    o.push_str("</table>");
    for (k, a) in &r.accuracy {
        let _ = write!(
            o,
            "<p class=\"accuracy\">{}: mean error per interval {:.1} points (worst process {:.1}); per window {} points</p>",
            esc(k),
            a.mean_mae_points,
            a.max_mae_points,
            a.mean_window_points.map_or("–".into(), |v| format!("{v:.1}"))
        );
    }
    for c in &r.collinearity {
        let _ = write!(
            o,
            "<p class=\"warn collinear\">Processes {:?} move together ({:.1}–{:.1} s, condition number {:.0}): their individual shares are unreliable.</p>",
            c.pids,
            c.from_ns.saturating_sub(t0) as f64 / 1e9,
            c.to_ns.saturating_sub(t0) as f64 / 1e9,
            c.condition
        );
    }
    for w in &r.warnings {
        let _ = write!(o, "<p class=\"warn\">{}</p>", esc(w));
    }
    let ymax = r.server.load.iter().map(|l| l.1).fold(1.0, f64::max);
    o.push_str(&chart(
        "Server load and residual (bytes per interval)",
        "server",
        &[("server", &r.server.load), ("residual", &r.residual)],
        (t0, t1),
        (ymax, &format!("{:.1} MB", ymax / 1e6)),
        Course::default(),
    ));
    for p in &r.processes {
        let mut lines: Vec<(&str, &TimeSeries)> = p
            .estimators
            .iter()
            .filter(|(k, _)| k.as_str() != "least_squares")
            .map(|(k, e)| (k.as_str(), &e.beta))
            .collect();
        if let Some(t) = &p.truth {
            lines.push(("truth", t));
        }
        o.push_str(&chart(
            &format!("β of {} (pid {})", p.exe, p.pid),
            "beta",
            &lines,
            (t0, t1),
            (1.0, "β=1"),
            Course {
                marks: &p.change_points,
                bands: &p.drifting,
            },
        ));
    }
    o.push_str("</body></html>\n");
    o
}
