//! CPU sets: a growable bitset of logical CPU ids with the taskset/Slurm list syntax (`0-3,8,10-11`).
//!
//! Every part of cpumgr speaks in CPU sets: the topology's domains, the placer's output, the slots'
//! published allocation and the affinity masks the enforcer applies. One type keeps them all
//! comparable and printable the way `taskset -c` and `/proc/PID/status` print them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The largest CPU id a CPU list may name. Linux's `NR_CPUS` tops out at 8192 on common
/// distributions; the simulator models bigger machines, so the bound is generous but finite to
/// refuse an absurd list (`0-4000000000`) before it allocates gigabytes.
pub const MAX_CPU_ID: u32 = (1 << 20) - 1;

/// A set of logical CPU ids (hwloc's PUs, the kernel's CPU numbers).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet {
    words: Vec<u64>,
}

/// The bits `lo..hi` of one word (`lo < hi <= 64`) as a mask.
pub(crate) fn span_mask(lo: u32, hi: u32) -> u64 {
    (u64::MAX >> (64 - (hi - lo))) << lo
}

/// The bits `first..end` of a bitset as (word index, mask) pairs, one per word they meet: what
/// marks a run of CPUs (or positions) a word at a time.
pub(crate) fn word_masks(first: u32, end: u32) -> impl Iterator<Item = (usize, u64)> {
    let mut p = first;
    std::iter::from_fn(move || {
        if p >= end {
            return None;
        }
        let w = p / 64;
        let (lo, hi) = (p % 64, (end - w * 64).min(64));
        p = w * 64 + hi;
        Some((w as usize, span_mask(lo, hi)))
    })
}

/// The CPUs of a [`CpuSet`] in increasing order ([`CpuSet::iter`]): a word's bits, lowest first,
/// then the next word's. The placer walks every placement's sets this way, so the step is a
/// count of trailing zeros and a clear, with no per-CPU bookkeeping of nested iterators.
#[derive(Debug, Clone)]
pub struct Cpus<'a> {
    /// The words not yet loaded.
    words: &'a [u64],
    /// The id of bit 0 of the word being walked, plus 64.
    base: u32,
    /// The bits of the word being walked not yet returned.
    bits: u64,
}

impl Iterator for Cpus<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        while self.bits == 0 {
            let (&w, rest) = self.words.split_first()?;
            self.words = rest;
            self.bits = w;
            self.base += 64;
        }
        let b = self.bits.trailing_zeros();
        self.bits &= self.bits - 1;
        Some(self.base - 64 + b)
    }
}

