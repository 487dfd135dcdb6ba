//! `cpumgr launch`: run a workload of real programs once per configuration (baselines and
//! policies), alternating configurations across repeats so machine drift hits all alike, and
//! compare them in one table, JSON, and an HTML report.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use cpumgr_core::trace::Event;
use cpumgr_core::CpuSet;
use cpumgr_launch::metrics::{mean_cv, median_repeat, summarize, Summary};
use cpumgr_launch::{run, Config, Expand, RunOptions, Workload};
use cpumgr_report::{render, Report, Table, Timeline};
use serde_json::json;

use crate::input::{read_file, InputError};

/// Arguments of `cpumgr launch`.
#[derive(Debug, Parser)]
pub struct Args {
    /// The workload file (TOML).
    pub workload: PathBuf,
    /// Policies to run, comma-separated (`gang,equipartition:redistribute=true`).
    #[arg(long, default_value = "gang")]
    pub policy: Vec<String>,
    /// Baselines to run, comma-separated: os, passive, dynamic, static.
    #[arg(long, value_delimiter = ',', default_value = "os,static")]
    pub baseline: Vec<String>,
    /// The manager's quantum in policy runs.
    #[arg(long, default_value = "100ms")]
    pub quantum: String,
    /// Times to run each configuration (alternating A B A B).
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// CPUs to use (taskset syntax); default: the CPUs this process may run on.
    #[arg(long, env = "CPUMGR_CPUS")]
    pub cpus: Option<String>,
    /// Directory of built kernels, for `{kernels}` in the workload; default: the kernels this
    /// binary carries, built with `--cc` into a temporary directory.
    #[arg(long)]
    pub kernels: Option<PathBuf>,
    /// C compiler with OpenMP that builds the carried kernels (when `--kernels` is not given).
    #[arg(long, env = "CC", default_value = "gcc")]
    pub cc: String,
    /// Write an HTML report here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Write the trace of each configuration's median repeat here (one file per configuration,
    /// `FILE.CONFIG`, e.g. `run.trace.gang`), for `cpumgr report` and `cpumgr trace export`.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Run policy configurations transparently: no OpenMP adapter in the jobs, so the manager can
    /// only hold them by affinity and stop/continue (what an unmodified, unpreloaded program gets).
    #[arg(long)]
    pub no_omp: bool,
    /// Policy runs' managers offer only the CPUs that processes outside the workload leave
    /// (`cpumgr daemon --yield-outside`): for a machine others use while the workload runs.
    #[arg(long)]
    pub yield_outside: bool,
    /// End a run still going after this long (`90s`, `2m`; a unit is required, `none` for no
    /// limit): its jobs are reported as stopped, not failed, and its makespan as a lower bound
    /// (`≥`); a policy run stopped so is an error. Default: no limit.
    #[arg(long)]
    pub time_limit: Option<String>,
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> anyhow::Result<CpuSet> {
    cpumgr_daemon::affinity::get(0).context("reading this process's CPU affinity")
}

/// The OpenMP adapter for policy runs, with a warning when there are policy runs and it is not
/// found (their OpenMP jobs then run transparently).
fn omp_adapter(policies: &[String]) -> Option<PathBuf> {
    let lib = cpumgr_launch::adapter::adapter_library();
    if lib.is_none() && policies.iter().any(|p| !p.is_empty()) {
        tracing::warn!(
            "{} not found (set CPUMGR_OMP_LIB, or cargo build -p cpumgr-omp): OpenMP jobs of policy runs keep their own teams",
            cpumgr_launch::adapter::ADAPTER
        );
    }
    lib
}

/// Splits a `--policy` value into policy specs: specs are separated by commas that do not belong
/// to a spec's parameters (`gang,pdpa:base=2,step=1,dss` is gang, pdpa:base=2,step=1 and dss).
pub fn split_policies(list: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match out.last_mut() {
            Some(last) if part.contains('=') && !part.contains(':') => {
                last.push(',');
                last.push_str(part);
            }
            _ => out.push(part.to_string()),
        }
    }
    out
}

