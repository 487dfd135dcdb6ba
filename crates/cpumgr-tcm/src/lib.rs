//! `libtcm.so.1` backed by cpumgr: the Thread Composability Manager API (Intel's, which oneTBB
//! loads at run time) with permits granted from the program's cpumgr allocation, so an unmodified
//! oneTBB program's worker threads follow its allocation across processes.
//!
//! A TBB arena's permit is a share of the program's request to the manager: the permits of a
//! process share its allocated CPUs less its main thread ([`link`]), divided by their minimum,
//! maximum and priority ([`grant`]); when the allocation changes, the permits are divided again and
//! each one whose grant or state changed hears it through its callback. Idle and deactivated
//! permits give their threads back, and a process whose permits want nothing is serial to the
//! manager.
//!
//! Every call checks its arguments as the API defines them ([`registry`]): a null pointer, a
//! released or unknown permit (another process's included), an unknown client, a bad request
//! get `TCM_RESULT_ERROR_INVALID_ARGUMENT` and change nothing. `TCM_ENABLE=0` switches the library
//! off (`tcmConnect` fails, and oneTBB then runs its own scheduler).
//!
//! oneTBB loads `libtcm.so.1` from its own directory, unless a library of that soname is already
//! loaded: preload this one (`LD_PRELOAD=.../libtcm.so`), as `cpumgr run` does for programs that
//! link oneTBB.

pub mod abi;
pub mod grant;
pub mod link;
pub mod registry;

use std::cell::Cell;
use std::ffi::{c_char, c_void};

use abi::{Callback, ClientId, Permit, PermitHandle, PermitRequest, TcmResult};
use link::shared;
use registry::Request;

/// The version `tcmGetVersionInfo` reports.
const VERSION: &str = env!("CARGO_PKG_VERSION");

thread_local! {
    /// The permit the calling thread registered with, 0 when none.
    static REGISTERED: Cell<u64> = const { Cell::new(0) };
}

fn code(r: Result<(), registry::Invalid>) -> TcmResult {
    match r {
        Ok(()) => abi::SUCCESS,
        Err(e) => e.into(),
    }
}

/// The id a handle carries, `None` for null.
fn id(h: PermitHandle) -> Option<u64> {
    (!h.is_null()).then_some(h as u64)
}

/// Whether `TCM_ENABLE` switches the library off.
fn disabled() -> bool {
    std::env::var("TCM_ENABLE").is_ok_and(|v| v.trim() == "0")
}

/// Writes a permit's grant and state into `out` (its first concurrency, when it has room).
///
/// # Safety
/// `out` is valid for writing, and its `concurrencies` NULL or valid for `size` counts.
unsafe fn fill(out: *mut Permit, granted: u32, state: abi::PermitState) {
    // SAFETY: the caller's contract.
    let out = unsafe { &mut *out };
    if !out.concurrencies.is_null() && out.size > 0 {
        // SAFETY: room for `size` counts, at least one.
        unsafe { *out.concurrencies = granted };
    }
    out.state = state;
    out.flags = abi::PermitFlags::default();
}

/// Connects a runtime; `callback` (may be NULL) hears of its permits' changes.
///
/// # Safety
/// `client_id` is NULL or valid for writing; `callback` is NULL or safe to call from another
/// thread with the arguments of the permits requested.
#[no_mangle]
pub unsafe extern "C" fn tcmConnect(callback: Callback, client_id: *mut ClientId) -> TcmResult {
    if client_id.is_null() {
        return abi::ERROR_INVALID_ARGUMENT;
    }
    if disabled() {
        return abi::ERROR_UNKNOWN;
    }
    link::client();
    let id = shared().with(|r| r.connect(callback));
    // SAFETY: checked non-null; the caller's contract.
    unsafe { *client_id = id };
    abi::SUCCESS
}

/// Disconnects a runtime, releasing the permits it still holds.
#[no_mangle]
pub extern "C" fn tcmDisconnect(client_id: ClientId) -> TcmResult {
    match shared().with(|r| r.disconnect(client_id)) {
        Ok(gone) => {
            shared().settle(&gone);
            abi::SUCCESS
        }
        Err(e) => e.into(),
    }
}

