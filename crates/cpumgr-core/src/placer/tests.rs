use super::*;
use crate::topology::CpuInfo;

#[test]
fn grow_keys_sort_as_the_grow_order_goes() {
    use std::cmp::Reverse;
    let parts =
        [(false, 3, 7), (true, u32::MAX, 0), (false, 3, 2), (true, 1, 1), (false, 0, usize::MAX), (false, 9, 5)];
    let mut keys: Vec<GrowKey> = parts.iter().map(|&(none, need, i)| GrowKey::new(none, need, i)).collect();
    keys.sort_unstable();
    let mut tuples: Vec<(bool, Reverse<u32>, usize)> =
        parts.iter().map(|&(none, need, i)| (none, Reverse(need), i)).collect();
    tuples.sort_unstable();
    let decoded: Vec<(bool, Reverse<u32>, usize)> =
        keys.iter().map(|k| (k.0 >> 127 == 1, Reverse(k.need()), k.index())).collect();
    assert_eq!(decoded, tuples);
}

/// 2 packages × 2 L3 × 2 cores × 2 SMT = 16 CPUs, ids numbered like Linux (siblings +8).
fn server() -> Topology {
    let infos: Vec<CpuInfo> = (0..16)
        .map(|cpu| {
            let core = cpu % 8;
            CpuInfo { cpu, package: Some(core / 4), numa: Some(core / 4), l3: Some(core / 2), core: Some(core) }
        })
        .collect();
    Topology::from_cpus(&infos).unwrap()
}

fn decision(counts: &[u32]) -> Decision {
    let mut d = Decision::default();
    d.reset(counts.len());
    for (i, &c) in counts.iter().enumerate() {
        d.give(i, c);
    }
    d
}

fn place(t: &Topology, progs: &[Program], counts: &[u32]) -> Vec<CpuSet> {
    let mut sets = Vec::new();
    let d = decision(counts);
    Placer::new().place(t, t.cpus(), progs, &d, &mut sets);
    validate(t.cpus(), &d, &sets).unwrap();
    sets
}

#[test]
fn newcomers_fill_the_smallest_domain_that_fits() {
    let t = server();
    let progs = vec![Program::new(1, "a", 4), Program::new(2, "b", 2), Program::new(3, "c", 2)];
    let sets = place(&t, &progs, &[4, 2, 2]);
    // Each L3 holds 2 cores × 2 SMT = CPUs {c, c+1, c+8, c+9}.
    assert_eq!(sets[0].to_string(), "0-1,8-9");
    assert_eq!(sets[1].to_string(), "2,10", "a pair fits one core");
    assert_eq!(sets[2].to_string(), "3,11");
}

#[test]
fn programs_keep_their_cpus_and_grow_nearby() {
    let t = server();
    let mut progs = vec![Program::new(1, "a", 4), Program::new(2, "b", 4)];
    progs[0].cpus = CpuSet::parse("4").unwrap();
    progs[1].cpus = CpuSet::parse("0,8").unwrap();
    let sets = place(&t, &progs, &[3, 1]);
    assert!(sets[0].contains(4));
    assert!(sets[0].contains(12), "the SMT sibling first: {}", sets[0]);
    assert!(sets[0].is_subset(&CpuSet::parse("4-5,12-13").unwrap()), "same L3: {}", sets[0]);
    assert_eq!(sets[1].to_string(), "0", "a shrinking program keeps part of its set");
}

#[test]
fn stopped_programs_get_nothing_and_blocks_are_aligned() {
    let t = Topology::flat(8);
    let progs = vec![Program::new(1, "a", 4), Program::new(2, "b", 4)];
    let mut d = decision(&[4, 4]);
    d.allocations[0].running = false;
    d.allocations[1].block = 4;
    let mut sets = Vec::new();
    let mut progs2 = progs.clone();
    progs2[1].cpus = CpuSet::parse("2").unwrap();
    Placer::new().place(&t, t.cpus(), &progs2, &d, &mut sets);
    assert!(sets[0].is_empty());
    assert_eq!(sets[1].len(), 4);
    validate(t.cpus(), &d, &sets).unwrap();
}

