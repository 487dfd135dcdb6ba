//! `cpumgr report` and `cpumgr trace export` on a trace file, end to end through the binary.

use std::process::Command;

const TRACE: &str = r#"{"t":0,"kind":"start","source":"sim","cpus":"0-1","policy":"gang","quantum":100000000}
{"t":0,"program":1,"kind":"arrive","name":"a","request":2}
{"t":0,"program":1,"kind":"allocate","count":2,"cpus":"0-1","running":true}
{"t":0,"program":2,"kind":"arrive","name":"b","request":2}
{"t":0,"program":2,"kind":"allocate","count":2,"cpus":"","running":false}
{"t":100000000,"program":1,"kind":"allocate","count":2,"cpus":"0-1","running":false}
{"t":100000000,"program":2,"kind":"allocate","count":2,"cpus":"0-1","running":true}
{"t":200000000,"program":1,"kind":"exit","status":0}
{"t":200000000,"program":2,"kind":"exit","status":0}
"#;

fn cpumgr() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cpumgr"))
}

#[test]
fn report_and_exports_from_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("run.trace");
    std::fs::write(&trace, TRACE).unwrap();
    let html = dir.path().join("r.html");
    let st = cpumgr().arg("report").arg(&trace).arg("-o").arg(&html).status().unwrap();
    assert!(st.success());
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("<svg class=\"gantt\"").count(), 1);
    assert!(page.contains("<title>b 2 CPUs (0-1)</title>"), "b's stretch is drawn");

    let json = dir.path().join("p.json");
    assert!(cpumgr()
        .args(["trace", "export", "--format", "perfetto"])
        .arg(&trace)
        .arg(&json)
        .status()
        .unwrap()
        .success());
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(v["traceEvents"].as_array().unwrap().iter().any(|e| e["ph"] == "X" && e["name"] == "run"));

    let base = dir.path().join("p");
    assert!(cpumgr()
        .args(["trace", "export", "--format", "paraver"])
        .arg(&trace)
        .arg(&base)
        .status()
        .unwrap()
        .success());
    for ext in ["prv", "pcf", "row"] {
        assert!(base.with_extension(ext).exists(), "{ext} written");
    }
}

#[test]
fn a_bad_trace_line_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("bad.trace");
    std::fs::write(&trace, format!("{}\n{{\"t\":\"soon\"}}\n", TRACE.lines().next().unwrap())).unwrap();
    let out = cpumgr().arg("report").arg(&trace).arg("-o").arg(dir.path().join("x.html")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.trace:2:"), "{err}");
}

/// Headless Chromium: `$CPUMGR_CHROMIUM`, else the first of the usual names on `PATH` (the tests
/// that call this are ignored where neither is there; CI's `.ci/run` installs it).
fn chromium() -> std::path::PathBuf {
    let named = std::env::var_os("CPUMGR_CHROMIUM").filter(|p| !p.is_empty()).map(std::path::PathBuf::from);
    let on_path = || {
        let path = std::env::var_os("PATH").unwrap_or_default();
        ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
            .iter()
            .flat_map(|n| std::env::split_paths(&path).map(move |d| d.join(n)))
            .find(|p| p.is_file())
    };
    named.or_else(on_path).expect(
        "headless Chromium is needed to check that the HTML report renders: `apt-get install chromium` \
         (CI's .ci/run installs it) or set CPUMGR_CHROMIUM to its path",
    )
}

