//! Trace exports for the established viewers: Chrome/Perfetto JSON (ui.perfetto.dev,
//! chrome://tracing) and Paraver's `.prv` / `.pcf` / `.row` triple (wxparaver), as paper 000's
//! traces were.
//!
//! Both views are the same: one track per program with its running stretches (and the CPU count
//! as an argument or event), and one track per CPU with the program that owned it.

use serde_json::{json, Value};

use crate::timeline::Timeline;

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Chrome trace event format (JSON object form): process 1 holds a thread per program, process 2 a
/// thread per CPU; complete (`X`) events for running stretches, counter (`C`) events for
/// allocations, metadata (`M`) events naming every track.
pub fn perfetto(t: &Timeline) -> Value {
    let mut events = vec![
        json!({"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": format!("programs ({})", t.policy)}}),
        json!({"ph": "M", "pid": 2, "tid": 0, "name": "process_name", "args": {"name": "CPUs"}}),
    ];
    for lane in &t.lanes {
        let tid = lane.id.0;
        events.push(json!({"ph": "M", "pid": 1, "tid": tid, "name": "thread_name", "args": {"name": lane.name}}));
        events.push(json!({"ph": "i", "pid": 1, "tid": tid, "ts": us(lane.arrival), "name": "arrive", "s": "t"}));
        for s in &lane.segments {
            events.push(json!({"ph": "C", "pid": 1, "tid": tid, "ts": us(s.from), "name": format!("{} cpus", lane.name), "args": {"cpus": s.mean_cpus()}}));
            if s.running && s.count > 0 {
                events.push(json!({"ph": "X", "pid": 1, "tid": tid, "ts": us(s.from), "dur": us(s.to - s.from), "name": "run", "args": {"count": s.count, "cpus": s.cpus.to_string(), "share": s.share}}));
            }
        }
    }
    for (cpu, owners) in t.cpu_owners(1) {
        let tid = cpu as u64;
        events.push(
            json!({"ph": "M", "pid": 2, "tid": tid, "name": "thread_name", "args": {"name": format!("CPU {cpu}")}}),
        );
        for (from, to, lane) in owners {
            events.push(json!({"ph": "X", "pid": 2, "tid": tid, "ts": us(from), "dur": us(to - from), "name": t.lanes[lane].name}));
        }
    }
    json!({"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"source": t.source, "policy": t.policy}})
}

/// Paraver state values.
const STATE_IDLE: u32 = 0;
const STATE_RUNNING: u32 = 1;
const STATE_STOPPED: u32 = 2;
/// A span the simulator skipped, in which the program ran a share of the time (its allocation
/// event gives the CPUs it held on average, rounded up).
const STATE_SHARED: u32 = 3;
/// Paraver event type: CPUs allocated to the program.
pub const EVENT_ALLOCATION: u32 = 90_000_001;

/// A Paraver trace: the three files' contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paraver {
    /// `.prv`: header and records.
    pub prv: String,
    /// `.pcf`: state and event type names.
    pub pcf: String,
    /// `.row`: names of CPUs and tasks.
    pub row: String,
}

