/*
 * rigid: the MPI-like case for self co-scheduling: exactly -threads busy-waiting threads (the one
 * kernel with an explicit num_threads clause, and dynamic teams off), synchronising every step
 * through a hand-written spin barrier that never sleeps or yields, like an MPI library polling
 * for messages. It fails (exit 1) if the runtime gives it any other team size.
 * Each step is a 1-D Jacobi update of -n points cut into BLOCKS fixed blocks dealt round-robin to
 * the threads; every point is computed the same way whoever owns it, so the checksum (the sum
 * of the array) does not depend on -threads.
 */
#include "common.h"

#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>

static const char *const NAME = "rigid";
enum { BLOCKS = 64 };

/* A central sense-reversing barrier: the last thread to arrive resets the count and opens the
 * next generation; the others spin on the generation. */
typedef struct {
    _Alignas(64) atomic_long arrived;
    _Alignas(64) atomic_long generation;
    long size;
} spin_barrier;

static void spin_wait(spin_barrier *b) {
    long gen = atomic_load_explicit(&b->generation, memory_order_acquire);
    if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) == b->size - 1) {
        atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
        atomic_store_explicit(&b->generation, gen + 1, memory_order_release);
    } else {
        while (atomic_load_explicit(&b->generation, memory_order_acquire) == gen)
            kpause();
    }
}

int main(int argc, char **argv) {
    long threads = 2, n = 1 << 18, iters = 1000;
    const kopt opts[] = {
        {"threads", &threads, 1, "threads, fixed for the whole run"},
        {"n", &n, BLOCKS, "points"},
        {"iters", &iters, 1, "steps, each ending in a spin barrier"},
    };
    kargs(NAME, argc, argv, opts, sizeof opts / sizeof opts[0]);

    double *v[2];
    for (int g = 0; g < 2; g++) {
        v[g] = kalloc((size_t)n * sizeof(double), "the array");
        for (long i = 0; i < n; i++)
            v[g][i] = krand01(13, (uint64_t)i);
    }
    spin_barrier barrier = {.size = threads};
    atomic_init(&barrier.arrived, 0);
    atomic_init(&barrier.generation, 0);
    long team_seen = 0;

    omp_set_dynamic(0);
    double t0 = know();
#pragma omp parallel num_threads((int)threads)
    {
        KREGION(NAME, "rigid");
        long t = omp_get_thread_num();
        if (t == 0)
            team_seen = omp_get_num_threads();
        /* A short team would deadlock in the spin barrier: check before the first wait. */
        if (omp_get_num_threads() == threads)
            for (long k = 0; k < iters; k++) {
                const double *src = v[k & 1];
                double *dst = v[(k + 1) & 1];
                for (long b = t; b < BLOCKS; b += threads) {
                    long first = n * b / BLOCKS, last = n * (b + 1) / BLOCKS;
                    for (long i = first; i < last; i++) {
                        double left = src[i > 0 ? i - 1 : n - 1], right = src[i + 1 < n ? i + 1 : 0];
                        dst[i] = 0.5 * src[i] + 0.25 * (left + right);
                    }
                }
                spin_wait(&barrier);
            }
    }
    double seconds = know() - t0;
    if (team_seen != threads)
        kfail(NAME, "asked for %ld threads, the runtime gave %ld", threads, team_seen);

    char extra[64];
    snprintf(extra, sizeof extra, "n=%ld iters=%ld", n, iters);
    kreport(NAME, seconds, ksum_ordered(v[iters & 1], (size_t)n), extra);
    return 0;
}
