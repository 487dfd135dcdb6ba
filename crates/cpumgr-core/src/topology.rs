//! The machine's topology: a tree machine → package → NUMA node → L3 domain → core → CPU.
//!
//! Every source (this machine's sysfs, hwloc's synthetic syntax, an hwloc XML file) reduces to a
//! list of [`CpuInfo`] records, one per logical CPU, naming the package, NUMA node, L3 domain and
//! core it belongs to. [`Topology::from_cpus`] nests them by intersection, so the tree always has
//! the same six levels: a level a source does not describe becomes one *implicit* domain per
//! parent, which the placer treats like any other and the printer hides. Nesting by intersection
//! also covers machines whose caches straddle NUMA nodes (an L3 split across sub-NUMA clusters
//! becomes one domain per node): a domain is always a set of CPUs that share every level above.
//!
//! CPUs are numbered two ways: their kernel id (what affinity masks and CPU lists use) and their
//! *position*, their index in a depth-first walk of the tree. Every domain covers a contiguous range
//! of positions, which is what lets the placer find "free CPUs near this one" with a range scan.
//!
//! A topology's memory and build time grow with its CPUs times its levels (plus one sort of the
//! CPUs and a table as long as the largest id), whatever the ids: each domain keeps its CPUs as
//! [`CpuIds`], not as a bitset from CPU 0, which made them grow with the square of the CPUs (found
//! by fuzzing).

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::cpuset::{CpuIds, CpuSet};

/// A level of the topology tree, from the whole machine down to one logical CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// The whole machine (the root).
    Machine,
    /// A processor package (socket).
    Package,
    /// A NUMA node: CPUs that share the nearest memory.
    Numa,
    /// CPUs that share a last-level (L3) cache: an AMD CCX, an Intel package's ring.
    L3,
    /// A physical core; its CPUs are SMT siblings.
    Core,
    /// One logical processor (hwloc's PU).
    Cpu,
}

impl Level {
    /// Every level from the root down.
    pub const ALL: [Level; 6] = [Level::Machine, Level::Package, Level::Numa, Level::L3, Level::Core, Level::Cpu];

    /// The depth of the level in the tree (machine = 0, CPU = 5).
    pub fn depth(self) -> usize {
        self as usize
    }

    /// The name hwloc and `lstopo` use for this level.
    pub fn hwloc_name(self) -> &'static str {
        match self {
            Level::Machine => "Machine",
            Level::Package => "Package",
            Level::Numa => "NUMANode",
            Level::L3 => "L3",
            Level::Core => "Core",
            Level::Cpu => "PU",
        }
    }
}

/// What a topology source knows about one logical CPU: its kernel id and the OS index of each
/// domain that holds it. `None` means the source does not describe that level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct CpuInfo {
    /// Kernel CPU id.
    pub cpu: u32,
    /// Physical package id.
    pub package: Option<u32>,
    /// NUMA node id.
    pub numa: Option<u32>,
    /// L3 cache id.
    pub l3: Option<u32>,
    /// Core id (unique within its package).
    pub core: Option<u32>,
}

/// One node of the tree.
#[derive(Debug, Clone, Serialize)]
pub struct Domain {
    /// Its level.
    pub level: Level,
    /// Its logical index among the domains of its level (hwloc's `L#`).
    pub logical: u32,
    /// The operating system's index (hwloc's `P#`), when the source gave one.
    pub os_index: Option<u32>,
    /// Whether the source described this domain or it was filled in to keep six levels.
    pub implicit: bool,
    /// Its CPUs: the kernel ids at positions `first..end`, in increasing order.
    pub cpus: CpuIds,
    /// Its first CPU position (see the module docs).
    pub first: u32,
    /// One past its last CPU position.
    pub end: u32,
    /// Index of its parent domain, `None` for the machine.
    #[serde(skip)]
    pub parent: Option<usize>,
    /// Indices of its children, in position order.
    #[serde(skip)]
    pub children: Vec<usize>,
}

