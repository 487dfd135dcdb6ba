//! The engine's arithmetic, ordering and bookkeeping on small hand-checked cases.

mod common;

use common::run_workload;
use cpumgr_core::placer::PlacementError;
use cpumgr_core::trace::{Event, EventKind};
use cpumgr_core::{policies, Decision, Kind, Policy, Rotation, SimHints, Topology, View};
use cpumgr_sim::generate::{Generator, JobKind, Model};
use cpumgr_sim::job::ltomcatv;
use cpumgr_sim::{
    run, CostModel, JobRecord, JobSpec, Observer, Phase, RunSummary, SimConfig, SimError, SpeedupModel, Workload,
};

const S: u64 = 1_000_000_000;

fn free() -> SimConfig {
    SimConfig { cost: CostModel::FREE, ..SimConfig::default() }
}

fn sized(cpus: u32, jobs: Vec<JobSpec>) -> Workload {
    let mut w = Workload::of("t", jobs);
    w.cpus = Some(cpus);
    w
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn one_job_alone_runs_at_its_speedup() {
    let w = sized(8, vec![JobSpec::malleable("a", 0, 8, 80.0, SpeedupModel::LINEAR)]);
    let (s, jobs) = run_workload(&w, "equipartition", &free());
    assert_eq!(s.jobs, 1);
    assert!(close(jobs[0].turnaround, 10.0, 1e-6), "{}", jobs[0].turnaround);
    assert!(close(jobs[0].slowdown, 1.0, 1e-6));
    assert!(close(s.utilization, 1.0, 1e-6));
    assert!(close(jobs[0].cpu_seconds, 80.0, 1e-6));
}

#[test]
fn equal_jobs_split_the_machine() {
    let jobs = vec![
        JobSpec::malleable("a", 0, 8, 80.0, SpeedupModel::LINEAR),
        JobSpec::malleable("b", 0, 8, 80.0, SpeedupModel::LINEAR),
    ];
    let (s, recs) = run_workload(&sized(8, jobs), "equipartition", &free());
    assert!(recs.iter().all(|r| close(r.turnaround, 20.0, 1e-6)), "{recs:?}");
    assert!(close(s.mean_slowdown, 2.0, 1e-6));
    assert!(close(s.fairness, 1.0, 1e-9));
}

#[test]
fn os_pays_for_oversubscription() {
    // Two 4-thread barrier-heavy jobs on 4 CPUs: 2 CPUs each at f = 2, loss 1 + sync_shared.
    let mk = || {
        let mut j = JobSpec::malleable("a", 0, 4, 40.0, SpeedupModel::LINEAR);
        j.sync = 1.0;
        j
    };
    let w = sized(4, vec![mk(), mk()]);
    let (_, os) = run_workload(&w, "os", &SimConfig::default());
    let loss = 1.0 + CostModel::default().sync_shared;
    assert!(os.iter().all(|r| close(r.turnaround, 20.0 * loss, 1e-3)), "{os:?}");
    let (_, eq) = run_workload(&w, "equipartition", &SimConfig::default());
    assert!(eq.iter().all(|r| close(r.turnaround, 20.0, 0.01)), "{eq:?}");
}

#[test]
fn os_shares_by_threads_on_shared_and_own_clocks() {
    // 4 CPUs, 100 ms quantum, no sharing cost. `lin` (linear: a shared clock) and `amd` (Amdahl
    // 0.5: a rate of its own), 4 threads each, from 0 s; `late` (linear, another synchronisation
    // intensity: a second shared clock), 4 threads, from 1 s. Shares change at the step after
    // each arrival or end; no end falls on a step.
    let lin = JobSpec::rigid("lin", 0, 4, 8.0, SpeedupModel::LINEAR).with_sync(0.0);
    let amd = JobSpec::rigid("amd", 0, 4, 8.0, SpeedupModel::Amdahl { serial: 0.5 }).with_sync(0.0);
    let late = JobSpec::rigid("late", S, 4, 2.2, SpeedupModel::LINEAR).with_sync(1.0);
    let w = sized(4, vec![lin, amd, late]);
    let amdahl = |p: f64| 1.0 / (0.5 + 0.5 / p);
    for fast_forward in [true, false] {
        let cfg = SimConfig { fast_forward, ..free() };
        let (s, recs) = run_workload(&w, "os", &cfg);
        let rec = |n: &str| recs.iter().find(|r| r.name == n).unwrap().clone();
        assert_eq!(s.skipped_quanta == 0, !fast_forward, "only the exact run steps every quantum");
        // 0–1 s: 8 threads, 2 CPUs per job. 1 s on: 12 threads, 4/3 CPUs per job; late's 2.2
        // CPU-s end at 2.65 s, and the 2.7 s step gives the others 2 CPUs each again.
        let late = rec("late");
        assert!(close(late.turnaround, 1.65, 1e-6), "{late:?}");
        assert!(close(late.cpu_seconds, 2.2, 1e-6), "a linear job's CPU time is its work: {late:?}");
        // lin: 2 + 1.7 × 4/3 by 2.7 s, the rest at 2 per second; it ends before the 4.6 s step.
        let lin = rec("lin");
        let lin_end = 2.7 + (8.0 - 2.0 - 1.7 * 4.0 / 3.0) / 2.0;
        assert!(close(lin.turnaround, lin_end, 1e-6), "{lin:?}");
        assert!(close(lin.cpu_seconds, 8.0, 1e-6), "{lin:?}");
        // amd: S(2) to 1 s, S(4/3) to 2.7 s, S(2) to the 4.6 s step, then alone, S(4).
        let done = amdahl(2.0) + 1.7 * amdahl(4.0 / 3.0) + 1.9 * amdahl(2.0);
        let amd = rec("amd");
        assert!(close(amd.turnaround, 4.6 + (8.0 - done) / amdahl(4.0), 1e-6), "{amd:?}");
        assert!(
            close(amd.cpu_seconds, 2.0 + 1.7 * 4.0 / 3.0 + 1.9 * 2.0 + 4.0 * (amd.turnaround - 4.6), 1e-6),
            "{amd:?}"
        );
    }
}

#[test]
fn a_rigid_job_squeezed_by_itself_pays_the_self_rate() {
    // 8 processes: under SCS with mpl=2 it starts on 4 CPUs of a machine it shares with a
    // waiting job, so it never grows: f = 2, loss 1 + sync_self × 1 × 1.
    let mut a = JobSpec::rigid("a", 0, 8, 40.0, SpeedupModel::LINEAR);
    a.sync = 1.0;
    let b = JobSpec::rigid("b", 0, 8, 40.0, SpeedupModel::LINEAR);
    let c = JobSpec::rigid("c", 0, 8, 40.0, SpeedupModel::LINEAR);
    let (_, recs) = run_workload(&sized(8, vec![a, b, c]), "scs:mpl=2", &SimConfig::default());
    let loss = 1.0 + CostModel::default().sync_self;
    assert!(close(recs.iter().find(|r| r.name == "a").unwrap().turnaround, 40.0 / 4.0 * loss, 0.01), "{recs:?}");
}

#[test]
fn a_job_that_shrinks_and_grows_back_counts_its_moves() {
    let a = JobSpec::malleable("a", 0, 8, 160.0, SpeedupModel::LINEAR);
    let b = JobSpec::malleable("b", 2 * S, 8, 8.0, SpeedupModel::LINEAR);
    let (s, recs) = run_workload(&sized(8, vec![a, b]), "equipartition", &free());
    let a = recs.iter().find(|r| r.name == "a").unwrap();
    let b = recs.iter().find(|r| r.name == "b").unwrap();
    assert_eq!(b.moves, 0, "a first placement is not a move");
    assert_eq!(a.moves, 4, "a got back the 4 CPUs b had");
    assert_eq!(s.moves, 4);
    // b arrives at 2 s, runs from the 2.0 s step on 4 CPUs for 2 s.
    assert!(close(b.turnaround, 2.0, 1e-6), "{b:?}");
    // a: 16 CPU-s on 8 CPUs, 8 on 4 while b runs, then the last 136 on 8: 2 + 2 + 17 s.
    assert!(close(a.turnaround, 21.0, 1e-6), "{a:?}");
}

#[test]
fn fast_forward_matches_a_quantum_by_quantum_run() {
    let mut g = Generator::new(Model::Poisson, 150, 64);
    g.mean_runtime = 20.0;
    let w = Workload { cpus: Some(64), generator: Some(g), ..Workload::of("gen", vec![]) };
    for policy in ["equipartition", "gang", "pdpa", "dss", "os"] {
        let exact = SimConfig { fast_forward: false, ..SimConfig::default() };
        let (a, _) = run_workload(&w, policy, &exact);
        let (b, _) = run_workload(&w, policy, &SimConfig::default());
        assert_eq!(a.jobs, 150);
        assert_eq!(b.jobs, 150);
        assert_eq!(a.skipped_quanta, 0);
        assert!(b.skipped_quanta > 0, "{policy}: nothing was skipped");
        let rel = |x: f64, y: f64| (x - y).abs() / x.abs().max(1e-9);
        assert!(rel(a.makespan, b.makespan) < 0.01, "{policy}: makespan {} vs {}", a.makespan, b.makespan);
        assert!(
            rel(a.mean_turnaround, b.mean_turnaround) < 0.02,
            "{policy}: turnaround {} vs {}",
            a.mean_turnaround,
            b.mean_turnaround
        );
        assert!(rel(a.utilization, b.utilization) < 0.02, "{policy}");
    }
}

/// A run's summary and its jobs' records.
type Run = (RunSummary, Vec<JobRecord>);

/// Runs `w` under every catalog policy (`static` with one partition) quantum by quantum and
/// with fast-forward: (policy, exact run, fast-forwarded run).
fn exact_and_fast(w: &Workload) -> Vec<(&'static str, Run, Run)> {
    let exact = SimConfig { fast_forward: false, ..SimConfig::default() };
    policies::CATALOG
        .iter()
        .map(|info| {
            let policy = if info.name == "static" { "static:parts=1" } else { info.name };
            (policy, run_workload(w, policy, &exact), run_workload(w, policy, &SimConfig::default()))
        })
        .collect()
}

#[test]
fn a_backlog_of_waiting_jobs_fast_forwards_like_a_quantum_by_quantum_run_under_every_policy() {
    // Rigid jobs at a load above the machine: a backlog waits, never-run jobs are skipped by the
    // step, and settled placements skip the placer; the figures must match an exact run.
    let mut g = Generator::new(Model::Poisson, 30, 8);
    g.load = 2.0;
    g.mean_runtime = 1.0;
    let w = Workload { cpus: Some(16), generator: Some(g), ..Workload::of("backlog", vec![]) };
    for (policy, (a, ja), (b, jb)) in exact_and_fast(&w) {
        assert_eq!((a.jobs, b.jobs), (30, 30), "{policy}");
        let rel = |x: f64, y: f64| (x - y).abs() / x.abs().max(1e-9);
        assert!(rel(a.makespan, b.makespan) < 0.01, "{policy}: makespan {} vs {}", a.makespan, b.makespan);
        let (ta, tb) = (a.mean_turnaround, b.mean_turnaround);
        assert!(rel(ta, tb) < 0.02, "{policy}: turnaround {ta} vs {tb}");
        let waited = ja.iter().filter(|j| j.response > 0.0).count();
        assert!(waited >= 5, "{policy}: only {waited} jobs waited: no backlog");
        assert_eq!(ja.len(), jb.len());
    }
}

#[test]
fn fast_forward_gives_every_job_the_record_of_a_quantum_by_quantum_run_under_every_policy() {
    // Per-job records, not only the run's means: ids and moves exactly, times and CPU-seconds
    // to float rounding (a jump adds whole periods' progress at once where stepping adds it
    // quantum by quantum; `os` computes the same model on virtual clocks).
    let mut g = Generator::new(Model::Poisson, 80, 32);
    g.mean_runtime = 5.0;
    g.load = 1.2;
    let w = Workload { cpus: Some(32), generator: Some(g), ..Workload::of("records", vec![]) };
    for (policy, (a, mut ja), (b, mut jb)) in exact_and_fast(&w) {
        assert_eq!((a.jobs, b.jobs), (80, 80), "{policy}");
        assert!(b.skipped_quanta > 0, "{policy}: nothing was skipped");
        ja.sort_by_key(|j| j.id);
        jb.sort_by_key(|j| j.id);
        for (x, y) in ja.iter().zip(&jb) {
            assert_eq!((x.id, x.moves), (y.id, y.moves), "{policy}: {x:?} vs {y:?}");
            let times = [
                ("response", x.response, y.response),
                ("turnaround", x.turnaround, y.turnaround),
                ("wait", x.wait, y.wait),
                ("cpu_seconds", x.cpu_seconds, y.cpu_seconds),
            ];
            for (what, u, v) in times {
                assert!((u - v).abs() <= 1e-6 * u.abs().max(1.0), "{policy}: job {} {what} {u} vs {v}", x.id);
            }
        }
    }
}

/// What a [`Disguised`] policy says of its rotation.
#[derive(Clone, Copy)]
enum Disguise {
    /// Nothing: the engine must find the period by repetition.
    Unstated,
    /// A fingerprint that changes with every program admitted.
    Restless,
    /// Its own rotation, but that it reads the usage figures: the engine then brings every job
    /// up to date at every quantum.
    Watchful,
}

/// A policy as another, but for what it says of its rotation.
struct Disguised(Box<dyn SimHints>, Disguise);

impl Policy for Disguised {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        self.0.decide(view, out)
    }

    fn refit(&mut self, view: &View, out: &mut Decision) {
        self.0.refit(view, out)
    }

    fn time_sharing(&self) -> bool {
        self.0.time_sharing()
    }
}

