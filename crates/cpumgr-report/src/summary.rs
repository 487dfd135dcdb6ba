//! A run's figures rebuilt from its trace alone, for `cpumgr report TRACE`: makespan, mean and
//! largest turnaround, the mean number of CPUs held, the per-class coefficient of variation of run
//! times, and the programs that ended with a non-zero status. Slowdowns need each job's dedicated
//! run time, which a trace does not hold, so they are left to the launcher's own table.

use std::collections::BTreeMap;

use crate::html::Table;
use crate::timeline::{Lane, Timeline};

/// What a trace tells about one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// First arrival to last exit, seconds.
    pub makespan: f64,
    /// Mean of exit minus arrival, seconds.
    pub mean_turnaround: f64,
    /// Largest exit minus arrival, seconds.
    pub max_turnaround: f64,
    /// CPUs allocated to running programs, averaged over the makespan (above the machine's CPUs
    /// when programs were given more than there are, as the `os` baseline's are).
    pub mean_cpus: f64,
    /// Per class of several programs (a program's name without its `#k` copy number), the
    /// coefficient of variation of run times (first run to exit) ([`class_cv`]).
    pub cv: BTreeMap<String, f64>,
    /// Programs whose exit status is known and not 0.
    pub failed: usize,
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The class of a program: its name up to a `#k` copy number.
fn class(lane: &Lane) -> &str {
    lane.name.rsplit_once('#').filter(|(_, k)| k.parse::<u32>().is_ok()).map_or(&lane.name, |(c, _)| c)
}

/// Mean and coefficient of variation (population standard deviation over mean; 0 for no values
/// or a zero mean): paper 002's measure of how stable run times are.
pub fn mean_cv(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, if mean > 0.0 { var.sqrt() / mean } else { 0.0 })
}

/// Per class, the CV of its run times ([`mean_cv`]), for the classes of more than one run: one
/// run's CV is 0 by definition and says nothing of how stable the class's run times are.
pub fn class_cv(runs: impl IntoIterator<Item = (String, Vec<f64>)>) -> BTreeMap<String, f64> {
    runs.into_iter().filter(|(_, v)| v.len() > 1).map(|(c, v)| (c, mean_cv(&v).1)).collect()
}

/// Per-class CVs ([`class_cv`]) as one table cell, `a 0.02, b 0.10`; `—` when no class has
/// several runs.
pub fn cv_cell(cv: &BTreeMap<String, f64>) -> String {
    if cv.is_empty() {
        return "—".into();
    }
    cv.iter().map(|(class, v)| format!("{class} {v:.2}")).collect::<Vec<_>>().join(", ")
}

impl Figures {
    /// Reads the figures off a timeline; `None` when it holds no program.
    pub fn of(t: &Timeline) -> Option<Figures> {
        let first = t.lanes.iter().map(|l| l.arrival).min()?;
        let last = t.lanes.iter().map(|l| l.exit).max()?;
        let makespan = secs(last.saturating_sub(first));
        let turnarounds: Vec<f64> = t.lanes.iter().map(|l| secs(l.exit.saturating_sub(l.arrival))).collect();
        let held: f64 = t.lanes.iter().flat_map(|l| &l.segments).map(|s| s.held() / 1e9).sum();
        let mut runs: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for l in &t.lanes {
            let start = l.first_run().unwrap_or(l.arrival);
            runs.entry(class(l).to_string()).or_default().push(secs(l.exit.saturating_sub(start)));
        }
        Some(Figures {
            makespan,
            mean_turnaround: mean_cv(&turnarounds).0,
            max_turnaround: turnarounds.iter().copied().fold(0.0, f64::max),
            mean_cpus: if makespan > 0.0 { held / makespan } else { 0.0 },
            cv: class_cv(runs),
            failed: t.lanes.iter().filter(|l| l.status.is_some_and(|s| s != 0)).count(),
        })
    }
}

/// The results table of labelled runs, one row each (runs without programs are left out).
pub fn table(runs: &[(String, Timeline)]) -> Table {
    let columns =
        ["run", "makespan (s)", "mean turnaround", "max turnaround", "mean CPUs held", "CV of run times", "failed"];
    let rows = runs
        .iter()
        .filter_map(|(label, t)| {
            let f = Figures::of(t)?;
            Some(vec![
                label.clone(),
                format!("{:.2}", f.makespan),
                format!("{:.2}", f.mean_turnaround),
                format!("{:.2}", f.max_turnaround),
                format!("{:.2} of {}", f.mean_cpus, t.cpus.len()),
                cv_cell(&f.cv),
                f.failed.to_string(),
            ])
        })
        .collect();
    Table { columns: columns.map(String::from).to_vec(), rows }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::tests::sample;

    #[test]
    fn cv_of_equal_values_is_zero() {
        assert_eq!(mean_cv(&[2.0, 2.0, 2.0]), (2.0, 0.0));
        let (m, cv) = mean_cv(&[1.0, 3.0]);
        assert_eq!(m, 2.0);
        assert!((cv - 0.5).abs() < 1e-12);
        assert_eq!(mean_cv(&[]), (0.0, 0.0));
    }

    #[test]
    fn figures_of_the_sample_run() {
        // a: arrives 0, runs 0-300 on 2 then 1 CPU; b: arrives 100, runs 100-400, exits with 3.
        let f = Figures::of(&Timeline::from_events(&sample())).unwrap();
        assert!((f.makespan - 400e-9).abs() < 1e-15);
        assert!((f.mean_turnaround - 300e-9).abs() < 1e-15);
        assert!((f.max_turnaround - 300e-9).abs() < 1e-15);
        // Held: a 2×100 + 1×200, b 1×200 + 2×100 = 800 CPU-ns over 400 ns.
        assert!((f.mean_cpus - 2.0).abs() < 1e-9, "{f:?}");
        assert_eq!(f.failed, 1);
        assert!(f.cv.is_empty(), "one program per class: no CV");
        assert!(Figures::of(&Timeline::default()).is_none());
    }

    #[test]
    fn copies_share_a_class() {
        let mut events = sample();
        for e in &mut events {
            if let cpumgr_core::trace::EventKind::Arrive { name, .. } = &mut e.kind {
                name.push_str(if name == "a" { "#1" } else { "#2" });
                *name = name.replacen('b', "a", 1);
            }
        }
        let f = Figures::of(&Timeline::from_events(&events)).unwrap();
        // Run times 300 and 300 ns: the same, so CV 0.
        assert_eq!(f.cv.into_iter().collect::<Vec<_>>(), vec![("a".to_string(), 0.0)]);
        let t = table(&[("r".into(), Timeline::from_events(&sample()))]);
        assert_eq!(t.rows[0][0..2], ["r".to_string(), "0.00".to_string()]);
        assert_eq!(t.rows[0][4..6], ["2.00 of 2".to_string(), "—".to_string()]);
    }

    #[test]
    fn only_classes_of_several_runs_have_a_cv() {
        let runs = [("one".to_string(), vec![5.0]), ("two".to_string(), vec![1.0, 3.0]), ("none".to_string(), vec![])];
        let cv = class_cv(runs);
        assert_eq!(cv.keys().collect::<Vec<_>>(), vec!["two"]);
        assert!((cv["two"] - 0.5).abs() < 1e-12);
        assert_eq!(cv_cell(&cv), "two 0.50");
        assert_eq!(cv_cell(&BTreeMap::new()), "—");
    }
}
