/*
 * epd: the EPD "diamond" of the NANOS paper: an outer loop around an EP-like (Monte-Carlo) phase
 * whose thread request follows 2, 4, ..., MAX, MAX, ..., 4, 2 (steps of 2 below MAX; MAX = 1
 * gives 1, 1). Each phase is one parallel region with no num_threads clause; before it the
 * program calls omp_set_num_threads(request), so what an adapter sees at each fork is the
 * nthreads ICV (omp_get_max_threads(), logged as request=), and the team it should create is
 * min(request, allocation). -max defaults to omp_get_max_threads() at start (OMP_NUM_THREADS
 * or the CPU count); OMP_THREAD_LIMIT caps every team without changing the requests.
 * Every phase draws -n samples of its own stream; the checksum is the total hit count, which
 * depends on -max (it sets the phase count) and -cycles but not on the team sizes.
 */
#include "common.h"

#include <omp.h>
#include <stdio.h>

static const char *const NAME = "epd";

int main(int argc, char **argv) {
    long samples = 10000000, max = omp_get_max_threads(), cycles = 2;
    const kopt opts[] = {
        {"n", &samples, 1, "samples per phase"},
        {"max", &max, 1, "largest request, the diamond's peak"},
        {"cycles", &cycles, 1, "diamonds run one after another"},
    };
    kargs(NAME, argc, argv, opts, sizeof opts / sizeof opts[0]);

    /* The request sequence: 2, 4, ... below max, then max twice, then back down. */
    long up = (max - 1) / 2; /* how many of 2, 4, ... lie strictly below max */
    long phases = 2 * up + 2;
    long *request = kalloc((size_t)phases * sizeof(long), "the phase requests");
    for (long k = 0; k < up; k++)
        request[k] = request[phases - 1 - k] = 2 * (k + 1);
    request[up] = request[up + 1] = max;

    unsigned long long hits = 0;
    long phase_index = 0;
    double t0 = know();
    for (long c = 0; c < cycles; c++)
        for (long k = 0; k < phases; k++, phase_index++) {
            omp_set_num_threads((int)request[k]);
            uint64_t stream = 100 + (uint64_t)phase_index;
#pragma omp parallel reduction(+ : hits)
            {
                KREGION(NAME, "phase");
#pragma omp for schedule(static)
                for (long i = 0; i < samples; i++)
                    hits += kpi_hit(stream, (uint64_t)i);
            }
        }
    double seconds = know() - t0;

    char extra[64];
    snprintf(extra, sizeof extra, "max=%ld phases=%ld n=%ld", max, phase_index, samples);
    kreport(NAME, seconds, (double)hits, extra);
    return 0;
}
