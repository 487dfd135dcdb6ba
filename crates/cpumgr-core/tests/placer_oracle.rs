//! The placer against an oracle.
//!
//! The oracle ([`oracle`]) is a reference placer written from the rules the placer documents (the
//! module docs of `cpumgr_core::placer` and [`Placer::place`]'s), as naively as they read: a
//! plain free flag per CPU position, each domain's free CPUs counted when needed, every level from
//! core to machine searched for best fit, programs kept and then grown in the documented order.
//! It is a specification, kept short enough to check by eye; the placer is the fast version
//! (kept counters, only the levels that split the level above searched, whole words at a time,
//! the work of [`Placer::place_changed`] following the changed programs), and these properties
//! check that the speed changed nothing:
//!
//! - [`Placer::place`] gives the oracle's sets, placement after placement with one placer (scratch
//!   kept between them), from arbitrary previous sets (overlapping, with CPUs the machine lacks
//!   or does not manage), decisions that may hand out more CPUs than there are, stopped
//!   programs and blocks;
//! - [`Placer::release`] and [`Placer::place_changed`], used as the simulator uses them (programs
//!   stop, leave, resume on their old CPUs, newcomers arrive, only the changed ones are placed),
//!   give every program the set the oracle gives from the same inputs;
//!
//! on random machines: uneven trees (packages of different numbers of nodes, caches and cores,
//! cores of different SMT widths), levels a source does not describe (implicit domains, up to a
//! flat machine), caches that straddle NUMA nodes, arbitrary ids nested by intersection, CPU ids
//! in and out of position order and with gaps, machines wider than a 64-CPU word, and partly
//! managed CPU sets (the live manager's case).

use std::cmp::Reverse;

use proptest::collection::vec;
use proptest::prelude::*;

use cpumgr_core::topology::{CpuInfo, Domain};
use cpumgr_core::{Allocation, CpuSet, Decision, Level, Placer, Program, Topology};

/// A CPU's domains, nearest first.
const NEAREST_FIRST: [Level; 5] = [Level::Core, Level::L3, Level::Numa, Level::Package, Level::Machine];

/// The CPUs program `i` gets: its count if it runs, none if it is stopped.
fn grant(d: &Decision, i: usize) -> usize {
    d.allocations[i].granted() as usize
}

/// The reference placer: the sets [`Placer::place`] documents for `programs` (whose previous sets
/// are their `cpus`) on the `managed` CPUs of `t`. Works on CPU positions, as the rules do.
fn oracle(t: &Topology, managed: &CpuSet, programs: &[Program], d: &Decision) -> Vec<CpuSet> {
    let n = t.num_cpus();
    let mut free: Vec<bool> = (0..n as u32).map(|p| managed.contains(t.cpu_at(p))).collect();
    // Per program, the positions it holds, in the order it took them.
    let mut got: Vec<Vec<usize>> = vec![Vec::new(); programs.len()];

    // Keep, program by program: its previous CPUs that are still free, lowest position first, as
    // many as it gets.
    for (i, prog) in programs.iter().enumerate() {
        let mut previous: Vec<usize> = prog.cpus.iter().filter_map(|cpu| t.position(cpu)).map(|p| p as usize).collect();
        previous.sort_unstable();
        for p in previous {
            if got[i].len() < grant(d, i) && free[p] {
                free[p] = false;
                got[i].push(p);
            }
        }
    }

    // Grow: the programs that keep CPUs, then those that keep none; each group by the CPUs still
    // needed, most first; then in program order.
    let mut order: Vec<usize> = (0..programs.len()).filter(|&i| got[i].len() < grant(d, i)).collect();
    order.sort_by_key(|&i| (got[i].is_empty(), Reverse(grant(d, i) - got[i].len()), i));
    for i in order {
        // Whole free blocks first, the block at positions `k·block..(k+1)·block` for the lowest k,
        // while a whole block is still needed.
        let block = d.allocations[i].block.max(1) as usize;
        if block > 1 {
            for start in (0..n / block).map(|k| k * block) {
                if grant(d, i) - got[i].len() >= block && free[start..start + block].iter().all(|&f| f) {
                    free[start..start + block].fill(false);
                    got[i].extend(start..start + block);
                }
            }
        }
        let need = grant(d, i) - got[i].len();
        if need == 0 {
            continue;
        }
        // Then free CPUs nearest its first CPU (the lowest kept, else its first block), or, with
        // none, nearest the CPU best fit finds: its core's, its L3's, ..., the machine's, each
        // domain's lowest first.
        let Some(anchor) = got[i].first().copied().or_else(|| best_fit(t, &free, need)) else { continue };
        for level in NEAREST_FIRST {
            let dom = t.level(level).find(|d| (d.first..d.end).contains(&(anchor as u32))).unwrap();
            let room = grant(d, i) - got[i].len();
            let near: Vec<usize> = (dom.first as usize..dom.end as usize).filter(|&p| free[p]).take(room).collect();
            for &p in &near {
                free[p] = false;
            }
            got[i].extend(near);
        }
    }
    got.iter().map(|ps| ps.iter().map(|&p| t.cpu_at(p as u32)).collect()).collect()
}

