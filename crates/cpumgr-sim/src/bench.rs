//! What the simulator's benchmarks report about the process: CPU time (so that figures taken on a
//! machine shared with other work mean what an idle machine's wall time would) and peak memory
//! (to show it stays flat as jobs finish). Linux only; `NaN` where `/proc` cannot be read.

/// CPU time this thread has run, in seconds (`/proc/thread-self/schedstat`; the simulator is
/// single-threaded).
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    stat.split_whitespace().next().and_then(|ns| ns.parse::<f64>().ok()).map_or(f64::NAN, |ns| ns / 1e9)
}

/// Peak resident set size of this process, in MiB (`VmHWM` in `/proc/self/status`).
pub fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn figures_are_read_from_proc() {
        let before = super::cpu_seconds();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(before.is_finite() && super::cpu_seconds() >= before);
        let rss = super::peak_rss_mib();
        assert!(rss > 0.0 && rss.is_finite(), "{rss}");
    }
}
