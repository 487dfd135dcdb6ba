//! The policy contract: once per quantum, a policy reads a [`View`] of the machine and its programs
//! and writes a [`Decision`]: how many CPUs each program gets and whether it runs at all.
//!
//! Policies are pure and deterministic: the same views in the same order give the same decisions.
//! They never choose *which* CPUs; that is the [`crate::placer::Placer`]'s job, so that affinity
//! and topology rules live in one place.

use crate::program::{Nanos, Program, ProgramId};
use crate::topology::Topology;

/// What a policy sees at the start of a quantum.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    /// The current time.
    pub now: Nanos,
    /// The scheduler's quantum.
    pub quantum: Nanos,
    /// The machine.
    pub topology: &'a Topology,
    /// How many CPUs the scheduler manages (the CPUs it may hand out); at most the machine's.
    pub cpus: u32,
    /// The registered programs, in arrival (id) order.
    pub programs: &'a [Program],
}

impl View<'_> {
    /// The index of a program in [`View::programs`].
    pub fn index_of(&self, id: ProgramId) -> Option<usize> {
        self.programs.binary_search_by_key(&id, |p| p.id).ok()
    }

    /// Sum of every program's [`Program::wants`].
    pub fn total_wants(&self) -> u64 {
        self.programs.iter().map(|p| p.wants() as u64).sum()
    }
}

/// One program's share of a quantum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Allocation {
    /// CPUs it gets.
    pub count: u32,
    /// Whether it runs this quantum (time-sharing policies stop the others).
    pub running: bool,
    /// Placement block size: the placer hands this program the CPUs it grows by in whole blocks
    /// of this many CPUs, aligned in position order (processor clustering; see
    /// [`crate::placer`]'s rule 5), as long as whole blocks are free and needed; 1 (or 0) means
    /// any CPUs.
    pub block: u32,
}

impl Allocation {
    /// Gives the program `count` CPUs and marks it running when the count is above zero: what
    /// [`Decision::give`] does, for a pass that walks the allocations beside the programs.
    pub fn give(&mut self, count: u32) {
        self.count = count;
        self.running = count > 0;
    }

    /// The CPUs it gets this quantum: its count if it runs, none if it is stopped.
    pub fn granted(&self) -> u32 {
        // Without a branch: the engine compares every program's grant with what it holds at
        // every quantum.
        self.count * u32::from(self.running)
    }
}

/// A policy's output for one quantum, parallel to [`View::programs`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// Per program, in the order of [`View::programs`].
    pub allocations: Vec<Allocation>,
    /// When the policy wants to decide again before the next quantum boundary (VTQ-DSS's
    /// per-program quantum); `None` for the regular quantum.
    pub wake_at: Option<Nanos>,
    /// The multiprogramming level the policy advises the long-term scheduler to admit (PDPA).
    pub mpl_advice: Option<u32>,
}

impl Decision {
    /// Resets to `n` programs that get nothing and do not run: [`Allocation::default`] each
    /// (block 0, any CPUs).
    pub fn reset(&mut self, n: usize) {
        self.allocations.clear();
        self.allocations.resize(n, Allocation::default());
        self.wake_at = None;
        self.mpl_advice = None;
    }

    /// Gives program `i` `count` CPUs and marks it running when the count is above zero.
    pub fn give(&mut self, i: usize, count: u32) {
        self.allocations[i].give(count);
    }

    /// Total CPUs given to running programs.
    pub fn total(&self) -> u64 {
        self.allocations.iter().map(|a| u64::from(a.granted())).sum()
    }
}

/// A scheduling policy: what the live manager calls. Only [`Policy::decide`] is required; the
/// hooks let a policy keep state across quanta (PDPA's per-program state machine, VTQ's
/// repository queue). What the simulator asks beyond this, to skip work, is [`SimHints`].
pub trait Policy: Send {
    /// The policy's registered name (`equipartition`, `pdpa`, ...).
    fn name(&self) -> &'static str;

    /// Decides one quantum. `out` arrives [`Decision::reset`] to `view.programs.len()` entries.
    fn decide(&mut self, view: &View, out: &mut Decision);

    /// Decides again within the current quantum, as [`Policy::decide`] does except that what
    /// turns once per quantum stays where it is (a gang's row, a sliding window's place). The
    /// live manager calls it at the steps it is kicked to between boundaries (a registration,
    /// a request, a released CPU), which come as often as programs ask: a policy that turned at
    /// each would rotate as fast as programs ring. The default decides afresh, for the policies
    /// whose decision keeps no turn.
    fn refit(&mut self, view: &View, out: &mut Decision) {
        self.decide(view, out);
    }

    /// What a scheduler step calls: [`Policy::decide`] at a quantum `boundary`, else
    /// [`Policy::refit`]. Policies override those two, not this.
    fn decide_at(&mut self, boundary: bool, view: &View, out: &mut Decision) {
        if boundary {
            self.decide(view, out);
        } else {
            self.refit(view, out);
        }
    }