/// Best fit: of the domains with at least `need` free CPUs, one of the deepest level from core up
/// to the machine, then with the fewest free CPUs, then the lowest position; its first free CPU.
/// If no domain has room, the machine's first free CPU.
fn best_fit(t: &Topology, free: &[bool], need: usize) -> Option<usize> {
    let free_in = |d: &Domain| free[d.first as usize..d.end as usize].iter().filter(|&&f| f).count();
    let room = NEAREST_FIRST
        .iter()
        .find_map(|&level| t.level(level).filter(|d| free_in(d) >= need).min_by_key(|d| (free_in(d), d.first)));
    let (first, end) = room.map_or((0, free.len()), |d| (d.first as usize, d.end as usize));
    (first..end).find(|&p| free[p])
}

/// A small deterministic generator, for what a seed decides (shuffles, subsets, scrambled ids).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// A machine's CPUs. `shape` is packages of NUMA nodes of L3 domains of cores, each core given by
/// its SMT width: an uneven tree. `described` says which of package, NUMA, L3 and core the source
/// describes (the others become implicit domains). `ids` picks the domain ids: nested (cores
/// numbered per package, as Linux does), one L3 per package (straddling its NUMA nodes), or
/// scrambled (small random ids per CPU, nested by intersection). `numbering` picks the CPU ids:
/// in position order, SMT siblings apart (as Linux numbers them), shuffled, or increasing with
/// gaps.
fn build_machine(
    shape: &[Vec<Vec<Vec<u32>>>],
    described: [bool; 4],
    ids: u8,
    numbering: u8,
    seed: u64,
) -> Vec<CpuInfo> {
    let mut rng = Rng(seed);
    // Per CPU: (package, NUMA, L3, core, its thread index in the core).
    let mut cpus = Vec::new();
    let (mut numa, mut l3, mut core) = (0, 0, 0);
    for (package, nodes) in shape.iter().enumerate() {
        let first_core = core;
        for caches in nodes {
            for cores in caches {
                for &smt in cores {
                    for thread in 0..smt {
                        let core_id = if ids == 0 { core - first_core } else { core };
                        let l3_id = if ids == 1 { package as u32 } else { l3 };
                        cpus.push([package as u32, numa, l3_id, core_id, thread]);
                    }
                    core += 1;
                }
                l3 += 1;
            }
            numa += 1;
        }
    }
    if ids == 2 {
        for c in &mut cpus {
            *c = [rng.below(2) as u32, rng.below(3) as u32, rng.below(3) as u32, rng.below(5) as u32, c[4]];
        }
    }
    let n = cpus.len();
    let cpu_ids: Vec<u32> = match numbering {
        0 => (0..n as u32).collect(),
        1 => {
            // Every core's first thread, then every core's second, ...
            let mut by_thread: Vec<usize> = (0..n).collect();
            by_thread.sort_by_key(|&k| (cpus[k][4], k));
            let mut ids = vec![0; n];
            for (id, &k) in by_thread.iter().enumerate() {
                ids[k] = id as u32;
            }
            ids
        }
        2 => {
            let mut ids: Vec<u32> = (0..n as u32).collect();
            for k in (1..n).rev() {
                ids.swap(k, rng.below(k as u64 + 1) as usize);
            }
            ids
        }
        _ => (0..n)
            .scan(rng.below(70) as u32, |next, _| {
                let id = *next;
                *next += 1 + rng.below(3) as u32;
                Some(id)
            })
            .collect(),
    };
    let level = |k: usize, id: u32| described[k].then_some(id);
    cpus.iter()
        .zip(cpu_ids)
        .map(|(c, cpu)| CpuInfo {
            cpu,
            package: level(0, c[0]),
            numa: level(1, c[1]),
            l3: level(2, c[2]),
            core: level(3, c[3]),
        })
        .collect()
}

