//! The types, states and codes of the Thread Composability Manager API as its public headers
//! declare them (Intel's `tcm/types.h`, mirrored in oneTBB's `src/tbb/tcm.h`), laid out for the C
//! ABI: what oneTBB's `tcm_adaptor` passes and expects. `include/tcm.h` declares the same for C.

use std::ffi::c_void;

/// `tcm_result_t`.
pub type TcmResult = u32;
/// `TCM_RESULT_SUCCESS`.
pub const SUCCESS: TcmResult = 0;
/// `TCM_RESULT_ERROR_INVALID_ARGUMENT`: a null pointer, an unknown client or permit (released,
/// never made, or another process's), a bad request.
pub const ERROR_INVALID_ARGUMENT: TcmResult = 0x7800_0004;
/// `TCM_RESULT_ERROR_UNKNOWN`: the library is switched off (`TCM_ENABLE=0`).
pub const ERROR_UNKNOWN: TcmResult = 0x7fff_fffe;

/// `tcm_permit_state_t` (a `uint8_t`): `TCM_PERMIT_STATE_*`.
pub type PermitState = u8;
/// Released, or never requested.
pub const STATE_VOID: PermitState = 0;
/// Deactivated by its owner: no concurrency, no demand.
pub const STATE_INACTIVE: PermitState = 1;
/// Requested, waiting for CPUs: no concurrency yet.
pub const STATE_PENDING: PermitState = 2;
/// Its threads are idle: its CPUs may go to others until it is activated.
pub const STATE_IDLE: PermitState = 3;
/// Granted its concurrency.
pub const STATE_ACTIVE: PermitState = 4;

/// `tcm_automatic`: let the library choose.
pub const AUTOMATIC: i32 = -1;

/// `TCM_REQUEST_PRIORITY_NORMAL`.
pub const PRIORITY_NORMAL: i32 = (i32::MAX / 4) * 2;

/// `tcm_permit_flags_t`, a 32-bit bit-field: `stale` (bit 0), `rigid_concurrency` (bit 1),
/// `exclusive` (bit 2).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PermitFlags(pub u32);

impl PermitFlags {
    /// The permit changed while it was read (never set here: reads are consistent).
    pub const STALE: u32 = 1;
    /// All of `max_sw_threads` or nothing.
    pub const RIGID: u32 = 1 << 1;

    /// Whether the request asks for its whole maximum or nothing.
    pub fn rigid(self) -> bool {
        self.0 & Self::RIGID != 0
    }
}

/// `tcm_callback_flags_t`, a 32-bit bit-field: `new_concurrency` (bit 0), `new_state` (bit 1).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallbackFlags(pub u32);

impl CallbackFlags {
    /// The permit's concurrency changed.
    pub const NEW_CONCURRENCY: u32 = 1;
    /// The permit's state changed.
    pub const NEW_STATE: u32 = 1 << 1;
}

/// `tcm_permit_t`: what the caller gets back. `concurrencies` has room for `size` counts (one per
/// CPU constraint; this library grants one count, written to the first); `cpu_masks` (hwloc
/// bitmaps) is left as the caller set it: which CPUs run the program is the manager's decision.
#[repr(C)]
#[derive(Debug)]
pub struct Permit {
    pub concurrencies: *mut u32,
    pub cpu_masks: *mut *mut c_void,
    pub size: u32,
    pub state: PermitState,
    pub flags: PermitFlags,
}

/// `tcm_cpu_constraints_t`: accepted and not applied (the mask, NUMA node, core type and
/// threads per core are the manager's placement decision here).
#[repr(C)]
#[derive(Debug)]
pub struct CpuConstraints {
    pub min_concurrency: i32,
    pub max_concurrency: i32,
    pub mask: *mut c_void,
    pub numa_id: i32,
    pub core_type_id: i32,
    pub threads_per_core: i32,
}

/// `tcm_permit_request_t`, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PermitRequest {
    pub min_sw_threads: i32,
    pub max_sw_threads: i32,
    pub cpu_constraints: *mut CpuConstraints,
    pub constraints_size: u32,
    pub priority: i32,
    pub flags: PermitFlags,
    pub reserved: [u8; 4],
}

/// `tcm_permit_handle_t`: opaque to the caller; here an id, never dereferenced.
pub type PermitHandle = *mut c_void;

/// `tcm_client_id_t`.
pub type ClientId = u64;

/// `tcm_callback_t`: called when a permit's concurrency or state changes.
pub type Callback = Option<unsafe extern "C" fn(PermitHandle, *mut c_void, CallbackFlags) -> TcmResult>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The offsets the C headers give on x86-64 and aarch64 Linux (LP64).
    #[test]
    fn layouts_match_the_c_headers() {
        assert_eq!(size_of::<Permit>(), 32);
        assert_eq!(offset_of!(Permit, size), 16);
        assert_eq!(offset_of!(Permit, state), 20);
        assert_eq!(offset_of!(Permit, flags), 24);
        assert_eq!(size_of::<CpuConstraints>(), 32);
        assert_eq!(offset_of!(CpuConstraints, mask), 8);
        assert_eq!(offset_of!(CpuConstraints, numa_id), 16);
        assert_eq!(offset_of!(CpuConstraints, threads_per_core), 24);
        assert_eq!(size_of::<PermitRequest>(), 32);
        assert_eq!(offset_of!(PermitRequest, cpu_constraints), 8);
        assert_eq!(offset_of!(PermitRequest, constraints_size), 16);
        assert_eq!(offset_of!(PermitRequest, priority), 20);
        assert_eq!(offset_of!(PermitRequest, flags), 24);
    }
}