impl SimHints for Disguised {
    fn preferred_mpl(&self) -> Option<u32> {
        self.0.preferred_mpl()
    }

    fn reads_usage(&self) -> bool {
        matches!(self.1, Disguise::Watchful) || self.0.reads_usage()
    }

    fn settled(&self) -> bool {
        self.0.settled()
    }

    fn rotation(&self, view: &View, max: u32) -> Option<Rotation> {
        let mut r = self.0.rotation(view, max)?;
        match self.1 {
            Disguise::Unstated => return None,
            Disguise::Restless => r.mix(view.programs.len() as u64),
            Disguise::Watchful => {}
        }
        Some(r)
    }
}

/// Runs `jobs` on a flat machine of `cpus` under `policy` (named `spec`): the summary and every
/// job's record in id order.
fn records(cpus: u32, spec: &str, policy: Box<dyn SimHints>, jobs: &[JobSpec], fast_forward: bool) -> Run {
    let cfg = SimConfig { fast_forward, ..SimConfig::default() };
    let mut out = common::Jobs::default();
    let s = run(&Topology::flat(cpus), spec, policy, jobs.iter().cloned(), &cfg, &mut out).unwrap();
    out.0.sort_by_key(|j| j.id);
    (s, out.0)
}

/// Asserts that two runs gave every job the same moves and, to float rounding, turnaround.
fn same_records(what: &str, a: &[JobRecord], b: &[JobRecord]) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (x, y) in a.iter().zip(b) {
        assert_eq!((x.id, x.moves), (y.id, y.moves), "{what}");
        assert!((x.turnaround - y.turnaround).abs() <= 1e-6 * y.turnaround, "{what}: {x:?} vs {y:?}");
    }
}

