//! The scheduler step, in the order its data flows: [`State::survey`] lists the programs to read
//! from `/proc` (under the state's lock), [`Survey::read`] reads them (without it), and
//! [`State::step_with`] refreshes each program from its slot and sample, asks the policy, applies the
//! three passes that adjust a decision on a live machine (per-user share, the starvation bound,
//! the team guard), places, publishes in the slots and enforces.

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

use cpumgr_core::trace::EventKind;
use cpumgr_core::{CpuSet, Decision, Nanos, Program, View};
use cpumgr_proto::slot::NO_PREEMPT;

use super::{monotonic_ns, State, LEASE_FLOOR};
use crate::enforce;
use crate::limits::{share_between_users, Share};
use crate::outside;
use crate::procfs;
use crate::starvation::StarvationBound;
use crate::team::Team;

/// The programs a scheduler step reads from `/proc` ([`State::survey`]), listed under the state
/// lock and read without it.
pub struct Survey {
    /// Each program to read, with what its last sample found.
    targets: Vec<(procfs::Target, procfs::Known)>,
    boundary: Option<Instant>,
    files: procfs::Files,
}

impl Survey {
    /// The programs it reads.
    pub fn targets(&self) -> Vec<procfs::Target> {
        self.targets.iter().map(|(t, _)| *t).collect()
    }

    /// Reads `/proc`: a walk over every process for every program's group, or each new
    /// program's leader alone.
    pub fn read(mut self) -> Samples {
        let samples = match self.boundary {
            Some(_) => self.files.scan(&self.targets),
            None => procfs::scan_leaders(&self.targets()),
        };
        Samples { samples, boundary: self.boundary, files: self.files }
    }
}

/// What [`Survey::read`] found, for [`State::step_with`].
pub struct Samples {
    samples: HashMap<procfs::Target, procfs::Sample>,
    boundary: Option<Instant>,
    files: procfs::Files,
}

impl State {
    /// With `--yield-outside`, takes in one walk's CPU time (the programs' `inside` ticks, the
    /// manager's own, the managed CPUs' counters) and sets the CPUs offered to the policy.
    fn measure_outside(&mut self, inside: u64) {
        let Some(load) = &mut self.outside else { return };
        let own =
            std::fs::read_to_string("/proc/self/stat").ok().and_then(|t| procfs::parse_stat(&t)).map_or(0, |s| s.ticks);
        let inside = inside + own.saturating_sub(std::mem::replace(&mut self.own_ticks, own));
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let before = load.reserved();
        let reserved = load.sample(&outside::cpu_ticks(&stat, &self.managed), inside);
        if reserved != before {
            tracing::info!(reserved, "CPUs left to unmanaged processes");
            self.offered = outside::offered(&self.managed, reserved);
        }
    }

    /// One scheduler step, `/proc` read included: [`State::survey`], [`Survey::read`] and
    /// [`State::step_with`] in a row (the scheduler thread reads `/proc` without holding the
    /// state).
    pub fn step(&mut self, boundary: bool) {
        let samples = self.survey(boundary.then(Instant::now)).read();
        self.step_with(samples);
    }

    /// What the next step needs read from `/proc`. The walk is most of a step's cost
    /// (docs/LIVE.md), so only a step at a quantum `boundary` walks (each program from what its
    /// last sample found; once a sweep, `procfs::SWEEP`, over every process on the machine); a
    /// kicked step between boundaries reuses the last walk's samples, so a released CPU reaches a
    /// waiting program in well under a millisecond, and samples only programs new since then,
    /// from their leaders alone (the next walk finds the rest of their groups). A program the
    /// manager holds stopped is not sampled either: stopped, it uses no CPU time and starts no
    /// thread, and its sample from before the stop stands until it is continued. `boundary`: the
    /// time the quantum boundary of this step was due, `None` for a step between boundaries.
    pub fn survey(&mut self, boundary: Option<Instant>) -> Survey {
        self.kick = false;
        let at_boundary = boundary.is_some();
        let targets = self
            .entries
            .values()
            .filter(|e| e.ticks_start.is_none() || (at_boundary && !e.stopped))
            .map(|e| {
                let mut known = procfs::Known::of(&e.sample);
                known.follow |= e.ticks_start.is_none();
                (e.target, known)
            })
            .collect();
        Survey { targets, boundary, files: std::mem::replace(&mut self.files, procfs::Files::new(0, Duration::ZERO)) }
    }

