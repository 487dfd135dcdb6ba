//! Gang scheduling (Ousterhout; paper 004's gang scheduler, paper 002's co-scheduling): whole
//! programs in time slices. Programs are packed, in arrival order and first fit, into the rows of
//! a matrix, each row a set of programs that fit the machine together (a program needs all its
//! CPUs: its request, or its processes if rigid, up to the machine). Each quantum the next row
//! runs; with `fill=true` the CPUs its row leaves idle go to programs of other rows that fit
//! whole (alternate scheduling). `slots` bounds the rows (the multiprogramming level); programs
//! that do not fit in them wait. `admit` bounds the programs admitted at once
//! ([`SimHints::preferred_mpl`]): without either bound a growing backlog makes as many rows.
//!
//! Good at: spinning, synchronising programs always run with all their threads together.
//! Bad at: CPUs idle when rows pack badly, and every program waits `rows − 1` quanta per cycle.

use super::PolicyInfo;
use crate::params::{ParamError, ParamKind, ParamSpec, Params};
use crate::policy::{Decision, Policy, Rotation, SimHints, View};
use crate::program::ProgramId;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        key: "slots",
        help: "most rows (time slots) in the matrix; 0 for no limit",
        kind: ParamKind::Int { default: 0, min: 0, max: 65536 },
    },
    ParamSpec {
        key: "fill",
        help: "give a row's idle CPUs to programs of other rows that fit",
        kind: ParamKind::Bool { default: true },
    },
    super::ADMIT,
];

/// The catalog entry.
pub const INFO: PolicyInfo = PolicyInfo {
    name: "gang",
    paper: "004 §3 (Ousterhout)",
    summary: "time slices of whole programs: rows of programs that fit together run in turn",
    params: PARAMS,
    build: |p| build("gang", p, "slots", super::admission(p.u32("admit")?)),
};

/// Builds a gang scheduler named `name` whose row limit is the parameter `slots_key`, advising
/// the admission limit `admit`.
pub fn build(
    name: &'static str,
    p: &Params,
    slots_key: &'static str,
    admit: Option<u32>,
) -> Result<Box<dyn SimHints>, ParamError> {
    Ok(Box::new(Gang {
        name,
        slots: p.u32(slots_key)?,
        fill: p.bool("fill")?,
        admit,
        next_row: 0,
        running: Vec::new(),
        rotation: Rotation::new(0),
        rows: Vec::new(),
        used: 0,
    }))
}

/// The gang scheduler.
#[derive(Debug, Clone)]
pub struct Gang {
    name: &'static str,
    slots: u32,
    fill: bool,
    admit: Option<u32>,
    /// The row the next quantum turns to (the one before it runs this quantum).
    next_row: usize,
    /// The ids of the row that runs this quantum, in id order: what a refit finds it by when
    /// the rows were packed again (a program left or changed its request).
    running: Vec<ProgramId>,
    /// The rows of the matrix at the last decision, as a rotation (rows run in turn, and the
    /// rows are a function of the view).
    rotation: Rotation,
    /// The matrix. The first `used` rows are this decision's; the others keep their buffers for
    /// the next one.
    rows: Vec<Row>,
    used: usize,
}

/// A row of the gang matrix: programs that run together.
#[derive(Debug, Default, Clone)]
struct Row {
    /// CPUs its members leave free.
    free: u32,
    /// Its members, as indices into the view.
    members: Vec<usize>,
}

impl Gang {
    /// Packs the view's programs first fit, in arrival order, into at most `slots` rows.
    fn pack(&mut self, view: &View) {
        for row in &mut self.rows[..self.used] {
            row.members.clear();
        }
        self.used = 0;
        // The most free CPUs of any row: once every row is as full as that and no row can be
        // added, a program that needs more waits without a look at each row.
        let mut widest = 0;
        for (i, p) in view.programs.iter().enumerate() {
            let room = self.slots == 0 || self.used < self.slots as usize;
            if !room && widest == 0 {
                // Every row is full and none can be added: nobody behind fits (a program needs
                // a CPU at least), however long the backlog.
                break;
            }
            let n = need(view, p);
            if !room && n > widest {
                continue;
            }
            match self.rows[..self.used].iter_mut().find(|r| r.free >= n) {
                Some(r) => {
                    r.free -= n;
                    r.members.push(i);
                    widest = self.rows[..self.used].iter().map(|r| r.free).max().unwrap_or(0);
                }
                None if room => {
                    if self.used == self.rows.len() {
                        self.rows.push(Row::default());
                    }
                    let row = &mut self.rows[self.used];
                    row.free = view.cpus - n;
                    row.members.push(i);
                    self.used += 1;
                    widest = widest.max(view.cpus - n);
                }
                None => {}
            }
        }
        self.rotation = Rotation::new(self.used as u32);
        for row in &self.rows[..self.used] {
            self.rotation.mix(u64::MAX);
            for &i in &row.members {
                self.rotation.mix(view.programs[i].id.0);
            }
        }
    }

