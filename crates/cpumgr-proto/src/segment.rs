//! A slot's segment: an anonymous memory file (`memfd_create`) of [`SLOT_BYTES`], created by the
//! manager, mapped by it and by the program it is handed to over the control socket. No name in
//! `/dev/shm`: no other process can open it, and it disappears when the last mapping and
//! descriptor go away, so a crash leaves nothing behind.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};

use memmap2::{MmapOptions, MmapRaw};
use nix::sys::memfd::{memfd_create, MemFdCreateFlag};

use crate::slot::{Slot, SLOT_BYTES};
use crate::SlotError;

/// A mapped slot segment.
#[derive(Debug)]
pub struct Segment {
    file: File,
    map: MmapRaw,
}

// SAFETY: the mapping is only accessed through `&Slot`, whose fields are all atomics.
unsafe impl Send for Segment {}
// SAFETY: as above; shared references to atomics are safe to use from several threads.
unsafe impl Sync for Segment {}

impl Segment {
    /// Creates a new zeroed segment and writes its header (manager).
    pub fn create(program_id: u64) -> Result<Segment, SlotError> {
        let fd = memfd_create(c"cpumgr-slot", MemFdCreateFlag::MFD_CLOEXEC | MemFdCreateFlag::MFD_ALLOW_SEALING)
            .map_err(|e| SlotError::Io(e.into()))?;
        let file = File::from(fd);
        file.set_len(SLOT_BYTES as u64).map_err(SlotError::Io)?;
        harden(&file)?;
        let seg = Self::map_file(file)?;
        seg.slot().init(program_id);
        Ok(seg)
    }

    /// Maps a segment received from the manager and checks its header (program).
    pub fn open(fd: OwnedFd) -> Result<Segment, SlotError> {
        let file = File::from(fd);
        let len = file.metadata().map_err(SlotError::Io)?.len();
        if len < SLOT_BYTES as u64 {
            return Err(SlotError::Size { found: len as usize, expected: SLOT_BYTES });
        }
        let seg = Self::map_file(file)?;
        seg.slot().check_header()?;
        Ok(seg)
    }

    fn map_file(file: File) -> Result<Segment, SlotError> {
        let map = MmapOptions::new().len(SLOT_BYTES).map_raw(&file).map_err(SlotError::Io)?;
        Ok(Segment { file, map })
    }

    /// The slot in the segment.
    pub fn slot(&self) -> &Slot {
        // SAFETY: the mapping is SLOT_BYTES long (≥ size_of::<Slot>()), page-aligned (≥ Slot's
        // 64-byte alignment), lives as long as `self`, and Slot is made of atomics only, for
        // which every bit pattern is valid and concurrent access from other processes is sound.
        unsafe { &*(self.map.as_ptr() as *const Slot) }
    }

    /// The segment's file descriptor, to hand to the program.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.as_fd()
    }
}

/// Makes a new segment safe to hand to an untrusted program: sealed against resizing (a program
/// that truncated it would kill every process mapping it, the manager first, with `SIGBUS`) and
/// against new seals (`F_SEAL_FUTURE_WRITE` would stop a restarted manager from mapping it), and
/// its inode readable by its owner only (mode 0600; `memfd_create` makes it 0777), so no path
/// (`/proc/PID/fd/N`) opens it for anyone but the manager's user.
fn harden(file: &File) -> Result<(), SlotError> {
    use nix::fcntl::{fcntl, FcntlArg, SealFlag};
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(SlotError::Io)?;
    let seals = SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL;
    fcntl(file.as_raw_fd(), FcntlArg::F_ADD_SEALS(seals)).map_err(|e| SlotError::Io(e.into()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_sees_what_the_manager_publishes_and_vice_versa() {
        let manager = Segment::create(42).unwrap();
        let program = Segment::open(manager.fd().try_clone_to_owned().unwrap()).unwrap();
        assert_eq!(program.slot().header.program_id.load(std::sync::atomic::Ordering::Relaxed), 42);
        manager.slot().publish(1, 2, true, &cpumgr_core::CpuSet::parse("0-1").unwrap());
        assert_eq!(program.slot().allocation().unwrap().count, 2);
        program.slot().set_request(3, 1, 3);
        assert_eq!(manager.slot().raw_request().unwrap().wanted, 3);
    }

    #[test]
    fn a_program_cannot_resize_or_reseal_its_segment() {
        use nix::fcntl::{fcntl, FcntlArg, SealFlag};
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::PermissionsExt;
        let manager = Segment::create(1).unwrap();
        let program = File::from(manager.fd().try_clone_to_owned().unwrap());
        assert!(program.set_len(0).is_err(), "shrinking is sealed");
        assert!(program.set_len(1 << 20).is_err(), "growing is sealed");
        let r = fcntl(program.as_raw_fd(), FcntlArg::F_ADD_SEALS(SealFlag::F_SEAL_FUTURE_WRITE));
        assert!(r.is_err(), "no further seal can be added");
        assert_eq!(program.metadata().unwrap().permissions().mode() & 0o777, 0o600);
        manager.slot().publish(1, 1, true, &cpumgr_core::CpuSet::parse("0").unwrap());
        assert_eq!(manager.slot().allocated_count(), 1, "the manager's mapping still works");
    }

    #[test]
    fn a_segment_that_is_not_a_slot_is_refused() {
        let file = tempfile_memfd(SLOT_BYTES as u64);
        assert!(matches!(Segment::open(file), Err(SlotError::Magic(0))));
        let small = tempfile_memfd(16);
        assert!(matches!(Segment::open(small), Err(SlotError::Size { .. })));
    }

    fn tempfile_memfd(len: u64) -> OwnedFd {
        let fd = memfd_create(c"test", MemFdCreateFlag::MFD_CLOEXEC).unwrap();
        let f = File::from(fd);
        f.set_len(len).unwrap();
        f.into()
    }
}
