//! One scheduler step: the view, the policy's decision, the placement of the programs whose
//! count changed, and every changed job's rate, moves and stalls.

use cpumgr_core::placer::{validate, PlacementError};
use cpumgr_core::trace::EventKind;
use cpumgr_core::{Allocation, CpuSet, Kind, Nanos, SpeedupReport};

use super::fast_forward::{signature, MAX_PERIOD};
use super::{view_of, Engine, Mode, NS, STARVED_QUANTA};
use crate::error::SimError;

impl Engine<'_, '_> {
    /// Sets job `i`'s rate for holding `held` CPUs with `threads` threads.
    /// A finished job's rate is zero. The counts of CPUs held and of jobs served and
    /// progressing follow. Always inlined (see [`Engine::push_end`]).
    #[inline(always)]
    pub(super) fn set_rate(&mut self, i: usize, held: u32, threads: f64) {
        let l = &mut self.live[i];
        let (old_held, old_rate) = (l.held, l.rate);
        l.held = held;
        l.threads = threads;
        l.rate = if l.phase < l.spec.phases.len() {
            let ph = &l.spec.phases[l.phase];
            self.cfg.cost.rate(&ph.speedup, ph.request as f64, f64::from(held), threads, l.spec.sync, false)
        } else {
            0.0
        };
        let rate = l.rate;
        self.live.beside_mut(i).held = if l.ran_last { held } else { 0 };
        self.load.held = self.load.held + held - old_held;
        self.load.served = self.load.served + usize::from(held > 0) - usize::from(old_held > 0);
        self.load.rated = self.load.rated + usize::from(rate > 0.0) - usize::from(old_rate > 0.0);
    }

    /// Brings every job that is not idle up to now and, for a policy that reads them, writes its
    /// usage figures into its program (CPU time, the speedup over the last quantum), and, at a
    /// quantum boundary with the snapshot fast-forward on, takes its snapshot. Its request is set
    /// on admission and at each phase change ([`Engine::complete_phases`]), its running flag and
    /// threads when its allocation changes ([`Engine::show`]).
    pub(super) fn view_usage(&mut self, boundary: bool) {
        self.refresh_active();
        let snapshots = self.mode.snapshots() && boundary;
        for &i in &self.active {
            let (p, l) = (&mut self.programs[i], &mut self.live[i]);
            l.progress(self.now, &mut self.seconds);
            if self.mode.usage() {
                p.cpu_time = (l.busy * NS) as Nanos;
                if l.reports && l.q_time > 0.0 && l.held > 0 {
                    p.speedup = SpeedupReport::new(l.held, l.q_work / l.q_time);
                }
            }
            l.q_work = 0.0;
            l.q_time = 0.0;
            if snapshots {
                if l.hist.len() > MAX_PERIOD {
                    l.hist.pop_front();
                }
                l.hist.push_back(l.snap());
            }
        }
    }

