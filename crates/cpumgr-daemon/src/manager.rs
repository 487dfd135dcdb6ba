//! The manager: registered programs, the active policy, and the scheduler tick that runs every
//! quantum — snapshot the programs (slots and `/proc`), decide, place, enforce, publish, trace.
//!
//! Enforcement follows paper 000's two steps. A cooperative program (a runtime in it reads its
//! slot) is told first and given a grace period of one quantum to resize at a safe point; a
//! transparent program is held to its CPU set at once: every thread of every process of its
//! process group is pinned (re-applied each quantum to catch new threads), and a program a
//! time-sharing policy leaves out of this quantum's gang is stopped with SIGSTOP and continued with
//! SIGCONT when its turn comes.
//!
//! Never squeeze a spinning team: a transparent program with `T > 1` active threads (threads that
//! used CPU time in one of the last three quanta it ran) is given to the policy as rigid with `T`
//! processes, so it gets at least `T` CPUs or waits — it is never confined to fewer CPUs than it
//! has working threads.
//!
//! Nothing is left stopped or pinned: [`Manager::restore_all`] continues every stopped program and
//! widens every narrowed affinity back to what the program had when it registered; it runs when
//! a program unregisters, when the manager exits (cleanly or on SIGTERM/SIGINT), and on drop.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cpumgr_core::placer::Placer;
use cpumgr_core::policies;
use cpumgr_core::trace::{Event, EventKind};
use cpumgr_core::{CpuSet, Decision, Kind, Policy, Program, ProgramId, Request, SpeedupReport, Topology, View};
use cpumgr_proto::message::{ProgramStatus, Status};
use cpumgr_proto::slot::{RequestView, Slot, SEGMENT_SIZE};
use memmap2::MmapMut;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::procfs;

/// How the manager starts.
#[derive(Debug, Clone)]
pub struct Config {
    /// Policy spec (`name:key=value,...`).
    pub policy: String,
    /// Scheduler quantum.
    pub quantum: Duration,
    /// CPUs managed.
    pub cpus: CpuSet,
    /// The machine.
    pub topology: Topology,
}