/// Paraver export: one application, one task (with one thread) per program, the machine's CPUs
/// as CPUs of one node. State records say when each program ran or waited; event records carry
/// its CPU count. Times in nanoseconds.
pub fn paraver(t: &Timeline) -> Paraver {
    let ncpus = t.cpus.len().max(1);
    let ntasks = t.lanes.len();
    let tasks: Vec<String> = (0..ntasks).map(|_| "1:1".to_string()).collect();
    let mut prv = format!("#Paraver (01/01/70 at 00:00):{}_ns:1({}):1:{}({})\n", t.end, ncpus, ntasks, tasks.join(","));
    let cpu_index: std::collections::HashMap<u32, usize> = t.cpus.iter().enumerate().map(|(i, c)| (c, i + 1)).collect();
    let mut records: Vec<(u64, String)> = Vec::new();
    for (task, lane) in t.lanes.iter().enumerate() {
        let task = task + 1;
        let mut at = lane.arrival;
        for s in &lane.segments {
            if s.from > at {
                records.push((at, format!("1:0:1:{task}:1:{at}:{}:{STATE_STOPPED}", s.from)));
            }
            let cpu = s.cpus.first().and_then(|c| cpu_index.get(&c)).copied().unwrap_or(0);
            let state = match (s.running, s.count) {
                (true, n) if n > 0 && s.is_shared() => STATE_SHARED,
                (true, n) if n > 0 => STATE_RUNNING,
                _ => STATE_STOPPED,
            };
            records.push((s.from, format!("1:{cpu}:1:{task}:1:{}:{}:{state}", s.from, s.to)));
            let count = s.mean_cpus().ceil() as u32;
            records.push((s.from, format!("2:{cpu}:1:{task}:1:{}:{EVENT_ALLOCATION}:{count}", s.from)));
            at = s.to;
        }
        if lane.exit > at {
            records.push((at, format!("1:0:1:{task}:1:{at}:{}:{STATE_STOPPED}", lane.exit)));
        }
    }
    records.sort_by_key(|r| r.0);
    for (_, r) in records {
        prv.push_str(&r);
        prv.push('\n');
    }
    let pcf = format!(
        "DEFAULT_OPTIONS\n\nLEVEL               THREAD\nUNITS               NANOSEC\n\n\
         STATES\n{STATE_IDLE}    Idle\n{STATE_RUNNING}    Running\n{STATE_STOPPED}    Waiting for CPUs\n{STATE_SHARED}    Running a share of the time (a repeating schedule, fast-forwarded)\n\n\
         STATES_COLOR\n{STATE_IDLE}    {{117,195,255}}\n{STATE_RUNNING}    {{0,0,255}}\n{STATE_STOPPED}    {{255,0,0}}\n{STATE_SHARED}    {{128,128,255}}\n\n\
         EVENT_TYPE\n0    {EVENT_ALLOCATION}    CPUs allocated by cpumgr\n"
    );
    let mut row = format!("LEVEL CPU SIZE {ncpus}\n");
    for c in t.cpus.iter() {
        row.push_str(&format!("CPU {c}\n"));
    }
    row.push_str(&format!("\nLEVEL NODE SIZE 1\nnode\n\nLEVEL TASK SIZE {ntasks}\n"));
    for lane in &t.lanes {
        row.push_str(&format!("{}\n", row_name(&lane.name)));
    }
    row.push_str(&format!("\nLEVEL THREAD SIZE {ntasks}\n"));
    for lane in &t.lanes {
        row.push_str(&format!("{} (thread 1)\n", row_name(&lane.name)));
    }
    Paraver { prv, pcf, row }
}

