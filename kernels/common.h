/*
 * Shared support for the cpumgr test kernels: option parsing, the wall clock, the per-region
 * log and the result line. Every kernel prints exactly one result line on stdout:
 *
 *   kernel=NAME threads=T regions=R seconds=S checksum=C [extra key=value ...]
 *
 * where T is the largest team any of its parallel regions had and R the number of regions it
 * opened. With CPUMGR_KERNEL_LOG=1 each region also writes one stderr line:
 *
 *   region kernel=NAME name=REGION index=I threads=T request=Q
 *
 * where T is omp_get_num_threads() in that region and Q the nthreads ICV seen by its master
 * (what the program asked for: OMP_NUM_THREADS or its last omp_set_num_threads).
 *
 * Exit codes: 0 ok, 1 runtime failure, 2 bad arguments.
 */
#ifndef CPUMGR_KERNELS_COMMON_H
#define CPUMGR_KERNELS_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* One integer command-line option, `-name VALUE`. */
typedef struct {
    const char *name;  /* without the leading dash */
    long *value;       /* holds the default on entry, the parsed value on return */
    long min;          /* smallest accepted value */
    const char *help;  /* one line for -h */
} kopt;

/* Parses argv against opts; on a bad or unknown option prints why on stderr and exits 2. */
void kargs(const char *kernel, int argc, char **argv, const kopt *opts, size_t nopts);

/* Seconds on the monotonic clock. */
double know(void);

/* Records one parallel region: call it from exactly one thread of the team (use KREGION). */
void kregion(const char *kernel, const char *region);

/* Records the region from the team's thread 0 only. */
#define KREGION(kernel, region)                                                                    \
    do {                                                                                           \
        if (omp_get_thread_num() == 0)                                                             \
            kregion((kernel), (region));                                                           \
    } while (0)

/* Prints the result line, the checksum with 17 significant digits (exact for a double, and for
 * integer counts below 2^53); `extra` is appended verbatim (may be NULL). */
void kreport(const char *kernel, double seconds, double checksum, const char *extra);

/* Allocates n zeroed bytes or exits 1 with a message naming what the memory was for. */
void *kalloc(size_t n, const char *what);

/* Prints a runtime failure on stderr and exits 1. */
void kfail(const char *kernel, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* Counter-based random number: a pure function of (stream, index), so any thread can draw any
 * sample and results never depend on which thread drew it (splitmix64 finaliser). */
uint64_t krand(uint64_t stream, uint64_t index);

/* krand mapped to [0, 1) with 53 random bits. */
double krand01(uint64_t stream, uint64_t index);

/* Sums the n values in index order: the fixed-order step of a thread-count independent reduction
 * (threads fill per-block partials, one thread adds them up in block order). */
double ksum_ordered(const double *v, size_t n);

/* Whether sample i of a stream, a point in the unit square, falls inside the quarter circle:
 * the Monte-Carlo pi step shared by montecarlo and epd. */
static inline int kpi_hit(uint64_t stream, uint64_t i) {
    double x = krand01(stream, 2 * i), y = krand01(stream, 2 * i + 1);
    return x * x + y * y < 1.0;
}

/* Busy-wait hint for spin loops. */
static inline void kpause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
