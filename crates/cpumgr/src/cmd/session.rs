//! What `cpumgr run` and `cpumgr attach` share: one program's session with the manager.
//!
//! A session connects to the manager, or starts one inside this process when none answers (a
//! later `run` or `attach` joins it); registers the program; watches the connection while the
//! program lives, and if the manager disappears (even by SIGKILL, the kernel closes its end)
//! releases the program itself (continued, affinity widened back), so no program is left stopped
//! or pinned by a dead manager; and at the end unregisters it and, for an embedded manager, serves
//! the programs that joined until they have ended too.
//!
//! A manager that is alive but not working (stopped by a signal, hung) does not close its end: the
//! session reads the lease the manager renews in the program's slot every quantum, and once it
//! has run out by [`FROZEN_AFTER`] releases the program the same way until the manager renews it
//! again (the manager then narrows and stops it anew at its next changes).
//!
//! A session keeps its program's slot descriptor and registration. While it has no manager it
//! tries the socket every [`RECONNECT_EVERY`]; when a manager answers again (restarted, or the same
//! one after a lost connection), it registers the program again with that slot attached, and the
//! manager re-adopts it as it is (`cpumgr_daemon::adopt`): the program never stops running.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use cpumgr_core::CpuSet;
use cpumgr_daemon::procfs::Target;
use cpumgr_daemon::{enforce, Manager, StartError};
use cpumgr_proto::slot::monotonic_ns;
use cpumgr_proto::{Conn, Registration, Reply, Request, Segment};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::Signal;

use super::daemon;
use crate::input::InputError;

/// What a program asks of the manager (the options `run` and `attach` share).
#[derive(Debug, Clone, Parser)]
#[group(skip)]
pub struct ProgramArgs {
    /// CPUs wanted (default: every managed CPU).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub request: Option<u32>,
    /// Fewest CPUs it can run on.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub min: Option<u32>,
    /// Most CPUs it can use.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub max: Option<u32>,
    /// A rigid program of exactly N processes or threads.
    #[arg(long, conflicts_with_all = ["request", "min", "max"], value_parser = clap::value_parser!(u32).range(1..))]
    pub rigid: Option<u32>,
    /// Relative weight.
    #[arg(long)]
    pub weight: Option<f64>,
    /// Name shown by `status` (default: the command).
    #[arg(long)]
    pub name: Option<String>,
}

impl ProgramArgs {
    /// Checks what the options cannot say alone, before anything runs: `--min` not above
    /// `--max` or `--request`, and a positive weight.
    pub fn check(&self) -> anyhow::Result<()> {
        for (name, bound) in [("--max", self.max), ("--request", self.request)] {
            if let (Some(min), Some(b)) = (self.min, bound) {
                if min > b {
                    return Err(InputError::new(format!("--min {min} is above {name} {b}")));
                }
            }
        }
        if let Some(w) = self.weight.filter(|w| !(w.is_finite() && *w > 0.0)) {
            return Err(InputError::new(format!("--weight {w}: must be a positive number")));
        }
        Ok(())
    }

    /// Whether no option sizes the program (`--request`, `--min`, `--max`, `--rigid`), so what
    /// its command shows (an MPI launcher's rank count) may.
    pub fn says_nothing_of_size(&self) -> bool {
        self.request.is_none() && self.min.is_none() && self.max.is_none() && self.rigid.is_none()
    }

    /// The registration of process `pid`, named `default_name` unless `--name` says otherwise.
    pub fn registration(&self, pid: i32, default_name: &str) -> Registration {
        Registration {
            pid: Some(pid),
            name: self.name.clone().unwrap_or_else(|| default_name.chars().take(64).collect()),
            wanted: self.request,
            min: self.min,
            max: self.max,
            rigid: self.rigid,
            weight: self.weight,
        }
    }
}

/// The signals a session catches (`run` forwards them to its program, `attach` ends on them).
const CAUGHT: [i32; 3] = [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP];

/// How often a session without a manager tries the socket again.
pub const RECONNECT_EVERY: Duration = Duration::from_millis(100);

