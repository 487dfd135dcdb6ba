//! The manager's watchdog: a tiny process forked when the manager starts, that outlives it by
//! exactly as long as it takes to release what the manager held.
//!
//! The manager publishes, after every quantum, the list of its programs (target and the affinity
//! each had at registration) on a board: a shared anonymous mapping, double-buffered so that a
//! manager killed in the middle of a write leaves the previous complete list in force. The
//! watchdog blocks in `read` on a pipe whose write end only the manager holds; the kernel closes
//! it when the manager dies, however it dies, and the read returns. The watchdog then continues
//! every listed program and widens every thread of it back, and exits. A manager that stops
//! cleanly releases its programs itself, empties the board, closes the pipe and reaps the
//! watchdog.
//!
//! This covers the programs no supervisor watches (registered by the client library or by a raw
//! `register`): with it, a SIGKILLed manager leaves nothing stopped or pinned, whoever registered.
//!
//! The watchdog is forked from a process that may have other threads, so between `fork` and its
//! exit it does nothing but system calls: no allocation, no lock, no standard library I/O. It
//! closes every inherited descriptor but its end of the pipe (it must not keep the manager's lock,
//! socket or other processes' pipes open), leaves the terminal's process group (an interrupt
//! meant for the manager is not for it), and names itself `cpumgr-watchdog`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;

use cpumgr_core::CpuSet;

use crate::affinity;
use crate::procfs::Target;

/// Words of a CPU mask on the board: as many CPUs as an affinity mask holds (1024, as in a slot).
const MASK_WORDS: usize = affinity::MAX_CPUS / 64;
/// Words per record on the board: pid and kind, the process's start time (0: not checked), then
/// the mask.
const RECORD: usize = 2 + MASK_WORDS;
/// Board header: the active buffer (0 or 1), then each buffer's length.
const HEADER: usize = 3;
/// A record's kind bit: the pid is a process group.
const GROUP: u64 = 1 << 32;

/// The manager's side of its watchdog.
pub struct Watchdog {
    board: *mut AtomicU64,
    words: usize,
    capacity: usize,
    /// The write end of the current watchdog's pipe; `None` once stopped.
    pipe: Mutex<Option<OwnedFd>>,
    /// The current watchdog process.
    pid: AtomicI32,
    /// The cpuset escape, kept to give it to a watchdog started again.
    escape: Option<OwnedFd>,
}

// SAFETY: the board is only touched through atomics; the manager publishes from one thread at a
// time (under the state lock).
unsafe impl Send for Watchdog {}
// SAFETY: as above.
unsafe impl Sync for Watchdog {}

impl Watchdog {
    /// Forks the watchdog, with a board for up to `capacity` programs. `escape`, when the manager
    /// confines programs in cpuset cgroups, is the `cgroup.procs` of the cgroup above its tree:
    /// the watchdog moves every released process there first, or it could not widen them.
    pub fn spawn(capacity: usize, escape: Option<OwnedFd>) -> io::Result<Watchdog> {
        let words = HEADER + 2 * capacity * RECORD;
        let bytes = words * std::mem::size_of::<u64>();
        // SAFETY: a fresh anonymous shared mapping; checked for failure below.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let board = map as *mut AtomicU64;
        match fork_watchdog(board, capacity, escape.as_ref()) {
            Ok((write, pid)) => {
                Ok(Watchdog { board, words, capacity, pipe: Mutex::new(Some(write)), pid: AtomicI32::new(pid), escape })
            }
            Err(e) => {
                // SAFETY: the mapping made above, unused.
                unsafe { libc::munmap(map, bytes) };
                Err(e)
            }
        }
    }

