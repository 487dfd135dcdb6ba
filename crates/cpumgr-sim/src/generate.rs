//! Workload generators: Poisson arrivals at a target load, with job sizes and run times either
//! simple (`poisson`: power-of-two sizes, exponential run times) or following a documented
//! simplification of the Lublin–Feitelson model (`lublin`).
//!
//! The `lublin` simplification keeps the model's two published distributions and drops its daily
//! arrival cycle:
//! - *size*: serial with probability 0.24; otherwise `2^u` with `u` uniform on
//!   `[0.8, log2(cpus)]` (a single-stage simplification of the model's two-stage uniform), rounded
//!   to a power of two with probability 0.75;
//! - *run time*: `exp(g)` with `g` drawn from a hyper-gamma: `Gamma(4.2, 0.94)` with probability
//!   `p = −0.0054 · size + 0.78` (clamped to [0, 1]), else `Gamma(312, 0.03)`, so larger jobs tend
//!   to run longer;
//! - *arrivals*: Poisson, at the rate that makes the offered load (Σ size × run time over
//!   CPUs × time) equal `load`.
//!
//! Generated jobs are rigid (like SWF jobs) unless [`Generator::kind`] says otherwise; a job's
//! work is its run time × its speedup on its size, so alone on its size it runs for the drawn
//! run time. Jobs are produced lazily, in arrival order: a million-job run holds only the jobs in
//! the system.

use std::sync::Arc;

use cpumgr_core::{Kind, Name, Nanos};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Gamma};

use crate::job::{JobSpec, Phase};
use crate::speedup::SpeedupModel;

/// Which size and run-time distributions to draw from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// Power-of-two sizes up to `max_size`, exponential run times of mean `mean_runtime`.
    Poisson,
    /// The Lublin–Feitelson simplification of the module documentation.
    Lublin,
}

/// A job kind for generated (and SWF) jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// A fixed number of processes (the trace's size).
    Rigid,
    /// Chooses its team at start, up to its size.
    Moldable,
    /// Adapts to any allocation up to its size.
    Malleable,
}

impl JobKind {
    /// Parses `rigid`, `moldable` or `malleable`.
    pub fn parse(s: &str) -> Option<JobKind> {
        match s {
            "rigid" => Some(JobKind::Rigid),
            "moldable" => Some(JobKind::Moldable),
            "malleable" => Some(JobKind::Malleable),
            _ => None,
        }
    }

    /// A job of `size` CPUs that runs `runtime` seconds alone on them.
    pub fn job(
        self,
        name: Name,
        class: Arc<str>,
        arrival: Nanos,
        size: u32,
        runtime: f64,
        speedup: &SpeedupModel,
    ) -> JobSpec {
        let size = size.max(1);
        let work = runtime * speedup.speedup(size as f64);
        let kind = match self {
            JobKind::Rigid => Kind::Rigid(size),
            JobKind::Moldable => Kind::Moldable,
            JobKind::Malleable => Kind::Malleable,
        };
        JobSpec {
            name,
            class,
            arrival,
            kind,
            request: size,
            min: if self == JobKind::Rigid { size } else { 1 },
            weight: 1.0,
            sync: 0.5,
            reports_speedup: true,
            phases: Phase::parallel(work, size, speedup.clone()).into(),
        }
    }
}

/// A generator's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Generator {
    /// Size and run-time distributions.
    pub model: Model,
    /// Jobs to generate.
    pub jobs: u64,
    /// The machine's CPUs (sizes stay within it; the load is relative to it).
    pub cpus: u32,
    /// Offered load, e.g. 0.7.
    pub load: f64,
    /// Random seed.
    pub seed: u64,
    /// Largest job (`Poisson` model).
    pub max_size: u32,
    /// Mean run time in seconds (`Poisson` model).
    pub mean_runtime: f64,
    /// Rigid, moldable or malleable jobs.
    pub kind: JobKind,
    /// The jobs' speedup model.
    pub speedup: SpeedupModel,
}