/// Why a list of CPUs does not make a topology.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// No CPU at all.
    #[error("the topology has no CPU")]
    Empty,
    /// The same kernel CPU id appears twice.
    #[error("CPU {0} appears twice")]
    DuplicateCpu(u32),
    /// A CPU id above [`crate::cpuset::MAX_CPU_ID`].
    #[error("CPU id {0} is too large")]
    CpuIdTooLarge(u32),
    /// More than [`MAX_CPUS`] CPUs.
    #[error("{cpus} CPUs (ids up to {max}) are more than the {MAX_CPUS} a topology may have")]
    TooLarge {
        /// How many CPUs.
        cpus: usize,
        /// The largest id.
        max: u32,
    },
}

/// The most CPUs a topology may have: 2^17, the simulator's largest machine (real Linux machines
/// stop at `NR_CPUS`, 8192 on common distributions). A topology's memory is linear in its CPUs
/// (a few hundred bytes each, docs/FUZZING.md), but the sources do work per CPU (sysfs reads a dozen
/// files for each), so a ten-byte input (`pu:777777`, `online=0-1048575`) must not ask for
/// millions of them.
pub const MAX_CPUS: usize = 1 << 17;

/// Checks that a machine of these CPU ids has at most [`MAX_CPUS`] CPUs, before a source reads
/// anything per CPU or [`Topology::from_cpus`] builds the tree.
pub fn check_size(cpus: impl IntoIterator<Item = u32>) -> Result<(), TopologyError> {
    let (mut n, mut max) = (0usize, 0u32);
    for c in cpus {
        n += 1;
        max = max.max(c);
    }
    if n > MAX_CPUS {
        return Err(TopologyError::TooLarge { cpus: n, max });
    }
    Ok(())
}

/// A machine: its domains in depth-first order, and the CPU positions.
#[derive(Debug, Clone)]
pub struct Topology {
    domains: Vec<Domain>,
    /// Position → kernel CPU id.
    order: Vec<u32>,
    /// Kernel CPU id → position (`u32::MAX` for ids the machine lacks).
    position: Vec<u32>,
    /// Position → for each level, the index of the domain holding that CPU.
    path: Vec<[u32; 6]>,
    /// Per level, the indices of its domains in position order.
    by_level: [Vec<usize>; 6],
    /// The levels from core up to package that split a domain of the level above, deepest
    /// first (see [`Topology::splitting_levels`]).
    splitting: Vec<Level>,
    /// Per level, the most CPUs one of its domains holds.
    widest: [u32; 6],
    cpus: CpuSet,
    /// Whether every CPU's position is its id (flat machines, and machines numbered in
    /// position order without gaps): a CPU set is then its own position set.
    identity: bool,
}

impl Topology {
    /// Builds the tree from per-CPU records, nesting package → NUMA → L3 → core by intersection.
    /// CPUs are ordered by (package, NUMA, L3, core, CPU id), so the result does not depend on
    /// the order of `infos`.
    pub fn from_cpus(infos: &[CpuInfo]) -> Result<Topology, TopologyError> {
        if infos.is_empty() {
            return Err(TopologyError::Empty);
        }
        // Group: key per level, then CPU id. BTreeMap keeps the walk deterministic.
        type Key = (Option<u32>, Option<u32>, Option<u32>, Option<u32>);
        let mut grouped: BTreeMap<Key, Vec<u32>> = BTreeMap::new();
        let mut seen = CpuSet::new();
        for i in infos {
            if i.cpu > crate::cpuset::MAX_CPU_ID {
                return Err(TopologyError::CpuIdTooLarge(i.cpu));
            }
            if !seen.insert(i.cpu) {
                return Err(TopologyError::DuplicateCpu(i.cpu));
            }
            grouped.entry((i.package, i.numa, i.l3, i.core)).or_default().push(i.cpu);
        }
        check_size(infos.iter().map(|i| i.cpu))?;
        let mut b = Builder::default();
        let root = b.open(Level::Machine, None, false, None);
        let mut open: [Option<(Option<u32>, usize)>; 4] = [None; 4];
        for ((pkg, numa, l3, core), mut cpus) in grouped {
            cpus.sort_unstable();
            let keys = [pkg, numa, l3, core];
            let mut parent = root;
            let mut reopened = false;
            for (depth, key) in keys.iter().enumerate() {
                let level = Level::ALL[depth + 1];
                match open[depth] {
                    Some((k, idx)) if k == *key && !reopened => parent = idx,
                    _ => {
                        let idx = b.open(level, *key, key.is_none(), Some(parent));
                        open[depth] = Some((*key, idx));
                        parent = idx;
                        reopened = true;
                    }
                }
            }
            for cpu in cpus {
                let idx = b.open(Level::Cpu, Some(cpu), false, Some(parent));
                b.add_cpu(idx, cpu);
            }
        }
        Ok(b.finish())
    }

