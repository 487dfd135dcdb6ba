//! The discrete-event engine of the managed policies (every policy but `os`, which `sharing.rs`
//! models). A step reads in order: the main loop (this file), phase ends (`ends.rs`), admission
//! and departure (`admission.rs`), the scheduler step (`step.rs`), the fast-forward
//! (`fast_forward.rs`); a job's record is `live.rs`.
//!
//! Events are arrivals, phase changes (which change a job's request), completions, quantum
//! boundaries and policy wake-ups ([`cpumgr_core::Decision::wake_at`]). At equal times they are
//! handled in that order — completions, arrivals, admissions, then the scheduler's step — and
//! within each kind in job-id order, so a run is a pure function of its inputs.
//!
//! At each step the engine builds the [`View`] the live manager would build: per program its
//! request (from its current phase), kind, weight, CPU time received, newest speedup report (the
//! work it did per second in the last quantum, for the CPUs it held), its CPU set, whether it ran,
//! and its thread count. It then runs the policy's `decide` and the [`Placer`], the code the live
//! manager runs too, and sets every job's progress rate from its speedup model and the
//! [`CostModel`](crate::CostModel). What the live manager does beyond that is not simulated: its
//! passes that rewrite a decision before it is enforced (the per-user share, the starvation
//! bound, the team guard) and everything it learns from real programs (measured CPU time,
//! requests sent at run time, exits) are modelled or absent here, so a simulated decision is the
//! policy's own. Work at a step follows the jobs whose allocation changes: an unchanged one
//! keeps its rate and end, and, when neither the policy ([`cpumgr_core::SimHints::reads_usage`])
//! nor the snapshot fast-forward of a time-sharing policy's schedule (below) needs the
//! per-quantum usage figures, its progress is brought up to date only at its own events. An
//! `os` policy ([`cpumgr_core::Policy::oversubscribes`]) is not placed and not stepped: every job
//! runs its threads on every CPU, shared in proportion to its threads, and the run goes to a
//! processor-sharing model with virtual clocks (`sharing.rs`).
//!
//! **Records.** The program list the policy sees is in id order and loses the finished programs
//! at every step, closing the gaps from whichever side moves fewer programs (`list::List`: with
//! a backlog the oldest programs finish, near the front); each job's record stays in a stable
//! slot (`slots::Slots`), which it gets on arrival (the admission queue holds slots) and which is
//! listed in program order on admission. A phase end carries its job's slot, to tell whether it
//! still applies, and finds the job's position by a binary search of the id-ordered list:
//! admission is first come, first served, so ids increase along the list. What the step's pass
//! over the decision reads (the CPUs each job holds, whether it is idle) is kept beside each slot
//! number, in the one list that orders them.
//!
//! **Fast-forward.** Long traces span months at a 100 ms quantum. A lazy run (a policy that
//! neither time-shares nor reads usage: every space-sharing policy but PDPA) skips the quanta in
//! which nothing can change: once a schedule was decided at `REPEATS` (3) boundaries in a row,
//! it moves the next step to the boundary after the next event ([`Engine::skip_quiet`]), which
//! costs nothing per job and gives the quantum-by-quantum run's results. Other runs take
//! snapshots: when the schedule repeats —
//! the same decision (counts, running flags and CPU sets) with period `p ≤ 32` quanta, three
//! times over, with no event in between — the engine jumps over whole periods, adding each job's
//! progress per period, up to just before the next completion or arrival, and then resumes
//! quantum by quantum. This assumes a policy in a repeating schedule keeps repeating while nothing
//! changes; a policy whose own state still moves says so ([`cpumgr_core::SimHints::settled`]:
//! PDPA while a search moves or probes), and only the schedule since it settled counts; set
//! [`SimConfig::fast_forward`] to `false` for a quantum-by-quantum run. A policy's wake-ups
//! between boundaries (VTQ-DSS's member expiries) count in the next boundary's signature, and a
//! jump moves the pending wake-up and tells the policy ([`cpumgr_core::SimHints::skip`]), so that
//! its absolute times stay at the same point of its rotation.
//!
//! **The jobs' feed.** What a job needs before it arrives (generated or cloned from a trace,
//! checked against the machine, its run time alone worked out) depends on nothing in the run:
//! a second thread does it ahead, in order, in bounded batches (`feed.rs`), and the engine's
//! thread takes the jobs ready. Results are those of the input taken in order.
//!
//! **Decisions brought up to date.** In a lazy run the engine keeps the policy's last decision,
//! takes the finished programs out of it as it takes them out of the list, and asks the policy to
//! bring it up to date for the programs admitted since ([`SimHints::update`]) before deciding afresh:
//! a rigid-first policy whose last decision served every program, all rigid (a trace's jobs, while
//! none waits), serves the newcomers from what the others leave, and the engine compares only the
//! newcomers' counts with what they hold. A quantum then costs the programs that changed, not a
//! pass over every program in the policy, the decision's reset and the engine's scan.
//!
//! **Admission.** Jobs beyond the multiprogramming level ([`SimConfig::mpl`], else the policy's
//! [`cpumgr_core::SimHints::preferred_mpl`]) wait in arrival order and are admitted at steps.