    /// One scheduler step: build the view, decide, place, and set every job's rate.
    pub(super) fn step(&mut self, wake: bool, next_arrival: Option<Nanos>) -> Result<(), SimError> {
        if self.tally.stop() {
            return Err(SimError::Stopped { at: self.now as f64 / NS });
        }
        self.tally.events += 1;
        let boundary = self.now == self.next_boundary;
        if boundary {
            self.next_boundary = self.now + self.quantum;
        }
        if wake {
            // A wake-up is part of the policy's schedule (VTQ-DSS's member expiries): it repeats
            // with the quanta around it, so it does not start the fast-forward over.
            self.wake_at = None;
        }
        self.compact();
        self.admit();
        let now = self.now;
        // The view, as the live manager builds it. When lazy, nothing the policy reads changes
        // between a job's own events, which write it.
        if !self.mode.lazy() {
            self.view_usage(boundary);
        }
        // A lazy run's policy may bring its last decision up to date for the programs admitted
        // since (those gone were taken out of it with them); the others it kept are then as
        // they were, and so are the CPUs they hold: only the appended ones are compared.
        let n = self.programs.len();
        let view = view_of(self.topology, self.cpus, self.now, self.quantum, &self.programs);
        let updated = self.mode.lazy() && self.decided && {
            self.decision.allocations.resize(n, Allocation::default());
            self.policy.update(&view, &mut self.decision, self.appended)
        };
        if !updated {
            self.decision.reset(n);
            // A wake-up between boundaries decides within the quantum, as the live manager's
            // kicked steps do.
            self.policy.decide_at(boundary, &view, &mut self.decision);
        }
        let kept = if updated { n - self.appended } else { 0 };
        // Kept in line with the list only when the policy may bring it up to date (a pass over
        // it at every compaction: a trace's backlog of thousands of waiting jobs).
        (self.decided, self.appended) = (self.mode.lazy() && self.policy.may_update(), 0);
        if let Some(w) = self.decision.wake_at.filter(|&w| w > self.now) {
            self.wake_at = Some(w);
        }
        if self.cfg.follow_mpl_advice {
            if let Some(m) = self.decision.mpl_advice {
                if m != self.limit && m > 0 {
                    self.limit = m;
                }
            }
        }
        let (mut sig, mut held_sig) = (0, 0);
        self.apply_placed(kept, &mut sig, &mut held_sig)?;
        if !self.mode.lazy() {
            // Every job progressed to now for the view: its end is computed from there (a job
            // whose allocation changed was rescheduled when it was applied).
            self.refresh_active();
            for k in 0..self.active.len() {
                self.reschedule(self.active[k]);
            }
        }
        self.load.unserved = self.live.len() - self.load.served;
        // Nothing progresses and nothing can arrive or wake the policy: no job can end, so none
        // queued behind the admission limit can be admitted either.
        if self.load.rated == 0 && next_arrival.is_none() && self.wake_at.is_none() {
            self.idle_quanta += 1;
            if self.idle_quanta >= STARVED_QUANTA {
                return Err(SimError::Starved { at: now as f64 / NS, jobs: self.live.len() + self.queue.len() });
            }
        }
        if self.mode.snapshots() {
            if !boundary {
                // A wake-up's decision counts in the signature of the next quantum boundary, so
                // that a repeating sequence of boundaries repeats what happens between them.
                self.ff.wake_sig = self.ff.wake_sig.rotate_left(7).wrapping_add(sig);
            } else {
                // A boundary that is also a wake-up (a gang that started between boundaries) is a
                // boundary: its snapshots were taken, so its signatures are too.
                let sig = sig.wrapping_add(std::mem::take(&mut self.ff.wake_sig).rotate_left(17));
                // Whether a job waits decides what idle CPUs count as: part of the schedule.
                let sig = if self.waiting() { sig ^ 0x2545_f491_4f6c_dd1d } else { sig };
                self.fast_forward((sig, held_sig), next_arrival);
            }
        } else if self.mode == (Mode::Lazy { skip_quiet: true }) && boundary {
            // A lazy run's fast-forward.
            let quiet = !std::mem::take(&mut self.ff.admitted) && self.changed_jobs.is_empty();
            self.skip_quiet(quiet, next_arrival);
        }
        Ok(())
    }