    /// When the policy asked to decide again before the next boundary ([`Decision::wake_at`]:
    /// VTQ-DSS's member expiries), if it did at the last step.
    pub fn wake_at(&self) -> Option<Instant> {
        self.decision.wake_at.map(|w| self.start + Duration::from_nanos(w))
    }

    /// The scheduler step on `samples`, read for [`State::survey`]'s list: programs that went
    /// meanwhile are not in the state any more, and those that came have no sample yet. Each
    /// phase is a method below, in the order they run.
    pub fn step_with(&mut self, samples: Samples) {
        let now = Instant::now();
        self.steps += 1;
        let Samples { samples, boundary, files } = samples;
        self.files = files;
        let at_boundary = boundary.is_some();
        // The policy's clock: a boundary step sees the time its boundary was due, so that what
        // a policy times by the quantum (VTQ-DSS's gang) ends at the next boundary however late
        // this step ran; a step between boundaries sees the time it runs.
        let at = boundary.map_or_else(|| self.now(), |b| b.saturating_duration_since(self.start).as_nanos() as Nanos);
        let mono = monotonic_ns();
        self.refresh(samples, mono, at_boundary);
        let mut programs = std::mem::take(&mut self.programs);
        self.programs_into(&mut programs);
        let mut decision = self.decide(&programs, at, at_boundary);
        let told = self.adjust(&programs, at_boundary, &mut decision);
        let mut sets = std::mem::take(&mut self.sets);
        self.place(&programs, &decision, &mut sets);
        self.publish(&decision, &sets, &told, mono);
        self.decision = decision;
        self.sets = sets;
        self.programs = programs;
        if self.policy.oversubscribes() {
            self.release_held();
        } else {
            self.enforce(now, at_boundary);
        }
        // The trace is readable while the manager runs, and complete up to the last quantum
        // if it is killed: whole lines, flushed once a quantum (no write when nothing happened).
        if let Some(w) = &mut self.trace {
            if w.flush().is_err() {
                tracing::warn!("trace file write failed; tracing stops");
                self.trace = None;
            }
        }
    }

    /// Each program from its slot (request, speedup, team) and its `/proc` sample, if it has a
    /// new one; traces teams that changed how they run; at a boundary, measures the load
    /// from outside.
    fn refresh(&mut self, mut samples: HashMap<procfs::Target, procfs::Sample>, mono: u64, at_boundary: bool) {
        let n = self.managed.len() as u32;
        let serial_after = self.quantum.as_nanos() as u64;
        let mut inside = 0;
        let mut teams = Vec::new();
        for e in self.entries.values_mut() {
            let before = e.ticks_used;
            e.refresh(samples.remove(&e.target), n, mono, serial_after);
            inside += e.ticks_used.saturating_sub(before);
            // Parallel teams only: a program of short regions is serial between them many
            // times a quantum, and the trace would say so at every step.
            let mode = e.team_mode();
            if matches!(mode, "rigid" | "folding") && mode != e.team_traced {
                e.team_traced = mode;
                teams.push((e.id, EventKind::Team { team: mode.into(), threads: e.segment.slot().raw_team() }));
            }
        }
        for (id, ev) in teams {
            self.emit(Some(id), ev);
        }
        if at_boundary {
            self.measure_outside(inside);
        }
    }

