/* Simulated libcudart.so.13: an ABI-faithful double of the CUDA runtime subset icxtrace's tests and
 * demo use, compiled against the real cuda_runtime_api.h.  N devices from a topology file; device
 * memory is host memory (so pointers are unique, as under UVA); every stream is a worker thread
 * that really moves the bytes.  Device time is a virtual clock on CLOCK_MONOTONIC: each operation
 * starts when its stream and its link are free and lasts latency + bytes / link rate, so events and
 * cudaEventElapsedTime report exactly what the link model says, whatever the host's memcpy speed;
 * synchronizing calls do not return before that device time has passed.
 * Simplifications (documented in docs/SIMULATION.md): the per-thread default stream is the device's
 * legacy stream, and the legacy stream does not implicitly synchronize with other streams. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "counters.h"
#include "topo_file.h"

#define SIM_API __attribute__((visibility("default")))

/* The per-thread-stream entry points, declared by the header only under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM; the real library exports them all. */
SIM_API cudaError_t cudaMemcpy_ptds(void *, const void *, size_t, enum cudaMemcpyKind);
SIM_API cudaError_t cudaMemcpyAsync_ptsz(void *, const void *, size_t, enum cudaMemcpyKind,
                                         cudaStream_t);
SIM_API cudaError_t cudaMallocAsync_ptsz(void **, size_t, cudaStream_t);
SIM_API cudaError_t cudaFreeAsync_ptsz(void *, cudaStream_t);
SIM_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t);
SIM_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t, enum cudaStreamCaptureStatus *);
SIM_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t, enum cudaStreamCaptureMode);
SIM_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t, cudaGraph_t *);
SIM_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t, cudaStream_t);
SIM_API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t, cudaHostFn_t, void *);

/* ---- global state ---- */
static struct sim_topo topo;
static pthread_once_t sim_once = PTHREAD_ONCE_INIT;
static int sim_ok;
static pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;   /* timing, allocations, captures */
static pthread_cond_t sim_cond = PTHREAD_COND_INITIALIZER;     /* any op finished */
static uint64_t link_free[SIM_MAX_GPUS + 1][SIM_MAX_GPUS + 1]; /* index ngpus.. = host */
static int global_captures; /* streams capturing in global mode */

static __thread int cur_dev;
static __thread cudaError_t last_error;
static __thread enum cudaStreamCaptureMode thread_capture_mode = cudaStreamCaptureModeGlobal;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
    struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static struct sim_counters *sim_nvlink_counters; /* what the simulated NVML reports */

static void sim_init(void)
{
    sim_ok = sim_topo_load(&topo) == 0;
    sim_nvlink_counters = sim_counters_map();
}

static cudaError_t ret(cudaError_t e)
{
    if (e != cudaSuccess && e != cudaErrorNotReady)
        last_error = e;
    return e;
}

#define SIM_ENTER()                                                                                \
    do {                                                                                           \
        pthread_once(&sim_once, sim_init);                                                         \
        if (!sim_ok)                                                                               \
            return ret(cudaErrorInitializationError);                                              \
    } while (0)

/* ---- allocations ---- */
struct sim_alloc {
    uintptr_t lo, hi;
    int dev; /* -1: pinned host memory */
};
static struct sim_alloc *allocs;
static size_t nallocs, allocs_cap;

static void alloc_add(void *p, size_t n, int dev)
{
    pthread_mutex_lock(&sim_lock);
    if (nallocs == allocs_cap) {
        allocs_cap = allocs_cap ? allocs_cap * 2 : 64;
        allocs = realloc(allocs, allocs_cap * sizeof(*allocs));
    }
    allocs[nallocs++] = (struct sim_alloc){(uintptr_t)p, (uintptr_t)p + (n ? n : 1), dev};
    pthread_mutex_unlock(&sim_lock);
}

static int alloc_remove(void *p, int want_dev_mem)
{
    int found = 0;
    pthread_mutex_lock(&sim_lock);
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i].lo == (uintptr_t)p && ((allocs[i].dev >= 0) == want_dev_mem)) {
            allocs[i] = allocs[--nallocs];
            found = 1;
            break;
        }
    pthread_mutex_unlock(&sim_lock);
    return found;
}

