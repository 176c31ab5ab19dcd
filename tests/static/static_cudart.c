/* Linked against libcudart_static.a (nvcc's default): the runtime API is inside the executable, so
 * a preload cannot intercept it.  The tracer must say so.  Without a GPU the calls just fail. */
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    void *a = NULL;
    cudaMemcpy(a, a, 0, cudaMemcpyDeviceToDevice);
    printf("cudaGetDeviceCount -> %d, %d devices\n", (int)e, n);
    return 0;
}
