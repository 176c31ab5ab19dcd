/* GPU-side timing of copies: pooled CUDA events recorded around a sampled copy on the stream it
 * runs on, polled by the writer thread off the hot path, and placed on the host's monotonic clock
 * through a per-device anchor event.  Capture-safe: never records into a stream that is capturing a
 * graph, and the writer polls in relaxed capture mode so it cannot invalidate another thread's
 * global capture. Touches only devices the job already used. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "gpu.h"
#include "module.h"
#include "resolve.h"
#include "tbuf.h"
#include "writer.h"

#define CUDART ICX_LIB_CUDART
#define ICX_MAX_DEV 64
#define ICX_POOL_MAX 4096 /* events per device */

ICX_REAL_DECL(CUDART, cudaError_t, cudaEventCreateWithFlags, (cudaEvent_t *, unsigned));
ICX_REAL_DECL(CUDART, cudaError_t, cudaEventRecord, (cudaEvent_t, cudaStream_t));
ICX_REAL_DECL(CUDART, cudaError_t, cudaEventQuery, (cudaEvent_t));
ICX_REAL_DECL(CUDART, cudaError_t, cudaEventSynchronize, (cudaEvent_t));
ICX_REAL_DECL(CUDART, cudaError_t, cudaEventElapsedTime, (float *, cudaEvent_t, cudaEvent_t));
ICX_REAL_DECL(CUDART, cudaError_t, cudaStreamIsCapturing,
              (cudaStream_t, enum cudaStreamCaptureStatus *));
ICX_REAL_DECL(CUDART, cudaError_t, cudaThreadExchangeStreamCaptureMode,
              (enum cudaStreamCaptureMode *));
ICX_REAL_DECL(CUDART, cudaError_t, cudaSetDevice, (int));
ICX_REAL_DECL(CUDART, cudaError_t, cudaStreamCreateWithFlags, (cudaStream_t *, unsigned));

ICX_REAL_DECL(CUDART, cudaError_t, cudaGetDevice, (int *));
ICX_REAL_DECL(CUDART, cudaError_t, cudaStreamGetDevice, (cudaStream_t, int *));

static _Atomic uint32_t icx_next_copy_id = 1;

int icx_current_device(void)
{
    icx_real_cudaGetDevice_t g = ICX_REAL(cudaGetDevice);
    int d = -1;
    if (!g || g(&d) != cudaSuccess)
        return -1;
    return d;
}

int icx_stream_device(cudaStream_t s)
{
    if (s == 0 || s == cudaStreamLegacy || s == cudaStreamPerThread)
        return icx_current_device();
    icx_real_cudaStreamGetDevice_t g = ICX_REAL(cudaStreamGetDevice);
    int d = -1;
    if (g && g(s, &d) == cudaSuccess)
        return d;
    return icx_current_device();
}

int icx_gpu_sample_due(uint64_t now)
{
    switch (icx_cfg.gpu_timing) {
    case ICX_GPUT_ALL: icx_self.next_gpu_tick = 0; return 1;
    case ICX_GPUT_SAMPLE:
        icx_self.next_gpu_tick =
            now + (uint64_t)icx_cfg.gpu_sample_us *
                      atomic_load_explicit(&icx_ticks_per_us, memory_order_relaxed);
        return 1;
    default: icx_self.next_gpu_tick = UINT64_MAX; return 0;
    }
}

/* ---- event pool, per device (taken only on the sampled path) ---- */
/* The locks and counts apart from the events: start-up and fork touch one page, not one per
 * device (64 page faults were a tenth of a millisecond of every traced process's start).  A
 * device never has more than ICX_POOL_MAX of the tracer's events (`made`): past it a call goes
 * untimed, counted, until the writer has polled some back -- events are never leaked or
 * destroyed (a destroy could block on the device). */