/* 1 and the device (-1 pinned host) when [p, p+n) lies in one allocation; 0 otherwise. */
static int alloc_find(const void *p, size_t n, int *dev)
{
    int found = 0;
    pthread_mutex_lock(&sim_lock);
    for (size_t i = 0; i < nallocs; i++)
        if ((uintptr_t)p >= allocs[i].lo && (uintptr_t)p + n <= allocs[i].hi) {
            *dev = allocs[i].dev;
            found = 1;
            break;
        }
    pthread_mutex_unlock(&sim_lock);
    return found;
}

/* ---- streams ---- */
enum op_kind { OP_COPY, OP_SET, OP_EVENT, OP_HOST };
struct sim_event {
    int dev;
    unsigned flags;
    uint64_t time_v;
    uint64_t record_gen, done_gen;
    int captured;
};
struct sim_op {
    enum op_kind kind;
    void *dst;
    const void *src;
    size_t n;
    int value;
    struct sim_event *ev;
    cudaHostFn_t fn; /* OP_HOST */
    void *arg;
    uint64_t gen;
    int src_dev, dst_dev; /* for NVLink counters: both >= 0 and different for peer copies */
    uint64_t end_v;       /* virtual end: the worker does not finish before it */
    struct sim_op *next;
};
struct CUstream_st {
    int dev;
    unsigned flags;
    pthread_t worker;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct sim_op *head, *tail;
    uint64_t enqueued, done;
    uint64_t last_end; /* virtual end of the last op (under sim_lock) */
    int capturing;
    enum cudaStreamCaptureMode capture_mode;
    int capture_invalid;
    unsigned captured_ops;
    int stop;
};
static struct CUstream_st *legacy[SIM_MAX_GPUS];

