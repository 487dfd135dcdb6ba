//! Dividing the program's worker budget (its allocated CPUs less the thread that runs `main`)
//! among the permits that want threads: every permit gets its minimum (a TBB arena's minimum is
//! its mandatory concurrency, without which enqueued work never runs), then higher priorities
//! first, the rest one thread at a time round the permits of a priority, none past its maximum.
//! Equal permits end within one thread of each other.

/// What one permit asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Demand {
    /// Fewest threads it runs with.
    pub min: u32,
    /// Most threads it can use.
    pub max: u32,
    /// Larger first.
    pub priority: i32,
}

/// The threads each of `demands` gets from `budget`, in order.
pub fn grant(budget: u32, demands: &[Demand]) -> Vec<u32> {
    let mut given: Vec<u32> = demands.iter().map(|d| d.min.min(d.max)).collect();
    let mut left = budget.saturating_sub(given.iter().sum());
    let mut priorities: Vec<i32> = demands.iter().map(|d| d.priority).collect();
    priorities.sort_unstable_by(|a, b| b.cmp(a));
    priorities.dedup();
    for p in priorities {
        while left > 0 {
            let mut gave = false;
            for (g, d) in given.iter_mut().zip(demands).filter(|(_, d)| d.priority == p) {
                if left > 0 && *g < d.max {
                    *g += 1;
                    left -= 1;
                    gave = true;
                }
            }
            if !gave {
                break;
            }
        }
    }
    given
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(min: u32, max: u32) -> Demand {
        Demand { min, max, priority: 0 }
    }

    #[test]
    fn one_permit_gets_the_budget_up_to_its_maximum() {
        assert_eq!(grant(7, &[d(0, 15)]), [7]);
        assert_eq!(grant(7, &[d(0, 3)]), [3]);
        assert_eq!(grant(0, &[d(0, 3)]), [0]);
    }

    #[test]
    fn minimums_are_kept_even_beyond_the_budget() {
        assert_eq!(grant(0, &[d(1, 3), d(0, 3)]), [1, 0]);
        assert_eq!(grant(1, &[d(1, 3), d(1, 3)]), [1, 1]);
    }

    #[test]
    fn equal_permits_share_within_one_thread() {
        assert_eq!(grant(7, &[d(0, 15), d(0, 15)]), [4, 3]);
        assert_eq!(grant(6, &[d(0, 15), d(0, 2), d(0, 15)]), [2, 2, 2]);
        assert_eq!(grant(9, &[d(0, 15), d(0, 2), d(0, 15)]), [4, 2, 3]);
    }

    #[test]
    fn higher_priorities_are_filled_first() {
        let hi = Demand { min: 0, max: 4, priority: 10 };
        assert_eq!(grant(5, &[d(0, 8), hi]), [1, 4]);
    }

    #[test]
    fn never_more_than_the_budget_beyond_minimums_nor_above_a_maximum() {
        for budget in 0..20 {
            let demands = [d(0, 5), d(2, 3), d(1, 9), Demand { min: 0, max: 4, priority: 3 }];
            let g = grant(budget, &demands);
            let mins: u32 = demands.iter().map(|d| d.min).sum();
            let maxs: u32 = demands.iter().map(|d| d.max).sum();
            assert_eq!(g.iter().sum::<u32>(), budget.max(mins).min(maxs), "budget {budget}: {g:?}");
            assert!(g.iter().zip(&demands).all(|(g, d)| *g >= d.min && *g <= d.max));
        }
    }
}
