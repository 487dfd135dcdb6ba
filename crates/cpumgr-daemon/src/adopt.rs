//! Re-adoption of a program by a manager that did not register it.
//!
//! A program's slot is a memfd: it outlives the manager that created it as long as someone holds
//! it. Every supervisor (`cpumgr run`, `cpumgr attach`) keeps the descriptor it got at
//! registration. When its manager dies, the supervisor releases its program, then, as soon as a
//! manager answers on the socket again (restarted by hand, by systemd, or the same one after a
//! lost connection), sends its registration again with that descriptor attached (`SCM_RIGHTS`).
//! The manager maps the same memory instead of a new segment, so a runtime that had mapped its
//! slot keeps reading and writing the same page, with no program restarted.
//!
//! A descriptor sent by a client is not trusted: [`segment`] accepts only a memfd that is (or can
//! be made) sealed against shrinking and growing, is at least a slot long, and carries a slot
//! header of this layout. The seal matters: without it the sender could truncate the file under
//! the manager's mapping and kill the manager with `SIGBUS`.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use cpumgr_proto::Segment;

/// The seals a slot must carry before the manager maps it: its size can no longer change.
const SIZE_SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;

/// Checks a descriptor sent by a supervisor and maps it as a slot: a sealed memfd of slot size
/// with a valid header. The error says what is wrong with it.
pub fn segment(fd: OwnedFd) -> Result<Segment, String> {
    seal(&fd)?;
    Segment::open(fd).map_err(|e| format!("the slot sent is not a cpumgr slot: {e}"))
}

/// Adds the size seals, or checks they are already there (`F_SEAL_SEAL` forbids adding more).
fn seal(fd: &OwnedFd) -> Result<(), String> {
    let raw = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own; F_ADD_SEALS and F_GET_SEALS take an int or nothing.
    if unsafe { libc::fcntl(raw, libc::F_ADD_SEALS, SIZE_SEALS) } == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    // SAFETY: as above.
    let seals = unsafe { libc::fcntl(raw, libc::F_GET_SEALS) };
    if seals >= 0 && seals & SIZE_SEALS == SIZE_SEALS {
        return Ok(());
    }
    Err(format!("the slot sent cannot be sealed against resizing (not a memfd of the manager?): {err}"))
}

/// Whether two descriptors open the same file (same device and inode): a supervisor that
/// re-registers with the slot the manager already has is the same program coming back.
pub fn same_file(a: impl AsFd, b: impl AsFd) -> bool {
    let id = |f: std::os::fd::BorrowedFd<'_>| nix::sys::stat::fstat(f.as_raw_fd()).ok().map(|s| (s.st_dev, s.st_ino));
    matches!((id(a.as_fd()), id(b.as_fd())), (Some(x), Some(y)) if x == y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    #[test]
    fn a_managers_segment_is_adopted_and_can_no_longer_be_resized() {
        let original = Segment::create(9).unwrap();
        let sent = original.fd().try_clone_to_owned().unwrap();
        let adopted = segment(sent).unwrap();
        assert!(same_file(original.fd(), adopted.fd()));
        original.slot().set_request(3, 1, 3);
        assert_eq!(adopted.slot().raw_request().unwrap().wanted, 3, "the same memory");
        let f = File::from(original.fd().try_clone_to_owned().unwrap());
        assert!(f.set_len(16).is_err(), "sealed against shrinking");
        // Adopting it again finds the seals already there.
        assert!(segment(original.fd().try_clone_to_owned().unwrap()).is_ok());
    }

    #[test]
    fn a_descriptor_that_is_not_a_sealable_slot_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let plain = File::create(dir.path().join("f")).unwrap();
        plain.set_len(4096).unwrap();
        let e = segment(plain.into()).unwrap_err();
        assert!(e.contains("cannot be sealed"), "{e}");
        let fd = nix::sys::memfd::memfd_create(c"x", nix::sys::memfd::MemFdCreateFlag::MFD_ALLOW_SEALING).unwrap();
        File::from(fd.try_clone().unwrap()).set_len(4096).unwrap();
        let e = segment(fd).unwrap_err();
        assert!(e.contains("not a cpumgr slot"), "{e}");
        let (a, b) = (Segment::create(1).unwrap(), Segment::create(2).unwrap());
        assert!(!same_file(a.fd(), b.fd()));
    }
}
