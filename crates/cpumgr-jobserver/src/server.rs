//! The jobserver: its pipes, what the build inherits, and the thread that keeps the tokens out
//! equal to what the allocation allows.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::command::Style;
use crate::ledger::{tokens_for, Ledger};

/// The byte a token is. Clients write back the byte they read; the server counts bytes only.
const TOKEN: u8 = b'+';

/// How often the thread reads the allocation when nothing comes back.
const PERIOD: Duration = Duration::from_millis(5);

/// Where the allocation comes from, and who hears how many jobs the build may run.
pub trait Source: Send {
    /// The CPUs the build may use now, `None` when it is not managed (no manager, or one that
    /// stopped renewing its lease).
    fn cpus(&mut self) -> Option<u32>;

    /// The jobs the build may run now (tokens out and the implicit one), after every round.
    fn report(&mut self, _jobs: u32) {}
}

impl<F: FnMut() -> Option<u32> + Send> Source for F {
    fn cpus(&mut self) -> Option<u32> {
        self()
    }
}

/// Why a jobserver could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("jobserver: {what}: {source}")]
    Io { what: &'static str, source: std::io::Error },
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { what, source }
}

/// What the server reads and writes.
struct Ends {
    /// Tokens are handed out here.
    grant: File,
    /// Tokens handed out but not taken are taken back here (non-blocking, its own open file
    /// description: the build's blocking reads are not changed).
    take_back: File,
    /// Tokens come back here; `None` in the fifo style, where they come back to `take_back`.
    returns: Option<File>,
}

/// A jobserver for one build: created before the build starts, so it inherits it; its tokens
/// follow the allocation once [`Jobserver::follow`] runs; dropped when the build ends, taking
/// every token with it (a build that died holding tokens loses nothing for the next).
pub struct Jobserver {
    style: Style,
    cap: Option<u32>,
    /// The descriptors the build inherits (pipe style): read end of the grant pipe, write end of
    /// the return pipe.
    inherited: Option<(OwnedFd, OwnedFd)>,
    /// The named pipe's directory (fifo style; both styles use one for the grant pipe).
    dir: tempfile::TempDir,
    ends: Option<Ends>,
    stop: Arc<AtomicBool>,
    out: Arc<AtomicU32>,
    thread: Option<JoinHandle<()>>,
}

