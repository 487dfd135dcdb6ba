/* cpumgr's libtcm.so.1: the Thread Composability Manager API (as Intel's public headers and
 * oneTBB's src/tbb/tcm.h declare it), with permits granted from the program's cpumgr allocation.
 * Link with -ltcm (soname libtcm.so.1). Every call returns TCM_RESULT_SUCCESS, or
 * TCM_RESULT_ERROR_INVALID_ARGUMENT for a null pointer, an unknown client or permit (released,
 * never made, or another process's) and a bad request; TCM_RESULT_ERROR_UNKNOWN from tcmConnect
 * when TCM_ENABLE=0. */
#ifndef CPUMGR_TCM_H
#define CPUMGR_TCM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TCM_RESULT_SUCCESS = 0x0,
    TCM_RESULT_ERROR_INVALID_ARGUMENT = 0x78000004,
    TCM_RESULT_ERROR_UNKNOWN = 0x7ffffffe
} tcm_result_t;

/* Permit states (a tcm_permit_state_t). */
enum {
    TCM_PERMIT_STATE_VOID,
    TCM_PERMIT_STATE_INACTIVE,
    TCM_PERMIT_STATE_PENDING,
    TCM_PERMIT_STATE_IDLE,
    TCM_PERMIT_STATE_ACTIVE
};
typedef uint8_t tcm_permit_state_t;

typedef struct {
    uint32_t stale : 1;             /* never set: reads are consistent */
    uint32_t rigid_concurrency : 1; /* the maximum or nothing */
    uint32_t exclusive : 1;         /* accepted, not applied */
    uint32_t reserved : 29;
} tcm_permit_flags_t;

typedef struct {
    uint32_t new_concurrency : 1;
    uint32_t new_state : 1;
    uint32_t reserved : 30;
} tcm_callback_flags_t;

typedef struct hwloc_bitmap_s* tcm_cpu_mask_t; /* left untouched: the manager places the CPUs */
typedef uint64_t tcm_client_id_t;

typedef struct {
    uint32_t* concurrencies; /* the grant goes to the first, when size > 0 */
    tcm_cpu_mask_t* cpu_masks;
    uint32_t size;
    tcm_permit_state_t state;
    tcm_permit_flags_t flags;
} tcm_permit_t;

typedef struct tcm_permit_rep_t* tcm_permit_handle_t;

#define TCM_AUTOMATIC (-1) /* a minimum of 0; a maximum of the CPUs the process may use */

typedef struct {
    int32_t min_concurrency;
    int32_t max_concurrency;
    tcm_cpu_mask_t mask;
    int32_t numa_id;
    int32_t core_type_id;
    int32_t threads_per_core;
} tcm_cpu_constraints_t; /* accepted, not applied */

#define TCM_REQUEST_PRIORITY_NORMAL ((INT32_MAX / 4) * 2)

typedef struct {
    int32_t min_sw_threads;
    int32_t max_sw_threads;
    tcm_cpu_constraints_t* cpu_constraints;
    uint32_t constraints_size;
    int32_t priority;
    tcm_permit_flags_t flags;
    char reserved[4];
} tcm_permit_request_t;

typedef tcm_result_t (*tcm_callback_t)(tcm_permit_handle_t p, void* callback_arg, tcm_callback_flags_t flags);

tcm_result_t tcmConnect(tcm_callback_t callback, tcm_client_id_t* client_id);
tcm_result_t tcmDisconnect(tcm_client_id_t client_id);
tcm_result_t tcmRequestPermit(tcm_client_id_t client_id, tcm_permit_request_t request, void* callback_arg,
                              tcm_permit_handle_t* permit_handle, tcm_permit_t* permit);
tcm_result_t tcmGetPermitData(tcm_permit_handle_t permit_handle, tcm_permit_t* permit);
tcm_result_t tcmReleasePermit(tcm_permit_handle_t permit);
tcm_result_t tcmIdlePermit(tcm_permit_handle_t permit_handle);
tcm_result_t tcmDeactivatePermit(tcm_permit_handle_t permit_handle);
tcm_result_t tcmActivatePermit(tcm_permit_handle_t permit_handle);
tcm_result_t tcmRegisterThread(tcm_permit_handle_t permit_handle);
tcm_result_t tcmUnregisterThread(void);
tcm_result_t tcmGetVersionInfo(char* buffer, uint32_t buffer_size);

#ifdef __cplusplus
}
#endif

#endif
