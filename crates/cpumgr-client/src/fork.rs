//! Telling a forked child from the process that made a client or a pool.
//!
//! A child of `fork` gets a copy of its parent's memory but only the thread that forked: a
//! [`Client`](crate::Client) copied into it still holds the parent's registration (its slot, its
//! connection to the manager), and a [`Pool`](crate::Pool) still counts on workers that do not
//! exist there. Both record the [`Process`] they were made in and check it where it matters.
//!
//! The check runs before every parallel region, so it must cost no system call (`getpid` is one
//! since glibc 2.25): a `pthread_atfork` handler, registered before the first client or pool is
//! made, counts the forks on the way to this process, and a [`Process`] is that count. Every copy
//! of a value made in a process lives in a descendant whose count is higher, so the count alone
//! tells the process that made it from any child.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

/// Forks between the first process that loaded this library and this one.
static FORKS: AtomicU64 = AtomicU64::new(0);

/// The `pthread_atfork` child handler: runs in the child, on its one thread, right after `fork`.
extern "C" fn forked() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// The process a client or pool was made in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Process(u64);

impl Process {
    /// This process (and, the first time, the handler that counts forks from now on).
    pub(crate) fn current() -> Process {
        static HANDLER: Once = Once::new();
        HANDLER.call_once(|| {
            // SAFETY: registers a handler that only increments an atomic, which is safe in a
            // child of fork. It fails only without memory, and then no fork is told apart.
            if unsafe { nix::libc::pthread_atfork(None, None, Some(forked)) } != 0 {
                crate::say::note("cannot watch for fork: a forked child may act for its parent");
            }
        });
        Process(FORKS.load(Ordering::Relaxed))
    }

    /// Whether the caller runs in this process, not in a child forked from it.
    #[inline]
    pub(crate) fn is_current(self) -> bool {
        self == Process::current()
    }
}
