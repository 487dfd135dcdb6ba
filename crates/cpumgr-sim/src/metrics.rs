//! Per-job and per-run figures. Per-job records are handed to an observer as jobs finish and then
//! folded into running sums, so a run's memory does not grow with the jobs it has finished.
//!
//! Definitions (times in seconds):
//! - *response*: arrival to the first quantum the job runs in;
//! - *wait*: time alive but not running (queued, or stopped by a time-sharing policy);
//! - *turnaround*: arrival to end; *run*: first run to end;
//! - *slowdown*: turnaround over the job's dedicated time (alone on the machine with its request);
//! - *bounded slowdown*: `max(1, turnaround / max(dedicated, τ))`, τ = 10 s;
//! - *makespan*: first arrival to last end; *utilisation*: CPU-seconds allocated over CPUs ×
//!   makespan; *fragmentation*: CPU-seconds left idle while a job waited, over CPUs × makespan;
//! - *fairness*: Jain's index of the slowdowns, `(Σx)² / (n Σx²)`, 1 when all are equal;
//! - *CV* per class: standard deviation over mean of the run times (paper 002's stability).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

/// τ of the bounded slowdown, seconds.
pub const BOUNDED_SLOWDOWN_TAU: f64 = 10.0;

/// One finished job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobRecord {
    /// Its id (arrival order).
    pub id: u64,
    /// Its name.
    pub name: cpumgr_core::Name,
    /// Its class.
    pub class: Arc<str>,
    /// Arrival, seconds.
    pub arrival: f64,
    /// Arrival to first run, seconds.
    pub response: f64,
    /// Time alive but not running, seconds.
    pub wait: f64,
    /// First run to end, seconds.
    pub run: f64,
    /// Arrival to end, seconds.
    pub turnaround: f64,
    /// Run time alone on the machine, seconds.
    pub dedicated: f64,
    /// Turnaround over dedicated time.
    pub slowdown: f64,
    /// Bounded slowdown (τ = 10 s).
    pub bounded_slowdown: f64,
    /// CPU-seconds it held.
    pub cpu_seconds: f64,
    /// CPUs it gained that it had not held before (affinity losses).
    pub moves: u64,
}

/// Running sums of one class's run times.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Moments {
    n: u64,
    sum: f64,
    sum_sq: f64,
}

impl Moments {
    fn add(&mut self, x: f64) {
        self.n += 1;
        self.sum += x;
        self.sum_sq += x * x;
    }

    fn mean(&self) -> f64 {
        mean(self.sum, self.n)
    }

    fn cv(&self) -> f64 {
        let mean = self.mean();
        if mean <= 0.0 {
            return 0.0;
        }
        let var = (self.sum_sq / self.n as f64 - mean * mean).max(0.0);
        var.sqrt() / mean
    }
}