    /// A flat machine of `n` CPUs (ids `0..n`) with no levels described: what `--cpus N` means
    /// when no topology is known.
    pub fn flat(n: u32) -> Topology {
        let infos: Vec<CpuInfo> =
            (0..n.max(1)).map(|cpu| CpuInfo { cpu, package: None, numa: None, l3: None, core: None }).collect();
        Topology::from_cpus(&infos).expect("a flat machine of distinct CPUs is valid")
    }

    /// Every CPU of the machine.
    pub fn cpus(&self) -> &CpuSet {
        &self.cpus
    }

    /// Number of CPUs.
    pub fn num_cpus(&self) -> usize {
        self.order.len()
    }

    /// Every domain, in depth-first order; index 0 is the machine.
    pub fn domains(&self) -> &[Domain] {
        &self.domains
    }

    /// The domains of one level, in position order.
    pub fn level(&self, level: Level) -> impl Iterator<Item = &Domain> + '_ {
        self.by_level[level.depth()].iter().map(|&i| &self.domains[i])
    }

    /// Indices (into [`Topology::domains`]) of the domains of one level, in position order.
    pub fn level_indices(&self, level: Level) -> &[usize] {
        &self.by_level[level.depth()]
    }

    /// The levels from core up to package, deepest first, whose domains are not all copies of
    /// their parents: a level whose domains cover the same position ranges as the level above's
    /// finds, in a search of its domains, what a search of the level above finds. The placer counts free CPUs and looks for room only on these levels (none on a flat
    /// machine, where every level is one implicit domain over every CPU).
    pub fn splitting_levels(&self) -> &[Level] {
        &self.splitting
    }

    /// The most CPUs a domain of `level` holds: a request for more has no room in any of them,
    /// whatever is free, so the placer's best fit does not search that level.
    pub fn widest(&self, level: Level) -> u32 {
        self.widest[level.depth()]
    }

    /// Number of explicit (source-described) domains of a level; implicit ones are not counted.
    pub fn count(&self, level: Level) -> usize {
        self.level(level).filter(|d| !d.implicit).count()
    }

    /// The kernel CPU id at a position.
    pub fn cpu_at(&self, position: u32) -> u32 {
        self.order[position as usize]
    }

    /// The position of a kernel CPU id, if the machine has it.
    pub fn position(&self, cpu: u32) -> Option<u32> {
        self.position.get(cpu as usize).copied().filter(|p| *p != u32::MAX)
    }

    /// The positions of the CPUs of `cpus` that the machine has, as a bitset over positions (bit
    /// `p % 64` of word `p / 64`): what the placer works on. Where every CPU's position is its id
    /// it is the set's own words, with no per-CPU work; otherwise it is built in `scratch`.
    /// Always inlined, that case being a few instructions (the placer asks for every set it
    /// keeps or frees), the other one not (`Topology::positions_of`).
    #[inline(always)]
    pub fn position_words<'a>(&self, cpus: &'a CpuSet, scratch: &'a mut Vec<u64>) -> &'a [u64] {
        // A CPU past the last position (one the machine lacks) would be taken for a position.
        if self.identity && cpus.last().is_none_or(|cpu| (cpu as usize) < self.order.len()) {
            return cpus.as_words();
        }
        self.positions_of(cpus, scratch)
    }

    /// [`Topology::position_words`] built in `scratch`, a CPU at a time.
    #[inline(never)]
    fn positions_of<'a>(&self, cpus: &CpuSet, scratch: &'a mut Vec<u64>) -> &'a [u64] {
        let n = self.order.len();
        scratch.clear();
        scratch.resize(n.div_ceil(64), 0);
        for cpu in cpus.iter() {
            if let Some(p) = self.position(cpu) {
                scratch[(p / 64) as usize] |= 1 << (p % 64);
            }
        }
        scratch
    }

    /// Adds the CPUs at the positions `bits` of word `k` (positions `64 k` to `64 k + 63`) to
    /// `into`: the word at once where positions are ids. Always inlined into the placer, which
    /// writes every placed set a word at a time with it (the compiler left it out of line).
    #[inline(always)]
    pub fn insert_cpus_at(&self, k: usize, bits: u64, into: &mut CpuSet) {
        if self.identity {
            into.insert_word(k, bits);
        } else {
            let mut left = bits;
            into.extend(std::iter::from_fn(|| {
                let b = (left != 0).then(|| left.trailing_zeros())?;
                left &= left - 1;
                Some(self.order[k * 64 + b as usize])
            }));
        }
    }

    /// The index of the domain of `level` that holds the CPU at `position`.
    pub fn domain_of(&self, position: u32, level: Level) -> usize {
        self.path[position as usize][level.depth()] as usize
    }

    /// The indices of the domains that hold the CPU at `position`, one per level (machine
    /// first): one lookup for what [`Topology::domain_of`] gives level by level.
    pub fn domains_of(&self, position: u32) -> &[u32; 6] {
        &self.path[position as usize]
    }

    /// CPUs per core (SMT width) of the first core; 1 on machines without SMT.
    pub fn smt(&self) -> usize {
        self.level(Level::Core).next().map_or(1, |c| c.cpus.len())
    }

    /// A one-line summary: `2 packages, 4 NUMA nodes, 8 L3, 32 cores, 64 CPUs`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        for (level, name) in
            [(Level::Package, "package"), (Level::Numa, "NUMA node"), (Level::L3, "L3"), (Level::Core, "core")]
        {
            let n = self.count(level);
            if n > 0 {
                parts.push(format!("{n} {name}{}", if n == 1 || level == Level::L3 { "" } else { "s" }));
            }
        }
        parts.push(format!("{} CPU{}", self.num_cpus(), if self.num_cpus() == 1 { "" } else { "s" }));
        parts.join(", ")
    }
}