/// Why a CPU list could not be parsed; `column` is 1-based within the list text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad CPU list {text:?} at column {column}: {reason}")]
pub struct CpuListError {
    /// The list that was given.
    pub text: String,
    /// 1-based column of the offending item.
    pub column: usize,
    /// What is wrong there.
    pub reason: String,
}

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The set `{0, 1, ..., n-1}`.
    pub fn first_n(n: u32) -> Self {
        let mut s = Self::new();
        s.insert_range(0, n);
        s
    }

    /// The set with the given CPUs.
    pub fn from_cpus<I: IntoIterator<Item = u32>>(cpus: I) -> Self {
        let mut s = Self::new();
        s.extend(cpus);
        s
    }

    fn grow_to(&mut self, cpu: u32) {
        let w = (cpu / 64) as usize;
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
        }
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }

    /// Adds `cpu`; returns whether it was absent.
    pub fn insert(&mut self, cpu: u32) -> bool {
        self.grow_to(cpu);
        let (w, b) = ((cpu / 64) as usize, cpu % 64);
        let was = self.words[w] & (1 << b) != 0;
        self.words[w] |= 1 << b;
        !was
    }

    /// Adds the CPUs `bits` of word `k` (CPUs `64 k` to `64 k + 63`, as [`CpuSet::as_words`]
    /// lays them out): what the placer writes a placement with, a word at a time.
    pub fn insert_word(&mut self, k: usize, bits: u64) {
        if bits == 0 {
            return;
        }
        if k >= self.words.len() {
            self.words.resize(k + 1, 0);
        }
        self.words[k] |= bits;
    }

    /// Adds every CPU in `lo..hi`, a word at a time.
    pub fn insert_range(&mut self, lo: u32, hi: u32) {
        if lo >= hi {
            return;
        }
        self.grow_to(hi - 1);
        for (w, mask) in word_masks(lo, hi) {
            self.words[w] |= mask;
        }
    }

    /// Removes `cpu`; returns whether it was present.
    pub fn remove(&mut self, cpu: u32) -> bool {
        let (w, b) = ((cpu / 64) as usize, cpu % 64);
        match self.words.get_mut(w) {
            Some(word) if *word & (1 << b) != 0 => {
                *word &= !(1 << b);
                self.trim();
                true
            }
            _ => false,
        }
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: u32) -> bool {
        let (w, b) = ((cpu / 64) as usize, cpu % 64);
        self.words.get(w).is_some_and(|word| word & (1 << b) != 0)
    }

    /// Number of CPUs in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set has no CPU.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// Removes every CPU.
    pub fn clear(&mut self) {
        self.words.clear();
    }

    /// The lowest CPU id, if any.
    pub fn first(&self) -> Option<u32> {
        self.iter().next()
    }

    /// The highest CPU id, if any.
    pub fn last(&self) -> Option<u32> {
        let w = self.words.iter().rposition(|w| *w != 0)?;
        Some(w as u32 * 64 + 63 - self.words[w].leading_zeros())
    }

    /// The CPUs in increasing order.
    pub fn iter(&self) -> Cpus<'_> {
        Cpus { words: &self.words, base: 0, bits: 0 }
    }

    /// The CPUs in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let mut words: Vec<u64> = self.words.iter().zip(&other.words).map(|(a, b)| a & b).collect();
        while words.last() == Some(&0) {
            words.pop();
        }
        CpuSet { words }
    }

    /// The CPUs in either set.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        let mut s = self.clone();
        s.union_with(other);
        s
    }

    /// Adds every CPU of `other`.
    pub fn union_with(&mut self, other: &CpuSet) {
        if other.words.len() > self.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    /// The CPUs of `self` that are not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        let mut s = self.clone();
        for (a, b) in s.words.iter_mut().zip(&other.words) {
            *a &= !b;
        }
        s.trim();
        s
    }

    /// Whether the sets share no CPU.
    pub fn is_disjoint(&self, other: &CpuSet) -> bool {
        self.words.iter().zip(&other.words).all(|(a, b)| a & b == 0)
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.words.iter().enumerate().all(|(i, a)| a & !other.words.get(i).copied().unwrap_or(0) == 0)
    }

    /// The set as 64-bit words, CPU `i` at bit `i % 64` of word `i / 64` (the kernel's
    /// `cpu_set_t` layout on 64-bit Linux).
    pub fn as_words(&self) -> &[u64] {
        &self.words
    }

    /// The set from 64-bit words in the layout of [`CpuSet::as_words`].
    pub fn from_words(words: &[u64]) -> CpuSet {
        let mut s = CpuSet { words: words.to_vec() };
        s.trim();
        s
    }

    /// Parses a CPU list in the taskset/Slurm syntax: comma-separated ids and ranges `a-b`,
    /// optionally with a stride `a-b:s` (as `cpuset(7)` allows). Whitespace around items is
    /// ignored; the empty string is the empty set.
    pub fn parse(text: &str) -> Result<CpuSet, CpuListError> {
        let mut set = CpuSet::new();
        if text.trim().is_empty() {
            return Ok(set);
        }
        let mut column = 1;
        for item in text.split(',') {
            let err = |reason: String| CpuListError { text: text.to_string(), column, reason };
            let trimmed = item.trim();
            if trimmed.is_empty() {
                return Err(err("empty item".into()));
            }
            let (range, stride) = match trimmed.split_once(':') {
                Some((r, s)) => (r, parse_id(s).map_err(|e| err(format!("stride: {e}")))?),
                None => (trimmed, 1),
            };
            if stride == 0 {
                return Err(err("stride must be at least 1".into()));
            }
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (parse_id(a).map_err(&err)?, parse_id(b).map_err(&err)?),
                None => {
                    let v = parse_id(range).map_err(&err)?;
                    (v, v)
                }
            };
            if lo > hi {
                return Err(err(format!("range {lo}-{hi} runs backwards")));
            }
            let mut c = lo;
            while c <= hi {
                set.insert(c);
                c += stride;
            }
            column += item.len() + 1;
        }
        Ok(set)
    }
}