/// The mean of `n` numbers that sum to `sum` (0 for none).
fn mean(sum: f64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// Folds finished jobs into a run's figures. The run-wide figures are means, but for the
/// slowdowns' fairness index: one count and a sum each, and the slowdowns' sum of squares (a
/// `Moments` per figure counted every job five times and squared figures whose squares
/// nothing reads).
#[derive(Debug, Clone, Default)]
pub struct Accumulator {
    /// Jobs added.
    n: u64,
    turnaround: f64,
    slowdown: f64,
    /// Σ slowdown², for the fairness index.
    slowdown_sq: f64,
    bounded: f64,
    wait: f64,
    response: f64,
    max_turnaround: f64,
    moves: u64,
    /// Per class, its run times, in the order the classes were first seen.
    classes: Vec<(Arc<str>, Moments)>,
    /// Where each class is in `classes`.
    index: BTreeMap<Arc<str>, usize>,
    /// The class of the last job added (an index into `classes`). The jobs of a class share
    /// one string, so a job of the same class as the last one (every generated job) is found by
    /// comparing pointers, not by a search that compares strings.
    last: usize,
}

impl Accumulator {
    /// Adds one finished job.
    pub fn add(&mut self, r: &JobRecord) {
        self.n += 1;
        self.turnaround += r.turnaround;
        self.slowdown += r.slowdown;
        self.slowdown_sq += r.slowdown * r.slowdown;
        self.bounded += r.bounded_slowdown;
        self.wait += r.wait;
        self.response += r.response;
        // `f64::max` written out, one `maxsd` rather than a NaN check and a blend: the maximum
        // is never NaN (it starts at 0 and takes only values greater than itself).
        if r.turnaround > self.max_turnaround {
            self.max_turnaround = r.turnaround;
        }
        self.moves += r.moves;
        let k = match self.classes.get(self.last) {
            Some((class, _)) if Arc::ptr_eq(class, &r.class) => self.last,
            _ => self.class(&r.class),
        };
        self.last = k;
        self.classes[k].1.add(r.run);
    }

    /// Where `class` is in `classes`, added if it is new.
    fn class(&mut self, class: &Arc<str>) -> usize {
        if let Some(&k) = self.index.get(class) {
            return k;
        }
        let k = self.classes.len();
        self.classes.push((class.clone(), Moments::default()));
        self.index.insert(class.clone(), k);
        k
    }

    /// Jobs added so far.
    pub fn jobs(&self) -> u64 {
        self.n
    }

    /// The run's summary, given what the engine measured.
    pub fn finish(&self, run: RunTotals) -> RunSummary {
        let capacity = run.cpus as f64 * run.makespan;
        let fairness = if self.slowdown_sq > 0.0 {
            self.slowdown * self.slowdown / (self.n as f64 * self.slowdown_sq)
        } else {
            1.0
        };
        RunSummary {
            policy: run.policy,
            cpus: run.cpus,
            jobs: self.jobs(),
            events: run.events,
            makespan: run.makespan,
            mean_wait: mean(self.wait, self.n),
            mean_response: mean(self.response, self.n),
            mean_turnaround: mean(self.turnaround, self.n),
            max_turnaround: self.max_turnaround,
            mean_slowdown: mean(self.slowdown, self.n),
            mean_bounded_slowdown: mean(self.bounded, self.n),
            utilization: if capacity > 0.0 { (run.busy_cpu_seconds / capacity).min(1.0) } else { 0.0 },
            fragmentation: if capacity > 0.0 { (run.fragmented_cpu_seconds / capacity).min(1.0) } else { 0.0 },
            fairness,
            moves: self.moves,
            class_mean_run: self.classes.iter().map(|(c, m)| (c.to_string(), m.mean())).collect(),
            // A class of one job has no spread to measure (its CV is 0 by definition): left out,
            // as the launcher and the reports leave out a class of one run.
            class_cv: self.classes.iter().filter(|(_, m)| m.n > 1).map(|(c, m)| (c.to_string(), m.cv())).collect(),
            skipped_quanta: run.skipped_quanta,
            mpl: run.mpl,
            wall_seconds: run.wall_seconds,
        }
    }
}

/// What the engine measures besides the jobs.
#[derive(Debug, Clone, Default)]
pub struct RunTotals {
    /// The policy spec.
    pub policy: String,
    /// Managed CPUs.
    pub cpus: u32,
    /// Events processed.
    pub events: u64,
    /// First arrival to last end, seconds.
    pub makespan: f64,
    /// CPU-seconds allocated to running programs.
    pub busy_cpu_seconds: f64,
    /// CPU-seconds idle while some job waited.
    pub fragmented_cpu_seconds: f64,
    /// Quanta skipped by fast-forwarding a repeating schedule.
    pub skipped_quanta: u64,
    /// The admission limit the run started with, 0 for none.
    pub mpl: u32,
    /// Host seconds the run took.
    pub wall_seconds: f64,
}

/// One run's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    /// The policy spec.
    pub policy: String,
    /// Managed CPUs.
    pub cpus: u32,
    /// Jobs finished.
    pub jobs: u64,
    /// Events processed (arrivals, phase changes, completions, and the scheduler's steps at
    /// boundaries and wake-ups).
    pub events: u64,
    /// First arrival to last end, seconds.
    pub makespan: f64,
    /// Mean wait, seconds.
    pub mean_wait: f64,
    /// Mean response, seconds.
    pub mean_response: f64,
    /// Mean turnaround, seconds.
    pub mean_turnaround: f64,
    /// Largest turnaround, seconds.
    pub max_turnaround: f64,
    /// Mean slowdown.
    pub mean_slowdown: f64,
    /// Mean bounded slowdown (τ = 10 s).
    pub mean_bounded_slowdown: f64,
    /// Allocated CPU-seconds over CPUs × makespan.
    pub utilization: f64,
    /// Idle CPU-seconds while a job waited, over CPUs × makespan.
    pub fragmentation: f64,
    /// Jain's fairness index of the slowdowns.
    pub fairness: f64,
    /// CPUs gained that jobs had not held before.
    pub moves: u64,
    /// Per class, the mean run time, seconds.
    pub class_mean_run: BTreeMap<String, f64>,
    /// Per class of several jobs, the coefficient of variation of run times (paper 002's measure
    /// of how stable they are); a class of one job is not listed.
    pub class_cv: BTreeMap<String, f64>,
    /// Quanta skipped by fast-forwarding.
    pub skipped_quanta: u64,
    /// The admission limit (multiprogramming level) the run started with, 0 for none: the
    /// run's, the workload's, or the policy's preferred one; a policy's advice (PDPA) may move
    /// it during the run. Runs compared side by side may differ here.
    pub mpl: u32,
    /// Host seconds the run took.
    pub wall_seconds: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(class: &str, run: f64, slowdown: f64) -> JobRecord {
        JobRecord {
            id: 0,
            name: class.into(),
            class: class.into(),
            arrival: 0.0,
            response: 0.0,
            wait: 0.0,
            run,
            turnaround: run,
            dedicated: run / slowdown,
            slowdown,
            bounded_slowdown: slowdown,
            cpu_seconds: run,
            moves: 1,
        }
    }

    #[test]
    fn sums_give_means_cv_and_fairness() {
        let mut a = Accumulator::default();
        a.add(&rec("x", 1.0, 1.0));
        a.add(&rec("x", 3.0, 3.0));
        a.add(&rec("y", 2.0, 1.0));
        let s = a.finish(RunTotals { cpus: 4, makespan: 4.0, busy_cpu_seconds: 8.0, ..Default::default() });
        assert_eq!(s.jobs, 3);
        assert!((s.class_cv["x"] - 0.5).abs() < 1e-12);
        assert!(!s.class_cv.contains_key("y"), "a class of one job has no CV");
        assert_eq!(s.class_mean_run["y"], 2.0);
        assert!((s.mean_turnaround - 2.0).abs() < 1e-12);
        assert!((s.utilization - 0.5).abs() < 1e-12);
        // Jain of [1, 3, 1] = 25 / (3 × 11).
        assert!((s.fairness - 25.0 / 33.0).abs() < 1e-12);
        assert_eq!(s.moves, 3);
    }
}
