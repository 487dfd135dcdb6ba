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
    /// The share of the stretch it ran: 1 for a stretch its trace lists stop by stop; over a
    /// repeated span (`repeated`), where it ran on `count` of `cpus` at a time, that share of the
    /// span (1 when it held `count` CPUs all the time, less when it also waited).
    pub share: f64,
    /// Whether the stretch folds a span the simulator skipped ([`EventKind::Repeat`]): `cpus`
    /// are then every CPU it ran on in the repeated period and `count` the most it held at once,
    /// so it held each CPU for a part of the time only, even at a share of 1 when it moved
    /// between sets. A stretch its trace lists (the live manager's gives a program a set that
    /// may be larger than its count) holds every CPU of `cpus` throughout.
    pub repeated: bool,
}

impl Segment {
    /// CPU-nanoseconds it held while running.
    pub fn held(&self) -> f64 {
        self.held_in(self.from, self.to)
    }

    /// CPU-nanoseconds it held while running within `from..to`, a part of it.
    fn held_in(&self, from: Nanos, to: Nanos) -> f64 {
        self.mean_cpus() * to.saturating_sub(from) as f64
    }

    /// Whether, in a repeated span, it held each of its CPUs for only part of the time (its turn,
    /// or its moves between sets of the span): the CPU chart, the replay, the tooltip and the
    /// Paraver export all call it shared by this one rule.
    pub fn is_shared(&self) -> bool {
        self.repeated && self.mean_cpus() < self.cpus.len() as f64
    }

    /// The CPUs it held on average: its count while it ran, times the share of the time it ran.
    pub fn mean_cpus(&self) -> f64 {
        if self.running {
            f64::from(self.count) * self.share
        } else {
            0.0
        }
    }
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
    /// How its parallel team ran from when on (the trace's `team` events: `folding`, `rigid`).
    pub teams: Vec<(Nanos, String)>,
}

impl Lane {
    /// When it first got a CPU and ran, if it ever did.
    pub fn first_run(&self) -> Option<Nanos> {
        self.segments.iter().find(|s| s.running && s.count > 0).map(|s| s.from)
    }

    /// Folds a repetition ([`EventKind::Repeat`] at `at`): what the lane ran over the `period`
    /// before `at` becomes one segment from `at` to `until` with that share of the time, and the
    /// allocation in force at `at` goes on from `until`. A lane that did not run in the period
    /// keeps its allocation through the span (it was stopped, or waited, throughout). `earlier`:
    /// the repetitions folded before, as (start, period), for a period that reaches into one.
    fn repeat(&mut self, at: Nanos, period: Nanos, until: Nanos, earlier: &[(Nanos, Nanos)]) {
        let Some(last) = self.segments.last().cloned() else { return };
        let Usage { held, count, cpus } = self.usage(at.saturating_sub(period), at, earlier);
        if held <= 0.0 || period == 0 {
            return;
        }
        let share = (held / (f64::from(count) * period as f64)).min(1.0);
        if let Some(open) = self.segments.last_mut() {
            open.to = at;
        }
        self.segments.push(Segment { from: at, to: until, count, cpus, running: true, share, repeated: true });
        self.segments.push(Segment { from: until, to: Nanos::MAX, repeated: false, ..last });
    }

    /// What the lane ran over `from..to`. Within an earlier repeated span the period it repeats is
    /// read, not the span's mean: a part of a span is not the mean of the whole.
    fn usage(&self, from: Nanos, to: Nanos, earlier: &[(Nanos, Nanos)]) -> Usage {
        let mut u = Usage::default();
        let first = self.segments.partition_point(|s| s.to <= from);
        for s in self.segments[first..].iter().take_while(|s| s.from < to) {
            let (x, y) = (s.from.max(from), s.to.min(to));
            if y <= x || !s.running || s.count == 0 {
                continue;
            }
            match earlier.iter().find(|&&(start, _)| start == s.from).filter(|_| s.repeated) {
                Some(&(start, p)) if p > 0 => {
                    // The span repeats `start - p..start`: whole periods, then the rest, which
                    // may wrap around the period's end.
                    let window = start.saturating_sub(p);
                    let whole = (y - x) / p;
                    if whole > 0 {
                        u.add(self.usage(window, start, earlier), whole as f64);
                    }
                    let (offset, rest) = ((x - start) % p, (y - x) % p);
                    let head = rest.min(p - offset);
                    u.add(self.usage(window + offset, window + offset + head, earlier), 1.0);
                    u.add(self.usage(window, window + rest - head, earlier), 1.0);
                }
                _ => u.add(Usage { held: s.held_in(x, y), count: s.count, cpus: s.cpus.clone() }, 1.0),
            }
        }
        u
    }
}

