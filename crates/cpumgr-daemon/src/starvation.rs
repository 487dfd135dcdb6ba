//! The starvation bound: how long a program that wants CPUs may go without any.
//!
//! The papers' space-sharing policies give CPUs to the first programs when programs outnumber
//! CPUs (equipartition's "the first `P` get one each", PDPA's and DSS's admission order): a batch
//! system's queue, where the others wait for a job to end. A live machine's programs need not
//! end (services, interactive work): the third busy program on two CPUs would stay stopped for
//! good. After the policy decides, the manager therefore grants a program that has wanted CPUs and
//! had none for [`STARVED_AFTER`] (in whole quanta) a turn of as many quanta, with the CPUs it needs
//! (its minimum, or a rigid program's processes): idle CPUs first, then CPUs taken from programs
//! running above their minimum (the largest first), then programs stopped whole (those that have
//! run longest first); programs in their own turn are not taken from. Programs so stopped wait
//! in turn, and get their turn back the same way: when programs outnumber CPUs, every one of them
//! runs at least one turn in every `after × (programs + 1)` quanta. A policy that time-shares
//! (gang, the time-shared DSS variants) rotates on its own and is left as it decides; so is a
//! decision that starves nobody, which is every decision while programs fit the machine.
//!
//! Under per-user sharing (`share = "user"`) a turn comes out of the waiting program's own
//! user's share when its user's CPUs (and the idle ones) could serve it: one user's programs take
//! turns among themselves and do not eat into another user's half. A program its user's CPUs
//! cannot serve (a user holding none, or fewer than a wide program needs) takes from anyone, so
//! none waits for good either.
//!
//! The bound counts quanta at boundaries only. The manager also steps between boundaries when
//! kicked (a registration, a request, a released CPU), as often as requests come; such a step
//! keeps the turns as they stand (a program in its turn keeps it to the boundary, one due gets
//! it if CPUs can be freed) and counts nothing, or a burst of requests would pass for quanta of
//! waiting and grant turns long before the bound.

use std::collections::HashMap;
use std::time::Duration;

use cpumgr_core::policy::Decision;
use cpumgr_core::program::{Program, ProgramId};

/// How long a program that wants CPUs may go without any before it is granted a turn (rounded
/// up to whole quanta, at least one): long enough that a policy's own order (a job ending, an
/// admission) usually serves it first, short enough that nobody notices a stall.
pub const STARVED_AFTER: Duration = Duration::from_secs(1);

/// What the bound remembers of a program between quanta.
#[derive(Debug, Default, Clone, Copy)]
struct Turn {
    /// Quanta in a row it wanted CPUs and got none.
    waited: u32,
    /// Quanta in a row it ran.
    ran: u32,
    /// Quanta left of a turn it was granted, after the current one.
    owed: u32,
    /// It holds a turn in the current quantum: granted one at the last boundary (or at a kicked
    /// step since), or owed the quantum then.
    in_turn: bool,
}

/// The starvation bound of one manager (see the module documentation).
#[derive(Debug, Default)]
pub struct StarvationBound {
    turns: HashMap<ProgramId, Turn>,
}

impl StarvationBound {
    /// Adjusts `decision` (parallel to `programs`) on `cpus` CPUs so that no program that wants
    /// CPUs waits longer than [`STARVED_AFTER`] at this `quantum`; at a `boundary` step, then
    /// counts this quantum's waits and runs (a kicked step between boundaries counts nothing).
    /// `owners`, under per-user sharing: each program's user, whose share its turns come out of.
    pub fn apply(
        &mut self,
        programs: &[Program],
        cpus: u32,
        quantum: Duration,
        boundary: bool,
        owners: Option<&[u32]>,
        decision: &mut Decision,
    ) {
        let after = STARVED_AFTER.as_nanos().div_ceil(quantum.as_nanos().max(1)).clamp(1, u32::MAX as u128) as u32;
        self.apply_after(programs, cpus, after, boundary, owners, decision);
    }

