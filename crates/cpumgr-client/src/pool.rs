//! A malleable fork-join pool (papers 001 and 003): every parallel region runs with a team of
//! `min(allocation, work)` threads, read from the client just before the region starts.
//!
//! Workers are in one of paper 001's states: *running* (in a region), *spinning* (waiting for the
//! next region, for at most [`SPIN`]) or *sleeping* (parked on a futex). The master thread is
//! always running (paper 003) and works in every region.
//!
//! - **Delayed adjustment.** A smaller allocation applies from the next region: the current one
//!   keeps its team (a shrink in the middle of a region would strand its work).
//! - **Masked wake-up.** A region wakes only its own members; a spinning worker that is not a member
//!   goes straight to sleep instead of spinning for a region it is not part of.
//! - **Safe points.** Work is handed out in chunks; between two chunks, a worker whose index is at
//!   or past the manager's preemption ask ([`Client::should_yield`]) stops taking work and sleeps,
//!   giving its CPU back at once; the others finish its share.
//! - **Speedup.** The master times each region; the [`Estimator`] turns the timings into speedup
//!   reports in the slot, for `pdpa`.
//!
//! A child forked from the process that made the pool has none of its workers (`fork` copies only
//! the calling thread): there every region runs serially on the caller, and dropping the pool
//! does not wait for the workers. A child that wants a team makes a pool of its own.

use std::cell::{Cell, UnsafeCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::estimator::Estimator;
use crate::fork::Process;

/// How long an idle worker spins before it sleeps.
pub const SPIN: Duration = Duration::from_micros(200);

/// Regions shorter than this are not timed for the estimator (the clock's noise dominates).
const TIMED_REGION: Duration = Duration::from_micros(50);

/// A worker's state, as paper 001 names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum WorkerState {
    /// Working in a region.
    Running = 0,
    /// Waiting for the next region, on the CPU.
    Spinning = 1,
    /// Parked; woken only by a region it is a member of.
    Sleeping = 2,
}

/// The work of one region: called with `[begin, end)` ranges of the iteration space.
type Job<'a> = dyn Fn(usize, usize) + Sync + 'a;

struct Worker {
    thread: Thread,
    state: AtomicU8,
}

struct Inner {
    client: Arc<Client>,
    /// Bumped when a region starts (and at shutdown).
    generation: AtomicU64,
    /// Members of the current region, the master included.
    team: AtomicUsize,
    /// The current region's work; written by the master before `generation` is bumped, read by
    /// members after they see the bump, cleared after every member is done.
    job: UnsafeCell<Option<*const Job<'static>>>,
    n: AtomicUsize,
    chunk: AtomicUsize,
    /// The index of the next chunk to hand out (chunk `i` is `[i * chunk, min((i + 1) * chunk,
    /// n))`). Counting chunks rather than iterations keeps every bound below `n`: an iteration
    /// counter bumped by `chunk` past the last chunk wraps when `n + chunk` overflows, and the
    /// region would start again at 0.
    next: AtomicUsize,
    /// Members (the master excluded) still working in the current region.
    pending: AtomicUsize,
    panicked: AtomicBool,
    shutdown: AtomicBool,
    workers: Mutex<Vec<Arc<Worker>>>,
}

// SAFETY: `job` is written only by the master while no region runs (pending == 0) and read by
// members only between the generation bump (release/acquire) and their `pending` decrement, which
// the master waits for before it writes again; the pointee is `Sync`.
unsafe impl Sync for Inner {}
// SAFETY: as above.
unsafe impl Send for Inner {}

/// A malleable fork-join pool.
pub struct Pool {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
    states: Vec<Arc<Worker>>,
    region: Mutex<Estimator>,
    /// The process whose threads the workers are.
    process: Process,
}

thread_local! {
    /// Set on pool workers, and on a master inside a region: a nested `parallel_for` runs serially.
    static IN_REGION: Cell<bool> = const { Cell::new(false) };
}