    /// The policy's decision at `at`, after it heard of the programs that arrived.
    fn decide(&mut self, programs: &[Program], at: Nanos, at_boundary: bool) -> Decision {
        let mut decision = std::mem::take(&mut self.decision);
        decision.reset(programs.len());
        let view = view!(self, programs, at);
        for id in self.arrived.drain(..) {
            if self.entries.contains_key(&id) {
                self.policy.on_arrival(&view, id);
            }
        }
        // A kicked step re-fits the quantum; only a boundary turns it.
        self.policy.decide_at(at_boundary, &view, &mut decision);
        decision
    }

    /// The passes that adjust a decision on a live machine, in order: per-user share
    /// ([`crate::limits`]), the starvation bound ([`crate::starvation`]) and the team guard
    /// ([`crate::team`]); none for a policy that oversubscribes. Returns the count each program
    /// is told: what it runs on, except that a squeezed cooperative program (run as a gang of its
    /// current team) is told what the policy meant it to have, to size its next region to.
    fn adjust(&mut self, programs: &[Program], at_boundary: bool, decision: &mut Decision) -> Vec<u32> {
        let oversubscribe = self.policy.oversubscribes();
        let cpus = self.offered.len() as u32;
        let owners: Option<Vec<u32>> =
            (self.share == Share::User && !oversubscribe).then(|| self.entries.values().map(|e| e.uid).collect());
        if let Some(uids) = &owners {
            share_between_users(cpus, programs, uids, decision);
        }
        // A time-sharing policy rotates on its own; every other one gets the starvation bound
        // (counted at boundaries).
        if !oversubscribe && !self.policy.time_sharing() {
            self.starvation.apply(programs, cpus, self.quantum, at_boundary, owners.as_deref(), decision);
        } else {
            // Turns counted before a time-sharing policy took over mean nothing after it.
            self.starvation = StarvationBound::default();
        }
        let entitled: Vec<u32> = decision.allocations.iter().map(|a| a.granted()).collect();
        if oversubscribe {
            return entitled;
        }
        let teams: Vec<Team> = programs
            .iter()
            .zip(self.entries.values())
            .map(|(p, e)| match p.threads {
                None => Team::Unknown,
                Some(threads) if e.folds() => Team::Folds { threads, cost: e.fold_cost() },
                Some(t) => Team::Whole(t),
            })
            .collect();
        let squeezed = self.guard.apply(programs, &teams, cpus, decision);
        let told = decision.allocations.iter().zip(self.entries.values()).enumerate().map(|(i, (a, e))| {
            let count = if a.running { a.count } else { 0 };
            if count > 0 && squeezed[i] && e.cooperative() {
                entitled[i].clamp(1, count)
            } else {
                count
            }
        });
        told.collect()
    }

    /// Each program's CPUs: the managed ones for all when the policy oversubscribes, else the
    /// placer's sets for the decided counts.
    fn place(&mut self, programs: &[Program], decision: &Decision, sets: &mut Vec<CpuSet>) {
        if self.policy.oversubscribes() {
            sets.clear();
            sets.resize(programs.len(), self.managed.clone());
            return;
        }
        self.placer.place_within(&self.topology, &self.offered, programs, &self.within, decision, sets);
        if let Err(e) = cpumgr_core::placer::validate(&self.offered, decision, sets) {
            tracing::error!("invalid placement from policy {}: {e}", self.policy_spec);
        }
    }

