/* Workload for the differential test (test_differential_suite): every CUDA runtime entry point
 * the tracer wraps, called right and wrong, one line each with what the job can observe -- the
 * return value, the out-parameters (pointers as set or not: their values differ run to run), the
 * sticky error (cudaGetLastError/cudaPeekAtLastError) and errno, set to a marker before each call.
 * The copied bytes are checksummed.  Run with and without the preload, the output must be
 * identical byte for byte. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The per-thread-default-stream entry points, which cuda_runtime_api.h declares only under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM (ptds_copies.c goes that way); libcudart exports both. */
cudaError_t cudaMemcpy_ptds(void *, const void *, size_t, enum cudaMemcpyKind);
cudaError_t cudaMemcpyAsync_ptsz(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
cudaError_t cudaMallocAsync_ptsz(void **, size_t, cudaStream_t);
cudaError_t cudaFreeAsync_ptsz(void *, cudaStream_t);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t, enum cudaStreamCaptureMode);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t, cudaGraph_t *);

#define MARK 4242
#define N (1u << 16)

static void show(const char *what, cudaError_t e)
{
    int err = errno;
    cudaError_t peek = cudaPeekAtLastError();
    printf("%-44s rc=%d (%s) errno=%d peek=%d\n", what, (int)e, cudaGetErrorName(e), err,
           (int)peek);
}

#define CALL(what, expr)                                                                           \
    do {                                                                                           \
        errno = MARK;                                                                              \
        cudaError_t e_ = (expr);                                                                   \
        show(what, e_);                                                                            \
    } while (0)