impl Pool {
    /// A pool that can grow to `client.max()` threads, the caller being the master.
    pub fn new(client: Arc<Client>) -> Pool {
        let max = client.max().max(1) as usize;
        let inner = Arc::new(Inner {
            client,
            generation: AtomicU64::new(0),
            team: AtomicUsize::new(1),
            job: UnsafeCell::new(None),
            n: AtomicUsize::new(0),
            chunk: AtomicUsize::new(1),
            next: AtomicUsize::new(0),
            pending: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            workers: Mutex::new(Vec::new()),
        });
        let mut threads = Vec::new();
        let mut states = Vec::new();
        for index in 1..max {
            let inner2 = inner.clone();
            let h = std::thread::Builder::new()
                .name(format!("cpumgr-pool-{index}"))
                .spawn(move || worker(inner2, index))
                .expect("spawning a pool worker");
            let w = Arc::new(Worker { thread: h.thread().clone(), state: AtomicU8::new(WorkerState::Spinning as u8) });
            states.push(w.clone());
            threads.push(h);
        }
        *inner.workers.lock().unwrap_or_else(|e| e.into_inner()) = states.clone();
        Pool { inner, threads, states, region: Mutex::new(Estimator::new()), process: Process::current() }
    }

    /// The client the pool follows.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// Each worker's state now (worker 1 first; the master is not listed: it always runs).
    pub fn worker_states(&self) -> Vec<WorkerState> {
        self.states
            .iter()
            .map(|w| match w.state.load(Ordering::Relaxed) {
                0 => WorkerState::Running,
                1 => WorkerState::Spinning,
                _ => WorkerState::Sleeping,
            })
            .collect()
    }

    /// Runs `f` over `0..n` in chunks of `chunk` iterations, on a team of `min(allocation,
    /// chunks)` threads; returns the team size used. A panic in `f` is re-raised here after the
    /// region ends.
    pub fn parallel_for<F: Fn(usize, usize) + Sync>(&self, n: usize, chunk: usize, f: F) -> usize {
        let key = std::any::type_name::<F>().as_ptr() as u64;
        self.run(n, chunk, &f, key)
    }

