//! The client and the malleable pool under a real manager (`cpumgr_daemon::Manager` on a private
//! socket, managing CPUs 0-1): this test process registers itself as the program, and a `sleep`
//! child is registered as a second program to make the allocation shrink.
//!
//! The manager runs in a process of its own (this test binary started again to run
//! [`manager_process`]): it may stop the program it manages, which must not be itself. The tests
//! share this process (one registration per manager), so they run one at a time.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cpumgr_client::{Client, Mode, Options, Pool};
use cpumgr_core::CpuSet;
use cpumgr_daemon::{Manager, Settings};
use cpumgr_proto::{Conn, Registration, Reply, Request, Segment};
use std::path::{Path, PathBuf};

const DEADLINE: Duration = Duration::from_secs(20);
const SOCKET_VAR: &str = "CPUMGR_TEST_MANAGER_SOCKET";
/// The test manager's quantum in milliseconds (50 when unset).
const QUANTUM_VAR: &str = "CPUMGR_TEST_MANAGER_QUANTUM_MS";
const ITERS: usize = 400;

fn serial() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !ok() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Not a test of its own: the manager process the tests start, serving the socket named by
/// [`SOCKET_VAR`] until its stdin closes (then it releases every program). Without the variable
/// (a plain `cargo test -- --ignored`) it returns at once.
#[test]
#[ignore = "not a test: the manager process the other tests start by running this binary with --ignored --exact manager_process"]
fn manager_process() {
    let Some(socket) = std::env::var_os(SOCKET_VAR) else { return };
    let settings = Settings {
        policy: "equipartition".into(),
        quantum: Duration::from_millis(std::env::var(QUANTUM_VAR).ok().and_then(|q| q.parse().ok()).unwrap_or(50)),
        cpus: Some(CpuSet::parse("0-1").unwrap()),
        ..Default::default()
    };
    let manager = Manager::start(Path::new(&socket), &settings).unwrap();
    let _ = std::io::stdin().read(&mut [0u8]);
    manager.shutdown();
}

/// A manager process on a private socket, and this process registered with it through a
/// [`Client`].
struct Setup {
    client: Arc<Client>,
    manager: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Setup {
    fn start() -> Setup {
        Setup::with_quantum_ms(50)
    }

    fn with_quantum_ms(quantum: u64) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("cpumgr.sock");
        let manager = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "manager_process", "--test-threads=1"])
            .env(SOCKET_VAR, &socket)
            .env(QUANTUM_VAR, quantum.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        wait_for("the manager to answer", || Conn::connect(&socket).is_ok());
        let client = Arc::new(Client::init(Options {
            name: Some("pool-test".into()),
            max: Some(2),
            mode: Some("auto".into()),
            socket: Some(socket.clone()),
            ..Default::default()
        }));
        assert_eq!(client.mode(), Mode::Managed);
        wait_for("the whole machine while alone", || client.team(0) == 2);
        Setup { client, manager, socket, _dir: dir }
    }

    fn call(&self, req: &Request) -> (Reply, Vec<std::os::fd::OwnedFd>) {
        Conn::connect(&self.socket).unwrap().call(req).unwrap()
    }

    /// Registers a `sleep` child as a second program wanting both CPUs.
    fn second_program(&self) -> Other {
        let child = Command::new("sleep").arg("60").spawn().unwrap();
        let reg =
            Registration { pid: Some(child.id() as i32), name: "other".into(), wanted: Some(2), ..Default::default() };
        let id = match self.call(&Request::Register(reg)).0 {
            Reply::Registered { id } => id,
            r => panic!("{r:?}"),
        };
        Other { child, id }
    }

    /// This program's slot, mapped a second time: what the manager reads.
    fn own_slot(&self) -> Segment {
        let (reply, fds) = self.call(&Request::OpenSlot { id: self.client.id() });
        assert!(matches!(reply, Reply::Slot { .. }), "{reply:?}");
        Segment::open(fds.into_iter().next().unwrap()).unwrap()
    }
}

impl Drop for Setup {
    /// Closes the manager's stdin: it releases this process and exits.
    fn drop(&mut self) {
        drop(self.manager.stdin.take());
        let _ = self.manager.wait();
    }
}