    /// Starts a new watchdog on the same board if the current one has ended (someone killed it):
    /// the scheduler calls it before every step, so no step stops or pins a program without one.
    pub fn revive(&self) {
        let mut pipe = self.pipe.lock().unwrap_or_else(|e| e.into_inner());
        let pid = self.pid.load(Ordering::Relaxed);
        // SAFETY: a non-blocking wait for our own child, and a signal-0 probe of it.
        let ended = unsafe {
            match libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) {
                0 => false,
                // Reaped already (SIGCHLD ignored): gone unless it still answers.
                -1 => libc::kill(pid, 0) != 0,
                _ => true,
            }
        };
        if pipe.is_none() || !ended {
            return;
        }
        match fork_watchdog(self.board, self.capacity, self.escape.as_ref()) {
            Ok((write, new)) => {
                tracing::error!(old = pid, new, "the watchdog ended; started another");
                *pipe = Some(write);
                self.pid.store(new, Ordering::Relaxed);
            }
            Err(e) => tracing::error!("the watchdog ended and cannot be started again: {e}"),
        }
    }

    /// The watchdog's process id.
    pub fn pid(&self) -> i32 {
        self.pid.load(Ordering::Relaxed)
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.words);
        // SAFETY: i is inside the mapping, which lives as long as self; AtomicU64 has the
        // alignment and size of u64 and the mapping is page-aligned.
        unsafe { &*self.board.add(i) }
    }

    /// Publishes what to release if the manager dies: each program's target and the affinity to
    /// widen its threads back to, then the processes of programs outside their groups (strays,
    /// with their start times: the watchdog leaves a pid that another process took since). Records
    /// past the board's capacity are left out (with a warning; the manager refuses registrations
    /// past the same limit, and a stray not on the board is never stopped): pass the programs'
    /// targets first.
    pub fn publish<'a>(&self, programs: impl Iterator<Item = (Target, u64, &'a CpuSet)>) -> usize {
        self.revive();
        let active = self.word(0).load(Ordering::Relaxed) as usize & 1;
        let spare = 1 - active;
        let base = HEADER + spare * self.capacity * RECORD;
        let mut n = 0;
        for (target, start, cpus) in programs {
            if n == self.capacity {
                tracing::warn!(capacity = self.capacity, "watchdog board full; later programs not covered");
                break;
            }
            let r = base + n * RECORD;
            let (pid, kind) = match target {
                Target::Group(g) => (g, GROUP),
                Target::Process(p) => (p, 0),
            };
            self.word(r).store(kind | pid as u32 as u64, Ordering::Relaxed);
            self.word(r + 1).store(start, Ordering::Relaxed);
            let words = cpus.as_words();
            if words.len() > MASK_WORDS {
                // Such a set came from no affinity mask (affinity::get cannot read one).
                tracing::error!(?target, "CPUs past {} cannot be widened back by the watchdog", affinity::MAX_CPUS);
            }
            for w in 0..MASK_WORDS {
                self.word(r + 2 + w).store(words.get(w).copied().unwrap_or(0), Ordering::Relaxed);
            }
            n += 1;
        }
        self.word(1 + spare).store(n as u64, Ordering::Relaxed);
        self.word(0).store(spare as u64, Ordering::Release);
        n
    }

    /// Ends the watchdog with nothing to release (the manager released its programs itself).
    pub fn stop(&mut self) {
        if self.pipe.get_mut().unwrap_or_else(|e| e.into_inner()).is_none() {
            return;
        }
        self.publish(std::iter::empty());
        *self.pipe.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(*self.pid.get_mut(), std::ptr::null_mut(), 0) };
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop();
        // SAFETY: the mapping made in spawn, no longer used.
        unsafe { libc::munmap(self.board as *mut libc::c_void, self.words * std::mem::size_of::<u64>()) };
    }
}

/// Forks a watchdog process on `board`; returns the write end of its pipe and its pid.
fn fork_watchdog(
    board: *mut AtomicU64,
    capacity: usize,
    escape: Option<&OwnedFd>,
) -> io::Result<(OwnedFd, libc::pid_t)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just created both; we own them.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // Read before the fork: in the child, a manager that died at once would leave `getppid` the
    // reaper's pid, and the watchdog would look for another manager's cgroups.
    let manager = std::process::id() as libc::pid_t;
    // SAFETY: the child runs `watch`, which makes system calls only, and never returns.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: in the child, see above.
        unsafe { watch(manager, read.as_raw_fd(), escape.map_or(-1, |e| e.as_raw_fd()), board, capacity) }
    }
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((write, pid))
}

