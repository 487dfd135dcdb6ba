//! cpumgr's live manager (paper 000 §3 and §5, paper 003 §3): the process that owns the
//! scheduling decisions for the programs registered with it, talks with them through one
//! shared-memory slot each, and makes its decisions true on real processes. (The papers and
//! their sections: docs/PAPERS.md.)
//!
//! Three threads share one [`State`]: the scheduler thread steps every quantum (or at once when a
//! CPU is released or requested), the socket thread ([`server`]) answers control requests and
//! watches every program's pidfd, and the [`worklist`] thread kicks the scheduler when a program
//! rings its doorbell after releasing CPUs through its slot. [`Manager`] starts them and, however
//! it ends (shutdown, drop, panic unwinding), leaves every program continued and unpinned.

#![warn(missing_docs)]

pub mod adopt;
pub mod affinity;
pub mod cgroup_owner;
pub mod chaos;
pub mod cpuset;
pub mod enforce;
pub mod entry;
pub mod exits;
pub mod limits;
pub mod metrics;
pub mod outside;
pub mod own_masks;
pub mod pidfd;
pub mod procfs;
pub mod ratelimit;
pub mod server;
pub mod starvation;
pub mod state;
pub mod team;
pub mod watchdog;
pub mod worklist;

use std::fs::{File, OpenOptions};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cpumgr_proto::{Conn, Doorbell, Listener};

pub use state::{default_socket, Settings, State};

/// What the manager's threads share.
pub struct Shared {
    state: Mutex<State>,
    /// Wakes the scheduler thread before its next boundary.
    pub wake: Condvar,
    /// Set once, when the manager shuts down.
    pub shutdown: AtomicBool,
    /// Rung once, when the manager shuts down, and never drained: the socket and work-list
    /// threads wait on it beside their descriptors, so they stop at once.
    pub stopping: Doorbell,
    /// How long each scheduler step took (for `--metrics`).
    pub step_durations: metrics::StepHistogram,
    /// Programs registered so far (for `--metrics`).
    pub registrations: AtomicU64,
    /// The fault injector, in chaos mode (`--chaos`).
    pub chaos: Option<chaos::Chaos>,
    /// The process that releases every program if this one dies ([`watchdog`]).
    pub watchdog: Option<watchdog::Watchdog>,
}

impl Shared {
    /// Locks the state, surviving a panicked holder (the state stays usable).
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Why a manager could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Another manager answers on the socket.
    #[error("a manager already serves {0}")]
    AlreadyRunning(PathBuf),
    /// Bad settings.
    #[error("{0}")]
    Settings(String),
    /// The system refused.
    #[error("{path}: {err}")]
    Io {
        /// The path concerned.
        path: PathBuf,
        /// The error.
        err: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StartError + '_ {
    move |err| StartError::Io { path: path.to_path_buf(), err }
}

/// A running manager.
pub struct Manager {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    socket: PathBuf,
    _lock: File,
}

/// Takes the manager lock that sits next to the socket (`SOCKET.lock`), held for the manager's
/// whole life and dropped by the kernel even when it is killed: whoever holds it owns the socket
/// path. `None` when another live manager holds it.
fn take_lock(socket: &Path) -> Result<Option<File>, StartError> {
    let path = socket.with_extension("lock");
    let f = OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(io_err(&path))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Ok(None);
    }
    Ok(Some(f))
}

