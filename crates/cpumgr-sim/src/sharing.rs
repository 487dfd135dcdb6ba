//! The unmanaged baseline (`os`, [`cpumgr_core::Policy::oversubscribes`]) as processor sharing
//! with virtual clocks.
//!
//! With no manager every admitted program runs its natural threads on every CPU, and the kernel
//! shares the machine among all threads: with `T` threads on `C` CPUs a program of `t` threads
//! holds `t · s` CPUs, `s = min(1, C / T)`, and progresses at the cost model's rate for that share
//! ([`CostModel::rate`]). Shares are recomputed at the first quantum boundary after something
//! changed `T` (an admission, a phase change, a completion), exactly as the quantum-by-quantum
//! engine does; between those steps nothing can change, so no step runs there.
//!
//! The rate of a phase with linear speedup whose threads do not exceed its usable parallelism is
//! `t · φ(s)`, with `φ` the same for every job of the same synchronisation intensity. Such jobs
//! share one *virtual clock* per intensity that advances by `φ` per second: a job's remaining
//! work shrinks by `t` per unit of its clock, so it ends when the clock reaches
//! `mark + remaining / t`, kept in a heap per clock. A change of `T` changes one number per clock
//! instead of every job's rate: an arrival or a completion costs `O(log n)`, not `O(n)`. Jobs of
//! other speedup models keep a rate of their own and are re-rated when `s` changes. CPU time
//! received follows one more clock (`∫ s dt`, times `t`).
//!
//! The policy is not consulted: by its contract an oversubscribing policy leaves every program
//! its natural threads, which is what this module applies. The results are those of the
//! quantum-by-quantum engine up to floating-point rounding; the events counted are arrivals,
//! phase ends and the steps that run (quanta in which nothing can change are skipped and counted
//! in [`RunSummary::skipped_quanta`]; with [`SimConfig::fast_forward`] off every quantum steps).

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Instant;

use cpumgr_core::trace::EventKind;
use cpumgr_core::{CpuSet, Nanos, ProgramId};

use crate::config::SimConfig;
use crate::cost::CostModel;
use crate::error::SimError;
use crate::feed::{Checked, Feed};
use crate::job::JobSpec;
use crate::limits::HORIZON;
use crate::metrics::RunSummary;
use crate::observer::Observer;
use crate::speedup::SpeedupModel;
use crate::tally::{Ran, Tally};

const NS: f64 = 1e9;

/// Hashes a job id (unique, handed out in order) with one multiplication: the job table is looked
/// up several times per event, and nothing iterates it (order never matters).
#[derive(Default)]
struct IdHash(u64);

impl Hasher for IdHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The jobs in the system by id.
type JobTable = HashMap<u64, Job, BuildHasherDefault<IdHash>>;

/// How a job's progress is kept.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Clock {
    /// On virtual clock `g`: its phase ends when the clock reaches `end`.
    Shared { g: usize, end: f64 },
    /// At its own `rate` since `at`; its phase ends at `done_at`.
    Own { rate: f64, at: Nanos, done_at: Nanos },
}

/// A job in the system.
#[derive(Debug)]
struct Job {
    spec: JobSpec,
    arrival: Nanos,
    phase: usize,
    /// Threads counted at the last step (0 before its first).
    threads: u32,
    clock: Clock,
    /// Work left in its phase when its clock was last read.
    remaining: f64,
    /// The shared clock's value when `remaining` was taken.
    mark: f64,
    /// The CPU-time clock's value when `busy` was last brought up to date.
    busy_mark: f64,
    busy: f64,
    first_run: Nanos,
    dedicated: f64,
}

/// A virtual clock shared by the linear-speedup jobs of one synchronisation intensity.
#[derive(Debug)]
struct Group {
    sync: f64,
    /// Its value at `at`.
    value: f64,
    at: Nanos,
    /// Its advance per second (work per second per thread).
    per: f64,
    /// (end value's bits, job id): phase ends, checked against the job when read.
    ends: BinaryHeap<Reverse<(u64, u64)>>,
}

impl Group {
    fn value_at(&self, t: Nanos) -> f64 {
        self.value + self.per * (t - self.at) as f64 / NS
    }

    /// When the clock reaches `end` (just past the horizon if that is later).
    fn time_of(&self, end: f64) -> Nanos {
        if end <= self.value {
            self.at
        } else if self.per > 0.0 {
            after(self.at, (end - self.value) / self.per)
        } else {
            Nanos::MAX
        }
    }
}

