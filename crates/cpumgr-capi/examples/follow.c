/* follow: a C program that follows cpumgr's allocation through libcpumgr.so.
 *
 *   cc follow.c $(pkg-config --cflags --libs cpumgr) -o follow
 *   follow SECONDS MAX
 *
 * Registers as "follow" wanting at most MAX threads, then for SECONDS runs parallel regions with
 * cpumgr_parallel_for, each over ITERS iterations. After every region it checks that each
 * iteration ran exactly once and counts the distinct threads that ran it, and prints
 *
 *   region team=T alloc=A managed=M threads=K ok
 *
 * (A: the allocated count read just before the region; M: 1 when a manager's allocation was
 * read). A region that missed or repeated an iteration prints "bad" and ends the program with
 * status 1. The last line is "mode=managed", "mode=unmanaged" or "mode=llpc".
 */
#include <cpumgr.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ITERS 20000
#define MAX_THREADS 64

struct region {
    atomic_uint hits[ITERS];
    pthread_mutex_t lock;
    pthread_t seen[MAX_THREADS];
    unsigned nseen;
};

static void body(size_t begin, size_t end, void *ctx) {
    struct region *r = ctx;
    volatile double sink = 0;
    for (size_t i = begin; i < end; i++) {
        atomic_fetch_add_explicit(&r->hits[i], 1, memory_order_relaxed);
        for (int k = 0; k < 200; k++) sink += (double)k * (double)i;
    }
    pthread_t me = pthread_self();
    pthread_mutex_lock(&r->lock);
    unsigned k = 0;
    while (k < r->nseen && !pthread_equal(r->seen[k], me)) k++;
    if (k == r->nseen && r->nseen < MAX_THREADS) r->seen[r->nseen++] = me;
    pthread_mutex_unlock(&r->lock);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    unsigned max = argc > 2 ? (unsigned)atoi(argv[2]) : 0;
    int mode = cpumgr_init("follow", 1, max);
    static struct region r;
    pthread_mutex_init(&r.lock, NULL);
    double end = now() + seconds;
    while (now() < end) {
        for (size_t i = 0; i < ITERS; i++) atomic_store(&r.hits[i], 0);
        r.nseen = 0;
        unsigned alloc = 0;
        uint64_t cpus[4], epoch = 0;
        int managed = cpumgr_allocation(&alloc, cpus, 4, &epoch);
        unsigned team = cpumgr_parallel_for(ITERS, 100, body, &r);
        int ok = 1;
        for (size_t i = 0; i < ITERS; i++) ok &= atomic_load(&r.hits[i]) == 1;
        printf("region team=%u alloc=%u managed=%d threads=%u %s\n", team, alloc, managed, r.nseen,
               ok ? "ok" : "bad");
        fflush(stdout);
        if (!ok) return 1;
    }
    printf("mode=%s\n", mode == CPUMGR_MANAGED ? "managed" : mode == CPUMGR_LLPC ? "llpc" : "unmanaged");
    cpumgr_finalize();
    return 0;
}
