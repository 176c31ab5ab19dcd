/* Workload: host<->device copies between a host buffer and one device for argv[2] milliseconds,
 * from the main thread.  argv[1]: the device, or "local" for $LOCAL_RANK (a rank of a simulated
 * job, tools/icx-sim).  argv[3]: "pinned" (cudaHostAlloc, the default), "pageable" (malloc), or
 * "env": pinned when ICXSIM_PINNED=1 (how icx-sim injects pinned buffers on the remote node). Where
 * this process runs (taskset) and where the buffer's pages live decide whether icxtrace calls it
 * misplaced. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
    const char *devarg = argc > 1 ? argv[1] : "0", *mode = argc > 3 ? argv[3] : "pinned";
    const char *lr = getenv("LOCAL_RANK"), *env_pinned = getenv("ICXSIM_PINNED");
    int dev = strcmp(devarg, "local") == 0 ? (lr ? atoi(lr) : 0) : atoi(devarg);
    long ms = argc > 2 ? atol(argv[2]) : 300;
    int pinned = strcmp(mode, "pinned") == 0 ||
                 (strcmp(mode, "env") == 0 && env_pinned && strcmp(env_pinned, "1") == 0);
    size_t n = pinned ? 1u << 20 : 256u << 10;
    void *host = NULL, *d;
    if (cudaSetDevice(dev) || cudaMalloc(&d, n))
        return 2;
    if (pinned ? cudaHostAlloc(&host, n, cudaHostAllocDefault) != cudaSuccess
               : !(host = calloc(1, n)))
        return 2;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        if (cudaMemcpy(d, host, n, cudaMemcpyHostToDevice) ||
            cudaMemcpy(host, d, n, cudaMemcpyDeviceToHost))
            return 2;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
    if (pinned)
        return cudaFreeHost(host) == cudaSuccess ? 0 : 2;
    free(host);
    return 0;
}