/// Requests a permit (`*permit_handle` NULL) or renews one (`*permit_handle` a permit of this
/// client); writes the grant into `permit` when it is not NULL.
///
/// # Safety
/// `permit_handle` is NULL or valid for reading and writing; `permit` is NULL or valid for writing
/// with `concurrencies` NULL or valid for `size` counts; `request.cpu_constraints` is NULL or valid
/// for `constraints_size` entries.
#[no_mangle]
pub unsafe extern "C" fn tcmRequestPermit(
    client_id: ClientId,
    request: PermitRequest,
    callback_arg: *mut c_void,
    permit_handle: *mut PermitHandle,
    permit: *mut Permit,
) -> TcmResult {
    if permit_handle.is_null() {
        return abi::ERROR_INVALID_ARGUMENT;
    }
    let Ok(req) = Request::read(&request, link::client().max()) else {
        return abi::ERROR_INVALID_ARGUMENT;
    };
    // SAFETY: checked non-null; the caller's contract.
    let existing = id(unsafe { *permit_handle });
    let got = shared().with(|r| {
        let h = r.request(client_id, req, callback_arg as usize, existing)?;
        r.get(h).map(|g| (h, g))
    });
    match got {
        Ok((h, (granted, state))) => {
            // SAFETY: checked non-null, and `permit` is NULL or writable: the caller's contract.
            unsafe {
                *permit_handle = h as PermitHandle;
                if !permit.is_null() {
                    fill(permit, granted, state);
                }
            }
            abi::SUCCESS
        }
        Err(e) => e.into(),
    }
}

/// Writes a permit's grant and state into `permit`.
///
/// # Safety
/// `permit` is NULL or valid for writing, its `concurrencies` NULL or valid for `size` counts.
#[no_mangle]
pub unsafe extern "C" fn tcmGetPermitData(permit_handle: PermitHandle, permit: *mut Permit) -> TcmResult {
    let Some(h) = id(permit_handle).filter(|_| !permit.is_null()) else {
        return abi::ERROR_INVALID_ARGUMENT;
    };
    match shared().with(|r| r.read(h).and_then(|h| r.get(h))) {
        Ok((granted, state)) => {
            // SAFETY: checked non-null; the caller's contract.
            unsafe { fill(permit, granted, state) };
            abi::SUCCESS
        }
        Err(e) => e.into(),
    }
}

/// Releases a permit; its handle is invalid from now on. Waits for its callback in flight.
#[no_mangle]
pub extern "C" fn tcmReleasePermit(permit: PermitHandle) -> TcmResult {
    let Some(h) = id(permit) else { return abi::ERROR_INVALID_ARGUMENT };
    let r = shared().with(|r| r.release(h));
    if r.is_ok() {
        shared().settle(&[h]);
    }
    code(r)
}

fn set_state(permit: PermitHandle, state: abi::PermitState) -> TcmResult {
    let Some(h) = id(permit) else { return abi::ERROR_INVALID_ARGUMENT };
    code(shared().with(|r| r.set_state(h, state)))
}

/// The permit's threads are idle: its CPUs go to the other permits until it is activated.
#[no_mangle]
pub extern "C" fn tcmIdlePermit(permit_handle: PermitHandle) -> TcmResult {
    set_state(permit_handle, abi::STATE_IDLE)
}

/// The permit needs no threads until it is activated or requested again.
#[no_mangle]
pub extern "C" fn tcmDeactivatePermit(permit_handle: PermitHandle) -> TcmResult {
    set_state(permit_handle, abi::STATE_INACTIVE)
}

/// The permit wants its threads again.
#[no_mangle]
pub extern "C" fn tcmActivatePermit(permit_handle: PermitHandle) -> TcmResult {
    set_state(permit_handle, abi::STATE_ACTIVE)
}

/// The calling thread works for the permit.
#[no_mangle]
pub extern "C" fn tcmRegisterThread(permit_handle: PermitHandle) -> TcmResult {
    let Some(h) = id(permit_handle) else { return abi::ERROR_INVALID_ARGUMENT };
    let known = shared().with(|r| r.get(h).map(|_| ()));
    if known.is_ok() {
        REGISTERED.with(|c| c.set(h));
    }
    code(known)
}

/// The calling thread no longer works for the permit it registered with.
#[no_mangle]
pub extern "C" fn tcmUnregisterThread() -> TcmResult {
    match REGISTERED.with(|c| c.replace(0)) {
        0 => abi::ERROR_INVALID_ARGUMENT,
        _ => abi::SUCCESS,
    }
}

/// Writes what this library is, NUL-terminated and cut to `buffer_size` bytes.
///
/// # Safety
/// `buffer` is NULL or valid for writing `buffer_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn tcmGetVersionInfo(buffer: *mut c_char, buffer_size: u32) -> TcmResult {
    if buffer.is_null() || buffer_size == 0 {
        return abi::ERROR_INVALID_ARGUMENT;
    }
    let c = link::client();
    let managed = match c.id() {
        Some(id) => format!("cpumgr program {id}"),
        None => format!("no cpumgr manager ({} CPUs)", c.max()),
    };
    let text = format!("TCM: VERSION            {VERSION} (cpumgr)\nTCM: MANAGED BY         {managed}\n");
    let n = text.len().min(buffer_size as usize - 1);
    // SAFETY: `buffer` holds `buffer_size` > n bytes: the caller's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buffer.cast::<u8>(), n);
        *buffer.add(n) = 0;
    }
    abi::SUCCESS
}