fn parse_id(s: &str) -> Result<u32, String> {
    let s = s.trim();
    let v: u64 = s.parse().map_err(|_| format!("{s:?} is not a CPU number"))?;
    if v > MAX_CPU_ID as u64 {
        return Err(format!("CPU {v} is above the largest supported id {MAX_CPU_ID}"));
    }
    Ok(v as u32)
}

impl fmt::Display for CpuSet {
    /// Prints the set in the list syntax, runs of consecutive CPUs folded into ranges
    /// (`0-3,8,10-11`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_list(f, self.iter())
    }
}

/// Writes CPUs given in increasing order in the list syntax, runs of consecutive CPUs folded
/// into ranges: what both [`CpuSet`] and [`CpuIds`] print.
fn write_list(f: &mut fmt::Formatter<'_>, cpus: impl Iterator<Item = u32>) -> fmt::Result {
    let mut first = true;
    let mut it = cpus.peekable();
    while let Some(lo) = it.next() {
        let mut hi = lo;
        while it.peek() == Some(&(hi + 1)) {
            hi = it.next().unwrap_or(hi);
        }
        if !first {
            f.write_str(",")?;
        }
        first = false;
        if hi == lo {
            write!(f, "{lo}")?;
        } else {
            write!(f, "{lo}-{hi}")?;
        }
    }
    Ok(())
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

impl FromStr for CpuSet {
    type Err = CpuListError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CpuSet::parse(s)
    }
}

impl Extend<u32> for CpuSet {
    /// Adds the CPUs, in any order. Neighbouring ids are gathered into one word before it is
    /// written: a set built in increasing order (the placer writes every placement so) costs a
    /// store per word instead of a read-modify-write of the same word per CPU.
    fn extend<I: IntoIterator<Item = u32>>(&mut self, cpus: I) {
        let mut word: Option<(usize, u64)> = None;
        for cpu in cpus {
            let (w, bit) = ((cpu / 64) as usize, 1u64 << (cpu % 64));
            match &mut word {
                Some((at, bits)) if *at == w => *bits |= bit,
                _ => {
                    if let Some((at, bits)) = word.replace((w, bit)) {
                        self.words[at] |= bits;
                    }
                    self.grow_to(cpu);
                }
            }
        }
        if let Some((at, bits)) = word {
            self.words[at] |= bits;
        }
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        CpuSet::from_cpus(iter)
    }
}

impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        CpuSet::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A set of CPUs kept as its ids in increasing order: memory in proportion to how many CPUs it
/// holds, whatever their ids, where a [`CpuSet`] holds a bit for every id below its largest. The
/// topology keeps each of its domains' CPUs this way: a machine has a domain per CPU on several
/// levels, so bitsets from CPU 0 made a topology's memory grow with the square of its CPUs (a
/// 100 000-CPU machine took 600 MiB and seconds to build). Sets that change every quantum (the
/// placer's, the slots', the enforcers') are [`CpuSet`]s, which [`CpuIds::to_cpuset`] gives.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuIds {
    ids: Box<[u32]>,
}

impl CpuIds {
    /// Number of CPUs in the set.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the set has no CPU.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Whether `cpu` is in the set (a binary search).
    pub fn contains(&self, cpu: u32) -> bool {
        self.ids.binary_search(&cpu).is_ok()
    }

    /// The CPUs in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.ids.iter().copied()
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuIds) -> bool {
        self.iter().all(|c| other.contains(c))
    }

    /// The CPUs of `self` that are also in `other`.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        self.iter().filter(|&c| other.contains(c)).collect()
    }

    /// The same set as a [`CpuSet`] (a bitset up to its largest id).
    pub fn to_cpuset(&self) -> CpuSet {
        self.iter().collect()
    }
}

impl FromIterator<u32> for CpuIds {
    /// The set of the given CPUs, in any order, repeats dropped.
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        let mut ids: Vec<u32> = iter.into_iter().collect();
        ids.sort_unstable();
        ids.dedup();
        CpuIds { ids: ids.into_boxed_slice() }
    }
}

impl fmt::Display for CpuIds {
    /// Prints the set in the list syntax, as [`CpuSet`] does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_list(f, self.iter())
    }
}

impl fmt::Debug for CpuIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuIds({self})")
    }
}

