//! The work-list doorbell: an `eventfd` the manager creates for each program and hands to it
//! beside the slot, so that a CPU the program releases through its slot (its request lowered, or
//! idle) reaches a waiting program at once instead of at the next quantum boundary (paper 000's
//! work-list).
//!
//! The program writes its slot first, then [`Doorbell::ring`]s: one `write` of 8 bytes, never
//! blocking. The manager waits on every program's doorbell, [`Doorbell::drain`]s the ones that
//! rang and schedules at once; the slot, not the doorbell, says what changed, so rings that
//! coalesce lose nothing.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::eventfd::{EfdFlags, EventFd};

/// One program's doorbell (either end: the manager's and the program's share one `eventfd`).
#[derive(Debug)]
pub struct Doorbell {
    fd: OwnedFd,
}

impl Doorbell {
    /// A new doorbell (manager), non-blocking and closed on `exec`.
    pub fn new() -> std::io::Result<Doorbell> {
        let bell = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?;
        Ok(Doorbell { fd: bell.into() })
    }

    /// The doorbell received from the manager (program). The descriptor is the manager's, so it
    /// is trusted to be the `eventfd` it says; anything else only makes [`Doorbell::ring`] fail
    /// silently, which leaves the program scheduled at quantum boundaries, as without a doorbell.
    pub fn from_fd(fd: OwnedFd) -> Doorbell {
        Doorbell { fd }
    }

    /// Tells the manager the slot changed (program): one non-blocking `write`. A failure is not
    /// the program's problem (the counter is saturated, so a ring is pending anyway; or the
    /// manager is gone) and is ignored: the next quantum reads the slot regardless.
    pub fn ring(&self) {
        let _ = nix::unistd::write(&self.fd, &1u64.to_ne_bytes());
    }

    /// How many rings arrived since the last drain, resetting the count (manager); 0 when none.
    pub fn drain(&self) -> u64 {
        let mut buf = [0u8; 8];
        loop {
            match nix::unistd::read(std::os::fd::AsRawFd::as_raw_fd(&self.fd), &mut buf) {
                Ok(8) => return u64::from_ne_bytes(buf),
                Err(Errno::EINTR) => continue,
                _ => return 0,
            }
        }
    }
}

impl AsFd for Doorbell {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_through_a_copy_of_the_descriptor_add_up_and_drain() {
        let manager = Doorbell::new().unwrap();
        assert_eq!(manager.drain(), 0, "nothing rang");
        let program = Doorbell::from_fd(manager.as_fd().try_clone_to_owned().unwrap());
        program.ring();
        program.ring();
        assert_eq!(manager.drain(), 2);
        assert_eq!(manager.drain(), 0, "drained");
    }
}
