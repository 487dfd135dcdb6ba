//! MPI jobs recognised from their launcher's command line. An MPI job's ranks busy-poll while
//! they wait for each other (Open MPI's and MPICH's defaults), so it is a rigid team of
//! exactly its rank count that must run whole (the papers' self co-scheduling): folded or
//! squeezed onto fewer CPUs, every exchange waits for a descheduled rank's time slice.
//! `cpumgr run -- mpirun -np 4 ./solver` registers it so without `--rigid 4`.

use std::path::Path;

/// The launchers' command names: Open MPI's, MPICH's (Hydra) and Debian's alternatives for both.
const LAUNCHERS: [&str; 9] = [
    "mpirun",
    "mpiexec",
    "mpiexec.hydra",
    "mpiexec.mpich",
    "mpirun.mpich",
    "mpiexec.openmpi",
    "mpirun.openmpi",
    "orterun",
    "prterun",
];

/// The ranks an MPI launcher's command line starts (`-n N`, `-np N`, `--np N`, `-c N` and their
/// `=N` forms, summed over the `:`-separated parts of an MPMD line); `None` when `cmd` is not an
/// MPI launcher or names no count (the launcher then picks one itself, which only it knows).
/// A part's first count is the launcher's: the launcher's options come before the program, and
/// what follows the program is its own (`mpirun -np 2 ./halo -n 65536` starts 2 ranks).
pub fn ranks(cmd: &[String]) -> Option<u32> {
    let name = Path::new(cmd.first()?).file_name()?.to_str()?;
    if !LAUNCHERS.contains(&name) {
        return None;
    }
    let mut total = 0u32;
    let mut counted = false;
    let mut args = cmd[1..].iter();
    while let Some(a) = args.next() {
        if a == ":" {
            counted = false;
            continue;
        }
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (a.as_str(), None),
        };
        if counted || !matches!(flag, "-n" | "-np" | "--n" | "--np" | "-c") {
            continue;
        }
        let value = inline.or_else(|| args.next().cloned())?;
        total = total.checked_add(value.parse::<u32>().ok().filter(|&n| n > 0)?)?;
        counted = true;
    }
    (total > 0).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn launchers_name_their_ranks_in_every_spelling() {
        assert_eq!(ranks(&words("mpirun -np 4 ./solver")), Some(4));
        assert_eq!(ranks(&words("/usr/bin/mpiexec -n 2 ./halo -steps 10")), Some(2));
        assert_eq!(ranks(&words("mpiexec.hydra --np=3 ./a")), Some(3));
        assert_eq!(ranks(&words("mpirun --oversubscribe -c 2 ./a")), Some(2));
        assert_eq!(ranks(&words("mpiexec -n 2 ./a : -n 3 ./b")), Some(5), "MPMD parts add up");
        assert_eq!(ranks(&words("mpirun.openmpi -np 2 ./halo -n 65536 -steps 30000")), Some(2), "the program's own -n");
        assert_eq!(ranks(&words("mpiexec -n 2 ./a -c 9 : -n 3 ./b -n 7")), Some(5), "each part's own");
    }

    #[test]
    fn other_commands_and_unknown_counts_are_not_recognised() {
        assert_eq!(ranks(&words("./solver -n 4")), None, "not a launcher");
        assert_eq!(ranks(&words("mpirun ./solver")), None, "the launcher picks the count");
        assert_eq!(ranks(&words("mpirun -np")), None, "a flag without its value");
        assert_eq!(ranks(&words("mpirun -np zero ./a")), None);
        assert_eq!(ranks(&words("mpirun -np 0 ./a")), None);
        assert_eq!(ranks(&[]), None);
    }
}
