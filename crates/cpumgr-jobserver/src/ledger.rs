//! Token accounting: how many tokens a build may hold for an allocation, and how many the server
//! must hand out or take back to get there. Pure arithmetic, so the rules are tested alone.

/// The tokens a build gets for `cpus` allocated CPUs: one job runs on the implicit token every
/// jobserver client has, so `cpus - 1`, at most `cap - 1` when the command asked for `-jCAP`,
/// and never below 0 (a build on no CPU, or one not running this quantum, keeps its implicit job).
pub fn tokens_for(cpus: u32, cap: Option<u32>) -> u32 {
    cpus.min(cap.unwrap_or(u32::MAX)).saturating_sub(1)
}

/// The server's count of tokens it has let out (in the grant pipe or held by the build's
/// clients), against the count the allocation allows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ledger {
    /// Tokens out: written to the build and not yet taken back.
    out: u32,
    /// Tokens the allocation allows out.
    target: u32,
}

impl Ledger {
    /// Sets the count the allocation allows.
    pub fn set_target(&mut self, target: u32) {
        self.target = target;
    }

    /// The count the allocation allows.
    pub fn target(&self) -> u32 {
        self.target
    }

    /// Tokens out now.
    pub fn out(&self) -> u32 {
        self.out
    }

    /// How many tokens to hand out to reach the target.
    pub fn to_grant(&self) -> u32 {
        self.target.saturating_sub(self.out)
    }

    /// How many tokens to take back (and withhold) to come down to the target.
    pub fn excess(&self) -> u32 {
        self.out.saturating_sub(self.target)
    }

    /// `n` tokens were handed out.
    pub fn granted(&mut self, n: u32) {
        self.out += n;
    }

    /// `n` tokens came back to the server (returned by a client, or taken back from the grant
    /// pipe). More than are out is the build writing tokens it never got: counted as none out.
    pub fn came_back(&mut self, n: u32) {
        self.out = self.out.saturating_sub(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_the_allocation_less_the_implicit_one() {
        assert_eq!(tokens_for(2, None), 1);
        assert_eq!(tokens_for(1, None), 0);
        assert_eq!(tokens_for(0, None), 0);
        assert_eq!(tokens_for(64, Some(4)), 3);
        assert_eq!(tokens_for(2, Some(64)), 1);
        assert_eq!(tokens_for(8, Some(1)), 0);
    }

    #[test]
    fn a_growing_allocation_grants_the_difference() {
        let mut l = Ledger::default();
        l.set_target(3);
        assert_eq!((l.to_grant(), l.excess()), (3, 0));
        l.granted(3);
        l.set_target(5);
        assert_eq!((l.to_grant(), l.excess()), (2, 0));
    }

    #[test]
    fn a_shrinking_allocation_withholds_tokens_as_they_come_back() {
        let mut l = Ledger::default();
        l.set_target(3);
        l.granted(3);
        l.set_target(0);
        assert_eq!((l.to_grant(), l.excess()), (0, 3));
        // Two jobs still hold theirs; one token was idle in the pipe and is taken back at once.
        l.came_back(1);
        assert_eq!((l.to_grant(), l.excess()), (0, 2));
        // A job ends: its token is kept, not handed out again.
        l.came_back(1);
        assert_eq!((l.to_grant(), l.excess(), l.out()), (0, 1, 1));
        // The allocation grows before the last job ends: the withheld debt is cancelled first.
        l.set_target(2);
        assert_eq!((l.to_grant(), l.excess()), (1, 0));
    }

    #[test]
    fn tokens_written_back_that_were_never_granted_do_not_underflow() {
        let mut l = Ledger::default();
        l.set_target(1);
        l.granted(1);
        l.came_back(5);
        assert_eq!((l.out(), l.to_grant()), (0, 1));
    }
}