/// One configuration's repeats: each one's figures and trace.
struct Outcomes {
    name: String,
    baseline: bool,
    summaries: Vec<Summary>,
    traces: Vec<Vec<Event>>,
}

impl Outcomes {
    /// The repeat that stands for the configuration (its median makespan), with its index.
    fn median(&self) -> Option<(usize, &Summary)> {
        median_repeat(&self.summaries).map(|k| (k, &self.summaries[k]))
    }
}

/// Where `--trace FILE` puts a configuration's trace: `FILE.CONFIG`, the configuration's name
/// made safe for a file name (`run.trace` and `pdpa:base=2` give `run.trace.pdpa_base_2`).
pub fn trace_path(base: &std::path::Path, config: &str) -> PathBuf {
    let mut name = base.as_os_str().to_owned();
    name.push(".");
    name.push(config.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '.', "_"));
    PathBuf::from(name)
}

/// Runs the launch and prints the results.
pub fn run_launch(args: Args) -> anyhow::Result<()> {
    let text = read_file(&args.workload)?;
    launch(&args, &text)
}

/// Parses `--time-limit`: a duration with its unit (a bare number would be milliseconds to the
/// duration parser, where a user writing `120` means seconds), or `none`.
pub fn time_limit(text: Option<&str>) -> anyhow::Result<Option<Duration>> {
    match text.map(str::trim) {
        None | Some("none") => Ok(None),
        Some(t) if t.parse::<f64>().is_ok() => {
            Err(InputError::new(format!("--time-limit {t}: give a unit (e.g. {t}s, 2m) or none")))
        }
        Some(t) => super::control::parse_duration("--time-limit", t).map(Some),
    }
}

