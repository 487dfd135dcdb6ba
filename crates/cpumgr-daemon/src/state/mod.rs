//! The manager's state: the programs it manages and what it last decided. Its two jobs live in
//! the submodules: the control requests connections send ([`requests`]: [`State::handle`]) and,
//! every quantum, the scheduler step ([`step`]: [`State::step`]).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cpumgr_core::policies;
use cpumgr_core::sources::sysfs;
use cpumgr_core::trace::{Event, EventKind};
use cpumgr_core::{CpuSet, Decision, Nanos, Placer, Policy, Program, ProgramId, Topology};

use crate::enforce;
use crate::entry::Entry;
use crate::exits::Exits;
use crate::limits::{Share, UserLimits};
use crate::outside::OutsideLoad;
use crate::procfs;
use crate::ratelimit::Rates;
use crate::starvation::StarvationBound;
use crate::team::TeamGuard;
use crate::worklist::WorkList;

/// The policy's view of `$state` with `$programs` at `$now` (nanoseconds since the manager
/// started), built from fields so that the policy itself can be borrowed mutably beside it.
macro_rules! view {
    ($state:expr, $programs:expr, $now:expr) => {
        View {
            now: $now,
            quantum: $state.quantum.as_nanos() as Nanos,
            topology: &$state.topology,
            cpus: $state.offered.len() as u32,
            programs: $programs,
        }
    };
}

pub mod requests;
pub mod step;

pub use step::{Samples, Survey};

/// The shortest lease a step gives: an allocation holds for three quanta, and at least this
/// long, so that a manager stalled for a moment (a loaded machine, a short quantum: 150 ms at
/// 50 ms quanta) does not send every cooperative runtime back to its own full team, which would
/// oversubscribe the machine until the next step. A manager that stops releases its programs at
/// once (`lease_until = 0`); one killed outright is obeyed at most this long after its death.
pub const LEASE_FLOOR: Duration = Duration::from_secs(1);

/// The shortest and longest quantum accepted.
pub const QUANTUM_RANGE: (Duration, Duration) = (Duration::from_millis(1), Duration::from_secs(10));

/// How the manager is set up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Policy spec (`name:key=value,...`).
    pub policy: String,
    /// The quantum.
    pub quantum: Duration,
    /// How long a cooperative program gets to shrink before it is forced; one quantum when `None`.
    pub grace: Option<Duration>,
    /// CPUs to manage; the process's allowed CPUs when `None`.
    pub cpus: Option<CpuSet>,
    /// The machine the policy and the placer see: this host's, from sysfs, when `None`. A model
    /// (a load benchmark's node larger than the host) manages all its CPUs unless `cpus` says
    /// otherwise; enforcement still acts on the host, where CPUs beyond it cannot be given.
    pub topology: Option<Topology>,
    /// Most programs registered at once.
    pub max_programs: usize,
    /// Where to write trace events (JSON lines), if anywhere.
    pub trace: Option<PathBuf>,
    /// How programs are confined to their CPUs: `auto` (the cpuset tree when the manager may
    /// write it, else affinity), `affinity`, or `cpuset` (refuse to start without it).
    pub backend: enforce::Choice,
    /// Faults to inject (`--chaos`, tests only).
    pub chaos: Option<crate::chaos::Spec>,
    /// Between programs or between users first (`share = "user"`).
    pub share: Share,
    /// What each user may register.
    pub user_limits: UserLimits,
    /// Request rates and connections allowed per connection and per user.
    pub rates: Rates,
    /// Offer the policy only the CPUs that unmanaged processes leave (module [`crate::outside`]).
    pub yield_outside: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            policy: "equipartition".into(),
            quantum: Duration::from_millis(100),
            grace: None,
            cpus: None,
            topology: None,
            max_programs: 4096,
            trace: None,
            backend: enforce::Choice::default(),
            chaos: None,
            share: Share::default(),
            user_limits: UserLimits::default(),
            rates: Rates::default(),
            yield_outside: false,
        }
    }
}

