/* Workload: a thread captures a CUDA graph in global mode (the strictest) while another thread's
 * GPU-timed copies are still in flight, so the tracer's writer polls events during the capture.
 * A copy is also issued into the capturing stream.  The capture must end successfully: prints
 * "capture ok", else exits non-zero. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <time.h>

int main(void)
{
    void *a, *b, *c, *d;
    cudaStream_t busy, cap;
    size_t big = 64u << 20;
    if (cudaSetDevice(0) || cudaMalloc(&a, big) || cudaMalloc(&c, 4096) ||
        cudaStreamCreate(&busy) || cudaStreamCreate(&cap) || cudaSetDevice(1) ||
        cudaMalloc(&b, big) || cudaMalloc(&d, 4096) || cudaSetDevice(0))
        return 2;
    /* In-flight timed copies: their events are pending in the writer while we capture. */
    for (int i = 0; i < 8; i++)
        if (cudaMemcpyPeerAsync(b, 1, a, 0, big, busy))
            return 2;
    if (cudaStreamBeginCapture(cap, cudaStreamCaptureModeGlobal))
        return 3;
    if (cudaMemcpyPeerAsync(d, 1, c, 0, 4096, cap)) /* captured, never timed */
        return 4;
    struct timespec ts = {0, 300000000}; /* the writer polls several times meanwhile */
    nanosleep(&ts, NULL);
    cudaGraph_t g;
    cudaError_t e = cudaStreamEndCapture(cap, &g);
    if (e != cudaSuccess) {
        fprintf(stderr, "capture invalidated: %s\n", cudaGetErrorName(e));
        return 5;
    }
    if (cudaStreamSynchronize(busy))
        return 6;
    printf("capture ok\n");
    return 0;
}