/// Runs a workload given as text (a file's, or the demo's built-in one).
pub fn launch(args: &Args, text: &str) -> anyhow::Result<()> {
    // Flags first: a bad one is reported before the kernels are built.
    let quantum = super::control::parse_duration("--quantum", &args.quantum)?;
    let limit = time_limit(args.time_limit.as_deref())?;
    let cpus = match &args.cpus {
        Some(list) => CpuSet::parse(list).map_err(|e| InputError::new(format!("--cpus: {e}")))?,
        None => allowed_cpus()?,
    };
    // Built only for a workload that names them (other workloads need no compiler), into a
    // directory that lives as long as the runs.
    let mut built = None;
    let kernels = match &args.kernels {
        Some(dir) => std::path::absolute(dir)?,
        None if text.contains("{kernels}") => {
            if !args.json {
                eprintln!("building the test kernels with {} ...", args.cc);
            }
            let dir = built.insert(tempfile::Builder::new().prefix("cpumgr-kernels-").tempdir()?);
            crate::kernels::build(dir.path(), &args.cc)?
        }
        None => PathBuf::new(),
    };
    let expand = Expand { cpus: cpus.len() as u32, kernels };
    let workload = Workload::parse(&args.workload, text, &expand).map_err(|e| InputError::new(e.to_string()))?;
    for (job, missing) in &workload.left_out {
        eprintln!("cpumgr launch: job {job:?} left out of every run: it needs {missing}, not found here");
    }
    let mut configs = Vec::new();
    for b in args.baseline.iter().filter(|b| !b.is_empty()) {
        configs.push(Config::parse(b).ok_or_else(|| {
            InputError::new(format!("--baseline: unknown baseline {b:?}; known: os, passive, dynamic, static"))
        })?);
    }
    for p in args.policy.iter().flat_map(|p| split_policies(p)) {
        cpumgr_core::policies::build(&p).map_err(|e| InputError::new(format!("--policy: {e}")))?;
        configs.push(Config::Policy(p));
    }
    if configs.is_empty() {
        return Err(InputError::new("nothing to run: give at least one --policy or --baseline"));
    }
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&stop))?;
    let logs = tempfile::Builder::new().prefix("cpumgr-launch-").tempdir()?;
    let omp_adapter = if args.no_omp { None } else { omp_adapter(&args.policy) };
    let opts = RunOptions {
        cpus: cpus.clone(),
        quantum,
        log_dir: logs.path().to_path_buf(),
        poll: Duration::from_millis(5),
        omp_adapter,
        yield_outside: args.yield_outside,
        limit,
    };
    let show_progress = !args.json && std::io::stdout().is_terminal();

    // Each class's dedicated run time: its first job alone on the machine, OpenMP defaults;
    // `None` for a class whose run alone the time limit stopped (its jobs get no slowdown).
    let mut dedicated: BTreeMap<String, Option<f64>> = BTreeMap::new();
    for job in &workload.jobs {
        if dedicated.contains_key(&job.class) || stop.load(std::sync::atomic::Ordering::Relaxed) {
            continue;
        }
        let alone = Workload {
            name: job.class.clone(),
            mpl: 1,
            jobs: vec![cpumgr_launch::workload::Job { at: 0.0, ..job.clone() }],
            left_out: Vec::new(),
        };
        let r = run(&alone, &Config::Os, &opts, &stop, &mut |_, _| {})?;
        let finished = !r.jobs.iter().any(|j| j.outcome.cut_by_limit());
        dedicated.insert(job.class.clone(), finished.then_some(r.makespan));
    }

    let bar = show_progress.then(|| {
        let b = indicatif::ProgressBar::new((workload.jobs.len() * configs.len() * args.repeat as usize) as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg:>10} [{bar:30}] {pos}/{len} jobs, {elapsed} elapsed, ETA {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let mut outcomes: Vec<Outcomes> = configs
        .iter()
        .map(|c| Outcomes {
            name: c.name().to_string(),
            baseline: !matches!(c, Config::Policy(_)),
            summaries: Vec::new(),
            traces: Vec::new(),
        })
        .collect();
    'repeats: for _ in 0..args.repeat {
        for (k, config) in configs.iter().enumerate() {
            if let Some(b) = &bar {
                b.set_message(config.name().to_string());
            }
            let mut last = 0;
            let r = run(&workload, config, &opts, &stop, &mut |done, _| {
                if let Some(b) = &bar {
                    b.inc((done - last) as u64);
                }
                last = done;
            })?;
            let o = &mut outcomes[k];
            o.summaries.push(summarize(&r, &dedicated));
            o.traces.push(r.trace);
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                break 'repeats;
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if let Some(path) = &args.trace {
        for o in &outcomes {
            if let Some((k, _)) = o.median() {
                write_trace(&trace_path(path, &o.name), &o.traces[k])?;
            }
        }
    }
    report_results(args, &workload, &cpus, &dedicated, &outcomes)?;
    if stop.load(std::sync::atomic::Ordering::Relaxed) {
        anyhow::bail!("interrupted: every job was ended; the results above cover what ran");
    }
    // A job that did not start or failed makes the comparison meaningless: a runtime failure.
    let failed: usize = outcomes.iter().flat_map(|o| &o.summaries).map(|s| s.failed).sum();
    if failed > 0 {
        let runs: usize = outcomes.iter().flat_map(|o| &o.summaries).map(|s| s.jobs.len()).sum();
        anyhow::bail!(
            "{failed} of {runs} job runs failed (listed above; the `failed` column counts them per configuration)"
        );
    }
    // A baseline may crawl past the limit (that is what it shows); a policy that does is a
    // finding to look at, not a result.
    let cut: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.baseline && o.summaries.iter().any(Summary::cut))
        .map(|o| o.name.as_str())
        .collect();
    if !cut.is_empty() {
        anyhow::bail!("policy runs stopped at the time limit: {} (listed above)", cut.join(", "));
    }
    Ok(())
}

/// Writes a trace as JSON lines.
fn write_trace(path: &std::path::Path, events: &[Event]) -> anyhow::Result<()> {
    let mut file =
        std::io::BufWriter::new(std::fs::File::create(path).with_context(|| format!("writing {}", path.display()))?);
    for e in events {
        serde_json::to_writer(&mut file, e)?;
        std::io::Write::write_all(&mut file, b"\n")?;
    }
    std::io::Write::flush(&mut file)?;
    Ok(())
}

/// How a makespan ratio reads when either side may be a lower bound (a run the time limit
/// stopped): `≥` when only the row's is, `≤` when only the baseline's is, `?` when both are.
fn ratio_mark(row_stopped: bool, base_stopped: bool) -> &'static str {
    match (row_stopped, base_stopped) {
        (false, false) => "",
        (true, false) => "≥",
        (false, true) => "≤",
        (true, true) => "?",
    }
}

/// The results: `dedicated` is each class's run time alone (`None`, JSON `null`: the time limit
/// stopped it).
fn report_results(
    args: &Args,
    workload: &Workload,
    cpus: &CpuSet,
    dedicated: &BTreeMap<String, Option<f64>>,
    outcomes: &[Outcomes],
) -> anyhow::Result<()> {
    let best = outcomes
        .iter()
        .filter(|o| o.baseline)
        .filter_map(|o| o.median())
        .map(|(_, m)| m)
        .min_by(|a, b| a.makespan.total_cmp(&b.makespan));
    let best_baseline = best.map_or(f64::INFINITY, |m| m.makespan);
    let base_stopped = best.is_some_and(Summary::cut);
    let mut table = Table {
        columns: [
            "config",
            "makespan (s)",
            "min–max",
            "mean turnaround",
            "max turnaround",
            "mean slowdown",
            "utilisation",
            "CV of run times",
            "failed",
            "vs best baseline",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    let mut runs_json = Vec::new();
    let limited = outcomes.iter().flat_map(|o| &o.summaries).any(Summary::cut);
    const LIMITED: &str = "≥: a run the time limit stopped (--time-limit), its makespan a lower bound; in the last column ≤ when the best baseline's was, ? when both were";
    for o in outcomes {
        let Some((k, m)) = o.median() else { continue };
        let makespans: Vec<f64> = o.summaries.iter().map(|s| s.makespan).collect();
        let (lo, hi) =
            (makespans.iter().copied().fold(f64::INFINITY, f64::min), makespans.iter().copied().fold(0.0, f64::max));
        // A run the time limit stopped took at least its makespan: so do figures taken from it.
        let at_least = if m.cut() { "≥" } else { "" };
        let upper = if o.summaries.iter().any(Summary::cut) { "≥" } else { "" };
        // The fastest repeat was stopped only if every one was.
        let lower = if o.summaries.iter().all(Summary::cut) { "≥" } else { "" };
        table.rows.push(vec![
            o.name.clone(),
            format!("{at_least}{:.2}", m.makespan),
            format!("{lower}{lo:.2}–{upper}{hi:.2}"),
            format!("{at_least}{:.2}", m.mean_turnaround),
            format!("{at_least}{:.2}", m.max_turnaround),
            if m.mean_slowdown.is_nan() { "—".into() } else { format!("{at_least}{:.2}", m.mean_slowdown) },
            format!("{:.0}%", 100.0 * m.utilization),
            cpumgr_report::summary::cv_cell(&m.cv),
            m.failed.to_string(),
            format!("{}{:.2}×", ratio_mark(m.cut(), base_stopped), m.makespan / best_baseline.max(1e-9)),
        ]);
        runs_json.push(json!({
            "config": o.name,
            "repeat": k + 1,
            "makespan": m.makespan,
            "makespans": makespans,
            "mean_turnaround": m.mean_turnaround,
            "max_turnaround": m.max_turnaround,
            "mean_slowdown": m.mean_slowdown,
            "utilization": m.utilization,
            "cv": m.cv,
            "failed": m.failed,
            "stopped": m.stopped,
            "jobs": m.jobs,
        }));
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"workload": workload.name, "cpus": cpus.to_string(), "dedicated": dedicated, "runs": runs_json})
            )?
        );
    } else {
        println!(
            "workload {} on CPUs {} ({} jobs, mpl {}), {} repeat(s)",
            workload.name,
            cpus,
            workload.jobs.len(),
            workload.mpl,
            args.repeat
        );
        print_table(&table);
        if limited {
            println!("{LIMITED}");
        }
        let unmeasured: Vec<&str> = dedicated.iter().filter(|(_, d)| d.is_none()).map(|(c, _)| c.as_str()).collect();
        if !unmeasured.is_empty() {
            println!("no slowdown for {}: alone, it outlasted the time limit", unmeasured.join(", "));
        }
        for o in outcomes {
            for (k, s) in o.summaries.iter().enumerate() {
                for j in s.jobs.iter().filter(|j| j.outcome != "ok") {
                    println!("  {} (repeat {}): job {} {}", o.name, k + 1, j.name, j.outcome);
                }
            }
        }
        let (_, cv) = mean_cv(&outcomes.iter().filter_map(|o| o.median()).map(|(_, s)| s.makespan).collect::<Vec<_>>());
        if outcomes.len() > 1 {
            println!("spread of makespans across configurations: CV {cv:.2}");
        }
    }
    if let Some(path) = &args.report {
        let report = Report {
            title: format!("cpumgr launch: {}", workload.name),
            notes: std::iter::once(format!(
                "CPUs {cpus}; {} jobs; mpl {}; {} repeat(s); each configuration's figures and charts are of its median repeat (by makespan), min–max over all",
                workload.jobs.len(),
                workload.mpl,
                args.repeat
            ))
            .chain(limited.then(|| LIMITED.to_string()))
            .collect(),
            table,
            runs: outcomes.iter().filter_map(|o| o.median().map(|(k, _)| (o.name.clone(), Timeline::from_events(&o.traces[k])))).collect(),
        };
        std::fs::write(path, render(&report)).with_context(|| format!("writing {}", path.display()))?;
        if !args.json {
            println!("report: {}", path.display());
        }
    }
    Ok(())
}

