//! The jobs still to come, produced and checked ahead of the engine on a thread of their own.
//!
//! Generating a job (random draws, a name, its phases) or cloning it from a parsed trace, checking
//! it against the machine and working out its run time alone cost together about a sixth of what
//! the engine does with a job, and none of it depends on the run: a second thread does it in
//! batches while the engine simulates the jobs before. The order is the input's, and an input
//! error reaches the engine in the bad job's place, so a run's results and errors are those of
//! the input taken in order. Memory stays bounded: at most [`BATCHES`] batches of [`BATCH`] jobs
//! are ahead, and the batches' buffers go back to the producer to be filled again, so that a run
//! allocates a few of them, not one per batch.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use crate::cost::CostModel;
use crate::error::SimError;
use crate::job::JobSpec;
use crate::job::Phase;
use cpumgr_core::Nanos;

/// Jobs per batch: a batch's hand-over (a channel message, and the producer's wake-up when it
/// waits for room) is spread over this many jobs; 1 024 jobs of ~130 bytes are 130 KB.
const BATCH: usize = 1024;
/// Batches the producer may be ahead of the engine.
const BATCHES: usize = 2;

/// A job that fits the machine and the simulator's limits, with its run time alone.
pub(crate) struct Checked {
    /// The job.
    pub spec: JobSpec,
    /// Its run time alone on the machine with its request, in seconds (its slowdown's base).
    pub dedicated: f64,
}

/// A batch of checked jobs, last to arrive first (the engine takes them from the end), or the
/// error of the input's next job.
type Batch = Result<Vec<Checked>, SimError>;

/// The engine's end of the feed: the jobs not yet arrived, in input order.
pub(crate) struct Feed {
    /// The jobs of the batch not yet taken, the next one last.
    batch: Vec<Checked>,
    full: Receiver<Batch>,
    empty: SyncSender<Vec<Checked>>,
    /// Whether the producer has sent its last batch and that batch is taken.
    ended: bool,
}

impl Feed {
    /// When the next job arrives (now, if it was listed after a later one); `None` when none is
    /// left. The engine asks several times per job: the answer is read from the batch in place.
    #[inline]
    pub fn next_arrival(&mut self, now: Nanos) -> Result<Option<Nanos>, SimError> {
        Ok(self.front()?.map(|j| j.spec.arrival.max(now)))
    }

    /// The next job, if it has arrived by `now`.
    #[inline]
    pub fn due(&mut self, now: Nanos) -> Result<Option<Checked>, SimError> {
        Ok(match self.front()? {
            Some(j) if j.spec.arrival <= now => self.batch.pop(),
            _ => None,
        })
    }

    /// The next job, left in its batch; an error for a job that fails its checks.
    #[inline]
    fn front(&mut self) -> Result<Option<&Checked>, SimError> {
        if self.batch.is_empty() && !self.ended {
            self.refill()?;
        }
        Ok(self.batch.last())
    }

    /// Hands the spent batch back and takes the next one that holds a job, or notes that the
    /// input has ended.
    #[inline(never)]
    fn refill(&mut self) -> Result<(), SimError> {
        while self.batch.is_empty() {
            let Ok(next) = self.full.recv() else {
                self.ended = true;
                break;
            };
            // The producer may have finished and left: the buffer is then simply dropped.
            let _ = self.empty.try_send(std::mem::replace(&mut self.batch, next?));
        }
        Ok(())
    }
}

/// Runs `f` on the jobs of `jobs`, checked for a machine of `cpus` CPUs and timed alone under
/// `cost`, produced ahead on a scoped thread. If `f` returns early (an error), the producer
/// stops at its next batch.
pub(crate) fn ahead<I, R>(jobs: I, cpus: u32, cost: &CostModel, f: impl FnOnce(Feed) -> R) -> R
where
    I: Iterator<Item = JobSpec> + Send,
{
    let (full_tx, full) = sync_channel(BATCHES);
    let (empty, empty_rx) = sync_channel(BATCHES + 1);
    std::thread::scope(|scope| {
        scope.spawn(move || produce(jobs, cpus, cost, &full_tx, &empty_rx));
        f(Feed { batch: Vec::new(), full, empty, ended: false })
    })
}

/// Checks the job and times it alone: what the engine would otherwise do on its arrival.
fn check(spec: JobSpec, cpus: u32, cost: &CostModel) -> Result<Checked, SimError> {
    spec.check(cpus).map_err(|(field, message)| SimError::Job { name: spec.name.to_string(), field, message })?;
    let dedicated = dedicated_time(cost, cpus, &spec);
    Ok(Checked { spec, dedicated })
}

