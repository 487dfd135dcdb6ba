//! The papers' experiments as named workloads, runnable with `cpumgr sim --preset NAME`.
//!
//! A preset takes parameters like a policy does (`omp-multiprog:degree=4`). Its jobs are modelled
//! on the paper's benchmarks: the request, kind and evolving pattern come from the paper; work and
//! speedup models are chosen so that each benchmark scales as the paper describes (NAS and
//! tomcatv/swim well, turb3d up to 16–20 CPUs, apsi below 2, cg.W badly on 16). The absolute
//! times are therefore ours; `docs/EXPERIMENTS.md` puts them beside the papers' tables.

use cpumgr_core::params::{ParamError, ParamKind, ParamSpec, Params, PolicySpec};
use cpumgr_core::program::NANOS_PER_SEC;
use cpumgr_core::{Kind, Nanos};

use crate::error::InputError;
use crate::generate::{Generator, JobKind, Model};
use crate::job::{epd, ltomcatv, JobSpec, Phase};
use crate::speedup::SpeedupModel;
use crate::workload::Workload;

/// One preset.
#[derive(Debug, Clone, Copy)]
pub struct PresetInfo {
    /// Its name.
    pub name: &'static str,
    /// The paper experiment it models.
    pub paper: &'static str,
    /// What it runs.
    pub summary: &'static str,
    /// Its parameters.
    pub params: &'static [ParamSpec],
    build: fn(&Params) -> Result<Workload, ParamError>,
}

const NONE: &[ParamSpec] = &[];

/// Every preset, in the order `--list-presets` prints them.
pub const PRESETS: &[PresetInfo] = &[
    PresetInfo {
        name: "nanos-cpuset32",
        paper: "000 §6.2, Table 1",
        summary: "sp.W(8) bt.W(12) epd.S(2-16) ft.W(8) cg.W(16), 3 instances each, in a 32-CPU cpuset",
        params: NONE,
        build: |_| Ok(nanos_cpuset32()),
    },
    PresetInfo {
        name: "nanos-dss64",
        paper: "000 §6.3, Table 2",
        summary: "sp.A(32) bt.A(24) epd.W(2-8) cg.A(8) ft.A(8) mg.A(8) cg.A(8) on 64 CPUs, 2 instances each",
        params: NONE,
        build: |_| Ok(nanos_dss64()),
    },
    PresetInfo {
        name: "pdpa-ltomcatv",
        paper: "000 §6.4, Table 3",
        summary: "5 ltomcatv (1 CPU I/O, then 32) × 3 on 64 CPUs, MPL 5",
        params: NONE,
        build: |_| Ok(pdpa_ltomcatv()),
    },
    PresetInfo {
        name: "pdpa-tomcatv-turb3d",
        paper: "000 §6.4, Table 4",
        summary: "3 tomcatv + 3 turb3d asking 32, × 3 on 64 CPUs, MPL 4",
        params: NONE,
        build: |_| Ok(pdpa_tomcatv_turb3d()),
    },
    PresetInfo {
        name: "pdpa-swim-apsi",
        paper: "000 §6.4, Table 5",
        summary: "3 swim (scales) + 3 apsi (speedup < 2) asking 32, × 3 on 64 CPUs, MPL 4",
        params: NONE,
        build: |_| Ok(pdpa_swim_apsi()),
    },
    PresetInfo {
        name: "llpc-background",
        paper: "001 §4.4, Table 3",
        summary:
            "swim, su2cor, hydro2d, mgrid one after another on 4 CPUs beside a sequential job (18 s run, 5 s sleep)",
        params: NONE,
        build: |_| Ok(llpc_background()),
    },
    PresetInfo {
        name: "scs-mpl",
        paper: "002 §5.2, Fig. 4",
        summary:
            "rigid MPI jobs (up to 64 processes) with exponential arrivals on 64 CPUs; compare scs and cs at mpl 2/4/6",
        params: SCS_PARAMS,
        build: scs_mpl,
    },
    PresetInfo {
        name: "omp-multiprog",
        paper: "003 §5, Table 2",
        summary: "`degree` copies of an OpenMP app asking 4 CPUs, all at once, on 4 CPUs",
        params: OMP_PARAMS,
        build: omp_multiprog,
    },
];

const SCS_PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "high",
        help: "high communication degree (CG/BT/Sweep3D-like) or low (EP-like)",
        kind: ParamKind::Bool { default: true },
    },
    ParamSpec {
        key: "load",
        help: "offered machine load",
        kind: ParamKind::Float { default: 0.6, min: 0.05, max: 2.0 },
    },
    ParamSpec { key: "jobs", help: "jobs in the workload", kind: ParamKind::Int { default: 40, min: 1, max: 100_000 } },
    ParamSpec {
        key: "seed",
        help: "random seed of the arrivals",
        kind: ParamKind::Int { default: 1, min: 0, max: i64::MAX },
    },
];