struct Other {
    child: Child,
    id: u64,
}

impl Other {
    fn leave(self, s: &Setup) {
        assert_eq!(s.call(&Request::Unregister { id: self.id }).0, Reply::Ok);
    }
}

impl Drop for Other {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one region saw.
struct Region {
    team: usize,
    threads: usize,
}

/// Runs one region over [`ITERS`] iterations of real work, checking each ran exactly once;
/// `during` runs once inside it, on whichever member takes iteration 0.
fn region(pool: &Pool, during: &(dyn Fn() + Sync)) -> Region {
    let hits: Vec<AtomicU32> = (0..ITERS).map(|_| AtomicU32::new(0)).collect();
    let threads = Mutex::new(Vec::new());
    let team = pool.parallel_for(ITERS, 4, |b, e| {
        if b == 0 {
            during();
        }
        let mut sink = 0u64;
        for (i, h) in hits[b..e].iter().enumerate() {
            h.fetch_add(1, Ordering::Relaxed);
            for k in 0..20_000u64 {
                sink = sink.wrapping_add(k * (i as u64 + 1));
            }
        }
        std::hint::black_box(sink);
        let me = std::thread::current().id();
        let mut t = threads.lock().unwrap();
        if !t.contains(&me) {
            t.push(me);
        }
    });
    assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1), "every iteration exactly once");
    let threads = threads.into_inner().unwrap().len();
    Region { team, threads }
}

#[test]
fn a_shrink_mid_region_applies_from_the_next_region_and_asks_the_running_team_to_yield() {
    let _one = serial();
    let s = Setup::start();
    let pool = Pool::new(s.client.clone());
    let first = region(&pool, &|| {});
    assert_eq!(first.team, 2, "alone: both CPUs");

    let other = Mutex::new(None);
    let yield_seen = AtomicU32::new(0);
    let shrinking = region(&pool, &|| {
        // A second program arrives while this region runs with a team of 2.
        *other.lock().unwrap() = Some(s.second_program());
        wait_for("the allocation to shrink to 1", || s.client.team(0) == 1);
        wait_for("the manager to ask the team of 2 to yield", || s.client.should_yield(2).is_some());
        yield_seen.store(s.client.should_yield(2).unwrap(), Ordering::Relaxed);
    });
    assert_eq!(shrinking.team, 2, "delayed adjustment: the running region keeps its team");
    assert_eq!(yield_seen.load(Ordering::Relaxed), 1, "asked down to the one CPU allocated");

    let next = region(&pool, &|| {});
    assert_eq!((next.team, next.threads), (1, 1), "the next region follows the allocation");
    assert_eq!(s.client.should_yield(1), None, "a team of 1 is never asked to yield");

    other.into_inner().unwrap().unwrap().leave(&s);
    wait_for("both CPUs back", || s.client.team(0) == 2);
    assert_eq!(region(&pool, &|| {}).team, 2, "and the next region grows back");
}

#[test]
fn a_region_that_shrinks_as_asked_hands_its_cpu_over_at_once() {
    let _one = serial();
    // A 10 s quantum: within this test only a kicked step can move a CPU.
    let s = Setup::with_quantum_ms(10_000);
    let pool = Pool::new(s.client.clone());
    assert_eq!(region(&pool, &|| {}).team, 2);
    let other = Mutex::new(None);
    region(&pool, &|| {
        *other.lock().unwrap() = Some(s.second_program());
        wait_for("the manager to ask the team of 2 to yield", || s.client.should_yield(2).is_some());
    });
    let other = other.into_inner().unwrap().unwrap();
    let running = |s: &Setup| match s.call(&Request::Status).0 {
        Reply::Status(st) => st.programs.iter().any(|p| p.id == other.id && p.state == "running"),
        r => panic!("{r:?}"),
    };
    assert!(!running(&s), "while this program's team of 2 runs as a gang, the other waits");
    let shrunk = std::time::Instant::now();
    assert_eq!(region(&pool, &|| {}).team, 1);
    // The region of 1 rang the doorbell: the other runs long before the quantum ends.
    wait_for("the other program to get the CPU given back", || running(&s));
    assert!(shrunk.elapsed() < Duration::from_secs(5), "the CPU waited for the quantum: {:?}", shrunk.elapsed());
    other.leave(&s);
}

