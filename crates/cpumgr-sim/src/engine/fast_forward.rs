//! The fast-forward: skipping quanta that cannot change anything (a lazy run) and jumping over
//! whole periods of a repeating schedule (snapshots), as the engine's documentation describes.

use std::collections::VecDeque;

use cpumgr_core::trace::EventKind;
use cpumgr_core::{CpuSet, Nanos, ProgramId, Rotation};

use super::live::Snap;
use super::{view_of, Engine};
use crate::limits::HORIZON;

/// Longest schedule period the fast-forward recognises, in quanta.
pub(super) const MAX_PERIOD: usize = 32;
/// How many times a period must repeat before the engine trusts it.
const REPEATS: usize = 3;

/// What the fast-forward learnt of the schedule since the last change.
#[derive(Debug, Default)]
pub(super) struct Repeats {
    /// Per quantum boundary, the run's busy and fragmented CPU-seconds.
    pub(super) global_hist: VecDeque<(f64, f64)>,
    /// Per quantum boundary since the last change, the signature of the running programs and
    /// that of every program's CPUs (running or last run: a stopped program's set is where it
    /// will want to resume).
    pub(super) sigs: VecDeque<(u64, u64)>,
    /// The signatures of the wake-up decisions since the last quantum boundary, folded into the
    /// next boundary's.
    pub(super) wake_sig: u64,
    /// Whether a job was admitted since the last boundary's fast-forward check.
    pub(super) admitted: bool,
    /// The policy's rotation at the last boundary ([`cpumgr_core::SimHints::rotation`]).
    pub(super) rotation: Option<Rotation>,
    /// Quanta since the last change (the snapshots' boundaries, or a lazy run's quiet quanta).
    pub(super) quiet: usize,
}

impl Engine<'_, '_> {
    /// Drops what the fast-forward learnt of the schedule: it must be seen to repeat again.
    pub(super) fn forget_schedule(&mut self) {
        self.ff.quiet = 0;
        self.ff.sigs.clear();
        self.ff.wake_sig = 0;
    }

    /// The period of the schedule since the last change, if it repeats. When the policy states
    /// its rotation of `p` quanta ([`cpumgr_core::SimHints::rotation`]), one repetition is proof: if after the
    /// last boundary but one the policy is where it was `p` boundaries before (its rotation, all
    /// since the change) and so is every program's set (running, or where a stopped one will
    /// resume), then the last `p` quanta, and the moves and stalls their decisions caused,
    /// repeat for as long as nothing changes. Otherwise the running sets must have repeated
    /// [`REPEATS`] times over.
    pub(super) fn period(&self, rotation: Option<Rotation>) -> Option<usize> {
        let len = self.ff.sigs.len();
        if let Some(r) = rotation {
            let p = r.quanta as usize;
            let repeated = |back: usize| self.ff.sigs[len - 1 - back] == self.ff.sigs[len - 1 - back - p];
            return (self.ff.quiet > p + 1 && repeated(1) && repeated(0)).then_some(p);
        }
        (1..=MAX_PERIOD.min(self.ff.quiet / REPEATS)).find(|&p| {
            len >= REPEATS * p
                && (0..(REPEATS - 1) * p).all(|j| self.ff.sigs[len - 1 - j].0 == self.ff.sigs[len - 1 - j - p].0)
        })
    }

