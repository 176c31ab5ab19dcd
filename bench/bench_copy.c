/* Cost of one cudaMemcpyPeerAsync call as the application sees it: bursts of calls timed with the
 * TSC (median of the burst means, in ns), each burst followed by a pause, the way a training step
 * issues its copies and then computes -- the tracer's writer drains its ring in the pause, so the
 * hot path is measured in its steady state, neither overflowing nor dropping.  Run with and
 * without LD_PRELOAD=libicxtrace.so against the null libcudart (bench/nullcudart.c) so only the
 * wrapper's cost is measured; bench/run.sh does both in one run and prints the difference. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int batches = argc > 1 ? atoi(argv[1]) : 300, per = argc > 2 ? atoi(argv[2]) : 2000;
    struct timespec pause = {0, 2000000}; /* 2 ms between bursts */
    uint64_t n0 = mono_ns(), c0 = __rdtsc();
    while (mono_ns() - n0 < 50000000)
        ;
    double ns_per_tick = (double)(mono_ns() - n0) / (double)(__rdtsc() - c0);
    double *mean = malloc(sizeof(double) * (size_t)batches);
    static char a[64], b[64];
    cudaStream_t s = (cudaStream_t)0x1234;
    for (int k = 0; k < 10; k++) { /* warm-up: resolution, buffers, pools */
        for (int i = 0; i < per; i++)
            cudaMemcpyPeerAsync(b, 1, a, 0, 64, s);
        nanosleep(&pause, NULL);
    }
    for (int k = 0; k < batches; k++) {
        uint64_t t0 = __rdtsc();
        for (int i = 0; i < per; i++)
            cudaMemcpyPeerAsync(b, 1, a, 0, 64, s);
        uint64_t t1 = __rdtsc();
        mean[k] = (double)(t1 - t0) * ns_per_tick / per;
        nanosleep(&pause, NULL);
    }
    qsort(mean, (size_t)batches, sizeof(double), cmp);
    printf("%.2f %.2f %.2f\n", mean[batches / 2], mean[batches / 10], mean[batches * 9 / 10]);
    free(mean);
    return 0;
}