#[test]
fn jobs_brought_up_to_date_at_their_own_events_end_as_at_every_quantum() {
    // Without fast-forward, a policy that reads no usage figures leaves each job's progress until
    // its allocation or phase changes: one update over many quanta, where a policy that reads
    // them (the disguise) moves every job every quantum. Same records, to rounding, and the same
    // number of events, for malleable, moldable and rigid jobs under space- and time-sharing.
    // Rigid jobs under equipartition, cluster and burst also have their decisions brought up to
    // date (`SimHints::update`) while every job is served, which the disguise does not forward: it
    // decides afresh every quantum.
    for (kind, policy) in [
        (JobKind::Malleable, "equipartition"),
        (JobKind::Rigid, "equipartition"),
        (JobKind::Rigid, "cluster"),
        (JobKind::Rigid, "burst"),
        (JobKind::Moldable, "dss"),
        (JobKind::Rigid, "fcfs"),
        (JobKind::Malleable, "gang"),
        (JobKind::Rigid, "vtq-dss"),
    ] {
        let mut g = Generator::new(Model::Poisson, 150, 32);
        (g.mean_runtime, g.load, g.kind, g.max_size) = (3.7, 1.1, kind, 16);
        let jobs: Vec<JobSpec> = g.iter().collect();
        let build = || policies::build_simulated(policy).unwrap();
        let (lazy, lj) = records(32, policy, build(), &jobs, false);
        let (eager, ej) = records(32, policy, Box::new(Disguised(build(), Disguise::Watchful)), &jobs, false);
        assert_eq!(lazy.events, eager.events, "{policy}");
        assert!(lazy.makespan > 0.0 && (lazy.makespan - eager.makespan).abs() <= 1e-9 * eager.makespan, "{policy}");
        same_records(policy, &lj, &ej);
    }
}

