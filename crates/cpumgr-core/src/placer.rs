//! The placer: turns a [`Decision`]'s CPU counts into concrete CPU sets on the topology.
//!
//! Rules, in order of priority:
//! 1. No CPU goes to two programs in the same quantum, and only managed CPUs are handed out.
//! 2. A program keeps the CPUs it ran on (affinity: warm caches, no migration): as many of its
//!    previous CPUs as it still gets and are free, lowest positions first; programs keep in
//!    program order, so of two previous sets that share a CPU the earlier program's keeps it.
//! 3. A program that grows takes free CPUs as near as possible to its first CPU (the lowest
//!    position it keeps): same core, then same L3 domain, same NUMA node, same package, then
//!    anywhere; in each, lowest positions first.
//! 4. A program with no CPUs yet goes to the smallest domain that has room for all of it (best
//!    fit), so programs do not straddle caches or nodes when they need not: of the domains with
//!    at least as many free CPUs as it needs, those of the deepest level from core up to the
//!    machine, of them the one with the fewest free CPUs, then the lowest. It grows as in rule 3
//!    from that domain's first free CPU (so within it); when no domain has room (it needs more
//!    CPUs than are free), from the machine's first free CPU.
//! 5. Programs placed in blocks (processor clustering) get whole blocks first: free runs of
//!    `block` positions that start at a multiple of `block`, the lowest anywhere on the machine
//!    first, while they still need a whole block (aligned with the topology where the block size
//!    divides the sizes of its domains). The rest grows as in rule 3 from their first CPU (the
//!    lowest they keep, else their first block), with no best fit.
//! 6. A program with an allowed set ([`Placer::place_within`]: the CPUs a batch system bound it
//!    to) gets CPUs only inside it, as long as it holds enough free CPUs: it keeps and grows by
//!    rules 2 to 5 on a free map that shows only its allowed CPUs. These programs are placed
//!    before every other one, the fewest allowed CPUs first (then in program order), so that a
//!    program allowed anything takes what they leave; what a program's allowed CPUs cannot hold
//!    (another program allowed the same CPUs has them) it takes last, anywhere, so that every
//!    count holds and no CPU is shared.
//!
//! Every program keeps (rule 2) before any grows; then they grow one at a time: those that keep
//! CPUs first, then those that keep none; in each group the one that still needs the most CPUs
//! first, then in program order.
//!
//! Everything works on CPU *positions* (see [`crate::topology`]), where every domain is a
//! contiguous range, so "free CPUs in my L3" is a scan of one range of a bitset.

use crate::cpuset::{span_mask, CpuSet};
use crate::free_map::FreeMap;
use crate::policy::Decision;
use crate::program::Program;
use crate::topology::{Level, Topology};

/// Places decisions on one topology. Keeps scratch buffers between quanta so a placement
/// allocates little; the result depends only on the inputs.
///
/// The free map a placement leaves (the managed CPUs no program was given) is kept, so that a
/// caller that knows which programs changed since can place only those
/// ([`Placer::place_changed`], with [`Placer::release`] for CPUs given up in between): the work
/// then follows the changed programs, not the machine or every program.
#[derive(Debug, Default)]
pub struct Placer {
    /// The free CPUs.
    free: FreeCpus,
    /// Per program, the positions it keeps or takes (scratch, cleared per placement).
    kept: Vec<Taken>,
    /// Per position, who holds it: who holds a CPU that a changed program wants back, as the
    /// holder's index (the low 32 bits) and the number of the recording that wrote it (the high
    /// 32, [`Placer::recording`]). Recorded by [`Placer::record_owners`] only when a placement of
    /// the changed programs needs it (a stopped program resuming where another runs now), for
    /// the positions they want back, from the sets of the programs that keep running, and read
    /// right after; an entry of an earlier recording is stale. Keeping it up to date instead
    /// cost a store per CPU placed.
    owner: Vec<u64>,
    /// The number of the last recording of [`Placer::owner`].
    recording: u32,
    /// Scratch: a program's previous positions as a bitset ([`Topology::position_words`]), the
    /// grow order ([`GrowKey`]s), the programs a placement of the changed ones displaces.
    scratch: Vec<u64>,
    order: Vec<GrowKey>,
    displaced: Vec<usize>,
    /// Scratch: the positions whose holders [`Placer::record_owners`] records, a bitset.
    wanted: Vec<u64>,
    /// Scratch: the free positions [`Placer::hide_outside`] hid, per word.
    hidden: Vec<u64>,
}