impl Generator {
    /// A generator with the defaults: Lublin model, load 0.7, rigid jobs, linear speedup.
    pub fn new(model: Model, jobs: u64, cpus: u32) -> Generator {
        Generator {
            model,
            jobs,
            cpus: cpus.max(1),
            load: 0.7,
            seed: 1,
            max_size: cpus.max(1),
            mean_runtime: 60.0,
            kind: JobKind::Rigid,
            speedup: SpeedupModel::LINEAR,
        }
    }

    /// The jobs, lazily, in arrival order.
    pub fn iter(&self) -> Jobs {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let draw = Draws::of(self);
        // The mean of size × run time, estimated from the generator's own distributions, sets
        // the arrival rate that gives the target load.
        let n = 4096;
        let mean_area: f64 = (0..n)
            .map(|_| {
                let (s, r) = draw.draw(&mut rng);
                s as f64 * r
            })
            .sum::<f64>()
            / n as f64;
        let rate = (self.load.max(1e-6) * self.cpus as f64 / mean_area.max(1e-9)).max(1e-12);
        let class = "generated".into();
        Jobs {
            g: self.clone(),
            draw,
            rng,
            gap: Exp::new(rate).expect("positive rate"),
            t: 0.0,
            k: 0,
            names: Names::new("g"),
            class,
        }
    }
}

/// A generator's size and run-time distributions, set up once: their parameters are the same
/// for every job (set up per job, they cost a logarithm and a division each).
#[derive(Debug, Clone)]
struct Draws {
    model: Model,
    cpus: u32,
    /// `Poisson`: sizes are `2^k` for `k` in `0..=top`.
    top: u32,
    /// `Poisson`: the run times.
    runtime: Exp<f64>,
    /// `Lublin`: log2 of the machine's CPUs.
    log2_cpus: f64,
    /// `Lublin`: the hyper-gamma's branch for shorter jobs (`Gamma(4.2, 0.94)`).
    short: Gamma<f64>,
    /// `Lublin`: its branch for longer ones (`Gamma(312, 0.03)`).
    long: Gamma<f64>,
}

impl Draws {
    /// The distributions of `g`.
    fn of(g: &Generator) -> Draws {
        Draws {
            model: g.model,
            cpus: g.cpus,
            top: (g.max_size.clamp(1, g.cpus) as f64).log2().floor() as u32,
            runtime: Exp::new(1.0 / g.mean_runtime.max(1e-9)).expect("positive mean"),
            log2_cpus: (g.cpus as f64).log2(),
            short: Gamma::new(4.2f64, 0.94).expect("valid"),
            long: Gamma::new(312.0f64, 0.03).expect("valid"),
        }
    }

    /// One job's size and run time.
    fn draw(&self, rng: &mut ChaCha8Rng) -> (u32, f64) {
        let cpus = self.cpus as f64;
        match self.model {
            Model::Poisson => {
                let size = 1u32 << rng.random_range(0..=self.top);
                let r = self.runtime.sample(rng);
                (size, r.max(1e-3))
            }
            Model::Lublin => {
                let size = if rng.random::<f64>() < 0.24 || cpus < 2.0 {
                    1
                } else {
                    let u = rng.random_range(0.8f64.min(self.log2_cpus)..=self.log2_cpus);
                    let x = if rng.random::<f64>() < 0.75 { u.round() } else { u };
                    (2f64.powf(x).round() as u32).clamp(1, self.cpus)
                };
                let p = (-0.0054 * size as f64 + 0.78).clamp(0.0, 1.0);
                let g: f64 = if rng.random::<f64>() < p { self.short.sample(rng) } else { self.long.sample(rng) };
                (size, g.exp().clamp(1.0, 1e6))
            }
        }
    }
}

