//! How the benchmarks print repeated timings: the median with the range, `1.234 [1.200-1.300]`.

/// The median of `v` (the upper one of an even count); `v` must not be empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

/// `median [min-max]` of `v`, prefixed `>=` when the runs were cut at a time limit.
pub fn figure(v: &[f64], lower_bound: bool) -> String {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(0.0, f64::max);
    format!("{}{:.3} [{:.3}-{:.3}]", if lower_bound { ">=" } else { "" }, median(v), min, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_figure_is_the_median_and_the_range() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(figure(&[3.0, 1.0, 2.0], false), "2.000 [1.000-3.000]");
        assert_eq!(figure(&[1.5], true), ">=1.500 [1.500-1.500]");
    }
}