static void *worker_main(void *arg)
{
    struct CUstream_st *s = arg;
    /* The "device" runs on host CPUs here; on real hardware it does not compete with the host
     * threads.  SCHED_IDLE keeps the simulated copies from preempting the job's threads. */
    struct sched_param sp = {0};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
    uint64_t host_end = 0; /* when the last host function finished */
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head)
            break;
        struct sim_op *op = s->head;
        pthread_mutex_unlock(&s->mu);
        if (op->kind == OP_COPY) {
            memmove(op->dst, op->src, op->n);
            /* Where the host is faster than the modelled link, finish on the device's time, so
             * the counters below grow at the model's rate. */
            sleep_until(op->end_v);
            /* Peer copies over NVLink count on the links' hardware counters. */
            if (op->src_dev >= 0 && op->dst_dev >= 0 && op->src_dev != op->dst_dev)
                sim_counters_add(sim_nvlink_counters, op->src_dev, op->dst_dev,
                                 sim_topo_lanes(&topo, op->src_dev, op->dst_dev), op->n);
        } else if (op->kind == OP_SET)
            memset(op->dst, op->value, op->n);
        else if (op->kind == OP_HOST)
            op->fn(op->arg);
        pthread_mutex_lock(&sim_lock);
        if (op->kind == OP_HOST) {
            /* A host function has no modelled duration: what follows starts when it returned. */
            host_end = now_ns();
            if (s->last_end < host_end)
                s->last_end = host_end;
        }
        if (op->kind == OP_EVENT && op->ev->record_gen == op->gen) {
            if (op->ev->time_v < host_end) /* recorded while a host function still ran */
                op->ev->time_v = host_end;
            op->ev->done_gen = op->gen;
        }
        pthread_cond_broadcast(&sim_cond);
        pthread_mutex_unlock(&sim_lock);
        pthread_mutex_lock(&s->mu);
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        s->done++;
        pthread_cond_broadcast(&s->cv);
        free(op);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static struct CUstream_st *stream_new(int dev, unsigned flags)
{
    struct CUstream_st *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->dev = dev;
    s->flags = flags;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

/* Resolve a user handle: 0, cudaStreamLegacy and cudaStreamPerThread are the current device's
 * legacy stream. */
static struct CUstream_st *stream_of(cudaStream_t h)
{
    if (h == 0 || h == cudaStreamLegacy || h == cudaStreamPerThread) {
        pthread_mutex_lock(&sim_lock);
        if (!legacy[cur_dev])
            legacy[cur_dev] = stream_new(cur_dev, 0);
        struct CUstream_st *s = legacy[cur_dev];
        pthread_mutex_unlock(&sim_lock);
        return s;
    }
    return h;
}

static int is_legacy(cudaStream_t h)
{
    return h == 0 || h == cudaStreamLegacy || h == cudaStreamPerThread;
}

/* A call that is illegal during a global-mode capture, made from a thread in global mode, breaks
 * every such capture, as the real runtime does. */
static int unsafe_during_capture(void)
{
    pthread_mutex_lock(&sim_lock);
    int broke = global_captures && thread_capture_mode != cudaStreamCaptureModeRelaxed;
    pthread_mutex_unlock(&sim_lock);
    return broke;
}

static struct CUstream_st *capturing_list[256];
static int ncapturing;

static void invalidate_captures(void)
{
    pthread_mutex_lock(&sim_lock);
    for (int i = 0; i < ncapturing; i++)
        if (capturing_list[i]->capture_mode == cudaStreamCaptureModeGlobal)
            capturing_list[i]->capture_invalid = 1;
    pthread_mutex_unlock(&sim_lock);
}

static cudaError_t check_unsafe(void)
{
    if (unsafe_during_capture()) {
        invalidate_captures();
        return cudaErrorStreamCaptureUnsupported;
    }
    return cudaSuccess;
}

static int host_idx(int dev)
{
    return dev < 0 ? topo.ngpus : dev;
}

/* Enqueue an op with its virtual timing.  src_dev/dst_dev: -1 host. */
static cudaError_t enqueue(struct CUstream_st *s, struct sim_op *op, int src_dev, int dst_dev)
{
    if (s->capturing) {
        s->captured_ops++;
        if (op->kind == OP_EVENT)
            op->ev->captured = 1;
        free(op);
        return cudaSuccess;
    }
    pthread_mutex_lock(&sim_lock);
    uint64_t t = now_ns();
    if (s->last_end > t)
        t = s->last_end;
    if (op->kind == OP_EVENT) {
        op->gen = ++op->ev->record_gen;
        op->ev->time_v = t;
        op->ev->captured = 0;
    } else if (op->kind == OP_HOST) {
        /* no virtual duration: the worker moves last_end when the function returns */
    } else {
        uint64_t *lf = &link_free[host_idx(src_dev)][host_idx(dst_dev)];
        if (*lf > t)
            t = *lf;
        double rate = sim_topo_rate(&topo, src_dev, dst_dev);
        uint64_t dur = (uint64_t)(topo.latency_us * 1e3 + (double)op->n / rate * 1e9);
        t += dur;
        *lf = t;
        op->end_v = t;
    }
    s->last_end = t;
    pthread_mutex_unlock(&sim_lock);
    pthread_mutex_lock(&s->mu);
    op->next = NULL;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    s->enqueued++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return cudaSuccess;
}

static void stream_wait(struct CUstream_st *s);

/* Enqueue a copy or memset and, for the synchronous API calls, wait until it is done. */
static cudaError_t submit(struct CUstream_st *s, struct sim_op *op, int src_dev, int dst_dev,
                          int sync)
{
    enqueue(s, op, src_dev, dst_dev);
    if (sync)
        stream_wait(s);
    return cudaSuccess;
}

static void stream_wait(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t target = s->enqueued;
    while (s->done < target)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&sim_lock);
    uint64_t end = s->last_end;
    pthread_mutex_unlock(&sim_lock);
    sleep_until(end);
}

/* ---- copies ---- */

static cudaError_t copy_common(void *dst, const void *src, size_t n, int sdev, int ddev,
                               cudaStream_t h, int sync)
{
    if (n == 0)
        return cudaSuccess;
    struct CUstream_st *s = stream_of(h);
    if (!s)
        return ret(cudaErrorMemoryAllocation);
    if (sync) {
        cudaError_t e = check_unsafe();
        if (e)
            return ret(e);
    }
    struct sim_op *op = calloc(1, sizeof(*op));
    if (!op)
        return ret(cudaErrorMemoryAllocation);
    op->kind = OP_COPY;
    op->dst = dst;
    op->src = src;
    op->n = n;
    op->src_dev = sdev;
    op->dst_dev = ddev;
    return submit(s, op, sdev, ddev, sync);
}