    /// [`StarvationBound::apply`] with a bound, and turns, of `after` quanta.
    fn apply_after(
        &mut self,
        programs: &[Program],
        cpus: u32,
        after: u32,
        boundary: bool,
        owners: Option<&[u32]>,
        decision: &mut Decision,
    ) {
        // A boundary ends the last quantum's turns; those owed more are due again below.
        let turns: Vec<Turn> = programs
            .iter()
            .map(|p| {
                self.turns.get(&p.id).map_or_else(Turn::default, |&t| Turn { in_turn: t.in_turn && !boundary, ..t })
            })
            .collect();
        let wants = |i: usize| programs[i].request.wanted > 0 && programs[i].wants() > 0;
        let gets = |d: &Decision, i: usize| d.allocations[i].granted() > 0;
        // Those in or owed the rest of a turn, then those that waited too long, longest first.
        // `waited` counted the quantum in course as waited: between boundaries it has not
        // passed yet, and only a program the last boundary could not serve is due.
        let owed = |t: &Turn| t.owed > 0 || t.in_turn;
        let waited_out = |t: &Turn| t.waited >= after.saturating_add(u32::from(!boundary));
        let mut due: Vec<usize> = (0..programs.len())
            .filter(|&i| wants(i) && !gets(decision, i) && (owed(&turns[i]) || waited_out(&turns[i])))
            .collect();
        due.sort_by_key(|&i| (!owed(&turns[i]), std::cmp::Reverse(turns[i].waited), i));
        let mut given_turn = vec![false; programs.len()];
        // CPUs are taken only from programs that run now and are not in a turn: at most one per
        // CPU, so a search is over those, not over every program. Once no CPU is idle and none of
        // them could give one up, no later turn can be granted: with many programs waiting on few
        // CPUs, most of them are due at every boundary.
        // They are kept in the order whole programs are stopped (those that have run longest
        // first), and those that could shrink apart: none while every one runs at its minimum.
        let mut candidates: Vec<usize> =
            (0..programs.len()).filter(|&j| !owed(&turns[j]) && gets(decision, j)).collect();
        candidates.sort_by_key(|&j| (std::cmp::Reverse(turns[j].ran), j));
        let shrinkers: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&j| programs[j].kind.rigid_procs().is_none() && decision.allocations[j].count > need(&programs[j]))
            .collect();
        let spare = |d: &Decision, given_turn: &[bool], j: usize| !given_turn[j] && gets(d, j);
        let mut free = u64::from(cpus).saturating_sub(decision.total());
        // The candidates before `first` have nothing left to give, and never have again.
        let mut first = 0;
        for i in due {
            while first < candidates.len() && !spare(decision, &given_turn, candidates[first]) {
                first += 1;
            }
            if free == 0 && first == candidates.len() {
                break;
            }
            let need = need(&programs[i]).min(cpus);
            // A turn begun goes on, and a new one is never taken from a program that waited as
            // long (the policy gave it a CPU back, it has had no turn yet: it runs first). Under
            // per-user sharing, it comes from the program's own user while that user's CPUs and
            // the idle ones could serve it (else from anyone: a user holding none, or fewer than
            // a wide program needs, would wait for good).
            let mine = |j: usize| owners.is_none_or(|o| o[j] == o[i]);
            let own = owners.is_some() && {
                let users: u64 = (0..programs.len())
                    .filter(|&j| mine(j))
                    .map(|j| u64::from(decision.allocations[j].granted()))
                    .sum();
                users + u64::from(cpus).saturating_sub(decision.total()) >= u64::from(need)
            };
            let waited = if owed(&turns[i]) { u32::MAX } else { turns[i].waited };
            let from = |j: usize| (!own || mine(j)) && turns[j].waited < waited;
            let whom = Candidates { stop: &candidates[first..], shrink: &shrinkers };
            if take(programs, &turns, &given_turn, whom, &mut free, need, from, decision) {
                decision.give(i, need);
                given_turn[i] = true;
                free -= u64::from(need);
            }
        }
        if !boundary {
            // A turn granted now lasts to the boundary, where it is counted.
            for (i, p) in programs.iter().enumerate().filter(|&(i, _)| given_turn[i]) {
                self.turns.insert(p.id, Turn { in_turn: true, ..turns[i] });
            }
            return;
        }
        let mut next = HashMap::with_capacity(programs.len());
        for (i, p) in programs.iter().enumerate() {
            let mut t = turns[i];
            if gets(decision, i) {
                t.in_turn = given_turn[i] || t.owed > 0;
                t.waited = 0;
                t.ran = t.ran.saturating_add(1);
                t.owed = if given_turn[i] && t.owed == 0 { after - 1 } else { t.owed.saturating_sub(1) };
            } else {
                t = Turn { waited: if wants(i) { t.waited.saturating_add(1) } else { 0 }, ..Turn::default() };
            }
            next.insert(p.id, t);
        }
        self.turns = next;
    }
}

/// The CPUs a program granted a turn gets, and the fewest a running one keeps when CPUs are
/// taken for a turn: a rigid program's processes, else its minimum.
fn need(p: &Program) -> u32 {
    p.kind.rigid_procs().unwrap_or(p.request.min.max(1))
}

/// The programs that ran at the start of a step, in no turn: those that may be stopped, in the
/// order they are (those that have run longest first, then by index), and those of them that
/// could shrink instead.
#[derive(Clone, Copy)]
struct Candidates<'a> {
    stop: &'a [usize],
    shrink: &'a [usize],
}