#[test]
fn only_managed_cpus_are_handed_out() {
    // One package of two managed: the general free map (not every CPU managed).
    let t = server();
    let managed = CpuSet::parse("0-3,8-11").unwrap();
    let progs = vec![Program::new(1, "a", 4), Program::new(2, "b", 2)];
    let d = decision(&[4, 2]);
    let mut sets = Vec::new();
    Placer::new().place(&t, &managed, &progs, &d, &mut sets);
    validate(&managed, &d, &sets).unwrap();
    assert_eq!(sets[0].to_string(), "0-1,8-9", "a whole L3 of the managed package");
    assert_eq!(sets[1].to_string(), "2,10");
    assert!(validate(&CpuSet::parse("0-1,8-9").unwrap(), &decision(&[4]), &sets[..1]).is_ok());
    assert!(matches!(
        validate(&CpuSet::parse("0-1,8,12").unwrap(), &decision(&[4]), &sets[..1]),
        Err(PlacementError::Unmanaged { cpu: 9, .. })
    ));
}

#[test]
fn placing_only_the_changed_programs_gives_what_a_full_placement_gives() {
    // Quantum after quantum on the 16-CPU server, counts change for some programs; each
    // program's previous set is what it got last. The kept placer places only the changed
    // ones (after releasing what they held), and the later ones a changed one takes its old
    // CPUs back from.
    let t = server();
    let mut progs: Vec<Program> = (1..=5).map(|id| Program::new(id, "p", 8)).collect();
    // The last two steps: p1 stops, p2 grows onto its CPUs, p1 resumes and wants them back.
    let steps: [[u32; 5]; 8] = [
        [4, 2, 2, 0, 0],
        [4, 2, 2, 3, 1],
        [4, 1, 2, 3, 4],
        [0, 1, 2, 3, 4],
        [6, 1, 2, 3, 4],
        [6, 4, 2, 0, 4],
        [0, 10, 2, 0, 4],
        [4, 10, 2, 0, 0],
    ];
    let mut kept = Placer::new();
    let mut held = [0u32; 5];
    let (mut partial, mut fallback, mut displaced) = (0, 0, 0);
    for counts in steps {
        let d = decision(&counts);
        let mut full = Vec::new();
        Placer::new().place(&t, t.cpus(), &progs, &d, &mut full);
        validate(t.cpus(), &d, &full).unwrap();
        let changed: Vec<usize> = (0..5).filter(|&i| counts[i] != held[i]).collect();
        let asked = changed.len();
        for &i in &changed {
            if held[i] > 0 {
                kept.release(&t, &progs[i].cpus);
            }
        }
        let mut sets = vec![CpuSet::new(); 5];
        let mut changed = changed;
        if kept.place_changed(&t, &progs, &d, &mut changed, &mut sets) {
            partial += 1;
            displaced += changed.len() - asked;
            for i in 0..5 {
                let expect = if changed.contains(&i) {
                    &sets[i]
                } else if counts[i] > 0 {
                    &progs[i].cpus
                } else {
                    &sets[i]
                };
                assert_eq!(expect, &full[i], "program {i} at {counts:?}");
            }
        } else {
            fallback += 1;
            kept.place(&t, t.cpus(), &progs, &d, &mut sets);
            assert_eq!(sets, full);
        }
        for i in 0..5 {
            if counts[i] > 0 {
                progs[i].cpus = full[i].clone();
            }
            held[i] = counts[i];
        }
    }
    assert_eq!((partial, fallback), (7, 1), "only the first placement is a full one");
    assert!(displaced > 0, "a resumed program took its old CPUs back from a later one");
}

