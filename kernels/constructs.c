/*
 * constructs: the OpenMP constructs a real code's long region holds, each feeding a checksum that
 * depends neither on the team size nor on how the team is scheduled, so a run whose team is
 * folded onto fewer CPUs than threads (the OpenMP adapter under cpumgr) must print the same
 * checksum as a plain run. One region around a time loop of -steps steps, with in every step:
 * a static `omp for` with a reduction, `single`, a dynamic loop with `critical`, an `ordered`
 * loop (order-dependent), explicit tasks with `taskwait`, `sections` with a reduction, and
 * `omp barrier`. After it: a nested region (outer `num_threads(3)`, inner `num_threads(2)`), a
 * cancelled loop (with OMP_CANCELLATION=true; without, it runs to its end: the found index is the
 * same), and a hand-written spin barrier for omp_get_num_threads() threads, -spins times.
 * The result line carries each part's value and their combination as the checksum.
 */
#include "common.h"

#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>

static const char *const NAME = "constructs";

/* A hand-written sense-reversing barrier for the team, spinning: code that depends on the team
 * size the runtime reports. */
static atomic_long arrived;
static atomic_long sense;

static void spin_barrier(long team, long *local_sense) {
    *local_sense = !*local_sense;
    if (atomic_fetch_add(&arrived, 1) + 1 == team) {
        atomic_store(&arrived, 0);
        atomic_store(&sense, *local_sense);
    } else {
        while (atomic_load(&sense) != *local_sense)
            kpause();
    }
}

int main(int argc, char **argv) {
    long steps = 200, n = 20000, spins = 50;
    const kopt opts[] = {
        {"steps", &steps, 1, "time steps in the long region"},
        {"n", &n, 64, "elements of the array each step sweeps"},
        {"spins", &spins, 0, "rounds of the hand-written spin barrier"},
    };
    kargs(NAME, argc, argv, opts, sizeof opts / sizeof opts[0]);
    long *a = kalloc((size_t)n * sizeof(long), "the array");
    unsigned long long red = 0, single = 0, crit = 0, ord = 0, task = 0, sections = 0, nested = 0;
    long found = -1, spun = 0;

    double t0 = know();
#pragma omp parallel
    {
        KREGION(NAME, "steps");
        for (long s = 0; s < steps; s++) {
#pragma omp for schedule(static) reduction(+ : red)
            for (long i = 0; i < n; i++) {
                a[i] = (i * 7 + s) % 1000;
                red += (unsigned long long)a[i];
            }
#pragma omp single
            single += (unsigned long long)a[s % n];
#pragma omp for schedule(dynamic, 64)
            for (long i = 0; i < n; i++) {
                if (a[i] % 97 == 0) {
#pragma omp critical
                    crit += (unsigned long long)i;
                }
            }
#pragma omp for ordered schedule(static, 1)
            for (long i = 0; i < 64; i++) {
#pragma omp ordered
                ord = ord * 31 + (unsigned long long)(i + s);
            }
#pragma omp single
            {
                for (long t = 0; t < 16; t++) {
#pragma omp task firstprivate(t)
                    {
#pragma omp atomic
                        task += (unsigned long long)(t * s + 1);
                    }
                }
#pragma omp taskwait
            }
#pragma omp sections reduction(+ : sections)
            {
#pragma omp section
                sections += (unsigned long long)s;
#pragma omp section
                sections += 2 * (unsigned long long)s;
            }
#pragma omp barrier
        }
    }

    omp_set_max_active_levels(2);
#pragma omp parallel num_threads(3) reduction(+ : nested)
    {
#pragma omp parallel num_threads(2) reduction(+ : nested)
        nested += (unsigned long long)(omp_get_num_threads() * 10 + omp_get_level());
    }

#pragma omp parallel
    {
#pragma omp for
        for (long i = 0; i < n; i++) {
            if (i == n / 2 + 1) {
#pragma omp critical
                found = i;
#pragma omp cancel for
            }
#pragma omp cancellation point for
        }
    }

    long teamsize = 0;
#pragma omp parallel reduction(+ : spun)
    {
        long team = omp_get_num_threads(), local = 0;
#pragma omp atomic write
        teamsize = team;
        for (long r = 0; r < spins; r++) {
            spin_barrier(team, &local);
            spun += 1;
        }
    }
    double seconds = know() - t0;

    unsigned long long sum = red ^ (single << 1) ^ (crit << 2) ^ (ord << 3) ^ (task << 4) ^ (sections << 5) ^
                             (nested << 6) ^ ((unsigned long long)(found + 1) << 7);
    char extra[400];
    snprintf(extra, sizeof extra,
             "red=%llu single=%llu crit=%llu ord=%llu task=%llu sections=%llu nested=%llu found=%ld spun=%s",
             red, single, crit, ord, task, sections, nested, found, spun == teamsize * spins ? "all" : "wrong");
    kreport(NAME, seconds, (double)(sum % 1000000007ULL), extra);
    return 0;
}
