//! The manager's state and its two jobs: answering control requests ([`State::handle`]) and, every
//! quantum, the scheduler step ([`State::tick`]): snapshot the slots and `/proc` → build a
//! [`View`] → the active policy → the [`TeamGuard`] → the [`Placer`] → publish → enforce → trace.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cpumgr_core::policies;
use cpumgr_core::sources::sysfs;
use cpumgr_core::trace::{Event, EventKind};
use cpumgr_core::{CpuSet, Decision, Kind, Nanos, Placer, Policy, Program, ProgramId, Topology, View};
use cpumgr_proto::msg::{ProgramStatus, Registration, Reply, Request, StatusReport};
use cpumgr_proto::slot::{validate_request, RawRequest, NO_PREEMPT};
use cpumgr_proto::{PeerCred, Segment};

use crate::enforce;
use crate::entry::Entry;
use crate::exits::Exits;
use crate::limits::{clean_name, share_between_users, Share, UserLimits};
use crate::outside::{self, OutsideLoad};
use crate::pidfd;
use crate::procfs;
use crate::ratelimit::Rates;
use crate::starvation::StarvationBound;
use crate::team::TeamGuard;
use crate::worklist::WorkList;

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

/// Everything the manager knows. Guarded by one mutex; the scheduler thread ticks it, the socket
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
    ticks: u64,
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
    /// Programs registered since the last step, whose arrival the policy hears of at the next.
    arrived: Vec<ProgramId>,
    /// The `/proc` files the last walk read, kept open for the next (lent to each [`Survey`]).
    files: procfs::Files,
    /// Every program's pidfd, watched by the socket thread.
    exits: Arc<Exits>,
}

/// The programs a scheduler step reads from `/proc` ([`State::survey`]), listed under the state
/// lock and read without it.
pub struct Survey {
    /// Each program to read, with the processes its last sample had.
    targets: Vec<(procfs::Target, Vec<i32>)>,
    boundary: Option<Instant>,
    files: procfs::Files,
}

impl Survey {
    /// The programs it reads.
    pub fn targets(&self) -> Vec<procfs::Target> {
        self.targets.iter().map(|(t, _)| *t).collect()
    }

    /// Reads `/proc`: a walk over every process for every program's group, or each new
    /// program's leader alone.
    pub fn read(mut self) -> Samples {
        let samples = match self.boundary {
            Some(_) => self.files.scan(&self.targets),
            None => procfs::scan_leaders(&self.targets()),
        };
        Samples { samples, boundary: self.boundary, files: self.files }
    }
}

