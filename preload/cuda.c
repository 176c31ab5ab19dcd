/* CUDA runtime hooks: device-to-device copies between two different devices (cudaMemcpyPeer*, and
 * cudaMemcpy* whose pointers land on two devices under UVA), plus the allocation calls that let us
 * classify pointers without a query per copy.  We never link libcudart: the real functions are
 * resolved lazily from whichever libcudart the job loaded. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_int.h"
#include "gpu.h"
#include "hook.h"
#include "module.h"
#include "resolve.h"
#include "stack.h"
#include "static_detect.h"
#include "tbuf.h"

#define CUDART ICX_LIB_CUDART

/* Not declared by cuda_runtime_api.h unless per-thread default streams are selected. */
ICX_EXPORT cudaError_t cudaMemcpy_ptds(void *, const void *, size_t, enum cudaMemcpyKind);
ICX_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *, const void *, size_t, enum cudaMemcpyKind,
                                            cudaStream_t);
ICX_EXPORT cudaError_t cudaMallocAsync_ptsz(void **, size_t, cudaStream_t);
ICX_EXPORT cudaError_t cudaFreeAsync_ptsz(void *, cudaStream_t);
ICX_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t, enum cudaStreamCaptureMode);
ICX_EXPORT cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t, cudaGraph_t,
                                                          const cudaGraphNode_t *,
                                                          const cudaGraphEdgeData *, size_t,
                                                          enum cudaStreamCaptureMode);
ICX_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t, cudaGraph_t *);

ICX_REAL_DECL(CUDART, cudaError_t, cudaMemcpyPeer, (void *, int, const void *, int, size_t));
ICX_REAL_DECL(CUDART, cudaError_t, cudaMemcpyPeerAsync,
              (void *, int, const void *, int, size_t, cudaStream_t));
ICX_REAL_DECL(CUDART, cudaError_t, cudaMemcpy, (void *, const void *, size_t, enum cudaMemcpyKind));
ICX_REAL_DECL(CUDART, cudaError_t, cudaMemcpy_ptds,
              (void *, const void *, size_t, enum cudaMemcpyKind));
ICX_REAL_DECL(CUDART, cudaError_t, cudaMemcpyAsync,
              (void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t));
ICX_REAL_DECL(CUDART, cudaError_t, cudaMemcpyAsync_ptsz,
              (void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t));
ICX_REAL_DECL(CUDART, cudaError_t, cudaMalloc, (void **, size_t));
ICX_REAL_DECL(CUDART, cudaError_t, cudaFree, (void *));
ICX_REAL_DECL(CUDART, cudaError_t, cudaMallocAsync, (void **, size_t, cudaStream_t));
ICX_REAL_DECL(CUDART, cudaError_t, cudaMallocAsync_ptsz, (void **, size_t, cudaStream_t));
ICX_REAL_DECL(CUDART, cudaError_t, cudaFreeAsync, (void *, cudaStream_t));
ICX_REAL_DECL(CUDART, cudaError_t, cudaFreeAsync_ptsz, (void *, cudaStream_t));
ICX_REAL_DECL(CUDART, cudaError_t, cudaStreamBeginCapture,
              (cudaStream_t, enum cudaStreamCaptureMode));
ICX_REAL_DECL(CUDART, cudaError_t, cudaStreamBeginCapture_ptsz,
              (cudaStream_t, enum cudaStreamCaptureMode));
ICX_REAL_DECL(CUDART, cudaError_t, cudaStreamBeginCaptureToGraph,
              (cudaStream_t, cudaGraph_t, const cudaGraphNode_t *, const cudaGraphEdgeData *,
               size_t, enum cudaStreamCaptureMode));
ICX_REAL_DECL(CUDART, cudaError_t, cudaStreamBeginCaptureToGraph_ptsz,
              (cudaStream_t, cudaGraph_t, const cudaGraphNode_t *, const cudaGraphEdgeData *,
               size_t, enum cudaStreamCaptureMode));