/// The generated jobs.
#[derive(Debug, Clone)]
pub struct Jobs {
    g: Generator,
    draw: Draws,
    rng: ChaCha8Rng,
    gap: Exp<f64>,
    t: f64,
    k: u64,
    /// The jobs' names, `g1`, `g2`, … in arrival order.
    names: Names,
    /// The class every generated job has.
    class: Arc<str>,
}

impl Iterator for Jobs {
    type Item = JobSpec;

    fn next(&mut self) -> Option<JobSpec> {
        if self.k >= self.g.jobs {
            return None;
        }
        self.k += 1;
        self.t += self.gap.sample(&mut self.rng);
        let (size, runtime) = self.draw.draw(&mut self.rng);
        let arrival = (self.t * 1e9) as Nanos;
        Some(self.g.kind.job(self.names.next(), self.class.clone(), arrival, size, runtime, &self.g.speedup))
    }
}

/// The names `prefix1`, `prefix2`, …, as `format!("{prefix}{n}")` writes them, each made from the
/// last by adding one to its decimal text: a generated job's name costs an increment per digit carried
/// (one on average) and a copy into the [`Name`], not a division per digit and a UTF-8 check of
/// the result (which cost ~180 of the generator's ~570 instructions a job).
#[derive(Debug, Clone)]
struct Names {
    /// The last name given, `prefix` then its number (`prefix0` before the first).
    text: String,
    /// Where the number starts in `text`.
    digits: usize,
}

impl Names {
    /// Names made of `prefix` and the numbers from 1.
    fn new(prefix: &str) -> Names {
        Names { text: format!("{prefix}0"), digits: prefix.len() }
    }

    /// The next name.
    fn next(&mut self) -> Name {
        let nines = self.text.as_bytes()[self.digits..].iter().rev().take_while(|&&b| b == b'9').count();
        self.text.truncate(self.text.len() - nines);
        // The last digit that is not a 9 goes up by one; with none (all nines), a new leading 1.
        let up =
            if self.text.len() > self.digits { self.text.pop().map_or('1', |d| char::from(d as u8 + 1)) } else { '1' };
        self.text.push(up);
        self.text.extend(std::iter::repeat_n('0', nines));
        Name::from(self.text.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_formatted_numbers() {
        let mut names = Names::new("g");
        for n in 1..=100_500u64 {
            assert_eq!(names.next(), format!("g{n}"));
        }
        let long = "prefix-9".repeat(4);
        let mut names = Names::new(&long);
        assert_eq!(names.next(), format!("{long}1"), "a prefix ending in 9 is not a digit");
        assert_eq!(names.next(), format!("{long}2"));
    }

    #[test]
    fn generation_is_seeded_sorted_and_within_the_machine() {
        let mut g = Generator::new(Model::Lublin, 2000, 256);
        let a: Vec<JobSpec> = g.iter().collect();
        let b: Vec<JobSpec> = g.iter().collect();
        assert_eq!(a, b, "same seed, same jobs");
        assert_eq!(a.len(), 2000);
        assert!(a.windows(2).all(|w| w[0].arrival <= w[1].arrival));
        assert!(a.iter().all(|j| (1..=256).contains(&j.request)));
        let serial = a.iter().filter(|j| j.request == 1).count() as f64 / a.len() as f64;
        assert!((0.15..0.35).contains(&serial), "about a quarter serial: {serial}");
        g.seed = 2;
        assert_ne!(g.iter().next(), a.first().cloned());
    }

    #[test]
    fn offered_load_meets_the_target() {
        for model in [Model::Poisson, Model::Lublin] {
            let mut g = Generator::new(model, 20_000, 64);
            g.load = 0.5;
            let jobs: Vec<JobSpec> = g.iter().collect();
            let area: f64 = jobs.iter().map(|j| j.total_work()).sum();
            let span = jobs.last().unwrap().arrival as f64 / 1e9;
            let load = area / (64.0 * span);
            assert!((0.3..0.8).contains(&load), "{model:?}: offered load {load}");
        }
    }
}