#[test]
fn a_stated_period_is_trusted_after_one_repetition() {
    // Gang and the sliding windows state their rotation: the engine jumps after it repeated
    // once, with fewer steps than when it must see the schedule repeat three times, and every
    // job's record is still the quantum-by-quantum one.
    let mut g = Generator::new(Model::Poisson, 80, 32);
    g.mean_runtime = 5.0;
    g.load = 1.2;
    let jobs: Vec<JobSpec> = g.iter().collect();
    for policy in ["gang", "sw-dss", "ssw-dss", "cs"] {
        let build = || policies::build_simulated(policy).unwrap();
        let (stated, js) = records(32, policy, build(), &jobs, true);
        let (unstated, _) = records(32, policy, Box::new(Disguised(build(), Disguise::Unstated)), &jobs, true);
        let (_, exact) = records(32, policy, build(), &jobs, false);
        assert!(stated.events < unstated.events, "{policy}: {} events stated, {} not", stated.events, unstated.events);
        same_records(policy, &js, &exact);
    }
}

#[test]
fn an_admission_the_rotation_leaves_out_changes_nothing() {
    // One co-scheduling row holds a 32-CPU job; 40 more arrive, one a second, and wait in the
    // view (none fits beside it). The rotation stays the same, so the schedule is not learnt
    // again after each admission, and every job's record is the quantum-by-quantum one. (Run
    // times that are not whole quanta: an end on a boundary moves by a quantum with a
    // nanosecond of rounding.)
    let mut jobs = vec![JobSpec::rigid("long", 0, 32, 60.03 * 32.0, SpeedupModel::LINEAR)];
    jobs.extend(
        (1..=40).map(|k| JobSpec::rigid(format!("w{k}"), k * S + S / 3, 32, 1.037 * 32.0, SpeedupModel::LINEAR)),
    );
    let build = || policies::build_simulated("cs:mpl=1").unwrap();
    let (steady, js) = records(32, "cs", build(), &jobs, true);
    let (restless, _) = records(32, "cs", Box::new(Disguised(build(), Disguise::Restless)), &jobs, true);
    let (_, exact) = records(32, "cs", build(), &jobs, false);
    // At least a step fewer per admission (each costs the step that sees it either way).
    assert!(steady.events + 40 <= restless.events, "{} events kept, {} learnt again", steady.events, restless.events);
    same_records("cs", &js, &exact);
}

