/* Workload built with per-thread default streams (nvcc --default-stream per-thread): the CUDA
 * header maps cudaMemcpy/cudaMemcpyAsync to their _ptds/_ptsz entry points.  Writes the ground
 * truth to argv[1]. */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #call, (int)e_);              \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    if (argc < 2)
        return 1;
    size_t n = 2u << 20;
    void *a, *b;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&a, n));
    CHECK(cudaSetDevice(3));
    CHECK(cudaMalloc(&b, n));
    for (int i = 0; i < 5; i++)
        CHECK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, 0)); /* _ptsz, per-thread stream */
    for (int i = 0; i < 2; i++)
        CHECK(cudaMemcpy(a, b, n, cudaMemcpyDefault)); /* _ptds */
    CHECK(cudaStreamSynchronize(0));
    FILE *f = fopen(argv[1], "w");
    if (!f)
        return 1;
    fprintf(f, "0 3 %zu 5\n3 0 %zu 2\n", 5 * n, 2 * n);
    fclose(f);
    return 0;
}