impl fmt::Display for Topology {
    /// Prints the tree like `lstopo --of console`, one domain a line, implicit domains hidden.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn walk(t: &Topology, idx: usize, indent: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let d = &t.domains[idx];
            let mut child_indent = indent;
            if !d.implicit {
                write!(f, "{:indent$}{} L#{}", "", d.level.hwloc_name(), d.logical, indent = indent)?;
                if let (Some(p), true) = (d.os_index, d.level != Level::Machine) {
                    write!(f, " P#{p}")?;
                }
                if d.level == Level::Machine {
                    write!(f, " ({})", t.summary())?;
                } else if d.level != Level::Cpu {
                    write!(f, " cpus {}", d.cpus)?;
                }
                writeln!(f)?;
                child_indent += 2;
            }
            for &c in &d.children {
                walk(t, c, child_indent, f)?;
            }
            Ok(())
        }
        walk(self, 0, 0, f)
    }
}

#[derive(Default)]
struct Builder {
    domains: Vec<Domain>,
    order: Vec<u32>,
    per_level: [u32; 6],
}

impl Builder {
    fn open(&mut self, level: Level, os_index: Option<u32>, implicit: bool, parent: Option<usize>) -> usize {
        let idx = self.domains.len();
        let logical = self.per_level[level.depth()];
        self.per_level[level.depth()] += 1;
        let first = self.order.len() as u32;
        self.domains.push(Domain {
            level,
            logical,
            os_index,
            implicit,
            cpus: CpuIds::default(),
            first,
            end: first,
            parent,
            children: Vec::new(),
        });
        if let Some(p) = parent {
            self.domains[p].children.push(idx);
        }
        idx
    }

    fn add_cpu(&mut self, leaf: usize, cpu: u32) {
        self.order.push(cpu);
        let end = self.order.len() as u32;
        let mut at = Some(leaf);
        while let Some(i) = at {
            self.domains[i].end = end;
            at = self.domains[i].parent;
        }
    }