#[test]
fn a_jump_counts_the_idle_cpus_of_a_job_that_waits_as_the_quanta_do() {
    // One job holds 2 of 4 CPUs; a second arrives at 10 s and queues behind the admission limit
    // of 1: from then on the idle CPUs are fragmentation, in the jumps too (a jump must not
    // reuse the schedule's history from before the arrival).
    let jobs = vec![
        JobSpec::rigid("a", 0, 2, 30.05 * 2.0, SpeedupModel::LINEAR),
        JobSpec::rigid("b", 10 * S, 2, 5.05 * 2.0, SpeedupModel::LINEAR),
    ];
    let mut w = sized(4, jobs);
    w.mpl = 1;
    for policy in ["gang", "sw-dss", "equipartition"] {
        let (fast, _) = run_workload(&w, policy, &SimConfig::default());
        let (exact, _) = run_workload(&w, policy, &SimConfig { fast_forward: false, ..SimConfig::default() });
        assert!(
            close(fast.fragmentation, exact.fragmentation, 1e-6),
            "{policy}: {} vs {}",
            fast.fragmentation,
            exact.fragmentation
        );
        assert!(exact.fragmentation > 0.25, "{policy}: b waits 20 s beside 2 idle CPUs: {}", exact.fragmentation);
    }
}

#[test]
fn a_stall_served_within_a_period_is_not_extrapolated() {
    // VTQ-DSS slices shorter than a 60 ms resume cost for some members: a job that both serves
    // a stall and progresses in a period does not repeat it linearly, so the engine steps
    // instead of jumping, and the run is the quantum-by-quantum one (an extrapolating jump ends
    // it at 141.36 s instead of 139.21 s).
    let jobs = vec![
        JobSpec::malleable("a", 38_868_000_000, 4, 54.1551 * 4.0, SpeedupModel::LINEAR),
        JobSpec::malleable("b", 59_805_000_000, 3, 26.5031 * 3.0, SpeedupModel::LINEAR),
        JobSpec::malleable("c", 63_423_000_000, 1, 41.5591, SpeedupModel::LINEAR),
        JobSpec::malleable("d", 63_423_000_000, 8, 12.7961 * 8.0, SpeedupModel::LINEAR),
    ];
    let cost = CostModel { resume_ms: 60.0, ..CostModel::default() };
    let spec = "vtq-dss:k=1.5";
    let (fast, js) = run_workload(&sized(8, jobs.clone()), spec, &SimConfig { cost, ..SimConfig::default() });
    let cfg = SimConfig { cost, fast_forward: false, ..SimConfig::default() };
    let (exact, je) = run_workload(&sized(8, jobs), spec, &cfg);
    assert!(close(fast.makespan, exact.makespan, 1e-6), "{} vs {}", fast.makespan, exact.makespan);
    let (mut js, mut je) = (js, je);
    js.sort_by_key(|j| j.id);
    je.sort_by_key(|j| j.id);
    same_records(spec, &js, &je);
}