fn machine() -> impl Strategy<Value = Vec<CpuInfo>> {
    let small = vec(vec(vec(vec(1u32..=3, 1..=4), 1..=3), 1..=2), 1..=3);
    // Over 64 CPUs, often: positions in several words.
    let wide = vec(vec(vec(vec(1u32..=2, 6..=20), 1..=2), 1..=2), 1..=2);
    (prop_oneof![4 => small, 1 => wide], any::<[bool; 4]>(), 0u8..3, 0u8..4, any::<u64>())
        .prop_map(|(shape, described, ids, numbering, seed)| build_machine(&shape, described, ids, numbering, seed))
}

/// The CPUs of `cpus` a seed picks, each with chance `density` in 10.
fn subset(cpus: &CpuSet, seed: u64, density: u64) -> CpuSet {
    let mut rng = Rng(seed);
    cpus.iter().filter(|_| rng.below(10) < density).collect()
}

/// The managed CPUs: all of them, or a random part, sometimes with an id the machine lacks.
fn managed() -> impl Strategy<Value = Option<(u64, u64, bool)>> {
    proptest::option::weighted(0.5, (any::<u64>(), 3u64..=9, prop::bool::weighted(0.2)))
}

fn managed_set(t: &Topology, raw: Option<(u64, u64, bool)>) -> CpuSet {
    let Some((seed, density, stray)) = raw else { return t.cpus().clone() };
    let mut set = subset(t.cpus(), seed, density);
    if stray {
        set.insert(5000);
    }
    set
}

/// One program's allocation: (whether a small count, raw count, running, block).
type RawAllocation = (bool, u32, bool, u32);

fn allocation() -> impl Strategy<Value = RawAllocation> {
    (prop::bool::weighted(0.8), any::<u32>(), prop::bool::weighted(0.8), prop_oneof![5 => Just(1u32), 1 => 2u32..=8])
}

