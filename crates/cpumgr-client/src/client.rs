//! The client: one per program, the runtime's handle on its slot.
//!
//! [`Client::init`] never fails. It picks its [`Mode`] once:
//! - `CPUMGR_MODE=off`: [`Mode::Unmanaged`], the program's own thread count;
//! - `CPUMGR_MODE=llpc`: [`Mode::Llpc`], no manager, each region sized from the system load;
//! - otherwise it asks the manager on `CPUMGR_SOCKET` (or the default socket) for the slot of the
//!   program it belongs to (`cpumgr run` registered it), else registers itself; [`Mode::Managed`]
//!   when that works, else it says why once on stderr and runs [`Mode::Unmanaged`].
//!
//! A child forked after [`Client::init`] inherits a copy of the client but not the registration:
//! there the client acts as [`Mode::Unmanaged`] (the program's own team, no allocation, nothing
//! written to the parent's slot), and its end never unregisters the parent. A child that wants to
//! be managed makes a client of its own (in C: `cpumgr_finalize`, then `cpumgr_init`).
//!
//! Everything a runtime calls per region ([`Client::team`], [`Client::begin_region`],
//! [`Client::end_region`], [`Client::should_yield`]) is a few loads and stores on the slot plus
//! one vDSO clock read: no system call, no lock.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cpumgr_proto::slot::{monotonic_ns, Allocation, Phase};
use cpumgr_proto::transport::default_socket;
use cpumgr_proto::{Conn, Registration, Reply, Request, Segment};

use crate::fork::Process;
use crate::llpc::Llpc;
use crate::managed::{open_doorbell, Link, Managed};
use crate::say::note;

/// How long [`Client::init`] waits for the manager's first allocation, so the first region is
/// already sized to it (the moldable start).
const FIRST_ALLOCATION_WAIT: Duration = Duration::from_millis(300);

/// How long a launched program waits for its launcher's registration before registering itself.
const LAUNCHER_WAIT: Duration = Duration::from_secs(2);

/// How the client decides team sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The manager decides; the client reads its slot.
    Managed,
    /// No manager: the program keeps its own thread count.
    Unmanaged,
    /// No manager: each region is sized from the system load (paper 001).
    Llpc,
}

/// What the program tells the manager when it registers itself.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// A name for `cpumgr status` (default: the executable's name).
    pub name: Option<String>,
    /// Most threads the program will use: its own default team (default: the CPUs it may run on).
    pub max: Option<u32>,
    /// Fewest CPUs it can run on.
    pub min: Option<u32>,
    /// `CPUMGR_MODE` to use instead of the environment's.
    pub mode: Option<String>,
    /// The socket to use instead of `CPUMGR_SOCKET` or the default.
    pub socket: Option<std::path::PathBuf>,
}

enum Backend {
    Managed(Arc<Managed>),
    Unmanaged,
    Llpc(Mutex<Llpc>),
}

/// A program's handle on cpumgr.
pub struct Client {
    backend: Backend,
    max: u32,
    /// The process that made the client: only there does a managed backend act.
    process: Process,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("mode", &self.mode()).field("max", &self.max).field("id", &self.id()).finish()
    }
}

/// The CPUs this process may run on now.
pub fn allowed_cpus() -> u32 {
    nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
        .map(|set| (0..nix::sched::CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false)).count() as u32)
        .unwrap_or(1)
        .max(1)
}

impl Client {
    /// Connects the program to cpumgr as `opts` and the environment say; never fails.
    pub fn init(opts: Options) -> Client {
        let max = opts.max.filter(|&m| m > 0).unwrap_or_else(allowed_cpus);
        let mode = opts.mode.clone().or_else(|| std::env::var("CPUMGR_MODE").ok()).unwrap_or_default();
        let backend = match mode.as_str() {
            "off" => Backend::Unmanaged,
            "llpc" => Backend::Llpc(Mutex::new(Llpc::new(allowed_cpus()))),
            other => {
                if !other.is_empty() && other != "auto" {
                    note(&format!("CPUMGR_MODE={other} is not one of auto, off, llpc; using auto"));
                }
                match connect(&opts, max) {
                    Ok((m, rejoin)) => {
                        wait_first_allocation(&m.segment);
                        let m = Arc::new(m);
                        if let Some((watch, socket, reg)) = rejoin {
                            crate::rejoin::spawn(&m, watch, socket, reg);
                        }
                        Backend::Managed(m)
                    }
                    Err(why) => {
                        note(&format!("{why}; running with the program's own {max} threads"));
                        Backend::Unmanaged
                    }
                }
            }
        };
        Client { backend, max, process: Process::current() }
    }