struct Sharing<'o> {
    managed: CpuSet,
    cpus: u32,
    cost: CostModel,
    mpl: u32,
    quantum: Nanos,
    tally: Tally<'o>,
    now: Nanos,
    /// The next step, if something changed since the last.
    next_step: Option<Nanos>,
    last_step: Option<Nanos>,
    queue: VecDeque<(ProgramId, Checked)>,
    jobs: JobTable,
    /// Jobs whose threads may differ from those counted (admitted or changed phase).
    dirty: Vec<u64>,
    /// Scratch: the jobs whose phase ends now ([`Sharing::complete_phases`]), kept so that an end
    /// does not allocate.
    due: Vec<u64>,
    /// Jobs on a rate of their own.
    own: BTreeSet<u64>,
    own_ends: BinaryHeap<Reverse<(Nanos, u64)>>,
    groups: Vec<Group>,
    /// Threads of the jobs in the system, as counted at the last step less those that ended.
    threads: u64,
    /// Each thread's share of a CPU, `min(1, C / T)` at the last step.
    share: f64,
    over: bool,
    /// `∫ share dt` up to `busy_at`.
    busy_clock: f64,
    busy_at: Nanos,
}

/// `secs` seconds after `t`, or just past the horizon if that is later: an end too far away to
/// count in nanoseconds still ends the run with [`SimError::Horizon`], not as starved.
fn after(t: Nanos, secs: f64) -> Nanos {
    t.saturating_add((secs * NS).ceil() as Nanos).min(HORIZON + 1)
}

/// The earlier of `best` and `x`.
fn earlier(best: Option<(Nanos, u64)>, x: (Nanos, u64)) -> Option<(Nanos, u64)> {
    Some(best.map_or(x, |b| b.min(x)))
}

/// Runs `jobs` under an oversubscribing policy named `spec` (module documentation).
pub(crate) fn run(
    managed: CpuSet,
    spec: &str,
    quantum: Nanos,
    mut pending: Feed,
    cfg: &SimConfig,
    obs: &mut dyn Observer,
    started: Instant,
) -> Result<RunSummary, SimError> {
    let cpus = managed.len() as u32;
    let mut e = Sharing {
        managed,
        cpus,
        cost: cfg.cost,
        mpl: cfg.mpl,
        quantum,
        tally: Tally::new(cpus, obs),
        now: 0,
        next_step: None,
        last_step: None,
        queue: VecDeque::new(),
        jobs: JobTable::default(),
        dirty: Vec::new(),
        due: Vec::new(),
        own: BTreeSet::new(),
        own_ends: BinaryHeap::new(),
        groups: Vec::new(),
        threads: 0,
        share: 1.0,
        over: false,
        busy_clock: 0.0,
        busy_at: 0,
    };
    loop {
        let next_arrival = pending.next_arrival(e.now)?;
        if e.jobs.is_empty() && e.queue.is_empty() {
            // An empty machine: nothing happens until the next arrival's step.
            e.next_step = None;
            e.last_step = None;
            if next_arrival.is_none() {
                break;
            }
        }
        let due = e.next_end().map_or(Nanos::MAX, |(t, _)| t);
        let t = due.min(next_arrival.unwrap_or(Nanos::MAX)).min(e.next_step.unwrap_or(Nanos::MAX));
        if t == Nanos::MAX {
            return Err(SimError::Starved { at: e.now as f64 / NS, jobs: e.jobs.len() });
        }
        Tally::within_horizon(t, e.jobs.len() + e.queue.len())?;
        e.advance_to(t);
        e.complete_phases();
        while let Some(mut j) = pending.due(e.now)? {
            let id = e.tally.arrive(&mut j.spec, e.now);
            e.queue.push_back((id, j));
            e.want_step();
        }
        if e.next_step == Some(e.now) {
            e.step();
            let empty = e.jobs.is_empty() && e.queue.is_empty();
            if !cfg.fast_forward && !empty {
                // Quantum by quantum: every step runs (and finds nothing new between events).
                e.next_step = Some(e.now + quantum);
            }
        }
    }
    Ok(e.tally.summary(spec, e.mpl, started))
}