    /// Packs the view and runs a row: the next one at a quantum `boundary`, else the one that
    /// ran this quantum (the same members, unless the packing changed).
    fn run_row(&mut self, view: &View, out: &mut Decision, boundary: bool) {
        self.pack(view);
        let rows = &self.rows[..self.used];
        let need_of = |i: usize| need(view, &view.programs[i]);
        if rows.is_empty() {
            return;
        }
        let r = if boundary {
            self.next_row % rows.len()
        } else {
            // The row holding most of the quantum's runners (the first of equals), or the same
            // place (the one before the next) when none is left.
            let kept = |row: &[usize]| {
                row.iter().filter(|&&i| self.running.binary_search(&view.programs[i].id).is_ok()).count()
            };
            let (best, n) = rows.iter().enumerate().map(|(k, row)| (k, kept(&row.members))).fold((0, 0), |a, b| {
                if b.1 > a.1 {
                    b
                } else {
                    a
                }
            });
            if n > 0 {
                best
            } else {
                (self.next_row + rows.len() - 1) % rows.len()
            }
        };
        self.next_row = (r + 1) % rows.len();
        self.running.clear();
        self.running.extend(rows[r].members.iter().map(|&i| view.programs[i].id));
        let mut free = rows[r].free;
        for &i in &rows[r].members {
            out.give(i, need_of(i));
        }
        if self.fill {
            for k in 1..rows.len() {
                for &i in &rows[(r + k) % rows.len()].members {
                    if need_of(i) <= free && !out.allocations[i].running {
                        out.give(i, need_of(i));
                        free -= need_of(i);
                    }
                }
            }
        }
    }
}

/// The CPUs program `p` needs to run: its request, or its processes if rigid, up to the machine.
fn need(view: &View, p: &crate::program::Program) -> u32 {
    p.wants().min(view.cpus).max(1)
}

impl Policy for Gang {
    fn name(&self) -> &'static str {
        self.name
    }

    fn decide(&mut self, view: &View, out: &mut Decision) {
        self.run_row(view, out, true);
    }

    fn refit(&mut self, view: &View, out: &mut Decision) {
        self.run_row(view, out, false);
    }

    fn time_sharing(&self) -> bool {
        true
    }
}

impl SimHints for Gang {
    fn preferred_mpl(&self) -> Option<u32> {
        self.admit
    }

    fn rotation(&self, _view: &View, max: u32) -> Option<Rotation> {
        Some(self.rotation).filter(|r| r.quanta > 0 && r.quanta <= max)
    }
}

#[cfg(test)]
mod tests {
    use crate::policies::sliding::tests::{runners, running};
    use crate::policies::testing::programs;

    #[test]
    fn rows_run_in_turn_and_every_program_gets_equal_quanta() {
        // 4 CPUs: rows {p1 (4)}, {p2 (3), p4 (1)}, {p3 (2)}.
        let progs = programs(&[4, 3, 2, 1]);
        let r = running("gang:fill=false", 4, &progs, 6);
        let names = |q: usize| r[q].iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>();
        assert_eq!(names(0), vec!["p1"]);
        assert_eq!(names(1), vec!["p2", "p4"]);
        assert_eq!(names(2), vec!["p3"]);
        assert_eq!(r[3], r[0], "the cycle repeats");
        let mut quanta = std::collections::BTreeMap::new();
        for q in &r {
            for (n, _) in q {
                *quanta.entry(n.clone()).or_insert(0) += 1;
            }
        }
        assert!(quanta.values().all(|&c| c == 2), "{quanta:?}");
    }

    /// A refit after a program left finds the quantum's row by its members, though the rows
    /// were packed again; the next quantum turns to the row after it.
    #[test]
    fn a_refit_keeps_the_running_row_when_the_rows_are_packed_again() {
        // 4 CPUs: rows {p1 (4)}, {p2 (3), p4 (1)}, {p3 (2)}.
        let all = programs(&[4, 3, 2, 1]);
        let mut p = crate::policies::build("gang:fill=false").unwrap();
        let mut step = |progs: &[crate::program::Program], boundary: bool| runners(p.as_mut(), 4, progs, boundary);
        assert_eq!(step(&all, true), ["p1"]);
        assert_eq!(step(&all, true), ["p2", "p4"]);
        // p1 leaves: the rows are {p2, p4}, {p3}; the row running is the first now.
        let rest = &all[1..];
        assert_eq!(step(rest, false), ["p2", "p4"], "the refit keeps the quantum's runners");
        assert_eq!(step(rest, true), ["p3"], "the next quantum turns to the row after theirs");
    }

    #[test]
    fn the_period_is_the_number_of_rows() {
        use crate::policy::{Decision, View};
        use crate::topology::Topology;
        let t = Topology::flat(4);
        let progs = programs(&[4, 3, 2, 1]);
        let view = View { now: 0, quantum: 1, topology: &t, cpus: 4, programs: &progs };
        let mut p = crate::policies::build_simulated("gang").unwrap();
        let mut d = Decision::default();
        d.reset(progs.len());
        p.decide(&view, &mut d);
        assert_eq!(p.rotation(&view, 32).map(|r| r.quanta), Some(3), "rows {{p1}}, {{p2, p4}}, {{p3}}");
        assert_eq!(p.rotation(&view, 2), None, "longer than the bound");
    }

    #[test]
    fn fill_uses_idle_cpus_and_slots_bound_the_rows() {
        let progs = programs(&[4, 3, 2, 1]);
        let r = running("gang", 4, &progs, 3);
        assert_eq!(r[2].iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), vec!["p3", "p4"], "p4 fills p3's row");
        let r = running("gang:slots=2", 4, &programs(&[4, 4, 4]), 4);
        assert!(r.iter().all(|q| q.iter().all(|(n, _)| n != "p3")), "p3 waits outside the two slots");
        // Both rows full: nobody behind them is packed, not even a program of one CPU.
        let r = running("gang:slots=2,fill=false", 4, &programs(&[4, 4, 4, 1]), 4);
        assert!(r.iter().all(|q| q.iter().all(|(n, _)| n == "p1" || n == "p2")), "{r:?}");
        // A row with a CPU left takes the first program behind that fits in it.
        let r = running("gang:slots=2,fill=false", 4, &programs(&[4, 3, 4, 1]), 2);
        assert_eq!(r[1].iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), vec!["p2", "p4"]);
    }
}
