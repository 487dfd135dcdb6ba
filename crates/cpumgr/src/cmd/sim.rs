//! `cpumgr sim`: run several policies on one modelled workload — a TOML workload file, an SWF
//! trace, or a paper preset — in the discrete-event simulator, and compare them in one table.
//! `--bench` measures the simulator itself.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use cpumgr_core::params::{Params, PolicySpec};
use cpumgr_core::trace::Event;
use cpumgr_core::{policies, Topology};
use cpumgr_report::{render, Report, Table, Timeline};
use cpumgr_sim::bench::{host, peak_rss_mib, process_cpu_seconds, thread_cpu_seconds};
use cpumgr_sim::generate::{Generator, JobKind, Model};
use cpumgr_sim::{presets, swf, CostModel, Observer, RunSummary, SimConfig, SimError, SpeedupModel, Workload};
use serde_json::json;

use crate::input::{open_file, read_file, InputError};

/// Prints a line to stdout; a closed pipe (`| head`) ends the output quietly instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {
        emit(format!($($arg)*))?
    };
}

fn emit(mut line: String) -> anyhow::Result<()> {
    line.push('\n');
    match std::io::stdout().lock().write_all(line.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to stdout"),
    }
}

mod cluster;
mod csv;

/// Arguments of `cpumgr sim`.
#[derive(Debug, Parser)]
pub struct Args {
    /// A TOML workload file.
    #[arg(long, group = "source")]
    workload: Option<PathBuf>,
    /// A trace in the Standard Workload Format.
    #[arg(long, group = "source")]
    swf: Option<PathBuf>,
    /// A paper preset (`--list-presets`), with parameters as `name:key=value,...`.
    #[arg(long, group = "source")]
    preset: Option<String>,
    /// Policies to compare, comma-separated (`equipartition,cs:mpl=4,fill=false,os`: a piece
    /// with `=` and no `:` is a parameter of the policy before it); default: the workload's.
    #[arg(long, env = "CPUMGR_POLICY")]
    policy: Vec<String>,
    /// The simulated machine (synthetic hwloc spec, XML file, or a CPU count); default: a flat
    /// machine of the workload's size. Not read from `CPUMGR_TOPOLOGY`, which describes the
    /// machine a manager runs on, not the one a workload models.
    #[arg(long)]
    topology: Option<String>,
    /// Machine size: a flat machine of N CPUs, overriding the SWF header's MaxProcs/MaxNodes or
    /// the workload's `cpus` (jobs are checked against it).
    #[arg(long, conflicts_with = "topology")]
    cpus: Option<u32>,
    /// Scheduler quantum in milliseconds; default: the workload's, the policy's, or 100.
    #[arg(long)]
    quantum_ms: Option<f64>,
    /// Most jobs admitted at once; default: the workload's, else the policy's own level (gang
    /// and the time-shared DSS variants admit 8: their `admit` parameter, 0 for every job), else
    /// every job.
    #[arg(long)]
    mpl: Option<u32>,
    /// Simulate every quantum instead of skipping repeating schedules.
    #[arg(long)]
    no_fast_forward: bool,
    /// Cost model: loss per unit of oversubscription shared with other programs.
    #[arg(long)]
    sync_shared: Option<f64>,
    /// Cost model: loss per unit of oversubscription when a rigid job time-shares with itself.
    #[arg(long)]
    sync_self: Option<f64>,
    /// Cost model: milliseconds lost per moved CPU.
    #[arg(long)]
    reload_ms: Option<f64>,
    /// Cost model: milliseconds lost when a stopped program runs again.
    #[arg(long)]
    resume_ms: Option<f64>,
    /// SWF jobs are `rigid` (default), `moldable` or `malleable`.
    #[arg(long, default_value = "rigid")]
    swf_kind: String,
    /// Amdahl serial fraction of SWF jobs (default 0: linear speedup).
    #[arg(long, default_value_t = 0.0)]
    swf_serial: f64,
    /// Skip and count malformed SWF lines instead of failing.
    #[arg(long)]
    skip_bad: bool,
    /// Simulate at most this many SWF jobs: the first ones, of those not left out or skipped.
    #[arg(long)]
    limit: Option<usize>,
    /// Print JSON.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV.
    #[arg(long)]
    csv: bool,
    /// Write the trace events of every run here (JSON lines, one `start` event per run). Periods
    /// of a time-shared schedule that the fast-forward skips are one `repeat` event each (the
    /// period before it repeats until its `until`), not their stops and resumes: with
    /// --no-fast-forward it lists every quantum.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Write a self-contained HTML page here: the comparison table and, per policy, Gantt charts
    /// of programs × time and CPUs × time.
    #[arg(long)]
    report: Option<PathBuf>,
    /// How many policies are simulated at once; default: the CPUs available. Each run is
    /// independent and deterministic, so the table is the same whatever the number; runs whose
    /// events are written (`--trace`, `--report`) go one at a time, in order.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: Option<u32>,
    /// Simulate a cluster of this many nodes (`--swf` only): jobs wait for nodes under a batch
    /// scheduler (`--batch`); `--policy` lists how nodes are used: `exclusive` (whole nodes per
    /// job) or a policy that arbitrates shared nodes (`os` for none); default
    /// `exclusive,os,equipartition`.
    #[arg(long, requires = "swf", conflicts_with_all = ["trace", "report", "bench", "topology", "mpl", "quantum_ms", "no_fast_forward"])]
    nodes: Option<u32>,
    /// CPUs per node; default: the machine's CPUs (`--cpus`, else the trace's header) over
    /// `--nodes`.
    #[arg(long, requires = "nodes")]
    node_cpus: Option<u32>,
    /// The cluster's batch scheduler, or several to compare (`fcfs,easy`): `fcfs`, or `easy`
    /// backfilling on the jobs' requested run times.
    #[arg(long, default_value = "easy", requires = "nodes")]
    batch: String,
    /// Processes a shared node takes per CPU (Slurm's `OverSubscribe=FORCE:K`).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64), requires = "nodes")]
    oversubscribe: u32,
    /// List the presets and exit.
    #[arg(long)]
    list_presets: bool,
    /// Measure the simulator: events per second, the SWF trace per policy, a large synthetic run.
    #[arg(long)]
    bench: bool,
    /// How many times `--bench` runs each measurement: it reports the fastest run's CPU time
    /// (others' work on a shared machine only slows a run down) and the slowest's.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    bench_runs: u32,
}