use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

use cpumgr_core::trace::EventKind;
use cpumgr_core::{CpuSet, Decision, Nanos, Placer, Program, ProgramId, SimHints, Topology, View};

use crate::config::SimConfig;
use crate::error::SimError;
use crate::feed::{Checked, Feed};
use crate::list::List;
use crate::metrics::RunSummary;
use crate::observer::Observer;
use crate::slots::Slots;
use crate::tally::Tally;

mod admission;
mod ends;
mod fast_forward;
mod live;
mod step;

use ends::End;
use fast_forward::Repeats;
use live::{Beside, Live, Seconds};

const NS: f64 = 1e9;
/// Consecutive quanta in which no job progresses and nothing can arrive before a run is declared
/// starved.
const STARVED_QUANTA: u64 = 1_000;

/// How a run keeps its jobs up to date and what its fast-forward skips, chosen once from the
/// policy's hints and [`SimConfig::fast_forward`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A policy that reads no usage figures and, with the fast-forward on, does not time-share:
    /// a job is brought up to date only at its own events, so that a step costs the jobs whose
    /// allocation changes (a job's progress over quanta of one allocation is added at once,
    /// equal up to rounding); with `skip_quiet` the quanta that cannot change anything are
    /// skipped ([`Engine::skip_quiet`]).
    Lazy { skip_quiet: bool },
    /// Every job that has run is brought up to date at every step: for a policy that reads the
    /// usage figures (`usage`: written into its view), or for the `snapshots` that learn a
    /// time-sharing schedule's period to jump over it ([`Engine::fast_forward`]).
    Eager { usage: bool, snapshots: bool },
}

impl Mode {
    /// The mode of a run whose policy reads `usage` figures and may be `time_sharing`, with the
    /// `fast_forward` on or off.
    fn of(usage: bool, time_sharing: bool, fast_forward: bool) -> Mode {
        if usage || (fast_forward && time_sharing) {
            Mode::Eager { usage, snapshots: fast_forward }
        } else {
            Mode::Lazy { skip_quiet: fast_forward }
        }
    }

    fn lazy(self) -> bool {
        matches!(self, Mode::Lazy { .. })
    }

    fn usage(self) -> bool {
        matches!(self, Mode::Eager { usage: true, .. })
    }

    /// Whether repeating schedules are skipped by snapshots ([`Engine::fast_forward`]); a lazy
    /// run's fast-forward skips quiet quanta instead ([`Engine::skip_quiet`]).
    fn snapshots(self) -> bool {
        matches!(self, Mode::Eager { snapshots: true, .. })
    }
}

/// What the running jobs hold, kept up to date as the CPUs they hold and their rates change
/// ([`Engine::set_rate`]).
#[derive(Debug, Default)]
struct Load {
    /// CPUs held by running jobs (the sum of their [`Live::held`]), kept up to date as it changes.
    held: u32,
    /// Alive jobs that hold CPUs, and alive jobs that progress (rate above zero), kept up to date
    /// as the CPUs they hold and their rates change.
    served: usize,
    rated: usize,
    /// Alive jobs that held no CPU after the last step.
    unserved: usize,
}

