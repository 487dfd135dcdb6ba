//! `cpumgr decide`: run a policy and the placer for a few quanta over a TOML list of programs and
//! print each quantum's allocation. A window onto the pure core: no processes, no clocks.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Parser;
use cpumgr_core::placer::{validate, Placer};
use cpumgr_core::{policies, CpuSet, Decision, Kind, Program, Request, SpeedupReport, View};
use serde::Deserialize;
use serde_json::json;

use crate::input::{line_of, read_file, toml_error, InputError};

/// Arguments of `cpumgr decide`.
#[derive(Debug, Parser)]
pub struct Args {
    /// Machine to decide for (synthetic spec, hwloc XML file, or sysfs root); default: this one.
    #[arg(long, env = "CPUMGR_TOPOLOGY")]
    topology: Option<String>,
    /// TOML file of `[[program]]` tables.
    #[arg(long)]
    programs: PathBuf,
    /// Policy as `name[:key=value,...]`.
    #[arg(long, env = "CPUMGR_POLICY")]
    policy: String,
    /// Number of quanta to run.
    #[arg(long, default_value_t = 1)]
    quanta: u32,
    /// Quantum length in milliseconds (what the policy sees as time).
    #[arg(long, default_value_t = 100)]
    quantum_ms: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// One `[[program]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProgramEntry {
    name: String,
    request: u32,
    min: Option<u32>,
    max: Option<u32>,
    #[serde(default)]
    kind: Option<String>,
    procs: Option<u32>,
    weight: Option<f64>,
    /// Measured speedup on 1, 2, 3, ... CPUs; flat past the last entry. Reported to the policy
    /// each quantum for the count the program got in the previous one.
    #[serde(default)]
    speedup: Vec<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProgramsFile {
    #[serde(default)]
    program: Vec<ProgramEntry>,
}

/// Reads and checks a programs file; errors name the file, line and field.
fn load_programs(path: &Path) -> anyhow::Result<(Vec<Program>, Vec<Vec<f64>>)> {
    let text = read_file(path)?;
    let file: ProgramsFile = toml::from_str(&text).map_err(|e| toml_error(path, &text, &e))?;
    let headers: Vec<usize> = text.match_indices("[[program]]").map(|(o, _)| line_of(&text, o)).collect();
    let mut programs = Vec::new();
    let mut curves = Vec::new();
    for (i, e) in file.program.into_iter().enumerate() {
        let line = headers.get(i).copied().unwrap_or(1);
        let bad = |field: &str, msg: &str| InputError::at(path, line, field, format!("program {:?}: {msg}", e.name));
        let kind = match (e.kind.as_deref().unwrap_or(if e.procs.is_some() { "rigid" } else { "malleable" }), e.procs) {
            ("malleable", None) => Kind::Malleable,
            ("moldable", None) => Kind::Moldable,
            ("evolving", None) => Kind::Evolving,
            ("rigid", Some(n)) if n > 0 => Kind::Rigid(n),
            ("rigid", _) => return Err(bad("procs", "a rigid program needs procs >= 1")),
            (k @ ("malleable" | "moldable" | "evolving"), Some(_)) => {
                return Err(bad("procs", &format!("procs is only for rigid programs, not {k}")))
            }
            (k, _) => return Err(bad("kind", &format!("{k:?} is not malleable, moldable, rigid or evolving"))),
        };
        let min = e.min.unwrap_or(1.min(e.request));
        let max = e.max.unwrap_or(e.request.max(min));
        if min > max {
            return Err(bad("min", &format!("min {min} is above max {max}")));
        }
        if min > e.request {
            return Err(bad("min", &format!("min {min} is above the request {}", e.request)));
        }
        if max < e.request {
            return Err(bad("max", &format!("max {max} is below the request {}", e.request)));
        }
        let weight = e.weight.unwrap_or(1.0);
        if !(weight.is_finite() && weight > 0.0) {
            return Err(bad("weight", "must be a positive number"));
        }
        if let Some(s) = e.speedup.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
            return Err(bad("speedup", &format!("{s} is not a positive number")));
        }
        let mut p = Program::new(i as u64 + 1, e.name.clone(), e.request);
        p.kind = kind;
        p.request = Request { wanted: e.request, min, max };
        p.weight = weight;
        programs.push(p);
        curves.push(e.speedup);
    }
    Ok((programs, curves))
}

/// Runs the quanta and prints them.
pub fn run(args: Args) -> anyhow::Result<()> {
    let topology = crate::topology_arg::load(args.topology.as_deref())?;
    let (mut programs, curves) = load_programs(&args.programs)?;
    let mut policy = policies::build(&args.policy).map_err(|e| InputError::new(e.to_string()))?;
    let managed: CpuSet = topology.cpus().clone();
    let quantum = args.quantum_ms * 1_000_000;
    let mut placer = Placer::new();
    let mut decision = Decision::default();
    let mut sets = Vec::new();
    let mut quanta = Vec::new();
    for (i, p) in programs.iter().enumerate() {
        let view = View { now: 0, quantum, topology: &topology, cpus: managed.len() as u32, programs: &programs[..=i] };
        policy.on_arrival(&view, p.id);
    }
    for q in 0..args.quanta {
        let now = q as u64 * quantum;
        let view = View { now, quantum, topology: &topology, cpus: managed.len() as u32, programs: &programs };
        decision.reset(programs.len());
        policy.decide(&view, &mut decision);
        let oversubscribed = policy.oversubscribes();
        if oversubscribed {
            // The plain-OS baseline: every program runs its threads on every CPU (its counts are
            // thread counts, not shares), as the live manager and the simulator run it.
            sets.clear();
            sets.resize(programs.len(), managed.clone());
        } else {
            placer.place(&topology, &managed, &programs, &decision, &mut sets);
            validate(&managed, &decision, &sets).context("the placement broke an invariant")?;
        }
        let mut rows = Vec::new();
        for (i, p) in programs.iter_mut().enumerate() {
            let a = decision.allocations[i];
            // CPUs the program holds, or under the baseline the CPUs its threads can fill.
            let held = if oversubscribed { (a.count as usize).min(managed.len()) } else { sets[i].len() };
            rows.push(json!({"name": p.name, "count": held, "cpus": sets[i].to_string(), "running": a.running}));
            if a.running && held > 0 {
                p.cpus = sets[i].clone();
                p.cpu_time += quantum * held as u64;
                let n = held as u32;
                if let Some(s) = curves[i].get(n as usize - 1).or(curves[i].last()) {
                    p.speedup = SpeedupReport::new(n, *s);
                }
            }
            p.running = a.running;
        }
        let mut entry = json!({"quantum": q, "programs": rows});
        if let Some(m) = decision.mpl_advice {
            entry["mpl_advice"] = json!(m);
        }
        quanta.push(entry);
    }
    if args.json {
        let out = json!({"policy": policy.name(), "cpus": managed.len(), "quanta": quanta});
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("policy {} on {} ({})", args.policy, managed, topology.summary());
    for q in &quanta {
        println!("quantum {}", q["quantum"]);
        for r in q["programs"].as_array().into_iter().flatten() {
            let state = if r["running"].as_bool() == Some(true) { "run " } else { "wait" };
            println!(
                "  {:<16} {state} {:>4}  {}",
                r["name"].as_str().unwrap_or(""),
                r["count"],
                r["cpus"].as_str().unwrap_or("")
            );
        }
    }
    Ok(())
}