/// Splits `--policy` values into policy specs (see [`Args::policy`]).
fn split_policies(values: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for piece in values.iter().flat_map(|v| v.split(',')).map(str::trim).filter(|p| !p.is_empty()) {
        match out.last_mut() {
            Some(last) if piece.contains('=') && !piece.contains(':') => {
                last.push(',');
                last.push_str(piece);
            }
            _ => out.push(piece.to_string()),
        }
    }
    out
}

fn input(e: cpumgr_sim::InputError) -> anyhow::Error {
    InputError::new(e.to_string())
}

/// A loaded workload, with what loading it learnt on the way.
struct Loaded {
    workload: Workload,
    /// This host's machine, when the workload's jobs were checked against it (read once).
    host: Option<anyhow::Result<Topology>>,
    /// What an SWF trace left out.
    left_out: LeftOut,
}

/// Reads the SWF trace at `path` as the arguments say (`--swf-kind`, `--swf-serial`,
/// `--skip-bad`, `--limit`), on a machine of `cpus` CPUs when given; says on stderr what it left
/// out. Returns its name and the trace, which holds at least one job.
fn read_swf(args: &Args, path: &Path, cpus: Option<u32>) -> anyhow::Result<(String, swf::SwfTrace)> {
    let name = path.display().to_string();
    let kind = JobKind::parse(&args.swf_kind)
        .ok_or_else(|| InputError::new(format!("--swf-kind {:?}: rigid, moldable or malleable", args.swf_kind)))?;
    let speedup = SpeedupModel::Amdahl { serial: args.swf_serial };
    speedup.check().map_err(|m| InputError::new(format!("--swf-serial: {m}")))?;
    let opts = swf::SwfOptions { kind, speedup, skip_bad: args.skip_bad, cpus, limit: args.limit };
    let t = swf::read(&name, open_file(path)?, &opts).map_err(|e| {
        let hint =
            if args.skip_bad || !swf::skippable(&e) { "" } else { " (--skip-bad skips such lines and counts them)" };
        InputError::new(format!("{e}{hint}"))
    })?;
    note_left_out(&name, &t);
    if t.jobs.is_empty() {
        return Err(InputError::new(format!("{name}: no job to simulate")));
    }
    Ok((name, t))
}