    /// The backend that acts in the calling process: in a child forked from the one that made
    /// the client, a managed backend is the parent's registration, so the child is unmanaged.
    #[inline]
    fn backend(&self) -> &Backend {
        static FORKED: Backend = Backend::Unmanaged;
        match &self.backend {
            Backend::Managed(_) if !self.process.is_current() => &FORKED,
            backend => backend,
        }
    }

    /// Which mode the client runs in.
    pub fn mode(&self) -> Mode {
        match self.backend() {
            Backend::Managed(_) => Mode::Managed,
            Backend::Unmanaged => Mode::Unmanaged,
            Backend::Llpc(_) => Mode::Llpc,
        }
    }

    /// The program's id in the manager, when managed.
    pub fn id(&self) -> Option<u64> {
        match self.backend() {
            Backend::Managed(m) => Some(m.link().id),
            _ => None,
        }
    }

    /// The program's own default team: the most threads it uses.
    pub fn max(&self) -> u32 {
        self.max
    }

    fn slot(&self) -> Option<&cpumgr_proto::Slot> {
        match self.backend() {
            Backend::Managed(m) => Some(m.segment.slot()),
            _ => None,
        }
    }

    /// The slot, while the manager's lease on it runs at `now` (`CLOCK_MONOTONIC` ns, read only
    /// when managed): the manager renews `lease_until` every quantum, a few quanta ahead, so a
    /// lease that has run out means the manager is gone (or stopped) and its allocation is stale.
    /// The one staleness rule of every allocation read.
    #[inline]
    fn leased_slot(&self, now: impl FnOnce() -> u64) -> Option<&cpumgr_proto::Slot> {
        self.slot().filter(|s| s.lease_until() > now())
    }

    /// Tells the manager the slot's request changed, so CPUs this program released reach a
    /// waiting program at once rather than at the next quantum.
    fn ring(&self) {
        if let Backend::Managed(m) = self.backend() {
            m.ring();
        }
    }

    /// The team for the next parallel region, at most `cap` (an explicit `num_threads`, or the
    /// program's own maximum when 0): the allocated CPU count when managed (at least 1: the master
    /// always runs), the LLPC size in LLPC mode, `cap` itself when unmanaged or when the manager's
    /// lease has run out (it is gone).
    #[inline]
    pub fn team(&self, cap: u32) -> u32 {
        self.team_at(cap, monotonic_ns)
    }

    /// [`Client::team`] with the clock read by `now` (`CLOCK_MONOTONIC` ns, only read when
    /// managed, for the lease), so a runtime that also times the region reads the clock once.
    #[inline]
    pub fn team_at(&self, cap: u32, now: impl FnOnce() -> u64) -> u32 {
        let cap = if cap == 0 { self.max } else { cap };
        match self.backend() {
            Backend::Managed(_) => self.leased_slot(now).map_or(cap, |s| s.allocated_count().clamp(1, cap.max(1))),
            Backend::Unmanaged => cap,
            Backend::Llpc(l) => l.lock().unwrap_or_else(|e| e.into_inner()).team(cap),
        }
    }

    /// The whole allocation (CPU set, epoch, running), read consistently; `None` when unmanaged,
    /// before the first publication, or once the manager's lease has run out (it is gone, so its
    /// last allocation no longer holds: the same rule as [`Client::team`]).
    pub fn allocation(&self) -> Option<Allocation> {
        self.leased_slot(monotonic_ns).and_then(|s| s.allocation())
    }

    /// Tells the manager a parallel region with `team` threads starts: until it ends, the program
    /// is treated as rigid with `team` threads (never squeezed onto fewer CPUs).
    #[inline]
    pub fn begin_region(&self, team: u32) {
        self.begin_region_at(team, monotonic_ns());
    }

