//! The largest machine and the latest time the simulator accepts, so that input with absurd
//! numbers (`arrival = 1e300`, `; MaxProcs: 4000000000`) is refused with a clear error instead of
//! overflowing the nanosecond clock or building a machine that cannot fit in memory.

use cpumgr_core::sources::synthetic::MAX_SYNTHETIC_CPUS;
use cpumgr_core::Nanos;

/// The largest simulated machine: the largest synthetic topology (2^17 CPUs,
/// [`cpumgr_core::topology::MAX_CPUS`]). A topology costs a few hundred bytes a CPU, but every
/// program's [`cpumgr_core::CpuSet`] is a bitset up to the largest id, so a bound keeps absurd
/// inputs (`cpus = 1000000`) a clear error rather than gigabytes of sets.
pub const MAX_CPUS: u32 = MAX_SYNTHETIC_CPUS as u32;

/// The latest arrival and the longest run time, in seconds (about 31.7 years: the longest traces
/// of the Parallel Workloads Archive span a few years).
pub const MAX_SECONDS: f64 = 1e9;

/// [`MAX_SECONDS`] in nanoseconds: the latest arrival, compared as an integer (a job's arrival is
/// checked as it is read).
pub const MAX_NANOS: Nanos = 1_000_000_000 * 1_000_000_000;

/// Simulated time past which a run stops with [`crate::SimError::Horizon`]: four times
/// [`MAX_SECONDS`], well inside the 584 years a `u64` of nanoseconds holds, so every step and
/// fast-forward jump before it is free of overflow.
pub const HORIZON: Nanos = 4 * 1_000_000_000 * 1_000_000_000;

/// `ns` nanoseconds in seconds, as `ns as f64 / 1e9` gives them, for every time the simulator
/// holds: times and spans of time stay within a quantum of [`HORIZON`] (the engines stop at the
/// first event past it), far below 2^63, where a signed conversion gives the same double as an
/// unsigned one. The signed one is the conversion used because it is one instruction
/// (`cvtsi2sd`) on the baseline x86-64 target, where an unsigned one is a sequence of about ten:
/// this runs for every job's record and every span of time accounted.
#[inline]
pub(crate) fn seconds(ns: Nanos) -> f64 {
    debug_assert!(i64::try_from(ns).is_ok(), "{ns} ns is no simulated time");
    ns as i64 as f64 / 1e9
}

/// The most copies one `[[job]]` table may ask for with `repeat` (the copies are kept in memory;
/// a `[generator]` streams any number).
pub const MAX_REPEAT: u32 = 1_000_000;

/// The longest scheduler quantum, in seconds (an hour; the papers use 100–120 ms).
pub const MAX_QUANTUM_SECONDS: f64 = 3600.0;

/// `ms` milliseconds as a quantum in nanoseconds, if it is from a nanosecond (the clock's unit)
/// to [`MAX_QUANTUM_SECONDS`].
pub fn quantum(ms: f64) -> Result<Nanos, String> {
    if !(ms.is_finite() && ms * 1e6 >= 1.0 && ms <= MAX_QUANTUM_SECONDS * 1e3) {
        return Err(format!("{ms} ms is not a quantum from 1 ns to {MAX_QUANTUM_SECONDS} s"));
    }
    Ok((ms * 1e6).round() as Nanos)
}

/// `seconds` as nanoseconds, if it is a number of seconds from 0 to [`MAX_SECONDS`].
pub fn nanos(seconds: f64) -> Result<Nanos, String> {
    if !(seconds.is_finite() && seconds >= 0.0) {
        return Err(format!("{seconds} is not a non-negative number of seconds"));
    }
    if seconds > MAX_SECONDS {
        return Err(format!("{seconds} s is beyond the simulator's limit of {MAX_SECONDS:e} s"));
    }
    Ok((seconds * 1e9).round() as Nanos)
}

/// Checks a machine size against [`MAX_CPUS`].
pub fn cpus(n: u64) -> Result<u32, String> {
    match u32::try_from(n) {
        Ok(c) if (1..=MAX_CPUS).contains(&c) => Ok(c),
        _ => Err(format!("{n} CPUs: a simulated machine has 1 to {MAX_CPUS} CPUs")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_times_and_sizes_past_the_limits() {
        assert_eq!(nanos(1.5), Ok(1_500_000_000));
        assert!(nanos(1e300).unwrap_err().contains("limit"));
        assert!(nanos(-1.0).is_err() && nanos(f64::NAN).is_err());
        assert_eq!(cpus(256), Ok(256));
        assert!(cpus(4_000_000_000).unwrap_err().contains("1 to 131072"));
        // A million-CPU machine's topology needs tens of gigabytes: it is refused here.
        assert!(cpus(1 << 20).is_err());
        assert!(cpus(0).is_err());
        assert_eq!(quantum(100.0), Ok(100_000_000));
        assert!(quantum(1e300).is_err() && quantum(0.0).is_err());
        assert_eq!(HORIZON as f64, 4.0 * MAX_SECONDS * 1e9);
        assert_eq!(MAX_NANOS as f64, MAX_SECONDS * 1e9);
        for ns in [0, 1, 999_999_999, 1 << 53, (1 << 53) + 1, MAX_NANOS + 123_456_789, HORIZON] {
            assert_eq!(seconds(ns), ns as f64 / 1e9, "{ns}");
        }
    }
}
