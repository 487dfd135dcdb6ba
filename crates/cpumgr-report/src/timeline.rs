//! Timelines: a trace's event stream folded into per-program segments (who had how many and which
//! CPUs, running or stopped, from when to when). Every chart and export reads a [`Timeline`], so the
//! live manager's and the simulator's traces render alike.

use cpumgr_core::trace::{Event, EventKind};
use cpumgr_core::{CpuSet, Nanos, ProgramId};

/// A line of a trace that is not an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}:{line}: {message}")]
pub struct TraceError {
    /// The trace's file name (or other label).
    pub source_name: String,
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Parses a JSON-lines trace; blank lines are skipped. Errors name the line.
pub fn parse_trace(source_name: &str, text: &str) -> Result<Vec<Event>, TraceError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| TraceError {
                source_name: source_name.to_string(),
                line: i + 1,
                message: e.to_string(),
            })
        })
        .collect()
}

/// One stretch of time in which a program's allocation did not change.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Start.
    pub from: Nanos,
    /// End.
    pub to: Nanos,
    /// CPUs allocated.
    pub count: u32,
    /// Which CPUs (empty for the unmanaged `os` baseline).
    pub cpus: CpuSet,
    /// Whether it ran.
    pub running: bool,
}

/// One program's life in the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    /// Its id.
    pub id: ProgramId,
    /// Its name.
    pub name: String,
    /// When it arrived.
    pub arrival: Nanos,
    /// When it ended (the trace's end if it did not).
    pub exit: Nanos,
    /// Its exit status, when it ended and the status is known.
    pub status: Option<i32>,
    /// Its allocation over time, in order, without gaps between its first allocation and exit.
    pub segments: Vec<Segment>,
}

impl Lane {
    /// When it first got a CPU and ran, if it ever did.
    pub fn first_run(&self) -> Option<Nanos> {
        self.segments.iter().find(|s| s.running && s.count > 0).map(|s| s.from)
    }
}

/// The stretches in which programs held one CPU: (from, to, lane index).
pub type Ownership = Vec<(Nanos, Nanos, usize)>;

/// A whole trace, folded.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Timeline {
    /// `live` or `sim`, from the trace header.
    pub source: String,
    /// The policy at the start.
    pub policy: String,
    /// Managed CPUs.
    pub cpus: CpuSet,
    /// The quantum at the start.
    pub quantum: Nanos,
    /// Time of the last event.
    pub end: Nanos,
    /// Programs in arrival order.
    pub lanes: Vec<Lane>,
}

impl Timeline {
    /// Folds events (in time order) into lanes.
    pub fn from_events(events: &[Event]) -> Timeline {
        let mut t = Timeline::default();
        let mut index: std::collections::HashMap<ProgramId, usize> = std::collections::HashMap::new();
        for e in events {
            t.end = t.end.max(e.t);
            match (&e.kind, e.program) {
                (EventKind::Start { source, cpus, policy, quantum }, _) => {
                    t.source = source.clone();
                    t.cpus = cpus.clone();
                    t.policy = policy.clone();
                    t.quantum = *quantum;
                }
                (EventKind::Arrive { name, .. }, Some(id)) => {
                    index.insert(id, t.lanes.len());
                    t.lanes.push(Lane { id, name: name.clone(), arrival: e.t, exit: Nanos::MAX, status: None, segments: Vec::new() });
                }
                (EventKind::Allocate { count, cpus, running }, Some(id)) => {
                    if let Some(&i) = index.get(&id) {
                        let lane = &mut t.lanes[i];
                        if let Some(last) = lane.segments.last_mut() {
                            if last.count == *count && last.cpus == *cpus && last.running == *running {
                                continue;
                            }
                            last.to = e.t;
                        }
                        lane.segments.push(Segment { from: e.t, to: Nanos::MAX, count: *count, cpus: cpus.clone(), running: *running });
                    }
                }
                (EventKind::Exit { status }, Some(id)) => {
                    if let Some(&i) = index.get(&id) {
                        let lane = &mut t.lanes[i];
                        lane.exit = e.t;
                        lane.status = *status;
                        if let Some(last) = lane.segments.last_mut() {
                            last.to = e.t;
                        }
                    }
                }
                _ => {}
            }
        }
        let end = t.end;
        for lane in &mut t.lanes {
            lane.exit = lane.exit.min(end);
            for s in &mut lane.segments {
                s.to = s.to.min(lane.exit);
            }
            lane.segments.retain(|s| s.to > s.from);
        }
        t
    }

