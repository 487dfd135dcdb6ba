/*
 * halo: an MPI job shaped like a real one: each rank owns a block of a 1-D Jacobi grid and
 * exchanges one halo cell with each neighbour every step (MPI_Sendrecv), then all ranks agree on
 * the residual (MPI_Allreduce) every -check steps. MPI libraries busy-poll while they wait (Open
 * MPI and MPICH both do by default), so a rank descheduled by an oversubscribed machine stalls
 * every other rank at the next exchange: the rigid, busy-polling team of the papers' self
 * co-scheduling. The checksum (the grid's sum, reduced in rank order) does not depend on the
 * number of ranks. Built with mpicc, not by the kernels' Makefile (it needs an MPI library).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    long n = 1 << 16, steps = 4000, check = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        long v = atol(argv[i + 1]);
        if (!strcmp(argv[i], "-n") && v >= 8)
            n = v;
        else if (!strcmp(argv[i], "-steps") && v >= 1)
            steps = v;
        else if (!strcmp(argv[i], "-check") && v >= 1)
            check = v;
        else {
            fprintf(stderr, "halo: bad option %s %s (-n N>=8, -steps N>=1, -check N>=1)\n", argv[i], argv[i + 1]);
            return 2;
        }
    }
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long lo = n * rank / size, hi = n * (rank + 1) / size, m = hi - lo;
    double *u = calloc((size_t)m + 2, sizeof(double)), *v = calloc((size_t)m + 2, sizeof(double));
    for (long i = 0; i < m; i++)
        u[i + 1] = (double)((lo + i) % 17);
    int left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    double t0 = now(), residual = 0;
    for (long s = 0; s < steps; s++) {
        MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &u[m + 1], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[m], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        if (left == MPI_PROC_NULL)
            u[0] = u[1];
        if (right == MPI_PROC_NULL)
            u[m + 1] = u[m];
        double local = 0;
        for (long i = 1; i <= m; i++) {
            v[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
            local += (v[i] - u[i]) * (v[i] - u[i]);
        }
        double *t = u;
        u = v;
        v = t;
        if (s % check == 0)
            MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    double seconds = now() - t0, local = 0, sum = 0;
    for (long i = 1; i <= m; i++)
        local += u[i];
    /* Rank order: gather the partial sums and add them on rank 0. */
    double *parts = rank == 0 ? malloc(sizeof(double) * (size_t)size) : NULL;
    MPI_Gather(&local, 1, MPI_DOUBLE, parts, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; r++)
            sum += parts[r];
        printf("kernel=halo ranks=%d seconds=%.6f checksum=%.6f n=%ld steps=%ld residual=%.3e\n", size, seconds, sum,
               n, steps, residual);
    }
    MPI_Finalize();
    return 0;
}