/// The CPUs no program holds: the state a placement works on, apart from the placer's scratch
/// space, so that its steps can borrow the two at once (taking a scratch vector out of the
/// placer and putting it back cost a few stores and a drop check per call).
#[derive(Debug, Default)]
struct FreeCpus {
    /// The free positions.
    map: FreeMap,
    /// Per domain, its free CPUs: best fit reads them for every domain of a level, once per
    /// program it grows, so they are kept up to date as CPUs are taken and freed (a counter per
    /// level, found with one lookup) rather than counted from `map` each time (4x slower on
    /// 1024 CPUs and 1024 programs). Only the domains of the [`counted`] levels are kept: best
    /// fit searches no other level (a level that splits nothing finds what the level above finds,
    /// a level of single CPUs the first free one, and the machine's search the fallback's CPU),
    /// so a flat machine keeps none:
    /// the entries of the other domains are filled by [`Placer::place`] and then left as they
    /// are, and nothing reads them.
    in_domain: Vec<u32>,
}

/// No [`Placer::owner`] entry: a recording's number and index are below `u32::MAX`.
const NOBODY: u64 = u64::MAX;

/// Positions taken, as (word index, bits) pairs in the order they were taken, and how many: a
/// placement takes CPUs a word at a time, and marks, records and writes them so (one OR per word
/// into a set whose CPU ids are positions, where a run of neighbours cost a range insertion).
#[derive(Debug, Default, Clone)]
struct Taken {
    words: Vec<(u32, u64)>,
    len: usize,
}

impl Taken {
    fn clear(&mut self) {
        self.words.clear();
        self.len = 0;
    }

    /// Adds the positions `bits` (not empty, `n` of them) of word `k`.
    fn push(&mut self, k: usize, bits: u64, n: usize) {
        self.words.push((k as u32, bits));
        self.len += n;
    }

    /// The first position taken (a word's positions are taken lowest first).
    fn first(&self) -> Option<u32> {
        self.words.first().map(|&(k, bits)| k * 64 + bits.trailing_zeros())
    }
}

/// A broken placement invariant, found by [`validate`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// Two programs hold the same CPU.
    #[error("CPU {cpu} is given to programs {first} and {second}")]
    Shared {
        /// The CPU.
        cpu: u32,
        /// Index of the first holder.
        first: usize,
        /// Index of the second holder.
        second: usize,
    },
    /// A program holds a CPU the scheduler does not manage.
    #[error("program {program} got CPU {cpu}, which is not managed")]
    Unmanaged {
        /// Index of the program.
        program: usize,
        /// The CPU.
        cpu: u32,
    },
    /// A set's size differs from the decided count.
    #[error("program {program} was given {got} CPUs for a count of {count}")]
    WrongSize {
        /// Index of the program.
        program: usize,
        /// Decided count.
        count: u32,
        /// Size of its set.
        got: usize,
    },
    /// The decision hands out more CPUs than are managed.
    #[error("the decision hands out {total} CPUs of {managed}")]
    Oversubscribed {
        /// CPUs handed out.
        total: u64,
        /// CPUs managed.
        managed: usize,
    },
}

impl Placer {
    /// A placer with empty scratch space.
    pub fn new() -> Self {
        Self::default()
    }

    /// Places `decision` for `programs` (parallel slices) on the `managed` CPUs of `topology`.
    /// Each program's previous set is its [`Program::cpus`]. A program that does not run, or gets
    /// a count of 0, gets an empty set. If the decision hands out more CPUs than are free, the
    /// programs that grow last (in the order of the module docs) get fewer (the decision is
    /// invalid; [`validate`] reports it).
    pub fn place(
        &mut self,
        topology: &Topology,
        managed: &CpuSet,
        programs: &[Program],
        decision: &Decision,
        sets: &mut Vec<CpuSet>,
    ) {
        self.start(topology, managed, programs.len(), sets);
        self.assign(topology, programs, decision, 0..programs.len(), sets);
    }

