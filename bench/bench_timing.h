/* The timing loop shared by the call-cost benchmarks: bursts of `per` calls timed with the TSC,
 * each followed by a 2 ms pause (the tracer's writer drains its ring there, so the hot path is
 * measured in its steady state), after 10 warm-up bursts.  Prints the median, 10th and 90th
 * percentile of the burst means in ns per call. */
#ifndef ICX_BENCH_TIMING_H
#define ICX_BENCH_TIMING_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static uint64_t bench_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* burst(per) makes `per` calls of what is measured. */
static int bench_run(int argc, char **argv, void (*burst)(int per))
{
    int batches = argc > 1 ? atoi(argv[1]) : 300, per = argc > 2 ? atoi(argv[2]) : 2000;
    struct timespec pause = {0, 2000000};
    uint64_t n0 = bench_mono_ns(), c0 = __rdtsc();
    while (bench_mono_ns() - n0 < 50000000)
        ;
    double ns_per_tick = (double)(bench_mono_ns() - n0) / (double)(__rdtsc() - c0);
    double *mean = malloc(sizeof(double) * (size_t)batches);
    if (!mean)
        return 1;
    for (int k = 0; k < 10; k++) { /* warm-up: resolution, buffers, pools */
        burst(per);
        nanosleep(&pause, NULL);
    }
    for (int k = 0; k < batches; k++) {
        uint64_t t0 = __rdtsc();
        burst(per);
        uint64_t t1 = __rdtsc();
        mean[k] = (double)(t1 - t0) * ns_per_tick / per;
        nanosleep(&pause, NULL);
    }
    qsort(mean, (size_t)batches, sizeof(double), bench_cmp);
    printf("%.2f %.2f %.2f\n", mean[batches / 2], mean[batches / 10], mean[batches * 9 / 10]);
    free(mean);
    return 0;
}

#endif