/// How long past the lease in its slot (three quanta from the manager's last step) a session
/// waits before it takes the manager for frozen and releases its program: long enough that a
/// manager slowed by a loaded machine is not mistaken for one that stopped.
pub const FROZEN_AFTER: Duration = Duration::from_secs(2);

/// One program's session with the manager.
pub struct Session {
    socket: PathBuf,
    /// The control connection; `None` once the manager is gone.
    link: Option<Conn>,
    /// The program's id while it is registered.
    id: Option<u64>,
    /// The registration and slot kept to come back to a new manager, until unregistered.
    kept: Option<(Registration, Option<OwnedFd>)>,
    /// The kept slot mapped, to read the manager's lease.
    slot: Option<Segment>,
    /// Whether the program was released because the lease ran out, and the manager has not
    /// renewed it since.
    frozen: bool,
    /// When to try the socket again while there is no manager.
    retry_at: Instant,
    /// The manager started here, if none answered.
    embedded: Option<Manager>,
    /// One flag per caught signal, set by its handler.
    flags: Vec<(i32, Arc<AtomicBool>)>,
}

impl Session {
    /// Connects to the manager on the socket of `manager` (or starts one here with its settings)
    /// and starts catching SIGINT, SIGTERM and SIGHUP.
    pub fn open(manager: &daemon::Args) -> anyhow::Result<Session> {
        let resolved = manager.resolve()?;
        let (conn, embedded) = connect_or_embed(&resolved)?;
        Session::on(conn, embedded, resolved.socket)
    }

    /// As [`Session::open`], but never starts a manager: an error when none answers on the socket
    /// (`cpumgr step`: a node's manager is the system's).
    pub fn join(manager: &daemon::Args) -> anyhow::Result<Session> {
        let socket = manager.resolve()?.socket;
        let conn =
            Conn::connect(&socket).map_err(|e| anyhow::anyhow!("no manager answers on {} ({e})", socket.display()))?;
        Session::on(conn, None, socket)
    }

    /// A session on the connection `conn` to the manager on `socket` (`embedded` when started
    /// here), catching SIGINT, SIGTERM and SIGHUP.
    fn on(conn: Conn, embedded: Option<Manager>, socket: PathBuf) -> anyhow::Result<Session> {
        conn.set_timeout(Some(Duration::from_secs(5)))?;
        let flags: Vec<(i32, Arc<AtomicBool>)> =
            CAUGHT.iter().map(|&s| (s, Arc::new(AtomicBool::new(false)))).collect();
        for (sig, flag) in &flags {
            signal_hook::flag::register(*sig, flag.clone())?;
        }
        Ok(Session {
            socket,
            link: Some(conn),
            id: None,
            kept: None,
            slot: None,
            frozen: false,
            retry_at: Instant::now(),
            embedded,
            flags,
        })
    }

    /// The manager's socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// A descriptor of the program's slot, once registered: what a runtime supervised here (the
    /// jobserver of `cpumgr run`) reads its allocation from.
    pub fn slot_fd(&self) -> Option<OwnedFd> {
        self.kept.as_ref()?.1.as_ref()?.try_clone().ok()
    }

    /// Registers a program; a refusal is the manager's message. A registration lost with its
    /// connection is tried again while the program runs (see [`Session::watch`]).
    pub fn register(&mut self, reg: Registration) -> Result<(), String> {
        self.kept = Some((reg, None));
        self.reregister()
    }

    /// Sends the kept registration, with the kept slot if any, on the link; keeps the id and
    /// slot on success, forgets the registration on a refusal, drops the link when it fails.
    fn reregister(&mut self) -> Result<(), String> {
        let (Some(c), Some((reg, slot))) = (&self.link, &self.kept) else { return Err("the manager is gone".into()) };
        let fds: Vec<_> = slot.iter().map(|f| f.as_fd()).collect();
        let reply = c.call_with(&Request::Register(reg.clone()), &fds);
        match reply {
            Ok((Reply::Registered { id }, fds)) => {
                self.id = Some(id);
                if let (Some((_, slot @ None)), Some(fd)) = (&mut self.kept, fds.into_iter().next()) {
                    *slot = Some(fd);
                }
                if self.slot.is_none() {
                    let fd = self.kept.as_ref().and_then(|(_, fd)| fd.as_ref()?.try_clone().ok());
                    self.slot = fd.and_then(|fd| Segment::open(fd).ok());
                }
                Ok(())
            }
            Ok((Reply::Error { message }, _)) => {
                self.kept = None;
                Err(message)
            }
            Ok((other, _)) => {
                self.kept = None;
                Err(format!("unexpected reply {other:?}"))
            }
            Err(e) => {
                self.link = None;
                Err(format!("{e} (will register again when a manager answers)"))
            }
        }
    }