    fn finish(self) -> Topology {
        let Builder { mut domains, order, .. } = self;
        let max = order.iter().copied().max().unwrap_or(0) as usize;
        let mut position = vec![u32::MAX; max + 1];
        for (p, &cpu) in order.iter().enumerate() {
            position[cpu as usize] = p as u32;
        }
        let mut path = vec![[0u32; 6]; order.len()];
        let mut by_level: [Vec<usize>; 6] = Default::default();
        let mut ids: Vec<Vec<u32>> = Vec::with_capacity(domains.len());
        let mut widest = [0u32; 6];
        for (i, d) in domains.iter().enumerate() {
            by_level[d.level.depth()].push(i);
            widest[d.level.depth()] = widest[d.level.depth()].max(d.end - d.first);
            for p in d.first..d.end {
                path[p as usize][d.level.depth()] = i as u32;
            }
            ids.push(Vec::with_capacity((d.end - d.first) as usize));
        }
        // Walking the CPUs by increasing id fills every domain's list already sorted.
        for (cpu, &p) in position.iter().enumerate().filter(|(_, p)| **p != u32::MAX) {
            for &d in &path[p as usize] {
                ids[d as usize].push(cpu as u32);
            }
        }
        for (d, ids) in domains.iter_mut().zip(ids) {
            d.cpus = ids.into_iter().collect();
        }
        let cpus = order.iter().copied().collect();
        let identity = order.iter().enumerate().all(|(p, &cpu)| p == cpu as usize);
        // A level splits when its domains' position ranges are not those of the level above
        // (compared whole, so that it holds for any tree the builder makes, not only for one
        // where every domain has a child at every level).
        let ranges = |depth: usize| by_level[depth].iter().map(|&i| (domains[i].first, domains[i].end));
        let splitting = [Level::Core, Level::L3, Level::Numa, Level::Package]
            .into_iter()
            .filter(|l| !ranges(l.depth()).eq(ranges(l.depth() - 1)))
            .collect();
        Topology { domains, order, position, path, by_level, splitting, widest, cpus, identity }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(cpu: u32, package: u32, core: u32) -> CpuInfo {
        CpuInfo { cpu, package: Some(package), numa: None, l3: None, core: Some(core) }
    }

    #[test]
    fn nests_smt_siblings_under_cores_in_position_order() {
        // Linux numbers SMT siblings far apart: CPU 0 and 2 share core 0.
        let t = Topology::from_cpus(&[info(0, 0, 0), info(1, 0, 1), info(2, 0, 0), info(3, 0, 1)]).unwrap();
        assert_eq!(t.num_cpus(), 4);
        assert_eq!((0..4).map(|p| t.cpu_at(p)).collect::<Vec<_>>(), vec![0, 2, 1, 3]);
        let cores: Vec<String> = t.level(Level::Core).map(|d| d.cpus.to_string()).collect();
        assert_eq!(cores, vec!["0,2", "1,3"]);
        assert_eq!(t.smt(), 2);
        assert_eq!(t.count(Level::Numa), 0);
        assert_eq!(t.level(Level::Numa).count(), 1, "an implicit NUMA node fills the level");
        assert_eq!(t.position(3), Some(3));
        assert_eq!(t.position(7), None);
        assert_eq!(t.domains()[t.domain_of(1, Level::Core)].cpus.to_string(), "0,2");
    }

    #[test]
    fn a_sets_positions_whatever_the_numbering() {
        let smt = Topology::from_cpus(&[info(0, 0, 0), info(1, 0, 1), info(2, 0, 0), info(3, 0, 1)]).unwrap();
        let gaps = Topology::from_cpus(&[info(2, 0, 0), info(5, 0, 1), info(9, 1, 2)]).unwrap();
        let flat = Topology::flat(4);
        let wide = Topology::flat(130);
        let set = CpuSet::parse("1-3,5,9,12").unwrap();
        let cases = [(&smt, &set, vec![1, 2, 3]), (&gaps, &set, vec![0, 1, 2]), (&flat, &set, vec![1, 2, 3])];
        let in_wide = CpuSet::parse("0,64,127-129").unwrap();
        let past_wide = CpuSet::parse("0,64,127-129,130,200").unwrap();
        let more = [(&wide, &in_wide, vec![0, 64, 127, 128, 129]), (&wide, &past_wide, vec![0, 64, 127, 128, 129])];
        for (t, set, want) in cases.into_iter().chain(more) {
            let mut scratch = vec![u64::MAX; 9];
            let words = t.position_words(set, &mut scratch);
            let got: Vec<u32> = CpuSet::from_words(words).iter().collect();
            assert_eq!(got, want, "{set} on {} CPUs: only the machine's CPUs, by position", t.num_cpus());
        }
    }

    #[test]
    fn every_domain_covers_a_contiguous_range_of_positions() {
        let infos: Vec<CpuInfo> = (0..16)
            .map(|c| CpuInfo { cpu: c, package: Some(c % 2), numa: Some(c % 4), l3: Some(c % 4), core: Some(c % 8) })
            .collect();
        let t = Topology::from_cpus(&infos).unwrap();
        for d in t.domains() {
            let by_pos: CpuSet = (d.first..d.end).map(|p| t.cpu_at(p)).collect();
            assert_eq!(by_pos, d.cpus.to_cpuset(), "{d:?}");
        }
        assert_eq!(t.count(Level::Package), 2);
        assert_eq!(t.count(Level::Numa), 4);
        assert_eq!(t.count(Level::Core), 8);
        assert_eq!(t.splitting_levels(), [Level::Core, Level::Numa, Level::Package], "an L3 per NUMA node splits none");
        assert_eq!(Level::ALL.map(|l| t.widest(l)), [16, 8, 4, 4, 2, 1]);
    }

    #[test]
    fn a_flat_machine_has_no_splitting_level() {
        assert_eq!(Topology::flat(64).splitting_levels(), []);
        let one_package = Topology::from_cpus(&[info(0, 0, 0), info(1, 0, 1)]).unwrap();
        assert_eq!(one_package.splitting_levels(), [Level::Core]);
    }

    #[test]
    fn refuses_duplicates_and_empty() {
        assert_eq!(Topology::from_cpus(&[]).unwrap_err(), TopologyError::Empty);
        assert_eq!(Topology::from_cpus(&[info(1, 0, 0), info(1, 0, 1)]).unwrap_err(), TopologyError::DuplicateCpu(1));
    }

    #[test]
    fn refuses_more_than_max_cpus() {
        let over: Vec<CpuInfo> = (0..MAX_CPUS as u32 + 1).map(|k| info(k, 0, k)).collect();
        assert_eq!(
            Topology::from_cpus(&over).unwrap_err(),
            TopologyError::TooLarge { cpus: MAX_CPUS + 1, max: MAX_CPUS as u32 }
        );
        assert!(check_size(0..MAX_CPUS as u32).is_ok());
        assert!(check_size(0..1 << 20).is_err());
    }

    #[test]
    fn the_largest_machine_with_the_highest_ids_and_spread_siblings_builds() {
        // MAX_CPUS CPUs numbered up to MAX_CPU_ID, each core's two siblings half the machine
        // apart (as Linux numbers SMT siblings): with a bitset from CPU 0 per domain this asked
        // for 2^17 × 2^14 words per level (16 GiB) and was refused as too large.
        let n = MAX_CPUS as u32;
        let low = crate::cpuset::MAX_CPU_ID + 1 - n;
        let infos: Vec<CpuInfo> = (0..n).map(|k| info(low + k, k % 2, k % (n / 2))).collect();
        let t = Topology::from_cpus(&infos).unwrap();
        assert_eq!(t.num_cpus(), MAX_CPUS);
        assert_eq!(t.count(Level::Core), MAX_CPUS / 2);
        let core = &t.domains()[t.domain_of(0, Level::Core)];
        assert_eq!(core.cpus.to_string(), format!("{low},{}", low + n / 2));
        for level in Level::ALL {
            assert_eq!(t.level(level).map(|d| d.cpus.len()).sum::<usize>(), MAX_CPUS, "{level:?}");
        }
    }

    #[test]
    fn prints_like_lstopo() {
        let t = Topology::from_cpus(&[info(0, 0, 0), info(1, 0, 1)]).unwrap();
        let text = t.to_string();
        assert_eq!(
            text,
            "Machine L#0 (1 package, 2 cores, 2 CPUs)\n  Package L#0 P#0 cpus 0-1\n    Core L#0 P#0 cpus 0\n      PU L#0 P#0\n    Core L#1 P#1 cpus 1\n      PU L#1 P#1\n"
        );
    }
}
