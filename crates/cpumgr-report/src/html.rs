//! Self-contained HTML reports: a results table and, per run, a Gantt chart of programs × time
//! (with start flags, as paper 000's Figures 5–7), CPUs × time (who owned each CPU), allocation
//! over time per program, and an animated replay of the scheduling decisions (paper 004 §4).
//! Inline SVG and a few lines of script: readable offline, no external asset. Names reach the page
//! escaped: as HTML text, and inside the replay's script as JSON that cannot close the element.

use std::fmt::Write;

use crate::fit::{self, Bar, Row, Scale};
use crate::timeline::{Lane, Ownership, Timeline};

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
/// Pixels of every chart's time axis.
const PLOT: f64 = WIDTH - LABEL - 10.0;
/// The most rows the programs × time and allocation charts draw (the last one summing the
/// programs beyond it).
const MAX_ROWS: usize = 40;

/// A distinct colour per program index (golden-angle hues).
pub fn colour(i: usize) -> String {
    format!("hsl({:.0},65%,52%)", (i as f64 * 137.508) % 360.0)
}

/// The colour of a programs chart's row: its program's, grey for the others summed.
fn row_colour(row: &Row) -> String {
    row.index.map_or_else(|| "#888".to_string(), colour)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// JSON text safe inside a `<script>` element: `<`, `>` and `&` become `\u` escapes, so that no
/// string in it can close the element (`</script>`) or open a comment (`<!--`), and so do U+2028
/// and U+2029, line terminators to older JavaScript. JSON has these characters only inside
/// strings, where the escapes stand for the same characters: the text parses to the same value.
fn script_json(v: &serde_json::Value) -> String {
    let text = v.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

fn x(t: u64, end: u64) -> f64 {
    LABEL + PLOT * t as f64 / end.max(1) as f64
}

fn axis(svg: &mut String, end: u64, y: f64) {
    let secs = end as f64 / 1e9;
    let step = [
        0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0,
        1000.0, 3600.0,
    ]
    .into_iter()
    .find(|s| secs / s <= 10.0)
    .unwrap_or(secs / 10.0);
    let mut t = 0.0;
    while t <= secs + 1e-9 {
        let px = x((t * 1e9) as u64, end);
        let label = (t * 1000.0).round() / 1000.0;
        let _ = write!(
            svg,
            r##"<line x1="{px:.1}" y1="0" x2="{px:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{px:.1}" y="{:.1}" font-size="10" text-anchor="middle">{label}s</text>"##,
            y + 12.0
        );
        t += step;
    }
}

/// What a Gantt bar of `lane` held, for its tooltip: one segment's CPUs, or the mean of merged ones.
fn held(lane: &Lane, bar: &Bar) -> String {
    match bar.segment.map(|k| &lane.segments[k]) {
        Some(s) if s.is_shared() => {
            format!("{} CPUs ({}) {:.0} % of the time, a repeating schedule", s.count, s.cpus, 100.0 * s.share)
        }
        Some(s) if s.cpus.is_empty() => format!("{} CPUs", s.count),
        Some(s) => format!("{} CPUs ({})", s.count, s.cpus),
        None => format!("{:.1} CPUs on average over {} stretches", bar.cpus(), bar.merged),
    }
}

/// The programs rows of one run with their bars, as the Gantt and allocation charts draw them.
struct Programs<'a> {
    rows: Vec<Row<'a>>,
    bars: Vec<Vec<Bar>>,
}

impl<'a> Programs<'a> {
    /// At most [`MAX_ROWS`] rows, each with at most two bars per pixel column of the time axis.
    fn new(rows: Vec<Row<'a>>, scale: Scale) -> Programs<'a> {
        let bars = rows.iter().map(|r| fit::bars(&r.lane.segments, scale.px)).collect();
        Programs { rows, bars }
    }

    /// Each row with its bars.
    fn iter(&self) -> impl Iterator<Item = (&Row<'a>, &[Bar])> {
        self.rows.iter().zip(self.bars.iter().map(Vec::as_slice))
    }

    /// What the charts leave out, said above them: nothing, or how many programs the last row sums.
    fn caption(&self) -> String {
        match self.rows.last() {
            Some(row) if row.index.is_none() => format!(
                "<p>The {} programs that held the most CPU time, in arrival order; the last row sums the {}.</p>",
                self.rows.len() - 1,
                esc(&row.lane.name)
            ),
            _ => String::new(),
        }
    }
}

fn gantt(t: &Timeline, programs: &Programs) -> String {
    let h = programs.rows.len() as f64 * ROW + 20.0;
    let max = programs
        .iter()
        .filter(|(row, _)| row.index.is_some())
        .flat_map(|(_, bars)| bars)
        .map(Bar::cpus)
        .fold(1.0, f64::max);
    let mut svg = format!(r#"<svg class="gantt" width="{WIDTH}" height="{h}" xmlns="http://www.w3.org/2000/svg">"#);
    axis(&mut svg, t.end, h - 20.0);
    for (i, (row, bars)) in programs.iter().enumerate() {
        let (lane, fill, y) = (&row.lane, row_colour(row), i as f64 * ROW);
        let _ = write!(svg, r#"<text x="2" y="{:.1}" font-size="11">{}</text>"#, y + 12.0, esc(&label(lane)));
        let _ = write!(
            svg,
            r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#999"/>"##,
            x(lane.arrival, t.end),
            y + ROW / 2.0,
            x(lane.exit, t.end),
            y + ROW / 2.0
        );
        for b in bars.iter().filter(|b| b.cpus() > 0.0) {
            let opacity = (0.35 + 0.65 * b.cpus() / max).min(1.0);
            let _ = write!(
                svg,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{fill}" fill-opacity="{opacity:.2}"><title>{} {}</title></rect>"#,
                x(b.from, t.end),
                y + 2.0,
                (x(b.to, t.end) - x(b.from, t.end)).max(0.5),
                ROW - 4.0,
                esc(&lane.name),
                held(lane, b)
            );
        }
        if let Some(start) = lane.first_run().filter(|_| row.index.is_some()) {
            let px = x(start, t.end);
            let _ =
                write!(svg, r#"<path d="M{px:.1},{:.1} v-10 l6,3 l-6,3" fill="black" stroke="black"/>"#, y + ROW - 2.0);
        }
    }
    svg.push_str("</svg>");
    svg
}

/// Who owned each CPU over time, a row per CPU with at most one bar per pixel column.
fn cpu_chart(t: &Timeline, owners: &[(u32, Ownership)], scale: Scale) -> String {
    let h = owners.len() as f64 * ROW + 20.0;
    let mut svg = format!(r#"<svg class="cpus" width="{WIDTH}" height="{h}" xmlns="http://www.w3.org/2000/svg">"#);
    axis(&mut svg, t.end, h - 20.0);
    for (row, (cpu, spans)) in owners.iter().enumerate() {
        let y = row as f64 * ROW;
        let _ = write!(svg, r#"<text x="2" y="{:.1}" font-size="11">CPU {cpu}</text>"#, y + 12.0);
        for (from, to, lane) in fit::owner_columns(spans, scale) {
            let _ = write!(
                svg,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{}"><title>{}</title></rect>"#,
                x(from, t.end),
                y + 1.0,
                (x(to, t.end) - x(from, t.end)).max(0.5),
                ROW - 2.0,
                colour(lane),
                esc(&t.lanes[lane].name)
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

fn allocation_chart(t: &Timeline, programs: &Programs) -> String {
    let h = 160.0;
    let max = t.cpus.len().max(1) as f64;
    let mut svg =
        format!(r#"<svg class="alloc" width="{WIDTH}" height="{}" xmlns="http://www.w3.org/2000/svg">"#, h + 20.0);
    axis(&mut svg, t.end, h);
    let _ = write!(
        svg,
        r#"<text x="2" y="12" font-size="11">{max} CPUs</text><text x="2" y="{h}" font-size="11">0</text>"#
    );
    for (row, bars) in programs.iter() {
        let mut d = String::new();
        for b in bars {
            let y = h - h * b.cpus().min(max) / max;
            let _ = write!(
                d,
                "{}{:.1},{y:.1} L{:.1},{y:.1} ",
                if d.is_empty() { "M" } else { "L" },
                x(b.from, t.end),
                x(b.to, t.end)
            );
        }
        if !d.is_empty() {
            let _ = write!(
                svg,
                r#"<path d="{d}" fill="none" stroke="{}" stroke-width="1.5"><title>{}</title></path>"#,
                row_colour(row),
                esc(&row.lane.name)
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

/// The replay's data: per frame (at most one per pixel column), each CPU's owner as an index into
/// the names and colours of the programs that own a CPU in some frame, or -1 when idle.
fn replay_data(t: &Timeline, owners: &[(u32, Ownership)], scale: Scale) -> String {
    let cpus: Vec<u32> = t.cpus.iter().collect();
    let times = fit::frame_times(owners, scale);
    let frames = fit::owners_at(owners, &times);
    let mut shown: Vec<usize> = frames.iter().flatten().flatten().copied().collect();
    shown.sort_unstable();
    shown.dedup();
    let frames: Vec<(u64, Vec<i64>)> = times
        .iter()
        .zip(frames)
        .map(|(&at, row)| {
            (at, row.iter().map(|o| o.map_or(-1, |lane| shown.binary_search(&lane).map_or(-1, |k| k as i64))).collect())
        })
        .collect();
    let names: Vec<&str> = shown.iter().map(|&i| t.lanes[i].name.as_str()).collect();
    let colours: Vec<String> = shown.iter().map(|&i| colour(i)).collect();
    script_json(&serde_json::json!({"cpus": cpus, "names": names, "colours": colours, "frames": frames}))
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

/// Renders the whole page. Its size is bounded by its pictures, not by the length of the traces:
/// per run, the charts' time axes are `PLOT` pixel columns wide and hold at most `MAX_ROWS`
/// program rows of at most two bars per column each, one row of at most one bar per column per
/// CPU, and a replay of at most one frame per column (see `fit`). A run whose changes are all a
/// pixel apart or more, and that has no more programs than rows, is drawn as its trace says.
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
        let _ = write!(
            h,
            r#"<section id="{id}"><h2>{}</h2><p>policy {} on CPUs {}, {} programs, {:.3} s</p>"#,
            esc(label),
            esc(&t.policy),
            t.cpus,
            t.lanes.len(),
            t.end as f64 / 1e9
        );
        let scale = Scale::new(t.end, PLOT as usize);
        let programs = Programs::new(fit::rows(t, MAX_ROWS), scale);
        let owners = t.cpu_owners(crate::timeline::CHART_TURNS);
        let _ = write!(
            h,
            "<h3>Programs × time</h3>{}{}<h3>CPUs × time</h3>{}<h3>Allocation over time</h3>{}",
            programs.caption(),
            gantt(t, &programs),
            cpu_chart(t, &owners, scale),
            allocation_chart(t, &programs)
        );
        let _ = write!(
            h,
            r#"<h3>Replay</h3><button id="{id}-play">play / pause</button> <input type="range" id="{id}-slider" min="0" value="0" style="width:400px"> <span id="{id}-time"></span><div class="grid" id="{id}-grid"></div><script>replay("{id}", {});</script></section>"#,
            replay_data(t, &owners, scale)
        );
    }
    h.push_str("</body></html>\n");
    h
}

/// A lane's name, with how its team ran when the trace says (`stencil · folding 0.0 s, rigid
/// 1.3 s`).
fn label(lane: &crate::timeline::Lane) -> String {
    if lane.teams.is_empty() {
        return lane.name.clone();
    }
    let teams: Vec<String> = lane.teams.iter().map(|(t, m)| format!("{m} {:.1} s", *t as f64 / 1e9)).collect();
    format!("{} · {}", lane.name, teams.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::tests::{moving, sample};
    use crate::timeline::CHART_TURNS;
    use cpumgr_core::trace::{Event, EventKind};
    use cpumgr_core::{CpuSet, ProgramId};

    #[test]
    fn renders_every_chart_with_content() {
        let t = Timeline::from_events(&sample());
        let r = Report {
            title: "demo <1>".into(),
            notes: vec!["2 CPUs".into()],
            table: Table {
                columns: vec!["config".into(), "makespan".into()],
                rows: vec![vec!["equipartition".into(), "0.4".into()]],
            },
            runs: vec![("equipartition".into(), t)],
        };
        let html = render(&r);
        assert!(html.contains("demo &lt;1&gt;"));
        assert!(html.contains("<td>0.4</td>"));
        assert_eq!(html.matches("<svg class=\"gantt\"").count(), 1);
        assert_eq!(html.matches("<title>a 2 CPUs (0-1)</title>").count(), 1, "a's first stretch is drawn");
        assert!(html.matches("<rect").count() >= 8, "4 Gantt bars and 5 CPU spans");
        assert!(html.contains(r#""frames":[[0,[0,0]],[100,[0,1]],[300,[1,1]],[400,[-1,-1]]]"#), "{html}");
    }

    #[test]
    fn the_cpu_chart_and_the_replay_show_each_cpu_s_turns_in_a_repeated_span() {
        // `a` and `b` each held two CPUs all the time, moving between sets every quantum: over
        // the skipped span 200..1 200 every CPU is theirs in turns, not `a`'s throughout.
        let t = Timeline::from_events(&moving());
        let scale = Scale::new(t.end, PLOT as usize);
        let owners = t.cpu_owners(CHART_TURNS);
        let chart = cpu_chart(&t, &owners, scale);
        for cpu in 0..4 {
            let row = chart.split(&format!(">CPU {cpu}</text>")).nth(1).unwrap().split(">CPU ").next().unwrap();
            for name in ["a", "b"] {
                let drawn = row.matches(&format!("<title>{name}</title>")).count();
                assert!(drawn > CHART_TURNS as usize, "CPU {cpu}: {drawn} stretches of {name}, a turn each: {row}");
            }
        }
        let data: serde_json::Value = serde_json::from_str(&replay_data(&t, &owners, scale)).unwrap();
        assert_eq!(data["names"], serde_json::json!(["a", "b"]));
        let frames = data["frames"].as_array().unwrap();
        let within: Vec<&serde_json::Value> =
            frames.iter().filter(|f| (200..1_200).contains(&f[0].as_u64().unwrap())).collect();
        for cpu in 0..4 {
            let shown: std::collections::BTreeSet<i64> = within.iter().map(|f| f[1][cpu].as_i64().unwrap()).collect();
            assert_eq!(shown, [0, 1].into(), "CPU {cpu} shows both programs' turns in the replay");
        }
    }

    /// A report of one run of `t`.
    fn report_of(t: Timeline) -> Report {
        Report { title: "r".into(), runs: vec![("run".into(), t)], ..Report::default() }
    }

    #[test]
    fn a_program_name_cannot_close_the_replay_script_and_the_data_still_parses() {
        let name = "</script><script>alert(4)</script> & <!-- \u{2028}\u{2029}";
        let mut t = Timeline::from_events(&sample());
        t.lanes[0].name = name.into();
        let html = render(&report_of(t));
        assert!(!html.contains("</script><script>"), "the name would end the script element");
        let blob = html.split(r#"replay("run0", "#).nth(1).unwrap().split(");</script>").next().unwrap();
        assert!(!blob.contains(['<', '>', '&', '\u{2028}', '\u{2029}']), "escaped in the script: {blob}");
        let data: serde_json::Value = serde_json::from_str(blob).unwrap();
        assert_eq!(data["names"][0], name, "the name round-trips: {blob}");
    }

    /// 20 000 programs on 64 CPUs, 10 allocation changes each (200 000 events), overlapping.
    fn many_programs() -> Vec<Event> {
        let ev = |t: u64, p: u64, kind: EventKind| Event { t, program: Some(ProgramId(p)), kind };
        let start =
            EventKind::Start { source: "sim".into(), cpus: CpuSet::first_n(64), policy: "gang".into(), quantum: 100 };
        let mut events = vec![Event { t: 0, program: None, kind: start }];
        for p in 0..20_000u64 {
            let t0 = p * 50_000;
            events.push(ev(t0, p, EventKind::Arrive { name: format!("job-{p}"), request: 4 }));
            for k in 0..10 {
                let (count, first) = (1 + (p + k) as u32 % 4, (p * 4 % 64) as u32);
                let cpus = CpuSet::from_cpus(first..first + count);
                events.push(ev(t0 + k * 100_000, p, EventKind::Allocate { count, cpus, running: k % 3 != 2 }));
            }
            events.push(ev(t0 + 1_000_000, p, EventKind::Exit { status: Some(0) }));
        }
        events.sort_by_key(|e| e.t);
        events
    }

    #[test]
    fn a_report_of_a_long_trace_is_bounded_by_its_pictures() {
        let html = render(&report_of(Timeline::from_events(&many_programs())));
        let gantt = html.split(r#"<svg class="gantt""#).nth(1).unwrap().split("</svg>").next().unwrap();
        assert_eq!(gantt.matches("font-size=\"11\"").count(), MAX_ROWS, "a label per row");
        assert!(gantt.contains(&format!("{} other programs", 20_000 - MAX_ROWS + 1)));
        assert!(html.contains("the last row sums the"), "the chart says it sums programs");
        let bound = (2 * MAX_ROWS + 64) * PLOT as usize;
        assert!(html.matches("<rect").count() <= bound, "two bars a pixel per program row, one per CPU row");
        assert!(html.len() < 5_000_000, "{} bytes", html.len());
    }
}
