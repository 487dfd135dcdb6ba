//! The batch scheduler: which waiting jobs start now, first come first served or with EASY
//! backfilling.
//!
//! Both see the cluster as a pool of units (whole nodes, or CPU slots on shared nodes) and each
//! job as the units it needs and its estimate (its requested run time). **FCFS** starts jobs in
//! arrival order while the first one waiting fits. **EASY** (Lifka 1995; as Mu'alem & Feitelson
//! 2001 state it, and as the literature models Slurm's backfill) does the same, then gives the
//! first job that does not fit a reservation: the *shadow time*, the earliest expected end of
//! running jobs (start + estimate) by which enough units are free for it, and the *extra* units
//! free then beyond its need. A later job starts now if it fits in the free units and either
//! ends, by its estimate, by the shadow time or needs no more than the extra units (which it then
//! uses up): it cannot delay the reservation.

use serde::Serialize;

/// How the batch scheduler starts waiting jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Batch {
    /// First come, first served: nothing overtakes the first job waiting.
    Fcfs,
    /// EASY backfilling: later jobs start early when they cannot delay the first one waiting.
    Easy,
}

impl Batch {
    /// `fcfs` or `easy`.
    pub fn parse(name: &str) -> Option<Batch> {
        match name {
            "fcfs" => Some(Batch::Fcfs),
            "easy" => Some(Batch::Easy),
            _ => None,
        }
    }

    /// Its name, as [`Batch::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Batch::Fcfs => "fcfs",
            Batch::Easy => "easy",
        }
    }
}

/// A job waiting to start, as the scheduler sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Waiting {
    /// Units it needs.
    pub need: u32,
    /// Its estimated run time, seconds.
    pub estimate: f64,
}

/// A running job, as the scheduler sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Holding {
    /// When it is expected to end: its start plus its estimate, seconds.
    pub expected_end: f64,
    /// Units it holds.
    pub units: u32,
}

/// Picks the jobs of `queue` (job numbers in arrival order, each seen through `waiting`) that
/// start at `now` with `free` units, beside the `running` ones (in the order of their expected
/// ends): their positions in `queue`, increasing, in `out`. `ends` is scratch space. FCFS reads the queue up to the first job that
/// does not fit, EASY up to the last job while units are free, and only EASY, and only when the
/// first job waits, reads the running jobs.
#[allow(clippy::too_many_arguments)]
pub(crate) fn pick(
    batch: Batch,
    now: f64,
    mut free: u32,
    queue: &[usize],
    waiting: impl Fn(usize) -> Waiting,
    running: impl IntoIterator<Item = Holding>,
    ends: &mut Vec<(f64, u32)>,
    out: &mut Vec<usize>,
) {
    out.clear();
    let mut head = 0;
    while head < queue.len() && waiting(queue[head]).need <= free {
        free -= waiting(queue[head]).need;
        out.push(head);
        head += 1;
    }
    if head == queue.len() || batch == Batch::Fcfs || free == 0 {
        return;
    }
    // The reservation of the first job that does not fit: the running jobs' expected ends (in
    // order, a job past its estimate expected to end now) merged with those of the jobs just
    // started, walked until enough units are free; the extra units are those free then, every
    // job ending at the shadow time counted.
    ends.clear();
    ends.extend(out.iter().map(|&k| waiting(queue[k])).map(|w| (now + w.estimate, w.need)));
    ends.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut started = ends.iter().copied().peekable();
    let mut running = running.into_iter().map(|h| (h.expected_end.max(now), h.units)).peekable();
    let need = waiting(queue[head]).need;
    let (mut avail, mut shadow) = (free, f64::INFINITY);
    loop {
        let from_running = match (running.peek(), started.peek()) {
            (Some(r), Some(s)) => r.0 <= s.0,
            (r, _) => r.is_some(),
        };
        let Some((end, units)) = (if from_running { running.next() } else { started.next() }) else { break };
        if end > shadow {
            break;
        }
        avail += units;
        if shadow.is_infinite() && avail >= need {
            shadow = end;
        }
    }
    let mut extra = if shadow.is_finite() { avail - need } else { 0 };
    for (k, &job) in queue.iter().enumerate().skip(head + 1) {
        if free == 0 {
            break;
        }
        let w = waiting(job);
        if w.need > free {
            continue;
        }
        if now + w.estimate <= shadow {
            free -= w.need;
            out.push(k);
        } else if w.need <= extra {
            free -= w.need;
            extra -= w.need;
            out.push(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picked(batch: Batch, free: u32, queue: &[(u32, f64)], running: &[(f64, u32)]) -> Vec<usize> {
        let jobs: Vec<usize> = (0..queue.len()).collect();
        let waiting = |j: usize| Waiting { need: queue[j].0, estimate: queue[j].1 };
        let running = running.iter().map(|&(expected_end, units)| Holding { expected_end, units });
        let mut out = Vec::new();
        pick(batch, 0.0, free, &jobs, waiting, running, &mut Vec::new(), &mut out);
        out
    }

    #[test]
    fn fcfs_stops_at_the_first_job_that_does_not_fit() {
        // 4 free of 8: the first job (2) starts, the second (4) does not fit, the third (1) waits.
        assert_eq!(picked(Batch::Fcfs, 4, &[(2, 10.0), (4, 10.0), (1, 1.0)], &[(5.0, 4)]), vec![0]);
    }

    #[test]
    fn easy_backfills_what_cannot_delay_the_reservation() {
        // 2 free; a running job frees 6 at t = 100, so the head (needing 8) is reserved at 100
        // with no extra units. A 2-unit job of 50 s ends before: it starts; one of 200 s would
        // hold the reservation's units: it waits.
        assert_eq!(picked(Batch::Easy, 2, &[(8, 10.0), (2, 50.0)], &[(100.0, 6)]), vec![1]);
        assert_eq!(picked(Batch::Easy, 2, &[(8, 10.0), (2, 200.0)], &[(100.0, 6)]), Vec::<usize>::new());
        // With 4 free and the head needing 8 of 10 at t = 100, 2 units are extra: a long 2-unit
        // job takes them, and a second one finds none left.
        assert_eq!(picked(Batch::Easy, 4, &[(8, 10.0), (2, 500.0), (2, 500.0)], &[(100.0, 6)]), vec![1]);
        // Every job ending at the shadow time counts towards the extra units: 2 free and 3 + 2
        // at t = 100 make 7 for a head of 5, so a long 2-unit job takes the 2 extra.
        assert_eq!(picked(Batch::Easy, 2, &[(5, 10.0), (2, 500.0)], &[(100.0, 3), (100.0, 2)]), vec![1]);
    }
}