const OMP_PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "degree",
        help: "multiprogramming degree: copies started at once",
        kind: ParamKind::Int { default: 4, min: 1, max: 1024 },
    },
    ParamSpec {
        key: "sync",
        help: "the app's synchronisation intensity (CG-like 1.0, EP-like 0.1)",
        kind: ParamKind::Float { default: 1.0, min: 0.0, max: 1.0 },
    },
];

/// The entry for a preset name.
pub fn info(name: &str) -> Option<&'static PresetInfo> {
    PRESETS.iter().find(|p| p.name == name)
}

/// Builds a preset from `name[:key=value,...]`.
pub fn build(spec: &str) -> Result<Workload, InputError> {
    let err = |m: String| InputError::new(format!("preset:{spec}"), 1, "preset", m);
    let s = PolicySpec::parse(spec).map_err(|e| err(e.to_string()))?;
    let p = info(&s.name).ok_or_else(|| {
        err(format!("no preset {:?}; known: {}", s.name, PRESETS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")))
    })?;
    let params = Params::new(p.name, p.params, &s.values).map_err(|e| err(e.to_string()))?;
    let mut w = (p.build)(&params).map_err(|e| err(e.to_string()))?;
    w.name = spec.to_string();
    Ok(w)
}

const S: Nanos = NANOS_PER_SEC;

fn amdahl(serial: f64) -> SpeedupModel {
    SpeedupModel::Amdahl { serial }
}

/// A malleable job of `name` asking `request`, doing `seconds` of run time alone on `request`
/// CPUs (work = seconds × speedup there).
fn app(name: &str, request: u32, seconds: f64, speedup: SpeedupModel, sync: f64) -> JobSpec {
    let work = seconds * speedup.speedup(request as f64);
    let mut j = JobSpec::malleable(name, 0, request, work, speedup);
    j.sync = sync;
    j
}

/// `copies` instances of each job, listed round-robin (instance 1 of every job first), all
/// arriving at time 0: the admission limit then runs them in waves, as the papers' scripts did.
fn instances(jobs: &[JobSpec], copies: u32) -> Vec<JobSpec> {
    (0..copies)
        .flat_map(|k| {
            jobs.iter().map(move |j| {
                let mut j = j.clone();
                j.name = compact_str::format_compact!("{}#{}", j.name, k + 1);
                j
            })
        })
        .collect()
}

fn workload(name: &str, cpus: u32, mpl: u32, jobs: Vec<JobSpec>, policies: &[&str]) -> Workload {
    let mut w = Workload::of(name, jobs);
    w.cpus = Some(cpus);
    w.mpl = mpl;
    w.policies = policies.iter().map(|s| s.to_string()).collect();
    w
}

fn evolving(name: &str, request: u32, phases: Vec<Phase>, sync: f64) -> JobSpec {
    let mut j = JobSpec::malleable(name, 0, request, 0.0, SpeedupModel::LINEAR);
    j.kind = Kind::Evolving;
    j.phases = phases.into();
    j.sync = sync;
    j
}

fn nanos_cpuset32() -> Workload {
    let jobs = [
        app("sp.W", 8, 20.0, amdahl(0.03), 0.8),
        app("bt.W", 12, 7.0, amdahl(0.03), 0.8),
        evolving("epd.S", 16, epd(16, 0.8, &amdahl(0.0)), 0.2),
        app("ft.W", 8, 1.0, amdahl(0.05), 0.6),
        app("cg.W", 16, 1.5, amdahl(0.25), 1.0),
    ];
    workload("nanos-cpuset32", 32, 5, instances(&jobs, 3), &["os", "equipartition", "cluster"])
}

fn nanos_dss64() -> Workload {
    let jobs = [
        app("sp.A", 32, 90.0, amdahl(0.01), 0.8),
        app("bt.A", 24, 100.0, amdahl(0.01), 0.8),
        evolving("epd.W", 8, epd(8, 15.0, &amdahl(0.0)), 0.2),
        app("cg.A", 8, 14.0, amdahl(0.05), 1.0),
        app("ft.A", 8, 33.0, amdahl(0.03), 0.6),
        app("mg.A", 8, 33.0, amdahl(0.03), 0.8),
        app("cg.A", 8, 14.0, amdahl(0.05), 1.0),
    ];
    workload("nanos-dss64", 64, 7, instances(&jobs, 2), &["os", "dss", "ssw-dss", "vtq-dss"])
}

/// tomcatv/swim-like: near-linear to 32 (paper 000: "scale well, even super-linear").
fn scales_well() -> SpeedupModel {
    amdahl(0.01)
}

fn pdpa_ltomcatv() -> Workload {
    let lt = evolving("ltomcatv", 32, ltomcatv(32, 8, 0.5, 60.0, &scales_well()), 0.8);
    workload("pdpa-ltomcatv", 64, 5, instances(&[lt], 5 * 3), &["os", "equipartition", "pdpa"])
}

fn pdpa_tomcatv_turb3d() -> Workload {
    // turb3d: scales to 16-20 CPUs, then loses speed.
    let mut turb: Vec<f64> = (1..=18).map(|p| p as f64 * (1.0 - 0.015 * (p - 1) as f64)).collect();
    let peak = *turb.last().expect("non-empty");
    turb.extend((19..=64).map(|p| peak * (1.0 - 0.01 * (p - 18) as f64)));
    let turb3d = SpeedupModel::Table { values: turb };
    let jobs = [app("tomcatv", 32, 10.0, scales_well(), 0.8), app("turb3d", 32, 35.0, turb3d, 0.8)];
    let jobs: Vec<JobSpec> = (0..3).flat_map(|_| jobs.iter().cloned()).collect();
    workload("pdpa-tomcatv-turb3d", 64, 4, instances(&jobs, 3), &["os", "equipartition", "pdpa"])
}

fn pdpa_swim_apsi() -> Workload {
    // apsi: Amdahl's law caps it below 2 (paper 000).
    let jobs = [app("swim", 32, 5.0, scales_well(), 0.8), app("apsi", 32, 90.0, amdahl(0.55), 0.8)];
    let jobs: Vec<JobSpec> = (0..3).flat_map(|_| jobs.iter().cloned()).collect();
    workload("pdpa-swim-apsi", 64, 4, instances(&jobs, 3), &["os", "equipartition", "pdpa"])
}

fn llpc_background() -> Workload {
    let apps = [("swim", 0.02), ("su2cor", 0.05), ("hydro2d", 0.04), ("mgrid", 0.03)];
    let mut jobs = Vec::new();
    for (k, (name, serial)) in apps.iter().enumerate() {
        let mut j = app(name, 4, 60.0, amdahl(*serial), 1.0);
        j.arrival = k as Nanos * 200 * S;
        jobs.push(j);
    }
    // The sequential load: runs 18 s, sleeps 5 s, for the whole experiment.
    for k in 0..36 {
        let mut b = JobSpec::rigid("background", k * 23 * S, 1, 18.0, SpeedupModel::SERIAL);
        b.name = compact_str::format_compact!("background#{}", k + 1);
        b.sync = 0.0;
        b.reports_speedup = false;
        jobs.push(b);
    }
    workload("llpc-background", 4, 0, jobs, &["os", "llpc"])
}

fn scs_mpl(p: &Params) -> Result<Workload, ParamError> {
    let high = p.bool("high")?;
    let mut g = Generator::new(Model::Poisson, p.int("jobs")? as u64, 64);
    g.load = p.float("load")?;
    g.seed = p.int("seed")? as u64;
    g.max_size = 64;
    g.mean_runtime = 30.0;
    g.kind = JobKind::Rigid;
    // High communication: a larger serial (blocking) fraction and barrier-heavy.
    g.speedup = if high { amdahl(0.03) } else { amdahl(0.003) };
    let sync = if high { 1.0 } else { 0.1 };
    let class: std::sync::Arc<str> = if high { "high" } else { "low" }.into();
    let jobs: Vec<JobSpec> = g
        .iter()
        .map(|mut j| {
            j.sync = sync;
            j.class = class.clone();
            // Paper 002's jobs have 16 to 64 processes.
            if let Kind::Rigid(n) = j.kind {
                let n = n.max(16);
                let runtime = j.total_work() / j.phases[0].speedup.speedup(j.request as f64);
                return JobKind::Rigid
                    .job(j.name, j.class, j.arrival, n, runtime, &j.phases[0].speedup)
                    .with_sync(sync);
            }
            j
        })
        .collect();
    Ok(workload(
        "scs-mpl",
        64,
        0,
        jobs,
        &["fcfs", "scs:mpl=2", "cs:mpl=2", "scs:mpl=4", "cs:mpl=4", "scs:mpl=6", "cs:mpl=6"],
    ))
}

fn omp_multiprog(p: &Params) -> Result<Workload, ParamError> {
    let degree = p.int("degree")? as u32;
    let app = app("app", 4, 12.6, amdahl(0.02), p.float("sync")?);
    Ok(workload("omp-multiprog", 4, 0, instances(&[app], degree), &["os", "omp-dss"]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_builds_and_fits_its_machine() {
        for p in PRESETS {
            let w = build(p.name).unwrap_or_else(|e| panic!("{}: {e}", p.name));
            let cpus = w.cpus.expect("presets name their machine");
            assert!(!w.jobs.is_empty(), "{}", p.name);
            for j in &w.jobs {
                j.check(cpus).unwrap_or_else(|e| panic!("{}: {}: {e:?}", p.name, j.name));
            }
            assert!(!w.policies.is_empty());
        }
        assert_eq!(build("omp-multiprog:degree=2").unwrap().jobs.len(), 2);
        assert!(build("omp-multiprog:colour=1").is_err());
        assert!(build("nope").is_err());
    }
}