/* Classify both ends of a cudaMemcpy*; host memory that we did not allocate is fine for host ends.
 */
static cudaError_t classify(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            int *sdev, int *ddev)
{
    int sd = -1, dd = -1;
    int sfound = alloc_find(src, n, &sd), dfound = alloc_find(dst, n, &dd);
    if (!sfound)
        sd = -1;
    if (!dfound)
        dd = -1;
    switch (kind) {
    case cudaMemcpyHostToHost: sd = dd = -1; break;
    case cudaMemcpyHostToDevice:
        if (dd < 0)
            return cudaErrorInvalidValue;
        sd = -1;
        break;
    case cudaMemcpyDeviceToHost:
        if (sd < 0)
            return cudaErrorInvalidValue;
        dd = -1;
        break;
    case cudaMemcpyDeviceToDevice:
        if (sd < 0 || dd < 0)
            return cudaErrorInvalidValue;
        break;
    case cudaMemcpyDefault: break;
    default: return cudaErrorInvalidMemcpyDirection;
    }
    *sdev = sd;
    *ddev = dd;
    return cudaSuccess;
}

static cudaError_t memcpy_impl(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                               cudaStream_t h, int sync)
{
    SIM_ENTER();
    int sd, dd;
    cudaError_t e = classify(dst, src, n, kind, &sd, &dd);
    if (e)
        return ret(e);
    return copy_common(dst, src, n, sd, dd, h, sync);
}

SIM_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    return memcpy_impl(dst, src, n, kind, 0, 1);
}
SIM_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    return memcpy_impl(dst, src, n, kind, cudaStreamPerThread, 1);
}
SIM_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                    cudaStream_t s)
{
    return memcpy_impl(dst, src, n, kind, s, 0);
}
SIM_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n,
                                         enum cudaMemcpyKind kind, cudaStream_t s)
{
    return memcpy_impl(dst, src, n, kind, s ? s : cudaStreamPerThread, 0);
}

static cudaError_t peer_impl(void *dst, int ddev, const void *src, int sdev, size_t n,
                             cudaStream_t h, int sync)
{
    SIM_ENTER();
    int d1, d2;
    if (sdev < 0 || sdev >= topo.ngpus || ddev < 0 || ddev >= topo.ngpus)
        return ret(cudaErrorInvalidDevice);
    if (n && (!alloc_find(src, n, &d1) || d1 != sdev || !alloc_find(dst, n, &d2) || d2 != ddev))
        return ret(cudaErrorInvalidValue);
    return copy_common(dst, src, n, sdev, ddev, h, sync);
}

/* Row by row; tight pitches (the common case in tests) as one copy. */
SIM_API cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                                 size_t width, size_t height, enum cudaMemcpyKind kind)
{
    SIM_ENTER();
    if (dpitch < width || spitch < width)
        return ret(cudaErrorInvalidPitchValue);
    if (dpitch == width && spitch == width)
        return memcpy_impl(dst, src, width * height, kind, 0, 1);
    for (size_t r = 0; r < height; r++) {
        cudaError_t e = memcpy_impl((char *)dst + r * dpitch, (const char *)src + r * spitch, width,
                                    kind, 0, 1);
        if (e)
            return e;
    }
    return cudaSuccess;
}

SIM_API cudaError_t cudaMemcpyPeer(void *dst, int ddev, const void *src, int sdev, size_t n)
{
    return peer_impl(dst, ddev, src, sdev, n, 0, 1);
}
SIM_API cudaError_t cudaMemcpyPeerAsync(void *dst, int ddev, const void *src, int sdev, size_t n,
                                        cudaStream_t s)
{
    return peer_impl(dst, ddev, src, sdev, n, s, 0);
}

