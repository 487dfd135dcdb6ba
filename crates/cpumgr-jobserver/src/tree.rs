//! A generated build tree for the tests and the benchmark: `n` small C files, a Makefile and a
//! build.ninja whose every compile runs `cc.sh`, which appends `S PID NS` and `E PID NS` (wall
//! clock) to `jobs.log` around `gcc -O2 -c`, so the build's jobs at each moment can be counted.

use std::path::Path;
use std::process::Command;

/// A generated tree in a temporary directory, removed when dropped.
pub struct Tree {
    dir: tempfile::TempDir,
    /// How many C files (and objects) it has.
    pub n: usize,
}

/// One logged job: start and end in wall-clock nanoseconds (`end` `None` while it runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    pub start: u64,
    pub end: Option<u64>,
}

impl Tree {
    /// Writes a tree of `n` C files of eight small functions each.
    pub fn new(n: usize) -> std::io::Result<Tree> {
        let dir = tempfile::Builder::new().prefix("cpumgr-tree-").tempdir()?;
        let p = dir.path();
        std::fs::create_dir(p.join("src"))?;
        std::fs::create_dir(p.join("obj"))?;
        for i in 0..n {
            let body: String = (0..8)
                .map(|k| format!("int f{i}_{k}(int x) {{ int s = {k}; for (int j = 0; j < x; j++) s = s * {i} + (j ^ (s >> 3)); return s; }}\n"))
                .collect();
            std::fs::write(p.join(format!("src/f{i}.c")), body)?;
        }
        let cc = p.join("cc.sh");
        let log = p.join("jobs.log");
        std::fs::write(
            &cc,
            format!(
                "#!/bin/sh\necho \"S $$ $(date +%s%N)\" >> {log}\ngcc \"$@\"; rc=$?\necho \"E $$ $(date +%s%N)\" >> {log}\nexit $rc\n",
                log = log.display()
            ),
        )?;
        Command::new("chmod").arg("+x").arg(&cc).status()?;
        let objs: Vec<String> = (0..n).map(|i| format!("obj/f{i}.o")).collect();
        let make = format!("all: {}\nobj/%.o: src/%.c\n\t@{} -O2 -c $< -o $@\n", objs.join(" "), cc.display());
        std::fs::write(p.join("Makefile"), make)?;
        let edges: String = (0..n).map(|i| format!("build obj/f{i}.o: cc src/f{i}.c\n")).collect();
        std::fs::write(
            p.join("build.ninja"),
            format!("rule cc\n  command = {} -O2 -c $in -o $out\n{edges}", cc.display()),
        )?;
        Ok(Tree { dir, n })
    }

    /// The tree's directory (where `make` or `ninja` runs).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The jobs logged so far, in start order.
    pub fn jobs(&self) -> Vec<Job> {
        let text = std::fs::read_to_string(self.path().join("jobs.log")).unwrap_or_default();
        let mut open: Vec<(&str, usize)> = Vec::new();
        let mut jobs = Vec::new();
        // A log read while the build runs may end in half a line.
        for line in text.split_inclusive('\n').filter_map(|l| l.strip_suffix('\n')) {
            let w: Vec<&str> = line.split_whitespace().collect();
            let [kind, pid, ns] = w[..] else { continue };
            let Ok(ns) = ns.parse::<u64>() else { continue };
            if kind == "S" {
                open.push((pid, jobs.len()));
                jobs.push(Job { start: ns, end: None });
            } else if let Some(i) = open.iter().position(|(p, _)| *p == pid) {
                jobs[open.remove(i).1].end = Some(ns);
            }
        }
        jobs
    }

    /// Jobs that have ended.
    pub fn finished(&self) -> usize {
        self.jobs().iter().filter(|j| j.end.is_some()).count()
    }

    /// Objects built.
    pub fn objects(&self) -> usize {
        (0..self.n).filter(|i| self.path().join(format!("obj/f{i}.o")).is_file()).count()
    }
}

/// Jobs running just after time `t` (started at or before it, not ended by then).
pub fn running_at(jobs: &[Job], t: u64) -> usize {
    jobs.iter().filter(|j| j.start <= t && j.end.is_none_or(|e| e > t)).count()
}

/// The most jobs that ran at once.
pub fn most_at_once(jobs: &[Job]) -> usize {
    jobs.iter().map(|j| running_at(jobs, j.start)).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_pair_by_pid_and_overlaps_count() {
        let t = Tree::new(1).unwrap();
        std::fs::write(t.path().join("jobs.log"), "S 1 10\nS 2 15\nE 1 20\nS 1 25\nE 2 30\nE 1 40\nS 3 4").unwrap();
        let jobs = t.jobs();
        assert_eq!(jobs.len(), 3, "the half line is left out");
        assert_eq!(jobs[2], Job { start: 25, end: Some(40) });
        assert_eq!(most_at_once(&jobs), 2);
        assert_eq!(running_at(&jobs, 20), 1);
    }
}