/// Fills batches from `jobs` and sends them, until the input ends, a job fails its checks (its
/// error follows the jobs before it) or the engine has gone.
fn produce(
    jobs: impl Iterator<Item = JobSpec>,
    cpus: u32,
    cost: &CostModel,
    full: &SyncSender<Batch>,
    empty: &Receiver<Vec<Checked>>,
) {
    // The batch in input order, sent reversed.
    let send = |mut batch: Vec<Checked>| {
        batch.reverse();
        full.send(Ok(batch))
    };
    let mut batch = Vec::with_capacity(BATCH);
    for j in jobs {
        match check(j, cpus, cost) {
            Ok(j) => batch.push(j),
            Err(e) => {
                let _ = send(batch).and_then(|()| full.send(Err(e)));
                return;
            }
        }
        if batch.len() == BATCH {
            let next = empty.try_recv().unwrap_or_else(|_| Vec::with_capacity(BATCH));
            if send(std::mem::replace(&mut batch, next)).is_err() {
                return;
            }
        }
    }
    if !batch.is_empty() {
        let _ = send(batch);
    }
}

/// The run time of `spec` alone on a machine of `cpus` CPUs with its request. Inlined: every
/// arrival asks it once (the compiler kept it out of line, a call per job).
#[inline]
pub(crate) fn dedicated_time(cost: &CostModel, cpus: u32, spec: &JobSpec) -> f64 {
    let phase = |(k, ph): (usize, &Phase)| {
        let t = spec.natural_threads(k).min(cpus) as f64;
        if ph.work <= 0.0 {
            0.0
        } else {
            ph.simulated_work() / cost.rate(&ph.speedup, ph.request as f64, t, t, spec.sync, false)
        }
    };
    match &spec.phases[..] {
        // Every generated and traced job: its one phase's time, which is the sum's (no phase's
        // time is -0, the one number that adding to the sum's start would change).
        [one] => phase((0, one)),
        phases => phases.iter().enumerate().map(phase).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::speedup::SpeedupModel;

    /// Job `k`: wants `k % 7 + 1` CPUs, or more than the machine's 8 when `k` is `bad`.
    fn job(k: usize, bad: Option<usize>) -> JobSpec {
        let request = if Some(k) == bad { 9 } else { k as u32 % 7 + 1 };
        JobSpec::malleable(format!("j{k}"), k as Nanos, request, 1.0 + k as f64, SpeedupModel::LINEAR)
    }

    /// Everything the engine would take from a feed of `n` jobs with job `bad` too wide, until
    /// the feed ends or fails.
    fn drain(n: usize, bad: Option<usize>) -> (Vec<(String, f64)>, Option<SimError>) {
        let cost = CostModel::default();
        ahead((0..n).map(|k| job(k, bad)), 8, &cost, |mut feed| {
            let mut got = Vec::new();
            loop {
                match feed.due(Nanos::MAX) {
                    Ok(Some(j)) => got.push((j.spec.name.to_string(), j.dedicated)),
                    Ok(None) => return (got, None),
                    Err(e) => return (got, Some(e)),
                }
            }
        })
    }

    #[test]
    fn every_job_comes_in_order_with_its_time_alone() {
        let cost = CostModel::default();
        for n in [0, 1, BATCH - 1, BATCH, 2 * BATCH + 3] {
            let (got, error) = drain(n, None);
            assert!(error.is_none(), "{n} jobs: {error:?}");
            let want: Vec<(String, f64)> =
                (0..n).map(|k| job(k, None)).map(|j| (j.name.to_string(), dedicated_time(&cost, 8, &j))).collect();
            assert_eq!(got, want, "{n} jobs");
        }
    }

    #[test]
    fn a_job_that_fails_its_checks_is_an_error_in_its_place() {
        // The bad job first in a batch (the jobs before it fill whole batches), and within one.
        for bad in [0, BATCH, 2 * BATCH + 3] {
            let (got, error) = drain(3 * BATCH, Some(bad));
            assert_eq!(got.len(), bad, "the jobs before job {bad}, and none after");
            match error {
                Some(SimError::Job { name, field: "request", .. }) => assert_eq!(name, format!("j{bad}")),
                other => panic!("job {bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn an_engine_that_stops_early_stops_the_producer() {
        // An endless input: `ahead` returns only if the producer stops once the engine has gone.
        let cost = CostModel::default();
        let taken = ahead((0..).map(|k| job(k, None)), 8, &cost, |mut feed| {
            (0..10).map(|_| feed.due(Nanos::MAX).expect("checked").expect("endless")).count()
        });
        assert_eq!(taken, 10);
    }
}