    /// A program registered (it is already in `view`).
    fn on_arrival(&mut self, _view: &View, _id: ProgramId) {}

    /// A program ended or unregistered (it is no longer in any view).
    fn on_exit(&mut self, _id: ProgramId) {}

    /// Whether the policy time-shares: some programs may be stopped while others run, so the
    /// enforcer must stop and continue them at quantum boundaries.
    fn time_sharing(&self) -> bool {
        false
    }

    /// Whether the policy leaves the machine unmanaged (the `os` baseline): every program runs
    /// with as many threads as it wants on every managed CPU, oversubscribed, and the placer is
    /// not consulted. The counts in its decision are the programs' thread counts, not CPU shares.
    fn oversubscribes(&self) -> bool {
        false
    }
}

/// What the discrete-event simulator asks of a policy beyond the [`Policy`] contract: hints that
/// let it skip work (quanta that cannot change anything, decisions it can bring up to date, a
/// schedule that repeats) and the admission and quantum the policy's paper ran it under. The
/// live manager never calls them. Every default fits a policy whose decision depends on its
/// view alone (no hint: the simulator does the full work), so such a policy simulates with
/// `impl SimHints for MyPolicy {}`; one whose own state moves says so ([`SimHints::settled`]).
/// A hint that lies makes the fast-forward's results differ from a quantum-by-quantum run, which
/// the simulator's property tests check for every catalog policy.
pub trait SimHints: Policy {
    /// Brings this policy's last decision up to date instead of deciding afresh, when the view
    /// changed only by programs leaving and `appended` programs arriving at its end: `out` holds
    /// the last decision (from [`Policy::decide`] or this method) for the programs still
    /// listed, in view order, and a reset allocation for each appended one. Returns whether `out`
    /// is now exactly what `decide` would give for `view`; false (the default, `out` in any
    /// state) has the caller reset `out` and call `decide`. Other fields of the programs
    /// (requests, running flags, sets, usage) may have changed too: a policy answers true only
    /// where its decision does not depend on them; it brings `out`'s `wake_at` and `mpl_advice`
    /// up to date too (they hold the last decision's). This lets a quantum cost the programs that
    /// changed rather than every program: the simulator asks it at every step but the first of a
    /// run whose jobs it brings up to date only at their own events (a policy that reads no
    /// usage, [`SimHints::reads_usage`], and, with the fast-forward on, does not time-share); the
    /// live manager always decides afresh.
    fn update(&mut self, _view: &View, _out: &mut Decision, _appended: usize) -> bool {
        false
    }

    /// Whether [`SimHints::update`] may accept to bring the decision just made up to date at the
    /// next quantum. Keeping a decision in step with the programs that leave costs a pass over
    /// it, which a caller spares when this says no (the default: a policy that never updates, or
    /// one whose last decision left a program waiting).
    fn may_update(&self) -> bool {
        false
    }

    /// Whether [`Policy::decide`] reads the programs' usage figures, [`Program::cpu_time`] and
    /// [`Program::speedup`], which change every quantum a program runs. A policy that reads them
    /// must say so, as a time-sharing one says it time-shares: the live manager always fills them
    /// in, but the simulator leaves them as they were at a program's last change of allocation
    /// or phase for a policy that does not, so that a quantum costs the programs whose
    /// allocation changes, not every program. Of the catalog only PDPA reads them; a property
    /// test scrambles them and checks that every other policy decides the same.
    ///
    /// [`Program::cpu_time`]: crate::program::Program::cpu_time
    /// [`Program::speedup`]: crate::program::Program::speedup
    fn reads_usage(&self) -> bool {
        false
    }

    /// The quantum the policy is designed for, if it has one (paper 003's DSS uses 120 ms).
    fn preferred_quantum(&self) -> Option<Nanos> {
        None
    }

    /// The multiprogramming level the policy is designed to run under, if it has one: how many
    /// programs a long-term scheduler admits at once, the rest waiting in arrival order. The
    /// time-shared policies rotate through every admitted program, so a backlog that grows
    /// without bound makes every program wait a rotation as long as the backlog; their papers
    /// always ran them under a bounded degree (paper 000 §6.4: 5, paper 003: 1 to 8). The
    /// simulator applies it when neither the run nor the workload sets a level; the live manager
    /// runs every program that registers.
    fn preferred_mpl(&self) -> Option<u32> {
        None
    }

    /// Whether the policy's own state stood still at its last decision, so that its decisions
    /// repeat for as long as the view does too. A policy whose state moves by itself (PDPA's
    /// searches and its budget of probes) says no while it does: a schedule that repeats
    /// meanwhile (probe, fall back, probe) is no promise that it goes on repeating, and the
    /// simulator's fast-forward learns the schedule again once the policy has settled.
    fn settled(&self) -> bool {
        true
    }

