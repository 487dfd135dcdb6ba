//! How a simulation runs: the quantum, the cost model, the admission limit and the fast-forward.

use cpumgr_core::Nanos;

use crate::cost::CostModel;

/// How a simulation runs.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// The scheduler quantum; `None`: the policy's preferred quantum, or 100 ms.
    pub quantum: Option<Nanos>,
    /// The cost-of-sharing model.
    pub cost: CostModel,
    /// Most jobs admitted at once (the multiprogramming level); 0 for the policy's preferred
    /// level ([`cpumgr_core::SimHints::preferred_mpl`]), or no limit if it has none. Jobs beyond it queue in
    /// arrival order (a FCFS long-term scheduler).
    pub mpl: u32,
    /// Whether the admission limit follows the policy's MPL advice (PDPA) when it gives one.
    pub follow_mpl_advice: bool,
    /// Whether repeating schedules are skipped over (see the engine's documentation, `engine/mod.rs`).
    pub fast_forward: bool,
    /// Whether every placement is checked for overlaps and sizes (cheap; on by default).
    pub check_placement: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            quantum: None,
            cost: CostModel::default(),
            mpl: 0,
            follow_mpl_advice: true,
            fast_forward: true,
            check_placement: true,
        }
    }
}