ICX_REAL_DECL(CUDART, cudaError_t, cudaStreamEndCapture, (cudaStream_t, cudaGraph_t *));
ICX_REAL_DECL(CUDART, cudaError_t, cudaStreamEndCapture_ptsz, (cudaStream_t, cudaGraph_t *));
ICX_REAL_DECL(CUDART, cudaError_t, cudaStreamIsCapturing,
              (cudaStream_t, enum cudaStreamCaptureStatus *));
ICX_REAL_DECL(CUDART, cudaError_t, cudaPointerGetAttributes,
              (struct cudaPointerAttributes *, const void *));

/* ---- pointer classification: copy-on-write sorted range map, lock-free to read ---- */

struct icx_range {
    uintptr_t lo, hi;
    int dev;
};
struct icx_amap {
    size_t n;
    struct icx_amap *retired_next;
    uint64_t retired_ns;
    struct icx_range r[];
};
static _Atomic(struct icx_amap *) icx_amap_cur;
static pthread_mutex_t icx_amap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct icx_amap *icx_amap_retired;
static _Atomic uint64_t icx_amap_frees; /* invalidates the per-thread query cache */

/* Writer: free retired maps no reader can still hold (a lookup takes nanoseconds; 2 s is ample). */
static void icx_amap_reclaim(int final)
{
    uint64_t now = icx_mono_ns();
    pthread_mutex_lock(&icx_amap_lock);
    struct icx_amap **link = &icx_amap_retired;
    while (*link) {
        struct icx_amap *m = *link;
        if (final || now - m->retired_ns > 2000000000ull) {
            *link = m->retired_next;
            free(m);
        } else {
            link = &m->retired_next;
        }
    }
    pthread_mutex_unlock(&icx_amap_lock);
}

static void icx_amap_update(uintptr_t lo, size_t len, int dev, int insert)
{
    pthread_mutex_lock(&icx_amap_lock);
    struct icx_amap *old = atomic_load_explicit(&icx_amap_cur, memory_order_relaxed);
    size_t n = old ? old->n : 0;
    struct icx_amap *m = malloc(sizeof(*m) + (n + 1) * sizeof(struct icx_range));
    if (!m) {
        pthread_mutex_unlock(&icx_amap_lock);
        return;
    }
    size_t o = 0;
    int placed = !insert;
    for (size_t i = 0; i < n; i++) {
        const struct icx_range *e = &old->r[i];
        if (e->lo == lo)
            continue; /* a stale entry for a reused address, or the one being freed */
        if (!placed && lo < e->lo) {
            m->r[o++] = (struct icx_range){lo, lo + len, dev};
            placed = 1;
        }
        m->r[o++] = *e;
    }
    if (!placed)
        m->r[o++] = (struct icx_range){lo, lo + len, dev};
    m->n = o;
    atomic_store_explicit(&icx_amap_cur, m, memory_order_release);
    if (old) {
        old->retired_ns = icx_mono_ns();
        old->retired_next = icx_amap_retired;
        icx_amap_retired = old;
    }
    pthread_mutex_unlock(&icx_amap_lock);
    if (!insert)
        atomic_fetch_add_explicit(&icx_amap_frees, 1, memory_order_relaxed);
}

int icx_amap_lookup(uintptr_t p)
{
    const struct icx_amap *m = atomic_load_explicit(&icx_amap_cur, memory_order_acquire);
    if (!m)
        return -2;
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->r[mid].lo <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0 && p < m->r[lo - 1].hi)
        return m->r[lo - 1].dev;
    return -2;
}

/* Per-thread cache of cudaPointerGetAttributes answers for memory we did not see allocated (driver
 * API, VMM, host), by 2 MiB granule. */
