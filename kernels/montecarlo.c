/*
 * montecarlo: an embarrassingly parallel estimate of pi. Sample i is a point whose coordinates
 * come from the counter-based krand (see kpi_hit), so no state is shared
 * and any thread may draw any sample. The samples are spread over -regions parallel regions;
 * the hit count is an integer reduction, exact in any order, and is the checksum.
 */
#include "common.h"

#include <omp.h>
#include <stdio.h>

static const char *const NAME = "montecarlo";

int main(int argc, char **argv) {
    long samples = 50000000, regions = 20;
    const kopt opts[] = {
        {"n", &samples, 1, "samples in total"},
        {"regions", &regions, 1, "parallel regions the samples are spread over"},
    };
    kargs(NAME, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (regions > samples)
        regions = samples;

    unsigned long long hits = 0;
    double t0 = know();
    for (long r = 0; r < regions; r++) {
        long first = samples * r / regions, last = samples * (r + 1) / regions;
#pragma omp parallel reduction(+ : hits)
        {
            KREGION(NAME, "samples");
#pragma omp for schedule(static)
            for (long i = first; i < last; i++)
                hits += kpi_hit(7, (uint64_t)i);
        }
    }
    double seconds = know() - t0;

    char extra[64];
    snprintf(extra, sizeof extra, "n=%ld pi=%.6f", samples, 4.0 * (double)hits / (double)samples);
    kreport(NAME, seconds, (double)hits, extra);
    return 0;
}