    /// [`Placer::place`] with each program's allowed CPUs: `within[i]`, when `Some`, is the only
    /// CPUs program `i` may be given (the CPUs its processes could use when it registered: a
    /// batch system's binding, `taskset`); `None` (or a slice shorter than `programs`) allows
    /// every managed CPU. The programs that have an allowed set are placed first (rule 6 of the
    /// module docs), so that where their sets leave room every program gets its count, each
    /// inside what it is allowed, and none shares a CPU. Without an allowed set this is
    /// [`Placer::place`], CPU for CPU.
    #[allow(clippy::too_many_arguments)]
    pub fn place_within(
        &mut self,
        topology: &Topology,
        managed: &CpuSet,
        programs: &[Program],
        within: &[Option<CpuSet>],
        decision: &Decision,
        sets: &mut Vec<CpuSet>,
    ) {
        let bound = |i: usize| within.get(i).and_then(Option::as_ref);
        let mut first: Vec<(usize, usize)> =
            (0..programs.len()).filter_map(|i| bound(i).map(|set| (set.len(), i))).collect();
        if first.is_empty() {
            return self.place(topology, managed, programs, decision, sets);
        }
        self.start(topology, managed, programs.len(), sets);
        // The fewest allowed CPUs first: a program allowed a few leaves the rest to those
        // allowed more.
        first.sort_unstable();
        for &(_, i) in &first {
            self.hide_outside(topology, bound(i).expect("bounded"));
            self.keep(topology, programs, decision, std::iter::once(i));
            self.unhide(topology);
        }
        for &(_, i) in &first {
            self.hide_outside(topology, bound(i).expect("bounded"));
            self.grow(topology, decision, std::iter::once(i));
            self.unhide(topology);
        }
        let rest = (0..programs.len()).filter(|&i| bound(i).is_none());
        self.keep(topology, programs, decision, rest.clone());
        self.grow(topology, decision, rest);
        // What a program's allowed CPUs could not hold (others allowed them too took them) it
        // takes from what is left, so that every count holds.
        self.grow(topology, decision, first.iter().map(|&(_, i)| i));
        self.write(topology, 0..programs.len(), sets);
    }

    /// Starts a full placement of `n` programs: the free map of `managed` ([`Placer::reset`]), a
    /// set and a kept entry per program. Every set is cleared and written later: those kept from
    /// the last placement keep their storage.
    fn start(&mut self, topology: &Topology, managed: &CpuSet, n: usize, sets: &mut Vec<CpuSet>) {
        self.reset(topology, managed);
        sets.resize(n, CpuSet::new());
        self.room_for(n);
    }

    /// Makes [`Placer::kept`] hold an entry for each of `n` programs.
    fn room_for(&mut self, n: usize) {
        if self.kept.len() < n {
            self.kept.resize_with(n, Taken::default);
        }
    }

    /// Frees every managed CPU and takes every other one: the free map a full placement starts
    /// from.
    fn reset(&mut self, topology: &Topology, managed: &CpuSet) {
        let n = topology.num_cpus();
        // Every CPU is managed (the usual case): every position is free, with no walk over the
        // CPUs.
        let all = managed == topology.cpus();
        self.free.map.reset(n, all);
        self.free.in_domain.clear();
        if all {
            self.free.in_domain.extend(topology.domains().iter().map(|d| d.end - d.first));
        } else {
            self.free.in_domain.resize(topology.domains().len(), 0);
            self.release(topology, managed);
        }
    }

    /// Marks the free CPUs outside `allowed` taken, so that what the placer keeps or grows next
    /// is inside it (best fit too: the domains' counts follow); remembers them for
    /// [`Placer::unhide`].
    fn hide_outside(&mut self, topology: &Topology, allowed: &CpuSet) {
        let inside = topology.position_words(allowed, &mut self.scratch);
        let free = &self.free.map;
        self.hidden.clear();
        self.hidden.extend((0..free.len()).map(|k| free.word(k) & !inside.get(k).copied().unwrap_or(0)));
        self.set_hidden(topology, false);
    }