/// Loads the workload the arguments name; its machine is `cpus` CPUs when given (the jobs of a
/// workload file or an SWF trace are checked against it), else the file's or the header's, else
/// this host's, and a workload file's jobs are checked against it.
fn load(args: &Args, cpus: Option<u32>) -> anyhow::Result<Loaded> {
    if let Some(path) = &args.workload {
        let text = read_file(path)?;
        let mut host = None;
        let machine = |file: Option<u32>| {
            cpus.or(file)
                .or_else(|| host.insert(crate::topology_arg::load(None)).as_ref().ok().map(|t| t.num_cpus() as u32))
        };
        let workload = cpumgr_sim::workload::parse_sized(&path.display().to_string(), &text, machine).map_err(|e| {
            let on_host = host.is_some() && ["request", "procs"].contains(&e.field.as_str());
            let hint = if on_host {
                " (this host's: the workload names no `cpus`; --cpus or --topology gives another machine)"
            } else {
                ""
            };
            InputError::new(format!("{e}{hint}"))
        })?;
        return Ok(Loaded { workload, host, left_out: LeftOut::default() });
    }
    if let Some(path) = &args.swf {
        let (name, t) = read_swf(args, path, cpus)?;
        let mut workload = Workload::of(name, t.jobs);
        workload.cpus = Some(t.cpus);
        return Ok(Loaded { workload, host: None, left_out: LeftOut::of(t.omitted, t.skipped) });
    }
    if let Some(name) = &args.preset {
        return presets::build(name)
            .map(|workload| Loaded { workload, host: None, left_out: LeftOut::default() })
            .map_err(input);
    }
    Err(InputError::new("give --workload FILE, --swf FILE or --preset NAME (see --list-presets)"))
}

/// What a trace left out of the run, for `--json` (stderr says it in words).
#[derive(Debug, Default, serde::Serialize)]
struct LeftOut {
    /// Jobs the trace says did not run, or that cannot be known, by reason.
    jobs: Vec<swf::Omitted>,
    /// Malformed lines `--skip-bad` skipped.
    bad_lines: usize,
}

impl LeftOut {
    fn of(jobs: Vec<swf::Omitted>, bad_lines: usize) -> LeftOut {
        LeftOut { jobs, bad_lines }
    }
}

/// Says on stderr what of a trace is not used, and why: the header values that cannot size the
/// machine, the jobs the trace says did not run or are unknown, and the bad lines `--skip-bad`
/// skipped.
fn note_left_out(name: &str, t: &swf::SwfTrace) {
    for ignored in &t.ignored_header {
        eprintln!("cpumgr: {ignored}");
    }
    if !t.omitted.is_empty() {
        let jobs: usize = t.omitted.iter().map(|o| o.jobs).sum();
        let why: Vec<String> = t.omitted.iter().map(ToString::to_string).collect();
        eprintln!("cpumgr: {name}: {jobs} jobs not simulated: {}", why.join("; "));
    }
    if let Some(first) = &t.first_skipped {
        eprintln!("cpumgr: {name}: skipped {} bad lines; the first: {first}", t.skipped);
    }
}

/// Writes trace events as JSON lines.
struct TraceWriter<W: Write> {
    out: W,
    error: Option<std::io::Error>,
}

impl<W: Write> TraceWriter<W> {
    fn write(&mut self, e: &Event) {
        if self.error.is_some() {
            return;
        }
        let r = serde_json::to_writer(&mut self.out, e)
            .map_err(std::io::Error::from)
            .and_then(|_| self.out.write_all(b"\n"));
        if let Err(e) = r {
            self.error = Some(e);
        }
    }
}

/// Where a run's events go: the `--trace` file and, for `--report`, a timeline per run.
struct Sink {
    trace: Option<TraceWriter<BufWriter<File>>>,
    /// The current run's events, when a report is wanted.
    events: Option<Vec<Event>>,
}

impl Observer for Sink {
    fn wants_events(&self) -> bool {
        self.trace.is_some() || self.events.is_some()
    }