    /// The rotation this policy's decisions go round from its last decision on, while the view
    /// does not change (a time-sharing policy's rows or windows), if it knows it and it is at
    /// most `max` quanta long. A stated rotation lets the simulator trust a schedule that
    /// repeated once instead of three times (the decisions alone could repeat for a while in a
    /// longer rotation), and keep trusting it when a program is admitted that the rotation
    /// leaves out (its fingerprint stays the same). `None`: unknown or longer.
    fn rotation(&self, _view: &View, _max: u32) -> Option<Rotation> {
        None
    }

    /// The simulator moved time `by` nanoseconds ahead, over whole periods of a schedule that
    /// repeats, without calling [`Policy::decide`]. A policy that keeps absolute times (VTQ-DSS's
    /// per-program expiries) shifts them by as much, so that its next decision is the one it
    /// would have made `by` earlier, at the same point of its rotation.
    fn skip(&mut self, _by: Nanos) {}
}

/// A time-sharing policy's rotation for an unchanged view: see [`SimHints::rotation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Quanta before the decisions repeat.
    pub quanta: u32,
    /// A hash of what the rotation goes round (its rows or windows: which programs, in which
    /// order): two rotations with the same fingerprint and length decide the same at each step.
    pub fingerprint: u64,
}

impl Rotation {
    /// An empty rotation of `quanta` quanta, to fold its contents into with [`Rotation::mix`].
    pub fn new(quanta: u32) -> Self {
        Rotation { quanta, fingerprint: 0x9e37_79b9_7f4a_7c15 }
    }

    /// Folds `x` (a program id, a separator between rows) into the fingerprint, order
    /// sensitively.
    pub fn mix(&mut self, x: u64) {
        self.fingerprint = (self.fingerprint.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

/// Splits `cpus` among programs in proportion to `weights`, largest remainder first, ties to the
/// earlier program; each share is capped at `caps[i]`, and what a cap frees is split again among
/// the others. The building block of the proportional policies (DSS, weighted equipartition).
pub fn proportional_shares(cpus: u32, weights: &[f64], caps: &[u32], out: &mut Vec<u32>) {
    out.clear();
    out.resize(weights.len(), 0);
    let mut left = cpus as u64;
    let mut open: Vec<usize> = (0..weights.len()).filter(|&i| caps[i] > 0 && weights[i] > 0.0).collect();
    while left > 0 && !open.is_empty() {
        let total: f64 = open.iter().map(|&i| weights[i]).sum();
        let mut fractions: Vec<(f64, usize)> = Vec::with_capacity(open.len());
        let mut given = 0u64;
        for &i in &open {
            let room = caps[i] - out[i];
            let exact = left as f64 * weights[i] / total;
            let whole = (exact.floor() as u64).min(room as u64) as u32;
            out[i] += whole;
            given += whole as u64;
            if whole < room && exact > whole as f64 {
                fractions.push((exact - whole as f64, i));
            }
        }
        left -= given;
        fractions.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for &(_, i) in &fractions {
            if left == 0 {
                break;
            }
            if out[i] < caps[i] {
                out[i] += 1;
                left -= 1;
            }
        }
        if given == 0 && fractions.is_empty() {
            break;
        }
        open.retain(|&i| out[i] < caps[i]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_decision_gives_every_program_the_default_allocation() {
        let given = Allocation { count: 3, running: true, block: 4 };
        let mut d = Decision { allocations: vec![given; 2], wake_at: Some(1), mpl_advice: Some(2) };
        d.reset(5);
        assert_eq!(d, Decision { allocations: vec![Allocation::default(); 5], ..Decision::default() });
        d.reset(1);
        assert_eq!(d.allocations, vec![Allocation::default()]);
    }

    #[test]
    fn proportional_shares_follow_weights_and_caps() {
        let mut out = Vec::new();
        proportional_shares(10, &[1.0, 1.0], &[10, 10], &mut out);
        assert_eq!(out, vec![5, 5]);
        proportional_shares(10, &[1.0, 1.0, 1.0], &[10, 10, 10], &mut out);
        assert_eq!(out, vec![4, 3, 3]);
        proportional_shares(10, &[1.0, 1.0], &[2, 10], &mut out);
        assert_eq!(out, vec![2, 8]);
        proportional_shares(10, &[1.0, 1.0], &[2, 3], &mut out);
        assert_eq!(out, vec![2, 3]);
        proportional_shares(3, &[8.0, 1.0, 1.0], &[8, 1, 1], &mut out);
        assert_eq!(out.iter().sum::<u32>(), 3);
        assert!(out[0] >= 1);
        proportional_shares(4, &[0.0, 1.0], &[4, 4], &mut out);
        assert_eq!(out, vec![0, 4]);
    }
}
