/* Workload for one rank of a simulated multi-node job (tools/icx-sim): drives GPU $LOCAL_RANK with
 * host<->device copies for argv[1] milliseconds, through pinned host memory when ICXSIM_PINNED=1
 * (how icx-sim injects "pinned buffers on the remote node"), else through pageable memory. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    const char *lr = getenv("LOCAL_RANK"), *pinned = getenv("ICXSIM_PINNED");
    long ms = argc > 1 ? atol(argv[1]) : 300;
    size_t n = 256u << 10;
    void *host = NULL, *d;
    if (cudaSetDevice(lr ? atoi(lr) : 0) || cudaMalloc(&d, n))
        return 2;
    if (pinned && *pinned == '1') {
        if (cudaHostAlloc(&host, n, cudaHostAllocDefault))
            return 2;
    } else if (!(host = calloc(1, n))) {
        return 2;
    }
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        if (cudaMemcpy(d, host, n, cudaMemcpyHostToDevice) ||
            cudaMemcpy(host, d, n, cudaMemcpyDeviceToHost))
            return 2;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
    return 0;
}