#define ICX_PCACHE 64
struct icx_pcache {
    uintptr_t granule[ICX_PCACHE];
    int dev[ICX_PCACHE];
    uint64_t frees;
};
static ICX_TLS struct icx_pcache icx_tls_pcache;

/* Device holding p, or -1 for host or unknown memory. */
static int icx_classify(const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    int d = icx_amap_lookup(p);
    if (d != -2)
        return d;
    struct icx_pcache *c = &icx_tls_pcache;
    uint64_t frees = atomic_load_explicit(&icx_amap_frees, memory_order_relaxed);
    if (c->frees != frees) {
        memset(c->granule, 0, sizeof(c->granule));
        c->frees = frees;
    }
    uintptr_t g = (p >> 21) + 1;
    unsigned slot = (unsigned)(g % ICX_PCACHE);
    if (c->granule[slot] == g)
        return c->dev[slot];
    icx_real_cudaPointerGetAttributes_t q = ICX_REAL(cudaPointerGetAttributes);
    struct cudaPointerAttributes a;
    d = -1;
    if (q && q(&a, ptr) == cudaSuccess && a.type == cudaMemoryTypeDevice)
        d = a.device;
    c->granule[slot] = g;
    c->dev[slot] = d;
    return d;
}

/* ---- graph capture: a copy issued into a capturing stream does not run now ---- */

/* Captures begun and not yet ended, process-wide.  Zero almost always, so the copy path pays one
 * relaxed load; while a capture is open, each copy asks the runtime whether its stream captures. */
static _Atomic int icx_captures_active;

static int icx_stream_capturing(cudaStream_t s)
{
    icx_real_cudaStreamIsCapturing_t q = ICX_REAL(cudaStreamIsCapturing);
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    int saved = errno;
    int capturing = q && q(s, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone;
    errno = saved;
    return capturing;
}

static void icx_capture_begun(cudaError_t rc)
{
    if (rc == cudaSuccess)
        atomic_fetch_add(&icx_captures_active, 1);
}

static void icx_capture_ended(void)
{
    int n = atomic_load(&icx_captures_active);
    while (n > 0 && !atomic_compare_exchange_weak(&icx_captures_active, &n, n - 1))
        ;
}

/* Each pair below (plain and _ptsz) differs only in the real function it calls.  A capture is
 * counted even when it began untraced: the count only decides whether a copy asks its stream. */
static cudaError_t icx_begin_capture(icx_real_cudaStreamBeginCapture_t real, cudaStream_t s,
                                     enum cudaStreamCaptureMode mode)
{
    struct icx_call c;
    if (ICX_UNLIKELY(!real))
        return cudaErrorSharedObjectSymbolNotFound;
    if (!icx_call_begin_untimed(&c, &icx_self.guard))
        return real(s, mode);
    cudaError_t rc = real(s, mode);
    icx_call_returned(&c);
    icx_capture_begun(rc);
    icx_call_end(&c);
    return rc;
}

ICX_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    return icx_begin_capture(ICX_REAL(cudaStreamBeginCapture), s, mode);
}

ICX_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    return icx_begin_capture(ICX_REAL(cudaStreamBeginCapture_ptsz), s, mode);
}

static cudaError_t icx_begin_capture_to_graph(icx_real_cudaStreamBeginCaptureToGraph_t real,
                                              cudaStream_t s, cudaGraph_t g,
                                              const cudaGraphNode_t *deps,
                                              const cudaGraphEdgeData *edges, size_t n,
                                              enum cudaStreamCaptureMode mode)
{
    struct icx_call c;
    if (ICX_UNLIKELY(!real))
        return cudaErrorSharedObjectSymbolNotFound;
    if (!icx_call_begin_untimed(&c, &icx_self.guard))
        return real(s, g, deps, edges, n, mode);
    cudaError_t rc = real(s, g, deps, edges, n, mode);
    icx_call_returned(&c);
    icx_capture_begun(rc);
    icx_call_end(&c);
    return rc;
}

