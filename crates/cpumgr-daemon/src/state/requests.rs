//! The control requests a connection sends ([`State::handle`]): registration, slots and doorbells,
//! requests, the policy and the quantum, status, re-adoption after a restart.

use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use cpumgr_core::policies;
use cpumgr_core::trace::EventKind;
use cpumgr_core::{Kind, Nanos, ProgramId, View};
use cpumgr_proto::msg::{ProgramStatus, Registration, Reply, Request, StatusReport};
use cpumgr_proto::slot::{validate_request, RawRequest};
use cpumgr_proto::{PeerCred, Segment};

use super::{check_quantum, State};
use crate::entry::Entry;
use crate::limits::clean_name;
use crate::team::TeamGuard;
use crate::{enforce, pidfd, procfs};

impl State {
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
            Request::SetRequest { id, wanted, min, max } => self.set_request(peer, id, wanted, min, max),
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
            Some(r) => (Kind::Rigid(r), RawRequest { wanted: r, min: r, max: r }),
            None => (
                Kind::Malleable,
                RawRequest { wanted: reg.wanted.unwrap_or(n), min: reg.min.unwrap_or(1), max: reg.max.unwrap_or(n) },
            ),
        };
        let mut clamps = Vec::new();
        let request = validate_request(raw, n, &mut clamps);
        for c in &clamps {
            tracing::info!(pid, "registration: {c}");
        }
        let original = enforce::affinity(pid).map_err(|e| format!("cannot read the CPUs of process {pid}: {e}"))?;
        let allowed = original.intersection(&self.managed).len() as u32;
        if self.bound && allowed < kind.rigid_procs().unwrap_or(request.min) {
            tracing::info!(pid, cpus = %original, "allowed fewer CPUs than it needs at once: placed on any");
        }
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
        tracing::info!(id = id.0, pid, name = %name, request = request.wanted, "registered");
        self.entries.insert(id, entry);
        self.by_pid.insert(pid, id);
        self.roster += 1;
        *self.per_user.entry(uid).or_default() += 1;
        self.emit(Some(id), EventKind::Arrive { name, request: request.wanted });
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
        wanted: u32,
        min: Option<u32>,
        max: Option<u32>,
    ) -> Result<Reply, String> {
        self.entry_for(peer, id)?;
        let n = self.managed.len() as u32;
        let e = self.entries.get_mut(&ProgramId(id)).expect("checked above");
        if e.kind.rigid_procs().is_some() {
            return Err(format!("program {id} is rigid; its request cannot change"));
        }
        let raw = RawRequest { wanted, min: min.unwrap_or(e.base_request.min), max: max.unwrap_or(e.base_request.max) };
        e.base_request = validate_request(raw, n, &mut Vec::new());
        let wanted = e.base_request.wanted;
        self.emit(Some(ProgramId(id)), EventKind::Request { wanted });
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
            steps: self.steps,
            programs: self
                .entries
                .values()
                .filter(|e| all || self.may_touch(peer, e))
                .map(|e| ProgramStatus {
                    id: e.id.0,
                    pid: e.pid,
                    name: e.name.clone(),
                    request: e.request.wanted,
                    count: e.count,
                    cpus: e.cpus.clone(),
                    state: e.state().into(),
                    threads: e.team(n),
                    team: e.team_mode().into(),
                    fold_cost: e.fold_cost(),
                    cpu_ms: e.ticks_used * 1000 / self.ticks_per_sec.max(1),
                    speedup: e.speedup.map(|s| s.speedup),
                    allowed: (self.bound && !self.managed.is_subset(&e.original)).then(|| e.original.clone()),
                    confined_by: e.applied.as_ref().map(|_| self.backend.confined_by(e.id).into()),
                })
                .collect(),
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
}