static cudaError_t memset_impl(void *p, int v, size_t n, cudaStream_t h, int sync)
{
    SIM_ENTER();
    int dev;
    if (!alloc_find(p, n, &dev) || dev < 0)
        return ret(cudaErrorInvalidValue);
    struct CUstream_st *s = stream_of(h);
    struct sim_op *op = calloc(1, sizeof(*op));
    if (!s || !op)
        return ret(cudaErrorMemoryAllocation);
    op->kind = OP_SET;
    op->dst = p;
    op->n = n;
    op->value = v;
    return submit(s, op, dev, dev, sync);
}
SIM_API cudaError_t cudaMemset(void *p, int v, size_t n)
{
    return memset_impl(p, v, n, 0, 1);
}
SIM_API cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    return memset_impl(p, v, n, s, 0);
}

/* ---- memory ---- */

static cudaError_t malloc_impl(void **p, size_t n, int dev)
{
    SIM_ENTER();
    if (!p)
        return ret(cudaErrorInvalidValue);
    cudaError_t e = check_unsafe();
    if (e)
        return ret(e);
    void *m = NULL;
    if (posix_memalign(&m, 256, n ? n : 1) != 0)
        return ret(cudaErrorMemoryAllocation);
    alloc_add(m, n, dev);
    *p = m;
    return cudaSuccess;
}
SIM_API cudaError_t cudaMalloc(void **p, size_t n)
{
    return malloc_impl(p, n, cur_dev);
}
SIM_API cudaError_t cudaFree(void *p)
{
    SIM_ENTER();
    if (!p)
        return cudaSuccess;
    for (int d = 0; d < topo.ngpus; d++) /* cudaFree synchronizes the device */
        if (legacy[d])
            stream_wait(legacy[d]);
    if (!alloc_remove(p, 1))
        return ret(cudaErrorInvalidValue);
    free(p);
    return cudaSuccess;
}
SIM_API cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s)
{
    struct CUstream_st *st = stream_of(s);
    return malloc_impl(p, n, st ? st->dev : cur_dev);
}
SIM_API cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s)
{
    return cudaMallocAsync(p, n, s);
}
SIM_API cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
    SIM_ENTER();
    struct CUstream_st *st = stream_of(s);
    if (st)
        stream_wait(st); /* simple: the free happens once the stream is done */
    if (!alloc_remove(p, 1))
        return ret(cudaErrorInvalidValue);
    free(p);
    return cudaSuccess;
}
SIM_API cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s)
{
    return cudaFreeAsync(p, s);
}
SIM_API cudaError_t cudaMallocHost(void **p, size_t n)
{
    SIM_ENTER();
    void *m = NULL;
    if (!p || posix_memalign(&m, 4096, n ? n : 1) != 0)
        return ret(cudaErrorMemoryAllocation);
    memset(m, 0, n); /* pinned memory is resident, as cudaHostAlloc's is */
    alloc_add(m, n, -1);
    *p = m;
    return cudaSuccess;
}
SIM_API cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags)
{
    (void)flags;
    return cudaMallocHost(p, n);
}
SIM_API cudaError_t cudaFreeHost(void *p)
{
    SIM_ENTER();
    if (!alloc_remove(p, 0))
        return ret(cudaErrorInvalidValue);
    free(p);
    return cudaSuccess;
}

SIM_API cudaError_t cudaHostRegister(void *p, size_t n, unsigned flags)
{
    SIM_ENTER();
    (void)flags;
    if (!p || !n)
        return ret(cudaErrorInvalidValue);
    alloc_add(p, n, -1);
    return cudaSuccess;
}
SIM_API cudaError_t cudaHostUnregister(void *p)
{
    SIM_ENTER();
    return alloc_remove(p, 0) ? cudaSuccess : ret(cudaErrorHostMemoryNotRegistered);
}

SIM_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
    SIM_ENTER();
    if (!a)
        return ret(cudaErrorInvalidValue);
    memset(a, 0, sizeof(*a));
    int dev;
    if (alloc_find(p, 1, &dev)) {
        a->type = dev >= 0 ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
        a->device = dev >= 0 ? dev : 0;
        a->devicePointer = (void *)p;
        a->hostPointer = dev >= 0 ? NULL : (void *)p;
    } else {
        a->type = cudaMemoryTypeUnregistered;
        a->device = -2;
        a->hostPointer = (void *)p;
    }
    return cudaSuccess;
}