/// Everything the manager knows. Guarded by one mutex; the scheduler thread steps it, the socket
/// thread changes it on requests.
pub struct State {
    policy_spec: String,
    policy: Box<dyn Policy>,
    quantum: Duration,
    grace: Option<Duration>,
    topology: Topology,
    managed: CpuSet,
    entries: BTreeMap<ProgramId, Entry>,
    /// Each registered leader's program, and each user's program count: a registration checks
    /// both without a pass over every program.
    by_pid: HashMap<i32, ProgramId>,
    per_user: HashMap<u32, usize>,
    /// Counts registrations and removals: [`State::originals`] changes only when this does.
    roster: u64,
    next_id: u64,
    placer: Placer,
    guard: TeamGuard,
    /// The bound on how long a program waits with no CPU ([`crate::starvation`]).
    starvation: StarvationBound,
    decision: Decision,
    sets: Vec<CpuSet>,
    epoch: u64,
    steps: u64,
    start: Instant,
    trace: Option<BufWriter<File>>,
    ticks_per_sec: u64,
    owner_uid: u32,
    max_programs: usize,
    share: Share,
    user_limits: UserLimits,
    rates: Rates,
    /// Set when something changed that should be scheduled now, not at the next boundary (a CPU
    /// was released or requested: paper 000's work-list).
    pub kick: bool,
    /// The last step's programs as the policy saw them, kept for their allocations.
    programs: Vec<Program>,
    /// Events emitted since the socket thread last sent them to `subscribe-events` connections;
    /// `None` while nobody subscribes.
    pub outbox: Option<Vec<Event>>,
    /// The programs' doorbells, watched by the work-list thread.
    worklist: Arc<WorkList>,
    /// How programs are confined to their CPUs.
    backend: enforce::Backend,
    /// The load from unmanaged processes, when the manager yields to it.
    outside: Option<OutsideLoad>,
    /// The manager's own CPU ticks at the last walk.
    own_ticks: u64,
    /// The managed CPUs offered to the policy: all of them, less those the outside keeps.
    offered: CpuSet,
    /// Per program of the last step, the CPUs it may be given when not all ([`Entry::bound`]).
    within: Vec<Option<CpuSet>>,
    /// Whether programs are bound by their allowed CPUs: not on a modelled machine, whose CPUs
    /// are not the ones the host's affinity masks name.
    bound: bool,
    /// Programs registered since the last step, whose arrival the policy hears of at the next.
    arrived: Vec<ProgramId>,
    /// The `/proc` files the last walk read, kept open for the next (lent to each [`Survey`]).
    files: procfs::Files,
    /// Every program's pidfd, watched by the socket thread.
    exits: Arc<Exits>,
}

pub use cpumgr_proto::slot::monotonic_ns;
pub use cpumgr_proto::transport::default_socket;

/// This machine's topology, from sysfs (`CPUMGR_SYSFS_ROOT` overrides `/sys`).
pub fn host_topology() -> Result<Topology, String> {
    let root = PathBuf::from(std::env::var_os("CPUMGR_SYSFS_ROOT").unwrap_or_else(|| "/sys".into()));
    sysfs::read(&|p: &str| std::fs::read_to_string(root.join(p))).map_err(|e| format!("{}/{e}", root.display()))
}