    /// [`Pool::parallel_for`] with the region's key for the estimator given (the C ABI uses the
    /// function's address). Serial (a team of 1) inside a region, in a forked child, and while
    /// another thread's region runs: the pool's threads are that region's, and waiting for it
    /// would deadlock a body that waits for this call.
    pub fn run(&self, n: usize, chunk: usize, f: &Job<'_>, key: u64) -> usize {
        let chunk = chunk.max(1);
        if n == 0 {
            return 0;
        }
        if IN_REGION.with(|r| r.get()) || !self.process.is_current() {
            f(0, n);
            return 1;
        }
        let mut estimator = match self.region.try_lock() {
            Ok(estimator) => estimator,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                f(0, n);
                return 1;
            }
        };
        let inner = &*self.inner;
        let chunks = n.div_ceil(chunk);
        let team = (inner.client.team(0) as usize).clamp(1, chunks).min(self.states.len() + 1);
        inner.client.begin_region(team as u32);
        let started = Instant::now();
        // SAFETY: no region runs (we hold the estimator lock and the last region ended with
        // pending == 0), so no member reads `job`; `f` outlives the region, which ends before
        // this function returns and clears the pointer.
        unsafe {
            *inner.job.get() = Some(std::mem::transmute::<*const Job<'_>, *const Job<'static>>(f as *const Job<'_>))
        };
        inner.n.store(n, Ordering::Relaxed);
        inner.chunk.store(chunk, Ordering::Relaxed);
        inner.next.store(0, Ordering::Relaxed);
        inner.pending.store(team - 1, Ordering::Relaxed);
        inner.team.store(team, Ordering::Relaxed);
        inner.generation.fetch_add(1, Ordering::SeqCst);
        for w in &self.states[..team - 1] {
            if w.state.load(Ordering::SeqCst) == WorkerState::Sleeping as u8 {
                w.thread.unpark();
            }
        }
        IN_REGION.with(|r| r.set(true));
        work(inner, 0, f);
        IN_REGION.with(|r| r.set(false));
        let spin_until = Instant::now() + SPIN;
        while inner.pending.load(Ordering::Acquire) > 0 {
            if Instant::now() < spin_until {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        // SAFETY: every member is done with the region.
        unsafe { *inner.job.get() = None };
        inner.client.end_region();
        let took = started.elapsed();
        if took >= TIMED_REGION {
            if let Some(s) = estimator.record(key, team as u32, took) {
                inner.client.report_speedup(team as u32, s);
            }
        }
        drop(estimator);
        if inner.panicked.swap(false, Ordering::AcqRel) {
            panic!("a parallel region's work panicked");
        }
        team
    }
}

/// Takes chunks of the current region until none are left, or until the manager asks this
/// worker's CPU back (never the master's).
fn work(inner: &Inner, index: usize, f: &Job<'_>) {
    let (n, chunk) = (inner.n.load(Ordering::Relaxed), inner.chunk.load(Ordering::Relaxed));
    let chunks = n.div_ceil(chunk);
    let team = inner.team.load(Ordering::Relaxed) as u32;
    loop {
        if index > 0 && inner.client.should_yield(team).is_some_and(|to| index as u32 >= to) {
            return;
        }
        // Each member takes at most one index past the last chunk, so the counter stays within
        // `chunks + team`: it could only wrap after more than `usize::MAX - team` chunks had run.
        let i = inner.next.fetch_add(1, Ordering::Relaxed);
        if i >= chunks {
            return;
        }
        // i < chunks, so i * chunk < n: no overflow; the last chunk is cut at n.
        let begin = i * chunk;
        let end = begin + chunk.min(n - begin);
        if catch_unwind(AssertUnwindSafe(|| f(begin, end))).is_err() {
            inner.panicked.store(true, Ordering::Release);
        }
    }
}

fn worker(inner: Arc<Inner>, index: usize) {
    IN_REGION.with(|r| r.set(true));
    let me = loop {
        // The pool publishes the worker list right after spawning everyone.
        if let Some(w) = inner.workers.lock().unwrap_or_else(|e| e.into_inner()).get(index - 1).cloned() {
            break w;
        }
        std::thread::yield_now();
    };
    let mut seen = 0u64;
    let mut spin = true;
    loop {
        // Wait for a region: spin a while, then sleep.
        let spin_until = Instant::now() + SPIN;
        let g = loop {
            let g = inner.generation.load(Ordering::Acquire);
            if g != seen {
                break g;
            }
            if spin && Instant::now() < spin_until {
                me.state.store(WorkerState::Spinning as u8, Ordering::Relaxed);
                std::hint::spin_loop();
                continue;
            }
            me.state.store(WorkerState::Sleeping as u8, Ordering::SeqCst);
            if inner.generation.load(Ordering::SeqCst) == seen {
                std::thread::park();
            }
        };
        seen = g;
        if inner.shutdown.load(Ordering::Acquire) {
            return;
        }
        if index >= inner.team.load(Ordering::Relaxed) {
            // Not a member of this region: straight back to sleep (masked wake-up).
            spin = false;
            continue;
        }
        me.state.store(WorkerState::Running as u8, Ordering::Relaxed);
        // SAFETY: the master wrote `job` before bumping the generation we acquired, and clears it
        // only after our `pending` decrement below.
        if let Some(job) = unsafe { *inner.job.get() } {
            // SAFETY: the closure lives until the master has seen every member finish.
            work(&inner, index, unsafe { &*job });
        }
        inner.pending.fetch_sub(1, Ordering::Release);
        spin = true;
    }
}

impl Drop for Pool {
    /// Stops the workers and waits for them; in a forked child, where they do not exist (joining
    /// them would wait forever), leaves their handles and shared state unreleased instead.
    fn drop(&mut self) {
        if !self.process.is_current() {
            std::mem::forget(std::mem::take(&mut self.threads));
            return;
        }
        self.inner.shutdown.store(true, Ordering::Release);
        self.inner.generation.fetch_add(1, Ordering::SeqCst);
        for w in &self.states {
            w.thread.unpark();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Options;
    use std::sync::atomic::AtomicU64;

    fn pool(max: u32) -> Pool {
        Pool::new(Arc::new(Client::init(Options { max: Some(max), mode: Some("off".into()), ..Default::default() })))
    }

    #[test]
    fn every_iteration_runs_once() {
        let p = pool(4);
        let hits: Vec<AtomicU64> = (0..1000).map(|_| AtomicU64::new(0)).collect();
        for _ in 0..50 {
            let team = p.parallel_for(1000, 7, |b, e| {
                for h in &hits[b..e] {
                    h.fetch_add(1, Ordering::Relaxed);
                }
            });
            assert_eq!(team, 4, "unmanaged: the program's own team");
        }
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 50));
    }

    #[test]
    fn the_team_never_exceeds_the_work() {
        let p = pool(4);
        assert_eq!(p.parallel_for(2, 1, |_, _| {}), 2);
        assert_eq!(p.parallel_for(0, 1, |_, _| {}), 0);
    }

    #[test]
    fn a_region_called_while_another_runs_goes_serial_instead_of_waiting() {
        let p = Arc::new(pool(4));
        let (tx, rx) = std::sync::mpsc::channel();
        let rx = Mutex::new(rx);
        // One chunk: the region's body runs on this thread, and waits for another thread's
        // region (a wait for this one would deadlock: the test would fail at the timeout).
        let team = p.parallel_for(1, 1, |_, _| {
            let (p, tx) = (Arc::clone(&p), tx.clone());
            std::thread::spawn(move || tx.send(p.parallel_for(64, 1, |_, _| {})).unwrap());
            assert_eq!(
                rx.lock().unwrap().recv_timeout(Duration::from_secs(20)),
                Ok(1),
                "the other region ran alone, on its caller"
            );
        });
        assert_eq!(team, 1);
        assert_eq!(p.parallel_for(64, 1, |_, _| {}), 4, "the pool is whole again once the region ended");
    }

    #[test]
    fn idle_workers_end_up_sleeping() {
        let p = pool(3);
        p.parallel_for(100, 1, |_, _| {});
        let deadline = Instant::now() + Duration::from_secs(5);
        while p.worker_states().iter().any(|s| *s != WorkerState::Sleeping) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(p.worker_states(), vec![WorkerState::Sleeping; 2]);
    }

    /// The chunks one region hands out, sorted.
    fn chunks_of(p: &Pool, n: usize, chunk: usize) -> Vec<(usize, usize)> {
        let seen = Mutex::new(Vec::new());
        p.parallel_for(n, chunk, |b, e| seen.lock().unwrap().push((b, e)));
        let mut seen = seen.into_inner().unwrap();
        seen.sort_unstable();
        seen
    }

    #[test]
    fn chunks_near_the_top_of_the_index_range_stay_within_n_and_the_region_ends() {
        let p = pool(4);
        let half = 1usize << 63;
        assert_eq!(chunks_of(&p, usize::MAX, half), vec![(0, half), (half, usize::MAX)]);
        assert_eq!(chunks_of(&p, usize::MAX, usize::MAX), vec![(0, usize::MAX)]);
        assert_eq!(chunks_of(&p, 10, usize::MAX), vec![(0, 10)]);
        assert_eq!(chunks_of(&p, usize::MAX, usize::MAX - 1), vec![(0, usize::MAX - 1), (usize::MAX - 1, usize::MAX)]);
        assert_eq!(chunks_of(&p, 10, 4), vec![(0, 4), (4, 8), (8, 10)]);
    }

    #[test]
    fn a_forked_child_runs_regions_serially_and_drops_the_pool() {
        use nix::libc;
        let p = pool(3);
        assert_eq!(p.parallel_for(100, 1, |_, _| {}), 3, "the parent's workers exist");
        // SAFETY: the child only runs the pool (serially, on this thread) and exits with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // The child: killed by SIGALRM if anything waits for the parent's workers.
            // SAFETY: alarm and _exit are async-signal-safe.
            unsafe { libc::alarm(10) };
            let ok = catch_unwind(AssertUnwindSafe(|| {
                let iters = AtomicU64::new(0);
                let team = p.parallel_for(1000, 1, |b, e| {
                    iters.fetch_add((e - b) as u64, Ordering::Relaxed);
                });
                let all = iters.load(Ordering::Relaxed) == 1000;
                drop(p);
                team == 1 && all
            }));
            // SAFETY: ends the child without running the test harness's exit path.
            unsafe { libc::_exit(if matches!(ok, Ok(true)) { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for our own child, which ends within the alarm above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "the child was killed (signal {}): it hung", libc::WTERMSIG(status));
        assert_eq!(libc::WEXITSTATUS(status), 0, "the child's region ran serially over every iteration");
        assert_eq!(p.parallel_for(100, 1, |_, _| {}), 3, "the parent's pool still works");
    }

    #[test]
    fn nested_regions_run_serially_and_panics_reach_the_master() {
        let p = pool(2);
        let sum = AtomicU64::new(0);
        p.parallel_for(4, 1, |b, e| {
            assert_eq!(p.parallel_for(3, 1, |_, _| {}), 1);
            sum.fetch_add((e - b) as u64, Ordering::Relaxed);
        });
        assert_eq!(sum.load(Ordering::Relaxed), 4);
        let r = catch_unwind(AssertUnwindSafe(|| p.parallel_for(4, 1, |b, _| assert!(b != 3))));
        assert!(r.is_err());
        assert_eq!(p.parallel_for(4, 1, |_, _| {}), 2, "the pool survives a panicking region");
    }
}
