//! What a run achieved: makespan, turnaround, slowdown against each job class's dedicated run
//! time, CPU utilisation, and the coefficient of variation of run times per class (paper 002's
//! measure of stability).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::runner::{Outcome, RunResult};

/// Mean and CV, and the CV per class, shared with the report's figures read off traces.
pub use cpumgr_report::summary::{class_cv, mean_cv};

/// One job's line in the results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSummary {
    /// Its name.
    pub name: String,
    /// End minus arrival, seconds; `None` for a job that did not arrive before the run's time
    /// limit.
    pub turnaround: Option<f64>,
    /// Turnaround over its class's dedicated run time; `None` without either (a class whose run
    /// alone did not finish has no dedicated time).
    pub slowdown: Option<f64>,
    /// `ok`, or why it failed.
    pub outcome: String,
}

/// One run's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// The configuration.
    pub config: String,
    /// First arrival to last end, seconds.
    pub makespan: f64,
    /// Mean turnaround of the jobs that arrived, seconds.
    pub mean_turnaround: f64,
    /// Largest turnaround, seconds.
    pub max_turnaround: f64,
    /// Mean slowdown of the jobs that have one; NaN (JSON `null`) when none has.
    pub mean_slowdown: f64,
    /// CPU seconds used over CPU seconds available during the makespan.
    pub utilization: f64,
    /// Per class of several jobs, the coefficient of variation of run times ([`class_cv`]).
    pub cv: BTreeMap<String, f64>,
    /// Jobs that did not end with status 0, other than those the time limit stopped.
    pub failed: usize,
    /// Jobs the run's time limit ended, kept from starting or from arriving
    /// ([`Outcome::cut_by_limit`]): when above zero, the makespan is a lower bound.
    pub stopped: usize,
    /// Per job.
    pub jobs: Vec<JobSummary>,
}

/// Which of several repeats represents them: the one whose makespan is the median (the upper
/// median for an even count, so it is always a real run). A configuration's figures, jobs and
/// charts all come from this one repeat, so they agree with each other. `None` when empty.
pub fn median_repeat(runs: &[Summary]) -> Option<usize> {
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by(|&a, &b| runs[a].makespan.total_cmp(&runs[b].makespan));
    order.get(order.len() / 2).copied()
}

impl Summary {
    /// Whether the run's time limit cut it short: its makespan is then a lower bound.
    pub fn cut(&self) -> bool {
        self.stopped > 0
    }
}

/// Summarises a run; `dedicated` maps a class to its run time alone on the machine (the jobs of
/// a class missing from it, or mapped to `None` because its run alone did not finish, have no
/// slowdown). Jobs that did not arrive before the run's time limit count in no mean.
pub fn summarize(run: &RunResult, dedicated: &BTreeMap<String, Option<f64>>) -> Summary {
    let mut jobs = Vec::new();
    let mut per_class: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for j in &run.jobs {
        let arrived = j.outcome != Outcome::NotArrived;
        let turnaround = arrived.then(|| j.turnaround());
        let alone = dedicated.get(&j.class).copied().flatten().filter(|d| *d > 0.0);
        let slowdown = turnaround.zip(alone).map(|(t, a)| t / a);
        jobs.push(JobSummary { name: j.name.clone(), turnaround, slowdown, outcome: j.outcome.describe() });
        if arrived {
            per_class.entry(j.class.clone()).or_default().push(j.run_time());
        }
    }
    let turnarounds: Vec<f64> = jobs.iter().filter_map(|j| j.turnaround).collect();
    let slowdowns: Vec<f64> = jobs.iter().filter_map(|j| j.slowdown).collect();
    let cpu: f64 = run.jobs.iter().map(|j| j.cpu_seconds).sum();
    let available = run.makespan * run.cpus.len().max(1) as f64;
    Summary {
        config: run.config.clone(),
        makespan: run.makespan,
        mean_turnaround: mean_cv(&turnarounds).0,
        max_turnaround: turnarounds.iter().copied().fold(0.0, f64::max),
        mean_slowdown: if slowdowns.is_empty() { f64::NAN } else { mean_cv(&slowdowns).0 },
        utilization: if available > 0.0 { (cpu / available).min(1.0) } else { 0.0 },
        cv: class_cv(per_class),
        failed: run.jobs.iter().filter(|j| !j.outcome.ok() && !j.outcome.cut_by_limit()).count(),
        stopped: run.jobs.iter().filter(|j| j.outcome.cut_by_limit()).count(),
        jobs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_repeat_is_a_real_run() {
        let run = |makespan: f64| Summary {
            config: "c".into(),
            makespan,
            mean_turnaround: 0.0,
            max_turnaround: 0.0,
            mean_slowdown: 0.0,
            utilization: 0.0,
            cv: BTreeMap::new(),
            failed: 0,
            stopped: 0,
            jobs: Vec::new(),
        };
        assert_eq!(median_repeat(&[run(3.0), run(1.0), run(2.0)]), Some(2));
        assert_eq!(median_repeat(&[run(3.0), run(1.0)]), Some(0), "the upper of two");
        assert_eq!(median_repeat(&[]), None);
    }
}