#[test]
fn slices_shorter_than_the_resume_cost_end_at_the_horizon_at_once() {
    // Two whole-machine jobs alternate in gang rows of 100 ms, each resume costs 150 ms: neither
    // ever progresses. The schedule repeats, so the engine jumps to the horizon instead of
    // stepping every quantum towards 4e9 s.
    let t = Topology::flat(4);
    let jobs: Vec<JobSpec> =
        (0..2).map(|k| JobSpec::rigid(format!("j{k}"), 0, 4, 40.0, SpeedupModel::LINEAR)).collect();
    let cfg = SimConfig { cost: CostModel { resume_ms: 150.0, ..CostModel::default() }, ..SimConfig::default() };
    let e = run(&t, "gang", policies::build_simulated("gang").unwrap(), jobs, &cfg, &mut ()).unwrap_err();
    assert!(matches!(e, SimError::Horizon { .. }), "{e}");
}

#[test]
fn runs_are_deterministic() {
    let mut g = Generator::new(Model::Lublin, 200, 32);
    g.load = 0.9;
    let w = Workload { cpus: Some(32), generator: Some(g), ..Workload::of("gen", vec![]) };
    for policy in ["equipartition", "gang", "scs"] {
        let (mut a, ja) = run_workload(&w, policy, &SimConfig::default());
        let (mut b, jb) = run_workload(&w, policy, &SimConfig::default());
        a.wall_seconds = 0.0;
        b.wall_seconds = 0.0;
        assert_eq!(a, b, "{policy}");
        assert_eq!(ja, jb);
    }
}

/// A policy that never gives anyone a CPU.
struct Nothing;

impl Policy for Nothing {
    fn name(&self) -> &'static str {
        "nothing"
    }

    fn decide(&mut self, _view: &View, _out: &mut Decision) {}
}

impl SimHints for Nothing {}

#[test]
fn a_starving_policy_is_an_error_not_a_hang() {
    let t = Topology::flat(4);
    let jobs = vec![JobSpec::malleable("a", 0, 4, 1.0, SpeedupModel::LINEAR)];
    for ff in [true, false] {
        let cfg = SimConfig { fast_forward: ff, ..SimConfig::default() };
        let e = run(&t, "nothing", Box::new(Nothing), jobs.clone(), &cfg, &mut ()).unwrap_err();
        assert!(matches!(e, SimError::Starved { jobs: 1, .. }), "{e}");
    }
    // The same with jobs queued behind the admission limit: none can be admitted, since none
    // admitted can end (this ran to the horizon, a step at a time, when the queue counted as
    // something that could still happen).
    let mut jobs = jobs;
    jobs.push(JobSpec::malleable("b", 0, 4, 1.0, SpeedupModel::LINEAR));
    for ff in [true, false] {
        let cfg = SimConfig { fast_forward: ff, mpl: 1, ..SimConfig::default() };
        let e = run(&t, "nothing", Box::new(Nothing), jobs.clone(), &cfg, &mut ()).unwrap_err();
        assert!(matches!(e, SimError::Starved { jobs: 2, .. }), "{e}");
    }
}

/// A broken policy: gives every program every CPU of the machine.
struct Greedy;

impl Policy for Greedy {
    fn name(&self) -> &'static str {
        "greedy"
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        for i in 0..view.programs.len() {
            out.give(i, view.cpus);
        }
    }
}

impl SimHints for Greedy {}