impl Sharing<'_> {
    fn emit(&mut self, id: u64, kind: EventKind) {
        self.tally.emit(self.now, Some(ProgramId(id)), kind);
    }

    /// Asks for a step at the first quantum boundary at or after now that is after the last
    /// step.
    fn want_step(&mut self) {
        let q = self.quantum;
        let mut t = self.now.div_ceil(q) * q;
        if self.last_step == Some(t) {
            t += q;
        }
        self.next_step.get_or_insert(t);
    }

    fn busy_clock_at(&self, t: Nanos) -> f64 {
        self.busy_clock + self.share * (t - self.busy_at) as f64 / NS
    }

    /// The earliest phase end, (time, job id), dropping heap entries that no longer apply.
    fn next_end(&mut self) -> Option<(Nanos, u64)> {
        let mut best = None;
        for g in 0..self.groups.len() {
            while let Some(&Reverse((bits, id))) = self.groups[g].ends.peek() {
                let end = f64::from_bits(bits);
                if self.jobs.get(&id).is_some_and(|j| j.clock == Clock::Shared { g, end }) {
                    best = earlier(best, (self.groups[g].time_of(end), id));
                    break;
                }
                self.groups[g].ends.pop();
            }
        }
        while let Some(&Reverse((t, id))) = self.own_ends.peek() {
            if self.jobs.get(&id).is_some_and(|j| matches!(j.clock, Clock::Own { done_at, .. } if done_at == t)) {
                best = earlier(best, (t, id));
                break;
            }
            self.own_ends.pop();
        }
        best
    }

    /// Moves the clock to `t`, accounting the CPUs held and left idle meanwhile.
    fn advance_to(&mut self, t: Nanos) {
        if t <= self.now {
            return;
        }
        let held = self.threads as f64 * self.share;
        self.tally.account(t - self.now, held, !self.queue.is_empty());
        self.now = t;
    }

    /// Handles every phase end due now, in job-id order.
    fn complete_phases(&mut self) {
        let mut due = std::mem::take(&mut self.due);
        due.clear();
        while let Some((t, id)) = self.next_end() {
            if t > self.now {
                break;
            }
            due.push(id);
            // Take the entry out so the next one shows.
            match self.jobs[&id].clock {
                Clock::Shared { g, .. } => {
                    self.groups[g].ends.pop();
                }
                Clock::Own { .. } => {
                    self.own_ends.pop();
                }
            }
        }
        // A job settled twice on the same end has two entries.
        due.sort_unstable();
        due.dedup();
        for &id in &due {
            self.end_phase(id);
        }
        self.due = due;
    }

    /// Job `id`'s phase ended now: the next phase, or out of the system.
    fn end_phase(&mut self, id: u64) {
        self.tally.events += 1;
        self.want_step();
        let j = self.jobs.get_mut(&id).expect("due job is in the system");
        let before = j.spec.request_in(j.phase).wanted;
        j.phase += 1;
        while j.phase < j.spec.phases.len() && j.spec.phases[j.phase].work <= 0.0 {
            j.phase += 1;
        }
        if j.phase >= j.spec.phases.len() {
            self.finish(id);
            return;
        }
        j.remaining = j.spec.phases[j.phase].simulated_work();
        let after = j.spec.request_in(j.phase).wanted;
        // Its threads stay as counted until the next step; only its speedup model changed.
        self.settle(id);
        self.dirty.push(id);
        if after != before && self.tally.trace {
            self.emit(id, EventKind::Request { wanted: after });
        }
    }

    fn finish(&mut self, id: u64) {
        let now = self.now;
        let w = self.busy_clock_at(now);
        let mut j = self.jobs.remove(&id).expect("finished job is in the system");
        self.own.remove(&id);
        self.threads -= j.threads as u64;
        let busy = j.busy + j.threads as f64 * (w - j.busy_mark);
        let ran =
            Ran { first_run: Some(j.first_run), run_ns: now - j.first_run, busy, moves: 0, dedicated: j.dedicated };
        self.tally.finish(ProgramId(id), &mut j.spec, j.arrival, &ran, now);
    }

    /// Puts job `id` (brought up to now) on the clock for its threads and phase: a shared one
    /// when its rate is its threads times the clock's, its own otherwise.
    fn settle(&mut self, id: u64) {
        let now = self.now;
        let (share, over, cost) = (self.share, self.over, self.cost);
        let j = self.jobs.get_mut(&id).expect("settled job is in the system");
        let ph = &j.spec.phases[j.phase];
        let t = j.threads.max(1) as f64;
        if ph.speedup == SpeedupModel::LINEAR && t <= ph.request as f64 {
            let sync = j.spec.sync;
            let g = match self.groups.iter().position(|g| g.sync.to_bits() == sync.to_bits()) {
                Some(g) => g,
                None => {
                    let per = cost.rate(&SpeedupModel::LINEAR, 1.0, share, 1.0, sync, over);
                    self.groups.push(Group { sync, value: 0.0, at: now, per, ends: BinaryHeap::new() });
                    self.groups.len() - 1
                }
            };
            j.mark = self.groups[g].value_at(now);
            let end = j.mark + j.remaining / t;
            j.clock = Clock::Shared { g, end };
            self.groups[g].ends.push(Reverse((end.to_bits(), id)));
            self.own.remove(&id);
        } else {
            let rate = cost.rate(&ph.speedup, ph.request as f64, t * share, t, j.spec.sync, over);
            let done_at = if j.remaining <= 0.0 {
                now
            } else if rate > 0.0 {
                after(now, j.remaining / rate)
            } else {
                Nanos::MAX
            };
            j.clock = Clock::Own { rate, at: now, done_at };
            if done_at != Nanos::MAX {
                self.own_ends.push(Reverse((done_at, id)));
            }
            self.own.insert(id);
        }
    }

    /// Brings job `id`'s remaining work up to now on its current clock.
    fn catch_up(&mut self, id: u64) {
        let now = self.now;
        let j = self.jobs.get_mut(&id).expect("job is in the system");
        match &mut j.clock {
            Clock::Shared { g, .. } => {
                let v = self.groups[*g].value_at(now);
                j.remaining -= j.threads.max(1) as f64 * (v - j.mark);
                j.mark = v;
            }
            Clock::Own { rate, at, .. } => {
                j.remaining -= *rate * (now - *at) as f64 / NS;
                *at = now;
            }
        }
    }

    /// One step: admit, count the changed jobs' threads, and re-rate if the shares changed.
    fn step(&mut self) {
        let now = self.now;
        self.tally.events += 1;
        self.next_step = None;
        if let Some(last) = self.last_step {
            self.tally.skipped += (now - last) / self.quantum - 1;
        }
        self.last_step = Some(now);
        while !self.queue.is_empty() && (self.mpl == 0 || self.jobs.len() < self.mpl as usize) {
            let (id, Checked { spec, dedicated }) = self.queue.pop_front().expect("not empty");
            let job = Job {
                arrival: spec.arrival,
                remaining: spec.phases[0].simulated_work(),
                spec,
                phase: 0,
                threads: 0,
                clock: Clock::Own { rate: 0.0, at: now, done_at: Nanos::MAX },
                mark: 0.0,
                busy_mark: 0.0,
                busy: 0.0,
                first_run: now,
                dedicated,
            };
            self.jobs.insert(id.0, job);
            self.dirty.push(id.0);
        }
        // Every shared clock and the CPU-time clock up to now, at the old shares.
        for g in &mut self.groups {
            g.value = g.value_at(now);
            g.at = now;
        }
        let w = self.busy_clock_at(now);
        self.busy_clock = w;
        self.busy_at = now;
        // Count the threads of the jobs that changed, bringing them up to now first.
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        dirty.retain(|id| self.jobs.contains_key(id));
        for &id in &dirty {
            self.catch_up(id);
            let j = self.jobs.get_mut(&id).expect("retained");
            let t = j.spec.natural_threads(j.phase);
            let first = j.threads == 0;
            j.busy += j.threads as f64 * (w - j.busy_mark);
            j.busy_mark = w;
            self.threads = self.threads - j.threads as u64 + t as u64;
            j.threads = t;
            if first && self.tally.trace {
                let kind = EventKind::Allocate { count: t, cpus: self.managed.clone(), running: true };
                self.emit(id, kind);
            }
        }
        let over = self.threads > self.cpus as u64;
        let share = if over { self.cpus as f64 / self.threads as f64 } else { 1.0 };
        // When the shares change, every clock's speed does and the jobs on their own rates are
        // re-rated; the changed jobs settle on their new threads either way.
        if share != self.share || over != self.over {
            self.share = share;
            self.over = over;
            for g in &mut self.groups {
                g.per = self.cost.rate(&SpeedupModel::LINEAR, 1.0, share, 1.0, g.sync, over);
            }
            self.own_ends.clear();
            dirty.extend(self.own.iter().copied());
            dirty.sort_unstable();
            dirty.dedup();
        }
        for id in dirty {
            self.catch_up(id);
            self.settle(id);
        }
    }
}