/// A program's name as one `.row` line: each entry of a level is a line, so a line break (or any
/// control character, an escape sequence among them) in a name becomes `?`.
fn row_name(name: &str) -> String {
    name.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::tests::{moving, sample};
    use cpumgr_core::trace::{Event, EventKind};
    use cpumgr_core::{CpuSet, ProgramId};

    #[test]
    fn perfetto_events_have_the_fields_their_phase_needs() {
        let v = perfetto(&Timeline::from_events(&sample()));
        let events = v["traceEvents"].as_array().unwrap();
        for e in events {
            let ph = e["ph"].as_str().unwrap();
            assert!(e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
            match ph {
                "X" => assert!(e["ts"].is_f64() && e["dur"].as_f64().unwrap() > 0.0 && e["name"].is_string(), "{e}"),
                "C" | "i" => assert!(e["ts"].is_f64(), "{e}"),
                "M" => assert!(e["args"]["name"].is_string(), "{e}"),
                other => panic!("unexpected phase {other}"),
            }
        }
        let runs = events.iter().filter(|e| e["ph"] == "X" && e["pid"] == 1).count();
        assert_eq!(runs, 4, "a: 2 stretches, b: 2 stretches");
    }

    #[test]
    fn perfetto_gives_each_cpu_to_both_programs_that_took_turns_on_it_in_a_repeated_span() {
        let v = perfetto(&Timeline::from_events(&moving()));
        let cpu_runs = |cpu: u64| -> Vec<(String, f64, f64)> {
            let events = v["traceEvents"].as_array().unwrap().iter();
            events
                .filter(|e| e["ph"] == "X" && e["pid"] == 2 && e["tid"] == cpu)
                .map(|e| {
                    (e["name"].as_str().unwrap().to_string(), e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap())
                })
                .collect()
        };
        for cpu in 0..4 {
            let span: Vec<(String, f64, f64)> = cpu_runs(cpu).into_iter().filter(|r| r.1 >= 0.2 && r.1 < 1.2).collect();
            assert_eq!(
                span,
                [("a".to_string(), 0.2, 0.5), ("b".to_string(), 0.7, 0.5)],
                "CPU {cpu}: half the span each, one after the other"
            );
        }
    }

    #[test]
    fn a_name_with_a_line_break_is_one_row_line() {
        let mut events = sample();
        for e in &mut events {
            if let cpumgr_core::trace::EventKind::Arrive { name, .. } = &mut e.kind {
                name.push_str("\nnext\u{1b}[31m");
            }
        }
        let p = paraver(&Timeline::from_events(&events));
        let tasks: Vec<&str> =
            p.row.split("LEVEL TASK SIZE 2\n").nth(1).unwrap().lines().take_while(|l| !l.is_empty()).collect();
        assert_eq!(tasks, ["a?next?[31m", "b?next?[31m"], "{}", p.row);
    }

    #[test]
    fn paraver_records_are_described_by_pcf_and_row() {
        let p = paraver(&Timeline::from_events(&sample()));
        let header = p.prv.lines().next().unwrap();
        assert_eq!(header, "#Paraver (01/01/70 at 00:00):400_ns:1(2):1:2(1:1,1:1)");
        let tasks: usize =
            p.row.lines().find(|l| l.starts_with("LEVEL TASK")).unwrap().rsplit(' ').next().unwrap().parse().unwrap();
        let mut states = 0;
        for line in p.prv.lines().skip(1) {
            let f: Vec<u64> = line.split(':').map(|x| x.parse().unwrap()).collect();
            assert!(f[3] as usize <= tasks && f[3] >= 1, "{line}");
            assert!(f[1] <= 2, "cpu {line}");
            match f[0] {
                1 => {
                    assert!(f[5] < f[6], "{line}");
                    assert!(p.pcf.contains(&format!("\n{}    ", f[7])), "state {} undeclared", f[7]);
                    states += 1;
                }
                2 => assert!(p.pcf.contains(&format!("    {}    ", f[6])), "event type {} undeclared", f[6]),
                _ => panic!("{line}"),
            }
        }
        assert_eq!(states, 4, "two running stretches each for a and b");
    }

    #[test]
    fn paraver_marks_a_repeated_span_as_shared_with_its_mean_cpus() {
        let cpus = CpuSet::parse("0-3").unwrap();
        let ev = |t: u64, p: Option<u64>, kind: EventKind| Event { t, program: p.map(ProgramId), kind };
        let run = |t: u64, p: u64, on: bool| {
            ev(
                t,
                Some(p),
                EventKind::Allocate {
                    count: if on { 4 } else { 0 },
                    cpus: if on { cpus.clone() } else { CpuSet::new() },
                    running: on,
                },
            )
        };
        let events = vec![
            ev(
                0,
                None,
                EventKind::Start { source: "sim".into(), cpus: cpus.clone(), policy: "gang".into(), quantum: 100 },
            ),
            ev(0, Some(1), EventKind::Arrive { name: "a".into(), request: 4 }),
            ev(0, Some(2), EventKind::Arrive { name: "b".into(), request: 4 }),
            run(0, 1, true),
            run(100, 1, false),
            run(100, 2, true),
            run(200, 2, false),
            run(200, 1, true),
            ev(200, None, EventKind::Repeat { period: 200, until: 1_000 }),
            ev(1_100, Some(1), EventKind::Exit { status: Some(0) }),
            ev(1_100, Some(2), EventKind::Exit { status: Some(0) }),
        ];
        let p = paraver(&Timeline::from_events(&events));
        let shared: Vec<&str> =
            p.prv.lines().filter(|l| l.starts_with("1:") && l.ends_with(&format!(":{STATE_SHARED}"))).collect();
        assert_eq!(shared.len(), 2, "a and b shared the span 200..1000: {}", p.prv);
        assert!(shared.iter().all(|l| l.contains(":200:1000:")), "{shared:?}");
        let means: Vec<&str> = p.prv.lines().filter(|l| l.starts_with("2:") && l.contains(":200:")).collect();
        assert!(
            means.iter().all(|l| l.ends_with(&format!("{EVENT_ALLOCATION}:2"))),
            "half of 4 CPUs each, not 4: {means:?}"
        );
        assert!(p.pcf.contains(&format!("\n{STATE_SHARED}    ")), "{}", p.pcf);
    }
}
