//! Marks the tests that need what this machine may lack (docs/ARCHITECTURE.md, Tests that need
//! the environment): the shared SWF traces.
use cpumgr_testenv::Need;

fn main() {
    cpumgr_testenv::probe(&[Need::SharedTraces]);
}