/// Runs headless Chromium on `page` with `what` (`--dump-dom` or `--screenshot=FILE`); returns
/// its stdout.
fn chromium_on(page: &std::path::Path, what: &str, profile: &std::path::Path) -> String {
    let out = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1200,2000"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(what)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium starts");
    assert!(out.status.success(), "chromium {what} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The hue (degrees) of a clearly coloured pixel, `None` for white, grey and black (text, axes,
/// table borders): only the charts' job colours are saturated.
fn hue(p: &[u8]) -> Option<u32> {
    let (r, g, b) = (p[0] as f64, p[1] as f64, p[2] as f64);
    let (max, min) = (r.max(g).max(b), r.min(g).min(b));
    if max - min < 60.0 {
        return None;
    }
    let d = max - min;
    let h = if max == r {
        60.0 * (((g - b) / d) % 6.0)
    } else if max == g {
        60.0 * ((b - r) / d + 2.0)
    } else {
        60.0 * ((r - g) / d + 4.0)
    };
    Some((h.rem_euclid(360.0)) as u32)
}

/// The report of a real `cpumgr launch` (three programs under the `os` baseline and under a
/// manager) in headless Chromium: after its scripts ran, every chart's SVG holds bars and paths
/// and the replay grid is painted; the screenshot's chart area is coloured in every job's colour.
#[test]
#[cfg_attr(not(has_chromium), ignore = "needs headless Chromium (apt-get install chromium, or CPUMGR_CHROMIUM)")]
fn the_launch_report_renders_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("w.toml");
    std::fs::write(&workload, "name = \"render\"\n[[job]]\nname = \"a\"\ncommand = [\"sleep\", \"0.3\"]\n[[job]]\nname = \"b\"\ncommand = [\"sleep\", \"0.4\"]\nat = 0.1\n[[job]]\nname = \"c\"\ncommand = [\"sleep\", \"0.2\"]\nat = 0.2\n").unwrap();
    let page = dir.path().join("report.html");
    let out = cpumgr()
        .arg("launch")
        .arg(&workload)
        .args(["--baseline", "os", "--policy", "equipartition", "--json", "--report"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let profile = dir.path().join("profile");

    let dom = chromium_on(&page, "--dump-dom", &profile);
    for (k, run) in v["runs"].as_array().unwrap().iter().enumerate() {
        let section = dom
            .split(&format!("<section id=\"run{k}\">"))
            .nth(1)
            .unwrap_or_else(|| panic!("run{k} rendered"))
            .split("</section>")
            .next()
            .unwrap();
        let chart = |class: &str| {
            section
                .split(&format!("<svg class=\"{class}\""))
                .nth(1)
                .unwrap_or_else(|| panic!("{class} chart"))
                .split("</svg>")
                .next()
                .unwrap()
                .to_string()
        };
        assert!(chart("gantt").matches("<rect").count() >= 3, "a bar per job in {}'s Gantt chart", run["config"]);
        assert!(chart("cpus").matches("<rect").count() >= 1, "CPU owners drawn");
        assert_eq!(chart("alloc").matches("<path").count(), 3, "an allocation line per job");
        // The replay's script ran: a painted cell per CPU.
        let grid = section.split(&format!("id=\"run{k}-grid\">")).nth(1).unwrap().split("</div></div>").next().unwrap();
        assert!(
            grid.matches("class=\"cpu\"").count() >= 1 && grid.contains("background"),
            "replay grid painted: {grid}"
        );
        assert!(
            dom.contains(&format!("<td>{:.2}</td>", run["makespan"].as_f64().unwrap())),
            "the table shows the JSON's makespan"
        );
    }

    let shot = dir.path().join("report.png");
    chromium_on(&page, &format!("--screenshot={}", shot.display()), &profile);
    let mut decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert_eq!((info.width, info.height), (1200, 2000));
    // The charts' plot area: right of the 150 px lane labels (plus the page's 20 px margin).
    let mut hues = std::collections::BTreeMap::new();
    for y in 0..info.height as usize {
        for x in 170..980 {
            let at = (y * info.width as usize + x) * channels;
            if let Some(h) = hue(&buf[at..at + 3]) {
                *hues.entry(h / 10).or_insert(0u32) += 1;
            }
        }
    }
    let coloured: u32 = hues.values().sum();
    assert!(coloured > 5000, "the chart area is coloured, not blank: {coloured} pixels");
    let job_colours = hues.values().filter(|&&n| n > 200).count();
    assert!(job_colours >= 3, "each of the 3 jobs has its colour in the charts: {hues:?}");
}

/// `cpumgr report` on a trace rebuilds the results table from the trace alone.
#[test]
fn report_rebuilds_the_results_table_from_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("run.trace");
    std::fs::write(&trace, TRACE).unwrap();
    let html = dir.path().join("r.html");
    assert!(cpumgr().arg("report").arg(&trace).arg("-o").arg(&html).status().unwrap().success());
    let page = std::fs::read_to_string(&html).unwrap();
    let row = page.split("<table id=\"results\">").nth(1).expect("a results table").split("</table>").next().unwrap();
    // a and b arrive at 0 and end at 0.2 s, each holding both CPUs for half of it; one program
    // per class: no CV.
    for cell in ["<td>0.20</td>", "<td>2.00 of 2</td>", "<td>—</td>", "<td>0</td>"] {
        assert!(row.contains(cell), "{cell} in {row}");
    }
}

/// `cpumgr launch --trace run.trace` writes `run.trace.CONFIG` per configuration, and the report
/// rebuilt from it shows the launcher's makespan.
#[test]
fn launch_traces_are_named_per_configuration_and_rebuild_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("w.toml");
    std::fs::write(&workload, "[[job]]\nname = \"a\"\ncommand = [\"sleep\", \"0.2\"]\nrepeat = 2\n[[job]]\nname = \"b\"\ncommand = [\"sleep\", \"0.1\"]\nat = 0.05\n").unwrap();
    let trace = dir.path().join("run.trace");
    let out = cpumgr()
        .arg("launch")
        .arg(&workload)
        .args(["--baseline", "os,static", "--policy", "", "--json", "--trace"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!dir.path().join("run.os").exists(), "the name is appended, not put in place of .trace");
    for r in v["runs"].as_array().unwrap() {
        let config = r["config"].as_str().unwrap();
        let file = dir.path().join(format!("run.trace.{config}"));
        assert!(file.is_file(), "{} written", file.display());
        let html = dir.path().join(format!("{config}.html"));
        assert!(cpumgr().arg("report").arg(&file).arg("-o").arg(&html).status().unwrap().success());
        let page = std::fs::read_to_string(&html).unwrap();
        let cell = format!("<td>{:.2}</td>", r["makespan"].as_f64().unwrap());
        assert!(page.contains(&cell), "{config}: the rebuilt table shows the launcher's makespan {cell}");
    }
}
