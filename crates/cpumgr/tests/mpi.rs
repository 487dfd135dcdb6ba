//! Real MPI jobs (`mpiexec -n 2` of `kernels/halo.c`, built with `mpicc`) under plain
//! `cpumgr run`: recognised as rigid teams of their ranks without `--rigid`, found whole although
//! the launcher's proxy and ranks make sessions of their own, co-scheduled (stopped and continued
//! together, every rank), and left running and unpinned when the manager is killed.
//!
//! Needs an MPI implementation (`mpicc`, `mpiexec`; CI installs Debian's MPICH): elsewhere the
//! tests are ignored, and the runner says so.

mod common;
#[path = "common/mpi_job.rs"]
mod mpi_job;

use std::sync::{Mutex, OnceLock};

use mpi_job::Mpi;

static DEFAULT_MPI: Mpi = Mpi {
    mpicc: "mpicc",
    launcher: "mpiexec",
    ranks_flag: "-n",
    env: &[],
    binds_ranks: false,
    built: OnceLock::new(),
    serial: Mutex::new(()),
};

#[test]
#[cfg_attr(not(has_mpi), ignore = "needs MPI: mpicc and mpiexec (apt-get install mpich libmpich-dev)")]
fn an_mpi_job_under_cpumgr_run_gives_the_plain_result() {
    mpi_job::gives_the_plain_result(&DEFAULT_MPI);
}

#[test]
#[cfg_attr(not(has_mpi), ignore = "needs MPI: mpicc and mpiexec (apt-get install mpich libmpich-dev)")]
fn an_mpi_job_is_a_rigid_team_stopped_and_continued_whole_and_released_by_a_killed_manager() {
    mpi_job::is_a_rigid_team_stopped_and_continued_whole_and_released_by_a_killed_manager(&DEFAULT_MPI);
}
