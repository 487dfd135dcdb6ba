//! Workloads: the jobs of a run, and the machine and admission settings they come with. A
//! workload is read from a TOML file, an SWF trace, a generator or a preset.
//!
//! ```toml
//! name = "mixed"
//! cpus = 64                   # machine size when no --topology is given
//! mpl = 4                     # jobs admitted at once (0: no limit)
//! quantum_ms = 100            # optional
//! [cost]                      # optional: the cost-of-sharing model's parameters
//! sync_shared = 0.4
//!
//! [[job]]
//! name = "swim"
//! class = "swim"              # default: the name
//! arrival = 0.0               # seconds
//! kind = "malleable"          # or "moldable", "rigid" (with procs), "evolving"
//! request = 32                # most CPUs it uses
//! work = 120.0                # CPU-seconds (one parallel phase), or `phases`, or a `pattern`
//! speedup = { model = "amdahl", serial = 0.01 }
//! sync = 0.5                  # 0..1, how much it synchronises
//! repeat = 3                  # copies; each arrives `every` seconds after the last
//! every = 0.0
//! # phases = [{ work = 1.0, request = 1 }, { work = 60.0 }]
//! # pattern = "ltomcatv"; iterations = 10; io = 0.5   (or "epd": iterations of `work`)
//!
//! [generator]                 # instead of (or besides) [[job]]: generated jobs
//! model = "lublin"            # or "poisson"
//! jobs = 1000
//! load = 0.7
//! ```

use cpumgr_core::{Kind, Nanos};
use serde::Deserialize;

use crate::cost::CostModel;
use crate::error::InputError;
use crate::generate::{Generator, JobKind, Model};
use crate::job::{epd, ltomcatv, JobSpec, Phase, Phases};
use crate::limits;
use crate::speedup::SpeedupModel;

/// The jobs of a run and their settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Its name.
    pub name: String,
    /// Machine size it was made for.
    pub cpus: Option<u32>,
    /// Jobs admitted at once; 0 for no limit.
    pub mpl: u32,
    /// The quantum it asks for.
    pub quantum: Option<Nanos>,
    /// The cost model it asks for.
    pub cost: Option<CostModel>,
    /// Listed jobs, in arrival order.
    pub jobs: Vec<JobSpec>,
    /// Generated jobs, after the listed ones in time order.
    pub generator: Option<Generator>,
    /// Policies to compare when none are given.
    pub policies: Vec<String>,
}

impl Workload {
    /// A workload of `jobs` with no limits.
    pub fn of(name: impl Into<String>, mut jobs: Vec<JobSpec>) -> Workload {
        jobs.sort_by_key(|j| j.arrival);
        Workload {
            name: name.into(),
            cpus: None,
            mpl: 0,
            quantum: None,
            cost: None,
            jobs,
            generator: None,
            policies: Vec::new(),
        }
    }

    /// The jobs in arrival order (listed and generated merged; ties: listed first).
    pub fn jobs(&self) -> Box<dyn Iterator<Item = JobSpec> + Send + '_> {
        let listed = self.jobs.iter().cloned();
        match &self.generator {
            None => Box::new(listed),
            // Without listed jobs there is nothing to merge: each generated job would pass
            // through the merge's look-ahead (a move of every job) for nothing.
            Some(g) if self.jobs.is_empty() => Box::new(g.iter()),
            Some(g) => Box::new(Merge { a: listed.peekable(), b: g.iter().peekable() }),
        }
    }
}

struct Merge<A: Iterator<Item = JobSpec>, B: Iterator<Item = JobSpec>> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<A: Iterator<Item = JobSpec>, B: Iterator<Item = JobSpec>> Iterator for Merge<A, B> {
    type Item = JobSpec;

