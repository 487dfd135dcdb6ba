//! The cost-of-sharing model: what time-sharing does to a parallel program, so that the `os`
//! baseline and the gang and time-shared policies are charged honestly.
//!
//! A phase with speedup model `S` whose program holds `c` CPUs (possibly a fraction of the machine
//! under `os`) with `t` threads progresses at
//!
//! - `S(min(c, t, cap))` CPU-seconds of work per second when `t ≤ c` (no oversubscription; `cap`
//!   is the phase's usable parallelism);
//! - `S(c) / (1 + k · sync · (f − 1))` when `t > c`, with `f = t / c` the oversubscription factor
//!   and `sync` the job's synchronisation intensity (0 to 1). `k` is [`CostModel::sync_shared`]
//!   when the threads share CPUs with *other* programs (the `os` baseline: a descheduled lock
//!   holder or barrier straggler stalls the whole team) and [`CostModel::sync_self`] when a rigid
//!   job time-shares only with itself (Self Co-Scheduling, paper 002: blocked processes hand the
//!   CPU to a sibling).
//!
//! On top of the rate, a program stalls (does no work) for:
//! - [`CostModel::reload_ms`] × (moved CPUs / CPUs held) each quantum it gains CPUs it did not
//!   hold before (a cold cache on the new CPUs; first placement is free);
//! - [`CostModel::resume_ms`] each time it runs again after being stopped (its caches were used
//!   by the gang that ran meanwhile).
//!
//! Defaults: fitted on this 2-CPU VM by `cargo bench -p cpumgr-kernels --bench calibrate`
//! (2026-11-23, commit 1e86f15; docs/EXPERIMENTS.md, "The sharing-cost model", gives the
//! experiments, the algebra and the spread), for runtimes whose waits *block* once the CPUs are
//! oversubscribed (libgomp's default waits spin a while and then sleep on a futex; paper 002's MPI
//! processes block). `sync_shared = 0.57`: two copies of the barrier-heavy stencil at the demo's
//! grain (`sync = 1`), 2 threads each with `OMP_WAIT_POLICY=passive` on 2 CPUs, against each
//! alone on its own CPU. `sync_self = 0.23`: the same stencil, passive, 4 threads on 2 CPUs
//! against 2. `resume_ms = 1.87`: the slope of a live `gang` run's makespan over the resumes it
//! made. `reload_ms = 0`: moving a one-thread stencil between CPUs cost nothing measurable (below
//! ±0.2 ms per move here). The end-to-end check, two stencils live under `os`, `static` and
//! `gang` against the simulator, puts these defaults closest to the live runs.
//!
//! Lock-step *spinning* teams (`OMP_WAIT_POLICY=active`, busy-waiting kernels) are an upper
//! range, selectable per run (`cpumgr sim --sync-shared 19.2 --sync-self 31.6`, or a workload's
//! `[cost]` table): the same run measured `sync_shared = 19.2` (the median of erratic repeats,
//! 0.96 to 43.7) and `sync_self = 31.6` (the busy-waiting rigid kernel, 4 threads on 2 CPUs
//! against 2).

use serde::{Deserialize, Serialize};

use crate::speedup::SpeedupModel;

/// Parameters of the cost-of-sharing model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostModel {
    /// Loss per unit of oversubscription when threads share CPUs with other programs.
    pub sync_shared: f64,
    /// Loss per unit of oversubscription when a job time-shares only with itself.
    pub sync_self: f64,
    /// Milliseconds of lost progress per moved CPU (scaled by the fraction of CPUs moved).
    pub reload_ms: f64,
    /// Milliseconds of lost progress when a stopped program runs again.
    pub resume_ms: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        // Fitted by `cargo bench -p cpumgr-kernels --bench calibrate -- --reps 5` on 2026-11-23
        // (commit 1e86f15): medians over the repeats, the blocking (`OMP_WAIT_POLICY=passive`)
        // fits for the two sync parameters; the module documentation says of what and why.
        CostModel { sync_shared: 0.57, sync_self: 0.23, reload_ms: 0.0, resume_ms: 1.87 }
    }
}

impl CostModel {
    /// A model where sharing costs nothing (for tests of the engine's arithmetic).
    pub const FREE: CostModel = CostModel { sync_shared: 0.0, sync_self: 0.0, reload_ms: 0.0, resume_ms: 0.0 };