/// The watchdog process: waits for the manager's end, releases what the board lists, exits.
///
/// # Safety
/// Only in the child of `fork`, with `manager` the parent's pid, `pipe` the read end and `board`
/// the shared mapping.
unsafe fn watch(manager: libc::pid_t, pipe: RawFd, escape: RawFd, board: *mut AtomicU64, capacity: usize) -> ! {
    // Keep only the pipe (moved to 3) and the escape (moved to 4, -1 without); close the rest.
    let escape = if escape >= 0 { libc::fcntl(escape, libc::F_DUPFD, 10) } else { -1 };
    if pipe != 3 {
        libc::dup2(pipe, 3);
    }
    let escape = if escape >= 0 && libc::dup2(escape, 4) == 4 { 4 } else { -1 };
    if escape < 0 {
        // Whatever 4 was (the write end of this very pipe, say) must not stay open here: the
        // watchdog would never see the manager's end, and a clean stop would wait for it forever.
        libc::close(4);
    }
    if libc::syscall(libc::SYS_close_range, 5u32, u32::MAX, 0u32) != 0 {
        // Before Linux 5.9: one by one, up to the usual limit.
        for fd in 5..65536 {
            libc::close(fd);
        }
    }
    for fd in 0..3 {
        libc::close(fd);
    }
    libc::setpgid(0, 0);
    libc::prctl(libc::PR_SET_NAME, c"cpumgr-watchdog".as_ptr());
    let mut byte = 0u8;
    loop {
        let n = libc::read(3, (&mut byte as *mut u8).cast(), 1);
        if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
            break;
        }
    }
    let word = |i: usize| (*board.add(i)).load(Ordering::Acquire);
    let active = word(0) as usize & 1;
    let len = (word(1 + active) as usize).min(capacity);
    let base = HEADER + active * capacity * RECORD;
    for k in 0..len {
        let r = base + k * RECORD;
        let head = word(r);
        let pid = head as u32 as i32;
        let start = word(r + 1);
        let mut words = [0u64; MASK_WORDS];
        for (w, bits) in words.iter_mut().enumerate() {
            *bits = word(r + 2 + w);
        }
        // The board holds MASK_WORDS words, all within a mask.
        let Ok(mask) = affinity::mask_of_words(&words) else { continue };
        if pid <= 0 || (start != 0 && stat_field(pid, 19) != Some(start as i64)) {
            continue;
        }
        if head & GROUP != 0 {
            libc::kill(-pid, libc::SIGCONT);
            each_number(b"/proc\0", |p| {
                if group_of(p) == Some(pid) {
                    leave_cpuset(escape, manager, p);
                    widen(p, &mask)
                }
            });
        } else {
            libc::kill(pid, libc::SIGCONT);
            leave_cpuset(escape, manager, pid);
            widen(pid, &mask);
        }
    }
    libc::_exit(0)
}

/// Calls `f` with each numeric entry of directory `path` (a NUL-terminated path).
///
/// # Safety
/// System calls only; `path` must end in NUL.
unsafe fn each_number(path: &[u8], mut f: impl FnMut(i32)) {
    let dir = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
    if dir < 0 {
        return;
    }
    let mut buf = [0u8; 4096];
    loop {
        let n = libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len());
        if n <= 0 {
            break;
        }
        let mut at = 0usize;
        while at < n as usize {
            // struct linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, char name[].
            let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
            let name = &buf[at + 19..at + reclen];
            let mut v: i32 = 0;
            let mut digits = 0;
            for &c in name.iter().take_while(|&&c| c != 0) {
                if !c.is_ascii_digit() || digits > 9 {
                    digits = 0;
                    break;
                }
                v = v * 10 + (c - b'0') as i32;
                digits += 1;
            }
            if digits > 0 {
                f(v);
            }
            at += reclen;
        }
    }
    libc::close(dir);
}

/// Writes `/proc/<pid><suffix>\0` into `out`; the bytes written.
fn proc_path(out: &mut [u8; 64], pid: i32, suffix: &[u8]) -> usize {
    let mut n = 0;
    for &c in b"/proc/" {
        out[n] = c;
        n += 1;
    }
    let mut digits = [0u8; 10];
    let (mut v, mut d) = (pid as u32, 0);
    loop {
        digits[d] = b'0' + (v % 10) as u8;
        d += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in (0..d).rev() {
        out[n] = digits[i];
        n += 1;
    }
    for &c in suffix {
        out[n] = c;
        n += 1;
    }
    out[n] = 0;
    n + 1
}

/// The process group of `pid`, from `/proc/PID/stat`, with system calls only.
fn group_of(pid: i32) -> Option<i32> {
    stat_field(pid, 2).and_then(|g| i32::try_from(g).ok())
}

/// Field `3 + n` of `/proc/PID/stat` (counted after the last `)`: 0 the state, 2 the group, 19
/// the start time), as a number, with system calls only.
fn stat_field(pid: i32, index: usize) -> Option<i64> {
    let mut buf = [0u8; 512];
    let text = read_proc(pid, b"/stat", &mut buf)?;
    let close = text.iter().rposition(|&c| c == b')')?;
    let mut fields = text[close + 1..].split(|&c| c == b' ' || c == b'\n').filter(|f| !f.is_empty());
    let field = fields.nth(index)?;
    let mut v: i64 = 0;
    for &c in field {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as i64)?;
    }
    Some(v)
}

