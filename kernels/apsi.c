/*
 * apsi: a program with a small parallel fraction (like SPEC's apsi, whose speedup stays below 2).
 * Each step runs -serial passes of a first-order recurrence (every element needs the one before,
 * so it cannot be split) on the master, then one parallel region with -par passes of an
 * element-wise update. With the defaults about a quarter of the single-thread time is parallel,
 * so by Amdahl's law 2 threads gain little and more gain almost nothing. Every element is
 * computed the same way for any team size; the checksum is the sum of both arrays.
 */
#include "common.h"

#include <omp.h>
#include <stdio.h>

static const char *const NAME = "apsi";

int main(int argc, char **argv) {
    long n = 1 << 16, steps = 500, serial = 3, par = 4;
    const kopt opts[] = {
        {"n", &n, 2, "array length"},
        {"steps", &steps, 1, "steps (one serial phase and one parallel region each)"},
        {"serial", &serial, 0, "recurrence passes per serial phase"},
        {"par", &par, 0, "element-wise passes per parallel region"},
    };
    kargs(NAME, argc, argv, opts, sizeof opts / sizeof opts[0]);

    double *x = kalloc((size_t)n * sizeof(double), "the x array");
    double *y = kalloc((size_t)n * sizeof(double), "the y array");
    for (long i = 0; i < n; i++)
        x[i] = krand01(5, (uint64_t)i);

    double t0 = know();
    for (long s = 0; s < steps; s++) {
        for (long pass = 0; pass < serial; pass++) {
            double carry = y[n - 1] * 0.25;
            for (long i = 0; i < n; i++) {
                carry = 0.5 * carry + x[i];
                y[i] = carry;
            }
        }
#pragma omp parallel
        {
            KREGION(NAME, "update");
#pragma omp for schedule(static)
            for (long i = 0; i < n; i++) {
                double v = x[i];
                for (long pass = 0; pass < par; pass++)
                    v = 0.75 * v + 0.125 * y[i] - 0.0625 * v * v;
                x[i] = v;
            }
        }
    }
    double seconds = know() - t0;

    char extra[64];
    snprintf(extra, sizeof extra, "n=%ld steps=%ld", n, steps);
    kreport(NAME, seconds, ksum_ordered(x, (size_t)n) + ksum_ordered(y, (size_t)n), extra);
    return 0;
}