struct icx_pool {
    pthread_mutex_t lock;
    int n, made;
    cudaEvent_t *ev; /* icx_pool_ev[device] */
};
static struct icx_pool icx_pools[ICX_MAX_DEV];
static cudaEvent_t icx_pool_ev[ICX_MAX_DEV][ICX_POOL_MAX];
/* Some device's pool ran dry at its cap: calls go untimed at once (no lock) and the writer has
 * been woken to poll its pending events back (icx_gpu_pending), which clears it.  icx_gpu_low:
 * a pool nearly empty with most of its cap made -- the writer is woken to poll before it runs
 * dry (between a job's bursts, not at its next flush). */
static _Atomic int icx_gpu_dry, icx_gpu_low;

/* Each thread keeps a few pairs of its last device's events, taken from the pool ICX_TCACHE
 * pairs under one lock: a timed call then takes none (the lock pair was half of its GPU-timing
 * cost).  A thread that exits keeps its cache: at most 2 x ICX_TCACHE events per thread that
 * timed something, counted in `made`. */
#define ICX_TCACHE 8
static ICX_TLS int icx_tc_dev = -1, icx_tc_n;
static ICX_TLS cudaEvent_t icx_tc_ev[2 * ICX_TCACHE];

static void icx_gpu_init(void)
{
    for (int i = 0; i < ICX_MAX_DEV; i++) {
        pthread_mutex_init(&icx_pools[i].lock, NULL);
        icx_pools[i].ev = icx_pool_ev[i];
    }
}

static void icx_pool_put(int dev, cudaEvent_t a, cudaEvent_t b)
{
    struct icx_pool *p = &icx_pools[dev];
    pthread_mutex_lock(&p->lock);
    p->ev[p->n++] = a; /* room: n <= made <= ICX_POOL_MAX */
    p->ev[p->n++] = b;
    pthread_mutex_unlock(&p->lock);
    if (atomic_load_explicit(&icx_gpu_dry, memory_order_relaxed))
        atomic_store_explicit(&icx_gpu_dry, 0, memory_order_relaxed);
}

/* The thread's cache goes back to its device's pool (a switch of device). */
static void icx_tc_flush(void)
{
    if (icx_tc_dev < 0 || !icx_tc_n)
        return;
    struct icx_pool *p = &icx_pools[icx_tc_dev];
    pthread_mutex_lock(&p->lock);
    while (icx_tc_n)
        p->ev[p->n++] = icx_tc_ev[--icx_tc_n];
    pthread_mutex_unlock(&p->lock);
}

/* Two new events of device `dev`, within its cap.  If the calling thread's current device
 * differs, it is switched for the creation and restored at once (the stream's device is one the
 * job uses, so no new context is ever made). */
static int icx_pool_make(int dev, cudaEvent_t *a, cudaEvent_t *b)
{
    struct icx_pool *p = &icx_pools[dev];
    pthread_mutex_lock(&p->lock);
    int room = p->made + 2 <= ICX_POOL_MAX;
    if (room)
        p->made += 2;
    pthread_mutex_unlock(&p->lock);
    if (!room) { /* the writer polls its pending events back at once, not at its next flush */
        if (!atomic_exchange_explicit(&icx_gpu_dry, 1, memory_order_relaxed))
            icx_writer_wake_pressure();
        return 0;
    }
    icx_real_cudaEventCreateWithFlags_t create = ICX_REAL(cudaEventCreateWithFlags);
    icx_real_cudaSetDevice_t set = ICX_REAL(cudaSetDevice);
    int cur = icx_current_device();
    if (!create || !set || cur < 0 || (cur != dev && set(dev) != cudaSuccess)) {
        icx_debug("gpu: cannot make events for device %d (current %d)\n", dev, cur);
        return 0; /* `made` keeps the two: creation failing means the device is in trouble */
    }
    int ok = create(a, cudaEventDefault) == cudaSuccess;
    if (ok && create(b, cudaEventDefault) != cudaSuccess)
        ok = 0; /* *a leaks, as above */
    if (cur != dev)
        set(cur);
    return ok;
}