/// Asserts that every counted domain's free count is its free positions in the map.
fn assert_counts_follow_the_map(p: &Placer, t: &Topology, what: &str) {
    for &level in counted(t) {
        for &d in t.level_indices(level) {
            let dom = &t.domains()[d];
            let free = (dom.first..dom.end).filter(|&q| p.free.map.is_free(q)).count();
            assert_eq!(p.free.in_domain[d] as usize, free, "{what}: {level:?} domain {d}");
        }
    }
}

/// A machine of `pk` packages × `nu` NUMA nodes × `l3` L3 domains × `co` cores × `smt` CPUs,
/// numbered in position order: one shaped level gives a level that splits nothing.
fn shaped(pk: u32, nu: u32, l3: u32, co: u32, smt: u32) -> Topology {
    let infos: Vec<CpuInfo> = (0..pk * nu * l3 * co * smt)
        .map(|cpu| {
            let core = cpu / smt;
            let (l3, numa) = (core / co, core / co / l3);
            CpuInfo { cpu, package: Some(numa / nu), numa: Some(numa), l3: Some(l3), core: Some(core) }
        })
        .collect();
    Topology::from_cpus(&infos).unwrap()
}

/// Best fit as first written: every level from core to machine searched, each domain's free
/// CPUs counted from the map.
fn best_fit_every_level(p: &Placer, t: &Topology, need: usize) -> Option<u32> {
    let first_free = |first: u32, end: u32| (first..end).find(|&q| p.free.map.is_free(q));
    for level in [Level::Core, Level::L3, Level::Numa, Level::Package, Level::Machine] {
        let mut best: Option<(usize, &crate::topology::Domain)> = None;
        for d in t.level(level) {
            let free = (d.first..d.end).filter(|&q| p.free.map.is_free(q)).count();
            if free >= need && best.is_none_or(|(f, _)| free < f) {
                best = Some((free, d));
            }
        }
        if let Some((_, d)) = best {
            return first_free(d.first, d.end);
        }
    }
    first_free(0, t.num_cpus() as u32)
}

proptest::proptest! {
    /// Best fit reads kept counters, and only on the levels that split the level above and
    /// have a domain as wide as the request: it finds what the search of every level finds.
    #[test]
    fn best_fit_searches_only_the_levels_that_can_change_it(
        (pk, nu, l3, co, smt) in (1u32..=3, 1u32..=2, 1u32..=3, 1u32..=6, 1u32..=2),
        taken in proptest::collection::vec(proptest::prelude::any::<u64>(), 4),
        needs in proptest::collection::vec(1usize..=40, 1..8),
    ) {
        let t = shaped(pk, nu, l3, co, smt);
        let mut p = Placer::new();
        p.place(&t, t.cpus(), &[], &Decision::default(), &mut Vec::new());
        for (k, &mask) in taken.iter().enumerate().take(p.free.map.len()) {
            let mask = mask & p.free.map.word(k);
            if mask != 0 {
                p.free.set_bits(&t, k, mask, false);
            }
        }
        assert_counts_follow_the_map(&p, &t, "random positions taken");
        for need in needs {
            proptest::prop_assert_eq!(p.free.best_fit(&t, need), best_fit_every_level(&p, &t, need), "need {}", need);
        }
    }
}

#[test]
fn a_word_marked_at_once_keeps_every_count() {
    let t = server();
    let mut p = Placer::new();
    p.place(&t, t.cpus(), &[], &Decision::default(), &mut Vec::new());
    // Whole cores and L3s, parts of one core, scattered positions across both packages.
    for mask in [0xffffu64, 0x7f8, 0x20, 0x180, 0x8421, 0xa5a5, 0x1] {
        for free in [false, true] {
            p.free.set_bits(&t, 0, mask, free);
            assert_counts_follow_the_map(&p, &t, &format!("{mask:#x} free={free}"));
        }
    }
    // Part of the machine managed: its CPUs are marked free a word at a time.
    p.place(&t, &CpuSet::parse("1-3,8,12-15").unwrap(), &[], &Decision::default(), &mut Vec::new());
    assert_counts_follow_the_map(&p, &t, "managed 1-3,8,12-15");
    let mut taken = super::Taken::default();
    assert_eq!(taken.first(), None);
    for (k, bits, n) in [(1, 0b1100, 2), (0, 0b1001_0000, 2), (1, 1, 1)] {
        taken.push(k, bits, n);
    }
    assert_eq!((taken.first(), taken.len), (Some(66), 5), "the first taken, and how many");
}