impl Manager {
    /// Starts a manager serving `socket`. A socket file left by a dead manager is replaced; a live
    /// one is [`StartError::AlreadyRunning`].
    pub fn start(socket: &Path, settings: &Settings) -> Result<Manager, StartError> {
        if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        }
        let Some(lock) = take_lock(socket)? else {
            return Err(StartError::AlreadyRunning(socket.to_path_buf()));
        };
        if let Ok(meta) = std::fs::symlink_metadata(socket) {
            if Conn::connect(socket).is_ok() {
                return Err(StartError::AlreadyRunning(socket.to_path_buf()));
            }
            // Only a dead manager's socket is replaced: a mistyped path must not delete a file.
            use std::os::unix::fs::FileTypeExt;
            if !meta.file_type().is_socket() {
                return Err(StartError::Io {
                    path: socket.to_path_buf(),
                    err: std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "exists and is not a socket; not replacing it",
                    ),
                });
            }
            std::fs::remove_file(socket).map_err(io_err(socket))?;
        }
        let state = State::new(settings).map_err(StartError::Settings)?;
        let escape = state.cgroup_exit().and_then(|d| OpenOptions::new().write(true).open(d.join("cgroup.procs")).ok());
        let watchdog = watchdog::Watchdog::spawn(settings.max_programs, escape.map(OwnedFd::from))
            .inspect_err(|e| {
                tracing::error!(
                    "no watchdog ({e}): if this manager is killed, programs without a supervisor stay as it left them"
                )
            })
            .ok();
        let listener = Listener::bind(socket).map_err(io_err(socket))?;
        // Everyone may connect; every request is checked against the peer's credentials.
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o666));
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
            stopping: Doorbell::new().map_err(io_err(socket))?,
            step_durations: metrics::StepHistogram::default(),
            registrations: AtomicU64::new(0),
            chaos: settings.chaos.clone().map(chaos::Chaos::new),
            watchdog,
        });
        let s1 = shared.clone();
        let scheduler = std::thread::Builder::new()
            .name("cpumgr-sched".into())
            .spawn(move || schedule(s1))
            .map_err(io_err(socket))?;
        let s2 = shared.clone();
        let server = std::thread::Builder::new()
            .name("cpumgr-socket".into())
            .spawn(move || server::serve(s2, listener))
            .map_err(io_err(socket))?;
        let (s3, worklist) = (shared.clone(), shared.lock().worklist());
        let worklist = std::thread::Builder::new()
            .name("cpumgr-worklist".into())
            .spawn(move || worklist::serve(s3, worklist))
            .map_err(io_err(socket))?;
        tracing::info!(socket = %socket.display(), "manager started");
        Ok(Manager { shared, threads: vec![scheduler, server, worklist], socket: socket.to_path_buf(), _lock: lock })
    }

    /// Serves OpenMetrics at `http://ADDR/metrics` until the manager stops; returns the address
    /// bound (port 0 picks a free port). A non-loopback address needs `allow_remote`.
    pub fn serve_metrics(&mut self, addr: SocketAddr, allow_remote: bool) -> Result<SocketAddr, StartError> {
        metrics::check_addr(addr, allow_remote).map_err(StartError::Settings)?;
        let path = PathBuf::from(addr.to_string());
        let (listener, bound) = metrics::bind(addr).map_err(io_err(&path))?;
        let shared = self.shared.clone();
        let t = std::thread::Builder::new()
            .name("cpumgr-metrics".into())
            .spawn(move || metrics::serve(shared, listener))
            .map_err(io_err(&path))?;
        self.threads.push(t);
        tracing::info!(%bound, "serving metrics");
        Ok(bound)
    }

    /// How many programs are registered.
    pub fn programs(&self) -> usize {
        self.shared.lock().len()
    }

    /// Waits until no program is registered, at most `timeout`; how many are left. A program's
    /// end kicks the scheduler, which wakes this wait with it.
    pub fn wait_for_programs(&self, timeout: Duration) -> usize {
        let state = self.shared.lock();
        let (state, _) =
            self.shared.wake.wait_timeout_while(state, timeout, |s| !s.is_empty()).unwrap_or_else(|e| e.into_inner());
        state.len()
    }

    /// The socket it serves.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Stops its threads, releases every program (continued, affinity widened back) and removes
    /// the socket.
    pub fn shutdown(self) {
        drop(self)
    }

    fn stop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        self.shared.stopping.ring();
        self.shared.wake.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.shared.lock().release_all();
        let _ = std::fs::remove_file(&self.socket);
        tracing::info!("manager stopped; every program released");
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How many times the state was held for a kicked step must pass before the next kicked step
/// (at most a tenth of a quantum).
const KICK_SPACING: u32 = 4;

/// The scheduler thread: a step at every quantum boundary, at once when kicked, and when the
/// policy asked (`Decision::wake_at`). `/proc` is
/// read without the state held ([`State::survey`]): a walk of every process on a busy machine
/// takes milliseconds, in which requests and program exits are served.
fn schedule(shared: Arc<Shared>) {
    let mut next = Instant::now();
    let mut boundary = true;
    let mut published = None;
    let mut state = shared.lock();
    while !shared.shutdown.load(Ordering::Acquire) {
        if let Some(chaos) = &shared.chaos {
            drop(state);
            std::thread::sleep(chaos.quantum_delay());
            state = shared.lock();
        }
        let began = Instant::now();
        // A boundary step runs at the time its boundary was due, unless it is a quantum or more
        // late (the schedule starts over from now then, below).
        let late = began.saturating_duration_since(next) >= state.quantum();
        let survey = state.survey(boundary.then_some(if late { began } else { next }));
        drop(state);
        let samples = survey.read();
        state = shared.lock();
        let locked = Instant::now();
        // Listed before the step that may stop or pin them: at every boundary and whenever the
        // list changed. A watchdog someone killed is started again before every step, since any
        // step may stop or pin.
        if let Some(w) = &shared.watchdog {
            if boundary || published != Some(state.roster()) {
                let records = w.publish(state.board());
                state.boarded(records);
                published = Some(state.roster());
            } else {
                w.revive();
            }
        }
        state.step_with(samples);
        let now = Instant::now();
        shared.step_durations.observe(now - began);
        if let Some(chaos) = &shared.chaos {
            chaos::strike(chaos, &state);
        }
        // Only a boundary step moves the next boundary: kicked steps, however many, do not put it
        // off (a storm of requests would otherwise leave programs without a walk of `/proc`).
        if boundary {
            next += state.quantum();
            if next < now {
                next = now + state.quantum();
            }
        }
        // A kick (a CPU freed or asked for, a team's verdict) is served at once, but no sooner
        // than `KICK_SPACING` times as long as the state was held for the last step after it, up
        // to a tenth of a quantum: under a storm of requests one step serves a batch of them, and
        // the scheduler holds the state at most a fifth of the time between boundaries; a step
        // made long by its enforcement (a cpuset cgroup shrunk to CPU 0 takes the kernel ~3.5 ms
        // here) still leaves the next kick well inside the quantum.
        let earliest = now + ((now - locked) * KICK_SPACING).min(state.quantum() / 10);
        loop {
            if shared.shutdown.load(Ordering::Acquire) {
                return;
            }
            let now = Instant::now();
            boundary = now >= next;
            // The policy's own wake-up (VTQ-DSS's member expiries) is a step between boundaries.
            let wake = state.wake_at();
            if boundary || (state.kick && now >= earliest) || wake.is_some_and(|w| now >= w) {
                break;
            }
            let until = if state.kick { earliest.min(next) } else { next };
            let until = wake.map_or(until, |w| until.min(w));
            state = shared
                .wake
                .wait_timeout(state, (until - now).min(Duration::from_secs(1)))
                .map(|r| r.0)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}