impl State {
    /// Builds the state: the policy, the topology, the managed CPUs, the trace file.
    pub fn new(s: &Settings) -> Result<State, String> {
        let policy = policies::build(&s.policy).map_err(|e| e.to_string())?;
        check_quantum(s.quantum)?;
        s.user_limits.check()?;
        s.rates.check()?;
        let modelled = s.topology.is_some();
        let topology = match &s.topology {
            Some(t) => t.clone(),
            None => host_topology()?,
        };
        let allowed = enforce::affinity(0).map_err(|e| format!("cannot read this process's CPUs: {e}"))?;
        let managed = match &s.cpus {
            Some(c) => {
                let outside = c.difference(topology.cpus());
                if !outside.is_empty() {
                    return Err(format!("--cpus {c}: CPUs {outside} are not online"));
                }
                c.clone()
            }
            None if modelled => topology.cpus().clone(),
            None => allowed.intersection(topology.cpus()),
        };
        if managed.is_empty() {
            return Err("no CPU to manage".into());
        }
        let trace = match &s.trace {
            Some(p) => Some(BufWriter::new(File::create(p).map_err(|e| format!("{}: {e}", p.display()))?)),
            None => None,
        };
        let backend = enforce::Backend::new(s.backend)?;
        let mut st = State {
            policy_spec: s.policy.clone(),
            policy,
            quantum: s.quantum,
            grace: s.grace,
            topology,
            offered: managed.clone(),
            within: Vec::new(),
            bound: !modelled,
            managed,
            entries: BTreeMap::new(),
            by_pid: HashMap::new(),
            per_user: HashMap::new(),
            roster: 0,
            next_id: 1,
            placer: Placer::new(),
            guard: TeamGuard::new(),
            starvation: StarvationBound::default(),
            decision: Decision::default(),
            sets: Vec::new(),
            epoch: 0,
            steps: 0,
            start: Instant::now(),
            trace,
            ticks_per_sec: procfs::ticks_per_sec(),
            owner_uid: nix::unistd::geteuid().as_raw(),
            max_programs: s.max_programs,
            share: s.share,
            user_limits: s.user_limits.clone(),
            rates: s.rates,
            kick: false,
            programs: Vec::new(),
            outbox: None,
            worklist: Arc::new(WorkList::new().map_err(|e| format!("work-list: {e}"))?),
            backend,
            outside: s.yield_outside.then(OutsideLoad::new),
            own_ticks: 0,
            arrived: Vec::new(),
            files: procfs::Files::for_manager(),
            exits: Arc::new(Exits::new().map_err(|e| format!("exits: {e}"))?),
        };
        let start = EventKind::Start {
            source: "live".into(),
            cpus: st.managed.clone(),
            policy: st.policy_spec.clone(),
            quantum: st.quantum.as_nanos() as Nanos,
        };
        st.emit(None, start);
        Ok(st)
    }

    /// The current quantum.
    pub fn quantum(&self) -> Duration {
        self.quantum
    }

    /// The request rates and connection caps the socket thread enforces.
    pub fn rates(&self) -> Rates {
        self.rates
    }

    /// How many programs are registered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no program is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn now(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }

    fn emit(&mut self, program: Option<ProgramId>, kind: EventKind) {
        let ev = Event { t: self.now(), program, kind };
        tracing::debug!(target: "cpumgr::trace", "{}", serde_json::to_string(&ev).unwrap_or_default());
        if let Some(out) = &mut self.outbox {
            out.push(ev.clone());
        }
        if let Some(w) = &mut self.trace {
            // The line is made whole before the buffer sees it: a buffer that fills flushes what
            // it holds, and a manager killed after that flush must leave whole lines behind.
            let line = serde_json::to_vec(&ev).map(|mut l| {
                l.push(b'\n');
                l
            });
            let ok = line.is_ok_and(|l| w.write_all(&l).is_ok());
            if !ok {
                tracing::warn!("trace file write failed; tracing stops");
                self.trace = None;
            }
        }
    }

    /// The cgroup a process leaves the manager's cpuset tree to, when the backend has one (for the
    /// watchdog).
    pub fn cgroup_exit(&self) -> Option<PathBuf> {
        self.backend.cgroup_exit()
    }

    /// The work-list the manager's work-list thread serves.
    pub fn worklist(&self) -> Arc<WorkList> {
        self.worklist.clone()
    }