/* Two events of device `dev`: from the thread's cache, refilled from the pool, else new. */
static int icx_pool_get(int dev, cudaEvent_t *a, cudaEvent_t *b)
{
    if (ICX_LIKELY(icx_tc_dev == dev && icx_tc_n >= 2)) {
        *a = icx_tc_ev[--icx_tc_n];
        *b = icx_tc_ev[--icx_tc_n];
        return 1;
    }
    if (atomic_load_explicit(&icx_gpu_dry, memory_order_relaxed))
        return 0; /* counted by the caller; the writer is refilling */
    icx_tc_flush();
    icx_tc_dev = dev;
    struct icx_pool *p = &icx_pools[dev];
    pthread_mutex_lock(&p->lock);
    while (p->n >= 2 && icx_tc_n < 2 * ICX_TCACHE) {
        icx_tc_ev[icx_tc_n++] = p->ev[--p->n];
        icx_tc_ev[icx_tc_n++] = p->ev[--p->n];
    }
    int low = p->n < ICX_POOL_MAX / 4 && p->made > ICX_POOL_MAX / 4 * 3;
    pthread_mutex_unlock(&p->lock);
    if (low && !atomic_exchange_explicit(&icx_gpu_low, 1, memory_order_relaxed))
        icx_writer_wake_pressure();
    if (icx_tc_n >= 2) {
        *a = icx_tc_ev[--icx_tc_n];
        *b = icx_tc_ev[--icx_tc_n];
        return 1;
    }
    return icx_pool_make(dev, a, b);
}

/* Span ids, taken by each thread ICX_ID_BLOCK at a time from the process-wide counter (one
 * shared cache line touched per block, not per call).  0 is never an id. */
#define ICX_ID_BLOCK 64
static ICX_TLS uint32_t icx_id_next, icx_id_left;

static uint32_t icx_new_copy_id(void)
{
    for (;;) {
        if (ICX_UNLIKELY(!icx_id_left)) {
            icx_id_next =
                atomic_fetch_add_explicit(&icx_next_copy_id, ICX_ID_BLOCK, memory_order_relaxed);
            icx_id_left = ICX_ID_BLOCK;
        }
        icx_id_left--;
        uint32_t id = icx_id_next++;
        if (id)
            return id;
    }
}

static int icx_gpu_begin_inner(struct icx_gpu_req *g, cudaStream_t stream);

int icx_gpu_begin(struct icx_gpu_req *g, cudaStream_t stream)
{
    int saved = errno;
    int rc = icx_gpu_begin_inner(g, stream);
    errno = saved;
    return rc;
}

static int icx_gpu_begin_inner(struct icx_gpu_req *g, cudaStream_t stream)
{
    icx_real_cudaStreamIsCapturing_t capturing = ICX_REAL(cudaStreamIsCapturing);
    icx_real_cudaEventRecord_t record = ICX_REAL(cudaEventRecord);
    if (!capturing || !record) {
        /* No libcudart in the process (NCCL links cudart statically; the job may too): nothing
         * to record events with.  Said once, not counted per call as an error. */
        static _Atomic int said;
        if (!atomic_exchange(&said, 1))
            icx_note(1, "no dynamic libcudart in the process: NCCL calls are not timed on the GPU "
                        "(NCCL and the job link cudart statically?)");
        return 0;
    }
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (capturing(stream, &st) != cudaSuccess || st != cudaStreamCaptureStatusNone) {
        icx_count_lost(ICX_LOST_gpu_timing_capture);
        return 0;
    }
    int dev = icx_stream_device(stream);
    if (dev < 0 || dev >= ICX_MAX_DEV) {
        icx_count_lost(ICX_LOST_gpu_timing_error);
        return 0;
    }
    if (!icx_pool_get(dev, &g->start, &g->end)) {
        icx_debug("gpu: no events for device %d\n", dev);
        icx_count_lost(ICX_LOST_gpu_timing_pool);
        return 0;
    }
    if (record(g->start, stream) != cudaSuccess) {
        icx_pool_put(dev, g->start, g->end);
        icx_count_lost(ICX_LOST_gpu_timing_error);
        return 0;
    }
    g->dev = dev;
    return 1;
}