    fn event(&mut self, e: &Event) {
        if let Some(t) = self.trace.as_mut() {
            t.write(e);
        }
        if let Some(v) = self.events.as_mut() {
            v.push(e.clone());
        }
    }
}

/// Runs one policy on the workload.
fn run_one(
    topology: &Topology,
    w: &Workload,
    spec: &str,
    cfg: &SimConfig,
    obs: &mut dyn Observer,
) -> anyhow::Result<RunSummary> {
    let policy = policies::build_simulated(spec).map_err(|e| InputError::new(e.to_string()))?;
    if let Some(part) = static_part(spec, topology.num_cpus() as u32) {
        check_static(w, spec, part, topology.num_cpus() as u32)?;
    }
    cpumgr_sim::run(topology, spec, policy, w.jobs(), cfg, obs).map_err(|e| match e {
        SimError::Job { .. } => InputError::new(format!("{}: {e}", w.name)),
        e => anyhow::Error::new(e).context(format!("simulating {spec}")),
    })
}

/// Runs every policy of `specs` on the workload, `threads` at a time (each thread takes the next
/// policy not yet started), and returns their results in the order of `specs`, or the first
/// error in that order.
fn run_all(
    topology: &Topology,
    w: &Workload,
    specs: &[String],
    cfg: &SimConfig,
    threads: usize,
) -> anyhow::Result<Vec<RunSummary>> {
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<anyhow::Result<RunSummary>>>> = Mutex::new(specs.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, specs.len().max(1)) {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(spec) = specs.get(k) else { break };
                let result = run_one(topology, w, spec, cfg, &mut ());
                done.lock().expect("no run panics holding the results")[k] = Some(result);
            });
        }
    });
    done.into_inner()
        .expect("no run panicked holding the results")
        .into_iter()
        .map(|r| r.expect("every policy ran"))
        .collect()
}

/// For a `static` policy, the CPUs of its smallest partition on a machine of `cpus`.
fn static_part(spec: &str, cpus: u32) -> Option<u32> {
    let spec = PolicySpec::parse(spec).ok()?;
    let info = policies::info(&spec.name).filter(|i| i.name == "static")?;
    let parts = Params::new(info.name, info.params, &spec.values).ok()?.u32("parts").ok()?;
    Some(cpus / parts.clamp(1, cpus.max(1)))
}

/// A processor set runs one job at a time within its own CPUs, so a rigid job wider than the
/// smallest set can never start (the run would end starved after the machine drained). Refuse
/// such a workload before running, naming the widest job and how many parts would fit it.
fn check_static(w: &Workload, spec: &str, part: u32, cpus: u32) -> anyhow::Result<()> {
    let mut widest: Option<(cpumgr_core::Name, u32)> = None;
    for j in w.jobs() {
        if let Some(n) =
            j.kind.rigid_procs().map(|n| n.min(cpus)).filter(|&n| n > part && widest.as_ref().is_none_or(|w| n > w.1))
        {
            widest = Some((j.name, n));
        }
    }
    match widest {
        Some((name, n)) => Err(InputError::new(format!(
            "{}: policy {spec}: job {name:?} needs {n} CPUs but a partition has {part} of the {cpus}; \
             a processor set cannot run a job wider than itself: use fewer parts (static:parts={})",
            w.name,
            (cpus / n).max(1)
        ))),
        None => Ok(()),
    }
}

/// The simulation settings from the arguments and the workload.
fn config(args: &Args, w: &Workload) -> anyhow::Result<SimConfig> {
    let cost = config_cost(args, w.cost.unwrap_or_default())?;
    let quantum = match args.quantum_ms {
        Some(q) => Some(cpumgr_sim::limits::quantum(q).map_err(|m| InputError::new(format!("--quantum-ms: {m}")))?),
        None => w.quantum,
    };
    Ok(SimConfig {
        quantum,
        cost,
        mpl: args.mpl.unwrap_or(w.mpl),
        fast_forward: !args.no_fast_forward,
        ..SimConfig::default()
    })
}

