//! Marks the tests that need what this machine may lack (docs/ARCHITECTURE.md, Tests that need
//! the environment).
use cpumgr_testenv::Need;

fn main() {
    cpumgr_testenv::probe(&[
        Need::Root,
        Need::Clang,
        Need::Mpi,
        Need::OpenMpi,
        Need::Go,
        Need::Chromium,
        Need::SharedTraces,
        Need::Slurm,
        Need::NinjaJobserver,
        Need::OneTbb,
        Need::CgroupV1,
    ]);
}
