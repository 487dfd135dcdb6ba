//! Marks the tests that need what this machine may lack (docs/ARCHITECTURE.md, Tests that need
//! the environment).
use cpumgr_testenv::Need;

fn main() {
    cpumgr_testenv::probe(&[Need::Make, Need::OneTbb]);
}
