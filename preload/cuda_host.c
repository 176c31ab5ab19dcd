/* Pinned host memory hooks: cudaHostAlloc, cudaMallocHost, cudaHostRegister and their frees.
 * Where pinned buffers live decides how fast host<->device copies go, so each records the NUMA
 * node of a sample of the buffer's pages (see placement.c). */
#include <cuda_runtime_api.h>

#include "cuda_int.h"
#include "hook.h"
#include "placement.h"
#include "resolve.h"
#include "tbuf.h"

#define CUDART ICX_LIB_CUDART

ICX_REAL_DECL(CUDART, cudaError_t, cudaHostAlloc, (void **, size_t, unsigned));
ICX_REAL_DECL(CUDART, cudaError_t, cudaMallocHost, (void **, size_t));
ICX_REAL_DECL(CUDART, cudaError_t, cudaHostRegister, (void *, size_t, unsigned));
ICX_REAL_DECL(CUDART, cudaError_t, cudaFreeHost, (void *));
ICX_REAL_DECL(CUDART, cudaError_t, cudaHostUnregister, (void *));

/* The pages' NUMA node is asked at once (a control-plane call; a move_pages syscall): by the time
 * the writer drained the event the buffer could be gone. */
static void icx_host_event(enum icx_record_type type, enum icx_api api, uint64_t t0,
                           const void *ptr, size_t bytes, cudaError_t rc)
{
    icx_record_alloc(type, api, t0, icx_ticks(), ptr, bytes, -1, rc);
    if (type == ICX_REC_HOST_ALLOC && rc == cudaSuccess && ptr) {
        struct icx_slot slot;
        struct icx_rec_host_numa *r = icx_reserve(sizeof(*r), &slot);
        if (r && icx_placement_host_buffer(r, (uint64_t)(uintptr_t)ptr, bytes) == 0)
            icx_commit(&slot);
    }
}

ICX_EXPORT cudaError_t cudaHostAlloc(void **p, size_t size, unsigned flags)
{
    icx_real_cudaHostAlloc_t real = ICX_REAL(cudaHostAlloc);
    struct icx_call c;
    if (ICX_UNLIKELY(!real))
        return cudaErrorSharedObjectSymbolNotFound;
    if (!icx_call_begin(&c, &icx_self.guard))
        return real(p, size, flags);
    cudaError_t rc = real(p, size, flags);
    icx_call_returned(&c);
    icx_host_event(ICX_REC_HOST_ALLOC, ICX_API_cudaHostAlloc, c.t0,
                   rc == cudaSuccess && p ? *p : NULL, size, rc);
    icx_call_end(&c);
    return rc;
}

ICX_EXPORT cudaError_t cudaMallocHost(void **p, size_t size)
{
    icx_real_cudaMallocHost_t real = ICX_REAL(cudaMallocHost);
    struct icx_call c;
    if (ICX_UNLIKELY(!real))
        return cudaErrorSharedObjectSymbolNotFound;
    if (!icx_call_begin(&c, &icx_self.guard))
        return real(p, size);
    cudaError_t rc = real(p, size);
    icx_call_returned(&c);
    icx_host_event(ICX_REC_HOST_ALLOC, ICX_API_cudaMallocHost, c.t0,
                   rc == cudaSuccess && p ? *p : NULL, size, rc);
    icx_call_end(&c);
    return rc;
}

ICX_EXPORT cudaError_t cudaHostRegister(void *p, size_t size, unsigned flags)
{
    icx_real_cudaHostRegister_t real = ICX_REAL(cudaHostRegister);
    struct icx_call c;
    if (ICX_UNLIKELY(!real))
        return cudaErrorSharedObjectSymbolNotFound;
    if (!icx_call_begin(&c, &icx_self.guard))
        return real(p, size, flags);
    cudaError_t rc = real(p, size, flags);
    icx_call_returned(&c);
    icx_host_event(ICX_REC_HOST_ALLOC, ICX_API_cudaHostRegister, c.t0, rc == cudaSuccess ? p : NULL,
                   size, rc);
    icx_call_end(&c);
    return rc;
}

/* cudaFreeHost and cudaHostUnregister differ only in the real function they call. */
static cudaError_t icx_host_release(icx_real_cudaFreeHost_t real, enum icx_api api, void *p)
{
    struct icx_call c;
    if (ICX_UNLIKELY(!real))
        return cudaErrorSharedObjectSymbolNotFound;
    if (!p || !icx_call_begin(&c, &icx_self.guard))
        return real(p);
    cudaError_t rc = real(p);
    icx_call_returned(&c);
    icx_host_event(ICX_REC_HOST_FREE, api, c.t0, p, 0, rc);
    icx_call_end(&c);
    return rc;
}

ICX_EXPORT cudaError_t cudaFreeHost(void *p)
{
    return icx_host_release(ICX_REAL(cudaFreeHost), ICX_API_cudaFreeHost, p);
}

ICX_EXPORT cudaError_t cudaHostUnregister(void *p)
{
    return icx_host_release(ICX_REAL(cudaHostUnregister), ICX_API_cudaHostUnregister, p);
}
