//! Chaos mode: a manager that injects faults into its own work, in the spirit of scx_chaos, so
//! that tests (and administrators trying a configuration) can watch the failure paths run.
//!
//! `cpumgr daemon --chaos seed=7,delay=30ms,drop=0.05,kill=0.02,die=0.01` (or `CPUMGR_CHAOS`):
//! - `delay=D`: every quantum starts late by a uniformly random time in `[0, D)` (the manager
//!   descheduled, a slow `/proc`);
//! - `drop=P`: each control message is, with probability `P`, read and then lost: no reply, and
//!   its connection is closed (what a client sees of a lost message);
//! - `kill=P`: after each quantum, with probability `P`, one registered program chosen at random
//!   gets `SIGKILL` (its whole group);
//! - `die=P`: after each quantum, with probability `P`, the manager sends itself `SIGKILL`: it dies
//!   with programs stopped and pinned, exactly where the supervisors must take over;
//! - `seed=N`: the random sequence (default 0), so a failing run can be replayed.
//!
//! Every injected fault is logged at `warn` with a `chaos:` prefix.

use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::procfs::Target;
use crate::{enforce, State};

/// The faults to inject, as the `--chaos` spec gives them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Spec {
    /// Seed of the random sequence.
    pub seed: u64,
    /// Longest delay added before a quantum.
    pub delay: Duration,
    /// Probability that a control message is lost.
    pub drop: f64,
    /// Probability, per quantum, that a random program is killed.
    pub kill: f64,
    /// Probability, per quantum, that the manager kills itself.
    pub die: f64,
}

impl FromStr for Spec {
    type Err = String;

    /// Parses `key=value` pairs separated by commas; every key is optional, an unknown key, a
    /// probability outside `[0, 1]` or a delay that is not a duration is an error.
    fn from_str(text: &str) -> Result<Spec, String> {
        let mut spec = Spec::default();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').ok_or_else(|| format!("{pair:?} is not key=value"))?;
            let probability = || -> Result<f64, String> {
                match value.parse::<f64>() {
                    Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
                    _ => Err(format!("{key}={value}: not a probability in [0, 1]")),
                }
            };
            match key {
                "seed" => spec.seed = value.parse().map_err(|_| format!("seed={value}: not an unsigned integer"))?,
                "delay" => {
                    spec.delay =
                        parse_delay(value).ok_or_else(|| format!("delay={value}: not a duration (30ms, 0.1s)"))?
                }
                "drop" => spec.drop = probability()?,
                "kill" => spec.kill = probability()?,
                "die" => spec.die = probability()?,
                _ => return Err(format!("unknown chaos key {key:?} (seed, delay, drop, kill, die)")),
            }
        }
        Ok(spec)
    }
}

/// `30ms`, `0.1s`, `500us`: a number and a unit.
fn parse_delay(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (n, unit) = text.split_at(split);
    let n: f64 = n.parse().ok()?;
    let secs = match unit {
        "s" => n,
        "ms" => n / 1e3,
        "us" => n / 1e6,
        _ => return None,
    };
    Duration::try_from_secs_f64(secs).ok().filter(|d| *d <= Duration::from_secs(10))
}

/// A running fault injector: the spec and its random sequence, shared by the manager's threads.
#[derive(Debug)]
pub struct Chaos {
    spec: Spec,
    rng: Mutex<ChaCha8Rng>,
}

impl Chaos {
    /// An injector for `spec`, seeded with its seed.
    pub fn new(spec: Spec) -> Chaos {
        tracing::warn!(?spec, "chaos mode: faults will be injected");
        let rng = Mutex::new(ChaCha8Rng::seed_from_u64(spec.seed));
        Chaos { spec, rng }
    }

    fn draw<T>(&self, f: impl FnOnce(&mut ChaCha8Rng) -> T) -> T {
        f(&mut self.rng.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// How late the next quantum starts.
    pub fn quantum_delay(&self) -> Duration {
        if self.spec.delay.is_zero() {
            return Duration::ZERO;
        }
        let d = self.draw(|r| self.spec.delay.mul_f64(r.random::<f64>()));
        tracing::warn!(?d, "chaos: quantum delayed");
        d
    }

    /// Whether to lose the message just received.
    pub fn drop_message(&self) -> bool {
        let lost = self.spec.drop > 0.0 && self.draw(|r| r.random_bool(self.spec.drop));
        if lost {
            tracing::warn!("chaos: control message dropped, connection closed");
        }
        lost
    }

    /// The program to kill after this quantum, if any, among `targets`.
    pub fn victim(&self, targets: &[Target]) -> Option<Target> {
        if targets.is_empty() || self.spec.kill == 0.0 {
            return None;
        }
        let t = self.draw(|r| r.random_bool(self.spec.kill).then(|| targets[r.random_range(0..targets.len())]))?;
        tracing::warn!(?t, "chaos: killing a program");
        Some(t)
    }

    /// Whether the manager dies after this quantum.
    pub fn die_now(&self) -> bool {
        self.spec.die > 0.0 && self.draw(|r| r.random_bool(self.spec.die))
    }
}

/// What chaos does after a quantum has been enforced: maybe kill a random program, maybe the
/// manager itself (with no cleanup: `SIGKILL`).
pub fn strike(chaos: &Chaos, state: &State) {
    let targets: Vec<Target> = state.originals().map(|(t, _)| t).collect();
    if let Some(t) = chaos.victim(&targets) {
        let _ = enforce::signal(t, nix::sys::signal::Signal::SIGKILL);
    }
    if chaos.die_now() {
        tracing::warn!("chaos: the manager kills itself");
        let _ = nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_parses_and_bad_ones_say_why() {
        let s: Spec = "seed=7, delay=30ms,drop=0.05,kill=0.5,die=1".parse().unwrap();
        assert_eq!(s, Spec { seed: 7, delay: Duration::from_millis(30), drop: 0.05, kill: 0.5, die: 1.0 });
        assert_eq!("".parse::<Spec>().unwrap(), Spec::default());
        for (bad, why) in [
            ("drop=2", "not a probability"),
            ("kill=-0.1", "not a probability"),
            ("delay=fast", "not a duration"),
            ("delay=30", "not a duration"),
            ("delay=1h", "not a duration"),
            ("seed=-1", "not an unsigned"),
            ("explode=1", "unknown chaos key"),
            ("drop", "not key=value"),
        ] {
            let e = bad.parse::<Spec>().unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn the_same_seed_injects_the_same_faults() {
        let spec: Spec = "seed=3,delay=10ms,drop=0.3,kill=0.3,die=0.1".parse().unwrap();
        let targets = [Target::Group(10), Target::Group(20), Target::Process(30)];
        let run = || {
            let c = Chaos::new(spec.clone());
            (0..200).map(|_| (c.quantum_delay(), c.drop_message(), c.victim(&targets), c.die_now())).collect::<Vec<_>>()
        };
        let (a, b) = (run(), run());
        assert_eq!(a, b);
        // Every kind of fault happens, at about its rate, and each target gets picked.
        let drops = a.iter().filter(|x| x.1).count();
        assert!((30..=90).contains(&drops), "{drops} drops of 200 at p=0.3");
        assert!(a.iter().any(|x| x.3) && a.iter().all(|x| x.0 < Duration::from_millis(10)));
        for t in targets {
            assert!(a.iter().any(|x| x.2 == Some(t)), "{t:?} never picked");
        }
        let none = Chaos::new(Spec::default());
        assert!((0..100).all(|_| none.quantum_delay().is_zero()
            && !none.drop_message()
            && none.victim(&targets).is_none()
            && !none.die_now()));
    }
}
