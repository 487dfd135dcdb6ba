/*
 * epcc: the overhead of OpenMP constructs, measured the way the EPCC syncbench does (Bull,
 * "Measuring synchronisation and scheduling overheads in OpenMP", EWOMP 1999): a test loop runs
 * -inner instances of a construct around a short delay, a reference loop runs the same delays with
 * no construct, and the overhead per construct is (test - reference) / inner. Each of -outer
 * measurements gives one overhead; the median is reported, in microseconds:
 *
 *   PARALLEL       #pragma omp parallel { delay }                     one region per instance
 *   PARALLEL FOR   #pragma omp parallel for over the team, delay each  one region per instance
 *   BARRIER        one region; in it, delay then #pragma omp barrier    no fork per instance
 *
 * This is how the OpenMP adapter's cost per region is measured: the same binary run plainly and
 * with libcpumgr_omp.so preloaded differs only by the adapter's work at each fork and join
 * (PARALLEL, PARALLEL FOR); BARRIER opens one region, so it shows the adapter costs nothing
 * inside a region. The result line carries parallel_us=, parallel_for_us=, barrier_us= and
 * reference_us= (the delay itself); the checksum counts the constructs and reference delays
 * run, which depends on the options only.
 */
#include "common.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const NAME = "epcc";

/* The delay's work; volatile so the compiler keeps every step. */
static void delay(long length) {
    volatile double a = 0.0;
    for (long i = 0; i < length; i++)
        a += (double)i;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, long n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Constructs (and reference delays) run: the checksum, whatever the team size. */
static long long constructs_run;

static double reference(long inner, long length) {
    double t0 = know();
    for (long j = 0; j < inner; j++)
        delay(length);
    constructs_run += inner;
    return know() - t0;
}

static double test_parallel(long inner, long length) {
    double t0 = know();
    for (long j = 0; j < inner; j++) {
#pragma omp parallel
        {
            if (j == 0)
                KREGION(NAME, "parallel");
            delay(length);
        }
    }
    constructs_run += inner;
    return know() - t0;
}

static double test_parallel_for(long inner, long length) {
    double t0 = know();
    for (long j = 0; j < inner; j++) {
        int team = omp_get_max_threads();
#pragma omp parallel for
        for (int i = 0; i < team; i++)
            delay(length);
    }
    constructs_run += inner;
    return know() - t0;
}

static double test_barrier(long inner, long length) {
    double t0 = know();
#pragma omp parallel
    {
        KREGION(NAME, "barrier");
        for (long j = 0; j < inner; j++) {
            delay(length);
#pragma omp barrier
        }
    }
    constructs_run += inner;
    return know() - t0;
}

int main(int argc, char **argv) {
    long outer = 20, inner = 2000, length = 100;
    const kopt opts[] = {
        {"outer", &outer, 1, "measurements per construct (the median is reported)"},
        {"inner", &inner, 1, "constructs per measurement"},
        {"delay", &length, 0, "delay loop length, iterations (EPCC's delaylength)"},
    };
    kargs(NAME, argc, argv, opts, sizeof opts / sizeof opts[0]);

    double *ref = kalloc((size_t)outer * sizeof(double), "the reference times");
    double *over[3];
    for (int k = 0; k < 3; k++)
        over[k] = kalloc((size_t)outer * sizeof(double), "the overheads");
    double (*const tests[3])(long, long) = {test_parallel, test_parallel_for, test_barrier};

    /* Warm-up: the first region creates the team's threads. */
    test_parallel(10, length);
    double t0 = know();
    /* Reference and tests interleaved, so a slow moment of the machine hits them alike. */
    for (long r = 0; r < outer; r++) {
        double t_ref = reference(inner, length);
        ref[r] = t_ref / (double)inner * 1e6;
        for (int k = 0; k < 3; k++)
            over[k][r] = (tests[k](inner, length) - t_ref) / (double)inner * 1e6;
    }
    double seconds = know() - t0;

    char extra[160];
    double m_par = median(over[0], outer), m_for = median(over[1], outer), m_bar = median(over[2], outer);
    snprintf(extra, sizeof extra,
             "parallel_us=%.4f parallel_for_us=%.4f barrier_us=%.4f reference_us=%.4f outer=%ld inner=%ld",
             m_par, m_for, m_bar, median(ref, outer), outer, inner);
    kreport(NAME, seconds, (double)constructs_run, extra);
    return 0;
}
