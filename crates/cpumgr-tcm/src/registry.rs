//! The process's clients and permits, and every rule of the API about them: which calls are
//! valid on which handle, what each state means for the permit's threads, and which permits must
//! hear about a change. No I/O: [`crate::link`] feeds it the worker budget and publishes its
//! demand.
//!
//! Handles and client ids are numbers tagged with this process's id, never pointers: a handle
//! that was released, never made, or made by another process is found unknown and refused,
//! without reading memory through it.

use std::collections::BTreeMap;
use std::ffi::c_void;

use crate::abi::{self, Callback, CallbackFlags, PermitState};
use crate::grant::{grant, Demand};

/// Why a call is refused: the API's one error for bad input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalid;

impl From<Invalid> for abi::TcmResult {
    fn from(_: Invalid) -> abi::TcmResult {
        abi::ERROR_INVALID_ARGUMENT
    }
}

/// A permit request, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Fewest threads.
    pub min: u32,
    /// Most threads.
    pub max: u32,
    /// Larger is served first.
    pub priority: i32,
}

impl Request {
    /// Reads a request as the API defines it: `tcm_automatic` (-1) is no minimum, or a maximum of
    /// `automatic_max` (the CPUs the process may use); a rigid request wants its maximum or
    /// nothing; any other negative count, a minimum above the maximum, or constraints announced
    /// without their array is refused.
    pub fn read(r: &abi::PermitRequest, automatic_max: u32) -> Result<Request, Invalid> {
        let count = |v: i32, automatic: u32| match v {
            abi::AUTOMATIC => Ok(automatic),
            v if v >= 0 => Ok(v as u32),
            _ => Err(Invalid),
        };
        let max = count(r.max_sw_threads, automatic_max)?;
        let mut min = count(r.min_sw_threads, 0)?;
        if min > max || (r.constraints_size > 0 && r.cpu_constraints.is_null()) {
            return Err(Invalid);
        }
        if r.flags.rigid() {
            min = max;
        }
        Ok(Request { min, max, priority: r.priority })
    }
}

/// A client: one runtime that connected (oneTBB connects once per process).
#[derive(Debug)]
struct ClientRec {
    callback: Callback,
}

/// One permit.
#[derive(Debug)]
struct PermitRec {
    client: u64,
    /// The caller's argument for its callback, kept as a number: only handed back.
    arg: usize,
    request: Request,
    state: PermitState,
    granted: u32,
    /// What its owner last learned (`granted`, `state`): by the reply of its own request or read,
    /// or a callback. A permit whose value differs is due a callback.
    told: (u32, PermitState),
}

impl PermitRec {
    fn wants(&self) -> bool {
        matches!(self.state, abi::STATE_ACTIVE | abi::STATE_PENDING)
    }
}

/// A callback to make, outside the lock.
#[derive(Debug, Clone, Copy)]
pub struct Due {
    /// The owner's callback.
    pub callback: unsafe extern "C" fn(abi::PermitHandle, *mut c_void, CallbackFlags) -> abi::TcmResult,
    /// The permit.
    pub handle: u64,
    /// The owner's argument.
    pub arg: usize,
    /// What changed.
    pub flags: CallbackFlags,
}

/// What the permits ask of the manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ask {
    /// Whether any permit wants threads (else the program runs only its own threads).
    pub active: bool,
    /// The worker threads they want at most, together.
    pub workers: u32,
}

/// Every client and permit of the process.
#[derive(Debug)]
pub struct Registry {
    tag: u64,
    next: u32,
    clients: BTreeMap<u64, ClientRec>,
    permits: BTreeMap<u64, PermitRec>,
    /// Worker threads the permits share.
    budget: u32,
}

impl Registry {
    /// An empty registry whose ids carry `tag` (the process id) in their high half.
    pub fn new(tag: u32, budget: u32) -> Registry {
        Registry { tag: u64::from(tag) << 32, next: 0, clients: BTreeMap::new(), permits: BTreeMap::new(), budget }
    }

