/* Cost of one cudaMemcpyPeerAsync call as the application sees it (bench_timing.h).  Run with and
 * without LD_PRELOAD=libicxtrace.so against the null libcudart (bench/nullcudart.c) so only the
 * wrapper's cost is measured; bench/run.sh does both in one run and prints the difference. */
#include <cuda_runtime_api.h>

#include "bench_timing.h"

static void burst(int per)
{
    static char a[64], b[64];
    for (int i = 0; i < per; i++)
        cudaMemcpyPeerAsync(b, 1, a, 0, 64, (cudaStream_t)0x1234);
}

int main(int argc, char **argv)
{
    return bench_run(argc, argv, burst);
}
