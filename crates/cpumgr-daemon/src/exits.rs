//! Program exits: every program's pidfd (readable once its leader has exited) in one `epoll` set,
//! which the socket thread polls beside its connections. The state adds a program's pidfd when it
//! registers and takes it out when it goes, one `epoll_ctl` each: a wake-up costs the same with
//! 1024 programs as with one, and a registration or removal costs no pass over every program (as
//! a socket thread keeping copies of the pidfds, re-synced from the state's, would).

use std::os::fd::{AsFd, BorrowedFd};

use cpumgr_core::ProgramId;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};

/// The `epoll` set of every registered program's pidfd.
#[derive(Debug)]
pub struct Exits {
    epoll: Epoll,
}

impl Exits {
    /// An empty set.
    pub fn new() -> std::io::Result<Exits> {
        Ok(Exits { epoll: Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)? })
    }

    /// Watches program `id`'s pidfd.
    pub fn watch(&self, id: ProgramId, pidfd: BorrowedFd<'_>) -> std::io::Result<()> {
        Ok(self.epoll.add(pidfd, EpollEvent::new(EpollFlags::EPOLLIN, id.0))?)
    }

    /// Stops watching a pidfd, before it is closed: were a copy of it still open somewhere (a
    /// process forked meanwhile), the set would keep reporting an exit nobody waits for.
    pub fn forget(&self, pidfd: BorrowedFd<'_>) {
        if let Err(e) = self.epoll.delete(pidfd) {
            tracing::warn!("exits: {e}");
        }
    }

    /// The programs whose leader has exited, without waiting.
    pub fn ready(&self) -> Vec<ProgramId> {
        let mut events = [EpollEvent::empty(); 64];
        match self.epoll.wait(&mut events, EpollTimeout::ZERO) {
            Ok(n) => events[..n].iter().map(|e| ProgramId(e.data())).collect(),
            Err(e) => {
                tracing::error!("exits: {e}");
                Vec::new()
            }
        }
    }
}

impl AsFd for Exits {
    /// The set's descriptor: readable when some program has exited.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.epoll.0.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pidfd;

    #[test]
    fn an_exit_is_reported_once_watched_and_never_once_forgotten() {
        let exits = Exits::new().unwrap();
        let mut a = std::process::Command::new("sleep").arg("600").spawn().unwrap();
        let mut b = std::process::Command::new("sleep").arg("600").spawn().unwrap();
        let (fa, fb) = (pidfd::open(a.id() as i32).unwrap(), pidfd::open(b.id() as i32).unwrap());
        exits.watch(ProgramId(1), fa.as_fd()).unwrap();
        exits.watch(ProgramId(2), fb.as_fd()).unwrap();
        assert_eq!(exits.ready(), vec![], "both alive");
        a.kill().unwrap();
        a.wait().unwrap();
        assert_eq!(exits.ready(), vec![ProgramId(1)]);
        exits.forget(fa.as_fd());
        assert_eq!(exits.ready(), vec![], "forgotten");
        b.kill().unwrap();
        b.wait().unwrap();
        exits.forget(fb.as_fd());
        assert_eq!(exits.ready(), vec![], "forgotten before it was read");
    }
}
