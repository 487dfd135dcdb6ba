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
    assert!(cpumgr().args(["trace", "export", "--format", "perfetto"]).arg(&trace).arg(&json).status().unwrap().success());
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(v["traceEvents"].as_array().unwrap().iter().any(|e| e["ph"] == "X" && e["name"] == "run"));

    let base = dir.path().join("p");
    assert!(cpumgr().args(["trace", "export", "--format", "paraver"]).arg(&trace).arg(&base).status().unwrap().success());
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