ICX_EXPORT cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t s, cudaGraph_t g,
                                                     const cudaGraphNode_t *deps,
                                                     const cudaGraphEdgeData *edges, size_t n,
                                                     enum cudaStreamCaptureMode mode)
{
    return icx_begin_capture_to_graph(ICX_REAL(cudaStreamBeginCaptureToGraph), s, g, deps, edges, n,
                                      mode);
}

ICX_EXPORT cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t s, cudaGraph_t g,
                                                          const cudaGraphNode_t *deps,
                                                          const cudaGraphEdgeData *edges, size_t n,
                                                          enum cudaStreamCaptureMode mode)
{
    return icx_begin_capture_to_graph(ICX_REAL(cudaStreamBeginCaptureToGraph_ptsz), s, g, deps,
                                      edges, n, mode);
}

static cudaError_t icx_end_capture(icx_real_cudaStreamEndCapture_t real, cudaStream_t s,
                                   cudaGraph_t *g)
{
    struct icx_call c;
    if (ICX_UNLIKELY(!real))
        return cudaErrorSharedObjectSymbolNotFound;
    if (!icx_call_begin_untimed(&c, &icx_self.guard))
        return real(s, g);
    cudaError_t rc = real(s, g);
    icx_call_returned(&c);
    icx_capture_ended(); /* a capture ends whether or not the graph came out valid */
    icx_call_end(&c);
    return rc;
}

ICX_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    return icx_end_capture(ICX_REAL(cudaStreamEndCapture), s, g);
}

ICX_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g)
{
    return icx_end_capture(ICX_REAL(cudaStreamEndCapture_ptsz), s, g);
}

/* ---- recording ---- */

static inline __attribute__((always_inline)) void
icx_record_copy(enum icx_api api, uint32_t flags, uint64_t t0, uint64_t t1, size_t bytes,
                cudaStream_t stream, int src, int dst, cudaError_t rc, uint32_t copy_id)
{
    struct icx_slot slot;
    struct icx_rec_cuda_copy *r = icx_reserve(sizeof(*r), &slot);
    if (!r)
        return;
    r->e.h.type = ICX_REC_CUDA_COPY;
    r->e.h.size = sizeof(*r);
    r->e.h.aux = api | (flags << ICX_EVF_SHIFT);
    r->e.ts = (int64_t)t0;
    r->e.dur = t1 - t0;
    r->bytes = bytes;
    r->stream = (uint64_t)(uintptr_t)stream;
    r->src_dev = src;
    r->dst_dev = dst;
    r->result = rc;
    r->copy_id = copy_id;
    icx_commit(&slot);
}

void icx_record_alloc(enum icx_record_type type, enum icx_api api, uint64_t t0, uint64_t t1,
                      const void *ptr, size_t bytes, int dev, cudaError_t rc)
{
    struct icx_slot slot;
    struct icx_rec_cuda_alloc *r = icx_reserve(sizeof(*r), &slot);
    if (!r)
        return;
    r->e.h.type = (uint16_t)type;
    r->e.h.size = sizeof(*r);
    r->e.h.aux = api;
    r->e.ts = (int64_t)t0;
    r->e.dur = t1 - t0;
    r->ptr = (uint64_t)(uintptr_t)ptr;
    r->bytes = bytes;
    r->device = dev;
    r->result = rc;
    icx_commit(&slot);
    if (icx_cfg.stack_control)
        icx_stack_capture();
}

