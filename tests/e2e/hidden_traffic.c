/* Workload: argv[1] intercepted peer copies of 4 KiB from GPU 0 to GPU 1, plus one cudaMemcpy2D of
 * argv[2] bytes over the same link -- an API the tracer does not hook, standing for the NVLink
 * traffic of kernels that no hook sees.  Only the hardware counters see the latter. */
#include <cuda_runtime_api.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100;
    size_t hidden = argc > 2 ? (size_t)atol(argv[2]) : (8u << 20);
    void *a, *b;
    if (cudaSetDevice(0) || cudaMalloc(&a, hidden) || cudaSetDevice(1) || cudaMalloc(&b, hidden) ||
        cudaSetDevice(0))
        return 2;
    for (int i = 0; i < n; i++)
        if (cudaMemcpyPeer(b, 1, a, 0, 4096))
            return 2;
    if (cudaMemcpy2D(b, hidden, a, hidden, hidden, 1, cudaMemcpyDeviceToDevice))
        return 2;
    return cudaDeviceSynchronize() ? 2 : 0;
}