static uint32_t icx_gpu_end_inner(struct icx_gpu_req *g, cudaStream_t stream, cudaError_t rc,
                                  uint32_t id);

void icx_gpu_end(struct icx_gpu_req *g, cudaStream_t stream, cudaError_t rc)
{
    icx_gpu_end_as(g, stream, rc, 0);
}

uint32_t icx_gpu_end_as(struct icx_gpu_req *g, cudaStream_t stream, cudaError_t rc, uint32_t id)
{
    int saved = errno;
    uint32_t got = icx_gpu_end_inner(g, stream, rc, id);
    errno = saved;
    return got;
}

static uint32_t icx_gpu_end_inner(struct icx_gpu_req *g, cudaStream_t stream, cudaError_t rc,
                                  uint32_t id)
{
    icx_real_cudaEventRecord_t record = ICX_REAL(cudaEventRecord);
    g->copy_id = 0;
    if (rc != cudaSuccess) {
        icx_pool_put(g->dev, g->start, g->end); /* nothing ran; nothing to time */
        return 0;
    }
    if (record(g->end, stream) != cudaSuccess) {
        icx_pool_put(g->dev, g->start, g->end);
        icx_count_lost(ICX_LOST_gpu_timing_error);
        return 0;
    }
    struct icx_slot slot;
    struct icx_ring_gpu_pending *r = icx_reserve(sizeof(*r), &slot);
    if (!r) { /* counted as buffer_full; the events are free again once the GPU passes them */
        icx_pool_put(g->dev, g->start, g->end);
        return 0;
    }
    g->copy_id = id ? id : icx_new_copy_id();
    r->h.type = ICX_RING_GPU_PENDING;
    r->h.size = sizeof(*r);
    r->h.aux = 0;
    r->copy_id = g->copy_id;
    r->dev = g->dev;
    r->start = g->start;
    r->end = g->end;
    icx_commit(&slot);
    return g->copy_id;
}

/* ---- writer side ---- */
struct icx_pending {
    uint32_t copy_id;
    int dev;
    cudaEvent_t start, end;
    uint64_t since_ns; /* when the writer took it over */
};
static struct icx_pending *icx_pend;
static size_t icx_pend_n, icx_pend_cap;

struct icx_anchor {
    int ok;
    cudaStream_t stream;
    cudaEvent_t ev;
    uint64_t host_ns;
};
static struct icx_anchor icx_anchors[ICX_MAX_DEV];
static int icx_writer_cuda_ready;

static void icx_gpu_pending(struct icx_frame *f, const struct icx_rec *r)
{
    (void)f;
    const struct icx_ring_gpu_pending *p = (const struct icx_ring_gpu_pending *)r;
    if (icx_pend_n == icx_pend_cap) {
        size_t ncap = icx_pend_cap ? icx_pend_cap * 2 : 256;
        struct icx_pending *n = realloc(icx_pend, ncap * sizeof(*n));
        if (!n) {
            icx_count_lost(ICX_LOST_gpu_timing_error);
            icx_pool_put(p->dev, p->start, p->end);
            return;
        }
        icx_pend = n;
        icx_pend_cap = ncap;
    }
    icx_pend[icx_pend_n++] =
        (struct icx_pending){p->copy_id, p->dev, p->start, p->end, icx_writer_drain_ns()};
}

uint64_t icx_gpu_oldest_pending(uint32_t *copy_id)
{
    uint64_t oldest = 0;
    for (size_t i = 0; i < icx_pend_n; i++)
        if (!oldest || icx_pend[i].since_ns < oldest) {
            oldest = icx_pend[i].since_ns;
            *copy_id = icx_pend[i].copy_id;
        }
    return oldest;
}

/* The writer thread polls in relaxed capture mode: its queries can then never invalidate a graph
 * capture that a job thread runs in global mode. */