impl Serialize for CpuIds {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_prints_the_taskset_syntax() {
        let s = CpuSet::parse("0-3,8,10-11").unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(s.to_string(), "0-3,8,10-11");
        assert_eq!(CpuSet::parse("0-7:2").unwrap().to_string(), "0,2,4,6");
        assert_eq!(CpuSet::parse(" 5 , 1 ").unwrap().to_string(), "1,5");
        assert!(CpuSet::parse("").unwrap().is_empty());
    }

    #[test]
    fn bad_lists_name_the_column() {
        let e = CpuSet::parse("0-3,x").unwrap_err();
        assert_eq!(e.column, 5);
        assert!(e.to_string().contains("\"x\" is not a CPU number"), "{e}");
        assert_eq!(CpuSet::parse("3-1").unwrap_err().column, 1);
        assert!(CpuSet::parse("0,,1").is_err());
        assert!(CpuSet::parse("0-4000000000").is_err());
        assert!(CpuSet::parse("0-4:0").is_err());
    }

    #[test]
    fn set_algebra() {
        let a = CpuSet::parse("0-7").unwrap();
        let b = CpuSet::parse("4-11").unwrap();
        assert_eq!(a.intersection(&b).to_string(), "4-7");
        assert_eq!(a.union(&b).to_string(), "0-11");
        assert_eq!(a.difference(&b).to_string(), "0-3");
        assert!(!a.is_disjoint(&b));
        assert!(CpuSet::parse("1-2").unwrap().is_subset(&a));
        assert_eq!(CpuSet::parse("70,3").unwrap().last(), Some(70));
        assert_eq!(CpuSet::parse("64").unwrap().difference(&CpuSet::parse("64").unwrap()), CpuSet::new());
    }

    #[test]
    fn cpu_ids_hold_only_their_cpus_and_answer_like_a_cpu_set() {
        let ids: CpuIds = [MAX_CPU_ID, 3, 9, 4, 3].into_iter().collect();
        assert_eq!(ids.len(), 4, "repeats dropped");
        assert_eq!(ids.iter().collect::<Vec<_>>(), vec![3, 4, 9, MAX_CPU_ID]);
        assert_eq!(ids.to_string(), format!("3-4,9,{MAX_CPU_ID}"));
        assert!(ids.contains(9) && !ids.contains(5));
        assert_eq!(ids.to_cpuset(), CpuSet::from_cpus([3, 4, 9, MAX_CPU_ID]));
        assert_eq!(ids.intersection(&CpuSet::parse("0-8").unwrap()).to_string(), "3-4");
        let part: CpuIds = [9, 4].into_iter().collect();
        assert!(part.is_subset(&ids) && !ids.is_subset(&part));
        assert!(CpuIds::default().is_empty() && CpuIds::default().is_subset(&part));
    }

    proptest! {
        #[test]
        fn cpu_ids_print_as_a_cpu_set_does(cpus in proptest::collection::vec(0u32..300, 0..60)) {
            let ids: CpuIds = cpus.iter().copied().collect();
            let set: CpuSet = cpus.iter().copied().collect();
            prop_assert_eq!(ids.to_string(), set.to_string());
            prop_assert_eq!(ids.len(), set.len());
            prop_assert_eq!(ids.to_cpuset(), set);
        }

        #[test]
        fn print_parse_round_trip(cpus in proptest::collection::btree_set(0u32..2048, 0..200)) {
            let s: CpuSet = cpus.iter().copied().collect();
            prop_assert_eq!(s.len(), cpus.len());
            let back = CpuSet::parse(&s.to_string()).unwrap();
            prop_assert_eq!(back.iter().collect::<Vec<_>>(), cpus.into_iter().collect::<Vec<_>>());
        }

        #[test]
        fn extending_adds_what_inserting_one_by_one_adds(
            start in proptest::collection::vec(0u32..700, 0..20),
            cpus in proptest::collection::vec(0u32..700, 0..80),
        ) {
            let mut one_by_one: CpuSet = CpuSet::new();
            for &c in start.iter().chain(&cpus) {
                one_by_one.insert(c);
            }
            let mut extended: CpuSet = start.iter().copied().collect();
            extended.extend(cpus.iter().copied());
            prop_assert_eq!(extended.as_words(), one_by_one.as_words());
        }

        #[test]
        fn parser_never_panics(text in "[0-9,:\\- ]{0,24}") {
            let _ = CpuSet::parse(&text);
        }
    }
}
