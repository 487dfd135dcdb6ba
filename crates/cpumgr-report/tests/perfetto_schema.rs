//! The Perfetto export against a JSON Schema of the Trace Event Format (what ui.perfetto.dev and
//! chrome://tracing load), written from the format's documentation: the export of a managed run
//! validates, and the schema rejects the mistakes a loader would (so it is not vacuous).

use cpumgr_report::{export, parse_trace, Timeline};
use serde_json::{json, Value};

/// A gang run on two CPUs: `a` runs, is stopped while `b` runs, and both end; `c` never runs.
const TRACE: &str = r#"{"t":0,"kind":"start","source":"live","cpus":"0-1","policy":"gang","quantum":100000000}
{"t":0,"program":1,"kind":"arrive","name":"a","request":2}
{"t":0,"program":1,"kind":"allocate","count":2,"cpus":"0-1","running":true}
{"t":1000,"program":2,"kind":"arrive","name":"b#1","request":1}
{"t":1000,"program":2,"kind":"allocate","count":1,"cpus":"","running":false}
{"t":100000000,"program":1,"kind":"allocate","count":2,"cpus":"0-1","running":false}
{"t":100000000,"program":2,"kind":"allocate","count":1,"cpus":"1","running":true}
{"t":150000000,"program":3,"kind":"arrive","name":"c","request":2}
{"t":200000000,"program":2,"kind":"exit","status":0}
{"t":200000000,"program":1,"kind":"allocate","count":2,"cpus":"0-1","running":true}
{"t":300000000,"program":1,"kind":"exit","status":1}
"#;

fn validator() -> jsonschema::Validator {
    let text = include_str!("trace-event-format.schema.json");
    jsonschema::validator_for(&serde_json::from_str(text).unwrap()).expect("the schema is a valid JSON Schema")
}

fn errors(v: &Value) -> Vec<String> {
    validator().iter_errors(v).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

fn export() -> Value {
    let events = parse_trace("gang.trace", TRACE).unwrap();
    export::perfetto(&Timeline::from_events(&events))
}

#[test]
fn the_perfetto_export_is_a_valid_trace_event_file() {
    let v = export();
    assert_eq!(errors(&v), Vec::<String>::new());
    let phases: std::collections::BTreeSet<&str> =
        v["traceEvents"].as_array().unwrap().iter().map(|e| e["ph"].as_str().unwrap()).collect();
    assert_eq!(
        phases.into_iter().collect::<Vec<_>>(),
        vec!["C", "M", "X", "i"],
        "every phase the export uses is checked"
    );
}

#[test]
fn the_schema_rejects_what_a_loader_would() {
    let mut broken = Vec::new();
    let v = export();
    let first = |ph: &str| v["traceEvents"].as_array().unwrap().iter().position(|e| e["ph"] == ph).unwrap();
    let mut edit = |ph: &str, f: &dyn Fn(&mut Value)| {
        let mut w = v.clone();
        f(&mut w["traceEvents"][first(ph)]);
        broken.push((ph.to_string(), w));
    };
    edit("X", &|e| drop(e.as_object_mut().unwrap().remove("dur")));
    edit("X", &|e| e["ts"] = json!("12.5"));
    edit("X", &|e| e["dur"] = json!(-1.0));
    edit("X", &|e| e["pid"] = json!(1.5));
    edit("X", &|e| e["tid"] = json!("a"));
    edit("C", &|e| e["args"] = json!({"cpus": "two"}));
    edit("i", &|e| drop(e.as_object_mut().unwrap().remove("ts")));
    edit("i", &|e| e["s"] = json!("x"));
    edit("M", &|e| e["args"] = json!({}));
    edit("M", &|e| e["name"] = json!("thread_title"));
    edit("M", &|e| e["ph"] = json!("Q"));
    for (ph, w) in broken {
        assert!(!errors(&w).is_empty(), "a broken {ph} event passed: {}", w["traceEvents"]);
    }
    assert!(!errors(&json!({"events": []})).is_empty(), "traceEvents is required");
}
