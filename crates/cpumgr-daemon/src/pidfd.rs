//! Process descriptors (`pidfd`): how the manager holds on to a registered process. A pidfd names
//! one process for good (a pid can be reused once its process is reaped; a pidfd cannot), becomes
//! readable when the process exits ([`crate::exits`]), and tells who owns the process
//! (`PIDFD_GET_INFO`, Linux 6.13), so that the owner checked at registration is the owner of the
//! very process being watched, read with one `ioctl` instead of a read of `/proc/PID/status`.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// A descriptor of process `pid`.
pub fn open(pid: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just created this descriptor for us alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `struct pidfd_info` of `<linux/pidfd.h>`, its first version (64 bytes). Only `mask` and
/// `ruid` are read; the other fields are there for the layout.
#[repr(C)]
#[derive(Default)]
#[allow(dead_code)]
struct Info {
    mask: u64,
    cgroupid: u64,
    pid: u32,
    tgid: u32,
    ppid: u32,
    ruid: u32,
    rgid: u32,
    euid: u32,
    egid: u32,
    suid: u32,
    sgid: u32,
    fsuid: u32,
    fsgid: u32,
    exit_code: i32,
}

/// `PIDFD_INFO_CREDS`: the reply's mask bit saying the ids are filled in.
const INFO_CREDS: u64 = 1 << 1;
/// `PIDFD_GET_INFO`: `_IOWR(0xFF, 11, struct pidfd_info)`.
const GET_INFO: libc::c_ulong = (3 << 30) | ((std::mem::size_of::<Info>() as libc::c_ulong) << 16) | (0xFF << 8) | 11;

/// The real user id owning the process of `pidfd`; `None` when the kernel has no
/// `PIDFD_GET_INFO` (before 6.13) or the process is gone.
pub fn uid(pidfd: BorrowedFd<'_>) -> Option<u32> {
    let mut info = Info { mask: INFO_CREDS, ..Info::default() };
    // SAFETY: the descriptor is open and `info` is a writable `struct pidfd_info` of the size
    // encoded in the request.
    let r = unsafe { libc::ioctl(pidfd.as_raw_fd(), GET_INFO, &mut info as *mut Info) };
    (r == 0 && info.mask & INFO_CREDS != 0).then_some(info.ruid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn the_owner_read_through_a_pidfd_is_the_one_proc_shows() {
        assert_eq!(std::mem::size_of::<Info>(), 64);
        let me = std::process::id() as i32;
        let fd = open(me).unwrap();
        let from_proc = crate::procfs::uid_of(me);
        // Kernels before 6.13 have no PIDFD_GET_INFO: the manager then reads /proc.
        if let Some(uid) = uid(fd.as_fd()) {
            assert_eq!(Some(uid), from_proc);
        }
        assert_eq!(from_proc, Some(nix::unistd::getuid().as_raw()));
    }

    #[test]
    fn a_process_that_is_gone_has_no_owner() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let fd = open(child.id() as i32).unwrap();
        child.wait().unwrap();
        assert_eq!(uid(fd.as_fd()), None, "reaped");
    }
}
