/* A shared object that links libcudart and does peer copies, loaded by tests/e2e/dlopen_local.c
 * with dlopen(RTLD_LOCAL) -- how Python loads PyTorch's CUDA extension and, with it, libcudart,
 * which then is not in the global scope where dlsym(RTLD_NEXT) looks. */
#include <cuda_runtime_api.h>

__attribute__((visibility("default"))) int plugin_copies(int n);

int plugin_copies(int n)
{
    void *a, *b;
    if (cudaSetDevice(2) || cudaMalloc(&a, 1 << 20) || cudaSetDevice(5) || cudaMalloc(&b, 1 << 20))
        return -1;
    for (int i = 0; i < n; i++)
        if (cudaMemcpyAsync(b, a, 1 << 20, cudaMemcpyDeviceToDevice, 0))
            return -1;
    return cudaDeviceSynchronize() ? -1 : 0;
}