    /// [`Client::begin_region`] at `now_ns` (`CLOCK_MONOTONIC`), a clock read the caller already
    /// made. Rings the doorbell when the manager must act at once, not at the next quantum: a
    /// region that starts with the smaller team the manager asked for (the CPUs it gave back go
    /// to a waiting program; the manager ran the program as a gang of its old team meanwhile),
    /// and a folding team found rigid (folded, it spins on too few CPUs until it is run whole).
    #[inline]
    pub fn begin_region_at(&self, team: u32, now_ns: u64) {
        if let Some(s) = self.slot() {
            // The manager clears its request at the step the ring starts, so this rings once or
            // a few times per shrink, never in steady state.
            let shrunk = s.preempt_to().is_some_and(|n| team <= n);
            let was = s.raw_phase();
            s.set_phase(Phase::Parallel, team, now_ns);
            if shrunk || was == Phase::Folding {
                self.ring();
            }
        }
    }

    /// Tells the manager a parallel region with `team` threads runs folded onto whatever it is
    /// allocated (its threads wait cooperatively, so any allocation of one CPU or more runs it):
    /// the manager gives it CPUs as the policy decides, and runs it whole as a gang only when
    /// [`Client::fold_cost`] says folding costs more. Rings the doorbell when the region was
    /// rigid before, so the CPUs the gang held go to others at once.
    pub fn fold_region_at(&self, team: u32, now_ns: u64) {
        if let Some(s) = self.slot() {
            let was = s.raw_phase();
            s.set_phase(Phase::Folding, team, now_ns);
            if was == Phase::Parallel {
                self.ring();
            }
        }
    }

    /// Tells the manager what folding costs the running team: the CPU time its threads take per
    /// barrier folded, per mille of what they take whole (1500: half again). The manager gangs a
    /// team whose folding costs more than the others lose to its gang (docs/LIVE.md, Folding).
    /// Rings the doorbell when the program had no cost, so a gang worth running starts at once.
    pub fn fold_cost(&self, permille: u32) {
        if let Some(s) = self.slot() {
            let first = s.raw_fold_cost() == 0;
            s.set_fold_cost(permille);
            if first {
                self.ring();
            }
        }
    }

    /// Puts back the cost a region measured before (0: none), as its next instance starts: the
    /// manager reads it at its next step, no ring (a program alternating regions would ring at
    /// every one), and no write when it is already there.
    pub fn restore_fold_cost(&self, permille: u32) {
        if let Some(s) = self.slot().filter(|s| s.raw_fold_cost() != permille) {
            s.set_fold_cost(permille);
        }
    }

    /// Tells the manager the region ended and the program is serial: once that lasts a quantum, it
    /// counts as a request of one CPU until the next region.
    #[inline]
    pub fn end_region(&self) {
        self.end_region_at(monotonic_ns());
    }

    /// [`Client::end_region`] at `now_ns` (`CLOCK_MONOTONIC`), a clock read the caller already
    /// made.
    #[inline]
    pub fn end_region_at(&self, now_ns: u64) {
        if let Some(s) = self.slot() {
            s.set_phase(Phase::Serial, 1, now_ns);
        }
    }

    /// `Some(n)` when the manager asks this program, running `team` threads, to shrink to `n`
    /// at its next safe point.
    #[inline]
    pub fn should_yield(&self, team: u32) -> Option<u32> {
        self.slot().and_then(|s| s.preempt_to()).filter(|&n| n < team)
    }

    /// Sets the request: CPUs wanted at present, fewest, most.
    pub fn set_request(&self, wanted: u32, min: u32, max: u32) {
        if let Some(s) = self.slot() {
            s.set_request(wanted, min, max);
            self.ring();
        }
    }

    /// Gives every CPU back while the program has nothing to run (request 0, phase idle); a
    /// [`Client::set_request`] or the next region takes them back.
    pub fn idle(&self) {
        if let Some(s) = self.slot() {
            s.set_request(0, 0, self.max);
            s.set_phase(Phase::Idle, 0, monotonic_ns());
            self.ring();
        }
    }