/// Why a request to the manager was refused.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// The policy spec is bad.
    #[error("{0}")]
    Policy(#[from] cpumgr_core::params::ParamError),
    /// The process does not exist or is not the caller's.
    #[error("{0}")]
    Refused(String),
    /// Creating the slot failed.
    #[error("slot: {0}")]
    Io(#[from] std::io::Error),
}

struct Live {
    program: Program,
    registered: Kind,
    pid: i32,
    uid: u32,
    slot: MmapMut,
    original: CpuSet,
    /// Active threads in the last three samples taken while it ran.
    active: [u32; 3],
    thread_ticks: std::collections::HashMap<i32, u64>,
    threads_total: u32,
    ticks0: u64,
    ticks: u64,
    stopped: bool,
    pinned: Option<CpuSet>,
    published: Option<(u32, bool, CpuSet, Instant)>,
}

impl Live {
    fn slot(&self) -> &Slot {
        // SAFETY: the map is SEGMENT_SIZE bytes, page-aligned, and Slot (atomics only) fits in it;
        // the mapping lives as long as `self`.
        unsafe { &*(self.slot.as_ptr() as *const Slot) }
    }

    fn members(&self) -> Vec<i32> {
        let mut m = procfs::group_members(self.pid);
        if !m.contains(&self.pid) && procfs::alive(self.pid) {
            m.push(self.pid);
        }
        m
    }

    fn signal(&mut self, sig: Signal) {
        if killpg(Pid::from_raw(self.pid), sig).is_err() {
            let _ = nix::sys::signal::kill(Pid::from_raw(self.pid), sig);
        }
    }

    /// Continue if stopped; widen the affinity back if narrowed.
    fn restore(&mut self) {
        if self.stopped {
            self.signal(Signal::SIGCONT);
            self.stopped = false;
        }
        if self.pinned.take().is_some() {
            procfs::set_group_affinity(&self.members(), &self.original);
        }
    }
}

struct State {
    policy: Box<dyn Policy>,
    policy_spec: String,
    quantum: Duration,
    topology: Topology,
    managed: CpuSet,
    programs: BTreeMap<u64, Live>,
    next_id: u64,
    placer: Placer,
    started: Instant,
    trace: Option<std::io::BufWriter<File>>,
}

/// The live manager, shared by the socket server and the scheduler loop.
pub struct Manager {
    state: Mutex<State>,
    kick: Condvar,
    ticks_per_second: u64,
}

impl Manager {
    /// A manager with no programs yet.
    pub fn new(config: Config) -> Result<Manager, ManagerError> {
        let policy = policies::build(&config.policy)?;
        Ok(Manager {
            state: Mutex::new(State {
                policy,
                policy_spec: config.policy,
                quantum: config.quantum,
                topology: config.topology,
                managed: config.cpus,
                programs: BTreeMap::new(),
                next_id: 1,
                placer: Placer::new(),
                started: Instant::now(),
                trace: None,
            }),
            kick: Condvar::new(),
            ticks_per_second: procfs::ticks_per_second(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes trace events (JSON lines) to `file` from now on.
    pub fn trace_to(&self, file: File) {
        let mut s = self.lock();
        let mut w = std::io::BufWriter::new(file);
        let start = Event { t: 0, program: None, kind: EventKind::Start { source: "live".into(), cpus: s.managed.clone(), policy: s.policy_spec.clone(), quantum: s.quantum.as_nanos() as u64 } };
        let _ = serde_json::to_writer(&mut w, &start).map(|_| w.write_all(b"\n"));
        s.trace = Some(w);
    }

    /// Registers process `pid` (and its process group) for a caller with user id `caller_uid`.
    /// Returns the program's id and its slot's file descriptor.
    #[allow(clippy::too_many_arguments)]
    pub fn register(&self, caller_uid: u32, pid: i32, name: &str, request: RequestView, rigid: Option<u32>, weight: f64) -> Result<(u64, OwnedFd), ManagerError> {
        let owner = std::fs::metadata(format!("/proc/{pid}")).map_err(|_| ManagerError::Refused(format!("no process {pid}")))?;
        use std::os::unix::fs::MetadataExt;
        if caller_uid != 0 && owner.uid() != caller_uid {
            return Err(ManagerError::Refused(format!("process {pid} belongs to another user")));
        }
        if !(weight.is_finite() && weight > 0.0) {
            return Err(ManagerError::Refused(format!("weight {weight} is not a positive number")));
        }
        let fd = nix::sys::memfd::memfd_create(c"cpumgr-slot", nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC).map_err(std::io::Error::from)?;
        let file = File::from(fd);
        file.set_len(SEGMENT_SIZE as u64)?;
        // SAFETY: the memfd is ours and sized; the mapping is shared with the program, which only
        // ever sees atomics through `Slot`.
        let map = unsafe { MmapMut::map_mut(&file)? };
        let mut s = self.lock();
        let cpus = s.managed.len() as u32;
        let id = s.next_id;
        s.next_id += 1;
        let mut program = Program::new(id, name, request.now.clamp(1, cpus.max(1)));
        program.kind = rigid.map_or(Kind::Malleable, |n| Kind::Rigid(n.max(1)));
        program.request = Request { now: request.now.clamp(1, cpus), min: request.min.clamp(1, cpus), max: request.max.clamp(1, cpus) };
        program.weight = weight;
        program.arrival = s.started.elapsed().as_nanos() as u64;
        let original = procfs::affinity(pid).unwrap_or_else(|_| s.managed.clone());
        let ticks0 = procfs::stat(&format!("/proc/{pid}/stat")).map_or(0, |st| st.ticks);
        let registered = program.kind;
        let live = Live { program, registered, pid, uid: owner.uid(), slot: map, original, active: [0; 3], thread_ticks: Default::default(), threads_total: 0, ticks0, ticks: ticks0, stopped: false, pinned: None, published: None };
        live.slot().init(id as u32, RequestView { now: live.program.request.now, min: live.program.request.min, max: live.program.request.max });
        let t = s.started.elapsed().as_nanos() as u64;
        emit(&mut s.trace, t, Some(id), EventKind::Arrive { name: name.to_string(), request: live.program.request.now });
        s.programs.insert(id, live);
        let view_programs: Vec<Program> = s.programs.values().map(|l| l.program.clone()).collect();
        let st = &mut *s;
        let view = View { now: t, quantum: st.quantum.as_nanos() as u64, topology: &st.topology, cpus, programs: &view_programs };
        st.policy.on_arrival(&view, ProgramId(id));
        drop(s);
        tracing::info!(id, pid, name, "registered");
        self.kick.notify_all();
        Ok((id, file.into()))
    }

    /// Unregisters a program for a caller (`None`: the manager itself), restoring it.
    pub fn unregister(&self, caller_uid: Option<u32>, id: u64) -> Result<(), ManagerError> {
        let mut s = self.lock();
        let allowed = s.programs.get(&id).is_some_and(|l| caller_uid.is_none_or(|u| u == 0 || u == l.uid));
        if !allowed {
            return Err(ManagerError::Refused(format!("no program {id} of yours")));
        }
        if let Some(mut live) = s.programs.remove(&id) {
            live.restore();
            s.policy.on_exit(ProgramId(id));
            let t = s.started.elapsed().as_nanos() as u64;
            emit(&mut s.trace, t, Some(id), EventKind::Exit { status: None });
        }
        drop(s);
        // The work-list: the freed CPUs go to waiting programs now, not at the next quantum.
        self.kick.notify_all();
        Ok(())
    }

    /// Sets a program's request on a caller's behalf.
    pub fn set_request(&self, caller_uid: u32, id: u64, now: u32) -> Result<(), ManagerError> {
        let s = self.lock();
        let live = s.programs.get(&id).filter(|l| caller_uid == 0 || caller_uid == l.uid).ok_or_else(|| ManagerError::Refused(format!("no program {id} of yours")))?;
        let (r, _) = live.slot().request(u32::MAX);
        live.slot().set_request(RequestView { now: now.max(1), min: r.min.min(now.max(1)), max: r.max.max(now) });
        drop(s);
        self.kick.notify_all();
        Ok(())
    }

    /// Switches the policy; programs notice only their new allocation.
    pub fn set_policy(&self, spec: &str) -> Result<(), ManagerError> {
        let policy = policies::build(spec)?;
        let mut s = self.lock();
        s.policy = policy;
        s.policy_spec = spec.to_string();
        let ids: Vec<u64> = s.programs.keys().copied().collect();
        let progs: Vec<Program> = s.programs.values().map(|l| l.program.clone()).collect();
        let st = &mut *s;
        let t = st.started.elapsed().as_nanos() as u64;
        let view = View { now: t, quantum: st.quantum.as_nanos() as u64, topology: &st.topology, cpus: st.managed.len() as u32, programs: &progs };
        for id in ids {
            st.policy.on_arrival(&view, ProgramId(id));
        }
        emit(&mut st.trace, t, None, EventKind::Policy { policy: spec.to_string() });
        drop(s);
        tracing::info!(policy = spec, "policy switched");
        self.kick.notify_all();
        Ok(())
    }

    /// Changes the quantum.
    pub fn set_quantum(&self, quantum: Duration) {
        let mut s = self.lock();
        s.quantum = quantum;
        let t = s.started.elapsed().as_nanos() as u64;
        emit(&mut s.trace, t, None, EventKind::Quantum { quantum: quantum.as_nanos() as u64 });
        drop(s);
        self.kick.notify_all();
    }

    /// The current quantum.
    pub fn quantum(&self) -> Duration {
        self.lock().quantum
    }

    /// Number of registered programs.
    pub fn len(&self) -> usize {
        self.lock().programs.len()
    }

    /// Whether no program is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The manager's state for `status`; a non-root caller sees only their own programs.
    pub fn status(&self, caller_uid: u32) -> Status {
        let s = self.lock();
        let programs = s
            .programs
            .iter()
            .filter(|(_, l)| caller_uid == 0 || caller_uid == l.uid)
            .map(|(&id, l)| {
                let (count, running, cpus) = l.published.as_ref().map_or((0, false, String::new()), |p| (p.0, p.1, p.2.to_string()));
                ProgramStatus {
                    id,
                    pid: l.pid,
                    name: l.program.name.clone(),
                    request: l.program.request.now,
                    count,
                    cpus,
                    state: if l.stopped { "stopped" } else if running { "running" } else { "waiting" }.into(),
                    threads: l.threads_total,
                    cpu_seconds: (l.ticks - l.ticks0) as f64 / self.ticks_per_second as f64,
                }
            })
            .collect();
        Status { policy: s.policy_spec.clone(), quantum_ms: s.quantum.as_millis() as u64, cpus: s.managed.to_string(), backend: "affinity".into(), pid: std::process::id() as i32, programs }
    }

    /// Waits until the next quantum or an earlier kick (a CPU released, a program registered, a
    /// policy switched), whichever comes first.
    pub fn wait(&self, timeout: Duration) {
        let s = self.lock();
        let _ = self.kick.wait_timeout(s, timeout);
    }

    /// One quantum: snapshot, decide, place, enforce, publish. Returns when the policy wants to
    /// be called again (its wake-up or the quantum).
    pub fn tick(&self) -> Duration {
        let mut s = self.lock();
        let st = &mut *s;
        let now = st.started.elapsed().as_nanos() as u64;
        let cpus = st.managed.len() as u32;
        // Programs that ended free their CPUs now.
        let dead: Vec<u64> = st.programs.iter().filter(|(_, l)| !procfs::alive(l.pid)).map(|(&id, _)| id).collect();
        for id in dead {
            if let Some(mut live) = st.programs.remove(&id) {
                live.restore();
                st.policy.on_exit(ProgramId(id));
                emit(&mut st.trace, now, Some(id), EventKind::Exit { status: None });
                tracing::info!(id, pid = live.pid, "program ended");
            }
        }
        // Snapshot.
        for live in st.programs.values_mut() {
            let members = live.members();
            let sample = procfs::sample_group(&members, &live.thread_ticks);
            if !live.stopped {
                live.active = [sample.active, live.active[0], live.active[1]];
            }
            live.threads_total = sample.threads;
            live.ticks = sample.ticks.max(live.ticks0);
            live.thread_ticks = sample.per_thread;
            let slot = live.slot();
            let (r, clamped) = slot.request(cpus);
            if clamped {
                tracing::warn!(id = live.program.id.0, "slot request out of range, clamped");
            }
            let cooperative = slot.cooperative.load(std::sync::atomic::Ordering::Relaxed) == 1;
            let speedup = slot.speedup().map(|(c, s)| SpeedupReport { cpus: c, speedup: s });
            let p = &mut live.program;
            p.request = Request { now: r.now, min: r.min, max: r.max };
            p.speedup = speedup;
            p.cpu_time = (live.ticks - live.ticks0) * 1_000_000_000 / self.ticks_per_second;
            let team = live.active.iter().copied().max().unwrap_or(0);
            p.threads = Some(team.max(1));
            p.kind = match live.registered {
                Kind::Rigid(n) => Kind::Rigid(n),
                k if cooperative => k,
                _ if team > 1 => Kind::Rigid(team.min(cpus)),
                k => k,
            };
        }
        let programs: Vec<Program> = st.programs.values().map(|l| l.program.clone()).collect();
        let view = View { now, quantum: st.quantum.as_nanos() as u64, topology: &st.topology, cpus, programs: &programs };
        let mut decision = Decision::default();
        decision.reset(programs.len());
        st.policy.decide(&view, &mut decision);
        let unmanaged = st.policy.oversubscribes();
        let mut sets = Vec::new();
        if !unmanaged {
            st.placer.place(&st.topology, &st.managed, &programs, &decision, &mut sets);
            debug_assert!(cpumgr_core::placer::validate(&st.managed, &decision, &sets).is_ok());
        }
        // Enforce and publish.
        let grace = st.quantum;
        for (k, live) in st.programs.values_mut().enumerate() {
            let a = decision.allocations[k];
            let (count, running, set) = if unmanaged {
                (a.count, true, st.managed.clone())
            } else {
                (sets[k].len() as u32, a.running && !sets[k].is_empty(), sets[k].clone())
            };
            let changed = live.published.as_ref().is_none_or(|p| (p.0, p.1, &p.2) != (count, running, &set));
            if changed {
                live.slot().publish(count, running, set.as_words());
                live.published = Some((count, running, set.clone(), Instant::now()));
                emit(&mut st.trace, now, Some(live.program.id.0), EventKind::Allocate { count, cpus: set.clone(), running });
            }
            live.slot().manager_heartbeat.store(now / 1_000_000, std::sync::atomic::Ordering::Relaxed);
            if unmanaged {
                live.restore();
            } else if running {
                if live.stopped {
                    live.signal(Signal::SIGCONT);
                    live.stopped = false;
                }
                let cooperative = live.slot().cooperative.load(std::sync::atomic::Ordering::Relaxed) == 1;
                let due = !cooperative || live.published.as_ref().is_some_and(|p| p.3.elapsed() >= grace);
                if due {
                    procfs::set_group_affinity(&live.members(), &set);
                    live.pinned = Some(set.clone());
                }
            } else if !live.stopped {
                live.signal(Signal::SIGSTOP);
                live.stopped = true;
            }
            live.program.running = running;
            if running && !set.is_empty() {
                live.program.cpus = set;
            }
        }
        if let Some(w) = st.trace.as_mut() {
            let _ = w.flush();
        }
        let q = st.quantum;
        decision.wake_at.map_or(q, |w| Duration::from_nanos(w.saturating_sub(now)).min(q))
    }

    /// Continues every stopped program and widens every narrowed affinity; the manager's last act.
    pub fn restore_all(&self) {
        let mut s = self.lock();
        for live in s.programs.values_mut() {
            live.restore();
        }
        if let Some(w) = s.trace.as_mut() {
            let _ = w.flush();
        }
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.restore_all();
    }
}

fn emit(trace: &mut Option<std::io::BufWriter<File>>, t: u64, program: Option<u64>, kind: EventKind) {
    if let Some(w) = trace {
        let e = Event { t, program: program.map(ProgramId), kind };
        let _ = serde_json::to_writer(&mut *w, &e).map(|_| w.write_all(b"\n"));
    }
}
