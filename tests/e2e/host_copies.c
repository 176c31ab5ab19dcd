/* Workload: host<->device copies between a pinned host buffer (cudaHostAlloc) and device argv[1]
 * for argv[2] milliseconds, from the main thread.  Where this process runs (taskset) and where the
 * buffer's pages live decide whether icxtrace calls it misplaced. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    int dev = argc > 1 ? atoi(argv[1]) : 0;
    long ms = argc > 2 ? atol(argv[2]) : 300;
    size_t n = 1u << 20;
    void *host, *d;
    if (cudaSetDevice(dev) || cudaHostAlloc(&host, n, cudaHostAllocDefault) || cudaMalloc(&d, n))
        return 2;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        if (cudaMemcpy(d, host, n, cudaMemcpyHostToDevice) ||
            cudaMemcpy(host, d, n, cudaMemcpyDeviceToHost))
            return 2;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
    return cudaFreeHost(host) == cudaSuccess ? 0 : 2;
}