/* ---- devices ---- */

SIM_API cudaError_t cudaGetDeviceCount(int *n)
{
    SIM_ENTER();
    *n = topo.ngpus;
    return cudaSuccess;
}
SIM_API cudaError_t cudaSetDevice(int d)
{
    SIM_ENTER();
    if (d < 0 || d >= topo.ngpus)
        return ret(cudaErrorInvalidDevice);
    cur_dev = d;
    return cudaSuccess;
}
SIM_API cudaError_t cudaGetDevice(int *d)
{
    SIM_ENTER();
    *d = cur_dev;
    return cudaSuccess;
}
SIM_API cudaError_t cudaDeviceGetPCIBusId(char *buf, int len, int d)
{
    SIM_ENTER();
    if (d < 0 || d >= topo.ngpus)
        return ret(cudaErrorInvalidDevice);
    if (!buf || len < 13)
        return ret(cudaErrorInvalidValue);
    snprintf(buf, (size_t)len, "%s", topo.gpu[d].bus);
    return cudaSuccess;
}
SIM_API cudaError_t cudaDeviceCanAccessPeer(int *can, int d, int peer)
{
    SIM_ENTER();
    if (d < 0 || d >= topo.ngpus || peer < 0 || peer >= topo.ngpus)
        return ret(cudaErrorInvalidDevice);
    *can = d != peer;
    return cudaSuccess;
}
static int peer_enabled[SIM_MAX_GPUS][SIM_MAX_GPUS];
SIM_API cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags)
{
    SIM_ENTER();
    if (flags || peer < 0 || peer >= topo.ngpus || peer == cur_dev)
        return ret(cudaErrorInvalidDevice);
    if (peer_enabled[cur_dev][peer])
        return ret(cudaErrorPeerAccessAlreadyEnabled);
    peer_enabled[cur_dev][peer] = 1;
    return cudaSuccess;
}
SIM_API cudaError_t cudaDeviceSynchronize(void)
{
    SIM_ENTER();
    cudaError_t e = check_unsafe();
    if (e)
        return ret(e);
    if (legacy[cur_dev])
        stream_wait(legacy[cur_dev]);
    return cudaSuccess;
}
SIM_API cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}
SIM_API cudaError_t cudaDriverGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}
SIM_API cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
SIM_API cudaError_t cudaPeekAtLastError(void)
{
    return last_error;
}
SIM_API const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    default: return "cudaErrorUnknown";
    }
}
SIM_API const char *cudaGetErrorString(cudaError_t e)
{
    return cudaGetErrorName(e);
}

/* ---- streams ---- */

SIM_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *p, unsigned flags)
{
    SIM_ENTER();
    struct CUstream_st *s = stream_new(cur_dev, flags);
    if (!s)
        return ret(cudaErrorMemoryAllocation);
    *p = s;
    return cudaSuccess;
}
SIM_API cudaError_t cudaStreamCreate(cudaStream_t *p)
{
    return cudaStreamCreateWithFlags(p, cudaStreamDefault);
}
SIM_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *p, unsigned flags, int prio)
{
    (void)prio;
    return cudaStreamCreateWithFlags(p, flags);
}
SIM_API cudaError_t cudaStreamDestroy(cudaStream_t h)
{
    SIM_ENTER();
    if (is_legacy(h))
        return ret(cudaErrorInvalidResourceHandle);
    struct CUstream_st *s = h;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->worker, NULL);
    free(s);
    return cudaSuccess;
}
SIM_API cudaError_t cudaStreamSynchronize(cudaStream_t h)
{
    SIM_ENTER();
    cudaError_t e = check_unsafe();
    if (e)
        return ret(e);
    stream_wait(stream_of(h));
    return cudaSuccess;
}
SIM_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t h)
{
    return cudaStreamSynchronize(h);
}
/* Runs fn(arg) on the stream's worker, in order with the stream's other work, like the real
 * runtime's host nodes (the function must not call CUDA). */
