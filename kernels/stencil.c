/*
 * stencil: a barrier-heavy Jacobi 2-D stencil (the SP/BT-like case). The sweeps are spread over
 * -regions parallel regions; inside a region every sweep is an `omp for` whose implicit barrier
 * makes the whole team wait for its slowest thread, so a team squeezed onto fewer CPUs than it
 * has threads pays a scheduler time slice per sweep. Scales with the team size.
 * Each point depends only on the previous sweep, so the grid, and the checksum (its sum taken in
 * row order after the timed part), do not depend on the team size.
 * -rows makes the grid taller than it is wide: rows grown with the team keep each thread's share
 * of a sweep, the work between two barriers, the same on any machine (weak scaling).
 */
#include "common.h"

#include <omp.h>
#include <stdio.h>

static const char *const NAME = "stencil";

int main(int argc, char **argv) {
    long n = 256, rows = 0, iters = 4000, regions = 40;
    const kopt opts[] = {
        {"n", &n, 3, "grid side, points (two grids of rows*n doubles)"},
        {"rows", &rows, 0, "grid rows (default: n, a square grid)"},
        {"iters", &iters, 1, "Jacobi sweeps in total"},
        {"regions", &regions, 1, "parallel regions the sweeps are spread over"},
    };
    kargs(NAME, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (regions > iters)
        regions = iters;
    if (rows == 0)
        rows = n;
    else if (rows < 3)
        kfail(NAME, "-rows must be at least 3 (0: as many as -n)");

    double *grid[2];
    for (int g = 0; g < 2; g++) {
        grid[g] = kalloc((size_t)rows * (size_t)n * sizeof(double), "the stencil grid");
        /* Hot top edge, cold elsewhere; interior seeded so early sweeps are not trivial. */
        for (long j = 0; j < n; j++)
            grid[g][j] = 1.0;
        for (long i = 1; i < rows - 1; i++)
            for (long j = 1; j < n - 1; j++)
                grid[g][i * n + j] = krand01(1, (uint64_t)(i * n + j));
    }

    double t0 = know();
    for (long r = 0; r < regions; r++) {
        long first = iters * r / regions, last = iters * (r + 1) / regions;
#pragma omp parallel
        {
            KREGION(NAME, "sweeps");
            for (long k = first; k < last; k++) {
                const double *src = grid[k & 1];
                double *dst = grid[(k + 1) & 1];
#pragma omp for schedule(static)
                for (long i = 1; i < rows - 1; i++)
                    for (long j = 1; j < n - 1; j++)
                        dst[i * n + j] = 0.25 * (src[(i - 1) * n + j] + src[(i + 1) * n + j] +
                                                 src[i * n + j - 1] + src[i * n + j + 1]);
            }
        }
    }
    double seconds = know() - t0;

    const double *result = grid[iters & 1];
    double sum = ksum_ordered(result, (size_t)rows * (size_t)n);
    char extra[80];
    snprintf(extra, sizeof extra, "n=%ld rows=%ld iters=%ld", n, rows, iters);
    kreport(NAME, seconds, sum, extra);
    return 0;
}