    /// Reports a measured speedup on `cpus` CPUs (read by `pdpa`).
    pub fn report_speedup(&self, cpus: u32, speedup: f64) {
        if let Some(s) = self.slot() {
            s.report_speedup(cpus, speedup);
        }
    }
}

impl Drop for Client {
    /// Ends the registration this client made (or marks the launcher's slot as unknown), only in
    /// the process that made it: a forked child's copy leaves the parent's registration alone.
    fn drop(&mut self) {
        if let Backend::Managed(m) = self.backend() {
            let mut link = m.link();
            link.closing = true;
            if m.owned {
                let _ = link.conn.call(&Request::Unregister { id: link.id });
            } else {
                m.segment.slot().set_phase(Phase::Unknown, 0, monotonic_ns());
            }
        }
    }
}

/// What a self-registered program needs to register again with a restarted manager: a duplicate
/// of the connection's descriptor to watch, the socket, the registration.
type Rejoin = (OwnedFd, std::path::PathBuf, Registration);

/// Finds this program's slot: the registration `cpumgr run` made for its process group (whose
/// supervisor registers it again after a manager restart), else a registration of its own (which
/// the client registers again itself: the [`Rejoin`] part).
fn connect(opts: &Options, max: u32) -> Result<(Managed, Option<Rejoin>), String> {
    let socket = opts.socket.clone().unwrap_or_else(default_socket);
    let conn = Conn::connect(&socket).map_err(|e| format!("no manager at {} ({e})", socket.display()))?;
    conn.set_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
    let (id, fd, rejoin) = match open_own_slot(&conn) {
        Some((id, fds)) => (id, first_fd(fds)?, None),
        None => {
            let name = opts.name.clone().unwrap_or_else(|| {
                std::env::current_exe()
                    .ok()
                    .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .unwrap_or_else(|| "program".into())
            });
            let reg = Registration { name, wanted: Some(max), min: opts.min, max: Some(max), ..Default::default() };
            match conn.call(&Request::Register(reg.clone())) {
                Ok((Reply::Registered { id }, fds)) => {
                    let watch = conn.as_fd().try_clone_to_owned().map_err(|e| e.to_string())?;
                    (id, first_fd(fds)?, Some((watch, socket, reg)))
                }
                Ok((Reply::Error { message }, _)) => return Err(format!("the manager refused: {message}")),
                Ok((other, _)) => return Err(format!("the manager answered {other:?}")),
                Err(e) => return Err(e.to_string()),
            }
        }
    };
    let segment = Segment::open(fd).map_err(|e| format!("the manager's slot is unusable: {e}"))?;
    let doorbell = open_doorbell(&conn, id);
    let link = Link { conn, id, doorbell, closing: false };
    Ok((Managed::new(rejoin.is_some(), segment, link), rejoin))
}

/// The slot of the registration a launcher made for this process's group. A launched program
/// (`CPUMGR_LAUNCHED` set by `cpumgr run` and `cpumgr launch`) may start before its launcher has
/// registered it, so it asks again for up to [`LAUNCHER_WAIT`].
fn open_own_slot(conn: &Conn) -> Option<(u64, Vec<OwnedFd>)> {
    let launched = std::env::var_os("CPUMGR_LAUNCHED").is_some();
    let deadline = Instant::now() + LAUNCHER_WAIT;
    loop {
        match conn.call(&Request::OpenSlot { id: None }) {
            Ok((Reply::Slot { id }, fds)) => return Some((id, fds)),
            Ok((Reply::Error { .. }, _)) if launched && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5))
            }
            _ => return None,
        }
    }
}

fn first_fd(fds: Vec<OwnedFd>) -> Result<OwnedFd, String> {
    fds.into_iter().next().ok_or_else(|| "the manager sent no slot".to_string())
}

fn wait_first_allocation(segment: &Segment) {
    let deadline = Instant::now() + FIRST_ALLOCATION_WAIT;
    while segment.slot().allocation().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The process's client, created on first use with default [`Options`]: what the C ABI and the
/// OpenMP adapter share within one library.
pub fn global() -> &'static Client {
    static CLIENT: OnceLock<Client> = OnceLock::new();
    CLIENT.get_or_init(|| Client::init(Options::default()))
}
