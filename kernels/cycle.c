/*
 * cycle: the sequential background program of paper 001's Table 3 experiment, which computes for
 * 18 s and sleeps for 5 s, over and over. Here one thread computes for -busy ms (a spin on the
 * clock, so a busy phase is busy whatever the CPU's speed) then sleeps for -sleep ms, -cycles
 * times (0: until killed). It opens no parallel region. The result line counts the cycles done
 * (the checksum) and its seconds are the whole run.
 */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <stdio.h>
#include <time.h>

static const char *const NAME = "cycle";

int main(int argc, char **argv) {
    long busy = 180, sleep_ms = 50, cycles = 0;
    const kopt opts[] = {
        {"busy", &busy, 0, "milliseconds of computing per cycle"},
        {"sleep", &sleep_ms, 0, "milliseconds of sleep per cycle"},
        {"cycles", &cycles, 0, "cycles to run (0: until killed)"},
    };
    kargs(NAME, argc, argv, opts, sizeof opts / sizeof opts[0]);

    double t0 = know();
    volatile double sink = 0.0;
    long done = 0;
    for (; cycles == 0 || done < cycles; done++) {
        double until = know() + (double)busy * 1e-3;
        while (know() < until)
            for (int i = 0; i < 1000; i++)
                sink += (double)i;
        struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {
        }
    }
    char extra[64];
    snprintf(extra, sizeof extra, "busy_ms=%ld sleep_ms=%ld", busy, sleep_ms);
    kreport(NAME, know() - t0, (double)done, extra);
    return 0;
}
