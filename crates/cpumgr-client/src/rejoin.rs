//! Bringing a program that registered itself back to a restarted manager.
//!
//! `cpumgr run` watches its program and registers it again, with the slot it kept, when a manager
//! answers after a crash (the daemon's `adopt.rs`). A program that registered *itself* through
//! the client library has no such supervisor, so the client does the supervisor's part: one
//! thread per self-registered program waits in `poll` for the manager's end of the control
//! connection to close (no wake-up while the manager lives, apart from a check every
//! [`ALIVE_CHECK`] that the client still exists). Once it closes, the runtime is already on its own:
//! the slot's lease runs out and [`Client::team`](crate::Client::team) returns the program's own
//! team. The thread then tries the socket every [`RETRY`] and, when a manager answers, registers
//! again with the same memfd attached. The new manager maps the same page, so the runtime goes on
//! reading and writing the slot it has, and obeys the new manager as soon as its first allocation
//! renews the lease.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use cpumgr_proto::{Conn, Registration, Reply, Request};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::managed::{open_doorbell, Managed};
use crate::say::note;

/// How often a waiting thread checks that its client still exists.
const ALIVE_CHECK: Duration = Duration::from_secs(1);

/// How often the socket is tried while no manager answers.
const RETRY: Duration = Duration::from_millis(100);

/// The longest wait between tries after a manager refused the registration (a per-user limit,
/// say): the wait doubles from [`RETRY`] up to this, so a refusing manager is not flooded.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Starts the thread that re-registers `client` (registered with `reg` on `socket`, its manager
/// connection watched through `watch`, a duplicate of that connection's descriptor) whenever its
/// manager goes away. The thread ends within [`ALIVE_CHECK`] of the client's end.
pub(crate) fn spawn(client: &Arc<Managed>, watch: OwnedFd, socket: PathBuf, reg: Registration) {
    let client = Arc::downgrade(client);
    let started =
        std::thread::Builder::new().name("cpumgr-rejoin".into()).spawn(move || keep(client, watch, socket, reg));
    if let Err(e) = started {
        note(&format!("cannot start the thread that re-registers after a manager restart ({e})"));
    }
}

/// The thread's loop: wait for the manager to go, then register again with the next one.
fn keep(client: Weak<Managed>, mut watch: OwnedFd, socket: PathBuf, reg: Registration) {
    loop {
        if !wait_for_hang_up(&client, &watch) {
            return;
        }
        let (mut delay, mut noted) = (RETRY, false);
        loop {
            std::thread::sleep(delay);
            let Some(m) = client.upgrade() else { return };
            if m.closing() {
                return;
            }
            match rejoin(&m, &socket, &reg) {
                Ok(Ok(fd)) => {
                    note(&format!("registered again with the manager on {}", socket.display()));
                    watch = fd;
                    break;
                }
                Ok(Err(refusal)) => {
                    if !noted {
                        note(&refusal);
                        noted = true;
                    }
                    delay = (delay * 2).min(MAX_BACKOFF);
                }
                Err(()) => delay = RETRY,
            }
        }
    }
}

/// Waits until the manager's end of the connection closes (true), or the client is gone or
/// finishing (false).
fn wait_for_hang_up(client: &Weak<Managed>, watch: &OwnedFd) -> bool {
    let timeout = PollTimeout::try_from(ALIVE_CHECK).unwrap_or(PollTimeout::MAX);
    loop {
        // No events asked: a hang-up is always reported, and replies to the client's own calls
        // on the connection must not wake this thread.
        let mut fds = [PollFd::new(watch.as_fd(), PollFlags::empty())];
        let ready = poll(&mut fds, timeout);
        match client.upgrade() {
            Some(m) if !m.closing() => {}
            _ => return false,
        }
        let hung_up = PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL;
        if matches!(ready, Ok(n) if n > 0) && fds[0].revents().is_some_and(|r| r.intersects(hung_up)) {
            return true;
        }
    }
}

/// One try: connects, registers `reg` again with the slot attached, and on success makes the new
/// connection, id and doorbell the client's. `Ok(Ok(watch))`: registered, `watch` duplicates the
/// new connection; `Ok(Err(why))`: a manager answered and refused (or the client is ending);
/// `Err`: no manager answered.
fn rejoin(m: &Managed, socket: &std::path::Path, reg: &Registration) -> Result<Result<OwnedFd, String>, ()> {
    let conn = Conn::connect(socket).map_err(|_| ())?;
    conn.set_timeout(Some(Duration::from_secs(5))).map_err(|_| ())?;
    let id = match conn.call_with(&Request::Register(reg.clone()), &[m.segment.fd()]) {
        Ok((Reply::Registered { id }, _)) => id,
        Ok((Reply::Error { message }, _)) => {
            return Ok(Err(format!("a restarted manager refused this program: {message}")))
        }
        Ok(_) | Err(_) => return Err(()),
    };
    let watch = conn.as_fd().try_clone_to_owned().map_err(|_| ())?;
    let doorbell = open_doorbell(&conn, id);
    if m.relink(conn, id, doorbell) {
        Ok(Ok(watch))
    } else {
        Ok(Err("the program is ending".into()))
    }
}