#[test]
fn region_timings_reach_the_slot_as_a_speedup_report() {
    let _one = serial();
    let s = Setup::start();
    let pool = Pool::new(s.client.clone());
    let slot = s.own_slot();
    assert_eq!(slot.slot().raw_speedup(), None, "nothing reported before any region");
    assert_eq!(region(&pool, &|| {}).team, 2);
    let other = s.second_program();
    wait_for("the allocation to shrink to 1", || s.client.team(0) == 1);
    assert_eq!(region(&pool, &|| {}).team, 1);
    // Team sizes 2 and 1 of the same region are known: the estimate for 1 (the baseline) is 1.
    let r = slot.slot().raw_speedup().expect("a report after two team sizes");
    assert_eq!((r.cpus, r.speedup), (1, 1.0));
    other.leave(&s);
    wait_for("both CPUs back", || s.client.team(0) == 2);
    assert_eq!(region(&pool, &|| {}).team, 2);
    let r = slot.slot().raw_speedup().unwrap();
    assert_eq!(r.cpus, 2, "the newest report is for the team just timed");
    assert!(r.speedup.is_finite() && r.speedup > 0.0, "{r:?}");
}

#[test]
fn idle_and_requests_reach_the_manager() {
    let _one = serial();
    let s = Setup::start();
    let slot = s.own_slot();
    s.client.set_request(1, 1, 2);
    wait_for("a request of 1 to give one CPU", || s.client.team(0) == 1);
    s.client.idle();
    let raw = slot.slot().raw_request().unwrap();
    assert_eq!((raw.wanted, raw.min), (0, 0));
    s.client.set_request(2, 1, 2);
    wait_for("a request of 2 to give both CPUs back", || s.client.team(0) == 2);
}

#[test]
fn a_forked_child_neither_acts_for_nor_unregisters_its_parent() {
    use nix::libc;
    let _one = serial();
    let mut s = Setup::start();
    let id = s.client.id().expect("registered");
    let listed = |s: &Setup| match s.call(&Request::Status).0 {
        Reply::Status(st) => st.programs.iter().any(|p| p.id == id),
        r => panic!("{r:?}"),
    };
    assert!(listed(&s));
    // The child gets the only reference to the client, so dropping it there runs its end.
    let off = Options { mode: Some("off".into()), ..Default::default() };
    let client = std::mem::replace(&mut s.client, Arc::new(Client::init(off)));
    // SAFETY: the child only reads and drops the client, then ends with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: alarm and _exit are async-signal-safe; the alarm ends a child that hangs.
        unsafe { libc::alarm(10) };
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let unmanaged = client.mode() == Mode::Unmanaged && client.id().is_none();
            let own_team = client.team(0) == client.max() && client.allocation().is_none();
            drop(client);
            unmanaged && own_team
        }));
        // SAFETY: ends the child without running the test harness's exit path.
        unsafe { libc::_exit(if matches!(ok, Ok(true)) { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child, which ends within its alarm.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child: unmanaged, own team ({status:#x})");
    assert!(listed(&s), "the child's end left the parent registered");
    assert_eq!((client.mode(), client.id()), (Mode::Managed, Some(id)));
    assert!(client.allocation().is_some(), "the parent still follows its allocation");
    drop(client);
    assert!(!listed(&s), "the parent's own end unregisters it");
}

#[test]
fn once_the_manager_is_killed_its_allocation_is_no_longer_reported() {
    let _one = serial();
    let mut s = Setup::start();
    let alloc = s.client.allocation().expect("an allocation while the manager lives");
    assert_eq!(alloc.count, 2);
    s.client.set_request(1, 1, 2);
    wait_for("a request of 1 to give one CPU", || s.client.allocation().is_some_and(|a| a.count == 1));
    s.manager.kill().unwrap();
    s.manager.wait().unwrap();
    wait_for("the allocation to go with the lease", || s.client.allocation().is_none());
    assert_eq!(s.client.team(0), s.client.max(), "the team falls back by the same rule");
}
