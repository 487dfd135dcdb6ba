//! The process's link between its permits and cpumgr: the registry behind one lock, the
//! [`Client`] that reads the program's allocation and carries its request, and the watcher thread
//! that renegotiates permits through their callbacks.
//!
//! - **Budget.** The permits share the program's allocated CPUs less one, the thread that runs
//!   `main` (and enters arenas itself); without a manager, the CPUs it may run on less one, as
//!   oneTBB would have on its own.
//! - **Demand.** While a permit wants threads, the program asks for one CPU more than they want
//!   together and says in its slot that its team folds onto any allocation (a TBB worker leaves
//!   an arena at its next steal when the arena's concurrency drops, so it runs on whatever it is
//!   given). When none does, it says it is serial: after a quantum the manager counts it as one
//!   CPU, so CPUs given back between parallel loops come back at once when the next loop starts.
//! - **Renegotiation.** The watcher reads the allocation every [`POLL`] while a permit wants
//!   threads (every [`IDLE_POLL`] otherwise) and at every change of the permits, divides the
//!   budget again and calls the callback of every permit whose grant or state changed, one at a
//!   time and outside the lock (oneTBB's callback reads the permit back). A permit being released
//!   or disconnected waits for its callback in flight to end, so no callback reaches an owner
//!   that has freed its argument.

use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

use cpumgr_client::{monotonic_ns, Client, Options};

use crate::abi::PermitHandle;
use crate::registry::Registry;

/// How often the watcher reads the allocation while a permit wants threads.
pub const POLL: Duration = Duration::from_millis(10);

/// How often it does while none does (nothing to renegotiate; every change of the permits wakes
/// it at once).
pub const IDLE_POLL: Duration = Duration::from_secs(1);

/// The process's cpumgr client, made by the first connection.
pub fn client() -> &'static Client {
    static CLIENT: OnceLock<Client> = OnceLock::new();
    CLIENT.get_or_init(|| Client::init(Options::default()))
}

/// Worker threads the allocation affords: its CPUs less the program's own thread.
fn budget() -> u32 {
    client().team(0).saturating_sub(1)
}

/// Everything behind the lock.
pub struct State {
    /// The process it belongs to: a child forked from it starts afresh (its parent's clients,
    /// permits and watcher are not its own).
    pid: u32,
    /// The clients and permits.
    pub reg: Registry,
    /// The permit whose callback runs now.
    calling: Option<u64>,
    /// The watcher thread, while one runs.
    watcher: Option<ThreadId>,
    /// What the slot says: whether permits want threads, and the team they make.
    published: Option<(bool, u32)>,
    /// The request last written in the slot.
    requested: Option<u32>,
}

impl State {
    fn new() -> State {
        let pid = std::process::id();
        State { pid, reg: Registry::new(pid, budget()), calling: None, watcher: None, published: None, requested: None }
    }

    /// Writes the permits' demand in the program's slot when it changed.
    fn publish(&mut self) {
        let c = client();
        let ask = self.reg.demand();
        let team = ask.workers.saturating_add(1).min(c.max().max(1));
        if self.published == Some((ask.active, team)) {
            return;
        }
        if ask.active {
            if self.requested != Some(team) {
                c.set_request(team, 1, c.max());
                self.requested = Some(team);
            }
            c.fold_region_at(team, monotonic_ns());
        } else {
            c.end_region();
        }
        self.published = Some((ask.active, team));
    }
}

/// The process's registry and the watcher's signals.
pub struct Shared {
    state: Mutex<State>,
    /// Wakes the watcher: a callback is due.
    wake: Condvar,
    /// A callback ended.
    done: Condvar,
}

/// The process's shared state.
pub fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| Shared { state: Mutex::new(State::new()), wake: Condvar::new(), done: Condvar::new() })
}

impl Shared {
    /// The state, that of this process.
    fn lock(&self) -> MutexGuard<'_, State> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.pid != std::process::id() {
            *st = State::new();
        }
        st
    }

    /// Runs `f` on the registry with the budget brought up to date, then publishes the demand,
    /// wakes the watcher when a callback is due and starts it when none runs.
    pub fn with<T>(&'static self, f: impl FnOnce(&mut Registry) -> T) -> T {
        let mut st = self.lock();
        st.reg.set_budget(budget());
        let out = f(&mut st.reg);
        st.publish();
        if st.watcher.is_none() && st.reg.connected() {
            let spawned = std::thread::Builder::new().name("cpumgr-tcm".into()).spawn(move || self.watch());
            // Without a watcher the permits keep their grants; calls still answer.
            st.watcher = spawned.ok().map(|t| t.thread().id());
        }
        // A permit that starts wanting threads needs the watcher polling at once.
        self.wake.notify_all();
        out
    }

    /// Waits until no callback of `handles` runs, unless the caller is that callback.
    pub fn settle(&self, handles: &[u64]) {
        let mut st = self.lock();
        while st.calling.is_some_and(|h| handles.contains(&h)) && st.watcher != Some(std::thread::current().id()) {
            st = self.done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The watcher thread: follows the allocation and makes the callbacks due, until no client
    /// is connected.
    fn watch(&self) {
        let mut st = self.lock();
        loop {
            if !st.reg.connected() {
                st.watcher = None;
                return;
            }
            st.reg.set_budget(budget());
            let due = st.reg.take_due();
            if due.is_empty() {
                let poll = if st.reg.demand().active { POLL } else { IDLE_POLL };
                st = self.wake.wait_timeout(st, poll).unwrap_or_else(|e| e.into_inner()).0;
                continue;
            }
            for d in due {
                if st.reg.owner(d.handle).is_none() {
                    continue; // released since
                }
                st.calling = Some(d.handle);
                drop(st);
                // SAFETY: the owner's callback with the argument it gave for this permit, which it
                // has not released (release waits for this call to end).
                unsafe { (d.callback)(d.handle as PermitHandle, d.arg as *mut std::ffi::c_void, d.flags) };
                st = self.lock();
                st.calling = None;
                self.done.notify_all();
            }
        }
    }
}
