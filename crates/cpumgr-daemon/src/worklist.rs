//! The work-list (paper 000 §3): a CPU a program releases through its slot (its runtime lowers
//! its request, or goes idle) reaches a waiting program at once, not at the next quantum boundary.
//!
//! Each program may ask for a [`Doorbell`] (`open-doorbell`), an `eventfd` it rings after writing
//! its slot. One thread waits on every doorbell with `epoll`; when some rang, it drains them and
//! kicks the scheduler, whose next step reads the slots as at any boundary. Registration,
//! `set-request`, `unregister` and exits already kick the scheduler from the socket thread.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use cpumgr_core::ProgramId;
use cpumgr_proto::Doorbell;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};

use crate::Shared;

/// The `epoll` key of the manager's stop bell (program ids count up from 1).
const STOPPING: u64 = u64::MAX;

/// How long the work-list thread waits at most before it looks at the shutdown flag again,
/// milliseconds: a safety net, the stop bell wakes it at once.
const WAIT_MS: u16 = 1000;

/// Every program's doorbell and the `epoll` set that watches them.
#[derive(Debug)]
pub struct WorkList {
    epoll: Epoll,
    bells: Mutex<HashMap<ProgramId, Doorbell>>,
}

impl WorkList {
    /// An empty work-list.
    pub fn new() -> std::io::Result<WorkList> {
        Ok(WorkList { epoll: Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?, bells: Mutex::new(HashMap::new()) })
    }

    fn bells(&self) -> std::sync::MutexGuard<'_, HashMap<ProgramId, Doorbell>> {
        self.bells.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A descriptor of program `id`'s doorbell to hand to it, creating and watching the doorbell
    /// on first use.
    pub fn descriptor(&self, id: ProgramId) -> std::io::Result<OwnedFd> {
        let mut bells = self.bells();
        if let Some(b) = bells.get(&id) {
            return b.as_fd().try_clone_to_owned();
        }
        let bell = Doorbell::new()?;
        self.epoll.add(&bell, EpollEvent::new(EpollFlags::EPOLLIN, id.0))?;
        let fd = bell.as_fd().try_clone_to_owned()?;
        bells.insert(id, bell);
        Ok(fd)
    }

    /// Watches `stopping` beside the doorbells: once it rang, [`WorkList::wait`] returns at once.
    pub fn watch_stopping(&self, stopping: &Doorbell) -> std::io::Result<()> {
        Ok(self.epoll.add(stopping, EpollEvent::new(EpollFlags::EPOLLIN, STOPPING))?)
    }

    /// Stops watching program `id`'s doorbell. The program may still hold its end, which keeps the
    /// `eventfd` alive, so it is taken out of the `epoll` set explicitly, not by closing.
    pub fn remove(&self, id: ProgramId) {
        if let Some(bell) = self.bells().remove(&id) {
            if let Err(e) = self.epoll.delete(&bell) {
                tracing::warn!(id = id.0, "work-list: {e}");
            }
        }
    }

    /// Waits up to `timeout_ms` for doorbells, drains those that rang and returns their programs.
    pub fn wait(&self, timeout_ms: u16) -> Vec<ProgramId> {
        let mut events = [EpollEvent::empty(); 64];
        let n = match self.epoll.wait(&mut events, EpollTimeout::from(timeout_ms)) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => 0,
            Err(e) => {
                tracing::error!("work-list wait: {e}");
                std::thread::sleep(std::time::Duration::from_millis(timeout_ms.into()));
                0
            }
        };
        let bells = self.bells();
        events[..n]
            .iter()
            .map(|ev| ProgramId(ev.data()))
            .filter(|id| bells.get(id).is_some_and(|b| b.drain() > 0))
            .collect()
    }
}

/// The work-list thread: kicks the scheduler whenever a doorbell rings, until the manager stops.
pub fn serve(shared: Arc<Shared>, worklist: Arc<WorkList>) {
    if let Err(e) = worklist.watch_stopping(&shared.stopping) {
        tracing::error!("work-list: cannot watch for the manager's stop: {e}");
    }
    while !shared.shutdown.load(Ordering::Acquire) {
        let rang = worklist.wait(WAIT_MS);
        if rang.is_empty() {
            continue;
        }
        tracing::debug!(?rang, "doorbells rang: scheduling now");
        let mut state = shared.lock();
        if !state.kick {
            // A scheduler already kicked wakes by itself when its kick is due.
            state.kick = true;
            shared.wake.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_names_its_program_once_and_a_removed_program_is_not_watched() {
        let w = WorkList::new().unwrap();
        let a = Doorbell::from_fd(w.descriptor(ProgramId(1)).unwrap());
        let b = Doorbell::from_fd(w.descriptor(ProgramId(2)).unwrap());
        assert!(w.wait(0).is_empty(), "nothing rang");
        b.ring();
        b.ring();
        assert_eq!(w.wait(1000), vec![ProgramId(2)]);
        assert!(w.wait(0).is_empty(), "drained");
        // A second descriptor is the same doorbell.
        Doorbell::from_fd(w.descriptor(ProgramId(1)).unwrap()).ring();
        assert_eq!(w.wait(1000), vec![ProgramId(1)]);
        w.remove(ProgramId(1));
        a.ring();
        assert!(w.wait(0).is_empty(), "program 1 is no longer watched");
    }
}
