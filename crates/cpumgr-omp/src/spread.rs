//! Spreading a team over CPUs that came back. The manager widens each thread's affinity when a
//! folded team's allocation grows, but the kernel moves a thread only when its CPU is no longer
//! allowed or when its load balancer gets to it, milliseconds later: meanwhile the members stay
//! stacked on the CPUs they were folded onto, and those that spin at a barrier hold the CPU their
//! partner waits for (a fine-grained team run whole after a fold spent ~55 us of CPU per barrier
//! against 3 us spread). So at a barrier a member that sees more CPUs than at its last one moves
//! itself to its own CPU of the allocation (its thread number's, round-robin) and widens its
//! affinity back to the whole allocation at once.

use std::cell::Cell;
use std::ffi::c_int;

use cpumgr_client::Allocation;

use crate::runtime;

thread_local! {
    /// The team (as `usize`) this thread last met a barrier of, and the CPUs it had then.
    static SEEN: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// At a barrier of `team` under allocation `alloc`: moves the calling thread to its own CPU of
/// the allocation when the team has more CPUs than at this thread's last barrier of it.
pub fn follow(team: usize, alloc: &Allocation) {
    let cpus = alloc.cpus.len();
    let (seen_team, seen) = SEEN.with(|s| s.replace((team, cpus)));
    if seen_team != team || cpus <= seen || !alloc.running {
        return;
    }
    let Some(own) = alloc.cpus.iter().nth(runtime::thread_num() as usize % cpus) else { return };
    // SAFETY: no arguments; returns the CPU the calling thread runs on, or -1.
    if unsafe { libc::sched_getcpu() } == own as c_int {
        return;
    }
    let words = alloc.cpus.as_words();
    let mut one = vec![0u64; own as usize / 64 + 1];
    one[own as usize / 64] = 1 << (own % 64);
    // Narrowed to one CPU, the kernel moves the thread there before the call returns; widened
    // back, it stays. A failure (a CPU the manager just took away) leaves the balancer to it.
    if set_affinity(&one) && set_affinity(words) {
        runtime::log(format_args!("cpumgr-omp: member {} moved to CPU {own} of {cpus}", runtime::thread_num()));
    }
    // A decision published meanwhile was pinned by the manager before this widening: take its
    // CPUs, so the thread never keeps CPUs the program no longer has.
    if let Some(now) = runtime::client().allocation().filter(|a| a.epoch != alloc.epoch && a.running) {
        set_affinity(now.cpus.as_words());
    }
}

/// Sets the calling thread's affinity to the CPUs of `words` (bit `i` of word `w`: CPU
/// `64w + i`); whether it took.
fn set_affinity(words: &[u64]) -> bool {
    // SAFETY: `words` is a live CPU mask of `size_of_val(words)` bytes, the layout the kernel
    // reads (unsigned longs of 64 bits on the 64-bit targets this builds for); 0 is the caller.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(words), words.as_ptr().cast()) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpumgr_proto::slot::CpuWords;

    fn allocation(epoch: u64, words: &[u64]) -> Allocation {
        let cpus = CpuWords::from_words(words);
        Allocation { epoch, count: cpus.len() as u32, running: true, cpus }
    }

    fn affinity() -> Vec<u64> {
        let mut words = [0u64; 16];
        // SAFETY: a live buffer of the size given, for the calling thread's mask.
        let ok = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&words), words.as_mut_ptr().cast()) };
        assert_eq!(ok, 0);
        let n = words.iter().rposition(|&w| w != 0).map_or(0, |i| i + 1);
        words[..n].to_vec()
    }

    /// A thread left on CPU 1 by a fold, whose team gets CPUs 0-1 back, moves to CPU 0 (its
    /// own: thread 0 of no team) and may use both again.
    #[test]
    fn a_member_stacked_on_another_cpu_moves_to_its_own_when_cpus_come_back() {
        std::thread::spawn(|| {
            assert!(set_affinity(&[0b10]), "this test needs CPUs 0 and 1");
            follow(1, &allocation(1, &[0b10]));
            follow(1, &allocation(2, &[0b11]));
            // SAFETY: no arguments.
            assert_eq!(unsafe { libc::sched_getcpu() }, 0);
            assert_eq!(affinity(), vec![0b11]);
            // Nothing more to do while the CPUs stay the same.
            assert!(set_affinity(&[0b10]));
            follow(1, &allocation(3, &[0b11]));
            assert_eq!(affinity(), vec![0b10]);
        })
        .join()
        .unwrap();
    }
}
