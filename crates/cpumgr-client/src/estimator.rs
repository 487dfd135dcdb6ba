//! A speedup estimator in the spirit of the SelfAnalyzer (paper 000 §4.4): the program times its
//! parallel regions, and the times of the same work on different team sizes give its speedup,
//! which `pdpa` reads from the slot to decide whether more CPUs are worth it.
//!
//! Regions are grouped by a key (the region's code address, or any id the runtime chooses) since
//! different regions do different work. Per key, the estimator keeps a smoothed duration per team
//! size. The speedup of team `p` is `T(b) / T(p) × S(b)`, where `b` is the smallest team measured
//! for that key and `S(b)` is 1 when `b` is 1, and `b` otherwise (the SelfAnalyzer's assumption that
//! the baseline run is efficient). Before two team sizes have been seen nothing is reported.

use std::collections::HashMap;
use std::time::Duration;

/// Weight of a new sample in the smoothed duration.
const SMOOTHING: f64 = 0.3;

/// Keys tracked at most; the oldest-seen region is dropped past it (a program with a bounded
/// number of distinct regions never hits it).
const MAX_KEYS: usize = 64;

/// Smoothed region durations per key and team size.
#[derive(Debug, Default)]
pub struct Estimator {
    regions: HashMap<u64, Vec<(u32, f64)>>,
    order: Vec<u64>,
}

impl Estimator {
    /// An empty estimator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that region `key` took `took` on `team` threads; returns the speedup estimate for
    /// `team`, known once the region has been timed on two team sizes or more.
    pub fn record(&mut self, key: u64, team: u32, took: Duration) -> Option<f64> {
        let secs = took.as_secs_f64();
        if team == 0 || secs <= 0.0 || !secs.is_finite() {
            return None;
        }
        if !self.regions.contains_key(&key) {
            if self.order.len() == MAX_KEYS {
                let old = self.order.remove(0);
                self.regions.remove(&old);
            }
            self.order.push(key);
        }
        let times = self.regions.entry(key).or_default();
        match times.iter_mut().find(|(p, _)| *p == team) {
            Some((_, t)) => *t = *t * (1.0 - SMOOTHING) + secs * SMOOTHING,
            None => times.push((team, secs)),
        }
        self.speedup(key, team)
    }

    /// The speedup estimate of region `key` on `team` threads, at most `team`: a measured
    /// superlinear speedup is a cache effect or noise, which the manager would cap anyway
    /// (and log as a rejected value).
    pub fn speedup(&self, key: u64, team: u32) -> Option<f64> {
        let times = self.regions.get(&key)?;
        if times.len() < 2 {
            return None;
        }
        let &(base, t_base) = times.iter().min_by_key(|(p, _)| *p)?;
        let &(_, t) = times.iter().find(|(p, _)| *p == team)?;
        Some((t_base / t * base as f64).min(team as f64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn one_team_size_gives_no_estimate() {
        let mut e = Estimator::new();
        assert_eq!(e.record(1, 4, ms(100)), None);
        assert_eq!(e.record(1, 4, ms(100)), None);
        assert_eq!((e.speedup(1, 4), e.speedup(2, 4)), (None, None));
    }

    #[test]
    fn two_sizes_give_the_ratio_against_the_smallest() {
        let mut e = Estimator::new();
        e.record(1, 1, ms(400));
        let s = e.record(1, 4, ms(125)).unwrap();
        assert!((s - 3.2).abs() < 1e-9, "{s}");
        // A baseline of 2 threads is taken as efficient: 2 × 200/125.
        let mut e = Estimator::new();
        e.record(7, 2, ms(200));
        assert!((e.record(7, 4, ms(125)).unwrap() - 3.2).abs() < 1e-9);
    }

    #[test]
    fn a_superlinear_measurement_is_capped_at_the_team() {
        let mut e = Estimator::new();
        e.record(3, 1, ms(500));
        assert_eq!(e.record(3, 2, ms(200)), Some(2.0), "2.5 measured on 2 threads");
    }

    #[test]
    fn regions_are_kept_apart_and_bounded() {
        let mut e = Estimator::new();
        e.record(1, 1, ms(100));
        assert_eq!(e.record(2, 2, ms(50)), None, "another region's baseline does not count");
        for k in 10..10 + MAX_KEYS as u64 {
            e.record(k, 1, ms(1));
        }
        assert!(e.regions.len() <= MAX_KEYS);
        assert_eq!(e.speedup(1, 1), None, "the oldest region was dropped");
    }
}
