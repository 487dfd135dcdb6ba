//! LLPC mode (paper 001, `CPUMGR_MODE=llpc`): no manager at all. Before each parallel region the
//! program compares the threads running on the machine with its CPUs and grows or shrinks its team
//! by the difference, with [`cpumgr_core::policies::llpc::adjust`] — the same function the `llpc`
//! policy runs for every program inside the manager.
//!
//! The load is the kernel's count of runnable threads (`/proc/loadavg`, fourth field), read with
//! one `pread` on a descriptor kept open, at most once per [`SAMPLE_EVERY`]; between samples the
//! team stays as it was, so a program with thousands of short regions pays the read rarely.
//! The paper's delayed shrink and masked wake-up are the pool's: a smaller team applies from the
//! next region, and only the threads of a larger team are woken.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use cpumgr_core::policies::llpc::{adjust, LlpcState};

/// The shortest time between two load samples.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(2);

/// One program's LLPC sizer.
#[derive(Debug)]
pub struct Llpc {
    cpus: u32,
    loadavg: Option<File>,
    state: LlpcState,
    team: u32,
    sampled: Option<Instant>,
}

impl Llpc {
    /// A sizer for a program that may run on `cpus` CPUs.
    pub fn new(cpus: u32) -> Llpc {
        Llpc {
            cpus: cpus.max(1),
            loadavg: File::open("/proc/loadavg").ok(),
            state: LlpcState::default(),
            team: 0,
            sampled: None,
        }
    }

    /// The team for the next region, at most `cap`. The first region starts with the CPUs the
    /// load leaves free (at least 1); later ones adjust from the previous team.
    pub fn team(&mut self, cap: u32) -> u32 {
        let cap = cap.max(1);
        if self.sampled.is_some_and(|t| t.elapsed() < SAMPLE_EVERY) && self.team > 0 {
            return self.team.min(cap);
        }
        self.sampled = Some(Instant::now());
        let Some(running) = self.running() else {
            self.team = cap;
            return cap;
        };
        self.team = if self.team == 0 {
            // The reader itself is one of the running threads.
            (self.cpus + 1).saturating_sub(running).clamp(1, cap)
        } else {
            // This program's active threads are part of `running` when they spin; between regions
            // its sleeping workers are not, so count the master alone as active.
            self.size_from(running, cap)
        };
        self.team
    }

    /// One LLPC step from a measured load.
    fn size_from(&mut self, running: u32, cap: u32) -> u32 {
        adjust(&mut self.state, self.cpus, running, cap, self.team.min(cap)).clamp(1, cap)
    }

    /// Runnable threads on the machine now, the reader included.
    fn running(&self) -> Option<u32> {
        let f = self.loadavg.as_ref()?;
        let mut buf = [0u8; 128];
        let n = f.read_at(&mut buf, 0).ok()?;
        parse_running(std::str::from_utf8(&buf[..n]).ok()?)
    }
}

/// The runnable count of a `/proc/loadavg` line (`0.00 0.01 0.05 3/412 1234`).
fn parse_running(line: &str) -> Option<u32> {
    line.split_whitespace().nth(3)?.split('/').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loadavg_lines_parse() {
        assert_eq!(parse_running("0.00 0.01 0.05 3/412 1234\n"), Some(3));
        assert_eq!(parse_running("garbage"), None);
    }

    #[test]
    fn a_loaded_machine_shrinks_the_team_and_a_free_one_grows_it() {
        let mut l = Llpc::new(8);
        l.team = 8;
        // 12 runnable threads on 8 CPUs: 4 too many, the team gives 4 up.
        assert_eq!(l.size_from(12, 8), 4);
        // The load went away: 2 runnable on 8 CPUs, the team takes 4 back (all it has asleep).
        assert_eq!(l.size_from(2, 8), 8);
        // The cap always holds.
        assert!(l.size_from(1, 3) <= 3);
    }
}