struct Engine<'a, 'o> {
    topology: &'a Topology,
    managed: CpuSet,
    cpus: u32,
    policy: Box<dyn SimHints>,
    spec: String,
    cfg: SimConfig,
    quantum: Nanos,
    tally: Tally<'o>,
    now: Nanos,
    next_boundary: Nanos,
    wake_at: Option<Nanos>,
    limit: u32,
    /// The jobs waiting for admission, in arrival order: the slots of their records, which they
    /// get on arrival (so that a job's description moves once, into its record).
    queue: VecDeque<u32>,
    programs: List<Program>,
    /// Per program, its job (indexed like `programs`, stored in stable slots), and beside it
    /// what the step's walks over every job read.
    live: Slots<Live, Beside>,
    /// The indices of the jobs that are not idle, in order, when `active_stale` is false: the
    /// step's walks go through these only, not through a long backlog's flags.
    active: Vec<usize>,
    /// Whether an idle flag or the job list changed since `active` was built.
    active_stale: bool,
    placer: Placer,
    decision: Decision,
    /// Whether `decision` is the policy's last, for the program list as it was then (the
    /// programs finished since are still listed until [`Engine::compact`] takes them out of
    /// both), and the policy may bring it up to date ([`SimHints::may_update`]): a lazy run then
    /// asks it to ([`SimHints::update`]).
    decided: bool,
    /// Programs admitted since the last decision (at the end of the list).
    appended: usize,
    sets: Vec<CpuSet>,
    /// Empty CPU sets with room, from finished programs, for admitted ones: a set that has held
    /// a placement has the words of its machine, and a program's first placement would allocate
    /// them again.
    spare_sets: Vec<CpuSet>,
    /// Scratch: the programs whose count changed at this step.
    changed_jobs: Vec<usize>,
    /// The last span converted to seconds (for [`Live::progress`]).
    seconds: Seconds,
    /// What the running jobs hold and how many progress, kept up to date as the CPUs they hold
    /// and their rates change.
    load: Load,
    /// How jobs are kept up to date and what the fast-forward skips.
    mode: Mode,
    /// The indices of the finished jobs still in `live` (removed at the next step), in the
    /// order they finished.
    dead: Vec<usize>,
    /// Phase ends: every alive job's `done_at` is here (pushed when it changes), beside entries
    /// that no longer apply, dropped when they reach the top.
    ends: BinaryHeap<End>,
    /// What the fast-forward learnt of the schedule.
    ff: Repeats,
    idle_quanta: u64,
}

