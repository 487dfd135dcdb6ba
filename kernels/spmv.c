/*
 * spmv: a CG-like solver, reduction-heavy with many short parallel regions. The matrix is the
 * 5-point Laplacian of an m*m grid (plus a small diagonal shift) in CSR form; every iteration
 * opens three parallel regions (q = A p with p.q, the x/r update with r.r, the new direction).
 * Dot products are reduced over fixed blocks of BLOCK rows: threads fill one partial per block
 * and the master adds the partials in block order, so every value, and the checksum (the sum of
 * x), is the same for any team size. When the residual has fallen by 1e-24 the solve restarts
 * from x = 0, so any -iters is valid.
 */
#include "common.h"

#include <omp.h>
#include <stdio.h>

static const char *const NAME = "spmv";
enum { BLOCK = 1024 };

typedef struct {
    long rows;
    long *start; /* rows + 1 offsets into col/val */
    int *col;
    double *val;
} csr;

static csr laplacian(long m) {
    csr a = {.rows = m * m};
    a.start = kalloc((size_t)(a.rows + 1) * sizeof(long), "CSR row offsets");
    a.col = kalloc((size_t)a.rows * 5 * sizeof(int), "CSR columns");
    a.val = kalloc((size_t)a.rows * 5 * sizeof(double), "CSR values");
    long nz = 0;
    for (long i = 0; i < m; i++)
        for (long j = 0; j < m; j++) {
            long row = i * m + j;
            a.start[row] = nz;
            const long di[5] = {-1, 0, 0, 0, 1}, dj[5] = {0, -1, 0, 1, 0};
            for (int k = 0; k < 5; k++) {
                long ii = i + di[k], jj = j + dj[k];
                if (ii < 0 || ii >= m || jj < 0 || jj >= m)
                    continue;
                a.col[nz] = (int)(ii * m + jj);
                a.val[nz] = (k == 2) ? 4.01 : -1.0;
                nz++;
            }
        }
    a.start[a.rows] = nz;
    return a;
}

int main(int argc, char **argv) {
    long m = 256, iters = 1000;
    const kopt opts[] = {
        {"m", &m, 2, "grid side: the matrix has m*m rows, 5 entries each"},
        {"iters", &iters, 1, "CG iterations (three parallel regions each)"},
    };
    kargs(NAME, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (m > 30000)
        kfail(NAME, "-m %ld is too large for 32-bit column indices", m);

    csr a = laplacian(m);
    long n = a.rows, nblocks = (n + BLOCK - 1) / BLOCK;
    double *b = kalloc((size_t)n * sizeof(double), "right-hand side");
    double *x = kalloc((size_t)n * sizeof(double), "solution");
    double *r = kalloc((size_t)n * sizeof(double), "residual");
    double *p = kalloc((size_t)n * sizeof(double), "direction");
    double *q = kalloc((size_t)n * sizeof(double), "A times direction");
    double *partial = kalloc((size_t)nblocks * sizeof(double), "block partials");
    for (long i = 0; i < n; i++)
        b[i] = krand01(3, (uint64_t)i) - 0.5;

    double rr0 = 0.0;
    for (long i = 0; i < n; i++)
        rr0 += b[i] * b[i];
    double rr = 0.0;
    long solves = 0;

    double t0 = know();
    for (long it = 0; it < iters; it++) {
        if (it == 0 || rr < 1e-24 * rr0) {
            for (long i = 0; i < n; i++) {
                x[i] = 0.0;
                r[i] = p[i] = b[i];
            }
            rr = rr0;
            solves++;
        }
#pragma omp parallel
        {
            KREGION(NAME, "spmv");
#pragma omp for schedule(static)
            for (long blk = 0; blk < nblocks; blk++) {
                long last = (blk + 1) * BLOCK < n ? (blk + 1) * BLOCK : n;
                double s = 0.0;
                for (long i = blk * BLOCK; i < last; i++) {
                    double v = 0.0;
                    for (long k = a.start[i]; k < a.start[i + 1]; k++)
                        v += a.val[k] * p[a.col[k]];
                    q[i] = v;
                    s += p[i] * v;
                }
                partial[blk] = s;
            }
        }
        double alpha = rr / ksum_ordered(partial, (size_t)nblocks);
#pragma omp parallel
        {
            KREGION(NAME, "update");
#pragma omp for schedule(static)
            for (long blk = 0; blk < nblocks; blk++) {
                long last = (blk + 1) * BLOCK < n ? (blk + 1) * BLOCK : n;
                double s = 0.0;
                for (long i = blk * BLOCK; i < last; i++) {
                    x[i] += alpha * p[i];
                    r[i] -= alpha * q[i];
                    s += r[i] * r[i];
                }
                partial[blk] = s;
            }
        }
        double rr_next = ksum_ordered(partial, (size_t)nblocks);
        double beta = rr_next / rr;
        rr = rr_next;
#pragma omp parallel
        {
            KREGION(NAME, "direction");
#pragma omp for schedule(static)
            for (long i = 0; i < n; i++)
                p[i] = r[i] + beta * p[i];
        }
    }
    double seconds = know() - t0;

    char extra[96];
    snprintf(extra, sizeof extra, "rows=%ld iters=%ld solves=%ld residual=%.3e", n, iters, solves, rr);
    kreport(NAME, seconds, ksum_ordered(x, (size_t)n), extra);
    return 0;
}
