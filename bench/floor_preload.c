/* The cost floor the project measures against: a preload wrapper of cudaMemcpyPeerAsync that reads
 * the TSC twice and appends a 32-byte record to an initial-exec TLS buffer, nothing else (no
 * writer, no checks).  Built only for bench/run.sh, to compare with icxtrace in the same run. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <x86intrin.h>

struct rec {
    uint64_t t0, t1, bytes, stream;
};
static __thread struct rec ring[4096] __attribute__((tls_model("initial-exec")));
static __thread unsigned pos __attribute__((tls_model("initial-exec")));
typedef cudaError_t (*fn_t)(void *, int, const void *, int, size_t, cudaStream_t);
static fn_t real;

__attribute__((visibility("default"))) cudaError_t
cudaMemcpyPeerAsync(void *d, int dd, const void *s, int sd, size_t n, cudaStream_t st)
{
    if (__builtin_expect(!real, 0))
        real = (fn_t)dlsym(RTLD_NEXT, "cudaMemcpyPeerAsync");
    uint64_t t0 = __rdtsc();
    cudaError_t rc = real(d, dd, s, sd, n, st);
    uint64_t t1 = __rdtsc();
    struct rec *r = &ring[pos++ & 4095];
    r->t0 = t0;
    r->t1 = t1;
    r->bytes = n;
    r->stream = (uint64_t)(uintptr_t)st;
    return rc;
}