/* A copy between host memory and device `dev`, off the peer-copy path. */
static void icx_record_host_copy(enum icx_api api, int d2h, uint64_t t0, size_t bytes,
                                 cudaStream_t stream, const void *host, int dev, cudaError_t rc)
{
    uint64_t t1 = icx_ticks();
    struct icx_slot slot;
    struct icx_rec_cuda_host_copy *r = icx_reserve(sizeof(*r), &slot);
    if (!r)
        return;
    r->e.h.type = ICX_REC_CUDA_HOST_COPY;
    r->e.h.size = sizeof(*r);
    r->e.h.aux = api | ((d2h ? ICX_EVF_D2H : 0u) << ICX_EVF_SHIFT);
    r->e.ts = (int64_t)t0;
    r->e.dur = t1 - t0;
    r->bytes = bytes;
    r->stream = (uint64_t)(uintptr_t)stream;
    r->host_ptr = (uint64_t)(uintptr_t)host;
    r->device = dev;
    r->result = rc;
    icx_commit(&slot);
}

/* A copy wrapper is the bracket (hook.h) plus GPU timing: after icx_call_begin, icx_copy_enter
 * may bracket the copy with pooled events; icx_copy_exit records it and ends the call. */
struct icx_copy_ctx {
    struct icx_call call;
    int timed;
    struct icx_gpu_req gpu;
};

static inline void icx_copy_enter(struct icx_copy_ctx *c, cudaStream_t exec_stream)
{
    c->gpu.copy_id = 0;
    c->timed = ICX_UNLIKELY(c->call.t0 >= icx_self.next_gpu_tick) &&
               icx_gpu_sample_due(c->call.t0) && icx_gpu_begin(&c->gpu, exec_stream);
    if (c->timed)
        c->call.t0 = icx_ticks(); /* the host call starts after our event record */
}

static inline __attribute__((always_inline)) void
icx_copy_exit(struct icx_copy_ctx *c, enum icx_api api, cudaError_t rc, size_t bytes,
              cudaStream_t user_stream, cudaStream_t exec_stream, int src, int dst)
{
    uint64_t t1 = icx_ticks();
    icx_call_returned(&c->call);
    if (c->timed)
        icx_gpu_end(&c->gpu, exec_stream, rc);
    uint32_t flags = 0;
    if (ICX_UNLIKELY(atomic_load_explicit(&icx_captures_active, memory_order_relaxed)) &&
        icx_stream_capturing(exec_stream))
        flags |= ICX_EVF_CAPTURED;
    icx_record_copy(api, flags, c->call.t0, t1, bytes, user_stream, src, dst, rc, c->gpu.copy_id);
    if (ICX_UNLIKELY(icx_cfg.stack_sample) && icx_stack_due())
        icx_stack_capture();
    icx_call_end(&c->call);
}

ICX_EXPORT cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
                                           size_t count, cudaStream_t stream)
{
    icx_real_cudaMemcpyPeerAsync_t real = ICX_REAL(cudaMemcpyPeerAsync);
    struct icx_copy_ctx c;
    if (ICX_UNLIKELY(!real))
        return cudaErrorSharedObjectSymbolNotFound;
    if (!icx_call_begin(&c.call, &icx_self.guard))
        return real(dst, dstDevice, src, srcDevice, count, stream);
    icx_copy_enter(&c, stream);
    cudaError_t rc = real(dst, dstDevice, src, srcDevice, count, stream);
    icx_copy_exit(&c, ICX_API_cudaMemcpyPeerAsync, rc, count, stream, stream, srcDevice, dstDevice);
    return rc;
}

ICX_EXPORT cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice,
                                      size_t count)
{
    icx_real_cudaMemcpyPeer_t real = ICX_REAL(cudaMemcpyPeer);
    struct icx_copy_ctx c;
    if (ICX_UNLIKELY(!real))
        return cudaErrorSharedObjectSymbolNotFound;
    if (!icx_call_begin(&c.call, &icx_self.guard))
        return real(dst, dstDevice, src, srcDevice, count);
    icx_copy_enter(&c, 0);
    cudaError_t rc = real(dst, dstDevice, src, srcDevice, count);
    icx_copy_exit(&c, ICX_API_cudaMemcpyPeer, rc, count, 0, 0, srcDevice, dstDevice);
    return rc;
}