#[test]
fn a_decision_beyond_the_machine_is_a_placement_error() {
    let t = Topology::flat(4);
    // Both at once: the first placement is a full one, checked whole.
    let both = vec![
        JobSpec::malleable("a", 0, 4, 1.0, SpeedupModel::LINEAR),
        JobSpec::malleable("b", 0, 4, 1.0, SpeedupModel::LINEAR),
    ];
    let e = run(&t, "greedy", Box::new(Greedy), both, &SimConfig::default(), &mut ()).unwrap_err();
    assert!(
        matches!(e, SimError::Placement { error: PlacementError::Oversubscribed { total: 8, managed: 4 }, .. }),
        "{e}"
    );
    // The second a quantum later: only it is placed, and comes out short of its count.
    let later = vec![
        JobSpec::malleable("a", 0, 4, 10.0, SpeedupModel::LINEAR),
        JobSpec::malleable("b", 150_000_000, 4, 1.0, SpeedupModel::LINEAR),
    ];
    let e = run(&t, "greedy", Box::new(Greedy), later.clone(), &SimConfig::default(), &mut ()).unwrap_err();
    assert!(
        matches!(e, SimError::Placement { error: PlacementError::WrongSize { program: 1, count: 4, got: 0 }, .. }),
        "{e}"
    );
    // Unchecked, the run goes on (the second program waits for CPUs the placer cannot give).
    let cfg = SimConfig { check_placement: false, ..SimConfig::default() };
    assert_eq!(run(&t, "greedy", Box::new(Greedy), later, &cfg, &mut ()).unwrap().jobs, 2);
}

#[test]
fn a_job_larger_than_the_machine_is_refused() {
    let t = Topology::flat(4);
    let jobs = vec![JobSpec::rigid("big", 0, 8, 1.0, SpeedupModel::LINEAR)];
    let e = run(
        &t,
        "equipartition",
        policies::build_simulated("equipartition").unwrap(),
        jobs,
        &SimConfig::default(),
        &mut (),
    )
    .unwrap_err();
    assert!(matches!(e, SimError::Job { field: "request", .. }), "{e}");
}

#[derive(Default)]
struct Events(Vec<Event>);

impl Observer for Events {
    fn wants_events(&self) -> bool {
        true
    }

    fn event(&mut self, e: &Event) {
        self.0.push(e.clone());
    }
}

#[test]
fn the_trace_tells_the_story_in_time_order() {
    let mut lt = JobSpec::malleable("lt", 0, 8, 0.0, SpeedupModel::LINEAR);
    lt.kind = Kind::Evolving;
    lt.phases = ltomcatv(8, 2, 0.5, 8.0, &SpeedupModel::LINEAR).into();
    let other = JobSpec::malleable("b", S / 2, 4, 4.0, SpeedupModel::LINEAR);
    let t = Topology::flat(8);
    let mut ev = Events::default();
    run(
        &t,
        "equipartition",
        policies::build_simulated("equipartition").unwrap(),
        vec![lt, other],
        &SimConfig::default(),
        &mut ev,
    )
    .unwrap();
    let ev = ev.0;
    assert!(matches!(ev[0].kind, EventKind::Start { .. }));
    assert!(ev.windows(2).all(|w| w[0].t <= w[1].t), "time order");
    let count = |f: fn(&EventKind) -> bool| ev.iter().filter(|e| f(&e.kind)).count();
    assert_eq!(count(|k| matches!(k, EventKind::Arrive { .. })), 2);
    assert_eq!(count(|k| matches!(k, EventKind::Exit { .. })), 2);
    // ltomcatv: I/O (1) → parallel (8) → I/O (1) → parallel (8).
    let requests: Vec<u32> = ev
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Request { wanted } => Some(wanted),
            _ => None,
        })
        .collect();
    assert_eq!(requests, vec![8, 1, 8]);
    assert!(count(|k| matches!(k, EventKind::Allocate { running: true, .. })) >= 3);
}

#[test]
fn mpl_limits_admission() {
    let jobs: Vec<JobSpec> =
        (0..4).map(|k| JobSpec::malleable(format!("j{k}"), 0, 4, 40.0, SpeedupModel::LINEAR)).collect();
    let mut w = sized(4, jobs);
    w.mpl = 1;
    let (s, recs) = run_workload(&w, "equipartition", &free());
    let mut ends: Vec<f64> = recs.iter().map(|r| r.turnaround).collect();
    ends.sort_by(f64::total_cmp);
    assert!(ends.iter().zip([10.0, 20.0, 30.0, 40.0]).all(|(a, b)| close(*a, b, 1e-6)), "one at a time: {ends:?}");
    assert!(close(s.mean_wait, 15.0, 1e-6));
}