SIM_API cudaError_t cudaLaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void *arg)
{
    SIM_ENTER();
    struct CUstream_st *s = stream_of(h);
    if (!s || !fn)
        return ret(cudaErrorInvalidValue);
    struct sim_op *op = calloc(1, sizeof(*op));
    if (!op)
        return ret(cudaErrorMemoryAllocation);
    op->kind = OP_HOST;
    op->fn = fn;
    op->arg = arg;
    return enqueue(s, op, s->dev, s->dev);
}
SIM_API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t h, cudaHostFn_t fn, void *arg)
{
    return cudaLaunchHostFunc(h, fn, arg);
}
SIM_API cudaError_t cudaStreamGetDevice(cudaStream_t h, int *dev)
{
    SIM_ENTER();
    *dev = stream_of(h)->dev;
    return cudaSuccess;
}

/* ---- graph capture (enough to test that a tracer stays out of captures) ---- */

SIM_API cudaError_t cudaStreamBeginCapture(cudaStream_t h, enum cudaStreamCaptureMode mode)
{
    SIM_ENTER();
    if (is_legacy(h))
        return ret(cudaErrorStreamCaptureUnsupported);
    struct CUstream_st *s = h;
    pthread_mutex_lock(&sim_lock);
    if (s->capturing || ncapturing == 256) {
        pthread_mutex_unlock(&sim_lock);
        return ret(cudaErrorIllegalState);
    }
    s->capturing = 1;
    s->capture_mode = mode;
    s->capture_invalid = 0;
    s->captured_ops = 0;
    capturing_list[ncapturing++] = s;
    if (mode == cudaStreamCaptureModeGlobal)
        global_captures++;
    pthread_mutex_unlock(&sim_lock);
    return cudaSuccess;
}

struct CUgraph_st {
    unsigned nodes;
};

SIM_API cudaError_t cudaStreamEndCapture(cudaStream_t h, cudaGraph_t *graph)
{
    SIM_ENTER();
    struct CUstream_st *s = h;
    if (is_legacy(h) || !s->capturing)
        return ret(cudaErrorIllegalState);
    pthread_mutex_lock(&sim_lock);
    s->capturing = 0;
    for (int i = 0; i < ncapturing; i++)
        if (capturing_list[i] == s) {
            capturing_list[i] = capturing_list[--ncapturing];
            break;
        }
    if (s->capture_mode == cudaStreamCaptureModeGlobal)
        global_captures--;
    int invalid = s->capture_invalid;
    pthread_mutex_unlock(&sim_lock);
    if (invalid) {
        *graph = NULL;
        return ret(cudaErrorStreamCaptureInvalidated);
    }
    struct CUgraph_st *g = calloc(1, sizeof(*g));
    if (!g)
        return ret(cudaErrorMemoryAllocation);
    g->nodes = s->captured_ops;
    *graph = g;
    return cudaSuccess;
}

SIM_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t h, enum cudaStreamCaptureMode mode)
{
    return cudaStreamBeginCapture(h, mode);
}
SIM_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t h, cudaGraph_t *graph)
{
    return cudaStreamEndCapture(h, graph);
}

SIM_API cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    free(g);
    return cudaSuccess;
}

SIM_API cudaError_t cudaStreamIsCapturing(cudaStream_t h, enum cudaStreamCaptureStatus *st)
{
    SIM_ENTER();
    if (is_legacy(h)) {
        pthread_mutex_lock(&sim_lock);
        int g = global_captures;
        pthread_mutex_unlock(&sim_lock);
        if (g)
            return ret(cudaErrorStreamCaptureImplicit);
        *st = cudaStreamCaptureStatusNone;
        return cudaSuccess;
    }
    struct CUstream_st *s = h;
    *st = !s->capturing        ? cudaStreamCaptureStatusNone
          : s->capture_invalid ? cudaStreamCaptureStatusInvalidated
                               : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}
SIM_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t h, enum cudaStreamCaptureStatus *st)
{
    return cudaStreamIsCapturing(h, st);
}
SIM_API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    enum cudaStreamCaptureMode old = thread_capture_mode;
    thread_capture_mode = *mode;
    *mode = old;
    return cudaSuccess;
}