/* cudaMemcpy*: what a copy is.  Peer: both ends on two different devices.  Host: one end in host
 * memory, the other on a device (for NUMA attribution of its bytes).  Anything else (host to host,
 * within one device) passes straight through. */
enum icx_copy_class { ICX_COPY_OTHER, ICX_COPY_PEER, ICX_COPY_H2D, ICX_COPY_D2H };

static inline enum icx_copy_class icx_copy_classify(const void *dst, const void *src,
                                                    enum cudaMemcpyKind kind, int *sdev, int *ddev)
{
    switch (kind) {
    case cudaMemcpyHostToDevice:
        *sdev = -1;
        *ddev = icx_classify(dst);
        return ICX_COPY_H2D;
    case cudaMemcpyDeviceToHost:
        *sdev = icx_classify(src);
        *ddev = -1;
        return ICX_COPY_D2H;
    case cudaMemcpyDeviceToDevice:
    case cudaMemcpyDefault:
        *sdev = icx_classify(src);
        *ddev = icx_classify(dst);
        if (*sdev >= 0 && *ddev >= 0)
            return *sdev != *ddev ? ICX_COPY_PEER : ICX_COPY_OTHER;
        if (kind == cudaMemcpyDefault && (*sdev >= 0) != (*ddev >= 0))
            return *sdev >= 0 ? ICX_COPY_D2H : ICX_COPY_H2D;
        return ICX_COPY_OTHER;
    default: return ICX_COPY_OTHER;
    }
}

/* The end of a copy that is not a peer copy: recorded when one end is host memory (for NUMA
 * attribution), not at all within one device; then the bracket ends. */
static inline void icx_host_copy_end(struct icx_call *c, enum icx_copy_class cls, enum icx_api api,
                                     size_t count, cudaStream_t stream, const void *dst,
                                     const void *src, int sdev, int ddev, cudaError_t rc)
{
    if (cls != ICX_COPY_OTHER) {
        int d2h = cls == ICX_COPY_D2H;
        icx_record_host_copy(api, d2h, c->t0, count, stream, d2h ? dst : src, d2h ? sdev : ddev,
                             rc);
    }
    icx_call_end(c);
}

/* Shared by cudaMemcpy and cudaMemcpy_ptds, which differ in the stream a sync copy runs on.  The
 * pointers are classified inside the bracket (a lookup may ask the runtime); the host time starts
 * after that. */
static inline cudaError_t icx_memcpy(icx_real_cudaMemcpy_t real, enum icx_api api,
                                     cudaStream_t exec_stream, void *dst, const void *src,
                                     size_t count, enum cudaMemcpyKind kind)
{
    struct icx_copy_ctx c;
    int sdev = -1, ddev = -1;
    if (ICX_UNLIKELY(!real))
        return cudaErrorSharedObjectSymbolNotFound;
    if (!icx_call_begin(&c.call, &icx_self.guard))
        return real(dst, src, count, kind);
    enum icx_copy_class cls = icx_copy_classify(dst, src, kind, &sdev, &ddev);
    c.call.t0 = icx_ticks();
    if (cls == ICX_COPY_PEER) {
        icx_copy_enter(&c, exec_stream);
        cudaError_t rc = real(dst, src, count, kind);
        icx_copy_exit(&c, api, rc, count, 0, exec_stream, sdev, ddev);
        return rc;
    }
    cudaError_t rc = real(dst, src, count, kind);
    icx_call_returned(&c.call);
    icx_host_copy_end(&c.call, cls, api, count, exec_stream, dst, src, sdev, ddev, rc);
    return rc;
}

ICX_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                                  enum cudaMemcpyKind kind)
{
    return icx_memcpy(ICX_REAL(cudaMemcpy), ICX_API_cudaMemcpy, 0, dst, src, count, kind);
}