    fn next(&mut self) -> Option<JobSpec> {
        match (self.a.peek(), self.b.peek()) {
            (Some(x), Some(y)) if y.arrival < x.arrival => self.b.next(),
            (Some(_), _) => self.a.next(),
            (None, _) => self.b.next(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    name: Option<String>,
    cpus: Option<u32>,
    #[serde(default)]
    mpl: u32,
    quantum_ms: Option<f64>,
    cost: Option<CostModel>,
    #[serde(default)]
    policies: Vec<String>,
    #[serde(default)]
    job: Vec<JobEntry>,
    generator: Option<GeneratorEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PhaseEntry {
    work: f64,
    request: Option<u32>,
    speedup: Option<SpeedupModel>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobEntry {
    name: String,
    class: Option<String>,
    #[serde(default)]
    arrival: f64,
    kind: Option<String>,
    procs: Option<u32>,
    request: Option<u32>,
    min: Option<u32>,
    weight: Option<f64>,
    sync: Option<f64>,
    reports_speedup: Option<bool>,
    work: Option<f64>,
    speedup: Option<SpeedupModel>,
    #[serde(default)]
    phases: Vec<PhaseEntry>,
    pattern: Option<String>,
    iterations: Option<u32>,
    io: Option<f64>,
    repeat: Option<u32>,
    #[serde(default)]
    every: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GeneratorEntry {
    model: String,
    jobs: u64,
    load: Option<f64>,
    seed: Option<u64>,
    max_size: Option<u32>,
    mean_runtime: Option<f64>,
    kind: Option<String>,
    speedup: Option<SpeedupModel>,
}

/// The line of the first `key = ...` in `text` (1 when absent).
fn key_line(text: &str, key: &str) -> usize {
    find_key_line(text, key).unwrap_or(1)
}

/// The 1-based line of the first `key = ...` in `text`, if there is one.
fn find_key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| l.trim_start().strip_prefix(key).is_some_and(|r| r.trim_start().starts_with('=')))
        .map(|k| k + 1)
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Parses a TOML workload read from `file`. Errors name the file, the line and the field.
pub fn parse(file: &str, text: &str) -> Result<Workload, InputError> {
    parse_on(file, text, None)
}

/// [`parse`], checking the listed jobs against a machine of `machine` CPUs when given (the
/// command line's, which overrides the file's `cpus`), else against the file's `cpus`: a job
/// too large for it is an error at its `[[job]]` line.
pub fn parse_on(file: &str, text: &str, machine: Option<u32>) -> Result<Workload, InputError> {
    parse_sized(file, text, |cpus| machine.or(cpus))
}

/// [`parse`], checking the listed jobs against the machine `machine` gives for the file's
/// `cpus` (none: no check), so that a caller learns a default machine only when the file names
/// none (the simulator's is this host's, read from sysfs). A job too large for it is an error at
/// its `[[job]]` line, not at its arrival.
pub fn parse_sized(
    file: &str,
    text: &str,
    machine: impl FnOnce(Option<u32>) -> Option<u32>,
) -> Result<Workload, InputError> {
    // A byte-order mark (editors on some systems write one) is not part of the first line.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let spec: FileSpec = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(text, s.start));
        let field = text
            .lines()
            .nth(line - 1)
            .and_then(|l| l.split_once('='))
            .map(|(k, _)| k.trim().to_string())
            .filter(|k| !k.is_empty() && !k.starts_with('['))
            .or_else(|| e.message().split('`').nth(1).map(str::to_string))
            .unwrap_or_else(|| "-".into());
        InputError::new(file, line, field, e.message().trim())
    })?;
    if let Some(n) = spec.cpus {
        let line = key_line(text, "cpus");
        limits::cpus(n as u64).map_err(|m| InputError::new(file, line, "cpus", m))?;
    }
    // The `[[job]]` table headers (not the words in a comment); jobs given as an inline array
    // are at its `job =` line.
    let headers: Vec<usize> =
        text.lines().enumerate().filter(|(_, l)| l.trim_start().starts_with("[[job]]")).map(|(k, _)| k + 1).collect();
    let inline = key_line(text, "job");
    let cpus = machine(spec.cpus).unwrap_or(u32::MAX);
    let mut jobs = Vec::new();
    for (k, e) in spec.job.into_iter().enumerate() {
        let line = headers.get(k).copied().unwrap_or(inline);
        let bad = |field: &str, m: String| InputError::new(file, line, field, format!("job {:?}: {m}", e.name));
        let job = job_of(&e).map_err(|(f, m)| bad(f, m))?;
        job.check(cpus).map_err(|(f, m)| bad(f, m))?;
        let repeat = e.repeat.unwrap_or(1);
        if !(1..=limits::MAX_REPEAT).contains(&repeat) {
            return Err(bad(
                "repeat",
                format!("{repeat} copies: give 1 to {} (a [generator] makes more)", limits::MAX_REPEAT),
            ));
        }
        if !(e.every.is_finite() && e.every >= 0.0) {
            return Err(bad("every", format!("{} is not a non-negative number of seconds", e.every)));
        }
        limits::nanos(e.arrival + e.every * (repeat - 1) as f64)
            .map_err(|m| bad("every", format!("the last copy arrives at {m}")))?;
        for r in 0..repeat {
            let mut j = job.clone();
            j.arrival = limits::nanos(e.arrival + e.every * r as f64).map_err(|m| bad("every", m))?;
            if repeat > 1 {
                j.name = compact_str::format_compact!("{}#{}", j.name, r + 1);
            }
            jobs.push(j);
        }
    }
    let generator = match spec.generator {
        None => None,
        Some(g) => {
            let line = text.find("[generator]").map_or(1, |o| line_of(text, o));
            // At the field's own line when it is written, else at the section's.
            let bad =
                |field: &str, m: String| InputError::new(file, find_key_line(text, field).unwrap_or(line), field, m);
            let model = match g.model.as_str() {
                "lublin" => Model::Lublin,
                "poisson" => Model::Poisson,
                m => return Err(bad("model", format!("{m:?} is not lublin or poisson"))),
            };
            let Some(cpus) = spec.cpus else {
                return Err(bad("cpus", "a generator needs the workload's `cpus`".into()));
            };
            let mut gen = Generator::new(model, g.jobs, cpus);
            gen.load = g.load.unwrap_or(gen.load);
            if !(gen.load.is_finite() && gen.load > 0.0) {
                return Err(bad("load", format!("{} is not a positive number", gen.load)));
            }
            gen.seed = g.seed.unwrap_or(gen.seed);
            gen.max_size = g.max_size.unwrap_or(cpus);
            if !(1..=cpus).contains(&gen.max_size) {
                return Err(bad(
                    "max_size",
                    format!("{} is not a job size from 1 to the machine's {cpus} CPUs", gen.max_size),
                ));
            }
            gen.mean_runtime = g.mean_runtime.unwrap_or(gen.mean_runtime);
            if !(gen.mean_runtime.is_finite() && gen.mean_runtime > 0.0) {
                return Err(bad("mean_runtime", format!("{} is not a positive number of seconds", gen.mean_runtime)));
            }
            if let Some(k) = g.kind {
                gen.kind = JobKind::parse(&k)
                    .ok_or_else(|| bad("kind", format!("{k:?} is not rigid, moldable or malleable")))?;
            }
            if let Some(s) = g.speedup {
                s.check().map_err(|m| bad("speedup", m))?;
                gen.speedup = s;
            }
            Some(gen)
        }
    };
    if let Some(c) = &spec.cost {
        let line = text.find("[cost]").map_or(1, |o| line_of(text, o));
        c.check().map_err(|(f, m)| InputError::new(file, line, f, m))?;
    }
    let quantum = match spec.quantum_ms {
        Some(q) => {
            let line = key_line(text, "quantum_ms");
            Some(limits::quantum(q).map_err(|m| InputError::new(file, line, "quantum_ms", m))?)
        }
        None => None,
    };
    let mut w = Workload::of(spec.name.unwrap_or_else(|| file.to_string()), jobs);
    w.cpus = spec.cpus;
    w.mpl = spec.mpl;
    w.quantum = quantum;
    w.cost = spec.cost;
    w.generator = generator;
    w.policies = spec.policies;
    Ok(w)
}

/// Builds a job from its table; errors are (field, message).
fn job_of(e: &JobEntry) -> Result<JobSpec, (&'static str, String)> {
    let kind = match (e.kind.as_deref().unwrap_or(if e.procs.is_some() { "rigid" } else { "malleable" }), e.procs) {
        ("malleable", None) => Kind::Malleable,
        ("moldable", None) => Kind::Moldable,
        ("evolving", None) => Kind::Evolving,
        ("rigid", Some(n)) if n > 0 => Kind::Rigid(n),
        ("rigid", _) => return Err(("procs", "a rigid job needs procs >= 1".into())),
        (k @ ("malleable" | "moldable" | "evolving"), Some(_)) => {
            return Err(("procs", format!("procs is only for rigid jobs, not {k}")))
        }
        (k, _) => return Err(("kind", format!("{k:?} is not malleable, moldable, rigid or evolving"))),
    };
    let request = e.request.or(e.procs).ok_or(("request", "give the CPUs the job wants (`request`)".to_string()))?;
    let arrival = limits::nanos(e.arrival).map_err(|m| ("arrival", m))?;
    let speedup = e.speedup.clone().unwrap_or(SpeedupModel::LINEAR);
    speedup.check().map_err(|m| ("speedup", m))?;
    let phases: Phases = match (e.pattern.as_deref(), e.work, e.phases.is_empty()) {
        (Some("epd"), Some(w), true) => {
            let iterations = e.iterations.unwrap_or(1).max(1);
            (0..iterations).flat_map(|_| epd(request, w, &speedup)).collect()
        }
        (Some("ltomcatv"), Some(w), true) => {
            ltomcatv(request, e.iterations.unwrap_or(1).max(1), e.io.unwrap_or(1.0), w, &speedup).into()
        }
        (Some(p @ ("epd" | "ltomcatv")), _, _) => {
            return Err(("pattern", format!("the {p} pattern needs `work` and no `phases`")))
        }
        (Some(p), _, _) => return Err(("pattern", format!("{p:?} is not epd or ltomcatv"))),
        (None, Some(w), true) => Phase::parallel(w, request, speedup.clone()).into(),
        (None, None, false) => e
            .phases
            .iter()
            .map(|p| Phase {
                work: p.work,
                request: p.request.unwrap_or(request),
                speedup: p.speedup.clone().unwrap_or(speedup.clone()),
            })
            .collect(),
        (None, Some(_), false) => return Err(("work", "give either `work` or `phases`, not both".into())),
        (None, None, true) => return Err(("work", "the job has no work: give `work`, `phases` or a `pattern`".into())),
    };
    Ok(JobSpec {
        name: e.name.as_str().into(),
        class: e.class.as_deref().unwrap_or(&e.name).into(),
        arrival,
        kind: if e.pattern.is_some() && e.kind.is_none() { Kind::Evolving } else { kind },
        request,
        min: e.min.unwrap_or(match kind {
            Kind::Rigid(n) => n,
            _ => 1,
        }),
        weight: e.weight.unwrap_or(1.0),
        sync: e.sync.unwrap_or(0.5),
        reports_speedup: e.reports_speedup.unwrap_or(true),
        phases,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "demo"
cpus = 16
mpl = 2
[[job]]
name = "a"
request = 8
work = 80.0
speedup = { model = "amdahl", serial = 0.1 }
repeat = 2
every = 5.0

[[job]]
name = "b"
procs = 4
work = 10.0

[[job]]
name = "lt"
request = 16
pattern = "ltomcatv"
iterations = 2
io = 0.5
work = 30.0
"#;

    #[test]
    fn reads_jobs_repeats_and_patterns() {
        let w = parse("w.toml", GOOD).unwrap();
        assert_eq!((w.name.as_str(), w.cpus, w.mpl), ("demo", Some(16), 2));
        let names: Vec<&str> = w.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, vec!["a#1", "b", "lt", "a#2"], "sorted by arrival, ties in file order");
        assert_eq!(w.jobs[3].arrival, 5_000_000_000);
        assert_eq!(w.jobs[1].kind, Kind::Rigid(4));
        assert_eq!(w.jobs[2].kind, Kind::Evolving);
        assert_eq!(w.jobs[2].phases.len(), 4);
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let unknown = "cpus = 4\n[[job]]\nname = \"a\"\nrequest = 2\nwork = 1.0\ncolour = \"red\"\n";
        let e = parse("w.toml", unknown).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (6, "colour"), "{e}");
        let too_big = "cpus = 4\n[[job]]\nname = \"a\"\nrequest = 8\nwork = 1.0\n";
        let e = parse("w.toml", too_big).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "request"), "{e}");
        assert!(e.message.contains("machine has 4"), "{e}");
        let bad_speedup =
            "[[job]]\nname = \"a\"\nrequest = 2\nwork = 1.0\nspeedup = { model = \"amdahl\", serial = 2.0 }\n";
        let e = parse("w.toml", bad_speedup).unwrap_err();
        assert_eq!(e.field, "speedup", "{e}");
        let not_number = "[[job]]\nname = \"a\"\nrequest = \"many\"\nwork = 1.0\n";
        let e = parse("w.toml", not_number).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (3, "request"), "{e}");
        let no_work = "[[job]]\nname = \"a\"\nrequest = 2\n";
        assert_eq!(parse("w.toml", no_work).unwrap_err().field, "work");
    }

