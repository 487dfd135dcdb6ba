//! `cpumgr sim` through the binary: output shapes, presets, traces and reports, the machine-size
//! override, and bad input that must exit with code 2 naming file, line and field. Inputs are
//! written to temporary directories.

use std::path::Path;
use std::process::{Command, Output};

fn cpumgr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cpumgr")).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A small workload: two malleable jobs and a rigid one on 8 CPUs.
const WORKLOAD: &str = r#"
name = "small"
cpus = 8
[[job]]
name = "a"
request = 8
work = 40.0
[[job]]
name = "b"
request = 4
work = 8.0
arrival = 1.0
[[job]]
name = "mpi"
procs = 4
work = 16.0
arrival = 2.0
"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// An SWF line: job `n` submitted at `submit` running `run` s on `procs` processors.
fn swf_line(n: u32, submit: &str, run: &str, procs: &str) -> String {
    format!("{n} {submit} -1 {run} {procs} -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n")
}

#[test]
fn json_has_the_documented_fields_for_every_policy() {
    let dir = tempfile::tempdir().unwrap();
    let w = write(dir.path(), "w.toml", WORKLOAD);
    let o = cpumgr(&["sim", "--workload", &w, "--policy", "equipartition,gang,pdpa:base=2,os", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let results = v["results"].as_array().unwrap();
    let policies: Vec<&str> = results.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert_eq!(policies, vec!["equipartition", "gang", "pdpa:base=2", "os"]);
    for r in results {
        for f in
            ["makespan", "mean_turnaround", "mean_slowdown", "mean_bounded_slowdown", "utilization", "wall_seconds"]
        {
            assert!(r[f].as_f64().is_some_and(|x| x.is_finite() && x >= 0.0), "{f} in {r}");
        }
        assert_eq!(r["jobs"], 3, "{r}");
        assert!(r["events"].as_u64().unwrap() > 0);
        assert!(r["mean_slowdown"].as_f64().unwrap() >= 1.0 - 1e-9);
    }
}

#[test]
fn csv_and_table_have_a_row_per_policy() {
    let dir = tempfile::tempdir().unwrap();
    let w = write(dir.path(), "w.toml", WORKLOAD);
    let o = cpumgr(&["sim", "--workload", &w, "--policy", "equipartition,fcfs", "--csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("policy,makespan,mean_turnaround,mean_slowdown,mean_bounded_slowdown,utilization"),
        "{text}"
    );
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[1].starts_with("equipartition,") && lines[2].starts_with("fcfs,"));
    assert!(lines.iter().all(|l| l.split(',').count() == lines[0].split(',').count()));
    // A policy spec with parameters holds commas: its cell is quoted (RFC 4180).
    let o = cpumgr(&["sim", "--workload", &w, "--policy", "cs:mpl=4,fill=false,os", "--csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[1].starts_with("\"cs:mpl=4,fill=false\","), "{text}");
    assert_eq!(lines[1].split(',').count(), lines[0].split(',').count() + 1, "one comma inside the quotes: {text}");
    let o = cpumgr(&["sim", "--workload", &w, "--policy", "equipartition,fcfs"]);
    let text = stdout(&o);
    assert!(
        text.lines().any(|l| l.starts_with("equipartition ")) && text.lines().any(|l| l.starts_with("fcfs ")),
        "{text}"
    );
}

#[test]
fn policies_run_at_once_give_the_table_they_give_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let gen =
        "name = \"gen\"\ncpus = 32\n[generator]\nmodel = \"lublin\"\njobs = 300\nload = 0.9\nkind = \"malleable\"\n";
    let w = write(dir.path(), "gen.toml", gen);
    let policies = "os,equipartition,dss,pdpa,gang,fcfs,cs,scs";
    // Every column but the last (wall seconds).
    let table = |threads: &str| {
        let o = cpumgr(&["sim", "--workload", &w, "--policy", policies, "--csv", "--threads", threads]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o).lines().map(|l| l.rsplit_once(',').unwrap().0.to_string()).collect::<Vec<_>>()
    };
    let one = table("1");
    assert_eq!(one.len(), 9, "{one:?}");
    assert_eq!(one, table("4"), "the same rows, in the order of --policy");
    // A failing run is reported as it is one at a time (the first failure in --policy's order).
    let o = cpumgr(&["sim", "--workload", &w, "--policy", "equipartition,nosuch,fcfs", "--threads", "3"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("nosuch"), "{}", stderr(&o));
    let o = cpumgr(&["sim", "--workload", &w, "--policy", "fcfs", "--threads", "0"]);
    assert!(!o.status.success() && stderr(&o).contains("--threads"), "{}", stderr(&o));
}

#[test]
fn lists_the_eight_presets_and_runs_one() {
    let o = cpumgr(&["sim", "--list-presets", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = v["presets"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        vec![
            "nanos-cpuset32",
            "nanos-dss64",
            "pdpa-ltomcatv",
            "pdpa-tomcatv-turb3d",
            "pdpa-swim-apsi",
            "llpc-background",
            "scs-mpl",
            "omp-multiprog"
        ]
    );
    let text = stdout(&cpumgr(&["sim", "--list-presets"]));
    assert!(names.iter().all(|n| text.contains(n)), "{text}");
    let o = cpumgr(&["sim", "--preset", "omp-multiprog:degree=2", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let policies: Vec<&str> = v["results"].as_array().unwrap().iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert_eq!(policies, vec!["os", "omp-dss"], "the preset's own policies by default");
}

#[test]
fn trace_and_report_hold_every_policy() {
    let dir = tempfile::tempdir().unwrap();
    let w = write(dir.path(), "w.toml", WORKLOAD);
    let trace = dir.path().join("sim.trace");
    let report = dir.path().join("sim.html");
    let o = cpumgr(&[
        "sim",
        "--workload",
        &w,
        "--policy",
        "equipartition,gang",
        "--trace",
        trace.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let events: Vec<serde_json::Value> =
        std::fs::read_to_string(&trace).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds = |k: &str| events.iter().filter(|e| e["kind"] == k).count();
    assert_eq!(kinds("start"), 2, "one start per policy");
    assert_eq!((kinds("arrive"), kinds("exit")), (6, 6));
    assert!(kinds("allocate") >= 6);
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") || html.starts_with("<!doctype html>"), "{}", &html[..40]);
    assert!(!html.contains("<script src") && !html.contains("<link ") && !html.contains("<img "), "self-contained");
    for p in ["equipartition", "gang"] {
        assert!(html.contains(&format!("<h2>{p}</h2>")), "a section per policy");
    }
    assert_eq!(html.matches("class=\"gantt\"").count(), 2, "a programs × time chart per policy");
    assert_eq!(html.matches("class=\"cpus\"").count(), 2, "a CPUs × time chart per policy");
    // The trace reads back as one run per policy.
    let back = dir.path().join("back.html");
    let o = cpumgr(&["report", trace.to_str().unwrap(), "-o", back.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&back).unwrap().matches("class=\"gantt\"").count(), 2);
}

#[test]
fn the_machine_size_can_be_overridden() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("; MaxProcs: 64\n{}{}", swf_line(1, "0", "10", "16"), swf_line(2, "5", "10", "8"));
    let swf = write(dir.path(), "t.swf", &text);
    let o = cpumgr(&["sim", "--swf", &swf, "--policy", "fcfs", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cpus"], 64, "the header's MaxProcs");
    let o = cpumgr(&["sim", "--swf", &swf, "--cpus", "16", "--policy", "fcfs", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cpus"], 16);
    let o = cpumgr(&["sim", "--swf", &swf, "--cpus", "8", "--policy", "fcfs"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("t.swf:2: field `allocated_processors`"), "{}", stderr(&o));
    let o = cpumgr(&["sim", "--swf", &swf, "--cpus", "4000000000", "--policy", "fcfs"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--cpus"), "{}", stderr(&o));
    // A machine given by --topology sizes the trace as --cpus does.
    let o = cpumgr(&["sim", "--swf", &swf, "--topology", "package:2 core:8", "--policy", "fcfs", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cpus"], 16);
    let o = cpumgr(&["sim", "--swf", &swf, "--topology", "8", "--policy", "fcfs"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("t.swf:2: field `allocated_processors`"), "{}", stderr(&o));
    // The manager's CPUMGR_TOPOLOGY does not reach a simulation.
    let o = Command::new(env!("CARGO_BIN_EXE_cpumgr"))
        .env("CPUMGR_TOPOLOGY", "4")
        .args(["sim", "--swf", &swf, "--cpus", "32", "--policy", "fcfs", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cpus"], 32);
}

/// Files written with a UTF-8 byte-order mark read as without one.
#[test]
fn a_byte_order_mark_is_not_part_of_the_first_line() {
    let dir = tempfile::tempdir().unwrap();
    let swf = write(dir.path(), "bom.swf", &format!("\u{feff}; MaxProcs: 8\n{}", swf_line(1, "0", "10", "4")));
    let toml = write(dir.path(), "bom.toml", &format!("\u{feff}{WORKLOAD}"));
    for args in [["--swf", swf.as_str()], ["--workload", toml.as_str()]] {
        let o = cpumgr(&["sim", args[0], args[1], "--policy", "fcfs", "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["cpus"], 8, "{}", args[1]);
    }
}

#[test]
fn bad_input_exits_2_naming_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let good = swf_line(1, "0", "10", "4");
    let swf_cases = [
        (format!("; MaxProcs: 8\n{good}1 0 -1 10\n"), "bad.swf:3: field `line`"),
        (format!("; MaxProcs: 8\n{good}{}", swf_line(2, "0", "ten", "4")), "bad.swf:3: field `run_time`"),
        (format!("; MaxProcs: 8\n{good}{}", swf_line(2, "0", "10", "-4")), "bad.swf:3: field `allocated_processors`"),
        (format!("; MaxProcs: 8\n{good}{}", swf_line(2, "1e300", "10", "4")), "bad.swf:3: field `submit_time`"),
        (format!("; MaxProcs: 4000000000\n{good}"), "bad.swf:1: field `MaxProcs`"),
    ];
    // Each case written to `name` and read with `flag` exits 2 with its message.
    let refused = |name: &str, flag: &str, cases: &[(String, &str)]| {
        for (text, want) in cases {
            let f = write(dir.path(), name, text);
            let o = cpumgr(&["sim", flag, &f, "--policy", "fcfs"]);
            assert_eq!(o.status.code(), Some(2), "{want}: {}", stderr(&o));
            assert!(stderr(&o).contains(want), "{want}: {}", stderr(&o));
        }
    };
    refused("bad.swf", "--swf", &swf_cases);
    let job = "[[job]]\nname = \"a\"\nrequest = 2\nwork = 1.0\n";
    let toml_cases = [
        (format!("cpus = 4\n{job}colour = \"red\"\n"), "w.toml:6: field `colour`"),
        (format!("cpus = 4\n{job}arrival = 1e300\n"), "w.toml:2: field `arrival`"),
        (format!("cpus = 4\n{job}repeat = 2\nevery = 1e300\n"), "w.toml:2: field `every`"),
        (format!("cpus = 4000000000\n{job}"), "w.toml:1: field `cpus`"),
    ];
    refused("w.toml", "--workload", &toml_cases);
    let generator = "name = \"g\"\ncpus = 16\n[generator]\nmodel = \"poisson\"\njobs = 20\n";
    let generator_cases = [
        (format!("{generator}mean_runtime = 0.0\n"), "w.toml:6: field `mean_runtime`"),
        (format!("{generator}load = 0.5\nmean_runtime = nan\n"), "w.toml:7: field `mean_runtime`"),
        (format!("{generator}max_size = 0\n"), "w.toml:6: field `max_size`"),
        (format!("{generator}max_size = 17\n"), "w.toml:6: field `max_size`"),
    ];
    refused("w.toml", "--workload", &generator_cases);
    // A job too large for the machine the command line gives is refused at its `[[job]]` line
    // (a comment that names `[[job]]` is not one), and a job of an inline array at `job =`.
    let commented =
        "name = \"w\"\n# each [[job]] below is one program\n\n[[job]]\nname = \"big\"\nrequest = 8\nwork = 1.0\n";
    let f = write(dir.path(), "w.toml", commented);
    for machine in [["--cpus", "4"], ["--topology", "4"]] {
        let o = cpumgr(&["sim", "--workload", &f, machine[0], machine[1], "--policy", "fcfs"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("w.toml:4: field `request`"), "{machine:?}: {}", stderr(&o));
    }
    // Without --cpus, --topology or the file's `cpus` the machine is this host's, and a job too
    // large for it is refused at its line as well (it was an error at its arrival, naming no line).
    let f = write(dir.path(), "w.toml", &commented.replace("request = 8", "request = 100000"));
    let o = cpumgr(&["sim", "--workload", &f, "--policy", "fcfs"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("w.toml:4: field `request`") && stderr(&o).contains("this host's"), "{}", stderr(&o));
    let f =
        write(dir.path(), "w.toml", "name = \"w\"\ncpus = 4\njob = [{ name = \"big\", request = 8, work = 1.0 }]\n");
    let o = cpumgr(&["sim", "--workload", &f, "--policy", "fcfs"]);
    assert!(stderr(&o).contains("w.toml:3: field `request`"), "{}", stderr(&o));
    // The command line's quantum has the workload file's bounds.
    let f = write(dir.path(), "w.toml", &format!("cpus = 4\n{job}"));
    for q in ["1e12", "1e-7", "0", "nan"] {
        let o = cpumgr(&["sim", "--workload", &f, "--policy", "fcfs", "--quantum-ms", q]);
        assert_eq!(o.status.code(), Some(2), "--quantum-ms {q}: {}", stderr(&o));
        assert!(stderr(&o).contains("--quantum-ms"), "{}", stderr(&o));
    }
}

/// Traces as the Parallel Workloads Archive has them run without options: CRLF line ends, tabs,
/// a Latin-1 comment, a last line without a newline, and jobs that the trace says were cancelled
/// before they ran or whose run time is unknown, which are left out and counted.
#[test]
fn archive_traces_run_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = [
        swf_line(1, "0", "10", "4"),
        "2\t5\t-1\t0\t-1\t-1\t-1\t4\t-1\t-1\t5\t-1\t-1\t-1\t0\t-1\t-1\t-1\n".to_string(),
        swf_line(3, "6", "-1", "2"),
        swf_line(4, "7", "0", "2"),
        swf_line(5, "8", "-1", "2"),
        swf_line(6, "9", "12.0", "1e0").trim_end().to_string(),
    ]
    .concat();
    let text =
        [b"; Installation: Universit\xe4t\n; MaxProcs: 8\n".as_slice(), jobs.replace('\n', "\r\n").as_bytes()].concat();
    let f = dir.path().join("archive.swf");
    std::fs::write(&f, text).unwrap();
    let o = cpumgr(&["sim", "--swf", f.to_str().unwrap(), "--policy", "os,equipartition", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["results"].as_array().unwrap().iter().all(|r| r["jobs"] == 3), "{v}");
    let e = stderr(&o);
    assert!(e.contains("archive.swf: 3 jobs not simulated: 1 cancelled before they ran"), "{e}");
    assert!(e.contains("the first at line 4; 2 with an unknown run time, the first at line 5"), "{e}");
}

/// A header value that cannot size the machine is named on stderr with the machine used instead,
/// and the run goes on.
#[test]
fn unusable_header_values_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "t.swf", &format!("; MaxProcs: abc\n{}", swf_line(1, "0", "10", "4")));
    let o = cpumgr(&["sim", "--swf", &f, "--policy", "fcfs", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cpus"], 4, "{v}");
    let want = "t.swf:1: field `MaxProcs`: \"abc\" is not a number of processors (a positive whole number): ignored; the machine has 4 CPUs (the largest job)";
    assert!(stderr(&o).contains(want), "{}", stderr(&o));
}

/// A compressed or jobless trace is refused, saying why, and `--skip-bad` is not offered where
/// it would not help.
#[test]
fn unusable_traces_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("t.swf.gz");
    std::fs::write(&gz, [0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03]).unwrap();
    let cancelled = "1 0 -1 -1 -1 -1 -1 4 -1 -1 5 -1 -1 -1 0 -1 -1 -1\n";
    let cases = [
        (gz.to_str().unwrap().to_string(), "t.swf.gz:1: field `file`: the file is gzip-compressed"),
        (write(dir.path(), "empty.swf", ""), "empty.swf: no job to simulate"),
        (write(dir.path(), "header.swf", "; MaxProcs: 8\n"), "header.swf: no job to simulate"),
        (write(dir.path(), "cancelled.swf", cancelled), "cancelled.swf: no job to simulate"),
        (write(dir.path(), "huge.swf", "; MaxProcs: 4000000000\n"), "huge.swf:1: field `MaxProcs`"),
    ];
    for (f, want) in cases {
        let o = cpumgr(&["sim", "--swf", &f, "--policy", "fcfs"]);
        assert_eq!(o.status.code(), Some(2), "{want}: {}", stderr(&o));
        assert!(stderr(&o).contains(want) && !stderr(&o).contains("--skip-bad"), "{want}: {}", stderr(&o));
    }
}

/// 200 000 job lines (a twentieth cancelled) on 1 024 CPUs: read a line at a time and simulated
/// under two policies, in memory of the order of the jobs'. (Its time is a benchmark's business,
/// not a test's: `cpumgr sim --bench`.)
#[test]
fn a_200000_line_trace_runs_in_flat_memory() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("; MaxNodes: 1024\n; MaxProcs: 1024\n");
    let (mut x, mut submit) = (12345u64, 0u64);
    let mut next = |m: u64| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) % m
    };
    for n in 1..=200_000u32 {
        submit += next(240);
        let (run, procs) = if n % 20 == 0 {
            ("0".to_string(), "-1".to_string())
        } else {
            (next(4000).to_string(), (1u32 << next(8)).to_string())
        };
        let status = if n % 20 == 0 { 5 } else { 1 };
        text.push_str(&format!("{n} {submit} 17 {run} {procs} -1 -1 {procs} 7200 -1 {status} 3 1 -1 1 1 -1 -1\n"));
    }
    let f = write(dir.path(), "big.swf", &text);
    drop(text);
    let o = cpumgr(&["sim", "--swf", &f, "--policy", "os,equipartition", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["results"].as_array().unwrap().iter().all(|r| r["jobs"] == 190_000), "{v}");
    assert!(stderr(&o).contains("10000 jobs not simulated: 10000 cancelled"), "{}", stderr(&o));
    // The same, for a script reading --json.
    assert_eq!(
        v["left_out"],
        serde_json::json!({"jobs": [{"reason": "cancelled", "jobs": 10000, "first_line": 22}], "bad_lines": 0}),
        "{}",
        v["left_out"]
    );
    // The largest child's peak resident memory (this binary's other children are small runs):
    // about 60 MiB in a debug build.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) }, 0);
    let mib = usage.ru_maxrss as f64 / 1024.0;
    assert!(mib < 256.0, "peak RSS {mib} MiB");
}

#[test]
fn skip_bad_counts_the_skipped_lines() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "; MaxProcs: 8\n{}1 0 -1 10\n{}{}{}",
        swf_line(1, "0", "10", "4"),
        swf_line(3, "0", "x", "4"),
        swf_line(4, "1", "10", "16"),
        swf_line(5, "2", "10", "2")
    );
    let f = write(dir.path(), "mixed.swf", &text);
    let o = cpumgr(&["sim", "--swf", &f, "--policy", "fcfs", "--skip-bad", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("skipped 3 bad lines; the first: ") && e.contains("mixed.swf:3: field `line`"), "{e}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["results"][0]["jobs"], 2);
    // Without --skip-bad, the error says that the option exists.
    let o = cpumgr(&["sim", "--swf", &f, "--policy", "fcfs"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("mixed.swf:3") && stderr(&o).contains("--skip-bad"), "{}", stderr(&o));
}

#[test]
#[cfg_attr(not(has_shared_traces), ignore = "needs the shared SWF traces (shared/data/swf/ beside the workspace)")]
fn the_shared_lublin_trace_runs() {
    let lublin = cpumgr_testenv::shared_trace("lublin_256.swf");
    let o = cpumgr(&[
        "sim",
        "--swf",
        lublin.to_str().unwrap(),
        "--limit",
        "300",
        "--policy",
        "fcfs,equipartition",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cpus"], 256);
    assert!(v["results"].as_array().unwrap().iter().all(|r| r["jobs"] == 300));
}

/// The shared HPC2N trace holds 25 jobs of unknown run time: they are left out and counted, and
/// the trace runs without `--skip-bad`.
#[test]
#[cfg_attr(not(has_shared_traces), ignore = "needs the shared SWF traces (shared/data/swf/ beside the workspace)")]
fn the_shared_hpc2n_trace_runs_as_it_is() {
    let hpc2n = cpumgr_testenv::shared_trace("hpc2n-first3170.swf");
    let o = cpumgr(&["sim", "--swf", hpc2n.to_str().unwrap(), "--policy", "os,equipartition", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("25 jobs not simulated: 25 with an unknown run time, the first at line 34"),
        "{}",
        stderr(&o)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cpus"], 240);
    assert!(v["results"].as_array().unwrap().iter().all(|r| r["jobs"] == 3145), "{v}");
}

#[test]
fn every_cost_parameter_has_a_flag_that_overrides_the_workload() {
    // Three barrier-heavy rigid jobs of 8 processes on 8 CPUs: SCS at mpl 2 squeezes a job onto
    // 4 CPUs, time-sharing with itself (sync_self); gang rotates them each quantum (a resume
    // each time: resume_ms). The workload's [cost] charges both; the flags override it.
    let dir = tempfile::tempdir().unwrap();
    let jobs =
        (0..3).map(|i| format!("[[job]]\nname = \"j{i}\"\nprocs = 8\nwork = 40.0\nsync = 1.0\n")).collect::<String>();
    let w = write(dir.path(), "w.toml", &format!("cpus = 8\n[cost]\nsync_self = 2.0\nresume_ms = 20.0\n{jobs}"));
    let run = |policy: &str, flags: &[&str]| {
        let o = cpumgr(&[&["sim", "--workload", &w, "--policy", policy, "--json"], flags].concat());
        assert!(o.status.success(), "{flags:?}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (v["results"][0]["mean_turnaround"].as_f64().unwrap(), v["results"][0]["makespan"].as_f64().unwrap())
    };
    let (squeezed, _) = run("scs:mpl=2", &[]);
    let (free, _) = run("scs:mpl=2", &["--sync-self", "0"]);
    assert!(squeezed > free * 1.2, "the workload's sync_self 2 costs: {squeezed} against {free}");
    let (_, resumed) = run("gang", &[]);
    let (_, unresumed) = run("gang", &["--resume-ms", "0"]);
    assert!(resumed > unresumed + 1.0, "the workload's 20 ms resumes cost: {resumed} against {unresumed}");
    for flag in ["--sync-self=-1", "--resume-ms=-1"] {
        let o = cpumgr(&["sim", "--workload", &w, "--policy", "gang", flag]);
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", stderr(&o));
        assert!(stderr(&o).contains(&flag[..flag.len() - 3]), "{flag}: {}", stderr(&o));
    }
}

/// A trace written with the fast-forward gives each program the CPU time the quantum-by-quantum
/// trace does: the skipped periods are `repeat` events, folded as shares of the period before,
/// also when that period reaches back into the span of the jump before (an arrival that the
/// admission limit holds back changes nothing, and the next jump comes a quantum later).
#[test]
fn a_fast_forwarded_trace_holds_the_cpu_time_of_every_quantum() {
    use cpumgr_report::timeline::{parse_trace, Segment, Timeline};
    let dir = tempfile::tempdir().unwrap();
    let queued = write(
        dir.path(),
        "queued.toml",
        "name = \"queued\"\ncpus = 4\nmpl = 2\n\
         [[job]]\nname = \"a\"\nprocs = 4\nwork = 400.0\n\
         [[job]]\nname = \"b\"\nprocs = 4\nwork = 400.0\n\
         [[job]]\nname = \"c\"\nprocs = 4\nwork = 4.0\narrival = 50.05\n",
    );
    let held = |input: &[&str], extra: &[&str]| {
        let path = dir.path().join("t.jsonl");
        let path = path.to_str().unwrap();
        let mut args = vec!["sim"];
        args.extend_from_slice(input);
        args.extend_from_slice(&["--trace", path, "--csv"]);
        args.extend_from_slice(extra);
        let o = cpumgr(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let text = std::fs::read_to_string(path).unwrap();
        let repeats = text.lines().filter(|l| l.contains("\"kind\":\"repeat\"")).count();
        let runs = Timeline::runs(&parse_trace(path, &text).unwrap());
        let held: Vec<Vec<f64>> =
            runs.iter().map(|t| t.lanes.iter().map(|l| l.segments.iter().map(Segment::held).sum()).collect()).collect();
        (held, repeats)
    };
    let cases: [&[&str]; 2] =
        [&["--preset", "nanos-dss64", "--policy", "gang,vtq-dss"], &["--workload", &queued, "--policy", "gang"]];
    for input in cases {
        let ((fast, repeats), (exact, none)) = (held(input, &[]), held(input, &["--no-fast-forward"]));
        assert!(repeats > 0 && none == 0, "{input:?}: {repeats} repeats fast-forwarded, {none} quantum by quantum");
        assert_eq!(fast.len(), exact.len());
        for (run, (f, e)) in fast.iter().zip(&exact).enumerate() {
            assert_eq!(f.len(), e.len());
            for (lane, (x, y)) in f.iter().zip(e).enumerate() {
                assert!(
                    (x - y).abs() <= 1e-9 * y.max(1.0),
                    "{input:?}, run {run}, program {lane}: {x} CPU-ns fast-forwarded, {y} quantum by quantum"
                );
            }
        }
    }
}
