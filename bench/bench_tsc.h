/* TSC ticks to nanoseconds for bench_peers and bench_rate: two clock_gettime calls around a 50 ms
 * sleep, so a tracer that records library calls (uftrace, ltrace) sees three calls, not a loop. */
#ifndef ICX_BENCH_TSC_H
#define ICX_BENCH_TSC_H

#include <stdint.h>
#include <time.h>
#include <x86intrin.h>

static inline double bench_tsc_ns_per_tick(void)
{
    struct timespec c0, c1, cal = {0, 50000000};
    clock_gettime(CLOCK_MONOTONIC, &c0);
    uint64_t k0 = __rdtsc();
    nanosleep(&cal, NULL);
    clock_gettime(CLOCK_MONOTONIC, &c1);
    return ((double)(c1.tv_sec - c0.tv_sec) * 1e9 + (double)(c1.tv_nsec - c0.tv_nsec)) /
           (double)(__rdtsc() - k0);
}

#endif