    /// Writes the decision into every program's slot (a new epoch, the count it is told, its
    /// CPUs, a lease) and traces the allocations that changed.
    fn publish(&mut self, decision: &Decision, sets: &[CpuSet], told: &[u32], mono: u64) {
        let oversubscribe = self.policy.oversubscribes();
        self.epoch += 1;
        let lease = mono + (3 * self.quantum).max(LEASE_FLOOR).as_nanos() as u64;
        let mut changed = Vec::new();
        for (i, ((e, a), set)) in self.entries.values_mut().zip(&decision.allocations).zip(sets).enumerate() {
            let running = a.running && (a.count > 0 || oversubscribe);
            e.ran = e.running;
            let count = if running { a.count } else { 0 };
            let told = if running { told[i].min(count) } else { 0 };
            if e.count != count || e.running != running || e.cpus != *set {
                changed.push((e.id, count, set.clone(), running));
            }
            e.running = running;
            e.count = count;
            e.cpus.clone_from(set);
            let slot = e.segment.slot();
            slot.publish(self.epoch, told, running, set);
            let team = slot.raw_team();
            slot.set_preempt(if team > told { told } else { NO_PREEMPT });
            slot.beat(mono, lease);
        }
        for (id, count, cpus, running) in changed {
            self.emit(Some(id), EventKind::Allocate { count, cpus, running });
        }
    }

    /// Under a policy that oversubscribes (every program on every CPU): releases what an
    /// earlier policy stopped or pinned.
    fn release_held(&mut self) {
        for e in self.entries.values_mut() {
            if e.stopped || e.applied.is_some() {
                self.backend.release(e);
                e.held_strays.clear();
                e.stopped = false;
                e.applied = None;
            }
        }
    }

    /// Makes the published allocation true: stop who does not run, pin who runs (after the grace
    /// period for a cooperative program that shrinks), continue who runs and was stopped. Stopping
    /// first and continuing last means two programs never share a CPU across the switch. A step
    /// between boundaries pins only the programs whose CPUs changed.
    fn enforce(&mut self, now: Instant, at_boundary: bool) {
        let grace = self.grace.unwrap_or(self.quantum);
        let n = self.managed.len() as u32;
        // A program that gave every CPU back itself (request 0: its runtime is idle) is not
        // stopped: it could never ask again. It keeps the CPUs it last had until it does.
        for e in self.entries.values_mut().filter(|e| !e.running && !e.stopped && e.request.wanted > 0) {
            // Only strays on the watchdog's board: if this manager dies, whatever it stopped is
            // continued.
            match enforce::stop(e.target, &e.boarded) {
                Ok(()) => {
                    e.stopped = true;
                    e.held_strays = e.boarded.clone();
                }
                Err(err) => tracing::warn!(id = e.id.0, "cannot stop: {err}"),
            }
            e.shrink_since = None;
        }
        for e in self.entries.values_mut().filter(|e| e.running) {
            if !e.may_pin(now, grace) {
                continue;
            }
            let shrinks = e.applied.as_ref().is_some_and(|old| !old.is_subset(&e.cpus));
            let set = if shrinks && e.cooperative() && !grace.is_zero() {
                let since = *e.shrink_since.get_or_insert(now);
                let shrunk = e.folds() || e.team(n).is_some_and(|t| t <= e.count);
                if shrunk || now.duration_since(since) >= grace {
                    e.shrink_since = None;
                    e.cpus.clone()
                } else {
                    e.applied.as_ref().map(|old| old.union(&e.cpus)).unwrap_or_else(|| e.cpus.clone())
                }
            } else {
                e.shrink_since = None;
                e.cpus.clone()
            };
            // At every boundary, to catch threads started since the last one; between boundaries
            // only a change: the samples are the last boundary's, already confined to `set`.
            if !at_boundary && e.applied.as_ref() == Some(&set) {
                continue;
            }
            if !self.backend.confine(e, &set) {
                tracing::warn!(id = e.id.0, "cannot confine some of its processes to {set}");
            }
            e.applied = Some(set);
        }
        for e in self.entries.values_mut().filter(|e| e.running && e.stopped) {
            match enforce::cont(e.target, &e.strays()) {
                Ok(()) => {
                    e.stopped = false;
                    e.held_strays.clear();
                }
                Err(err) => tracing::warn!(id = e.id.0, "cannot continue: {err}"),
            }
        }
    }
}