static int icx_writer_cuda_init(void)
{
    if (icx_writer_cuda_ready)
        return 1;
    icx_real_cudaThreadExchangeStreamCaptureMode_t xchg =
        ICX_REAL(cudaThreadExchangeStreamCaptureMode);
    if (!xchg)
        return 0;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    if (xchg(&mode) != cudaSuccess)
        return 0;
    icx_writer_cuda_ready = 1;
    return 1;
}

/* (Re)anchor device `dev`: an event recorded on a private non-blocking stream, bracketed by two
 * host clock reads.  Only for devices that already have pending work from the job. */
static int icx_anchor(int dev)
{
    struct icx_anchor *a = &icx_anchors[dev];
    icx_real_cudaSetDevice_t set = ICX_REAL(cudaSetDevice);
    icx_real_cudaEventCreateWithFlags_t create = ICX_REAL(cudaEventCreateWithFlags);
    icx_real_cudaStreamCreateWithFlags_t screate = ICX_REAL(cudaStreamCreateWithFlags);
    icx_real_cudaEventRecord_t record = ICX_REAL(cudaEventRecord);
    icx_real_cudaEventSynchronize_t sync = ICX_REAL(cudaEventSynchronize);
    if (!set || !create || !screate || !record || !sync || set(dev) != cudaSuccess)
        return 0;
    if (!a->stream && screate(&a->stream, cudaStreamNonBlocking) != cudaSuccess)
        return 0;
    if (!a->ev && create(&a->ev, cudaEventDefault) != cudaSuccess)
        return 0;
    uint64_t t0 = icx_mono_ns();
    if (record(a->ev, a->stream) != cudaSuccess || sync(a->ev) != cudaSuccess)
        return 0;
    uint64_t t1 = icx_mono_ns();
    a->host_ns = t0 + (t1 - t0) / 2;
    a->ok = 1;
    return 1;
}

/* Milliseconds from event a to event b, either order. */
static int icx_elapsed(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    icx_real_cudaEventElapsedTime_t el = ICX_REAL(cudaEventElapsedTime);
    if (!el)
        return 0;
    if (el(ms, a, b) == cudaSuccess)
        return 1;
    if (el(ms, b, a) == cudaSuccess) {
        *ms = -*ms;
        return 1;
    }
    return 0;
}

static void icx_poll_pending(struct icx_frame *f)
{
    icx_real_cudaEventQuery_t query = ICX_REAL(cudaEventQuery);
    int busy[ICX_MAX_DEV] = {0};
    size_t keep = 0;
    for (size_t i = 0; i < icx_pend_n; i++) {
        struct icx_pending *p = &icx_pend[i];
        cudaError_t q = query ? query(p->end) : cudaErrorUnknown;
        if (q == cudaErrorNotReady) {
            busy[p->dev] = 1;
            icx_pend[keep++] = *p;
            continue;
        }
        float off_ms, dur_ms;
        if (q == cudaSuccess && (icx_anchors[p->dev].ok || icx_anchor(p->dev)) &&
            icx_elapsed(&off_ms, icx_anchors[p->dev].ev, p->start) &&
            icx_elapsed(&dur_ms, p->start, p->end)) {
            struct icx_rec_gpu_span *s =
                icx_frame_put(f, ICX_REC_GPU_SPAN, (uint32_t)p->dev, sizeof(*s));
            if (s) {
                int64_t start = (int64_t)icx_anchors[p->dev].host_ns + (int64_t)(off_ms * 1e6);
                s->copy_id = p->copy_id;
                s->start_ns = (uint64_t)start;
                s->end_ns = (uint64_t)(start + (int64_t)(dur_ms * 1e6));
            }
        } else {
            icx_count_lost(ICX_LOST_gpu_timing_error);
        }
        icx_pool_put(p->dev, p->start, p->end);
    }
    icx_pend_n = keep;
    /* Re-anchor idle devices so float milliseconds never lose precision over a long run. */
    for (int d = 0; d < ICX_MAX_DEV; d++)
        if (icx_anchors[d].ok && !busy[d] && icx_mono_ns() - icx_anchors[d].host_ns > 1000000000ull)
            icx_anchor(d);
}