impl Jobserver {
    /// A jobserver with no token out yet (the build runs its implicit job only until
    /// [`Jobserver::follow`]), for a build that asked for at most `cap` jobs.
    pub fn new(style: Style, cap: Option<u32>) -> Result<Jobserver, Error> {
        let dir = tempfile::Builder::new().prefix("cpumgr-jobserver-").tempdir().map_err(io("temporary directory"))?;
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .map_err(|e| io("mkfifo")(e.into()))?;
        // Read-write: opening never waits for the other side, and the pipe never sees EOF.
        let open =
            |flags: i32| OpenOptions::new().read(true).write(true).custom_flags(flags | libc::O_CLOEXEC).open(&fifo);
        let take_back = open(libc::O_NONBLOCK).map_err(io("open the fifo"))?;
        let grant = open(libc::O_NONBLOCK).map_err(io("open the fifo"))?;
        let (inherited, returns) = match style {
            Style::Fifo => (None, None),
            Style::Pipe => {
                let read = OwnedFd::from(open(0).map_err(io("open the fifo"))?);
                let (ret_read, ret_write) =
                    nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK).map_err(|e| io("pipe")(e.into()))?;
                // The build's end blocks, as clients of the pipe style expect.
                fcntl(ret_write.as_raw_fd(), FcntlArg::F_SETFL(OFlag::empty())).map_err(|e| io("fcntl")(e.into()))?;
                (Some((read, ret_write)), Some(File::from(ret_read)))
            }
        };
        Ok(Jobserver {
            style,
            cap,
            inherited,
            dir,
            ends: Some(Ends { grant, take_back, returns }),
            stop: Arc::new(AtomicBool::new(false)),
            out: Arc::new(AtomicU32::new(0)),
            thread: None,
        })
    }

    /// The `--jobserver-auth` value clients read.
    pub fn auth(&self) -> String {
        match &self.inherited {
            Some((r, w)) => format!("{},{}", r.as_raw_fd(), w.as_raw_fd()),
            None => format!("fifo:{}", self.dir.path().join("fifo").display()),
        }
    }

    /// `MAKEFLAGS` for the build: `inherited` (the caller's own, if any) less any jobserver or
    /// `-j` it had, then `-j[CAP] --jobserver-auth=...`.
    pub fn makeflags(&self, inherited: Option<&str>) -> String {
        let mut words: Vec<&str> = inherited
            .unwrap_or("")
            .split_whitespace()
            .filter(|w| !w.starts_with("--jobserver-") && !w.starts_with("-j") && !w.starts_with("--jobs"))
            .collect();
        let j = format!("-j{}", self.cap.map(|c| c.to_string()).unwrap_or_default());
        let auth = format!("--jobserver-auth={}", self.auth());
        words.push(&j);
        words.push(&auth);
        words.join(" ")
    }

    /// Makes `cmd` a client: `MAKEFLAGS` (and `CARGO_MAKEFLAGS`, which cargo reads first) say
    /// where the jobserver is, and in the pipe style its two descriptors stay open across exec.
    pub fn configure(&self, cmd: &mut Command) {
        let flags = self.makeflags(std::env::var("MAKEFLAGS").ok().as_deref());
        cmd.env("MAKEFLAGS", &flags).env("CARGO_MAKEFLAGS", &flags).env_remove("MFLAGS");
        if let Some((r, w)) = &self.inherited {
            let fds: [RawFd; 2] = [r.as_raw_fd(), w.as_raw_fd()];
            // SAFETY: fcntl is async-signal-safe and touches only these two descriptors, which
            // stay open in the parent until the child has been spawned.
            unsafe {
                cmd.pre_exec(move || {
                    for fd in fds {
                        if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
        }
    }

    /// The build's style.
    pub fn style(&self) -> Style {
        self.style
    }

    /// Tokens out now (handed to the build and not taken back), as the server counts them.
    pub fn tokens_out(&self) -> u32 {
        self.out.load(Ordering::Relaxed)
    }

    /// Starts the thread that follows `source`: every few milliseconds, and at once when a token
    /// comes back, it hands out tokens up to what the allocation allows, or takes back those it
    /// allows no more: idle ones at once, held ones as their jobs end (no job is stopped). When
    /// the source says the build is unmanaged, it gets `unmanaged` CPUs' worth.
    pub fn follow(&mut self, mut source: Box<dyn Source>, unmanaged: u32) {
        let Some(ends) = self.ends.take() else { return };
        let (stop, out, cap) = (self.stop.clone(), self.out.clone(), self.cap);
        let thread = std::thread::Builder::new().name("cpumgr-jobserver".into()).spawn(move || {
            let mut ledger = Ledger::default();
            while !stop.load(Ordering::Relaxed) {
                ledger.set_target(tokens_for(source.cpus().unwrap_or(unmanaged), cap));
                ends.step(&mut ledger);
                out.store(ledger.out(), Ordering::Relaxed);
                source.report(ledger.out() + 1);
                ends.wait(&ledger);
            }
        });
        self.thread = thread.ok();
    }
}

impl Ends {
    /// One round: takes in what came back, takes back what is over the target, hands out what
    /// is under it.
    fn step(&self, ledger: &mut Ledger) {
        if let Some(returns) = &self.returns {
            ledger.came_back(drain(returns, u32::MAX));
        }
        if ledger.excess() > 0 {
            ledger.came_back(drain(&self.take_back, ledger.excess()));
        }
        let n = ledger.to_grant();
        if n > 0 {
            let written = (&self.grant).write(&vec![TOKEN; n as usize]).unwrap_or(0);
            ledger.granted(written as u32);
        }
    }

    /// Waits up to [`PERIOD`] for a token to come back: on the return pipe, or (fifo style) on
    /// the fifo while tokens are to be taken back.
    fn wait(&self, ledger: &Ledger) {
        let fd = match (&self.returns, ledger.excess() > 0) {
            (Some(r), _) => r.as_fd(),
            (None, true) => self.take_back.as_fd(),
            (None, false) => {
                std::thread::sleep(PERIOD);
                return;
            }
        };
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
        let _ = poll(&mut fds, PollTimeout::from(PERIOD.as_millis() as u16));
    }
}

/// Reads up to `most` tokens from a non-blocking descriptor; returns how many.
fn drain(mut f: &File, most: u32) -> u32 {
    let mut buf = [0u8; 256];
    let mut got = 0u32;
    while got < most {
        let want = buf.len().min((most - got) as usize);
        match f.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => got += n as u32,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    got
}

impl Drop for Jobserver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