    /// Applies a space-sharing or gang decision through the placer: only the programs whose
    /// count changed, and those they take CPUs back from, are placed ([`cpumgr_core::Placer::place_changed`]);
    /// every program is at the first placement. With the fast-forward on, `sig` gets the
    /// schedule's signature (the sum of the running programs' parts) and `held_sig` that of
    /// every program's set (running, or where a stopped one will resume). The first `kept`
    /// programs keep the counts they hold (the policy brought its last decision up to date).
    pub(super) fn apply_placed(&mut self, kept: usize, sig: &mut u64, held_sig: &mut u64) -> Result<(), SimError> {
        debug_assert!(
            self.decision.allocations[..kept].iter().zip(self.live.besides()).all(|(a, b)| a.granted() == b.held),
            "a decision brought up to date keeps what the programs listed before hold"
        );
        // One pass over the decision: the programs whose count differs from what they hold, and
        // whether every program given CPUs ran last quantum and holds exactly its count.
        let mut changed = std::mem::take(&mut self.changed_jobs);
        changed.clear();
        let mut holds = true;
        for (i, (a, b)) in (kept..).zip(self.decision.allocations[kept..].iter().zip(self.live.besides_from(kept))) {
            let grant = a.granted();
            if grant != b.held {
                changed.push(i);
                holds &= grant == 0;
            }
        }
        if holds {
            // Every running program keeps the CPUs it holds: the placer would return them (its
            // first pass keeps held CPUs, and nothing is left to grow), so it and its check are
            // skipped, as in most quanta of a settled schedule. What changes is only that the
            // programs in `changed` stop (each got nothing and held CPUs).
            for &i in &changed {
                self.stop(i);
            }
        } else {
            for &i in &changed {
                if self.live[i].ran_last {
                    self.placer.release(self.topology, &self.programs[i].cpus);
                }
            }
            if self.sets.len() < self.programs.len() {
                // Never shrunk: a set dropped when the list is shorter would be allocated again,
                // and grown word by word, when it is longer.
                self.sets.resize(self.programs.len(), CpuSet::new());
            }
            let only_changed =
                self.placer.place_changed(self.topology, &self.programs, &self.decision, &mut changed, &mut self.sets);
            if !only_changed {
                self.placer.place(self.topology, &self.managed, &self.programs, &self.decision, &mut self.sets);
                changed.clear();
                changed.extend(0..self.programs.len());
            }
            if self.cfg.check_placement && !only_changed {
                validate(&self.managed, &self.decision, &self.sets)
                    .map_err(|error| SimError::Placement { at: self.now as f64 / NS, error })?;
            }
            for &i in &changed {
                let placed = self.placer.placed(i);
                debug_assert_eq!(placed, self.sets[i].len(), "the placer's count of program {i}'s set");
                if self.cfg.check_placement && only_changed {
                    self.check_size(i, placed)?;
                }
                self.apply_one(i, placed as u32);
            }
        }
        self.changed_jobs = changed;
        if self.mode.snapshots() {
            self.refresh_active();
            for &i in &self.active {
                if self.live[i].ran_last {
                    *sig = sig.wrapping_add(self.live[i].sig);
                }
                *held_sig = held_sig.wrapping_add(self.live[i].sig);
            }
        }
        Ok(())
    }

    /// Checks that program `i`'s new set, of `placed` CPUs ([`cpumgr_core::Placer::placed`]), is as large as
    /// its count: after placing only the changed programs, what remains to check (the placer took
    /// their CPUs from the free map, which holds none of the others'; a full placement is checked
    /// whole).
    pub(super) fn check_size(&self, i: usize, placed: usize) -> Result<(), SimError> {
        let count = self.decision.allocations[i].granted();
        if placed != count as usize {
            let error = PlacementError::WrongSize { program: i, count, got: placed };
            return Err(SimError::Placement { at: self.now as f64 / NS, error });
        }
        Ok(())
    }