/* ---- events ---- */

/* Events ever created, for tests that bound a tracer's use ($ICXSIM_EVENTS_OUT: written at exit,
 * "created N"). */
static _Atomic unsigned long events_created;

__attribute__((destructor)) static void events_report(void)
{
    const char *out = getenv("ICXSIM_EVENTS_OUT");
    FILE *f = out ? fopen(out, "w") : NULL;
    if (f) {
        fprintf(f, "created %lu\n", (unsigned long)atomic_load(&events_created));
        fclose(f);
    }
}

SIM_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    SIM_ENTER();
    struct sim_event *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return ret(cudaErrorMemoryAllocation);
    atomic_fetch_add(&events_created, 1);
    ev->dev = cur_dev;
    ev->flags = flags;
    *e = (cudaEvent_t)ev;
    return cudaSuccess;
}
SIM_API cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    return cudaEventCreateWithFlags(e, cudaEventDefault);
}
SIM_API cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    free(e); /* a pending record would dangle; callers synchronize first, as with the real one */
    return cudaSuccess;
}
SIM_API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t h)
{
    SIM_ENTER();
    struct sim_event *ev = (struct sim_event *)e;
    struct CUstream_st *s = stream_of(h);
    if (!ev || !s)
        return ret(cudaErrorInvalidResourceHandle);
    if (ev->dev != s->dev)
        return ret(cudaErrorInvalidResourceHandle);
    if (is_legacy(h)) {
        pthread_mutex_lock(&sim_lock);
        int g = global_captures;
        pthread_mutex_unlock(&sim_lock);
        if (g && thread_capture_mode != cudaStreamCaptureModeRelaxed) {
            invalidate_captures();
            return ret(cudaErrorStreamCaptureImplicit);
        }
    }
    struct sim_op *op = calloc(1, sizeof(*op));
    if (!op)
        return ret(cudaErrorMemoryAllocation);
    op->kind = OP_EVENT;
    op->ev = ev;
    return enqueue(s, op, s->dev, s->dev);
}
SIM_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t h)
{
    return cudaEventRecord(e, h);
}

static cudaError_t event_state(struct sim_event *ev)
{
    if (ev->captured)
        return cudaErrorStreamCaptureUnsupported;
    pthread_mutex_lock(&sim_lock);
    int reached = ev->done_gen >= ev->record_gen;
    uint64_t t = ev->time_v;
    pthread_mutex_unlock(&sim_lock);
    if (!reached || now_ns() < t)
        return cudaErrorNotReady;
    return cudaSuccess;
}

SIM_API cudaError_t cudaEventQuery(cudaEvent_t e)
{
    SIM_ENTER();
    cudaError_t c = check_unsafe();
    if (c)
        return ret(c);
    return ret(event_state((struct sim_event *)e));
}
SIM_API cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    SIM_ENTER();
    cudaError_t c = check_unsafe();
    if (c)
        return ret(c);
    struct sim_event *ev = (struct sim_event *)e;
    pthread_mutex_lock(&sim_lock);
    while (ev->done_gen < ev->record_gen)
        pthread_cond_wait(&sim_cond, &sim_lock);
    uint64_t t = ev->time_v;
    pthread_mutex_unlock(&sim_lock);
    sleep_until(t);
    return cudaSuccess;
}
SIM_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    SIM_ENTER();
    struct sim_event *ea = (struct sim_event *)a, *eb = (struct sim_event *)b;
    if (!ms || !ea || !eb || ea->dev != eb->dev || (ea->flags & cudaEventDisableTiming) ||
        (eb->flags & cudaEventDisableTiming))
        return ret(cudaErrorInvalidResourceHandle);
    if (!ea->record_gen || !eb->record_gen)
        return ret(cudaErrorInvalidResourceHandle);
    cudaError_t s1 = event_state(ea), s2 = event_state(eb);
    if (s1 != cudaSuccess)
        return ret(s1);
    if (s2 != cudaSuccess)
        return ret(s2);
    *ms = (float)(((double)eb->time_v - (double)ea->time_v) / 1e6);
    return cudaSuccess;
}