    fn fresh_id(&mut self) -> u64 {
        self.next = self.next.wrapping_add(1).max(1);
        self.tag | u64::from(self.next)
    }

    /// Connects a client; its id.
    pub fn connect(&mut self, callback: Callback) -> u64 {
        let id = self.fresh_id();
        self.clients.insert(id, ClientRec { callback });
        id
    }

    /// Whether any client is connected.
    pub fn connected(&self) -> bool {
        !self.clients.is_empty()
    }

    /// Disconnects a client and releases the permits it still holds; their handles.
    pub fn disconnect(&mut self, client: u64) -> Result<Vec<u64>, Invalid> {
        self.clients.remove(&client).ok_or(Invalid)?;
        let gone: Vec<u64> = self.permits.iter().filter(|(_, p)| p.client == client).map(|(&h, _)| h).collect();
        for h in &gone {
            self.permits.remove(h);
        }
        self.rebalance();
        Ok(gone)
    }

    /// Makes a permit for `client`, or renews `existing` (a handle the client holds) with a new
    /// request; the permit's handle. Its owner learns its grant from the reply.
    pub fn request(&mut self, client: u64, req: Request, arg: usize, existing: Option<u64>) -> Result<u64, Invalid> {
        if !self.clients.contains_key(&client) {
            return Err(Invalid);
        }
        let handle = match existing {
            Some(h) => {
                let p = self.permits.get_mut(&h).filter(|p| p.client == client).ok_or(Invalid)?;
                p.request = req;
                p.arg = arg;
                p.state = abi::STATE_PENDING;
                h
            }
            None => {
                let h = self.fresh_id();
                let p = PermitRec {
                    client,
                    arg,
                    request: req,
                    state: abi::STATE_PENDING,
                    granted: 0,
                    told: (0, abi::STATE_VOID),
                };
                self.permits.insert(h, p);
                h
            }
        };
        self.rebalance();
        self.read(handle)
    }

    /// A permit's grant and state, which its owner now knows.
    pub fn read(&mut self, handle: u64) -> Result<u64, Invalid> {
        let p = self.permits.get_mut(&handle).ok_or(Invalid)?;
        p.told = (p.granted, p.state);
        Ok(handle)
    }

    /// A permit's grant and state.
    pub fn get(&self, handle: u64) -> Result<(u32, PermitState), Invalid> {
        self.permits.get(&handle).map(|p| (p.granted, p.state)).ok_or(Invalid)
    }

    /// The client a permit belongs to.
    pub fn owner(&self, handle: u64) -> Option<u64> {
        self.permits.get(&handle).map(|p| p.client)
    }

    /// Releases a permit: its handle is unknown from now on.
    pub fn release(&mut self, handle: u64) -> Result<(), Invalid> {
        self.permits.remove(&handle).ok_or(Invalid)?;
        self.rebalance();
        Ok(())
    }

    /// Moves a permit to `state` (idle or inactive: its threads go, and its CPUs to the
    /// others; active: it wants them again).
    pub fn set_state(&mut self, handle: u64, state: PermitState) -> Result<(), Invalid> {
        let p = self.permits.get_mut(&handle).ok_or(Invalid)?;
        match state {
            abi::STATE_ACTIVE if p.wants() => return Ok(()),
            abi::STATE_ACTIVE => p.state = abi::STATE_PENDING,
            s => {
                p.state = s;
                p.granted = 0;
            }
        }
        self.rebalance();
        // The caller asked for the change: it needs no callback for its own permit's new state.
        self.read(handle).map(|_| ())
    }

    /// Sets the worker budget (the program's allocated CPUs less its own thread).
    pub fn set_budget(&mut self, budget: u32) {
        if budget != self.budget {
            self.budget = budget;
            self.rebalance();
        }
    }

    /// The worker budget.
    pub fn budget(&self) -> u32 {
        self.budget
    }

