//! What the simulator's benchmarks report about the process: CPU time and peak memory (to show it
//! stays flat as jobs finish). A run's engine works on the calling thread while its jobs are
//! produced on another (`feed.rs`): the calling thread's CPU time is the engine's own cost, which
//! other work on a shared machine does not inflate; the process's counts the job feed's thread
//! too. Linux only; `NaN` where a clock or `/proc` cannot be read. Figures from different
//! machines, or from one machine under other load, do not compare: [`host`] says which machine
//! and how loaded, to print beside them.

use nix::time::{clock_gettime, ClockId};

/// CPU time the calling thread has run, in seconds.
pub fn thread_cpu_seconds() -> f64 {
    seconds_of(ClockId::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time every thread of this process has run, in seconds.
pub fn process_cpu_seconds() -> f64 {
    seconds_of(ClockId::CLOCK_PROCESS_CPUTIME_ID)
}

fn seconds_of(clock: ClockId) -> f64 {
    clock_gettime(clock).map_or(f64::NAN, |t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
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

/// The machine a benchmark runs on, for its report: the CPU model (`/proc/cpuinfo`), the CPUs
/// this process may use, and the load average over the last minute (`/proc/loadavg`): `AMD
/// EPYC, 2 CPUs, load 0.41`. Parts that cannot be read are left out.
pub fn host() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|v| v.split_once(':'))
        .map(|(_, m)| m.trim().to_string());
    let cpus = std::thread::available_parallelism().ok().map(|n| format!("{n} CPUs"));
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(|m| format!("load {m}")));
    [model, cpus, load].into_iter().flatten().collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn figures_are_read() {
        let (thread, process) = (super::thread_cpu_seconds(), super::process_cpu_seconds());
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        // The loop's own time shows on both clocks (a nanosecond clock; the loop takes milliseconds).
        assert!(thread.is_finite() && super::thread_cpu_seconds() > thread);
        assert!(process >= thread && super::process_cpu_seconds() > process);
        let rss = super::peak_rss_mib();
        assert!(rss > 0.0 && rss.is_finite(), "{rss}");
        let host = super::host();
        let cpus = std::thread::available_parallelism().unwrap();
        assert!(host.contains(&format!("{cpus} CPUs")) && host.contains("load "), "{host}");
    }
}