    #[test]
    fn absurd_numbers_are_errors_not_overflows() {
        let job = "[[job]]\nname = \"a\"\nrequest = 2\nwork = 1.0\n";
        let cases = [
            (format!("{job}arrival = 1e300\n"), 1, "arrival"),
            (format!("{job}repeat = 3\nevery = 1e300\n"), 1, "every"),
            (format!("{job}repeat = 900000\nevery = 10000.0\n"), 1, "every"),
            (format!("{job}repeat = 4000000000\n"), 1, "repeat"),
            (format!("# cpus: the machine\nname = \"x\"\ncpus = 4000000000\n{job}"), 3, "cpus"),
            (format!("quantum_ms = 1e300\n{job}"), 1, "quantum_ms"),
        ];
        for (text, line, field) in cases {
            let e = parse("w.toml", &text).unwrap_err();
            assert_eq!((e.line, e.field.as_str()), (line, field), "{e}");
        }
    }

    #[test]
    fn a_default_machine_is_asked_for_only_when_the_file_names_none() {
        let job = "[[job]]\nname = \"big\"\nrequest = 8\nwork = 1.0\n";
        let mut asked = None;
        let e = parse_sized("w.toml", &format!("name = \"w\"\n\n{job}"), |cpus| {
            asked = Some(cpus);
            cpus.or(Some(4))
        })
        .unwrap_err();
        assert_eq!((asked, e.line, e.field.as_str()), (Some(None), 3, "request"), "{e}");
        assert!(e.message.contains("machine has 4"), "{e}");
        let w = parse_sized("w.toml", &format!("cpus = 16\n{job}"), |cpus| cpus.or(Some(4))).unwrap();
        assert_eq!(w.cpus, Some(16), "the file's size wins over the default");
    }
}
