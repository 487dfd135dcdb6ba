//! CPU affinity of threads and processes (`sched_setaffinity`, `sched_getaffinity` through
//! `nix::sched`): the one place the workspace turns a [`CpuSet`] into a kernel mask and back.
//!
//! A mask holds [`MAX_CPUS`] CPUs (glibc's `cpu_set_t`). A set with a CPU past that is an error,
//! never a smaller set: pinning a program to part of what it was given would starve it unseen.

use std::io;

use cpumgr_core::CpuSet;
/// A kernel affinity mask of [`MAX_CPUS`] CPUs.
pub use nix::sched::CpuSet as Mask;
use nix::unistd::Pid;

/// How many CPUs an affinity mask holds (1024).
pub const MAX_CPUS: usize = Mask::count();

/// `cpus` as an affinity mask; an error (`InvalidInput`) names the first CPU the mask cannot hold.
pub fn mask(cpus: &CpuSet) -> io::Result<Mask> {
    let mut mask = Mask::new();
    for c in cpus.iter() {
        mask.set(c as usize).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {c} is past the {MAX_CPUS} CPUs an affinity mask holds"),
            )
        })?;
    }
    Ok(mask)
}

/// The mask of the CPUs whose bits are set in `words` (CPU `i` at bit `i % 64` of word `i / 64`,
/// [`CpuSet::as_words`]'s layout), for code that may not allocate (a forked child); words past
/// [`MAX_CPUS`] are an error.
pub fn mask_of_words(words: &[u64]) -> io::Result<Mask> {
    let mut mask = Mask::new();
    for (w, &bits) in words.iter().enumerate() {
        for b in (0..64).filter(|b| bits & (1 << b) != 0) {
            mask.set(w * 64 + b).map_err(io::Error::from)?;
        }
    }
    Ok(mask)
}

/// Sets the affinity of thread `tid` (0: the caller) to `mask`. A plain system call, safe
/// between `fork` and `exec` (no allocation on any path).
pub fn set_mask(tid: i32, mask: &Mask) -> io::Result<()> {
    nix::sched::sched_setaffinity(Pid::from_raw(tid), mask).map_err(io::Error::from)
}

/// Sets the affinity of thread `tid` (0: the caller) to `cpus`.
pub fn set(tid: i32, cpus: &CpuSet) -> io::Result<()> {
    set_mask(tid, &mask(cpus)?)
}

/// The affinity of thread or process `tid` (0: the caller). A kernel whose masks are wider than
/// [`MAX_CPUS`] answers `EINVAL`, an error here.
pub fn get(tid: i32) -> io::Result<CpuSet> {
    let mask = nix::sched::sched_getaffinity(Pid::from_raw(tid)).map_err(io::Error::from)?;
    Ok((0..MAX_CPUS).filter(|&c| mask.is_set(c).unwrap_or(false)).map(|c| c as u32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_past_the_mask_is_an_error_not_a_smaller_set() {
        let wide = CpuSet::parse(&format!("0,{MAX_CPUS}")).unwrap();
        let e = mask(&wide).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains(&format!("CPU {MAX_CPUS} is past")), "{e}");
        let mut words = vec![0u64; MAX_CPUS / 64 + 1];
        words[MAX_CPUS / 64] = 1;
        assert!(mask_of_words(&words).is_err());
    }

    #[test]
    fn sets_and_words_give_the_same_mask() {
        let cpus = CpuSet::parse("0,3,64-66,1023").unwrap();
        let (a, b) = (mask(&cpus).unwrap(), mask_of_words(cpus.as_words()).unwrap());
        assert!((0..MAX_CPUS).all(|c| a.is_set(c).unwrap() == b.is_set(c).unwrap()));
        assert_eq!((0..MAX_CPUS).filter(|&c| a.is_set(c).unwrap()).count(), cpus.len());
    }

    #[test]
    fn a_thread_pinned_to_one_of_its_cpus_reads_that_cpu_back() {
        std::thread::spawn(|| {
            let mine = get(0).unwrap();
            let first: CpuSet = mine.iter().take(1).collect();
            set(0, &first).unwrap();
            assert_eq!(get(0).unwrap(), first);
        })
        .join()
        .unwrap();
    }
}