    /// Work per second of a phase on `cpus` CPUs with `threads` threads; `cap` is the phase's
    /// usable parallelism, `shared` whether the oversubscription is with other programs.
    pub fn rate(&self, speedup: &SpeedupModel, cap: f64, cpus: f64, threads: f64, sync: f64, shared: bool) -> f64 {
        if cpus <= 0.0 || threads <= 0.0 {
            return 0.0;
        }
        if threads <= cpus + 1e-9 {
            // `threads.min(cap)`: `threads` passed the comparison, so it is a number, and the
            // comparison written out is one `minsd`, where `f64::min`'s rule for a NaN on either
            // side costs a compare and a blend on the baseline x86-64 target (every job's rate).
            return speedup.speedup(if cap < threads { cap } else { threads });
        }
        let f = threads / cpus;
        let k = if shared { self.sync_shared } else { self.sync_self };
        speedup.speedup(cpus.min(cap)) / (1.0 + k * sync * (f - 1.0))
    }

    /// Seconds of stall for gaining `moved` new CPUs out of `cpus`.
    pub fn reload(&self, moved: u32, cpus: u32) -> f64 {
        if cpus == 0 {
            0.0
        } else {
            self.reload_ms * 1e-3 * moved as f64 / cpus as f64
        }
    }

    /// Why the parameters are unusable, if they are: (field, message).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        for (name, v) in [
            ("sync_shared", self.sync_shared),
            ("sync_self", self.sync_self),
            ("reload_ms", self.reload_ms),
            ("resume_ms", self.resume_ms),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err((name, format!("{v} is not a non-negative number")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversubscription_costs_more_when_shared() {
        // The formula, with parameters of its own (the defaults are measured and may change).
        let c = CostModel { sync_shared: 0.4, sync_self: 0.05, reload_ms: 1.0, resume_ms: 2.0 };
        let lin = SpeedupModel::LINEAR;
        assert_eq!(c.rate(&lin, 4.0, 4.0, 4.0, 1.0, true), 4.0, "no oversubscription, no loss");
        assert_eq!(c.rate(&lin, 8.0, 8.0, 4.0, 1.0, true), 4.0, "4 threads use 4 of 8 CPUs");
        let shared = c.rate(&lin, 8.0, 4.0, 8.0, 1.0, true);
        let own = c.rate(&lin, 8.0, 4.0, 8.0, 1.0, false);
        assert!((shared - 4.0 / 1.4).abs() < 1e-9);
        assert!(own > shared && own < 4.0);
        assert_eq!(c.rate(&lin, 8.0, 4.0, 8.0, 0.0, true), 4.0, "independent threads lose nothing");
        let worse = c.rate(&lin, 16.0, 4.0, 16.0, 1.0, true);
        assert!(worse < shared, "loss grows with the oversubscription factor");
    }

    #[test]
    fn the_calibration_algebra_holds_for_the_defaults() {
        // What the calibration bench solves for (docs/EXPERIMENTS.md): a copy of a `sync = 1`
        // job holding 1 CPU with 2 threads (two 2-thread copies under `os` on 2 CPUs) against the
        // same copy alone on 1 CPU with 1 thread takes 1 + sync_shared times as long; a rigid job
        // of 4 threads on 2 CPUs against 2 threads, 1 + sync_self times.
        let c = CostModel::default();
        c.check().expect("the defaults are usable");
        let lin = SpeedupModel::LINEAR;
        let os = c.rate(&lin, 2.0, 1.0, 2.0, 1.0, true);
        let static_ = c.rate(&lin, 2.0, 1.0, 1.0, 1.0, true);
        assert!((static_ / os - (1.0 + c.sync_shared)).abs() < 1e-9);
        let four = c.rate(&lin, 4.0, 2.0, 4.0, 1.0, false);
        let two = c.rate(&lin, 4.0, 2.0, 2.0, 1.0, false);
        assert!((two / four - (1.0 + c.sync_self)).abs() < 1e-9);
        assert!((c.reload(1, 1) - c.reload_ms * 1e-3).abs() < 1e-12, "one CPU moved out of one");
    }
}