    /// Frees again the CPUs [`Placer::hide_outside`] hid.
    fn unhide(&mut self, topology: &Topology) {
        self.set_hidden(topology, true);
    }

    /// Marks the hidden CPUs free or taken.
    fn set_hidden(&mut self, topology: &Topology, free: bool) {
        for (k, &w) in self.hidden.iter().enumerate() {
            if w != 0 {
                self.free.set_bits(topology, k, w, free);
            }
        }
    }

    /// Places only the programs `changed` (indices into `programs` and `decision`, increasing),
    /// writing their sets into `sets` (which must have an entry per program; the others are left
    /// as they are), around the CPUs every other program keeps. Programs that [`Placer::place`]
    /// would move are added to `changed` (see below), so that the caller applies every new set.
    ///
    /// Contract: this placer's last placement was of the same machine, and since then the caller
    /// has [`Placer::release`]d every CPU a program gave up (it stopped or left), so that the
    /// free map holds exactly the managed CPUs programs hold now; every program not in `changed`
    /// runs on exactly the CPUs it holds (its count is its set's size), and every program in
    /// `changed` that held CPUs had them released before this call. Then the sets are those
    /// [`Placer::place`] gives on the managed CPUs of the last full placement: an unchanged program keeps its whole set there too, and the
    /// changed ones keep and grow in the same order on the same free CPUs. One exception, handled
    /// here: a changed program that wants back CPUs which an unchanged one with a later index
    /// holds now (a program resuming on its old CPUs) takes them first in [`Placer::place`]'s
    /// keep step, which goes in program order; so the holder is released and placed with the
    /// changed ones (and added to `changed`), which gives the same sets.
    ///
    /// Returns false, placing nothing, when this placer has not placed this machine yet.
    pub fn place_changed(
        &mut self,
        topology: &Topology,
        programs: &[Program],
        decision: &Decision,
        changed: &mut Vec<usize>,
        sets: &mut [CpuSet],
    ) -> bool {
        if self.free.map.len() != topology.num_cpus().div_ceil(64) {
            // No placement of this machine yet: nothing is known to be kept.
            return false;
        }
        debug_assert!(changed.windows(2).all(|w| w[0] < w[1]), "changed programs are increasing and distinct");
        let mut displaced = std::mem::take(&mut self.displaced);
        displaced.clear();
        let mut scratch = std::mem::take(&mut self.scratch);
        // The previous CPUs of the changed programs that another program holds now (a program
        // resuming where another runs): their holders are recorded before they are looked up.
        let mut wanted = std::mem::take(&mut self.wanted);
        let mut words_wanted = 0;
        for &i in changed.iter() {
            if grant(decision, i) == 0 || programs[i].cpus.is_empty() {
                continue;
            }
            if wanted.len() != self.free.map.len() || words_wanted == 0 {
                wanted.clear();
                wanted.resize(self.free.map.len(), 0);
            }
            for (k, &w) in topology.position_words(&programs[i].cpus, &mut scratch).iter().enumerate() {
                let taken = w & !self.free.map.word(k);
                words_wanted += usize::from(wanted[k] == 0 && taken != 0);
                wanted[k] |= taken;
            }
        }
        if words_wanted > 0 {
            self.record_owners(topology, programs, decision, changed, &mut wanted, words_wanted);
            for &i in changed.iter() {
                if grant(decision, i) == 0 || programs[i].cpus.is_empty() {
                    continue;
                }
                // Each holder looked at once for a run of neighbours.
                let mut last = NOBODY;
                for (k, &w) in topology.position_words(&programs[i].cpus, &mut scratch).iter().enumerate() {
                    let mut taken = w & !self.free.map.word(k);
                    while taken != 0 {
                        let owner = self.owner[k * 64 + taken.trailing_zeros() as usize];
                        taken &= taken - 1;
                        if owner == last {
                            continue;
                        }
                        last = owner;
                        // Every taken position wanted has a holder recorded (checked in case
                        // the contract is broken: an entry of an earlier recording is stale).
                        let h = owner as u32 as usize;
                        if owner >> 32 == u64::from(self.recording) && h > i {
                            displaced.push(h);
                        }
                    }
                }
            }
        }
        self.wanted = wanted;
        self.scratch = scratch;
        if !displaced.is_empty() {
            displaced.sort_unstable();
            displaced.dedup();
            for &h in &displaced {
                self.release(topology, &programs[h].cpus);
            }
            changed.extend(displaced.iter().copied());
            changed.sort_unstable();
            changed.dedup();
        }
        self.displaced = displaced;
        self.room_for(programs.len());
        self.assign(topology, programs, decision, changed.iter().copied(), sets);
        true
    }