    /// Divides the budget among the permits that want threads; those with no thread yet wait
    /// (pending).
    fn rebalance(&mut self) {
        let wanting: Vec<u64> = self.permits.iter().filter(|(_, p)| p.wants()).map(|(&h, _)| h).collect();
        let demands: Vec<Demand> = wanting
            .iter()
            .map(|h| {
                let r = self.permits[h].request;
                Demand { min: r.min, max: r.max, priority: r.priority }
            })
            .collect();
        for (h, g) in wanting.iter().zip(grant(self.budget, &demands)) {
            let p = self.permits.get_mut(h).expect("listed above");
            p.granted = g;
            p.state = if g > 0 || p.request.max == 0 { abi::STATE_ACTIVE } else { abi::STATE_PENDING };
        }
    }

    /// The callbacks due (permits whose grant or state their owner has not learned, whose client
    /// has a callback), each marked as told.
    pub fn take_due(&mut self) -> Vec<Due> {
        let mut due = Vec::new();
        for (&handle, p) in self.permits.iter_mut() {
            if (p.granted, p.state) == p.told {
                continue;
            }
            let mut flags = 0;
            if p.granted != p.told.0 {
                flags |= CallbackFlags::NEW_CONCURRENCY;
            }
            if p.state != p.told.1 {
                flags |= CallbackFlags::NEW_STATE;
            }
            p.told = (p.granted, p.state);
            if let Some(callback) = self.clients.get(&p.client).and_then(|c| c.callback) {
                due.push(Due { callback, handle, arg: p.arg, flags: CallbackFlags(flags) });
            }
        }
        due
    }

    /// Whether a permit's owner has yet to learn its grant or state.
    pub fn any_due(&self) -> bool {
        self.permits.values().any(|p| (p.granted, p.state) != p.told)
    }