#[test]
fn validate_catches_broken_placements() {
    let d = decision(&[1, 1]);
    let managed = CpuSet::parse("0-1").unwrap();
    let one = CpuSet::parse("0").unwrap();
    assert!(matches!(validate(&managed, &d, &[one.clone(), one.clone()]), Err(PlacementError::Shared { cpu: 0, .. })));
    assert!(matches!(
        validate(&managed, &d, &[one, CpuSet::parse("5").unwrap()]),
        Err(PlacementError::Unmanaged { cpu: 5, .. })
    ));
    assert!(matches!(validate(&managed, &decision(&[2, 1]), &[]), Err(PlacementError::Oversubscribed { .. })));
}

/// `place_within` on the whole machine, validated.
fn place_within(t: &Topology, progs: &[Program], within: &[Option<CpuSet>], counts: &[u32]) -> Vec<CpuSet> {
    let mut sets = Vec::new();
    let d = decision(counts);
    Placer::new().place_within(t, t.cpus(), progs, within, &d, &mut sets);
    validate(t.cpus(), &d, &sets).unwrap();
    sets
}

fn set(list: &str) -> Option<CpuSet> {
    Some(CpuSet::parse(list).unwrap())
}

#[test]
fn a_program_allowed_one_cpu_gets_it_and_the_other_moves() {
    let t = Topology::flat(2);
    let mut progs = vec![Program::new(1, "wide", 2), Program::new(2, "taskset", 1)];
    // Either order of arrival, either CPU allowed: the bounded one gets its CPU.
    for (allowed, other) in [("1", "0"), ("0", "1")] {
        let sets = place_within(&t, &progs, &[None, set(allowed)], &[1, 1]);
        assert_eq!((sets[0].to_string(), sets[1].to_string()), (other.into(), allowed.into()));
    }
    // The wide one ran on CPU 0, which the newcomer is allowed alone: the wide one moves.
    progs[0].cpus = CpuSet::parse("0").unwrap();
    let sets = place_within(&t, &progs, &[None, set("0")], &[1, 1]);
    assert_eq!((sets[0].to_string(), sets[1].to_string()), ("1".into(), "0".into()));
    // Without allowed sets, it keeps its CPU (rule 2).
    let sets = place_within(&t, &progs, &[None, None], &[1, 1]);
    assert_eq!(sets[0].to_string(), "0");
}

#[test]
fn an_allowed_set_keeps_best_fit_and_affinity_inside_it() {
    let t = server();
    // Allowed the second L3 of the first package ({2,3,10,11}): a pair fits one core there.
    let mut progs = vec![Program::new(1, "a", 2), Program::new(2, "b", 4)];
    let sets = place_within(&t, &progs, &[set("2-3,10-11"), None], &[2, 4]);
    assert_eq!(sets[0].to_string(), "2,10", "best fit inside the allowed CPUs");
    assert_eq!(sets[1].to_string(), "0-1,8-9", "the other best fits around it");
    // It keeps what it had inside its set, and drops what it had outside.
    progs[0].cpus = CpuSet::parse("3,5").unwrap();
    let sets = place_within(&t, &progs, &[set("2-3,10-11"), None], &[2, 4]);
    assert_eq!(sets[0].to_string(), "3,11", "kept 3, grew onto its SMT sibling");
}