/// Runs the jobs of `pending` under `policy` (which does not oversubscribe) on the `managed`
/// CPUs of `topology`, with `quantum` and the admission limit `mpl` (0: none), and returns the
/// run's figures.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    topology: &Topology,
    managed: CpuSet,
    spec: &str,
    policy: Box<dyn SimHints>,
    quantum: Nanos,
    mpl: u32,
    mut pending: Feed,
    cfg: &SimConfig,
    obs: &mut dyn Observer,
    started: Instant,
) -> Result<RunSummary, SimError> {
    let cpus = managed.len() as u32;
    let mode = Mode::of(policy.reads_usage(), policy.time_sharing(), cfg.fast_forward);
    let mut e = Engine {
        topology,
        managed,
        cpus,
        policy,
        spec: spec.to_string(),
        cfg: cfg.clone(),
        quantum,
        tally: Tally::new(cpus, obs),
        now: 0,
        next_boundary: 0,
        wake_at: None,
        limit: mpl,
        queue: VecDeque::new(),
        programs: List::default(),
        live: Slots::default(),
        active: Vec::new(),
        active_stale: false,
        placer: Placer::new(),
        decision: Decision::default(),
        decided: false,
        appended: 0,
        sets: Vec::new(),
        spare_sets: Vec::new(),
        changed_jobs: Vec::new(),
        seconds: Seconds::default(),
        load: Load::default(),
        mode,
        dead: Vec::new(),
        ends: BinaryHeap::new(),
        ff: Repeats::default(),
        idle_quanta: 0,
    };
    loop {
        let next_arrival = pending.next_arrival(e.now)?;
        if e.live.len() == e.dead.len() && e.queue.is_empty() {
            match next_arrival {
                None => break,
                // An empty machine: nothing happens until the first boundary at or after the arrival.
                Some(a) if a > e.next_boundary => {
                    e.next_boundary = a.div_ceil(quantum) * quantum;
                    e.wake_at = None;
                }
                Some(_) => {}
            }
        }
        let done = e.next_end();
        let mut t = e.next_boundary.min(done).min(next_arrival.unwrap_or(Nanos::MAX));
        if let Some(w) = e.wake_at {
            t = t.min(w);
        }
        Tally::within_horizon(t, e.live.len() - e.dead.len() + e.queue.len())?;
        e.advance_to(t);
        e.complete_phases();
        while let Some(Checked { mut spec, dedicated }) = pending.due(e.now)? {
            // Nothing the policy sees changes until the job is admitted (which starts the
            // fast-forward over): an arrival that waits for a place does not, unless it is the
            // first job to wait (idle CPUs then count as fragmentation).
            let id = e.tally.arrive(&mut spec, e.now);
            if !e.waiting() {
                e.changed();
            }
            let slot = e.live.insert(|| Live::new(id, spec, dedicated));
            e.queue.push_back(slot);
        }
        let wake = e.wake_at == Some(e.now);
        if e.now == e.next_boundary || wake {
            e.step(wake, pending.next_arrival(e.now)?)?;
        }
    }
    Ok(e.tally.summary(&e.spec, mpl, started))
}

impl Engine<'_, '_> {
    pub(super) fn emit(&mut self, program: Option<ProgramId>, kind: EventKind) {
        self.tally.emit(self.now, program, kind);
    }

    /// Marks that something changed the schedule's inputs: the fast-forward starts over.
    pub(super) fn changed(&mut self) {
        self.forget_schedule();
        self.idle_quanta = 0;
    }

    /// Moves the clock to `t`, accounting the CPUs held and left idle meanwhile. Jobs are
    /// brought up to date lazily ([`Live::progress`]).
    pub(super) fn advance_to(&mut self, t: Nanos) {
        if t <= self.now {
            return;
        }
        let waited = self.waiting();
        self.tally.account(t - self.now, f64::from(self.load.held), waited);
        self.now = t;
    }

    /// Whether some job waits for CPUs (admitted without any, or queued for admission): the
    /// CPUs left idle meanwhile count as fragmentation.
    pub(super) fn waiting(&self) -> bool {
        self.load.unserved > 0 || !self.queue.is_empty()
    }

    /// Sets job `i`'s idle flag from its state ([`Live::idle`]).
    pub(super) fn set_idle(&mut self, i: usize) {
        let idle = self.live[i].idle();
        let beside = self.live.beside_mut(i);
        if idle != beside.idle {
            beside.idle = idle;
            self.active_stale = true;
        }
    }

    /// Rebuilds the list of non-idle jobs if it is stale.
    pub(super) fn refresh_active(&mut self) {
        if self.active_stale {
            self.active.clear();
            self.active.extend(self.live.besides().enumerate().filter(|(_, b)| !b.idle).map(|(i, _)| i));
            self.active_stale = false;
        }
    }

    /// The position in the program list of the listed job `id` (the list is in id order).
    pub(super) fn position(&self, id: u64) -> usize {
        self.programs.binary_search_by_key(&id, |p| p.id.0).expect("an alive job is listed")
    }
}

/// The view the policy decides on at `now` (with `cpus` managed CPUs), as the live manager builds
/// it.
fn view_of<'v>(topology: &'v Topology, cpus: u32, now: Nanos, quantum: Nanos, programs: &'v [Program]) -> View<'v> {
    View { now, quantum, topology, cpus, programs }
}
