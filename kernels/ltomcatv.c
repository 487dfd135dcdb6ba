/*
 * ltomcatv: the NANOS paper's ltomcatv, an outer loop whose every iteration is a serial I/O-like
 * phase followed by a parallel phase, so the program's request drops to 1 and rises back to all
 * its threads each time. The serial phase "reads" new boundary values: it prints -io lines of
 * text and parses them back into the mesh edges. The parallel phase is one region of -sweeps
 * coupled relaxation sweeps over the X and Y meshes (an `omp for` each, tomcatv-like). Each
 * point depends only on the previous sweep, so the checksum (sum of both meshes) does not depend
 * on the team size. -rows makes the meshes taller than wide: rows grown with the team keep each
 * thread's share of a sweep, the work between two barriers, the same on any machine.
 */
#include "common.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const NAME = "ltomcatv";
enum { RECORD = 80 }; /* bytes of text per boundary record */

/* The serial phase: formats `lines` boundary records as text, then parses them into the edges
 * of both buffers of both meshes of `rows` x `n` (record k sets edge point k mod the perimeter;
 * sweeps never write edges, so both buffers must hold them). */
static void read_boundary(double *x[2], double *y[2], long rows, long n, long lines, long outer, char *text) {
    long w = n - 1, h = rows - 1, perimeter = 2 * (w + h);
    for (long k = 0; k < lines; k++) {
        double v = krand01(11 + (uint64_t)outer, (uint64_t)k);
        snprintf(text + k * RECORD, RECORD, "%ld %.17g %.17g\n", k % perimeter, v, 1.0 - v);
    }
    for (long k = 0; k < lines; k++) {
        long p = 0;
        double vx = 0.0, vy = 0.0;
        if (sscanf(text + k * RECORD, "%ld %lf %lf", &p, &vx, &vy) != 3)
            kfail(NAME, "boundary record %ld does not parse", k);
        long i, j; /* walk the edge clockwise from the top-left corner */
        if (p < w)
            i = 0, j = p;
        else if (p < w + h)
            i = p - w, j = w;
        else if (p < 2 * w + h)
            i = h, j = w - (p - w - h);
        else
            i = h - (p - 2 * w - h), j = 0;
        for (int g = 0; g < 2; g++) {
            x[g][i * n + j] = vx;
            y[g][i * n + j] = vy;
        }
    }
}

int main(int argc, char **argv) {
    long n = 256, rows = 0, outer = 20, sweeps = 100, io = 2000;
    const kopt opts[] = {
        {"n", &n, 3, "mesh side (four meshes of rows*n doubles)"},
        {"rows", &rows, 0, "mesh rows (default: n, square meshes)"},
        {"outer", &outer, 1, "outer iterations (serial phase + parallel region)"},
        {"sweeps", &sweeps, 1, "relaxation sweeps per parallel region"},
        {"io", &io, 0, "boundary records written and parsed per serial phase"},
    };
    kargs(NAME, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (rows == 0)
        rows = n;
    else if (rows < 3)
        kfail(NAME, "-rows must be at least 3 (0: as many as -n)");

    size_t cells = (size_t)rows * (size_t)n;
    double *x[2], *y[2];
    for (int g = 0; g < 2; g++) {
        x[g] = kalloc(cells * sizeof(double), "the X mesh");
        y[g] = kalloc(cells * sizeof(double), "the Y mesh");
    }
    char *text = kalloc((size_t)(io > 0 ? io : 1) * RECORD, "the boundary text");

    double t0 = know(), serial_seconds = 0.0;
    long sweep = 0; /* sweeps done so far: x[sweep & 1] holds the current mesh */
    for (long o = 0; o < outer; o++) {
        double ts = know();
        read_boundary(x, y, rows, n, io, o, text);
        serial_seconds += know() - ts;
        long first = sweep;
#pragma omp parallel
        {
            KREGION(NAME, "relax");
            for (long k = first; k < first + sweeps; k++) {
                const double *sx = x[k & 1], *sy = y[k & 1];
                double *dx = x[(k + 1) & 1], *dy = y[(k + 1) & 1];
#pragma omp for schedule(static)
                for (long i = 1; i < rows - 1; i++)
                    for (long j = 1; j < n - 1; j++) {
                        long c = i * n + j;
                        double ax = sx[c - n] + sx[c + n] + sx[c - 1] + sx[c + 1];
                        double ay = sy[c - n] + sy[c + n] + sy[c - 1] + sy[c + 1];
                        dx[c] = 0.24 * ax + 0.02 * (sy[c + 1] - sy[c - 1]);
                        dy[c] = 0.24 * ay + 0.02 * (sx[c + n] - sx[c - n]);
                    }
            }
        }
        sweep += sweeps;
    }
    double seconds = know() - t0;

    char extra[96];
    snprintf(extra, sizeof extra, "n=%ld rows=%ld outer=%ld serial_seconds=%.6f", n, rows, outer, serial_seconds);
    kreport(NAME, seconds, ksum_ordered(x[sweep & 1], cells) + ksum_ordered(y[sweep & 1], cells),
            extra);
    return 0;
}