    /// How many CPUs the last placement gave program `i`, one it placed (every program for
    /// [`Placer::place`], the changed ones for [`Placer::place_changed`]): the size of its set,
    /// without counting the set's bits (a word at a time, without a `popcnt` instruction on the
    /// baseline x86-64 target, over every word up to its highest CPU).
    pub fn placed(&self, i: usize) -> usize {
        self.kept[i].len
    }

    /// Records in [`Placer::owner`], as a new recording, for every position of `wanted` (a
    /// bitset of positions that programs hold, with `words` words not empty), the index of the
    /// program that holds it: by [`Placer::place_changed`]'s contract, the programs not in
    /// `changed` (increasing) that are given CPUs hold exactly their sets, and the others hold
    /// none. The walk over the programs stops at the last holder (a long backlog waiting behind
    /// the programs that run is not walked); `wanted` is left empty once each has its holder.
    fn record_owners(
        &mut self,
        topology: &Topology,
        programs: &[Program],
        decision: &Decision,
        changed: &[usize],
        wanted: &mut [u64],
        mut words: usize,
    ) {
        assert!(programs.len() < u32::MAX as usize, "an index fits the low half of an owner entry");
        if self.recording == u32::MAX - 1 {
            // Numbers would repeat: every entry is made stale at once.
            self.owner.fill(0);
            self.recording = 0;
        }
        self.recording += 1;
        self.owner.resize(topology.num_cpus(), 0);
        let stamp = u64::from(self.recording) << 32;
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut next_changed = changed.iter().copied().peekable();
        for (h, p) in programs.iter().enumerate() {
            if next_changed.next_if_eq(&h).is_some() || grant(decision, h) == 0 {
                continue;
            }
            for (k, &w) in topology.position_words(&p.cpus, &mut scratch).iter().enumerate() {
                let mut bits = w & wanted[k];
                if bits == 0 {
                    continue;
                }
                wanted[k] &= !bits;
                words -= usize::from(wanted[k] == 0);
                while bits != 0 {
                    self.owner[k * 64 + bits.trailing_zeros() as usize] = stamp | h as u64;
                    bits &= bits - 1;
                }
            }
            if words == 0 {
                break;
            }
        }
        self.scratch = scratch;
    }

    /// Marks `cpus` free again: a program gave them up since the last placement (it stopped or
    /// left), for [`Placer::place_changed`]. They must be CPUs that placement gave out: freeing
    /// one twice would let two programs share it (checked in debug builds). [`Placer::place`]
    /// also frees the managed CPUs with it when only some of the machine's are managed. Always
    /// inlined: the simulator calls it once per job that ends (the compiler kept it out of line).
    #[inline(always)]
    pub fn release(&mut self, topology: &Topology, cpus: &CpuSet) {
        for (k, &w) in topology.position_words(cpus, &mut self.scratch).iter().enumerate() {
            if w != 0 {
                self.free.set_bits(topology, k, w, true);
            }
        }
    }

    /// Keeps and grows the programs `which` (increasing indices) on the free map, writing their
    /// sets ([`Placer::room_for`] the programs first).
    fn assign(
        &mut self,
        topology: &Topology,
        programs: &[Program],
        decision: &Decision,
        which: impl Iterator<Item = usize> + Clone,
        sets: &mut [CpuSet],
    ) {
        self.keep(topology, programs, decision, which.clone());
        self.grow(topology, decision, which.clone());
        self.write(topology, which, sets);
    }