/// The cost model `base` with the arguments' changes, checked.
fn config_cost(args: &Args, mut cost: CostModel) -> anyhow::Result<CostModel> {
    cost.sync_shared = args.sync_shared.unwrap_or(cost.sync_shared);
    cost.sync_self = args.sync_self.unwrap_or(cost.sync_self);
    cost.reload_ms = args.reload_ms.unwrap_or(cost.reload_ms);
    cost.resume_ms = args.resume_ms.unwrap_or(cost.resume_ms);
    cost.check().map_err(|(f, m)| InputError::new(format!("--{}: {m}", f.replace('_', "-"))))?;
    Ok(cost)
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.list_presets {
        return list_presets(args.json);
    }
    if args.bench {
        return bench(&args);
    }
    if let Some(nodes) = args.nodes {
        return cluster::run(&args, nodes);
    }
    if let Some(n) = args.cpus {
        cpumgr_sim::limits::cpus(n as u64).map_err(|m| InputError::new(format!("--cpus: {m}")))?;
    }
    // A machine given by --topology sizes an SWF trace's jobs as --cpus does.
    let given = args.topology.as_deref().map(|spec| crate::topology_arg::load(Some(spec))).transpose()?;
    let Loaded { workload: mut w, host, left_out } =
        load(&args, args.cpus.or(given.as_ref().map(|t| t.num_cpus() as u32)))?;
    w.cpus = args.cpus.or(w.cpus);
    let topology = match (given, w.cpus) {
        (Some(t), _) => t,
        (None, Some(n)) => Topology::flat(n),
        (None, None) => host.unwrap_or_else(|| crate::topology_arg::load(None))?,
    };
    let specs = if args.policy.is_empty() { w.policies.clone() } else { split_policies(&args.policy) };
    if specs.is_empty() {
        return Err(InputError::new("give --policy (the workload suggests none)"));
    }
    let cfg = config(&args, &w)?;
    let mut sink = Sink { trace: None, events: args.report.as_ref().map(|_| Vec::new()) };
    if let Some(p) = &args.trace {
        let out = BufWriter::new(File::create(p).with_context(|| format!("creating {}", p.display()))?);
        sink.trace = Some(TraceWriter { out, error: None });
    }
    let mut timelines = Vec::new();
    let results = if sink.wants_events() {
        let mut results = Vec::new();
        for spec in &specs {
            results.push(run_one(&topology, &w, spec, &cfg, &mut sink)?);
            if let Some(events) = sink.events.as_mut() {
                timelines.push((spec.clone(), Timeline::from_events(events)));
                events.clear();
            }
        }
        results
    } else {
        let threads =
            args.threads.map_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()), |n| n as usize);
        run_all(&topology, &w, &specs, &cfg, threads)?
    };
    if let (Some(t), Some(p)) = (sink.trace.as_mut(), &args.trace) {
        if let Some(e) = t.error.take() {
            return Err(anyhow::Error::new(e).context(format!("writing {}", p.display())));
        }
        t.out.flush().with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(path) = &args.report {
        let report = Report {
            title: format!("cpumgr sim: {}", w.name),
            notes: vec![format!(
                "simulated on {} CPUs ({}); policies: {}",
                topology.num_cpus(),
                topology.summary(),
                specs.join(", ")
            )],
            table: table(&results),
            runs: timelines,
        };
        std::fs::write(path, render(&report)).with_context(|| format!("writing {}", path.display()))?;
    }
    print_results(&args, &w, &topology, &left_out, &results)
}

/// The comparison table: the documented columns, one row per policy.
fn table(results: &[RunSummary]) -> Table {
    let columns = [
        "policy",
        "makespan",
        "mean_turnaround",
        "mean_slowdown",
        "mean_bounded_slowdown",
        "utilization",
        "fragmentation",
        "fairness",
        "moves",
        "jobs",
        "mpl",
        "events",
        "wall_seconds",
    ];
    let rows = results
        .iter()
        .map(|s| {
            vec![
                s.policy.clone(),
                format!("{:.2}", s.makespan),
                format!("{:.2}", s.mean_turnaround),
                format!("{:.3}", s.mean_slowdown),
                format!("{:.3}", s.mean_bounded_slowdown),
                format!("{:.3}", s.utilization),
                format!("{:.3}", s.fragmentation),
                format!("{:.3}", s.fairness),
                s.moves.to_string(),
                s.jobs.to_string(),
                s.mpl.to_string(),
                s.events.to_string(),
                format!("{:.3}", s.wall_seconds),
            ]
        })
        .collect();
    Table { columns: columns.iter().map(|c| c.to_string()).collect(), rows }
}

