/* Benchmark stand-in for libcudart.so.13: every entry point returns at once, so a benchmark
 * measures only what a preload adds around the call.  Not a simulation: nothing happens, and it
 * keeps no state, so it is safe to call in a fork child (tests/fork/fork_locks uses it so). */
#include <cuda_runtime_api.h>
#include <stdint.h>

#define API __attribute__((visibility("default")))

static __thread int dev;
static _Atomic unsigned long next_alloc;
static char events[4096];
static _Atomic unsigned next_event; /* threads create events at once */

API cudaError_t cudaMemcpyPeerAsync(void *d, int dd, const void *s, int sd, size_t n,
                                    cudaStream_t st)
{
    (void)d, (void)dd, (void)s, (void)sd, (void)n, (void)st;
    return cudaSuccess;
}
/* Distinct fake device addresses, never dereferenced (tests/fork/fork_locks). */
API cudaError_t cudaMalloc(void **p, size_t n)
{
    (void)n;
    *p = (void *)(uintptr_t)(0x7f0000000000ul + 4096 * ++next_alloc);
    return cudaSuccess;
}
API cudaError_t cudaFree(void *p)
{
    (void)p;
    return cudaSuccess;
}
API cudaError_t cudaGetDevice(int *d)
{
    *d = dev;
    return cudaSuccess;
}
API cudaError_t cudaSetDevice(int d)
{
    dev = d;
    return cudaSuccess;
}
API cudaError_t cudaStreamGetDevice(cudaStream_t s, int *d)
{
    (void)s;
    *d = dev;
    return cudaSuccess;
}
API cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st)
{
    (void)s;
    *st = cudaStreamCaptureStatusNone;
    return cudaSuccess;
}
API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned f)
{
    (void)f;
    *e = (cudaEvent_t)&events[next_event++ % sizeof(events)];
    return cudaSuccess;
}
API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    (void)e, (void)s;
    return cudaSuccess;
}
API cudaError_t cudaEventQuery(cudaEvent_t e)
{
    (void)e;
    return cudaSuccess;
}
API cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    (void)e;
    return cudaSuccess;
}
API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    (void)a, (void)b;
    *ms = 0.001f;
    return cudaSuccess;
}
API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f)
{
    (void)f;
    *s = (cudaStream_t)&events[0];
    return cudaSuccess;
}
API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *m)
{
    (void)m;
    return cudaSuccess;
}
API cudaError_t cudaDeviceGetPCIBusId(char *b, int len, int d)
{
    (void)d;
    if (len > 0)
        b[0] = 0;
    return cudaSuccess;
}