    /// Keep: each program of `which` holds on to as many of its previous CPUs as it still gets
    /// and are free, lowest positions first so a shrinking program stays compact.
    #[inline(always)]
    fn keep(
        &mut self,
        topology: &Topology,
        programs: &[Program],
        decision: &Decision,
        which: impl Iterator<Item = usize>,
    ) {
        for i in which {
            let kept = &mut self.kept[i];
            kept.clear();
            let count = grant(decision, i) as usize;
            let prog = &programs[i];
            if count == 0 || prog.cpus.is_empty() {
                continue;
            }
            for (k, &w) in topology.position_words(&prog.cpus, &mut self.scratch).iter().enumerate() {
                if kept.len == count {
                    break;
                }
                self.free.take_word(topology, k, w & self.free.map.word(k), count - kept.len, kept);
            }
        }
    }

    /// Grow: the programs of `which` that still need CPUs take them, those that keep CPUs around
    /// them first, then newcomers, the largest first (best fit packs big requests before small
    /// ones fragment the machine).
    #[inline(always)]
    fn grow(&mut self, topology: &Topology, decision: &Decision, which: impl Iterator<Item = usize>) {
        self.order.clear();
        self.order.extend(which.filter_map(|i| {
            let (kept, grant) = (self.kept[i].len, grant(decision, i));
            // Kept CPUs are some of the granted ones: the rest fits a `u32` too.
            (kept < grant as usize).then(|| GrowKey::new(kept == 0, grant - kept as u32, i))
        }));
        // The keys are distinct (the index is their last part): an unstable sort gives the one
        // order.
        self.order.sort_unstable();
        for key in &self.order {
            let (mut need, i) = (key.need() as usize, key.index());
            let kept = &mut self.kept[i];
            let block = decision.allocations[i].block.max(1) as usize;
            if block > 1 {
                need -= self.free.take_blocks(topology, block, need, kept);
            }
            if need > 0 {
                // The anchor picks the nearest domain on each splitting level. A machine with no
                // splitting level (a flat one) has one domain to grow in, the machine's, which
                // holds every position: its best fit is not asked. No anchor means no free CPU.
                let levels = topology.splitting_levels();
                let anchor = if levels.is_empty() {
                    Some(0)
                } else {
                    kept.first().or_else(|| self.free.best_fit(topology, need))
                };
                if let Some(anchor) = anchor {
                    // Nearest first; a level that splits nothing repeats the range just emptied.
                    for &level in levels.iter().chain(&[Level::Machine]) {
                        let d = &topology.domains()[topology.domain_of(anchor, level)];
                        need -= self.free.take_range(topology, d.first, d.end, need, kept);
                        if need == 0 {
                            break;
                        }
                    }
                }
            }
        }
    }

    /// Writes the sets of the programs `which` from what they took, into the sets' own storage:
    /// a placement allocates nothing once the sets have grown to the machine.
    #[inline(always)]
    fn write(&mut self, topology: &Topology, which: impl Iterator<Item = usize>, sets: &mut [CpuSet]) {
        for i in which {
            let set = &mut sets[i];
            set.clear();
            for &(k, bits) in &self.kept[i].words {
                topology.insert_cpus_at(k as usize, bits, set);
            }
        }
    }
}

impl FreeCpus {
    /// Takes up to `need` free CPUs with positions in `first..end`, lowest first.
    fn take_range(&mut self, topology: &Topology, first: u32, end: u32, need: usize, into: &mut Taken) -> usize {
        let mut taken = 0;
        // The words with a free position only (a range of a word or two, a core or a block, is
        // walked as it is).
        let (mut k, last) = ((first / 64) as usize, end.div_ceil(64) as usize);
        while taken < need && k < last {
            if last - k > 2 {
                let Some(w) = self.map.next_nonempty(k, last) else { break };
                k = w;
            }
            let base = k as u32 * 64;
            let mask = span_mask(first.max(base) - base, end.min(base + 64) - base);
            taken += self.take_word(topology, k, self.map.word(k) & mask, need - taken, into);
            k += 1;
        }
        taken
    }