    /// Applies program `i`'s new set (in `sets`, `placed` CPUs) from the placer: moves and their
    /// reload, a resumed program's stall, its rate, and the trace.
    pub(super) fn apply_one(&mut self, i: usize, placed: u32) {
        let a = self.decision.allocations[i];
        let running = a.running && placed > 0;
        let count = if running { placed } else { 0 };
        if !running && self.live.beside(i).idle {
            return;
        }
        let snapshots = self.mode.snapshots();
        let l = &mut self.live[i];
        l.progress(self.now, &mut self.seconds);
        let p = &mut self.programs[i];
        if running {
            if snapshots {
                l.sig = signature(p.id, count, &self.sets[i]);
            }
            let moved: u32 = if p.cpus.is_empty() {
                0
            } else {
                // Counted only in the words with a new CPU (no `popcnt` on the baseline target: a
                // count is a dozen instructions).
                let old = p.cpus.as_words();
                self.sets[i]
                    .as_words()
                    .iter()
                    .enumerate()
                    .map(|(k, w)| w & !old.get(k).copied().unwrap_or(0))
                    .filter(|&new| new != 0)
                    .map(u64::count_ones)
                    .sum()
            };
            if moved > 0 {
                // A program that gained no CPU it had not held (every newcomer) reloads nothing.
                l.moves += u64::from(moved);
                l.stall += self.cfg.cost.reload(moved, count);
            }
            if !l.ran_last && l.first_run.is_some() {
                l.stall += self.cfg.cost.resume_ms * 1e-3;
            }
            l.first_run.get_or_insert(self.now);
            if l.kind == Kind::Moldable && l.team.is_none() {
                l.team = Some(count);
            }
        }
        // Only a trace reads whether the allocation changed (comparing sets costs a pass over
        // the machine's words).
        let changed = self.tally.trace && (running != l.ran_last || (running && self.sets[i] != p.cpus));
        if running {
            std::mem::swap(&mut p.cpus, &mut self.sets[i]);
        }
        l.set_running(running);
        if running {
            // It has run: no longer idle.
            self.set_idle(i);
        }
        self.set_placed_rate(i, count);
        if changed {
            let id = self.programs[i].id;
            let cpus = if running { self.programs[i].cpus.clone() } else { CpuSet::new() };
            self.emit(Some(id), EventKind::Allocate { count, cpus, running });
        }
    }

    /// Stops program `i`, which ran last quantum and gets nothing now: it gives its CPUs back
    /// (no placement needed, nobody else changes).
    pub(super) fn stop(&mut self, i: usize) {
        let l = &mut self.live[i];
        debug_assert!(l.ran_last, "only a running program stops");
        l.progress(self.now, &mut self.seconds);
        self.placer.release(self.topology, &self.programs[i].cpus);
        self.live[i].set_running(false);
        self.set_placed_rate(i, 0);
        if self.tally.trace {
            let id = self.programs[i].id;
            self.emit(Some(id), EventKind::Allocate { count: 0, cpus: CpuSet::new(), running: false });
        }
    }

    /// Sets job `i`'s rate for `count` placed CPUs (its threads follow its kind), shows its
    /// allocation in its program's view fields and reschedules its end. Always inlined (see
    /// [`Engine::push_end`]).
    #[inline(always)]
    pub(super) fn set_placed_rate(&mut self, i: usize, count: u32) {
        let l = &self.live[i];
        let threads = match l.kind {
            Kind::Rigid(n) => n,
            Kind::Moldable => l.team.unwrap_or(count),
            Kind::Malleable | Kind::Evolving => count,
        };
        self.set_rate(i, count, threads as f64);
        self.show(i);
        self.reschedule(i);
    }

    /// Writes the view fields that change only with job `i`'s allocation: whether it runs, and
    /// its threads (a rigid job's processes, a moldable job's team once formed, else its CPUs
    /// once it has run). Always inlined (see [`Engine::push_end`]).
    #[inline(always)]
    pub(super) fn show(&mut self, i: usize) {
        let (p, l) = (&mut self.programs[i], &self.live[i]);
        p.running = l.ran_last;
        p.threads = match l.kind {
            Kind::Rigid(n) => Some(n),
            Kind::Moldable => l.team,
            Kind::Malleable | Kind::Evolving => l.first_run.map(|_| l.held),
        };
    }

    /// Recomputes job `i`'s end from its progress and rate now, queueing it if it moved. Always
    /// inlined (see [`Engine::push_end`]).
    #[inline(always)]
    pub(super) fn reschedule(&mut self, i: usize) {
        let l = &mut self.live[i];
        let before = l.done_at;
        l.set_done_at(self.now);
        if l.done_at != before {
            self.push_end(i);
        }
    }
}