/// Prints a table with aligned columns.
pub fn print_table(t: &Table) {
    let widths: Vec<usize> = (0..t.columns.len())
        .map(|i| t.rows.iter().map(|r| r[i].chars().count()).chain([t.columns[i].chars().count()]).max().unwrap_or(0))
        .collect();
    let line =
        |cells: &[String]| cells.iter().zip(&widths).map(|(c, w)| format!("{c:>w$}")).collect::<Vec<_>>().join("  ");
    println!("{}", line(&t.columns));
    for r in &t.rows {
        println!("{}", line(r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_limit_needs_its_unit() {
        assert_eq!(time_limit(None).unwrap(), None);
        assert_eq!(time_limit(Some("none")).unwrap(), None);
        assert_eq!(time_limit(Some("90s")).unwrap(), Some(Duration::from_secs(90)));
        assert_eq!(time_limit(Some("2m")).unwrap(), Some(Duration::from_secs(120)));
        let e = time_limit(Some("120")).unwrap_err().to_string();
        assert!(e.contains("give a unit (e.g. 120s, 2m)"), "{e}");
        assert!(time_limit(Some("soon")).is_err());
    }

    #[test]
    fn a_ratio_says_which_side_is_a_bound() {
        assert_eq!(
            [ratio_mark(false, false), ratio_mark(true, false), ratio_mark(false, true), ratio_mark(true, true)],
            ["", "≥", "≤", "?"]
        );
    }
}