    /// Takes the lowest `limit` (or fewer) of `bits`, free positions of word `k`, a run of
    /// neighbours at a time: into `into` and out of the free map at once. Returns how many it
    /// took.
    fn take_word(&mut self, topology: &Topology, k: usize, mut bits: u64, limit: usize, into: &mut Taken) -> usize {
        let (mut taken, mut took) = (0, 0);
        while bits != 0 && taken < limit {
            let at = bits.trailing_zeros();
            let len = (bits >> at).trailing_ones().min((limit - taken) as u32);
            let run = span_mask(at, at + len);
            took |= run;
            bits &= !run;
            taken += len as usize;
        }
        if took != 0 {
            into.push(k, took, taken);
            self.set_bits(topology, k, took, false);
        }
        taken
    }

    /// Marks the positions of `mask` in word `k`, every one of them in the other state now, free
    /// or taken: the word at once, and each counted domain's count once per domain the positions
    /// meet (a core, an L3, ...), not once per CPU. A program's CPUs taken or freed cost a call
    /// per word, however scattered they are. Always inlined: it is a few instructions on a
    /// machine with no counted level, which a call doubled (the compiler left it out of line).
    #[inline(always)]
    fn set_bits(&mut self, topology: &Topology, k: usize, mask: u64, free: bool) {
        debug_assert_eq!(
            self.map.word(k) & mask,
            if free { 0 } else { mask },
            "positions {mask:#x} of word {k} not all held"
        );
        self.map.set(k, mask, free);
        // Kept apart: on a machine with no counted level (a flat one) marking is the word alone.
        let levels = counted(topology);
        if !levels.is_empty() {
            self.count_bits(topology, levels, k, mask, free);
        }
    }

    /// Counts the positions of `mask` in word `k` in or out of every domain of the counted
    /// `levels` (deepest first, not empty) they meet. Never inlined, so that
    /// [`FreeCpus::set_bits`] is small enough to be.
    #[inline(never)]
    fn count_bits(&mut self, topology: &Topology, levels: &[Level], k: usize, mask: u64, free: bool) {
        let deepest = levels[0];
        let base = k as u32 * 64;
        let path = topology.domains_of(base + mask.trailing_zeros());
        if topology.domains()[path[deepest.depth()] as usize].end > base + 63 - mask.leading_zeros() {
            // Within one domain of the deepest counted level, so within one of each level above
            // it: its path's.
            for level in levels {
                self.count(path[level.depth()] as usize, mask.count_ones(), free);
            }
            return;
        }
        for level in levels {
            let depth = level.depth();
            let mut left = mask;
            while left != 0 {
                let d = topology.domains_of(base + left.trailing_zeros())[depth] as usize;
                // The positions of the domain: from the lowest left (it starts at or below it)
                // to its end.
                let end = topology.domains()[d].end - base;
                let inside = if end >= 64 { left } else { left & span_mask(0, end) };
                self.count(d, inside.count_ones(), free);
                left &= !inside;
            }
        }
    }

    /// Adds `n` CPUs freed to domain `d`'s free count, or takes `n` taken from it.
    fn count(&mut self, d: usize, n: u32, free: bool) {
        if free {
            self.in_domain[d] += n;
        } else {
            self.in_domain[d] -= n;
        }
    }

    /// Takes whole free blocks of `block` positions aligned to multiples of `block`, up to `need`
    /// CPUs. Returns how many CPUs it took.
    fn take_blocks(&mut self, topology: &Topology, block: usize, need: usize, into: &mut Taken) -> usize {
        let n = topology.num_cpus();
        let mut taken = 0;
        let mut start = 0;
        while start + block <= n && need - taken >= block {
            if (start..start + block).all(|p| self.map.is_free(p as u32)) {
                taken += self.take_range(topology, start as u32, (start + block) as u32, block, into);
            }
            start += block;
        }
        taken
    }