/* The trace ends with work still queued or running (a hang, a kill): say how far each got -- the
 * post-mortem's evidence of which collective a rank was inside, and which were only queued. */
static void icx_write_unfinished(struct icx_frame *f)
{
    icx_real_cudaEventQuery_t query = ICX_REAL(cudaEventQuery);
    for (size_t i = 0; i < icx_pend_n; i++) {
        struct icx_pending *p = &icx_pend[i];
        float off_ms;
        int started = query && query(p->start) == cudaSuccess &&
                      (icx_anchors[p->dev].ok || icx_anchor(p->dev)) &&
                      icx_elapsed(&off_ms, icx_anchors[p->dev].ev, p->start);
        struct icx_rec_gpu_span *s =
            icx_frame_put(f, ICX_REC_GPU_SPAN, (uint32_t)p->dev, sizeof(*s));
        if (!s) {
            icx_count_lost(ICX_LOST_gpu_timing_error);
            continue;
        }
        s->copy_id = p->copy_id;
        s->flags = ICX_SPAN_NO_END | (started ? 0 : ICX_SPAN_NO_START);
        s->start_ns =
            started ? (uint64_t)((int64_t)icx_anchors[p->dev].host_ns + (int64_t)(off_ms * 1e6))
                    : 0;
        s->end_ns = 0;
    }
    icx_pend_n = 0; /* the events stay with the device: it may still be using them */
}

/* After every drain of the rings, a flush's or a ring's pressure's: when a pool runs low or ran
 * dry, or many spans wait, poll now -- the events come back while a fast job still runs, not at
 * the next flush. */
static void icx_gpu_drain_end(struct icx_frame *f)
{
    if (icx_pend_n &&
        (atomic_load_explicit(&icx_gpu_dry, memory_order_relaxed) ||
         atomic_load_explicit(&icx_gpu_low, memory_order_relaxed) ||
         icx_pend_n >= ICX_POOL_MAX / 8) &&
        icx_writer_cuda_init()) {
        atomic_store_explicit(&icx_gpu_low, 0, memory_order_relaxed);
        icx_poll_pending(f);
    }
}

static void icx_gpu_tick(struct icx_frame *f, enum icx_tick_kind kind)
{
    if (icx_pend_n && icx_writer_cuda_init()) {
        icx_poll_pending(f);
        /* At exit, give work still in flight a moment to land (bounded). */
        for (int i = 0; kind == ICX_TICK_EXIT && icx_pend_n && i < 50; i++) {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
            icx_poll_pending(f);
        }
    }
    if (kind != ICX_TICK_PERIODIC && icx_pend_n)
        icx_write_unfinished(f);
}

static void icx_gpu_fork_prepare(void)
{
    for (int i = 0; i < ICX_MAX_DEV; i++)
        pthread_mutex_lock(&icx_pools[i].lock);
}

static void icx_gpu_fork_parent(void)
{
    for (int i = ICX_MAX_DEV - 1; i >= 0; i--)
        pthread_mutex_unlock(&icx_pools[i].lock);
}

/* The parent's pooled events and pending spans belong to the parent's CUDA context and stream:
 * the child starts empty. */
static void icx_gpu_fork_child(void)
{
    for (int i = 0; i < ICX_MAX_DEV; i++) {
        pthread_mutex_init(&icx_pools[i].lock, NULL);
        icx_pools[i].n = icx_pools[i].made = 0;
    }
    icx_tc_dev = -1; /* the one thread here is the one that forked: its cache is the parent's */
    icx_tc_n = 0;
    icx_pend_n = 0;
}

const struct icx_module icx_mod_gpu = {
    .name = "gpu",
    .init = icx_gpu_init,
    .ring_type = ICX_RING_GPU_PENDING,
    .ring_record = icx_gpu_pending,
    .drain_end = icx_gpu_drain_end,
    .tick = icx_gpu_tick,
    .fork_prepare = icx_gpu_fork_prepare,
    .fork_parent = icx_gpu_fork_parent,
    .fork_child = icx_gpu_fork_child,
};