    /// What the permits ask of the manager.
    pub fn demand(&self) -> Ask {
        let wanting = self.permits.values().filter(|p| p.wants());
        let mut d = Ask::default();
        for p in wanting {
            d.active = true;
            d.workers = d.workers.saturating_add(p.request.max);
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn noop(_: abi::PermitHandle, _: *mut c_void, _: CallbackFlags) -> abi::TcmResult {
        abi::SUCCESS
    }

    fn req(min: u32, max: u32) -> Request {
        Request { min, max, priority: abi::PRIORITY_NORMAL }
    }

    #[test]
    fn a_permit_gets_the_budget_and_a_second_one_shares_it() {
        let mut r = Registry::new(7, 3);
        let c = r.connect(Some(noop));
        let a = r.request(c, req(0, 8), 1, None).unwrap();
        assert_eq!(r.get(a), Ok((3, abi::STATE_ACTIVE)));
        assert!(r.take_due().is_empty(), "the requester learns from the reply");
        let b = r.request(c, req(0, 8), 2, None).unwrap();
        assert_eq!(r.get(a), Ok((2, abi::STATE_ACTIVE)));
        assert_eq!(r.get(b), Ok((1, abi::STATE_ACTIVE)));
        let due = r.take_due();
        assert_eq!(due.len(), 1);
        assert_eq!((due[0].handle, due[0].arg, due[0].flags), (a, 1, CallbackFlags(CallbackFlags::NEW_CONCURRENCY)));
        assert_eq!(r.demand(), Ask { active: true, workers: 16 });
    }

    #[test]
    fn a_smaller_budget_leaves_a_permit_pending_and_a_larger_one_activates_it() {
        let mut r = Registry::new(7, 2);
        let c = r.connect(Some(noop));
        let a = r.request(c, req(0, 4), 0, None).unwrap();
        r.set_budget(0);
        assert_eq!(r.get(a), Ok((0, abi::STATE_PENDING)));
        let due = r.take_due();
        assert_eq!(due[0].flags, CallbackFlags(CallbackFlags::NEW_CONCURRENCY | CallbackFlags::NEW_STATE));
        r.set_budget(5);
        assert_eq!(r.get(a), Ok((4, abi::STATE_ACTIVE)));
        assert_eq!(r.take_due().len(), 1);
    }

    #[test]
    fn idle_and_inactive_permits_give_their_threads_to_the_others() {
        let mut r = Registry::new(7, 4);
        let c = r.connect(Some(noop));
        let a = r.request(c, req(0, 4), 0, None).unwrap();
        let b = r.request(c, req(0, 4), 0, None).unwrap();
        r.take_due();
        r.set_state(a, abi::STATE_IDLE).unwrap();
        assert_eq!(r.get(a), Ok((0, abi::STATE_IDLE)));
        assert_eq!(r.get(b), Ok((4, abi::STATE_ACTIVE)));
        r.set_state(b, abi::STATE_INACTIVE).unwrap();
        assert_eq!(r.demand(), Ask { active: false, workers: 0 });
        r.set_state(a, abi::STATE_ACTIVE).unwrap();
        assert_eq!(r.get(a), Ok((4, abi::STATE_ACTIVE)));
        // A renewed request of an inactive permit makes it want threads again.
        r.request(c, req(1, 4), 0, Some(b)).unwrap();
        assert_eq!(r.get(b), Ok((2, abi::STATE_ACTIVE)));
    }

    #[test]
    fn unknown_released_and_foreign_handles_are_refused() {
        let mut r = Registry::new(7, 4);
        let c = r.connect(None);
        let a = r.request(c, req(0, 4), 0, None).unwrap();
        assert_eq!(r.release(a), Ok(()));
        assert_eq!(r.release(a), Err(Invalid));
        assert_eq!(r.get(a), Err(Invalid));
        assert_eq!(r.set_state(a, abi::STATE_IDLE), Err(Invalid));
        // Another process's registry makes the same numbers under its own tag.
        let mut other = Registry::new(8, 4);
        let oc = other.connect(None);
        let foreign = other.request(oc, req(0, 4), 0, None).unwrap();
        assert_eq!(r.get(foreign), Err(Invalid));
        assert_eq!(r.request(c, req(0, 1), 0, Some(foreign)), Err(Invalid));
        assert_eq!(r.request(oc, req(0, 1), 0, None), Err(Invalid), "another process's client");
        // Another client's permit cannot be renewed by this one.
        let c2 = r.connect(None);
        let b = r.request(c, req(0, 4), 0, None).unwrap();
        assert_eq!(r.request(c2, req(0, 1), 0, Some(b)), Err(Invalid));
        assert_eq!(r.disconnect(c), Ok(vec![b]));
        assert_eq!(r.disconnect(c), Err(Invalid));
        assert_eq!(r.get(b), Err(Invalid));
    }

    #[test]
    fn requests_are_read_as_the_api_defines_them() {
        let raw = |min, max, flags| abi::PermitRequest {
            min_sw_threads: min,
            max_sw_threads: max,
            cpu_constraints: std::ptr::null_mut(),
            constraints_size: 0,
            priority: abi::PRIORITY_NORMAL,
            flags: abi::PermitFlags(flags),
            reserved: [0; 4],
        };
        assert_eq!(Request::read(&raw(-1, -1, 0), 8), Ok(req(0, 8)));
        assert_eq!(Request::read(&raw(1, 3, 0), 8), Ok(req(1, 3)));
        assert_eq!(Request::read(&raw(1, 3, abi::PermitFlags::RIGID), 8), Ok(req(3, 3)));
        assert_eq!(Request::read(&raw(4, 3, 0), 8), Err(Invalid));
        assert_eq!(Request::read(&raw(-2, 3, 0), 8), Err(Invalid));
        assert_eq!(Request::read(&raw(0, -7, 0), 8), Err(Invalid));
        let mut r = raw(0, 1, 0);
        r.constraints_size = 1;
        assert_eq!(Request::read(&r, 8), Err(Invalid));
    }
}
