//! One registered program as the manager tracks it: identity and owner, its slot segment, what it
//! asked for, what it was given, and what the manager did to its processes (so that all of it can
//! be undone).

use std::os::fd::OwnedFd;
use std::time::Instant;

use cpumgr_core::{CpuSet, Kind, Nanos, Program, ProgramId, Request, SpeedupReport};
use cpumgr_proto::slot::{validate_request, validate_speedup, Clamp, Phase};
use cpumgr_proto::Segment;

use crate::own_masks::OwnMasks;
use crate::procfs::{Sample, Stray, Target};

/// Samples of the runnable-thread count kept to estimate a team (a thread blocked for a moment
/// is still part of it).
const TEAM_WINDOW: usize = 4;

/// A registered program.
#[derive(Debug)]
pub struct Entry {
    /// Its id.
    pub id: ProgramId,
    /// Its leader process.
    pub pid: i32,
    /// How its processes are addressed.
    pub target: Target,
    /// The user owning it.
    pub uid: u32,
    /// Its name.
    pub name: String,
    /// Malleable or rigid.
    pub kind: Kind,
    /// Its weight.
    pub weight: f64,
    /// When it registered, nanoseconds since the manager started.
    pub arrival: Nanos,
    /// The request from registration or `set-request`; a request written in the slot overrides it.
    pub base_request: Request,
    /// The request in force (validated).
    pub request: Request,
    /// Newest valid speedup report.
    pub speedup: Option<SpeedupReport>,
    /// The shared-memory slot.
    pub segment: Segment,
    /// A pidfd of the leader, readable when it exits.
    pub pidfd: OwnedFd,
    /// The CPUs its processes could use when first seen: the leader's affinity at registration,
    /// with each process's own mask read at its first confinement (the tasks of a job step that
    /// Slurm binds one by one). Its outer bound ([`Entry::bound`]), and what a thread without a
    /// mask of its own ([`Entry::masks`]) gets back on release.
    pub original: CpuSet,
    /// Each process's own affinity, read at its first confinement and given back on release.
    pub masks: OwnMasks,
    /// CPUs allocated this quantum.
    pub cpus: CpuSet,
    /// CPU count allocated this quantum.
    pub count: u32,
    /// Whether it runs this quantum.
    pub running: bool,
    /// Whether it ran in the previous quantum.
    pub ran: bool,
    /// Whether the manager has it stopped (`SIGSTOP`).
    pub stopped: bool,
    /// The affinity last applied to its threads, if any.
    pub applied: Option<CpuSet>,
    /// Since when a shrink of its CPUs has been published but not yet forced.
    pub shrink_since: Option<Instant>,
    /// When it first ran under this manager (continued, not waiting): its affinity is left as it
    /// was until its runtime attaches to the slot or it has run a grace period, see
    /// [`Entry::may_pin`].
    pub first_ran: Option<Instant>,
    /// Runnable-thread counts of the last quanta it ran in.
    team_window: [u32; TEAM_WINDOW],
    team_at: usize,
    /// The latest `/proc` sample.
    pub sample: Sample,
    /// CPU ticks of its processes when first sampled.
    pub ticks_start: Option<u64>,
    /// CPU ticks used so far, as of the last sample.
    pub ticks_used: u64,
    /// What validation changed in its slot last time, to log each kind of change once.
    pub last_clamps: Vec<Clamp>,
    /// Its processes outside its group on the watchdog's board: the ones a stop may reach.
    pub boarded: Vec<Stray>,
    /// The processes outside its group its last stop reached: continued with whatever the
    /// latest scan finds, even if they have left its tree since (their launcher died).
    pub held_strays: Vec<Stray>,
    /// The last parallel [`Entry::team_mode`] the trace was told (`rigid`, `folding`).
    pub team_traced: &'static str,
}

