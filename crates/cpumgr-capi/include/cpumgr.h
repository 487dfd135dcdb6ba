/* cpumgr.h: the C ABI of libcpumgr.so, the program side of the cpumgr CPU manager.
 *
 * A program calls cpumgr_init once, then before each parallel region asks how many threads it
 * holds (cpumgr_team, or the whole allocation with cpumgr_allocation), or lets
 * cpumgr_parallel_for size the team itself. Reads are atomic loads on a shared-memory slot: no
 * system call. Without a manager every call still works: the library says so once on stderr and
 * keeps the program's own thread count (or sizes regions from the system load when
 * CPUMGR_MODE=llpc).
 *
 * Every function may be called before cpumgr_init: the first call initialises with defaults.
 *
 * A child forked after the library was initialised does not inherit the registration: there the
 * library runs unmanaged (the program's own thread count, no allocation, nothing written to the
 * parent's slot), cpumgr_parallel_for runs serially (fork copies none of the pool's threads), and
 * cpumgr_finalize leaves the parent registered. A child that wants to be managed calls
 * cpumgr_finalize, then cpumgr_init: it registers as a program of its own, with a pool of its own.
 * Link with `pkg-config --cflags --libs cpumgr`.
 */
#ifndef CPUMGR_H
#define CPUMGR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How the library decides team sizes (cpumgr_init's and cpumgr_mode's result). */
enum cpumgr_mode {
    CPUMGR_MANAGED = 0,   /* a manager allocates the CPUs */
    CPUMGR_UNMANAGED = 1, /* no manager: the program's own thread count */
    CPUMGR_LLPC = 2       /* no manager: each region sized from the system load */
};

/* Connects to the manager (CPUMGR_SOCKET, or the default socket), or finds the registration
 * `cpumgr run` made for this program. name: shown by `cpumgr status` (NULL: the executable's
 * name); min, max: fewest CPUs the program can run on and most threads it uses (0: defaults, max
 * being the CPUs it may run on). Returns the mode. A second call returns the first one's mode. */
int cpumgr_init(const char *name, unsigned min, unsigned max);

/* Unregisters (when this library registered the program) and stops the pool's threads. Not from
 * inside a parallel region. A later call initialises again. In a forked child it only drops the
 * child's copy: the parent stays registered. */
void cpumgr_finalize(void);

/* The mode in use. */
int cpumgr_mode(void);

/* Sets the request: CPUs wanted at present, fewest, most. */
void cpumgr_set_request(unsigned wanted, unsigned min, unsigned max);

/* The allocation, read consistently: CPU count in *count, the CPU set as a bitmask of `words`
 * 64-bit words in cpus (bit c of word c/64 is CPU c), the publication's epoch in *epoch. Any
 * pointer may be NULL. Returns 1 when a manager's allocation was read; 0 otherwise (unmanaged,
 * nothing published yet, or the manager gone: its lease in the slot, renewed every quantum, has
 * run out, as for cpumgr_team), and then *count is the program's own team, the set and epoch 0. */
int cpumgr_allocation(unsigned *count, uint64_t *cpus, size_t words, uint64_t *epoch);

/* The team for the next parallel region, at most cap (0: the program's own maximum); cap itself
 * when unmanaged or once the manager's lease has run out. */
unsigned cpumgr_team(unsigned cap);

/* A parallel region with `team` threads starts: the manager treats the program as rigid with
 * that many threads until cpumgr_end_region. */
void cpumgr_begin_region(unsigned team);

/* The region ended: the program is serial (a request of one CPU once that lasts a quantum). */
void cpumgr_end_region(void);

/* Gives every CPU back while the program has nothing to run; cpumgr_set_request or the next
 * region takes them back. */
void cpumgr_idle(void);

/* Safe-point check: 0 when the program, running `team` threads, may go on; otherwise the number
 * of threads the manager asks it to shrink to. */
unsigned cpumgr_should_yield(unsigned team);

/* Reports that region `key` (any id, e.g. its function's address) took `seconds` on `threads`
 * threads. Timings of the same region on different team sizes give a speedup estimate, which
 * goes to the manager (for the pdpa policy) and is returned; 0 while none is known. */
double cpumgr_report_region(uintptr_t key, unsigned threads, double seconds);

/* Reports a speedup measured by the program itself on `cpus` CPUs. */
void cpumgr_report_speedup(unsigned cpus, double speedup);

/* The work of a parallel_for: iterations [begin, end), with the caller's context. */
typedef void (*cpumgr_body)(size_t begin, size_t end, void *ctx);

/* Runs body over [0, n) in chunks of `chunk` iterations on the library's malleable pool, with a
 * team of min(allocation, chunks) threads (the caller is one of them), and returns the team size.
 * The region is reported to the manager and timed for the speedup estimate. Every call of body
 * has begin < end <= n (the last chunk is cut at n, for any n and chunk; chunk 0 counts as 1). A
 * nested call, a call in a forked child, and a call made while another thread's region runs (the
 * pool runs one region at a time) run serially on the calling thread: a call never waits for
 * another region, so a body may wait for another thread's call without deadlock. */
unsigned cpumgr_parallel_for(size_t n, size_t chunk, cpumgr_body body, void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* CPUMGR_H */
