/* Shared support for the cpumgr test kernels; see common.h. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <errno.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Regions opened and the largest team seen; written by the master thread only. */
static long regions_opened;
static int largest_team;
/* -1: not read yet, 0: off, 1: on. */
static int log_enabled = -1;

static void usage(FILE *to, const char *kernel, const kopt *opts, size_t nopts) {
    fprintf(to, "usage: %s", kernel);
    for (size_t i = 0; i < nopts; i++)
        fprintf(to, " [-%s N]", opts[i].name);
    fprintf(to, "\n");
    for (size_t i = 0; i < nopts; i++)
        fprintf(to, "  -%-10s %s (default %ld, at least %ld)\n", opts[i].name, opts[i].help,
                *opts[i].value, opts[i].min);
    fprintf(to, "environment: CPUMGR_KERNEL_LOG=1 logs one stderr line per parallel region\n");
}

void kargs(const char *kernel, int argc, char **argv, const kopt *opts, size_t nopts) {
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout, kernel, opts, nopts);
            exit(0);
        }
        const kopt *match = NULL;
        if (arg[0] == '-')
            for (size_t k = 0; k < nopts; k++)
                if (strcmp(arg + 1, opts[k].name) == 0)
                    match = &opts[k];
        if (match == NULL) {
            fprintf(stderr, "%s: unknown option '%s'\n", kernel, arg);
            usage(stderr, kernel, opts, nopts);
            exit(2);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s: option -%s needs a value\n", kernel, match->name);
            exit(2);
        }
        const char *text = argv[++i];
        char *end = NULL;
        errno = 0;
        long v = strtol(text, &end, 10);
        if (errno != 0 || end == text || *end != '\0') {
            fprintf(stderr, "%s: option -%s: '%s' is not an integer\n", kernel, match->name, text);
            exit(2);
        }
        if (v < match->min) {
            fprintf(stderr, "%s: option -%s: %ld is below the minimum %ld\n", kernel, match->name, v,
                    match->min);
            exit(2);
        }
        *match->value = v;
    }
}

double know(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void kregion(const char *kernel, const char *region) {
    int team = omp_get_num_threads();
    if (team > largest_team)
        largest_team = team;
    long index = regions_opened++;
    if (log_enabled < 0) {
        const char *v = getenv("CPUMGR_KERNEL_LOG");
        log_enabled = v != NULL && strcmp(v, "1") == 0;
    }
    if (log_enabled)
        fprintf(stderr, "region kernel=%s name=%s index=%ld threads=%d request=%d\n", kernel, region,
                index, team, omp_get_max_threads());
}

void kreport(const char *kernel, double seconds, double checksum, const char *extra) {
    printf("kernel=%s threads=%d regions=%ld seconds=%.6f checksum=%.17g%s%s\n", kernel, largest_team,
           regions_opened, seconds, checksum, extra ? " " : "", extra ? extra : "");
    fflush(stdout);
}

void *kalloc(size_t n, const char *what) {
    void *p = calloc(1, n);
    if (p == NULL) {
        fprintf(stderr, "cannot allocate %zu bytes for %s\n", n, what);
        exit(1);
    }
    return p;
}

void kfail(const char *kernel, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", kernel);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

uint64_t krand(uint64_t stream, uint64_t index) {
    uint64_t z = index + (stream + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double krand01(uint64_t stream, uint64_t index) {
    return (double)(krand(stream, index) >> 11) * 0x1.0p-53;
}

double ksum_ordered(const double *v, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return s;
}