#[test]
fn a_time_shared_policy_admits_its_preferred_level_unless_the_run_sets_one() {
    // 20 one-CPU jobs of 10 s at once on 32 CPUs: they all fit, but gang and the time-shared DSS
    // variants admit 8 at a time by default (`admit`), so three batches run one after another.
    let jobs: Vec<JobSpec> =
        (0..20).map(|k| JobSpec::rigid(format!("j{k}"), 0, 1, 10.0, SpeedupModel::LINEAR)).collect();
    let w = sized(32, jobs);
    for policy in ["gang", "sw-dss", "ssw-dss", "vtq-dss", "omp-dss"] {
        let (s, _) = run_workload(&w, policy, &free());
        assert_eq!(s.mpl, 8, "{policy}");
        assert!(close(s.makespan, 30.0, 0.5), "{policy}: three batches of 8, 8 and 4: {}", s.makespan);
        let (s, _) = run_workload(&w, &format!("{policy}:admit=0"), &free());
        assert_eq!(s.mpl, 0, "{policy}");
        assert!(close(s.makespan, 10.0, 0.5), "{policy}:admit=0 runs every job at once: {}", s.makespan);
        let mut w = w.clone();
        w.mpl = 20;
        let (s, _) = run_workload(&w, policy, &free());
        assert_eq!(s.mpl, 20, "{policy}: the workload's level wins");
        assert!(close(s.makespan, 10.0, 0.5), "{policy}: {}", s.makespan);
    }
    let (s, _) = run_workload(&w, "equipartition", &free());
    assert_eq!((s.mpl, s.makespan.round()), (0, 10.0), "a space-sharing policy admits every job");
}

/// A job that progresses but would end past the horizon (its end does not fit the nanosecond
/// clock) stops the run with the horizon's error at once under every space-sharing policy, at
/// the default quantum: the quiet quanta up to the horizon are skipped, not stepped one by one
/// (4e10 of them).
#[test]
fn an_end_past_the_horizon_is_reached_by_a_jump() {
    let t = Topology::flat(4);
    let slow = JobSpec::malleable("slow", 0, 2, 1e12, SpeedupModel::LINEAR);
    let crawl = JobSpec::malleable("crawl", 0, 2, 1.0, SpeedupModel::Table { values: vec![1e-12] });
    for policy in ["equipartition", "fcfs", "dss", "pdpa", "llpc", "cluster"] {
        for job in [&slow, &crawl] {
            let e = run(
                &t,
                policy,
                policies::build_simulated(policy).unwrap(),
                vec![job.clone()],
                &SimConfig::default(),
                &mut (),
            )
            .unwrap_err();
            assert!(matches!(e, SimError::Horizon { jobs: 1, .. }), "{policy}, {}: {e}", job.name);
        }
    }
}

#[test]
fn absurd_times_are_errors_not_overflows() {
    let t = Topology::flat(4);
    // An arrival at the end of the nanosecond clock: refused, naming the job and the field.
    let late = JobSpec::malleable("late", u64::MAX, 2, 1.0, SpeedupModel::LINEAR);
    let e = run(&t, "equipartition", policies::build_simulated("equipartition").unwrap(), vec![late], &free(), &mut ())
        .unwrap_err();
    assert!(matches!(&e, SimError::Job { name, field: "arrival", .. } if name == "late"), "{e}");
    // Work that would run past the horizon on one CPU: the run stops there, with or without
    // fast-forward, instead of overflowing its clock.
    for fast_forward in [true, false] {
        let huge = JobSpec::malleable("huge", 0, 1, 1e300, SpeedupModel::LINEAR);
        let cfg = SimConfig { fast_forward, quantum: Some(3_600 * S), ..free() };
        if !fast_forward {
            // Quantum by quantum, an hour each, from the latest accepted arrival: about 0.8 M
            // steps to the horizon.
            let mut near = huge.clone();
            near.arrival = 999_999_000 * S;
            let e = run(
                &t,
                "equipartition",
                policies::build_simulated("equipartition").unwrap(),
                vec![near],
                &cfg,
                &mut (),
            )
            .unwrap_err();
            assert!(matches!(e, SimError::Horizon { jobs: 1, .. }), "{e}");
            continue;
        }
        let e = run(
            &t,
            "equipartition",
            policies::build_simulated("equipartition").unwrap(),
            vec![huge.clone()],
            &cfg,
            &mut (),
        )
        .unwrap_err();
        assert!(matches!(e, SimError::Horizon { jobs: 1, .. }), "{e}");
        // The same under os, on a shared clock (linear) and on a rate of its own (Amdahl).
        let amdahl =
            JobSpec { phases: Phase::parallel(1e300, 1, SpeedupModel::Amdahl { serial: 0.5 }).into(), ..huge.clone() };
        for job in [huge, amdahl] {
            let e = run(&t, "os", policies::build_simulated("os").unwrap(), vec![job], &cfg, &mut ()).unwrap_err();
            assert!(matches!(e, SimError::Horizon { jobs: 1, .. }), "{e}");
        }
    }
}