    /// Forgets a program: continues and unpins whatever is left of it, and schedules its CPUs
    /// away at once. `status` is its exit status when it ended.
    pub fn remove(&mut self, id: ProgramId, status: Option<i32>) {
        let Some(e) = self.entries.remove(&id) else { return };
        self.by_pid.remove(&e.pid);
        self.roster += 1;
        if let std::collections::hash_map::Entry::Occupied(mut n) = self.per_user.entry(e.uid) {
            *n.get_mut() -= 1;
            if *n.get() == 0 {
                n.remove();
            }
        }
        self.exits.forget(e.pidfd.as_fd());
        self.backend.release(&e);
        tracing::info!(id = id.0, pid = e.pid, "program gone; CPUs {} reclaimed", e.cpus);
        self.policy.on_exit(id);
        self.worklist.remove(id);
        self.emit(Some(id), EventKind::Exit { status });
        self.kick = true;
    }

    /// The set of every program's pidfd, which the socket thread polls for exits.
    pub fn exits(&self) -> Arc<Exits> {
        self.exits.clone()
    }

    /// How many times a program was registered or removed: [`State::originals`] is the same list
    /// while this is the same number.
    pub fn roster(&self) -> u64 {
        self.roster
    }

    /// Every program's process target and its affinity at registration: what to release if the
    /// manager dies (the watchdog's board), and whom chaos mode may kill.
    pub fn originals(&self) -> impl Iterator<Item = (procfs::Target, &CpuSet)> + '_ {
        self.entries.values().map(|e| (e.target, &e.original))
    }

    /// What the watchdog's board lists, in this order: every program's target with its affinity
    /// at registration, then every process of a program outside its group (the strays its last
    /// scan found and those still held stopped), with its start time.
    pub fn board(&self) -> impl Iterator<Item = (procfs::Target, u64, &CpuSet)> + '_ {
        let targets = self.entries.values().map(|e| (e.target, 0, &e.original));
        let strays = self
            .entries
            .values()
            .flat_map(|e| e.strays().into_iter().map(move |s| (procfs::Target::Process(s.pid), s.start, &e.original)));
        targets.chain(strays)
    }

    /// The board [`State::board`] listed holds its first `published` records: the strays among
    /// them are the ones a stop may reach until the next publication.
    pub fn boarded(&mut self, published: usize) {
        let mut room = published.saturating_sub(self.entries.len());
        for e in self.entries.values_mut() {
            let strays = e.strays();
            let n = strays.len().min(room);
            room -= n;
            e.boarded = strays[..n].to_vec();
        }
    }

    /// Releases every program: continued, affinity widened back. The manager's last act.
    pub fn release_all(&mut self) {
        for e in self.entries.values_mut() {
            self.backend.release(e);
            e.held_strays.clear();
            e.stopped = false;
            e.applied = None;
            e.segment.slot().beat(monotonic_ns(), 0);
        }
        if let Some(w) = &mut self.trace {
            let _ = w.flush();
        }
    }

    fn programs(&mut self) -> Vec<Program> {
        let mut programs = Vec::new();
        self.programs_into(&mut programs);
        programs
    }

    /// The policy's programs into `programs`, reusing what it holds (a step's CPU sets are
    /// copied into the ones the last step allocated), each bound by the CPUs it is allowed
    /// ([`Entry::bound`], kept in [`State::within`] for the placer).
    fn programs_into(&mut self, programs: &mut Vec<Program>) {
        let n = self.managed.len() as u32;
        programs.truncate(self.entries.len());
        self.within.resize(self.entries.len(), None);
        for (i, e) in self.entries.values().enumerate() {
            match programs.get_mut(i) {
                Some(p) => e.program_into(self.ticks_per_sec, n, p),
                None => programs.push(e.program(self.ticks_per_sec, n)),
            }
            self.within[i] = if self.bound { e.bound(&self.offered, &mut programs[i]) } else { None };
        }
    }
}

fn check_quantum(q: Duration) -> Result<(), String> {
    if q < QUANTUM_RANGE.0 || q > QUANTUM_RANGE.1 {
        return Err(format!("quantum {q:?} is outside {:?} to {:?}", QUANTUM_RANGE.0, QUANTUM_RANGE.1));
    }
    Ok(())
}
