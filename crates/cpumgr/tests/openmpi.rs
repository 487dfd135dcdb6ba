//! Real Open MPI jobs (`mpirun.openmpi -np 2` of `kernels/halo.c`, built with `mpicc.openmpi`)
//! under plain `cpumgr run`: recognised as rigid teams of their ranks without `--rigid`, found
//! whole although the launcher forks its ranks into process groups of their own (one node: no
//! `orted`, every rank a child of `mpirun`, each its own group leader in `mpirun`'s session),
//! co-scheduled (stopped and continued together, every rank; `mpirun` forwards the SIGCONT it
//! gets to its ranks, which changes nothing), and left running and unpinned when the manager is
//! killed. The ranks wait by polling shared memory in user space (no system call while they
//! wait), the busy-polling team of the papers' self co-scheduling.
//!
//! Needs Debian's Open MPI beside the default MPI (`apt-get install openmpi-bin libopenmpi-dev`;
//! `tests/mpi.rs` runs the same checks with the default, MPICH in CI): elsewhere the tests are
//! ignored, and the runner says so. Open MPI refuses to run as root unless its two
//! `OMPI_ALLOW_RUN_AS_ROOT` variables are set: the tests set them on their commands only.

mod common;
#[path = "common/mpi_job.rs"]
mod mpi_job;

use std::sync::{Mutex, OnceLock};

use mpi_job::Mpi;

static OPEN_MPI: Mpi = Mpi {
    mpicc: "mpicc.openmpi",
    launcher: "mpirun.openmpi",
    ranks_flag: "-np",
    env: &[("OMPI_ALLOW_RUN_AS_ROOT", "1"), ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")],
    binds_ranks: true,
    built: OnceLock::new(),
    serial: Mutex::new(()),
};

#[test]
#[cfg_attr(
    not(has_openmpi),
    ignore = "needs Open MPI: mpicc.openmpi and mpirun.openmpi (apt-get install openmpi-bin libopenmpi-dev)"
)]
fn an_open_mpi_job_under_cpumgr_run_gives_the_plain_result() {
    mpi_job::gives_the_plain_result(&OPEN_MPI);
}

#[test]
#[cfg_attr(
    not(has_openmpi),
    ignore = "needs Open MPI: mpicc.openmpi and mpirun.openmpi (apt-get install openmpi-bin libopenmpi-dev)"
)]
fn an_open_mpi_job_is_a_rigid_team_stopped_and_continued_whole_and_released_by_a_killed_manager() {
    mpi_job::is_a_rigid_team_stopped_and_continued_whole_and_released_by_a_killed_manager(&OPEN_MPI);
}