#[test]
fn programs_allowed_the_same_cpu_still_get_disjoint_cpus() {
    let t = Topology::flat(3);
    let progs = vec![Program::new(1, "a", 1), Program::new(2, "b", 1), Program::new(3, "c", 1)];
    // Two allowed CPU 1 alone, one allowed 1-2: the fewest allowed first; what no allowed
    // CPU holds is taken last, from what is left.
    let sets = place_within(&t, &progs, &[set("1"), set("1-2"), set("1")], &[1, 1, 1]);
    assert_eq!(sets[0].to_string(), "1");
    assert_eq!(sets[1].to_string(), "2");
    assert_eq!(sets[2].to_string(), "0", "its allowed CPU is taken: the count holds elsewhere");
}

/// Random programs on a random machine: their previous sets, counts that fit the machine.
fn random_programs(
    n: u32,
    prev: &[u64],
    counts: &[u32],
    allowed: &[u64],
) -> (Vec<Program>, Vec<u32>, Vec<Option<CpuSet>>) {
    let k = prev.len().min(counts.len()).min(allowed.len());
    let mut left = n;
    let mut progs = Vec::new();
    let (mut given, mut within) = (Vec::new(), Vec::new());
    for i in 0..k {
        let mut p = Program::new(i as u64 + 1, "p", 1);
        p.cpus = (0..n.min(64)).filter(|c| prev[i] >> c & 1 == 1).collect();
        progs.push(p);
        let c = counts[i].min(left);
        left -= c;
        given.push(c);
        let set: CpuSet = (0..n.min(64)).filter(|c| allowed[i] >> c & 1 == 1).collect();
        within.push((allowed[i] & 1 << 63 == 0 && !set.is_empty()).then_some(set));
    }
    (progs, given, within)
}

proptest::proptest! {
    /// With no allowed set, `place_within` is `place`, CPU for CPU.
    #[test]
    fn place_within_without_bounds_is_place(
        (pk, nu, l3, co, smt) in (1u32..=2, 1u32..=2, 1u32..=2, 1u32..=4, 1u32..=2),
        prev in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..6),
        counts in proptest::collection::vec(0u32..=8, 6),
    ) {
        let t = shaped(pk, nu, l3, co, smt);
        let (progs, counts, _) = random_programs(t.num_cpus() as u32, &prev, &counts, &[0; 6]);
        let d = decision(&counts);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        Placer::new().place(&t, t.cpus(), &progs, &d, &mut a);
        Placer::new().place_within(&t, t.cpus(), &progs, &vec![None; progs.len()], &d, &mut b);
        proptest::prop_assert_eq!(a, b);
    }

    /// With allowed sets, every placement is valid (counts hold, no CPU twice), and where the
    /// allowed sets are disjoint and each holds its program's count, every program is placed
    /// inside its own.
    #[test]
    fn allowed_sets_bound_placements_where_they_can(
        (pk, nu, l3, co, smt) in (1u32..=2, 1u32..=2, 1u32..=2, 1u32..=4, 1u32..=2),
        prev in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..6),
        counts in proptest::collection::vec(0u32..=8, 6),
        allowed in proptest::collection::vec(proptest::prelude::any::<u64>(), 6),
        disjoint in proptest::prelude::any::<bool>(),
    ) {
        let t = shaped(pk, nu, l3, co, smt);
        let n = t.num_cpus() as u32;
        let (progs, mut counts, mut within) = random_programs(n, &prev, &counts, &allowed);
        if disjoint {
            // Each bounded program allowed CPUs no earlier one is, and given at most those.
            let mut seen = CpuSet::new();
            for (i, w) in within.iter_mut().enumerate() {
                if let Some(set) = w {
                    *set = set.difference(&seen);
                    seen.union_with(set);
                    if set.is_empty() {
                        *w = None;
                    } else {
                        counts[i] = counts[i].min(set.len() as u32);
                    }
                }
            }
        }
        let sets = place_within(&t, &progs, &within, &counts);
        if disjoint {
            for (i, w) in within.iter().enumerate() {
                if let Some(allowed) = w {
                    proptest::prop_assert!(sets[i].is_subset(allowed), "program {} got {} outside {}", i, sets[i], allowed);
                }
            }
        }
    }
}