    /// A lazy run's fast-forward: once the same schedule was decided at [`REPEATS`] boundaries
    /// in a row (the one that set it, then quanta that changed no allocation and admitted no
    /// job, as the snapshot fast-forward trusts a period of one), with a policy that says its
    /// state stands still ([`cpumgr_core::SimHints::settled`]), the quanta up to the boundary at or after the
    /// next event (a phase end, an arrival, a wake-up) are skipped. Nothing a lazy run does at
    /// such a quantum reaches a job (each one's progress is added at its own events) or the
    /// policy's view, so skipping them gives the quantum-by-quantum run's results, as long as the
    /// policy decides the same on an unchanged view (the snapshot fast-forward's assumption, for a
    /// period of one quantum). With nothing left to happen, quanta go on one by one to the
    /// starvation check.
    pub(super) fn skip_quiet(&mut self, quiet: bool, next_arrival: Option<Nanos>) {
        if !quiet || !self.policy.settled() {
            self.ff.quiet = 0;
            return;
        }
        self.ff.quiet += 1;
        if self.ff.quiet < REPEATS - 1 {
            return;
        }
        let mut next = self.next_end().min(next_arrival.unwrap_or(Nanos::MAX)).min(self.wake_at.unwrap_or(Nanos::MAX));
        if self.load.rated > 0 {
            // Jobs progress, but the next event is past the horizon (an end too far for a `u64`
            // of nanoseconds saturates): the run jumps past the horizon, where the main loop
            // stops it with the horizon's error, instead of stepping there. With nothing
            // progressing, quanta go on one by one to the starvation check.
            next = next.min(HORIZON + 1);
        }
        // Boundaries stay on multiples of the quantum (the first at 0, an empty machine's at the
        // boundary after an arrival); past the horizon the main loop stops the run either way.
        let Some(boundary) = next.div_ceil(self.quantum).checked_mul(self.quantum) else { return };
        if boundary > self.next_boundary {
            self.tally.skipped += (boundary - self.next_boundary) / self.quantum;
            self.next_boundary = boundary;
        }
    }

    /// Jumps over whole periods of a repeating schedule (module documentation).
    pub(super) fn fast_forward(&mut self, sigs: (u64, u64), next_arrival: Option<Nanos>) {
        let view = view_of(self.topology, self.cpus, self.now, self.quantum, &self.programs);
        let rotation = self.policy.rotation(&view, MAX_PERIOD as u32);
        // A job admitted since the last boundary changed nothing if the rotation is the one
        // before (the policy leaves it out: a gang row it does not fit in): the schedule, and
        // every job's progress in it, go on.
        if std::mem::take(&mut self.ff.admitted) && (rotation.is_none() || rotation != self.ff.rotation) {
            self.changed();
        }
        // A policy whose own state moved (PDPA's searches and probes) makes no promise that what
        // repeated so far goes on: only the schedule since it settled counts.
        if !self.policy.settled() {
            self.forget_schedule();
        }
        self.ff.rotation = rotation;
        self.ff.quiet += 1;
        if self.ff.global_hist.len() > MAX_PERIOD {
            self.ff.global_hist.pop_front();
        }
        self.ff.global_hist.push_back((self.tally.busy, self.tally.frag));
        if self.ff.sigs.len() >= REPEATS * MAX_PERIOD {
            self.ff.sigs.pop_front();
        }
        self.ff.sigs.push_back(sigs);
        let Some(p) = self.period(rotation) else { return };
        if self.ff.global_hist.len() <= p {
            return;
        }
        let cycle = p as u64 * self.quantum;
        // Idle jobs (never run) have no progress to add and nothing to reschedule: the walks go
        // through the active ones (current since the step's last refresh).
        let mut n = Nanos::MAX;
        for &i in &self.active {
            let l = &self.live[i];
            let (now, then) = l.period_ends(p);
            let d = now.done - then.done;
            if d > 1e-12 {
                // Progress within a period never exceeds the period's, so after `n` periods with
                // `n × d < remaining` the job has not ended. A policy that states its rotation
                // decides the same wherever the jump lands in it, so it may land in the job's
                // last period; any other lands a whole period earlier, so that the decisions
                // before an end are made as the quantum-by-quantum run makes them (PDPA's state
                // moves with each one).
                let periods = l.remaining / d;
                // An end at the landing itself would come after the landing's step, which the
                // quantum-by-quantum run makes after it: the landing stays a millionth of a
                // period clear of every end (an exact multiple, as computed, may be one in fact).
                let whole = if rotation.is_some() { periods.ceil() } else { periods.floor() };
                n = n.min((whole as Nanos).saturating_sub(1));
            }
            // A stall is part of the state that must repeat: a stopped program drops what it has
            // not served ([`Live::set_running`]), so only one running across boundaries carries
            // some, and one that differs from a period before is not periodic yet.
            if (now.stall - then.stall).abs() > 1e-15 {
                return;
            }
        }
        if let Some(a) = next_arrival {
            // Land strictly before the arrival: the step at the arrival's time must see it.
            n = n.min((a - self.now).saturating_sub(1) / cycle);
        }
        if n == Nanos::MAX && self.load.held == 0 {
            // Nothing runs and nothing will arrive: the starvation check ends the run.
            return;
        }
        // Never jump far past the horizon (the run stops there), so the jump cannot overflow. A
        // schedule in which programs run but none progresses (every slice shorter than the
        // resume cost) and nothing arrives jumps there, and the run ends with the horizon's
        // error instead of stepping towards it.
        n = n.min(HORIZON.saturating_sub(self.now) / cycle + 1);
        if n == 0 {
            return;
        }
        let g = self.ff.global_hist.len();
        let (gb, gf) = (
            self.ff.global_hist[g - 1].0 - self.ff.global_hist[g - 1 - p].0,
            self.ff.global_hist[g - 1].1 - self.ff.global_hist[g - 1 - p].1,
        );
        let k = n as f64;
        for &i in &self.active {
            let l = &mut self.live[i];
            let (now, then) = l.period_ends(p);
            let gain = Snap {
                done: k * (now.done - then.done),
                run_ns: n * (now.run_ns - then.run_ns),
                busy: k * (now.busy - then.busy),
                moves: n * (now.moves - then.moves),
                stall: 0.0,
            };
            l.remaining -= gain.done;
            l.advance(&gain);
            // The snapshots move with the clock, so that the schedule, which goes on repeating
            // after the landing, can be jumped again without being learnt again.
            for h in &mut l.hist {
                h.advance(&gain);
            }
        }
        self.tally.busy += k * gb;
        self.tally.frag += k * gf;
        for g in &mut self.ff.global_hist {
            *g = (g.0 + k * gb, g.1 + k * gf);
        }
        let jump = n * cycle;
        if self.tally.trace {
            self.emit(None, EventKind::Repeat { period: cycle, until: self.now + jump });
        }
        self.now += jump;
        self.next_boundary += jump;
        // The policy and its pending wake-up land at the same point of the rotation.
        self.wake_at = self.wake_at.map(|w| w + jump);
        self.policy.skip(jump);
        self.tally.skipped += n * p as u64;
        let now = self.now;
        self.ends.clear();
        for k in 0..self.active.len() {
            let i = self.active[k];
            self.live[i].at = now;
            self.live[i].set_done_at(now);
            self.push_end(i);
        }
    }
}