ICX_EXPORT cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count,
                                       enum cudaMemcpyKind kind)
{
    return icx_memcpy(ICX_REAL(cudaMemcpy_ptds), ICX_API_cudaMemcpy_ptds, cudaStreamPerThread, dst,
                      src, count, kind);
}

/* Shared by cudaMemcpyAsync and its _ptsz twin, where stream 0 means the per-thread stream. */
static inline cudaError_t icx_memcpy_async(icx_real_cudaMemcpyAsync_t real, enum icx_api api,
                                           int ptsz, void *dst, const void *src, size_t count,
                                           enum cudaMemcpyKind kind, cudaStream_t stream)
{
    struct icx_copy_ctx c;
    int sdev = -1, ddev = -1;
    if (ICX_UNLIKELY(!real))
        return cudaErrorSharedObjectSymbolNotFound;
    if (!icx_call_begin(&c.call, &icx_self.guard))
        return real(dst, src, count, kind, stream);
    enum icx_copy_class cls = icx_copy_classify(dst, src, kind, &sdev, &ddev);
    c.call.t0 = icx_ticks();
    if (cls == ICX_COPY_PEER) {
        cudaStream_t exec = (ptsz && stream == 0) ? cudaStreamPerThread : stream;
        icx_copy_enter(&c, exec);
        cudaError_t rc = real(dst, src, count, kind, stream);
        icx_copy_exit(&c, api, rc, count, stream, exec, sdev, ddev);
        return rc;
    }
    cudaError_t rc = real(dst, src, count, kind, stream);
    icx_call_returned(&c.call);
    icx_host_copy_end(&c.call, cls, api, count, stream, dst, src, sdev, ddev, rc);
    return rc;
}

ICX_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                       enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return icx_memcpy_async(ICX_REAL(cudaMemcpyAsync), ICX_API_cudaMemcpyAsync, 0, dst, src, count,
                            kind, stream);
}

ICX_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
                                            enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return icx_memcpy_async((icx_real_cudaMemcpyAsync_t)ICX_REAL(cudaMemcpyAsync_ptsz),
                            ICX_API_cudaMemcpyAsync_ptsz, 1, dst, src, count, kind, stream);
}

/* ---- allocations: feed the pointer map; recorded for post-mortems ---- */

static void icx_alloc_done(enum icx_api api, uint64_t t0, cudaError_t rc, void **devPtr,
                           size_t size, int dev)
{
    uint64_t t1 = icx_ticks();
    void *p = (rc == cudaSuccess && devPtr) ? *devPtr : NULL;
    if (p)
        icx_amap_update((uintptr_t)p, size, dev, 1);
    icx_record_alloc(ICX_REC_CUDA_ALLOC, api, t0, t1, p, size, dev, rc);
}

static void icx_free_done(enum icx_api api, uint64_t t0, cudaError_t rc, void *devPtr)
{
    uint64_t t1 = icx_ticks();
    int dev = icx_amap_lookup((uintptr_t)devPtr);
    if (rc == cudaSuccess)
        icx_amap_update((uintptr_t)devPtr, 0, -1, 0);
    icx_record_alloc(ICX_REC_CUDA_FREE, api, t0, t1, devPtr, 0, dev < 0 ? -1 : dev, rc);
}

ICX_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    icx_real_cudaMalloc_t real = ICX_REAL(cudaMalloc);
    struct icx_call c;
    if (ICX_UNLIKELY(!real))
        return cudaErrorSharedObjectSymbolNotFound;
    if (!icx_call_begin(&c, &icx_self.guard))
        return real(devPtr, size);
    cudaError_t rc = real(devPtr, size);
    icx_call_returned(&c);
    icx_alloc_done(ICX_API_cudaMalloc, c.t0, rc, devPtr, size, icx_current_device());
    icx_call_end(&c);
    return rc;
}