    /// Folds a trace that holds several runs one after another (`cpumgr sim --trace` with
    /// several policies: each run begins with its own `start` event and numbers its programs
    /// from 1 again) into one timeline per run. A trace of one run gives one timeline, the same as
    /// [`Timeline::from_events`]; events before the first `start` belong to the first run.
    pub fn runs(events: &[Event]) -> Vec<Timeline> {
        let mut starts: Vec<usize> = events.iter().enumerate().filter(|(_, e)| matches!(e.kind, EventKind::Start { .. })).map(|(i, _)| i).collect();
        if starts.first() != Some(&0) {
            starts.insert(0, 0);
        }
        starts.iter().enumerate().map(|(k, &from)| Timeline::from_events(&events[from..starts.get(k + 1).copied().unwrap_or(events.len())])).collect()
    }

    /// Which program owned each CPU over time: per CPU of [`Timeline::cpus`], the running
    /// segments that held it, as (from, to, lane index).
    pub fn cpu_owners(&self) -> Vec<(u32, Ownership)> {
        let mut per_cpu: std::collections::BTreeMap<u32, Ownership> =
            self.cpus.iter().map(|c| (c, Vec::new())).collect();
        for (i, lane) in self.lanes.iter().enumerate() {
            for s in lane.segments.iter().filter(|s| s.running) {
                for c in s.cpus.iter() {
                    per_cpu.entry(c).or_default().push((s.from, s.to, i));
                }
            }
        }
        per_cpu.into_iter().map(|(c, mut v)| {
            v.sort_unstable();
            (c, v)
        }).collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Two programs on two CPUs: `a` alone, then both, then `a` exits and `b` takes both.
    pub(crate) fn sample() -> Vec<Event> {
        let cpus = |s: &str| CpuSet::parse(s).unwrap();
        let ev = |t: u64, p: Option<u64>, kind: EventKind| Event { t, program: p.map(ProgramId), kind };
        vec![
            ev(0, None, EventKind::Start { source: "sim".into(), cpus: cpus("0-1"), policy: "equipartition".into(), quantum: 100 }),
            ev(0, Some(1), EventKind::Arrive { name: "a".into(), request: 2 }),
            ev(0, Some(1), EventKind::Allocate { count: 2, cpus: cpus("0-1"), running: true }),
            ev(100, Some(2), EventKind::Arrive { name: "b".into(), request: 2 }),
            ev(100, Some(1), EventKind::Allocate { count: 1, cpus: cpus("0"), running: true }),
            ev(100, Some(2), EventKind::Allocate { count: 1, cpus: cpus("1"), running: true }),
            ev(200, Some(1), EventKind::Allocate { count: 1, cpus: cpus("0"), running: true }),
            ev(300, Some(1), EventKind::Exit { status: Some(0) }),
            ev(300, Some(2), EventKind::Allocate { count: 2, cpus: cpus("0-1"), running: true }),
            ev(400, Some(2), EventKind::Exit { status: Some(3) }),
        ]
    }

    #[test]
    fn folds_events_into_segments() {
        let t = Timeline::from_events(&sample());
        assert_eq!(t.policy, "equipartition");
        assert_eq!(t.end, 400);
        assert_eq!(t.lanes.len(), 2);
        let a = &t.lanes[0];
        assert_eq!(a.segments.iter().map(|s| (s.from, s.to, s.count)).collect::<Vec<_>>(), vec![(0, 100, 2), (100, 300, 1)]);
        assert_eq!(t.lanes[1].status, Some(3));
        assert_eq!(t.lanes[1].first_run(), Some(100));
        let owners = t.cpu_owners();
        assert_eq!(owners[1].1, vec![(0, 100, 0), (100, 300, 1), (300, 400, 1)]);
    }

    #[test]
    fn a_trace_of_several_runs_folds_into_one_timeline_each() {
        let mut events = sample();
        let mut second = sample();
        if let EventKind::Start { policy, .. } = &mut second[0].kind {
            *policy = "gang".into();
        }
        events.extend(second);
        let runs = Timeline::runs(&events);
        assert_eq!(runs.iter().map(|t| t.policy.as_str()).collect::<Vec<_>>(), vec!["equipartition", "gang"]);
        let one = Timeline::from_events(&sample());
        assert_eq!(runs[0], one);
        assert_eq!(runs[1].lanes, one.lanes, "program ids restart per run without mixing lanes");
        assert_eq!(Timeline::runs(&sample()), vec![one]);
    }

    #[test]
    fn parse_errors_name_the_line() {
        let text = "{\"t\":0,\"kind\":\"policy\",\"policy\":\"gang\"}\n\nnot json\n";
        let e = parse_trace("run.trace", text).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.to_string().starts_with("run.trace:3:"), "{e}");
    }
}
