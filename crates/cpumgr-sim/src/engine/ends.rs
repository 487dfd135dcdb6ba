//! Phase ends: the heap of the times jobs' phases end, and what an end does (the job's next
//! phase, or its departure).

use std::cmp::Ordering;

use cpumgr_core::trace::EventKind;
use cpumgr_core::Nanos;

use super::Engine;

impl Engine<'_, '_> {
    /// Moves every job whose phase ended to its next phase, or out of the system.
    pub(super) fn complete_phases(&mut self) {
        while let Some(&end) = self.ends.peek() {
            if end.at() > self.now {
                break;
            }
            self.ends.pop();
            if !self.applies(end) {
                continue;
            }
            // An alive job is listed, in id order.
            let i = self.position(end.id());
            debug_assert_eq!(self.live.slot(i), end.slot, "the job found by its id is the end's");
            self.changed();
            let now = self.now;
            let l = self.live.in_slot_mut(end.slot);
            l.progress(now, &mut self.seconds);
            let ended = l.phase;
            l.phase += 1;
            self.tally.events += 1;
            while l.phase < l.spec.phases.len() && l.spec.phases[l.phase].work <= 0.0 {
                l.phase += 1;
            }
            if l.phase >= l.spec.phases.len() {
                self.finish(i);
                continue;
            }
            l.start_phase();
            let request = l.spec.request_in(l.phase);
            // Only a trace reads whether the request changed.
            let traced = self.tally.trace && request.wanted != l.spec.request_in(ended).wanted;
            let (held, threads) = (l.held, l.threads);
            self.set_idle(i);
            self.set_rate(i, held, threads);
            self.live[i].set_done_at(now);
            self.push_end(i);
            self.programs[i].request = request;
            if traced {
                let id = self.programs[i].id;
                self.emit(Some(id), EventKind::Request { wanted: request.wanted });
            }
        }
    }

    /// The earliest phase end, dropping the heap's entries that no longer apply (so that the
    /// run does not stop at a time where nothing happens).
    pub(super) fn next_end(&mut self) -> Nanos {
        while let Some(&end) = self.ends.peek() {
            if self.applies(end) {
                return end.at();
            }
            self.ends.pop();
        }
        Nanos::MAX
    }

    /// Whether the phase end `end` still applies: the record in its slot is its job's (a slot is
    /// reused once its job has left), still in the system and due at its time. A job waiting for
    /// admission has a record too, which no end applies to: its id is its own (ids are unique)
    /// and it is due at no time (`done_at` is `Nanos::MAX` until admission).
    pub(super) fn applies(&self, end: End) -> bool {
        let l = self.live.in_slot(end.slot);
        l.id == end.id() && l.alive && l.done_at == end.at()
    }

    /// Queues job `i`'s end, if it has one. Always inlined, as are the other operations a job's
    /// arrival, placement and end each take once ([`Engine::set_rate`], [`Engine::reschedule`],
    /// ...): the compiler kept them out of line, a call each per job.
    #[inline(always)]
    pub(super) fn push_end(&mut self, i: usize) {
        let slot = self.live.slot(i);
        let l = self.live.in_slot(slot);
        if l.done_at != Nanos::MAX {
            self.ends.push(End::new(l.done_at, l.id, slot));
        }
    }
}

/// A phase end in the engine's queue: a job's id and the time it is due, packed into one key that
/// orders ends by time, then by id (as the module documentation says ties go), and the slot of
/// its record, which finds it without a search. Ids are unique, so the slot never decides the
/// order: one integer comparison does, where a tuple of the three took a branch per field, at
/// every comparison of every push and pop.
#[derive(Debug, Clone, Copy)]
pub(super) struct End {
    /// `at << 64 | id`.
    key: u128,
    slot: u32,
}

impl End {
    pub(super) fn new(at: Nanos, id: u64, slot: u32) -> End {
        End { key: (u128::from(at) << 64) | u128::from(id), slot }
    }

    /// When it is due.
    pub(super) fn at(self) -> Nanos {
        (self.key >> 64) as Nanos
    }

    /// Its job's id.
    pub(super) fn id(self) -> u64 {
        self.key as u64
    }
}

impl Ord for End {
    /// Reversed, so that the standard max-heap pops the earliest end first.
    fn cmp(&self, other: &End) -> Ordering {
        other.key.cmp(&self.key)
    }
}

impl PartialEq for End {
    fn eq(&self, other: &End) -> bool {
        self.key == other.key
    }
}

impl Eq for End {}

impl PartialOrd for End {
    fn partial_cmp(&self, other: &End) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// `x.ceil() as Nanos`, exactly, without the software `ceil` (the baseline x86-64 target has no
/// rounding instruction, so `f64::ceil` is a library call, 3 % of a run that steps every quantum).
/// For `0 < x < 2^63` truncation gives `floor(x)`, a double itself, so comparing it with `x` says
/// whether to add one (at most 2^63 results: no overflow); both conversions are signed ones, one
/// instruction each on that target, where the unsigned ones are sequences. From 2^63 up `x` is a
/// whole number, its own ceiling, and the cast saturates from 2^64. Zero, negative and NaN give
/// 0, as the cast of their ceiling does.
fn ceil_nanos(x: f64) -> Nanos {
    /// 2^63, the first double past `i64::MAX`.
    const SIGNED_END: f64 = 9_223_372_036_854_775_808.0;
    if x.is_nan() || x <= 0.0 {
        return 0;
    }
    if x >= SIGNED_END {
        return x as Nanos;
    }
    let t = x as i64;
    t as Nanos + Nanos::from((t as f64) < x)
}

/// The nanoseconds from now to an end `x` nanoseconds away, computed in floating point: the
/// ceiling, except that an `x` a millionth of a nanosecond or less above a whole nanosecond is
/// that nanosecond. Work added up piece by piece (a fast-forward's periods, a quantum's progress) is
/// off by a few units in the last place, and an end that falls on a quantum boundary must stay
/// on it: one nanosecond after it, it comes after the boundary's step, and a request change it
/// brings waits a quantum.
pub(super) fn end_nanos(x: f64) -> Nanos {
    ceil_nanos(x - 1e-6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_nanos_is_the_cast_ceiling() {
        let small = [0.0, -0.0, -0.5, -1.5, 1e-300, 0.2, 1.0, 1.5, 99_999_999.5, 4503599627370495.5];
        let large = [
            9007199254740992.0,
            9223372036854774784.0,
            9223372036854775808.0,
            1.8446744073709552e19,
            1e30,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        for x in small.into_iter().chain(large) {
            assert_eq!(ceil_nanos(x), x.ceil() as Nanos, "{x}");
        }
    }

    #[test]
    fn an_end_within_float_noise_of_a_nanosecond_is_that_nanosecond() {
        assert_eq!(end_nanos(100_000_000.000_000_01), 100_000_000);
        assert_eq!(end_nanos(100_000_000.01), 100_000_001);
        assert_eq!(end_nanos(0.5), 1);
        assert_eq!(end_nanos(1e-9), 0);
    }
}