ICX_EXPORT cudaError_t cudaFree(void *devPtr)
{
    icx_real_cudaFree_t real = ICX_REAL(cudaFree);
    struct icx_call c;
    if (ICX_UNLIKELY(!real))
        return cudaErrorSharedObjectSymbolNotFound;
    if (!devPtr || !icx_call_begin(&c, &icx_self.guard))
        return real(devPtr);
    cudaError_t rc = real(devPtr);
    icx_call_returned(&c);
    icx_free_done(ICX_API_cudaFree, c.t0, rc, devPtr);
    icx_call_end(&c);
    return rc;
}

static inline cudaError_t icx_malloc_async(icx_real_cudaMallocAsync_t real, enum icx_api api,
                                           void **devPtr, size_t size, cudaStream_t stream)
{
    struct icx_call c;
    if (ICX_UNLIKELY(!real))
        return cudaErrorSharedObjectSymbolNotFound;
    if (!icx_call_begin(&c, &icx_self.guard))
        return real(devPtr, size, stream);
    cudaError_t rc = real(devPtr, size, stream);
    icx_call_returned(&c);
    icx_alloc_done(api, c.t0, rc, devPtr, size, icx_stream_device(stream));
    icx_call_end(&c);
    return rc;
}

ICX_EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream)
{
    return icx_malloc_async(ICX_REAL(cudaMallocAsync), ICX_API_cudaMallocAsync, devPtr, size,
                            stream);
}

ICX_EXPORT cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t stream)
{
    return icx_malloc_async(ICX_REAL(cudaMallocAsync_ptsz), ICX_API_cudaMallocAsync_ptsz, devPtr,
                            size, stream);
}

static inline cudaError_t icx_free_async(icx_real_cudaFreeAsync_t real, enum icx_api api,
                                         void *devPtr, cudaStream_t stream)
{
    struct icx_call c;
    if (ICX_UNLIKELY(!real))
        return cudaErrorSharedObjectSymbolNotFound;
    if (!devPtr || !icx_call_begin(&c, &icx_self.guard))
        return real(devPtr, stream);
    cudaError_t rc = real(devPtr, stream);
    icx_call_returned(&c);
    icx_free_done(api, c.t0, rc, devPtr);
    icx_call_end(&c);
    return rc;
}

ICX_EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream)
{
    return icx_free_async(ICX_REAL(cudaFreeAsync), ICX_API_cudaFreeAsync, devPtr, stream);
}

ICX_EXPORT cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t stream)
{
    return icx_free_async(ICX_REAL(cudaFreeAsync_ptsz), ICX_API_cudaFreeAsync_ptsz, devPtr, stream);
}

/* ---- the module ---- */

/* Writer: the static-runtime check once, at the first flush or at exit (the job's libraries are
 * loaded by then); it runs before any tick, as such a program calls nothing we trace. */
static void icx_cuda_probe(void)
{
    static int checked_static;
    if (!checked_static) {
        checked_static = 1;
        icx_cuda_detect_static();
    }
}

/* Writer: retired pointer maps freed. */
static void icx_cuda_tick(struct icx_frame *f, enum icx_tick_kind kind)
{
    (void)f;
    icx_cuda_probe();
    icx_amap_reclaim(kind != ICX_TICK_PERIODIC);
}

static void icx_cuda_fork_prepare(void)
{
    pthread_mutex_lock(&icx_amap_lock);
}

static void icx_cuda_fork_parent(void)
{
    pthread_mutex_unlock(&icx_amap_lock);
}

/* The child's allocations are the parent's (same addresses): the map stays. */
static void icx_cuda_fork_child(void)
{
    pthread_mutex_init(&icx_amap_lock, NULL);
}

const struct icx_module icx_mod_cuda = {
    .name = "cuda",
    .tick = icx_cuda_tick,
    .probe = icx_cuda_probe,
    .fork_prepare = icx_cuda_fork_prepare,
    .fork_parent = icx_cuda_fork_parent,
    .fork_child = icx_cuda_fork_child,
};