    /// Whether a registration is kept to be sent again: it was refused by no manager, only lost
    /// with its connection (or the program is registered).
    pub fn pending(&self) -> bool {
        self.kept.is_some()
    }

    /// A caught signal not yet taken, if any.
    pub fn take_signal(&self) -> Option<Signal> {
        self.flags
            .iter()
            .find(|(_, f)| f.swap(false, Ordering::AcqRel))
            .and_then(|(sig, _)| Signal::try_from(*sig).ok())
    }

    /// Unregisters the program: the manager continues it, widens its affinity back and gives its
    /// CPUs to the others.
    pub fn unregister(&mut self) {
        self.kept = None;
        if let (Some(c), Some(id)) = (self.link.as_ref(), self.id.take()) {
            let _ = c.call(&Request::Unregister { id });
        }
    }

    /// Waits up to 20 ms on the manager's connection, returning early when `ended` (the
    /// supervised process's pidfd) becomes readable: the process exited, and the caller learns it
    /// at once rather than at the next lap. If the manager is gone, releases `target` (continued,
    /// every thread's affinity set to `original`) and carries on unmanaged, trying the socket
    /// every [`RECONNECT_EVERY`] to register the program again with a new manager. A manager that
    /// stopped renewing the slot's lease gets the program released too (once), and keeps its
    /// connection. True when `ended` fired.
    pub fn watch(&mut self, target: Target, original: &CpuSet, ended: Option<&OwnedFd>) -> bool {
        let ended = self.watch_link(target, original, ended.map(|fd| fd.as_fd()));
        self.watch_lease(target, original);
        ended
    }

    /// [`Session::watch`]'s lease check: releases the program when the lease in its slot ran out
    /// [`FROZEN_AFTER`] ago; notes when the manager renews it again.
    fn watch_lease(&mut self, target: Target, original: &CpuSet) {
        let (Some(_), Some(seg)) = (&self.link, &self.slot) else { return };
        // 0: never leased yet, or released by the manager itself.
        let lease = seg.slot().lease_until();
        let frozen = lease != 0 && monotonic_ns() > lease.saturating_add(FROZEN_AFTER.as_nanos() as u64);
        if frozen && !self.frozen {
            tracing::warn!("the manager has not renewed the program's lease for {FROZEN_AFTER:?} (stopped or hung); releasing the program until it does");
            enforce::release(target, original, &[]);
        } else if !frozen && self.frozen {
            tracing::warn!("the manager renews the program's lease again");
        }
        self.frozen = frozen;
    }

    /// [`Session::watch`]'s wait on the connection, and the release when it ends.
    fn watch_link(&mut self, target: Target, original: &CpuSet, ended: Option<BorrowedFd<'_>>) -> bool {
        let Some(c) = &self.link else {
            let seen = lap(None, ended);
            self.reconnect();
            return seen.ended;
        };
        let seen = lap(Some(c.as_fd()), ended);
        if seen.manager_gone {
            tracing::warn!("the manager is gone; releasing the program");
            enforce::release(target, original, &[]);
            self.link = None;
            self.id = None;
            self.retry_at = Instant::now();
        }
        seen.ended
    }

    /// Without a manager, and with a registration to bring back: connects when a manager answers
    /// on the socket and registers the program again with its slot.
    fn reconnect(&mut self) {
        if self.kept.is_none() || Instant::now() < self.retry_at {
            return;
        }
        self.retry_at = Instant::now() + RECONNECT_EVERY;
        let Ok(c) = Conn::connect(&self.socket) else { return };
        if c.set_timeout(Some(Duration::from_secs(5))).is_err() {
            return;
        }
        self.link = Some(c);
        match self.reregister() {
            Ok(()) => tracing::warn!(id = self.id, "registered again with the manager on {}", self.socket.display()),
            Err(message) => tracing::warn!("registering again failed: {message}"),
        }
    }

