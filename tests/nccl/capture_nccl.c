/* Workload: NCCL calls into a stream that is capturing a CUDA graph (global mode, the strictest)
 * must not get the tracer's events -- recording into a capture would add nodes to the user's graph
 * or invalidate it.  One single-rank communicator: an all-reduce on an ordinary stream (timed),
 * then, while `cap` captures, an all-reduce and a group with a send/recv pair to itself on it.
 * The capture must end successfully: prints "capture ok", else exits non-zero. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>

int main(void)
{
    float *buf;
    cudaStream_t plain, cap;
    ncclUniqueId id;
    ncclComm_t comm;
    if (cudaSetDevice(0) || cudaMalloc((void **)&buf, 4096) || cudaStreamCreate(&plain) ||
        cudaStreamCreate(&cap) || ncclGetUniqueId(&id) || ncclCommInitRank(&comm, 1, id, 0))
        return 2;
    if (ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, plain) ||
        cudaStreamSynchronize(plain))
        return 3;
    if (cudaStreamBeginCapture(cap, cudaStreamCaptureModeGlobal))
        return 4;
    if (ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, cap) || ncclGroupStart() ||
        ncclSend(buf, 256, ncclFloat, 0, comm, cap) ||
        ncclRecv(buf + 512, 256, ncclFloat, 0, comm, cap) || ncclGroupEnd())
        return 5;
    cudaGraph_t g;
    cudaError_t e = cudaStreamEndCapture(cap, &g);
    if (e != cudaSuccess) {
        fprintf(stderr, "capture invalidated: %s\n", cudaGetErrorName(e));
        return 6;
    }
    cudaGraphDestroy(g);
    if (ncclCommDestroy(comm))
        return 7;
    printf("capture ok\n");
    return 0;
}