/// A running program's part of a schedule's signature, a hash of its id, count and CPUs. The
/// signature is the wrapping sum of the running programs' parts: the same schedule gives the
/// same sum whatever the order, and programs that do not run (a long backlog) cost nothing.
/// Collisions only cost a missed skip.
pub(super) fn signature(id: ProgramId, count: u32, cpus: &CpuSet) -> u64 {
    // The order-sensitive fold of a rotation's fingerprint, over the id, count and CPU words.
    let mut fold = Rotation::new(0);
    fold.mix(id.0 ^ ((count as u64) << 32));
    for w in cpus.as_words() {
        fold.mix(*w);
    }
    let mut h = fold.fingerprint;
    // A full avalanche (MurmurHash3's finaliser) before summing: the multiply-xor steps alone
    // are nearly linear, and sums of them collide (two programs on complementary CPU sets
    // summed like two others on a different split).
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_of_different_schedules_differ() {
        // Two gang rows of pdpa-ltomcatv on 64 CPUs whose sums collided before the finaliser:
        // programs 8 and 9 on complementary sets, then 6 and 7 on another split.
        let set = |s: &str| CpuSet::parse(s).unwrap();
        let sum = |a: (u64, &str), b: (u64, &str)| {
            signature(ProgramId(a.0), 32, &set(a.1)).wrapping_add(signature(ProgramId(b.0), 32, &set(b.1)))
        };
        let one = sum((8, "2,33-63"), (9, "0-1,3-32"));
        assert_ne!(one, sum((6, "0,33-63"), (7, "1-32")));
        assert_eq!(one, sum((9, "0-1,3-32"), (8, "2,33-63")), "the order of the programs does not matter");
        assert_ne!(signature(ProgramId(1), 2, &set("0-1")), signature(ProgramId(1), 2, &set("2-3")), "the CPUs count");
    }
}