static uint64_t sum(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void checksum(const char *what, const void *dev, size_t n)
{
    unsigned char *h = malloc(n);
    if (!h)
        exit(2);
    CALL("  cudaMemcpy D2H (for the checksum)", cudaMemcpy(h, dev, n, cudaMemcpyDeviceToHost));
    printf("  %s: checksum %016llx\n", what, (unsigned long long)sum(h, n));
    free(h);
}

static void copies(void *d0, void *d1, void *h, cudaStream_t s)
{
    CALL("cudaMemcpy H2D", cudaMemcpy(d0, h, N, cudaMemcpyHostToDevice));
    CALL("cudaMemcpyPeer 0->1", cudaMemcpyPeer(d1, 1, d0, 0, N));
    checksum("d1 after the peer copy", d1, N);
    CALL("cudaMemcpyPeer bad device", cudaMemcpyPeer(d1, 1, d0, 99, N));
    CALL("cudaMemcpyPeer wrong device of buffer", cudaMemcpyPeer(d1, 0, d0, 0, N));
    CALL("cudaMemcpyPeer 0 bytes", cudaMemcpyPeer(d1, 1, d0, 0, 0));
    printf("cudaGetLastError -> %d\n", (int)cudaGetLastError());
    CALL("cudaMemcpyPeerAsync 1->0", cudaMemcpyPeerAsync(d0, 0, d1, 1, N / 2, s));
    CALL("cudaStreamSynchronize", cudaStreamSynchronize(s));
    checksum("d0 after the async peer copy", d0, N);
    CALL("cudaMemcpy D2D across devices", cudaMemcpy(d1, d0, N, cudaMemcpyDeviceToDevice));
    CALL("cudaMemcpy default kind", cudaMemcpy(d0, d1, N / 4, cudaMemcpyDefault));
    CALL("cudaMemcpy bad kind", cudaMemcpy(d0, d1, N, (enum cudaMemcpyKind)42));
    CALL("cudaMemcpy D2D from host memory", cudaMemcpy(d0, h, N, cudaMemcpyDeviceToDevice));
    CALL("cudaMemcpy_ptds", cudaMemcpy_ptds(d1, d0, N, cudaMemcpyDefault));
    CALL("cudaMemcpyAsync", cudaMemcpyAsync(d1, d0, N, cudaMemcpyDeviceToDevice, s));
    CALL("cudaMemcpyAsync_ptsz", cudaMemcpyAsync_ptsz(d0, d1, N, cudaMemcpyDefault, s));
    CALL("cudaStreamSynchronize", cudaStreamSynchronize(s));
    printf("cudaGetLastError -> %d\n", (int)cudaGetLastError());
    checksum("d0 at the end", d0, N);
}

static void allocations(cudaStream_t s)
{
    void *p = NULL, *q = NULL;
    CALL("cudaMalloc 0 bytes", cudaMalloc(&p, 0));
    CALL("cudaFree of it", cudaFree(p));
    CALL("cudaMalloc 2^62 bytes", cudaMalloc(&q, (size_t)1 << 62));
    printf("  out-parameter %s\n", q ? "set" : "NULL");
    printf("cudaGetLastError -> %d\n", (int)cudaGetLastError());
    CALL("cudaFree(NULL)", cudaFree(NULL));
    CALL("cudaFree of a host pointer", cudaFree(&p));
    p = NULL;
    CALL("cudaMallocAsync", cudaMallocAsync(&p, 4096, s));
    printf("  out-parameter %s\n", p ? "set" : "NULL");
    CALL("cudaFreeAsync", cudaFreeAsync(p, s));
    p = NULL;
    CALL("cudaMallocAsync_ptsz", cudaMallocAsync_ptsz(&p, 4096, s));
    CALL("cudaFreeAsync_ptsz", cudaFreeAsync_ptsz(p, s));
    CALL("cudaFreeAsync twice", cudaFreeAsync(p, s));
    printf("cudaGetLastError -> %d\n", (int)cudaGetLastError());
}

static void host_memory(void)
{
    void *p = NULL, *q = NULL;
    CALL("cudaHostAlloc", cudaHostAlloc(&p, N, cudaHostAllocDefault));
    CALL("cudaMallocHost", cudaMallocHost(&q, N));
    printf("  out-parameters %s %s\n", p ? "set" : "NULL", q ? "set" : "NULL");
    CALL("cudaFreeHost", cudaFreeHost(p));
    CALL("cudaFreeHost", cudaFreeHost(q));
    CALL("cudaFreeHost of a never allocated pointer", cudaFreeHost(&p));
    char *m = malloc(N);
    CALL("cudaHostRegister", cudaHostRegister(m, N, cudaHostRegisterDefault));
    CALL("cudaHostRegister 0 bytes", cudaHostRegister(m, 0, cudaHostRegisterDefault));
    CALL("cudaHostUnregister", cudaHostUnregister(m));
    CALL("cudaHostUnregister again", cudaHostUnregister(m));
    printf("cudaGetLastError -> %d\n", (int)cudaGetLastError());
    free(m);
}

static void capture(void *d0, void *d1, cudaStream_t s)
{
    cudaGraph_t g = NULL;
    enum cudaStreamCaptureStatus st;
    CALL("cudaStreamBeginCapture global", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CALL("cudaStreamIsCapturing", cudaStreamIsCapturing(s, &st));
    printf("  status %d\n", (int)st);
    CALL("cudaMemcpyPeerAsync into the capture", cudaMemcpyPeerAsync(d1, 1, d0, 0, N, s));
    CALL("cudaStreamEndCapture", cudaStreamEndCapture(s, &g));
    printf("  graph %s\n", g ? "set" : "NULL");
    if (g)
        CALL("cudaGraphDestroy", cudaGraphDestroy(g));
    g = NULL;
    CALL("cudaStreamEndCapture not capturing", cudaStreamEndCapture(s, &g));
    CALL("cudaStreamBeginCapture_ptsz relaxed",
         cudaStreamBeginCapture_ptsz(s, cudaStreamCaptureModeRelaxed));
    CALL("cudaStreamEndCapture_ptsz", cudaStreamEndCapture_ptsz(s, &g));
    if (g)
        CALL("cudaGraphDestroy", cudaGraphDestroy(g));
    printf("cudaGetLastError -> %d\n", (int)cudaGetLastError());
}

int main(void)
{
    int n = 0, can = 0;
    CALL("cudaGetDeviceCount", cudaGetDeviceCount(&n));
    printf("  devices %d\n", n);
    if (n < 2)
        return 1;
    CALL("cudaDeviceCanAccessPeer 0 1", cudaDeviceCanAccessPeer(&can, 0, 1));
    printf("  can %d\n", can);
    void *d0 = NULL, *d1 = NULL;
    cudaStream_t s;
    CALL("cudaSetDevice 1", cudaSetDevice(1));
    CALL("cudaMalloc on 1", cudaMalloc(&d1, N));
    CALL("cudaSetDevice 0", cudaSetDevice(0));
    CALL("cudaMalloc on 0", cudaMalloc(&d0, N));
    CALL("cudaStreamCreate", cudaStreamCreate(&s));
    unsigned char *h = malloc(N);
    for (unsigned i = 0; i < N; i++)
        h[i] = (unsigned char)(i * 7 + 3);
    copies(d0, d1, h, s);
    allocations(s);
    host_memory();
    capture(d0, d1, s);
    CALL("cudaStreamDestroy", cudaStreamDestroy(s));
    CALL("cudaFree d0", cudaFree(d0));
    CALL("cudaFree d1", cudaFree(d1));
    CALL("cudaFree d1 again", cudaFree(d1));
    printf("cudaGetLastError -> %d\n", (int)cudaGetLastError());
    free(h);
    return 0;
}