    /// Unregisters the program; a manager embedded here serves the programs that joined it until
    /// they have ended (or a signal comes), then releases them and stops.
    pub fn close(mut self) {
        self.unregister();
        self.link = None;
        if let Some(m) = self.embedded.take() {
            let mut told = false;
            while !self.flags.iter().any(|(_, f)| f.load(Ordering::Acquire)) {
                let left = m.wait_for_programs(Duration::from_millis(if told { 50 } else { 0 }));
                if left == 0 {
                    break;
                }
                if !told {
                    eprintln!("cpumgr: keeping the manager on {} for {left} more program(s)", self.socket.display());
                    told = true;
                }
            }
            m.shutdown();
        }
    }
}

/// What one lap of [`Session::watch`] saw.
#[derive(Debug, Default, PartialEq)]
struct Lap {
    /// The manager's connection ended (EOF: the only message it ever sends unasked).
    manager_gone: bool,
    /// The supervised process exited (its pidfd became readable).
    ended: bool,
}

/// Waits up to 20 ms for the manager's connection `link` to end or the pidfd `ended` to become
/// readable; with neither to wait on, sleeps the 20 ms.
fn lap(link: Option<BorrowedFd<'_>>, ended: Option<BorrowedFd<'_>>) -> Lap {
    let mut fds: Vec<PollFd> = link.iter().chain(&ended).map(|fd| PollFd::new(*fd, PollFlags::POLLIN)).collect();
    let _ = poll(&mut fds, PollTimeout::from(20u16));
    let fired = |i: usize| fds.get(i).and_then(|fd| fd.revents()).is_some_and(|r| !r.is_empty());
    let link = link.is_some() as usize;
    Lap { manager_gone: link == 1 && fired(0), ended: ended.is_some() && fired(link) }
}

/// Connects to the manager, or starts one here.
fn connect_or_embed(resolved: &daemon::Resolved) -> anyhow::Result<(Conn, Option<Manager>)> {
    let socket = &resolved.socket;
    if let Ok(c) = Conn::connect(socket) {
        return Ok((c, None));
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        match resolved.start() {
            Ok(m) => return Ok((Conn::connect(socket)?, Some(m))),
            // Another process is starting one: join it as soon as it answers.
            Err(StartError::AlreadyRunning(_)) => {
                if let Ok(c) = Conn::connect(socket) {
                    return Ok((c, None));
                }
                if Instant::now() > deadline {
                    anyhow::bail!("a manager holds {} but does not answer", socket.display());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(StartError::Settings(m)) => return Err(InputError::new(m)),
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    /// A lap reports what fired: a supervised process that exited, a manager that hung up, and
    /// neither while both are there.
    #[test]
    fn a_lap_sees_the_process_end_and_the_manager_go() {
        let mut done = std::process::Command::new("true").spawn().unwrap();
        let pidfd = cpumgr_daemon::pidfd::open(done.id() as i32).unwrap();
        done.wait().unwrap();
        let mut live = std::process::Command::new("sleep").arg("10").spawn().unwrap();
        let live_fd = cpumgr_daemon::pidfd::open(live.id() as i32).unwrap();
        let (ours, theirs) = UnixStream::pair().unwrap();

        assert_eq!(lap(Some(ours.as_fd()), Some(live_fd.as_fd())), Lap::default());
        assert_eq!(lap(Some(ours.as_fd()), Some(pidfd.as_fd())), Lap { manager_gone: false, ended: true });
        assert_eq!(lap(None, Some(pidfd.as_fd())), Lap { manager_gone: false, ended: true });
        drop(theirs);
        assert_eq!(lap(Some(ours.as_fd()), Some(live_fd.as_fd())), Lap { manager_gone: true, ended: false });
        assert_eq!(lap(None, None), Lap::default());
        live.kill().unwrap();
        live.wait().unwrap();
    }
}