/// What a lane ran over a stretch: CPU-nanoseconds, the most CPUs at once, every CPU used.
#[derive(Debug, Default)]
struct Usage {
    held: f64,
    count: u32,
    cpus: CpuSet,
}

impl Usage {
    /// Adds `times` times `other`'s CPU time, and its CPUs.
    fn add(&mut self, other: Usage, times: f64) {
        if other.held > 0.0 {
            self.held += other.held * times;
            self.count = self.count.max(other.count);
            self.cpus = self.cpus.union(&other.cpus);
        }
    }
}

/// How many turns a CPU's sharers take over a repeated span in a chart ([`Timeline::cpu_owners`]):
/// enough to show them taking turns, few enough that a span of millions of periods stays a few
/// spans per CPU.
pub const CHART_TURNS: u64 = 32;

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
        // The repetitions folded so far, as (start, period).
        let mut repeats: Vec<(Nanos, Nanos)> = Vec::new();
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
                    t.lanes.push(Lane {
                        id,
                        name: name.clone(),
                        arrival: e.t,
                        exit: Nanos::MAX,
                        status: None,
                        segments: Vec::new(),
                        teams: Vec::new(),
                    });
                }
                (EventKind::Repeat { period, until }, _) => {
                    t.end = t.end.max(*until);
                    for lane in t.lanes.iter_mut().filter(|l| l.exit == Nanos::MAX) {
                        lane.repeat(e.t, *period, *until, &repeats);
                    }
                    repeats.push((e.t, *period));
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
                        lane.segments.push(Segment {
                            from: e.t,
                            to: Nanos::MAX,
                            count: *count,
                            cpus: cpus.clone(),
                            running: *running,
                            share: 1.0,
                            repeated: false,
                        });
                    }
                }
                (EventKind::Team { team, .. }, Some(id)) => {
                    if let Some(&i) = index.get(&id) {
                        t.lanes[i].teams.push((e.t, team.clone()));
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
        let mut starts: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e.kind, EventKind::Start { .. }))
            .map(|(i, _)| i)
            .collect();
        if starts.first() != Some(&0) {
            starts.insert(0, 0);
        }
        starts
            .iter()
            .enumerate()
            .map(|(k, &from)| Timeline::from_events(&events[from..starts.get(k + 1).copied().unwrap_or(events.len())]))
            .collect()
    }

    /// Which program owned each CPU over time: per CPU of [`Timeline::cpus`], the running
    /// segments that held it, as (from, to, lane index). Over a repeated span
    /// ([`EventKind::Repeat`]), where programs took turns on a CPU faster than the span can show,
    /// the span is cut into `turns` stripes ([`CHART_TURNS`] for a chart; 1 for an export, whose
    /// size should follow the trace's), and in each its sharers follow one another in lane
    /// order, each for its share of the stripe (its mean CPUs, [`Segment::mean_cpus`], over the
    /// CPUs it ran on: a program that held all its CPUs all the time but moved between sets
    /// shares each too); what none of them used is idle. A program that held each of its CPUs
    /// throughout the span, and any stretch its trace lists, holds them whole.
    pub fn cpu_owners(&self, turns: u64) -> Vec<(u32, Ownership)> {
        let mut per_cpu: std::collections::BTreeMap<u32, Ownership> =
            self.cpus.iter().map(|c| (c, Vec::new())).collect();
        let mut shared: std::collections::BTreeMap<(u32, Nanos, Nanos), Vec<(usize, f64)>> =
            std::collections::BTreeMap::new();
        for (i, lane) in self.lanes.iter().enumerate() {
            for s in lane.segments.iter().filter(|s| s.running) {
                let shared_here = s.is_shared();
                let weight = s.mean_cpus() / s.cpus.len().max(1) as f64;
                for c in s.cpus.iter() {
                    if shared_here {
                        shared.entry((c, s.from, s.to)).or_default().push((i, weight));
                    } else {
                        per_cpu.entry(c).or_default().push((s.from, s.to, i));
                    }
                }
            }
        }
        for ((c, from, to), sharers) in shared {
            let total: f64 = sharers.iter().map(|&(_, w)| w).sum::<f64>().max(1.0);
            let spans = per_cpu.entry(c).or_default();
            // In turns, as they ran: the span cut into stripes (none shorter than a nanosecond),
            // each shared in the same proportions.
            let turns = (to - from).clamp(1, turns.max(1));
            for k in 0..turns {
                let (stripe, end) = (from + (to - from) * k / turns, from + (to - from) * (k + 1) / turns);
                let (mut at, mut used) = (stripe, 0.0);
                for &(i, w) in &sharers {
                    used += w / total;
                    let next = (stripe + ((end - stripe) as f64 * used).round() as Nanos).min(end);
                    if next > at {
                        spans.push((at, next, i));
                    }
                    at = next;
                }
            }
        }
        per_cpu
            .into_iter()
            .map(|(c, mut v)| {
                v.sort_unstable();
                (c, v)
            })
            .collect()
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
            ev(
                0,
                None,
                EventKind::Start {
                    source: "sim".into(),
                    cpus: cpus("0-1"),
                    policy: "equipartition".into(),
                    quantum: 100,
                },
            ),
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
    fn team_events_reach_their_lane() {
        let mut events = sample();
        let team = |t: u64, how: &str| Event {
            t,
            program: Some(ProgramId(1)),
            kind: EventKind::Team { team: how.into(), threads: 2 },
        };
        events.insert(3, team(50, "folding"));
        events.insert(7, team(150, "rigid"));
        let t = Timeline::from_events(&events);
        assert_eq!(t.lanes[0].teams, vec![(50, "folding".to_string()), (150, "rigid".to_string())]);
        assert!(t.lanes[1].teams.is_empty());
    }

    /// Two programs on four CPUs under a repeating schedule: `a` moves between CPUs 0-1 and 2-3
    /// every 100 ns and `b` holds the other two, so each holds two CPUs all the time; the period
    /// 0..200 repeats from 200 to 1 200, and both exit at 1 300.
    pub(crate) fn moving() -> Vec<Event> {
        let cpus = |s: &str| CpuSet::parse(s).unwrap();
        let ev = |t: u64, p: Option<u64>, kind: EventKind| Event { t, program: p.map(ProgramId), kind };
        let run =
            |t: u64, p: u64, c: &str| ev(t, Some(p), EventKind::Allocate { count: 2, cpus: cpus(c), running: true });
        vec![
            ev(
                0,
                None,
                EventKind::Start { source: "sim".into(), cpus: cpus("0-3"), policy: "gang".into(), quantum: 100 },
            ),
            ev(0, Some(1), EventKind::Arrive { name: "a".into(), request: 2 }),
            ev(0, Some(2), EventKind::Arrive { name: "b".into(), request: 2 }),
            run(0, 1, "0-1"),
            run(0, 2, "2-3"),
            run(100, 1, "2-3"),
            run(100, 2, "0-1"),
            run(200, 1, "0-1"),
            run(200, 2, "2-3"),
            ev(200, None, EventKind::Repeat { period: 200, until: 1_200 }),
            ev(1_300, Some(1), EventKind::Exit { status: Some(0) }),
            ev(1_300, Some(2), EventKind::Exit { status: Some(0) }),
        ]
    }

    #[test]
    fn folds_events_into_segments() {
        let t = Timeline::from_events(&sample());
        assert_eq!(t.policy, "equipartition");
        assert_eq!(t.end, 400);
        assert_eq!(t.lanes.len(), 2);
        let a = &t.lanes[0];
        assert_eq!(
            a.segments.iter().map(|s| (s.from, s.to, s.count)).collect::<Vec<_>>(),
            vec![(0, 100, 2), (100, 300, 1)]
        );
        assert_eq!(t.lanes[1].status, Some(3));
        assert_eq!(t.lanes[1].first_run(), Some(100));
        let owners = t.cpu_owners(CHART_TURNS);
        assert_eq!(owners[1].1, vec![(0, 100, 0), (100, 300, 1), (300, 400, 1)]);
    }

    #[test]
    fn a_repeated_span_is_each_program_s_share_of_the_period_before_it() {
        let cpus = |s: &str| CpuSet::parse(s).unwrap();
        let ev = |t: u64, p: Option<u64>, kind: EventKind| Event { t, program: p.map(ProgramId), kind };
        let run = |t: u64, p: u64, c: &str| {
            ev(t, Some(p), EventKind::Allocate { count: cpus(c).len() as u32, cpus: cpus(c), running: true })
        };
        let stop =
            |t: u64, p: u64| ev(t, Some(p), EventKind::Allocate { count: 0, cpus: CpuSet::new(), running: false });
        // Two programs take turns on two CPUs every 100 ns (`a` on both, then `b` on one); a third
        // waits throughout. The period 0..200 repeats from 200 to 1 200; the turns go on after.
        let events = vec![
            ev(
                0,
                None,
                EventKind::Start { source: "sim".into(), cpus: cpus("0-1"), policy: "gang".into(), quantum: 100 },
            ),
            ev(0, Some(1), EventKind::Arrive { name: "a".into(), request: 2 }),
            ev(0, Some(2), EventKind::Arrive { name: "b".into(), request: 1 }),
            ev(0, Some(3), EventKind::Arrive { name: "c".into(), request: 4 }),
            run(0, 1, "0-1"),
            stop(100, 1),
            run(100, 2, "1"),
            stop(200, 2),
            run(200, 1, "0-1"),
            ev(200, None, EventKind::Repeat { period: 200, until: 1_200 }),
            stop(1_300, 1),
            run(1_300, 2, "1"),
            ev(1_400, Some(1), EventKind::Exit { status: Some(0) }),
            ev(1_400, Some(2), EventKind::Exit { status: Some(0) }),
        ];
        let t = Timeline::from_events(&events);
        let spans = |i: usize| {
            t.lanes[i].segments.iter().map(|s| (s.from, s.to, s.count, s.running, s.share)).collect::<Vec<_>>()
        };
        assert_eq!(
            spans(0),
            vec![
                (0, 100, 2, true, 1.0),
                (100, 200, 0, false, 1.0),
                (200, 1_200, 2, true, 0.5),
                (1_200, 1_300, 2, true, 1.0),
                (1_300, 1_400, 0, false, 1.0)
            ]
        );
        assert_eq!(
            spans(1),
            vec![
                (100, 200, 1, true, 1.0),
                (200, 1_200, 1, true, 0.5),
                (1_200, 1_300, 0, false, 1.0),
                (1_300, 1_400, 1, true, 1.0)
            ]
        );
        assert!(t.lanes[2].segments.is_empty(), "a program that never ran has nothing to repeat");
        let held = |i: usize| t.lanes[i].segments.iter().map(Segment::held).sum::<f64>();
        assert_eq!(
            (held(0), held(1)),
            (2.0 * 100.0 + 2.0 * 500.0 + 2.0 * 100.0, 100.0 + 500.0 + 100.0),
            "the quantum-by-quantum run's CPU time"
        );
        // CPU 1 was `a`'s half the time and `b`'s the other half: the span shows them in turns.
        let owners = t.cpu_owners(CHART_TURNS);
        let within =
            |cpu: usize| owners[cpu].1.iter().filter(|o| o.0 >= 200 && o.1 <= 1_200).copied().collect::<Vec<_>>();
        let turns = within(1);
        assert_eq!(turns.len(), 2 * CHART_TURNS as usize, "{turns:?}");
        assert_eq!(turns[..4], [(200, 216, 0), (216, 231, 1), (231, 247, 0), (247, 262, 1)]);
        let held = |spans: &[(Nanos, Nanos, usize)], lane: usize| {
            spans.iter().filter(|o| o.2 == lane).map(|o| o.1 - o.0).sum::<Nanos>()
        };
        assert_eq!(held(&turns, 0) + held(&turns, 1), 1_000, "no gap between turns");
        assert!(held(&turns, 0).abs_diff(500) <= CHART_TURNS, "half each, to a nanosecond a stripe: {turns:?}");
        let blocks = t.cpu_owners(1);
        assert_eq!(
            blocks[1].1.iter().filter(|o| o.0 >= 200 && o.1 <= 1_200).copied().collect::<Vec<_>>(),
            vec![(200, 700, 0), (700, 1_200, 1)],
            "one turn each"
        );
        assert_eq!(held(&within(0), 1), 0, "CPU 0 idle while `b` ran");
        assert_eq!(held(&within(0), 0), held(&turns, 0));
    }

    #[test]
    fn a_program_that_moved_between_cpu_sets_in_a_repeated_period_shares_each_cpu_it_ran_on() {
        let t = Timeline::from_events(&moving());
        let s = &t.lanes[0].segments[2];
        assert_eq!(
            (s.from, s.to, s.count, s.cpus.to_string(), s.share),
            (200, 1_200, 2, "0-3".to_string(), 1.0),
            "two of the four CPUs all the time"
        );
        assert!(
            s.is_shared() && !t.lanes[0].segments[0].is_shared(),
            "shared by the rule the tooltip and Paraver read too"
        );
        // Each CPU was `a`'s half the period and `b`'s the other half: so over the span, in
        // turns in a chart, one turn each in an export; neither holds all four throughout.
        let within = |owners: &[(u32, Ownership)], cpu: usize| {
            owners[cpu].1.iter().filter(|o| o.0 >= 200 && o.1 <= 1_200).copied().collect::<Vec<_>>()
        };
        let held = |spans: &[(Nanos, Nanos, usize)], lane: usize| {
            spans.iter().filter(|o| o.2 == lane).map(|o| o.1 - o.0).sum::<Nanos>()
        };
        let (chart, blocks) = (t.cpu_owners(CHART_TURNS), t.cpu_owners(1));
        for cpu in 0..4 {
            let turns = within(&chart, cpu);
            assert_eq!(turns.len(), 2 * CHART_TURNS as usize, "CPU {cpu}: {turns:?}");
            assert_eq!(held(&turns, 0) + held(&turns, 1), 1_000, "CPU {cpu}: no gap and no overlap");
            assert!(held(&turns, 0).abs_diff(500) <= CHART_TURNS, "CPU {cpu}: half each: {turns:?}");
            assert_eq!(within(&blocks, cpu), vec![(200, 700, 0), (700, 1_200, 1)], "CPU {cpu}: one turn each");
        }
        assert_eq!(chart[0].1.last(), Some(&(1_200, 1_300, 0)), "after the span, `a` back on 0-1");
        assert_eq!(chart[3].1.last(), Some(&(1_200, 1_300, 1)), "and `b` on 2-3");
    }

    #[test]
    fn a_launch_trace_s_program_holds_every_cpu_of_its_set() {
        // The live manager gives a program a set of CPUs to run its threads on, which may be more
        // CPUs than its count: each CPU of the set is its own while it runs, share or no share.
        let cpus = CpuSet::parse("0-3").unwrap();
        let ev = |t: u64, kind: EventKind| Event { t, program: Some(ProgramId(1)), kind };
        let events = vec![
            Event {
                t: 0,
                program: None,
                kind: EventKind::Start {
                    source: "live".into(),
                    cpus: cpus.clone(),
                    policy: "equipartition".into(),
                    quantum: 100,
                },
            },
            ev(0, EventKind::Arrive { name: "a".into(), request: 4 }),
            ev(0, EventKind::Allocate { count: 2, cpus: cpus.clone(), running: true }),
            ev(400, EventKind::Exit { status: Some(0) }),
        ];
        let t = Timeline::from_events(&events);
        for turns in [1, CHART_TURNS] {
            assert!(
                t.cpu_owners(turns).iter().all(|(_, spans)| spans == &vec![(0, 400, 0)]),
                "{:?}",
                t.cpu_owners(turns)
            );
        }
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
