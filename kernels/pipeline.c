/*
 * pipeline: an LU-like wavefront with point-to-point spin flags. Each iteration is NAS LU's pair
 * of symmetric Gauss-Seidel sweeps over an n*n grid: a lower sweep (rows and columns ascending)
 * and an upper sweep (both descending). Each thread owns a block of rows; the columns are cut
 * into chunks of -chunk. In the lower sweep a thread may start chunk c only after the thread
 * above has finished chunk c; in the upper sweep, only after the thread below has finished it.
 * The hand-over is NAS LU's sync_left/sync_right (OpenMP NPB): a one-deep mailbox, so a producer
 * may not announce chunk c+1 before its consumer has taken chunk c. Dependencies therefore run
 * both ways within a sweep: no thread gets more than one chunk ahead of its neighbour, and a
 * descheduled thread stalls both neighbours of the pipeline. Every wait spins on a flag. The spinning is in
 * user code, so OMP_WAIT_POLICY=passive does not help, and when the thread it waits for is
 * descheduled it burns its whole time slice. Iterations are separated by a barrier and spread
 * over -regions regions. A Gauss-Seidel sweep gives the same values for any partition of the
 * rows, so the checksum (the grid's sum in row order) does not depend on the team size.
 */
#include "common.h"

#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const NAME = "pipeline";

/* One pair of counters per thread, each alone on its cache line: the ticket of the last chunk it
 * finished (read by its consumer), and the ticket of the last chunk it took from its producer
 * (read by that producer before it announces the next one). Tickets grow through the region, so
 * a wait is a comparison and nothing is ever reset. */
typedef struct {
    _Alignas(64) atomic_long done;
    _Alignas(64) atomic_long taken;
} flag;

/* Spins until *counter reaches ticket. */
static void wait_for(atomic_long *counter, long ticket) {
    while (atomic_load_explicit(counter, memory_order_acquire) < ticket)
        kpause();
}

/* Takes chunk `ticket` from the producer's flag `from` into our own flag `self` (sync_left). */
static void take(flag *from, flag *self, long ticket) {
    wait_for(&from->done, ticket);
    atomic_store_explicit(&self->taken, ticket, memory_order_release);
}

/* Announces chunk `ticket` on `self` once the consumer has taken the previous one (sync_right);
 * `first` is a sweep's first chunk, whose predecessor belongs to another sweep. */
static void give(flag *self, flag *consumer, long ticket, int first) {
    if (consumer != NULL && !first)
        wait_for(&consumer->taken, ticket - 1);
    atomic_store_explicit(&self->done, ticket, memory_order_release);
}

int main(int argc, char **argv) {
    long n = 512, iters = 200, regions = 10, chunk = 32;
    const kopt opts[] = {
        {"n", &n, 3, "grid side, points"},
        {"iters", &iters, 1, "iterations in total (a lower and an upper sweep each)"},
        {"regions", &regions, 1, "parallel regions the sweeps are spread over"},
        {"chunk", &chunk, 1, "columns per pipeline step"},
    };
    kargs(NAME, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (regions > iters)
        regions = iters;

    double *a = kalloc((size_t)n * (size_t)n * sizeof(double), "the grid");
    for (long j = 0; j < n; j++)
        a[j] = 1.0;
    for (long i = 1; i < n - 1; i++)
        for (long j = 1; j < n - 1; j++)
            a[i * n + j] = krand01(9, (uint64_t)(i * n + j));
    long inner = n - 2, nchunks = (inner + chunk - 1) / chunk;
    flag *flags = NULL;

    double t0 = know();
    for (long r = 0; r < regions; r++) {
        long sweeps = iters * (r + 1) / regions - iters * r / regions;
#pragma omp parallel
        {
            KREGION(NAME, "wavefront");
            long team = omp_get_num_threads(), t = omp_get_thread_num();
#pragma omp single
            {
                flags = aligned_alloc(64, (size_t)team * sizeof(flag));
                if (flags == NULL)
                    kfail(NAME, "cannot allocate %ld flags", team);
                for (long k = 0; k < team; k++) {
                    atomic_init(&flags[k].done, 0);
                    atomic_init(&flags[k].taken, 0);
                }
            }
            long lo = 1 + inner * t / team, hi = 1 + inner * (t + 1) / team;
            flag *self = &flags[t], *above = t > 0 ? &flags[t - 1] : NULL, *below = t < team - 1 ? &flags[t + 1] : NULL;
            for (long s = 0; s < sweeps; s++) {
                /* Lower sweep: wait for the thread above, rows and columns ascending. */
                for (long c = 0; c < nchunks; c++) {
                    long ticket = 2 * s * nchunks + c + 1;
                    if (above != NULL)
                        take(above, self, ticket);
                    long j0 = 1 + c * chunk, j1 = j0 + chunk < n - 1 ? j0 + chunk : n - 1;
                    for (long i = lo; i < hi; i++)
                        for (long j = j0; j < j1; j++) {
                            long p = i * n + j;
                            a[p] = 0.25 * (a[p - n] + a[p - 1] + a[p + 1] + a[p + n]);
                        }
                    give(self, below, ticket, c == 0);
                }
                /* Upper sweep: wait for the thread below, rows and columns descending. */
                for (long c = nchunks - 1; c >= 0; c--) {
                    long ticket = (2 * s + 1) * nchunks + (nchunks - c);
                    if (below != NULL)
                        take(below, self, ticket);
                    long j0 = 1 + c * chunk, j1 = j0 + chunk < n - 1 ? j0 + chunk : n - 1;
                    for (long i = hi - 1; i >= lo; i--)
                        for (long j = j1 - 1; j >= j0; j--) {
                            long p = i * n + j;
                            a[p] = 0.25 * (a[p - n] + a[p - 1] + a[p + 1] + a[p + n]);
                        }
                    give(self, above, ticket, c == nchunks - 1);
                }
#pragma omp barrier
            }
#pragma omp barrier
#pragma omp single
            {
                free(flags);
                flags = NULL;
            }
        }
    }
    double seconds = know() - t0;

    char extra[64];
    snprintf(extra, sizeof extra, "n=%ld iters=%ld chunk=%ld", n, iters, chunk);
    kreport(NAME, seconds, ksum_ordered(a, (size_t)n * (size_t)n), extra);
    return 0;
}