fn print_results(
    args: &Args,
    w: &Workload,
    topology: &Topology,
    left_out: &LeftOut,
    results: &[RunSummary],
) -> anyhow::Result<()> {
    if args.json {
        let out = json!({"workload": w.name, "cpus": topology.num_cpus(), "left_out": left_out, "results": results});
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let Table { columns, rows } = table(results);
    if args.csv {
        return csv::print(&columns, &rows);
    }
    outln!("workload {} on {} CPUs ({})", w.name, topology.num_cpus(), topology.summary());
    let short = [
        "policy",
        "makespan s",
        "turnaround s",
        "slowdown",
        "bsld",
        "util",
        "frag",
        "fair",
        "moves",
        "jobs",
        "mpl",
        "events",
        "wall s",
    ];
    for l in aligned(&short, rows) {
        outln!("{l}");
    }
    Ok(())
}

/// A table's lines for a terminal: the `columns`' names, then the `rows`, each column as wide as
/// its widest cell, the first left-aligned and the others right-aligned.
fn aligned(columns: &[&str], rows: Vec<Vec<String>>) -> Vec<String> {
    let widths: Vec<usize> = (0..columns.len())
        .map(|c| rows.iter().map(|r| r[c].len()).chain([columns[c].len()]).max().unwrap_or(0))
        .collect();
    let line = |cells: &[String]| {
        cells
            .iter()
            .enumerate()
            .map(|(c, s)| if c == 0 { format!("{s:<w$}", w = widths[c]) } else { format!("{s:>w$}", w = widths[c]) })
            .collect::<Vec<_>>()
            .join("  ")
    };
    let head: Vec<String> = columns.iter().map(|s| s.to_string()).collect();
    std::iter::once(line(&head)).chain(rows.iter().map(|r| line(r))).collect()
}

fn list_presets(as_json: bool) -> anyhow::Result<()> {
    if as_json {
        let list: Vec<_> = presets::PRESETS
            .iter()
            .map(|p| {
                let w = presets::build(p.name).map_err(|e| anyhow::anyhow!("{e}"))?;
                Ok(json!({"name": p.name, "paper": p.paper, "summary": p.summary, "params": p.params, "cpus": w.cpus, "policies": w.policies}))
            })
            .collect::<anyhow::Result<_>>()?;
        outln!("{}", serde_json::to_string_pretty(&json!({ "presets": list }))?);
        return Ok(());
    }
    for p in presets::PRESETS {
        let w = presets::build(p.name).map_err(|e| anyhow::anyhow!("{e}"))?;
        outln!("{:<20} {:<18} {}", p.name, p.paper, p.summary);
        outln!("{:<20} {:<18} policies: {}", "", "", w.policies.join(" "));
        for s in p.params {
            outln!("{:<20} {:<18}   {}={} ({}): {}", "", "", s.key, s.default_text(), s.range(), s.help);
        }
    }
    Ok(())
}

/// What a benchmarked run took, in seconds.
#[derive(Clone, Copy)]
struct Took {
    /// Wall-clock time: what a user waits.
    wall: f64,
    /// CPU time of the engine's thread (this one): the engine's own cost.
    engine: f64,
    /// CPU time of the whole process: the engine and the thread that produces its jobs.
    process: f64,
}

impl Took {
    /// What `f` returns, and what it took.
    fn of<T>(f: impl FnOnce() -> T) -> (T, Took) {
        let (wall, engine, process) = (Instant::now(), thread_cpu_seconds(), process_cpu_seconds());
        let out = f();
        let took = Took {
            wall: wall.elapsed().as_secs_f64(),
            engine: thread_cpu_seconds() - engine,
            process: process_cpu_seconds() - process,
        };
        (out, took)
    }

    /// The least of each figure over `self` and `other`.
    fn min(self, other: Took) -> Took {
        Took {
            wall: self.wall.min(other.wall),
            engine: self.engine.min(other.engine),
            process: self.process.min(other.process),
        }
    }
}

/// Runs `f` `runs` times (at least once) and returns the first run's result, the least of each
/// figure over the runs, and the longest wall time. On a shared machine others' work only slows
/// a run down, so the fastest is the closest to the simulator's own cost, and the slowest says
/// how noisy the machine was. The simulator is deterministic: every run's result is the same.
fn fastest<T>(runs: u32, mut f: impl FnMut() -> T) -> (T, Took, f64) {
    let (out, mut best) = Took::of(&mut f);
    let mut slowest = best.wall;
    for _ in 1..runs {
        let took = Took::of(&mut f).1;
        slowest = slowest.max(took.wall);
        best = best.min(took);
    }
    (out, best, slowest)
}

/// `--bench`: the simulator's own speed.
fn bench(args: &Args) -> anyhow::Result<()> {
    let specs = if args.policy.is_empty() {
        // Static partitioning with its default two partitions cannot run a trace whose jobs span
        // the machine (a processor set never runs a job wider than itself): one partition.
        policies::CATALOG
            .iter()
            .map(|i| if i.name == "static" { "static:parts=1".to_string() } else { i.name.to_string() })
            .collect()
    } else {
        split_policies(&args.policy)
    };
    let cfg = SimConfig { fast_forward: !args.no_fast_forward, ..SimConfig::default() };
    // 1. Events per second: many short jobs on a wide machine, every quantum simulated. A step
    // is one event however many jobs it serves, so the line gives the mean number of jobs in the
    // system too (Little's law: jobs x mean turnaround / makespan). 200 000 jobs: a run of
    // 0.1-0.2 s, long enough to time on a shared machine.
    let mut g = Generator::new(Model::Poisson, 200_000, 1024);
    g.mean_runtime = 2.0;
    g.max_size = 16;
    g.load = 0.8;
    let w = Workload { cpus: Some(1024), generator: Some(g), ..Workload::of("events", vec![]) };
    let t = Topology::flat(1024);
    let exact = SimConfig { fast_forward: false, ..cfg.clone() };
    let runs = args.bench_runs;
    outln!("host: {}", host());
    outln!("each figure: the fastest of {runs} runs, the slowest run's wall time in brackets; CPU: the engine's thread, and the process (the engine and the thread that produces its jobs)");
    let (s, took, slowest) = fastest(runs, || run_one(&t, &w, "equipartition", &exact, &mut ()));
    let s = s?;
    let population = s.jobs as f64 * s.mean_turnaround / s.makespan;
    outln!("events: 200000 short jobs on 1024 CPUs ({population:.0} in the system on average), equipartition, every quantum: {} events in {}", s.events, per_second(s.events, took, slowest));
    // The same jobs under `os` (no policy, no placement, its own processor-sharing clocks): an
    // upper bound on what the job pipeline every engine shares costs (generation, arrivals,
    // records, a heap of ends), beside the managed run.
    let (s, took, slowest) = fastest(runs, || run_one(&t, &w, "os", &exact, &mut ()));
    let s = s?;
    outln!(
        "        the same jobs under os (no placement): {} events in {}",
        s.events,
        per_second(s.events, took, slowest)
    );
    // 2. The SWF trace (or, without it, a generated Lublin trace of the same size) under every
    // policy.
    let swf_path = args.swf.clone().unwrap_or_else(|| PathBuf::from("../shared/data/swf/lublin_256.swf"));
    let (w, cpus) = if Path::new(&swf_path).is_file() {
        let tr = swf::read(&swf_path.display().to_string(), open_file(&swf_path)?, &swf::SwfOptions::default())
            .map_err(input)?;
        (Workload::of(swf_path.display().to_string(), tr.jobs), tr.cpus)
    } else {
        outln!("swf: {} not found; a generated Lublin trace instead", swf_path.display());
        let g = Generator::new(Model::Lublin, 10_000, 256);
        (Workload { generator: Some(g), ..Workload::of("generated Lublin, 10000 jobs", vec![]) }, 256)
    };
    let t = Topology::flat(cpus);
    outln!("swf: {} ({} CPUs)", w.name, cpus);
    for spec in &specs {
        match fastest(runs, || run_one(&t, &w, spec, &cfg, &mut ())) {
            (Ok(s), took, slowest) => outln!("  {spec:<14} {:>6.3} s ({slowest:>6.3}), CPU {:.3} s engine  {:>9} jobs  {:>9} events  {:>9} quanta skipped  makespan {:.0} s  util {:.3}", took.wall, took.engine, s.jobs, s.events, s.skipped_quanta, s.makespan, s.utilization),
            (Err(e), _, _) => outln!("  {spec:<14} failed: {e:#}"),
        }
    }
    // 3. Scale: 100 000 CPUs, 1 M generated jobs of up to 1 024 CPUs (Poisson: the Lublin
    // model's sizes go up to the machine, and 1 M of its jobs arrive past the 10^9 s limit), under
    // os (a managed policy places every arrival on 100 000 CPUs: tens of seconds for 1 M jobs,
    // docs/EXPERIMENTS.md, *Speed*; the `scale` example of cpumgr-sim runs any policy).
    let mut g = Generator::new(Model::Poisson, 1_000_000, 100_000);
    g.max_size = 1024;
    let w = Workload { cpus: Some(100_000), generator: Some(g), ..Workload::of("scale", vec![]) };
    let t = Topology::flat(100_000);
    let (s, took, slowest) = fastest(runs, || run_one(&t, &w, "os", &cfg, &mut ()));
    let s = s?;
    outln!("scale: 1 M Poisson jobs on 100 000 CPUs, os: {} jobs, {} events in {}, makespan {:.0} s, util {:.3}, peak RSS {:.0} MiB", s.jobs, s.events, per_second(s.events, took, slowest), s.makespan, s.utilization, peak_rss_mib());
    Ok(())
}

/// `events` in the time a run `took` (and the `slowest` run's wall time), as events per second
/// of wall time and of the engine's CPU time.
fn per_second(events: u64, took: Took, slowest: f64) -> String {
    let m = |secs: f64| events as f64 / secs / 1e6;
    format!(
        "{:.3} s ({slowest:.3}), CPU {:.3} s engine, {:.3} s process = {:.2} M events per second ({:.2} M per engine CPU second)",
        took.wall,
        took.engine,
        took.process,
        m(took.wall),
        m(took.engine)
    )
}

#[cfg(test)]
mod tests {
    use super::split_policies;

    #[test]
    fn static_refuses_jobs_wider_than_a_partition() {
        use cpumgr_sim::{JobSpec, SpeedupModel, Workload};
        let jobs = vec![
            JobSpec::rigid("small", 0, 4, 1.0, SpeedupModel::LINEAR),
            JobSpec::rigid("wide", 0, 6, 1.0, SpeedupModel::LINEAR),
        ];
        let w = Workload::of("w", jobs);
        assert_eq!(super::static_part("static", 8), Some(4));
        assert_eq!(super::static_part("static:parts=1", 8), Some(8));
        assert_eq!(super::static_part("equipartition", 8), None);
        let e = super::check_static(&w, "static", 4, 8).unwrap_err().to_string();
        assert!(
            e.contains("\"wide\" needs 6 CPUs but a partition has 4 of the 8") && e.contains("static:parts=1"),
            "{e}"
        );
        assert!(super::check_static(&w, "static:parts=1", 8, 8).is_ok());
    }

    #[test]
    fn the_least_times_are_kept_with_the_slowest_wall_time() {
        // Runs that do more work each time: the result is the first run's, every figure the
        // least, and the slowest wall time at least the least.
        let mut work = 0u64;
        let (first, took, slowest) = super::fastest(4, || {
            work += 2_000_000;
            let mut x = 0u64;
            for i in 0..work {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
            work
        });
        assert_eq!(first, 2_000_000, "the first run's result");
        assert!(took.wall > 0.0 && took.engine > 0.0 && took.process > 0.0 && slowest >= took.wall);
        let (once, took, slowest) = super::fastest(1, || 7);
        assert_eq!((once, took.wall.to_bits()), (7, slowest.to_bits()), "one run is both");
    }

    #[test]
    fn policy_lists_keep_parameters_with_their_policy() {
        let v = vec!["equipartition,cs:mpl=4,fill=false,os".to_string(), "scs".to_string()];
        assert_eq!(split_policies(&v), vec!["equipartition", "cs:mpl=4,fill=false", "os", "scs"]);
    }
}
