//! Self-contained HTML reports: a results table and, per run, a Gantt chart of programs × time
//! (with start flags, as paper 000's Figures 5–7), CPUs × time (who owned each CPU), allocation
//! over time per program, and an animated replay of the scheduling decisions (paper 004 §4).
//! Inline SVG and a few lines of script: readable offline, no external asset.

use std::fmt::Write;

use crate::timeline::{Lane, Timeline};

/// A table of results: the header and the rows, already formatted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    /// Column names.
    pub columns: Vec<String>,
    /// Rows of cells.
    pub rows: Vec<Vec<String>>,
}

/// What a report shows.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Page title.
    pub title: String,
    /// Lines of context under the title (machine, workload, command).
    pub notes: Vec<String>,
    /// The comparison table.
    pub table: Table,
    /// One timeline per configuration, with its label.
    pub runs: Vec<(String, Timeline)>,
}

const WIDTH: f64 = 960.0;
const LABEL: f64 = 150.0;
const ROW: f64 = 16.0;

/// A distinct colour per program index (golden-angle hues).
pub fn colour(i: usize) -> String {
    format!("hsl({:.0},65%,52%)", (i as f64 * 137.508) % 360.0)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn x(t: u64, end: u64) -> f64 {
    LABEL + (WIDTH - LABEL - 10.0) * t as f64 / end.max(1) as f64
}

fn axis(svg: &mut String, end: u64, y: f64) {
    let secs = end as f64 / 1e9;
    let step = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 3600.0]
        .into_iter()
        .find(|s| secs / s <= 10.0)
        .unwrap_or(secs / 10.0);
    let mut t = 0.0;
    while t <= secs + 1e-9 {
        let px = x((t * 1e9) as u64, end);
        let label = (t * 1000.0).round() / 1000.0;
        let _ = write!(svg, r##"<line x1="{px:.1}" y1="0" x2="{px:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{px:.1}" y="{:.1}" font-size="10" text-anchor="middle">{label}s</text>"##, y + 12.0);
        t += step;
    }
}

fn gantt(t: &Timeline) -> String {
    let h = t.lanes.len() as f64 * ROW + 20.0;
    let max = t.lanes.iter().flat_map(|l| &l.segments).map(|s| s.count).max().unwrap_or(1).max(1);
    let mut svg = format!(r#"<svg class="gantt" width="{WIDTH}" height="{h}" xmlns="http://www.w3.org/2000/svg">"#);
    axis(&mut svg, t.end, h - 20.0);
    for (i, lane) in t.lanes.iter().enumerate() {
        let y = i as f64 * ROW;
        let _ = write!(svg, r#"<text x="2" y="{:.1}" font-size="11">{}</text>"#, y + 12.0, esc(&lane.name));
        let _ = write!(svg, r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#999"/>"##, x(lane.arrival, t.end), y + ROW / 2.0, x(lane.exit, t.end), y + ROW / 2.0);
        for s in lane.segments.iter().filter(|s| s.running && s.count > 0) {
            let opacity = 0.35 + 0.65 * s.count as f64 / max as f64;
            let _ = write!(
                svg,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{}" fill-opacity="{opacity:.2}"><title>{} {} CPUs ({})</title></rect>"#,
                x(s.from, t.end), y + 2.0, (x(s.to, t.end) - x(s.from, t.end)).max(0.5), ROW - 4.0, colour(i), esc(&lane.name), s.count, s.cpus
            );
        }
        if let Some(start) = lane.first_run() {
            let px = x(start, t.end);
            let _ = write!(svg, r#"<path d="M{px:.1},{:.1} v-10 l6,3 l-6,3" fill="black" stroke="black"/>"#, y + ROW - 2.0);
        }
    }
    svg.push_str("</svg>");
    svg
}

fn cpu_chart(t: &Timeline) -> String {
    let owners = t.cpu_owners();
    let h = owners.len() as f64 * ROW + 20.0;
    let mut svg = format!(r#"<svg class="cpus" width="{WIDTH}" height="{h}" xmlns="http://www.w3.org/2000/svg">"#);
    axis(&mut svg, t.end, h - 20.0);
    for (row, (cpu, spans)) in owners.iter().enumerate() {
        let y = row as f64 * ROW;
        let _ = write!(svg, r#"<text x="2" y="{:.1}" font-size="11">CPU {cpu}</text>"#, y + 12.0);
        for &(from, to, lane) in spans {
            let _ = write!(
                svg,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{}"><title>{}</title></rect>"#,
                x(from, t.end), y + 1.0, (x(to, t.end) - x(from, t.end)).max(0.5), ROW - 2.0, colour(lane), esc(&t.lanes[lane].name)
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

fn allocation_chart(t: &Timeline) -> String {
    let h = 160.0;
    let max = t.cpus.len().max(1) as f64;
    let mut svg = format!(r#"<svg class="alloc" width="{WIDTH}" height="{}" xmlns="http://www.w3.org/2000/svg">"#, h + 20.0);
    axis(&mut svg, t.end, h);
    let _ = write!(svg, r#"<text x="2" y="12" font-size="11">{max} CPUs</text><text x="2" y="{h}" font-size="11">0</text>"#);
    for (i, lane) in t.lanes.iter().enumerate() {
        let mut d = String::new();
        for s in &lane.segments {
            let c = if s.running { s.count as f64 } else { 0.0 };
            let y = h - h * c.min(max) / max;
            let _ = write!(d, "{}{:.1},{y:.1} L{:.1},{y:.1} ", if d.is_empty() { "M" } else { "L" }, x(s.from, t.end), x(s.to, t.end));
        }
        if !d.is_empty() {
            let _ = write!(svg, r#"<path d="{d}" fill="none" stroke="{}" stroke-width="1.5"><title>{}</title></path>"#, colour(i), esc(&lane.name));
        }
    }
    svg.push_str("</svg>");
    svg
}

/// The replay's data: per change point, each CPU's owner (lane index or -1).
fn replay_data(t: &Timeline) -> String {
    let cpus: Vec<u32> = t.cpus.iter().collect();
    let mut times: Vec<u64> = t.lanes.iter().flat_map(|l| l.segments.iter().map(|s| s.from)).collect();
    times.sort_unstable();
    times.dedup();
    let owners = t.cpu_owners();
    let frames: Vec<(u64, Vec<i64>)> = times
        .iter()
        .map(|&at| {
            let row = owners
                .iter()
                .map(|(_, spans)| spans.iter().find(|(f, to, _)| *f <= at && at < *to).map_or(-1, |s| s.2 as i64))
                .collect();
            (at, row)
        })
        .collect();
    let names: Vec<&str> = t.lanes.iter().map(|l: &Lane| l.name.as_str()).collect();
    let colours: Vec<String> = (0..t.lanes.len()).map(colour).collect();
    serde_json::json!({"cpus": cpus, "names": names, "colours": colours, "frames": frames}).to_string()
}

const SCRIPT: &str = r#"
function replay(id, data) {
  const grid = document.getElementById(id + '-grid'), label = document.getElementById(id + '-time');
  const slider = document.getElementById(id + '-slider');
  slider.max = Math.max(0, data.frames.length - 1);
  grid.innerHTML = data.cpus.map(c => '<div class="cpu" title="CPU ' + c + '">' + c + '</div>').join('');
  const cells = grid.children;
  function show(k) {
    const f = data.frames[k]; if (!f) return;
    label.textContent = (f[0] / 1e9).toFixed(3) + ' s';
    f[1].forEach((o, i) => { cells[i].style.background = o < 0 ? '#eee' : data.colours[o];
                             cells[i].title = 'CPU ' + data.cpus[i] + ': ' + (o < 0 ? 'idle' : data.names[o]); });
  }
  slider.oninput = () => show(+slider.value);
  let timer = null;
  document.getElementById(id + '-play').onclick = () => {
    if (timer) { clearInterval(timer); timer = null; return; }
    timer = setInterval(() => { slider.value = (+slider.value + 1) % data.frames.length; show(+slider.value); }, 120);
  };
  show(0);
}
"#;

/// Renders the whole page.
pub fn render(r: &Report) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        r#"<!DOCTYPE html><html><head><meta charset="utf-8"><title>{}</title><style>
body{{font-family:sans-serif;margin:20px;color:#222}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}} th{{background:#f4f4f4}}
td:first-child{{text-align:left}} .grid{{display:flex;flex-wrap:wrap;gap:2px;max-width:{WIDTH}px}}
.cpu{{width:28px;height:20px;font-size:10px;text-align:center;line-height:20px;border-radius:3px}}
h2{{margin-top:36px}} svg{{display:block;margin:6px 0}}
</style><script>{SCRIPT}</script></head><body><h1>{}</h1>"#,
        esc(&r.title),
        esc(&r.title)
    );
    for n in &r.notes {
        let _ = write!(h, "<p>{}</p>", esc(n));
    }
    if !r.table.columns.is_empty() {
        h.push_str(r#"<table id="results"><tr>"#);
        for c in &r.table.columns {
            let _ = write!(h, "<th>{}</th>", esc(c));
        }
        h.push_str("</tr>");
        for row in &r.table.rows {
            h.push_str("<tr>");
            for c in row {
                let _ = write!(h, "<td>{}</td>", esc(c));
            }
            h.push_str("</tr>");
        }
        h.push_str("</table>");
    }
    for (k, (label, t)) in r.runs.iter().enumerate() {
        let id = format!("run{k}");
        let _ = write!(h, r#"<section id="{id}"><h2>{}</h2><p>policy {} on CPUs {}, {} programs, {:.3} s</p>"#, esc(label), esc(&t.policy), t.cpus, t.lanes.len(), t.end as f64 / 1e9);
        let _ = write!(h, "<h3>Programs × time</h3>{}<h3>CPUs × time</h3>{}<h3>Allocation over time</h3>{}", gantt(t), cpu_chart(t), allocation_chart(t));
        let _ = write!(
            h,
            r#"<h3>Replay</h3><button id="{id}-play">play / pause</button> <input type="range" id="{id}-slider" min="0" value="0" style="width:400px"> <span id="{id}-time"></span><div class="grid" id="{id}-grid"></div><script>replay("{id}", {});</script></section>"#,
            replay_data(t)
        );
    }
    h.push_str("</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::tests::sample;

    #[test]
    fn renders_every_chart_with_content() {
        let t = Timeline::from_events(&sample());
        let r = Report {
            title: "demo <1>".into(),
            notes: vec!["2 CPUs".into()],
            table: Table { columns: vec!["config".into(), "makespan".into()], rows: vec![vec!["equipartition".into(), "0.4".into()]] },
            runs: vec![("equipartition".into(), t)],
        };
        let html = render(&r);
        assert!(html.contains("demo &lt;1&gt;"));
        assert!(html.contains("<td>0.4</td>"));
        assert_eq!(html.matches("<svg class=\"gantt\"").count(), 1);
        assert_eq!(html.matches("<title>a 2 CPUs (0-1)</title>").count(), 1, "a's first stretch is drawn");
        assert!(html.matches("<rect").count() >= 8, "4 Gantt bars and 5 CPU spans");
        assert!(html.contains(r#""frames":[[0,[0,0]],[100,[0,1]],[300,[1,1]]]"#), "{}", replay_data(&r.runs[0].1));
    }
}