    /// The first position of the smallest domain (deepest level, then fewest free CPUs, then
    /// lowest position) with at least `need` free CPUs; if none has room, the first free CPU
    /// (which is what a search of the machine level would give when it has room: the machine is
    /// one domain, so that search is not made). Always inlined: it runs once per newcomer placed
    /// (the compiler kept it out of line).
    #[inline(always)]
    fn best_fit(&self, topology: &Topology, need: usize) -> Option<u32> {
        for &level in topology.splitting_levels() {
            if (topology.widest(level) as usize) < need {
                // No domain of the level can have room (on a machine of 2-CPU cores, every core
                // for every wider request): its counters are not read.
                continue;
            }
            if topology.widest(level) == 1 {
                // Single CPUs (cores without SMT), not counted ([`counted`]): the first with room
                // is the first free CPU.
                return self.map.first_free(0, topology.num_cpus() as u32);
            }
            let mut best: Option<(u32, u32)> = None;
            for &d in topology.level_indices(level) {
                let free = self.in_domain[d];
                if free as usize >= need && best.is_none_or(|(f, _)| free < f) {
                    best = Some((free, d as u32));
                    if free as usize == need {
                        break;
                    }
                }
            }
            if let Some((_, d)) = best {
                let dom = &topology.domains()[d as usize];
                return self.map.first_free(dom.first, dom.end);
            }
        }
        self.map.first_free(0, topology.num_cpus() as u32)
    }
}

/// The CPUs program `i` gets ([`crate::Allocation::granted`]).
fn grant(decision: &Decision, i: usize) -> u32 {
    decision.allocations[i].granted()
}

/// A program's place in the grow order, as one integer that sorts as the order goes: those that
/// keep CPUs first (the top bit clear), then the one that still needs the most CPUs (the next 32
/// bits hold the complement of its need), then program order (the low 64 bits, its index).
/// Sorting the grow order compares these with one integer comparison each, without a branch per
/// field as a tuple of the three would take (the sort is on the simulator's hot path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct GrowKey(u128);

impl GrowKey {
    /// The key of program `index`, which keeps no CPU if `keeps_none`, still needing `need`.
    fn new(keeps_none: bool, need: u32, index: usize) -> Self {
        GrowKey(u128::from(keeps_none) << 127 | u128::from(u32::MAX - need) << 64 | index as u128)
    }

    /// The CPUs the program still needs.
    fn need(self) -> u32 {
        u32::MAX - (self.0 >> 64) as u32
    }

    /// The program's index.
    fn index(self) -> usize {
        self.0 as u64 as usize
    }
}

/// The levels whose domains' free CPUs the placer counts: the splitting levels
/// ([`Topology::splitting_levels`]) but one of single CPUs (a machine without SMT describes a
/// core per CPU), where best fit's answer is the first free CPU and a count per CPU would make
/// marking a word cost a step per CPU.
fn counted(topology: &Topology) -> &[Level] {
    match topology.splitting_levels() {
        [first, rest @ ..] if topology.widest(*first) == 1 => rest,
        all => all,
    }
}

/// Checks a placement: no CPU given twice, only managed CPUs, every running program's set as big
/// as its count, and the decision within the managed CPUs. Tests call it on every placement, and
/// debug builds of the schedulers call it every quantum.
pub fn validate(managed: &CpuSet, decision: &Decision, sets: &[CpuSet]) -> Result<(), PlacementError> {
    let total = decision.total();
    if total > managed.len() as u64 {
        return Err(PlacementError::Oversubscribed { total, managed: managed.len() });
    }
    // The CPUs given so far, one bit each (this runs every quantum: a bitset stays small on
    // large machines); the first holder of a CPU given twice is searched only then.
    let mut given = vec![0u64; managed.as_words().len()];
    for (i, set) in sets.iter().enumerate() {
        let count = decision.allocations[i].granted();
        if set.len() != count as usize {
            return Err(PlacementError::WrongSize { program: i, count, got: set.len() });
        }
        for cpu in set.iter() {
            if !managed.contains(cpu) {
                return Err(PlacementError::Unmanaged { program: i, cpu });
            }
            let (word, bit) = (cpu as usize / 64, 1u64 << (cpu % 64));
            if given[word] & bit != 0 {
                let first = sets.iter().position(|s| s.contains(cpu)).expect("a CPU given before has a holder");
                return Err(PlacementError::Shared { cpu, first, second: i });
            }
            given[word] |= bit;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