/// Its count on a machine of `n` CPUs: mostly up to a quarter of it, sometimes up to all of it
/// and one more.
fn count(raw: RawAllocation, n: usize) -> u32 {
    let (small, c, ..) = raw;
    c % if small { n as u32 / 4 + 2 } else { n as u32 + 2 }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// Full placements, one after another on one placer, each program's previous set the one it
    /// got last (at first, an arbitrary set: overlapping others', with CPUs that are unmanaged or
    /// that the machine lacks).
    #[test]
    fn place_gives_the_oracles_sets(
        infos in machine(),
        managed in managed(),
        previous in vec((any::<u64>(), 0u64..=5, prop::bool::weighted(0.2)), 0..=7),
        steps in vec(vec(allocation(), 7), 1..=4),
    ) {
        let t = Topology::from_cpus(&infos).unwrap();
        let managed = managed_set(&t, managed);
        let mut progs: Vec<Program> = previous
            .iter()
            .enumerate()
            .map(|(k, &(seed, density, stray))| {
                let mut p = Program::new(k as u64 + 1, "p", 8);
                p.cpus = subset(t.cpus(), seed, density);
                if stray {
                    p.cpus.insert(4999);
                }
                p
            })
            .collect();
        let mut placer = Placer::new();
        let mut sets = Vec::new();
        for allocs in &steps {
            let mut d = Decision::default();
            d.reset(progs.len());
            for (a, &raw) in d.allocations.iter_mut().zip(allocs) {
                *a = Allocation { count: count(raw, t.num_cpus()), running: raw.2, block: raw.3 };
            }
            placer.place(&t, &managed, &progs, &d, &mut sets);
            let expected = oracle(&t, &managed, &progs, &d);
            prop_assert_eq!(&sets, &expected, "previous {:?}, allocations {:?}", progs.iter().map(|p| &p.cpus).collect::<Vec<_>>(), &d.allocations);
            for (p, s) in progs.iter_mut().zip(&sets) {
                if !s.is_empty() {
                    p.cpus = s.clone();
                }
            }
        }
    }

    /// Placements of the changed programs only, as the simulator makes them: quantum after
    /// quantum some programs leave, newcomers arrive, and the others keep their count (so they
    /// keep their CPUs), change it, stop (keeping their set as where they will resume) or resume.
    /// Decisions stay within the managed CPUs (the contract). Every program's set, placed or
    /// kept, is the oracle's for the whole decision.
    #[test]
    fn place_changed_gives_the_oracles_sets(
        infos in machine(),
        managed in managed(),
        first in 1usize..=6,
        steps in vec((vec(prop::bool::weighted(0.1), 8), 0usize..=2, vec((prop::bool::weighted(0.5), allocation()), 8), any::<bool>()), 1..=10),
    ) {
        const MOST: usize = 8;
        let t = Topology::from_cpus(&infos).unwrap();
        let managed = managed_set(&t, managed);
        let capacity = managed.iter().filter(|&cpu| t.position(cpu).is_some()).count();
        let mut placer = Placer::new();
        let mut placed = false;
        let (mut progs, mut held, mut next_id) = (Vec::<Program>::new(), Vec::<usize>::new(), 1);
        for (s, (leave, arrive, allocs, shortcut)) in steps.into_iter().enumerate() {
            for i in (0..progs.len()).rev() {
                if leave[i] {
                    if held[i] > 0 {
                        placer.release(&t, &progs[i].cpus);
                    }
                    progs.remove(i);
                    held.remove(i);
                }
            }
            for _ in 0..if s == 0 { first } else { arrive } {
                if progs.len() < MOST {
                    progs.push(Program::new(next_id, "p", 8));
                    held.push(0);
                    next_id += 1;
                }
            }
            let mut d = Decision::default();
            d.reset(progs.len());
            let mut left = capacity;
            for (i, &(same, raw)) in allocs.iter().enumerate().take(progs.len()) {
                let (c, running) = if same { (held[i] as u32, held[i] > 0) } else { (count(raw, t.num_cpus()), raw.2) };
                let c = if running { c.min(left as u32) } else { c };
                if running {
                    left -= c as usize;
                }
                d.allocations[i] = Allocation { count: c, running, block: raw.3 };
            }
            let counts: Vec<usize> = (0..progs.len()).map(|i| grant(&d, i)).collect();
            let expected = oracle(&t, &managed, &progs, &d);

            let mut changed: Vec<usize> = (0..progs.len()).filter(|&i| counts[i] != held[i]).collect();
            let asked = changed.clone();
            for &i in &changed {
                if held[i] > 0 {
                    placer.release(&t, &progs[i].cpus);
                }
            }
            let mut sets = vec![CpuSet::new(); progs.len()];
            // When programs only stop, the simulator places nothing (sometimes, here).
            if !(shortcut && changed.iter().all(|&i| counts[i] == 0)) {
                let only_changed = placer.place_changed(&t, &progs, &d, &mut changed, &mut sets);
                prop_assert_eq!(only_changed, placed, "place_changed works once the machine is placed");
                if !only_changed {
                    placer.place(&t, &managed, &progs, &d, &mut sets);
                    changed = (0..progs.len()).collect();
                    placed = true;
                }
                prop_assert!(asked.iter().all(|i| changed.contains(i)), "{:?} dropped from {:?}", changed, asked);
            }
            for i in 0..progs.len() {
                let now = if changed.contains(&i) {
                    sets[i].clone()
                } else if counts[i] > 0 {
                    progs[i].cpus.clone()
                } else {
                    CpuSet::new()
                };
                prop_assert_eq!(&now, &expected[i], "step {}, program {} (id {}) of {:?}, changed {:?}", s, i, progs[i].id.0, counts, changed);
                prop_assert_eq!(now.len(), counts[i], "a decision within the managed CPUs is served whole");
                if counts[i] > 0 {
                    progs[i].cpus = now;
                }
            }
            held = counts;
        }
    }
}