/// Moves process `pid` to the cgroup whose `cgroup.procs` is open as `escape` (-1: nothing to do),
/// out of the cpuset cgroups of the dead manager `manager`; a process in any other cgroup (one
/// someone else made, [`crate::cgroup_owner`]) stays there.
fn leave_cpuset(escape: RawFd, manager: i32, pid: i32) {
    if escape < 0 || !in_tree_of(pid, manager) {
        return;
    }
    let mut path = [0u8; 64];
    // "/proc/<pid>" less its prefix and NUL is the pid in decimal.
    let n = proc_path(&mut path, pid, b"");
    // SAFETY: a write of a stack buffer to a descriptor this process owns.
    unsafe { libc::write(escape, path[6..n - 1].as_ptr().cast(), n - 7) };
}

/// Whether process `pid` is in a cgroup of manager `manager`'s tree: `/cpumgr-MANAGER-` in its
/// `/proc/PID/cgroup`.
fn in_tree_of(pid: i32, manager: i32) -> bool {
    let mut needle = [0u8; 64];
    let n = proc_path(&mut needle, manager, b"-");
    // `proc_path` writes "/proc/MANAGER-": the needle is "/cpumgr-" and "MANAGER-".
    let mut want = [0u8; 64];
    want[..8].copy_from_slice(b"/cpumgr-");
    let digits = &needle[6..n - 1];
    want[8..8 + digits.len()].copy_from_slice(digits);
    let want = &want[..8 + digits.len()];
    let mut buf = [0u8; 4096];
    read_proc(pid, b"/cgroup", &mut buf).is_some_and(|text| text.windows(want.len()).any(|w| w == want))
}

/// The start of `/proc/PID<suffix>`, as much as `buf` holds, read with system calls only; `None`
/// when it cannot be read.
fn read_proc<'a>(pid: i32, suffix: &[u8], buf: &'a mut [u8]) -> Option<&'a [u8]> {
    let mut path = [0u8; 64];
    proc_path(&mut path, pid, suffix);
    // SAFETY: open/read/close on a NUL-terminated path and a buffer of `buf.len()` bytes.
    let n = unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        n
    };
    buf.get(..usize::try_from(n).ok()?)
}

/// Sets every thread of `pid` to `mask`.
fn widen(pid: i32, mask: &affinity::Mask) {
    let mut path = [0u8; 64];
    proc_path(&mut path, pid, b"/task");
    // SAFETY: system calls on a NUL-terminated path.
    unsafe {
        each_number(&path, |tid| {
            let _ = affinity::set_mask(tid, mask);
        })
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_watchdog_is_replaced_at_the_next_publication_and_a_stop_reaps_it() {
        let mut w = Watchdog::spawn(4, None).unwrap();
        let first = w.pid();
        // SAFETY: signals our own child.
        assert_eq!(unsafe { libc::kill(first, libc::SIGKILL) }, 0);
        let mut rounds = 0;
        while w.pid() == first {
            rounds += 1;
            assert!(rounds < 2000, "no new watchdog after {rounds} publications");
            w.publish(std::iter::empty());
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let second = w.pid();
        assert!(std::fs::metadata(format!("/proc/{first}")).is_err(), "the killed watchdog was reaped");
        assert!(std::fs::metadata(format!("/proc/{second}")).is_ok());
        w.stop();
        assert!(std::fs::metadata(format!("/proc/{second}")).is_err(), "a stop reaps it");
    }

    #[test]
    fn proc_paths_and_groups_are_read_without_the_standard_library() {
        let mut p = [0u8; 64];
        let n = proc_path(&mut p, 4_194_304, b"/task");
        assert_eq!(&p[..n], b"/proc/4194304/task\0");
        let me = std::process::id() as i32;
        assert_eq!(group_of(me), Some(nix::unistd::getpgrp().as_raw()));
        let mut seen = Vec::new();
        // SAFETY: a NUL-terminated path.
        unsafe { each_number(b"/proc/self/task\0", |t| seen.push(t)) };
        assert!(seen.contains(&(nix::unistd::gettid().as_raw())), "{seen:?}");
    }
}