/// What [`Survey::read`] found, for [`State::step`].
pub struct Samples {
    samples: HashMap<procfs::Target, procfs::Sample>,
    boundary: Option<Instant>,
    files: procfs::Files,
}

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
            ticks: 0,
            start: Instant::now(),
            trace,
            ticks_per_sec: procfs::ticks_per_sec(),
            owner_uid: nix::unistd::geteuid().as_raw(),
            max_programs: s.max_programs,
            share: s.share,
            user_limits: s.user_limits.clone(),
            rates: s.rates,
            kick: false,
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

    fn may_touch(&self, peer: &PeerCred, e: &Entry) -> bool {
        peer.uid == 0 || peer.uid == e.uid
    }

    fn may_administer(&self, peer: &PeerCred) -> bool {
        peer.uid == 0 || peer.uid == self.owner_uid
    }

    fn entry_for(&self, peer: &PeerCred, id: u64) -> Result<&Entry, String> {
        match self.entries.get(&ProgramId(id)) {
            Some(e) if self.may_touch(peer, e) => Ok(e),
            // The same answer whether it does not exist or belongs to someone else.
            _ => Err(format!("no program {id} of yours")),
        }
    }

    /// Answers one request from `peer`; a registration or slot request also returns the slot's
    /// descriptor to attach.
    pub fn handle(&mut self, peer: &PeerCred, req: Request) -> (Reply, Option<OwnedFd>) {
        let r = match req {
            Request::Register(reg) => return self.register(peer, reg),
            Request::OpenSlot { id } => return self.open_slot(peer, id),
            Request::OpenDoorbell { id } => return self.open_doorbell(peer, id),
            Request::Unregister { id } => self.entry_for(peer, id).map(|_| ()).map(|()| {
                self.remove(ProgramId(id), None);
                Reply::Ok
            }),
            Request::SetRequest { id, now, min, max } => self.set_request(peer, id, now, min, max),
            Request::Status => Ok(Reply::Status(self.status(peer))),
            Request::SetPolicy { spec } => self.set_policy(peer, &spec),
            Request::SetQuantum { ms } => self.set_quantum(peer, ms),
            Request::SubscribeEvents => self.subscribe(peer),
        };
        (r.unwrap_or_else(|message| Reply::Error { message }), None)
    }

    fn register(&mut self, peer: &PeerCred, reg: Registration) -> (Reply, Option<OwnedFd>) {
        match self.try_register(peer, reg, None) {
            Ok((id, fd)) => (Reply::Registered { id: id.0 }, Some(fd)),
            Err(message) => (Reply::Error { message }, None),
        }
    }

    /// Registers a program with a new slot, or with `adopted`, the slot its supervisor kept.
    fn try_register(
        &mut self,
        peer: &PeerCred,
        reg: Registration,
        adopted: Option<Segment>,
    ) -> Result<(ProgramId, OwnedFd), String> {
        let pid = reg.pid.unwrap_or(peer.pid);
        if pid <= 0 {
            return Err(format!("pid {pid} is not a process"));
        }
        if pid == 1 {
            return Err("process 1 is the system's init, not a program to manage".into());
        }
        // Stopping such a program would stop the manager, and nothing would continue it.
        if procfs::Target::of(pid).includes(std::process::id() as i32) {
            return Err(format!("process {pid} is, or leads the process group of, this manager"));
        }
        // The process is held by its pidfd from here on: its owner is read through it, and a
        // pid reused meanwhile could not be mistaken for it.
        let pidfd = pidfd::open(pid).map_err(|e| match e.raw_os_error() {
            Some(libc::ESRCH) => format!("no process {pid}"),
            _ => format!("cannot watch process {pid}: {e}"),
        })?;
        let uid = pidfd::uid(pidfd.as_fd()).or_else(|| procfs::uid_of(pid));
        let uid = uid.ok_or_else(|| format!("no process {pid}"))?;
        if peer.uid != 0 && peer.uid != uid {
            return Err(format!("process {pid} is not yours"));
        }
        if self.by_pid.contains_key(&pid) {
            return Err(format!("process {pid} is already registered"));
        }
        if self.entries.len() >= self.max_programs {
            return Err(format!("the manager already has its limit of {} programs", self.max_programs));
        }
        self.user_limits.admit(uid, self.per_user.get(&uid).copied().unwrap_or(0))?;
        let weight = self.user_limits.weight(reg.weight)?;
        let n = self.managed.len() as u32;
        let (kind, raw) = match reg.rigid {
            Some(0) => return Err("rigid 0: a rigid program needs at least 1 CPU".into()),
            Some(r) => (Kind::Rigid(r), RawRequest { now: r, min: r, max: r }),
            None => (
                Kind::Malleable,
                RawRequest { now: reg.now.unwrap_or(n), min: reg.min.unwrap_or(1), max: reg.max.unwrap_or(n) },
            ),
        };
        let mut clamps = Vec::new();
        let request = validate_request(raw, n, &mut clamps);
        for c in &clamps {
            tracing::info!(pid, "registration: {c}");
        }
        let original = enforce::affinity(pid).map_err(|e| format!("cannot read the CPUs of process {pid}: {e}"))?;
        let id = ProgramId(self.next_id);
        let segment = match adopted {
            Some(s) => {
                s.slot().init(id.0);
                // Epochs keep growing for a runtime that compares them across managers.
                self.epoch = self.epoch.max(s.slot().allocation().map_or(0, |a| a.epoch));
                s
            }
            None => Segment::create(id.0).map_err(|e| e.to_string())?,
        };
        let fd = segment.fd().try_clone_to_owned().map_err(|e| format!("slot descriptor: {e}"))?;
        self.exits.watch(id, pidfd.as_fd()).map_err(|e| format!("cannot watch process {pid}: {e}"))?;
        self.next_id += 1;
        let name = if reg.name.is_empty() { format!("pid{pid}") } else { clean_name(&reg.name) };
        let arrival = self.now();
        let entry = Entry::new(id, pid, uid, name.clone(), kind, weight, arrival, request, segment, pidfd, original);
        tracing::info!(id = id.0, pid, name = %name, request = request.now, "registered");
        self.entries.insert(id, entry);
        self.by_pid.insert(pid, id);
        self.roster += 1;
        *self.per_user.entry(uid).or_default() += 1;
        self.emit(Some(id), EventKind::Arrive { name, request: request.now });
        // The policy hears of it at the step this kick starts, with the view it then decides on:
        // a registration costs no view of every program (with 1024 registered, that was most of
        // a registration's cost).
        self.arrived.push(id);
        self.kick = true;
        Ok((id, fd))
    }

    /// The program's doorbell, to whoever may open its slot.
    fn open_doorbell(&mut self, peer: &PeerCred, id: Option<u64>) -> (Reply, Option<OwnedFd>) {
        match self.open_slot(peer, id) {
            (Reply::Slot { id }, Some(_)) => match self.worklist.descriptor(ProgramId(id)) {
                Ok(fd) => (Reply::Doorbell { id }, Some(fd)),
                Err(e) => (Reply::Error { message: format!("doorbell: {e}") }, None),
            },
            (r, _) => (r, None),
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

    fn open_slot(&mut self, peer: &PeerCred, id: Option<u64>) -> (Reply, Option<OwnedFd>) {
        let group = procfs::pgid_of(peer.pid);
        let same_program = |e: &Entry| peer.pid == e.pid || group == Some(e.pid);
        let r = match id {
            Some(id) => self.entry_for(peer, id).and_then(|e| {
                if same_program(e) || peer.uid == 0 {
                    Ok(e)
                } else {
                    Err(format!("no program {id} of yours"))
                }
            }),
            None => self
                .entries
                .values()
                .find(|e| same_program(e))
                .ok_or_else(|| format!("process {} belongs to no registered program", peer.pid)),
        }
        .and_then(|e| Ok((e.id.0, e.segment.fd().try_clone_to_owned().map_err(|e| e.to_string())?)));
        match r {
            Ok((id, fd)) => (Reply::Slot { id }, Some(fd)),
            Err(message) => (Reply::Error { message }, None),
        }
    }

    fn set_request(
        &mut self,
        peer: &PeerCred,
        id: u64,
        now: u32,
        min: Option<u32>,
        max: Option<u32>,
    ) -> Result<Reply, String> {
        self.entry_for(peer, id)?;
        let n = self.managed.len() as u32;
        let e = self.entries.get_mut(&ProgramId(id)).expect("checked above");
        if e.kind.rigid_procs().is_some() {
            return Err(format!("program {id} is rigid; its request cannot change"));
        }
        let raw = RawRequest { now, min: min.unwrap_or(e.base_request.min), max: max.unwrap_or(e.base_request.max) };
        e.base_request = validate_request(raw, n, &mut Vec::new());
        let now = e.base_request.now;
        self.emit(Some(ProgramId(id)), EventKind::Request { now });
        self.kick = true;
        Ok(Reply::Ok)
    }

    fn set_policy(&mut self, peer: &PeerCred, spec: &str) -> Result<Reply, String> {
        if !self.may_administer(peer) {
            return Err("only the manager's owner or root may change the policy".into());
        }
        let policy = policies::build(spec).map_err(|e| e.to_string())?;
        tracing::info!(from = %self.policy_spec, to = %spec, "policy changed");
        self.policy = policy;
        self.policy_spec = spec.to_string();
        self.guard = TeamGuard::new();
        let programs = self.programs();
        // Every program is an arrival for the new policy, including those not yet scheduled.
        self.arrived.clear();
        let ids: Vec<ProgramId> = programs.iter().map(|p| p.id).collect();
        let view = view!(self, &programs, self.now());
        for id in ids {
            self.policy.on_arrival(&view, id);
        }
        self.emit(None, EventKind::Policy { policy: spec.to_string() });
        self.kick = true;
        Ok(Reply::Ok)
    }

    fn subscribe(&mut self, peer: &PeerCred) -> Result<Reply, String> {
        if !self.may_administer(peer) {
            return Err("only the manager's owner or root may subscribe to its events".into());
        }
        self.outbox.get_or_insert_with(Vec::new);
        Ok(Reply::Ok)
    }

    fn set_quantum(&mut self, peer: &PeerCred, ms: f64) -> Result<Reply, String> {
        if !self.may_administer(peer) {
            return Err("only the manager's owner or root may change the quantum".into());
        }
        if !ms.is_finite() || ms <= 0.0 {
            return Err(format!("quantum {ms} ms is not a positive number"));
        }
        // A value too large for a Duration is out of range like any other (converting it would
        // panic, and a message must never stop the manager's socket thread).
        let q = Duration::try_from_secs_f64(ms / 1000.0).map_err(|_| format!("quantum {ms} ms is out of range"))?;
        check_quantum(q)?;
        self.quantum = q;
        tracing::info!(ms, "quantum changed");
        self.emit(None, EventKind::Quantum { quantum: q.as_nanos() as Nanos });
        self.kick = true;
        Ok(Reply::Ok)
    }

    /// The manager's state as `peer` may see it: root and the manager's owner see every program,
    /// anyone else only their own.
    pub fn status(&self, peer: &PeerCred) -> StatusReport {
        let all = self.may_administer(peer);
        let n = self.managed.len() as u32;
        StatusReport {
            policy: self.policy_spec.clone(),
            quantum_ms: self.quantum.as_secs_f64() * 1000.0,
            backend: self.backend.name().into(),
            cpus: self.managed.clone(),
            pid: std::process::id() as i32,
            ticks: self.ticks,
            programs: self
                .entries
                .values()
                .filter(|e| all || self.may_touch(peer, e))
                .map(|e| ProgramStatus {
                    id: e.id.0,
                    pid: e.pid,
                    name: e.name.clone(),
                    request: e.request.now,
                    count: e.count,
                    cpus: e.cpus.clone(),
                    state: e.state().into(),
                    threads: e.team(n),
                    team: e.team_mode().into(),
                    cpu_ms: e.ticks_used * 1000 / self.ticks_per_sec.max(1),
                    speedup: e.speedup.map(|s| s.speedup),
                })
                .collect(),
        }
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
        self.backend.release(e.id, e.target, &e.original, e.applied.is_some(), &e.strays());
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

    /// Re-registers a program whose supervisor kept its slot (`slot`) after losing its manager
    /// (module [`crate::adopt`]). The same program coming back to a manager that still has it
    /// (its connection was lost, not the manager) keeps its id; the supervisor released it, so
    /// it is stopped and pinned again from the next quantum. Otherwise it is registered as new,
    /// with the slot it had: whatever its runtime wrote there (request, team, speedup) stands.
    pub fn adopt(&mut self, peer: &PeerCred, reg: Registration, slot: OwnedFd) -> (Reply, Option<OwnedFd>) {
        let pid = reg.pid.unwrap_or(peer.pid);
        if let Some(e) = self.by_pid.get(&pid).and_then(|id| self.entries.get_mut(id)) {
            if !(peer.uid == 0 || peer.uid == e.uid) || !crate::adopt::same_file(&slot, e.segment.fd()) {
                return (Reply::Error { message: format!("process {pid} is already registered") }, None);
            }
            // A supervisor released its program before coming back, but a program's own client
            // (rejoin) may have sent this while a step stopped it: continue it, or no step would.
            if e.stopped {
                let _ = enforce::cont(e.target, &e.strays());
                e.held_strays.clear();
            }
            e.stopped = false;
            e.applied = None;
            self.kick = true;
            tracing::info!(id = e.id.0, pid, "the supervisor came back");
            return (Reply::Registered { id: e.id.0 }, None);
        }
        let adopted = crate::adopt::segment(slot).and_then(|s| self.try_register(peer, reg, Some(s)));
        match adopted {
            Ok((id, fd)) => {
                tracing::info!(id = id.0, pid, "re-adopted with the slot its supervisor kept");
                (Reply::Registered { id: id.0 }, Some(fd))
            }
            Err(message) => (Reply::Error { message }, None),
        }
    }

    /// Releases every program: continued, affinity widened back. The manager's last act.
    pub fn release_all(&mut self) {
        for e in self.entries.values_mut() {
            self.backend.release(e.id, e.target, &e.original, e.applied.is_some(), &e.strays());
            e.held_strays.clear();
            e.stopped = false;
            e.applied = None;
            e.segment.slot().beat(monotonic_ns(), 0);
        }
        if let Some(w) = &mut self.trace {
            let _ = w.flush();
        }
    }

    fn programs(&self) -> Vec<Program> {
        let n = self.managed.len() as u32;
        self.entries.values().map(|e| e.program(self.ticks_per_sec, n)).collect()
    }

    /// With `--yield-outside`, takes in one walk's CPU time (the programs' `inside` ticks, the
    /// manager's own, the managed CPUs' counters) and sets the CPUs offered to the policy.
    fn measure_outside(&mut self, inside: u64) {
        let Some(load) = &mut self.outside else { return };
        let own =
            std::fs::read_to_string("/proc/self/stat").ok().and_then(|t| procfs::parse_stat(&t)).map_or(0, |s| s.ticks);
        let inside = inside + own.saturating_sub(std::mem::replace(&mut self.own_ticks, own));
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let before = load.reserved();
        let reserved = load.sample(&outside::cpu_ticks(&stat, &self.managed), inside);
        if reserved != before {
            tracing::info!(reserved, "CPUs left to unmanaged processes");
            self.offered = outside::offered(&self.managed, reserved);
        }
    }

    /// One scheduler step, `/proc` read included: [`State::survey`], [`Survey::read`] and
    /// [`State::step`] in a row (the scheduler thread reads `/proc` without holding the state).
    pub fn tick(&mut self, boundary: bool) {
        let samples = self.survey(boundary.then(Instant::now)).read();
        self.step(samples);
    }

    /// What the next step needs read from `/proc`. The walk reads every process on the machine:
    /// most of a step's cost (docs/LIVE.md), so only a step at a quantum `boundary` walks; a
    /// kicked step between boundaries reuses the last walk's samples, so a released CPU reaches a
    /// waiting program in well under a millisecond, and samples only programs new since then,
    /// from their leaders alone (the next walk finds the rest of their groups). A program the
    /// manager holds stopped is not sampled either: stopped, it uses no CPU time and starts no
    /// thread, and its sample from before the stop stands until it is continued. `boundary`: the
    /// time the quantum boundary of this step was due, `None` for a step between boundaries.
    pub fn survey(&mut self, boundary: Option<Instant>) -> Survey {
        self.kick = false;
        let walk = boundary.is_some();
        let targets = self
            .entries
            .values()
            .filter(|e| e.ticks_start.is_none() || (walk && !e.stopped))
            .map(|e| (e.target, e.sample.pids.clone()))
            .collect();
        Survey { targets, boundary, files: std::mem::replace(&mut self.files, procfs::Files::new(0, Duration::ZERO)) }
    }

    /// When the policy asked to decide again before the next boundary ([`Decision::wake_at`]:
    /// VTQ-DSS's member expiries), if it did at the last step.
    pub fn wake_at(&self) -> Option<Instant> {
        self.decision.wake_at.map(|w| self.start + Duration::from_nanos(w))
    }

    /// The scheduler step on `samples`, read for [`State::survey`]'s list: programs that went
    /// meanwhile are not in the state any more, and those that came have no sample yet.
    pub fn step(&mut self, samples: Samples) {
        let now = Instant::now();
        self.ticks += 1;
        let n = self.managed.len() as u32;
        let Samples { mut samples, boundary, files } = samples;
        self.files = files;
        let walk = boundary.is_some();
        // The policy's clock: a boundary step sees the time its boundary was due, so that what
        // a policy times by the quantum (VTQ-DSS's gang) ends at the next boundary however late
        // this step ran; a step between boundaries sees the time it runs.
        let at = boundary.map_or_else(|| self.now(), |b| b.saturating_duration_since(self.start).as_nanos() as Nanos);
        let mono = monotonic_ns();
        let serial_after = self.quantum.as_nanos() as u64;
        let mut inside = 0;
        let mut teams = Vec::new();
        for e in self.entries.values_mut() {
            let before = e.ticks_used;
            e.refresh(samples.remove(&e.target), n, mono, serial_after);
            inside += e.ticks_used.saturating_sub(before);
            // Parallel teams only: a program of short regions is serial between them many
            // times a quantum, and the trace would say so at every step.
            let mode = e.team_mode();
            if matches!(mode, "rigid" | "folding") && mode != e.team_traced {
                e.team_traced = mode;
                teams.push((e.id, EventKind::Team { team: mode.into(), threads: e.segment.slot().raw_team() }));
            }
        }
        for (id, ev) in teams {
            self.emit(Some(id), ev);
        }
        if walk {
            self.measure_outside(inside);
        }
        let programs = self.programs();
        let mut decision = std::mem::take(&mut self.decision);
        decision.reset(programs.len());
        {
            let view = view!(self, &programs, at);
            for id in self.arrived.drain(..) {
                if self.entries.contains_key(&id) {
                    self.policy.on_arrival(&view, id);
                }
            }
            // A kicked step re-fits the quantum; only a boundary (`walk`) turns it.
            self.policy.decide_at(walk, &view, &mut decision);
        }
        let oversubscribe = self.policy.oversubscribes();
        let owners: Option<Vec<u32>> =
            (self.share == Share::User && !oversubscribe).then(|| self.entries.values().map(|e| e.uid).collect());
        if let Some(uids) = &owners {
            share_between_users(self.offered.len() as u32, &programs, uids, &mut decision);
        }
        // A time-sharing policy rotates on its own; every other one gets the starvation bound
        // (counted at boundaries: `walk` is a boundary step's).
        if !oversubscribe && !self.policy.time_sharing() {
            let cpus = self.offered.len() as u32;
            self.starvation.apply(&programs, cpus, self.quantum, walk, owners.as_deref(), &mut decision);
        } else {
            // Turns counted before a time-sharing policy took over mean nothing after it.
            self.starvation = StarvationBound::default();
        }
        let mut sets = std::mem::take(&mut self.sets);
        // What the policy meant each program to have: a squeezed cooperative program runs as a
        // gang of its current team, but is told this count, to size its next region to.
        let entitled: Vec<u32> = decision.allocations.iter().map(|a| a.granted()).collect();
        let mut squeezed = vec![false; programs.len()];
        if oversubscribe {
            sets.clear();
            sets.resize(programs.len(), self.managed.clone());
        } else {
            // A folding team runs on whatever it is given: never squeezed.
            let teams: Vec<Option<u32>> =
                programs.iter().zip(self.entries.values()).map(|(p, e)| p.threads.filter(|_| !e.folds())).collect();
            squeezed = self.guard.apply(&programs, &teams, self.offered.len() as u32, &mut decision);
            self.placer.place(&self.topology, &self.offered, &programs, &decision, &mut sets);
            if let Err(e) = cpumgr_core::placer::validate(&self.offered, &decision, &sets) {
                tracing::error!("invalid placement from policy {}: {e}", self.policy_spec);
            }
        }
        self.epoch += 1;
        let lease = mono + (3 * self.quantum).max(LEASE_FLOOR).as_nanos() as u64;
        let mut changed = Vec::new();
        for (i, ((e, a), set)) in self.entries.values_mut().zip(&decision.allocations).zip(&sets).enumerate() {
            let running = a.running && (a.count > 0 || oversubscribe);
            e.ran = e.running;
            let count = if running { a.count } else { 0 };
            let told = if running && squeezed[i] && e.cooperative() { entitled[i].clamp(1, count) } else { count };
            if e.count != count || e.running != running || e.cpus != *set {
                changed.push((e.id, count, set.clone(), running));
            }
            e.running = running;
            e.count = count;
            e.cpus = set.clone();
            let slot = e.segment.slot();
            slot.publish(self.epoch, told, running, set);
            let team = slot.raw_team();
            slot.set_preempt(if team > told { told } else { NO_PREEMPT });
            slot.beat(mono, lease);
        }
        self.decision = decision;
        self.sets = sets;
        for (id, count, cpus, running) in changed {
            self.emit(Some(id), EventKind::Allocate { count, cpus, running });
        }
        if oversubscribe {
            for e in self.entries.values_mut() {
                if e.stopped || e.applied.is_some() {
                    self.backend.release(e.id, e.target, &e.original, e.applied.is_some(), &e.strays());
                    e.held_strays.clear();
                    e.stopped = false;
                    e.applied = None;
                }
            }
        } else {
            self.enforce(now);
        }
        // The trace is readable while the manager runs, and complete up to the last quantum
        // if it is killed: whole lines, flushed once a quantum (no write when nothing happened).
        if let Some(w) = &mut self.trace {
            if w.flush().is_err() {
                tracing::warn!("trace file write failed; tracing stops");
                self.trace = None;
            }
        }
    }

    /// Makes the published allocation true: stop who does not run, pin who runs (after the grace
    /// period for a cooperative program that shrinks), continue who runs and was stopped. Stopping
    /// first and continuing last means two programs never share a CPU across the switch.
    fn enforce(&mut self, now: Instant) {
        let grace = self.grace.unwrap_or(self.quantum);
        let n = self.managed.len() as u32;
        // A program that gave every CPU back itself (request 0: its runtime is idle) is not
        // stopped: it could never ask again. It keeps the CPUs it last had until it does.
        for e in self.entries.values_mut().filter(|e| !e.running && !e.stopped && e.request.now > 0) {
            // Only strays on the watchdog's board: if this manager dies, whatever it stopped is
            // continued.
            match enforce::stop(e.target, &e.boarded) {
                Ok(()) => {
                    e.stopped = true;
                    e.held_strays = e.boarded.clone();
                }
                Err(err) => tracing::warn!(id = e.id.0, "cannot stop: {err}"),
            }
            e.shrink_since = None;
        }
        for e in self.entries.values_mut().filter(|e| e.running) {
            if !e.may_pin(now, grace) {
                continue;
            }
            let shrinks = e.applied.as_ref().is_some_and(|old| !old.is_subset(&e.cpus));
            let set = if shrinks && e.cooperative() && !grace.is_zero() {
                let since = *e.shrink_since.get_or_insert(now);
                let shrunk = e.folds() || e.team(n).is_some_and(|t| t <= e.count);
                if shrunk || now.duration_since(since) >= grace {
                    e.shrink_since = None;
                    e.cpus.clone()
                } else {
                    e.applied.as_ref().map(|old| old.union(&e.cpus)).unwrap_or_else(|| e.cpus.clone())
                }
            } else {
                e.shrink_since = None;
                e.cpus.clone()
            };
            // Every quantum, to catch threads started since the last one.
            if !self.backend.confine(e.id, e.pid, &e.sample, &set) {
                tracing::warn!(id = e.id.0, "cannot confine some of its processes to {set}");
            }
            e.applied = Some(set);
        }
        for e in self.entries.values_mut().filter(|e| e.running && e.stopped) {
            match enforce::cont(e.target, &e.strays()) {
                Ok(()) => {
                    e.stopped = false;
                    e.held_strays.clear();
                }
                Err(err) => tracing::warn!(id = e.id.0, "cannot continue: {err}"),
            }
        }
    }
}

fn check_quantum(q: Duration) -> Result<(), String> {
    if q < QUANTUM_RANGE.0 || q > QUANTUM_RANGE.1 {
        return Err(format!("quantum {q:?} is outside {:?} to {:?}", QUANTUM_RANGE.0, QUANTUM_RANGE.1));
    }
    Ok(())
}