impl Entry {
    /// A new entry; its slot is already created and initialised.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: ProgramId,
        pid: i32,
        uid: u32,
        name: String,
        kind: Kind,
        weight: f64,
        arrival: Nanos,
        request: Request,
        segment: Segment,
        pidfd: OwnedFd,
        original: CpuSet,
    ) -> Entry {
        Entry {
            id,
            pid,
            target: Target::of(pid),
            uid,
            name,
            kind,
            weight,
            arrival,
            base_request: request,
            request,
            speedup: None,
            segment,
            pidfd,
            original,
            masks: OwnMasks::default(),
            cpus: CpuSet::new(),
            count: 0,
            running: false,
            ran: false,
            stopped: false,
            applied: None,
            shrink_since: None,
            first_ran: None,
            team_window: [0; TEAM_WINDOW],
            team_at: 0,
            sample: Sample::default(),
            ticks_start: None,
            ticks_used: 0,
            last_clamps: Vec::new(),
            boarded: Vec::new(),
            held_strays: Vec::new(),
            team_traced: "",
        }
    }

    /// Takes in a `/proc` sample and the program's slot, validating every value read from it.
    /// `now_ns` is `CLOCK_MONOTONIC`; a cooperative program that has been serial for `serial_after`
    /// nanoseconds or more asks for one CPU until its next parallel region (paper 000's ltomcatv
    /// pattern: a runtime says so at every region boundary, the manager decides when it counts, so a
    /// program with many short regions keeps its CPUs between them).
    pub fn refresh(&mut self, sample: Option<Sample>, managed: u32, now_ns: u64, serial_after: u64) {
        if let Some(s) = sample {
            let start = *self.ticks_start.get_or_insert(s.ticks);
            // Exited children take their ticks with them: keep the highest total seen.
            self.ticks_used = self.ticks_used.max(s.ticks.saturating_sub(start));
            // Runnable counts mean something only while the program is not held stopped.
            if !self.stopped && s.stopped == 0 {
                self.team_window[self.team_at % TEAM_WINDOW] = s.runnable;
                self.team_at += 1;
            }
            // A sample of the leaders alone (a kicked step's) does not look for strays: the
            // last full scan's stand until the next.
            let strays = std::mem::take(&mut self.sample.strays);
            self.sample = s;
            if self.sample.leaders_only {
                self.sample.strays = strays;
            }
        }
        let slot = self.segment.slot();
        let mut clamps = Vec::new();
        self.request = match slot.raw_request() {
            Some(raw) => validate_request(raw, managed, &mut clamps),
            None => self.base_request,
        };
        let beat = slot.raw_heartbeat();
        if beat != 0 && slot.raw_phase() == Phase::Serial && now_ns.saturating_sub(beat) >= serial_after {
            self.request.wanted = self.request.min.max(1).min(self.request.max);
        }
        if let Some(raw) = slot.raw_speedup() {
            self.speedup = validate_speedup(raw, managed, &mut clamps);
        }
        // Logged when the kinds of rejection change, not their values: a runtime whose measured
        // speedup is a little superlinear, or a program writing a new bad value every quantum,
        // gets one line, not one per quantum.
        if !clamps.iter().map(std::mem::discriminant).eq(self.last_clamps.iter().map(std::mem::discriminant)) {
            for c in &clamps {
                tracing::warn!(program = self.id.0, pid = self.pid, "slot value rejected: {c}");
            }
            self.last_clamps = clamps;
        }
    }

    /// Whether the program cooperates: its runtime beats in its slot.
    pub fn cooperative(&self) -> bool {
        self.segment.slot().raw_heartbeat() != 0
    }

    /// Its processes outside its group to continue or release: those its last stop reached and
    /// those the latest scan found.
    pub fn strays(&self) -> Vec<Stray> {
        let mut all = self.held_strays.clone();
        all.extend(self.sample.strays.iter().filter(|s| !self.held_strays.contains(s)));
        all
    }

    /// How its team runs, as its runtime says in its slot (the words of `status` and the trace's
    /// `team` events); empty when it does not say.
    pub fn team_mode(&self) -> &'static str {
        if !self.cooperative() {
            return "";
        }
        match self.segment.slot().raw_phase() {
            Phase::Serial => "serial",
            Phase::Parallel => "rigid",
            Phase::Folding => "folding",
            Phase::Idle => "idle",
            Phase::Unknown => "",
        }
    }

    /// Whether its team folds onto any allocation (its runtime says [`Phase::Folding`]): it is
    /// given CPUs as the policy decides, ganged only when folding costs it more than a gang
    /// ([`crate::team`]), and pinned at once when it shrinks.
    pub fn folds(&self) -> bool {
        self.cooperative() && self.segment.slot().raw_phase() == Phase::Folding
    }

    /// How many times the CPU time per barrier its threads take whole they take folded, as its
    /// runtime measured; `None` when its team does not fold or has not measured it.
    pub fn fold_cost(&self) -> Option<f64> {
        let c = self.segment.slot().raw_fold_cost();
        (c > 0 && self.folds()).then(|| c as f64 / 1000.0)
    }

    /// Whether its affinity may be narrowed yet. An OpenMP runtime counts the CPUs of its initial
    /// mask once, at start, and libgomp then throttles its spin-waiting for good whenever its team
    /// outnumbers that count: a program pinned to one CPU before its runtime started barriers like
    /// a passive one (a futex wake per barrier) even after it is given more CPUs, three times
    /// slower for a barrier-heavy stencil on this machine. So a new program keeps the CPUs it was
    /// started with until its runtime attaches to the slot (the OpenMP adapter does so at its
    /// first parallel region, after the runtime started; it sizes that team to its allocation) or
    /// until it has run `grace`, after which an unmodified program is pinned as usual.
    pub fn may_pin(&mut self, now: Instant, grace: std::time::Duration) -> bool {
        let since = *self.first_ran.get_or_insert(now);
        self.cooperative() || now.duration_since(since) >= grace
    }

    /// The team it needs at once: what its runtime reports when it cooperates, else the most
    /// runnable threads `/proc` showed in its recent quanta; `None` before any sample.
    pub fn team(&self, managed: u32) -> Option<u32> {
        let reported = self.segment.slot().raw_team();
        if reported > 0 && self.cooperative() {
            return Some(reported.min(managed.max(1)));
        }
        if self.team_at == 0 {
            return None;
        }
        let seen = self.team_at.min(TEAM_WINDOW);
        self.team_window[..seen].iter().copied().max().filter(|&t| t > 0)
    }

    /// The program as policies see it.
    pub fn program(&self, ticks_per_sec: u64, managed: u32) -> Program {
        let mut p = Program::new(self.id.0, self.name.as_str(), 1);
        p.arrival = self.arrival;
        self.program_into(ticks_per_sec, managed, &mut p);
        p
    }

    /// [`Entry::program`] into `p`, reusing its allocations (its CPU set's words).
    pub fn program_into(&self, ticks_per_sec: u64, managed: u32, p: &mut Program) {
        if p.id != self.id {
            *p = self.program(ticks_per_sec, managed);
            return;
        }
        p.kind = self.kind;
        p.request = self.request;
        p.weight = self.weight;
        p.cpu_time = self.ticks_used * (1_000_000_000 / ticks_per_sec.max(1));
        p.speedup = self.speedup;
        p.cpus.clone_from(&self.cpus);
        p.running = self.ran;
        p.threads = self.team(managed);
    }

    /// The CPUs of `offered` it may be given, when they are not all of them: the CPUs it is
    /// allowed ([`Entry::original`]) bound it as long as they hold the CPUs it needs at once (a
    /// rigid team whole, its minimum request); a program registered wider than the CPUs its
    /// tasks are bound to (a step whose ranks Slurm bound to fewer CPUs than it granted) is
    /// trusted to be that wide. `p` (this program as the policy sees it) is capped to match: its
    /// request and its team at the bound's size, so that policies and the team guard never give
    /// it more CPUs than it may use.
    pub fn bound(&self, offered: &CpuSet, p: &mut Program) -> Option<CpuSet> {
        if offered.is_subset(&self.original) {
            return None;
        }
        let within = self.original.intersection(offered);
        let cap = within.len() as u32;
        let least = self.kind.rigid_procs().unwrap_or(self.request.min).max(1);
        if cap < least {
            return None;
        }
        let r = &mut p.request;
        (r.wanted, r.min, r.max) = (r.wanted.min(cap), r.min.min(cap), r.max.min(cap));
        p.threads = p.threads.map(|t| t.min(cap));
        Some(within)
    }

    /// `running`, `stopped` or `waiting`, for `status`.
    pub fn state(&self) -> &'static str {
        if self.stopped {
            "stopped"
        } else if self.running {
            "running"
        } else {
            "waiting"
        }
    }
}