/// Frees `count` CPUs in `decision` for a program granted a turn: the `free` (idle) ones, then
/// from programs above their minimum (the largest first), then whole programs (those that have
/// run longest first), never from one in its own turn (`given_turn`, in a turn, or owed quanta),
/// nor from one `from` excludes; only `candidates` can give any. On success `free` counts the
/// idle CPUs after; when that cannot free enough, changes nothing and returns false.
#[allow(clippy::too_many_arguments)]
fn take(
    programs: &[Program],
    turns: &[Turn],
    given_turn: &[bool],
    candidates: Candidates,
    free: &mut u64,
    count: u32,
    from: impl Fn(usize) -> bool,
    decision: &mut Decision,
) -> bool {
    let spare = |d: &Decision, i: usize| {
        from(i)
            && !given_turn[i]
            && turns[i].owed == 0
            && !turns[i].in_turn
            && d.allocations[i].running
            && d.allocations[i].count > 0
    };
    let mut undo = Vec::new();
    let mut freed = *free;
    while freed < u64::from(count) {
        // A program that can shrink, the largest above its minimum first.
        let shrink = candidates
            .shrink
            .iter()
            .copied()
            .filter(|&i| {
                spare(decision, i)
                    && programs[i].kind.rigid_procs().is_none()
                    && decision.allocations[i].count > need(&programs[i])
            })
            .max_by_key(|&i| (decision.allocations[i].count, std::cmp::Reverse(i)));
        if let Some(i) = shrink {
            undo.push((i, decision.allocations[i]));
            decision.allocations[i].count -= 1;
            freed += 1;
            continue;
        }
        let whole = candidates.stop.iter().copied().find(|&i| spare(decision, i));
        let Some(i) = whole else {
            for (i, a) in undo.into_iter().rev() {
                decision.allocations[i] = a;
            }
            return false;
        };
        undo.push((i, decision.allocations[i]));
        freed += u64::from(decision.allocations[i].granted());
        decision.allocations[i].count = 0;
        decision.allocations[i].running = false;
    }
    *free = freed;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpumgr_core::policy::Allocation;
    use cpumgr_core::Kind;

    /// The paper's equipartition rule with more programs than CPUs: the first `cpus` get one.
    fn first_get_one(n: usize, cpus: u32) -> Decision {
        let mut d = Decision::default();
        d.reset(n);
        for a in d.allocations.iter_mut().take(cpus as usize) {
            *a = Allocation { count: 1, running: true, block: 1 };
        }
        d
    }

    fn programs(n: u64) -> Vec<Program> {
        (1..=n).map(|id| Program::new(id, format!("p{id}"), 1)).collect()
    }

    /// Three programs on two CPUs, a policy that always runs the first two, kicked steps (none
    /// to three) between boundaries: every program runs, none waits more than the bound in a
    /// row, and no step hands out more than two CPUs.
    #[test]
    fn every_program_gets_turns_and_no_wait_exceeds_the_bound() {
        let ps = programs(3);
        let mut bound = StarvationBound::default();
        let (mut ran, mut waited, mut longest) = ([0u32; 3], [0u32; 3], 0);
        for q in 0..300 {
            for _ in 0..q % 4 {
                let mut d = first_get_one(3, 2);
                bound.apply_after(&ps, 2, 5, false, None, &mut d);
                assert!(d.allocations.iter().filter(|a| a.running).map(|a| a.count).sum::<u32>() <= 2);
            }
            let mut d = first_get_one(3, 2);
            bound.apply_after(&ps, 2, 5, true, None, &mut d);
            assert!(d.allocations.iter().filter(|a| a.running).map(|a| a.count).sum::<u32>() <= 2);
            for i in 0..3 {
                if d.allocations[i].running && d.allocations[i].count > 0 {
                    ran[i] += 1;
                    waited[i] = 0;
                } else {
                    waited[i] += 1;
                    longest = longest.max(waited[i]);
                }
            }
        }
        assert!(ran.iter().all(|&r| r >= 60), "each program runs a fair part of the time: {ran:?}");
        assert!(longest <= 5 * 3, "no program waits more than after × programs in a row: {longest}");
    }

    /// Kicked steps between boundaries count no quantum: however many come, a waiting program
    /// is granted its turn at the boundary that ends its bound, not before; and keeps the turn
    /// through the kicked steps that follow, to the next boundary.
    #[test]
    fn kicked_steps_neither_count_nor_end_a_turn() {
        let ps = programs(2);
        let mut bound = StarvationBound::default();
        let step = |bound: &mut StarvationBound, boundary: bool| {
            let mut d = first_get_one(2, 1);
            bound.apply_after(&ps, 1, 1, boundary, None, &mut d);
            (d.allocations[0].running, d.allocations[1].running)
        };
        assert_eq!(step(&mut bound, true), (true, false), "the policy's decision: the first runs");
        for _ in 0..5 {
            assert_eq!(step(&mut bound, false), (true, false), "a kicked step is not a quantum of waiting");
        }
        assert_eq!(step(&mut bound, true), (false, true), "the bound, one quantum, ends at the boundary");
        for _ in 0..5 {
            assert_eq!(step(&mut bound, false), (false, true), "the turn lasts to the next boundary");
        }
        assert_eq!(step(&mut bound, true), (true, false), "then the first, which waited a quantum, has its turn");
    }

    /// Per-user sharing: user A's three programs on A's one CPU take turns among themselves and
    /// never take user B's; a third user, left no CPU by the share, gets turns all the same.
    #[test]
    fn turns_come_out_of_the_waiting_programs_own_user_while_it_holds_a_cpu() {
        let ps = programs(4);
        let owners = [1, 1, 1, 2];
        let mut bound = StarvationBound::default();
        let mut ran = [0u32; 4];
        for _ in 0..60 {
            // The share's decision: A's first program and B's one run, one CPU each.
            let mut d = Decision::default();
            d.reset(4);
            d.allocations[0] = Allocation { count: 1, running: true, block: 1 };
            d.allocations[3] = Allocation { count: 1, running: true, block: 1 };
            bound.apply_after(&ps, 2, 2, true, Some(&owners), &mut d);
            assert!(d.allocations[3].running, "B keeps its CPU: {:?}", d.allocations);
            assert_eq!((0..3).filter(|&i| d.allocations[i].running).count(), 1, "A runs one program at a time");
            for (r, a) in ran.iter_mut().zip(&d.allocations) {
                *r += u32::from(a.running);
            }
        }
        println!("quanta run of 60, A's three programs and B's: {ran:?}");
        assert!(ran[..3].iter().all(|&r| r >= 10), "each of A's programs gets turns: {ran:?}");

        let ps = programs(3);
        let owners = [1, 2, 3];
        let mut bound = StarvationBound::default();
        let mut third = 0;
        for _ in 0..30 {
            let mut d = first_get_one(3, 2);
            bound.apply_after(&ps, 2, 2, true, Some(&owners), &mut d);
            third += u32::from(d.allocations[2].running);
        }
        assert!(third >= 10, "a user with no CPU takes turns from the others: ran {third} of 30 quanta");
    }

    /// Per-user sharing with a wide program: A's rigid program of two processes, beside A's
    /// one-CPU program and B's on two CPUs, cannot be served from A's one CPU; it takes B's too
    /// rather than wait for good.
    #[test]
    fn a_program_its_users_cpus_cannot_serve_takes_from_anyone() {
        let mut ps = programs(3);
        ps[1].kind = Kind::Rigid(2);
        let owners = [1, 1, 2];
        let mut bound = StarvationBound::default();
        let mut wide = 0;
        for _ in 0..30 {
            let mut d = first_get_one(3, 2);
            d.allocations.swap(1, 2);
            bound.apply_after(&ps, 2, 2, true, Some(&owners), &mut d);
            assert!(d.allocations.iter().filter(|a| a.running).map(|a| a.count).sum::<u32>() <= 2);
            wide += u32::from(d.allocations[1].running && d.allocations[1].count == 2);
        }
        assert!(wide >= 5, "the wide program ran {wide} of 30 quanta");
    }

    /// A decision that starves nobody is left as it is, and a time-shared one is not seen here
    /// (the manager does not apply the bound to it).
    #[test]
    fn a_decision_that_serves_everyone_is_unchanged() {
        let ps = programs(2);
        let mut bound = StarvationBound::default();
        for _ in 0..10 {
            let mut d = first_get_one(2, 2);
            let before = d.clone();
            bound.apply_after(&ps, 2, 1, true, None, &mut d);
            assert_eq!(d.allocations, before.allocations);
        }
    }

    /// A starved rigid program gets all its processes, taken from programs above their minimum
    /// first; a program that wants nothing is never granted a turn.
    #[test]
    fn a_rigid_program_gets_its_processes_from_the_largest() {
        let mut ps = programs(3);
        ps[1].kind = Kind::Rigid(2);
        ps[2].request.wanted = 0;
        ps[2].request.min = 0;
        let mut bound = StarvationBound::default();
        let mut d = Decision::default();
        for _ in 0..3 {
            d.reset(3);
            d.allocations[0] = Allocation { count: 4, running: true, block: 1 };
            bound.apply_after(&ps, 4, 2, true, None, &mut d);
        }
        assert_eq!((d.allocations[0].count, d.allocations[1].count), (2, 2), "{:?}", d.allocations);
        assert!(d.allocations[1].running && !d.allocations[2].running);
    }
}
